//! Worktree chats (issue 47): a chat in a git worktree of its own, on its own branch, so that agents working at
//! once never touch each other's files nor the user's checkout, and its whole change comes back when the user says.
//!
//! ```text
//! <workspace>/.PseudoClaude/worktrees/NAME     the worktree (ignored by `.PseudoClaude/.gitignore`'s `*`, skipped by
//!                                              the checkpoint scan as all of `.PseudoClaude/`)
//! branch pseudoclaude/NAME                     made from the checkout's HEAD
//! git config branch.pseudoclaude/NAME.*        `pseudoclaudebase`: the commit its unmerged work starts from (the
//!                                              branch point, then each merge's); `pseudoclaudesession`: the session
//! ```
//!
//! The record lives in the repository's config, beside the branch: it goes with `git branch -D`, and survives the
//! worktree's folder being deleted, so a resume can make the worktree again from the branch.
//!
//! Plain git through [`git::git`], on the caller's thread (the editor calls these from its workers). A merge is
//! computed off to the side (`git merge-tree --write-tree`) and moves the checkout only when it is clean, file by
//! file, each renamed into place, under a journal that the next call finishes after a crash ([`merge`]).

mod change;
pub mod git;
mod include;
mod merge;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use change::{FileChange, change};
pub use git::Repo;
pub use merge::{MergeOutcome, merge, recover};

/// The branches of worktree chats: `pseudoclaude/NAME`.
pub const BRANCH_PREFIX: &str = "pseudoclaude/";

/// The folder of the worktrees, under the workspace's `.PseudoClaude/`.
pub const DIR_NAME: &str = "worktrees";

/// What goes wrong, each saying what to do; none leaves anything changed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("git is not installed (`{program}` not found): worktree chats need git 2.40 or later")]
    GitMissing { program: String },
    #[error("{found} is too old: worktree chats need git 2.40 or later")]
    GitTooOld { found: String },
    #[error("{} is not in a git repository: a worktree chat needs one (`git init` and a first commit)", dir.display())]
    NotARepository { dir: PathBuf },
    #[error("the checkout at {} has a detached HEAD: check out a branch first (`git switch NAME`)", dir.display())]
    DetachedHead { dir: PathBuf },
    #[error("the repository at {} has no commit yet: a worktree starts from one", dir.display())]
    NoCommit { dir: PathBuf },
    #[error(
        "{name:?} is not a worktree name: letters, digits, `.`, `_` and `-`, at most 64, not starting with `.` or `-`"
    )]
    BadName { name: String },
    #[error("the name {name:?} is taken: {why}")]
    NameTaken { name: String, why: String },
    #[error("no worktree chat named {name:?} (`worktree.list()` names them)")]
    Unknown { name: String },
    #[error(
        "the worktree {name:?} is gone: its folder {} was deleted; its branch {branch} remains (a resume makes it again, \
         `worktree.remove` with force forgets it)",
        path.display()
    )]
    Missing { name: String, path: PathBuf, branch: String },
    #[error("the worktree {name:?} holds work not merged: {what}; merge it first, or remove it with force")]
    Unmerged { name: String, what: String },
    #[error("the merge would change files with uncommitted changes in the checkout: {}; commit or stash them first", paths.join(", "))]
    Overlap { paths: Vec<String> },
    #[error("{command} failed: {message}")]
    Git { command: String, message: String },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

pub type Result<T> = std::result::Result<T, Error>;

/// One worktree chat, as `worktree.list()` gives it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Worktree {
    /// Its name: `NAME` of `pseudoclaude/NAME` and of its folder.
    pub id: String,
    /// Its folder, `<workspace>/.PseudoClaude/worktrees/NAME`.
    pub path: PathBuf,
    /// Where its chat works: the folder, or the workspace's place inside it when the workspace is a sub-folder of
    /// the repository.
    pub root: PathBuf,
    /// `pseudoclaude/NAME`.
    pub branch: String,
    /// The commit its unmerged work starts from: the branch point, then each merge's.
    pub base: String,
    /// Files that differ from `base` (committed or not); 0 when it holds nothing to merge.
    pub changed: usize,
    /// The session whose chat made it, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Its folder was deleted (by hand, or `git worktree prune` after that); its branch remains.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// Whether `name` may name a worktree (and so a folder and a branch).
pub fn is_valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0] != b'.'
        && b[0] != b'-'
        && !name.ends_with(".lock")
        && !name.ends_with('.')
        && !name.contains("..")
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// `<workspace>/.PseudoClaude/worktrees`.
pub fn dir(repo: &Repo) -> PathBuf {
    repo.workspace.join(crate::session::ROOT_DIR_NAME).join(DIR_NAME)
}

fn folder(repo: &Repo, name: &str) -> PathBuf {
    dir(repo).join(name)
}

fn branch_of(name: &str) -> String {
    format!("{BRANCH_PREFIX}{name}")
}

fn config_key(name: &str, var: &str) -> String {
    format!("branch.{}.{var}", branch_of(name))
}

/// A new worktree chat in `workspace`'s repository: branch `pseudoclaude/NAME` from HEAD (a generated name without
/// one), its folder under `.PseudoClaude/worktrees/`, the `.worktreeinclude` files copied in.
pub fn create(workspace: &Path, name: Option<&str>, session: Option<&str>) -> Result<Worktree> {
    let repo = Repo::open(workspace)?;
    recover(&repo)?;
    repo.branch()?;
    let base = repo.head()?;
    let name = match name {
        Some(n) => {
            if !is_valid_name(n) {
                return Err(Error::BadName { name: n.to_owned() });
            }
            if let Some(why) = taken(&repo, n)? {
                return Err(Error::NameTaken { name: n.to_owned(), why });
            }
            n.to_owned()
        }
        None => generated_name(&repo)?,
    };
    crate::session::ensure_root(&repo.workspace)
        .map_err(|e| Error::Io { what: "cannot make .PseudoClaude".into(), source: std::io::Error::other(e) })?;
    let path = folder(&repo, &name);
    let branch = branch_of(&name);
    git::run(git::git(&repo.top).args(["worktree", "add", "--quiet", "-b", &branch]).arg(&path).arg(&base))?;
    let made = (|| {
        set_config(&repo, &name, "pseudoclaudebase", &base)?;
        if let Some(s) = session {
            set_config(&repo, &name, "pseudoclaudesession", s)?;
        }
        include::copy(&repo, &path)?;
        keep_state_out(&root_of(&repo, &path))
    })();
    if let Err(e) = made {
        // Nothing half made stays behind.
        let _ = git::run(git::git(&repo.top).args(["worktree", "remove", "--force"]).arg(&path));
        let _ = git::run(git::git(&repo.top).args(["branch", "-D", &branch]));
        return Err(e);
    }
    Ok(Worktree {
        id: name.clone(),
        root: root_of(&repo, &path),
        path,
        branch,
        base,
        changed: 0,
        session: session.map(str::to_owned),
        missing: false,
    })
}

/// Why `name` cannot be used (a branch, a folder, a registered worktree), or `None`.
fn taken(repo: &Repo, name: &str) -> Result<Option<String>> {
    let branch = branch_of(name);
    if git::holds(&repo.top, &["rev-parse", "-q", "--verify", &format!("refs/heads/{branch}")])? {
        return Ok(Some(format!("the branch {branch} exists")));
    }
    let path = folder(repo, name);
    if path.symlink_metadata().is_ok() {
        return Ok(Some(format!("{} exists", path.display())));
    }
    Ok(None)
}

const ADJECTIVES: [&str; 16] = [
    "amber", "brisk", "calm", "deft", "eager", "fond", "gentle", "hardy", "keen", "lucid", "merry", "nimble", "quiet",
    "rapid", "steady", "vivid",
];
const NOUNS: [&str; 16] = [
    "badger", "crane", "dingo", "egret", "falcon", "gecko", "heron", "ibis", "koala", "lynx", "marten", "newt",
    "otter", "puffin", "raven", "stoat",
];

fn generated_name(repo: &Repo) -> Result<String> {
    for _ in 0..32 {
        let n: u16 = rand::random();
        let name = format!("{}-{}-{:02x}", ADJECTIVES[(n & 15) as usize], NOUNS[((n >> 4) & 15) as usize], n >> 8);
        if taken(repo, &name)?.is_none() {
            return Ok(name);
        }
    }
    Err(Error::NameTaken { name: "(generated)".into(), why: "32 generated names were all taken".into() })
}

fn set_config(repo: &Repo, name: &str, var: &str, value: &str) -> Result<()> {
    git::run(git::git(&repo.top).args(["config", &config_key(name, var), value])).map(|_| ())
}

/// The worktree chats of `workspace`'s repository whose folders are in its `.PseudoClaude/worktrees/`, and those
/// whose folder is gone but whose branch remains (`missing`).
pub fn list(workspace: &Path) -> Result<Vec<Worktree>> {
    let repo = Repo::open(workspace)?;
    recover(&repo)?;
    let mut out = Vec::new();
    for rec in records(&repo)? {
        out.push(describe(&repo, rec)?);
    }
    Ok(out)
}

/// One worktree chat by name.
pub fn get(workspace: &Path, name: &str) -> Result<Worktree> {
    let repo = Repo::open(workspace)?;
    find(&repo, name).and_then(|r| describe(&repo, r))
}

/// What the repository knows of one worktree chat, before its changes are counted.
#[derive(Debug, Clone)]
struct Record {
    name: String,
    base: String,
    session: Option<String>,
    /// Registered with git and its folder present.
    live: bool,
}

fn find(repo: &Repo, name: &str) -> Result<Record> {
    if !is_valid_name(name) {
        return Err(Error::BadName { name: name.to_owned() });
    }
    records(repo)?.into_iter().find(|r| r.name == name).ok_or_else(|| Error::Unknown { name: name.to_owned() })
}

/// Every branch `pseudoclaude/NAME` with our record in the config, and whether its worktree is there.
fn records(repo: &Repo) -> Result<Vec<Record>> {
    let out = git::output(git::git(&repo.top).args([
        "config",
        "-z",
        "--get-regexp",
        r"^branch\.pseudoclaude/.*\.pseudoclaude(base|session)$",
    ]))?;
    // Status 1: no such key, no worktree chat yet.
    let mut recs: Vec<Record> = Vec::new();
    for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let (key, value) = entry.split_once('\n').unwrap_or((&entry, ""));
        let Some(rest) = key.strip_prefix("branch.").and_then(|k| k.strip_prefix(BRANCH_PREFIX)) else { continue };
        let (name, var) = match rest.rsplit_once('.') {
            Some(x) => x,
            None => continue,
        };
        if !is_valid_name(name) {
            continue;
        }
        let i = match recs.iter().position(|r| r.name == name) {
            Some(i) => i,
            None => {
                recs.push(Record { name: name.to_owned(), base: String::new(), session: None, live: false });
                recs.len() - 1
            }
        };
        match var {
            "pseudoclaudebase" => recs[i].base = value.to_owned(),
            _ => recs[i].session = Some(value.to_owned()),
        }
    }
    let listed = registered(repo)?;
    let mut kept = Vec::new();
    for mut r in recs {
        // A record whose branch was deleted by hand is no worktree chat any more.
        if r.base.is_empty()
            || !git::holds(&repo.top, &["rev-parse", "-q", "--verify", &format!("refs/heads/{}", branch_of(&r.name))])?
        {
            continue;
        }
        let path = folder(repo, &r.name);
        r.live = listed.iter().any(|(p, prunable)| *p == path && !prunable) && path.join(".git").exists();
        kept.push(r);
    }
    kept.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(kept)
}

/// The worktrees git knows (`git worktree list`): their folders, and whether git finds them gone (`prunable`).
fn registered(repo: &Repo) -> Result<Vec<(PathBuf, bool)>> {
    let out = git::run(git::git(&repo.top).args(["worktree", "list", "--porcelain", "-z"]))?;
    let mut v: Vec<(PathBuf, bool)> = Vec::new();
    for field in git::nul_fields(&out.stdout) {
        if let Some(p) = field.strip_prefix("worktree ") {
            v.push((PathBuf::from(p), false));
        } else if field.starts_with("prunable")
            && let Some(last) = v.last_mut()
        {
            last.1 = true;
        }
    }
    Ok(v)
}

fn describe(repo: &Repo, r: Record) -> Result<Worktree> {
    let path = folder(repo, &r.name);
    let branch = branch_of(&r.name);
    let changed =
        if r.live { changed_files(&path, &r.base)?.len() } else { committed_files(repo, &branch, &r.base)?.len() };
    Ok(Worktree {
        id: r.name.clone(),
        root: root_of(repo, &path),
        path,
        branch,
        base: r.base,
        changed,
        session: r.session,
        missing: !r.live,
    })
}

/// The files of a live worktree that differ from `base`, committed or not (untracked ones included, ignored ones
/// not), sorted.
fn changed_files(path: &Path, base: &str) -> Result<Vec<String>> {
    let diff = git::run(git::git(path).args(["diff", "--name-only", "-z", "--no-renames", base]))?;
    let untracked = git::run(git::git(path).args(["ls-files", "-z", "--others", "--exclude-standard"]))?;
    let mut files: Vec<String> = git::nul_fields(&diff.stdout).chain(git::nul_fields(&untracked.stdout)).collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// The files the branch's commits changed since `base`.
fn committed_files(repo: &Repo, branch: &str, base: &str) -> Result<Vec<String>> {
    let out = git::run(git::git(&repo.top).args(["diff", "--name-only", "-z", "--no-renames", base, branch]))?;
    Ok(git::nul_fields(&out.stdout).collect())
}

/// Removes a worktree chat: its folder (ignored files and all) and its branch. Refused while it holds work not
/// merged (uncommitted changes, or commits whose change is not in the checkout) unless `force`, naming it.
pub fn remove(workspace: &Path, name: &str, force: bool) -> Result<()> {
    let repo = Repo::open(workspace)?;
    recover(&repo)?;
    let r = find(&repo, name)?;
    let path = folder(&repo, name);
    let branch = branch_of(name);
    if !force && let Some(what) = unmerged(&repo, &r)? {
        return Err(Error::Unmerged { name: name.to_owned(), what });
    }
    if r.live {
        git::run(git::git(&repo.top).args(["worktree", "remove", "--force", "--force"]).arg(&path))?;
    } else {
        // Its folder is gone: git's record of it goes the way `git worktree prune` would take it.
        git::run(git::git(&repo.top).args(["worktree", "prune"]))?;
        if path.symlink_metadata().is_ok() {
            std::fs::remove_dir_all(&path)
                .map_err(|e| Error::Io { what: format!("cannot remove {}", path.display()), source: e })?;
        }
    }
    // `branch -D` takes the branch's config section, our record, with it.
    git::run(git::git(&repo.top).args(["branch", "-D", &branch]))?;
    Ok(())
}

/// What of a worktree chat's work is not in the checkout, in words, or `None`.
fn unmerged(repo: &Repo, r: &Record) -> Result<Option<String>> {
    let path = folder(repo, &r.name);
    let branch = branch_of(&r.name);
    let mut parts = Vec::new();
    if r.live {
        let status = git::run(git::git(&path).args(["status", "--porcelain", "-z", "--untracked-files=all"]))?;
        let n = git::nul_fields(&status.stdout).filter(|f| f.len() > 3 && f.as_bytes()[2] == b' ').count();
        if n > 0 {
            parts.push(format!("{n} uncommitted {}", plural(n, "file")));
        }
    }
    let tip = git::ask(&repo.top, &["rev-parse", &format!("refs/heads/{branch}")])?;
    let head = repo.head().ok();
    let in_checkout = match &head {
        Some(h) => git::holds(&repo.top, &["merge-base", "--is-ancestor", &tip, h])?,
        None => false,
    };
    if tip != r.base && !in_checkout {
        let files = committed_files(repo, &branch, &r.base)?;
        if !files.is_empty() {
            parts.push(format!("commits changing {}", list_files(&files)));
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join(" and ")))
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { word.to_owned() } else { format!("{word}s") }
}

/// `a, b, c and 4 more`.
fn list_files(files: &[String]) -> String {
    let shown: Vec<&str> = files.iter().take(5).map(String::as_str).collect();
    let more = files.len().saturating_sub(shown.len());
    if more > 0 { format!("{} and {more} more", shown.join(", ")) } else { shown.join(", ") }
}

/// How a resumed session finds its worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resumed {
    /// There, as it was.
    Present(Worktree),
    /// Its folder was gone; made again from its branch (what was not committed is lost).
    Recreated(Worktree),
    /// Neither folder nor branch: the chat goes on in the checkout.
    Gone,
}

/// The worktree's counterpart of the workspace (the workspace may be a sub-folder of its repository): where the
/// chat works. Never with a trailing `/` (`path.join("")` would add one).
fn root_of(repo: &Repo, path: &Path) -> PathBuf {
    let prefix = repo.prefix();
    if prefix.as_os_str().is_empty() { path.to_path_buf() } else { path.join(prefix) }
}

/// `<root>/.PseudoClaude/` with its `.gitignore` of `*`, as the workspace's: the chat's checkpoints stored there
/// stay out of the worktree's `git status` and of a merge's commit (a worktree made again from its branch too: the
/// branch never holds the ignored file).
fn keep_state_out(root: &Path) -> Result<()> {
    crate::session::ensure_ignored_root(root).map(|_| ()).map_err(|e| Error::Io {
        what: "cannot make the worktree's .PseudoClaude".into(),
        source: std::io::Error::other(e),
    })
}

/// Back into worktree `name` for a resume: as it is, made again from its branch, or [`Resumed::Gone`].
pub fn resume(workspace: &Path, name: &str) -> Result<Resumed> {
    let repo = Repo::open(workspace)?;
    recover(&repo)?;
    let r = match find(&repo, name) {
        Ok(r) => r,
        Err(Error::Unknown { .. }) => return Ok(Resumed::Gone),
        Err(e) => return Err(e),
    };
    if r.live {
        return describe(&repo, r).map(Resumed::Present);
    }
    let path = folder(&repo, name);
    if path.symlink_metadata().is_ok() {
        return Err(Error::NameTaken {
            name: name.to_owned(),
            why: format!("{} exists but is no worktree of this repository", path.display()),
        });
    }
    // `--force`: git may still hold the deleted folder as a worktree of the branch.
    git::run(git::git(&repo.top).args(["worktree", "add", "--quiet", "--force"]).arg(&path).arg(branch_of(name)))?;
    include::copy(&repo, &path)?;
    keep_state_out(&root_of(&repo, &path))?;
    let r = Record { live: true, ..r };
    describe(&repo, r).map(Resumed::Recreated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_their_folder_or_break_a_ref_are_refused() {
        for ok in ["fix-login", "a", "v1.2_x", &"x".repeat(64)] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "../x", "a/b", ".hidden", "-rf", "x.lock", "a..b", "dot.", "sp ace", &"x".repeat(65)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }
}
