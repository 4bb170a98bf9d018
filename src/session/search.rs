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

use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
use serde::{Deserialize, Serialize};

use super::contain::{Access, Dir};
use super::entry::Entry;
use super::replay::{Origin, Parsed, Replay, parse_line};
use super::{CONVERSATION_FILE_NAME, Result, TOOL_RESULTS_DIR_NAME, io_err, is_valid_id, sessions_dir};
use crate::message::{Message, ROLE_ASSISTANT, ToolResult};

/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
/// Bytes of context kept before a match in a snippet, and the snippet's length after it.
const SNIPPET_BEFORE: usize = 48;
const SNIPPET_AFTER: usize = 160;

/// How letters' case is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    /// Case-insensitive unless the query holds an upper-case letter.
    #[default]
    Smart,
    Sensitive,
    Insensitive,
}

/// A query that cannot be searched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query is empty: give the text to search for")]
    Empty,
    #[error("the query is {0} characters long; at most {MAX_QUERY_CHARS} are searched")]
    TooLong(usize),
    /// The pattern built from it is too large for the matcher (should not happen below the limit).
    #[error("cannot search for this text: {0}")]
    Unsupported(String),
}

/// The text searched for, literally, and the matchers built from it once.
#[derive(Debug, Clone)]
pub struct Query {
    pub text: String,
    pub case_sensitive: bool,
    /// Over a log's raw bytes: every JSON encoding of every case variant of the text.
    raw: regex::bytes::Regex,
    /// Over decoded text (a message's content, an argument, a spill file's bytes).
    decoded: regex::Regex,
    decoded_bytes: regex::bytes::Regex,
    checkpoint: memchr::memmem::Finder<'static>,
}

impl Query {
    pub fn new(text: &str, case: Case) -> std::result::Result<Query, QueryError> {
        if text.is_empty() {
            return Err(QueryError::Empty);
        }
        let chars = text.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(QueryError::TooLong(chars));
        }
        let case_sensitive = match case {
            Case::Smart => text.chars().any(char::is_uppercase),
            Case::Sensitive => true,
            Case::Insensitive => false,
        };
        let bad = |e: regex::Error| QueryError::Unsupported(e.to_string());
        let literal = regex::escape(text);
        let decoded = regex::RegexBuilder::new(&literal).case_insensitive(!case_sensitive).build().map_err(bad)?;
        let decoded_bytes =
            regex::bytes::RegexBuilder::new(&literal).case_insensitive(!case_sensitive).build().map_err(bad)?;
        let raw = regex::bytes::RegexBuilder::new(&raw_pattern(text, !case_sensitive))
            .size_limit(64 << 20)
            .build()
            .map_err(bad)?;
        let checkpoint = memchr::memmem::Finder::new(CHECKPOINT_PREFIX).into_owned();
        Ok(Query { text: text.to_string(), case_sensitive, raw, decoded, decoded_bytes, checkpoint })
    }
}

/// The pattern over raw JSON bytes that matches wherever a string holding `text` was written, by any
/// writer: for each character, each of its case variants (when `fold`) as itself and as every
/// escape JSON allows for it. Letters, digits and spaces are taken to be written as themselves (no
/// JSON writer escapes them); every other character may also be `\uXXXX` (Go escapes `<>&`,
/// Python every non-ASCII character) or its short escape. A query of plain words is thus exactly the
/// literal `(?i)` search ripgrep runs.
fn raw_pattern(text: &str, fold: bool) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let variants = if fold { case_variants(c) } else { vec![c] };
        let mut alts: Vec<String> = Vec::new();
        for &v in &variants {
            if v >= ' ' && v != '"' && v != '\\' {
                alts.push(regex_syntax::escape(v.encode_utf8(&mut [0; 4])));
            }
            if let Some(short) = short_escape(v) {
                alts.push(regex_syntax::escape(&format!("\\{short}")));
            }
            if !(v.is_ascii_alphanumeric() || v == ' ') {
                let mut units = [0u16; 2];
                let hex: String =
                    v.encode_utf16(&mut units).iter().map(|u| format!(r"\\u{}", hex_pattern(*u))).collect();
                alts.push(hex);
            }
        }
        if alts.len() == 1 {
            out.push_str(&alts[0]);
        } else {
            out.push_str("(?:");
            out.push_str(&alts.join("|"));
            out.push(')');
        }
    }
    out
}

/// `c` and the characters Unicode's simple case folding makes equal to it (`k`: `K` and the Kelvin
/// sign), as the decoded matcher's `(?i)` compares them.
fn case_variants(c: char) -> Vec<char> {
    let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
    if class.try_case_fold_simple().is_err() {
        return vec![c];
    }
    class.iter().flat_map(|r| r.start()..=r.end()).collect()
}

fn short_escape(c: char) -> Option<char> {
    Some(match c {
        '"' => '"',
        '\\' => '\\',
        '/' => '/',
        '\u{8}' => 'b',
        '\u{c}' => 'f',
        '\n' => 'n',
        '\r' => 'r',
        '\t' => 't',
        _ => return None,
    })
}

/// Four hex digits of `u`, each letter in either case.
fn hex_pattern(u: u16) -> String {
    format!("{u:04x}")
        .chars()
        .map(|d| if d.is_ascii_digit() { d.to_string() } else { format!("[{d}{}]", d.to_ascii_uppercase()) })
        .collect()
}

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
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(2)),
        n => n,
    }
    .clamp(1, ids.len().max(1));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let shared = Mutex::new(InOrder { next: 0, ready: BTreeMap::new(), sink, summary: Summary::default() });
    let worker = || {
        let mut buf = Vec::new();
        let stopped = || cancel.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed);
        while !stopped() {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(id) = ids.get(i) else { break };
            let outcome = match search_session(&root, id, query, &mut buf, opts.read_whole_up_to(), &stopped) {
                Ok(found) => Outcome::Searched(found),
                Err(e) => Outcome::Skipped(format!("{id}: {e}")),
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
    Ok(summary)
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
                Outcome::Searched(Some(found)) if !found.hits.is_empty() => found,
                Outcome::Searched(_) => continue,
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
/// costs in memory is a chunk and its longest line, not its size.
pub const WHOLE_LOG: u64 = 64 << 20;
const CHUNK: u64 = 8 << 20;

/// The hits of one session; `None` when it has none. `buf` is the caller's, reused across sessions.
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
        loop {
            let n = (&mut file)
                .take(CHUNK.min(whole_up_to).max(1))
                .read_to_end(buf)
                .map_err(io_err("cannot read session log", &path))?;
            // A chunk ends at its last newline; the rest (a line longer than a chunk) waits for more.
            if let Some(mut end) = memchr::memrchr(b'\n', buf).map(|i| i + 1) {
                // Checkpoints at the chunk's end wait for the next one, which tells whether they were
                // superseded (their answer's text is searched whole); unless there is only that.
                if n > 0
                    && let Some(run) = trailing_checkpoints(&buf[..end])
                    && end - run < 4 * CHUNK as usize
                {
                    end = run;
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
                f.role = ROLE_ASSISTANT.to_string();
                f
            }),
        };
        if let Some(f) = found {
            hits.push((i + 1, f));
        }
    }
    if hits.is_empty() {
        return Ok(None);
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
    if entry.is_message() && !entry.role.is_empty() {
        return vec![(
            0,
            MessageRef {
                role: &entry.role,
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
            role: &m.role,
            content: &m.content,
            tool_calls: &m.tool_calls,
            tool_result: m.tool_result.as_ref(),
        }
    }
}

/// The matches in a message: its text (when its line matched), its calls' names and arguments, its
/// tool output (a spilled one from the spill file, when that file is intact, else the preview the
/// log kept, as a load shows it).
fn search_message(
    m: MessageRef<'_>,
    query: &Query,
    spills: &HashMap<String, Spill>,
    line_matched: bool,
) -> Option<Found> {
    if let Some(r) = m.tool_result {
        if let Some(s) = &r.spill
            && let Some(name) = s.path.strip_prefix(TOOL_RESULTS_DIR_NAME).and_then(|p| p.strip_prefix('/'))
            && let Some(spill) = spills.get(name)
            && spill.bytes == s.bytes
        {
            return spill.found.clone();
        }
        return if line_matched { search_text(&r.content, query, "tool_result") } else { None };
    }
    if !line_matched {
        return None;
    }
    // The first field that matches gives the snippet; all of them count.
    let mut first: Option<Found> = None;
    let mut add = |f: Option<Found>| match (&mut first, f) {
        (None, f) => first = f,
        (Some(kept), Some(f)) => kept.matches += f.matches,
        (Some(_), None) => {}
    };
    add(search_text(m.content, query, "text"));
    for call in m.tool_calls {
        add(search_text(&call.name, query, "tool_call").map(|f| prefixed(f, "▸ ")));
        leaves(&call.arguments, &mut String::new(), &mut |key, value| {
            add(search_text(value, query, "tool_call").map(|f| prefixed(f, &format!("▸ {} {key}: ", call.name))));
        });
    }
    first
}

/// Every leaf of a JSON value as text (strings decoded), with its key path (`a.b`, `list[2]`).
fn leaves(v: &serde_json::Value, path: &mut String, f: &mut dyn FnMut(&str, &str)) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                leaves(x, path, f);
                path.truncate(len);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                leaves(x, path, f);
                path.truncate(len);
            }
        }
        serde_json::Value::String(s) => f(path, s),
        serde_json::Value::Null => {}
        other => f(path, &other.to_string()),
    }
}

fn prefixed(mut f: Found, prefix: &str) -> Found {
    f.snippet.insert_str(0, prefix);
    for r in &mut f.ranges {
        r[0] += prefix.len();
        r[1] += prefix.len();
    }
    f
}

fn search_text(text: &str, query: &Query, kind: &'static str) -> Option<Found> {
    let mut it = query.decoded.find_iter(text);
    let first = it.next()?;
    let matches = 1 + it.count();
    let (snippet, ranges) = snippet(text.as_bytes(), first.start(), query);
    Some(Found { role: String::new(), kind, snippet, ranges, matches })
}

/// The spill files of the session (their names checked), each searched; none when the folder is
/// missing.
fn search_spills(dir: &Dir, query: &Query) -> Result<HashMap<String, Spill>> {
    let mut out = HashMap::new();
    let Ok(rd) = fs::read_dir(dir.path().join(TOOL_RESULTS_DIR_NAME)) else { return Ok(out) };
    let names: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.strip_suffix(".txt").is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())))
        .collect();
    if names.is_empty() {
        return Ok(out);
    }
    let tool_results = dir.subdir(TOOL_RESULTS_DIR_NAME)?;
    let mut data = Vec::new();
    for name in names {
        // Opened through the checked folder: a linked file is refused, and so skipped.
        let Ok((mut f, meta)) = tool_results.open_stat(&name, Access::Read) else { continue };
        data.clear();
        if f.read_to_end(&mut data).is_err() {
            continue;
        }
        let found = query.decoded_bytes.find_iter(&data).fold(None, |acc: Option<(usize, usize)>, m| match acc {
            None => Some((m.start(), 1)),
            Some((at, n)) => Some((at, n + 1)),
        });
        let found = found.map(|(at, matches)| {
            let (snippet, ranges) = snippet(&data, at, query);
            Found { role: String::new(), kind: "tool_result", snippet, ranges, matches }
        });
        out.insert(name, Spill { bytes: meta.len(), found });
    }
    Ok(out)
}

/// The writer's line prefixes that say what an entry is without parsing it.
const CHECKPOINT_PREFIX: &[u8] = br#"{"type":"checkpoint","#;
const ASSISTANT_PREFIX: &[u8] = br#"{"type":"message","role":"assistant","#;
const REPLACE_PREFIX: &[u8] = br#"{"type":"replace","#;

/// Whether an answer restored from checkpoints alone may hold the text: its text is spread over
/// several lines, so no line needs to match. A run of checkpoints of one answer followed by that
/// answer's final message (an assistant message, or a replace) is superseded and left out at the
/// cost of comparing a few bytes; any other run is parsed and its text searched.
fn interrupted_match(log: &[u8], query: &Query) -> bool {
    let mut pos = 0;
    while let Some(at) = query.checkpoint.find(&log[pos..]) {
        let start = pos + at;
        pos = start + 1;
        // Only our writer writes checkpoints, always with this prefix at the start of the line (inside
        // a line it is a tool call's arguments).
        if start > 0 && log[start - 1] != b'\n' {
            continue;
        }
        let mut run = Vec::new();
        let mut next = start;
        let mut following: &[u8] = &[];
        while next < log.len() {
            let end = memchr::memchr(b'\n', &log[next..]).map_or(log.len(), |i| next + i);
            let line = &log[next..end];
            if !line.starts_with(CHECKPOINT_PREFIX) {
                following = line;
                break;
            }
            run.push(line);
            next = end + 1;
        }
        pos = next;
        let one_answer = answer_of(run[0]).is_some() && answer_of(run[0]) == answer_of(run[run.len() - 1]);
        if one_answer && (following.starts_with(ASSISTANT_PREFIX) || following.starts_with(REPLACE_PREFIX)) {
            continue;
        }
        let mut text = String::new();
        let mut answer = None;
        for line in run {
            let (Parsed::Entry(e) | Parsed::Repaired(e)) = parse_line(line) else { continue };
            if answer.as_ref() != Some(&e.answer) {
                if query.decoded.is_match(&text) {
                    return true;
                }
                text.clear();
                answer = Some(e.answer.clone());
            }
            text.push_str(&e.content);
        }
        if query.decoded.is_match(&text) {
            return true;
        }
    }
    false
}

/// Where the checkpoint lines that end `chunk` (complete lines) start; `None` when it does not end
/// with one.
fn trailing_checkpoints(chunk: &[u8]) -> Option<usize> {
    let mut start = chunk.len();
    while start > 0 {
        let line_start = memchr::memrchr(b'\n', &chunk[..start - 1]).map_or(0, |i| i + 1);
        if !chunk[line_start..].starts_with(CHECKPOINT_PREFIX) {
            break;
        }
        start = line_start;
    }
    (start < chunk.len()).then_some(start)
}

/// The raw `answer` id of a checkpoint line.
fn answer_of(line: &[u8]) -> Option<&[u8]> {
    let at = memchr::memmem::find(line, br#""answer":""#)? + br#""answer":""#.len();
    let len = memchr::memchr(b'"', &line[at..])?;
    Some(&line[at..at + len])
}

/// Start offsets (plus `base`) of the lines of `log` where `raw` matches, in order, each once.
fn candidate_lines(log: &[u8], base: u64, raw: &regex::bytes::Regex) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(m) = raw.find_at(log, at) {
        let start = memchr::memrchr(b'\n', &log[..m.start()]).map_or(0, |i| i + 1);
        out.push(base + start as u64);
        // The rest of the line is a candidate already.
        match memchr::memchr(b'\n', &log[m.end()..]) {
            Some(i) => at = m.end() + i + 1,
            None => break,
        }
    }
    out
}

/// One line of `text` around the match at byte `at`: from the line's start (at most
/// [`SNIPPET_BEFORE`] bytes before the match), whitespace runs collapsed to one space, `…` where
/// the text was cut; and the byte ranges of the matches in it.
fn snippet(text: &[u8], at: usize, query: &Query) -> (String, Vec<[usize; 2]>) {
    let line_start = memchr::memrchr(b'\n', &text[..at]).map_or(0, |i| i + 1);
    let mut start = line_start.max(at.saturating_sub(SNIPPET_BEFORE));
    while start < at && (text[start] & 0xC0) == 0x80 {
        start += 1;
    }
    let mut end = (at + SNIPPET_AFTER).min(text.len());
    while end < text.len() && (text[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let window = String::from_utf8_lossy(&text[start..end]);
    let mut out = String::with_capacity(window.len() + 6);
    if start > 0 && text[start - 1] != b'\n' {
        out.push('…');
    }
    let mut space = false;
    for c in window.trim_start().chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c);
    }
    if end < text.len() {
        out.push('…');
    }
    let ranges = query.decoded.find_iter(&out).map(|m| [m.start(), m.end()]).collect();
    (out, ranges)
}
