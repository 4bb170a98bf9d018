//! Recording a turn: the answer streaming ([`Turn`]): its text checkpointed, its thinking, each tool call with its
//! updates merged, written with its result when it completes or fails, and the final message.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::acp::terminal::Terminals;
use crate::agent::checkpoint::Checkpoints;
use crate::agent::rewind::FileCheckpoints;
use crate::agent::{Event, SessionLog};
use crate::conversation::{Conversation, Unsaved};
use crate::message::{Message, Thinking, ToolCall};
use crate::rewind::calls::Begun;

/// The end of a running call's output the editor is sent to draw (it shows the last lines; its result has all).
const LIVE_OUTPUT_BYTES: usize = 16 * 1024;

/// The answer streaming in a turn: the text since its last recorded message, its thinking, its tool calls under way.
pub(super) struct Turn {
    pub(super) events: mpsc::UnboundedSender<Event>,
    log: Arc<SessionLog>,
    every: Duration,
    model: String,
    text: String,
    pub(super) checkpoints: Checkpoints,
    thinking: String,
    thinking_since: Option<Instant>,
    thoughts: Vec<Thinking>,
    thinking_ms: u64,
    /// Tool calls under way, by id: the `tool_call` with every update merged in.
    pub(super) calls: HashMap<String, Value>,
    /// A write that failed while the turn ran.
    pub(super) unsaved: Option<Unsaved>,
    files: Arc<FileCheckpoints>,
    /// The calls under way that can change files, as the workspace's board of the chats' calls knows them.
    begun: HashMap<String, Begun>,
    /// The agent's terminals: a call that shows one has its output in its result.
    pub(super) terminals: Arc<Terminals>,
    /// The (call, terminal) pairs whose output is followed ([`super::pump`]'s `follow_terminal`).
    followed: HashSet<(String, String)>,
}

impl Turn {
    pub(super) fn new(
        events: mpsc::UnboundedSender<Event>,
        log: Arc<SessionLog>,
        every: Duration,
        model: &str,
        files: Arc<FileCheckpoints>,
    ) -> Turn {
        Turn {
            files,
            begun: HashMap::new(),
            checkpoints: Checkpoints::new(log.clone(), every),
            events,
            log,
            every,
            model: model.to_string(),
            text: String::new(),
            thinking: String::new(),
            thinking_since: None,
            thoughts: Vec::new(),
            thinking_ms: 0,
            calls: HashMap::new(),
            unsaved: None,
            terminals: Arc::default(),
            followed: HashSet::new(),
        }
    }

    pub(super) async fn text(&mut self, chunk: &str) {
        if chunk.is_empty() {
            return;
        }
        self.end_thinking();
        self.text.push_str(chunk);
        let _ = self.events.send(Event::TextDelta { text: chunk.to_string() });
        self.checkpoints.offer(&self.text, false).await;
    }

    pub(super) async fn offer_text(&mut self) {
        self.checkpoints.offer(&self.text, false).await;
    }

    pub(super) fn thought(&mut self, chunk: &str) {
        if chunk.is_empty() {
            return;
        }
        self.thinking_since.get_or_insert_with(Instant::now);
        self.thinking.push_str(chunk);
        let _ = self.events.send(Event::ThinkingDelta { text: chunk.to_string() });
    }

    fn end_thinking(&mut self) {
        let Some(since) = self.thinking_since.take() else { return };
        let ms = since.elapsed().as_millis() as u64;
        self.thinking_ms += ms;
        self.thoughts.push(Thinking {
            kind: Thinking::REASONING.into(),
            thinking: std::mem::take(&mut self.thinking),
            ..Default::default()
        });
        let _ = self.events.send(Event::ThinkingDone { ms });
    }

    pub(super) async fn tool_call(&mut self, update: Value, conv: &Conversation) -> Result<(), Unsaved> {
        self.end_thinking();
        // the text before a call is on disk before the call runs, as ours is
        self.checkpoints.offer(&self.text, true).await;
        let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
        let _ = self.events.send(Event::ToolCallStarted { id: id.clone(), name: call_name(&update) });
        let done = is_done(&update);
        if may_change_files(&update)
            && !self.begun.contains_key(&id)
            && let Some(begun) = self.files.begin_call(None)
        {
            self.begun.insert(id.clone(), begun);
        }
        self.calls.insert(id.clone(), update);
        if done {
            return self.record(&id, conv).await;
        }
        self.show(&id);
        Ok(())
    }

    /// A call under way, drawn as it stands (the editor updates it in place until its result is recorded): the
    /// end of its output only.
    pub(super) fn show(&self, id: &str) {
        let Some(call) = self.calls.get(id) else { return };
        let _ = self.events.send(Event::ToolCallLive {
            id: id.to_string(),
            name: call_name(call),
            arguments: call_arguments(call),
            status: call["status"].as_str().unwrap_or("pending").to_string(),
            output: tail_lines(self.result_of(call), LIVE_OUTPUT_BYTES),
        });
    }

    /// The terminals the calls under way show that are not followed yet, with the call showing each.
    pub(super) fn terminals_to_follow(&mut self) -> Vec<(String, tokio::sync::watch::Receiver<u64>)> {
        let mut out = Vec::new();
        for (id, call) in &self.calls {
            for item in call["content"].as_array().into_iter().flatten() {
                if let Some(term) = item["terminalId"].as_str().filter(|_| item["type"] == "terminal")
                    && self.followed.insert((id.clone(), term.to_string()))
                    && let Some(writes) = self.terminals.follow(term)
                {
                    out.push((id.clone(), writes));
                }
            }
        }
        out
    }

    /// A call's result as text ([`result_text`]), a terminal it shows as the terminal's command, output and exit.
    fn result_of(&self, call: &Value) -> String {
        let mut content = result_text(call);
        for item in call["content"].as_array().into_iter().flatten() {
            if let Some(id) = item["terminalId"].as_str().filter(|_| item["type"] == "terminal")
                && let Some(summary) = self.terminals.summary(id)
            {
                content = content.replace(&format!("[terminal {id}]"), &summary);
            }
        }
        content
    }

    pub(super) async fn tool_update(&mut self, update: Value, conv: &Conversation) -> Result<(), Unsaved> {
        let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
        let call = self.calls.entry(id.clone()).or_insert_with(|| json!({ "toolCallId": id }));
        if let (Some(call), Some(fields)) = (call.as_object_mut(), update.as_object()) {
            for (k, v) in fields {
                if k != "sessionUpdate" && !v.is_null() {
                    call.insert(k.clone(), v.clone());
                }
            }
        }
        if is_done(&update) {
            return self.record(&id, conv).await;
        }
        self.show(&id);
        Ok(())
    }

    /// A call that completed or failed: the text before it with the call, then its result.
    async fn record(&mut self, id: &str, conv: &Conversation) -> Result<(), Unsaved> {
        let Some(call) = self.calls.remove(id) else { return Ok(()) };
        self.checkpoints.settle().await;
        let name = call_name(&call);
        let arguments = call_arguments(&call);
        let text = std::mem::take(&mut self.text);
        let calls = vec![ToolCall::new(id, name.clone(), arguments)];
        let message = Message {
            thinking: std::mem::take(&mut self.thoughts),
            thinking_ms: std::mem::take(&mut self.thinking_ms),
            model: self.model.clone(),
            ..Message::assistant_tool_calls(text.clone(), calls.clone())
        };
        self.checkpoints = Checkpoints::new(self.log.clone(), self.every);
        conv.add(message)?;
        let _ = self.events.send(Event::AssistantRecorded { text, tool_calls: calls });
        let is_error = call["status"].as_str() == Some("failed");
        let content = self.result_of(&call);
        // what the call did to the files (the agent's own tools and shell write them: the checkpoint scans the
        // workspace), before its result and in the same write
        let begun = self.begun.remove(id);
        let checkpoint = match may_change_files(&call) {
            true => self.files.after_call(id, None, begun).await,
            false => None,
        };
        let recorded = conv.add(Message::tool_result(id, content.clone(), is_error));
        if let Some(record) = checkpoint {
            self.files.settle_checkpoint(record, recorded.is_ok());
        }
        recorded?;
        let _ = self.events.send(Event::tool_result(id.to_string(), name, &content, is_error));
        Ok(())
    }

    /// The turn is over: the answer's last text becomes its final message (interrupted when the turn stopped early).
    pub(super) async fn finish(mut self, conv: &Conversation, stopped_early: bool) -> Result<(), Unsaved> {
        self.end_thinking();
        self.checkpoints.settle().await;
        if let Some(e) = self.unsaved.take() {
            return Err(e);
        }
        if self.text.trim().is_empty() && self.thoughts.is_empty() {
            return Ok(());
        }
        let text = std::mem::take(&mut self.text);
        let message = Message {
            thinking: std::mem::take(&mut self.thoughts),
            thinking_ms: self.thinking_ms,
            model: self.model.clone(),
            interrupted: stopped_early && !text.trim().is_empty(),
            ..Message::assistant(text.clone())
        };
        conv.add(message)?;
        let _ = self.events.send(Event::AssistantRecorded { text, tool_calls: Vec::new() });
        Ok(())
    }
}

/// The end of `text`, at most about `max` bytes of it, from the start of a line (a line longer than that: cut at a
/// character's start).
fn tail_lines(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let tail = &text[cut..];
    match tail.find('\n') {
        Some(nl) if nl + 1 < tail.len() => tail[nl + 1..].to_string(),
        _ => tail.to_string(),
    }
}

/// Whether a call can change the workspace's files: any but the kinds that only look (ACP's `ToolKind`); a call of
/// no kind may.
fn may_change_files(call: &Value) -> bool {
    !matches!(call["kind"].as_str(), Some("read" | "search" | "think" | "fetch" | "switch_mode"))
}

/// A call's arguments in our log: what the agent said it does (its title, kind, input and the places it touches).
fn call_arguments(call: &Value) -> Value {
    json!({ "title": call["title"], "kind": call["kind"], "input": call["rawInput"], "locations": call["locations"] })
}

fn is_done(update: &Value) -> bool {
    matches!(update["status"].as_str(), Some("completed") | Some("failed"))
}

/// A call's name in our log: the agent's kind of tool (`execute`, `edit`, `read`...).
fn call_name(call: &Value) -> String {
    call["kind"].as_str().filter(|k| !k.is_empty()).unwrap_or("other").to_string()
}

/// The text of a content block (`{"type":"text","text":..}`; other kinds by their type).
pub(super) fn content_text(block: &Value) -> String {
    match block["type"].as_str() {
        Some("text") => block["text"].as_str().unwrap_or_default().to_string(),
        Some("resource_link") => format!("[{}]", block["uri"].as_str().unwrap_or_default()),
        Some("resource") => block["resource"]["text"].as_str().unwrap_or_default().to_string(),
        Some(other) => format!("[{other}]"),
        None => String::new(),
    }
}

/// A call's result as text: its content (text, diffs as unified diffs, terminals by id), else its raw output.
pub(super) fn result_text(call: &Value) -> String {
    let mut parts = Vec::new();
    for item in call["content"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("content") => parts.push(content_text(&item["content"])),
            Some("diff") => {
                let path = item["path"].as_str().unwrap_or_default();
                let old = item["oldText"].as_str().unwrap_or_default();
                let new = item["newText"].as_str().unwrap_or_default();
                let diff = similar::TextDiff::from_lines(old, new);
                parts.push(diff.unified_diff().context_radius(3).header(path, path).to_string());
            }
            Some("terminal") => parts.push(format!("[terminal {}]", item["terminalId"].as_str().unwrap_or_default())),
            _ => {}
        }
    }
    if parts.iter().all(|p| p.trim().is_empty()) {
        match &call["rawOutput"] {
            Value::Null => {}
            Value::String(s) => parts.push(s.clone()),
            v => parts.push(v.to_string()),
        }
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_result_is_its_content_with_diffs_as_unified_diffs_else_its_raw_output() {
        let call = json!({ "content": [
            { "type": "content", "content": { "type": "text", "text": "wrote it" } },
            { "type": "diff", "path": "a.txt", "oldText": "one\n", "newText": "two\n" },
        ]});
        let text = result_text(&call);
        assert!(text.starts_with("wrote it\n--- a.txt\n+++ a.txt") && text.contains("-one\n+two"), "{text}");
        assert_eq!(result_text(&json!({ "rawOutput": "done" })), "done");
        assert_eq!(result_text(&json!({ "rawOutput": { "code": 0 } })), r#"{"code":0}"#);
    }

    #[test]
    fn a_running_calls_output_is_sent_from_a_line_start_near_its_end() {
        assert_eq!(tail_lines("one\ntwo\n".into(), 64), "one\ntwo\n");
        assert_eq!(tail_lines("one\ntwo\nthree\n".into(), 8), "three\n");
        // one long line: cut at a character's start
        assert_eq!(tail_lines("ééé".into(), 3), "é");
    }
}
