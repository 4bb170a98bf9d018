//! `.worktreeinclude` (Claude Code's convention): the git-ignored files a new worktree needs and git does not
//! check out (`.env`, local settings), named in gitignore syntax at the top of the repository, copied in.
//!
//! Git itself matches the patterns (`ls-files --others --ignored --exclude-from`), so their meaning is exactly
//! gitignore's; a folder matched whole is one entry (`--directory`), copied whole. Of those, only what the repository
//! ignores is copied (`check-ignore`): a file git tracks is in the checkout already, and an untracked one not ignored
//! is the user's work in progress, not the worktree's. Nothing under `.git` or `.PseudoClaude/` (the session logs,
//! the other worktrees) is ever copied.

use std::fs;
use std::path::Path;

use super::git::{self, Repo};
use super::{Error, Result};

/// The file naming what to copy, at the top of the repository.
pub const FILE_NAME: &str = ".worktreeinclude";

/// Copies the files `.worktreeinclude` names from the checkout into the worktree at `dest`.
pub fn copy(repo: &Repo, dest: &Path) -> Result<()> {
    let list = repo.top.join(FILE_NAME);
    if !list.is_file() {
        return Ok(());
    }
    let mut exclude = std::ffi::OsString::from("--exclude-from=");
    exclude.push(&list);
    let out = git::run(
        git::git(&repo.top)
            .args(["ls-files", "-z", "--others", "--ignored", "--directory", "--no-empty-directory"])
            .arg(exclude),
    )?;
    let ours = repo.prefix().join(crate::session::ROOT_DIR_NAME);
    let candidates: Vec<String> = git::nul_fields(&out.stdout)
        .filter(|p| {
            let path = Path::new(p.trim_end_matches('/'));
            !path.starts_with(&ours) && !path.starts_with(".git")
        })
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    let mut input = Vec::new();
    for c in &candidates {
        input.extend_from_slice(c.as_bytes());
        input.push(0);
    }
    // Status 1: none of them is ignored.
    let ignored = match git::run_with_input(git::git(&repo.top).args(["check-ignore", "-z", "--stdin"]), &input) {
        Ok(out) => out.stdout,
        Err(Error::Git { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    for rel in git::nul_fields(&ignored) {
        let rel = rel.trim_end_matches('/');
        copy_path(&repo.top.join(rel), &dest.join(rel))?;
    }
    Ok(())
}

/// A file, a link or a folder (whole), with its mode.
fn copy_path(from: &Path, to: &Path) -> Result<()> {
    let io = |what: &str, p: &Path| {
        let what = format!("{what} {}", p.display());
        move |source| Error::Io { what, source }
    };
    let meta = fs::symlink_metadata(from).map_err(io("cannot read", from))?;
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(io("cannot make", parent))?;
    }
    if meta.file_type().is_symlink() {
        let target = fs::read_link(from).map_err(io("cannot read", from))?;
        std::os::unix::fs::symlink(target, to).map_err(io("cannot make", to))?;
    } else if meta.is_dir() {
        fs::create_dir_all(to).map_err(io("cannot make", to))?;
        for entry in fs::read_dir(from).map_err(io("cannot read", from))? {
            let entry = entry.map_err(io("cannot read", from))?;
            copy_path(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else if meta.is_file() {
        fs::copy(from, to).map_err(io("cannot copy", from))?;
    }
    Ok(())
}
