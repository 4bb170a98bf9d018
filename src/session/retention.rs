//! Removing old sessions, by last activity.
//!
//! The seed expired sessions by the creation time in their id, so a month-old session resumed
//! yesterday could vanish today. Here a session's age is its last activity: the newer of its log's
//! modification time and its newest message. A session in use (the current one, or one whose lock
//! another editor holds) is never removed; removal itself happens under the session's lock, so no
//! editor can open it halfway through.

use std::fs;
use std::path::Path;

use super::contain::{Access, Dir};
use super::list::{ListOptions, list};
use super::{CONVERSATION_FILE_NAME, Context, Error, Result, io_err, lock};

#[derive(Debug, Clone)]
pub struct RetentionOptions {
    /// Sessions idle longer than this many days are removed; 0 disables the cleanup.
    pub days: u32,
    /// Never remove this session (the current one).
    pub keep: Option<String>,
    /// "Now", unix seconds; tests move it.
    pub now: i64,
}

impl RetentionOptions {
    pub fn new(days: u32) -> Self {
        RetentionOptions { days, keep: None, now: crate::message::now() }
    }

    /// The options of a retention of `days`, fractions allowed (the editor's `retention_days`); `None` for 0,
    /// which keeps everything; an error for a negative or non-finite number.
    pub fn for_days(days: f64) -> std::result::Result<Option<Self>, String> {
        if !days.is_finite() || days < 0.0 {
            return Err(format!("retention days must be a number >= 0, got {days}"));
        }
        if days == 0.0 {
            return Ok(None);
        }
        // `cleanup` counts whole days from `now`; moving `now` forward by the rounding keeps the cutoff
        // at exactly `now - days`.
        let whole = days.ceil();
        let shift = ((whole - days) * 86_400.0).round() as i64;
        let mut opts = RetentionOptions::new(whole.min(f64::from(u32::MAX)) as u32);
        opts.now += shift;
        Ok(Some(opts))
    }
}

/// The seed's retention period.
pub const DEFAULT_DAYS: u32 = 30;

/// Removes sessions idle for more than `opts.days`; returns the ids removed, oldest first.
pub fn cleanup(workspace: &Path, opts: &RetentionOptions) -> Result<Vec<String>> {
    if opts.days == 0 {
        return Ok(Vec::new());
    }
    let cutoff = opts.now - i64::from(opts.days) * 86_400;
    let all = list(workspace, &ListOptions { exclude: opts.keep.clone(), include_empty: true, ..Default::default() })?;
    let mut removed = Vec::new();
    for s in all.into_iter().rev() {
        if s.modified.max(s.last_message) >= cutoff {
            continue;
        }
        let ctx = Context::for_id(workspace, &s.id)?;
        match remove(&ctx) {
            Ok(()) => removed.push(s.id),
            // Held by another editor (not ours to remove), or turned into a link since it was listed.
            Err(Error::Locked { .. } | Error::Refused { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// Removes one session's folder, under its lock so that no editor opens it halfway through. Refused
/// while another editor holds it, and when the folder or its log is a link: a removal never reaches
/// outside `sessions/` (`remove_dir_all` itself removes links inside the folder, not what they point to).
pub fn remove(ctx: &Context) -> Result<()> {
    let dir = Dir::session(ctx)?;
    let guard = lock::acquire(ctx)?;
    match dir.open(CONVERSATION_FILE_NAME, Access::Read) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    fs::remove_dir_all(&ctx.dir).map_err(io_err("cannot remove session", &ctx.dir))?;
    drop(guard);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_session_folder_without_a_log_is_removed_too() {
        let ws = tempfile::tempdir().expect("tempdir");
        let empty = Context::new(ws.path()).expect("context");
        let kept = Context::new(ws.path()).expect("context");
        let opts = RetentionOptions { days: 1, keep: Some(kept.id.clone()), now: crate::message::now() + 3 * 86_400 };
        assert_eq!(cleanup(ws.path(), &opts).expect("cleanup"), std::slice::from_ref(&empty.id));
        assert!(!empty.dir.exists() && kept.dir.exists());
    }
}
