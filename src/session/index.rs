//! The workspace's index of its sessions' list entries, `.PseudoClaude/sessions-index.jsonl`: what
//! the full list reads instead of one `summary.json` per session (10,000 sessions: 300 ms without
//! it, a few milliseconds with it).
//!
//! It is derived, never a source of truth: any session it cannot vouch for is summarised from its
//! log as before ([`super::list`]'s `summary.json` and its staleness rules), and a missing, damaged
//! or older-version index is rebuilt that way. It is replaced atomically (a temporary file renamed
//! over it), so a reader sees a whole index, old or new; with two editors, the last writer wins,
//! and either index is checked as below before use.
//!
//! The format: JSON lines. The first is the [`Header`]; each other line one session, a JSON array
//! ([`Row`]). It lives in `.PseudoClaude`, not in `sessions/`, so writing it does not change the
//! `sessions` folder's modification time, which is half of how staleness is detected:
//! - sessions added or removed (a new session, a fork, an import, a copied folder, a delete, the
//!   retention) change the `sessions` folder's modification time: the index's set of ids is used
//!   only while that time is the one seen before the index was built; otherwise the folder is read;
//! - a log written by anyone through the writer (this editor, another one, the CLI) appends a line
//!   to `sessions/activity` ([`super::activity`]): the lines appended since the index was built
//!   name the sessions whose logs may have changed, and those are checked against their log's size
//!   and modification time (the row's), and summarised again when either differs. When the
//!   activity file was replaced or cut (compacted) since, every session is checked that way.
//!
//! A log changed by something that neither writes the activity file nor adds or removes a folder
//! (an editor of the JSONL by hand) is seen at the next full check: when the activity file is
//! compacted, or the index rebuilt.
//!
//! Tested through the list, in `list_tests.rs` (`the_index_*`).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::activity::ACTIVITY_FILE_NAME;
use super::contain::{Access, Dir};
use super::entry::{ForkedFrom, ImportedFrom};
use super::{CONVERSATION_FILE_NAME, ROOT_DIR_NAME, SESSIONS_DIR_NAME, is_valid_id};
use crate::usage::UsageByModel;

pub const INDEX_FILE_NAME: &str = "sessions-index.jsonl";
/// 1: the first. 2: rows end with the lock file's inode, and are written in list order. 3: rows end with the ACP
/// agent's own session id. 4: and where an imported session came from.
const INDEX_VERSION: u32 = 4;
/// Activity lines read past the index's offset above which the index is rewritten even when no
/// row changed (so the next list does not read them again).
const REWRITE_AFTER_ACTIVITY_BYTES: u64 = 64 * 1024;

/// The index's first line: what it was built against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header {
    version: u32,
    /// The version of the fold the rows were made with (the list's summary version): a newer fold
    /// counts what an older one skipped, so its rows are not reused.
    fold: u32,
    /// Modification time of the `sessions` folder (ns) seen before the folder was read.
    sessions_mtime_ns: i64,
    /// The activity file's inode (0: none) and how much of it the index has taken into account
    /// (the end of its last complete line seen before the logs were read).
    activity_ino: u64,
    activity_offset: u64,
    /// The activity file's bytes before `activity_offset` (up to 64): a file replaced since (compacted,
    /// rewritten), even under a reused inode number, differs there.
    activity_tail: Vec<u8>,
}

/// One session: its list entry as of the log's `bytes` and `modified_ns`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row(
    pub String,               // id
    pub u64,                  // bytes
    pub i64,                  // modified_ns
    pub String,               // title (the shown one)
    pub String,               // model
    pub usize,                // messages
    pub usize,                // entries
    pub i64,                  // last_message
    pub usize,                // bad_lines
    pub usize,                // repaired
    pub u64,                  // torn_tail_bytes
    pub Option<String>,       // branch
    pub Option<String>,       // commit
    pub UsageByModel,         // usage per model
    pub bool,                 // pinned
    pub Option<ForkedFrom>,   // forked_from
    pub u64, // the lock file's inode when the row was made (0: none), see [`super::list::lock_holders`]
    pub Option<String>, // agent: the ACP agent's name
    pub Option<String>, // agent_session: the ACP agent's own id of the session
    pub Option<ImportedFrom>, // imported_from: the other agent's session it is a copy of
);

/// Every listable session of the workspace (unfiltered, unsorted), through the index: rows it can
/// vouch for as they are, the others from `summarise` (a session's row from its log; `None` when
/// it is not listable). Writes the index back when it was missing, damaged or out of date.
pub(crate) fn entries(workspace: &Path, root: &Dir, fold: u32, summarise: impl Fn(&str) -> Option<Row>) -> Vec<Row> {
    let Ok(home) = Dir::workspace(workspace).and_then(|w| w.subdir(ROOT_DIR_NAME)) else {
        return Vec::new();
    };
    // What the index will be built against, seen before anything is read.
    let sessions_mtime_ns = home.mtime_ns(SESSIONS_DIR_NAME).unwrap_or(0);
    let (activity_ino, activity_len) = root
        .open_stat(ACTIVITY_FILE_NAME, Access::Read)
        .map(|(f, m)| (m.ino(), m.len(), f))
        .map_or((0, 0), |(ino, len, _)| (ino, len));
    let old = read(&home).filter(|(h, _)| h.fold == fold);
    let (rows, old_header) = match old {
        Some((h, rows)) => (rows, Some(h)),
        None => (Vec::new(), None),
    };
    // Whose logs may have changed: those the activity names since, or all.
    let (suspects, activity_offset) = match &old_header {
        Some(h)
            if h.activity_ino == activity_ino
                && h.activity_offset <= activity_len
                && activity_bytes(root, tail_start(h.activity_offset), h.activity_offset).as_ref()
                    == Some(&h.activity_tail) =>
        {
            let (named, end) = named_since(root, h.activity_offset, activity_len);
            (Some(named), end)
        }
        _ => (None, complete_end(root, activity_len)),
    };
    let checked_all = suspects.is_none();
    let mut changed = old_header.is_none();
    // A row is kept when no activity line names its session since, or its log's size and time are the row's.
    let vouched = |row: &Row| {
        suspects.as_ref().is_some_and(|s| !s.contains(&row.0)) || log_stat(root, &row.0) == Some((row.1, row.2))
    };
    let same_folder =
        old_header.as_ref().is_some_and(|h| h.sessions_mtime_ns == sessions_mtime_ns && sessions_mtime_ns != 0);
    let mut kept = if same_folder {
        // The same sessions as when the index was built: its rows, in place (100,000 of them are not moved).
        let mut kept = rows;
        let mut gone = false;
        for row in kept.iter_mut() {
            if !vouched(row) {
                changed = true;
                match summarise(&row.0) {
                    Some(new) => *row = new,
                    None => {
                        gone = true;
                        row.0.clear(); // no longer listable: dropped below
                    }
                }
            }
        }
        if gone {
            kept.retain(|r| !r.0.is_empty());
        }
        kept
    } else {
        // Sessions added or removed since: the folder says which are there.
        let mut kept: Vec<Row> = Vec::with_capacity(rows.len());
        let mut rows: HashMap<String, Row> = rows.into_iter().map(|r| (r.0.clone(), r)).collect();
        for id in folder_ids(root) {
            match rows.remove(&id) {
                Some(row) if vouched(&row) => kept.push(row),
                _ => {
                    changed = true;
                    kept.extend(summarise(&id));
                }
            }
        }
        changed |= !rows.is_empty(); // rows of sessions no longer there
        kept
    };
    let activity_tail = activity_bytes(root, tail_start(activity_offset), activity_offset).unwrap_or_default();
    let header =
        Header { version: INDEX_VERSION, fold, sessions_mtime_ns, activity_ino, activity_offset, activity_tail };
    let moved = old_header.as_ref().is_some_and(|h| {
        h.sessions_mtime_ns != header.sessions_mtime_ns
            || h.activity_ino != header.activity_ino
            || checked_all
            || header.activity_offset.saturating_sub(h.activity_offset) > REWRITE_AFTER_ACTIVITY_BYTES
    });
    if changed || moved {
        // In list order, so that the next list's sort of what it reads finds it sorted (one pass, no moves).
        if changed {
            kept.sort_by(list_order);
        }
        // The index only saves time: failing to write it (a read-only checkout) is not an error.
        let _ = write(&home, &header, &kept);
    }
    kept
}

/// What a full list depends on besides the logs' own contents, read without reading the index: the `sessions`
/// folder's modification time (sessions added or removed) and the activity file's inode, length and modification
/// time (a log written through any writer). While it is the same, [`entries`] gives the same rows, so a list made
/// then may be handed out again ([`crate::bridge`] keeps the last one packed): both see the changes the index sees,
/// and a log edited by hand is seen by neither until the activity file is compacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    sessions_mtime_ns: i64,
    activity: Option<(u64, u64, i64)>,
}

impl Stamp {
    /// Whether the `sessions` folder changed less than `secs` before `now_ns`: a change in the same clock tick as
    /// the stamp would not move its time, so a list made then is not kept.
    pub fn fresh(&self, now_ns: i64, secs: i64) -> bool {
        now_ns.saturating_sub(self.sessions_mtime_ns) < secs.saturating_mul(1_000_000_000)
    }
}

/// The sessions whose logs were written between stamp `before` and the later stamp `now` of the same workspace, when
/// that is all that changed: the same `sessions` folder time, the same activity file grown by whole lines (each
/// names the session a writer appended to). `None` when anything else changed, or a line was cut at either stamp.
pub fn written_between(workspace: &Path, before: &Stamp, now: &Stamp) -> Option<HashSet<String>> {
    let ((ino0, len0, _), (ino1, len1, _)) = (before.activity?, now.activity?);
    if before.sessions_mtime_ns != now.sessions_mtime_ns || ino0 != ino1 || len1 < len0 {
        return None;
    }
    let root = Dir::sessions(workspace).ok()?;
    let from = len0.saturating_sub(1); // the byte before: the end of a whole line
    let bytes = activity_bytes(&root, from, len1)?;
    let whole = |b: Option<&u8>| b.is_none_or(|&c| c == b'\n');
    if (len0 > 0 && !whole(bytes.first())) || !whole(bytes.last()) {
        return None;
    }
    let lines = if len0 > 0 { &bytes[1.min(bytes.len())..] } else { &bytes[..] };
    let ids = lines.split(|&b| b == b'\n').filter_map(|line| {
        let id = std::str::from_utf8(line.split(|&b| b == b' ').next()?).ok()?;
        is_valid_id(id).then(|| id.to_string())
    });
    Some(ids.collect())
}

/// The workspace's [`Stamp`] now (three `stat`s), or `None` when there is no `sessions` folder to stamp.
pub fn stamp(workspace: &Path) -> Option<Stamp> {
    let home = Dir::workspace(workspace).and_then(|w| w.subdir(ROOT_DIR_NAME)).ok()?;
    let sessions_mtime_ns = home.mtime_ns(SESSIONS_DIR_NAME)?;
    let root = home.subdir(SESSIONS_DIR_NAME).ok()?;
    let activity = root.stat_file(ACTIVITY_FILE_NAME);
    Some(Stamp { sessions_mtime_ns, activity })
}

/// The list's order: pinned first, then newest first (log modification time, then id).
pub(crate) fn list_order(a: &Row, b: &Row) -> std::cmp::Ordering {
    b.14.cmp(&a.14).then_with(|| b.2.cmp(&a.2)).then_with(|| b.0.cmp(&a.0))
}

/// The valid session ids of the `sessions` folder (folders only, links left out).
fn folder_ids(root: &Dir) -> Vec<String> {
    let Ok(rd) = fs::read_dir(root.path()) else { return Vec::new() };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().filter(|n| is_valid_id(n)).map(str::to_string))
        .collect()
}

/// The log's size and modification time (ns), without following a link.
fn log_stat(root: &Dir, id: &str) -> Option<(u64, i64)> {
    root.size_mtime_ns(&format!("{id}/{CONVERSATION_FILE_NAME}"))
}

/// The ids the activity file's complete lines name between `from` and `len`, and the end of the
/// last complete line (where the next look starts: a line being written is read whole next time).
fn named_since(root: &Dir, from: u64, len: u64) -> (HashSet<String>, u64) {
    let mut named = HashSet::new();
    if len == from {
        return (named, from);
    }
    let Some(buf) = activity_bytes(root, from, len) else { return (named, from) };
    let end = memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1);
    for line in buf[..end].split(|&b| b == b'\n') {
        let id = line.split(|&b| b == b' ').next().unwrap_or_default();
        if let Ok(id) = std::str::from_utf8(id)
            && is_valid_id(id)
        {
            named.insert(id.to_string());
        }
    }
    (named, from + end as u64)
}

/// The end of the activity file's last complete line within its first `len` bytes.
fn complete_end(root: &Dir, len: u64) -> u64 {
    let from = len.saturating_sub(4096);
    activity_bytes(root, from, len)
        .and_then(|buf| memchr::memrchr(b'\n', &buf).map(|i| from + i as u64 + 1))
        .unwrap_or(from.min(len))
}

fn tail_start(offset: u64) -> u64 {
    offset.saturating_sub(64)
}

fn activity_bytes(root: &Dir, from: u64, len: u64) -> Option<Vec<u8>> {
    if from >= len {
        return Some(Vec::new());
    }
    let mut f = root.open(ACTIVITY_FILE_NAME, Access::Read).ok()?;
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::with_capacity((len - from) as usize);
    f.take(len - from).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// Index rows above which [`read`] parses them on two threads (100,000 rows: about 15 MB of JSON).
const PARALLEL_ROWS_BYTES: usize = 1 << 20;

/// The index [`read`] parsed last, its bytes and what they hold, kept for the next list of the same workspace: the
/// same bytes are not parsed again (100,000 rows: comparing 15 MB and copying the rows costs a fraction of parsing
/// them, issue 39: the full list runs on the editor's main loop). One index, the last read.
static PARSED: std::sync::Mutex<Option<Parsed>> = std::sync::Mutex::new(None);

/// An index file's bytes, its header and its rows.
type Parsed = (Vec<u8>, Header, Vec<Row>);

/// The index, when it is there, whole, and of this version.
fn read(home: &Dir) -> Option<(Header, Vec<Row>)> {
    let (mut file, meta) = home.open_stat(INDEX_FILE_NAME, Access::Read).ok()?;
    let mut data = Vec::with_capacity(meta.len() as usize + 1);
    file.read_to_end(&mut data).ok()?;
    if let Some((bytes, header, rows)) = PARSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()
        && *bytes == data
    {
        return Some((header.clone(), rows.clone()));
    }
    let (header, rows) = parse(&data)?;
    *PARSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((data, header.clone(), rows.clone()));
    Some((header, rows))
}

/// The index file's header and rows, when it is whole and of this version.
fn parse(data: &[u8]) -> Option<(Header, Vec<Row>)> {
    let header_end = memchr::memchr(b'\n', data)?;
    let header: Header = serde_json::from_slice(&data[..header_end]).ok()?;
    if header.version != INDEX_VERSION {
        return None;
    }
    // The file ends with a newline; a missing one means it was cut (by hand: it is renamed into place).
    if data.last() != Some(&b'\n') {
        return None;
    }
    let body = &data[header_end + 1..];
    // A large index is parsed in two halves at once (a line boundary near the middle), each on a core.
    let split = (body.len() >= PARALLEL_ROWS_BYTES && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
        .then(|| memchr::memchr(b'\n', &body[body.len() / 2..]).map(|i| body.len() / 2 + i + 1))
        .flatten();
    let rows = match split {
        Some(mid) => {
            let (a, b) = body.split_at(mid);
            let total = memchr::memchr_iter(b'\n', body).count();
            let (a, b) = std::thread::scope(|s| {
                let second = s.spawn(|| parse_rows(b, 0));
                (parse_rows(a, total), second.join().ok().flatten())
            });
            let (mut a, b) = (a?, b?);
            a.extend(b);
            a
        }
        None => parse_rows(body, 0)?,
    };
    Some((header, rows))
}

/// The rows of whole lines of the index, in a vector with room for `capacity` (at least them); `None`
/// when a line is not a row.
fn parse_rows(body: &[u8], capacity: usize) -> Option<Vec<Row>> {
    let mut rows = Vec::with_capacity(capacity.max(memchr::memchr_iter(b'\n', body).count()));
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        rows.push(serde_json::from_slice(line).ok()?);
    }
    Some(rows)
}

fn write(home: &Dir, header: &Header, rows: &[Row]) -> std::io::Result<()> {
    let mut data = serde_json::to_vec(header).map_err(std::io::Error::other)?;
    data.push(b'\n');
    for row in rows {
        serde_json::to_writer(&mut data, row).map_err(std::io::Error::other)?;
        data.push(b'\n');
    }
    home.replace_file(INDEX_FILE_NAME, &data)?;
    // what the next list reads: not parsed again
    *PARSED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((data, header.clone(), rows.to_vec()));
    Ok(())
}
