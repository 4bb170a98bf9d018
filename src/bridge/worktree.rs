//! The worktree chats' exports (issue 47): every one runs git, so every one runs on a worker ([`super::jobs`]) and
//! answers through its callback; the editor's main loop never waits on git.

use std::path::PathBuf;

use super::{Args, BridgeResult, export, jobs, workspace};
use crate::worktree;

/// A name argument: nil or "" for none.
fn name_arg(a: &Args, index: usize) -> BridgeResult<Option<String>> {
    Ok(a.get::<Option<String>>(index)?.filter(|n| !n.is_empty()))
}

pub fn exports() -> Vec<(&'static str, nvim_oxi::Object)> {
    vec![
        // `worktree_create_async(workspace, name?, session?, callback)`: a new worktree, `callback(true, worktree)`
        export("worktree_create_async", |a| {
            let (ws, name, session): (PathBuf, _, _) = (workspace(a)?, name_arg(a, 1)?, name_arg(a, 2)?);
            let callback: jobs::Callback = a.function(3)?;
            jobs::spawn("worktree_create_async", None, callback, move || {
                Ok(worktree::create(&ws, name.as_deref(), session.as_deref())?)
            })
        }),
        // `worktree_list_async(workspace, callback)`: `callback(true, { worktree… })`
        export("worktree_list_async", |a| {
            let ws = workspace(a)?;
            let callback: jobs::Callback = a.function(1)?;
            jobs::spawn("worktree_list_async", None, callback, move || Ok(worktree::list(&ws)?))
        }),
        // `worktree_change_async(workspace, name, callback)`: the change file by file, in JSON parts decoded one
        // per main-loop step (a file's two texts may be large)
        export("worktree_change_async", |a| {
            let (ws, name): (PathBuf, String) = (workspace(a)?, a.get(1)?);
            let callback: jobs::Callback = a.function(2)?;
            jobs::spawn("worktree_change_async", None, callback, move || {
                let change = worktree::change(&ws, &name)?;
                Ok(super::parts::hold_chunks(super::bulk_chunks(&change, super::CHUNK_BYTES)?))
            })
        }),
        // `worktree_merge_async(workspace, name, squash, session?, callback)`: `callback(true, { ok, conflicts,
        // commit, files })`; what refuses it (an overlap, a missing worktree) is `callback(false, message)`. A write:
        // the editor's exit waits for it.
        export("worktree_merge_async", |a| {
            let (ws, name, squash): (PathBuf, String, bool) = (workspace(a)?, a.get(1)?, a.get(2)?);
            let session = name_arg(a, 3)?;
            let callback: jobs::Callback = a.function(4)?;
            let what = format!("the merge of worktree {name}");
            jobs::spawn_write("worktree_merge_async", what, callback, move || {
                Ok(worktree::merge(&ws, &name, squash, session.as_deref())?)
            })
        }),
        // `worktree_remove_async(workspace, name, force, callback)`: `callback(true, true)`
        export("worktree_remove_async", |a| {
            let (ws, name, force): (PathBuf, String, bool) = (workspace(a)?, a.get(1)?, a.get(2)?);
            let callback: jobs::Callback = a.function(3)?;
            let what = format!("the removal of worktree {name}");
            jobs::spawn_write("worktree_remove_async", what, callback, move || {
                worktree::remove(&ws, &name, force)?;
                Ok(true)
            })
        }),
    ]
}
