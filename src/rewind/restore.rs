//! A rewind's plan and its application to the files.
//!
//! The rule that keeps the user's work: only what the agent's turns changed is put back, and a file
//! the user changed after the agent did (a `user` checkpoint found it changed later, or it changed since
//! the last checkpoint) is a conflict, left as it is unless forced; a file open with unsaved changes is
//! never written at all. Each file is written whole (a temporary file, synced, renamed over it), so a
//! rewind killed part way leaves every file either as it was or as it returns to, and the plan logged
//! before the first write says which is which (see [`super`], recovery).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::scan::{Manifest, content_hash, content_id, is_exec, is_restorable, is_tracked_path};
use super::store::Store;
use crate::atomic::{Durable, Mode};
use crate::session::files::{BY_AGENT, BY_CHAT, BY_USER, Conflict, FilesRecord, RewindItem};

pub const WHY_USER: &str = "changed by you after the agent";
pub const WHY_CHAT: &str = "changed by another chat at the same time";
pub const WHY_BUFFER: &str = "open with unsaved changes";
pub const WHY_BIG: &str = "not restorable: it was over the size limit when the checkpoint was taken";
pub const WHY_LOST: &str = "not restorable: its copy is missing from .PseudoClaude/objects";
pub const WHY_MOVED: &str = "changed while the rewind ran";

/// What the files must become to return to the state just before turn `turn` (a user message's
/// `turn`), from `now` (the state at the last checkpoint, taken just before planning). `modified`: paths
/// open with unsaved changes; `force`: conflicts the user chose to overwrite.
pub fn plan(
    store: &Store,
    records: &[FilesRecord],
    turn: u64,
    now: &Manifest,
    modified: &[String],
    force: &[String],
) -> (Vec<RewindItem>, Vec<Conflict>) {
    // Per path: the state before the agent's first change after `turn`, and who else changed it later (the user,
    // or another chat at the same time: `None` when nobody).
    let mut first: BTreeMap<&str, (Option<&String>, Option<&str>)> = BTreeMap::new();
    for r in records.iter().filter(|r| r.seq > turn) {
        for c in &r.changes {
            let by = c.by(r);
            match first.get_mut(c.path.as_str()) {
                None if by == BY_AGENT => {
                    first.insert(&c.path, (c.before.as_ref(), None));
                }
                Some((_, later)) if by == BY_USER && later.is_none() => *later = Some(WHY_USER),
                Some((_, later)) if by == BY_CHAT => *later = Some(WHY_CHAT),
                _ => {}
            }
        }
    }
    let mut items = Vec::new();
    let mut conflicts = Vec::new();
    for (path, (target, user_after)) in first {
        let current = now.get(path);
        if current == target {
            continue;
        }
        let conflict = |why: &str| Conflict { path: path.to_string(), why: why.to_string() };
        let forced = force.iter().any(|f| f == path);
        if modified.iter().any(|m| m == path) {
            conflicts.push(conflict(WHY_BUFFER));
        } else if let Some(why) = user_after.filter(|_| !forced) {
            conflicts.push(conflict(why));
        } else if target.is_some_and(|t| !is_restorable(t)) {
            conflicts.push(conflict(WHY_BIG));
        } else if target.is_some_and(|t| !store.has(content_hash(t))) {
            conflicts.push(conflict(WHY_LOST));
        } else {
            items.push(RewindItem { path: path.to_string(), from: current.cloned(), to: target.cloned() });
        }
    }
    (items, conflicts)
}

/// The content id of a file now (`None`: no regular file there), without storing anything.
pub fn state_now(workspace: &Path, rel: &str, max_file_bytes: u64) -> io::Result<Option<String>> {
    let path = workspace.join(rel);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Ok(None),
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(content_id(&path, &meta, max_file_bytes, None)?.map(|(id, _)| id))
}

/// Applies `items`: each file whose state is still its `from` becomes its `to`; one already at its `to`
/// counts as done. Returns the items now at their `to`, and the rest as conflicts.
pub fn apply(
    workspace: &Path,
    store: &Store,
    items: &[RewindItem],
    max_file_bytes: u64,
) -> (Vec<RewindItem>, Vec<Conflict>) {
    let mut done = Vec::new();
    let mut conflicts = Vec::new();
    for item in items {
        if !is_tracked_path(&item.path) {
            conflicts.push(Conflict { path: item.path.clone(), why: "refused: not a workspace file".into() });
            continue;
        }
        let now = match state_now(workspace, &item.path, max_file_bytes) {
            Ok(s) => s,
            Err(e) => {
                conflicts.push(Conflict { path: item.path.clone(), why: format!("cannot read it: {e}") });
                continue;
            }
        };
        if now == item.to {
            done.push(item.clone());
            continue;
        }
        if now != item.from {
            conflicts.push(Conflict { path: item.path.clone(), why: WHY_MOVED.into() });
            continue;
        }
        match put_back(workspace, store, &item.path, item.to.as_deref()) {
            Ok(()) => done.push(item.clone()),
            Err(e) => conflicts.push(Conflict { path: item.path.clone(), why: format!("cannot write it: {e}") }),
        }
        stall_for_tests();
    }
    (done, conflicts)
}

/// Writes file `rel` as content id `to` says (`None`: removes it, and the folders it leaves empty).
fn put_back(workspace: &Path, store: &Store, rel: &str, to: Option<&str>) -> io::Result<()> {
    let path = workspace.join(rel);
    let Some(id) = to else {
        fs::remove_file(&path)?;
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == workspace || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        if let Some(d) = dir {
            sync_dir(d);
        }
        return Ok(());
    };
    let data = store.get(content_hash(id))?;
    let parent = path.parent().unwrap_or(workspace);
    fs::create_dir_all(parent)?;
    let mode = match fs::symlink_metadata(&path) {
        Ok(m) => m.mode() & 0o777,
        Err(_) => 0o644,
    };
    let mode = if is_exec(id) { mode | ((mode & 0o444) >> 2) | 0o100 } else { mode & !0o111 };
    // synced with its folder: the log's `done` line that follows must not name a file a power cut loses
    crate::atomic::replace(&path, &data, Durable::Full, Mode::Set(mode))
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// For the crash test (`tests/e2e/test_rewind.py`): with `PSEUDOCLAUDE_TEST_REWIND_STALL` set to a path, the first
/// file written creates that file and the rewind stops there until the process is killed.
fn stall_for_tests() {
    if let Some(marker) = std::env::var_os("PSEUDOCLAUDE_TEST_REWIND_STALL") {
        let _ = fs::write(&marker, b"stalled");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}
