//! Gemini CLI chats: `<.gemini>/tmp/<project>/chats/session-<time>-<first 8 of the id>.jsonl`.
//!
//! A chat is an append-only log of changes, not of messages: a header (`sessionId`, `projectHash`, `startTime`,
//! `lastUpdated`, `kind`), then message records (`id`, `type` user / gemini / info / error / warning, `content`,
//! `toolCalls` with their results, `model`) where a record is written again under the same `id` each time it grows
//! (its tokens, its tool calls' results: the last one wins, in the place of the first), `{"$set": {...}}` metadata
//! updates (`messages` replaces the whole list, `summary` names the chat) and `{"$rewindTo": id}`, which drops that
//! message and every one after it. Replaying the records in order gives the list Gemini itself holds.
//!
//! Which workspace a `<project>` folder is: its `.project_root` file, else `projects.json` (`{"projects": {path:
//! name}}`), else (older versions) a folder named by the SHA-256 of the path, which the header's `projectHash` is too.
//! Subagents' chats live in folders under `chats/` and are not listed; a legacy `session-*.json` (one JSON object
//! with `messages`) is read as one `$set`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Conversation, IMAGE_NOTE, is_injected, strip_injected, unix_time};
use crate::message::{Message, ToolCall};
use crate::session::{self, Result};

/// The chats of the projects that are `workspace` or below it, each with the project's folder.
pub fn chats(gemini: &Path, workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(gemini.join("tmp")) else { return out };
    let names = project_names(gemini);
    let hash = project_hash(workspace);
    for d in dirs.flatten() {
        let slug = d.file_name().to_string_lossy().into_owned();
        let root = project_root_of(&d.path(), &names);
        let ours = root.as_deref().is_some_and(|r| super::belongs(Some(r), workspace)) || slug == hash;
        if !ours {
            continue;
        }
        let Ok(files) = std::fs::read_dir(d.path().join("chats")) else { continue };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let file = f.file_type().is_ok_and(|t| t.is_file() || t.is_symlink() && f.path().is_file());
            if file && name.starts_with("session-") && (name.ends_with(".jsonl") || name.ends_with(".json")) {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

/// `projects.json`: project folder name → path.
fn project_names(gemini: &Path) -> HashMap<String, PathBuf> {
    let Ok(text) = std::fs::read_to_string(gemini.join("projects.json")) else { return HashMap::new() };
    let Ok(v) = serde_json::from_str::<Value>(&text) else { return HashMap::new() };
    let Some(Value::Object(projects)) = v.get("projects") else { return HashMap::new() };
    projects.iter().filter_map(|(path, name)| Some((name.as_str()?.to_string(), PathBuf::from(path)))).collect()
}

fn project_root_of(dir: &Path, names: &HashMap<String, PathBuf>) -> Option<PathBuf> {
    if let Ok(text) = std::fs::read_to_string(dir.join(".project_root")) {
        let t = text.trim();
        if !t.is_empty() {
            return Some(PathBuf::from(t));
        }
    }
    let slug = dir.file_name()?.to_string_lossy().into_owned();
    names.get(&slug).cloned()
}

/// The chat of session `id` among the chats of the projects that are `workspace` or below it ([`chats`]): its file
/// is named by the id's first 8 characters, its header names the whole id.
pub fn session_file(gemini: &Path, workspace: &Path, id: &str) -> Option<PathBuf> {
    let short = id.get(..8)?;
    let named = |p: &PathBuf| p.file_stem().is_some_and(|s| s.to_string_lossy().ends_with(&format!("-{short}")));
    chats(gemini, workspace)
        .into_iter()
        .filter(named)
        .find(|p| super::read(super::Source::GeminiCli, p).is_ok_and(|c| c.id == id))
}

/// The project folder a chat file belongs to (`<.gemini>/tmp/<project>/chats/<file>`), when its files say.
pub fn project_root(chat: &Path) -> Option<PathBuf> {
    let dir = chat.parent()?.parent()?;
    let gemini = dir.parent()?.parent()?;
    project_root_of(dir, &project_names(gemini))
}

/// The SHA-256 (hex) of a path, as Gemini names a project by it (`projectHash`).
pub fn project_hash(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(path.to_string_lossy().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `text` is a legacy chat: one JSON object with `sessionId` and `messages`.
pub fn is_legacy(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.get("sessionId").is_some() && v.get("messages").is_some())
}

/// The kinds of chat this reader knows (`kind` absent is a main chat of an older version).
const KINDS: [&str; 2] = ["main", "subagent"];

/// The chat `text` (of the file at `path`), recorded in the project `root` (its folder, when known: a chat names
/// only the hash of it).
pub fn parse(text: &str, path: &Path, root: Option<&Path>) -> Conversation {
    let mut c = Conversation { cwd: root.map(Path::to_path_buf), ..Default::default() };
    let (messages, headers, unknown) = replay(text, path, &mut c.notes);
    let (mut kind, mut hash) = (None, None);
    for h in &headers {
        header(&mut c, &mut kind, &mut hash, h);
    }
    if unknown > 0 {
        c.notes.push(format!("{unknown} record(s) of an unknown shape: left out"));
    }
    if c.id.is_empty() {
        c.id = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    }
    if let Some(k) = kind.as_deref().filter(|k| !KINDS.contains(k)) {
        c.unsupported = Some(format!("a chat of kind {k:?}, which this version does not read (it reads main chats)"));
        return c;
    }
    if kind.as_deref() == Some("subagent") {
        c.unsupported = Some("a subagent's chat, not a conversation of its own".into());
        return c;
    }
    if c.cwd.is_none() && hash.is_some() {
        c.notes.push(
            "its project folder is not named in projects.json or .project_root: it belongs to no workspace".into(),
        );
    }
    // A call's result is in its `toolCalls` entry once the answer's record is written again; the `user` record that
    // sent it to the model (`functionResponse` parts) has it too, and is the only place while that rewrite is lost.
    let mut sent: HashMap<String, Value> = HashMap::new();
    for v in &messages {
        if v.get("type").and_then(Value::as_str) != Some("user") {
            continue;
        }
        for p in v.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
            if let Some(call) = p.pointer("/functionResponse/id").and_then(Value::as_str) {
                sent.entry(call.to_string()).or_insert_with(|| Value::Array(vec![p.clone()]));
            }
        }
    }
    let mut ours = Vec::new();
    for v in &messages {
        c.modified = c.modified.max(unix_time(v.get("timestamp")));
        convert(v, &sent, &mut c, &mut ours);
    }
    c.segments = vec![ours];
    c
}

/// The chat `text`'s records replayed as Gemini replays them: its messages in their first place, each as its last
/// record wrote it; the header records (the header, then each `$set`, in order: the last one wins); how many
/// records were of no known shape.
fn replay(text: &str, path: &Path, notes: &mut Vec<String>) -> (Vec<Value>, Vec<Value>, usize) {
    let records = if path.extension().is_some_and(|e| e == "json") && is_legacy(text) {
        let v: Value = serde_json::from_str(text).unwrap_or_default();
        vec![v.clone(), serde_json::json!({ "$set": { "messages": v["messages"] } })]
    } else {
        super::json_records(text, notes)
    };
    let mut order: Vec<String> = Vec::new();
    let mut by_id: HashMap<String, Value> = HashMap::new();
    let mut headers = Vec::new();
    let mut unknown = 0;
    for v in records {
        if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
            match order.iter().position(|id| id == to) {
                Some(at) => {
                    for id in order.drain(at..) {
                        by_id.remove(&id);
                    }
                }
                None => {
                    // Gemini drops everything then: the message it rewound to was in a line lost since
                    notes.push(format!("a rewind to a message that is not in the file ({to}): nothing before it kept"));
                    order.clear();
                    by_id.clear();
                }
            }
        } else if let Some(Value::Object(set)) = v.get("$set") {
            if let Some(Value::Array(messages)) = set.get("messages") {
                order.clear();
                by_id.clear();
                for m in messages {
                    put(&mut order, &mut by_id, m.clone());
                }
            }
            headers.push(Value::Object(set.clone()));
        } else if v.get("id").is_some_and(Value::is_string) {
            put(&mut order, &mut by_id, v);
        } else if v.get("sessionId").is_some() {
            headers.push(v);
        } else {
            unknown += 1;
        }
    }
    let messages = order.into_iter().filter_map(|id| by_id.remove(&id)).collect();
    (messages, headers, unknown)
}

/// Why the history Gemini CLI rebuilds from the chat at `path` when it loads it (`session/load`, `--resume`) makes
/// the API refuse the next message, when it does (`None`: it does not, as far as the file shows). Gemini 0.61 rebuilds
/// an answer with tool calls as the model's turn of calls followed by a turn of their `result`s, and keeps the `user`
/// record that sent those results to the model (`functionResponse` parts) as a turn of its own: every call answered
/// twice. The API takes a history only when each turn of calls is answered by as many responses of the same names in
/// the turn right after it, and no response stands elsewhere: checked here over the turns as Gemini rebuilds them
/// (`convertSessionToClientHistory`), the next prompt last.
pub fn refused_on_load(path: &Path) -> Result<Option<String>> {
    let bytes = std::fs::read(path).map_err(session::io_err("cannot read", path))?;
    let (messages, _, _) = replay(&super::text_of(&bytes), path, &mut Vec::new());
    let mut turns = rebuilt(&messages);
    turns.push((false, Vec::new()));
    Ok(refused(&turns))
}

/// The turns of the history Gemini CLI rebuilds from its messages: whether the model's, and the names of the function
/// calls (the model's) or responses (the user's) in it.
fn rebuilt(messages: &[Value]) -> Vec<(bool, Vec<String>)> {
    let named = |parts: &[Value], kind: &str| -> Vec<String> {
        let name = |p: &Value| p.get(kind)?.get("name")?.as_str().map(str::to_string);
        parts.iter().filter_map(name).collect()
    };
    let parts = |v: Option<&Value>| match v {
        Some(Value::Array(a)) => a.clone(),
        Some(p @ Value::Object(_)) => vec![p.clone()],
        _ => Vec::new(),
    };
    let mut turns = Vec::new();
    for m in messages {
        match m.get("type").and_then(Value::as_str) {
            Some("user") => {
                let responses = named(&parts(m.get("content")), "functionResponse");
                // left out: a prompt Gemini does not send again (empty, a command, its own context)
                let text = parts_text(m.get("content"), false);
                let ignored = ["/", "?", "<session_context>", "<hook_context>"].iter().any(|p| text.starts_with(p));
                if responses.is_empty() && (text.is_empty() || ignored) {
                    continue;
                }
                turns.push((false, responses));
            }
            Some("gemini") => {
                let calls = m.get("toolCalls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                let in_content = named(&parts(m.get("content")), "functionCall");
                let tool_name = |t: &Value| t.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let called = match in_content.is_empty() {
                    true => calls.iter().map(tool_name).collect(),
                    false => in_content,
                };
                turns.push((true, called));
                let mut answered = Vec::new();
                for t in calls {
                    match t.get("result") {
                        Some(Value::String(s)) if !s.is_empty() => answered.push(tool_name(t)),
                        Some(Value::Array(a)) => answered.extend(named(a, "functionResponse")),
                        Some(r @ Value::Object(_)) => {
                            answered.extend(named(std::slice::from_ref(r), "functionResponse"))
                        }
                        _ => {}
                    }
                }
                if !answered.is_empty() {
                    turns.push((false, answered));
                }
            }
            _ => {}
        }
    }
    turns
}

/// Why the API refuses `turns`, when it does: a turn of calls not answered one to one by the turn after it, or
/// responses where no call asks for them.
fn refused(turns: &[(bool, Vec<String>)]) -> Option<String> {
    let sorted = |n: &[String]| {
        let mut n = n.to_vec();
        n.sort();
        n
    };
    let mut asked: &[String] = &[];
    for (model, names) in turns {
        if !asked.is_empty() {
            if *model || sorted(names) != sorted(asked) {
                return Some(format!(
                    "the history Gemini CLI rebuilds from it answers the call(s) of {} with {} response(s), which the API refuses",
                    asked.join(", "),
                    if *model { 0 } else { names.len() }
                ));
            }
            asked = &[];
        } else if *model {
            asked = names;
        } else if !names.is_empty() {
            return Some(format!(
                "the history Gemini CLI rebuilds from it holds responses of {} that answer no call (a call answered \
                 twice: from its result and from the record that sent it), which the API refuses",
                names.join(", ")
            ));
        }
    }
    None
}

fn put(order: &mut Vec<String>, by_id: &mut HashMap<String, Value>, v: Value) {
    let Some(id) = v.get("id").and_then(Value::as_str).map(str::to_string) else { return };
    if by_id.insert(id.clone(), v).is_none() {
        order.push(id);
    }
}

/// The header's fields, or a `$set`'s: the last one wins.
fn header(c: &mut Conversation, kind: &mut Option<String>, hash: &mut Option<String>, v: &Value) {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(id) = s("sessionId") {
        c.id = id;
    }
    if let Some(k) = s("kind") {
        *kind = Some(k);
    }
    if let Some(h) = s("projectHash") {
        *hash = Some(h);
    }
    if let Some(summary) = s("summary").filter(|t| !t.trim().is_empty()) {
        c.title = Some(summary);
    }
    c.modified = c.modified.max(unix_time(v.get("lastUpdated")));
}

/// One message record as our messages: a prompt; an answer with its tool calls, each followed by its result.
fn convert(v: &Value, sent: &HashMap<String, Value>, c: &mut Conversation, out: &mut Vec<Message>) {
    let ts = unix_time(v.get("timestamp"));
    let mut push = |mut m: Message| {
        m.ts = ts;
        out.push(m);
    };
    match v.get("type").and_then(Value::as_str).unwrap_or("") {
        // a prompt; the `<session_context>` Gemini sends first; or call results (`functionResponse`, taken above)
        "user" => {
            let text = strip_injected(&parts_text(v.get("content"), false));
            if !text.is_empty() && !is_injected(&text) {
                push(Message::user(text));
            }
        }
        "gemini" => {
            if let Some(m) = v.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()) {
                c.model = m.to_string();
            }
            let calls: Vec<&Value> =
                v.get("toolCalls").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
            let text = parts_text(v.get("content"), true);
            let tool_calls = calls
                .iter()
                .map(|t| {
                    let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
                    ToolCall::new(
                        s("id"),
                        s("name"),
                        t.get("args").cloned().unwrap_or(Value::Object(Default::default())),
                    )
                })
                .collect::<Vec<_>>();
            if text.is_empty() && tool_calls.is_empty() {
                return;
            }
            push(Message::assistant_tool_calls(text, tool_calls));
            for t in calls {
                // a call still running (or cancelled before it ran) has no result yet: the fold drops the call
                let id = t.get("id").and_then(Value::as_str).unwrap_or("");
                let Some(result) = t.get("result").filter(|r| !r.is_null()).or_else(|| sent.get(id)) else { continue };
                let failed = t.get("status").and_then(Value::as_str) == Some("error");
                let (text, error) = result_text(result);
                push(Message::tool_result(id, text, failed || error));
            }
        }
        // the CLI's own notices (info, error, warning): shown to the user, never sent to the model
        _ => {}
    }
}

/// The text of a `PartListUnion` (a string, a part or a list of parts); `answer` leaves thoughts out.
fn parts_text(v: Option<&Value>, answer: bool) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut part = |p: &Value| {
        if answer && p.get("thought").and_then(Value::as_bool) == Some(true) {
            return;
        }
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            out.push(t.to_string());
        } else if p.get("inlineData").is_some() || p.get("fileData").is_some() {
            out.push(IMAGE_NOTE.into());
        }
    };
    match v {
        Some(Value::String(s)) => return s.trim().to_string(),
        Some(Value::Array(parts)) => parts.iter().for_each(&mut part),
        Some(p @ Value::Object(_)) => part(p),
        _ => {}
    }
    out.join("").trim().to_string()
}

/// A tool call's `result` (`functionResponse` parts, with text parts beside them): its text, and whether it says
/// it failed.
fn result_text(v: &Value) -> (String, bool) {
    let parts: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let mut texts = Vec::new();
    let mut failed = false;
    for p in parts {
        if let Some(Value::String(s)) = Some(p) {
            texts.push(s.clone());
        } else if let Some(r) = p.pointer("/functionResponse/response") {
            if let Some(e) = r.get("error") {
                failed = true;
                texts.push(e.as_str().map_or_else(|| e.to_string(), str::to_string));
            } else if let Some(o) = r.get("output") {
                texts.push(o.as_str().map_or_else(|| o.to_string(), str::to_string));
            } else {
                texts.push(r.to_string());
            }
        } else if let Some(t) = p.get("text").and_then(Value::as_str) {
            texts.push(t.to_string());
        } else if p.get("inlineData").is_some() {
            texts.push(IMAGE_NOTE.into());
        }
    }
    (texts.join("\n"), failed)
}
