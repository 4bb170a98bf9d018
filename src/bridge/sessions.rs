//! Session log exports: what `lua/pseudoclaude/sessions.lua` calls.
//!
//! Every function takes the workspace directory first (Lua resolves it from the configuration) and
//! returns plain data; errors (a hostile id, a missing session, a lock held by another editor) come
//! back as values through [`super::export`], never as a raise into Lua.
//!
//! | export             | arguments                                   | returns                          |
//! |--------------------|---------------------------------------------|----------------------------------|
//! | `sessions_list`    | workspace, `{exclude?, include_empty?, check_locks?, limit?, max_read?, pricing?, include_pinned?, all?, workspaces_file?, external?}`? | `SessionInfo[]` (and with `external`, `ExternalItem`s), newest first, packed ([`super::rows`]) |
//! | `sessions_list_lend` | the same                                  | `{addr, len, holders}`: the same list packed, lent in the core's memory until the next lend (no copy), and `{row, holder}` pairs for `held_by` ([`lend`]) |
//! | `sessions_list_json` | the same                                  | the same list as JSON text (`bulk`): Lua without the FFI, and the tests' oracle |
//! | `sessions_list_async` | workspace, options as above (and `matcher?`, `json?`, `parts?`), `callback(ok, {id, count, matcher?})` | a ticket number, at once |
//! | `sessions_list_take` | the list's id                             | the list, packed (JSON with `json`), once, or its next part of `parts` rows; nil after |
//! | `sessions_list_keep` | the list's id                             | `{addr, len}`: the packed list (whole) lent in the core's memory, not copied, until released; nil after |
//! | `sessions_list_release` | the list's id                          | true when a kept list was forgotten |
//! | `sessions_list_kept` | (none)                                    | how many lists are kept (tests)  |
//! | `sessions_ids`     | workspace                                   | ids, most recently active first  |
//! | `sessions_holder`  | workspace, id                               | who holds its lock, or nil (no read of the log) |
//! | `sessions_preview_async` | workspace, id, `{max_messages?, budget?, max_bytes?, pricing?}`?, `callback(ok, preview)` | a ticket number, at once |
//! | `sessions_info`    | workspace, id, pricing?                     | `SessionInfo` with `held_by`     |
//! | `sessions_load`    | workspace, id                               | `Loaded` + `damage_report`       |
//! | `sessions_cleanup` | workspace, days (may be fractional), keep?  | ids removed, oldest first        |
//! | `sessions_delete`  | workspace, id                               | the id removed                   |
//! | `sessions_mark_async` | workspace, id, `{title?, pinned?}`, `callback(ok, info)` | a ticket, at once (names and pins; see [`mark_async`]) |
//! | `sessions_fork`    | workspace, id, index?                       | `{id, messages, forked_from}`    |
//! | `sessions_fork_async` | workspace, id, index?, `callback(ok, forked)` | a ticket, at once             |
//! | `sessions_export`  | workspace, id, format                       | the document                     |
//! | `sessions_export_async` | workspace, id, `{format?, path?}`, `callback(ok, {text?, path?})` | a ticket, at once |
//! | `sessions_import`  | workspace, path or another agent's id (`gemini:…`) | `Imported` (`{id, messages, existing, notes}`) |
//! | `sessions_import_async` | workspace, path, `callback(ok, imported)` | a ticket, at once                  |
//! | `sessions_hand_over_async` | workspace, `{path, agent?, source?}` or `{id}`, `callback(ok, handover)` | a ticket, at once: another agent's session imported and recorded as that agent's ([`crate::acp::handover`]) |
//!
//! The `_async` exports run on the bridge's worker threads ([`super::jobs`]), so that listing
//! thousands of sessions (about 25 µs each, most of it the kernel's) or reading a 100 MiB one never
//! freezes the editor. A list crosses packed ([`super::rows`]: fixed binary records Lua reads through the FFI),
//! because building ten thousand rows from them costs the main loop a few milliseconds where JSON costs 27 and
//! nvim-oxi's conversion 190 (issue 39); the picker reads only the rows it draws, and gets the full list's fuzzy
//! matcher built on the worker thread with it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use nvim_oxi::Object;
use serde::{Deserialize, Serialize};

use super::{Args, BridgeError, BridgeResult, export, export_object, jobs, table_arg, workspace};
use crate::import::list::ListItem;
use crate::import::{self, Homes};
use crate::session::entry::ForkedFrom;
use crate::session::export::{self as export_doc, Format};
use crate::session::{self, Context, Entry, ListOptions, Loaded, RetentionOptions, SessionInfo, fork, lock, meta};
use crate::usage::Pricing;

/// The session exports, chained into the export table by [`super::exports`].
pub fn exports() -> Vec<(&'static str, Object)> {
    vec![
        export_object("sessions_list", |a| {
            let data = packed_list(&workspace(a)?, &table_arg::<ListArgs>(a, 1)?)?;
            Ok(Object::from(nvim_oxi::String::from_bytes(&data)))
        }),
        export("sessions_list_lend", |a| lend(&workspace(a)?, &table_arg::<ListArgs>(a, 1)?)),
        export("sessions_list_json", |a| super::bulk(&list_items(&workspace(a)?, &table_arg::<ListArgs>(a, 1)?)?)),
        export("sessions_list_async", list_async),
        export_object("sessions_list_take", super::parts::take),
        export("sessions_list_keep", super::parts::keep),
        export("sessions_list_release", super::parts::release),
        export("sessions_list_kept", |_| Ok(super::parts::kept_count())),
        export("sessions_holder", |a| Ok(lock::holder(&Context::open(&workspace(a)?, &a.get::<String>(1)?)?))),
        export("sessions_ids", |a| Ok(session::list::ids(&workspace(a)?)?)),
        export("sessions_info", |a| info_priced(&workspace(a)?, &a.get::<String>(1)?, &table_arg::<Pricing>(a, 2)?)),
        export("sessions_load", |a| load(&workspace(a)?, &a.get::<String>(1)?)),
        export("sessions_cleanup", |a| cleanup(&workspace(a)?, a.get::<f64>(1)?, a.get::<Option<String>>(2)?)),
        export("sessions_delete", |a| delete(&workspace(a)?, &a.get::<String>(1)?)),
        export("sessions_mark_async", mark_async),
        export("sessions_fork", |a| {
            Ok(fork::fork(&workspace(a)?, &a.get::<String>(1)?, index_arg(a.get::<Option<i64>>(2)?)?)?)
        }),
        export("sessions_fork_async", fork_async),
        export("sessions_changes", |a| super::bulk(&crate::rewind::changes_of(&workspace(a)?, &a.get::<String>(1)?)?)),
        export("sessions_fork_files", |a| {
            let modified: Vec<String> = super::table_arg(a, 3)?;
            Ok(crate::rewind::fork_files(
                &workspace(a)?,
                &a.get::<String>(1)?,
                a.get::<usize>(2)?,
                crate::rewind::DEFAULT_MAX_FILE_BYTES,
                &modified,
            )?)
        }),
        export("sessions_changes_async", |a| {
            let (ws, id, callback): (std::path::PathBuf, String, super::jobs::Callback) =
                (workspace(a)?, a.get(1)?, a.function(2)?);
            // in JSON chunks decoded one per main-loop step: thousands of turns converted at once are a long step
            super::jobs::spawn("sessions_changes_async", None, callback, move || {
                Ok(super::parts::hold_chunks(super::bulk_chunks(
                    &crate::rewind::changes_of(&ws, &id)?,
                    super::CHUNK_BYTES,
                )?))
            })
        }),
        export("sessions_fork_files_async", |a| {
            let (ws, id, index): (std::path::PathBuf, String, usize) = (workspace(a)?, a.get(1)?, a.get(2)?);
            let modified: Vec<String> = super::table_arg(a, 3)?;
            let callback: super::jobs::Callback = a.function(4)?;
            super::jobs::spawn("sessions_fork_files_async", None, callback, move || {
                Ok(crate::rewind::fork_files(&ws, &id, index, crate::rewind::DEFAULT_MAX_FILE_BYTES, &modified)?)
            })
        }),
        export("sessions_export", |a| {
            let format = Format::parse(a.get::<Option<String>>(2)?.as_deref().unwrap_or("markdown"))?;
            Ok(export_doc::export(&Context::open(&workspace(a)?, &a.get::<String>(1)?)?, format)?)
        }),
        export("sessions_export_async", export_async),
        export("sessions_import", |a| Ok(import_what(&workspace(a)?, &path_arg(a, 1)?)?)),
        export("sessions_import_async", import_async),
        export("sessions_hand_over_async", hand_over_async),
    ]
}

/// Options of `sessions_list`, as Lua passes them (every key optional): the list's own, plus `all`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ListArgs {
    #[serde(flatten)]
    pub options: ListOptions,
    /// The sessions of every workspace `workspaces_file` names ([`crate::workspaces`]), this one
    /// included, each with its `workspace`.
    pub all: bool,
    pub workspaces_file: Option<PathBuf>,
    /// This workspace's sessions of the other agents too ([`crate::import::list`]); with `max_read`, only the
    /// head and tail of each transcript not cached yet is read (the picker's first rows).
    pub external: bool,
    /// `sessions_list_async`: also build the picker's fuzzy matcher over the rows' haystacks ([`super::rows::haystack`])
    /// on the worker thread, and hand back its handle ([`super::fuzzy`]).
    pub matcher: bool,
    /// `sessions_list_async`: keep the list as JSON text (`bulk`) instead of packed (a Lua without the FFI).
    pub json: bool,
    /// `sessions_list_async`: hand the packed list over in parts of this many rows, each a packed list of its own,
    /// one per `sessions_list_take` (`list({ on_done })` takes one per main-loop step).
    pub parts: Option<usize>,
}

/// A loaded session plus its one-sentence damage report ("" when nothing was repaired).
#[derive(Debug, Clone, Serialize)]
pub struct LoadedView {
    #[serde(flatten)]
    pub loaded: Loaded,
    pub damage_report: String,
}

/// The workspace's sessions, newest first; with `all`, those of every known workspace.
pub fn list(workspace: &Path, args: &ListArgs) -> BridgeResult<Vec<SessionInfo>> {
    if !args.all {
        return Ok(session::list(workspace, &args.options)?);
    }
    let mut known = args.workspaces_file.as_deref().map(crate::workspaces::known).unwrap_or_default();
    // This workspace is always in, whether or not a session of it was started yet.
    let here = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    if !known.contains(&here) {
        known.insert(0, here);
    }
    Ok(session::list::list_every(&known, &args.options))
}

/// [`list`], with the other tools' sessions of the workspace merged in when `args.external` asks for them: pinned
/// sessions first, then newest first (a session of ours by its last message, another tool's by its last record).
pub fn list_items(workspace: &Path, args: &ListArgs) -> BridgeResult<Vec<ListItem>> {
    let ours = list(workspace, args)?;
    if !args.external {
        return Ok(ours.into_iter().map(|i| ListItem::Ours(Box::new(i))).collect());
    }
    let opts = import::list::ListOptions {
        limit: args.options.limit,
        quick: args.options.max_read.is_some(),
        ..Default::default()
    };
    let theirs = import::list::list_with(workspace, &Homes::from_env(), &opts);
    // an agent's own transcript of a session we ran is that session: matched against all of ours (the rows asked for
    // may be limited, or leave the current session out)
    let every = session::list(workspace, &ListOptions { include_empty: true, ..Default::default() })?;
    Ok(import::list::merge(ours, import::list::without_ours(theirs, &every)))
}

/// The list `args` asks for, packed: the full list of this workspace as [`super::full_list`] keeps it; a limited list
/// (short), every workspace's or the other tools' sessions (no stamp covers them) read and packed.
fn packed_list(workspace: &Path, args: &ListArgs) -> BridgeResult<Arc<Vec<u8>>> {
    if args.all || args.external || args.options.limit.is_some() {
        return Ok(Arc::new(super::rows::pack(&list_items(workspace, args)?)?));
    }
    super::full_list::packed(workspace, &args.options)
}

/// A list lent to Lua ([`lend`]): where the packed list is in the core's memory, and the holders of locks.
#[derive(Debug, Serialize)]
struct Lent {
    addr: u64,
    len: usize,
    /// (row counted from 0, holder): the rows whose `held_by` Lua sets.
    holders: Vec<(usize, String)>,
}

/// The last list lent: kept alive until the next is lent.
static LENT: Mutex<Option<Arc<Vec<u8>>>> = Mutex::new(None);

/// `sessions_list_lend(workspace, opts)`: the list `sessions_list` gives, lent instead of copied into a Lua string
/// (100,000 rows: 24 MB, copied twice on the main loop): the address and length of the packed list in the core's
/// memory, valid until the next `sessions_list_lend` (the bridge keeps the last list lent), and the holders of
/// locks apart, where `sessions_list` writes them into a copy of the kept list. `sessions.list()` reads it through
/// the FFI before it returns (session_rows.lua's `lent()`); only the main thread lends.
fn lend(workspace: &Path, args: &ListArgs) -> BridgeResult<Lent> {
    let super::full_list::Listed { data, holders } = if args.all || args.external || args.options.limit.is_some() {
        super::full_list::Listed { data: packed_list(workspace, args)?, holders: Vec::new() }
    } else {
        super::full_list::listed(workspace, &args.options)?
    };
    let lent = Lent { addr: data.as_ptr() as u64, len: data.len(), holders };
    *LENT.lock().unwrap_or_else(PoisonError::into_inner) = Some(data);
    Ok(lent)
}

/// `sessions_import_async(workspace, path, callback)`: [`import::import`] on a worker thread.
fn import_async(a: &Args) -> BridgeResult<u64> {
    let ws = workspace(a)?;
    let path = path_arg(a, 1)?;
    let callback: jobs::Callback = a.function(2)?;
    let what = format!("the import of {}", path.display());
    jobs::spawn_write("sessions_import_async", what, callback, move || Ok(import_what(&ws, &path)?))
}

/// A file, or another agent's session id as a row of the list gives it (`gemini:…`).
fn import_what(ws: &Path, what: &Path) -> crate::session::Result<import::Imported> {
    match what.to_str() {
        Some(s) => import::import_any(ws, &Homes::from_env(), s),
        None => import::import(ws, what),
    }
}

/// What `sessions_hand_over_async` hands over: a file (with the agent to hand it to, else the one of its `source`), or
/// the other agent's own id of a session.
#[derive(Debug, Default, Deserialize)]
struct HandOverArgs {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    id: Option<String>,
}

/// `sessions_hand_over_async(workspace, {path, agent?, source?} | {id}, callback)`: [`crate::acp::handover`] on a
/// worker thread, with the agents of `setup({ agents })`.
fn hand_over_async(a: &Args) -> BridgeResult<u64> {
    use crate::acp::handover;
    let ws = workspace(a)?;
    let args: HandOverArgs = table_arg(a, 1)?;
    let agents = super::agent::agents_config();
    let callback: jobs::Callback = a.function(2)?;
    if let Some(path) = args.path.filter(|p| !p.is_empty()) {
        let agent = match (args.agent.filter(|n| !n.is_empty()), args.source.as_deref()) {
            (Some(name), _) => name,
            (None, Some(source)) => handover::agent_for(source).to_string(),
            (None, None) => return Err(BridgeError::msg("bad argument #2: neither `agent` nor `source` is given")),
        };
        let path = PathBuf::from(path);
        let what = format!("the hand-over of {} to {agent}", path.display());
        return jobs::spawn_write("sessions_hand_over_async", what, callback, move || {
            Ok(handover::hand_over(&ws, &path, &agent, &agents)?)
        });
    }
    let Some(id) = args.id.filter(|i| !i.is_empty()) else {
        return Err(BridgeError::msg("bad argument #2: give `path` or `id`"));
    };
    let what = format!("the hand-over of session {id}");
    jobs::spawn_write("sessions_hand_over_async", what, callback, move || {
        Ok(handover::hand_over_id(&ws, &id, &agents, &Homes::from_env())?)
    })
}

/// A file path argument: a non-empty string.
fn path_arg(a: &Args, index: usize) -> BridgeResult<PathBuf> {
    let p = a.get::<String>(index)?;
    if p.is_empty() {
        return Err(BridgeError::msg(format!("bad argument #{}: the path is empty", index + 1)));
    }
    Ok(PathBuf::from(p))
}

/// One session's list entry, with who holds its lock; errors for a bad or missing id.
pub fn info(workspace: &Path, id: &str) -> BridgeResult<SessionInfo> {
    info_priced(workspace, id, &Pricing::default())
}

/// [`info`], with its `cost` from `pricing`.
pub fn info_priced(workspace: &Path, id: &str, pricing: &Pricing) -> BridgeResult<SessionInfo> {
    let ctx = Context::open(workspace, id)?;
    let mut info = session::list::info_priced(&ctx, pricing)?;
    info.held_by = lock::holder(&ctx);
    Ok(info)
}

/// The history a resume restores, and what was repaired to get it.
pub fn load(workspace: &Path, id: &str) -> BridgeResult<LoadedView> {
    let ctx = Context::open(workspace, id)?;
    let loaded = session::load(&ctx)?;
    let damage_report = loaded.damage_report();
    Ok(LoadedView { loaded, damage_report })
}

/// Removes sessions idle for more than `days` (fractions allowed; 0 = keep forever), never `keep`.
pub fn cleanup(workspace: &Path, days: f64, keep: Option<String>) -> BridgeResult<Vec<String>> {
    let Some(mut opts) = RetentionOptions::for_days(days).map_err(BridgeError::msg)? else { return Ok(Vec::new()) };
    opts.keep = keep;
    let removed = session::cleanup(workspace, &opts)?;
    // The files' copies no session names any more go with them (a session that cannot be read keeps them all).
    crate::rewind::collect_garbage(workspace)?;
    Ok(removed)
}

/// Deletes a session's directory, under its lock so that no editor opens it halfway through;
/// refused while another editor holds it.
pub fn delete(workspace: &Path, id: &str) -> BridgeResult<String> {
    let ctx = Context::open(workspace, id)?;
    session::retention::remove(&ctx)?;
    Ok(ctx.id)
}

/// What `sessions_mark_async` writes: a name, a pin, or both.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct MarkArgs {
    title: Option<String>,
    pinned: Option<bool>,
}

/// `sessions_mark_async(workspace, id, {title?, pinned?}, callback)`: writes `title`/`pin` entries to
/// session `id`'s log on a worker thread and returns a ticket at once; `callback(true, info)` hands
/// back the session's list entry as it is then. The id and the title are checked before anything is
/// queued (a bad one is an error at once). This editor's current session is written through its
/// agent's writer (one writer per log); any other is opened under its lock, so one open in another
/// editor is refused.
fn mark_async(a: &Args) -> BridgeResult<u64> {
    let ctx = Context::open(&workspace(a)?, &a.get::<String>(1)?)?;
    let mark = table_arg::<MarkArgs>(a, 2)?;
    let callback: jobs::Callback = a.function(3)?;
    let mut entries: Vec<Entry> = Vec::new();
    if let Some(t) = &mark.title {
        entries.push(meta::title_entry(t)?);
    }
    if let Some(p) = mark.pinned {
        entries.push(meta::pin_entry(p));
    }
    if entries.is_empty() {
        return Err(BridgeError::msg("bad argument #3: give a title or pinned"));
    }
    let agent = super::agent::live_agent(&ctx.id);
    let what = format!("the {} of session {}", if mark.title.is_some() { "name" } else { "pin" }, ctx.id);
    jobs::spawn_write("sessions_mark_async", what, callback, move || {
        for entry in entries {
            match &agent {
                Some(ag) => {
                    let pinned = entry.pinned;
                    ag.log.append_meta(entry).map_err(BridgeError::msg)?;
                    if let Some(p) = pinned {
                        meta::noted_pin(&ctx, p);
                    }
                }
                None => {
                    meta::append(&ctx, entry)?;
                }
            }
        }
        let mut info = session::list::info(&ctx)?;
        info.held_by = lock::holder(&ctx);
        Ok(info)
    })
}

/// A message index from Lua: 1 or more, or nil for "the end".
fn index_arg(index: Option<i64>) -> BridgeResult<Option<usize>> {
    match index {
        None => Ok(None),
        Some(i) if i >= 1 => Ok(Some(i as usize)),
        Some(i) => Err(BridgeError::msg(format!("message {i} is out of range: messages are numbered from 1"))),
    }
}

/// What a fork made, as Lua gets it.
#[derive(Debug, Serialize)]
struct ForkView {
    id: String,
    messages: usize,
    forked_from: ForkedFrom,
}

/// `sessions_fork_async(workspace, id, index, callback)`: [`fork::fork`] on a worker thread.
fn fork_async(a: &Args) -> BridgeResult<u64> {
    let ws = workspace(a)?;
    let id: String = a.get(1)?;
    Context::for_id(&ws, &id)?;
    let index = index_arg(a.get::<Option<i64>>(2)?)?;
    let callback: jobs::Callback = a.function(3)?;
    jobs::spawn_write("sessions_fork_async", format!("the fork of session {id}"), callback, move || {
        let f = fork::fork(&ws, &id, index)?;
        Ok(ForkView { id: f.id, messages: f.messages, forked_from: f.forked_from })
    })
}

/// Options of `sessions_export_async`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ExportArgs {
    format: Option<String>,
    /// Write the document here (an absolute path) instead of handing it back.
    path: Option<String>,
}

/// What `sessions_export_async` hands back: the document, or where it was written.
#[derive(Debug, Serialize)]
struct ExportDone {
    text: Option<String>,
    path: Option<String>,
    bytes: usize,
}

/// `sessions_export_async(workspace, id, {format?, path?}, callback)`: the export on a worker thread.
fn export_async(a: &Args) -> BridgeResult<u64> {
    let ctx = Context::open(&workspace(a)?, &a.get::<String>(1)?)?;
    let args = table_arg::<ExportArgs>(a, 2)?;
    let format = Format::parse(args.format.as_deref().unwrap_or("markdown"))?;
    let callback: jobs::Callback = a.function(3)?;
    let what = format!("the export of session {}", ctx.id);
    jobs::spawn_write("sessions_export_async", what, callback, move || {
        let text = export_doc::export(&ctx, format)?;
        let bytes = text.len();
        match args.path {
            Some(path) => {
                write_whole(Path::new(&path), text.as_bytes())
                    .map_err(|e| BridgeError::msg(format!("cannot write {path}: {e}")))?;
                Ok(ExportDone { text: None, path: Some(path), bytes })
            }
            None => Ok(ExportDone { text: Some(text), path: None, bytes }),
        }
    })
}

/// Writes `bytes` to `path` whole or not at all, durably (the export runs on a worker: the main loop never waits on
/// its sync), so an editor that exits (or dies, or loses power) in the middle leaves the old file or the new one,
/// never half of one.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::atomic::replace(path, bytes, crate::atomic::Durable::Full, crate::atomic::Mode::Keep)
}

/// `sessions_list_async(workspace, opts, callback)`: reads the list on a worker thread and returns a
/// ticket at once; `callback(true, {id, count, matcher?})` says that the list of `count` rows waits under `id`,
/// packed ([`super::rows`]; JSON text with `opts.json`), for `sessions_list_take(id)`. With `opts.matcher`, the
/// picker's fuzzy matcher over the rows is built here too and `matcher` is its handle ([`super::fuzzy`]): the main
/// loop neither decodes the full list nor hands its texts over.
fn list_async(a: &Args) -> BridgeResult<u64> {
    let ws = workspace(a)?;
    let args = table_arg::<ListArgs>(a, 1)?;
    let callback: jobs::Callback = a.function(2)?;
    jobs::spawn("sessions_list_async", None, callback, move || {
        // the matcher searches the rows' haystacks, read from the packed list (packed for it alone when JSON is asked)
        let (data, packed, json_count) = if args.json {
            let all = list_items(&ws, &args)?;
            let packed = if args.matcher { Some(Arc::new(super::rows::pack(&all)?)) } else { None };
            (Arc::new(super::bulk(&all)?.into_bytes()), packed, Some(all.len()))
        } else {
            let data = packed_list(&ws, &args)?;
            (data.clone(), Some(data), None)
        };
        let list = packed.as_deref().and_then(|p| super::rows::Packed::read(p));
        let matcher = list.as_ref().filter(|_| args.matcher).map(|list| {
            let mut m = crate::fuzzy::Matcher::new();
            (0..list.count()).for_each(|i| m.push(list.haystack(i).as_bytes()));
            super::fuzzy::insert(m)
        });
        let count = json_count.or(list.as_ref().map(|l| l.count())).unwrap_or(0);
        // in parts of `parts` rows, taken one per main-loop step (`list({ on_done })`): one 24 MB string (100,000
        // rows) handed over at once was a long step; the picker takes its list whole
        let parts: super::parts::Parts = match (args.parts, &list) {
            (Some(n), Some(list)) if n > 0 && !args.json => (0..list.count())
                .step_by(n)
                .map(|from| list.part(from, (from + n).min(list.count())).map(Arc::new))
                .collect::<BridgeResult<_>>()?,
            _ => VecDeque::from([data]),
        };
        let id = super::parts::hold(parts);
        Ok(ListReady { id, count, matcher })
    })
}

/// A full list read by `sessions_list_async`, waiting to be taken.
#[derive(Debug, Serialize)]
struct ListReady {
    id: u64,
    count: usize,
    matcher: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::preview::{PreviewArgs, preview};
    use crate::git::GitHead;
    use crate::message::Message;
    use crate::session::{Writer, WriterOptions};

    fn session_with(ws: &Path, text: &str) -> Context {
        let ctx = Context::new(ws).expect("context");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        w.append(&Message::user(text)).expect("append");
        w.append(&Message::assistant("ok")).expect("append");
        w.close().expect("close");
        ctx
    }

    #[test]
    fn list_info_load_and_delete_round_trip() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session_with(ws.path(), "fix the parser\nsecond line");
        let all = list(
            ws.path(),
            &ListArgs { options: ListOptions { check_locks: true, ..Default::default() }, ..Default::default() },
        )
        .expect("list");
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].title, "fix the parser");
        assert_eq!(all[0].held_by, None);
        assert_eq!(info(ws.path(), &ctx.id).expect("info").messages, 2);
        let loaded = load(ws.path(), &ctx.id).expect("load");
        assert_eq!(loaded.loaded.messages.len(), 2);
        assert_eq!(loaded.damage_report, "");
        assert_eq!(delete(ws.path(), &ctx.id).expect("delete"), ctx.id);
        assert!(!ctx.dir.exists());
        assert!(list(ws.path(), &ListArgs::default()).expect("list").is_empty());
    }

    #[test]
    fn hostile_and_missing_ids_are_errors() {
        let ws = tempfile::tempdir().expect("tempdir");
        assert!(load(ws.path(), "../../etc").unwrap_err().message().contains("invalid session id"));
        assert!(load(ws.path(), "20260101-000000-abcd").unwrap_err().message().contains("no session"));
        assert!(delete(ws.path(), "../../etc").unwrap_err().message().contains("invalid session id"));
        assert!(delete(ws.path(), "20260101-000000-abcd").unwrap_err().message().contains("no session"));
        assert!(info(ws.path(), "a/b").unwrap_err().message().contains("invalid session id"));
    }

    #[test]
    fn delete_is_refused_while_the_session_is_held() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session_with(ws.path(), "held");
        let guard = lock::acquire(&ctx).expect("lock");
        let err = delete(ws.path(), &ctx.id).unwrap_err();
        assert!(err.message().contains("open in another editor"), "{err}");
        assert!(ctx.dir.exists());
        drop(guard);
        delete(ws.path(), &ctx.id).expect("delete once released");
    }

    #[test]
    fn cleanup_takes_fractional_days_and_zero_keeps_everything() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session_with(ws.path(), "old");
        assert_eq!(cleanup(ws.path(), 0.0, None).expect("cleanup"), Vec::<String>::new());
        assert!(cleanup(ws.path(), -1.0, None).is_err());
        // Just written: not idle for 0.5 days.
        assert_eq!(cleanup(ws.path(), 0.5, None).expect("cleanup"), Vec::<String>::new());
        // A cutoff in the future (1e-9 days is ~86 µs; the log's mtime has whole seconds) removes it,
        // unless it is kept.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(cleanup(ws.path(), 1e-9, Some(ctx.id.clone())).expect("cleanup"), Vec::<String>::new());
        assert_eq!(cleanup(ws.path(), 1e-9, None).expect("cleanup"), vec![ctx.id.clone()]);
    }

    #[test]
    fn a_preview_has_the_git_state_and_the_usage_and_its_cost() {
        use crate::usage::{Price, Usage};
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("context");
        let w = Writer::open(&ctx, WriterOptions { model: "m".into(), ..Default::default() }).expect("writer");
        let head = |b: &str, c: &str| GitHead { branch: b.into(), commit: c.into() };
        w.append_entry(Entry::meta_git(head("main", "0f0f0f0"), 1)).expect("meta");
        w.append(&Message::user("hi")).expect("append");
        let used = Usage { input_tokens: 100, output_tokens: 10, cache_read_tokens: 900, cache_write_tokens: 0 };
        w.append_entry(Entry::usage("m", used, 2)).expect("usage");
        w.append(&Message::assistant("ok")).expect("append");
        w.append_entry(Entry::meta_git(head("", "1a2b3c4"), 3)).expect("meta");
        w.close().expect("close");
        let p = preview(ws.path(), &ctx.id, &PreviewArgs::default()).expect("preview");
        assert_eq!((p.branch, p.commit.as_deref()), (None, Some("1a2b3c4")), "a detached HEAD has no branch");
        assert_eq!(p.git_start, Some(head("main", "0f0f0f0")));
        assert_eq!((p.usage, p.cost), (used, None));
        let pricing = Pricing([("m".to_string(), Price { input: 1.0, output: 1.0, ..Default::default() })].into());
        let p = preview(ws.path(), &ctx.id, &PreviewArgs { pricing, ..Default::default() }).expect("preview");
        assert_eq!(p.cost, Some(1010.0 / 1e6));
        // No git entries: nothing; one: no separate start.
        let plain = session_with(ws.path(), "plain");
        let p = preview(ws.path(), &plain.id, &PreviewArgs::default()).expect("preview");
        assert_eq!((p.branch, p.commit, p.git_start, p.usage.is_zero()), (None, None, None, true));
    }

    #[test]
    fn list_args_accept_nil_and_empty_tables() {
        let a = Args::new(vec![Object::from("/ws"), Object::from(nvim_oxi::Array::new())]);
        let parsed = table_arg::<ListArgs>(&a, 1).expect("empty table");
        assert_eq!(parsed.options.limit, None);
        let a = Args::new(vec![Object::from("/ws")]);
        assert!(!table_arg::<ListArgs>(&a, 1).expect("nil").options.check_locks);
        let dict = nvim_oxi::Dictionary::from_iter([("limit", Object::from(3)), ("check_locks", Object::from(true))]);
        let a = Args::new(vec![Object::from("/ws"), Object::from(dict)]);
        let parsed = table_arg::<ListArgs>(&a, 1).expect("dict");
        assert_eq!((parsed.options.limit, parsed.options.check_locks), (Some(3), true));
        let dict = nvim_oxi::Dictionary::from_iter([("all", Object::from(true)), ("max_read", Object::from(0))]);
        let parsed = table_arg::<ListArgs>(&Args::new(vec![Object::from("/ws"), Object::from(dict)]), 1).expect("all");
        assert_eq!((parsed.all, parsed.options.max_read), (true, Some(0)));
        assert!(workspace(&Args::new(vec![Object::from("")])).is_err());
    }
}
