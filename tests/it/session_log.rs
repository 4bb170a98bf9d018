//! The session log against the failures it must survive, through the real files on disk.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::session::{
    self, Context, Error, ListOptions, Loaded, RetentionOptions, Writer, WriterOptions, spill,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn writer(ctx: &Context) -> Writer {
    Writer::open(ctx, WriterOptions { model: "test-model".into(), ..Default::default() }).expect("open writer")
}

fn call(ids: &[&str]) -> Message {
    Message::assistant_tool_calls("", ids.iter().map(|i| ToolCall::new(*i, "grep", json!({"pattern": i}))).collect())
}

/// A short label per message, so whole histories compare in one assert.
fn labels(msgs: &[Message]) -> Vec<String> {
    msgs.iter()
        .map(|m| {
            if let Some(r) = &m.tool_result {
                format!("res:{}", r.tool_call_id)
            } else if !m.tool_calls.is_empty() {
                format!("call:{}", m.tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(","))
            } else {
                m.content.clone()
            }
        })
        .collect()
}

/// The providers' rule: every tool call is answered exactly once, right after its call; no orphans.
fn assert_protocol_valid(msgs: &[Message]) {
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        assert!(m.tool_result.is_none(), "orphan tool result at {i}: {:?}", labels(msgs));
        i += 1;
        let mut open: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
        while !open.is_empty() {
            let r = msgs.get(i).and_then(|m| m.tool_result.as_ref()).expect("call answered right after it");
            let pos = open.iter().position(|id| *id == r.tool_call_id).expect("result answers an open call");
            open.remove(pos);
            i += 1;
        }
    }
}

fn load(ctx: &Context) -> Loaded {
    let l = session::load(ctx).expect("load");
    assert_protocol_valid(&l.messages);
    l
}

#[test]
fn appended_messages_load_in_order_with_model_on_first_entry_only() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    assert!(!ctx.jsonl_path.exists(), "the log appears only when a writer opens it");
    let w = writer(&ctx);
    w.append(&Message::user("fix the parser")).unwrap();
    w.append(&call(&["a", "b"])).unwrap();
    w.append(&Message::tool_result("a", "found", false)).unwrap();
    w.append(&Message::tool_result("b", "nothing", true)).unwrap();
    w.append(&Message::assistant("done")).unwrap();
    w.close().unwrap();

    let text = fs::read_to_string(&ctx.jsonl_path).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["model"], "test-model");
    assert!(lines[1..].iter().all(|l| l.get("model").is_none()));
    assert_eq!(lines[1]["tool_calls"][0]["arguments"], json!({"pattern": "a"}), "arguments are objects");
    assert_eq!(lines[3]["tool_result"]["is_error"], true);

    let l = load(&ctx);
    assert_eq!(labels(&l.messages), ["fix the parser", "call:a,b", "res:a", "res:b", "done"]);
    assert_eq!((l.title.as_str(), l.model.as_str(), l.entries), ("fix the parser", "test-model", 5));
    assert!(!l.damaged());
}

#[test]
fn replace_is_one_line_and_restores_only_the_snapshot() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("old request")).unwrap();
    w.append(&Message::assistant("old answer")).unwrap();
    w.replace("compact", &[Message::user("summary"), Message::assistant("ack")]).unwrap();
    w.append(&Message::user("next")).unwrap();
    drop(w);
    let text = fs::read_to_string(&ctx.jsonl_path).unwrap();
    assert_eq!(text.lines().count(), 4);
    let replace: serde_json::Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    assert_eq!(
        (replace["type"].as_str(), replace["reason"].as_str(), replace["count"].as_u64()),
        (Some("replace"), Some("compact"), Some(2))
    );
    let l = load(&ctx);
    assert_eq!(labels(&l.messages), ["summary", "ack", "next"]);
    assert_eq!(l.title, "old request", "the title stays the original request");
    let info = session::list::info(&ctx).unwrap();
    assert_eq!((info.messages, info.entries), (3, 4), "effective count beside physical count");
}

#[test]
fn seed_format_log_loads_as_the_seed_loader_does() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let seed = [
        r#"{"type":"message","role":"user","content":"first","ts":100,"model":"seed-model"}"#,
        r#"{"role":"assistant","tool_calls":[{"id":"c1","name":"read_file","arguments":"{\"path\":\"a\"}"}],"ts":101}"#,
        r#"{"role":"user","tool_result":{"tool_call_id":"c1","content":"text","is_error":false},"ts":102}"#,
        r#"this line is not json"#,
        r#"{"type":"replace","reason":"compact","ts":103}"#,
        r#"{"type":"message","role":"user","content":"summary","ts":103}"#,
        r#"{"type":"message","role":"assistant","content":"ack","ts":103}"#,
        r#"{"type":"message","content":"no role: skipped as the seed does","ts":104}"#,
        r#"{"type":"message","role":"assistant","tool_calls":[{"id":"c2","name":"grep","arguments":{}}],"ts":105}"#,
    ];
    fs::write(&ctx.jsonl_path, seed.join("\n") + "\n").unwrap();
    let l = load(&ctx);
    assert_eq!(labels(&l.messages), ["summary", "ack"]);
    assert!(l.trimmed, "the dangling call at the end is cut");
    assert_eq!(l.bad_lines, [4]);
    assert_eq!((l.model.as_str(), l.title.as_str(), l.last_message), ("seed-model", "first", 105));
}

/// Entries of a log with messages, parallel tool calls, a replace, and what the history is after
/// each number of complete entries.
type Step = Box<dyn Fn(&Writer)>;

fn scripted_log() -> (Vec<Step>, Vec<Vec<&'static str>>) {
    let steps: Vec<Step> = vec![
        Box::new(|w| w.append(&Message::user("u1")).unwrap()),
        Box::new(|w| w.append(&call(&["a", "b"])).unwrap()),
        Box::new(|w| w.append(&Message::tool_result("a", "ra", false)).unwrap()),
        Box::new(|w| w.append(&Message::tool_result("b", "rb", false)).unwrap()),
        Box::new(|w| w.append(&Message::assistant("done1")).unwrap()),
        Box::new(|w| w.replace("compact", &[Message::user("summary"), Message::assistant("ack")]).unwrap()),
        Box::new(|w| w.append(&Message::user("u2")).unwrap()),
        Box::new(|w| w.append(&call(&["c"])).unwrap()),
        Box::new(|w| w.append(&Message::tool_result("c", "rc", false)).unwrap()),
        Box::new(|w| w.append(&Message::assistant("done2")).unwrap()),
    ];
    let full1 = vec!["u1", "call:a,b", "res:a", "res:b"];
    let expected = vec![
        vec![],
        vec!["u1"],
        vec!["u1"],
        vec!["u1"],
        full1.clone(),
        [full1, vec!["done1"]].concat(),
        vec!["summary", "ack"],
        vec!["summary", "ack", "u2"],
        vec!["summary", "ack", "u2"],
        vec!["summary", "ack", "u2", "call:c", "res:c"],
        vec!["summary", "ack", "u2", "call:c", "res:c", "done2"],
    ];
    (steps, expected)
}

#[test]
fn truncation_at_every_byte_loads_a_committed_prefix_and_repairs_on_open() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let (steps, expected) = scripted_log();
    let w = writer(&ctx);
    for s in &steps {
        s(&w);
    }
    drop(w);
    let full = fs::read(&ctx.jsonl_path).unwrap();
    let boundaries: Vec<usize> =
        std::iter::once(0).chain(full.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1)).collect();
    assert_eq!(boundaries.len(), steps.len() + 1);

    for cut in 0..=full.len() {
        let k = boundaries.iter().rposition(|b| *b <= cut).unwrap();
        fs::write(&ctx.jsonl_path, &full[..cut]).unwrap();
        let _ = fs::remove_file(ctx.broken_path());
        let l = load(&ctx);
        assert_eq!(labels(&l.messages), expected[k], "cut at byte {cut}");
        assert_eq!(l.torn_tail_bytes, (cut - boundaries[k]) as u64, "cut at byte {cut}");
        assert!(l.bad_lines.is_empty(), "a torn tail is not a bad line (cut {cut})");

        // Opening a writer moves the torn bytes aside; the next entry starts on a clean line.
        let (w, repair) = Writer::open_with_repair(&ctx, WriterOptions::default()).unwrap();
        assert_eq!(repair.torn_bytes, (cut - boundaries[k]) as u64);
        w.append(&Message::user("after")).unwrap();
        drop(w);
        let l = load(&ctx);
        let mut want = expected[k].clone();
        want.push("after");
        assert_eq!(labels(&l.messages), want, "append after cut at byte {cut}");
        assert!(!l.damaged() || l.dropped > 0, "cut {cut}: {}", l.damage_report());
        if cut > boundaries[k] {
            let broken = fs::read(ctx.broken_path()).unwrap();
            let torn = &full[boundaries[k]..cut];
            assert!(broken.windows(torn.len()).any(|w| w == torn), "torn bytes kept aside (cut {cut})");
        } else {
            assert!(!ctx.broken_path().exists());
        }
    }
}

#[test]
fn nul_and_garbage_tails_are_moved_aside_and_the_next_entry_starts_clean() {
    let tails: [&[u8]; 4] = [
        &[0u8; 4096],
        b"\x00\x00{\"role\":\"us",
        b"\xff\xfe garbage \x01",
        b"{\"type\":\"replace\",\"messages\":[{\"role\":\"user\"",
    ];
    for tail in tails {
        let ws = workspace();
        let ctx = Context::new(ws.path()).unwrap();
        let w = writer(&ctx);
        w.append(&Message::user("kept")).unwrap();
        drop(w);
        let mut f = fs::OpenOptions::new().append(true).open(&ctx.jsonl_path).unwrap();
        std::io::Write::write_all(&mut f, tail).unwrap();
        drop(f);
        assert_eq!(labels(&load(&ctx).messages), ["kept"]);
        let w = writer(&ctx);
        w.append(&Message::assistant("new")).unwrap();
        drop(w);
        let text = fs::read(&ctx.jsonl_path).unwrap();
        assert!(text.ends_with(b"\n") && !text.contains(&0u8), "no glued or NUL bytes left in the log");
        let l = load(&ctx);
        assert_eq!(labels(&l.messages), ["kept", "new"]);
        assert!(!l.damaged(), "{}", l.damage_report());
        assert!(fs::read(ctx.broken_path()).unwrap().windows(tail.len()).any(|w| w == tail));
    }
}

#[test]
fn corrupt_middle_lines_are_skipped_reported_and_never_splice_tool_calls() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    for m in [
        Message::user("u1"),
        call(&["a", "b"]),
        Message::tool_result("a", "ra", false),
        Message::tool_result("b", "rb", false), // line 4: corrupted below
        Message::user("u2"),                    // line 5: corrupted below
        Message::assistant("answer"),
        call(&["c"]),
        Message::tool_result("c", "rc", false),
    ] {
        w.append(&m).unwrap();
    }
    drop(w);
    let text = fs::read_to_string(&ctx.jsonl_path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[3] = lines[3].replace("\"tool_result\"", "\"tool_r\u{0}esult\"").replacen('{', "{{", 1);
    lines[4] = "\u{0}\u{0}\u{0}".into();
    fs::write(&ctx.jsonl_path, lines.join("\n") + "\n").unwrap();
    let l = load(&ctx);
    assert_eq!(labels(&l.messages), ["u1", "answer", "call:c", "res:c"]);
    assert_eq!(l.bad_lines, [4, 5]);
    assert_eq!(l.dropped, 2, "the call a,b and its one surviving result");
    assert!(l.damage_report().contains("2 unreadable line(s) (4, 5)"), "{}", l.damage_report());
}

#[test]
fn orphan_results_and_parallel_calls_missing_a_result_are_cut() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::tool_result("ghost", "orphan", false)).unwrap();
    w.append(&Message::user("u1")).unwrap();
    w.append(&call(&["a", "b", "c"])).unwrap();
    w.append(&Message::tool_result("a", "ra", false)).unwrap();
    w.append(&Message::tool_result("c", "rc", false)).unwrap();
    drop(w);
    let l = load(&ctx);
    assert_eq!(labels(&l.messages), ["u1"]);
    assert!(l.trimmed);
    assert_eq!(l.dropped, 1);
    // The log is never rewritten by a load: what was cut is still on disk for audit.
    assert_eq!(fs::read_to_string(&ctx.jsonl_path).unwrap().lines().count(), 5);
}

#[test]
fn large_tool_results_are_spilled_once_and_snapshots_reference_them() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: String::new(), spill_threshold: 1024 }).unwrap();
    let big = "line of output\n".repeat(20_000);
    w.append(&Message::user("u")).unwrap();
    w.append(&call(&["a"])).unwrap();
    w.append(&Message::tool_result("a", big.clone(), false)).unwrap();
    let l = load(&ctx);
    let r = l.messages[2].tool_result.clone().unwrap();
    let s = r.spill.clone().expect("spilled");
    assert_eq!((s.bytes, s.path.starts_with("tool-results/")), (big.len() as u64, true));
    assert!(r.content.len() < 4096 && r.content.contains("output truncated"), "preview only");
    assert_eq!(spill::read(&ctx, &s).unwrap(), big);
    let mode = fs::metadata(ctx.dir.join(&s.path)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // A snapshot of the loaded history (spill refs) and of the in-memory one (full text) both
    // reference the same file; nothing is re-embedded.
    w.replace("compact", &l.messages).unwrap();
    w.replace("compact", &[Message::user("u"), call(&["a"]), Message::tool_result("a", big.clone(), false)]).unwrap();
    drop(w);
    assert!(fs::metadata(&ctx.jsonl_path).unwrap().len() < 16 * 1024);
    assert_eq!(fs::read_dir(&ctx.spill_dir).unwrap().count(), 1);
    assert_eq!(load(&ctx).messages[2].tool_result.as_ref().unwrap().spill, Some(s));
}

#[test]
fn missing_altered_or_hostile_spill_files_load_as_clear_placeholders() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: String::new(), spill_threshold: 100 }).unwrap();
    w.append(&call(&["a", "b"])).unwrap();
    w.append(&Message::tool_result("a", "A".repeat(500), false)).unwrap();
    w.append(&Message::tool_result("b", "B".repeat(500), false)).unwrap();
    drop(w);
    let l = load(&ctx);
    let path_a = ctx.dir.join(&l.messages[1].tool_result.as_ref().unwrap().spill.as_ref().unwrap().path);
    let path_b = ctx.dir.join(&l.messages[2].tool_result.as_ref().unwrap().spill.as_ref().unwrap().path);
    fs::remove_file(&path_a).unwrap();
    let mut altered = fs::read(&path_b).unwrap();
    altered[10] = b'X';
    fs::write(&path_b, altered).unwrap();
    let l = load(&ctx);
    let a = &l.messages[1].tool_result.as_ref().unwrap().content;
    let b = &l.messages[2].tool_result.as_ref().unwrap().content;
    assert!(a.contains("500 bytes") && a.contains("missing") && a.contains("AAAA"), "{a}");
    assert!(b.contains("altered"), "{b}");
    assert_eq!(l.spill_problems.len(), 2);

    // A log line pointing outside tool-results is refused, not followed.
    let hostile = r#"{"role":"assistant","tool_calls":[{"id":"x","name":"t","arguments":{}}]}
{"role":"user","tool_result":{"tool_call_id":"x","content":"p","spill":{"path":"../../../etc/passwd","bytes":1,"sha256":"00"}}}
"#;
    fs::write(&ctx.jsonl_path, hostile).unwrap();
    let l = load(&ctx);
    assert!(l.messages[1].tool_result.as_ref().unwrap().content.contains("invalid spill file"));
}

#[test]
fn path_traversal_ids_are_refused_everywhere() {
    let ws = workspace();
    for id in ["../../etc", "a/b", "/etc", "", "..", "20260828-142030-a1b2/../../x"] {
        for err in [Context::open(ws.path(), id).unwrap_err(), Context::for_id(ws.path(), id).unwrap_err()] {
            assert!(matches!(err, Error::InvalidId(_)), "{id:?}: {err}");
            assert!(err.to_string().contains("invalid session id"));
        }
    }
    let err = Context::open(ws.path(), "20260828-142030-a1b2").unwrap_err();
    assert!(err.to_string().starts_with("no session 20260828-142030-a1b2"), "{err}");
}

#[test]
fn session_files_are_private_and_never_committed() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("secret plans")).unwrap();
    drop(w);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&ctx.dir), 0o700);
    assert_eq!(mode(&ctx.spill_dir), 0o700);
    assert_eq!(mode(&session::sessions_dir(ws.path())), 0o700);
    assert_eq!(mode(&ctx.jsonl_path), 0o600);
    assert_eq!(mode(&ctx.lock_path()), 0o600);
    let gi = fs::read_to_string(ws.path().join(".PseudoClaude/.gitignore")).unwrap();
    assert!(gi.lines().any(|l| l == "*"));
    // And git agrees. git is needed here: a missing git fails the test, it does not skip it.
    let git = |args: &[&str]| {
        std::process::Command::new("git").args(args).current_dir(ws.path()).output().unwrap_or_else(|e| {
            panic!("this test runs git, which is not installed here ({e}): install it (Debian: apt-get install git)")
        })
    };
    let init = git(&["init", "-q"]);
    assert!(init.status.success(), "git init failed: {}", String::from_utf8_lossy(&init.stderr));
    let out = git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(out.status.success(), "git status failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_second_writer_is_refused_naming_the_holder_until_the_first_closes() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    let err = Writer::open(&ctx, WriterOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }));
    let msg = err.to_string();
    assert!(msg.contains(&format!("pid {}", std::process::id())) && msg.contains("another editor"), "{msg}");
    let listed =
        session::list(ws.path(), &ListOptions { include_empty: true, check_locks: true, ..Default::default() })
            .unwrap();
    assert!(listed[0].held_by.is_some());
    w.close().unwrap();
    assert!(Writer::open(&ctx, WriterOptions::default()).is_ok());
}

#[test]
fn list_is_newest_first_and_leaves_out_current_and_empty_sessions() {
    let ws = workspace();
    let mut ids = Vec::new();
    for (i, title) in ["oldest", "middle", "newest"].iter().enumerate() {
        let ctx = Context::new(ws.path()).unwrap();
        let w = writer(&ctx);
        w.append(&Message::user(*title)).unwrap();
        drop(w);
        let t = std::time::SystemTime::now() - std::time::Duration::from_secs(1000 - i as u64 * 100);
        fs::File::options().write(true).open(&ctx.jsonl_path).unwrap().set_modified(t).unwrap();
        ids.push(ctx.id);
    }
    let empty = Context::new(ws.path()).unwrap();
    drop(writer(&empty));
    fs::create_dir_all(session::sessions_dir(ws.path()).join("not-a-session")).unwrap();
    let titles = |o: &ListOptions| -> Vec<String> {
        session::list(ws.path(), o).unwrap().into_iter().map(|s| s.title).collect()
    };
    assert_eq!(titles(&ListOptions::default()), ["newest", "middle", "oldest"]);
    assert_eq!(titles(&ListOptions { exclude: Some(ids[2].clone()), ..Default::default() }), ["middle", "oldest"]);
    assert_eq!(titles(&ListOptions { include_empty: true, ..Default::default() }).len(), 4);
}

/// Random logs, written in several sittings with torn tails, bad lines, replaces and tool calls,
/// listed between sittings (so the cache is resumed and rebuilt), must list exactly as they load.
#[test]
fn list_agrees_with_a_full_replay_on_random_logs() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for round in 0..60 {
        let ws = workspace();
        let ctx = Context::new(ws.path()).unwrap();
        for _sitting in 0..rng.random_range(1..5) {
            let w = Writer::open(
                &ctx,
                WriterOptions { model: format!("m{}", rng.random_range(0..3)), spill_threshold: 200 },
            )
            .unwrap();
            let mut n = 0;
            for _ in 0..rng.random_range(0..25) {
                n += 1;
                let id = format!("c{round}-{n}");
                match rng.random_range(0..10) {
                    0..=2 => w.append(&Message::user(format!("user {n}"))).unwrap(),
                    3 => w.append(&Message::assistant(format!("assistant {n}"))).unwrap(),
                    4 => w.append(&call(&[&id, &format!("{id}b")])).unwrap(),
                    5 => w
                        .append(&Message::tool_result(
                            format!("c{round}-{}", n - 1),
                            "x".repeat(rng.random_range(0..400)),
                            false,
                        ))
                        .unwrap(),
                    6 => w.append(&Message::tool_result(format!("c{round}-{}b", n - 2), "r", false)).unwrap(),
                    7 => w
                        .replace("compact", &[Message::user(format!("summary {n}")), Message::assistant("ack")])
                        .unwrap(),
                    _ => {
                        let l = session::load(&ctx).unwrap();
                        w.replace("resync", &l.messages).unwrap()
                    }
                }
            }
            drop(w);
            let mut f = fs::OpenOptions::new().append(true).open(&ctx.jsonl_path).unwrap();
            match rng.random_range(0..4) {
                0 => std::io::Write::write_all(&mut f, b"{\"role\":\"user\",\"cont").unwrap(),
                1 => std::io::Write::write_all(&mut f, b"not json at all\n").unwrap(),
                _ => {}
            }
            drop(f);
            if rng.random_bool(0.7) {
                check_list_matches_load(&ctx);
            }
        }
        check_list_matches_load(&ctx);
    }
}

fn check_list_matches_load(ctx: &Context) {
    let info = session::list::info(ctx).unwrap();
    let l = session::load(ctx).unwrap();
    assert_protocol_valid(&l.messages);
    assert_eq!(info.messages, l.messages.len());
    assert_eq!(info.entries, l.entries);
    assert_eq!(info.title, l.title);
    assert_eq!(info.model, l.model);
    assert_eq!(info.last_message, l.last_message);
    assert_eq!(info.bad_lines, l.bad_lines.len());
    assert_eq!(info.bytes, fs::metadata(&ctx.jsonl_path).unwrap().len());
}

#[test]
fn list_cache_is_rebuilt_when_the_log_is_cut_back_or_rewritten() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    for i in 0..20 {
        w.append(&Message::user(format!("m{i}"))).unwrap();
    }
    drop(w);
    assert_eq!(session::list::info(&ctx).unwrap().messages, 20);
    assert!(ctx.summary_path().exists());
    let text = fs::read_to_string(&ctx.jsonl_path).unwrap();
    let first5: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
    fs::write(&ctx.jsonl_path, &first5).unwrap();
    assert_eq!(session::list::info(&ctx).unwrap().messages, 5);
    // Same length, other bytes before the cached offset.
    fs::write(&ctx.jsonl_path, first5.replace("m4", "x4")).unwrap();
    assert_eq!(session::list::info(&ctx).unwrap().title, "m0");
    fs::write(ctx.summary_path(), "{broken").unwrap();
    check_list_matches_load(&ctx);
}

#[test]
fn retention_goes_by_last_activity_and_spares_sessions_in_use() {
    let ws = workspace();
    let day = 86_400;
    let now = chrono::Utc::now().timestamp();
    let make = |name: &str, id: &str, idle_days: i64| -> Context {
        let ctx = Context::for_id(ws.path(), id).unwrap();
        fs::create_dir_all(&ctx.dir).unwrap();
        let w = writer(&ctx);
        let mut m = Message::user(name);
        m.ts = now - idle_days * day;
        w.append(&m).unwrap();
        drop(w);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs((now - idle_days * day) as u64);
        fs::File::options().write(true).open(&ctx.jsonl_path).unwrap().set_modified(t).unwrap();
        ctx
    };
    // Created long ago (the id says 2020) but active yesterday: kept.
    make("old but active", "20200101-000000-0001", 1);
    make("idle", "20261001-000000-0002", 40);
    let current = make("current", "20261001-000000-0003", 40);
    let held = make("held elsewhere", "20261001-000000-0004", 40);
    make("idle longer", "20261001-000000-0005", 50);
    let holder = writer(&held);
    let removed =
        session::cleanup(ws.path(), &RetentionOptions { days: 30, keep: Some(current.id.clone()), now }).unwrap();
    assert_eq!(removed, ["20261001-000000-0005", "20261001-000000-0002"]);
    let left: Vec<String> =
        session::list(ws.path(), &ListOptions::default()).unwrap().into_iter().map(|s| s.title).collect();
    assert_eq!(left.len(), 3);
    assert!(left.contains(&"old but active".to_string()) && left.contains(&"held elsewhere".to_string()));
    drop(holder);
    let none = session::cleanup(ws.path(), &RetentionOptions { days: 0, keep: None, now }).unwrap();
    assert!(none.is_empty(), "0 disables retention");
}

#[test]
fn a_limited_list_reads_the_activity_hint_and_agrees_with_a_full_scan() {
    let ws = workspace();
    let ctxs: Vec<Context> = (0..12).map(|_| Context::new(ws.path()).unwrap()).collect();
    let mut rng = StdRng::seed_from_u64(3);
    for round in 0..40 {
        let ctx = &ctxs[rng.random_range(0..ctxs.len())];
        let w = writer(ctx);
        w.append(&Message::user(format!("m{round}"))).unwrap();
        drop(w);
        std::thread::sleep(std::time::Duration::from_millis(12)); // distinct modification times (coarse kernel clock)
    }
    let activity = session::sessions_dir(ws.path()).join("activity");
    assert!(fs::read_to_string(&activity).unwrap().lines().count() >= 40);
    let ids =
        |o: &ListOptions| -> Vec<String> { session::list(ws.path(), o).unwrap().into_iter().map(|s| s.id).collect() };
    let full = ids(&ListOptions::default());
    for limit in [1, 3, 5] {
        assert_eq!(ids(&ListOptions { limit: Some(limit), ..Default::default() }), full[..limit.min(full.len())]);
        let ex = ListOptions { limit: Some(limit), exclude: Some(full[0].clone()), ..Default::default() };
        assert_eq!(ids(&ex), full[1..=limit.min(full.len() - 1)]);
    }
    // Without the hint (or when it cannot fill the limit) the list scans everything.
    fs::remove_file(&activity).unwrap();
    assert_eq!(ids(&ListOptions { limit: Some(3), ..Default::default() }), full[..3]);
    fs::write(&activity, format!("{} 1\ngarbage\n", full[5])).unwrap();
    assert_eq!(ids(&ListOptions { limit: Some(3), ..Default::default() }), full[..3]);
}

#[test]
fn a_limited_list_with_max_read_lists_an_uncached_big_log_as_partial_without_reading_it() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("a big one")).unwrap();
    w.append(&Message::assistant("x".repeat(2 << 20))).unwrap();
    drop(w);
    let _ = fs::remove_file(ctx.summary_path()); // a copied folder: no cache
    let opts = ListOptions { limit: Some(1), max_read: Some(1 << 20), ..Default::default() };
    let quick = session::list(ws.path(), &opts).unwrap();
    assert_eq!(quick.len(), 1);
    assert!(quick[0].partial && quick[0].messages == 0 && quick[0].title.is_empty(), "{:?}", quick[0]);
    assert!(!ctx.summary_path().exists(), "nothing was read, so nothing was cached");
    // The same without the activity hint (a copied folder): the scan of every folder is bounded too.
    let hint = session::sessions_dir(ws.path()).join("activity");
    let kept = fs::read(&hint).unwrap();
    fs::remove_file(&hint).unwrap();
    let scanned = session::list(ws.path(), &opts).unwrap();
    assert!(scanned.len() == 1 && scanned[0].partial, "{scanned:?}");
    assert!(!ctx.summary_path().exists());
    fs::write(&hint, kept).unwrap();
    // The full list reads it (and caches it); then the quick list has it all within the budget.
    let full = session::list(ws.path(), &ListOptions::default()).unwrap();
    assert!(!full[0].partial && full[0].messages == 2 && full[0].title == "a big one");
    let quick = session::list(ws.path(), &opts).unwrap();
    assert!(!quick[0].partial && quick[0].messages == 2);
}
