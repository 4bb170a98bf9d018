//! The workspace's git branch and commit, read from the repository's files.
//!
//! A turn records where the code stood when it ran (a `meta` entry of the log), so this runs once per
//! turn, on the agent's threads. Reading `HEAD`, one loose ref and, failing that, `packed-refs` costs
//! a few small reads and no process; `git` itself would be a fork and exec per turn, and is absent on
//! some machines that have repositories. What is handled:
//!
//! - the workspace anywhere inside the work tree (the repository is found by walking up to `.git`);
//! - `.git` as a file (`gitdir: <path>`), as linked worktrees and submodules have it, with the
//!   worktree's `commondir` holding the shared refs;
//! - a detached HEAD (a commit, no branch), an unborn branch (a branch, no commit yet), a symbolic
//!   ref pointing at another ref, refs only in `packed-refs`;
//! - the reftable backend (`refs/heads/.invalid` in `HEAD`), whose binary tables are not parsed here:
//!   then, and only then, `git` is asked.
//!
//! Not a repository, or nothing readable: `None`, and nothing is recorded.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// Hex digits kept of a commit id: git's default abbreviation (not lengthened for ambiguity).
pub const SHORT_LEN: usize = 7;

/// Where the work tree's `HEAD` points.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitHead {
    /// The branch checked out (`main`, `feature/x`); empty when HEAD is detached.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub branch: String,
    /// The first [`SHORT_LEN`] hex digits of HEAD's commit; empty before the first commit.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commit: String,
}

/// The branch and short commit of the repository holding `workspace`; `None` outside a repository.
pub fn head(workspace: &Path) -> Option<GitHead> {
    let repo = find(workspace)?;
    let head = read_small(&repo.git_dir.join("HEAD"))?;
    let head = head.trim();
    if let Some(name) = head.strip_prefix("ref:").map(str::trim) {
        if name == "refs/heads/.invalid" {
            return ask_git(workspace);
        }
        if !name.starts_with("refs/") {
            return None;
        }
        let branch = name.strip_prefix("refs/heads/").unwrap_or(name).to_owned();
        let commit = resolve(&repo, name, 0).map(|id| short(&id)).unwrap_or_default();
        return Some(GitHead { branch, commit });
    }
    is_object_id(head).then(|| GitHead { branch: String::new(), commit: short(head) })
}

/// A repository as a work tree sees it.
struct Repo {
    /// The work tree's own git directory: `HEAD`, per-worktree refs.
    git_dir: PathBuf,
    /// Where the shared refs and `packed-refs` live (the main `.git` of a linked worktree).
    common_dir: PathBuf,
}

fn find(workspace: &Path) -> Option<Repo> {
    let start = std::path::absolute(workspace).ok()?;
    for dir in start.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = fs::metadata(&dot_git) else { continue };
        let git_dir = if meta.is_dir() {
            dot_git
        } else if meta.is_file() {
            // `gitdir: ../.git/worktrees/wt`, relative to the folder holding the file.
            let text = read_small(&dot_git)?;
            let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
            dir.join(target)
        } else {
            continue;
        };
        if !git_dir.join("HEAD").is_file() {
            // Not a repository after all (a stray `.git`); git would stop with an error here too.
            return None;
        }
        let common_dir = match read_small(&git_dir.join("commondir")) {
            Some(c) => git_dir.join(c.trim()),
            None => git_dir.clone(),
        };
        return Some(Repo { git_dir, common_dir });
    }
    None
}

/// The object id `name` points to, following symbolic refs a few levels deep.
fn resolve(repo: &Repo, name: &str, depth: u32) -> Option<String> {
    if depth > 5 || name.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return None;
    }
    // Per-worktree refs first (git keeps `HEAD`-like and `refs/worktree/` ones there), then shared ones.
    for dir in [&repo.git_dir, &repo.common_dir] {
        if let Some(text) = read_small(&dir.join(name)) {
            let text = text.trim();
            if let Some(next) = text.strip_prefix("ref:") {
                return resolve(repo, next.trim(), depth + 1);
            }
            if is_object_id(text) {
                return Some(text.to_owned());
            }
        }
    }
    packed(&repo.common_dir.join("packed-refs"), name)
}

/// `name` in a `packed-refs` file: lines of `<id> <name>`, `#` headers, `^<id>` peeled tags.
fn packed(path: &Path, name: &str) -> Option<String> {
    let file = fs::File::open(path).ok()?;
    for line in BufReader::new(file).lines() {
        let line = line.ok()?;
        if let Some((id, refname)) = line.split_once(' ')
            && refname.trim_end() == name
            && is_object_id(id)
        {
            return Some(id.to_owned());
        }
    }
    None
}

/// For the reftable backend: `git symbolic-ref` and `git rev-parse`, with no prompt and no pager.
fn ask_git(workspace: &Path) -> Option<GitHead> {
    let run = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let branch = run(&["symbolic-ref", "--quiet", "--short", "HEAD"]).unwrap_or_default();
    let commit = run(&["rev-parse", "--verify", "--quiet", "HEAD"]).filter(|c| is_object_id(c)).map(|c| short(&c));
    if branch.is_empty() && commit.is_none() {
        return None;
    }
    Some(GitHead { branch, commit: commit.unwrap_or_default() })
}

/// A ref file's text; refs are a line, `HEAD` too: anything large is not one.
fn read_small(path: &Path) -> Option<String> {
    let meta = fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    fs::read_to_string(path).ok()
}

/// SHA-1 (40) or SHA-256 (64) hex.
fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn short(id: &str) -> String {
    id[..SHORT_LEN.min(id.len())].to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "fedcba9876543210fedcba9876543210fedcba98";

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A repository's files written by hand: what `git init` and a commit leave, minus the objects.
    fn repo(root: &Path) -> PathBuf {
        let git = root.join(".git");
        write(&git.join("HEAD"), "ref: refs/heads/main\n");
        write(&git.join("refs/heads/main"), &format!("{A}\n"));
        git
    }

    #[test]
    fn a_branch_from_a_subfolder_of_the_work_tree() {
        let ws = tempfile::tempdir().unwrap();
        repo(ws.path());
        let sub = ws.path().join("src/deep");
        fs::create_dir_all(&sub).unwrap();
        let want = GitHead { branch: "main".into(), commit: A[..7].into() };
        assert_eq!(head(ws.path()), Some(want.clone()));
        assert_eq!(head(&sub), Some(want));
    }

    #[test]
    fn detached_unborn_packed_and_symbolic() {
        let ws = tempfile::tempdir().unwrap();
        let git = repo(ws.path());
        write(&git.join("HEAD"), &format!("{B}\n"));
        assert_eq!(head(ws.path()), Some(GitHead { branch: String::new(), commit: B[..7].into() }));
        write(&git.join("HEAD"), "ref: refs/heads/feature/new\n");
        assert_eq!(head(ws.path()), Some(GitHead { branch: "feature/new".into(), commit: String::new() }));
        write(
            &git.join("packed-refs"),
            &format!(
                "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/other\n^{B}\n{B} refs/heads/feature/new\n"
            ),
        );
        assert_eq!(head(ws.path()).unwrap().commit, B[..7]);
        // A loose ref wins over its packed copy.
        write(&git.join("refs/heads/feature/new"), &format!("{A}\n"));
        assert_eq!(head(ws.path()).unwrap().commit, A[..7]);
        write(&git.join("refs/heads/alias"), "ref: refs/heads/main\n");
        write(&git.join("HEAD"), "ref: refs/heads/alias\n");
        assert_eq!(head(ws.path()), Some(GitHead { branch: "alias".into(), commit: A[..7].into() }));
    }

    #[test]
    fn a_linked_worktree_reads_its_own_head_and_the_shared_refs() {
        let root = tempfile::tempdir().unwrap();
        let main = root.path().join("main");
        let git = repo(&main);
        write(&git.join("refs/heads/wt"), &format!("{B}\n"));
        let wt_git = git.join("worktrees/wt");
        write(&wt_git.join("HEAD"), "ref: refs/heads/wt\n");
        write(&wt_git.join("commondir"), "../..\n");
        let wt = root.path().join("wt");
        write(&wt.join(".git"), &format!("gitdir: {}\n", wt_git.display()));
        assert_eq!(head(&wt), Some(GitHead { branch: "wt".into(), commit: B[..7].into() }));
        // A relative gitdir, as `git worktree add --relative-paths` writes it.
        write(&wt.join(".git"), "gitdir: ../main/.git/worktrees/wt\n");
        assert_eq!(head(&wt).unwrap().branch, "wt");
        assert_eq!(head(&main).unwrap().branch, "main");
    }

    #[test]
    fn no_repository_no_head() {
        let ws = tempfile::tempdir().unwrap();
        assert_eq!(head(ws.path()), None);
        write(&ws.path().join(".git"), "not a gitdir line\n");
        assert_eq!(head(ws.path()), None);
        // A ref name climbing out of the repository is not followed.
        let git = repo(ws.path().join("r").as_path());
        write(&git.join("HEAD"), "ref: refs/heads/../../../../etc/passwd\n");
        assert_eq!(head(&ws.path().join("r")).unwrap().commit, "");
        write(&git.join("HEAD"), "ref: ../../../etc/passwd\n");
        assert_eq!(head(&ws.path().join("r")), None);
    }
}
