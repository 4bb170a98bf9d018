//! Claude Code transcripts: `<config>/projects/<workspace path, non-alphanumerics as "-">/<uuid>.jsonl`.
//!
//! The main thread is the non-sidechain `user`/`assistant` records in file order. `parentUuid` links form a
//! tree, but tool calls branch it too (progress records hang off a `tool_use` line, its result as well), so a
//! walk from the newest leaf loses calls; a branch is abandoned only when a new prompt (not a tool result)
//! attaches to a parent that already has a continuation: a rewind. Assistant lines sharing `message.id` are one
//! API response; each `tool_use` finds its `tool_result` by id. A `compact_boundary` starts a new segment whose
//! first message is the summary the tool resumed from (`isCompactSummary`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Conversation, IMAGE_NOTE, is_injected, strip_injected, unix_time};
use crate::message::{Message, ToolCall};
use crate::session::{self, Result};

/// The folder name Claude Code gives a workspace: every character that is not a letter or digit as `-`.
pub fn folder_name(workspace: &Path) -> String {
    workspace.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// The transcripts that may belong to `workspace` (the folder of the workspace and of folders below it; the
/// name is lossy, so each is checked against its `cwd` when read). Subagents' files are not conversations.
pub fn transcripts(config: &Path, workspace: &Path) -> Vec<PathBuf> {
    let projects = config.join("projects");
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let prefix = folder_name(&ws);
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(&projects) else { return out };
    for d in dirs.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(d.path()) else { continue };
        for f in files.flatten() {
            let fname = f.file_name().to_string_lossy().into_owned();
            // the entry's type from the directory itself (no `stat` per file: a list stats each once, later)
            let file = f.file_type().is_ok_and(|t| t.is_file() || t.is_symlink() && f.path().is_file());
            if fname.ends_with(".jsonl") && !fname.starts_with("agent-") && file {
                out.push(f.path());
            }
        }
    }
    // in no order: the list sorts by time (a sort of 10,000 paths, component by component, was a tenth of a list)
    out
}

struct Record {
    uuid: String,
    parent: Option<String>,
    v: Value,
}

/// Reads one transcript.
pub fn read(path: &Path) -> Result<Conversation> {
    let bytes = std::fs::read(path).map_err(session::io_err("cannot read", path))?;
    Ok(parse(&String::from_utf8_lossy(&bytes), path))
}

/// The transcript `text` (of the file at `path`, whose name is the id when no record gives one). The list also
/// parses just a transcript's head and tail with it, for the names, title and time.
pub fn parse(text: &str, path: &Path) -> Conversation {
    let mut c = Conversation::default();
    let mut title: Option<String> = None;
    let mut summary_title: Option<String> = None;
    let mut segments: Vec<Vec<Record>> = vec![Vec::new()];
    let mut unknown: HashMap<String, usize> = HashMap::new();
    for v in super::json_records(text, &mut c.notes) {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(t) = v.get("timestamp") {
            c.modified = c.modified.max(unix_time(Some(t)));
        }
        match kind {
            "user" | "assistant" => {}
            "custom-title" => {
                title = v.get("customTitle").and_then(Value::as_str).map(str::to_string).or(title);
                continue;
            }
            "summary" => {
                summary_title = v.get("summary").and_then(Value::as_str).map(str::to_string);
                continue;
            }
            "system" => {
                if v.get("subtype").and_then(Value::as_str) == Some("compact_boundary") {
                    segments.push(Vec::new());
                }
                continue;
            }
            // `last-prompt`: the prompt box's text, kept for the next start (Claude Code 2.1)
            "progress" | "file-history-snapshot" | "queue-operation" | "last-prompt" => continue,
            other => {
                *unknown.entry(other.to_string()).or_default() += 1;
                continue;
            }
        }
        if v.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if c.id.is_empty()
            && let Some(s) = v.get("sessionId").and_then(Value::as_str)
        {
            c.id = s.to_string();
        }
        if c.cwd.is_none() {
            c.cwd = v.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        }
        if let Some(b) = v.get("gitBranch").and_then(Value::as_str).filter(|b| !b.is_empty()) {
            c.branch = Some(b.to_string());
        }
        if kind == "assistant"
            && let Some(m) = v.pointer("/message/model").and_then(Value::as_str).filter(|m| !m.starts_with('<'))
        {
            c.model = m.to_string();
        }
        let uuid = v.get("uuid").and_then(Value::as_str).unwrap_or("").to_string();
        let parent = v.get("parentUuid").and_then(Value::as_str).map(str::to_string);
        segments.last_mut().expect("one segment at least").push(Record { uuid, parent, v });
    }
    for (kind, n) in &unknown {
        c.notes.push(format!("{n} record(s) of unknown type {kind:?}: left out"));
    }
    if c.cwd.is_none() {
        c.notes.push("no record names its folder (cwd): the transcript belongs to no workspace".into());
    }
    if c.id.is_empty() {
        c.id = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    }
    c.title = title.or(summary_title);
    let mut blocks = HashMap::new();
    c.segments = segments.into_iter().map(|s| convert(main_thread(s), &mut blocks)).collect();
    // A segment left empty by a compaction right at the start is no history.
    if c.segments.len() > 1 && c.segments[0].is_empty() {
        c.segments.remove(0);
    }
    for (kind, n) in blocks {
        c.notes.push(format!("{n} content block(s) of unknown type {kind:?}: left out"));
    }
    c
}

fn is_prompt(v: &Value) -> bool {
    if v.get("type").and_then(Value::as_str) != Some("user") {
        return false;
    }
    match v.pointer("/message/content") {
        Some(Value::Array(blocks)) => {
            !blocks.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        }
        _ => true,
    }
}

/// The records of the branch the conversation went on with: a prompt attached to a parent that already has a
/// continuation abandons what followed that parent.
fn main_thread(records: Vec<Record>) -> Vec<Record> {
    let mut thread: Vec<Record> = Vec::new();
    let mut continued: HashSet<String> = HashSet::new();
    for r in records {
        if let Some(p) = &r.parent {
            if is_prompt(&r.v)
                && continued.contains(p)
                && let Some(at) = thread.iter().position(|t| &t.uuid == p)
            {
                for dropped in thread.drain(at + 1..) {
                    continued.remove(&dropped.uuid);
                }
            }
            continued.insert(p.clone());
        }
        thread.push(r);
    }
    thread
}

/// The thread as our messages: one assistant message per API response, each call followed by its result.
fn convert(thread: Vec<Record>, unknown: &mut HashMap<String, usize>) -> Vec<Message> {
    let mut results: HashMap<String, Message> = HashMap::new();
    for r in &thread {
        if let Some(Value::Array(blocks)) = r.v.pointer("/message/content") {
            for b in blocks.iter().filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")) {
                let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("").to_string();
                let is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                let mut m = Message::tool_result(id.clone(), result_text(b.get("content")), is_error);
                m.ts = unix_time(r.v.get("timestamp"));
                results.entry(id).or_insert(m);
            }
        }
    }
    let mut out: Vec<Message> = Vec::new();
    let mut response: Option<String> = None;
    for r in &thread {
        let ts = unix_time(r.v.get("timestamp"));
        let content = r.v.pointer("/message/content");
        if r.v.get("type").and_then(Value::as_str) == Some("assistant") {
            let id = r.v.pointer("/message/id").and_then(Value::as_str).map(str::to_string);
            let (text, calls) = assistant_blocks(content, unknown);
            if text.is_empty() && calls.is_empty() {
                continue;
            }
            let same = id.is_some() && id == response;
            let joinable = same && out.last().is_some_and(|m| m.role == crate::message::Role::Assistant);
            if joinable {
                let last = out.last_mut().expect("checked");
                if !text.is_empty() {
                    if !last.content.is_empty() {
                        last.content.push_str("\n\n");
                    }
                    last.content.push_str(&text);
                }
                last.tool_calls.extend(calls);
            } else {
                let mut m = Message::assistant_tool_calls(text, calls);
                m.ts = ts;
                out.push(m);
            }
            response = id;
            continue;
        }
        response = None;
        if r.v.get("isMeta").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let text = user_text(content, unknown);
        if !text.is_empty() {
            let mut m = Message::user(text);
            m.ts = ts;
            out.push(m);
        }
    }
    // Each call is followed by its result, wherever the result was in the file; a result answers one call.
    let mut paired = Vec::with_capacity(out.len());
    for m in out {
        let ids: Vec<String> = m.tool_calls.iter().map(|c| c.id.clone()).collect();
        paired.push(m);
        for id in ids {
            if let Some(r) = results.remove(&id) {
                paired.push(r);
            }
        }
    }
    paired
}

fn assistant_blocks(content: Option<&Value>, unknown: &mut HashMap<String, usize>) -> (String, Vec<ToolCall>) {
    let mut text = Vec::new();
    let mut calls = Vec::new();
    match content {
        Some(Value::String(s)) => text.push(s.clone()),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => text.extend(b.get("text").and_then(Value::as_str).map(str::to_string)),
                    "tool_use" | "server_tool_use" => calls.push(ToolCall::new(
                        b.get("id").and_then(Value::as_str).unwrap_or(""),
                        b.get("name").and_then(Value::as_str).unwrap_or(""),
                        b.get("input").cloned().unwrap_or(Value::Object(Default::default())),
                    )),
                    "thinking" | "redacted_thinking" => {}
                    "image" => text.push(IMAGE_NOTE.into()),
                    other => *unknown.entry(other.to_string()).or_default() += 1,
                }
            }
        }
        _ => {}
    }
    (text.join("\n\n").trim().to_string(), calls)
}

fn user_text(content: Option<&Value>, unknown: &mut HashMap<String, usize>) -> String {
    let mut parts = Vec::new();
    match content {
        Some(Value::String(s)) => parts.push(s.clone()),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => parts.extend(b.get("text").and_then(Value::as_str).map(str::to_string)),
                    "image" => parts.push(IMAGE_NOTE.into()),
                    "tool_result" => {}
                    other => *unknown.entry(other.to_string()).or_default() += 1,
                }
            }
        }
        _ => {}
    }
    let parts: Vec<String> =
        parts.iter().map(|p| strip_injected(p)).filter(|p| !p.is_empty() && !is_injected(p)).collect();
    parts.join("\n\n")
}

/// A tool result's content: a string, or text and image blocks.
fn result_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).unwrap_or("").to_string(),
                Some("image") => IMAGE_NOTE.to_string(),
                _ => String::new(),
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    /// One message as a line: its time, role, text, calls and result.
    fn show(m: &Message) -> String {
        if let Some(r) = &m.tool_result {
            let err = if r.is_error { " (error)" } else { "" };
            return format!("{} result {}{err}: {}", m.ts, r.tool_call_id, r.content);
        }
        let role = match &m.role {
            Role::Assistant => "assistant",
            Role::User => "user",
            Role::Other(o) => o,
        };
        let calls: String = m.tool_calls.iter().map(|c| format!(" [{} {} {}]", c.id, c.name, c.arguments)).collect();
        format!("{} {role}: {}{calls}", m.ts, m.content)
    }

    fn segments(c: &Conversation) -> Vec<Vec<String>> {
        c.segments.iter().map(|s| s.iter().map(show).collect()).collect()
    }

    fn parse_lines(lines: &[&str]) -> Conversation {
        parse(&(lines.join("\n") + "\n"), Path::new("/x/file-id.jsonl"))
    }

    /// The main thread of a session that went through the things Claude Code writes: a response split over lines,
    /// tool results of each form, a rewind, a sidechain, a meta line, images, a compaction, titles, records of no
    /// interest and of an unknown type.
    #[test]
    fn a_transcript_reads_as_its_main_thread_cut_at_the_compaction() {
        let c = parse_lines(&[
            r#"{"type":"file-history-snapshot","messageId":"x","snapshot":{"a":[1,2.5,{"b":null}]}}"#,
            r#"{"type":"queue-operation","operation":"enqueue","timestamp":"1970-01-01T00:00:01Z","content":"q"}"#,
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"fix the parser"},"uuid":"u1","timestamp":"1970-01-01T00:00:02Z","cwd":"/w","sessionId":"s1","gitBranch":"main"}"#,
            r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","model":"claude-a","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Looking."}]},"uuid":"a1","timestamp":"1970-01-01T00:00:03Z","sessionId":"s2","cwd":"/other","gitBranch":""}"#,
            r#"{"parentUuid":"a1","type":"assistant","message":{"id":"m1","model":"<synthetic>","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"path":"p.rs","n":[1,{"x":true}]}}]},"uuid":"a2","timestamp":"1970-01-01T00:00:04Z"}"#,
            r#"{"parentUuid":"a2","type":"assistant","message":{"id":"m1","content":[{"type":"redacted_thinking","data":"zz"},{"type":"server_tool_use","id":"t2","name":"web_search","input":{"query":"q"}},{"type":"tool_use","id":"t3","name":"Bash"},{"type":"tool_use","id":"t4","name":"Edit","input":null}]},"uuid":"a3","timestamp":"1970-01-01T00:00:05Z"}"#,
            r#"{"type":"progress","uuid":"p1","parentUuid":"a2","data":{"type":"hook"}}"#,
            r#"{"parentUuid":"a3","type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"line 1"},{"type":"image","source":{}},{"type":"other"},{"type":"text","text":""},{"type":"text","text":"line 2"}]}]},"uuid":"r2","timestamp":"1970-01-01T00:00:07Z"}"#,
            r#"{"parentUuid":"a2","type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"fn parse() {}"}]},"uuid":"r1","timestamp":"1970-01-01T00:00:06Z"}"#,
            r#"{"parentUuid":"r2","type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t3","is_error":true,"content":"exit 1"},{"type":"tool_result","tool_use_id":"t4"},{"type":"tool_result","tool_use_id":"t1","content":"a second answer"},{"type":"text","text":"and a note"}]},"uuid":"r3","timestamp":"1970-01-01T00:00:08Z"}"#,
            r#"{"parentUuid":"r3","type":"assistant","message":{"id":"m2","model":"claude-b","content":[{"type":"text","text":"Wrong idea."}]},"uuid":"a4","timestamp":"1970-01-01T00:00:09Z"}"#,
            r#"{"parentUuid":"a4","type":"user","message":{"content":"go on"},"uuid":"u2","timestamp":"1970-01-01T00:00:10Z"}"#,
            // a rewind: a new prompt attached to r3, which a4 continued already
            r#"{"parentUuid":"r3","type":"user","message":{"content":[{"type":"text","text":"no, rename it"},{"type":"image","source":{"type":"base64","data":"AAAA"}}]},"uuid":"u3","timestamp":"1970-01-01T00:00:11Z","gitBranch":"feature"}"#,
            r#"{"parentUuid":"u3","type":"assistant","message":{"id":"m3","content":"Renamed."},"uuid":"a5","timestamp":"1970-01-01T00:00:12Z"}"#,
            r#"{"parentUuid":"a5","type":"assistant","isSidechain":true,"message":{"id":"m9","model":"claude-side","content":[{"type":"text","text":"subagent chatter"}]},"uuid":"sc1","timestamp":"1970-01-01T00:00:13Z","gitBranch":"side"}"#,
            r#"{"parentUuid":"a5","type":"user","isMeta":true,"message":{"content":"<local-command-stdout>ok</local-command-stdout>"},"uuid":"m1u","timestamp":"1970-01-01T00:00:14Z"}"#,
            r#"{"parentUuid":"a5","type":"user","message":{"content":"<command-name>/clear</command-name>"},"uuid":"inj","timestamp":"1970-01-01T00:00:15Z"}"#,
            r#"{"type":"system","subtype":"compact_boundary","uuid":"cb","parentUuid":null,"logicalParentUuid":"a5","timestamp":"1970-01-01T00:00:16Z"}"#,
            r#"{"parentUuid":"cb","type":"user","isCompactSummary":true,"message":{"content":"This session is being continued: renamed."},"uuid":"s1u","timestamp":"1970-01-01T00:00:17Z"}"#,
            r#"{"parentUuid":"s1u","type":"user","message":{"content":[{"type":"text","text":"<system-reminder>be nice</system-reminder>and now the docs"},{"type":"text","text":"<system-reminder>only this</system-reminder>"},{"type":"image","source":{}}]},"uuid":"u4","timestamp":"1970-01-01T00:00:18Z"}"#,
            r#"{"parentUuid":"u4","type":"assistant","message":{"id":"m4","model":"claude-c","content":[{"type":"text","text":"  "},{"type":"image","source":{}},{"type":"text","text":"Done. "}]},"uuid":"a6","timestamp":"1970-01-01T00:00:19Z"}"#,
            r#"{"type":"system","subtype":"turn_duration","timestamp":"1970-01-01T00:00:20Z"}"#,
            r#"{"type":"brand-new-record","uuid":"z"}"#,
            r#"{"type":"brand-new-record"}"#,
            r#"{"type":"summary","summary":"A summary","leafUuid":"a6"}"#,
            r#"{"type":"custom-title","customTitle":"Parser rename","sessionId":"s1"}"#,
            r#"{"type":"custom-title","customTitle":7}"#,
            r#"{"type":"last-prompt","lastPrompt":"draft","timestamp":"1970-01-01T00:00:21Z"}"#,
        ]);
        let image = IMAGE_NOTE;
        assert_eq!(
            segments(&c),
            vec![
                vec![
                    "2 user: fix the parser".to_string(),
                    r#"3 assistant: Looking. [t1 Read {"path":"p.rs","n":[1,{"x":true}]}] [t2 web_search {"query":"q"}] [t3 Bash {}] [t4 Edit null]"#.into(),
                    "6 result t1: fn parse() {}".into(),
                    format!("7 result t2: line 1\n{image}\nline 2"),
                    "8 result t3 (error): exit 1".into(),
                    "8 result t4: ".into(),
                    "8 user: and a note".into(),
                    format!("11 user: no, rename it\n\n{image}"),
                    "12 assistant: Renamed.".into(),
                ],
                vec![
                    "17 user: This session is being continued: renamed.".to_string(),
                    format!("18 user: and now the docs\n\n{image}"),
                    format!("19 assistant: {image}\n\nDone."),
                ],
            ]
        );
        assert_eq!(c.id, "s1");
        assert_eq!(c.cwd.as_deref(), Some(Path::new("/w")));
        assert_eq!(c.branch.as_deref(), Some("feature"));
        assert_eq!(c.model, "claude-c");
        assert_eq!(c.title.as_deref(), Some("Parser rename"));
        assert_eq!(c.modified, 21);
        assert_eq!(c.notes, vec![r#"2 record(s) of unknown type "brand-new-record": left out"#.to_string()]);
        let restored: Vec<String> = c.restored().iter().map(show).collect();
        assert_eq!(restored, segments(&c)[1]);
    }

    /// Lines that are not JSON, or JSON of another shape than Claude Code writes, are left out with a note, and a
    /// field of the wrong type counts as missing: nothing else of the file is lost.
    #[test]
    fn damaged_lines_and_fields_of_the_wrong_type_are_left_out_with_a_note() {
        let c = parse_lines(&[
            "not json at all",
            r#"{"type":"user","uuid":"x""#,
            "",
            "   ",
            "5",
            r#""a string""#,
            "[1,2]",
            "null",
            r#"{"type":5}"#,
            r#"{"type":"user","uuid":5,"parentUuid":7,"sessionId":5,"cwd":7,"gitBranch":9,"timestamp":12,"message":5}"#,
            r#"{"type":"user","uuid":"u0","parentUuid":null,"message":[{"content":"in an array"}],"timestamp":"not a time"}"#,
            r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","cwd":"/w","timestamp":"1970-01-01T00:00:10Z","message":{"content":{}}}"#,
            r#"{"type":"user","uuid":"u2","parentUuid":"u1","timestamp":"1970-01-01T00:00:11Z","isSidechain":"true","isMeta":1,"message":{"content":"hello"}}"#,
            r#"{"type":"assistant","uuid":"a1","parentUuid":"u2","timestamp":"1970-01-01T00:00:12Z","message":{"id":5,"model":5,"content":[{"type":5},{"type":"text","text":5},{"type":"text","text":"hi"},{"type":"tool_use","id":5,"name":null},7,"str",[{"type":"text"}],{"text":"untyped"}]}}"#,
            r#"{"type":"assistant","uuid":"a2","parentUuid":"a1","timestamp":"1970-01-01T00:00:13Z","message":{"id":5,"content":[{"type":"text","text":"not joined"}]}}"#,
            r#"{"type":"assistant","uuid":"a3","parentUuid":"a2","timestamp":12,"message":{"id":"m","model":"<synthetic>","content":7}}"#,
            r#"{"type":"user","uuid":"r1","parentUuid":"a3","timestamp":"1970-01-01T00:00:14+01:00","message":{"content":[{"type":"tool_result","tool_use_id":"","content":5,"is_error":"yes"},{"type":"tool_result","tool_use_id":7,"content":{"text":"x"}},{"type":"tool_result","content":[5,"s",{"type":"text","text":7},{"type":"text","text":"kept"}]}]}}"#,
            r#"{"type":"assistant","uuid":"a4","parentUuid":"r1","timestamp":"1970-01-01T00:00:15.5Z","message":{"content":[{"type":"tool_use","id":"t9","name":"n","input":"a string"}]}}"#,
            r#"{"type":"user","uuid":"r2","parentUuid":"a4","timestamp":"1969-12-31T23:59:00Z","message":{"content":[{"type":"tool_result","tool_use_id":"t9","is_error":false,"content":[]}]}}"#,
            r#"{"type":"summary","summary":"first"}"#,
            r#"{"type":"summary","summary":5}"#,
            r#"{"type":"system","subtype":5}"#,
            r#"{"type":"user","uuid":"late","parentUuid":"r2","message":{"content":"the end"}}"#,
            "{broken",
        ]);
        assert_eq!(
            segments(&c),
            vec![vec![
                "11 user: hello".to_string(),
                "12 assistant: hi [  {}]".into(),
                "-3586 result : ".into(),
                "13 assistant: not joined".into(),
                r#"15 assistant:  [t9 n "a string"]"#.into(),
                "-60 result t9: ".into(),
                "0 user: the end".into(),
            ]]
        );
        assert_eq!(
            c.notes,
            vec![
                "3 line(s) that are not JSON: left out".to_string(),
                r#"5 record(s) of unknown type "": left out"#.into(),
                r#"5 content block(s) of unknown type "": left out"#.into(),
            ]
        );
        assert_eq!((c.id.as_str(), c.cwd.as_deref(), c.branch.as_deref()), ("s", Some(Path::new("/w")), None));
        assert_eq!((c.model.as_str(), c.title.as_deref(), c.modified), ("", None, 15));
    }

    /// A compaction right at the start leaves no empty history; a last line cut short is said as such; without a
    /// folder or a session id the file's name is the id.
    #[test]
    fn a_cut_last_line_and_a_transcript_without_folder_or_id() {
        let c = parse(
            concat!(
                "{\"type\":\"system\",\"subtype\":\"compact_boundary\",\"timestamp\":\"1970-01-01T00:00:01Z\"}\r\n",
                "{\"type\":\"user\",\"uuid\":\"u1\",\"message\":{\"content\":\"after\"},\"timestamp\":\"1970-01-01T00:00:02Z\"}\n",
                "{\"type\":\"user\",\"uuid\":\"u2\",\"mess",
            ),
            Path::new("/x/file-id.jsonl"),
        );
        assert_eq!(segments(&c), vec![vec!["2 user: after".to_string()]]);
        assert_eq!(
            c.notes,
            vec![
                "the last line is cut short (the tool was still writing it): left out".to_string(),
                "no record names its folder (cwd): the transcript belongs to no workspace".into(),
            ]
        );
        assert_eq!((c.id.as_str(), c.modified), ("file-id", 2));
        let empty = parse("", Path::new("/x/e.jsonl"));
        assert_eq!((segments(&empty), empty.id.as_str()), (vec![Vec::<String>::new()], "e"));
    }

    /// What the JSON parser refuses (nesting too deep, a number out of range, a control character in a string)
    /// makes a line "not JSON" wherever it is in the line, and what it accepts (a key written twice: the last
    /// counts; escaped keys; its own raw-value form) reads as it always did.
    #[test]
    fn the_json_parsers_own_rules_decide_which_lines_are_json() {
        let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
        let lines = [
            format!(r#"{{"type":"user","uuid":"d","message":{{"content":"too deep"}},"x":{deep}}}"#),
            r#"{"type":"user","uuid":"n","message":{"content":"out of range"},"x":[1e999]}"#.into(),
            "{\"type\":\"user\",\"uuid\":\"c\",\"message\":{\"content\":\"control\"},\"x\":\"a\tb\"}".into(),
            r#"{"type":"user","uuid":"s","message":{"content":"lone surrogate"},"x":"\ud800"}"#.into(),
            r#"{"type":"user","uuid":"t","message":{"content":"trailing"}} x"#.into(),
            r#"{"type":"user","uuid":"k","message":{"content":"comma"},}"#.into(),
            format!(r#"{{"type":"user","uuid":"ok","message":{{"content":"deep enough"}},"x":{}}}"#, "[".repeat(100) + &"]".repeat(100)),
            r#"{"type":"assistant","type":"user","uuid":"dup","message":{"content":"first"},"message":{"content":"the last one"}}"#.into(),
            r#"{"typ\u0065":"user","uuid":"e","message":{"cont\u0065nt":"escaped \u00e9 keys \ud83d\ude00"}}"#.into(),
            r#"{"$serde_json::private::RawValue":"{\"type\":\"user\",\"uuid\":\"rv\",\"message\":{\"content\":\"raw\"}}"}"#.into(),
            r#"{"type":"user","uuid":"rv2","message":{"$serde_json::private::RawValue":"{\"content\":\"nested raw\"}"}}"#.into(),
            r#"{"type":"user","uuid":"rv3","message":{"content":"raw not first","$serde_json::private::RawValue":5}}"#.into(),
            r#"{"$serde_json::private::RawValue":5}"#.into(),
            "\u{3000}".into(),
        ];
        let c = parse(&(lines.join("\n") + "\n"), Path::new("/x/f.jsonl"));
        let read =
            ["deep enough", "the last one", "escaped \u{e9} keys \u{1f600}", "raw", "nested raw", "raw not first"];
        assert_eq!(segments(&c), vec![read.iter().map(|t| format!("0 user: {t}")).collect::<Vec<_>>()]);
        assert_eq!(
            c.notes,
            vec![
                "7 line(s) that are not JSON: left out".to_string(),
                "no record names its folder (cwd): the transcript belongs to no workspace".into(),
            ]
        );
    }

    /// Bytes that are not UTF-8 read as the replacement character: in a string they are kept so, elsewhere the line
    /// is not JSON.
    #[test]
    fn bytes_that_are_not_utf8_read_as_the_replacement_character() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        let mut bytes = br#"{"type":"user","uuid":"u1","cwd":"/w","message":{"content":"caf"#.to_vec();
        bytes.extend_from_slice(b"\xe9 au lait\"}}\n\xff{\"type\":\"user\"}\n");
        std::fs::write(&path, bytes).expect("write");
        let c = read(&path).expect("read");
        assert_eq!(segments(&c), vec![vec!["0 user: caf\u{fffd} au lait".to_string()]]);
        assert_eq!(c.notes, vec!["1 line(s) that are not JSON: left out".to_string()]);
    }
}
