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
//!   line ([`KeptState`](crate::session::entry::KeptState): the original's size and time, and the hash of its
//!   converted messages' keys). When the original was rewritten (Gemini's `$rewindTo`, an edited or truncated
//!   file), the messages it no longer holds stay in the copy and the ones it holds that the copy does not are
//!   appended after them. The one `replace` a sync may write is when the copy's last message grew in the original
//!   (an answer read while Claude Code was still writing its lines): the copy's history with that message in its
//!   fuller form, nothing dropped.
//!
//! A copy is synced only while nothing but `title`, `pin` and `kept` lines follow its last `kept` line: once a chat
//! writes to it (a resume, the continuation by the original agent), the chat's log is the record, and the copy is
//! left alone. A copy whose log is locked (a live chat, another editor) waits for the next sync.
//!
//! The keeper ([`start`]) runs the syncs for a workspace on a thread of its own: one at start, then one each time an
//! inotify watch on the stores' folders reports a change (a quiet period of [`SETTLE`] first), and one every
//! [`RESCAN`] whatever the watch says. [`keep`] is one sync, for `:PseudoKeep` and the CLI. [`stores`] says which
//! agents' stores exist and how long each agent keeps its sessions, for `:checkhealth`.
//!
//! The parts: `copy.rs`, a copy's rule (made, grown, left alone); `map.rs`, which copy is whose (`kept.json`);
//! `watch.rs`, the keeper's thread and its inotify watch; `retention.rs`, each store and what its agent deletes.
//!
//! Architecture invariant: the originals are only ever read (as every import reads them); a copy's log is written
//! only through its [`Writer`](crate::session::Writer), under its lock, by appends (the one `replace` holds every
//! message before it).

mod copy;
mod map;
mod retention;
mod watch;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::list::{ListOptions, list_with, ours_already};
use super::{ExternalItem, Homes, Source};
use crate::session::{self, Context, Error, Result};
use copy::{create, update};
pub use map::forget;
use map::{put_map, take_map};
pub use retention::{Store, stores};
pub use watch::{Status, start, status, stop, store_roots, watched_dirs};

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
