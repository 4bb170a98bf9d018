//! Session log exports: what `lua/pseudoclaude/sessions.lua` calls.
//!
//! Every function takes the workspace directory first (Lua resolves it from the configuration) and
//! returns plain data; errors (a hostile id, a missing session, a lock held by another editor) come
//! back as values through [`super::export`], never as a raise into Lua.
//!
//! | export             | arguments                                   | returns                          |
//! |--------------------|---------------------------------------------|----------------------------------|
//! | `sessions_list`    | workspace, `{exclude?, include_empty?, check_locks?, limit?}`? | `SessionInfo[]`, newest first |
//! | `sessions_list_async` | workspace, options as above, `callback(ok, json)` | a ticket number, at once |
//! | `sessions_info`    | workspace, id                               | `SessionInfo` with `held_by`     |
//! | `sessions_load`    | workspace, id                               | `Loaded` + `damage_report`       |
//! | `sessions_cleanup` | workspace, days (may be fractional), keep?  | ids removed, oldest first        |
//! | `sessions_delete`  | workspace, id                               | the id removed                   |
//!
//! `sessions_list_async` reads the list on a thread of its own, so that listing thousands of sessions
//! (about 25 µs each, most of it the kernel's) never freezes the editor; when it is done, one libuv
//! async handle wakes Neovim's main thread, which calls `callback(true, "<JSON array>")` (or
//! `callback(false, "<message>")`) from a `vim.schedule` callback. The list travels as JSON because
//! `vim.json.decode` builds ten thousand tables several times faster than converting them one object
//! at a time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use nvim_oxi::libuv::AsyncHandle;
use nvim_oxi::{Function, Object};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Args, BridgeError, BridgeResult, export, payload_text};
use crate::session::{self, Context, ListOptions, Loaded, RetentionOptions, SessionInfo, lock};

/// The session exports, chained into the export table by [`super::exports`].
pub fn exports() -> Vec<(&'static str, Object)> {
    vec![
        export("sessions_list", |a| list(&workspace(a)?, &table_arg::<ListArgs>(a, 1)?)),
        export("sessions_list_async", list_async),
        export("sessions_info", |a| info(&workspace(a)?, &a.get::<String>(1)?)),
        export("sessions_load", |a| load(&workspace(a)?, &a.get::<String>(1)?)),
        export("sessions_cleanup", |a| cleanup(&workspace(a)?, a.get::<f64>(1)?, a.get::<Option<String>>(2)?)),
        export("sessions_delete", |a| delete(&workspace(a)?, &a.get::<String>(1)?)),
    ]
}

/// Options of `sessions_list`, as Lua passes them (every key optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ListArgs {
    pub exclude: Option<String>,
    pub include_empty: bool,
    pub check_locks: bool,
    pub limit: Option<usize>,
}

/// A loaded session plus its one-sentence damage report ("" when nothing was repaired).
#[derive(Debug, Clone, Serialize)]
pub struct LoadedView {
    #[serde(flatten)]
    pub loaded: Loaded,
    pub damage_report: String,
}

/// The workspace's sessions, newest first.
pub fn list(workspace: &Path, args: &ListArgs) -> BridgeResult<Vec<SessionInfo>> {
    let opts = ListOptions {
        exclude: args.exclude.clone(),
        include_empty: args.include_empty,
        check_locks: args.check_locks,
        limit: args.limit,
    };
    Ok(session::list(workspace, &opts)?)
}

/// One session's list entry, with who holds its lock; errors for a bad or missing id.
pub fn info(workspace: &Path, id: &str) -> BridgeResult<SessionInfo> {
    let ctx = Context::open(workspace, id)?;
    let mut info = session::list::info(&ctx)?;
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
    if !days.is_finite() || days < 0.0 {
        return Err(BridgeError::msg(format!("retention days must be a number >= 0, got {days}")));
    }
    if days == 0.0 {
        return Ok(Vec::new());
    }
    // `cleanup` counts whole days from `now`; moving `now` forward by the rounding keeps the cutoff
    // at exactly `now - days`.
    let whole = days.ceil();
    let shift = ((whole - days) * 86_400.0).round() as i64;
    let mut opts = RetentionOptions::new(whole.min(f64::from(u32::MAX)) as u32);
    opts.now += shift;
    opts.keep = keep;
    Ok(session::cleanup(workspace, &opts)?)
}

/// Deletes a session's directory, under its lock so that no editor opens it halfway through;
/// refused while another editor holds it.
pub fn delete(workspace: &Path, id: &str) -> BridgeResult<String> {
    let ctx = Context::open(workspace, id)?;
    let guard = lock::acquire(&ctx)?;
    fs::remove_dir_all(&ctx.dir)
        .map_err(|e| BridgeError::msg(format!("cannot remove session {id} ({}): {e}", ctx.dir.display())))?;
    drop(guard);
    Ok(ctx.id)
}

/// Lists finished by background threads, waiting for the main thread: (ticket, JSON or error).
static FINISHED: Mutex<Vec<(u64, BridgeResult<String>)>> = Mutex::new(Vec::new());
static NEXT_TICKET: AtomicU64 = AtomicU64::new(1);

/// Lua's `callback(ok, json_or_message)`.
type ListCallback = Function<(bool, String), ()>;

thread_local! {
    // Main thread only: the handle that wakes it, and the Lua callbacks by ticket.
    static WAKE: RefCell<Option<AsyncHandle>> = const { RefCell::new(None) };
    static CALLBACKS: RefCell<HashMap<u64, ListCallback>> = RefCell::new(HashMap::new());
}

/// `sessions_list_async(workspace, opts, callback)`: starts the list on its own thread and returns
/// a ticket; `callback(ok, json_or_message)` is called later on the main thread.
fn list_async(a: &Args) -> BridgeResult<u64> {
    let ws = workspace(a)?;
    let args = table_arg::<ListArgs>(a, 1)?;
    let callback: ListCallback = a.get(2)?;
    let wake = WAKE.with(|w| -> BridgeResult<AsyncHandle> {
        let mut slot = w.borrow_mut();
        if slot.is_none() {
            // One handle for the process (nvim-oxi never closes one); wake-ups merge, the queue does not.
            let handle = AsyncHandle::new(|| nvim_oxi::schedule(|_| deliver_finished()))
                .map_err(|e| BridgeError::msg(format!("cannot create the event handle: {e}")))?;
            *slot = Some(handle);
        }
        Ok(slot.as_ref().expect("just set").clone())
    })?;
    let ticket = NEXT_TICKET.fetch_add(1, Ordering::Relaxed);
    CALLBACKS.with(|c| c.borrow_mut().insert(ticket, callback));
    let spawned = std::thread::Builder::new().name("pseudoclaude-list".into()).spawn(move || {
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            list(&ws, &args).and_then(|v| serde_json::to_string(&v).map_err(BridgeError::from))
        }))
        .unwrap_or_else(|p| Err(BridgeError::msg(format!("internal error (panic): {}", payload_text(p.as_ref())))));
        FINISHED.lock().unwrap_or_else(PoisonError::into_inner).push((ticket, result));
        let _ = wake.send();
    });
    if let Err(e) = spawned {
        CALLBACKS.with(|c| c.borrow_mut().remove(&ticket));
        return Err(BridgeError::msg(format!("cannot start the list thread: {e}")));
    }
    Ok(ticket)
}

/// On the main thread: hands every finished list to its callback.
fn deliver_finished() {
    let finished = std::mem::take(&mut *FINISHED.lock().unwrap_or_else(PoisonError::into_inner));
    for (ticket, result) in finished {
        let Some(callback) = CALLBACKS.with(|c| c.borrow_mut().remove(&ticket)) else { continue };
        let (ok, value) = match result {
            Ok(json) => (true, json),
            Err(e) => (false, format!("pseudoclaude_core.sessions_list_async: {e}")),
        };
        // The callback is Lua's (called under pcall by nvim-oxi); an error in it stays there.
        let _ = callback.call((ok, value));
    }
}

/// Argument 1, the workspace directory: a non-empty string.
fn workspace(a: &Args) -> BridgeResult<PathBuf> {
    let ws = a.get::<String>(0)?;
    if ws.is_empty() {
        return Err(BridgeError::msg("bad argument #1: the workspace directory is empty"));
    }
    Ok(PathBuf::from(ws))
}

/// An optional table argument; `nil` and `{}` (which Lua cannot tell from an empty list) give the defaults.
fn table_arg<T: DeserializeOwned + Default>(a: &Args, index: usize) -> BridgeResult<T> {
    match a.get::<Option<serde_json::Value>>(index)? {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(serde_json::Value::Array(v)) if v.is_empty() => Ok(T::default()),
        Some(v) => serde_json::from_value(v).map_err(|e| BridgeError::msg(format!("bad argument #{}: {e}", index + 1))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let all = list(ws.path(), &ListArgs { check_locks: true, ..Default::default() }).expect("list");
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
    fn list_args_accept_nil_and_empty_tables() {
        let a = Args::new(vec![Object::from("/ws"), Object::from(nvim_oxi::Array::new())]);
        let parsed = table_arg::<ListArgs>(&a, 1).expect("empty table");
        assert_eq!(parsed.limit, None);
        let a = Args::new(vec![Object::from("/ws")]);
        assert!(!table_arg::<ListArgs>(&a, 1).expect("nil").check_locks);
        let dict = nvim_oxi::Dictionary::from_iter([("limit", Object::from(3)), ("check_locks", Object::from(true))]);
        let a = Args::new(vec![Object::from("/ws"), Object::from(dict)]);
        let parsed = table_arg::<ListArgs>(&a, 1).expect("dict");
        assert_eq!((parsed.limit, parsed.check_locks), (Some(3), true));
        assert!(workspace(&Args::new(vec![Object::from("")])).is_err());
    }
}
