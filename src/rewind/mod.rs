//! Rewind: the session records what happened to the workspace's files, so that a rewind (or a fork)
//! returns code and conversation to the moment before a user message, never at the cost of the user's
//! own edits.
//!
//! - [`store`]: the workspace's content-addressed copies of files (`.PseudoClaude/objects/`).
//! - [`scan`]: the files' state (ignore rules honoured, a stat cache as git's index has).
//! - [`tracker`]: one session's checkpoints: taken before each user message (`user`: what changed
//!   between turns, by anyone) and after each tool call that can change files (`agent`: a write, an
//!   edit, a command), logged as `files` entries ([`crate::session::files`]).
//! - [`restore`]: a rewind's plan (what the agent changed since the message, minus what the user changed
//!   after it) and its application, file by file, each written whole.
//!
//! Crash safety: a rewind logs its plan (`rewind` entry, `begin`) before it touches a file, then the
//! files, a `files` entry (`rewind`) with what they became, the conversation's `replace`, and `done`.
//! A session whose log ends a rewind without its `done` finishes it at its next start
//! ([`crate::agent::Agent::resume`]): each planned file still at its `from` is written, the history is
//! cut if its `replace` is missing, and `done` says `recovered`.

pub mod calls;
pub mod restore;
pub mod scan;
pub mod store;
pub mod tracker;
pub mod watch;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::message::Message;
use crate::session::files::{BY_AGENT, Conflict, FileChange, FilesRecord, RewindRecord};

pub use scan::DEFAULT_MAX_FILE_BYTES;
pub use tracker::Tracker;

/// What `rewind(index, opts)` is asked.
#[derive(Debug, Clone, Default)]
pub struct RewindOptions {
    pub code: bool,
    pub conversation: bool,
    /// Paths open in the editor with unsaved changes: never written.
    pub modified: Vec<String>,
    /// Conflicts the user chose to overwrite.
    pub force: Vec<String>,
    /// Only plan: the report says what would be restored, removed and left (a checkpoint of the disk as it is
    /// is the one thing written).
    pub dry_run: bool,
}

/// What a rewind did (`on_done(report)` in Lua).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub ok: bool,
    /// Paths written back.
    pub restored: Vec<String>,
    /// Paths the agent had created, removed.
    pub removed: Vec<String>,
    /// Paths left as they are, each with why.
    pub conflicts: Vec<Conflict>,
    pub error: Option<String>,
    /// The rewound message's text (for the input window), when the conversation was rewound.
    pub text: String,
    /// The rewind's id (its `rewind` entries).
    pub id: String,
}

impl Report {
    /// Files `items` (now at their `to`) under `restored` or, for a file the agent had created, `removed`.
    pub fn note_applied<'a>(&mut self, items: impl IntoIterator<Item = &'a crate::session::files::RewindItem>) {
        for item in items {
            if item.to.is_some() { &mut self.restored } else { &mut self.removed }.push(item.path.clone());
        }
    }
}

/// One file of a turn's changes, as `sessions.changes()` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileSummary {
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub status: String,
    pub added: u64,
    pub removed: u64,
    /// False when the state before the turn was not kept (over the size limit).
    pub restorable: bool,
}

/// The files one turn's tool calls changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnChanges {
    /// The 1-based index of the turn's user message in the history.
    pub index: usize,
    pub turn: u64,
    pub files: Vec<FileSummary>,
}

/// The agent's changes per turn, for the turns whose user message is in `messages`, oldest first.
pub fn changes(records: &[FilesRecord], messages: &[Message]) -> Vec<TurnChanges> {
    let mut per_turn: BTreeMap<u64, BTreeMap<String, (FileChange, u64, u64)>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.by == BY_AGENT) {
        let files = per_turn.entry(r.turn).or_default();
        for c in r.changes.iter().filter(|c| c.by(r) == BY_AGENT) {
            let e = files.entry(c.path.clone()).or_insert_with(|| (c.clone(), 0, 0));
            e.0.after = c.after.clone();
            e.1 += c.added;
            e.2 += c.removed;
        }
    }
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if !m.is_user_text() || m.turn == 0 {
            continue;
        }
        let files = per_turn
            .get(&m.turn)
            .map(|files| {
                files
                    .values()
                    .filter(|(c, _, _)| c.before != c.after)
                    .map(|(c, added, removed)| FileSummary {
                        path: c.path.clone(),
                        status: c.status().to_string(),
                        added: *added,
                        removed: *removed,
                        restorable: c.before.as_deref().is_none_or(scan::is_restorable),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(TurnChanges { index: i + 1, turn: m.turn, files });
    }
    out
}

/// The last rewind of `rewinds` that began and never ended (the editor died part way).
pub fn unfinished(rewinds: &[RewindRecord]) -> Option<&RewindRecord> {
    let last_begin = rewinds.iter().rposition(|r| r.state == "begin")?;
    let begin = &rewinds[last_begin];
    let ended = rewinds[last_begin..].iter().any(|r| r.state == "done" && r.id == begin.id);
    (!ended).then_some(begin)
}

/// One line for the model and the user: "src/a.rs modified, notes.txt deleted".
pub fn describe(changes: &[FileChange], max: usize) -> String {
    let mut parts: Vec<String> = changes.iter().take(max).map(|c| format!("{} {}", c.path, c.status_word())).collect();
    if changes.len() > max {
        parts.push(format!("and {} more", changes.len() - max));
    }
    parts.join(", ")
}

/// The agent's changes per turn of session `id`, read from its log (`sessions.changes(id)`).
pub fn changes_of(workspace: &std::path::Path, id: &str) -> crate::session::Result<Vec<TurnChanges>> {
    let loaded = crate::session::load(&crate::session::Context::open(workspace, id)?)?;
    Ok(changes(&loaded.files, &loaded.messages))
}

/// Returns the workspace's files to their state at message `index` of session `id` (the end of that
/// message's turn: just before the next message the user sent), for a fork that takes messages `1..index`.
/// Same rule as a rewind: the user's later changes are conflicts, files open with unsaved changes
/// (`modified`) are never written. Nothing is logged in the source session.
pub fn fork_files(
    workspace: &std::path::Path,
    id: &str,
    index: usize,
    max_file_bytes: u64,
    modified: &[String],
) -> crate::session::Result<Report> {
    let loaded = crate::session::load(&crate::session::Context::open(workspace, id)?)?;
    let next_turn = loaded.messages.iter().skip(index).find(|m| m.is_user_text()).map(|m| m.turn);
    let mut report = Report { ok: true, ..Default::default() };
    let turn = match next_turn {
        // Forked at the end: the files are already the session's latest.
        None => return Ok(report),
        Some(0) => {
            report.ok = false;
            report.error = Some(format!(
                "session {id} has no checkpoint of the files after message {index} (checkpoints were off, or an \
                 older version wrote it): the fork takes the conversation only"
            ));
            return Ok(report);
        }
        Some(t) => t,
    };
    let last_turn = loaded.messages.iter().map(|m| m.turn).max().unwrap_or(0);
    let mut tracker = Tracker::resume(workspace, max_file_bytes, loaded.files, last_turn);
    // The disk now, against the session's last state: what changed since is someone else's.
    let now_record = tracker.take(crate::session::files::BY_USER, "", None)?;
    tracker.commit(now_record);
    let now_state = tracker.manifest().cloned().unwrap_or_default();
    let (items, conflicts) = restore::plan(tracker.store(), tracker.records(), turn, &now_state, modified, &[]);
    let (done, more) = restore::apply(workspace, tracker.store(), &items, max_file_bytes);
    report.conflicts = conflicts;
    report.conflicts.extend(more);
    report.note_applied(&done);
    Ok(report)
}

/// Objects younger than this are never collected: a checkpoint may have stored them and not yet logged the
/// entry that names them.
const GC_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the stored copies no session of the workspace refers to any more (run by cleanup, never on its
/// own). Returns how many were removed. A session that cannot be read keeps everything: nothing it might name
/// is removed then.
pub fn collect_garbage(workspace: &std::path::Path) -> crate::session::Result<usize> {
    use crate::session::{Context, ListOptions, list, load};
    let store = store::Store::new(workspace);
    let all = store.all();
    if all.is_empty() {
        return Ok(0);
    }
    let mut used = std::collections::HashSet::new();
    for s in list(workspace, &ListOptions { include_empty: true, ..Default::default() })? {
        let loaded = load(&Context::open(workspace, &s.id)?)?;
        for r in &loaded.files {
            if let Some(base) = &r.base {
                used.insert(base.clone());
                let manifest: scan::Manifest =
                    store.get(base).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
                used.extend(manifest.values().map(|id| scan::content_hash(id).to_string()));
            }
            for c in &r.changes {
                used.extend(c.before.iter().chain(&c.after).map(|id| scan::content_hash(id).to_string()));
            }
        }
        for r in &loaded.rewinds {
            for i in &r.plan {
                used.extend(i.from.iter().chain(&i.to).map(|id| scan::content_hash(id).to_string()));
            }
        }
    }
    let mut removed = 0;
    for hash in all.iter().filter(|h| !used.contains(*h)) {
        let young = store.modified(hash).is_some_and(|t| t.elapsed().is_ok_and(|age| age < GC_GRACE));
        if !young && store.remove(hash) {
            removed += 1;
        }
    }
    if removed > 0 {
        // The stat cache may name what was removed: the next checkpoint reads the files again.
        scan::StatCache::remove(workspace);
    }
    Ok(removed)
}
