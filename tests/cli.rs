//! `pseudoclaude sessions ...`: the binary users reach for when a session looks wrong.

use std::fs;
use std::process::Command;

use pseudoclaude::message::Message;
use pseudoclaude::session::{Context, Writer, WriterOptions};

fn cli(ws: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pseudoclaude")).arg("-C").arg(ws).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn session(ws: &std::path::Path, title: &str) -> Context {
    let ctx = Context::new(ws).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: "m1".into(), ..Default::default() }).unwrap();
    w.append(&Message::user(title)).unwrap();
    w.append(&Message::assistant("answer")).unwrap();
    ctx
}

#[test]
fn list_show_and_check_a_healthy_session() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session(ws.path(), "fix the parser");
    let (code, out, _) = cli(ws.path(), &["sessions", "list"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&ctx.id) && out.contains("fix the parser") && out.contains("2 msgs") && out.contains("m1"),
        "{out}"
    );
    let (code, out, _) = cli(ws.path(), &["sessions", "list", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["id"], ctx.id.as_str());
    assert_eq!(v[0]["messages"], 2);
    let (code, out, _) = cli(ws.path(), &["sessions", "show", &ctx.id]);
    assert_eq!(code, 0);
    assert_eq!(out, "user: fix the parser\nassistant: answer\n");
    let (code, out, _) = cli(ws.path(), &["sessions", "check", &ctx.id]);
    assert_eq!((code, out.trim()), (0, format!("{}: ok (2 messages restored from 2 entries)", ctx.id).as_str()));
}

#[test]
fn check_reports_damage_with_line_numbers_and_exit_status_1() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session(ws.path(), "t");
    let mut text = fs::read_to_string(&ctx.jsonl_path).unwrap();
    text.insert_str(0, "garbage line\n");
    text.push_str("{\"role\":\"us");
    fs::write(&ctx.jsonl_path, text).unwrap();
    let (code, out, _) = cli(ws.path(), &["sessions", "check", &ctx.id]);
    assert_eq!(code, 1);
    assert!(out.contains("skipped 1 unreadable line(s) (1)") && out.contains("torn last line of 11 bytes"), "{out}");
    let (_, out, _) = cli(ws.path(), &["sessions", "check", &ctx.id, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["bad_lines"][0].as_u64(), v["torn_tail_bytes"].as_u64()),
        (Some(false), Some(1), Some(11))
    );
    let (_, out, err) = cli(ws.path(), &["sessions", "show", &ctx.id]);
    assert!(out.contains("user: t") && err.contains("note: skipped 1 unreadable line"), "{out}{err}");
}

#[test]
fn bad_ids_and_missing_sessions_get_clear_errors() {
    let ws = tempfile::tempdir().unwrap();
    let (code, _, err) = cli(ws.path(), &["sessions", "show", "../../etc"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid session id \"../../etc\""), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "check", "20260101-000000-abcd"]);
    assert_eq!(code, 2);
    assert!(err.contains("no session 20260101-000000-abcd"), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("usage:"), "{err}");
}

#[test]
fn a_garbage_log_is_listed_as_unreadable_and_a_repaired_line_is_checked() {
    let ws = tempfile::tempdir().unwrap();
    let garbage = Context::new(ws.path()).unwrap();
    fs::write(&garbage.jsonl_path, b"garbage\n\x01\x02\n").unwrap();
    let latin1 = Context::new(ws.path()).unwrap();
    fs::write(&latin1.jsonl_path, b"{\"role\":\"user\",\"content\":\"caf\xe9\",\"model\":\"m1\"}\n").unwrap();
    let (code, out, _) = cli(ws.path(), &["sessions", "list"]);
    assert_eq!(code, 0);
    let row = out.lines().find(|l| l.starts_with(&garbage.id)).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("(unreadable session)") && row.contains("[damaged: 2 bad lines;"), "{row}");
    let row = out.lines().find(|l| l.starts_with(&latin1.id)).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("caf\u{FFFD}") && row.contains("m1") && row.contains("1 repaired"), "{row}");
    let (code, out, _) = cli(ws.path(), &["sessions", "check", &latin1.id, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (code, v["ok"].as_bool(), v["repaired"][0].as_u64(), v["messages"].as_u64()),
        (1, Some(false), Some(1), Some(1))
    );
}

#[test]
fn a_symlinked_session_is_refused_naming_the_path() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("conversation.jsonl"), "{\"role\":\"user\",\"content\":\"outside\"}\n").unwrap();
    let ctx = Context::for_id(ws.path(), "20260101-000000-abcd").unwrap();
    fs::create_dir_all(ctx.dir.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(outside.path(), &ctx.dir).unwrap();
    for cmd in ["show", "check"] {
        let (code, _, err) = cli(ws.path(), &["sessions", cmd, &ctx.id]);
        assert_eq!(code, 2, "{cmd}");
        assert!(err.contains("refusing") && err.contains(&ctx.dir.display().to_string()), "{cmd}: {err}");
    }
    let (code, out, _) = cli(ws.path(), &["sessions", "list", "--all"]);
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, _, _) = cli(ws.path(), &["sessions", "cleanup", "--days", "0"]);
    assert_eq!(code, 0);
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1, "nothing created or removed outside");
}

#[test]
fn check_and_show_report_an_answer_interrupted_mid_stream() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: "m1".into(), ..Default::default() }).unwrap();
    w.append(&Message::user("why?")).unwrap();
    w.checkpoint("a1", 0, "Because the ").unwrap();
    w.checkpoint("a1", 12, "lexer").unwrap();
    drop(w); // the editor died: no final message
    let (code, out, _) = cli(ws.path(), &["sessions", "check", &ctx.id]);
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains(": ok") && out.contains("1 answer(s) were interrupted while streaming"), "{out}");
    let (_, out, _) = cli(ws.path(), &["sessions", "check", &ctx.id, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["ok"].clone(), v["interrupted"].clone(), v["messages"].clone()), (false.into(), 1.into(), 2.into()));
    let (_, out, err) = cli(ws.path(), &["sessions", "show", &ctx.id]);
    assert_eq!(out, "user: why?\nassistant: Because the lexer\n  [interrupted: the answer stopped here]\n");
    assert!(err.contains("interrupted"), "{err}");
    // The list counts what a resume restores.
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["messages"], 2);
}

/// A session with a tool exchange whose result is spilled (threshold 100 bytes).
fn session_with_tools(ws: &std::path::Path) -> Context {
    use pseudoclaude::message::ToolCall;
    let ctx = Context::new(ws).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: "m1".into(), spill_threshold: 100 }).unwrap();
    w.append(&Message::user("read the big file")).unwrap(); // 1
    let call = ToolCall::new("c1", "read_file", serde_json::json!({"path": "big.txt"}));
    w.append(&Message::assistant_tool_calls("Reading it.", vec![call])).unwrap(); // 2
    let big: String = (0..40).map(|i| format!("row {i} of big.txt\n")).collect();
    w.append(&Message::tool_result("c1", big, false)).unwrap(); // 3
    w.append(&Message::assistant("It has 40 rows.")).unwrap(); // 4
    w.append(&Message::user("thanks")).unwrap(); // 5
    w.append(&Message::assistant("welcome")).unwrap(); // 6
    ctx
}

#[test]
fn rename_names_a_session_and_an_empty_title_gives_the_automatic_one_back() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session(ws.path(), "fix the parser");
    let (code, out, err) = cli(ws.path(), &["sessions", "rename", &ctx.id, "Parser", "rewrite"]);
    assert_eq!((code, out.trim()), (0, format!("{}: renamed \"Parser rewrite\"", ctx.id).as_str()), "{err}");
    fs::remove_file(ctx.summary_path()).unwrap(); // the name is in the log, not only in the cache
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v[0]["title"].as_str(), v[0]["messages"].as_u64()), (Some("Parser rewrite"), Some(2)));
    let last: serde_json::Value =
        serde_json::from_str(fs::read_to_string(&ctx.jsonl_path).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!((last["type"].as_str(), last["title"].as_str()), (Some("title"), Some("Parser rewrite")));
    let (code, out, _) = cli(ws.path(), &["sessions", "rename", &ctx.id, ""]);
    assert_eq!((code, out.trim()), (0, format!("{}: back to its automatic title \"fix the parser\"", ctx.id).as_str()));
    let (_, out, _) = cli(ws.path(), &["sessions", "show", &ctx.id]);
    assert_eq!(out, "user: fix the parser\nassistant: answer\n", "names are not messages");
}

#[test]
fn rename_is_refused_for_a_session_open_elsewhere_and_for_bad_ids() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session(ws.path(), "held");
    let before = fs::read(&ctx.jsonl_path).unwrap();
    let guard = pseudoclaude::session::lock::acquire(&ctx).unwrap();
    let (code, _, err) = cli(ws.path(), &["sessions", "rename", &ctx.id, "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("is open in another editor"), "{err}");
    drop(guard);
    assert_eq!(fs::read(&ctx.jsonl_path).unwrap(), before);
    let (code, _, err) = cli(ws.path(), &["sessions", "rename", "../../etc", "x"]);
    assert!(code == 2 && err.contains("invalid session id \"../../etc\""), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "rename", "20260101-000000-abcd", "x"]);
    assert!(code == 2 && err.contains("no session 20260101-000000-abcd"), "{err}");
}

#[test]
fn fork_takes_whole_tool_exchanges_copies_spills_and_leaves_the_source_alone() {
    let ws = tempfile::tempdir().unwrap();
    let src = session_with_tools(ws.path());
    let before = fs::read(&src.jsonl_path).unwrap();
    // Message 2 is the tool call: its result comes along.
    let (code, out, err) = cli(ws.path(), &["sessions", "fork", &src.id, "2"]);
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_string();
    assert!(err.contains(&format!("forked {} at message 3 (3 messages)", src.id)), "{err}");
    assert_eq!(fs::read(&src.jsonl_path).unwrap(), before, "the source is byte-identical");
    let (code, out, _) = cli(ws.path(), &["sessions", "check", &id]);
    assert_eq!((code, out.trim()), (0, format!("{id}: ok (3 messages restored from 1 entries)").as_str()));
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = v.as_array().unwrap().iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert_eq!(row["forked_from"], serde_json::json!({"id": src.id, "index": 3}));
    assert_eq!((row["model"].as_str(), row["title"].as_str()), (Some("m1"), Some("read the big file")));
    // The spill file was copied: the fork's export has the whole output.
    let (_, md, _) = cli(ws.path(), &["sessions", "export", &id]);
    assert!(
        md.contains("row 39 of big.txt") && md.contains(&format!("Forked from: `{}` at message 3", src.id)),
        "{md}"
    );
    let (code, _, err) = cli(ws.path(), &["sessions", "fork", &src.id, "7"]);
    assert!(
        code == 2 && err.contains("message 7 is out of range: session") && err.contains("numbered 1 to 6"),
        "{err}"
    );
    let (code, _, err) = cli(ws.path(), &["sessions", "fork", &src.id, "0"]);
    assert!(code == 2 && err.contains("message 0 is out of range"), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "fork", &src.id, "two"]);
    assert!(code == 2 && err.contains("INDEX must be a message number"), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "fork", "../../etc", "1"]);
    assert!(code == 2 && err.contains("invalid session id"), "{err}");
    assert_eq!(fs::read(&src.jsonl_path).unwrap(), before);
}

#[test]
fn export_prints_markdown_or_json() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session_with_tools(ws.path());
    let (code, md, _) = cli(ws.path(), &["sessions", "export", &ctx.id]);
    assert_eq!(code, 0);
    assert!(md.starts_with("# read the big file\n\n") && md.contains(&format!("- Session: `{}`", ctx.id)), "{md}");
    assert!(md.contains("## 1. You\n\nread the big file") && md.contains("## 4. Agent\n\nIt has 40 rows."), "{md}");
    assert!(md.contains("## 3. Tool result: `read_file` (`c1`)\n\n<details>"), "{md}");
    assert!(md.contains("row 0 of big.txt") && md.contains("row 39 of big.txt\n```\n\n</details>"), "{md}");
    assert!(!md.contains("- Branch:"), "no branch recorded, none shown");
    let (code, js, _) = cli(ws.path(), &["sessions", "export", &ctx.id, "--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&js).unwrap();
    assert_eq!((v["id"].as_str(), v["messages"].as_array().map(Vec::len)), (Some(ctx.id.as_str()), Some(6)));
    assert_eq!(v["messages"][1]["tool_calls"][0]["arguments"]["path"], "big.txt");
    let (code, _, err) = cli(ws.path(), &["sessions", "export", &ctx.id, "--format", "pdf"]);
    assert!(code == 2 && err.contains("unknown export format \"pdf\""), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "export", "20260101-000000-abcd"]);
    assert!(code == 2 && err.contains("no session 20260101-000000-abcd"), "{err}");
}
