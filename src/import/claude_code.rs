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
