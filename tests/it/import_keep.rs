//! Other agents' sessions kept in our store (issue 46, "Kept"): Claude Code transcripts in its format, copied by
//! `import::keep::keep`, then grown, truncated, rewritten, deleted and continued; the copy never loses a message.
//! (The real Claude Code CLI writes them in `tests/e2e/test_keep.py`.)

use std::fs;
use std::path::{Path, PathBuf};

use pseudoclaude::import::{self, Homes, keep};
use pseudoclaude::message::Message;
use pseudoclaude::session::{self, Context, Writer, WriterOptions};
use serde_json::{Value, json};

fn record(kind: &str, uuid: &str, parent: Option<&str>, cwd: &Path, second: u32, message: Value) -> Value {
    json!({
        "type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "k1", "cwd": cwd,
        "gitBranch": "main", "version": "2.0.0", "isSidechain": false,
        "timestamp": format!("2026-11-30T10:00:{second:02}.000Z"), "message": message,
    })
}

/// A turn: the prompt `n`, then an answer with a call, its result and the final answer.
fn turn(cwd: &Path, n: u32, parent: Option<&str>) -> Vec<Value> {
    let (u, a, r, f) = (format!("u{n}"), format!("a{n}"), format!("r{n}"), format!("f{n}"));
    let t = format!("t{n}");
    vec![
        record("user", &u, parent, cwd, n * 4, json!({"role": "user", "content": format!("question {n}")})),
        record(
            "assistant",
            &a,
            Some(&u),
            cwd,
            n * 4 + 1,
            json!({"id": format!("m{n}"), "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": t, "name": "Read", "input": {"file_path": "a.rs"}}]}),
        ),
        record(
            "user",
            &r,
            Some(&a),
            cwd,
            n * 4 + 2,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": format!("content {n}")}]}),
        ),
        record(
            "assistant",
            &f,
            Some(&r),
            cwd,
            n * 4 + 3,
            json!({"id": format!("n{n}"), "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": format!("answer {n}")}]}),
        ),
    ]
}

fn transcript(cwd: &Path, turns: u32) -> String {
    let mut parent: Option<String> = None;
    let mut out = String::new();
    for n in 1..=turns {
        for r in turn(cwd, n, parent.as_deref()) {
            out.push_str(&format!("{r}\n"));
        }
        parent = Some(format!("f{n}"));
    }
    out
}

struct Setup {
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
    path: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let cws = ws.path().canonicalize().unwrap();
        let path = home.path().join("projects").join(import::claude_code::folder_name(&cws)).join("k1.jsonl");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        Setup { ws, home, path }
    }
    fn cwd(&self) -> PathBuf {
        self.ws.path().canonicalize().unwrap()
    }
    fn homes(&self) -> Homes {
        Homes { claude: Some(self.home.path().to_path_buf()), ..Default::default() }
    }
    fn write(&self, text: &str) {
        fs::write(&self.path, text).unwrap();
        // a new mtime even within the file system's time granularity
        let t = std::time::SystemTime::now()
            + std::time::Duration::from_secs(fs::read(&self.path).unwrap().len() as u64 % 97);
        fs::File::options().write(true).open(&self.path).unwrap().set_modified(t).unwrap();
    }
    fn keep(&self) -> keep::Report {
        keep::keep(self.ws.path(), &self.homes())
    }
    fn copy(&self) -> (String, Vec<Message>) {
        let ids = session::list::ids(self.ws.path()).unwrap();
        assert_eq!(ids.len(), 1, "one copy: {ids:?}");
        let loaded = session::load(&Context::open(self.ws.path(), &ids[0]).unwrap()).unwrap();
        (ids[0].clone(), loaded.messages)
    }
}

fn texts(h: &[Message]) -> Vec<String> {
    h.iter()
        .map(|m| match &m.tool_result {
            Some(r) => format!("result {}", r.tool_call_id),
            None if !m.tool_calls.is_empty() => format!("call {}", m.tool_calls[0].id),
            None => m.content.clone(),
        })
        .collect()
}

#[test]
fn a_kept_copy_follows_its_original_and_is_not_written_again_when_nothing_changed() {
    let s = Setup::new();
    s.write(&transcript(&s.cwd(), 2));
    let r = s.keep();
    assert_eq!((r.copied, r.updated, r.failed.len()), (1, 0, 0), "{r:?}");
    let (id, h) = s.copy();
    assert_eq!(texts(&h)[..4], ["question 1", "call t1", "result t1", "answer 1"]);
    assert_eq!(h.len(), 8);
    let log = fs::read_to_string(Context::open(s.ws.path(), &id).unwrap().jsonl_path).unwrap();
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(first["imported_from"]["kept"], true);
    assert_eq!(first["imported_from"]["id"], "k1");

    let r = s.keep();
    assert_eq!((r.copied, r.updated, r.unchanged), (0, 0, 1), "{r:?}");
    assert_eq!(fs::read_to_string(Context::open(s.ws.path(), &id).unwrap().jsonl_path).unwrap(), log);

    s.write(&transcript(&s.cwd(), 3));
    let r = s.keep();
    assert_eq!((r.copied, r.updated), (0, 1), "{r:?}");
    let (same, h) = s.copy();
    assert_eq!(same, id);
    assert_eq!(texts(&h)[8..], ["question 3", "call t3", "result t3", "answer 3"]);
    // appended, never rewritten: the old log is the new one's beginning
    let grown = fs::read_to_string(Context::open(s.ws.path(), &id).unwrap().jsonl_path).unwrap();
    assert!(grown.starts_with(&log));
}

#[test]
fn a_truncated_or_rewound_original_never_takes_a_message_from_the_copy() {
    let s = Setup::new();
    s.write(&transcript(&s.cwd(), 3));
    s.keep();
    let (_, before) = s.copy();
    assert_eq!(before.len(), 12);

    // truncated (a rewind that has not gone on yet, a file cut short): nothing lost
    s.write(&transcript(&s.cwd(), 1));
    let r = s.keep();
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(s.copy().1, before);

    // then the agent went on from there with another question: appended after what the copy held
    let mut text = transcript(&s.cwd(), 1);
    text.push_str(&format!(
        "{}\n",
        record("user", "x1", Some("f1"), &s.cwd(), 50, json!({"role": "user", "content": "another way"}))
    ));
    text.push_str(&format!(
        "{}\n",
        record(
            "assistant",
            "x2",
            Some("x1"),
            &s.cwd(),
            51,
            json!({"id": "mx", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "the other way"}]})
        )
    ));
    s.write(&text);
    s.keep();
    let (_, after) = s.copy();
    assert_eq!(after[..12], before[..]);
    assert_eq!(texts(&after[12..]), ["another way", "the other way"]);

    // and the original deleted: the copy is all there is, whole
    fs::remove_file(&s.path).unwrap();
    let r = s.keep();
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(s.copy().1, after);
}

#[test]
fn an_answer_read_while_it_was_written_is_completed_in_place() {
    let s = Setup::new();
    let cwd = s.cwd();
    let mut text = transcript(&cwd, 1);
    let half = record(
        "assistant",
        "a9",
        Some("f1"),
        &cwd,
        40,
        json!({"id": "m9", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "Let me look"}]}),
    );
    text.push_str(&format!(
        "{}\n",
        record("user", "u9", Some("f1"), &cwd, 39, json!({"role": "user", "content": "look"}))
    ));
    text.push_str(&format!("{half}\n"));
    s.write(&text);
    s.keep();
    assert_eq!(texts(&s.copy().1)[4..], ["look", "Let me look"]);
    // the same response's next line: its call (Claude Code writes one record per content block)
    text.push_str(&format!(
        "{}\n",
        record(
            "assistant",
            "a10",
            Some("a9"),
            &cwd,
            40,
            json!({"id": "m9", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": "t9", "name": "Read", "input": {}}]})
        )
    ));
    text.push_str(&format!(
        "{}\n",
        record(
            "user",
            "r10",
            Some("a10"),
            &cwd,
            41,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]})
        )
    ));
    s.write(&text);
    let r = s.keep();
    assert_eq!(r.updated, 1, "{r:?}");
    let (_, h) = s.copy();
    assert_eq!(h.len(), 7, "{:?}", texts(&h));
    assert_eq!(h[5].content, "Let me look");
    assert_eq!(h[5].tool_calls.len(), 1);
    assert_eq!(h[6].tool_result.as_ref().unwrap().tool_call_id, "t9");
}

#[test]
fn a_copy_continued_in_a_chat_is_left_alone_and_an_import_of_its_original_is_the_copy() {
    let s = Setup::new();
    s.write(&transcript(&s.cwd(), 1));
    s.keep();
    let (id, _) = s.copy();
    // an import of the original is the kept copy, not a second session
    let imported = import::import(s.ws.path(), &s.path).unwrap();
    assert_eq!((imported.id.as_str(), imported.existing), (id.as_str(), true));
    // a title set by the user does not stop the copy from following
    session::meta::append(&Context::open(s.ws.path(), &id).unwrap(), session::meta::title_entry("mine").unwrap())
        .unwrap();
    s.write(&transcript(&s.cwd(), 2));
    assert_eq!(s.keep().updated, 1);
    // a chat writes to it: from then on its log is the chat's
    let w = Writer::open(&Context::open(s.ws.path(), &id).unwrap(), WriterOptions::default()).unwrap();
    w.append(&Message::user("ours now")).unwrap();
    w.close().unwrap();
    s.write(&transcript(&s.cwd(), 3));
    let r = s.keep();
    assert_eq!((r.continued, r.updated, r.copied), (1, 0, 0), "{r:?}");
    assert_eq!(s.copy().1.last().unwrap().content, "ours now");
}

#[test]
fn a_deleted_copy_is_made_again_and_a_lost_map_is_rebuilt_from_the_logs() {
    let s = Setup::new();
    s.write(&transcript(&s.cwd(), 1));
    s.keep();
    let (id, _) = s.copy();
    fs::remove_file(session::sessions_dir(s.ws.path()).join(keep::MAP_FILE_NAME)).unwrap();
    keep::forget();
    s.write(&transcript(&s.cwd(), 2));
    let r = s.keep();
    assert_eq!((r.copied, r.updated), (0, 1), "{r:?}");
    assert_eq!(s.copy().0, id);
    fs::remove_dir_all(session::sessions_dir(s.ws.path()).join(&id)).unwrap();
    let r = s.keep();
    assert_eq!(r.copied, 1, "{r:?}");
    assert_eq!(s.copy().1.len(), 8);
}

#[test]
fn checkhealth_reads_claude_codes_cleanup_period() {
    let s = Setup::new();
    s.write(&transcript(&s.cwd(), 1));
    let claude = keep::stores(s.ws.path(), &s.homes()).into_iter().find(|st| st.agent == "claude").unwrap();
    assert_eq!((claude.found, claude.sessions, claude.deletes_after_days), (true, 1, Some(30.0)));
    fs::write(s.home.path().join("settings.json"), r#"{"cleanupPeriodDays": 7}"#).unwrap();
    let claude = keep::stores(s.ws.path(), &s.homes()).into_iter().find(|st| st.agent == "claude").unwrap();
    assert_eq!(claude.deletes_after_days, Some(7.0));
    assert!(claude.retention.contains("cleanupPeriodDays = 7"), "{}", claude.retention);
}

#[test]
fn checkhealth_reads_geminis_session_retention_as_gemini_merges_it() {
    let s = Setup::new();
    let gemini = s.home.path().join(".gemini");
    fs::create_dir_all(gemini.join("tmp")).unwrap();
    let homes = Homes { gemini: Some(gemini.clone()), ..Default::default() };
    let store = |user: Option<&str>, workspace: Option<&str>| {
        for (dir, text) in [(gemini.clone(), user), (s.ws.path().join(".gemini"), workspace)] {
            fs::create_dir_all(&dir).unwrap();
            let _ = fs::remove_file(dir.join("settings.json"));
            if let Some(t) = text {
                fs::write(dir.join("settings.json"), t).unwrap();
            }
        }
        keep::stores(s.ws.path(), &homes).into_iter().find(|st| st.agent == "gemini").unwrap()
    };
    let unset = store(None, None);
    assert_eq!((unset.found, unset.deletes_after_days), (true, Some(30.0)));
    assert!(unset.retention.contains("unset"), "{}", unset.retention);
    let r = |v: &str| format!(r#"{{"general": {{"sessionRetention": {v}}}}}"#);
    let two_weeks = store(Some(&r(r#"{"maxAge": "2w"}"#)), None);
    assert_eq!(two_weeks.deletes_after_days, Some(14.0));
    assert!(two_weeks.deletes.unwrap().contains("older than 14 days"));
    // the workspace's settings override the user's, key by key: the user's maxAge stays, the clean-up is off
    let off = store(Some(&r(r#"{"maxAge": "2w"}"#)), Some(&r(r#"{"enabled": false}"#)));
    assert_eq!((off.deletes, off.deletes_after_days), (None, None));
    assert!(off.retention.contains("enabled = false"), "{}", off.retention);
    // what Gemini refuses turns its clean-up off: a period it cannot read, one under minRetention
    for refused in [r#"{"maxAge": "30 days"}"#, r#"{"maxAge": "12h"}"#, r#"{"maxAge": "", "maxCount": 0}"#] {
        let st = store(Some(&r(refused)), None);
        assert_eq!(st.deletes, None, "{refused}: {}", st.retention);
    }
    let count = store(Some(&r(r#"{"maxAge": null, "maxCount": 50}"#)), None);
    assert_eq!(count.deletes_after_days, None);
    assert!(count.deletes.unwrap().contains("all but the newest 50"));
}
