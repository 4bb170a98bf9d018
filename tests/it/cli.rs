//! `pseudoclaude sessions ...`: the binary users reach for when a session looks wrong.

use std::fs;
use std::process::Command;

use pseudoclaude::message::Message;
use pseudoclaude::session::{Context, Writer, WriterOptions};

mod surface;

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
    assert!(err.contains("Usage: pseudoclaude sessions"), "{err}");
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

#[test]
fn search_prints_each_hit_with_its_message_index_as_text_and_json() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session(ws.path(), "fix the Tokenizer");
    let w = Writer::open(&ctx, WriterOptions::default()).unwrap();
    w.append(&Message::user("and the tokenizer \"again\"")).unwrap();
    drop(w);
    let other = session(ws.path(), "unrelated");
    let (code, out, _) = cli(ws.path(), &["sessions", "search", "tokenizer"]);
    assert_eq!(code, 0);
    assert_eq!(out, format!("{0}:1:user: fix the Tokenizer\n{0}:3:user: and the tokenizer \"again\"\n", ctx.id));
    let (code, out, _) = cli(ws.path(), &["sessions", "search", "tokenizer", "\"again\"", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{out}");
    let h = &v[0];
    assert_eq!(
        (h["id"].as_str(), h["index"].as_u64(), h["role"].as_str()),
        (Some(ctx.id.as_str()), Some(3), Some("user"))
    );
    assert_eq!((h["kind"].as_str(), h["title"].as_str()), (Some("text"), Some("fix the Tokenizer")));
    assert_eq!(h["snippet"], "and the tokenizer \"again\"");
    assert_eq!(h["ranges"], serde_json::json!([[8, 25]]));
    // `show` numbers the same messages: the third line is message 3.
    let (_, out, _) = cli(ws.path(), &["sessions", "show", &ctx.id]);
    assert_eq!(out.lines().nth(2), Some("user: and the tokenizer \"again\""));
    // Smart case: an upper-case letter makes it exact.
    let (_, out, _) = cli(ws.path(), &["sessions", "search", "Tokenizer"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let (code, out, err) = cli(ws.path(), &["sessions", "search", "nowhere to be found"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("no message holds \"nowhere to be found\" (2 sessions searched)"), "{err}");
    let (code, out, _) = cli(ws.path(), &["sessions", "search", "answer", "--limit", "1"]);
    assert_eq!((code, out.lines().count()), (0, 1), "{out}");
    assert!(out.starts_with(&other.id), "newest session first: {out}");
}

#[test]
fn search_reports_bad_input_and_searches_a_damaged_log_in_what_it_restores() {
    let ws = tempfile::tempdir().unwrap();
    let (code, _, err) = cli(ws.path(), &["sessions", "search"]);
    assert_eq!(code, 2);
    assert!(err.contains("search needs the text to look for") && err.contains("Usage: pseudoclaude sessions"), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "search", ""]);
    assert_eq!(code, 2);
    assert!(err.contains("the query is empty"), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "search", "x", "--limit", "many"]);
    assert_eq!(code, 2);
    assert!(err.contains("--limit needs a number"), "{err}");
    // No sessions at all: nothing found, said plainly.
    let (code, _, err) = cli(ws.path(), &["sessions", "search", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("(0 sessions searched)"), "{err}");
    let ctx = session(ws.path(), "t");
    let mut text = fs::read_to_string(&ctx.jsonl_path).unwrap();
    text.insert_str(0, "garbage line with a needle\n");
    text.push_str("{\"role\":\"user\",\"content\":\"needle\"}\n{\"role\":\"us");
    fs::write(&ctx.jsonl_path, text).unwrap();
    let (code, out, _) = cli(ws.path(), &["sessions", "search", "needle", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().map(|a| a.iter().map(|h| h["index"].as_u64()).collect::<Vec<_>>()), Some(vec![Some(3)]));
}

#[test]
fn pin_marks_a_session_listed_first_and_off_unpins_it() {
    let ws = tempfile::tempdir().unwrap();
    let old = session(ws.path(), "old task");
    let newer = session(ws.path(), "newer task");
    let (code, out, err) = cli(ws.path(), &["sessions", "pin", &old.id]);
    assert_eq!((code, out.trim()), (0, format!("{}: pinned", old.id).as_str()), "{err}");
    let last: serde_json::Value =
        serde_json::from_str(fs::read_to_string(&old.jsonl_path).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!((last["type"].as_str(), last["pinned"].as_bool()), (Some("pin"), Some(true)));
    fs::remove_file(old.summary_path()).unwrap(); // the pin is in the log, not only in the cache
    let (_, out, _) = cli(ws.path(), &["sessions", "list"]);
    let rows: Vec<&str> = out.lines().collect();
    assert!(rows.len() == 2 && rows[0].starts_with(&old.id) && rows[0].ends_with("old task  [pinned]"), "{out}");
    assert!(rows[1].starts_with(&newer.id) && !rows[1].contains("[pinned]"), "{out}");
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v[0]["id"].as_str(), v[0]["pinned"].as_bool()), (Some(old.id.as_str()), Some(true)));
    assert_eq!(v[1]["pinned"], false);
    // A limited list still has the pinned one first.
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--limit", "1"]);
    assert!(out.lines().count() == 1 && out.starts_with(&old.id), "{out}");
    let (code, out, _) = cli(ws.path(), &["sessions", "pin", &old.id, "on"]);
    assert_eq!((code, out.trim()), (0, format!("{}: pinned", old.id).as_str()));
    let (code, out, _) = cli(ws.path(), &["sessions", "pin", &old.id, "off"]);
    assert_eq!((code, out.trim()), (0, format!("{}: unpinned", old.id).as_str()));
    let (_, out, _) = cli(ws.path(), &["sessions", "list"]);
    assert!(out.lines().count() == 2 && !out.contains("[pinned]"), "{out}");
    let (_, out, _) = cli(ws.path(), &["sessions", "show", &old.id]);
    assert_eq!(out, "user: old task\nassistant: answer\n", "pins are not messages");
}

#[test]
fn pin_is_refused_for_a_session_open_elsewhere_bad_ids_and_bad_values() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session(ws.path(), "held");
    let before = fs::read(&ctx.jsonl_path).unwrap();
    let guard = pseudoclaude::session::lock::acquire(&ctx).unwrap();
    let (code, _, err) = cli(ws.path(), &["sessions", "pin", &ctx.id]);
    assert!(code == 2 && err.contains("is open in another editor"), "{err}");
    drop(guard);
    let (code, _, err) = cli(ws.path(), &["sessions", "pin", &ctx.id, "yes"]);
    assert!(
        code == 2 && err.contains("pin takes on or off, not \"yes\"") && err.contains("Usage: pseudoclaude sessions"),
        "{err}"
    );
    let (code, _, err) = cli(ws.path(), &["sessions", "pin", "../../etc"]);
    assert!(code == 2 && err.contains("invalid session id \"../../etc\""), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "pin", "20260101-000000-abcd", "off"]);
    assert!(code == 2 && err.contains("no session 20260101-000000-abcd"), "{err}");
    assert_eq!(fs::read(&ctx.jsonl_path).unwrap(), before);
}

/// A session on branch `topic` at `1a2b3c4` (after `main` at `0f0f0f0`) whose two requests to
/// `fake-model` reported 3,600 prompt tokens, 3,000 of them read from the cache, and 200 output tokens.
fn session_with_usage(ws: &std::path::Path) -> Context {
    use pseudoclaude::git::GitHead;
    use pseudoclaude::session::Entry;
    use pseudoclaude::usage::Usage;
    let ctx = Context::new(ws).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: "fake-model".into(), ..Default::default() }).unwrap();
    let head = |branch: &str, commit: &str| GitHead { branch: branch.into(), commit: commit.into() };
    w.append_entry(Entry::meta_git(head("main", "0f0f0f0"), 1)).unwrap();
    w.append(&Message::user("what does it cost?")).unwrap();
    let usage = |input, read, output| Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: 0,
    };
    w.append_entry(Entry::usage("fake-model", usage(200, 1000, 50), 2)).unwrap();
    w.append(&Message::assistant("a little")).unwrap();
    w.append_entry(Entry::meta_git(head("topic", "1a2b3c4"), 3)).unwrap();
    w.append(&Message::user("and now?")).unwrap();
    w.append_entry(Entry::usage("fake-model", usage(400, 2000, 150), 4)).unwrap();
    w.append(&Message::assistant("a little more")).unwrap();
    ctx
}

#[test]
fn list_shows_the_branch_the_tokens_and_the_cached_share_in_text_and_json() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = session_with_usage(ws.path());
    let plain = session(ws.path(), "no git, no usage");
    let (code, out, err) = cli(ws.path(), &["sessions", "list"]);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.starts_with(&ctx.id)).unwrap();
    assert!(row.ends_with("what does it cost?  [git: topic 1a2b3c4]  [3.6k in (83% cached), 200 out]"), "{row}");
    let row = out.lines().find(|l| l.starts_with(&plain.id)).unwrap();
    assert!(row.ends_with("no git, no usage"), "nothing recorded, nothing shown: {row}");
    assert_eq!(err, "", "no notes without prices");
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let item = v.as_array().unwrap().iter().find(|i| i["id"] == ctx.id.as_str()).unwrap();
    assert_eq!((item["branch"].as_str(), item["commit"].as_str()), (Some("topic"), Some("1a2b3c4")));
    assert_eq!(
        item["usage"],
        serde_json::json!({"input_tokens": 600, "output_tokens": 200, "cache_read_tokens": 3000, "cache_write_tokens": 0})
    );
    assert!(item.get("cost").is_none() && item.get("usage_by_model").is_none(), "{item}");
    assert_eq!(item["pinned"], false);
    assert!(item["forked_from"].is_null(), "{item}");
    let plain = v.as_array().unwrap().iter().find(|i| i["id"] == plain.id.as_str()).unwrap();
    assert!(plain["branch"].is_null() && plain["commit"].is_null(), "{plain}");
}

#[test]
fn pricing_gives_each_session_its_cost_a_total_and_names_the_models_without_a_price() {
    let ws = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let ctx = session_with_usage(ws.path());
    let other = Context::new(ws.path()).unwrap();
    let w = Writer::open(&other, WriterOptions { model: "other-model".into(), ..Default::default() }).unwrap();
    w.append(&Message::user("elsewhere")).unwrap();
    let u = pseudoclaude::usage::Usage { input_tokens: 10, output_tokens: 5, ..Default::default() };
    w.append_entry(pseudoclaude::session::Entry::usage("other-model", u, 2)).unwrap();
    w.append(&Message::assistant("ok")).unwrap();
    drop(w);
    let prices = files.path().join("prices.json");
    fs::write(&prices, r#"{"fake-model": {"input": 2, "output": 8, "cache_read": 0.5}}"#).unwrap();
    let prices = prices.to_str().unwrap();
    // (600 * 2 + 200 * 8 + 3000 * 0.5) / 1e6 dollars
    let (code, out, err) = cli(ws.path(), &["sessions", "list", "--pricing", prices]);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.starts_with(&ctx.id)).unwrap();
    assert!(row.ends_with("[3.6k in (83% cached), 200 out, $0.0043]"), "{row}");
    let row = out.lines().find(|l| l.starts_with(&other.id)).unwrap();
    assert!(row.ends_with("[10 in, 5 out]"), "no price, no cost: {row}");
    assert_eq!(
        err,
        format!(
            "total cost: $0.0043 over 1 session\nno price for model \"other-model\" in {prices}: 1 session shows no cost\n"
        )
    );
    // The option anywhere, as --pricing=FILE too; the JSON has `cost` where known.
    let (code, out, _) = cli(ws.path(), &["sessions", &format!("--pricing={prices}"), "list", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let item = v.as_array().unwrap().iter().find(|i| i["id"] == ctx.id.as_str()).unwrap();
    assert!((item["cost"].as_f64().unwrap() - 0.0043).abs() < 1e-12, "{item}");
    let item = v.as_array().unwrap().iter().find(|i| i["id"] == other.id.as_str()).unwrap();
    assert!(item.get("cost").is_none(), "{item}");
    // The environment names a default file; --pricing wins over it.
    let env_cli = |env: &str, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_pseudoclaude"))
            .env("PSEUDOCLAUDE_PRICING", env)
            .arg("-C")
            .arg(ws.path())
            .args(args)
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, out) = env_cli(prices, &["sessions", "list"]);
    assert!(code == 0 && out.contains("$0.0043"), "{out}");
    let both = files.path().join("both.json");
    fs::write(
        &both,
        r#"{"fake-model": {"input": 2, "output": 8, "cache_read": 0.5}, "other-model": {"input": 100, "output": 100}}"#,
    )
    .unwrap();
    let (code, out) = env_cli(prices, &["sessions", "list", "--pricing", both.to_str().unwrap()]);
    assert!(code == 0 && out.contains("[10 in, 5 out, $0.0015]"), "{out}");
}

#[test]
fn bad_pricing_is_refused_naming_the_file_and_the_entry() {
    let ws = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    session(ws.path(), "t");
    let file = files.path().join("p.json");
    let path = file.to_str().unwrap();
    for (text, why) in [
        (r#"{"m": {"input": 1, "output": 2, "cache_reed": 1}}"#, r#"pricing["m"].cache_reed: unknown price"#),
        (r#"{"m": {"input": 1}}"#, r#"pricing["m"].output: missing"#),
        (r#"{"m": {"input": 1, "output": -2}}"#, "expected dollars per million tokens (a number >= 0), got -2"),
        (r#"["m"]"#, "pricing: expected an object of prices by model name, got an array"),
        ("{", "pricing: not valid JSON"),
    ] {
        fs::write(&file, text).unwrap();
        let (code, out, err) = cli(ws.path(), &["sessions", "list", "--pricing", path]);
        assert_eq!((code, out.as_str()), (2, ""), "{text}");
        assert!(err.contains(&format!("{path} (--pricing): ")) && err.contains(why), "{text}: {err}");
    }
    let missing = files.path().join("nope.json");
    let (code, _, err) = cli(ws.path(), &["sessions", "list", "--pricing", missing.to_str().unwrap()]);
    assert!(code == 2 && err.contains(&format!("cannot read {} (--pricing)", missing.display())), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "list", "--pricing"]);
    assert!(code == 2 && err.contains("--pricing needs a file"), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "show", "x", "--pricing", path]);
    assert!(code == 2 && err.contains("--pricing is an option of `sessions list`"), "{err}");
}

#[test]
fn list_shows_a_forks_parent() {
    let ws = tempfile::tempdir().unwrap();
    let src = session_with_tools(ws.path());
    let (_, out, _) = cli(ws.path(), &["sessions", "fork", &src.id, "4"]);
    let id = out.trim().to_string();
    let (_, out, _) = cli(ws.path(), &["sessions", "list"]);
    let row = out.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("{out}"));
    assert!(row.ends_with(&format!("read the big file  [fork of {} at message 4]", src.id)), "{row}");
    let row = out.lines().find(|l| l.starts_with(&src.id)).unwrap();
    assert!(!row.contains("fork of"), "{row}");
}

#[test]
fn export_marks_the_stale_reminder_and_every_kind_of_interrupted_answer() {
    use pseudoclaude::message::ToolCall;
    use pseudoclaude::session::words::{CANCELLED_RESULT, INTERRUPTED_NOTE};
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: "m1".into(), ..Default::default() }).unwrap();
    w.append(&Message::user("explain the parser")).unwrap(); // 1
    w.checkpoint("a1", 0, "It reads tok").unwrap(); // 2: the editor died while this streamed
    drop(w);
    let w = Writer::open(&ctx, WriterOptions { model: "m1".into(), ..Default::default() }).unwrap();
    w.append(&Message::user(pseudoclaude::agent::stale_reminder(9))).unwrap(); // 3
    w.append(&Message::user("go on")).unwrap(); // 4
    w.append(&Message::assistant(format!("Tokens first, then\n{INTERRUPTED_NOTE}"))).unwrap(); // 5: cancelled
    w.append(&Message::user("run the tests")).unwrap(); // 6
    let call = ToolCall::new("c1", "run_command", serde_json::json!({"command": "make test"}));
    w.append(&Message::assistant_tool_calls("Running them.", vec![call])).unwrap(); // 7
    w.append(&Message::tool_result("c1", CANCELLED_RESULT, true)).unwrap(); // 8: cancelled while it ran
    w.append(&Message::assistant_interrupted("The stream broke he", 0)).unwrap(); // 9: a failed stream
    drop(w);
    let (code, md, err) = cli(ws.path(), &["sessions", "export", &ctx.id]);
    assert_eq!(code, 0, "{err}");
    for part in [
        "## 2. Agent (interrupted)\n\nIt reads tok\n\n*[interrupted: the answer stopped here]*\n",
        "## 3. Reminder to the model\n\n*Added by pseudoclaude when the session was resumed after a pause: the model \
         read it, the user did not type it.*\n\n> [Session resumed] This conversation was resumed 9 hours after",
        "## 4. You\n\ngo on\n",
        "## 5. Agent (interrupted)\n\nTokens first, then\n\n*[interrupted by the user]*\n",
        "## 8. Tool result (cancelled): `run_command` (`c1`)\n\n```text\ncancelled by the user before this tool finished\n```",
        "## 9. Agent (interrupted)\n\nThe stream broke he\n\n*[interrupted: the answer stopped here]*\n",
    ] {
        assert!(md.contains(part), "missing {part:?} in:\n{md}");
    }
    assert!(!md.contains(&format!("then\n{INTERRUPTED_NOTE}")), "the note is a mark, not text: {md}");
    assert!(md.contains("- Repaired on load: 1 answer(s) were interrupted while streaming"), "{md}");
}
