//! A damaged log loses nothing it can read and stays visible; nothing under `.PseudoClaude/` is ever
//! followed out of the workspace. Through the real files on disk.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use pseudoclaude::message::Message;
use pseudoclaude::session::{self, Context, Error, ListOptions, RetentionOptions, Writer, WriterOptions};

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn sessions_dir(ws: &Path) -> std::path::PathBuf {
    let d = session::sessions_dir(ws);
    fs::create_dir_all(&d).expect("mkdir");
    d
}

/// Three exchanges; the first user line holds a raw 0xE9 (Latin-1 "é") inside its JSON string.
fn latin1_log() -> Vec<u8> {
    let mut log = b"{\"type\":\"message\",\"role\":\"user\",\"content\":\"caf".to_vec();
    log.extend_from_slice(b"\xe9 first question\",\"ts\":100,\"model\":\"model-one\"}\n");
    for (k, (role, text)) in
        [("assistant", "first answer"), ("user", "second"), ("assistant", "a2"), ("user", "third"), ("assistant", "a3")]
            .iter()
            .enumerate()
    {
        log.extend_from_slice(
            format!("{{\"type\":\"message\",\"role\":\"{role}\",\"content\":\"{text}\",\"ts\":{}}}\n", 101 + k)
                .as_bytes(),
        );
    }
    log
}

#[test]
fn a_line_with_invalid_utf8_is_restored_and_reported_not_skipped() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).expect("ctx");
    fs::write(&ctx.jsonl_path, latin1_log()).expect("write");
    let before = fs::read(&ctx.jsonl_path).expect("read");
    let l = session::load(&ctx).expect("load");
    assert_eq!(l.messages.len(), 6, "{}", l.damage_report());
    assert_eq!(l.messages[0].content, "caf\u{FFFD} first question");
    assert_eq!((l.title.as_str(), l.model.as_str()), ("caf\u{FFFD} first question", "model-one"));
    assert_eq!((l.repaired.clone(), l.bad_lines.clone()), (vec![1], vec![]));
    assert!(l.damaged());
    assert!(l.damage_report().contains("repaired 1 line(s)"), "{}", l.damage_report());
    let info = session::list::info(&ctx).expect("info");
    assert_eq!((info.messages, info.repaired, info.bad_lines, info.damaged), (6, 1, 0, true));
    assert_eq!(info.title, l.title);
    assert_eq!(info.model, "model-one");
    // Listing again reads the cache: the same answer.
    assert_eq!(session::list::info(&ctx).expect("info"), info);
    assert_eq!(fs::read(&ctx.jsonl_path).expect("read"), before, "a load never rewrites the log");
}

#[test]
fn a_huge_line_with_invalid_utf8_is_repaired_while_it_streams() {
    let ws = workspace();
    let ctx = Context::new(ws.path()).expect("ctx");
    let mut log = b"{\"role\":\"user\",\"content\":\"".to_vec();
    log.extend(std::iter::repeat_n(b'x', 3 << 20));
    log.extend_from_slice(b"\xe9\xff\xc3\",\"ts\":5}\n{\"role\":\"assistant\",\"content\":\"ok\"}\n");
    fs::write(&ctx.jsonl_path, &log).expect("write");
    let l = session::load(&ctx).expect("load");
    assert_eq!(l.repaired, [1]);
    assert_eq!(l.messages.len(), 2);
    assert!(l.messages[0].content.ends_with("x\u{FFFD}\u{FFFD}\u{FFFD}"));
}

#[test]
fn a_garbage_only_log_is_listed_as_damaged_and_an_empty_folder_is_not() {
    let ws = workspace();
    let garbage = Context::new(ws.path()).expect("ctx");
    fs::write(&garbage.jsonl_path, b"not json\n\x00\x01\x02\n{\"half\":\n").expect("write");
    let torn = Context::new(ws.path()).expect("ctx");
    fs::write(&torn.jsonl_path, b"garbage without a newline").expect("write");
    let _empty = Context::new(ws.path()).expect("ctx");
    for limit in [None, Some(10)] {
        let all = session::list(ws.path(), &ListOptions { limit, ..Default::default() }).expect("list");
        let by_id: BTreeMap<_, _> = all.iter().map(|s| (s.id.clone(), s)).collect();
        assert_eq!(by_id.len(), 2, "{all:?}");
        let g = by_id[&garbage.id];
        assert_eq!((g.messages, g.bad_lines, g.damaged), (0, 3, true));
        let t = by_id[&torn.id];
        assert_eq!((t.messages, t.torn_tail_bytes, t.damaged), (0, 25, true));
    }
}

/// A folder outside the workspace, with a log in it, and a way to prove it was never touched.
struct Outside {
    dir: tempfile::TempDir,
}

impl Outside {
    fn new() -> Outside {
        let dir = tempfile::tempdir().expect("outside");
        let line =
            |r: &str, c: &str| format!("{{\"type\":\"message\",\"role\":\"{r}\",\"content\":\"{c}\",\"ts\":1}}\n");
        fs::write(dir.path().join("conversation.jsonl"), line("user", "outside secret") + &line("assistant", "a"))
            .expect("write");
        fs::create_dir(dir.path().join("tool-results")).expect("mkdir");
        Outside { dir }
    }

    fn files(&self) -> BTreeMap<String, Vec<u8>> {
        fs::read_dir(self.dir.path())
            .expect("read_dir")
            .flatten()
            .map(|e| {
                let data = fs::read(e.path()).unwrap_or_else(|_| b"<dir>".to_vec());
                (e.file_name().to_string_lossy().into_owned(), data)
            })
            .collect()
    }
}

fn assert_refused<T: std::fmt::Debug>(what: &str, r: session::Result<T>, path: &Path) {
    let err = r.expect_err(what);
    assert!(matches!(err, Error::Refused { .. }), "{what}: {err}");
    assert!(err.to_string().contains(&path.display().to_string()), "{what}: {err}");
}

#[test]
fn a_symlinked_session_folder_is_refused_everywhere_and_nothing_outside_changes() {
    let ws = workspace();
    let sessions = sessions_dir(ws.path());
    let outside = Outside::new();
    let before = outside.files();
    let id = "20260101-000000-abcd";
    symlink(outside.dir.path(), sessions.join(id)).expect("symlink");
    // The activity hint names it, as a writer of the linked folder would have left it.
    fs::write(sessions.join("activity"), format!("{id} 1\n")).expect("activity");
    let ctx = Context::for_id(ws.path(), id).expect("ctx");

    assert_refused("open", Context::open(ws.path(), id), &ctx.dir);
    assert_refused("load", session::load(&ctx), &ctx.dir);
    assert_refused("info", session::list::info(&ctx), &ctx.dir);
    assert_refused("writer", Writer::open(&ctx, WriterOptions::default()), &ctx.dir);
    assert_refused("remove", session::retention::remove(&ctx), &ctx.dir);
    for limit in [None, Some(1)] {
        let all = session::list(ws.path(), &ListOptions { limit, include_empty: true, ..Default::default() });
        assert!(all.expect("list").is_empty(), "limit {limit:?}");
    }
    let removed = session::cleanup(ws.path(), &RetentionOptions { days: 1, keep: None, now: i64::MAX / 2 });
    assert!(removed.expect("cleanup").is_empty());
    assert_eq!(outside.files(), before, "nothing created, written or removed outside");
    assert!(sessions.join(id).is_symlink());
}

#[test]
fn a_symlinked_log_is_refused_everywhere_and_never_written_through() {
    let ws = workspace();
    let outside = Outside::new();
    let before = outside.files();
    let ctx = Context::new(ws.path()).expect("ctx");
    symlink(outside.dir.path().join("conversation.jsonl"), &ctx.jsonl_path).expect("symlink");

    assert_refused("load", session::load(&ctx), &ctx.jsonl_path);
    assert_refused("info", session::list::info(&ctx), &ctx.jsonl_path);
    assert_refused("writer", Writer::open(&ctx, WriterOptions::default()), &ctx.jsonl_path);
    assert_refused("remove", session::retention::remove(&ctx), &ctx.jsonl_path);
    assert!(session::list(ws.path(), &ListOptions::default()).expect("list").is_empty());
    let removed = session::cleanup(ws.path(), &RetentionOptions { days: 1, keep: None, now: i64::MAX / 2 });
    assert!(removed.expect("cleanup").is_empty());
    assert_eq!(outside.files(), before);
    assert!(ctx.jsonl_path.is_symlink(), "the link itself is left for the user");
}

#[test]
fn linked_lock_summary_activity_and_spill_folder_are_never_written_through() {
    let ws = workspace();
    let outside = Outside::new();
    let ctx = Context::new(ws.path()).expect("ctx");
    let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
    w.append(&Message::user("hello")).expect("append");
    w.close().expect("close");
    let sessions = ctx.dir.parent().expect("sessions").to_path_buf();
    fs::remove_file(sessions.join("activity")).expect("rm activity");
    symlink(outside.dir.path().join("conversation.jsonl"), sessions.join("activity")).expect("symlink");
    symlink(outside.dir.path().join("conversation.jsonl"), ctx.summary_path()).expect("symlink");
    fs::remove_dir(&ctx.spill_dir).expect("rm tool-results");
    symlink(outside.dir.path().join("tool-results"), &ctx.spill_dir).expect("symlink");
    let before = outside.files();

    // The list still reads the session; its cache goes to a real file in place of the link.
    let all = session::list(ws.path(), &ListOptions { limit: Some(1), ..Default::default() }).expect("list");
    assert_eq!(all.len(), 1);
    assert!(ctx.summary_path().is_file() && !ctx.summary_path().is_symlink());
    // The writer still writes the log (the activity hint is best effort), but a large result cannot
    // be spilled through the linked folder.
    let w = Writer::open(&ctx, WriterOptions { spill_threshold: 10, ..Default::default() }).expect("writer");
    w.append(&Message::assistant("more")).expect("append");
    let big = Message::tool_result("c1", "y".repeat(100), false);
    assert_refused("spill", w.append(&big), &ctx.spill_dir);
    drop(w);
    fs::remove_file(ctx.lock_path()).expect("rm lock");
    symlink(outside.dir.path().join("conversation.jsonl"), ctx.lock_path()).expect("symlink");
    assert_refused("lock", Writer::open(&ctx, WriterOptions::default()), &ctx.lock_path());
    assert_eq!(session::lock::holder(&ctx), None);
    assert_eq!(outside.files(), before);
}

#[test]
fn a_linked_dot_pseudoclaude_is_refused_before_anything_is_created() {
    let ws = workspace();
    let outside = tempfile::tempdir().expect("outside");
    symlink(outside.path(), ws.path().join(session::ROOT_DIR_NAME)).expect("symlink");
    assert_refused("new", Context::new(ws.path()), &ws.path().join(session::ROOT_DIR_NAME));
    assert_eq!(fs::read_dir(outside.path()).expect("read").count(), 0);
}
