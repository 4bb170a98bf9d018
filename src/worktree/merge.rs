//! Bringing a worktree chat's change into the checkout's branch.
//!
//! 1. The worktree's uncommitted changes are committed on its branch (`add -A`, `commit-tree`: no hook runs).
//! 2. The merge is computed without touching the checkout: `git merge-tree --write-tree --merge-base=BASE HEAD TIP`
//!    writes the merged tree into the object store, or names the conflicts, and then the merge stops there: no
//!    marker, no `MERGE_HEAD`, nothing of the checkout changed.
//! 3. The commit is made (`commit-tree`; squashed: one parent), and the files it changes are checked against the
//!    checkout's own uncommitted work: any overlap is refused, naming the files, with nothing changed.
//! 4. The checkout moves, under a journal in its git directory (`pseudoclaude-merge.json`, written whole before the
//!    first file): each changed file renamed into place whole, then the index entries of those files, then the
//!    branch (`update-ref` from the old commit). A `kill -9` in the middle leaves the journal; the next worktree call
//!    ([`recover`]: list, merge, create, remove, resume) finishes it, so the checkout ends as merged; killed before the
//!    journal, it is as before. A file is never half written: each is a rename.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::git::{self, Repo};
use super::{Error, Result};
use crate::atomic::{self, Durable, Mode};

const JOURNAL: &str = "pseudoclaude-merge.json";

/// One merge or recovery at a time in this process: two jobs merging two worktrees would share the journal.
static MERGING: Mutex<()> = Mutex::new(());

/// What a merge did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct MergeOutcome {
    /// Merged (or nothing to merge); `false` with `conflicts`.
    pub ok: bool,
    /// The files both sides changed, when it stopped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// The checkout's new commit (absent when nothing changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The files of the checkout it changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// The journal of a merge moving the checkout.
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    /// The checkout's branch (`refs/heads/main`).
    reference: String,
    /// Its commit before.
    head: String,
    /// Its commit after.
    new: String,
    /// The worktree merged, and its branch's commit that was merged (its next base).
    name: String,
    tip: String,
}

/// Merges worktree `name` into the checkout's current branch (see the module's doc). `session` names the chat in the
/// commit messages.
pub fn merge(workspace: &Path, name: &str, squash: bool, session: Option<&str>) -> Result<MergeOutcome> {
    let repo = Repo::open(workspace)?;
    let _one = MERGING.lock().unwrap_or_else(|e| e.into_inner());
    recover_locked(&repo)?;
    let wt = super::get(workspace, name)?;
    if wt.missing {
        return Err(Error::Missing { name: wt.id, path: wt.path, branch: wt.branch });
    }
    let reference = repo.branch()?;
    let head = repo.head()?;
    let who = session.map(|s| format!(" (session {s})")).unwrap_or_default();
    commit_pending(&wt.path, &wt.branch, &format!("pseudoclaude: the work of worktree chat {name}{who}"))?;
    let tip = git::ask(&repo.top, &["rev-parse", &format!("refs/heads/{}", wt.branch)])?;
    if tip == wt.base {
        return Ok(MergeOutcome { ok: true, ..Default::default() });
    }

    let out = git::output(git::git(&repo.top).args([
        "merge-tree",
        "--write-tree",
        "-z",
        "--name-only",
        "--no-messages",
        &format!("--merge-base={}", wt.base),
        &head,
        &tip,
    ]))?;
    let mut fields = git::nul_fields(&out.stdout);
    let tree = fields.next().unwrap_or_default();
    match out.status.code() {
        Some(0) => {}
        Some(1) => {
            let mut conflicts: Vec<String> = fields.collect();
            conflicts.dedup();
            return Ok(MergeOutcome { ok: false, conflicts, ..Default::default() });
        }
        _ => {
            return Err(Error::Git {
                command: "git merge-tree".into(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
    }

    let head_tree = git::ask(&repo.top, &["rev-parse", &format!("{head}^{{tree}}")])?;
    let new = if tree == head_tree {
        // Its change is in the checkout already: nothing to commit, only the base moves.
        super::set_config(&repo, name, "pseudoclaudebase", &tip)?;
        return Ok(MergeOutcome { ok: true, ..Default::default() });
    } else if !squash && git::holds(&repo.top, &["merge-base", "--is-ancestor", &head, &tip])? {
        tip.clone()
    } else if squash {
        git::commit_tree(
            &repo.top,
            &tree,
            &[&head],
            &format!("{}: the change of worktree chat {name}{who}", wt.branch),
        )?
    } else {
        git::commit_tree(&repo.top, &tree, &[&head, &tip], &format!("Merge branch '{}'{who}", wt.branch))?
    };

    let changes = diff(&repo, &head, &new)?;
    let overlap = overlapping(&repo, &changes)?;
    if !overlap.is_empty() {
        return Err(Error::Overlap { paths: overlap });
    }
    let journal = Journal { reference, head, new: new.clone(), name: name.to_owned(), tip };
    let journal_path = repo.git_dir.join(JOURNAL);
    let bytes = serde_json::to_vec(&journal).unwrap_or_default();
    atomic::replace(&journal_path, &bytes, Durable::Full, Mode::Keep)
        .map_err(|e| Error::Io { what: format!("cannot write {}", journal_path.display()), source: e })?;
    finish(&repo, &journal, &changes)?;
    Ok(MergeOutcome {
        ok: true,
        conflicts: Vec::new(),
        commit: Some(new),
        files: changes.into_iter().map(|c| c.path).collect(),
    })
}

/// Finishes a merge a crash interrupted (its journal in the checkout's git directory): as merged, when the checkout's
/// branch has not moved since; the journal dropped when it has.
pub fn recover(repo: &Repo) -> Result<()> {
    let _one = MERGING.lock().unwrap_or_else(|e| e.into_inner());
    recover_locked(repo)
}

fn recover_locked(repo: &Repo) -> Result<()> {
    let path = repo.git_dir.join(JOURNAL);
    let Ok(bytes) = fs::read(&path) else { return Ok(()) };
    let Ok(journal) = serde_json::from_slice::<Journal>(&bytes) else {
        // Damaged: written whole (a rename), so never by us; it names nothing to finish.
        return remove_journal(&path);
    };
    let now = git::ask(&repo.top, &["rev-parse", "-q", "--verify", &journal.reference]).unwrap_or_default();
    if now == journal.head {
        let changes = diff(repo, &journal.head, &journal.new)?;
        sweep_temporaries(repo, &changes);
        return finish(repo, &journal, &changes);
    }
    if now == journal.new {
        let _ = super::set_config(repo, &journal.name, "pseudoclaudebase", &journal.tip);
    }
    remove_journal(&path)
}

fn remove_journal(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(Error::Io { what: format!("cannot remove {}", path.display()), source: e })
        }
        _ => Ok(()),
    }
}

/// The files, then the index, then the branch, then the worktree's new base; the journal goes last. Each step can
/// run again after a crash.
fn finish(repo: &Repo, journal: &Journal, changes: &[Change]) -> Result<()> {
    write_files(repo, changes)?;
    let mut info = Vec::new();
    for c in changes {
        let (mode, sha) =
            if c.new_mode == "000000" { ("0", NULL_ID) } else { (c.new_mode.as_str(), c.new_sha.as_str()) };
        info.extend_from_slice(format!("{mode} {sha}\t{}", c.path).as_bytes());
        info.push(0);
    }
    git::run_with_input(git::git(&repo.top).args(["update-index", "-z", "--index-info"]), &info)?;
    // Status 1 when the user's own changes "need update": only the stat data of the files written is wanted here.
    let _ = git::output(git::git(&repo.top).args(["update-index", "-q", "--refresh"]));
    git::run(git::git(&repo.top).args([
        "update-ref",
        "-m",
        &format!("pseudoclaude: merge worktree chat {}", journal.name),
        &journal.reference,
        &journal.new,
        &journal.head,
    ]))?;
    let _ = super::set_config(repo, &journal.name, "pseudoclaudebase", &journal.tip);
    remove_journal(&repo.git_dir.join(JOURNAL))
}

const NULL_ID: &str = "0000000000000000000000000000000000000000";

/// One file a merge changes (`git diff-tree -r --raw`).
#[derive(Debug, Clone)]
struct Change {
    path: String,
    old_mode: String,
    new_mode: String,
    new_sha: String,
}

fn diff(repo: &Repo, from: &str, to: &str) -> Result<Vec<Change>> {
    let out = git::run(git::git(&repo.top).args(["diff-tree", "-r", "-z", "--no-renames", "--raw", from, to]))?;
    let mut fields = git::nul_fields(&out.stdout);
    let mut changes = Vec::new();
    // `:OLDMODE NEWMODE OLDSHA NEWSHA STATUS`, then the path.
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if parts.len() < 5 {
            continue;
        }
        changes.push(Change {
            path,
            old_mode: parts[0].to_owned(),
            new_mode: parts[1].to_owned(),
            new_sha: parts[3].to_owned(),
        });
    }
    Ok(changes)
}

/// The changed files the checkout holds uncommitted work in (or an untracked or ignored file where one is added).
fn overlapping(repo: &Repo, changes: &[Change]) -> Result<Vec<String>> {
    let out = git::run(git::git(&repo.top).args([
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
    ]))?;
    let dirty: BTreeSet<String> =
        git::nul_fields(&out.stdout).filter(|f| f.len() > 3).map(|f| f[3..].trim_end_matches('/').to_owned()).collect();
    let mut hit = Vec::new();
    for c in changes {
        let p = c.path.as_str();
        let under = format!("{p}/");
        let clash = dirty.contains(p)
            || Path::new(p).ancestors().skip(1).any(|a| dirty.contains(a.to_string_lossy().as_ref()))
            || dirty.range(under.clone()..).next().is_some_and(|d| d.starts_with(&under))
            || (c.old_mode == "000000" && repo.top.join(p).symlink_metadata().is_ok());
        if clash {
            hit.push(c.path.clone());
        }
    }
    Ok(hit)
}

/// Removes the temporary files a write killed before its rename left beside the changed files
/// (`.NAME.<random>.pseudoclaude-tmp`, [`atomic::temp_name`]): the checkout shows no trace of the crash.
fn sweep_temporaries(repo: &Repo, changes: &[Change]) {
    let mut names: BTreeSet<(std::path::PathBuf, String)> = BTreeSet::new();
    for c in changes {
        let path = repo.top.join(&c.path);
        if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
            names.insert((dir.to_path_buf(), atomic::temp_name(&name.to_string_lossy())));
        }
    }
    let dirs: BTreeSet<&std::path::PathBuf> = names.iter().map(|(d, _)| d).collect();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // same prefix and suffix as a temporary name of one of the changed files of this folder
            let ours = names.iter().any(|(d, t)| {
                d == dir && {
                    let (prefix, suffix) = (temp_prefix(t), ".pseudoclaude-tmp");
                    name.starts_with(prefix) && name.ends_with(suffix) && name.len() == t.len()
                }
            });
            if ours {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// `.NAME.` of a temporary name `.NAME.<16 hex>.pseudoclaude-tmp`.
fn temp_prefix(t: &str) -> &str {
    &t[..t.len().saturating_sub(16 + ".pseudoclaude-tmp".len())]
}

/// Deletions first (a file may give way to a folder), then each new content renamed into place.
fn write_files(repo: &Repo, changes: &[Change]) -> Result<()> {
    let io_err = |what: &str, p: &Path| {
        let what = format!("{what} {}", p.display());
        move |source| Error::Io { what, source }
    };
    for c in changes.iter().filter(|c| c.new_mode == "000000") {
        let path = repo.top.join(&c.path);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err("cannot remove", &path)(e)),
            _ => {}
        }
        // Folders left empty go as git's would.
        for dir in path.ancestors().skip(1) {
            if dir == repo.top || fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
    let writes: Vec<&Change> = changes.iter().filter(|c| c.new_mode != "000000" && c.new_mode != "160000").collect();
    if writes.is_empty() {
        return Ok(());
    }
    let mut input = Vec::new();
    for c in &writes {
        input.extend_from_slice(c.new_sha.as_bytes());
        input.push(b'\n');
    }
    let out = git::run_with_input(git::git(&repo.top).args(["cat-file", "--batch"]), &input)?;
    let mut rest: &[u8] = &out.stdout;
    for c in writes {
        let nl = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        let size: usize = header.rsplit(' ').next().and_then(|s| s.parse().ok()).unwrap_or(usize::MAX);
        if size > rest.len().saturating_sub(nl + 1) {
            return Err(Error::Git { command: "git cat-file --batch".into(), message: format!("no blob: {header}") });
        }
        let data = &rest[nl + 1..nl + 1 + size];
        rest = &rest[(nl + 2 + size).min(rest.len())..];
        let path = repo.top.join(&c.path);
        if let Some(parent) = path.parent() {
            // A file where a folder must now be (its deletion came first when git tracked it).
            fs::create_dir_all(parent).map_err(io_err("cannot make", parent))?;
        }
        if c.new_mode == "120000" {
            let target = Path::new(std::str::from_utf8(data).unwrap_or_default());
            atomic::replace_link(&path, target).map_err(io_err("cannot make", &path))?;
        } else {
            if path.is_dir() && !path.is_symlink() {
                fs::remove_dir(&path).map_err(io_err("cannot remove", &path))?;
            }
            let mode = if c.new_mode == "100755" { 0o755 } else { 0o644 };
            atomic::replace(&path, data, Durable::No, Mode::Set(mode)).map_err(io_err("cannot write", &path))?;
        }
    }
    Ok(())
}

/// Commits what the worktree holds uncommitted (untracked files too, ignored ones not) on its branch.
fn commit_pending(path: &Path, branch: &str, message: &str) -> Result<()> {
    let on = git::ask(path, &["symbolic-ref", "-q", "HEAD"]).unwrap_or_default();
    if on != format!("refs/heads/{branch}") {
        return Err(Error::Git {
            command: "git symbolic-ref HEAD".into(),
            message: format!("the worktree at {} is not on its branch {branch} any more", path.display()),
        });
    }
    git::run(git::git(path).args(["add", "-A"]))?;
    if git::holds(path, &["diff", "--cached", "--quiet"])? {
        return Ok(());
    }
    let tree = git::ask(path, &["write-tree"])?;
    let parent = git::ask(path, &["rev-parse", "HEAD"])?;
    let commit = git::commit_tree(path, &tree, &[&parent], message)?;
    git::run(git::git(path).args(["update-ref", "-m", message, "HEAD", &commit, &parent]))?;
    Ok(())
}
