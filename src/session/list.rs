//! The workspace's sessions, newest first, read at a cost that does not grow with log size.
//!
//! Each session keeps a cache, `summary.json`: the replay [`State`] of its log up to a byte offset,
//! plus the last bytes before that offset as a fingerprint. Listing reads the cache, checks the
//! fingerprint, and replays only the lines appended since; a missing, unreadable or stale cache (the
//! file was cut back, rewritten or replaced) is rebuilt by a full replay. Since the list and the
//! loader share one fold ([`super::replay`]), the list's counts are what a resume restores.

use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::contain::{Access, Dir};
use super::entry::ForkedFrom;
use super::loader::feed_lines;
use super::replay::{Replay, State};
use super::{CONVERSATION_FILE_NAME, Context, Result, SUMMARY_FILE_NAME, io_err, is_valid_id, lock, sessions_dir};
use crate::usage::{Pricing, Usage, UsageByModel};

/// One session as the picker shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    pub id: String,
    /// The session's name (its last `title` entry) when it has one, else the first line of the first
    /// typed user message.
    pub title: String,
    /// First model named in the log.
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
        pinned: s.pinned,
        forked_from: s.forked_from,
        model: s.model,
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
    out.sort_by(|a, b| {
        b.pinned.cmp(&a.pinned).then_with(|| b.modified_ns.cmp(&a.modified_ns)).then_with(|| b.id.cmp(&a.id))
    });
}

fn mtime_ns(m: &fs::Metadata) -> i64 {
    m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as i64)
}

/// 2: the fold repairs lines with invalid UTF-8 (version 1 caches counted them as bad lines).
/// 3: the fold reads `title` and `pin` entries and `forked_from` (a version 2 cache skipped them, and
/// would hide a name written before it).
/// 4: the state holds git (`meta`) and `usage` entries, which a version 3 fold skipped.
const SUMMARY_VERSION: u32 = 4;
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
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::session::{Writer, WriterOptions, meta};
    use std::time::{Duration, SystemTime};

    /// `n` sessions written one after the other (the activity hint names them in that order), their
    /// logs' modification times a second apart in the same order.
    fn sessions(ws: &Path, n: usize) -> Vec<Context> {
        (0..n).map(|i| session(ws, i)).collect()
    }

    /// Session number `i`: one message, its log's modification time `i` seconds after a fixed moment.
    fn session(ws: &Path, i: usize) -> Context {
        let ctx = Context::new(ws).expect("context");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        w.append(&Message::user(format!("session {i}"))).expect("append");
        set_mtime(&ctx, i as u64);
        ctx
    }

    /// Sets the log's modification time to `secs` after a fixed moment, without writing to it.
    fn set_mtime(ctx: &Context, secs: u64) {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs);
        File::options().append(true).open(&ctx.jsonl_path).expect("open").set_modified(t).expect("set_modified");
    }

    fn ids_of(list: &[SessionInfo]) -> Vec<&str> {
        list.iter().map(|s| s.id.as_str()).collect()
    }

    fn limited(limit: usize, include_pinned: bool) -> ListOptions {
        ListOptions { limit: Some(limit), include_pinned, ..Default::default() }
    }

    #[test]
    fn a_limited_list_takes_the_newest_sessions_the_activity_hint_names() {
        let ws = tempfile::tempdir().expect("tempdir");
        let s = sessions(ws.path(), 5);
        // touched by something that does not write the hint (a copy, an older version)
        set_mtime(&s[0], 100);
        let full = list(ws.path(), &ListOptions::default()).expect("list");
        assert_eq!(ids_of(&full), [&s[0].id, &s[4].id, &s[3].id, &s[2].id, &s[1].id]);
        // the picker's first rows: the hint's newest two, not a stat of every log
        assert_eq!(ids_of(&list(ws.path(), &limited(2, false)).expect("list")), [&s[4].id, &s[3].id]);
        // excluded (the current session): the next one the hint names
        let opts = ListOptions { exclude: Some(s[4].id.clone()), ..limited(2, false) };
        assert_eq!(ids_of(&list(ws.path(), &opts).expect("list")), [&s[3].id, &s[2].id]);
        // without the hint: the modification times
        fs::remove_file(ws.path().join(".PseudoClaude/sessions/activity")).expect("remove the hint");
        assert_eq!(ids_of(&list(ws.path(), &limited(2, false)).expect("list")), [&s[0].id, &s[4].id]);
    }

    #[test]
    fn pinned_sessions_join_a_limited_list_once_whether_the_hint_or_the_folder_is_read() {
        let ws = tempfile::tempdir().expect("tempdir");
        let mut s = sessions(ws.path(), 2);
        meta::append(&s[1], meta::pin_entry(true)).expect("pin one that grows old");
        set_mtime(&s[1], 1);
        s.extend((2..5).map(|i| session(ws.path(), i)));
        meta::append(&s[4], meta::pin_entry(true)).expect("pin the newest");
        set_mtime(&s[4], 4);
        let with_pins = [&s[4].id, &s[1].id, &s[3].id];
        let newest = [&s[4].id, &s[3].id, &s[2].id];
        assert_eq!(ids_of(&list(ws.path(), &limited(3, true)).expect("list")), with_pins);
        assert_eq!(ids_of(&list(ws.path(), &limited(3, false)).expect("list")), newest);
        // s[1] unpinned in its log behind the hint's back (an older version wrote it): the log wins
        let mut log = File::options().append(true).open(&s[1].jsonl_path).expect("open");
        std::io::Write::write_all(&mut log, b"{\"type\":\"pin\",\"ts\":1,\"pinned\":false}\n").expect("write");
        drop(log);
        set_mtime(&s[1], 1);
        assert_eq!(ids_of(&list(ws.path(), &limited(3, true)).expect("list")), newest);
        // pinned again, and no activity hint: a scan of the folder, then the pins
        let mut log = File::options().append(true).open(&s[1].jsonl_path).expect("open");
        std::io::Write::write_all(&mut log, b"{\"type\":\"pin\",\"ts\":1,\"pinned\":true}\n").expect("write");
        drop(log);
        set_mtime(&s[1], 1);
        fs::remove_file(ws.path().join(".PseudoClaude/sessions/activity")).expect("remove the hint");
        assert_eq!(ids_of(&list(ws.path(), &limited(3, true)).expect("list")), with_pins);
        assert_eq!(ids_of(&list(ws.path(), &limited(3, false)).expect("list")), newest);
    }

    #[test]
    fn ids_come_from_the_hint_then_by_id_and_only_folders_count() {
        let ws = tempfile::tempdir().expect("tempdir");
        assert_eq!(ids(ws.path()).expect("no sessions yet"), Vec::<String>::new());
        assert!(list(ws.path(), &ListOptions::default()).expect("no sessions yet").is_empty());
        let s = sessions(ws.path(), 3);
        let root = ws.path().join(".PseudoClaude/sessions");
        fs::create_dir(root.join("20990101-000000-0000")).expect("a folder the hint does not name");
        fs::create_dir(root.join("20000101-000000-0000")).expect("another");
        std::os::unix::fs::symlink(&s[0].dir, root.join("20500101-000000-0000")).expect("a link");
        fs::write(root.join("20600101-000000-0000"), b"").expect("a file");
        fs::create_dir(root.join("not-a-session")).expect("a folder without an id");
        assert_eq!(
            ids(ws.path()).expect("ids"),
            [&s[2].id, &s[1].id, &s[0].id, "20990101-000000-0000", "20000101-000000-0000"]
        );
    }

    #[test]
    fn a_sessions_folder_that_cannot_be_read_is_an_error_not_an_empty_list() {
        let ws = tempfile::tempdir().expect("tempdir");
        fs::create_dir(ws.path().join(".PseudoClaude")).expect("mkdir");
        fs::write(ws.path().join(".PseudoClaude/sessions"), b"").expect("a file where the folder goes");
        for err in [ids(ws.path()).unwrap_err(), list(ws.path(), &ListOptions::default()).unwrap_err()] {
            assert!(err.to_string().contains("cannot read sessions directory"), "{err}");
        }
    }

    #[test]
    fn every_workspace_lists_its_own_sessions_newest_first() {
        let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let sa = sessions(a.path(), 2);
        let sb = sessions(b.path(), 1);
        set_mtime(&sb[0], 50);
        let gone = a.path().join("removed");
        let workspaces = [a.path().to_path_buf(), gone, b.path().to_path_buf()];
        let all = list_every(&workspaces, &ListOptions::default());
        assert_eq!(ids_of(&all), [&sb[0].id, &sa[1].id, &sa[0].id]);
        let places: Vec<_> = all.iter().map(|s| s.workspace.clone().expect("named")).collect();
        assert_eq!(places, [b.path(), a.path(), a.path()]);
        let two = list_every(&workspaces, &ListOptions { limit: Some(2), ..Default::default() });
        assert_eq!(ids_of(&two), [&sb[0].id, &sa[1].id]);
    }

    #[test]
    fn a_session_without_a_log_yet_is_listed_empty_when_asked() {
        let ws = tempfile::tempdir().expect("tempdir");
        let fresh = Context::new(ws.path()).expect("context");
        let info = info(&fresh).expect("info");
        assert_eq!((info.messages, info.bytes, info.damaged), (0, 0, false));
        assert!(list(ws.path(), &ListOptions::default()).expect("list").is_empty());
        let opts = ListOptions { include_empty: true, ..Default::default() };
        assert_eq!(ids_of(&list(ws.path(), &opts).expect("list")), [&fresh.id]);
    }

    #[test]
    fn a_log_rewritten_under_its_cache_is_read_again() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session(ws.path(), 0);
        assert_eq!(info(&ctx).expect("info").title, "session 0"); // writes the cache
        assert!(ctx.summary_path().exists());
        // another log in its place (a folder copied over this one), longer than the cached offset
        let other = "{\"type\":\"message\",\"role\":\"user\",\"content\":\"a different session\",\"ts\":5}\n";
        fs::write(&ctx.jsonl_path, other.repeat(3)).expect("write");
        let info = info(&ctx).expect("info");
        assert_eq!((info.title.as_str(), info.messages), ("a different session", 3));
    }

    #[test]
    fn a_limited_list_reads_at_most_max_read_bytes_of_a_log_without_a_cache() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session(ws.path(), 0);
        let len = fs::metadata(&ctx.jsonl_path).expect("stat").len();
        let first_rows = |max: u64| {
            let opts = ListOptions { limit: Some(1), max_read: Some(max), ..Default::default() };
            let info = list(ws.path(), &opts).expect("list").remove(0);
            (info.partial, info.messages)
        };
        assert_eq!(first_rows(len - 1), (true, 0), "one byte too many: listed partial, nothing read");
        assert!(!ctx.summary_path().exists());
        assert_eq!(first_rows(len), (false, 1));
    }

    #[test]
    fn the_cache_is_written_once_per_change_of_the_log() {
        use std::os::unix::fs::MetadataExt;
        let ws = tempfile::tempdir().expect("tempdir");
        let ino = |ctx: &Context| fs::metadata(ctx.summary_path()).expect("the cache").ino();
        // an empty log too: the next list must not read it again either
        let empty = Context::new(ws.path()).expect("context");
        fs::write(&empty.jsonl_path, b"").expect("write");
        let ctx = session(ws.path(), 0);
        for c in [&empty, &ctx] {
            info(c).expect("info");
            let first = ino(c);
            info(c).expect("info");
            assert_eq!(ino(c), first, "unchanged: not rewritten");
        }
        let first = ino(&ctx);
        Writer::open(&ctx, WriterOptions::default()).expect("writer").append(&Message::user("more")).expect("append");
        assert_eq!(info(&ctx).expect("info").messages, 2);
        assert_ne!(ino(&ctx), first, "grown: rewritten");
    }
}
