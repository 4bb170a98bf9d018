//! The workspace's sessions, newest first, read at a cost that does not grow with log size.
//!
//! Each session keeps a cache, `summary.json`: the replay [`State`] of its log up to a byte offset,
//! plus the last bytes before that offset as a fingerprint. Listing reads the cache, checks the
//! fingerprint, and replays only the lines appended since; a missing, unreadable or stale cache (the
//! file was cut back, rewritten or replaced) is rebuilt by a full replay. Since the list and the
//! loader share one fold ([`super::replay`]), the list's counts are what a resume restores.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::contain::{Access, Dir};
use super::entry::{ForkedFrom, ImportedFrom};
use super::index::Row;
use super::loader::feed_lines;
use super::replay::{Replay, State};
use super::{
    CONVERSATION_FILE_NAME, Context, LOCK_FILE_NAME, Result, SUMMARY_FILE_NAME, io_err, is_valid_id, lock, sessions_dir,
};
use crate::usage::{Pricing, Usage, UsageByModel};

/// One session as the picker shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    pub id: String,
    /// The session's name (its last `title` entry) when it has one, else the first line of the first
    /// typed user message.
    pub title: String,
    /// The model of the last answer that names one, else the first model named in the log.
    pub model: String,
    /// Messages a resume restores (after the last replace, after repairs).
    pub messages: usize,
    /// Valid entry lines in the file (the physical count).
    pub entries: usize,
    /// Size of `conversation.jsonl` in bytes.
    pub bytes: u64,
    /// Modification time of `conversation.jsonl`, unix seconds.
    pub modified: i64,
    /// The same, in nanoseconds: what the list sorts by (seconds tie too often).
    #[serde(skip)]
    pub modified_ns: i64,
    /// Newest message time, unix seconds (0 when unknown).
    pub last_message: i64,
    pub bad_lines: usize,
    /// Summarised from a part of the log only (see [`ListOptions::max_read`]): the counts, title and
    /// model may be missing; the full list has them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Who holds the session's writer lock, when someone does (another editor).
    pub held_by: Option<String>,
    /// Lines restored after their invalid UTF-8 was read as U+FFFD.
    pub repaired: usize,
    /// Bytes after the last complete line (a torn append the next writer moves aside).
    pub torn_tail_bytes: u64,
    /// The log needed repairs to load (`bad_lines`, `repaired` or `torn_tail_bytes`): the picker marks
    /// the row, `pseudoclaude sessions check <id>` says what.
    pub damaged: bool,
    /// The git branch at the latest turn recorded (`meta` entries); `None` outside a git repository
    /// or on a detached HEAD.
    pub branch: Option<String>,
    /// The short commit at the latest turn recorded; `None` outside a git repository.
    pub commit: Option<String>,
    /// Tokens the providers reported, summed over every request of the session.
    pub usage: Usage,
    /// The same per model (what [`SessionInfo::cost`] priced); not serialized: `usage` is the row's.
    #[serde(skip)]
    pub usage_by_model: UsageByModel,
    /// Dollars, when [`ListOptions::pricing`] prices every model that reported usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Pinned (its last `pin` entry): the list puts pinned sessions first.
    pub pinned: bool,
    /// The session this one was forked from, and at which of its messages.
    pub forked_from: Option<ForkedFrom>,
    /// The ACP agent the session ran (`setup({ agents })`'s name), `None` for a session of our own agent (then left out
    /// of the JSON row: the packed rows of `bridge/rows.rs` do not carry it yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// That agent's own id of the session (its `meta` entry): the agent's own record of it (Claude Code's transcript)
    /// is this session, not another one to list ([`crate::import::list::without_ours`]). Not serialized.
    #[serde(skip)]
    pub agent_session: Option<String>,
    /// The other agent's session this one is a copy of (an import, a kept copy): that agent's own row is this one
    /// ([`crate::import::list::without_ours`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<ImportedFrom>,
    /// The workspace the session belongs to, in a list of every workspace ([`list_every`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
}

/// What to list. Lua passes the same table (every key optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ListOptions {
    /// Leave this session out (the current one).
    pub exclude: Option<String>,
    /// Keep sessions with no message to restore. (A damaged log is always kept, even with nothing to
    /// restore: the user must be able to find it to inspect or delete it.)
    pub include_empty: bool,
    /// Look up who holds each session's lock.
    pub check_locks: bool,
    /// At most this many sessions (the newest); only those are summarised.
    pub limit: Option<usize>,
    /// Read at most this many bytes of a log whose summary cache is missing or behind: such a
    /// session is listed `partial`. The picker's first rows are listed on the editor's main loop,
    /// where replaying a 100 MiB log without a cache would freeze it for seconds.
    pub max_read: Option<u64>,
    /// Prices by model, for [`SessionInfo::cost`].
    pub pricing: Pricing,
    /// With `limit`: also summarise the pinned sessions [`super::pins`] names, older than the newest
    /// `limit` though they may be, and keep them first (the picker's first rows).
    pub include_pinned: bool,
}

/// Every valid session of the workspace, newest first (by log modification time, then id).
pub fn list(workspace: &Path, opts: &ListOptions) -> Result<Vec<SessionInfo>> {
    let dir = sessions_dir(workspace);
    if opts.limit.is_none() {
        return list_indexed(workspace, &dir, opts);
    }
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("cannot read sessions directory", &dir)(e)),
    };
    // Every session is reached through this checked descriptor; a linked `sessions` folder lists nothing.
    let root = Dir::sessions(workspace)?;
    if let Some(limit) = opts.limit
        && let Some(found) = list_recent(workspace, &root, opts, limit)?
    {
        return if opts.include_pinned { with_pins(workspace, &root, opts, limit, found) } else { Ok(found) };
    }
    // Order by a stat of each log first, so only the sessions shown are summarised.
    let mut found: Vec<(i64, String)> = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name();
        let Some(id) = name.to_str().filter(|n| is_valid_id(n)) else { continue };
        if opts.exclude.as_deref() == Some(id) || !ent.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        // Relative to the sessions descriptor: shorter lookups than whole paths, and no link followed.
        let modified =
            root.mtime_ns(&format!("{id}/{CONVERSATION_FILE_NAME}")).or_else(|| root.mtime_ns(id)).unwrap_or(0);
        found.push((modified, id.to_string()));
    }
    found.sort_by(|a, b| b.cmp(a));
    let mut out = Vec::new();
    for (_, id) in found {
        if opts.limit.is_some_and(|n| out.len() >= n) {
            break;
        }
        let ctx = Context::for_id(workspace, &id)?;
        // A session we cannot read or must refuse (a linked folder or log) is left on disk untouched;
        // `pseudoclaude sessions check` says why.
        let Ok(dir) = root.subdir(&id) else { continue };
        // `max_read` bounds a limited list only (the picker's first rows, `:PseudoResume last`).
        let Ok(mut info) = info_in(&ctx, &dir, opts.limit.and(opts.max_read), &opts.pricing) else { continue };
        if !shown(&info, opts) {
            continue;
        }
        if opts.check_locks {
            info.held_by = lock::holder_in(&dir);
        }
        out.push(info);
    }
    // A log written between the stat and its summary moves up.
    sort_newest_first(&mut out);
    match opts.limit {
        Some(limit) if opts.include_pinned => with_pins(workspace, &root, opts, limit, out),
        _ => Ok(out),
    }
}

/// The full list, through the workspace's index ([`super::index`]): a session it cannot vouch for is
/// summarised from its log as a list without it would.
fn list_indexed(workspace: &Path, dir: &Path, opts: &ListOptions) -> Result<Vec<SessionInfo>> {
    let Unlocked { mut rows, lock_inos } = unlocked_in(workspace, dir, opts)?;
    if opts.check_locks {
        for (i, holder) in lock_holders(workspace, lock_inos, |i| rows[i].id.as_str()) {
            rows[i].held_by = Some(holder);
        }
    }
    Ok(rows)
}

/// The full list before anyone's lock is looked at: what [`list`] gives without `limit`, every `held_by` nil, and
/// each row's lock file inode for [`lock_holders`]. The bridge keeps it (packed) while [`super::index::stamp`] says
/// nothing changed, and asks only who holds the locks each time (issue 39).
#[derive(Debug, Default)]
pub struct Unlocked {
    pub rows: Vec<SessionInfo>,
    /// The lock file's inode of each row when the row was made (0: there was none).
    pub lock_inos: Vec<u64>,
}

/// [`Unlocked`]: the workspace's full list (`opts.limit` and `opts.check_locks` are not looked at).
pub fn list_unlocked(workspace: &Path, opts: &ListOptions) -> Result<Unlocked> {
    unlocked_in(workspace, &sessions_dir(workspace), opts)
}

fn unlocked_in(workspace: &Path, dir: &Path, opts: &ListOptions) -> Result<Unlocked> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Unlocked::default()),
        Err(e) => return Err(io_err("cannot read sessions directory", dir)(e)),
        Ok(m) if !m.is_dir() => {
            let e = std::io::Error::from(std::io::ErrorKind::NotADirectory);
            return Err(io_err("cannot read sessions directory", dir)(e));
        }
        Ok(_) => {}
    }
    let root = Dir::sessions(workspace)?;
    let summarise = |id: &str| {
        let ctx = Context::for_id(workspace, id).ok()?;
        // A session we cannot read or must refuse is left on disk untouched, as in the scan below.
        let dir = root.subdir(id).ok()?;
        let info = info_in(&ctx, &dir, None, &opts.pricing).ok()?;
        Some(row_of(&info, dir.ino(LOCK_FILE_NAME).unwrap_or(0)))
    };
    let rows = super::index::entries(workspace, &root, SUMMARY_VERSION, summarise);
    let mut out: Vec<(SessionInfo, u64)> = Vec::with_capacity(rows.len());
    for row in rows {
        let lock_ino = row.16;
        let info = info_of(row, &opts.pricing);
        if opts.exclude.as_deref() == Some(info.id.as_str()) || !shown(&info, opts) {
            continue;
        }
        out.push((info, lock_ino));
    }
    // The index is written in this order: a pass that finds it sorted, unless rows changed since.
    out.sort_by(|(a, _), (b, _)| newest_first(a, b));
    let (rows, lock_inos) = out.into_iter().unzip();
    Ok(Unlocked { rows, lock_inos })
}

/// Session `id`'s row of [`list_unlocked`] now, with its lock file's inode: `None` when it is not listed (not
/// listable, `opts.exclude`, or not shown). Made as the index makes it, so that it equals the row a full read gives.
pub fn unlocked_row(workspace: &Path, id: &str, opts: &ListOptions) -> Option<(SessionInfo, u64)> {
    let ctx = Context::for_id(workspace, id).ok()?;
    let dir = Dir::sessions(workspace).ok()?.subdir(id).ok()?;
    let lock_ino = dir.ino(LOCK_FILE_NAME).unwrap_or(0);
    let info = info_of(row_of(&info_in(&ctx, &dir, None, &opts.pricing).ok()?, lock_ino), &opts.pricing);
    (opts.exclude.as_deref() != Some(id) && shown(&info, opts)).then_some((info, lock_ino))
}

/// Who holds the locks of the rows whose lock inodes are `lock_inos` (`id_of(i)`: row `i`'s id): `(row, holder)`.
/// Only the sessions `/proc/locks` (one read) cannot rule out are asked: those whose lock file is among the files
/// locked on this machine, and those without a lock file when their row was made whose lock file, made since, a
/// process holds ([`lock::held_sessions`]: the paths the holders opened their locked files by); every one when
/// `/proc/locks` cannot be read, and every one without a lock file when a lock on the sessions' file system cannot be
/// explained. 100,000 sessions asked one by one take longer than the list; 10,000 folders without a lock file opened
/// at every list made it 85-110 ms instead of 13 (issue 48).
pub fn lock_holders<'a>(
    workspace: &Path,
    lock_inos: impl IntoIterator<Item = u64>,
    id_of: impl Fn(usize) -> &'a str,
) -> Vec<(usize, String)> {
    let Ok(root) = Dir::sessions(workspace) else { return Vec::new() };
    let lock_inos: Vec<u64> = lock_inos.into_iter().collect();
    let locks = lock::locks();
    let locked: Option<HashSet<u64>> = locks.as_ref().map(|l| l.iter().map(|x| x.ino).collect());
    let held_since = match &locks {
        Some(locks) if lock_inos.contains(&0) => lock::held_sessions(locks, lock::lock_device(&root), lock::open_files),
        _ => None,
    };
    let mut out = Vec::new();
    for (i, &ino) in lock_inos.iter().enumerate() {
        let ask = match (&locked, ino) {
            (None, _) => true,
            (Some(_), 0) => held_since.as_ref().is_none_or(|ids| ids.contains(id_of(i))),
            (Some(set), ino) => set.contains(&ino),
        };
        if ask && let Some(holder) = root.subdir(id_of(i)).ok().and_then(|d| lock::holder_in(&d)) {
            out.push((i, holder));
        }
    }
    out
}

/// A session's row of the index ([`super::index`]), with its lock file's inode (0: none).
fn row_of(s: &SessionInfo, lock_ino: u64) -> Row {
    Row(
        s.id.clone(),
        s.bytes,
        s.modified_ns,
        s.title.clone(),
        s.model.clone(),
        s.messages,
        s.entries,
        s.last_message,
        s.bad_lines,
        s.repaired,
        s.torn_tail_bytes,
        s.branch.clone(),
        s.commit.clone(),
        s.usage_by_model.clone(),
        s.pinned,
        s.forked_from.clone(),
        lock_ino,
        s.agent.clone(),
        s.agent_session.clone(),
        s.imported_from.clone(),
    )
}

/// The list entry of an index row.
fn info_of(row: Row, pricing: &Pricing) -> SessionInfo {
    let Row(
        id,
        bytes,
        modified_ns,
        title,
        model,
        messages,
        entries,
        last_message,
        bad_lines,
        repaired,
        torn,
        branch,
        commit,
        usage,
        pinned,
        forked_from,
        _lock_ino,
        agent,
        agent_session,
        imported_from,
    ) = row;
    SessionInfo {
        id,
        title,
        model,
        messages,
        entries,
        bytes,
        modified: modified_ns.div_euclid(1_000_000_000),
        modified_ns,
        last_message,
        bad_lines,
        partial: false,
        held_by: None,
        repaired,
        torn_tail_bytes: torn,
        damaged: bad_lines > 0 || repaired > 0 || torn > 0,
        branch,
        commit,
        usage: usage.total(),
        cost: usage.cost(pricing),
        usage_by_model: usage,
        pinned,
        forked_from,
        agent,
        agent_session,
        imported_from,
        workspace: None,
    }
}

/// The sessions of every workspace of `workspaces` (`:PseudoResume all`), each with its `workspace`:
/// pinned first, then newest first, `opts.limit` in all. A workspace that cannot be listed is left
/// out (it may have been removed since the registry named it).
pub fn list_every(workspaces: &[PathBuf], opts: &ListOptions) -> Vec<SessionInfo> {
    let mut out = Vec::new();
    for ws in workspaces {
        let Ok(found) = list(ws, opts) else { continue };
        out.extend(found.into_iter().map(|mut s| {
            s.workspace = Some(ws.clone());
            s
        }));
    }
    sort_newest_first(&mut out);
    if let Some(limit) = opts.limit {
        out.truncate(limit);
    }
    out
}

/// A limited list with the pinned sessions the hint names ([`super::pins`]) in it, even when they are
/// older than the newest `limit`: pinned first, then the newest, `limit` in all. A session is taken
/// as pinned only when its own log says so.
fn with_pins(
    workspace: &Path,
    root: &Dir,
    opts: &ListOptions,
    limit: usize,
    mut out: Vec<SessionInfo>,
) -> Result<Vec<SessionInfo>> {
    for id in super::pins::pinned(root) {
        if out.iter().filter(|s| s.pinned).count() >= limit {
            break;
        }
        if opts.exclude.as_deref() == Some(id.as_str()) || out.iter().any(|s| s.id == id) {
            continue;
        }
        match named(workspace, root, opts, &id)? {
            Some(info) if info.pinned => out.push(info),
            _ => {}
        }
    }
    sort_newest_first(&mut out);
    out.truncate(limit);
    Ok(out)
}

/// Ids of the workspace's session folders, for completing `:PseudoResume {id}`: those the activity
/// hint names first (most recent first), then the others by id, newest first. One `readdir`, no
/// `stat` and no log read: 10,000 sessions take a few milliseconds, so completion may run on the
/// editor's main loop. Symbolic links and other non-folders are left out.
pub fn ids(workspace: &Path) -> Result<Vec<String>> {
    let dir = sessions_dir(workspace);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("cannot read sessions directory", &dir)(e)),
    };
    let mut present: std::collections::HashSet<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().filter(|n| is_valid_id(n)).map(str::to_string))
        .collect();
    let mut out = Vec::with_capacity(present.len());
    for id in super::activity::recent(&dir).unwrap_or_default() {
        if present.remove(&id) {
            out.push(id);
        }
    }
    let mut rest: Vec<String> = present.into_iter().collect();
    rest.sort_unstable_by(|a, b| b.cmp(a));
    out.extend(rest);
    Ok(out)
}

/// The `limit` newest sessions found from the activity hint alone; `None` when the hint is missing
/// or cannot fill the limit (the caller then scans everything).
fn list_recent(workspace: &Path, root: &Dir, opts: &ListOptions, limit: usize) -> Result<Option<Vec<SessionInfo>>> {
    // The hint's last 16 KiB name the few newest sessions; its whole tail only when they do not fill the limit.
    if let Some(ids) = super::activity::recent_within(root.path(), 16 * 1024)
        && let Some(found) = pick_recent(workspace, root, opts, limit, ids)?
    {
        return Ok(Some(found));
    }
    let Some(ids) = super::activity::recent(root.path()) else { return Ok(None) };
    pick_recent(workspace, root, opts, limit, ids)
}

/// The first `limit` listable sessions of `ids`, newest first; `None` when there are not enough.
fn pick_recent(
    workspace: &Path,
    root: &Dir,
    opts: &ListOptions,
    limit: usize,
    ids: Vec<String>,
) -> Result<Option<Vec<SessionInfo>>> {
    let mut out = Vec::new();
    for id in ids {
        if out.len() >= limit {
            break;
        }
        if opts.exclude.as_deref() == Some(id.as_str()) {
            continue;
        }
        out.extend(named(workspace, root, opts, &id)?);
    }
    if out.len() < limit {
        return Ok(None);
    }
    sort_newest_first(&mut out);
    Ok(Some(out))
}

/// The entry of session `id`, which a hint named, when the list shows it; `None` when it was deleted
/// since or is refused (a linked folder is never followed, even from a hint).
fn named(workspace: &Path, root: &Dir, opts: &ListOptions, id: &str) -> Result<Option<SessionInfo>> {
    let ctx = Context::for_id(workspace, id)?;
    let Ok(dir) = root.subdir(id) else { return Ok(None) };
    let Ok(mut info) = info_in(&ctx, &dir, opts.max_read, &opts.pricing) else { return Ok(None) };
    if !shown(&info, opts) {
        return Ok(None);
    }
    if opts.check_locks {
        info.held_by = lock::holder_in(&dir);
    }
    Ok(Some(info))
}

/// Whether a list shows this session: it has something to restore, or its log is damaged (so the
/// user can find it), or it was only partly read (a log past `max_read` is not empty), or empty
/// ones were asked for.
fn shown(info: &SessionInfo, opts: &ListOptions) -> bool {
    info.messages > 0 || info.damaged || info.partial || opts.include_empty
}

/// One session's list entry, from its cache when the cache is current. A linked session folder or
/// log is refused.
pub fn info(ctx: &Context) -> Result<SessionInfo> {
    info_priced(ctx, &Pricing::default())
}

/// [`info`], with its `cost` from `pricing`.
pub fn info_priced(ctx: &Context, pricing: &Pricing) -> Result<SessionInfo> {
    info_in(ctx, &Dir::session(ctx)?, None, pricing)
}

/// [`info`] from the opened folder, reading at most `max_read` bytes past the cache (else the entry
/// is `partial`).
fn info_in(ctx: &Context, dir: &Dir, max_read: Option<u64>, pricing: &Pricing) -> Result<SessionInfo> {
    let path = &ctx.jsonl_path;
    let (file, meta) = match dir.open_stat(CONVERSATION_FILE_NAME, Access::Read) {
        Ok(opened) => opened,
        Err(e) if e.is_not_found() => {
            let modified = fs::metadata(&ctx.dir).map(|m| mtime_ns(&m)).unwrap_or(0);
            return Ok(to_info(ctx, State::default(), 0, 0, modified, pricing));
        }
        Err(e) => return Err(e),
    };
    let (bytes, modified) = (meta.len(), mtime_ns(&meta));
    let cached = read_summary(dir).filter(|s| s.offset <= bytes && fingerprint(&file, s.offset) == s.tail);
    let state_was_cached = cached.is_some();
    let (state, offset) = match cached {
        Some(s) => (s.state, s.offset),
        None => (State::default(), 0),
    };
    if max_read.is_some_and(|max| bytes - offset > max) {
        let mut info = to_info(ctx, state, bytes, 0, modified, pricing);
        info.partial = true;
        return Ok(info);
    }
    let mut replay = Replay::resume_counting(state);
    let fed = feed_lines(&file, offset, &mut replay).map_err(io_err("cannot read session log", path))?;
    let state = replay.state;
    if fed.end != offset || !state_was_cached {
        let tail = fingerprint(&file, fed.end);
        // The cache only saves time; failing to write it (read-only checkout) is not an error.
        let _ = write_summary(dir, &Summary { version: SUMMARY_VERSION, offset: fed.end, tail, state: state.clone() });
    }
    Ok(to_info(ctx, state, bytes, fed.torn_bytes, modified, pricing))
}

fn to_info(
    ctx: &Context,
    s: State,
    bytes: u64,
    torn_tail_bytes: u64,
    modified_ns: i64,
    pricing: &Pricing,
) -> SessionInfo {
    let git = s.git.clone().unwrap_or_default();
    let some = |v: String| (!v.is_empty()).then_some(v);
    SessionInfo {
        branch: some(git.branch),
        commit: some(git.commit),
        usage: s.usage.total(),
        cost: s.usage.cost(pricing),
        damaged: s.bad_lines > 0 || s.repaired > 0 || torn_tail_bytes > 0,
        repaired: s.repaired,
        torn_tail_bytes,
        id: ctx.id.clone(),
        title: s.shown_title().to_string(),
        model: s.shown_model().to_string(),
        pinned: s.pinned,
        forked_from: s.forked_from,
        agent_session: s.agent.as_ref().map(|a| a.session_id.clone()).filter(|id| !id.is_empty()),
        agent: s.agent.map(|a| a.name),
        imported_from: s.imported_from,
        messages: s.messages,
        entries: s.entries,
        bytes,
        modified: modified_ns.div_euclid(1_000_000_000),
        modified_ns,
        last_message: s.last_message,
        bad_lines: s.bad_lines,
        partial: false,
        held_by: None,
        workspace: None,
        usage_by_model: s.usage,
    }
}

/// Pinned first, then newest first: by log modification time, then id.
fn sort_newest_first(out: &mut [SessionInfo]) {
    out.sort_by(newest_first);
}

fn newest_first(a: &SessionInfo, b: &SessionInfo) -> std::cmp::Ordering {
    order_key(a.pinned, a.modified_ns, &a.id).cmp(&order_key(b.pinned, b.modified_ns, &b.id))
}

/// Where a session goes in the list, smallest first: pinned first, then newest first (by its log's time, then by
/// id). The bridge's kept list places written rows with it without their `SessionInfo` (`bridge::full_list`).
pub fn order_key(pinned: bool, modified_ns: i64, id: &str) -> (Reverse<bool>, Reverse<i64>, Reverse<&str>) {
    (Reverse(pinned), Reverse(modified_ns), Reverse(id))
}

fn mtime_ns(m: &fs::Metadata) -> i64 {
    m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as i64)
}

/// 2: the fold repairs lines with invalid UTF-8 (version 1 caches counted them as bad lines).
/// 3: the fold reads `title` and `pin` entries and `forked_from` (a version 2 cache skipped them, and
/// would hide a name written before it).
/// 4: the state holds git (`meta`) and `usage` entries, which a version 3 fold skipped.
/// 5: the state holds the ACP agent of a `meta` entry (`agent`), which a version 4 fold skipped.
/// 6: the state holds where an imported session came from (`imported_from`), which a version 5 fold skipped.
const SUMMARY_VERSION: u32 = 6;
/// How many bytes before the cached offset must still be the same for the cache to count.
const FINGERPRINT_BYTES: u64 = 64;

#[derive(Debug, Serialize, Deserialize)]
struct Summary {
    version: u32,
    offset: u64,
    tail: String,
    state: State,
}

/// The cache; a linked `summary.json` is not read (and the rename below replaces the link itself).
fn read_summary(dir: &Dir) -> Option<Summary> {
    let mut data = Vec::new();
    dir.open(SUMMARY_FILE_NAME, Access::Read).ok()?.read_to_end(&mut data).ok()?;
    serde_json::from_slice::<Summary>(&data).ok().filter(|s| s.version == SUMMARY_VERSION)
}

fn write_summary(dir: &Dir, s: &Summary) -> std::io::Result<()> {
    dir.replace_file(SUMMARY_FILE_NAME, &serde_json::to_vec(s).map_err(std::io::Error::other)?)
}

/// The last bytes before `offset`, hex; `unreadable` when they cannot be read (which matches no cache).
fn fingerprint(file: &File, offset: u64) -> String {
    let start = offset.saturating_sub(FINGERPRINT_BYTES);
    let mut buf = vec![0u8; (offset - start) as usize];
    match file.read_exact_at(&mut buf, start) {
        Ok(()) => super::spill::hex(&buf),
        Err(_) => "unreadable".into(),
    }
}

#[cfg(test)]
#[path = "list_tests.rs"]
mod tests;
