//! Model providers: one request in, a stream of deltas out, the finished answer at the end.
//!
//! A trait, because there are several real implementations (`anthropic`, `openai`, `demo`) and the
//! tests add scripted ones. The runner owns cancellation: it drops the future returned by
//! [`Provider::stream`] (inside `tokio::select!`), which closes the HTTP stream.

pub mod anthropic;
pub mod demo;
pub(crate) mod http;
pub mod openai;
pub mod sse;
pub(crate) mod turns;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use crate::message::{Message, Thinking, ToolCall};

/// A boxed future, so the trait stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool the model may call, described as the providers want it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: serde_json::Value,
}

/// What is sent to the model.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub system: String,
    /// The conversation in the log's own shape; each provider maps it to its wire format.
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
}

/// Streamed while the answer arrives, for the UI.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    /// A piece of the model's thinking (Anthropic's `thinking_delta`, an OpenAI-compatible server's
    /// `reasoning_content`): shown apart from the answer.
    ThinkingDelta(String),
    /// A tool call began streaming (its arguments follow, not reported piecemeal).
    ToolCallStarted {
        id: String,
        name: String,
    },
    /// A retry is about to happen after a transient failure.
    Retrying {
        attempt: u32,
        wait: Duration,
        reason: String,
    },
}

/// The complete answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// The thinking blocks before the answer, as they came (see [`Thinking`]).
    pub thinking: Vec<Thinking>,
    /// The provider's own stop reason (`end_turn`, `tool_use`, `stop`, `tool_calls`, `max_tokens`...).
    pub stop_reason: String,
    /// What the provider reported the answer cost in tokens (zero when it reported nothing).
    pub usage: Usage,
}

pub use crate::usage::Usage;

/// Why a request failed. Each says what to do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// 401/403: the key is missing or wrong. Names the environment variable. Never retried.
    #[error("authentication failed (HTTP {status}): check the API key in ${env_var}: {message}")]
    Auth { status: u16, env_var: String, message: String },
    /// 429 or 5xx after the bounded retries ran out.
    #[error("the provider is unavailable (HTTP {status}) after {attempts} attempts: {message}")]
    Unavailable { status: u16, attempts: u32, message: String },
    /// Another HTTP status (400 and friends): the request itself was refused.
    #[error("the provider refused the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// Could not connect, or the connection failed before an answer.
    #[error("cannot reach {url}: {message}")]
    Connect { url: String, message: String },
    /// The stream ended or broke before the answer was complete.
    #[error("the answer stream broke off: {message}")]
    StreamCut { message: String },
    /// The stream was not the wire format promised (malformed SSE, bad JSON, tool arguments that
    /// are not JSON).
    #[error("the provider sent something unexpected: {message}")]
    Protocol { message: String },
    /// No answer within the configured time.
    #[error("no answer from the provider within {}s", after.as_secs())]
    Timeout { after: Duration },
    /// The configuration cannot work (unknown provider, missing model...).
    #[error("provider configuration: {message}")]
    Config { message: String },
}

/// How a provider is reached. Mirrors the `provider` table of the Lua config (unknown keys refused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// `anthropic`, `openai` or `demo`.
    pub name: String,
    pub model: String,
    /// As the vendors' SDKs take it: `https://api.anthropic.com`, `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`...
    pub base_url: String,
    /// The environment variable holding the key (never the key itself: it is never logged).
    pub api_key_env: String,
    /// Per-request time limits.
    pub connect_timeout_secs: u64,
    /// Longest silence allowed while an answer streams.
    pub idle_timeout_secs: u64,
    /// Retries of 429/5xx/connection failures before giving up.
    pub max_retries: u32,
    /// First backoff; doubles each retry (a `retry-after` header wins).
    pub retry_base_ms: u64,
    pub max_tokens: u32,
    /// Anthropic's extended thinking; off when absent.
    pub thinking: Option<ThinkingConfig>,
    /// OpenAI-compatible reasoning effort (`low`, `medium`, `high`), sent as `reasoning_effort`; empty: not sent.
    pub reasoning_effort: String,
}

/// `provider.thinking`: how many tokens the model may think before it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThinkingConfig {
    /// At least [`MIN_THINKING_BUDGET`] (the API's minimum); the request's `max_tokens` is raised above it.
    pub budget_tokens: u32,
}

/// The smallest thinking budget Anthropic's API takes.
pub const MIN_THINKING_BUDGET: u32 = 1024;

impl ProviderConfig {
    /// The configuration's own mistakes, named (called where a provider is built).
    pub fn check(&self) -> Result<(), ProviderError> {
        if let Some(t) = &self.thinking
            && t.budget_tokens < MIN_THINKING_BUDGET
        {
            return Err(ProviderError::Config {
                message: format!(
                    "provider.thinking.budget_tokens must be at least {MIN_THINKING_BUDGET} (got {})",
                    t.budget_tokens
                ),
            });
        }
        if !matches!(self.reasoning_effort.as_str(), "" | "low" | "medium" | "high") {
            return Err(ProviderError::Config {
                message: format!(
                    "provider.reasoning_effort must be \"low\", \"medium\" or \"high\" (got {:?})",
                    self.reasoning_effort
                ),
            });
        }
        Ok(())
    }
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            name: "demo".into(),
            model: String::new(),
            base_url: String::new(),
            api_key_env: String::new(),
            connect_timeout_secs: 10,
            idle_timeout_secs: 120,
            max_retries: 3,
            retry_base_ms: 500,
            max_tokens: 4096,
            thinking: None,
            reasoning_effort: String::new(),
        }
    }
}

/// A model API.
pub trait Provider: Send + Sync {
    /// `anthropic`, `openai`, `demo`...
    fn name(&self) -> &str;
    fn model(&self) -> &str;
    /// Sends the request and streams the answer: deltas go to `events` as they arrive, the complete
    /// answer is the result. Retries transient failures itself (reporting them as
    /// [`StreamEvent::Retrying`]) but never once any part of an answer was streamed.
    fn stream<'a>(
        &'a self,
        req: &'a Request,
        events: UnboundedSender<StreamEvent>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>>;
}

/// Builds the provider a config names.
pub fn from_config(cfg: &ProviderConfig) -> Result<Box<dyn Provider>, ProviderError> {
    match cfg.name.as_str() {
        "anthropic" => Ok(Box::new(anthropic::Anthropic::new(cfg.clone())?)),
        "openai" => Ok(Box::new(openai::OpenAi::new(cfg.clone())?)),
        "demo" | "" => Ok(Box::new(demo::Demo::default())),
        other => Err(ProviderError::Config {
            message: format!("unknown provider {other:?}: use \"anthropic\", \"openai\" or \"demo\""),
        }),
    }
}
