//! The conversation's plain data: what the model reads and what the session log stores.
//!
//! These types are shared by the session log (which writes and replays them) and the agent runtime
//! (which sends them to providers). They carry no behaviour beyond small constructors, so both sides
//! can evolve without a trait in between.

use serde::{Deserialize, Deserializer, Serialize};

/// Who said it, written as the seed wrote it (`"user"`, `"assistant"`). Tool results travel as `user`
/// messages carrying a [`ToolResult`], as in the seed design and Anthropic's protocol. A log written by
/// another tool may name another role (`tool`, `system`): it is kept as written ([`Role::Other`]), so a
/// snapshot rewrites it byte for byte, and providers read it as the user's text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    User,
    Assistant,
    Other(String),
}

impl Role {
    pub fn as_str(&self) -> &str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Other(name) => name,
        }
    }
}

impl From<String> for Role {
    fn from(name: String) -> Role {
        match name.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            _ => Role::Other(name),
        }
    }
}

impl From<&str> for Role {
    fn from(name: &str) -> Role {
        Role::from(name.to_string())
    }
}

impl Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Role, D::Error> {
        String::deserialize(d).map(Role::from)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Role {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Role {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    /// Unix seconds when the message was made; 0 when unknown.
    #[serde(default)]
    pub ts: i64,
    /// The answer stopped before it was complete (the editor died while it streamed): `content` is
    /// what had been shown, restored from the log's checkpoints. Providers are told so in the next
    /// request. Written only when true, so every other message keeps its bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The model's thinking before this answer, block by block as the provider sent it (Anthropic's
    /// `thinking` with its `signature`, `redacted_thinking`; an OpenAI-compatible server's reasoning).
    /// Written only when there is some, so every other message keeps its bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<Thinking>,
    /// How long the model thought before it answered, in milliseconds (0: unknown, or no thinking).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thinking_ms: u64,
    /// On an assistant message: the model that wrote it (`:PseudoModel` may switch between turns). Empty when
    /// unknown (logs that predate it): the session's model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// On a user message: the `seq` of the `files` checkpoint taken just before it was sent (see
    /// [`crate::session::files`]), which a rewind to this message returns the files to. 0 (not written):
    /// none was taken.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turn: u64,
}

/// `skip_serializing_if` of a number written only when set: a message's here, and the same fields of its log line
/// ([`crate::session::entry::Entry`]).
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One block of a model's thinking, kept exactly as it came: Anthropic refuses a tool loop's last
/// assistant turn unless its thinking blocks come back unchanged, signature and all.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Thinking {
    /// `thinking` (Anthropic, with `signature`), `redacted_thinking` (Anthropic, encrypted in `data`)
    /// or `reasoning` (an OpenAI-compatible server's `reasoning_content`: shown and logged, never sent back).
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub thinking: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
}

impl Thinking {
    pub const THINKING: &'static str = "thinking";
    pub const REDACTED: &'static str = "redacted_thinking";
    pub const REASONING: &'static str = "reasoning";

    /// Anthropic's own block (thinking or redacted), which its API takes back.
    pub fn is_anthropic(&self) -> bool {
        self.kind == Self::THINKING || self.kind == Self::REDACTED
    }
}

/// A tool call the assistant asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Always a JSON value in memory and on disk; the seed's logs (and OpenAI's wire format) carry the
    /// arguments as a JSON *string*, which is parsed when it holds JSON and kept as a string otherwise.
    #[serde(default, deserialize_with = "arguments_from_object_or_string")]
    pub arguments: serde_json::Value,
}

/// The answer to one [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolResult {
    pub tool_call_id: String,
    /// The full output, or, when `spill` is set, a preview of it.
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
    /// Set when the full output lives in the session's `tool-results/` folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill: Option<SpillRef>,
    /// For `run_command`: whether it ran in the sandbox and what the user allowed (absent in older logs
    /// and for the other tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Box<CommandSandbox>>,
}

/// What the log records of a command: whether it ran in the sandbox, and what the user allowed
/// (the `sandbox` field of a tool result, doc/log_format.md).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CommandSandbox {
    /// It ran confined.
    pub sandboxed: bool,
    /// `namespaces+landlock`, `landlock`, or `none`.
    #[serde(default)]
    pub mechanism: String,
    /// It had the network.
    #[serde(default)]
    pub network: bool,
    /// What the user allowed for this one command, when asked: `no_sandbox` (it ran outside the
    /// sandbox), `network`, `unsandboxed_system` (no sandbox on this system).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// The model's reason for asking to leave the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// With `sandbox.network = { allow = … }`: the destinations (`host:port`) the command reached through
    /// the proxy, and those it was refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_hosts: Vec<String>,
}

/// Where a large tool result was spilled, and how to know it is still the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpillRef {
    /// Relative to the session directory, e.g. `tool-results/3f1c...e2.txt`.
    pub path: String,
    pub bytes: u64,
    /// Lower-case hex SHA-256 of the full output.
    pub sha256: String,
}

fn arguments_from_object_or_string<'de, D>(d: D) -> Result<serde_json::Value, D::Error>
where
    D: Deserializer<'de>,
{
    let v = serde_json::Value::deserialize(d)?;
    Ok(match v {
        serde_json::Value::String(s) => serde_json::from_str(&s).unwrap_or(serde_json::Value::String(s)),
        other => other,
    })
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Message { role: Role::User, content: text.into(), ts: now(), ..Default::default() }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Message { role: Role::Assistant, content: text.into(), ts: now(), ..Default::default() }
    }

    pub fn assistant_tool_calls(text: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Message { role: Role::Assistant, content: text.into(), tool_calls: calls, ts: now(), ..Default::default() }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>, is_error: bool) -> Self {
        Message {
            role: Role::User,
            tool_result: Some(ToolResult {
                tool_call_id: call_id.into(),
                content: content.into(),
                is_error,
                spill: None,
                sandbox: None,
            }),
            ts: now(),
            ..Default::default()
        }
    }

    /// An answer that stopped before it was complete, holding the text shown until then.
    pub fn assistant_interrupted(text: impl Into<String>, ts: i64) -> Self {
        Message { role: Role::Assistant, content: text.into(), ts, interrupted: true, ..Default::default() }
    }

    /// A user message that is typed text, not a tool result: what a session's title is made of.
    pub fn is_user_text(&self) -> bool {
        self.role == Role::User && self.tool_result.is_none()
    }
}

impl ToolResult {
    /// The same result with an empty `content` (the rest copied).
    pub fn clone_without_content(&self) -> ToolResult {
        ToolResult {
            tool_call_id: self.tool_call_id.clone(),
            content: String::new(),
            is_error: self.is_error,
            spill: self.spill.clone(),
            sandbox: self.sandbox.clone(),
        }
    }
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: serde_json::Value) -> Self {
        ToolCall { id: id.into(), name: name.into(), arguments }
    }
}

/// Unix seconds now.
pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}
