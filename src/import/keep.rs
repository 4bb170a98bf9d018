//! Other agents' sessions kept in our store (issue 46, "Kept"): every session of the workspace that another agent
//! (Claude Code, Codex, ...) keeps is copied into `.PseudoClaude/sessions/` as a session of ours, and the copy is
//! brought up to date whenever the original changes, so the agents' own clean-ups (Claude Code's
//! `cleanupPeriodDays`, Gemini's `sessionRetention`) lose nothing.
//!
//! A copy is an import ([`super::import`]) marked `imported_from.kept`, with two differences, both so that a copy
//! never loses what it held:
//! - its history is the original's whole conversation, every segment one after the other (a compaction's summary is
//!   a message like the others), not the last segment: a `replace` would hide what came before it from search,
//!   preview and export, which see the history a resume restores;
//! - it only ever grows. Each sync appends what the original gained as plain `message` lines, followed by a `kept`
//!   line ([`KeptState`]: the original's size and time, and the hash of its converted messages' keys). When the
//!   original was rewritten (Gemini's `$rewindTo`, an edited or truncated file), the messages it no longer holds
//!   stay in the copy and the ones it holds that the copy does not are appended after them. The one `replace` a
//!   sync may write is when the copy's last message grew in the original (an answer read while Claude Code was
//!   still writing its lines): the copy's history with that message in its fuller form, nothing dropped.
//!
//! A copy is synced only while nothing but `title`, `pin` and `kept` lines follow its last `kept` line: once a chat
//! writes to it (a resume, the continuation by the original agent), the chat's log is the record, and the copy is
//! left alone. A copy whose log is locked (a live chat, another editor) waits for the next sync.
//!
//! [`Keeper`] runs the syncs for a workspace on a thread of its own: one at start, then one each time an inotify watch
//! on the stores' folders reports a change (a quiet period of [`SETTLE`] first), and one every [`RESCAN`] whatever the
//! watch says. [`keep`] is one sync, for `:PseudoKeep` and the CLI. [`stores`] says which agents' stores exist and how
//! long each agent keeps its sessions, for `:checkhealth`.
//!
//! Architecture invariant: the originals are only ever read (as every import reads them); a copy's log is written
//! only through its [`Writer`], under its lock, by appends (the one `replace` holds every message before it).

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::list::{ListOptions, list_with, ours_already};
use super::{Conversation, ExternalItem, Homes, Source, fold};
use crate::message::{Message, Role, now};
use crate::session::contain::{Access, Dir};
use crate::session::entry::{Entry, ImportedFrom, KeptState, Kind};
use crate::session::{self, Context, Error, Result, Writer, WriterOptions};

/// How long the stores must be quiet after a change before a sync reads them (an agent writes a turn's lines in a
/// burst).
pub const SETTLE: Duration = Duration::from_millis(150);
/// A sync this often even when the watch reports nothing (a folder it could not watch, a network file system).
pub const RESCAN: Duration = Duration::from_secs(30);
/// The reason of the `replace` a sync writes when the copy's last message grew in the original.
pub const REASON_KEPT: &str = "kept";
/// The file mapping each original (`source:id`) to its copy, in `.PseudoClaude/sessions/` (a name no session id
/// can have). A hint: rebuilt from the logs' first lines when missing or damaged.
pub const MAP_FILE_NAME: &str = "kept.json";
/// Bytes read from the end of a copy's log to find its last `kept` line.
const TAIL_BYTES: u64 = 16 * 1024;

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// Originals copied for the first time.
    pub copied: usize,
    /// Copies that gained messages.
    pub updated: usize,
    /// Copies already up to date.
    pub unchanged: usize,
    /// Copies continued in a chat (left alone: the chat's log is the record).
    pub continued: usize,
    /// Originals not copied this time, and why (a locked copy, an unsupported file, one that holds no message).
    pub skipped: Vec<String>,
    /// Originals whose copy failed, and why.
    pub failed: Vec<String>,
}

/// What happened to one original.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Copied(String),
    Updated(String),
    Unchanged(String),
    Continued(String),
    Skipped(String),
}

/// Copies every session of the workspace's other agents (the ones [`list_with`] lists) into our store, or brings
/// its copy up to date. Never fails as a whole: what failed is named in the report.
pub fn keep(workspace: &Path, homes: &Homes) -> Report {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    // a conversation of ours already (a session we ran with the agent, or handed back to it) is not kept twice
    let ours = session::list(&ws, &session::ListOptions::default()).unwrap_or_default();
    let is_ours = ours_already(&ours, false);
    let items: Vec<ExternalItem> =
        list_with(&ws, homes, &ListOptions::default()).into_iter().filter(|i| !is_ours(i)).collect();
    let mut report = Report::default();
    let mut map = take_map(&ws);
    let before = map.clone();
    for item in &items {
        match keep_item(&ws, item, &mut map) {
            Ok(Outcome::Copied(_)) => report.copied += 1,
            Ok(Outcome::Updated(_)) => report.updated += 1,
            Ok(Outcome::Unchanged(_)) => report.unchanged += 1,
            Ok(Outcome::Continued(_)) => report.continued += 1,
            Ok(Outcome::Skipped(why)) => report.skipped.push(format!("{}: {why}", item.path.display())),
            Err(e) => report.failed.push(format!("{}: {e}", item.path.display())),
        }
    }
    put_map(&ws, map, before);
    report
}

/// Copies one original, or brings its copy up to date. `map` is the workspace's originals-to-copies map.
pub fn keep_item(ws: &Path, item: &ExternalItem, map: &mut HashMap<String, String>) -> Result<Outcome> {
    if let Some(why) = &item.unsupported {
        return Ok(Outcome::Skipped(why.clone()));
    }
    let key = key_of(item.source, &item.session_id);
    if let Some(id) = map.get(&key).cloned() {
        match Context::open(ws, &id) {
            Ok(ctx) => return update(&ctx, item),
            Err(e) if e.is_not_found() || matches!(e, Error::NotFound { .. }) => {
                // the copy was deleted: the original is kept again
                map.remove(&key);
            }
            Err(e) => return Err(e),
        }
    }
    let outcome = create(ws, item)?;
    if let Outcome::Copied(id) = &outcome {
        map.insert(key, id.clone());
    }
    Ok(outcome)
}

/// The kept copy of the original `source`/`id` (the file at `path`), brought up to date, when the workspace has one:
/// what an import of that original returns.
pub fn update_copy(workspace: &Path, source: Source, id: &str, path: &Path) -> Option<Result<String>> {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let map = take_map(&ws);
    let unchanged = map.clone();
    let found = map.get(&key_of(source, id)).and_then(|cid| Context::open(&ws, cid).ok());
    let out = found.map(|ctx| {
        let item = ExternalItem {
            source,
            agent: source.agent().to_string(),
            id: format!("{}:{id}", source.agent()),
            session_id: id.to_string(),
            path: path.to_path_buf(),
            title: String::new(),
            modified: 0,
            messages: 0,
            model: String::new(),
            branch: None,
            unsupported: None,
            notes: Vec::new(),
            partial: false,
        };
        update(&ctx, &item).map(|_| ctx.id.clone())
    });
    put_map(&ws, map, unchanged);
    out
}

fn key_of(source: Source, id: &str) -> String {
    format!("{source}:{id}")
}

/// The original's conversion, flattened: every segment folded as the loader folds a log, one after the other.
fn flattened(c: &Conversation) -> Vec<Message> {
    c.segments.iter().flat_map(|s| fold(s)).collect()
}

fn read_item(item: &ExternalItem) -> Result<Conversation> {
    super::read_item(item)
}

/// The original's size and time: what says it may have changed. A database in WAL mode (opencode's) changes in its
/// `-wal` file first (the database file only at a checkpoint): both count.
fn stat(path: &Path) -> Result<(u64, i64)> {
    let m = std::fs::metadata(path).map_err(session::io_err("cannot read", path))?;
    let (mut bytes, mut mtime) = (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(w) = std::fs::metadata(&wal) {
        bytes += w.len();
        mtime = mtime.max(w.mtime() * 1_000_000_000 + w.mtime_nsec());
    }
    Ok((bytes, mtime))
}

fn create(ws: &Path, item: &ExternalItem) -> Result<Outcome> {
    let (bytes, mtime_ns) = stat(&item.path)?;
    let conv = read_item(item)?;
    let messages = flattened(&conv);
    if messages.is_empty() {
        return Ok(Outcome::Skipped("holds no conversation yet (no user or assistant message)".into()));
    }
    let ctx = Context::new(ws)?;
    let written = (|| {
        let writer = Writer::open(&ctx, WriterOptions { model: conv.model.clone(), ..Default::default() })?;
        let ts = now();
        let logged = messages.iter().map(|m| writer.as_logged(m)).collect::<Result<Vec<_>>>()?;
        let mut first = Entry::replace(super::REASON_IMPORT, logged, ts);
        first.model = conv.model.clone();
        first.imported_from = Some(ImportedFrom {
            source: item.source.as_str().to_string(),
            id: conv.id.clone(),
            path: item.path.to_string_lossy().into_owned(),
            bytes: Some(bytes),
            mtime: Some(mtime_ns.div_euclid(1_000_000_000)),
            kept: true,
        });
        let mut entries = vec![first];
        let title = conv.shown_title();
        if !title.is_empty() {
            entries.push(Entry::title(&title, ts));
        }
        entries.push(Entry::kept(state(item, bytes, mtime_ns, &messages), ts));
        // one write: a copy without its `kept` line would look continued, and never be synced again
        writer.append_entries(entries)?;
        writer.close()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&ctx.dir);
        return Err(e);
    }
    Ok(Outcome::Copied(ctx.id))
}

fn state(item: &ExternalItem, bytes: u64, mtime_ns: i64, messages: &[Message]) -> KeptState {
    KeptState {
        source: item.source.as_str().to_string(),
        id: item.session_id.clone(),
        bytes,
        mtime_ns,
        messages: messages.len(),
        hash: hash(messages),
        hash_head: hash(&messages[..messages.len().saturating_sub(1)]),
    }
}

/// Where a copy's log stands after its last `kept` line.
enum Tail {
    /// Only `title`, `pin` and `kept` lines since: the copy follows its original.
    Kept(KeptState),
    /// A chat wrote to it since (or it has no `kept` line at all): left alone.
    Continued,
}

fn update(ctx: &Context, item: &ExternalItem) -> Result<Outcome> {
    let Tail::Kept(last) = tail(ctx)? else { return Ok(Outcome::Continued(ctx.id.clone())) };
    let (bytes, mtime_ns) = stat(&item.path)?;
    if last.bytes == bytes && last.mtime_ns == mtime_ns {
        return Ok(Outcome::Unchanged(ctx.id.clone()));
    }
    let conv = read_item(item)?;
    let new = flattened(&conv);
    let writer = match Writer::open(ctx, WriterOptions::default()) {
        Ok(w) => w,
        Err(Error::Locked { holder, .. }) => {
            return Ok(Outcome::Skipped(format!("its copy {} is open in {holder}: kept at the next sync", ctx.id)));
        }
        Err(e) => return Err(e),
    };
    // the lock is ours now: a chat that wrote meanwhile shows in the tail
    let Tail::Kept(last) = tail(ctx)? else { return Ok(Outcome::Continued(ctx.id.clone())) };
    let n = last.messages;
    let kept = Entry::kept(state(item, bytes, mtime_ns, &new), now());
    if new.len() == n && hash(&new) == last.hash {
        // the file changed, not its conversation (a record that is no message; another session of a database)
        return Ok(Outcome::Unchanged(ctx.id.clone()));
    }
    let grew = if new.len() >= n && hash(&new[..n]) == last.hash {
        // the usual case: the original gained messages at its end
        append(&writer, &new[n..], kept)?
    } else if n > 0 && new.len() >= n && hash(&new[..n - 1]) == last.hash_head {
        // only the last message changed: it grew (read while the agent was writing it), or it was rewritten
        let mut had = session::load(ctx)?.messages;
        match had.last() {
            Some(old) if subsumed(old, &new[n - 1]) => {
                had.pop();
                had.extend_from_slice(&new[n - 1..]);
                let logged = had.iter().map(|m| writer.as_logged(m)).collect::<Result<Vec<_>>>()?;
                writer.append_entries(vec![Entry::replace(REASON_KEPT, logged, now()), kept])?;
                true
            }
            _ => union(ctx, &writer, &new, kept)?,
        }
    } else {
        union(ctx, &writer, &new, kept)?
    };
    writer.close()?;
    Ok(if grew { Outcome::Updated(ctx.id.clone()) } else { Outcome::Unchanged(ctx.id.clone()) })
}

/// Appends `messages` and the `kept` line in one write (one sync). True when there were messages.
fn append(writer: &Writer, messages: &[Message], kept: Entry) -> Result<bool> {
    let Some((last, before)) = messages.split_last() else {
        writer.append_entry(kept)?;
        return Ok(false);
    };
    let before = before.iter().map(|m| writer.as_logged(m).map(Entry::from_message)).collect::<Result<Vec<_>>>()?;
    writer.append_between(before, last, vec![kept])?;
    Ok(true)
}

/// The original was rewritten: what the copy holds stays, and each exchange of the original the copy does not hold
/// (a user or assistant message with the results of its calls) is appended after it, in the original's order.
fn union(ctx: &Context, writer: &Writer, new: &[Message], kept: Entry) -> Result<bool> {
    let had = session::load(ctx)?.messages;
    let held: HashSet<String> = had.iter().map(key).collect();
    let mut add = Vec::new();
    let mut i = 0;
    while i < new.len() {
        let mut j = i + 1;
        while j < new.len() && new[j].tool_result.is_some() {
            j += 1;
        }
        if !held.contains(&key(&new[i])) {
            add.extend_from_slice(&new[i..j]);
        }
        i = j;
    }
    append(writer, &add, kept)
}

/// What makes a message the same message for a sync: who, when, what it says and which calls it makes or answers.
/// A tool result's text is left out (a copy's large results are spilled: its log holds a preview).
fn key(m: &Message) -> String {
    let role = match m.role {
        Role::User => "u",
        Role::Assistant => "a",
        _ => "o",
    };
    let calls: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
    match &m.tool_result {
        Some(r) => format!("{role}\u{1}{}\u{1}r{}\u{1}{}", m.ts, r.tool_call_id, r.is_error),
        None => format!("{role}\u{1}{}\u{1}{}\u{1}{}", m.ts, m.content, calls.join(",")),
    }
}

/// `old` is an earlier form of `new`: the same message, its text and calls only grown.
fn subsumed(old: &Message, new: &Message) -> bool {
    old.role == new.role
        && old.ts == new.ts
        && old.tool_result.is_none()
        && new.tool_result.is_none()
        && new.content.starts_with(&old.content)
        && old.tool_calls.iter().all(|c| new.tool_calls.iter().any(|d| d.id == c.id))
}

fn hash(messages: &[Message]) -> String {
    let mut h = Sha256::new();
    for m in messages {
        h.update(key(m).as_bytes());
        h.update([0u8]);
    }
    h.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The copy's last `kept` state, read from the end of its log.
fn tail(ctx: &Context) -> Result<Tail> {
    let mut f = session::contain::open(ctx, session::CONVERSATION_FILE_NAME, Access::Read)?;
    let len = f.metadata().map_err(session::io_err("cannot read", &ctx.jsonl_path))?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(start)).map_err(session::io_err("cannot read", &ctx.jsonl_path))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(session::io_err("cannot read", &ctx.jsonl_path))?;
    // whole lines only: the first one read may be cut (unless the read started at the file's start), the bytes
    // after the last newline are a torn append
    let end = memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1);
    let from = if start == 0 { 0 } else { memchr::memchr(b'\n', &buf).map_or(buf.len(), |i| i + 1) };
    let text = String::from_utf8_lossy(&buf[from.min(end)..end]);
    for line in text.lines().rev() {
        let Ok(e) = serde_json::from_str::<Entry>(line) else { return Ok(Tail::Continued) };
        match e.kind.as_ref() {
            Some(Kind::Kept) => return Ok(e.kept.map_or(Tail::Continued, Tail::Kept)),
            Some(Kind::Title) | Some(Kind::Pin) => continue,
            _ => return Ok(Tail::Continued),
        }
    }
    Ok(Tail::Continued)
}

// -- the map of originals to copies --------------------------------------------------------------------------------

#[derive(Debug, Default, Serialize, Deserialize)]
struct MapFile {
    version: u32,
    workspace: PathBuf,
    copies: HashMap<String, String>,
}

const MAP_VERSION: u32 = 1;

/// Per workspace: the originals-to-copies map, once read.
static MAPS: LazyLock<Mutex<HashMap<PathBuf, HashMap<String, String>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn maps() -> MutexGuard<'static, HashMap<PathBuf, HashMap<String, String>>> {
    MAPS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Syncs of one workspace run one at a time (the keeper's, `:PseudoKeep`'s, an import's), so two never copy the same
/// original twice.
static SYNCS: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// Forgets the maps this process read (the files stay): for tests that lose a map on purpose.
pub fn forget() {
    maps().clear();
}

fn take_map(ws: &Path) -> HashMap<String, String> {
    // wait for another sync of the workspace to put the map back
    loop {
        {
            let mut busy = SYNCS.lock().unwrap_or_else(PoisonError::into_inner);
            if busy.insert(ws.to_path_buf()) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Some(m) = maps().get(ws) {
        return m.clone();
    }
    read_map(ws).unwrap_or_else(|| scan(ws))
}

fn put_map(ws: &Path, map: HashMap<String, String>, before: HashMap<String, String>) {
    if map != before {
        let file = MapFile { version: MAP_VERSION, workspace: ws.to_path_buf(), copies: map.clone() };
        if let (Ok(dir), Ok(data)) = (Dir::sessions(ws), serde_json::to_vec(&file)) {
            let _ = dir.replace_file(MAP_FILE_NAME, &data);
        }
    }
    maps().insert(ws.to_path_buf(), map);
    SYNCS.lock().unwrap_or_else(PoisonError::into_inner).remove(ws);
}

fn read_map(ws: &Path) -> Option<HashMap<String, String>> {
    let dir = Dir::sessions(ws).ok()?;
    let mut data = Vec::new();
    dir.open(MAP_FILE_NAME, Access::Read).ok()?.read_to_end(&mut data).ok()?;
    let file = serde_json::from_slice::<MapFile>(&data).ok()?;
    (file.version == MAP_VERSION && file.workspace == ws).then_some(file.copies)
}

/// The map rebuilt from the logs: every session whose first line says it is a kept copy.
fn scan(ws: &Path) -> HashMap<String, String> {
    let mut found: HashMap<String, (i64, String)> = HashMap::new();
    let Ok(dir) = std::fs::read_dir(session::sessions_dir(ws)) else { return HashMap::new() };
    for e in dir.flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        let Ok(ctx) = Context::for_id(ws, &id) else { continue };
        let Some(first) = super::first_line(&ctx.jsonl_path) else { continue };
        let Ok(entry) = serde_json::from_str::<Entry>(&first) else { continue };
        let Some(from) = entry.imported_from.filter(|f| f.kept) else { continue };
        let key = format!("{}:{}", from.source, from.id);
        // two copies of one original (two editors raced): the older one is kept up to date
        if found.get(&key).is_none_or(|(ts, old)| (entry.ts, &id) < (*ts, old)) {
            found.insert(key, (entry.ts, id));
        }
    }
    found.into_iter().map(|(k, (_, id))| (k, id)).collect()
}

// -- the keeper: a thread per workspace ------------------------------------------------------------------------------

/// The workspaces kept by this process, each with its keeper's stop flag.
static KEEPERS: LazyLock<Mutex<HashMap<PathBuf, Arc<AtomicBool>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// What the keeper of a workspace has done so far (for `:checkhealth` and the tests).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    pub running: bool,
    pub syncs: u64,
    /// Unix seconds of the last sync's end (0: none yet).
    pub last_sync: i64,
    pub last: Option<Report>,
    /// Folders watched; 0 with no inotify (then a sync every [`RESCAN`] only).
    pub watched: usize,
}

static STATUS: LazyLock<Mutex<HashMap<PathBuf, Status>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn status_mut<R>(ws: &Path, f: impl FnOnce(&mut Status) -> R) -> R {
    f(STATUS.lock().unwrap_or_else(PoisonError::into_inner).entry(ws.to_path_buf()).or_default())
}

/// The keeper's status for the workspace.
pub fn status(workspace: &Path) -> Status {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    STATUS.lock().unwrap_or_else(PoisonError::into_inner).get(&ws).cloned().unwrap_or_default()
}

/// Starts keeping the workspace's other-agent sessions on a thread of its own (nothing when it is kept already).
/// Returns at once.
pub fn start(workspace: &Path, homes: Homes) -> Result<bool> {
    let ws = workspace.canonicalize().map_err(session::io_err("cannot open the workspace", workspace))?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let mut keepers = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner);
        if keepers.contains_key(&ws) {
            return Ok(false);
        }
        keepers.insert(ws.clone(), stop.clone());
    }
    status_mut(&ws, |s| s.running = true);
    let thread_ws = ws.clone();
    let spawned = std::thread::Builder::new().name("pseudoclaude-keep".into()).spawn(move || {
        let ws = thread_ws;
        // a panic ends the keeper, never the editor
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&ws, &homes, &stop)));
        status_mut(&ws, |s| s.running = false);
        KEEPERS.lock().unwrap_or_else(PoisonError::into_inner).remove(&ws);
    });
    if let Err(e) = spawned {
        KEEPERS.lock().unwrap_or_else(PoisonError::into_inner).remove(&ws);
        status_mut(&ws, |s| s.running = false);
        return Err(session::io_err("cannot start the keeper for", &ws)(e));
    }
    Ok(true)
}

/// Stops the workspace's keeper after the sync under way, if any.
pub fn stop(workspace: &Path) {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    if let Some(flag) = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner).get(&ws) {
        flag.store(true, Ordering::SeqCst);
    }
}

fn run(ws: &Path, homes: &Homes, stop: &AtomicBool) {
    let mut watch = Inotify::new();
    let add_watches = |watch: &mut Option<Inotify>| {
        if let Some(w) = watch {
            for dir in watched_dirs(ws, homes) {
                w.add(&dir);
            }
        }
    };
    // watched before the first sync too: a turn written while it reads is then an event, not a wait for the rescan
    add_watches(&mut watch);
    loop {
        let report = keep(ws, homes);
        // and after each: a folder made meanwhile (a new day's, a new project's)
        add_watches(&mut watch);
        status_mut(ws, |s| {
            s.syncs += 1;
            s.last_sync = now();
            s.last = Some(report);
            s.watched = watch.as_ref().map_or(0, |w| w.dirs.len());
        });
        // wait for a change (or the rescan), then for the stores to be quiet
        let deadline = Instant::now() + RESCAN;
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let step = left.min(Duration::from_millis(250));
            let changed = match &mut watch {
                Some(w) => w.wait(step),
                None => {
                    std::thread::sleep(step);
                    false
                }
            };
            if changed {
                // quiet for SETTLE, but never more than a second: an agent busy for minutes is still followed
                let until = Instant::now() + Duration::from_secs(1);
                while Instant::now() < until && watch.as_mut().is_some_and(|w| w.wait(SETTLE)) {}
                break;
            }
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
    }
}

/// The folders whose changes may change what [`keep`] copies: each store's root, and every folder on the way from
/// it to the workspace's sessions (where a new session's file, or a new day's folder, appears).
pub fn watched_dirs(ws: &Path, homes: &Homes) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let roots = store_roots(homes);
    for r in &roots {
        dirs.push(r.clone());
    }
    if let Some(claude) = &homes.claude {
        let projects = claude.join("projects");
        let prefix = super::claude_code::folder_name(ws);
        if let Ok(entries) = std::fs::read_dir(&projects) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    dirs.push(e.path());
                }
            }
        }
    }
    if let Some(codex) = &homes.codex {
        // sessions/YYYY/MM/DD: every year and month folder (a new day's folder appears in them), and the days
        let mut level = vec![codex.join("sessions")];
        for _ in 0..3 {
            let mut next = Vec::new();
            for d in &level {
                if let Ok(entries) = std::fs::read_dir(d) {
                    next.extend(
                        entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()),
                    );
                }
            }
            dirs.extend(next.iter().cloned());
            level = next;
        }
    }
    for item in list_with(ws, homes, &ListOptions { quick: true, ..Default::default() }) {
        dirs.extend(item.path.parent().map(Path::to_path_buf));
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The folder of each store where a new session (or the folder that will hold it) appears.
pub fn store_roots(homes: &Homes) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(claude) = &homes.claude {
        roots.push(claude.join("projects"));
    }
    if let Some(codex) = &homes.codex {
        roots.push(codex.join("sessions"));
    }
    if let Some(gemini) = &homes.gemini {
        roots.push(gemini.join("tmp"));
    }
    if let Some(qwen) = &homes.qwen {
        roots.push(qwen.join("projects"));
    }
    if let Some(opencode) = &homes.opencode {
        roots.push(opencode.clone());
    }
    if let Some(pi) = &homes.pi {
        roots.push(pi.join("sessions"));
    }
    roots
}

/// An inotify instance watching folders (not their trees): any event is "look again".
struct Inotify {
    fd: std::os::fd::OwnedFd,
    dirs: HashSet<PathBuf>,
}

impl Inotify {
    fn new() -> Option<Inotify> {
        use std::os::fd::FromRawFd;
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a descriptor we just opened and own.
        Some(Inotify { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }, dirs: HashSet::new() })
    }

    /// Watches `dir` (once); a folder that does not exist yet is tried again at the next sync.
    fn add(&mut self, dir: &Path) {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        if self.dirs.contains(dir) {
            return;
        }
        let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return };
        let mask = libc::IN_CREATE
            | libc::IN_MODIFY
            | libc::IN_CLOSE_WRITE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | libc::IN_ONLYDIR;
        // SAFETY: a valid descriptor and a NUL-terminated path.
        if unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) } >= 0 {
            self.dirs.insert(dir.to_path_buf());
        }
    }

    /// Waits up to `timeout` for events; true when there were some (all drained).
    fn wait(&mut self, timeout: Duration) -> bool {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
        if n <= 0 {
            return false;
        }
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            // SAFETY: reading into a buffer we own, of its length.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if r <= 0 {
                break;
            }
            any |= events(&buf[..r as usize]).any(|name| !is_readers_file(name));
        }
        any
    }
}

/// The names of the events in what one `read` of an inotify descriptor returned (a folder's own event: empty).
fn events(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + HEAD > buf.len() {
            return None;
        }
        // the event's `len` (of its NUL-padded name) is its last field
        let len = u32::from_ne_bytes(buf[at + HEAD - 4..at + HEAD].try_into().ok()?) as usize;
        let name = buf.get(at + HEAD..at + HEAD + len)?;
        at += HEAD + len;
        Some(name.split(|b| *b == 0).next().unwrap_or_default())
    })
}

/// SQLite's shared-memory index (`opencode.db-shm`): every reader of a database in WAL mode, ours included, writes
/// it (the first one to open truncates it). A change there is no change of a session: watching it would make each
/// sync of opencode's sessions wake the next.
fn is_readers_file(name: &[u8]) -> bool {
    name.ends_with(b"-shm")
}

// -- how long each agent keeps its sessions (`:checkhealth`) --------------------------------------------------------

/// One agent's store, as `:checkhealth` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Store {
    /// The agent's name (as `sessions.list` rows name it).
    pub agent: String,
    /// Where its sessions are.
    pub path: PathBuf,
    /// The folder (opencode: the database) exists.
    pub found: bool,
    /// The workspace's sessions in it (listed).
    pub sessions: usize,
    /// What the agent deletes by itself, as a sentence ("Gemini CLI deletes sessions older than 30 days, at each
    /// start"); `None`: nothing (or nothing known).
    pub deletes: Option<String>,
    /// Days after which the agent deletes a session itself, when it deletes by age.
    pub deletes_after_days: Option<f64>,
    /// Where that comes from (its setting and file, or the default).
    pub retention: String,
}

/// What an agent's settings say it deletes.
struct Retention {
    deletes: Option<String>,
    days: Option<f64>,
    text: String,
}

impl Retention {
    fn never(source: Source) -> Retention {
        Retention {
            deletes: None,
            days: None,
            text: format!("{} deletes no session by itself (none known)", source.name()),
        }
    }
}

/// The stores of the agents whose sessions this build reads, with what each agent deletes by itself.
pub fn stores(workspace: &Path, homes: &Homes) -> Vec<Store> {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let items = list_with(&ws, homes, &ListOptions::default());
    let mut out = Vec::new();
    let mut add = |source: Source, path: PathBuf, r: Retention| {
        out.push(Store {
            agent: source.agent().to_string(),
            found: path.exists(),
            path,
            sessions: items.iter().filter(|i| i.source == source).count(),
            deletes: r.deletes,
            deletes_after_days: r.days,
            retention: r.text,
        })
    };
    if let Some(claude) = &homes.claude {
        add(Source::ClaudeCode, claude.join("projects"), claude_retention(claude));
    }
    if let Some(codex) = &homes.codex {
        add(Source::Codex, codex.join("sessions"), Retention::never(Source::Codex));
    }
    if let Some(gemini) = &homes.gemini {
        add(Source::GeminiCli, gemini.join("tmp"), gemini_retention(gemini, &ws));
    }
    if let Some(qwen) = &homes.qwen {
        add(Source::QwenCode, qwen.join("projects"), Retention::never(Source::QwenCode));
    }
    if let Some(opencode) = &homes.opencode {
        add(Source::Opencode, opencode.join("opencode.db"), Retention::never(Source::Opencode));
    }
    if let Some(pi) = &homes.pi {
        let dir = homes.pi_session_dir.clone().unwrap_or_else(|| pi.join("sessions"));
        add(Source::Pi, dir, Retention::never(Source::Pi));
    }
    out
}

fn read_json(file: &Path) -> Option<serde_json::Value> {
    std::fs::read(file).ok().and_then(|b| serde_json::from_slice(&b).ok())
}

/// Claude Code removes transcripts older than `cleanupPeriodDays` (settings.json; 30 when unset) at its start-up.
fn claude_retention(config: &Path) -> Retention {
    let file = config.join("settings.json");
    let setting = read_json(&file).and_then(|v| v.get("cleanupPeriodDays").cloned());
    let (days, text) = match setting.as_ref().and_then(serde_json::Value::as_f64) {
        Some(d) => (d, format!("cleanupPeriodDays = {} in {}", setting.unwrap_or_default(), file.display())),
        None => (30.0, format!("cleanupPeriodDays unset in {} (default 30)", file.display())),
    };
    let deletes = format!("Claude Code deletes sessions older than {days} days at its start");
    Retention { deletes: Some(deletes), days: Some(days), text }
}

/// Gemini CLI deletes, at each start in a project, the sessions last updated longer than
/// `general.sessionRetention.maxAge` ago, and all but the newest `maxCount`: on unless `enabled` is false, `maxAge`
/// `30d` when unset (its settings' defaults). The user's `settings.json`, then the workspace's `.gemini/settings.json`
/// (Gemini reads it in a trusted folder), each key overriding the one before, as Gemini merges them. A setting Gemini
/// refuses (a period not `<n>h|d|w|m`, under `minRetention`, `maxCount` under 1, neither key) turns its clean-up off.
fn gemini_retention(gemini: &Path, ws: &Path) -> Retention {
    use serde_json::Value;
    let mut enabled = (true, None::<PathBuf>);
    let mut max_age = (Some("30d".to_string()), None::<PathBuf>);
    let mut min = "1d".to_string();
    let mut max_count = (None::<f64>, None::<PathBuf>);
    let mut files = Vec::new();
    for file in [gemini.join("settings.json"), ws.join(".gemini").join("settings.json")] {
        let Some(r) = read_json(&file).and_then(|v| v.pointer("/general/sessionRetention").cloned()) else { continue };
        if let Some(e) = r.get("enabled").and_then(Value::as_bool) {
            enabled = (e, Some(file.clone()));
        }
        match r.get("maxAge") {
            // an empty period is none, as Gemini's `if (maxAge)` reads it
            Some(Value::String(a)) if !a.is_empty() => max_age = (Some(a.clone()), Some(file.clone())),
            Some(Value::String(_) | Value::Null) => max_age = (None, Some(file.clone())),
            _ => {}
        }
        if let Some(m) = r.get("minRetention").and_then(Value::as_str) {
            min = m.to_string();
        }
        if let Some(c) = r.get("maxCount").and_then(Value::as_f64) {
            max_count = (Some(c), Some(file.clone()));
        }
        files.push(file);
    }
    let shown = |p: &Option<PathBuf>| p.as_ref().map_or("by default".to_string(), |p| format!("in {}", p.display()));
    let off = |text: String| Retention { deletes: None, days: None, text };
    if files.is_empty() {
        let text = format!(
            "general.sessionRetention unset in {} (default: on, maxAge 30d)",
            gemini.join("settings.json").display()
        );
        return gemini_deletes(Some(30.0), None, text);
    }
    if !enabled.0 {
        return off(format!("general.sessionRetention.enabled = false {}", shown(&enabled.1)));
    }
    let days = match &max_age.0 {
        Some(a) => match gemini_period_days(a) {
            Some(d) if d >= gemini_period_days(&min).unwrap_or(1.0) => Some(d),
            Some(_) => {
                return off(format!(
                    "general.sessionRetention.maxAge = {a} is under minRetention = {min}: Gemini CLI deletes nothing"
                ));
            }
            None => {
                return off(format!(
                    "general.sessionRetention.maxAge = {a} {} is no period Gemini CLI reads (<n>h, d, w or m): it deletes nothing",
                    shown(&max_age.1)
                ));
            }
        },
        None => None,
    };
    if max_count.0.is_some_and(|c| c < 1.0) || (days.is_none() && max_count.0.is_none()) {
        return off(
            "general.sessionRetention sets neither a valid maxAge nor maxCount: Gemini CLI deletes nothing".into()
        );
    }
    let mut text = Vec::new();
    if let Some(a) = &max_age.0 {
        text.push(format!("general.sessionRetention.maxAge = {a} {}", shown(&max_age.1)));
    }
    if let Some(c) = max_count.0 {
        text.push(format!("maxCount = {c} {}", shown(&max_count.1)));
    }
    gemini_deletes(days, max_count.0, text.join(", "))
}

fn gemini_deletes(days: Option<f64>, count: Option<f64>, text: String) -> Retention {
    let what = match (days, count) {
        (Some(d), Some(c)) => format!("sessions older than {d} days and all but the newest {c}"),
        (Some(d), None) => format!("sessions older than {d} days"),
        (None, Some(c)) => format!("all but the newest {c} sessions"),
        (None, None) => return Retention { deletes: None, days: None, text },
    };
    Retention { deletes: Some(format!("Gemini CLI deletes {what} at each start")), days, text }
}

/// A Gemini CLI period (`30d`, `24h`, `2w`, `1m` = 30 days) in days.
fn gemini_period_days(period: &str) -> Option<f64> {
    let unit = period.chars().last()?;
    let digits = &period[..period.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok().filter(|n| *n > 0)?;
    let per = match unit {
        'h' => 1.0 / 24.0,
        'd' => 1.0,
        'w' => 7.0,
        'm' => 30.0,
        _ => return None,
    };
    Some(n as f64 * per)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(role: Role, content: &str, ts: i64) -> Message {
        Message { role, content: content.into(), ts, ..Default::default() }
    }

    #[test]
    fn an_answer_read_half_written_is_subsumed_by_its_whole_form() {
        let half = text(Role::Assistant, "Look", 5);
        let whole = text(Role::Assistant, "Looking.", 5);
        assert!(subsumed(&half, &whole));
        assert!(!subsumed(&whole, &half));
        assert!(!subsumed(&half, &text(Role::Assistant, "Looking.", 6)));
    }

    #[test]
    fn the_events_of_one_read_are_split_by_their_names() {
        let mut buf = Vec::new();
        for name in ["opencode.db-shm", "opencode.db-wal", ""] {
            let padded = if name.is_empty() { 0 } else { (name.len() + 1).div_ceil(16) * 16 };
            let head = libc::inotify_event { wd: 1, mask: libc::IN_MODIFY, cookie: 0, len: padded as u32 };
            // SAFETY: a plain C struct of integers, read as its bytes.
            buf.extend_from_slice(unsafe {
                std::slice::from_raw_parts(
                    (&head as *const libc::inotify_event).cast::<u8>(),
                    std::mem::size_of_val(&head),
                )
            });
            let mut n = name.as_bytes().to_vec();
            n.resize(padded, 0);
            buf.extend_from_slice(&n);
        }
        let names: Vec<&[u8]> = events(&buf).collect();
        assert_eq!(names, [&b"opencode.db-shm"[..], b"opencode.db-wal", b""]);
        assert!(is_readers_file(names[0]) && !is_readers_file(names[1]) && !is_readers_file(names[2]));
    }

    #[test]
    fn geminis_periods_are_read_as_gemini_reads_them() {
        assert_eq!(gemini_period_days("30d"), Some(30.0));
        assert_eq!(gemini_period_days("2w"), Some(14.0));
        assert_eq!(gemini_period_days("24h"), Some(1.0));
        assert_eq!(gemini_period_days("1m"), Some(30.0));
        for refused in ["0d", "d", "+5d", "5", "5y", "", "1.5d"] {
            assert_eq!(gemini_period_days(refused), None, "{refused}");
        }
    }

    #[test]
    fn the_hash_of_the_keys_tells_a_rewritten_message_apart() {
        let a = vec![text(Role::User, "hi", 1), text(Role::Assistant, "hello", 2)];
        let b = vec![text(Role::User, "hi", 1), text(Role::Assistant, "hullo", 2)];
        assert_eq!(hash(&a), hash(&a.clone()));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a[..1]), hash(&b[..1]));
    }
}
