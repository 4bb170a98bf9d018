//! Codex rollouts: `<codex home>/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl` (and `archived_sessions/`), one
//! `{timestamp, type, payload}` per line.
//!
//! `response_item`s are the conversation (messages, `function_call`/`custom_tool_call` and their outputs);
//! `event_msg`s repeat the same turns for the UI, except that a user turn may exist only as an `event_msg`
//! `user_message` (Codex Desktop): such a turn is taken from there, every other one from its `response_item`, so
//! each turn is imported once. `compacted` starts a new segment from its summary. Thread names come from
//! `session_index.jsonl` (the last line for an id wins).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Conversation, IMAGE_NOTE, is_injected, strip_injected, unix_time};
use crate::message::{Message, ToolCall};

/// Every rollout file under `home` (compressed ones included: the list marks them unsupported).
pub fn rollouts(home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for top in ["sessions", "archived_sessions"] {
        walk(&home.join(top), 0, &mut out);
    }
    out.sort();
    out
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        // the entry's type from the directory itself: no `stat` per rollout
        let dir = e.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink() && p.is_dir());
        if dir && depth < 4 {
            walk(&p, depth + 1, out);
        } else if name.starts_with("rollout-") && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst")) {
            out.push(p);
        }
    }
}

/// The id at the end of a rollout's file name (`rollout-<ts>-<uuid>.jsonl`).
pub fn id_from_name(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.trim_end_matches(".zst").trim_end_matches(".jsonl");
    // a uuid is the last five dash-separated groups
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() > 5 { parts[parts.len() - 5..].join("-") } else { stem.to_string() }
}

/// The thread names of `session_index.jsonl` next to `sessions/`, by id.
pub fn thread_names(rollout: &Path) -> HashMap<String, String> {
    let mut names = HashMap::new();
    let home = rollout.ancestors().find(|a| a.join("session_index.jsonl").is_file());
    let Some(home) = home else { return names };
    let Ok(text) = std::fs::read_to_string(home.join("session_index.jsonl")) else { return names };
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        if let (Some(id), Some(name)) =
            (v.get("id").and_then(Value::as_str), v.get("thread_name").and_then(Value::as_str))
        {
            names.insert(id.to_string(), name.to_string());
        }
    }
    names
}

enum Item {
    Msg(Message),
    /// A user turn seen only as an `event_msg`, kept unless its `response_item` twin exists.
    EventPrompt(Message),
    Compacted(Vec<Message>),
}

/// The rollout `text` (of the file at `path`), named from `names` ([`thread_names`]). The list also parses just a
/// rollout's head and tail with it, reading the names once for all rollouts.
pub fn parse(text: &str, path: &Path, names: &HashMap<String, String>) -> Conversation {
    let mut c = Conversation::default();
    let mut items: Vec<Item> = Vec::new();
    let mut unknown: HashMap<String, usize> = HashMap::new();
    for v in super::json_records(text, &mut c.notes) {
        let ts = unix_time(v.get("timestamp"));
        c.modified = c.modified.max(ts);
        let p = v.get("payload").cloned().unwrap_or(Value::Null);
        let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "session_meta" => {
                c.id = s("id").unwrap_or_default();
                c.cwd = s("cwd").map(PathBuf::from);
                c.branch = p.pointer("/git/branch").and_then(Value::as_str).map(str::to_string);
            }
            "turn_context" => {
                if let Some(m) = s("model") {
                    c.model = m;
                }
                if c.cwd.is_none() {
                    c.cwd = s("cwd").map(PathBuf::from);
                }
            }
            "response_item" => response_item(&p, ts, &mut items, &mut unknown),
            "event_msg" => {
                if p.get("type").and_then(Value::as_str) == Some("user_message")
                    && let Some(text) = s("message").filter(|t| !is_injected(t))
                {
                    let mut m = Message::user(strip_injected(&text));
                    m.ts = ts;
                    if !m.content.is_empty() {
                        items.push(Item::EventPrompt(m));
                    }
                }
            }
            "compacted" => {
                let mut history = Vec::new();
                if let Some(Value::Array(repl)) = p.get("replacement_history") {
                    for r in repl {
                        response_item(r, ts, &mut history, &mut unknown);
                    }
                }
                let mut msgs: Vec<Message> =
                    history.into_iter().filter_map(|i| if let Item::Msg(m) = i { Some(m) } else { None }).collect();
                if msgs.is_empty()
                    && let Some(summary) = s("message")
                {
                    let mut m = Message::user(summary);
                    m.ts = ts;
                    msgs.push(m);
                }
                items.push(Item::Compacted(msgs));
            }
            other => *unknown.entry(format!("record {other}")).or_default() += 1,
        }
    }
    for (kind, n) in &unknown {
        c.notes.push(format!("{n} {kind}: of an unknown type, left out"));
    }
    if c.cwd.is_none() {
        c.notes
            .push("no session_meta or turn_context names its folder (cwd): the rollout belongs to no workspace".into());
    }
    if c.id.is_empty() {
        c.id = id_from_name(path);
    }
    c.title = names.get(&c.id).cloned();
    c.segments = segments(items);
    c
}

/// The items as segments: a user turn seen only as an `event_msg` is kept once, where it was.
fn segments(items: Vec<Item>) -> Vec<Vec<Message>> {
    let mut twins: HashMap<String, usize> = HashMap::new();
    for i in &items {
        if let Item::Msg(m) = i
            && m.is_user_text()
        {
            *twins.entry(m.content.trim().to_string()).or_default() += 1;
        }
    }
    let mut segs: Vec<Vec<Message>> = vec![Vec::new()];
    for i in items {
        match i {
            Item::Msg(m) => push(segs.last_mut().expect("one"), m),
            Item::EventPrompt(m) => {
                let key = m.content.trim().to_string();
                match twins.get_mut(&key) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ => push(segs.last_mut().expect("one"), m),
                }
            }
            Item::Compacted(msgs) => segs.push(msgs),
        }
    }
    if segs.len() > 1 && segs[0].is_empty() {
        segs.remove(0);
    }
    segs
}

/// Calls join the assistant message before them (Codex sends text and calls as separate items).
fn push(seg: &mut Vec<Message>, m: Message) {
    if !m.tool_calls.is_empty()
        && let Some(last) = seg.last_mut()
        && last.role == crate::message::Role::Assistant
        && last.tool_result.is_none()
    {
        last.tool_calls.extend(m.tool_calls);
        return;
    }
    seg.push(m);
}

fn response_item(p: &Value, ts: i64, items: &mut Vec<Item>, unknown: &mut HashMap<String, usize>) {
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let mut push = |mut m: Message| {
        m.ts = ts;
        items.push(Item::Msg(m));
    };
    match p.get("type").and_then(Value::as_str).unwrap_or("") {
        "message" => {
            let role = s("role");
            let mut parts = Vec::new();
            if let Some(Value::Array(content)) = p.get("content") {
                for b in content {
                    match b.get("type").and_then(Value::as_str).unwrap_or("") {
                        "input_text" | "output_text" | "text" => {
                            parts.extend(b.get("text").and_then(Value::as_str).map(str::to_string))
                        }
                        "input_image" | "image" => parts.push(IMAGE_NOTE.into()),
                        other => *unknown.entry(format!("content block {other}")).or_default() += 1,
                    }
                }
            }
            let parts: Vec<String> =
                parts.iter().map(|t| strip_injected(t)).filter(|t| !t.is_empty() && !is_injected(t)).collect();
            if parts.is_empty() {
                return;
            }
            match role.as_str() {
                "user" => push(Message::user(parts.join("\n\n"))),
                "assistant" => push(Message::assistant(parts.join("\n\n"))),
                _ => {} // developer / system: instructions the tool injected
            }
        }
        "function_call" => {
            let args = s("arguments");
            let args = serde_json::from_str(&args).unwrap_or(Value::String(args));
            push(Message::assistant_tool_calls("", vec![ToolCall::new(s("call_id"), s("name"), args)]));
        }
        "custom_tool_call" => {
            let input = serde_json::json!({ "input": s("input") });
            push(Message::assistant_tool_calls("", vec![ToolCall::new(s("call_id"), s("name"), input)]));
        }
        "function_call_output" | "custom_tool_call_output" => {
            let (text, is_error) = output(p.get("output"));
            push(Message::tool_result(s("call_id"), text, is_error));
        }
        "reasoning" | "web_search_call" | "local_shell_call" => {}
        other => *unknown.entry(format!("response_item {other}")).or_default() += 1,
    }
}

/// A call's output: a string (often JSON holding `output`), or `{content, success}`.
fn output(v: Option<&Value>) -> (String, bool) {
    let v = match v {
        Some(Value::String(s)) => {
            serde_json::from_str::<Value>(s).ok().filter(Value::is_object).unwrap_or(Value::String(s.clone()))
        }
        Some(v) => v.clone(),
        None => Value::Null,
    };
    match &v {
        Value::String(s) => (s.clone(), false),
        Value::Object(o) => {
            let text = o.get("output").or_else(|| o.get("content")).map(|t| match t {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            let failed = o.get("success").and_then(Value::as_bool) == Some(false)
                || v.pointer("/metadata/exit_code").and_then(Value::as_i64).is_some_and(|c| c != 0);
            (text.unwrap_or_else(|| v.to_string()), failed)
        }
        Value::Null => (String::new(), false),
        other => (other.to_string(), false),
    }
}
