//! Full-text search over every message of a workspace's sessions, each hit naming the message's
//! place in the history a load restores.
//!
//! No index: the logs are the only thing searched, so nothing can go stale and nothing is written.
//! What makes it fast is that most sessions do not hold the text, and for those the work is what
//! `rg -F -i` does:
//!
//! 1. A log is read whole and its raw bytes are searched with one pattern that matches every way a
//!    JSON writer may have encoded the query's text ([`Query`]: `"` as `\"`, `é` as itself or as
//!    `\u00e9`, each case variant...). Spill files (`tool-results/*.txt`, plain text) are searched
//!    as they are. A session without a match costs that read and that scan.
//! 2. A session with a match is replayed through the loader's own fold ([`Replay::tracking`]), which
//!    says which message of the history each line became: lines before a `replace`, dropped or
//!    trimmed exchanges, superseded checkpoints and unreadable lines become none, and are not hits.
//!    Only the lines that matched have their text searched, decoded (so an escaped quote matches a
//!    quote, and a match in a JSON key or across two fields is not a hit).
//!
//! Sessions are searched newest first (by the log's modification time, as the list orders them) on
//! a couple of threads, and handed to the caller in that order as each is done, so the first hits
//! arrive after the first few sessions, not after all of them. The caller can stop a search at any
//! time through its `cancel` flag; it is checked between sessions and between the steps of one.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde::Serialize;

use super::contain::{Access, Dir};
use super::entry::Entry;
use super::replay::{Origin, Parsed, Replay, parse_line};
use super::{CONVERSATION_FILE_NAME, Result, io_err, is_valid_id, sessions_dir};
use crate::message::{Message, Role, ToolResult};

mod query;
mod raw;
mod text;

use raw::{candidate_lines, interrupted_match, trailing_checkpoints};
use text::{search_message, search_spills, search_text};

pub use query::{Case, MAX_QUERY_CHARS, Query, QueryError};

/// What to search.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Leave this session out (the current one).
    pub exclude: Option<String>,
    /// Stop after this many hits in all.
    pub limit: Option<usize>,
    /// At most this many hits per session (the first ones, in message order); the others are counted
    /// in [`SessionHits::more`].
    pub per_session: Option<usize>,
    /// Threads searching; 0 for the default (two, or one on a one-core machine).
    pub threads: usize,
    /// Logs larger than this are read in chunks ([`WHOLE_LOG`] when 0; tests lower it).
    #[doc(hidden)]
    pub whole_log: u64,
}

impl Options {
    fn read_whole_up_to(&self) -> u64 {
        if self.whole_log == 0 { WHOLE_LOG } else { self.whole_log }
    }
}

/// One message holding the text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub id: String,
    /// 1-based position of the message in `load(id).messages`.
    pub index: usize,
    pub role: String,
    /// Where in the message: `text` (its content), `tool_call` (a call's name or arguments),
    /// `tool_result` (a tool's output, the whole of a spilled one).
    pub kind: &'static str,
    /// One line of the text around the first match, whitespace collapsed, `…` where it was cut.
    pub snippet: String,
    /// Byte ranges `[start, end)` of the matches in `snippet`, 0-based.
    pub ranges: Vec<[usize; 2]>,
    /// Matches in the whole message.
    pub matches: usize,
    /// The session's title and newest message time (unix seconds), as the list gives them.
    pub title: String,
    pub last_message: i64,
    /// Another agent's session (`crate::import::search`): the agent that had it (`claude`, `gemini`…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<&'static str>,
}

/// The hits of one session, in message order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionHits {
    pub id: String,
    pub title: String,
    pub last_message: i64,
    pub hits: Vec<Hit>,
    /// Hits left out by [`Options::per_session`].
    pub more: usize,
    /// Lines of the log that are not entries (their text, not being in the history, is not searched).
    pub bad_lines: usize,
}

/// How a search went.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Sessions searched.
    pub sessions: usize,
    /// Sessions with at least one hit.
    pub matched: usize,
    pub hits: usize,
    /// Sessions whose raw bytes may hold the text, replayed to find which messages do; each of the
    /// others cost one read and one scan.
    pub replayed: usize,
    /// [`Options::limit`] was reached: sessions after it were not searched.
    pub truncated: bool,
    pub cancelled: bool,
    /// Sessions that could not be read, each `id: why` (a linked folder, a permission error).
    pub skipped: Vec<String>,
}

/// Searches every session of `workspace`, newest first, and hands `sink` each session that holds
/// the text, in that order, as soon as it and every newer one are done. Setting `cancel` stops the
/// search soon (the summary then says `cancelled`). A workspace without sessions has no hits.
pub fn search(
    workspace: &Path,
    query: &Query,
    opts: &Options,
    cancel: &AtomicBool,
    sink: impl FnMut(SessionHits) + Send,
) -> Result<Summary> {
    let Some((root, ids)) = sessions_newest_first(workspace, opts.exclude.as_deref())? else {
        return Ok(Summary::default());
    };
    let whole_up_to = opts.read_whole_up_to();
    Ok(search_in_order(
        ids.len(),
        opts,
        cancel,
        |i, buf, stopped| {
            let id = &ids[i];
            search_session(&root, id, query, buf, whole_up_to, stopped).map_err(|e| format!("{id}: {e}"))
        },
        sink,
    ))
}

/// The driver every search shares (ours, and other agents' sessions in `crate::import::search`): the sessions
/// `0..count`, best first, searched by `search_one` on a couple of threads (it is handed a buffer to reuse and the
/// stop test), and handed to `sink` in that order as soon as each and every earlier one are done; `Err` is a
/// session skipped, with why. Options' `limit` and `per_session` apply; `cancel` stops it soon.
pub fn search_in_order<S>(
    count: usize,
    opts: &Options,
    cancel: &AtomicBool,
    search_one: S,
    sink: impl FnMut(SessionHits) + Send,
) -> Summary
where
    S: Fn(usize, &mut Vec<u8>, &dyn Fn() -> bool) -> std::result::Result<Option<SessionHits>, String> + Sync,
{
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(2)),
        n => n,
    }
    .clamp(1, count.max(1));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let shared = Mutex::new(InOrder { next: 0, ready: BTreeMap::new(), sink, summary: Summary::default() });
    let worker = || {
        let mut buf = Vec::new();
        let stopped = || cancel.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed);
        while !stopped() {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count {
                break;
            }
            let outcome = match search_one(i, &mut buf, &stopped) {
                Ok(found) => Outcome::Searched(found),
                Err(why) => Outcome::Skipped(why),
            };
            // A 100 MiB log once is no reason to hold 100 MiB for the rest of the search.
            if buf.capacity() > 16 << 20 {
                buf = Vec::new();
            }
            if stopped() {
                break;
            }
            let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.ready.insert(i, outcome);
            s.drain(opts, &stop);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(worker);
        }
        worker();
    });
    let mut summary = shared.into_inner().unwrap_or_else(|p| p.into_inner()).summary;
    summary.cancelled = cancel.load(Ordering::Relaxed);
    summary
}

/// The hits in a history held in memory, every message searched whole: another agent's session, converted as a
/// resume would restore it (`crate::import::search`). Each hit is named with `id`, `title` and `last_message`.
pub fn search_messages(id: &str, title: &str, last_message: i64, messages: &[Message], query: &Query) -> Vec<Hit> {
    let no_spills = HashMap::new();
    let mut hits = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let Some(f) = search_message(MessageRef::from(m), query, &no_spills, true) else { continue };
        hits.push(Hit {
            id: id.to_string(),
            index: i + 1,
            role: m.role.to_string(),
            kind: f.kind,
            snippet: f.snippet,
            ranges: f.ranges,
            matches: f.matches,
            title: title.to_string(),
            last_message,
            agent: None,
        });
    }
    hits
}

/// Whether raw JSON text may hold the query, in any way a JSON writer encodes it: the cheap test before a file is
/// parsed (false: it cannot).
pub fn raw_may_hold(bytes: &[u8], query: &Query) -> bool {
    query.raw.is_match(bytes)
}

/// [`search`], gathering every hit: best (newest) sessions first, each in message order.
pub fn search_all(workspace: &Path, query: &Query, opts: &Options) -> Result<(Vec<Hit>, Summary)> {
    let mut hits = Vec::new();
    let summary = search(workspace, query, opts, &AtomicBool::new(false), |s| hits.extend(s.hits))?;
    Ok((hits, summary))
}

enum Outcome {
    Searched(Option<SessionHits>),
    Skipped(String),
}

/// Sessions done out of order wait here until every newer one is done.
struct InOrder<F> {
    next: usize,
    ready: BTreeMap<usize, Outcome>,
    sink: F,
    summary: Summary,
}

impl<F: FnMut(SessionHits)> InOrder<F> {
    fn drain(&mut self, opts: &Options, stop: &AtomicBool) {
        while let Some(outcome) = self.ready.remove(&self.next) {
            self.next += 1;
            if self.summary.truncated {
                continue;
            }
            self.summary.sessions += 1;
            let mut found = match outcome {
                Outcome::Searched(None) => continue,
                Outcome::Searched(Some(found)) => {
                    self.summary.replayed += 1;
                    if found.hits.is_empty() {
                        continue;
                    }
                    found
                }
                Outcome::Skipped(why) => {
                    self.summary.skipped.push(why);
                    continue;
                }
            };
            if let Some(cap) = opts.per_session
                && found.hits.len() > cap
            {
                found.more += found.hits.len() - cap;
                found.hits.truncate(cap);
            }
            if let Some(limit) = opts.limit {
                let room = limit.saturating_sub(self.summary.hits);
                if found.hits.len() >= room {
                    found.hits.truncate(room);
                    self.summary.truncated = true;
                    stop.store(true, Ordering::Relaxed);
                }
            }
            if found.hits.is_empty() {
                continue;
            }
            self.summary.matched += 1;
            self.summary.hits += found.hits.len();
            (self.sink)(found);
        }
    }
}

/// The checked sessions folder and its session ids, newest log first; `None` when there is no
/// sessions folder.
fn sessions_newest_first(workspace: &Path, exclude: Option<&str>) -> Result<Option<(Dir, Vec<String>)>> {
    let dir = sessions_dir(workspace);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("cannot read sessions directory", &dir)(e)),
    };
    let root = Dir::sessions(workspace)?;
    let mut found: Vec<(i64, String)> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().filter(|n| is_valid_id(n) && Some(*n) != exclude).map(str::to_string))
        .map(|id| (root.mtime_ns(&format!("{id}/{CONVERSATION_FILE_NAME}")).unwrap_or(0), id))
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    Ok(Some((root, found.into_iter().map(|(_, id)| id).collect())))
}

/// A spill file of the session, searched.
struct Spill {
    bytes: u64,
    found: Option<Found>,
}

/// The matches of one message.
#[derive(Debug, Clone)]
struct Found {
    role: String,
    kind: &'static str,
    snippet: String,
    ranges: Vec<[usize; 2]>,
    matches: usize,
}

/// Logs up to this size are read whole. A larger one is scanned in chunks of [`CHUNK`] bytes, cut
/// at line ends, and when it holds a match it is replayed while it streams from the file: what it
/// costs in memory is a few chunks (an answer's checkpoints, up to four) and its longest line.
pub const WHOLE_LOG: u64 = 64 << 20;
const CHUNK: u64 = 8 << 20;

/// The hits of one session (none when the replay found none); `None` when its raw bytes cannot hold
/// the text, so it was not replayed. `buf` is the caller's, reused across sessions.
fn search_session(
    root: &Dir,
    id: &str,
    query: &Query,
    buf: &mut Vec<u8>,
    whole_up_to: u64,
    stopped: &dyn Fn() -> bool,
) -> Result<Option<SessionHits>> {
    let dir = root.subdir(id)?;
    let path = dir.path().join(CONVERSATION_FILE_NAME);
    let (mut file, meta) = match dir.open_stat(CONVERSATION_FILE_NAME, Access::Read) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let whole = meta.len() <= whole_up_to;
    let mut candidates = Vec::new();
    let mut interrupted = false;
    buf.clear();
    if whole {
        file.read_to_end(buf).map_err(io_err("cannot read session log", &path))?;
        // Bytes after the last newline are a torn append, not an entry (as the loader says).
        buf.truncate(memchr::memrchr(b'\n', buf).map_or(0, |i| i + 1));
        candidates = candidate_lines(buf, 0, &query.raw);
        // With a match the log is replayed anyway, and an interrupted answer's text searched then.
        interrupted = candidates.is_empty() && interrupted_match(buf, query);
    } else {
        let mut at = 0u64;
        let chunk = CHUNK.min(whole_up_to).max(1);
        loop {
            let n = (&mut file).take(chunk).read_to_end(buf).map_err(io_err("cannot read session log", &path))?;
            // A chunk ends at its last newline; the rest (a line longer than a chunk) waits for more.
            if let Some(mut end) = memchr::memrchr(b'\n', buf).map(|i| i + 1) {
                // Checkpoints at the chunk's end wait for the next one, which tells whether they were
                // superseded (their answer's text is searched whole), up to four chunks of them. A
                // longer run is searched in parts, where a match across the cut is not seen: the
                // session is then replayed, which finds exactly what is there.
                if n > 0
                    && let Some(run) = trailing_checkpoints(&buf[..end])
                {
                    if end - run < 4 * chunk as usize {
                        end = run;
                    } else {
                        interrupted = true;
                    }
                }
                candidates.extend(candidate_lines(&buf[..end], at, &query.raw));
                interrupted = interrupted || interrupted_match(&buf[..end], query);
                at += end as u64;
                buf.drain(..end);
            }
            if n == 0 || stopped() {
                break;
            }
        }
        buf.clear();
    }
    let spills = if stopped() { HashMap::new() } else { search_spills(&dir, query)? };
    if (candidates.is_empty() && spills.values().all(|s| s.found.is_none()) && !interrupted) || stopped() {
        return Ok(None);
    }
    let mut fold = Fold::new(query, &spills, candidates);
    if whole {
        let mut start = 0usize;
        for stop in memchr::memchr_iter(b'\n', buf) {
            fold.line(start as u64, &buf[start..stop]);
            start = stop + 1;
            if fold.line_no.is_multiple_of(4096) && stopped() {
                return Ok(None);
            }
        }
    } else {
        file.seek(SeekFrom::Start(0)).map_err(io_err("cannot read session log", &path))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut line = Vec::new();
        let mut at = 0u64;
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).map_err(io_err("cannot read session log", &path))?;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            fold.line(at, &line[..n - 1]);
            at += n as u64;
            if fold.line_no.is_multiple_of(4096) && stopped() {
                return Ok(None);
            }
        }
    }
    let Fold { replay, mut found, .. } = fold;
    let done = replay.finish();
    let mut hits = Vec::new();
    for (i, origin) in done.origins.iter().enumerate() {
        let found = match origin {
            Origin::Line { line, sub } => found.remove(&(*line, *sub)),
            Origin::Interrupted(text) => search_text(text, query, "text").map(|mut f| {
                f.role = Role::Assistant.to_string();
                f
            }),
        };
        if let Some(f) = found {
            hits.push((i + 1, f));
        }
    }
    let (title, last_message) = (done.state.title, done.state.last_message);
    let hits = hits
        .into_iter()
        .map(|(index, f)| Hit {
            id: id.to_string(),
            index,
            role: f.role,
            kind: f.kind,
            snippet: f.snippet,
            ranges: f.ranges,
            matches: f.matches,
            title: title.clone(),
            last_message,
            agent: None,
        })
        .collect();
    Ok(Some(SessionHits { id: id.to_string(), title, last_message, hits, more: 0, bad_lines: done.state.bad_lines }))
}

/// The loader's fold over a session's lines, searching the text of the lines that matched.
struct Fold<'a> {
    query: &'a Query,
    spills: &'a HashMap<String, Spill>,
    spill_found: bool,
    /// Start offsets of the lines that matched, in order, and the next one to come.
    candidates: Vec<u64>,
    next: usize,
    replay: Replay,
    found: HashMap<(u64, usize), Found>,
    line_no: u64,
}

impl<'a> Fold<'a> {
    fn new(query: &'a Query, spills: &'a HashMap<String, Spill>, candidates: Vec<u64>) -> Self {
        let spill_found = spills.values().any(|s| s.found.is_some());
        Fold {
            query,
            spills,
            spill_found,
            candidates,
            next: 0,
            replay: Replay::tracking(),
            found: HashMap::new(),
            line_no: 0,
        }
    }

    /// The line starting at byte `offset` of the log, without its `\n`.
    fn line(&mut self, offset: u64, line: &[u8]) {
        self.line_no += 1;
        let line_no = self.line_no;
        let candidate = self.candidates.get(self.next) == Some(&offset);
        if candidate {
            self.next += 1;
        }
        if !candidate && !self.spill_found {
            self.replay.feed_line(line, line_no);
            return;
        }
        self.replay.set_line(line_no);
        let (entry, repaired) = match parse_line(line) {
            Parsed::Blank => return,
            Parsed::Bad => return self.replay.bad_line(line_no),
            Parsed::Entry(e) => (e, false),
            Parsed::Repaired(e) => (e, true),
        };
        for (sub, m) in entry_messages(&entry) {
            if let Some(mut f) = search_message(m, self.query, self.spills, candidate) {
                f.role = m.role.to_string();
                self.found.insert((line_no, sub), f);
            }
        }
        if repaired {
            self.replay.repaired_entry(entry, line_no);
        } else {
            self.replay.feed_entry(entry);
        }
    }
}

/// The messages an entry holds, with their position in it (a `replace` holds many).
fn entry_messages(entry: &Entry) -> Vec<(usize, MessageRef<'_>)> {
    if entry.is_replace() {
        return entry.messages.iter().flatten().enumerate().map(|(i, m)| (i, MessageRef::from(m))).collect();
    }
    if let Some(role) = entry.message_role() {
        return vec![(
            0,
            MessageRef {
                role: role.as_str(),
                content: &entry.content,
                tool_calls: &entry.tool_calls,
                tool_result: entry.tool_result.as_ref(),
            },
        )];
    }
    Vec::new()
}

/// The searchable parts of a message or of a message entry.
#[derive(Clone, Copy)]
struct MessageRef<'a> {
    role: &'a str,
    content: &'a str,
    tool_calls: &'a [crate::message::ToolCall],
    tool_result: Option<&'a ToolResult>,
}

impl<'a> From<&'a Message> for MessageRef<'a> {
    fn from(m: &'a Message) -> Self {
        MessageRef {
            role: m.role.as_str(),
            content: &m.content,
            tool_calls: &m.tool_calls,
            tool_result: m.tool_result.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::search::query::Case;

    #[test]
    fn a_sessions_folder_that_cannot_be_read_is_an_error_and_a_missing_one_has_no_hits() {
        let ws = tempfile::tempdir().expect("tempdir");
        let q = Query::new("x", Case::Smart).expect("query");
        assert!(search_all(ws.path(), &q, &Options::default()).expect("no sessions yet").0.is_empty());
        std::fs::create_dir(ws.path().join(".PseudoClaude")).expect("mkdir");
        std::fs::write(ws.path().join(".PseudoClaude/sessions"), b"").expect("a file where the folder goes");
        let err = search_all(ws.path(), &q, &Options::default()).unwrap_err();
        assert!(err.to_string().contains("cannot read sessions directory"), "{err}");
    }
}
