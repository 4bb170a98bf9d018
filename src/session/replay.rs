//! The fold from log entries to the history a resume restores.
//!
//! The loader runs it keeping the messages; the list runs it keeping only counts, and can save its
//! [`State`] to resume the fold later from a byte offset. Because both use this one fold, the list's
//! counts are the resume's counts by construction.
//!
//! Recovery rules, each for a failure seen in the field:
//! - `replace` starts over: the lines before it stay in the file for audit but leave the history.
//! - An assistant message with tool calls is held back until every one of its calls has a result;
//!   then the call and its results are committed together. So after a bad line in the middle (a lost
//!   result) or a crash between a call and its result, no provider ever sees a call without its answer.
//!   Nothing is invented: the incomplete exchange is dropped, never completed with a fake result.
//! - A held-back exchange interrupted by any other message (the log went on after a crash and a resume)
//!   is dropped; at the end of the log it is trimmed, as the seed's dangling-tool-call trim does.
//! - A tool result that answers no open call (its call was on a lost line, or it is a duplicate) is
//!   dropped: providers reject orphan results.
//! - A line whose strings hold bytes that are not UTF-8 (one bad byte once cost a whole exchange, and
//!   with it the session's title and model) is decoded with U+FFFD in their place and restored; it is
//!   counted as `repaired`, apart from the lines that are not entries at all. Only a line that fails to
//!   parse pays for this: valid lines are parsed once, as before.

use serde::{Deserialize, Serialize};

use super::entry::Entry;
use crate::message::Message;

/// What a replay has seen so far, without the messages themselves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// First line of the first typed user message, at most [`TITLE_MAX_CHARS`] characters.
    pub title: String,
    /// The first model named in the log.
    pub model: String,
    /// Messages committed to the history (a held-back exchange is not counted until complete).
    pub messages: usize,
    /// Valid entry lines of any type: the physical length of the log.
    pub entries: usize,
    /// Newest `ts` of any message seen, unix seconds; 0 when none had one.
    pub last_message: i64,
    pub bad_lines: usize,
    /// Lines restored after their invalid UTF-8 was replaced with U+FFFD.
    #[serde(default)]
    pub repaired: usize,
    /// Messages left out by the rules above in the middle of the log (orphans, incomplete exchanges).
    pub dropped: usize,
    pub pending: Option<Pending>,
}

/// An assistant message whose tool calls are not all answered yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub ids: Vec<String>,
    pub answered: Vec<bool>,
    /// The assistant message plus the results received so far.
    pub len: usize,
}

pub const TITLE_MAX_CHARS: usize = 80;

/// The fold. `Replay::keeping()` for the loader, `Replay::resume_counting(state)` for the list.
#[derive(Debug, Default)]
pub struct Replay {
    pub state: State,
    kept: Option<Kept>,
    /// 1-based line numbers of lines that did not parse (loader only reports them).
    pub bad_line_numbers: Vec<u64>,
    /// 1-based line numbers of repaired lines (loader only).
    pub repaired_line_numbers: Vec<u64>,
}

#[derive(Debug, Default)]
struct Kept {
    committed: Vec<Message>,
    pending: Vec<Message>,
}

/// The end of a replay.
#[derive(Debug, Default)]
pub struct Finished {
    pub state: State,
    pub messages: Vec<Message>,
    /// True when a dangling exchange at the end was cut off.
    pub trimmed: bool,
    pub bad_line_numbers: Vec<u64>,
    pub repaired_line_numbers: Vec<u64>,
}

impl Replay {
    pub fn keeping() -> Replay {
        Replay { kept: Some(Kept::default()), ..Default::default() }
    }

    /// A replay that keeps only counts, continuing from `state` (`State::default()` to start).
    pub fn resume_counting(state: State) -> Replay {
        Replay { state, ..Default::default() }
    }

    /// Feeds one complete line (without its `\n`). Blank lines are ignored.
    pub fn feed_line(&mut self, line: &[u8], line_no: u64) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match serde_json::from_slice::<Entry>(line) {
            Ok(entry) => self.feed_entry(entry),
            Err(_) => match parse_lossy(line) {
                Some(entry) => self.repaired_entry(entry, line_no),
                None => self.bad_line(line_no),
            },
        }
    }

    /// Feeds an entry that parsed only once its invalid UTF-8 was replaced.
    pub fn repaired_entry(&mut self, entry: Entry, line_no: u64) {
        self.state.repaired += 1;
        if self.kept.is_some() {
            self.repaired_line_numbers.push(line_no);
        }
        self.feed_entry(entry);
    }

    /// Counts a line that is not a valid entry.
    pub fn bad_line(&mut self, line_no: u64) {
        self.state.bad_lines += 1;
        if self.kept.is_some() {
            self.bad_line_numbers.push(line_no);
        }
    }

    pub fn feed_entry(&mut self, entry: Entry) {
        self.state.entries += 1;
        if self.state.model.is_empty() && !entry.model.is_empty() {
            self.state.model = entry.model.clone();
        }
        if entry.is_replace() {
            self.state.messages = 0;
            self.state.pending = None;
            if let Some(k) = &mut self.kept {
                k.committed.clear();
                k.pending.clear();
            }
            for m in entry.messages.into_iter().flatten() {
                self.feed_message(m);
            }
        } else if let Some(m) = entry.into_message() {
            self.feed_message(m);
        }
    }

    fn feed_message(&mut self, m: Message) {
        let s = &mut self.state;
        s.last_message = s.last_message.max(m.ts);
        if s.title.is_empty() && m.is_user_text() {
            s.title = title_of(&m.content);
        }
        if let Some(result) = &m.tool_result {
            let slot = s
                .pending
                .as_ref()
                .and_then(|p| p.ids.iter().zip(&p.answered).position(|(id, done)| !done && *id == result.tool_call_id));
            let Some(i) = slot else {
                s.dropped += 1; // orphan or duplicate
                return;
            };
            let p = s.pending.as_mut().expect("slot implies pending");
            p.answered[i] = true;
            p.len += 1;
            if let Some(k) = &mut self.kept {
                k.pending.push(m);
            }
            if p.answered.iter().all(|a| *a) {
                s.messages += p.len;
                s.pending = None;
                if let Some(k) = &mut self.kept {
                    k.committed.append(&mut k.pending);
                }
            }
            return;
        }
        self.drop_pending();
        let s = &mut self.state;
        if !m.tool_calls.is_empty() {
            s.pending = Some(Pending {
                ids: m.tool_calls.iter().map(|c| c.id.clone()).collect(),
                answered: vec![false; m.tool_calls.len()],
                len: 1,
            });
            if let Some(k) = &mut self.kept {
                k.pending.push(m);
            }
        } else {
            s.messages += 1;
            if let Some(k) = &mut self.kept {
                k.committed.push(m);
            }
        }
    }

    fn drop_pending(&mut self) {
        if let Some(p) = self.state.pending.take() {
            self.state.dropped += p.len;
            if let Some(k) = &mut self.kept {
                k.pending.clear();
            }
        }
    }

    pub fn finish(mut self) -> Finished {
        let trimmed = self.state.pending.take().is_some();
        Finished {
            state: self.state,
            messages: self.kept.map(|k| k.committed).unwrap_or_default(),
            trimmed,
            bad_line_numbers: self.bad_line_numbers,
            repaired_line_numbers: self.repaired_line_numbers,
        }
    }
}

/// A line that failed to parse, parsed again with invalid UTF-8 read as U+FFFD; `None` when the line
/// was valid UTF-8 (then it is bad for another reason) or is still not an entry.
fn parse_lossy(line: &[u8]) -> Option<Entry> {
    if std::str::from_utf8(line).is_ok() {
        return None;
    }
    serde_json::from_str(&String::from_utf8_lossy(line)).ok()
}

/// First non-blank line, trimmed and cut to [`TITLE_MAX_CHARS`] characters.
pub fn title_of(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    line.chars().take(TITLE_MAX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use serde_json::json;

    fn call(ids: &[&str]) -> Message {
        Message::assistant_tool_calls("", ids.iter().map(|i| ToolCall::new(*i, "grep", json!({}))).collect())
    }

    fn run(msgs: Vec<Message>) -> Finished {
        let mut r = Replay::keeping();
        for m in msgs {
            r.feed_entry(Entry::from_message(m));
        }
        r.finish()
    }

    #[test]
    fn parallel_calls_with_one_result_missing_are_trimmed_at_the_tail() {
        let f = run(vec![Message::user("hi"), call(&["a", "b"]), Message::tool_result("a", "x", false)]);
        assert!(f.trimmed);
        assert_eq!(f.messages.len(), 1);
        assert_eq!(f.state.messages, 1);
    }

    #[test]
    fn incomplete_exchange_in_the_middle_is_dropped_not_spliced() {
        let f = run(vec![
            Message::user("hi"),
            call(&["a", "b"]),
            Message::tool_result("b", "x", false),
            Message::user("again"),
            Message::assistant("ok"),
        ]);
        assert!(!f.trimmed);
        let texts: Vec<_> = f.messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["hi", "again", "ok"]);
        assert_eq!(f.state.dropped, 2);
    }

    #[test]
    fn orphan_and_duplicate_results_are_dropped() {
        let f = run(vec![
            Message::tool_result("zz", "orphan", false),
            call(&["a"]),
            Message::tool_result("a", "x", false),
            Message::tool_result("a", "dup", false),
        ]);
        assert_eq!(f.messages.len(), 2);
        assert_eq!(f.state.dropped, 2);
    }

    #[test]
    fn a_line_with_invalid_utf8_is_repaired_not_dropped() {
        let mut r = Replay::keeping();
        let mut line = br#"{"type":"message","role":"user","content":"caf"#.to_vec();
        line.extend_from_slice(b"\xe9 au lait\",\"model\":\"m1\"}");
        r.feed_line(&line, 1);
        r.feed_line(br#"{"type":"message","role":"assistant","content":"ok"}"#, 2);
        r.feed_line(b"not json \xe9", 3);
        let f = r.finish();
        assert_eq!(f.messages.len(), 2);
        assert_eq!(f.messages[0].content, "caf\u{FFFD} au lait");
        assert_eq!((f.state.title.as_str(), f.state.model.as_str()), ("caf\u{FFFD} au lait", "m1"));
        assert_eq!((f.repaired_line_numbers, f.bad_line_numbers), (vec![1], vec![3]));
        assert_eq!((f.state.repaired, f.state.bad_lines), (1, 1));
    }

    #[test]
    fn titles_take_the_first_typed_user_line() {
        assert_eq!(title_of("\n  fix the parser  \nplease"), "fix the parser");
        assert_eq!(title_of(&"é".repeat(200)).chars().count(), TITLE_MAX_CHARS);
    }
}
