//! What of a history reaches the screen: bounded copies of messages for the picker's preview and
//! the agent buffer, made on a background thread so the editor's main loop only ever converts and
//! draws a bounded amount.
//!
//! A message whose text (or tool output) is longer than the cap is cut at a character boundary, and
//! says by how much (`cut_bytes`): the agent buffer shows "… N more bytes not shown" in its place.
//! The model still reads the whole message; only the screen is spared a 50 MiB line. The Lua
//! renderer applies the same cap to live messages (`lua/pseudoclaude/transcript.lua`,
//! `MAX_DISPLAY_BYTES`), so a live chat and its restore read the same.

use std::collections::HashMap;

use serde::Serialize;

use crate::message::{Message, ToolResult};

/// Bytes of one message's text (or one tool output) the agent buffer shows.
/// (Neovim lays out a long wrapped line, with 'linebreak', in time proportional to its length: a
/// 256 KiB line costs about 30 ms to insert and put the cursor on; 32 KiB about 2 ms.)
pub const MAX_DISPLAY_BYTES: usize = 32 * 1024;

/// A message as the screen gets it.
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    #[serde(flatten)]
    pub message: Message,
    /// Bytes cut from `content` (or from the tool result's content).
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_bytes: usize,
    /// A cut tool output's lines, counted on the whole of it (`  ✓ run: … (200000 lines)`): the screen gets the
    /// count, not the megabyte it would count them in. 0 when nothing was cut.
    #[serde(skip_serializing_if = "is_zero")]
    pub lines: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A run of consecutive messages `[from, from + messages.len())` of a history, 0-based, with what a
/// renderer needs from before it: the message just before (for the speaker's header; its text
/// dropped) and the names of tool calls made earlier whose results are in the run.
#[derive(Debug, Clone, Serialize)]
pub struct Slice {
    pub from: usize,
    /// Messages in the whole history.
    pub total: usize,
    pub messages: Vec<Shown>,
    pub prev: Option<Message>,
    pub names: HashMap<String, String>,
}

/// `m` with its text cut to `max` bytes (copying only what is kept).
pub fn shown(m: &Message, max: usize) -> Shown {
    let (content, mut cut_bytes) = cut(&m.content, max);
    let mut lines = 0;
    let tool_result = m.tool_result.as_ref().map(|t| {
        let (content, n, whole) = shown_output(&t.content, max);
        lines = whole;
        cut_bytes += n;
        crate::message::ToolResult { content, ..t.clone_without_content() }
    });
    let message = Message {
        role: m.role.clone(),
        content,
        tool_calls: m.tool_calls.clone(),
        tool_result,
        ts: m.ts,
        interrupted: m.interrupted,
        // The screen shows the thinking's text, never its signature or encrypted data (kilobytes of base64).
        thinking: m
            .thinking
            .iter()
            .map(|t| crate::message::Thinking {
                kind: t.kind.clone(),
                thinking: cut(&t.thinking, max).0,
                ..Default::default()
            })
            .collect(),
        thinking_ms: m.thinking_ms,
        model: m.model.clone(),
        turn: m.turn,
    };
    Shown { message, cut_bytes, lines }
}

/// A tool output as the screen gets it: its first `max` bytes, the bytes cut, and (when cut) its lines counted on
/// the whole, as [`Shown`] has them.
pub fn shown_output(content: &str, max: usize) -> (String, usize, usize) {
    let (shown, cut_bytes) = cut(content, max);
    let lines = if cut_bytes > 0 { line_count(content) } else { 0 };
    (shown, cut_bytes, lines)
}

/// Lines of a tool output as the screen counts them (`transcript.lua`'s `count_lines`): a final newline ends the
/// last line, it does not start another.
pub fn line_count(s: &str) -> usize {
    if s.is_empty() {
        return 0;
    }
    let n = memchr::memchr_iter(b'\n', s.as_bytes()).count();
    if s.ends_with('\n') { n } else { n + 1 }
}

/// The first `max` bytes of `s` (at a character boundary), and how many bytes were left out.
fn cut(s: &str, max: usize) -> (String, usize) {
    if s.len() <= max {
        return (s.to_string(), 0);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (s[..end].to_string(), s.len() - end)
}

/// Messages `[from, to)` of `history`, each cut to `max_bytes`.
pub fn slice(history: &[&Message], from: usize, to: usize, max_bytes: usize) -> Slice {
    let to = to.min(history.len());
    let from = from.min(to);
    let messages = history[from..to].iter().map(|m| shown(m, max_bytes)).collect();
    let prev = from.checked_sub(1).map(|i| {
        // Only who spoke and how matter to the renderer: the texts stay behind.
        let p = history[i];
        Message {
            role: p.role.clone(),
            ts: p.ts,
            tool_result: p.tool_result.as_ref().map(|t| ToolResult {
                tool_call_id: t.tool_call_id.clone(),
                is_error: t.is_error,
                ..Default::default()
            }),
            ..Default::default()
        }
    });
    let wanted: Vec<&str> =
        history[from..to].iter().filter_map(|m| m.tool_result.as_ref()).map(|t| t.tool_call_id.as_str()).collect();
    let mut names = HashMap::new();
    if !wanted.is_empty() {
        for m in history[..from].iter().rev().take(64) {
            for c in &m.tool_calls {
                if wanted.contains(&c.id.as_str()) {
                    names.insert(c.id.clone(), c.name.clone());
                }
            }
        }
    }
    Slice { from, total: history.len(), messages, prev, names }
}

/// The end of `history` that fits a preview: at most `max_messages` messages and about `budget`
/// bytes of text, each message cut to `max_bytes`.
pub fn tail(history: &[Message], max_messages: usize, budget: usize, max_bytes: usize) -> Slice {
    let refs: Vec<&Message> = history.iter().collect();
    slice_back(&refs, refs.len(), max_messages, budget, max_bytes)
}

/// The messages just before `to` that fit at most `max_messages` messages and about `budget` bytes
/// of text (at least one message), each cut to `max_bytes`: the agent buffer draws a restored
/// history from its end backwards, one such slice per main-loop step.
pub fn slice_back(history: &[&Message], to: usize, max_messages: usize, budget: usize, max_bytes: usize) -> Slice {
    let to = to.min(history.len());
    let mut from = to;
    let mut used = 0usize;
    while from > 0 && to - from < max_messages {
        let m = history[from - 1];
        let size =
            m.content.len().min(max_bytes) + m.tool_result.as_ref().map_or(0, |t| t.content.len().min(max_bytes));
        if used > 0 && used + size > budget {
            break;
        }
        used += size;
        from -= 1;
    }
    slice(history, from, to, max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn a_cut_tool_output_keeps_its_whole_line_count() {
        let out: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        let r = shown(&Message::tool_result("c1", out.as_str(), false), 100);
        assert_eq!((r.lines, r.cut_bytes), (1000, out.len() - 100));
        assert_eq!(shown_output(&out, 100), (out[..100].to_string(), out.len() - 100, 1000));
        // nothing cut: the screen counts the lines itself
        assert_eq!(shown(&Message::tool_result("c1", "a\nb", false), 100).lines, 0);
        assert_eq!((line_count(""), line_count("a"), line_count("a\n"), line_count("a\nb")), (0, 1, 1, 2));
    }

    #[test]
    fn long_texts_are_cut_at_a_char_boundary_and_say_by_how_much() {
        let m = Message::assistant("é".repeat(10)); // 20 bytes
        let s = shown(&m, 5);
        assert_eq!(s.message.content, "éé");
        assert_eq!(s.cut_bytes, 16);
        let r = shown(&Message::tool_result("c1", "x".repeat(9), false), 4);
        assert_eq!(r.message.tool_result.as_ref().map(|t| t.content.as_str()), Some("xxxx"));
        assert_eq!(r.cut_bytes, 5);
        assert_eq!(shown(&Message::user("short"), 5).cut_bytes, 0);
    }

    #[test]
    fn a_slice_carries_the_previous_speaker_and_earlier_call_names() {
        let h = [
            Message::user("read it"),
            Message::assistant_tool_calls("", vec![ToolCall::new("c1", "read_file", serde_json::json!({}))]),
            Message::tool_result("c1", "body", false),
            Message::assistant("done"),
        ];
        let refs: Vec<&Message> = h.iter().collect();
        let s = slice(&refs, 2, 4, 100);
        assert_eq!((s.from, s.total, s.messages.len()), (2, 4, 2));
        assert_eq!(s.prev.as_ref().map(|p| p.role.as_str()), Some("assistant"));
        assert_eq!(s.names.get("c1").map(String::as_str), Some("read_file"));
        assert!(slice(&refs, 0, 2, 100).prev.is_none());
    }

    #[test]
    fn a_tail_keeps_the_newest_messages_within_its_budget() {
        let h: Vec<Message> = (0..10).map(|i| Message::user(format!("{i:03}"))).collect();
        let t = tail(&h, 4, 1000, 100);
        assert_eq!(t.from, 6);
        assert_eq!(t.messages.last().map(|m| m.message.content.as_str()), Some("009"));
        let t = tail(&h, 100, 7, 100);
        assert_eq!(t.messages.len(), 2);
        // one huge message still shows, cut
        let big = vec![Message::user("x".repeat(1000))];
        let t = tail(&big, 10, 10, 50);
        assert_eq!((t.messages.len(), t.messages[0].cut_bytes), (1, 950));
    }
}
