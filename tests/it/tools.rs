//! The agent's tools against real temp workspaces, with a scripted approver.

use std::collections::VecDeque;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pseudoclaude::message::ToolCall;
use pseudoclaude::provider::BoxFuture;
use pseudoclaude::tools::{
    Approval, ApprovalRequest, Approver, AutoApprove, BufferState, HunkLines, ToolOutput, Tools, Written,
};
use serde_json::{Value, json};

/// Records every request; answers from a queue (an unexpected question is answered No and fails
/// the test through the recorded requests).
#[derive(Default)]
struct Script {
    answers: Mutex<VecDeque<Approval>>,
    asked: Mutex<Vec<ApprovalRequest>>,
    /// The editor's buffers by workspace-relative path (absent: not loaded).
    buffers: Mutex<std::collections::HashMap<String, BufferState>>,
    /// Set on this path when the user is asked (they type into it while the prompt is open).
    typed_while_asked: Mutex<Option<String>>,
    /// The editor never answers a buffer check.
    silent: std::sync::atomic::AtomicBool,
    checks: Mutex<Vec<(String, bool)>>,
    written: Mutex<Vec<(String, Written)>>,
}

impl Script {
    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }

    /// What the prompt says (tool, summary, detail), without the review's whole texts.
    fn prompts(&self) -> Vec<(String, String, String)> {
        self.asked().into_iter().map(|r| (r.tool, r.summary, r.detail)).collect()
    }
}

struct Scripted(Arc<Script>);

impl Approver for Scripted {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        self.0.asked.lock().unwrap().push(req);
        let a = self.0.answers.lock().unwrap().pop_front().unwrap_or(Approval::No);
        if let Some(rel) = self.0.typed_while_asked.lock().unwrap().take() {
            self.0.buffers.lock().unwrap().insert(rel, BufferState::Modified);
        }
        Box::pin(async move { a })
    }

    fn buffer_state(&self, _path: &Path, rel: &str, hold: bool) -> BoxFuture<'static, Option<BufferState>> {
        self.0.checks.lock().unwrap().push((rel.to_string(), hold));
        if self.0.silent.load(std::sync::atomic::Ordering::SeqCst) {
            return Box::pin(std::future::pending());
        }
        let state = self.0.buffers.lock().unwrap().get(rel).copied().unwrap_or(BufferState::NotLoaded);
        Box::pin(async move { Some(state) })
    }

    fn written(&self, _path: &Path, rel: &str, outcome: Written) {
        self.0.written.lock().unwrap().push((rel.to_string(), outcome));
    }
}

struct Ws {
    dir: tempfile::TempDir,
    script: Arc<Script>,
    tools: Tools,
}

impl Ws {
    fn new(answers: &[Approval]) -> Ws {
        Ws::with_auto(answers, AutoApprove::default())
    }

    fn with_auto(answers: &[Approval], auto: AutoApprove) -> Ws {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = Arc::new(Script::default());
        script.answers.lock().unwrap().extend(answers.iter().cloned());
        let tools = Tools::new(dir.path(), Arc::new(Scripted(script.clone())), auto);
        Ws { dir, script, tools }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, content: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    async fn run(&self, name: &str, args: Value) -> ToolOutput {
        self.tools.run(&ToolCall::new("call-1", name, args)).await
    }

    async fn ok(&self, name: &str, args: Value) -> String {
        let out = self.run(name, args).await;
        assert!(!out.is_error, "{name} failed: {}", out.content);
        out.content
    }

    async fn err(&self, name: &str, args: Value) -> String {
        let out = self.run(name, args).await;
        assert!(out.is_error, "{name} should have failed: {}", out.content);
        out.content
    }
}

fn numbered(from: usize, lines: &[&str]) -> String {
    lines.iter().enumerate().map(|(i, l)| format!("{:>6}\t{l}\n", from + i)).collect()
}

/// Whether a process runs (a zombie counts as dead: it was killed, only not yet reaped).
fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z') | Some('X'))
        }
    }
}

fn wait_dead(pid: u32, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

fn try_read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok())
}

/// Waits for the pid a command wrote; the deadline is a safety net, not a speed check.
fn read_pid(path: &Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = try_read_pid(path) {
            return pid;
        }
        assert!(start.elapsed() < SAFETY_NET, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a wait for an event may take before the test gives up: never reached unless the event never comes.
const SAFETY_NET: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- specs and arguments

#[tokio::test]
async fn specs_name_six_tools_with_object_schemas() {
    let ws = Ws::new(&[]);
    let specs = ws.tools.specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["read_file", "list_files", "grep", "write_file", "edit_file", "run_command"]);
    let required = |name: &str| -> Value {
        specs.iter().find(|s| s.name == name).unwrap().input_schema.get("required").cloned().unwrap_or(json!([]))
    };
    assert_eq!(required("read_file"), json!(["path"]));
    assert_eq!(required("list_files"), json!([]));
    assert_eq!(required("grep"), json!(["pattern"]));
    assert_eq!(required("write_file"), json!(["path", "content"]));
    assert_eq!(required("edit_file"), json!(["path", "old", "new"]));
    assert_eq!(required("run_command"), json!(["command"]));
}

#[tokio::test]
async fn bad_arguments_are_errors_not_panics() {
    let ws = Ws::new(&[]);
    assert_eq!(ws.err("read_file", json!({})).await, "missing argument `path` (a string)");
    assert_eq!(ws.err("read_file", json!({"path": 7})).await, "argument `path` must be a string, got a number");
    assert_eq!(
        ws.err("read_file", json!({"path": "a", "offset": "x"})).await,
        "argument `offset` must be a non-negative integer, got \"x\""
    );
    assert_eq!(ws.err("read_file", json!({"path": "a", "limit": 0})).await, "`limit` must be at least 1");
    assert_eq!(
        ws.err("read_file", json!("{not json")).await,
        "the arguments of read_file must be a JSON object, got a string: \"{not json\""
    );
    assert_eq!(ws.err("edit_file", json!({"path": "a", "old": "x"})).await, "missing argument `new` (a string)");
    assert_eq!(ws.err("run_command", json!({"command": "  "})).await, "`command` is empty");
    assert_eq!(
        ws.err("rm_rf", json!({})).await,
        "unknown tool \"rm_rf\"; the tools are: read_file, list_files, grep, write_file, edit_file, run_command"
    );
    assert_eq!(ws.err("read_file", json!({"path": "nope.txt"})).await, "nope.txt does not exist");
    assert!(ws.script.asked().is_empty());
}

// ---------------------------------------------------------------- read_file

#[tokio::test]
async fn read_file_numbers_lines_like_cat_n() {
    let ws = Ws::new(&[]);
    ws.write("a.txt", "alpha\nbeta\r\n\ngamma");
    assert_eq!(ws.ok("read_file", json!({"path": "a.txt"})).await, numbered(1, &["alpha", "beta", "", "gamma"]));
    // Absolute paths inside the workspace are fine too.
    let abs = ws.path("a.txt").to_string_lossy().into_owned();
    assert_eq!(ws.ok("read_file", json!({"path": abs})).await, numbered(1, &["alpha", "beta", "", "gamma"]));
    ws.write("empty.txt", "");
    assert_eq!(ws.ok("read_file", json!({"path": "empty.txt"})).await, "[empty.txt is empty]\n");
}

#[tokio::test]
async fn read_file_offset_and_limit() {
    let ws = Ws::new(&[]);
    let lines: Vec<String> = (1..=10).map(|i| format!("line {i}")).collect();
    ws.write("ten.txt", &(lines.join("\n") + "\n"));
    assert_eq!(
        ws.ok("read_file", json!({"path": "ten.txt", "offset": 3, "limit": 2})).await,
        numbered(3, &["line 3", "line 4"]) + "[lines 3-4 of 10 shown; to read on, call read_file with offset=5]\n"
    );
    // The last lines: no note.
    assert_eq!(
        ws.ok("read_file", json!({"path": "ten.txt", "offset": 9, "limit": 5})).await,
        numbered(9, &["line 9", "line 10"])
    );
    // Exactly to the end: no note either.
    assert_eq!(
        ws.ok("read_file", json!({"path": "ten.txt", "offset": 10, "limit": 1})).await,
        numbered(10, &["line 10"])
    );
    assert_eq!(
        ws.err("read_file", json!({"path": "ten.txt", "offset": 11})).await,
        "offset 11 is past the end of ten.txt, which has 10 lines"
    );

    // The default limit is 2000 lines.
    let many: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    ws.write("many.txt", &many);
    let out = ws.ok("read_file", json!({"path": "many.txt"})).await;
    assert!(out.starts_with("     1\t1\n     2\t2\n"));
    assert!(
        out.ends_with("  2000\t2000\n[lines 1-2000 of 2500 shown; to read on, call read_file with offset=2001]\n"),
        "{}",
        &out[out.len() - 200..]
    );
}

#[tokio::test]
async fn read_file_refuses_binary_files_and_directories() {
    let ws = Ws::new(&[]);
    fs::write(ws.path("blob.bin"), b"PK\x03\x04\x00\x00data").unwrap();
    assert_eq!(
        ws.err("read_file", json!({"path": "blob.bin"})).await,
        "blob.bin is a binary file (10 bytes); read_file only shows text files"
    );
    fs::create_dir(ws.path("dir")).unwrap();
    assert_eq!(
        ws.err("read_file", json!({"path": "dir"})).await,
        "dir is a directory; use list_files to see what it holds"
    );
}

#[tokio::test]
async fn read_file_streams_big_files_and_cuts_long_lines() {
    let ws = Ws::new(&[]);
    // 80 MB of short lines: above the size up to which lines are counted, so the note gives bytes.
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(fs::File::create(ws.path("big.log")).unwrap());
        let line = b"0123456789abcdef\n";
        for _ in 0..(80 * 1024 * 1024 / line.len()) {
            f.write_all(line).unwrap();
        }
    }
    let size = fs::metadata(ws.path("big.log")).unwrap().len();
    let out = ws.ok("read_file", json!({"path": "big.log", "offset": 5, "limit": 2})).await;
    assert_eq!(
        out,
        numbered(5, &["0123456789abcdef", "0123456789abcdef"])
            + &format!(
                "[lines 5-6 shown, the file goes on ({size} bytes in all); to read on, call read_file with offset=7]\n"
            )
    );

    // One 20 MB line is shown cut, with its length.
    ws.write("wide.txt", &format!("{}\nnext\n", "x".repeat(20 * 1024 * 1024)));
    let out = ws.ok("read_file", json!({"path": "wide.txt"})).await;
    assert_eq!(
        out,
        format!("     1\t{}… [line cut: {} bytes in all]\n     2\tnext\n", "x".repeat(2000), 20 * 1024 * 1024)
    );
}

#[tokio::test]
async fn read_file_stops_at_the_output_cap() {
    let mut ws = Ws::new(&[]);
    ws.tools.set_output_cap(4096);
    let lines: String = (1..=1000).map(|i| format!("{i:04} {}\n", "y".repeat(95))).collect();
    ws.write("f.txt", &lines);
    let out = ws.ok("read_file", json!({"path": "f.txt"})).await;
    assert!(out.len() < 4096 + 200, "{}", out.len());
    assert!(
        out.ends_with("[output limit reached: lines 1-33 of 1000 shown; to read on, call read_file with offset=34]\n"),
        "{out}"
    );
}

// ---------------------------------------------------------------- list_files

#[tokio::test]
async fn list_files_respects_gitignore_ignore_and_hidden_files() {
    let ws = Ws::new(&[]);
    ws.write(".gitignore", "target/\n*.tmp\n");
    ws.write(".ignore", "*.log\n");
    ws.write("README.md", "hi\n");
    ws.write("src/main.rs", "fn main() {}\n");
    ws.write("src/lib/deep.rs", "\n");
    ws.write("src-extra.txt", "\n");
    ws.write("target/debug/out", "\n");
    ws.write("scratch.tmp", "\n");
    ws.write("build.log", "\n");
    ws.write(".env", "SECRET=1\n");
    ws.write(".hidden/x.txt", "\n");
    ws.write(".PseudoClaude/sessions/s1/log.jsonl", "{}\n");
    fs::create_dir(ws.path("empty-dir")).unwrap();
    // Sorted by name within each directory, depth first; directories not on their own lines.
    assert_eq!(ws.ok("list_files", json!({})).await, "README.md\nsrc/lib/deep.rs\nsrc/main.rs\nsrc-extra.txt\n");
    assert_eq!(ws.ok("list_files", json!({"path": "src"})).await, "src/lib/deep.rs\nsrc/main.rs\n");
    assert_eq!(ws.ok("list_files", json!({"path": "src/main.rs"})).await, "src/main.rs\n");
    assert_eq!(
        ws.ok("list_files", json!({"path": "empty-dir"})).await,
        "[no files under empty-dir (hidden and ignored files are not listed)]\n"
    );
}

#[tokio::test]
async fn list_files_in_a_git_repo_honours_info_exclude() {
    let ws = Ws::new(&[]);
    ws.write(".git/info/exclude", "secret.txt\n");
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    ws.write("secret.txt", "\n");
    ws.write("kept.txt", "\n");
    assert_eq!(ws.ok("list_files", json!({})).await, "kept.txt\n");
}

#[tokio::test]
async fn list_files_caps_at_1000_with_a_note() {
    let ws = Ws::new(&[]);
    fs::create_dir(ws.path("many")).unwrap();
    for i in 0..1005 {
        fs::write(ws.path(&format!("many/f{i:04}")), "").unwrap();
    }
    let out = ws.ok("list_files", json!({"path": "many"})).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1001);
    assert_eq!(lines[0], "many/f0000");
    assert_eq!(lines[999], "many/f0999");
    assert_eq!(lines[1000], "[5 more files not shown (1005 in all); list a subdirectory, or use grep, to see them]");
}

// ---------------------------------------------------------------- grep

#[tokio::test]
async fn grep_finds_regex_matches_in_unignored_text_files() {
    let ws = Ws::new(&[]);
    ws.write(".gitignore", "vendor/\n");
    ws.write("src/a.rs", "fn main() {\n    helper(1);\n}\nfn helper(x: u8) {}\n");
    ws.write("src/b.txt", "nothing to see\n");
    ws.write("vendor/c.rs", "fn vendored() {}\n");
    fs::write(ws.path("src/blob.bin"), b"fn binary() {}\x00").unwrap();
    assert_eq!(
        ws.ok("grep", json!({"pattern": r"fn \w+\("})).await,
        "src/a.rs:1: fn main() {\nsrc/a.rs:4: fn helper(x: u8) {}\n"
    );
    assert_eq!(ws.ok("grep", json!({"pattern": "(?i)NOTHING", "path": "src"})).await, "src/b.txt:1: nothing to see\n");
    assert_eq!(
        ws.ok("grep", json!({"pattern": "helper", "path": "src/a.rs"})).await,
        "src/a.rs:2:     helper(1);\nsrc/a.rs:4: fn helper(x: u8) {}\n"
    );
    assert_eq!(ws.ok("grep", json!({"pattern": "zebra"})).await, "no matches\n");
}

#[tokio::test]
async fn grep_bad_regex_is_an_error_with_the_regex_message() {
    let ws = Ws::new(&[]);
    let e = ws.err("grep", json!({"pattern": "fn (main"})).await;
    assert!(e.starts_with("invalid regex \"fn (main\": "), "{e}");
    assert!(e.contains("unclosed group"), "{e}");
}

#[tokio::test]
async fn grep_caps_matches_and_cuts_long_lines() {
    let ws = Ws::new(&[]);
    let lines: String = (1..=250).map(|i| format!("hit {i}\n")).collect();
    ws.write("hits.txt", &lines);
    let out = ws.ok("grep", json!({"pattern": "hit"})).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 201);
    assert_eq!(lines[199], "hits.txt:200: hit 200");
    assert_eq!(lines[200], "[stopped after 200 matching lines; there may be more: narrow the pattern or the path]");

    ws.write("wide.txt", &format!("{}NEEDLE{}\n", "a".repeat(5000), "b".repeat(5000)));
    let out = ws.ok("grep", json!({"pattern": "NEEDLE"})).await;
    assert!(out.starts_with("wide.txt:1: …a"), "{out}");
    assert!(out.contains("NEEDLE"));
    assert!(out.len() < 400, "{}", out.len());
}

// ---------------------------------------------------------------- write_file

#[tokio::test]
async fn write_file_creates_parents_atomically_after_approval() {
    let ws = Ws::new(&[Approval::Yes, Approval::Yes]);
    assert_eq!(
        ws.ok("write_file", json!({"path": "deep/dir/new.txt", "content": "hi\nthere\n"})).await,
        "created deep/dir/new.txt (9 bytes, 2 lines)"
    );
    assert_eq!(ws.read("deep/dir/new.txt"), "hi\nthere\n");
    assert_eq!(
        ws.script.prompts(),
        [(
            "write_file".into(),
            "deep/dir/new.txt".into(),
            "--- /dev/null\n+++ b/deep/dir/new.txt\n@@ -0,0 +1,2 @@\n+hi\n+there\n".into(),
        )]
    );
    let change = ws.script.asked()[0].change.clone().expect("a new text file can be reviewed");
    assert_eq!((change.old.as_str(), change.new.as_str()), ("", "hi\nthere\n"));
    assert_eq!(change.hunks, [HunkLines { old_start: 1, old_count: 0, new_start: 1, new_count: 2 }]);

    // Overwriting shows a diff and keeps the file's permissions; no temp file is left behind.
    ws.write("run.sh", "#!/bin/sh\necho old\n");
    fs::set_permissions(ws.path("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        ws.ok("write_file", json!({"path": "run.sh", "content": "#!/bin/sh\necho new\n"})).await,
        "overwrote run.sh (19 bytes, 2 lines)"
    );
    assert_eq!(
        ws.script.asked()[1].detail,
        "--- a/run.sh\n+++ b/run.sh\n@@ -1,2 +1,2 @@\n #!/bin/sh\n-echo old\n+echo new\n"
    );
    assert_eq!(fs::metadata(ws.path("run.sh")).unwrap().permissions().mode() & 0o777, 0o755);
    let names: Vec<String> =
        fs::read_dir(ws.dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.contains("pseudoclaude-tmp")), "{names:?}");
}

#[tokio::test]
async fn write_file_declined_leaves_no_file() {
    let ws = Ws::new(&[Approval::No]);
    let e = ws.err("write_file", json!({"path": "new/x.txt", "content": "data"})).await;
    assert_eq!(
        e,
        "the user declined this write_file call (new/x.txt); the file was not changed. Do not retry it as is: ask the user how to proceed."
    );
    assert!(!ws.path("new/x.txt").exists());
    assert!(!ws.path("new").exists(), "no parent directory is made before approval");
}

#[tokio::test]
async fn always_stops_asking_for_that_tool_only() {
    let ws = Ws::new(&[Approval::Always, Approval::Yes]);
    ws.ok("write_file", json!({"path": "a.txt", "content": "1\n"})).await;
    ws.ok("write_file", json!({"path": "b.txt", "content": "2\n"})).await;
    ws.ok("write_file", json!({"path": "a.txt", "content": "3\n"})).await;
    assert_eq!(ws.script.asked().len(), 1);
    // edit_file still asks.
    ws.ok("edit_file", json!({"path": "a.txt", "old": "3", "new": "4"})).await;
    let asked = ws.script.asked();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[1].tool, "edit_file");
    assert_eq!(ws.read("a.txt"), "4\n");
}

#[tokio::test]
async fn auto_approve_never_asks() {
    let ws = Ws::with_auto(&[], AutoApprove { write_file: true, edit_file: true, run_command: true });
    ws.ok("write_file", json!({"path": "a.txt", "content": "one\n"})).await;
    ws.ok("edit_file", json!({"path": "a.txt", "old": "one", "new": "two"})).await;
    assert_eq!(ws.ok("run_command", json!({"command": "cat a.txt"})).await, "exit code: 0\n[stdout]\ntwo\n");
    assert!(ws.script.asked().is_empty());

    // Only the flagged tools skip the question.
    let ws = Ws::with_auto(&[Approval::No], AutoApprove { write_file: true, ..Default::default() });
    ws.ok("write_file", json!({"path": "a.txt", "content": "one\n"})).await;
    ws.err("run_command", json!({"command": "touch ran"})).await;
    assert_eq!(ws.script.asked().len(), 1);
    assert!(!ws.path("ran").exists());
}

// ---------------------------------------------------------------- edit_file

#[tokio::test]
async fn edit_file_replaces_a_unique_match_and_shows_the_diff() {
    let ws = Ws::new(&[Approval::Yes]);
    ws.write("f.txt", "1\n2\n3\n4\nfive = 5\n6\n7\n8\n9\n");
    let diff =
        "--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,8 @@\n 2\n 3\n 4\n-five = 5\n+five = 5.0\n+five and a half\n 6\n 7\n 8\n";
    assert_eq!(
        ws.ok("edit_file", json!({"path": "f.txt", "old": "five = 5\n", "new": "five = 5.0\nfive and a half\n"})).await,
        format!("edited f.txt\n{diff}")
    );
    assert_eq!(ws.read("f.txt"), "1\n2\n3\n4\nfive = 5.0\nfive and a half\n6\n7\n8\n9\n");
    assert_eq!(ws.script.prompts(), [("edit_file".into(), "f.txt".into(), diff.into())]);
}

#[tokio::test]
async fn edit_file_not_found_and_ambiguous_are_errors_without_asking() {
    let ws = Ws::new(&[]);
    ws.write("f.rs", "let x = 1;\nlet y = 1;\n");
    let e = ws.err("edit_file", json!({"path": "f.rs", "old": "let z", "new": "let w"})).await;
    assert!(e.starts_with("not found: `old` does not occur in f.rs."), "{e}");
    let e = ws.err("edit_file", json!({"path": "f.rs", "old": " = 1;", "new": " = 2;"})).await;
    assert!(e.starts_with("`old` occurs 2 times in f.rs; it must occur exactly once."), "{e}");
    let e = ws.err("edit_file", json!({"path": "f.rs", "old": "", "new": "x"})).await;
    assert!(e.starts_with("`old` is empty"), "{e}");
    let e = ws.err("edit_file", json!({"path": "nope.rs", "old": "a", "new": "b"})).await;
    assert_eq!(e, "nope.rs does not exist; use write_file to create it");
    assert!(ws.script.asked().is_empty());
    assert_eq!(ws.read("f.rs"), "let x = 1;\nlet y = 1;\n");
}

#[tokio::test]
async fn edit_file_declined_leaves_the_file_alone() {
    let ws = Ws::new(&[Approval::No]);
    ws.write("f.txt", "keep me\n");
    let e = ws.err("edit_file", json!({"path": "f.txt", "old": "keep", "new": "lose"})).await;
    assert!(e.starts_with("the user declined this edit_file call (f.txt)"), "{e}");
    assert_eq!(ws.read("f.txt"), "keep me\n");
}

#[tokio::test]
async fn edit_file_matches_crlf_files_with_lf_text() {
    let ws = Ws::new(&[Approval::Yes]);
    ws.write("win.txt", "a\r\nb\r\nc\r\n");
    ws.ok("edit_file", json!({"path": "win.txt", "old": "a\nb\n", "new": "A\nB\n"})).await;
    assert_eq!(ws.read("win.txt"), "A\r\nB\r\nc\r\n");
}

// ---------------------------------------------------------------- confinement

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let ws = Ws::with_auto(&[], AutoApprove { write_file: true, edit_file: true, run_command: true });
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.txt"), "top secret\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path("link")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path("alias.txt")).unwrap();
    ws.write("ok.txt", "fine\n");

    let e = ws.err("read_file", json!({"path": "../x"})).await;
    assert!(e.starts_with("path \"../x\" is outside the workspace ("), "{e}");
    let e = ws.err("read_file", json!({"path": "/etc/passwd"})).await;
    assert!(e.starts_with("path \"/etc/passwd\" is outside the workspace"), "{e}");
    let e = ws.err("read_file", json!({"path": "src/../../x"})).await;
    assert!(e.contains("outside the workspace"), "{e}");
    for p in ["link/secret.txt", "alias.txt"] {
        let e = ws.err("read_file", json!({"path": p})).await;
        assert!(e.starts_with(&format!("path \"{p}\" leads through a symlink to ")), "{e}");
        assert!(!e.contains("top secret"));
    }
    let e = ws.err("write_file", json!({"path": "link/planted.txt", "content": "x"})).await;
    assert!(e.contains("leads through a symlink"), "{e}");
    assert!(!outside.path().join("planted.txt").exists());
    let e = ws.err("write_file", json!({"path": "alias.txt", "content": "x"})).await;
    assert!(e.contains("leads through a symlink"), "{e}");
    let e = ws.err("edit_file", json!({"path": "alias.txt", "old": "top", "new": "no"})).await;
    assert!(e.contains("leads through a symlink"), "{e}");
    assert_eq!(fs::read_to_string(outside.path().join("secret.txt")).unwrap(), "top secret\n");
    ws.err("list_files", json!({"path": ".."})).await;
    ws.err("list_files", json!({"path": "link"})).await;
    ws.err("grep", json!({"pattern": "secret", "path": "/etc"})).await;
    ws.err("grep", json!({"pattern": "secret", "path": "link"})).await;
    // Walking the workspace does not follow the symlinks out of it either.
    assert_eq!(ws.ok("grep", json!({"pattern": "secret"})).await, "no matches\n");
    // The session logs may not be changed.
    let e = ws.err("write_file", json!({"path": ".PseudoClaude/sessions/x.jsonl", "content": "{}"})).await;
    assert_eq!(
        e,
        ".PseudoClaude/sessions/x.jsonl is inside .PseudoClaude/, where the session logs live; tools may not change it"
    );
    assert!(!ws.path(".PseudoClaude").exists());
    ws.write(".PseudoClaude/sessions/s/log.jsonl", "{\"a\":1}\n");
    let e = ws.err("edit_file", json!({"path": "./.PseudoClaude/sessions/s/log.jsonl", "old": "1", "new": "2"})).await;
    assert!(e.contains("where the session logs live"), "{e}");
    assert_eq!(ws.read(".PseudoClaude/sessions/s/log.jsonl"), "{\"a\":1}\n");
    assert!(ws.script.asked().is_empty());
    // Symlinks that stay inside are fine.
    std::os::unix::fs::symlink(ws.path("ok.txt"), ws.path("ok-link.txt")).unwrap();
    assert_eq!(ws.ok("read_file", json!({"path": "ok-link.txt"})).await, numbered(1, &["fine"]));
}

// ---------------------------------------------------------------- run_command

#[tokio::test]
async fn run_command_reports_exit_code_stdout_and_stderr() {
    let ws = Ws::new(&[Approval::Yes, Approval::Yes, Approval::Yes]);
    let command = "echo out; echo err >&2; exit 3";
    let out = ws.ok("run_command", json!({"command": command})).await;
    // A failed command is told it ran in the sandbox, in case that is why.
    let (result, note) = out.split_once("\n\n[this command ran in the sandbox").expect("the sandbox note");
    assert_eq!(result, "exit code: 3\n[stdout]\nout\n[stderr]\nerr");
    assert!(note.contains("`sandbox: false` and a `reason`"), "{note}");
    assert_eq!(ws.script.prompts(), [("run_command".into(), command.into(), command.into())]);
    // It runs in the workspace, with no input.
    ws.write("here.txt", "");
    assert_eq!(ws.ok("run_command", json!({"command": "ls; cat"})).await, "exit code: 0\n[stdout]\nhere.txt\n");
    assert_eq!(ws.ok("run_command", json!({"command": "true"})).await, "exit code: 0\n(no output)\n");
}

#[tokio::test]
async fn run_command_timeout_kills_the_process_group() {
    // Outside the sandbox (where `$!` is a pid of this system, not of the command's PID namespace).
    let mut ws = Ws::with_auto(&[], AutoApprove { run_command: true, ..Default::default() });
    ws.tools.set_sandbox(Settings { enabled: false, ..Settings::default() });
    let start = Instant::now();
    // The sleep outlives every deadline here: if it is dead, it was killed.
    let run = ws.run("run_command", json!({"command": "echo started; sleep 300 & echo $! > pid; wait", "timeout": 1}));
    let out = tokio::time::timeout(SAFETY_NET, run).await.expect("the timeout never fired");
    let took = start.elapsed();
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("timed out after 1 s: killed the command and its process group"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("[stdout]\nstarted\n"), "{}", out.content);
    assert!(took >= Duration::from_millis(950), "the timeout fired early: {took:?}");
    let pid = read_pid(&ws.path("pid"));
    assert!(wait_dead(pid, SAFETY_NET), "sleep {pid} still runs");
}

#[tokio::test]
async fn dropping_the_run_future_kills_the_command() {
    // Outside the sandbox (the sandboxed case: `nothing_outlives_its_command_…`).
    let mut ws = Ws::with_auto(&[], AutoApprove { run_command: true, ..Default::default() });
    ws.tools.set_sandbox(Settings { enabled: false, ..Settings::default() });
    let call = ToolCall::new("c", "run_command", json!({"command": "sleep 300 & echo $! > pid; wait"}));
    let pid = {
        // dropped at the end of this block, once the command is seen running (its pid written)
        let run = ws.tools.run(&call);
        tokio::pin!(run);
        let start = Instant::now();
        loop {
            tokio::select! {
                out = &mut run => panic!("the command ended on its own: {}", out.content),
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            if let Some(pid) = try_read_pid(&ws.path("pid")) {
                break pid;
            }
            assert!(start.elapsed() < SAFETY_NET, "the command never wrote its pid");
        }
    };
    assert!(wait_dead(pid, SAFETY_NET), "sleep {pid} still runs after the future was dropped");
}

#[tokio::test]
async fn run_command_output_is_capped_keeping_both_ends() {
    let mut ws = Ws::with_auto(&[], AutoApprove { run_command: true, ..Default::default() });
    ws.tools.set_output_cap(4096);
    let out = ws.ok("run_command", json!({"command": "echo first; seq 1 100000; echo last"})).await;
    assert!(out.starts_with("exit code: 0\n[stdout]\nfirst\n1\n2\n"), "{}", &out[..100]);
    assert!(out.contains(" bytes cut here …]"), "{out}");
    assert!(out.ends_with("100000\nlast\n"), "{}", &out[out.len() - 100..]);
    assert!(out.len() <= 4096 + 200, "{}", out.len());
}

// ---------------------------------------------------------------- edits through the editor

#[tokio::test]
async fn a_file_with_unsaved_changes_in_the_editor_is_never_written() {
    for auto in [AutoApprove::default(), AutoApprove { write_file: true, edit_file: true, run_command: false }] {
        let ws = Ws::with_auto(&[Approval::Yes, Approval::Yes], auto);
        ws.write("open.txt", "on disk\n");
        ws.script.buffers.lock().unwrap().insert("open.txt".into(), BufferState::Modified);
        let e = ws.err("write_file", json!({"path": "open.txt", "content": "agent\n"})).await;
        assert!(e.contains("open.txt is open in the editor with unsaved changes"), "{e}");
        let e = ws.err("edit_file", json!({"path": "open.txt", "old": "on disk", "new": "agent"})).await;
        assert!(e.contains("unsaved changes"), "{e}");
        assert_eq!(ws.read("open.txt"), "on disk\n");
        assert!(ws.script.asked().is_empty(), "the user is not asked about a write that cannot happen");
        assert!(ws.script.written.lock().unwrap().is_empty());
    }
}

#[tokio::test]
async fn an_unmodified_buffer_is_checked_again_held_and_told_of_the_write() {
    let ws = Ws::new(&[Approval::Yes, Approval::Yes]);
    ws.write("open.txt", "one\n");
    ws.script.buffers.lock().unwrap().insert("open.txt".into(), BufferState::Unmodified);
    ws.ok("edit_file", json!({"path": "open.txt", "old": "one", "new": "two"})).await;
    ws.ok("write_file", json!({"path": "fresh.txt", "content": "new\n"})).await;
    assert_eq!(ws.read("open.txt"), "two\n");
    let checks = ws.script.checks.lock().unwrap().clone();
    assert_eq!(
        checks,
        [
            ("open.txt".into(), false),
            ("open.txt".into(), true),
            ("fresh.txt".into(), false),
            ("fresh.txt".into(), true)
        ]
    );
    let written = ws.script.written.lock().unwrap().clone();
    assert_eq!(written, [("open.txt".into(), Written::Changed), ("fresh.txt".into(), Written::Created)]);
}

#[tokio::test]
async fn typing_into_the_buffer_while_the_approval_waits_refuses_the_edit() {
    let ws = Ws::new(&[Approval::Yes]);
    ws.write("open.txt", "alpha\nbeta\n");
    ws.script.buffers.lock().unwrap().insert("open.txt".into(), BufferState::Unmodified);
    *ws.script.typed_while_asked.lock().unwrap() = Some("open.txt".into());
    let e = ws.err("edit_file", json!({"path": "open.txt", "old": "beta", "new": "gamma"})).await;
    assert!(e.contains("the user changed open.txt in the editor while this edit_file call waited"), "{e}");
    assert_eq!(ws.read("open.txt"), "alpha\nbeta\n");
    // The hold is released.
    assert_eq!(ws.script.written.lock().unwrap().clone(), [("open.txt".into(), Written::Failed)]);
}

#[tokio::test]
async fn an_editor_that_never_answers_refuses_the_write_after_the_timeout() {
    let mut ws = Ws::new(&[Approval::Yes]);
    ws.tools.set_editor_timeout(Duration::from_millis(200));
    ws.script.silent.store(true, std::sync::atomic::Ordering::SeqCst);
    let started = Instant::now();
    let e = ws.err("write_file", json!({"path": "x.txt", "content": "x"})).await;
    assert!(e.contains("the editor did not say within 0.2 s whether x.txt is open"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!ws.path("x.txt").exists());
}

#[tokio::test]
async fn only_the_accepted_change_blocks_are_written_and_the_model_hears_of_the_others() {
    let ws = Ws::new(&[Approval::Only(vec![2]), Approval::Only(vec![1])]);
    let old = "fn a() {\n    1\n}\n\nfn b() {\n    2\n}\n";
    ws.write("lib.rs", old);
    let out = ws
        .ok(
            "edit_file",
            json!({"path": "lib.rs", "old": "    1\n}\n\nfn b() {\n    2\n", "new": "    10\n}\n\nfn b() {\n    20\n"}),
        )
        .await;
    assert_eq!(ws.read("lib.rs"), "fn a() {\n    1\n}\n\nfn b() {\n    20\n}\n");
    assert!(out.contains("the user accepted 1 of the 2 changes and rejected change: 1."), "{out}");
    assert!(out.contains("rejected change 1 (lines 2-2 of the file, 2-2 proposed):\n-    1\n+    10\n"), "{out}");
    // The diff in the answer is what was written.
    assert!(
        out.contains("-    2\n+    20\n")
            && !out.contains("edited lib.rs\n--- a/lib.rs\n+++ b/lib.rs\n@@ -1,7 +1,7 @@\n fn a() {\n-    1"),
        "{out}"
    );
    let change = ws.script.asked()[0].change.clone().expect("change");
    assert_eq!(change.hunks.len(), 2);

    // write_file the same way; an answer naming no block that exists is a no.
    ws.write("w.txt", "a\nb\nc\nd\ne\n");
    let out = ws.ok("write_file", json!({"path": "w.txt", "content": "A\nb\nc\nd\nE\n"})).await;
    assert_eq!(ws.read("w.txt"), "A\nb\nc\nd\ne\n");
    assert!(out.contains("rejected change: 2"), "{out}");
    let ws = Ws::new(&[Approval::Only(vec![7])]);
    ws.write("w.txt", "a\n");
    let e = ws.err("write_file", json!({"path": "w.txt", "content": "b\n"})).await;
    assert!(e.contains("declined"), "{e}");
    assert_eq!(ws.read("w.txt"), "a\n");
}

#[tokio::test]
async fn nothing_inside_a_git_folder_is_written() {
    let ws = Ws::with_auto(&[], AutoApprove { write_file: true, edit_file: true, run_command: false });
    ws.write(".git/config", "[core]\n");
    let e = ws.err("write_file", json!({"path": ".git/hooks/pre-commit", "content": "rm -rf ~"})).await;
    assert!(e.contains("inside a .git/ folder"), "{e}");
    let e = ws.err("edit_file", json!({"path": ".git/config", "old": "[core]", "new": "[x]"})).await;
    assert!(e.contains("inside a .git/ folder"), "{e}");
    assert!(!ws.path(".git/hooks").exists());
    assert_eq!(ws.read(".git/config"), "[core]\n");
}

// ---------------------------------------------------------------- run_command in the sandbox

use pseudoclaude::sandbox::{self, Mechanism, Network, Settings, Support};

/// Auto-approved commands in a workspace whose session folder is `.PseudoClaude/sessions/s1` (so the
/// commands' `$TMPDIR` lies beneath the read-only `.PseudoClaude`, as in a real session).
fn sandboxed(answers: &[Approval], support: Option<Support>, settings: Settings) -> Ws {
    let mut ws = Ws::with_auto(answers, AutoApprove { run_command: true, ..Default::default() });
    let session = ws.dir.path().canonicalize().unwrap().join(".PseudoClaude/sessions/s1");
    fs::create_dir_all(&session).unwrap();
    fs::write(session.join("conversation.jsonl"), "{\"role\":\"user\",\"content\":\"hi\"}\n").unwrap();
    ws.tools.set_session_dir(Box::new(move || Some(session.clone())));
    ws.tools.set_sandbox(settings);
    if let Some(s) = support {
        ws.tools.set_sandbox_support(s);
    }
    ws
}

/// This machine has what the sandbox's strongest mechanism needs (BRIEF: Landlock ABI 7, user namespaces).
fn full_support() -> &'static Support {
    let s = sandbox::support();
    assert_eq!(s.mechanism, Mechanism::Namespaces, "this machine should allow the namespaces: {s:?}");
    s
}

#[tokio::test]
async fn a_write_outside_the_workspace_is_refused_and_the_model_is_told() {
    full_support();
    let ws = sandboxed(&[], None, Settings::default());
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().canonicalize().unwrap().join("x");
    let out = ws.run("run_command", json!({"command": format!("touch {}", target.display())})).await;
    assert!(!target.exists(), "the sandbox let the write through");
    assert!(out.content.starts_with("exit code: 1\n"), "{}", out.content);
    assert!(out.content.contains(&format!("blocked by the sandbox: write to {}", target.display())), "{}", out.content);
    assert!(out.content.contains("`sandbox: false` and a `reason`"), "{}", out.content);
    let rec = out.sandbox.expect("the log's record");
    assert!(rec.sandboxed && !rec.network && rec.allowed.is_empty(), "{rec:?}");
    assert_eq!(rec.mechanism, "namespaces+landlock");
    // /tmp is outside too; the workspace is not; nothing was asked (auto-approved, nothing lifted).
    let out = ws.ok("run_command", json!({"command": "touch /tmp/pc-sandbox-$$ ; touch inside.txt"})).await;
    assert!(out.contains("blocked by the sandbox: write to /tmp/pc-sandbox-"), "{out}");
    assert!(ws.path("inside.txt").exists());
    assert!(ws.script.asked().is_empty());
}

#[tokio::test]
async fn rm_rf_of_the_session_store_and_the_repository_leaves_both_whole() {
    full_support();
    let ws = sandboxed(&[], None, Settings::default());
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    let log = ws.read(".PseudoClaude/sessions/s1/conversation.jsonl");
    let out = ws
        .run(
            "run_command",
            json!({"command": "rm -rf .PseudoClaude .git; echo x >> .git/HEAD; git status >/dev/null 2>&1; echo done"}),
        )
        .await;
    assert_eq!(ws.read(".git/HEAD"), "ref: refs/heads/main\n");
    assert_eq!(ws.read(".PseudoClaude/sessions/s1/conversation.jsonl"), log);
    assert!(out.content.contains("[stdout]\ndone\n"), "{}", out.content);
    let git = ws.dir.path().canonicalize().unwrap().join(".git");
    assert!(out.content.contains(&format!("blocked by the sandbox: write to {}", git.display())), "{}", out.content);
    // The session's $TMPDIR beneath the read-only .PseudoClaude stays writable.
    let out = ws
        .ok("run_command", json!({"command": "echo kept > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo $TMPDIR"}))
        .await;
    let tmp = ws.dir.path().canonicalize().unwrap().join(".PseudoClaude/sessions/s1/tmp");
    assert_eq!(out, format!("exit code: 0\n[stdout]\nkept\n{}\n", tmp.display()));
    assert_eq!(ws.read(".PseudoClaude/sessions/s1/tmp/t"), "kept\n");
}

#[tokio::test]
async fn a_build_in_the_private_tmpdir_works() {
    full_support();
    let ws = sandboxed(&[], None, Settings::default());
    let script = "cd \"$TMPDIR\" && mkdir -p build && cd build && printf 'int main(void){return 7;}\\n' > m.c \
                  && cc -o m m.c && ./m; echo \"built: $?\"";
    let out = ws.ok("run_command", json!({"command": script})).await;
    assert!(out.ends_with("[stdout]\nbuilt: 7\n"), "{out}");
    assert!(ws.path(".PseudoClaude/sessions/s1/tmp/build/m").exists());
}

/// A listener on 127.0.0.1 and a command that connects to it (python3: `sh` has no sockets).
fn listener() -> (std::net::TcpListener, String) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let cmd = format!(
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5); s.sendall(b'hi'); print('connected')\""
    );
    (l, cmd)
}

fn accepted(l: &std::net::TcpListener) -> bool {
    l.accept().is_ok()
}

#[tokio::test]
async fn a_tcp_connection_fails_in_the_sandbox_and_works_when_the_network_is_allowed() {
    full_support();
    let (l, connect) = listener();
    // Off by default: refused, and said so.
    let ws = sandboxed(&[], None, Settings::default());
    let out = ws.run("run_command", json!({"command": connect})).await;
    assert!(!out.content.contains("connected"), "{}", out.content);
    assert!(out.content.contains("blocked by the sandbox: network"), "{}", out.content);
    assert!(!accepted(&l));
    // The user's one-time consent, asked although run_command is auto-approved; "Always" is not kept.
    let ws = sandboxed(&[Approval::Always, Approval::No], None, Settings::default());
    let out = ws.ok("run_command", json!({"command": connect, "network": true})).await;
    assert!(out.contains("[stdout]\nconnected\n"), "{out}");
    assert!(accepted(&l));
    let asked = ws.script.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].lifted, ["the network ban (this command may connect and listen)"]);
    assert!(!asked[0].always);
    let declined = ws.err("run_command", json!({"command": connect, "network": true})).await;
    assert!(declined.contains("declined"), "{declined}");
    assert!(!accepted(&l), "a declined command connected");
    // `network = true` in setup(): no question.
    let ws = sandboxed(&[], None, Settings { network: Network::On, ..Settings::default() });
    let out = ws.run("run_command", json!({"command": connect})).await;
    assert!(out.content.contains("connected"), "{}", out.content);
    assert!(accepted(&l));
    assert!(ws.script.asked().is_empty());
    let rec = out.sandbox.unwrap();
    assert!(rec.sandboxed && rec.network && rec.allowed.is_empty(), "{rec:?}");
}

#[tokio::test]
async fn leaving_the_sandbox_is_asked_every_time_and_no_runs_nothing() {
    full_support();
    let ws = sandboxed(&[Approval::No, Approval::Always, Approval::Yes], None, Settings::default());
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("x");
    let cmd = format!("touch {}", target.display());
    // No reason: refused before anything is asked.
    let e = ws.err("run_command", json!({"command": cmd, "sandbox": false})).await;
    assert!(e.starts_with("`sandbox: false` needs a `reason`"), "{e}");
    let args = json!({"command": cmd, "sandbox": false, "reason": "it writes to a folder outside the workspace"});
    let out = ws.run("run_command", args.clone()).await;
    assert!(out.is_error && out.content.contains("declined"), "{}", out.content);
    assert!(!target.exists(), "No ran the command");
    let rec = out.sandbox.unwrap();
    assert!(rec.allowed.is_empty() && rec.reason.as_deref() == Some("it writes to a folder outside the workspace"));
    // Always is a plain yes here: the next one is asked again.
    let out = ws.run("run_command", args.clone()).await;
    assert!(!out.is_error && target.exists(), "{}", out.content);
    let rec = out.sandbox.unwrap();
    assert!(!rec.sandboxed && rec.allowed == ["no_sandbox"], "{rec:?}");
    fs::remove_file(&target).unwrap();
    ws.ok("run_command", args).await;
    assert!(target.exists());
    let asked = ws.script.asked();
    assert_eq!(asked.len(), 3, "each one asked, auto-approve or not");
    for a in &asked {
        assert_eq!(a.lifted, ["the sandbox (the model's reason: it writes to a folder outside the workspace)"]);
        assert!(!a.always);
    }
    // And a plain command after all that still runs confined, without a question.
    let out = ws.run("run_command", json!({"command": format!("touch {}/y", outside.path().display())})).await;
    assert!(out.content.contains("blocked by the sandbox"), "{}", out.content);
    assert!(!outside.path().join("y").exists());
    assert_eq!(ws.script.asked().len(), 3);
}

#[tokio::test]
async fn without_a_sandbox_every_command_asks_and_says_so() {
    let none = Support::unavailable("simulated");
    let ws = sandboxed(&[Approval::Always, Approval::No], Some(none), Settings::default());
    ws.ok("run_command", json!({"command": "touch a"})).await;
    assert!(ws.path("a").exists());
    let out = ws.run("run_command", json!({"command": "touch b"})).await;
    assert!(out.is_error && !ws.path("b").exists(), "{}", out.content);
    let asked = ws.script.asked();
    assert_eq!(asked.len(), 2, "auto-approve and Always do not apply without a sandbox");
    for a in &asked {
        let w = a.warning.as_deref().unwrap_or_default();
        assert!(w.starts_with("no sandbox on this system (simulated)"), "{w}");
        assert!(!a.always && a.lifted.is_empty());
    }
}

#[tokio::test]
async fn landlock_alone_confines_writes_and_network_but_says_the_repository_is_unprotected() {
    let abi = full_support().landlock_abi;
    let ws = sandboxed(&[Approval::Yes], Some(Support::landlock_only(abi, "simulated")), Settings::default());
    ws.write(".git/HEAD", "x\n");
    let (l, connect) = listener();
    let udp = "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('udp')\"";
    let outside = tempfile::tempdir().unwrap();
    let cmd = format!("touch {}/x; rm -rf .git; {connect}; {udp}", outside.path().display());
    let out = ws.run("run_command", json!({"command": cmd})).await;
    assert!(!outside.path().join("x").exists() && !accepted(&l), "{}", out.content);
    assert!(!out.content.contains("connected") && !out.content.contains("udp\n"), "{}", out.content);
    // Landlock grants the whole workspace: .git is gone, and the approval would have said so.
    assert!(!ws.path(".git").exists());
    assert_eq!(out.sandbox.unwrap().mechanism, "landlock");
    ws.tools.run(&ToolCall::new("c", "run_command", json!({"command": "true", "network": true}))).await;
    let w = ws.script.asked()[0].warning.clone().unwrap();
    assert!(w.contains("cannot keep commands from changing .git/ and .PseudoClaude/"), "{w}");
}

#[tokio::test]
async fn writable_folders_and_a_disabled_sandbox() {
    full_support();
    let extra = tempfile::tempdir().unwrap();
    let settings = Settings { writable: vec![extra.path().to_path_buf()], ..Settings::default() };
    let ws = sandboxed(&[], None, settings);
    ws.ok("run_command", json!({"command": format!("touch {}/ok", extra.path().display())})).await;
    assert!(extra.path().join("ok").exists());
    let ws = sandboxed(&[], None, Settings { enabled: false, ..Settings::default() });
    ws.ok("run_command", json!({"command": format!("touch {}/free", extra.path().display())})).await;
    assert!(extra.path().join("free").exists());
    assert!(ws.script.asked().is_empty());
}

/// A Unix socket listening outside the workspace (as the editor's server, an ssh agent or the Docker
/// daemon would), and a Python command that connects to it and says so.
fn unix_listener() -> (tempfile::TempDir, std::os::unix::net::UnixListener, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    l.set_nonblocking(true).unwrap();
    let cmd = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); s.sendall(b'hi'); print('connected')\"",
        path.display()
    );
    (dir, l, cmd)
}

const SOCKETPAIR: &str =
    "python3 -c \"import socket; a, b = socket.socketpair(); a.sendall(b'pair'); print(b.recv(4).decode())\"";

#[tokio::test]
async fn no_unix_socket_can_be_reached_but_socketpair_and_pipes_work_in_both_mechanisms() {
    let abi = full_support().landlock_abi;
    for support in [None, Some(Support::landlock_only(abi, "simulated"))] {
        let ws = sandboxed(&[], support.clone(), Settings::default());
        let (_dir, l, connect) = unix_listener();
        let cmd = format!("{connect}; {SOCKETPAIR}; echo piped | cat");
        let out = ws.run("run_command", json!({"command": cmd})).await;
        assert!(!out.content.contains("connected"), "{support:?}: {}", out.content);
        assert!(l.accept().is_err(), "{support:?}: the listener was reached");
        assert!(out.content.contains("\npair\npiped\n"), "{support:?}: {}", out.content);
        assert!(out.content.contains("blocked by the sandbox: Unix sockets"), "{support:?}: {}", out.content);
        assert!(out.content.contains("sandbox.unix_sockets = true lifts it"), "{}", out.content);
    }
    // `unix_sockets = true` lifts it, and the approval says what that means.
    let (_dir, l, connect) = unix_listener();
    let mut ws = Ws::new(&[Approval::Yes]);
    ws.tools.set_sandbox(Settings { unix_sockets: true, ..Settings::default() });
    let out = ws.ok("run_command", json!({"command": connect})).await;
    assert!(out.contains("[stdout]\nconnected\n"), "{out}");
    assert!(l.accept().is_ok());
    let w = ws.script.asked()[0].warning.clone().unwrap_or_default();
    assert!(w.contains("sandbox.unix_sockets = true") && w.contains("drive the editor"), "{w}");
}

#[tokio::test]
async fn secrets_are_removed_from_every_commands_environment() {
    full_support();
    // Names unique to this test (the environment is the whole test process's).
    let vars = [
        ("PCT_GITHUB_TOKEN", "t0ken"),
        ("pct_aws_secret_access_key", "s3cret"),
        ("PCT_DB_PASSWORD", "pw"),
        ("PCT_MY_CREDENTIALS", "cr"),
        ("PCT_PROVIDER", "llm-key"),
        ("PCT_KEEP_TOKEN", "kept"),
        ("PCT_ORDINARY", "plain"),
        // Ordinary names that only contain a secret word stay; the rest of such a name still counts.
        ("PCT_GIT_AUTHOR_NAME", "Ann"),
        ("PCT_KEYBOARD_LAYOUT", "de"),
        ("PCT_KEYBOARD_TOKEN", "t0k"),
        ("PCT_HTTP_AUTHORIZATION", "Bearer b"),
    ];
    for (k, v) in vars {
        // SAFETY: set before any command of this test runs; no other test reads these names.
        unsafe { std::env::set_var(k, v) };
    }
    let mut settings = Settings { provider_key_env: Some("PCT_PROVIDER".into()), ..Settings::default() };
    settings.env.keep = vec!["PCT_KEEP_TOKEN".into()];
    settings.env.set.insert("PCT_SET".into(), "given".into());
    let ws = sandboxed(&[Approval::Yes], None, settings);
    let out = ws.ok("run_command", json!({"command": "env | grep -i '^pct_' | sort"})).await;
    assert_eq!(
        out,
        "exit code: 0\n[stdout]\nPCT_GIT_AUTHOR_NAME=Ann\nPCT_KEEP_TOKEN=kept\nPCT_KEYBOARD_LAYOUT=de\nPCT_ORDINARY=plain\nPCT_SET=given\n"
    );
    // Outside the sandbox too, after the user's yes.
    let args = json!({"command": "env | grep -i '^pct_' | sort", "sandbox": false, "reason": "test"});
    let out = ws.ok("run_command", args).await;
    assert_eq!(
        out,
        "exit code: 0\n[stdout]\nPCT_GIT_AUTHOR_NAME=Ann\nPCT_KEEP_TOKEN=kept\nPCT_KEYBOARD_LAYOUT=de\nPCT_ORDINARY=plain\nPCT_SET=given\n"
    );
}

#[tokio::test]
async fn secret_stores_read_as_empty_and_the_note_names_them() {
    let abi = full_support().landlock_abi;
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    fs::write(home.join(".netrc"), "machine x password p\n").unwrap();
    fs::write(home.join("notes.txt"), "readable\n").unwrap();
    let settings = Settings { deny_read: vec![home.join(".ssh"), home.join(".netrc")], ..Settings::default() };
    for support in [None, Some(Support::landlock_only(abi, "simulated"))] {
        let ws = sandboxed(&[], support.clone(), settings.clone());
        let cmd = format!(
            "cat {h}/.ssh/id_ed25519; cat {h}/.netrc; ls -A {h}/.ssh; cat {h}/notes.txt /etc/hostname >/dev/null && echo read-ok",
            h = home.display()
        );
        let out = ws.run("run_command", json!({"command": cmd})).await;
        assert!(
            !out.content.contains("PRIVATE KEY") && !out.content.contains("password"),
            "{support:?}: {}",
            out.content
        );
        assert!(out.content.contains("read-ok"), "{support:?}: {}", out.content);
        assert!(out.content.contains("these read as empty"), "{}", out.content);
        assert!(out.content.contains(&format!("{}", home.join(".ssh").display())), "{}", out.content);
        // Ordinary work still works.
        let out = ws.ok("run_command", json!({"command": "git init -q g && git -C g status --short && python3 -c 'print(1)' && mktemp >/dev/null && echo fine"})).await;
        assert!(out.ends_with("fine\n"), "{support:?}: {out}");
    }
}

/// Whether a process whose command line holds `marker` runs (zombies count as dead).
fn running_with(marker: &str) -> bool {
    let Ok(dir) = fs::read_dir("/proc") else { return false };
    dir.flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { return false };
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(marker) && alive(pid)
    })
}

fn gone_soon(marker: &str) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        if !running_with(marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[tokio::test]
async fn nothing_outlives_its_command_setsid_nohup_double_fork_or_timeout() {
    let abi = full_support().landlock_abi;
    for (n, support) in [None, Some(Support::landlock_only(abi, "simulated"))].into_iter().enumerate() {
        let ws = sandboxed(&[], support.clone(), Settings::default());
        let m = format!("{}{n}", std::process::id());
        let cmd = format!(
            "setsid sleep 1000.{m}1 >/dev/null 2>&1 & nohup sleep 1000.{m}2 >/dev/null 2>&1 & \
             sh -c 'sleep 1000.{m}3 >/dev/null 2>&1 &' ; sleep 0.2; echo started"
        );
        let out = ws.ok("run_command", json!({"command": cmd})).await;
        assert!(out.ends_with("started\n"), "{out}");
        for k in 1..=3 {
            assert!(gone_soon(&format!("1000.{m}{k}")), "{support:?}: sleep {k} outlived its command");
        }
        // A timeout ends the whole tree too.
        let cmd = format!("setsid sleep 1000.{m}4 >/dev/null 2>&1 & sleep 1000.{m}5");
        let e = ws.err("run_command", json!({"command": cmd, "timeout": 1})).await;
        assert!(e.starts_with("timed out after 1 s"), "{e}");
        for k in 4..=5 {
            assert!(gone_soon(&format!("1000.{m}{k}")), "{support:?}: sleep {k} outlived its timeout");
        }
        // So does a cancelled turn (the run's future dropped).
        let call =
            ToolCall::new("c", "run_command", json!({"command": format!("setsid sleep 1000.{m}6 & sleep 1000.{m}7")}));
        {
            let run = ws.tools.run(&call);
            tokio::pin!(run);
            let start = Instant::now();
            while !(running_with(&format!("1000.{m}6")) && running_with(&format!("1000.{m}7"))) {
                tokio::select! {
                    out = &mut run => panic!("the command ended on its own: {}", out.content),
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
                assert!(start.elapsed() < Duration::from_secs(10), "the command never started");
            }
        }
        for k in 6..=7 {
            assert!(gone_soon(&format!("1000.{m}{k}")), "{support:?}: sleep {k} outlived its cancelled command");
        }
    }
}

/// A local HTTP server answering every request with `body`, until the test ends; its port.
fn http_server(body: &'static str) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let mut conn = conn;
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut conn, &mut buf);
            let answer =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            let _ = std::io::Write::write_all(&mut conn, answer.as_bytes());
        }
    });
    port
}

#[tokio::test]
async fn the_allowlist_proxy_lets_through_only_the_hosts_allowed_in_both_mechanisms() {
    let abi = full_support().landlock_abi;
    let (allowed, refused) = (http_server("allowed-body"), http_server("refused-body"));
    let get = |port: u16| {
        format!(
            "python3 -c \"import urllib.request as u, urllib.error as e\ntry: print(u.urlopen('http://127.0.0.1:{port}/x', timeout=5).read().decode())\nexcept e.HTTPError as x: print(x.code, x.read().decode())\""
        )
    };
    let direct = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {allowed}), timeout=3); print('direct')\""
    );
    for support in [None, Some(Support::landlock_only(abi, "simulated"))] {
        let network = Network::Allow(vec![format!("127.0.0.1:{allowed}"), "*.example.invalid".into()]);
        let ws = sandboxed(&[], support.clone(), Settings { network, ..Settings::default() });
        let cmd = format!("{}; {}; {direct}; echo $HTTPS_PROXY", get(allowed), get(refused));
        let out = ws.run("run_command", json!({"command": cmd})).await;
        let c = &out.content;
        assert!(c.contains("\nallowed-body\n"), "{support:?}: {c}");
        assert!(!c.contains("refused-body"), "{support:?}: {c}");
        assert!(
            c.contains(&format!(
                "403 blocked by the sandbox: 127.0.0.1:{refused} is not in sandbox.network's allow list"
            )),
            "{support:?}: {c}"
        );
        assert!(!c.contains("\ndirect\n"), "{support:?}: a direct connection went through: {c}");
        assert!(c.contains("http://127.0.0.1:"), "{c}");
        assert!(c.contains(&format!("blocked by the sandbox: network to 127.0.0.1:{refused}")), "{c}");
        let rec = out.sandbox.unwrap();
        assert_eq!(rec.hosts, [format!("127.0.0.1:{allowed}")], "{rec:?}");
        assert_eq!(rec.refused_hosts, [format!("127.0.0.1:{refused}")], "{rec:?}");
        assert!(ws.script.asked().is_empty());
    }
}
