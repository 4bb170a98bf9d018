//! Worktree chats' core against real git (issue 47): a worktree made from HEAD where the checkout's `git status`
//! never shows it, `.worktreeinclude`, the change against the base, a merge (squashed or not) that brings it in
//! while the checkout's own work stays, a conflict that changes nothing, a removal refused while work is unmerged,
//! the bad cases, a resume into a worktree present, deleted by hand (made again) or gone, and `kill -9` during a
//! merge (the checkout as before or as merged, never half).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pseudoclaude::worktree::{self, Error, Resumed};

/// `git ARGS` in `dir` with a known identity; panics on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=T", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// A repository on `main` with two committed files.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    git(ws, &["init", "-q"]);
    git(ws, &["config", "user.name", "T"]);
    git(ws, &["config", "user.email", "t@t"]);
    fs::write(ws.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(ws.join("b.txt"), "bee\n").unwrap();
    git(ws, &["add", "."]);
    git(ws, &["commit", "-qm", "first"]);
    dir
}

fn status(ws: &Path) -> String {
    git(ws, &["status", "--porcelain", "--untracked-files=all"])
}

#[test]
fn a_worktree_starts_from_head_on_its_branch_where_git_status_never_shows_it() {
    let dir = repo();
    let ws = dir.path();
    let head = git(ws, &["rev-parse", "HEAD"]);
    let wt = worktree::create(ws, Some("fix"), Some("20261207-101010-abcd")).unwrap();
    assert_eq!(wt.branch, "pseudoclaude/fix");
    assert_eq!(wt.base, head);
    assert_eq!(wt.path, fs::canonicalize(ws).unwrap().join(".PseudoClaude/worktrees/fix"));
    assert_eq!(fs::read_to_string(wt.path.join("a.txt")).unwrap(), "one\ntwo\nthree\n");
    assert_eq!(git(&wt.path, &["symbolic-ref", "HEAD"]), "refs/heads/pseudoclaude/fix");
    assert_eq!(status(ws), "", "the checkout shows nothing of it");
    fs::write(wt.path.join("new.txt"), "x").unwrap();
    assert_eq!(status(ws), "", "nor of its changes");

    let listed = worktree::list(ws).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].id.as_str(), listed[0].changed, listed[0].missing), ("fix", 1, false));
    assert_eq!(listed[0].session.as_deref(), Some("20261207-101010-abcd"));

    let generated = worktree::create(ws, None, None).unwrap();
    assert!(worktree::is_valid_name(&generated.id), "{}", generated.id);
    assert_eq!(worktree::list(ws).unwrap().len(), 2);
}

#[test]
fn worktreeinclude_copies_the_ignored_files_it_names_and_nothing_else() {
    let dir = repo();
    let ws = dir.path();
    fs::write(ws.join(".gitignore"), ".env\nbuild/\nlocal/\n").unwrap();
    fs::write(ws.join(".worktreeinclude"), ".env\nlocal/\nnotes.txt\n").unwrap();
    git(ws, &["add", ".gitignore", ".worktreeinclude"]);
    git(ws, &["commit", "-qm", "ignore"]);
    fs::write(ws.join(".env"), "KEY=1\n").unwrap();
    fs::create_dir_all(ws.join("local/deep")).unwrap();
    fs::write(ws.join("local/deep/settings.json"), "{}").unwrap();
    fs::create_dir_all(ws.join("build")).unwrap();
    fs::write(ws.join("build/out.o"), "obj").unwrap();
    fs::write(ws.join("notes.txt"), "mine, not ignored").unwrap();

    let wt = worktree::create(ws, Some("inc"), None).unwrap();
    assert_eq!(fs::read_to_string(wt.path.join(".env")).unwrap(), "KEY=1\n");
    assert_eq!(fs::read_to_string(wt.path.join("local/deep/settings.json")).unwrap(), "{}");
    assert!(!wt.path.join("build").exists(), "ignored but not named");
    assert!(!wt.path.join("notes.txt").exists(), "named but not ignored: the user's work in progress");
    // never the session logs: the worktree's `.PseudoClaude/` holds only the `.gitignore` that keeps the chat's
    // checkpoints out of git
    let state: Vec<_> = fs::read_dir(wt.path.join(".PseudoClaude")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(state, [".gitignore"], "never the session logs");
    assert_eq!(worktree::list(ws).unwrap()[0].changed, 0, "the copies are ignored there too");
}

#[test]
fn the_change_against_the_base_holds_committed_and_uncommitted_work() {
    let dir = repo();
    let ws = dir.path();
    let wt = worktree::create(ws, Some("ch"), None).unwrap();
    fs::write(wt.path.join("a.txt"), "one\nTWO\nthree\n").unwrap();
    git(&wt.path, &["commit", "-qam", "agent commit"]);
    fs::remove_file(wt.path.join("b.txt")).unwrap();
    fs::write(wt.path.join("c.txt"), "sea\n").unwrap();
    let change = worktree::change(ws, "ch").unwrap();
    let got: Vec<(&str, &str, Option<&str>, Option<&str>)> =
        change.iter().map(|c| (c.path.as_str(), c.status, c.before.as_deref(), c.after.as_deref())).collect();
    assert_eq!(
        got,
        vec![
            ("a.txt", "modified", Some("one\ntwo\nthree\n"), Some("one\nTWO\nthree\n")),
            ("b.txt", "deleted", Some("bee\n"), None),
            ("c.txt", "added", None, Some("sea\n")),
        ]
    );
    assert_eq!(worktree::get(ws, "ch").unwrap().changed, 3);
}

#[test]
fn a_squashed_merge_brings_the_whole_change_and_leaves_the_checkouts_own_work() {
    let dir = repo();
    let ws = dir.path();
    let head = git(ws, &["rev-parse", "HEAD"]);
    let wt = worktree::create(ws, Some("sq"), None).unwrap();
    fs::write(wt.path.join("a.txt"), "one\nTWO\nthree\n").unwrap();
    git(&wt.path, &["commit", "-qam", "agent commit"]);
    fs::create_dir_all(wt.path.join("dir")).unwrap();
    fs::write(wt.path.join("dir/new.txt"), "new\n").unwrap();
    fs::remove_file(wt.path.join("b.txt")).unwrap();
    // the user's own uncommitted work, in other files
    fs::write(ws.join("mine.txt"), "mine\n").unwrap();

    let out = worktree::merge(ws, "sq", true, Some("20261207-101010-abcd")).unwrap();
    assert!(out.ok, "{out:?}");
    assert_eq!(out.files, vec!["a.txt", "b.txt", "dir/new.txt"]);
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "one\nTWO\nthree\n");
    assert_eq!(fs::read_to_string(ws.join("dir/new.txt")).unwrap(), "new\n");
    assert!(!ws.join("b.txt").exists());
    assert_eq!(git(ws, &["rev-parse", "HEAD^"]), head, "one commit on top");
    assert_eq!(git(ws, &["log", "-1", "--format=%P"]).split(' ').count(), 1, "squashed: one parent");
    assert!(git(ws, &["log", "-1", "--format=%s"]).contains("20261207-101010-abcd"), "the message names the session");
    assert_eq!(status(ws), "?? mine.txt", "index and files agree; the user's file untouched");
    assert_eq!(fs::read_to_string(ws.join("mine.txt")).unwrap(), "mine\n");
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "", "the worktree's work was committed first");
    let after = worktree::get(ws, "sq").unwrap();
    assert_eq!(after.changed, 0, "nothing left to merge");
    // nothing more to merge: a second merge changes nothing
    let again = worktree::merge(ws, "sq", true, None).unwrap();
    assert!(again.ok && again.commit.is_none(), "{again:?}");
    // more work merges only what is new
    fs::write(wt.path.join("b2.txt"), "more\n").unwrap();
    let third = worktree::merge(ws, "sq", true, None).unwrap();
    assert_eq!(third.files, vec!["b2.txt"]);
    worktree::remove(ws, "sq", false).expect("merged: removed without force");
    assert!(!wt.path.exists());
    assert!(git(ws, &["branch", "--list", "pseudoclaude/*"]).is_empty());
}

#[test]
fn a_merge_that_is_not_squashed_keeps_the_branchs_commits() {
    let dir = repo();
    let ws = dir.path();
    let wt = worktree::create(ws, Some("full"), None).unwrap();
    fs::write(wt.path.join("a.txt"), "changed\n").unwrap();
    // the checkout moved meanwhile: a real merge commit
    fs::write(ws.join("b.txt"), "bee 2\n").unwrap();
    git(ws, &["commit", "-qam", "user commit"]);
    let out = worktree::merge(ws, "full", false, None).unwrap();
    assert!(out.ok);
    assert_eq!(git(ws, &["log", "-1", "--format=%P"]).split(' ').count(), 2, "a merge commit");
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "changed\n");
    assert_eq!(fs::read_to_string(ws.join("b.txt")).unwrap(), "bee 2\n");
    assert_eq!(status(ws), "");
}

#[test]
fn the_second_of_two_chats_changing_one_line_is_a_conflict_that_changes_nothing() {
    let dir = repo();
    let ws = dir.path();
    let one = worktree::create(ws, Some("one"), None).unwrap();
    let two = worktree::create(ws, Some("two"), None).unwrap();
    fs::write(one.path.join("a.txt"), "one\nFIRST\nthree\n").unwrap();
    fs::write(two.path.join("a.txt"), "one\nSECOND\nthree\n").unwrap();
    fs::write(two.path.join("other.txt"), "fine\n").unwrap();
    assert!(worktree::merge(ws, "one", true, None).unwrap().ok);
    let head = git(ws, &["rev-parse", "HEAD"]);
    let out = worktree::merge(ws, "two", true, None).unwrap();
    assert!(!out.ok);
    assert_eq!(out.conflicts, vec!["a.txt"]);
    assert_eq!(git(ws, &["rev-parse", "HEAD"]), head);
    assert_eq!(status(ws), "", "no markers, nothing staged");
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "one\nFIRST\nthree\n");
    assert!(!ws.join("other.txt").exists());
    assert!(!ws.join(".git/MERGE_HEAD").exists(), "no merge left in progress");
    let err = worktree::remove(ws, "two", false).unwrap_err();
    assert!(matches!(err, Error::Unmerged { .. }), "{err}");
    assert!(err.to_string().contains("a.txt") && err.to_string().contains("other.txt"), "{err}");
    worktree::remove(ws, "two", true).unwrap();
    assert!(!two.path.exists());
}

#[test]
fn a_merge_over_the_checkouts_uncommitted_change_to_the_same_file_is_refused() {
    let dir = repo();
    let ws = dir.path();
    let wt = worktree::create(ws, Some("ov"), None).unwrap();
    fs::write(wt.path.join("a.txt"), "agent\n").unwrap();
    fs::write(ws.join("a.txt"), "user\n").unwrap();
    let head = git(ws, &["rev-parse", "HEAD"]);
    let err = worktree::merge(ws, "ov", true, None).unwrap_err();
    assert!(matches!(err, Error::Overlap { ref paths } if paths == &["a.txt"]), "{err}");
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "user\n");
    assert_eq!(git(ws, &["rev-parse", "HEAD"]), head);
    // an untracked file of the user's where the merge would add one
    let wt2 = worktree::create(ws, Some("ov2"), None).unwrap();
    fs::write(wt2.path.join("z.txt"), "agent\n").unwrap();
    fs::write(ws.join("z.txt"), "user\n").unwrap();
    assert!(matches!(worktree::merge(ws, "ov2", true, None), Err(Error::Overlap { .. })));
    assert_eq!(fs::read_to_string(ws.join("z.txt")).unwrap(), "user\n");
}

#[test]
fn bad_cases_say_what_is_wrong_and_change_nothing() {
    let plain = tempfile::tempdir().unwrap();
    let err = worktree::create(plain.path(), None, None).unwrap_err();
    assert!(matches!(err, Error::NotARepository { .. }), "{err}");
    assert!(!plain.path().join(".PseudoClaude").exists());

    let dir = repo();
    let ws = dir.path();
    for bad in ["../x", "a/b", "-f", ""] {
        assert!(matches!(worktree::create(ws, Some(bad), None), Err(Error::BadName { .. })), "{bad}");
    }
    git(ws, &["branch", "pseudoclaude/taken"]);
    let err = worktree::create(ws, Some("taken"), None).unwrap_err();
    assert!(matches!(err, Error::NameTaken { .. }), "{err}");
    worktree::create(ws, Some("mine"), None).unwrap();
    assert!(matches!(worktree::create(ws, Some("mine"), None), Err(Error::NameTaken { .. })));
    assert!(matches!(worktree::merge(ws, "nope", true, None), Err(Error::Unknown { .. })));

    git(ws, &["checkout", "-q", "--detach"]);
    let err = worktree::create(ws, Some("det"), None).unwrap_err();
    assert!(matches!(err, Error::DetachedHead { .. }), "{err}");
    assert!(git(ws, &["branch", "--list", "pseudoclaude/det"]).is_empty());
}

#[test]
fn a_worktree_deleted_by_hand_is_missing_and_a_resume_makes_it_again_from_its_branch() {
    let dir = repo();
    let ws = dir.path();
    let wt = worktree::create(ws, Some("gone"), None).unwrap();
    fs::write(wt.path.join("a.txt"), "committed\n").unwrap();
    git(&wt.path, &["commit", "-qam", "work"]);
    match worktree::resume(ws, "gone").unwrap() {
        Resumed::Present(w) => assert_eq!(w.path, wt.path),
        other => panic!("{other:?}"),
    }
    fs::remove_dir_all(&wt.path).unwrap();
    let listed = worktree::list(ws).unwrap();
    assert!(listed[0].missing && listed[0].changed == 1, "{listed:?}");
    let err = worktree::merge(ws, "gone", true, None).unwrap_err();
    assert!(matches!(err, Error::Missing { .. }), "{err}");
    assert!(err.to_string().contains("deleted"), "{err}");

    for prune in [false, true] {
        if prune {
            fs::remove_dir_all(&wt.path).unwrap();
            git(ws, &["worktree", "prune"]);
        }
        match worktree::resume(ws, "gone").unwrap() {
            Resumed::Recreated(w) => assert_eq!(fs::read_to_string(w.path.join("a.txt")).unwrap(), "committed\n"),
            other => panic!("{other:?}"),
        }
    }
    worktree::remove(ws, "gone", true).unwrap();
    assert_eq!(worktree::resume(ws, "gone").unwrap(), Resumed::Gone);
}

#[test]
fn git_missing_or_too_old_is_named() {
    // In a child process: the variable naming git is the process's.
    let dir = repo();
    let fake = dir.path().join("old-git");
    fs::write(&fake, "#!/bin/sh\necho 'git version 2.30.1'\n").unwrap();
    fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for (program, expected) in
        [("/nonexistent/git", "git is not installed"), (fake.to_str().unwrap(), "2.30.1 is too old")]
    {
        let out = child("create", dir.path(), &[("PSEUDOCLAUDE_GIT", program)]);
        assert!(out.contains(expected), "{out}");
    }
    assert!(!dir.path().join(".PseudoClaude").exists());
}

/// Runs this binary's `child_process` test with `WT_CHILD` = `what` in `ws`; its standard output.
fn child(what: &str, ws: &Path, env: &[(&str, &str)]) -> String {
    let out = child_command(what, ws, env).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn child_command(what: &str, ws: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "worktree::child_process", "--nocapture", "--include-ignored", "--test-threads=1"]);
    cmd.env("WT_CHILD", what).env("WT_CHILD_WS", ws);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Not a test of its own: what [`child`] runs in a process of its own (nothing without `WT_CHILD`).
#[test]
fn child_process() {
    let Some(what) = std::env::var_os("WT_CHILD") else { return };
    let ws = PathBuf::from(std::env::var_os("WT_CHILD_WS").unwrap());
    match what.to_str().unwrap() {
        "create" => println!("RESULT {:?}", worktree::create(&ws, Some("c"), None).map_err(|e| e.to_string())),
        "merge" => println!("RESULT {:?}", worktree::merge(&ws, "big", true, None).map(|o| o.ok)),
        other => panic!("{other}"),
    }
}

#[test]
fn kill_9_during_a_merge_leaves_the_checkout_as_before_or_as_merged() {
    let dir = repo();
    let ws = dir.path();
    let files = 1500;
    for i in 0..files {
        fs::write(ws.join(format!("f{i:04}.txt")), format!("old {i}\n")).unwrap();
    }
    git(ws, &["add", "."]);
    git(ws, &["commit", "-qm", "many"]);
    let before = git(ws, &["rev-parse", "HEAD"]);
    let wt = worktree::create(ws, Some("big"), None).unwrap();
    for i in 0..files {
        fs::write(wt.path.join(format!("f{i:04}.txt")), format!("new {i}\n")).unwrap();
    }
    git(&wt.path, &["commit", "-qam", "agent"]);
    let mut seen = (0, 0);
    for round in 0..12 {
        let mut child = child_command("merge", ws, &[]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(20 + round * 15));
        let _ = child.kill();
        let _ = child.wait();
        // git's own children finish what they started (as after the editor's `kill -9`)
        std::thread::sleep(Duration::from_millis(300));
        worktree::list(ws).unwrap();
        let head = git(ws, &["rev-parse", "HEAD"]);
        assert_eq!(status(ws), "", "round {round}: never half");
        let first = fs::read_to_string(ws.join("f0000.txt")).unwrap();
        let last = fs::read_to_string(ws.join(format!("f{:04}.txt", files - 1))).unwrap();
        if head == before {
            assert_eq!((first.as_str(), last.as_str()), ("old 0\n", "old 1499\n"), "round {round}");
            seen.0 += 1;
        } else {
            assert_eq!((first.as_str(), last.as_str()), ("new 0\n", "new 1499\n"), "round {round}");
            seen.1 += 1;
            // back to before for the next round
            git(ws, &["reset", "-q", "--hard", &before]);
            git(ws, &["config", "branch.pseudoclaude/big.pseudoclaudebase", &before]);
        }
    }
    eprintln!("kill -9 rounds: {} as before, {} as merged", seen.0, seen.1);
}
