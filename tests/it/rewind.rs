//! Rewind through a real agent and its real log: a command that creates, changes and deletes files
//! (nested folders included) and a write, then a rewind of code and conversation returns the tree byte
//! for byte; the user's own edits survive; a file changed by both is a conflict; conversation only, code
//! only, the undo, a rewind the editor died in, the reminder naming changed files.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use pseudoclaude::agent::{Agent, AgentConfig, Cancel};
use pseudoclaude::message::ToolCall;
use pseudoclaude::provider::BoxFuture;
use pseudoclaude::rewind::RewindOptions;
use pseudoclaude::session::{self, Context, Entry};
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver, AutoApprove};
use serde_json::json;
use tokio::sync::mpsc;

use crate::support::scripted::{Scripted, say};

struct Never;
impl Approver for Never {
    fn ask(&self, _req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(std::future::pending())
    }
}

fn config(ws: &Path) -> AgentConfig {
    let mut c = AgentConfig::new(ws);
    c.auto_approve = AutoApprove { write_file: true, edit_file: true, run_command: true };
    c
}

/// Answers in order: each a text and the tool calls it asks for.
fn scripted(answers: Vec<(&str, Vec<ToolCall>)>) -> Arc<Scripted> {
    Scripted::new(answers.into_iter().map(|(t, c)| say(t).calls(c)).collect())
}

fn command(id: &str, cmd: &str) -> ToolCall {
    ToolCall::new(id, "run_command", json!({ "command": cmd }))
}

fn write(id: &str, path: &str, content: &str) -> ToolCall {
    ToolCall::new(id, "write_file", json!({ "path": path, "content": content }))
}

async fn turn(agent: &Agent, text: &str) {
    let (tx, _rx) = mpsc::unbounded_channel();
    agent.turn(text, tx, Cancel::new()).await;
}

/// Every file under `ws` but `.PseudoClaude/`, with its bytes.
fn tree(ws: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".PseudoClaude" {
                continue;
            }
            if p.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                walk(root, &p, out);
            } else {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    walk(ws, ws, &mut out);
    out
}

fn log_bytes(ws: &Path, agent: &Agent) -> Vec<u8> {
    let _ = ws;
    fs::read(&agent.current().unwrap().jsonl_path).unwrap()
}

fn opts(code: bool, conversation: bool) -> RewindOptions {
    RewindOptions { code, conversation, ..Default::default() }
}

fn seed(ws: &Path) {
    fs::create_dir_all(ws.join("src/deep")).unwrap();
    fs::write(ws.join("src/a.rs"), "fn a() {}\n").unwrap();
    fs::write(ws.join("src/deep/b.rs"), "one\ntwo\n").unwrap();
    fs::write(ws.join("notes.txt"), "keep me\n").unwrap();
    fs::write(ws.join(".gitignore"), "target/\n").unwrap();
    fs::create_dir_all(ws.join("target")).unwrap();
    fs::write(ws.join("target/big.o"), "ignored build output\n").unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rewind_of_code_and_conversation_returns_the_tree_byte_for_byte_and_keeps_the_log() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let provider = scripted(vec![
        ("first", vec![]),
        (
            "working",
            vec![
                command(
                    "c1",
                    "mkdir -p new/deeper && echo hi > new/deeper/x.txt && rm src/deep/b.rs && printf 'fn a() { 1 }\\n' > src/a.rs && rm target/big.o",
                ),
                write("c2", "notes.txt", "rewritten\n"),
            ],
        ),
        ("changed three files", vec![]),
    ]);
    let agent = Agent::new(config(ws.path()), provider, Arc::new(Never));
    turn(&agent, "hello").await;
    let before = tree(ws.path());
    turn(&agent, "now change things").await;
    assert_ne!(tree(ws.path()), before);
    let log_before = log_bytes(ws.path(), &agent);

    let index = agent.messages().iter().position(|m| m.content == "now change things").unwrap() + 1;
    let changes = agent.changes();
    let turn_changes = changes.iter().find(|t| t.index == index).unwrap();
    let paths: Vec<(&str, &str)> = turn_changes.files.iter().map(|f| (f.path.as_str(), f.status.as_str())).collect();
    assert_eq!(
        paths,
        [
            ("new/deeper/x.txt", "added"),
            ("notes.txt", "modified"),
            ("src/a.rs", "modified"),
            ("src/deep/b.rs", "deleted")
        ],
        "the ignored target/big.o is not tracked"
    );
    let a = turn_changes.files.iter().find(|f| f.path == "src/a.rs").unwrap();
    assert_eq!((a.added, a.removed), (1, 1));

    let report = agent.rewind(index, &opts(true, true));
    assert!(report.ok, "{report:?}");
    assert_eq!(report.text, "now change things");
    assert_eq!(report.removed, ["new/deeper/x.txt"]);
    assert_eq!(report.restored, ["notes.txt", "src/a.rs", "src/deep/b.rs"]);
    assert!(report.conflicts.is_empty(), "{:?}", report.conflicts);
    let mut expected = before.clone();
    // The command deleted an ignored file: not tracked, so not restored.
    expected.remove("target/big.o");
    assert_eq!(tree(ws.path()), expected);
    assert_eq!(agent.messages().len(), index - 1);
    let log_after = log_bytes(ws.path(), &agent);
    assert_eq!(&log_after[..log_before.len()], &log_before[..], "the log is only appended to");

    // What a resume restores agrees.
    let id = agent.current().unwrap().id;
    drop(agent);
    let loaded = session::load(&Context::open(ws.path(), &id).unwrap()).unwrap();
    assert_eq!(loaded.messages.len(), index - 1);
    assert!(loaded.rewinds.iter().any(|r| r.state == "done"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rewind_puts_back_a_file_whose_name_is_254_bytes_long() {
    // A folder entry holds 255 bytes at most: the temporary file a rewind writes before its rename must not make
    // the name longer (it once did: `.NAME.XXXXXXXX.rewind` was refused by the file system).
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let long = format!("{}.txt", "n".repeat(250));
    let gone = format!("{}.md", "é".repeat(126));
    assert_eq!((long.len(), gone.len()), (254, 255));
    fs::write(ws.path().join(&long), "before\n").unwrap();
    fs::write(ws.path().join(&gone), "deleted by the agent\n").unwrap();
    let provider = scripted(vec![
        ("first", vec![]),
        ("working", vec![write("c1", &long, "after\n"), command("c2", &format!("rm {gone}"))]),
        ("done", vec![]),
    ]);
    let agent = Agent::new(config(ws.path()), provider, Arc::new(Never));
    turn(&agent, "hello").await;
    let before = tree(ws.path());
    turn(&agent, "change the long one").await;
    assert_eq!(fs::read_to_string(ws.path().join(&long)).unwrap(), "after\n");
    assert!(!ws.path().join(&gone).exists());

    let index = agent.messages().iter().position(|m| m.content == "change the long one").unwrap() + 1;
    let report = agent.rewind(index, &opts(true, false));
    assert!(report.ok, "{report:?}");
    assert_eq!(report.restored, [long.clone(), gone.clone()]);
    assert_eq!(tree(ws.path()), before, "put back byte for byte, no temporary file left");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_users_edits_survive_and_a_file_changed_by_both_is_a_conflict() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let provider = scripted(vec![
        ("edits", vec![write("c1", "src/a.rs", "agent\n"), write("c2", "notes.txt", "agent notes\n")]),
        ("ok", vec![]),
        ("more", vec![]),
    ]);
    let agent = Agent::new(config(ws.path()), provider, Arc::new(Never));
    turn(&agent, "edit please").await;
    // Between turns, by hand: a file the agent never touched, and one it did.
    fs::write(ws.path().join("src/deep/b.rs"), "mine\n").unwrap();
    fs::write(ws.path().join("notes.txt"), "my notes\n").unwrap();
    turn(&agent, "thanks").await;
    let report = agent.rewind(1, &opts(true, true));
    assert!(report.ok, "{report:?}");
    assert_eq!(report.restored, ["src/a.rs"]);
    assert_eq!(report.conflicts.len(), 1);
    assert_eq!(report.conflicts[0].path, "notes.txt");
    assert_eq!(fs::read_to_string(ws.path().join("src/a.rs")).unwrap(), "fn a() {}\n");
    assert_eq!(fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "my notes\n");
    assert_eq!(fs::read_to_string(ws.path().join("src/deep/b.rs")).unwrap(), "mine\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_since_the_last_checkpoint_is_a_conflict_unless_forced() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let provider = scripted(vec![("edit", vec![write("c1", "src/a.rs", "agent\n")]), ("ok", vec![])]);
    let agent = Agent::new(config(ws.path()), provider, Arc::new(Never));
    turn(&agent, "edit please").await;
    fs::write(ws.path().join("src/a.rs"), "agent, then mine\n").unwrap();
    let report = agent.rewind(1, &opts(true, false));
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert_eq!(fs::read_to_string(ws.path().join("src/a.rs")).unwrap(), "agent, then mine\n");
    let forced = RewindOptions { force: vec!["src/a.rs".into()], ..opts(true, false) };
    let report = agent.rewind(1, &forced);
    assert_eq!(report.restored, ["src/a.rs"], "{report:?}");
    assert_eq!(fs::read_to_string(ws.path().join("src/a.rs")).unwrap(), "fn a() {}\n");
    // A file open with unsaved changes is never written, forced or not.
    let ws2 = tempfile::tempdir().unwrap();
    seed(ws2.path());
    let agent =
        Agent::new(config(ws2.path()), scripted(vec![("edit", vec![write("c1", "src/a.rs", "x\n")])]), Arc::new(Never));
    turn(&agent, "edit").await;
    let o = RewindOptions { modified: vec!["src/a.rs".into()], force: vec!["src/a.rs".into()], ..opts(true, true) };
    let report = agent.rewind(1, &o);
    assert_eq!(report.conflicts[0].why, "open with unsaved changes");
    assert_eq!(fs::read_to_string(ws2.path().join("src/a.rs")).unwrap(), "x\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn conversation_only_and_code_only_and_the_undo() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let provider = scripted(vec![("edit", vec![write("c1", "src/a.rs", "agent\n")]), ("ok", vec![])]);
    let agent = Agent::new(config(ws.path()), provider, Arc::new(Never));
    turn(&agent, "edit please").await;
    let n = agent.messages().len();

    let report = agent.rewind(1, &opts(false, true));
    assert!(report.ok && report.restored.is_empty(), "{report:?}");
    assert_eq!(agent.messages().len(), 0);
    assert_eq!(fs::read_to_string(ws.path().join("src/a.rs")).unwrap(), "agent\n", "conversation only");
    let undo = agent.undo_rewind(&RewindOptions::default());
    assert!(undo.ok, "{undo:?}");
    assert_eq!(agent.messages().len(), n);

    let report = agent.rewind(1, &opts(true, false));
    assert_eq!(report.restored, ["src/a.rs"]);
    assert_eq!(agent.messages().len(), n, "code only");
    assert_eq!(fs::read_to_string(ws.path().join("src/a.rs")).unwrap(), "fn a() {}\n");
    let undo = agent.undo_rewind(&RewindOptions::default());
    assert_eq!(undo.restored, ["src/a.rs"], "{undo:?}");
    assert_eq!(fs::read_to_string(ws.path().join("src/a.rs")).unwrap(), "agent\n");
    assert!(agent.undo_rewind(&RewindOptions::default()).error.is_some(), "one undo per rewind");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rewind_the_editor_died_in_is_finished_at_the_next_start() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let provider = scripted(vec![(
        "edits",
        vec![
            write("c1", "src/a.rs", "agent a\n"),
            write("c2", "notes.txt", "agent notes\n"),
            write("c3", "made.txt", "new\n"),
        ],
    )]);
    let agent = Agent::new(config(ws.path()), provider, Arc::new(Never));
    turn(&agent, "edit please").await;
    let id = agent.current().unwrap().id;
    let ctx = Context::open(ws.path(), &id).unwrap();
    drop(agent);
    // What a rewind had logged when it was killed after writing its first file: its plan, one file back.
    let loaded = session::load(&ctx).unwrap();
    let store = pseudoclaude::rewind::store::Store::new(ws.path());
    let state = pseudoclaude::rewind::tracker::rebuild(&store, &loaded.files).unwrap();
    let turn_of_1 = loaded.messages[0].turn;
    let (plan, _) = pseudoclaude::rewind::restore::plan(&store, &loaded.files, turn_of_1, &state, &[], &[]);
    assert_eq!(plan.len(), 3);
    let begin = pseudoclaude::session::files::RewindRecord {
        id: "dead".into(),
        state: "begin".into(),
        index: 1,
        turn: turn_of_1,
        code: true,
        conversation: true,
        plan: plan.clone(),
        ..Default::default()
    };
    let w = session::Writer::open(&ctx, Default::default()).unwrap();
    w.append_entry(Entry::rewind(begin, 1)).unwrap();
    drop(w);
    pseudoclaude::rewind::restore::apply(ws.path(), &store, &plan[..1], u64::MAX);

    let (agent, resumed) = Agent::resume(config(ws.path()), scripted(vec![]), Arc::new(Never), &id).unwrap();
    let report = resumed.recovered_rewind.expect("the rewind is finished");
    assert!(report.ok, "{report:?}");
    assert_eq!(fs::read_to_string(ws.path().join("src/a.rs")).unwrap(), "fn a() {}\n");
    assert_eq!(fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "keep me\n");
    assert!(!ws.path().join("made.txt").exists());
    assert_eq!(agent.messages().iter().filter(|m| m.content == "edit please").count(), 0);
    let loaded = session::load(&ctx).unwrap();
    assert!(loaded.rewinds.iter().any(|r| r.id == "dead" && r.state == "done" && r.recovered));
    drop(agent);
    // Finished once: the next start has nothing to do.
    let (_a, resumed) = Agent::resume(config(ws.path()), scripted(vec![]), Arc::new(Never), &id).unwrap();
    assert!(resumed.recovered_rewind.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_names_the_files_changed_since_the_last_checkpoint() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let agent = Agent::new(config(ws.path()), scripted(vec![("hi", vec![])]), Arc::new(Never));
    turn(&agent, "hello").await;
    let id = agent.current().unwrap().id;
    drop(agent);
    fs::write(ws.path().join("src/a.rs"), "changed by someone\n").unwrap();
    fs::remove_file(ws.path().join("notes.txt")).unwrap();
    let (agent, resumed) = Agent::resume(config(ws.path()), scripted(vec![]), Arc::new(Never), &id).unwrap();
    let named: Vec<_> = resumed.changed_since.iter().map(|c| (c.path.as_str(), c.status_word())).collect();
    assert_eq!(named, [("notes.txt", "deleted"), ("src/a.rs", "modified")]);
    let reminder = agent.messages().last().unwrap().content.clone();
    assert!(reminder.contains("Since this session's last message"), "{reminder}");
    assert!(reminder.contains("notes.txt deleted, src/a.rs modified"), "{reminder}");
}

#[tokio::test(flavor = "multi_thread")]
async fn content_is_stored_once_per_workspace() {
    let ws = tempfile::tempdir().unwrap();
    for i in 0..50 {
        fs::write(ws.path().join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    let agent = Agent::new(config(ws.path()), scripted(vec![("a", vec![]), ("b", vec![])]), Arc::new(Never));
    turn(&agent, "one").await;
    let objects = || pseudoclaude::rewind::store::Store::new(ws.path()).all().len();
    let after_first = objects();
    // 50 files and the base manifest.
    assert_eq!(after_first, 51);
    turn(&agent, "two").await;
    assert_eq!(objects(), after_first, "an unchanged tree stores nothing more");
    let agent2 = Agent::new(config(ws.path()), scripted(vec![("c", vec![])]), Arc::new(Never));
    turn(&agent2, "another session").await;
    assert_eq!(objects(), after_first, "a second session of the same tree shares its objects");
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_collection_keeps_what_a_session_names_and_removes_the_rest() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("shared.txt"), "in both sessions\n").unwrap();
    let keep = Agent::new(config(ws.path()), scripted(vec![("a", vec![])]), Arc::new(Never));
    turn(&keep, "kept session").await;
    let gone = Agent::new(
        config(ws.path()),
        scripted(vec![("b", vec![write("c1", "only.txt", "only in the deleted one\n")])]),
        Arc::new(Never),
    );
    turn(&gone, "deleted session").await;
    let gone_dir = gone.current().unwrap().dir;
    drop(gone);
    fs::remove_dir_all(&gone_dir).unwrap();
    let store = pseudoclaude::rewind::store::Store::new(ws.path());
    let only = pseudoclaude::rewind::store::hash_bytes(b"only in the deleted one\n");
    let shared = pseudoclaude::rewind::store::hash_bytes(b"in both sessions\n");
    assert!(store.has(&only) && store.has(&shared));
    // Young objects are never collected (a checkpoint may not have logged them yet).
    assert_eq!(pseudoclaude::rewind::collect_garbage(ws.path()).unwrap(), 0);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    for h in store.all() {
        let p = store.dir().join(&h[..2]).join(&h[2..]);
        fs::File::options().write(true).open(p).unwrap().set_modified(old).unwrap();
    }
    let removed = pseudoclaude::rewind::collect_garbage(ws.path()).unwrap();
    // The two sessions started on the same tree: one base object serves both, and stays.
    assert_eq!(removed, 1, "the file only the deleted session named");
    assert!(!store.has(&only) && store.has(&shared));
    // The kept session still rewinds: its base is whole.
    fs::write(ws.path().join("shared.txt"), "changed\n").unwrap();
    let id = keep.current().unwrap().id;
    drop(keep);
    let (_a, resumed) = Agent::resume(config(ws.path()), scripted(vec![]), Arc::new(Never), &id).unwrap();
    let named: Vec<_> = resumed.changed_since.iter().map(|c| (c.path.as_str(), c.status())).collect();
    assert_eq!(named, [("only.txt", "added"), ("shared.txt", "modified")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_lists_a_sessions_changes_and_rewinds_it() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let provider =
        scripted(vec![("edits", vec![write("c1", "src/a.rs", "agent\nmore\n"), command("c2", "rm notes.txt")])]);
    let agent = Agent::new(config(ws.path()), provider, Arc::new(Never));
    turn(&agent, "edit please").await;
    let id = agent.current().unwrap().id;
    let cli = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_pseudoclaude"))
            .args(args)
            .current_dir(ws.path())
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, _) = cli(&["sessions", "changes", &id]);
    assert_eq!(code, Some(0));
    assert_eq!(out, "1 deleted notes.txt +0 -1\n1 modified src/a.rs +2 -1\n");
    // Open in an editor (this agent holds the lock): refused, nothing touched.
    let (code, _, err) = cli(&["sessions", "rewind", &id, "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("open in another editor"), "{err}");
    assert!(!ws.path().join("notes.txt").exists());
    drop(agent);
    let (code, out, err) = cli(&["sessions", "rewind", &id, "1", "--code-only"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "restored notes.txt\nrestored src/a.rs\n");
    assert_eq!(fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "keep me\n");
    let loaded = session::load(&Context::open(ws.path(), &id).unwrap()).unwrap();
    assert!(loaded.messages.len() > 1, "code only keeps the history");
    let (code, _, err) = cli(&["sessions", "rewind", &id, "2"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not a message you sent"), "{err}");
    let (code, _, _) = cli(&["sessions", "rewind", &id, "1", "--conversation-only"]);
    assert_eq!(code, Some(0));
    assert_eq!(session::load(&Context::open(ws.path(), &id).unwrap()).unwrap().messages.len(), 0);
}

#[test]
fn a_checkpoint_told_by_the_watch_equals_a_walk_of_the_whole_tree() {
    use pseudoclaude::rewind::{DEFAULT_MAX_FILE_BYTES, Tracker};
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let w = ws.path();
    seed(w);
    fs::write(w.join("src/.gitignore"), "*.log\n").unwrap();
    let mut watched = Tracker::new(w, DEFAULT_MAX_FILE_BYTES);
    let r = watched.take("user", "", None).unwrap();
    watched.commit(r);
    assert!(watched.is_watching(), "inotify is there on Linux: the watch must hold");
    let away = outside.path().join("deep");
    type Step = Box<dyn Fn(&Path)>;
    let steps: Vec<(&str, Step)> = vec![
        ("a file changed", Box::new(|w| fs::write(w.join("src/a.rs"), "fn a() { 2 }\n").unwrap())),
        ("a file created", Box::new(|w| fs::write(w.join("src/new.rs"), "new\n").unwrap())),
        ("a file a nested rule ignores", Box::new(|w| fs::write(w.join("src/deep/x.log"), "log\n").unwrap())),
        (
            "folders created at once, files in them",
            Box::new(|w| {
                fs::create_dir_all(w.join("new/a/b")).unwrap();
                fs::write(w.join("new/a/b/c.txt"), "c\n").unwrap();
                fs::write(w.join("new/a/d.txt"), "d\n").unwrap();
            }),
        ),
        (
            "an ignored folder created inside a new one",
            Box::new(|w| {
                fs::create_dir_all(w.join("new/a/target")).unwrap();
                fs::write(w.join("new/a/target/out.o"), "o\n").unwrap();
            }),
        ),
        ("a folder renamed", Box::new(|w| fs::rename(w.join("new"), w.join("renamed")).unwrap())),
        ("a folder removed", Box::new(|w| fs::remove_dir_all(w.join("renamed/a/b")).unwrap())),
        (
            "made executable",
            Box::new(|w| fs::set_permissions(w.join("src/a.rs"), fs::Permissions::from_mode(0o755)).unwrap()),
        ),
        ("a file removed", Box::new(|w| fs::remove_file(w.join("notes.txt")).unwrap())),
        ("a folder moved out of the workspace", Box::new(move |w| fs::rename(w.join("src/deep"), &away).unwrap())),
        (
            "a rule removed: what it ignored comes in",
            Box::new(|w| fs::write(w.join(".gitignore"), "# nothing\n").unwrap()),
        ),
        (
            "a file changed in a folder that moved out and back",
            Box::new(|w| {
                fs::create_dir_all(w.join("back")).unwrap();
                fs::write(w.join("back/late.txt"), "late\n").unwrap();
            }),
        ),
    ];
    for (what, step) in steps {
        step(w);
        let r = watched.take("user", "", None).unwrap();
        watched.commit(r);
        let mut walked = Tracker::new(w, DEFAULT_MAX_FILE_BYTES).unwatched();
        let r = walked.take("user", "", None).unwrap();
        walked.commit(r);
        assert_eq!(watched.manifest(), walked.manifest(), "after: {what}");
        assert!(watched.is_watching(), "after: {what}");
    }
    // The folder that moved out changes outside the workspace: nothing of it is news.
    fs::write(outside.path().join("deep/b.rs"), "changed outside\n").unwrap();
    let r = watched.take("user", "", None).unwrap();
    assert!(r.changes.is_empty(), "{:?}", r.changes);
}

/// Every entry of a session's log, parsed.
fn entries(path: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_calls_new_content_is_durable_in_its_log_line_and_a_start_puts_back_what_a_crash_lost() {
    let ws = tempfile::tempdir().unwrap();
    seed(ws.path());
    let agent = Agent::new(
        config(ws.path()),
        scripted(vec![("writing", vec![write("c1", "src/new.txt", "brand new\n")]), ("done", vec![])]),
        Arc::new(Never),
    );
    turn(&agent, "write it").await;
    let ctx = agent.current().unwrap();
    let log = entries(&ctx.jsonl_path);
    let kinds: Vec<String> = log
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "message" if e["tool_result"].is_object() => "result".to_string(),
            "message" => format!("{}:{}", e["role"].as_str().unwrap(), e["turn"].as_u64().unwrap_or(0)),
            "files" => format!("files:{}", e["files"]["by"].as_str().unwrap()),
            other => other.to_string(),
        })
        .filter(|k| k != "meta" && k != "usage")
        .collect();
    // The checkpoint before the message follows it; the one after the write comes before the write's result.
    let at = |k: &str| kinds.iter().position(|x| x.starts_with(k)).unwrap_or_else(|| panic!("{k} in {kinds:?}"));
    assert_eq!(at("files:user"), at("user:") + 1, "{kinds:?}");
    assert_eq!(at("files:agent") + 1, at("result"), "{kinds:?}");
    let hash = pseudoclaude::rewind::store::hash_bytes(b"brand new\n");
    let write_entry = log.iter().find(|e| e["files"]["by"] == "agent").unwrap();
    assert_eq!(write_entry["files"]["copies"][&hash], "YnJhbmQgbmV3Cg==", "{write_entry}");
    drop(agent);
    // The machine died before the object reached the disk: its file is there, empty.
    let object = ws.path().join(".PseudoClaude/objects").join(&hash[..2]).join(&hash[2..]);
    fs::write(&object, b"").unwrap();
    let (agent, _) = Agent::resume(config(ws.path()), scripted(vec![]), Arc::new(Never), &ctx.id).unwrap();
    assert_eq!(fs::read(&object).unwrap(), b"brand new\n");
    // And what it holds can be rewound to: back before the message, then the undo writes it again.
    let report = agent.rewind(1, &opts(true, false));
    assert!(report.ok, "{report:?}");
    assert!(!ws.path().join("src/new.txt").exists());
    let undo = agent.undo_rewind(&opts(true, false));
    assert!(undo.ok, "{undo:?}");
    assert_eq!(fs::read_to_string(ws.path().join("src/new.txt")).unwrap(), "brand new\n");
}
