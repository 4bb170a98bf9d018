//! Other agents' sessions kept in our store ([`crate::import::keep`]): what `lua/pseudoclaude/keep.lua` calls.
//!
//! | export         | arguments                        | returns                                                     |
//! |----------------|----------------------------------|-------------------------------------------------------------|
//! | `keep_start`   | workspace                        | true when a keeper started (false: it ran already), at once |
//! | `keep_stop`    | workspace                        | nil: the keeper stops after the sync under way              |
//! | `keep_async`   | workspace, `callback(ok, report)`| a ticket, at once: one sync (`:PseudoKeep`), a write        |
//! | `keep_status`  | workspace                        | `{running, syncs, last_sync, last?, watched}`                |
//! | `keep_stores_async` | workspace, `callback(ok, stores)` | a ticket, at once: each agent's store and how long it keeps sessions |
//!
//! The keeper runs on a thread of its own, `keep_async` and `keep_stores_async` on the worker threads
//! ([`super::jobs`]): nothing here reads or writes a session on the main loop.

use nvim_oxi::Object;

use super::{export, jobs, workspace};
use crate::import::{Homes, keep};

pub fn exports() -> Vec<(&'static str, Object)> {
    vec![
        export("keep_start", |a| Ok(keep::start(&workspace(a)?, Homes::from_env())?)),
        export("keep_stop", |a| {
            keep::stop(&workspace(a)?);
            Ok(())
        }),
        export("keep_async", |a| {
            let ws = workspace(a)?;
            let callback: jobs::Callback = a.function(1)?;
            let what = format!("the copies of other agents' sessions into {}", ws.display());
            jobs::spawn_write("keep_async", what, callback, move || Ok(keep::keep(&ws, &Homes::from_env())))
        }),
        export("keep_status", |a| Ok(keep::status(&workspace(a)?))),
        export("keep_stores_async", |a| {
            let ws = workspace(a)?;
            let callback: jobs::Callback = a.function(1)?;
            jobs::spawn("keep_stores_async", None, callback, move || Ok(keep::stores(&ws, &Homes::from_env())))
        }),
    ]
}
