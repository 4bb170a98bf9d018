//! The fold from log entries to the history a resume restores.
//!
//! The loader runs it keeping the messages; the list runs it keeping only counts, and can save its
//! [`State`] to resume the fold later from a byte offset. Because both use this one fold, the list's
//! counts are the resume's counts by construction.
//!
//! Recovery rules, each for a failure seen in the field:
//! - `replace` starts over: the lines before it stay in the file for audit but leave the history.
//! - An assistant message with tool calls is held back until every one of its calls has a result
//!   (which result answers which call is [`crate::pairing`]'s rule, shared with the providers);
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
//! - `checkpoint` entries of one answer are gathered, in order, into its text so far. The answer's
//!   final assistant message supersedes them (a completed answer replays exactly as it did before
//!   checkpoints existed). When anything else comes first, or the log ends, the editor died while the
//!   answer streamed: the gathered text becomes one assistant message marked `interrupted`, so what
//!   the user read survives. It never carries tool calls: calls are only recorded with the final
//!   message, so the pairing rules above are untouched. A checkpoint that does not continue the text
//!   where the previous one ended (a line lost in the middle) ends the gathering there: the prefix is
//!   kept, nothing after a gap is spliced on.
//! - `title` and `pin` entries set [`State::name`] and [`State::pinned`], last one wins. They are not
//!   messages: they touch neither the history nor a held-back exchange, and a `replace` leaves them be
//!   (a compaction does not forget the session's name).
//!
//! Architecture invariant: the loader and the list run this one fold, and the history it gives is valid for
//! the providers (every tool call answered once, right after it; no orphan results), with nothing invented.

use serde::{Deserialize, Serialize};

use super::entry::{Entry, ForkedFrom, Kind};
use super::files::{FilesRecord, RewindRecord};
use crate::git::GitHead;
use crate::message::{Message, Role};
use crate::pairing::Exchange;
use crate::usage::UsageByModel;

/// What a replay has seen so far, without the messages themselves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// First line of the first typed user message, at most [`TITLE_MAX_CHARS`] characters.
    pub title: String,
    /// The first model named in the log (the seed's meaning).
    pub model: String,
    /// The model of the last assistant message that names one (`:PseudoModel` switches it); empty when none
    /// does. A summary cached before it existed reads as empty, and its logs have no such message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_model: String,
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
    /// The answer whose checkpoints have no final message yet. Its text is counted in `messages`
    /// already, as a resume would restore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<Streaming>,
    /// Answers restored from checkpoints alone (interrupted mid-stream), counted when they end.
    #[serde(default)]
    pub interrupted: usize,
    /// The git branch and commit of the first `meta` entry: where the session started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_start: Option<GitHead>,
    /// Those of the last `meta` entry: where its latest recorded turn ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitHead>,
    /// The `usage` entries, summed per model. Like `git`, never reset by a `replace`: compacting the
    /// history does not give back what was spent.
    #[serde(default, skip_serializing_if = "UsageByModel::is_empty")]
    pub usage: UsageByModel,
    /// The name the user gave (last `title` entry); empty: the automatic [`State::title`] stands.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The last `pin` entry said pinned.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// The session is a fork of this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The session is a copy of another agent's (the `replace` of an import, or of a kept copy, names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<crate::session::entry::ImportedFrom>,
    /// The ACP agent the session runs (the last `meta` entry naming one; its session id may change when the
    /// agent had forgotten the session and a new one was started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<crate::session::entry::AgentMeta>,
    /// The git worktree the session works in (the last `meta` entry naming one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::session::entry::WorktreeMeta>,
}

impl State {
    /// The session's model as the list and a load show it: the last answer's, else the first one named.
    pub fn shown_model(&self) -> &str {
        if self.last_model.is_empty() { &self.model } else { &self.last_model }
    }

    /// What a list shows as the title: the name when there is one, else the automatic title.
    pub fn shown_title(&self) -> &str {
        if self.name.is_empty() { &self.title } else { &self.name }
    }
}

/// The checkpoints of one answer so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Streaming {
    pub answer: String,
    /// Bytes of text gathered; the next checkpoint must start here.
    pub bytes: usize,
    /// A checkpoint did not continue the text: later ones of this answer are ignored.
    pub broken: bool,
    pub ts: i64,
}

/// An assistant message whose tool calls are not all answered yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// Its calls, paired with their results by [`crate::pairing`] (flattened: `summary.json` keeps
    /// its `ids` and `answered` fields).
    #[serde(flatten)]
    pub calls: Exchange,
    /// The assistant message plus the results received so far.
    pub len: usize,
}

pub const TITLE_MAX_CHARS: usize = 80;

/// The fold. `Replay::keeping()` for the loader, `Replay::resume_counting(state)` for the list,
/// `Replay::tracking()` for the search.
#[derive(Debug, Default)]
pub struct Replay {
    pub state: State,
    kept: Option<Kept>,
    track: Option<Track>,
    /// 1-based line numbers of lines that did not parse (loader only reports them).
    pub bad_line_numbers: Vec<u64>,
    /// 1-based line numbers of repaired lines (loader only).
    pub repaired_line_numbers: Vec<u64>,
}

#[derive(Debug, Default)]
struct Kept {
    committed: Vec<Message>,
    pending: Vec<Message>,
    /// The text of [`State::streaming`].
    streaming: String,
    /// The `files` and `rewind` entries, in order (a `replace` leaves them be).
    files: Vec<FilesRecord>,
    rewinds: Vec<RewindRecord>,
}

/// Where a message of the history came from (see [`Replay::tracking`]): the search finds text in
/// lines, and this says which message of the history, if any, each line's text became.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// Entry line `line` (1-based, as fed); `sub` is the message's position in a `replace` snapshot
    /// (0 for a message entry).
    Line { line: u64, sub: usize },
    /// An answer restored from its checkpoints (the editor died while it streamed): its text, which
    /// no single line holds.
    Interrupted(String),
}

/// What a tracking replay keeps: origins where a keeping one keeps messages.
#[derive(Debug, Default)]
struct Track {
    committed: Vec<Origin>,
    pending: Vec<Origin>,
    /// The text of [`State::streaming`].
    streaming: String,
    /// The line being fed and the position in its snapshot.
    line: u64,
    sub: usize,
    /// The origin of the next message fed, when it is not the line being fed.
    next: Option<Origin>,
}

/// How one line of the log reads, parsed as the loader parses it.
#[derive(Debug)]
pub enum Parsed {
    /// Only whitespace: not an entry, not counted.
    Blank,
    Entry(Entry),
    /// An entry once its invalid UTF-8 was read as U+FFFD.
    Repaired(Entry),
    /// Not an entry.
    Bad,
}

/// Parses one complete line (without its `\n`) exactly as [`Replay::feed_line`] does.
pub fn parse_line(line: &[u8]) -> Parsed {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Blank;
    }
    match serde_json::from_slice::<Entry>(line) {
        Ok(entry) => Parsed::Entry(entry),
        Err(_) => match parse_lossy(line) {
            Some(entry) => Parsed::Repaired(entry),
            None => Parsed::Bad,
        },
    }
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
    /// With [`Replay::tracking`]: the origin of each message of the history, in order (`origins[i]`
    /// is where message `i + 1` of `load().messages` came from).
    pub origins: Vec<Origin>,
    /// With [`Replay::keeping`]: the `files` and `rewind` entries, in order.
    pub files: Vec<FilesRecord>,
    pub rewinds: Vec<RewindRecord>,
}

impl Replay {
    pub fn keeping() -> Replay {
        Replay { kept: Some(Kept::default()), ..Default::default() }
    }

    /// A replay that keeps only counts, continuing from `state` (`State::default()` to start).
    pub fn resume_counting(state: State) -> Replay {
        Replay { state, ..Default::default() }
    }

    /// A replay that keeps, instead of the messages, where each came from ([`Finished::origins`]):
    /// the same fold, so a line's message has the index a load gives it. Call
    /// [`Replay::set_line`] before feeding each entry ([`Replay::feed_line`] does).
    pub fn tracking() -> Replay {
        Replay { track: Some(Track::default()), ..Default::default() }
    }

    /// The 1-based number of the line whose entry is fed next (for [`Replay::tracking`]).
    pub fn set_line(&mut self, line_no: u64) {
        if let Some(t) = &mut self.track {
            t.line = line_no;
            t.sub = 0;
        }
    }

    /// Feeds one complete line (without its `\n`). Blank lines are ignored.
    pub fn feed_line(&mut self, line: &[u8], line_no: u64) {
        self.set_line(line_no);
        match parse_line(line) {
            Parsed::Blank => {}
            Parsed::Entry(entry) => self.feed_entry(entry),
            Parsed::Repaired(entry) => self.repaired_entry(entry, line_no),
            Parsed::Bad => self.bad_line(line_no),
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
        if !entry.model.is_empty() && entry.message_role() == Some(&Role::Assistant) {
            self.state.last_model.clone_from(&entry.model);
        }
        if entry.is_checkpoint() {
            self.feed_checkpoint(entry);
            return;
        }
        // Not messages: an answer streaming around them goes on.
        if entry.is(Kind::Meta) {
            if let Some(agent) = entry.agent {
                self.state.agent = Some(agent);
            }
            if let Some(worktree) = entry.worktree {
                self.state.worktree = Some(worktree);
            }
            if let Some(git) = entry.git {
                self.state.git_start.get_or_insert_with(|| git.clone());
                self.state.git = Some(git);
            }
            return;
        }
        if entry.is(Kind::Usage) {
            if let Some(u) = entry.usage {
                let model = if entry.model.is_empty() { self.state.model.clone() } else { entry.model };
                self.state.usage.add(&model, &u);
            }
            return;
        }
        // Meta entries: not messages, so they neither end a streaming answer nor a held-back exchange.
        if entry.is(Kind::Title) {
            self.state.name = entry.title.as_deref().map(clean_title).unwrap_or_default();
            return;
        }
        if entry.is(Kind::Pin) {
            self.state.pinned = entry.pinned.unwrap_or(false);
            return;
        }
        // What happened to the files: kept for a load (rewind, changes), never a message.
        if entry.is(Kind::Acp) || entry.is(Kind::Kept) {
            return;
        }
        if entry.is(Kind::Files) || entry.is(Kind::Rewind) {
            if let Some(k) = &mut self.kept {
                k.files.extend(entry.files);
                k.rewinds.extend(entry.rewind);
            }
            return;
        }
        if let Some(from) = &entry.forked_from {
            self.state.forked_from = Some(from.clone());
        }
        if let Some(from) = &entry.imported_from {
            self.state.imported_from = Some(from.clone());
        }
        // The answer's own final message supersedes its checkpoints; anything else means the
        // answer never got one.
        let superseded =
            entry.is_replace() || (entry.message_role() == Some(&Role::Assistant) && entry.tool_result.is_none());
        if entry.is_replace() || entry.message_role().is_some() {
            self.end_streaming(superseded);
        }
        if entry.is_replace() {
            self.state.messages = 0;
            self.state.pending = None;
            if let Some(k) = &mut self.kept {
                k.committed.clear();
                k.pending.clear();
            }
            if let Some(t) = &mut self.track {
                t.committed.clear();
                t.pending.clear();
            }
            for (sub, m) in entry.messages.into_iter().flatten().enumerate() {
                if let Some(t) = &mut self.track {
                    t.sub = sub;
                }
                self.feed_message(m);
            }
        } else if let Some(m) = entry.into_message() {
            self.feed_message(m);
        }
    }

    fn feed_checkpoint(&mut self, entry: Entry) {
        if self.state.streaming.as_ref().is_some_and(|s| s.answer != entry.answer) {
            self.end_streaming(false);
        }
        let s = &mut self.state;
        s.last_message = s.last_message.max(entry.ts);
        let st = s.streaming.get_or_insert_with(|| Streaming { answer: entry.answer.clone(), ..Default::default() });
        st.ts = st.ts.max(entry.ts);
        if st.broken || entry.at != Some(st.bytes) {
            st.broken = true;
            return;
        }
        if st.bytes == 0 && !entry.content.is_empty() {
            s.messages += 1;
        }
        st.bytes += entry.content.len();
        if let Some(k) = &mut self.kept {
            k.streaming.push_str(&entry.content);
        }
        if let Some(t) = &mut self.track {
            t.streaming.push_str(&entry.content);
        }
    }

    /// Closes the answer being gathered: dropped when `superseded` by its final message (or a
    /// replace), else committed as an interrupted answer.
    fn end_streaming(&mut self, superseded: bool) {
        let Some(st) = self.state.streaming.take() else { return };
        let text = self.kept.as_mut().map(|k| std::mem::take(&mut k.streaming)).unwrap_or_default();
        let tracked = self.track.as_mut().map(|t| std::mem::take(&mut t.streaming));
        if st.bytes == 0 {
            return;
        }
        self.state.messages = self.state.messages.saturating_sub(1); // counted ahead; the message itself is counted below, if kept
        if superseded {
            return;
        }
        self.state.interrupted += 1;
        if let (Some(t), Some(shown)) = (&mut self.track, tracked) {
            t.next = Some(Origin::Interrupted(shown));
        }
        self.feed_message(Message::assistant_interrupted(text, st.ts));
    }

    fn feed_message(&mut self, m: Message) {
        let origin = self.track.as_mut().map(|t| t.next.take().unwrap_or(Origin::Line { line: t.line, sub: t.sub }));
        let s = &mut self.state;
        s.last_message = s.last_message.max(m.ts);
        if s.title.is_empty() && m.is_user_text() {
            s.title = title_of(&m.content);
        }
        if let Some(result) = &m.tool_result {
            let answered = s.pending.as_mut().and_then(|p| p.calls.answer(&result.tool_call_id).map(|_| p));
            let Some(p) = answered else {
                s.dropped += 1; // orphan or duplicate
                return;
            };
            p.len += 1;
            if let Some(k) = &mut self.kept {
                k.pending.push(m);
            }
            if let (Some(t), Some(o)) = (&mut self.track, origin) {
                t.pending.push(o);
            }
            if p.calls.is_complete() {
                s.messages += p.len;
                s.pending = None;
                if let Some(k) = &mut self.kept {
                    k.committed.append(&mut k.pending);
                }
                if let Some(t) = &mut self.track {
                    t.committed.append(&mut t.pending);
                }
            }
            return;
        }
        self.drop_pending();
        let s = &mut self.state;
        if !m.tool_calls.is_empty() {
            s.pending = Some(Pending { calls: Exchange::open(m.tool_calls.iter().map(|c| c.id.as_str())), len: 1 });
            if let Some(k) = &mut self.kept {
                k.pending.push(m);
            }
            if let (Some(t), Some(o)) = (&mut self.track, origin) {
                t.pending.push(o);
            }
        } else {
            s.messages += 1;
            if let Some(k) = &mut self.kept {
                k.committed.push(m);
            }
            if let (Some(t), Some(o)) = (&mut self.track, origin) {
                t.committed.push(o);
            }
        }
    }

    fn drop_pending(&mut self) {
        if let Some(p) = self.state.pending.take() {
            self.state.dropped += p.len;
            if let Some(k) = &mut self.kept {
                k.pending.clear();
            }
            if let Some(t) = &mut self.track {
                t.pending.clear();
            }
        }
    }

    pub fn finish(mut self) -> Finished {
        self.end_streaming(false);
        let trimmed = self.state.pending.take().is_some();
        let kept = self.kept.unwrap_or_default();
        Finished {
            state: self.state,
            messages: kept.committed,
            files: kept.files,
            rewinds: kept.rewinds,
            trimmed,
            bad_line_numbers: self.bad_line_numbers,
            repaired_line_numbers: self.repaired_line_numbers,
            origins: self.track.map(|t| t.committed).unwrap_or_default(),
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

/// A name as the list shows it: one line, runs of white space as one space, trimmed. (The writer
/// writes names this way already; a hand-edited log may not.)
pub fn clean_title(name: &str) -> String {
    name.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// First non-blank line, trimmed and cut to [`TITLE_MAX_CHARS`] characters.
pub fn title_of(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    line.chars().take(TITLE_MAX_CHARS).collect()
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
