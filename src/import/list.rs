//! The workspace's sessions of the other agents (Claude Code, Codex, Gemini CLI, Qwen Code, opencode, Pi), listed
//! reading as little as possible.
//!
//! A transcript is summarised once per version of the file: its [`ExternalItem`] is cached by path, size and
//! modification time (nanoseconds), in memory for the editor's life and on disk in
//! `.PseudoClaude/sessions/external.bin` (a checksummed binary file, [`super::packed`]; an older `external.json` is
//! read once and replaced), so that a new editor lists a thousand transcripts with a `stat` each instead of reading
//! gigabytes again. opencode's sessions share one database: each is cached under `<db>#<id>` by its `time_updated`
//! (one query lists them all; only the sessions that moved are read again). The disk copy is only a hint: a missing,
//! damaged or linked one is ignored (and replaced), and it is written only where a session of ours already made `.PseudoClaude/sessions/` (listing
//! never creates folders in a workspace the user never chatted in).
//!
//! Two depths:
//! - **quick** (the picker's first rows): only the head and the tail of a large file ([`HEAD_BYTES`] each) are read,
//!   enough for its folder (`cwd`), ids, title, model, branch and last time; its message count is not known yet
//!   (`partial`), and at most `limit` items are summarised, newest files first;
//! - **exact** (the full list, the CLI): the whole file is read once and `messages` is the count an import
//!   restores; that is what the cache keeps. The files not cached yet are read on every core at once.
//!
//! Architecture invariant: listing opens the other tools' files for reading only, and an exact item's `messages`
//! is computed by the import's own conversion ([`Conversation::restored`]).

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use super::words::Stamp;
use super::{
    Conversation, ExternalItem, Homes, Source, belongs, claude_code, codex, external_id, gemini, opencode, packed, pi,
    qwen,
};
use crate::session::SessionInfo;
use crate::session::contain::{Access, Dir};

/// Bytes read at each end of a large transcript by a quick list: the first prompt and the session's folder sit in
/// the head, the custom title, the last time, model and branch in the tail.
pub const HEAD_BYTES: u64 = 64 * 1024;

/// The cache file, in `.PseudoClaude/sessions/` (a name no session id can have): [`super::packed`]'s binary form.
pub const CACHE_FILE_NAME: &str = "external.bin";
/// The JSON cache earlier versions wrote: read once when there is no [`CACHE_FILE_NAME`], removed once that is
/// written (a new version lists a workspace without reading every transcript again).
pub const LEGACY_CACHE_FILE_NAME: &str = "external.json";
const LEGACY_CACHE_VERSION: u32 = 3;
const CACHE_MAGIC: &[u8; 8] = b"PCEXTRN\n";
/// 5: [`packed`]'s checksum in four lanes (4 had one); what a search needs of each row first, the rest after it
/// ([`Row`]'s details), a transcript's path only where it is not the key.
const CACHE_VERSION: u32 = 5;

/// How much of each transcript a list reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListOptions {
    /// At most this many items, the most recently written files first.
    pub limit: Option<usize>,
    /// Read only the head and tail of a transcript not cached yet (its `messages` then unknown, `partial`).
    pub quick: bool,
    /// Only this tool's sessions.
    pub only: Option<Source>,
    /// Serve the cache as it is, looking at no store (`--no-refresh`): what the last list found, a session added,
    /// changed or deleted since then shown as it was. Where there is no cache yet, a list as usual makes it.
    pub no_refresh: bool,
}

/// One transcript as the cache knows it: `item` is `None` when it belongs to another workspace.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Cached {
    size: u64,
    mtime_ns: i64,
    item: Option<ExternalItem>,
}

/// The cache's entries, by the transcript's path (or `<db>#<id>`): keyed by its bytes, which hash at once (a
/// `Path` hashes component by component).
type Entries = rustc_hash::FxHashMap<OsString, Cached>;

/// A verdict depends on the workspace (`item` is `None` for a transcript of another one), so the file names the
/// workspace it was made for: a copy of `.PseudoClaude/` in another folder (a copied or moved workspace) is not
/// believed there.
#[derive(Debug, Default, Deserialize)]
struct CacheFile {
    version: u32,
    workspace: PathBuf,
    entries: HashMap<PathBuf, Cached>,
}

/// Per workspace: what was summarised of each transcript, and whether the disk copy was read already. The entries
/// are shared with the lists running (each reads the version it started with and hands back only what it changed):
/// lists running at once (the picker's full list, a preview's [`super::find`], a search, the keeper) all use the
/// cache; a list that took the entries out would leave the others an empty cache, and one of them would read every
/// transcript again (10,000: 2 GB, half a minute).
#[derive(Default)]
struct Memory {
    entries: Arc<Entries>,
    loaded: bool,
    /// Read from an earlier version's JSON: written in the new form at the next list, changed or not.
    legacy: bool,
}

static CACHE: LazyLock<Mutex<HashMap<PathBuf, Memory>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn cache() -> MutexGuard<'static, HashMap<PathBuf, Memory>> {
    CACHE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A transcript found on disk, with what `stat` said of it; or an opencode session, with what its row says.
struct Candidate {
    source: Source,
    /// The cache's key: the file, or `<db>#<session id>`.
    path: PathBuf,
    size: u64,
    mtime_ns: i64,
    /// An opencode session's row (`path` is then not a file).
    row: Option<opencode::SessionRow>,
}

/// A row of a list with the other tools' sessions in it: a session of ours, or another tool's (`source` set).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ListItem {
    Ours(Box<SessionInfo>),
    External(Box<ExternalItem>),
}

/// Our sessions (newest first, as `session::list` gives them) and the other tools' (newest first) in one list:
/// pinned sessions first, then newest first (a session of ours by its last message, another tool's by its last
/// record).
pub fn merge(ours: Vec<SessionInfo>, theirs: Vec<ExternalItem>) -> Vec<ListItem> {
    let theirs = without_ours(theirs, &ours);
    let mut out = Vec::with_capacity(ours.len() + theirs.len());
    let (pinned, rest): (Vec<_>, Vec<_>) = ours.into_iter().partition(|i| i.pinned);
    out.extend(pinned.into_iter().map(|i| ListItem::Ours(Box::new(i))));
    let mut rest = rest.into_iter().peekable();
    let mut theirs = theirs.into_iter().peekable();
    loop {
        let take_ours = match (rest.peek(), theirs.peek()) {
            (Some(o), Some(t)) => activity(o) >= t.modified,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        out.push(match take_ours {
            true => ListItem::Ours(Box::new(rest.next().expect("peeked"))),
            false => ListItem::External(Box::new(theirs.next().expect("peeked"))),
        });
    }
    out
}

/// `theirs` without the sessions that are conversations of ours already ([`ours_already`], a kept copy counting):
/// one row per conversation (issue 46 item 5), ours.
pub fn without_ours(theirs: Vec<ExternalItem>, ours: &[SessionInfo]) -> Vec<ExternalItem> {
    let is_ours = ours_already(ours, true);
    theirs.into_iter().filter(|t| !is_ours(t)).collect()
}

/// Whether another agent's session is a conversation a session of ours holds: one we ran with an ACP agent, or handed
/// back to its agent ([`crate::acp::handover`]), is also in that agent's own store under the agent's id of it, which
/// our log's `meta` keeps (`agent_session`); one handed back is also the original it was imported from
/// (`imported_from`; Gemini CLI's is a copy under another id); with `kept`, an original whose kept copy is ours
/// ([`super::keep`]), which the keeper itself does not count (it brings those copies up to date).
pub fn ours_already(ours: &[SessionInfo], kept: bool) -> impl Fn(&ExternalItem) -> bool + '_ {
    let is_ours = ours_already_by(ours, kept);
    move |t| is_ours(t.source, &t.session_id)
}

/// [`ours_already`] of a session named by its tool and the tool's id of it (a [`Row`] of the cache).
pub fn ours_already_by(ours: &[SessionInfo], kept: bool) -> impl Fn(Source, &str) -> bool + '_ {
    // (asked of each of 10,000 rows: FxHash, and no hashing at all where there is nothing to find)
    let mut ran: rustc_hash::FxHashSet<&str> = Default::default();
    let mut same: rustc_hash::FxHashSet<(&str, &str)> = Default::default();
    for i in ours {
        ran.extend(i.agent_session.as_deref());
        if let Some(from) = i.imported_from.as_ref().filter(|f| i.agent.is_some() || (kept && f.kept)) {
            same.insert((from.source.as_str(), from.id.as_str()));
        }
    }
    move |source, session_id| {
        !ran.is_empty() && ran.contains(session_id) || !same.is_empty() && same.contains(&(source.as_str(), session_id))
    }
}

/// When a session of ours last spoke, as the picker sorts it.
fn activity(i: &SessionInfo) -> i64 {
    if i.last_message > 0 { i.last_message } else { i.modified }
}

/// The workspace's sessions of every tool, newest first, read as `opts` says.
pub fn list_with(workspace: &Path, homes: &Homes, opts: &ListOptions) -> Vec<ExternalItem> {
    list_stamped(workspace, homes, opts).into_iter().map(|(i, _)| i).collect()
}

/// [`list_with`], each item with the [`Stamp`] of the state it was listed at: its file's size and modification time
/// (ns), as the list's `stat` found them, or for a session in opencode's database its message count and last change
/// (what the search's words index compares: a search stats no file again).
pub fn list_stamped(workspace: &Path, homes: &Homes, opts: &ListOptions) -> Vec<(ExternalItem, Stamp)> {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let wanted = |s: Source| opts.only.is_none_or(|o| o == s);
    if opts.no_refresh
        && let Some(items) = as_cached(&ws, homes, opts)
    {
        return items;
    }
    let mut paths: Vec<(Source, PathBuf)> = Vec::new();
    let mut files = |source: Source, found: Vec<PathBuf>| {
        if wanted(source) {
            paths.extend(found.into_iter().map(|p| (source, p)));
        }
    };
    if let Some(dir) = &homes.claude {
        files(Source::ClaudeCode, claude_code::transcripts(dir, &ws));
    }
    if let Some(dir) = &homes.codex {
        files(Source::Codex, codex::rollouts(dir));
    }
    if let Some(dir) = &homes.gemini {
        files(Source::GeminiCli, gemini::chats(dir, &ws));
    }
    if let Some(dir) = &homes.qwen {
        files(Source::QwenCode, qwen::chats(dir, &ws));
    }
    if let Some(dir) = &homes.pi {
        files(Source::Pi, pi::sessions(dir, homes.pi_session_dir.as_deref(), &ws));
    }
    // a `stat` each, on every core (10,000 transcripts: a third of a warm list on one)
    let mut found: Vec<Candidate> = stat_all(paths);
    let names = codex_names(homes, opts);
    let db_path =
        homes.opencode.as_ref().map(|d| d.join(opencode::DB_NAME)).filter(|p| wanted(Source::Opencode) && p.is_file());
    let db = db_path.as_deref().map(opencode::Db::open);
    let mut db_failed: Option<String> = None;
    if let (Some(path), Some(db)) = (&db_path, &db) {
        match db.as_ref().map_err(|e| e.to_string()).and_then(|d| d.sessions().map_err(|e| e.to_string())) {
            Ok(rows) => {
                found.extend(rows.into_iter().filter(|r| belongs(Some(&r.directory), &ws)).map(|r| Candidate {
                    source: Source::Opencode,
                    path: PathBuf::from(format!("{}#{}", path.display(), r.id)),
                    size: 0,
                    mtime_ns: r.time_updated.saturating_mul(1_000_000),
                    row: Some(r),
                }))
            }
            Err(e) => db_failed = Some(e),
        }
    }
    // ties by the paths' bytes: a `Path` compares component by component, a tenth of a warm list of 10,000
    found.sort_by(|a, b| b.mtime_ns.cmp(&a.mtime_ns).then_with(|| a.path.as_os_str().cmp(b.path.as_os_str())));

    let known = cache_of(&ws);
    // what this list summarised anew, handed to the cache at the end
    let mut fresh: Entries = Entries::default();
    let mut changed = false;
    let mut items = Vec::new();
    let db = db.and_then(|d| d.ok());
    let usable = |c: &Candidate, known: &Entries| {
        let hit = known.get(c.path.as_os_str()).filter(|k| k.size == c.size && k.mtime_ns == c.mtime_ns);
        hit.filter(|k| opts.quick || k.item.as_ref().is_none_or(|i| !i.partial)).map(|k| k.item.clone())
    };
    // A full list reads the transcripts it has not summarised yet on every core at once (a first list of 10,000 is
    // gigabytes); a limited one reads only as many as it shows, in order.
    let mut read_ahead: HashMap<usize, Option<ExternalItem>> = match opts.limit {
        None => {
            let todo: Vec<usize> =
                (0..found.len()).filter(|&i| found[i].row.is_none() && usable(&found[i], &known).is_none()).collect();
            summarise_files(&found, &todo, &ws, opts.quick)
        }
        Some(_) => HashMap::new(),
    };
    for (at, c) in found.iter().enumerate() {
        if opts.limit.is_some_and(|l| items.len() >= l) {
            break;
        }
        let item = match usable(c, &known) {
            Some(item) => item,
            None => {
                let item = match &c.row {
                    Some(row) => summarise_session(c, row, db.as_ref(), &ws, opts.quick),
                    None => read_ahead.remove(&at).unwrap_or_else(|| summarise(c, &ws, opts.quick)),
                };
                changed |= item.as_ref().is_none_or(|i| !i.partial);
                fresh.insert(
                    c.path.clone().into_os_string(),
                    Cached { size: c.size, mtime_ns: c.mtime_ns, item: item.clone() },
                );
                item
            }
        };
        items.extend(item.map(|mut i| {
            named(&mut i, &names);
            let stamp = stamp_of(&i, c.size, c.mtime_ns);
            (i, stamp)
        }));
    }
    // opencode's database busy this time: its sessions as last read; unreadable (its tables not the ones read, not
    // a database): one row saying why
    if let (Some(path), Some(why)) = (&db_path, &db_failed) {
        let prefix = format!("{}#", path.display());
        let before = items.len();
        if opencode::is_busy(why) {
            items.extend(known.iter().filter(|(p, _)| p.to_string_lossy().starts_with(&prefix)).filter_map(
                |(_, c)| {
                    let item = c.item.clone()?;
                    let stamp = stamp_of(&item, c.size, c.mtime_ns);
                    Some((item, stamp))
                },
            ));
        }
        if items.len() == before {
            let item = unreadable(Source::Opencode, path, why);
            let stamp = stamp_of(&item, 0, 0);
            items.push((item, stamp));
        }
    }
    // A full list sees every file: what it did not see is gone (opencode's rows stay while its database is unread).
    let mut gone = Vec::new();
    if opts.limit.is_none() && opts.only.is_none() {
        let seen: HashSet<&OsStr> = found.iter().map(|c| c.path.as_os_str()).collect();
        let kept = |p: &OsStr| {
            seen.contains(p)
                || db_failed.as_deref().is_some_and(opencode::is_busy)
                    && db_path.as_ref().is_some_and(|d| p.to_string_lossy().starts_with(&format!("{}#", d.display())))
        };
        gone = known.keys().filter(|p| !kept(p.as_os_str())).cloned().collect();
        changed |= !gone.is_empty();
    }
    drop(known);
    put_cache(&ws, fresh, &gone, changed);
    items
        .sort_by(|(a, _), (b, _)| b.modified.cmp(&a.modified).then_with(|| a.path.as_os_str().cmp(b.path.as_os_str())));
    items
}

/// Codex's thread names (they live in another file, `session_index.jsonl`), when its sessions are listed.
fn codex_names(homes: &Homes, opts: &ListOptions) -> HashMap<String, String> {
    match &homes.codex {
        Some(h) if opts.only.is_none_or(|o| o == Source::Codex) => codex::thread_names(&h.join("sessions")),
        _ => HashMap::new(),
    }
}

/// A Codex session's thread name as its title.
fn named(i: &mut ExternalItem, names: &HashMap<String, String>) {
    if let Some(name) = names.get(&i.session_id).filter(|_| i.source == Source::Codex) {
        i.title = name.clone();
    }
}

/// The list as the cache has it (`--no-refresh`): no store is looked at (Codex's thread names aside: one file),
/// newest first; `None` when there is no cache yet (the caller lists as usual, which makes it).
fn as_cached(ws: &Path, homes: &Homes, opts: &ListOptions) -> Option<Vec<(ExternalItem, Stamp)>> {
    with_cached_rows(ws, homes, opts, |rows, names| rows.iter().map(|r| (r.item(names), r.stamp)).collect())
}

/// [`candidate`] of each path, on as many threads as there are cores (at most 8); the files gone meanwhile left out.
fn stat_all(paths: Vec<(Source, PathBuf)>) -> Vec<Candidate> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if threads < 2 || paths.len() < 512 {
        return paths.into_iter().filter_map(|(s, p)| candidate(s, p)).collect();
    }
    let per = paths.len().div_ceil(threads);
    let mut chunks: Vec<Vec<(Source, PathBuf)>> = Vec::with_capacity(threads);
    let mut rest = paths.into_iter();
    loop {
        let chunk: Vec<_> = rest.by_ref().take(per).collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    std::thread::scope(|scope| {
        let workers: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || chunk.into_iter().filter_map(|(s, p)| candidate(s, p)).collect::<Vec<_>>())
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).flatten().collect()
    })
}

/// The [`Stamp`] of `item`, listed from a file of `size` bytes modified at `mtime_ns`.
fn stamp_of(item: &ExternalItem, size: u64, mtime_ns: i64) -> Stamp {
    stamp_by(item.source, item.messages, item.modified, size, mtime_ns)
}

/// [`stamp_of`] of an item's parts.
fn stamp_by(source: Source, messages: usize, modified: i64, size: u64, mtime_ns: i64) -> Stamp {
    match source {
        Source::Opencode => (messages as u64, modified),
        _ => (size, mtime_ns),
    }
}

/// One row of the list's cache as it is stored, borrowed (from the cache file's bytes or this process's entries):
/// a `--no-refresh` search ([`with_cached_rows`]) chooses the few sessions it searches among 10,000 rows without
/// making an item of each; [`Row::item`] makes those.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    pub source: Source,
    pub id: &'a str,
    pub session_id: &'a str,
    pub path: &'a OsStr,
    pub modified: i64,
    pub messages: usize,
    pub unsupported: Option<&'a str>,
    pub partial: bool,
    /// The state it was listed at, as [`list_stamped`] gives it.
    pub stamp: Stamp,
    /// The rest of the item, read only when the item is made ([`Row::item`]): a search makes a few of 10,000.
    details: Details<'a>,
}

#[derive(Debug, Clone)]
enum Details<'a> {
    /// This process's cache's item.
    Item(&'a ExternalItem),
    /// As the cache file holds them ([`encode_details`]).
    Packed(&'a [u8]),
}

impl<'a> Row<'a> {
    fn of(i: &'a ExternalItem, size: u64, mtime_ns: i64) -> Row<'a> {
        Row {
            source: i.source,
            id: &i.id,
            session_id: &i.session_id,
            path: i.path.as_os_str(),
            modified: i.modified,
            messages: i.messages,
            unsupported: i.unsupported.as_deref(),
            partial: i.partial,
            stamp: stamp_of(i, size, mtime_ns),
            details: Details::Item(i),
        }
    }

    /// The row's item, as it is stored.
    fn owned(&self) -> ExternalItem {
        let packed = match self.details {
            Details::Item(i) => return i.clone(),
            Details::Packed(bytes) => bytes,
        };
        // the file's checksum was right: what does not decode is a writer's bug, shown as empty, never a panic
        let (agent, title, model, branch, notes) = decode_details(packed).unwrap_or_default();
        ExternalItem {
            source: self.source,
            agent,
            id: self.id.into(),
            session_id: self.session_id.into(),
            path: PathBuf::from(self.path),
            title,
            modified: self.modified,
            messages: self.messages,
            model,
            branch,
            unsupported: self.unsupported.map(str::to_string),
            notes,
            partial: self.partial,
        }
    }

    /// The row's item as a list shows it (a Codex session's thread name as its title: `names`, [`codex_names`]).
    pub fn item(&self, names: &HashMap<String, String>) -> ExternalItem {
        let mut i = self.owned();
        named(&mut i, names);
        i
    }
}

/// What `f` makes of the list as the cache has it (`--no-refresh`, as [`list_stamped`] serves it: no store looked
/// at), its rows newest first, with Codex's thread names for [`Row::item`]: read in place from the cache file when
/// this process has not read it yet (a row costs no allocation), else from this process's cache. `None` when there
/// is no cache yet (the caller lists as usual, which makes it).
pub fn with_cached_rows<R>(
    workspace: &Path,
    homes: &Homes,
    opts: &ListOptions,
    f: impl FnOnce(Vec<Row<'_>>, &HashMap<String, String>) -> R,
) -> Option<R> {
    with_cached_rows_in(workspace, homes, opts, true, f)
}

/// [`with_cached_rows`], the rows in no order unless `ordered` (a search orders the few it keeps: sorting 10,000 rows
/// was a tenth of a search that found nothing); `opts.limit` needs them `ordered`.
pub fn with_cached_rows_in<R>(
    workspace: &Path,
    homes: &Homes,
    opts: &ListOptions,
    ordered: bool,
    f: impl FnOnce(Vec<Row<'_>>, &HashMap<String, String>) -> R,
) -> Option<R> {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let keep = |r: &Row| opts.only.is_none_or(|o| o == r.source) && (opts.quick || !r.partial);
    let ordered = ordered || opts.limit.is_some();
    fn sorted<'a>(rows: Vec<Row<'a>>, ordered: bool, limit: Option<usize>) -> Vec<Row<'a>> {
        if !ordered {
            return rows;
        }
        // their places sorted, not the rows (moving 10,000 rows of 150 bytes about was a tenth of a search)
        let mut order: Vec<u32> = (0..rows.len() as u32).collect();
        // (unstable: no two rows have one path)
        let at = |n: u32| &rows[n as usize];
        order.sort_unstable_by(|&x, &y| at(y).modified.cmp(&at(x).modified).then_with(|| at(x).path.cmp(at(y).path)));
        order.truncate(limit.unwrap_or(usize::MAX));
        let mut rows: Vec<Option<Row<'a>>> = rows.into_iter().map(Some).collect();
        order.into_iter().filter_map(|n| rows[n as usize].take()).collect()
    }
    let loaded = cache().get(&ws).is_some_and(|m| m.loaded);
    if !loaded {
        // a file not believed (or none, or an earlier version's JSON) is left to `cache_of`, which says so once
        let data = Dir::sessions(&ws).ok().and_then(|dir| read_cache_bytes(&dir));
        if let Some(entries) = data.as_deref().and_then(|d| read_entries(&ws, d).ok()).filter(|e| !e.is_empty()) {
            let names = codex_names(homes, opts);
            let rows = entries.into_iter().filter_map(|(_, row)| row).filter(keep).collect();
            return Some(f(sorted(rows, ordered, opts.limit), &names));
        }
    }
    let known = cache_of(&ws);
    if known.is_empty() {
        return None;
    }
    let names = codex_names(homes, opts);
    let rows =
        known.values().filter_map(|c| Some(Row::of(c.item.as_ref()?, c.size, c.mtime_ns))).filter(keep).collect();
    Some(f(sorted(rows, ordered, opts.limit), &names))
}

/// [`summarise`] of the transcripts `todo` (indices into `found`), on as many threads as there are cores (each
/// takes the next transcript when done with one: their sizes vary a hundredfold).
fn summarise_files(
    found: &[Candidate],
    todo: &[usize],
    ws: &Path,
    quick: bool,
) -> HashMap<usize, Option<ExternalItem>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if threads < 2 || todo.len() < 8 {
        return todo.iter().map(|&i| (i, summarise(&found[i], ws, quick))).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    while let Some(&i) = todo.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        out.push((i, summarise(&found[i], ws, quick)));
                    }
                    out
                })
            })
            .collect();
        // a reader that panicked leaves its transcripts to the list's own loop
        workers.into_iter().filter_map(|w| w.join().ok()).flatten().collect()
    })
}

fn candidate(source: Source, path: PathBuf) -> Option<Candidate> {
    let m = std::fs::metadata(&path).ok()?;
    Some(Candidate { source, path, size: m.len(), mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(), row: None })
}

/// A row for a store that could not be read at all (opencode's database, its schema unknown): why.
fn unreadable(source: Source, path: &Path, why: &str) -> ExternalItem {
    ExternalItem {
        source,
        agent: source.agent().into(),
        id: external_id(source, "-"),
        session_id: String::new(),
        path: path.to_path_buf(),
        title: format!("{}'s sessions", source.name()),
        modified: 0,
        messages: 0,
        model: String::new(),
        branch: None,
        unsupported: Some(why.to_string()),
        notes: Vec::new(),
        partial: false,
    }
}

/// What a list shows of one transcript, or `None` when it is not this workspace's (or cannot be read).
fn summarise(c: &Candidate, ws: &Path, quick: bool) -> Option<ExternalItem> {
    let modified = c.mtime_ns.div_euclid(1_000_000_000);
    if c.source == Source::Codex && c.path.extension().is_some_and(|e| e == "zst") {
        let id = codex::id_from_name(&c.path);
        return Some(ExternalItem {
            source: c.source,
            agent: c.source.agent().into(),
            id: external_id(c.source, &id),
            session_id: id,
            path: c.path.clone(),
            title: String::new(),
            modified,
            messages: 0,
            model: String::new(),
            branch: None,
            unsupported: Some(
                "a zstd-compressed rollout (.jsonl.zst): decompress it with `zstd -d` to import it".into(),
            ),
            notes: Vec::new(),
            partial: false,
        });
    }
    let mut whole = !(quick && c.size > 2 * HEAD_BYTES);
    let mut conv = parse(c.source, &if whole { read(&c.path)? } else { head_and_tail(&c.path)? }, &c.path);
    if !whole && conv.cwd.is_none() {
        // no record of the head or the tail names its folder: only the whole file can say
        conv = parse(c.source, &read(&c.path)?, &c.path);
        whole = true;
    }
    // a Gemini chat with no message at all is not a conversation (its ACP `session/load` leaves such files behind)
    if c.source == Source::GeminiCli && whole && conv.unsupported.is_none() && conv.segments.iter().all(Vec::is_empty) {
        return None;
    }
    item_of(c, &c.path, ws, &conv, whole, modified)
}

/// An opencode session: its row alone for a quick list, its messages read for an exact one.
fn summarise_session(
    c: &Candidate,
    row: &opencode::SessionRow,
    db: Option<&opencode::Db>,
    ws: &Path,
    quick: bool,
) -> Option<ExternalItem> {
    let db_path = PathBuf::from(c.path.to_string_lossy().rsplit_once('#').map_or("", |(p, _)| p));
    let modified = row.time_updated.div_euclid(1000);
    let read = if quick { None } else { db.map(|d| d.conversation(&row.id)) };
    let whole = read.is_some();
    let conv = match read {
        Some(Ok(conv)) => conv,
        Some(Err(e)) => {
            let mut i = item_of(c, &db_path, ws, &row_conversation(row), false, modified)?;
            i.partial = false;
            i.unsupported = Some(e.to_string());
            return Some(i);
        }
        None => row_conversation(row),
    };
    item_of(c, &db_path, ws, &conv, whole, modified)
}

fn row_conversation(row: &opencode::SessionRow) -> Conversation {
    Conversation {
        id: row.id.clone(),
        cwd: Some(row.directory.clone()),
        title: Some(row.title.clone()),
        modified: row.time_updated.div_euclid(1000),
        modified_ms: row.time_updated,
        ..Default::default()
    }
}

fn item_of(
    c: &Candidate,
    path: &Path,
    ws: &Path,
    conv: &Conversation,
    whole: bool,
    mtime: i64,
) -> Option<ExternalItem> {
    if !belongs(conv.cwd.as_deref(), ws) {
        return None;
    }
    Some(ExternalItem {
        source: c.source,
        agent: c.source.agent().into(),
        id: external_id(c.source, &conv.id),
        session_id: conv.id.clone(),
        path: path.to_path_buf(),
        title: conv.shown_title(),
        modified: if conv.modified > 0 { conv.modified } else { mtime },
        messages: if whole && conv.unsupported.is_none() { conv.restored().len() } else { 0 },
        model: conv.model.clone(),
        branch: conv.branch.clone(),
        unsupported: conv.unsupported.clone(),
        // what a head and tail leave out is no damage: only a whole read says what the file lacks
        notes: if whole { conv.notes.clone() } else { Vec::new() },
        partial: !whole && conv.unsupported.is_none(),
    })
}

/// Thread names are applied at list time (they live in another file, `session_index.jsonl`), so none here.
fn parse(source: Source, text: &str, path: &Path) -> Conversation {
    match source {
        Source::ClaudeCode => claude_code::parse(text, path),
        Source::Codex => codex::parse(text, path, &HashMap::new()),
        Source::GeminiCli => gemini::parse(text, path, gemini::project_root(path).as_deref()),
        Source::QwenCode => qwen::parse(text, path),
        Source::Pi => pi::parse(text, path),
        Source::Opencode => Conversation::default(),
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(super::into_text)
}

/// The whole lines of the first and the last [`HEAD_BYTES`] of the file, as one text.
fn head_and_tail(path: &Path) -> Option<String> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut head = vec![0u8; HEAD_BYTES.min(len) as usize];
    f.read_exact(&mut head).ok()?;
    let cut = memchr::memrchr(b'\n', &head).map_or(0, |i| i + 1);
    head.truncate(cut);
    let start = len.saturating_sub(HEAD_BYTES).max(cut as u64);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut tail = Vec::new();
    f.take(len - start).read_to_end(&mut tail).ok()?;
    // the tail's first line is cut, unless it starts right after a line of the head
    let from = if start == cut as u64 { 0 } else { memchr::memchr(b'\n', &tail).map_or(tail.len(), |i| i + 1) };
    head.extend_from_slice(&tail[from..]);
    Some(super::into_text(head))
}

/// The workspace's cache as it is now, shared (read from disk the first time): a list reads it without copying it.
fn cache_of(ws: &Path) -> Arc<Entries> {
    let mut all = cache();
    let mem = all.entry(ws.to_path_buf()).or_default();
    if !mem.loaded {
        mem.loaded = true;
        if let Some((disk, legacy)) = read_cache_file(ws) {
            mem.legacy = legacy;
            let entries = Arc::make_mut(&mut mem.entries);
            for (p, c) in disk {
                entries.entry(p).or_insert(c);
            }
        }
    }
    Arc::clone(&mem.entries)
}

/// Hands a list's changes to the cache (what lists running meanwhile changed stays): the transcripts it summarised
/// anew (`fresh`), those it found gone; writes the disk copy when exact items were added or removed.
fn put_cache(ws: &Path, fresh: Entries, gone: &[OsString], changed: bool) {
    let snapshot = {
        let mut all = cache();
        let mem = all.entry(ws.to_path_buf()).or_default();
        if !fresh.is_empty() || !gone.is_empty() {
            // copied only when a list running meanwhile still reads this version
            let entries = Arc::make_mut(&mut mem.entries);
            for p in gone {
                entries.remove(p);
            }
            for (p, c) in fresh {
                // a quick list's head-and-tail summary never replaces an exact one of the same file version
                let exact_kept = entries.get(&p).is_some_and(|old| {
                    (old.size, old.mtime_ns) == (c.size, c.mtime_ns)
                        && old.item.as_ref().is_none_or(|i| !i.partial)
                        && c.item.as_ref().is_some_and(|i| i.partial)
                });
                if !exact_kept {
                    entries.insert(p, c);
                }
            }
        }
        // encoded under the lock, without a copy of the entries: 10,000 of them are a few milliseconds
        let write = changed || std::mem::take(&mut mem.legacy);
        write.then(|| encode_cache(ws, &mem.entries))
    };
    if let Some(bytes) = snapshot
        && let Ok(dir) = Dir::sessions(ws)
        && dir.replace_file(CACHE_FILE_NAME, &bytes).is_ok()
    {
        // written whole, then renamed over the old one: a reader sees one version or the other. No sync: losing it
        // in a crash costs a re-read, nothing else. The JSON of an earlier version is not needed any more.
        dir.unlink(LEGACY_CACHE_FILE_NAME);
    }
}

/// The exact entries (a quick list's head-and-tail summaries are not kept on disk) as [`CACHE_FILE_NAME`]'s bytes.
fn encode_cache(ws: &Path, entries: &Entries) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut w = packed::Writer::new(CACHE_MAGIC, CACHE_VERSION);
    w.bytes(ws.as_os_str().as_bytes());
    let exact: Vec<(&OsString, &Cached)> =
        entries.iter().filter(|(_, c)| c.item.as_ref().is_none_or(|i| !i.partial)).collect();
    w.varint(exact.len() as u64);
    for (p, c) in exact {
        w.bytes(p.as_bytes());
        w.varint(c.size);
        w.i64(c.mtime_ns);
        let Some(i) = &c.item else {
            w.u8(0);
            continue;
        };
        w.u8(1 + Source::ALL.iter().position(|s| *s == i.source).expect("a known source") as u8);
        w.str(&i.id);
        w.str(&i.session_id);
        w.i64(i.modified);
        w.varint(i.messages as u64);
        w.opt_str(i.unsupported.as_deref());
        // the transcript's path is the key's but for opencode's sessions (`db#id`): empty when the same
        let path = i.path.as_os_str();
        w.bytes(if path == p.as_os_str() { b"" } else { path.as_bytes() });
        w.bytes(&encode_details(i));
    }
    w.finish()
}

/// What of an item a row reads only when the item is made ([`Row::item`]): its agent, title, model, branch and notes.
fn encode_details(i: &ExternalItem) -> Vec<u8> {
    let mut w = packed::Writer::nested();
    w.str(&i.agent);
    w.str(&i.title);
    w.str(&i.model);
    w.opt_str(i.branch.as_deref());
    w.varint(i.notes.len() as u64);
    for n in &i.notes {
        w.str(n);
    }
    w.into_bytes()
}

type Decoded = (String, String, String, Option<String>, Vec<String>);

fn decode_details(bytes: &[u8]) -> Option<Decoded> {
    let mut r = packed::Reader::nested(bytes);
    let (agent, title, model) = (r.str()?.to_string(), r.str()?.to_string(), r.str()?.to_string());
    let branch = r.opt_str()?.map(str::to_string);
    let notes = (0..r.count()?).map(|_| r.str().map(str::to_string)).collect::<Option<Vec<_>>>()?;
    r.done().then_some((agent, title, model, branch, notes))
}

/// The entries [`encode_cache`] wrote for `ws`; `Err` for a file not of this version, damaged, or another
/// workspace's.
fn decode_cache(ws: &Path, file: &[u8]) -> Result<Entries, packed::Refused> {
    let rows = read_entries(ws, file)?;
    let mut entries = Entries::with_capacity_and_hasher(rows.len(), Default::default());
    for (key, row) in rows {
        let (size, mtime_ns) = (key.size, key.mtime_ns);
        entries.insert(key.path.to_os_string(), Cached { size, mtime_ns, item: row.as_ref().map(Row::owned) });
    }
    Ok(entries)
}

/// What the cache keys an entry by, and the state of the file it summarised.
struct EntryKey<'a> {
    path: &'a OsStr,
    size: u64,
    mtime_ns: i64,
}

/// The entries of the cache file [`encode_cache`] wrote for `ws`, borrowed from its bytes (the row `None` for a
/// transcript of another workspace); none for another workspace's file; `Err` for a file not of this version,
/// damaged (a key twice included).
fn read_entries<'a>(ws: &Path, file: &'a [u8]) -> Result<Vec<(EntryKey<'a>, Option<Row<'a>>)>, packed::Refused> {
    use std::os::unix::ffi::OsStrExt;
    let damaged = || packed::Refused::Damaged;
    let mut r = packed::Reader::open(file, CACHE_MAGIC, CACHE_VERSION)?;
    if Path::new(OsStr::from_bytes(r.bytes().ok_or_else(damaged)?)) != ws {
        // a copied or moved workspace's `.PseudoClaude/`: its verdicts are about another folder
        return Ok(Vec::new());
    }
    let n = r.count().ok_or_else(damaged)?;
    let mut entries = Vec::with_capacity(n);
    let mut seen: rustc_hash::FxHashSet<&[u8]> = rustc_hash::FxHashSet::default();
    seen.reserve(n);
    for _ in 0..n {
        let mut one = || -> Option<(EntryKey<'a>, Option<Row<'a>>)> {
            let path = r.bytes()?;
            let key = EntryKey { path: OsStr::from_bytes(path), size: r.varint()?, mtime_ns: r.i64()? };
            let row = match r.u8()? {
                0 => None,
                s => {
                    let source = *Source::ALL.get(usize::from(s) - 1)?;
                    let (id, session_id, modified, messages) = (r.str()?, r.str()?, r.i64()?, r.varint()? as usize);
                    let unsupported = r.opt_str()?;
                    let path = Some(r.bytes()?).filter(|p| !p.is_empty()).map_or(key.path, OsStr::from_bytes);
                    let details = Details::Packed(r.bytes()?);
                    let stamp = stamp_by(source, messages, modified, key.size, key.mtime_ns);
                    let partial = false;
                    Some(Row { source, id, session_id, path, modified, messages, unsupported, partial, stamp, details })
                }
            };
            Some((key, row))
        };
        let entry = one().ok_or_else(damaged)?;
        if !seen.insert(entry.0.path.as_bytes()) {
            return Err(damaged());
        }
        entries.push(entry);
    }
    if !r.done() {
        return Err(damaged());
    }
    Ok(entries)
}

/// The disk copy of the cache: [`CACHE_FILE_NAME`], else an earlier version's JSON (then `true`); `None` when
/// there is neither (or one not believed, said through [`packed::refused`]).
fn read_cache_file(ws: &Path) -> Option<(Entries, bool)> {
    let dir = Dir::sessions(ws).ok()?;
    match read_cache_bytes(&dir) {
        Some(bytes) => match decode_cache(ws, &bytes) {
            Ok(entries) => Some((entries, false)),
            Err(why) => {
                packed::refused("the cache of the other agents' sessions", &dir.path().join(CACHE_FILE_NAME), &why);
                None
            }
        },
        None => {
            let mut data = Vec::new();
            dir.open(LEGACY_CACHE_FILE_NAME, Access::Read).ok()?.read_to_end(&mut data).ok()?;
            let file = serde_json::from_slice::<CacheFile>(&data).ok();
            let file = file.filter(|c| c.version == LEGACY_CACHE_VERSION && c.workspace == ws)?;
            Some((file.entries.into_iter().map(|(p, c)| (p.into_os_string(), c)).collect(), true))
        }
    }
}

/// [`CACHE_FILE_NAME`]'s bytes, mapped; `None` when there is none (or it cannot be mapped).
fn read_cache_bytes(dir: &Dir) -> Option<packed::Bytes> {
    packed::Bytes::map(&dir.open(CACHE_FILE_NAME, Access::Read).ok()?)
}

/// Forgets what this process cached (the disk copy stays): for tests and benches that measure a cold list.
pub fn forget_cache() {
    cache().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace, a Claude Code home, the workspace's canonical path and its folder of transcripts (made).
    fn claude_store() -> (tempfile::TempDir, tempfile::TempDir, PathBuf, PathBuf) {
        let (ws, home) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let wsc = ws.path().canonicalize().expect("canonical");
        let dir = home.path().join("projects").join(claude_code::folder_name(&wsc));
        std::fs::create_dir_all(&dir).expect("mkdir");
        (ws, home, wsc, dir)
    }

    /// A list run while another reads the cache (the picker's full list and a preview's `find` start in the same
    /// step) is served from it: it neither finds it empty nor reads the transcripts again.
    #[test]
    fn a_list_run_while_another_reads_the_cache_is_served_from_it() {
        let (ws, home, wsc, dir) = claude_store();
        let record = |kind: &str, uuid: &str, parent: Option<&str>, message: serde_json::Value| {
            serde_json::json!({"type": kind, "uuid": uuid, "parentUuid": parent, "cwd": wsc, "sessionId": "s1",
                "timestamp": "2026-12-01T09:00:00.000Z", "message": message})
            .to_string()
        };
        let text = [
            record("user", "u1", None, serde_json::json!({"role": "user", "content": "hello there"})),
            record(
                "assistant",
                "a1",
                Some("u1"),
                serde_json::json!({"role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "hi"}]}),
            ),
        ]
        .join("\n")
            + "\n";
        let path = dir.join("s1.jsonl");
        std::fs::write(&path, &text).expect("write");
        let homes = Homes { claude: Some(home.path().to_path_buf()), ..Homes::default() };
        let first = list_with(ws.path(), &homes, &ListOptions::default());
        assert_eq!(first.len(), 1, "{first:?}");
        let running = cache_of(&wsc);
        // the same size and modification time, other words: a list that read the file again would show them
        let mtime = std::fs::metadata(&path).expect("stat").modified().expect("mtime");
        std::fs::write(&path, text.replace("hello there", "howdy there")).expect("rewrite");
        std::fs::File::options().write(true).open(&path).expect("open").set_modified(mtime).expect("set mtime");
        let second = list_with(ws.path(), &homes, &ListOptions::default());
        assert_eq!(second.len(), 1, "{second:?}");
        assert_eq!(second[0].title, first[0].title, "served from the cache the other list reads");
        assert_eq!(running.len(), 1, "the other list's version is whole");
    }

    /// An earlier version's JSON cache is read (its title, not the file's: no transcript read again), written in the
    /// binary form at once, and removed.
    #[test]
    fn an_earlier_versions_json_cache_is_used_once_and_replaced() {
        let (ws, home, wsc, dir) = claude_store();
        let sessions = wsc.join(".PseudoClaude/sessions");
        std::fs::create_dir_all(&sessions).expect("mkdir");
        let path = dir.join("s1.jsonl");
        let line = serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null, "cwd": wsc, "sessionId": "s1",
            "timestamp": "2026-12-01T09:00:00.000Z", "message": {"role": "user", "content": "the file says this"}});
        std::fs::write(&path, format!("{line}\n")).expect("write");
        let meta = std::fs::metadata(&path).expect("stat");
        let item = ExternalItem {
            source: Source::ClaudeCode,
            agent: "claude".into(),
            id: external_id(Source::ClaudeCode, "s1"),
            session_id: "s1".into(),
            path: path.clone(),
            title: "the JSON cache says this".into(),
            modified: 1,
            messages: 1,
            model: String::new(),
            branch: None,
            unsupported: None,
            notes: Vec::new(),
            partial: false,
        };
        let mtime_ns = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let legacy = serde_json::json!({"version": LEGACY_CACHE_VERSION, "workspace": wsc,
            "entries": {path.to_str().expect("utf-8"): {"size": meta.len(), "mtime_ns": mtime_ns, "item": item}}});
        std::fs::write(sessions.join(LEGACY_CACHE_FILE_NAME), legacy.to_string()).expect("write");
        let homes = Homes { claude: Some(home.path().to_path_buf()), ..Homes::default() };
        let listed = list_with(ws.path(), &homes, &ListOptions::default());
        assert_eq!(listed.iter().map(|i| i.title.as_str()).collect::<Vec<_>>(), ["the JSON cache says this"]);
        assert!(sessions.join(CACHE_FILE_NAME).is_file(), "written in the new form");
        assert!(!sessions.join(LEGACY_CACHE_FILE_NAME).exists(), "the JSON removed");
        let bytes = std::fs::read(sessions.join(CACHE_FILE_NAME)).expect("read");
        let entries = decode_cache(&wsc, &bytes).expect("decodes");
        let cached = entries.get(path.as_os_str()).and_then(|c| c.item.as_ref()).expect("the entry");
        assert_eq!(cached.title, "the JSON cache says this");
        // another workspace's file is no verdict here
        assert!(decode_cache(Path::new("/elsewhere"), &bytes).expect("decodes").is_empty());
    }

    /// The cache file read in place (a `--no-refresh` search) gives the rows a decode of it gives, newest first with
    /// their stamps; a key twice, a byte changed or another workspace's file gives no row at all.
    #[test]
    fn the_cache_file_read_in_place_gives_what_its_decode_gives_and_a_damaged_one_nothing() {
        let item = |n: i64, notes: Vec<String>, branch: Option<&str>| ExternalItem {
            source: Source::ClaudeCode,
            agent: "claude".into(),
            id: external_id(Source::ClaudeCode, &format!("s{n}")),
            session_id: format!("s{n}"),
            path: PathBuf::from(format!("/p/s{n}.jsonl")),
            title: format!("title {n}"),
            modified: n,
            messages: n as usize,
            model: "m".into(),
            branch: branch.map(str::to_string),
            unsupported: None,
            notes,
            partial: false,
        };
        let (ws, _home, wsc, _dir) = claude_store();
        let sessions = wsc.join(".PseudoClaude/sessions");
        std::fs::create_dir_all(&sessions).expect("mkdir");
        let mut entries = Entries::default();
        let (older, newer) = (item(1, vec!["a note".into()], Some("main")), item(2, Vec::new(), None));
        // (the older keyed as opencode's sessions are, by something else than its path)
        for (key, i, size) in [("/p/db#s1", &older, 10), ("/p/s2.jsonl", &newer, 20)] {
            entries.insert(key.into(), Cached { size, mtime_ns: 7, item: Some(i.clone()) });
        }
        entries.insert("/p/elsewhere.jsonl".into(), Cached { size: 1, mtime_ns: 1, item: None });
        let bytes = encode_cache(&wsc, &entries);
        std::fs::write(sessions.join(CACHE_FILE_NAME), &bytes).expect("write");
        let opts = ListOptions { no_refresh: true, ..ListOptions::default() };
        let rows = |ws: &Path| {
            with_cached_rows(ws, &Homes::default(), &opts, |rows, names| {
                rows.iter().map(|r| (r.item(names), r.stamp)).collect::<Vec<_>>()
            })
        };
        let expected = vec![(newer.clone(), (20, 7)), (older.clone(), (10, 7))];
        assert_eq!(rows(ws.path()), Some(expected.clone()));
        // once this process holds the cache (an editor's lists), the same rows from it
        assert_eq!(cache_of(&wsc).len(), 3);
        assert_eq!(rows(ws.path()), Some(expected));
        assert_eq!(decode_cache(&wsc, &bytes).expect("decodes"), entries);
        assert!(read_entries(Path::new("/elsewhere"), &bytes).expect("reads").is_empty());
        // the same key twice (checksummed, so only a writer's bug could make it): not believed
        let mut w = packed::Writer::new(CACHE_MAGIC, CACHE_VERSION);
        w.bytes(wsc.as_os_str().as_encoded_bytes());
        w.varint(2);
        for _ in 0..2 {
            w.bytes(b"/p/s1.jsonl");
            w.varint(1);
            w.i64(1);
            w.u8(0);
        }
        assert_eq!(read_entries(&wsc, &w.finish()).err(), Some(packed::Refused::Damaged));
        // a byte changed: no row, in place or decoded (this process never loaded this workspace's cache)
        let (ws2, _home2, wsc2, _dir2) = claude_store();
        let sessions2 = wsc2.join(".PseudoClaude/sessions");
        std::fs::create_dir_all(&sessions2).expect("mkdir");
        let mut changed = encode_cache(&wsc2, &entries);
        let at = changed.len() / 2;
        changed[at] ^= 0x20;
        std::fs::write(sessions2.join(CACHE_FILE_NAME), &changed).expect("write");
        assert_eq!(rows(ws2.path()), None);
    }

    #[test]
    fn other_agents_sessions_are_merged_by_time_after_the_pinned_ones() {
        use crate::message::Message;
        use crate::session::{self, Context, ListOptions, Writer, WriterOptions, meta};
        let ws = tempfile::tempdir().expect("tempdir");
        let session_with = |ws: &Path, text: &str| {
            let ctx = Context::new(ws).expect("context");
            let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
            w.append(&Message::user(text)).expect("append");
            w.append(&Message::assistant("ok")).expect("append");
            w.close().expect("close");
            ctx
        };
        let pinned = session_with(ws.path(), "pinned and old");
        meta::append(&pinned, meta::pin_entry(true)).expect("pin");
        session_with(ws.path(), "recent");
        let ours = session::list(ws.path(), &ListOptions::default()).expect("list");
        let at = |title: &str| ours.iter().find(|i| i.title == title).map(activity).expect("listed");
        let theirs = |title: &str, modified: i64| ExternalItem {
            source: Source::Codex,
            agent: "codex".into(),
            id: external_id(Source::Codex, title),
            session_id: title.into(),
            path: PathBuf::from(format!("/x/{title}.jsonl")),
            title: title.into(),
            modified,
            messages: 1,
            model: String::new(),
            branch: None,
            unsupported: None,
            notes: Vec::new(),
            partial: false,
        };
        let recent = at("recent");
        let merged = merge(ours, vec![theirs("newer", recent + 10), theirs("older", recent - 10)]);
        let titles: Vec<&str> = merged
            .iter()
            .map(|i| match i {
                ListItem::Ours(o) => o.title.as_str(),
                ListItem::External(e) => e.title.as_str(),
            })
            .collect();
        assert_eq!(titles, ["pinned and old", "newer", "recent", "older"]);
    }
}
