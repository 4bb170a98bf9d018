//! The registry of workspaces this editor has used, so that `:PseudoResume all` can list the
//! sessions of every one of them.
//!
//! One file (the editor passes `stdpath("state")/pseudoclaude/workspaces`), one absolute path per
//! line, appended when a session starts or is resumed. Appending keeps two editors from losing each
//! other's lines (a line is one `write` on an `O_APPEND` file); a reader takes the last occurrence of a
//! path as its most recent use. When the file has grown well past the workspaces it names, the next
//! record rewrites it deduplicated (a temporary file renamed over it). It is a hint like the sessions'
//! `activity` file: it is never synced, and losing it loses no conversation — each workspace's
//! `.PseudoClaude/` is where the sessions are.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::atomic::{Durable, Mode};

/// At most this many workspaces are remembered (the most recently used).
pub const MAX_WORKSPACES: usize = 200;
/// A file larger than this is rewritten with one line per workspace.
const COMPACT_BYTES: u64 = 64 * 1024;

/// Notes that `workspace` was just used. The path is made absolute (symbolic links resolved, so two
/// spellings of one folder are one entry). Errors are returned for the caller to ignore or log: the
/// registry is a convenience.
pub fn record(file: &Path, workspace: &Path) -> std::io::Result<()> {
    let ws = fs::canonicalize(workspace)?;
    let line = ws.to_str().filter(|s| !s.contains('\n')).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("cannot record {}", ws.display()))
    })?;
    if let Some(dir) = file.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new().create(true).append(true).mode(0o600).open(file)?;
    f.write_all(format!("{line}\n").as_bytes())?;
    if f.metadata()?.len() > COMPACT_BYTES {
        compact(file)?;
    }
    Ok(())
}

/// The workspaces the registry names, most recently used first, at most [`MAX_WORKSPACES`]; those
/// that no longer exist, or hold no `.PseudoClaude/sessions` folder, are left out quietly. A missing
/// registry names none.
pub fn known(file: &Path) -> Vec<PathBuf> {
    recorded(file).into_iter().filter(|ws| crate::session::sessions_dir(ws).is_dir()).collect()
}

/// Every path of the registry, most recent first, without duplicates or blank lines.
fn recorded(file: &Path) -> Vec<PathBuf> {
    let Ok(text) = fs::read_to_string(file) else { return Vec::new() };
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in text.lines().rev() {
        let line = line.trim_end_matches('\r');
        if line.starts_with('/') && seen.insert(line) {
            out.push(PathBuf::from(line));
            if out.len() >= MAX_WORKSPACES {
                break;
            }
        }
    }
    out
}

/// Rewrites the registry with one line per workspace, oldest first (the order a reader expects).
fn compact(file: &Path) -> std::io::Result<()> {
    let mut paths = recorded(file);
    paths.reverse();
    let mut text = String::new();
    for p in &paths {
        text.push_str(&p.to_string_lossy());
        text.push('\n');
    }
    // the data synced: a power cut may bring the old registry back, never an empty one (its folder is not synced:
    // the registry is a hint)
    crate::atomic::replace(file, text.as_bytes(), Durable::Data, Mode::Keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(root: &Path, name: &str) -> PathBuf {
        let ws = root.join(name);
        fs::create_dir_all(crate::session::sessions_dir(&ws)).expect("mkdir");
        fs::canonicalize(ws).expect("canonical")
    }

    #[test]
    fn the_most_recent_use_comes_first_and_each_workspace_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("state/pseudoclaude/workspaces");
        let (a, b) = (workspace(tmp.path(), "a"), workspace(tmp.path(), "b"));
        record(&file, &a).expect("a");
        record(&file, &b).expect("b");
        record(&file, &a.join("../a")).expect("a again, spelled otherwise");
        assert_eq!(known(&file), [a.clone(), b.clone()]);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&file).expect("meta").permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn missing_workspaces_are_dropped_quietly_and_a_missing_registry_names_none() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("workspaces");
        assert!(known(&file).is_empty());
        let (a, b) = (workspace(tmp.path(), "a"), workspace(tmp.path(), "b"));
        record(&file, &a).expect("a");
        record(&file, &b).expect("b");
        fs::remove_dir_all(&b).expect("rm");
        // A hand-edited line that is not a path is ignored too.
        fs::write(&file, format!("{}\n\nnot a path\n{}\n", a.display(), b.display())).expect("edit");
        assert_eq!(known(&file), [a]);
    }

    #[test]
    fn a_grown_registry_is_rewritten_with_one_line_per_workspace() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("workspaces");
        let (a, b) = (workspace(tmp.path(), "a"), workspace(tmp.path(), "b"));
        let line = format!("{}\n", a.display());
        fs::write(&file, line.repeat((COMPACT_BYTES as usize / line.len()) + 1)).expect("grow");
        record(&file, &b).expect("b");
        assert_eq!(fs::read_to_string(&file).expect("read"), format!("{}\n{}\n", a.display(), b.display()));
        assert_eq!(known(&file), [b, a]);
    }
}
