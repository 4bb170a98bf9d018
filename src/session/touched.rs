//! The files an agent wrote or edited in a session, from the history alone.

use std::collections::HashSet;

use crate::message::Message;

/// Paths given to `write_file` and `edit_file` calls whose result is not an error (a declined or failed
/// change touched nothing), in the order first touched, each once.
pub fn files_touched<'a>(history: impl IntoIterator<Item = &'a Message>) -> Vec<String> {
    let history: Vec<&Message> = history.into_iter().collect();
    let succeeded: HashSet<&str> = history
        .iter()
        .filter_map(|m| m.tool_result.as_ref())
        .filter(|r| !r.is_error)
        .map(|r| r.tool_call_id.as_str())
        .collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for call in history.iter().flat_map(|m| &m.tool_calls) {
        if !matches!(call.name.as_str(), "write_file" | "edit_file") || !succeeded.contains(call.id.as_str()) {
            continue;
        }
        if let Some(path) = call.arguments.get("path").and_then(|p| p.as_str())
            && seen.insert(path.to_string())
        {
            out.push(path.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use serde_json::json;

    #[test]
    fn only_changes_that_happened_count() {
        let h = vec![
            Message::assistant_tool_calls(
                "",
                vec![
                    ToolCall::new("1", "write_file", json!({"path": "a.txt", "content": "x"})),
                    ToolCall::new("2", "edit_file", json!({"path": "b.rs"})),
                    ToolCall::new("3", "read_file", json!({"path": "c.txt"})),
                ],
            ),
            Message::tool_result("1", "wrote", false),
            Message::tool_result("2", "declined by the user", true),
            Message::tool_result("3", "text", false),
            Message::assistant_tool_calls("", vec![ToolCall::new("4", "edit_file", json!({"path": "a.txt"}))]),
            Message::tool_result("4", "edited", false),
        ];
        assert_eq!(files_touched(&h), ["a.txt"]);
    }
}
