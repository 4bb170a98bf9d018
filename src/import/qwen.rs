//! Qwen Code chats: `<qwen home>/projects/<workspace path, / as ->/chats/<sessionId>.jsonl`.
//!
//! Each line is a record `{uuid, parentUuid, sessionId, timestamp, type, subtype?, cwd, gitBranch?, message?:
//! {role, parts}, model?, toolCallResult?, systemPayload?}` (Gemini's `Content` as the model saw it). Records chain
//! by `parentUuid`; the conversation is the chain from the last record back to the first, as Qwen resumes it (a
//! branch left by a rewind is not on it). Tool calls are `functionCall` parts of an assistant record, their results
//! `functionResponse` parts of the `tool_result` records after it. A `system` record of subtype `chat_compression`
//! holds the history the model went on with (`systemPayload.compressedHistory`): a new segment; `custom_title`
//! names the chat. A subagent's records (`isSidechain`) are not the conversation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::claude_code::folder_name;
use super::{Conversation, IMAGE_NOTE, is_injected, strip_injected, unix_time};
use crate::message::{Message, ToolCall};

/// The chats that may belong to `workspace`: the project folders whose name starts as the workspace's does (the
/// name is lossy, so each chat is checked against its records' `cwd` when read).
pub fn chats(qwen: &Path, workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(qwen.join("projects")) else { return out };
    let prefix = folder_name(workspace);
    for d in dirs.flatten() {
        // compared as Claude Code names folders (every non-alphanumeric a `-`), which holds for Qwen's `/` → `-`
        if !folder_name(Path::new(&d.file_name())).starts_with(&prefix) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(d.path().join("chats")) else { continue };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let file = f.file_type().is_ok_and(|t| t.is_file() || t.is_symlink() && f.path().is_file());
            if file && name.ends_with(".jsonl") {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

/// The chat `text` (of the file at `path`, whose name is the id when no record gives one).
pub fn parse(text: &str, path: &Path) -> Conversation {
    let mut c = Conversation::default();
    // records written under one uuid are one message (Qwen appends a part of it at a time): their parts joined
    let mut records: Vec<Value> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut last: Option<usize> = None;
    for v in super::json_records(text, &mut c.notes) {
        if v.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        c.modified = c.modified.max(unix_time(v.get("timestamp")));
        let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        if c.id.is_empty()
            && let Some(id) = s("sessionId")
        {
            c.id = id;
        }
        if c.cwd.is_none() {
            c.cwd = s("cwd").map(PathBuf::from);
        }
        if let Some(b) = s("gitBranch") {
            c.branch = Some(b);
        }
        // a title set anywhere names the chat, on the kept branch or not (the last one wins)
        if s("subtype").as_deref() == Some("custom_title")
            && let Some(t) = v.pointer("/systemPayload/customTitle").and_then(Value::as_str)
        {
            c.title = Some(t.to_string());
        }
        let uuid = s("uuid").unwrap_or_default();
        match index.get(&uuid) {
            Some(&at) => {
                merge(&mut records[at], v);
                last = Some(at);
            }
            None => {
                index.insert(uuid, records.len());
                last = Some(records.len());
                records.push(v);
            }
        }
    }
    if c.id.is_empty() {
        c.id = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    }
    if c.cwd.is_none() {
        c.notes.push("no record names its folder (cwd): the chat belongs to no workspace".into());
    }
    // the chain from the last record back to the first, as Qwen resumes it
    let chain = super::parent_chain(
        &records,
        last,
        |v| v.get("parentUuid").and_then(Value::as_str),
        |p| index.get(p).copied(),
        ("a record's", "the records'"),
        &mut c.notes,
    );
    let mut segments: Vec<Vec<Message>> = vec![Vec::new()];
    let mut unknown: HashMap<String, usize> = HashMap::new();
    for v in chain {
        let ts = unix_time(v.get("timestamp"));
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "user" | "assistant" | "tool_result" => {
                if let Some(m) = v.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()) {
                    c.model = m.to_string();
                }
                let failed = v.pointer("/toolCallResult/error").is_some_and(|e| !e.is_null())
                    || v.pointer("/toolCallResult/status").and_then(Value::as_str) == Some("error");
                content(v.get("message"), ts, failed, segments.last_mut().expect("one"), &mut unknown);
            }
            "system" => {
                if v.get("subtype").and_then(Value::as_str) == Some("chat_compression")
                    && let Some(Value::Array(history)) = v.pointer("/systemPayload/compressedHistory")
                {
                    let mut seg = Vec::new();
                    for h in history {
                        content(Some(h), ts, false, &mut seg, &mut unknown);
                    }
                    segments.push(seg);
                }
            }
            other => *unknown.entry(format!("record type {other:?}")).or_default() += 1,
        }
    }
    if segments.len() > 1 && segments[0].is_empty() {
        segments.remove(0);
    }
    for (kind, n) in unknown {
        c.notes.push(format!("{n} {kind}: left out"));
    }
    c.segments = segments;
    c
}

/// A later record of the same uuid added to the first: its parts after the first's, its usage, result and model
/// where the first had none.
fn merge(base: &mut Value, v: Value) {
    if let Some(Value::Array(more)) = v.pointer("/message/parts") {
        match base.pointer_mut("/message/parts") {
            Some(Value::Array(parts)) => parts.extend(more.iter().cloned()),
            _ => base["message"] = v["message"].clone(),
        }
    }
    for k in ["toolCallResult", "model"] {
        if base.get(k).is_none_or(Value::is_null)
            && let Some(x) = v.get(k)
        {
            base[k] = x.clone();
        }
    }
    if v.get("timestamp").and_then(Value::as_str) > base.get("timestamp").and_then(Value::as_str) {
        base["timestamp"] = v["timestamp"].clone();
    }
}

/// One `Content` (`{role, parts}`) as our messages: text and calls of the model, a prompt, or call results.
fn content(v: Option<&Value>, ts: i64, failed: bool, out: &mut Vec<Message>, unknown: &mut HashMap<String, usize>) {
    let Some(v) = v else { return };
    let role = v.get("role").and_then(Value::as_str).unwrap_or("");
    let mut text: Vec<String> = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for p in v.get("parts").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        if p.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            text.push(t.to_string());
        } else if let Some(f) = p.get("functionCall") {
            let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            calls.push(ToolCall::new(
                s("id"),
                s("name"),
                f.get("args").cloned().unwrap_or(Value::Object(Default::default())),
            ));
        } else if let Some(f) = p.get("functionResponse") {
            let id = f.get("id").and_then(Value::as_str).unwrap_or("").to_string();
            let r = f.get("response").cloned().unwrap_or(Value::Null);
            let (body, error) = match (r.get("output"), r.get("error")) {
                (_, Some(e)) if !e.is_null() => (e.as_str().map_or_else(|| e.to_string(), str::to_string), true),
                (Some(o), _) => (o.as_str().map_or_else(|| o.to_string(), str::to_string), false),
                _ => (r.to_string(), false),
            };
            results.push(Message::tool_result(id, body, failed || error));
        } else if p.get("inlineData").is_some() || p.get("fileData").is_some() {
            text.push(IMAGE_NOTE.into());
        } else {
            let kind = p.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
            *unknown.entry(format!("part {kind:?}")).or_default() += 1;
        }
    }
    let text = text.join("").trim().to_string();
    let mut push = |mut m: Message| {
        m.ts = ts;
        out.push(m);
    };
    if role == "model" {
        if !text.is_empty() || !calls.is_empty() {
            push(Message::assistant_tool_calls(text, calls));
        }
        return;
    }
    let text = strip_injected(&text);
    if !text.is_empty() && !is_injected(&text) {
        push(Message::user(text));
    }
    for r in results {
        push(r);
    }
}
