//! Pi sessions: `<pi agent dir>/sessions/--<cwd without its first /, / as ->--/<time>_<uuid>.jsonl`.
//!
//! A header `{"type": "session", "version", id, timestamp, cwd}`, then entries with `id`, `parentId` and
//! `timestamp`: a tree. The conversation is the path from the last entry back to the root (Pi's leaf when it opens
//! the file; a branch the user left with `/tree` is not on it). On that path: `message` entries (roles `user`,
//! `assistant` with `toolCall` blocks, `toolResult`, `bashExecution`, `custom`), `model_change`, `compaction` (the
//! summary and the entries kept from `firstKeptEntryId`: a new segment), `branch_summary` and `custom_message` (sent
//! to the model as user text), `context_edit` (a later replacement of an earlier entry's content, or its removal:
//! the last one on the path wins). `session_info` names the session (an empty name clears it). Version 1 (no ids:
//! the file's order) to 3 are read; a later version is listed as unsupported, never guessed at.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Conversation, IMAGE_NOTE, is_injected, strip_injected, unix_time};
use crate::message::{Message, ToolCall};

/// The newest session format this reader knows.
pub const VERSION: u64 = 3;

/// Pi's folder name for a working directory.
pub fn folder_name(cwd: &Path) -> String {
    let s = cwd.to_string_lossy();
    let s = s.strip_prefix('/').unwrap_or(&s);
    format!("--{}--", s.replace(['/', '\\', ':'], "-"))
}

/// The sessions that may belong to `workspace`: its folder and those of folders below it (checked against the
/// header's `cwd` when read); with Pi's own session folder set (`flat`), every session in it.
pub fn sessions(pi: &Path, flat: Option<&Path>, workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = flat {
        jsonl_files(dir, &mut out);
        out.sort();
        return out;
    }
    let Ok(dirs) = std::fs::read_dir(pi.join("sessions")) else { return out };
    let name = folder_name(workspace);
    let prefix = name.trim_end_matches('-');
    for d in dirs.flatten() {
        let dir = d.file_name().to_string_lossy().into_owned();
        if !(dir == name || dir.starts_with(prefix)) {
            continue;
        }
        jsonl_files(&d.path(), &mut out);
    }
    out.sort();
    out
}

fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(files) = std::fs::read_dir(dir) else { return };
    for f in files.flatten() {
        let fname = f.file_name().to_string_lossy().into_owned();
        let file = f.file_type().is_ok_and(|t| t.is_file() || t.is_symlink() && f.path().is_file());
        if file && fname.ends_with(".jsonl") {
            out.push(f.path());
        }
    }
}

/// The session `text` (of the file at `path`). The list also parses a large file's head and tail with it: the
/// header is the first line, the leaf the last.
pub fn parse(text: &str, path: &Path) -> Conversation {
    let mut c = Conversation::default();
    let records = super::json_records(text, &mut c.notes);
    let header = records.iter().find(|v| v.get("type").and_then(Value::as_str) == Some("session"));
    let Some(header) = header else {
        c.id = id_from_name(path);
        c.unsupported =
            Some("no session header (the first line of a Pi session): not a session this version reads".into());
        return c;
    };
    let s = |k: &str| header.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    c.id = s("id").unwrap_or_else(|| id_from_name(path));
    c.cwd = s("cwd").map(PathBuf::from);
    c.modified = unix_time(header.get("timestamp"));
    let version = header.get("version").and_then(Value::as_u64).unwrap_or(1);
    if !(1..=VERSION).contains(&version) {
        c.unsupported = Some(format!(
            "Pi session format version {} (this version reads 1 to {VERSION})",
            header.get("version").map_or_else(|| "?".into(), Value::to_string)
        ));
        return c;
    }
    let entries: Vec<&Value> =
        records.iter().filter(|v| v.get("type").and_then(Value::as_str) != Some("session")).collect();
    for e in &entries {
        c.modified = c.modified.max(unix_time(e.get("timestamp")));
        if e.get("type").and_then(Value::as_str) == Some("session_info")
            && let Some(name) = e.get("name").and_then(Value::as_str)
        {
            c.title = Some(name.trim().to_string()).filter(|n| !n.is_empty());
        }
    }
    if c.cwd.is_none() {
        c.notes.push("the header names no folder (cwd): the session belongs to no workspace".into());
    }
    let path_entries = if version == 1 { entries } else { branch(&entries, &mut c.notes) };
    // context edits on the path, by the entry they edit: the last one wins
    let mut edits: HashMap<&str, &Value> = HashMap::new();
    for e in &path_entries {
        if e.get("type").and_then(Value::as_str) == Some("context_edit")
            && let Some(target) = e.get("targetId").and_then(Value::as_str)
        {
            edits.insert(target, e.get("replacement").unwrap_or(&Value::Null));
        }
    }
    let edited = |e: &Value| -> Option<Value> {
        let id = e.get("id").and_then(Value::as_str)?;
        let replacement = edits.get(id)?;
        let mut e = e.clone();
        if replacement.is_null() {
            e["type"] = Value::from("removed");
        } else if e.get("message").is_some() {
            e["message"]["content"] = replacement["content"].clone();
        } else {
            e["content"] = replacement["content"].clone();
        }
        Some(e)
    };
    let mut segments: Vec<Vec<Message>> = vec![Vec::new()];
    let mut unknown: HashMap<String, usize> = HashMap::new();
    for (i, e) in path_entries.iter().enumerate() {
        match e.get("type").and_then(Value::as_str).unwrap_or("") {
            "compaction" => {
                let mut seg = Vec::new();
                let summary = e.get("summary").and_then(Value::as_str).unwrap_or("");
                let mut m = Message::user(summary);
                m.ts = unix_time(e.get("timestamp"));
                seg.push(m);
                // the entries kept from before it, on this path
                let first = e.get("firstKeptEntryId").and_then(Value::as_str);
                if let Some(from) = path_entries[..i].iter().position(|k| k.get("id").and_then(Value::as_str) == first)
                {
                    for k in &path_entries[from..i] {
                        let k = edited(k).unwrap_or_else(|| (*k).clone());
                        entry(&k, &mut c, &mut seg, &mut unknown);
                    }
                }
                segments.push(seg);
            }
            _ => {
                let e = edited(e).unwrap_or_else(|| (*e).clone());
                entry(&e, &mut c, segments.last_mut().expect("one"), &mut unknown)
            }
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

/// The uuid of `<time>_<uuid>.jsonl`.
fn id_from_name(path: &Path) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    stem.rsplit_once('_').map_or(stem.clone(), |(_, id)| id.to_string())
}

/// The entries from the root to the last entry, following `parentId`.
fn branch<'a>(entries: &[&'a Value], notes: &mut Vec<String>) -> Vec<&'a Value> {
    let index: HashMap<&str, usize> =
        entries.iter().enumerate().filter_map(|(i, e)| Some((e.get("id")?.as_str()?, i))).collect();
    let chain = super::parent_chain(
        entries,
        entries.len().checked_sub(1),
        |e| e.get("parentId").and_then(Value::as_str),
        |p| index.get(p).copied(),
        ("an entry's", "the entries'"),
        notes,
    );
    chain.into_iter().copied().collect()
}

/// One entry of the path as our messages.
fn entry(e: &Value, c: &mut Conversation, out: &mut Vec<Message>, unknown: &mut HashMap<String, usize>) {
    let ts = unix_time(e.get("timestamp"));
    let mut push = |mut m: Message| {
        m.ts = ts;
        out.push(m);
    };
    match e.get("type").and_then(Value::as_str).unwrap_or("") {
        "message" => {
            let Some(m) = e.get("message") else { return };
            match m.get("role").and_then(Value::as_str).unwrap_or("") {
                "user" => {
                    let text = strip_injected(&blocks_text(m.get("content")));
                    if !text.is_empty() && !is_injected(&text) {
                        push(Message::user(text));
                    }
                }
                "assistant" => {
                    if let Some(model) = m.get("model").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                        c.model = model.to_string();
                    }
                    let mut calls = Vec::new();
                    for b in m.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
                        if b.get("type").and_then(Value::as_str) == Some("toolCall") {
                            let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                            let args = b.get("arguments").cloned().unwrap_or(Value::Object(Default::default()));
                            calls.push(ToolCall::new(s("id"), s("name"), args));
                        }
                    }
                    let mut text = blocks_text(m.get("content"));
                    if let Some(err) = m.get("errorMessage").and_then(Value::as_str).filter(|_| text.is_empty()) {
                        text = format!("[the answer failed: {err}]");
                    }
                    if !text.is_empty() || !calls.is_empty() {
                        push(Message::assistant_tool_calls(text, calls));
                    }
                }
                "toolResult" => {
                    let id = m.get("toolCallId").and_then(Value::as_str).unwrap_or("");
                    let failed = m.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    push(Message::tool_result(id, blocks_text(m.get("content")), failed));
                }
                "bashExecution" => {
                    // the user's own `!command`, which Pi hands the model as a user message
                    if m.get("excludeFromContext").and_then(Value::as_bool) == Some(true) {
                        return;
                    }
                    let cmd = m.get("command").and_then(Value::as_str).unwrap_or("");
                    let output = m.get("output").and_then(Value::as_str).unwrap_or("");
                    push(Message::user(format!("Ran `{cmd}`\n```\n{}\n```", output.trim_end())));
                }
                "custom" => {
                    let text = blocks_text(m.get("content"));
                    if !text.is_empty() {
                        push(Message::user(text));
                    }
                }
                // the system prompt Pi records with a compaction: not the conversation
                "system" => {}
                other => *unknown.entry(format!("message(s) of role {other:?}")).or_default() += 1,
            }
        }
        "model_change" => {
            if let Some(model) = e.get("modelId").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                c.model = model.to_string();
            }
        }
        "branch_summary" | "custom_message" => {
            let text = match e.get("summary").and_then(Value::as_str) {
                Some(s) => s.to_string(),
                None => blocks_text(e.get("content")),
            };
            if !text.is_empty() {
                push(Message::user(text));
            }
        }
        "thinking_level_change" | "session_info" | "label" | "custom" | "usage" | "context_edit" | "removed" => {}
        other => *unknown.entry(format!("entry(ies) of type {other:?}")).or_default() += 1,
    }
}

/// A content (a string or text, image and thinking blocks) as text: thinking and calls left out.
fn blocks_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Array(blocks)) => {
            let parts: Vec<String> = blocks
                .iter()
                .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").and_then(Value::as_str).map(str::to_string),
                    Some("image") => Some(IMAGE_NOTE.to_string()),
                    _ => None,
                })
                .collect();
            parts.join("\n\n").trim().to_string()
        }
        _ => String::new(),
    }
}
