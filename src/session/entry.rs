//! One line of `conversation.jsonl`.
//!
//! The seed's fields (`type`, `reason`, `role`, `content`, `tool_calls`, `tool_result`, `ts`, `model`)
//! keep their names and meaning, so a log written by the seed loads here. We add two fields:
//!
//! - `messages` on a `replace` entry: the whole new snapshot on the same line. A line is either all on
//!   disk (it ends with `\n`) or it is a torn tail, so a crash anywhere in a replace leaves the loader
//!   with the whole old history or the whole new one, never a part. (The seed wrote the snapshot as
//!   separate lines after the marker; such logs still load the seed's way.)
//! - `count` on a `replace` entry: how many messages the snapshot holds, for `jq` and humans.
//! - `spill` inside `tool_result`: where a large output went (see [`super::spill`]).

use serde::{Deserialize, Serialize};

use crate::message::{Message, ToolCall, ToolResult};

pub const TYPE_MESSAGE: &str = "message";
pub const TYPE_REPLACE: &str = "replace";

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Entry {
    /// `message`, `replace`; missing means `message` (the seed omitted it).
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    #[serde(default)]
    pub ts: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<Message>>,
}

impl Entry {
    pub fn from_message(m: Message) -> Entry {
        Entry {
            kind: TYPE_MESSAGE.into(),
            role: m.role,
            content: m.content,
            tool_calls: m.tool_calls,
            tool_result: m.tool_result,
            ts: m.ts,
            ..Default::default()
        }
    }

    pub fn replace(reason: &str, messages: Vec<Message>, ts: i64) -> Entry {
        Entry {
            kind: TYPE_REPLACE.into(),
            reason: reason.into(),
            ts,
            count: Some(messages.len()),
            messages: Some(messages),
            ..Default::default()
        }
    }

    pub fn is_replace(&self) -> bool {
        self.kind == TYPE_REPLACE
    }

    pub fn is_message(&self) -> bool {
        self.kind.is_empty() || self.kind == TYPE_MESSAGE
    }

    /// The message this entry carries; `None` for replaces, unknown types and entries without a role
    /// (the seed skipped those too).
    pub fn into_message(self) -> Option<Message> {
        if !self.is_message() || self.role.is_empty() {
            return None;
        }
        Some(Message {
            role: self.role,
            content: self.content,
            tool_calls: self.tool_calls,
            tool_result: self.tool_result,
            ts: self.ts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_lines_parse_with_string_arguments_and_missing_type() {
        let line = r#"{"role":"assistant","tool_calls":[{"id":"c1","name":"read_file","arguments":"{\"path\":\"a.rs\"}"}],"ts":1,"model":"m"}"#;
        let e: Entry = serde_json::from_str(line).unwrap();
        assert!(e.is_message());
        let m = e.into_message().unwrap();
        assert_eq!(m.tool_calls[0].arguments["path"], "a.rs");
    }

    #[test]
    fn arguments_are_written_as_objects() {
        let m =
            Message::assistant_tool_calls("", vec![ToolCall::new("c1", "grep", serde_json::json!({"pattern": "x"}))]);
        let s = serde_json::to_string(&Entry::from_message(m)).unwrap();
        assert!(s.contains(r#""arguments":{"pattern":"x"}"#), "{s}");
    }
}
