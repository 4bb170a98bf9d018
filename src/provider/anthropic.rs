//! Anthropic's Messages API, streamed.
//!
//! `POST {base_url}/v1/messages` with `x-api-key` (from `$api_key_env`, default
//! `ANTHROPIC_API_KEY`) and `anthropic-version: 2023-06-01`; the answer arrives as server-sent events
//! (`message_start`, `content_block_start`/`_delta`/`_stop`, `message_delta`, `message_stop`, `ping`,
//! `error`). The conversation is sent as strictly alternating user/assistant messages in which every
//! `tool_use` is answered by a `tool_result` in the next user message (see [`super::turns`]).
//! The system prompt, the tools and the two newest user turns carry `cache_control` (prompt caching,
//! see [`MAX_CACHE_BREAKPOINTS`]); the usage comes back with the cache's share apart.

use std::collections::HashMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::http::{self as transport, Decoder, Emitter, Fail, HttpProvider, KeyHeader, WireFormat, protocol};
use super::sse::Event;
use super::turns::{Turn, turns};
use super::{ProviderConfig, Request, Response, Usage};
use crate::message::{Thinking, ToolCall};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
pub const API_VERSION: &str = "2023-06-01";

/// The Messages API as a [`WireFormat`].
#[derive(Debug)]
pub struct Messages;

/// The Anthropic provider.
pub type Anthropic = HttpProvider<Messages>;

impl WireFormat for Messages {
    type Decoder = MessagesStream;
    const NAME: &'static str = "anthropic";
    const DEFAULT_BASE_URL: &'static str = DEFAULT_BASE_URL;
    const DEFAULT_API_KEY_ENV: &'static str = DEFAULT_API_KEY_ENV;

    fn url(base: &str) -> String {
        // `https://api.anthropic.com/v1` is a common way of writing the base too.
        if base.ends_with("/v1") { format!("{base}/messages") } else { format!("{base}/v1/messages") }
    }

    fn new(_url: &str) -> Self {
        Messages
    }

    fn key_header(&self) -> KeyHeader {
        KeyHeader { name: HeaderName::from_static("x-api-key"), prefix: "" }
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        headers
    }

    /// The JSON body sent for `req`.
    fn body(&self, cfg: &ProviderConfig, max_tokens: u32, req: &Request) -> Value {
        let thinking_on = cfg.thinking.is_some();
        let messages: Vec<Value> = turns(&req.messages)
            .into_iter()
            .map(|turn| match turn {
                Turn::User { results, texts } => {
                    let results = results.into_iter().map(|r| {
                        json!({
                            "type": "tool_result",
                            "tool_use_id": r.id,
                            "content": if r.content.is_empty() { "(no output)" } else { r.content },
                            "is_error": r.is_error,
                        })
                    });
                    let texts = texts.into_iter().map(|t| json!({"type": "text", "text": t}));
                    json!({"role": "user", "content": results.chain(texts).collect::<Vec<_>>()})
                }
                Turn::Assistant { thinking, texts, calls } => {
                    // Sent back as they came while thinking is on (the API requires the blocks of a tool loop's
                    // last turn unchanged); left out when it is off, and another provider's reasoning never goes.
                    let thinking = thinking.into_iter().filter(|t| thinking_on && t.is_anthropic()).map(thinking_block);
                    let texts = texts.into_iter().map(|t| json!({"type": "text", "text": t}));
                    let calls = calls.into_iter().map(|c| {
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input_object(&c.arguments)})
                    });
                    json!({"role": "assistant", "content": thinking.chain(texts).chain(calls).collect::<Vec<_>>()})
                }
            })
            .collect();
        let mut messages = messages;
        let mut breakpoints = 0;
        let mut body = json!({
            "model": cfg.model,
            "max_tokens": max_tokens,
            "stream": true,
        });
        if let Some(t) = &cfg.thinking {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": t.budget_tokens});
            // The API wants room to answer after the thinking: `max_tokens` above the budget.
            if max_tokens <= t.budget_tokens {
                body["max_tokens"] = json!(t.budget_tokens + max_tokens);
            }
        }
        if !req.system.trim().is_empty() {
            body["system"] = json!([{"type": "text", "text": req.system, "cache_control": ephemeral()}]);
            breakpoints += 1;
        }
        if !req.tools.is_empty() {
            let mut tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
                .collect();
            // Caches every tool definition before it too.
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = ephemeral();
                breakpoints += 1;
            }
            body["tools"] = Value::Array(tools);
        }
        let newest = MAX_CACHE_BREAKPOINTS.saturating_sub(breakpoints).min(2);
        for m in messages.iter_mut().rev().filter(|m| m["role"] == "user").take(newest) {
            if let Some(last) = m["content"].as_array_mut().and_then(|blocks| blocks.last_mut()) {
                last["cache_control"] = ephemeral();
            }
        }
        body["messages"] = Value::Array(messages);
        body
    }
}

/// The most blocks one request may mark with `cache_control` (the API refuses a fifth).
pub const MAX_CACHE_BREAKPOINTS: usize = 4;

/// Prompt caching: the API caches the prompt's prefix up to each block marked so, and bills a later
/// request sharing that prefix as cache reads. Marked: the system prompt, the last tool (which covers
/// every tool before it) and the last two user turns: the newest writes this request's prefix, the one
/// before it was the newest of the previous request, whose cached prefix it reads. Every agent turn
/// re-sends the whole history, so a long or resumed session pays full price for its new part only.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// A thinking block as the API sent it: the same type, text, signature or encrypted data.
fn thinking_block(t: &Thinking) -> Value {
    if t.kind == Thinking::REDACTED {
        json!({"type": Thinking::REDACTED, "data": t.data})
    } else {
        json!({"type": Thinking::THINKING, "thinking": t.thinking, "signature": t.signature})
    }
}

/// The API takes objects only: `null` is `{}`, anything else (arguments logged as a non-JSON string
/// by older versions) is wrapped.
fn input_object(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => json!({}),
        other => json!({ "arguments": other }),
    }
}

/// A content block being streamed.
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
        start: Value,
    },
    /// `thinking` (its text and signature arrive as deltas) or `redacted_thinking` (whole at its start):
    /// the index in [`MessagesStream::thinking`].
    Thinking(usize),
    /// Block types this code does not know (citations...): skipped.
    Other,
}

/// Decodes one streamed Messages answer.
#[derive(Default)]
pub struct MessagesStream {
    text: String,
    blocks: HashMap<u64, Block>,
    calls: Vec<ToolCall>,
    thinking: Vec<Thinking>,
    stop_reason: String,
    usage: Usage,
    /// The first tool whose arguments were not JSON, and why; reported once the stop reason is known.
    bad_arguments: Option<(String, String)>,
}

impl MessagesStream {
    fn finish_block(&mut self, index: u64) {
        let Some(Block::Tool { id, name, json, start }) = self.blocks.remove(&index) else { return };
        let arguments = if json.trim().is_empty() {
            if start.is_object() { start } else { json!({}) }
        } else {
            match serde_json::from_str::<Value>(&json) {
                Ok(v) => v,
                Err(e) => {
                    self.bad_arguments.get_or_insert((name, e.to_string()));
                    return;
                }
            }
        };
        self.calls.push(ToolCall { id, name, arguments });
    }

    /// `usage` of `message_start` or `message_delta`: the counts it holds replace earlier ones (they are
    /// totals so far); a zero never replaces a count already seen.
    fn read_usage(&mut self, usage: &Value) {
        let u = &mut self.usage;
        for (key, slot) in [
            ("input_tokens", &mut u.input_tokens),
            ("output_tokens", &mut u.output_tokens),
            ("cache_read_input_tokens", &mut u.cache_read_tokens),
            ("cache_creation_input_tokens", &mut u.cache_write_tokens),
        ] {
            if let Some(n) = usage.get(key).and_then(Value::as_u64).filter(|&n| n > 0 || *slot == 0) {
                *slot = n;
            }
        }
    }

    fn response(&mut self) -> Result<Response, Fail> {
        let mut open: Vec<u64> = self.blocks.keys().copied().collect();
        open.sort_unstable();
        for index in open {
            self.finish_block(index);
        }
        if let Some((name, err)) = &self.bad_arguments {
            let cause = if self.stop_reason == "max_tokens" { " (the answer was cut off at max_tokens)" } else { "" };
            return Err(protocol(format!("the arguments of tool `{name}` are not valid JSON{cause}: {err}")));
        }
        Ok(Response {
            text: std::mem::take(&mut self.text),
            tool_calls: std::mem::take(&mut self.calls),
            thinking: std::mem::take(&mut self.thinking),
            stop_reason: std::mem::take(&mut self.stop_reason),
            usage: self.usage,
        })
    }
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn u64_at(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

impl Decoder for MessagesStream {
    fn event(&mut self, ev: &Event, out: &mut Emitter) -> Result<Option<Response>, Fail> {
        let v: Value = serde_json::from_str(&ev.data).map_err(|e| {
            protocol(format!(
                "the data of a `{}` event is not JSON ({e}): {}",
                ev.event,
                transport::snippet(&ev.data, 200)
            ))
        })?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(&ev.event);
        let index = || u64_at(&v, "/index").ok_or_else(|| protocol(format!("a `{kind}` event has no index")));
        match kind {
            "message_start" => {
                let usage = v.pointer("/message/usage").unwrap_or(&Value::Null);
                self.read_usage(usage);
            }
            "content_block_start" => {
                let index = index()?;
                let block = match str_at(&v, "/content_block/type") {
                    Some("text") => {
                        let text = str_at(&v, "/content_block/text").unwrap_or("");
                        out.text(text);
                        self.text.push_str(text);
                        Block::Text
                    }
                    Some("tool_use") => {
                        let (Some(id), Some(name)) =
                            (str_at(&v, "/content_block/id"), str_at(&v, "/content_block/name"))
                        else {
                            return Err(protocol("a tool_use block without id or name"));
                        };
                        out.tool_started(id, name);
                        let start = v.pointer("/content_block/input").cloned().unwrap_or(Value::Null);
                        Block::Tool { id: id.into(), name: name.into(), json: String::new(), start }
                    }
                    Some(kind @ (Thinking::THINKING | Thinking::REDACTED)) => {
                        let block = Thinking {
                            kind: kind.into(),
                            thinking: str_at(&v, "/content_block/thinking").unwrap_or("").into(),
                            signature: str_at(&v, "/content_block/signature").unwrap_or("").into(),
                            data: str_at(&v, "/content_block/data").unwrap_or("").into(),
                        };
                        out.thinking(&block.thinking);
                        self.thinking.push(block);
                        Block::Thinking(self.thinking.len() - 1)
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = index()?;
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(protocol(format!("a delta for content block {index}, which was not started")));
                };
                match (str_at(&v, "/delta/type"), block) {
                    (Some("text_delta"), Block::Text) => {
                        let text = str_at(&v, "/delta/text").unwrap_or("");
                        out.text(text);
                        self.text.push_str(text);
                    }
                    (Some("input_json_delta"), Block::Tool { json, .. }) => {
                        json.push_str(str_at(&v, "/delta/partial_json").unwrap_or(""));
                    }
                    (Some("thinking_delta"), Block::Thinking(i)) => {
                        let text = str_at(&v, "/delta/thinking").unwrap_or("");
                        out.thinking(text);
                        self.thinking[*i].thinking.push_str(text);
                    }
                    (Some("signature_delta"), Block::Thinking(i)) => {
                        self.thinking[*i].signature.push_str(str_at(&v, "/delta/signature").unwrap_or(""));
                    }
                    (Some(t @ ("text_delta" | "input_json_delta" | "thinking_delta" | "signature_delta")), _) => {
                        return Err(protocol(format!("a {t} for content block {index} of another type")));
                    }
                    _ => {} // citations, and delta types added later
                }
            }
            "content_block_stop" => self.finish_block(index()?),
            "message_delta" => {
                if let Some(reason) = str_at(&v, "/delta/stop_reason") {
                    reason.clone_into(&mut self.stop_reason);
                }
                // Cumulative counts; newer API versions repeat the input side here too.
                if let Some(usage) = v.get("usage") {
                    self.read_usage(usage);
                }
            }
            "message_stop" => return self.response().map(Some),
            "error" => {
                let err_type = str_at(&v, "/error/type").unwrap_or("error");
                let message = str_at(&v, "/error/message").unwrap_or("(no message)");
                return Err(transport::stream_error(err_type, message, out));
            }
            _ => {} // `ping`, and event types added later
        }
        Ok(None)
    }

    fn end(&mut self, _out: &mut Emitter) -> Result<Response, Fail> {
        Err(transport::cut("the stream ended before message_stop"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::provider::ProviderError;

    #[test]
    fn base_urls() {
        let make = |base: &str| {
            Anthropic::new(ProviderConfig { model: "m".into(), base_url: base.into(), ..Default::default() })
                .unwrap()
                .http
                .url
        };
        assert_eq!(make(""), "https://api.anthropic.com/v1/messages");
        assert_eq!(make("https://api.anthropic.com/"), "https://api.anthropic.com/v1/messages");
        assert_eq!(make("https://api.anthropic.com/v1/"), "https://api.anthropic.com/v1/messages");
        assert_eq!(make("http://proxy:8080/anthropic"), "http://proxy:8080/anthropic/v1/messages");
    }

    #[test]
    fn missing_model_is_a_config_error() {
        assert!(matches!(Anthropic::new(ProviderConfig::default()), Err(ProviderError::Config { .. })));
    }

    #[test]
    fn debug_shows_no_key() {
        let p = Anthropic::new(ProviderConfig { model: "m".into(), ..Default::default() }).unwrap();
        let s = format!("{p:?}");
        assert!(s.contains("ANTHROPIC_API_KEY") && s.contains("\"m\""), "{s}");
    }

    #[test]
    fn non_object_arguments_become_objects() {
        let p = Anthropic::new(ProviderConfig { model: "m".into(), ..Default::default() }).unwrap();
        let req = Request {
            messages: vec![
                Message::user("go"),
                Message::assistant_tool_calls(
                    "",
                    vec![ToolCall::new("a", "x", Value::Null), ToolCall::new("b", "y", json!("raw text"))],
                ),
                Message::tool_result("a", "", false),
                Message::tool_result("b", "B", true),
            ],
            ..Default::default()
        };
        let body = p.body(&req);
        assert!(body.get("thinking").is_none(), "thinking is off by default");
        assert_eq!(body["messages"][1]["content"][0]["input"], json!({}));
        assert_eq!(body["messages"][1]["content"][1]["input"], json!({"arguments": "raw text"}));
        assert_eq!(body["messages"][2]["content"][0]["content"], "(no output)");
        assert_eq!(body["messages"][2]["content"][1]["is_error"], true);
        assert_eq!(body["max_tokens"], 4096);
        assert!(body.get("system").is_none() && body.get("tools").is_none());
    }
}
