//! Claude Code transcripts: `<config>/projects/<workspace path, non-alphanumerics as "-">/<uuid>.jsonl`.
//!
//! The main thread is the non-sidechain `user`/`assistant` records in file order. `parentUuid` links form a
//! tree, but tool calls branch it too (progress records hang off a `tool_use` line, its result as well), so a
//! walk from the newest leaf loses calls; a branch is abandoned only when a new prompt (not a tool result)
//! attaches to a parent that already has a continuation: a rewind. Assistant lines sharing `message.id` are one
//! API response; each `tool_use` finds its `tool_result` by id. A `compact_boundary` starts a new segment whose
//! first message is the summary the tool resumed from (`isCompactSummary`).
//!
//! Each line is read typed ([`Line`]): only the fields used are kept (borrowed from the text when unescaped), only a
//! call's `input` becomes a `serde_json::Value`; a field of another type than Claude Code writes reads as missing,
//! as `Value::get(..).and_then(Value::as_str)` would read it, and every line is parsed through in full, so the
//! same lines are JSON as when read into a `Value` (a list of search hits converts 20 transcripts of 200 KB).

use std::borrow::Cow;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Conversation, IMAGE_NOTE, is_injected, strip_injected, unix_seconds};
use crate::message::{Message, Role, ToolCall, ToolResult};

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

/// A `user` or `assistant` record of the main thread, as [`convert`] needs it.
struct Record<'a> {
    uuid: Cow<'a, str>,
    parent: Option<Cow<'a, str>>,
    assistant: bool,
    /// Unix seconds of its `timestamp`; 0 when it has none.
    ts: i64,
    meta: bool,
    /// `message.id`: the API response the line is part of.
    response: Option<Cow<'a, str>>,
    content: Content<'a>,
}

/// The transcript `text` (of the file at `path`, whose name is the id when no record gives one). The list also
/// parses just a transcript's head and tail with it, for the names, title and time.
pub fn parse(text: &str, path: &Path) -> Conversation {
    let mut c = Conversation::default();
    let mut title: Option<String> = None;
    let mut summary_title: Option<String> = None;
    let mut segments: Vec<Vec<Record>> = vec![Vec::new()];
    let mut unknown: HashMap<String, usize> = HashMap::new();
    for line in super::json_lines(text, &mut c.notes, Line::read) {
        let kind = line.kind.as_deref().unwrap_or("");
        // a time that is missing or not a time counts as 0, which `modified` (never below 0) already is
        let ts = line.timestamp.as_deref().map_or(0, unix_seconds);
        c.modified = c.modified.max(ts);
        match kind {
            "user" | "assistant" => {}
            "custom-title" => {
                title = line.custom_title.map(Cow::into_owned).or(title);
                continue;
            }
            "summary" => {
                summary_title = line.summary.map(Cow::into_owned);
                continue;
            }
            "system" => {
                if line.subtype.as_deref() == Some("compact_boundary") {
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
        if line.sidechain == Some(true) {
            continue;
        }
        if c.id.is_empty()
            && let Some(s) = &line.session_id
        {
            c.id = s.to_string();
        }
        if c.cwd.is_none() {
            c.cwd = line.cwd.as_deref().map(PathBuf::from);
        }
        if let Some(b) = line.branch.as_deref().filter(|b| !b.is_empty()) {
            c.branch = Some(b.to_string());
        }
        let assistant = kind == "assistant";
        if assistant && let Some(m) = line.message.model.as_deref().filter(|m| !m.starts_with('<')) {
            c.model = m.to_string();
        }
        segments.last_mut().expect("one segment at least").push(Record {
            uuid: line.uuid.unwrap_or_default(),
            parent: line.parent,
            assistant,
            ts,
            meta: line.meta == Some(true),
            response: line.message.id,
            content: line.message.content,
        });
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

fn is_prompt(r: &Record) -> bool {
    if r.assistant {
        return false;
    }
    match &r.content {
        Content::Blocks(blocks) => !blocks.iter().any(|b| b.kind.as_deref() == Some("tool_result")),
        _ => true,
    }
}

/// The records of the branch the conversation went on with: a prompt attached to a parent that already has a
/// continuation abandons what followed that parent.
fn main_thread(records: Vec<Record>) -> Vec<Record> {
    let mut thread: Vec<Record> = Vec::new();
    let mut continued: FxHashSet<Cow<str>> = FxHashSet::default();
    for r in records {
        if let Some(p) = &r.parent {
            if is_prompt(&r)
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
fn convert(mut thread: Vec<Record>, unknown: &mut HashMap<String, usize>) -> Vec<Message> {
    // messages made whole here, not by `Message::user` and its kin: they read the clock for a time replaced at once
    let mut results: FxHashMap<String, Message> = FxHashMap::default();
    for r in &mut thread {
        let Content::Blocks(blocks) = &mut r.content else { continue };
        for b in blocks.iter_mut().filter(|b| b.kind.as_deref() == Some("tool_result")) {
            let id = b.tool_use_id.as_deref().unwrap_or("");
            if !results.contains_key(id) {
                // taken: past here a result block is only told by its type
                let result = ToolResult {
                    tool_call_id: id.to_string(),
                    content: result_text(std::mem::take(&mut b.content)),
                    is_error: b.is_error.unwrap_or(false),
                    ..Default::default()
                };
                let m = Message { tool_result: Some(result), ts: r.ts, ..Default::default() };
                results.insert(id.to_string(), m);
            }
        }
    }
    let mut out: Vec<Message> = Vec::new();
    let mut response: Option<Cow<str>> = None;
    for r in thread {
        if r.assistant {
            let (text, calls) = assistant_blocks(r.content, unknown);
            if text.is_empty() && calls.is_empty() {
                continue;
            }
            let same = r.response.is_some() && r.response == response;
            let joinable = same && out.last().is_some_and(|m| m.role == Role::Assistant);
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
                out.push(Message {
                    role: Role::Assistant,
                    content: text,
                    tool_calls: calls,
                    ts: r.ts,
                    ..Default::default()
                });
            }
            response = r.response;
            continue;
        }
        response = None;
        if r.meta {
            continue;
        }
        let text = user_text(&r.content, unknown);
        if !text.is_empty() {
            out.push(Message { role: Role::User, content: text, ts: r.ts, ..Default::default() });
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

fn assistant_blocks(content: Content, unknown: &mut HashMap<String, usize>) -> (String, Vec<ToolCall>) {
    let mut text: Vec<Cow<str>> = Vec::new();
    let mut calls = Vec::new();
    match content {
        Content::Text(s) => text.push(s),
        Content::Blocks(blocks) => {
            for b in blocks {
                match b.kind.as_deref().unwrap_or("") {
                    "text" => text.extend(b.text),
                    "tool_use" | "server_tool_use" => calls.push(ToolCall::new(
                        b.id.unwrap_or_default(),
                        b.name.unwrap_or_default(),
                        b.input.unwrap_or(Value::Object(Default::default())),
                    )),
                    "thinking" | "redacted_thinking" => {}
                    "image" => text.push(IMAGE_NOTE.into()),
                    other => *unknown.entry(other.to_string()).or_default() += 1,
                }
            }
        }
        Content::Other => {}
    }
    let text = text.join("\n\n");
    let trimmed = text.trim();
    (if trimmed.len() == text.len() { text } else { trimmed.to_string() }, calls)
}

fn user_text(content: &Content, unknown: &mut HashMap<String, usize>) -> String {
    let mut parts: Vec<&str> = Vec::new();
    match content {
        Content::Text(s) => parts.push(s),
        Content::Blocks(blocks) => {
            for b in blocks {
                match b.kind.as_deref().unwrap_or("") {
                    "text" => parts.extend(b.text.as_deref()),
                    "image" => parts.push(IMAGE_NOTE),
                    "tool_result" => {}
                    other => *unknown.entry(other.to_string()).or_default() += 1,
                }
            }
        }
        Content::Other => {}
    }
    let parts: Vec<String> =
        parts.iter().map(|p| strip_injected(p)).filter(|p| !p.is_empty() && !is_injected(p)).collect();
    parts.join("\n\n")
}

/// A tool result's content: a string, or text and image blocks.
fn result_text(content: Content) -> String {
    match content {
        Content::Text(s) => s.into_owned(),
        Content::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b.kind.as_deref() {
                Some("text") => b.text.as_deref().unwrap_or(""),
                Some("image") => IMAGE_NOTE,
                _ => "",
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Content::Other => String::new(),
    }
}

/// What this reader uses of a line. Any JSON reads as one: a field missing or of another type is `None` (an array,
/// a number or a record of another shape is a line with no fields).
#[derive(Default)]
struct Line<'a> {
    kind: Option<Cow<'a, str>>,
    timestamp: Option<Cow<'a, str>>,
    custom_title: Option<Cow<'a, str>>,
    summary: Option<Cow<'a, str>>,
    subtype: Option<Cow<'a, str>>,
    sidechain: Option<bool>,
    session_id: Option<Cow<'a, str>>,
    cwd: Option<Cow<'a, str>>,
    branch: Option<Cow<'a, str>>,
    uuid: Option<Cow<'a, str>>,
    parent: Option<Cow<'a, str>>,
    meta: Option<bool>,
    message: ApiMessage<'a>,
}

/// A line's `message`; all `None` when it is not an object.
#[derive(Default)]
struct ApiMessage<'a> {
    id: Option<Cow<'a, str>>,
    model: Option<Cow<'a, str>>,
    content: Content<'a>,
}

/// A message's `content`, and a tool result's.
#[derive(Default)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
    /// Missing, or neither a string nor an array.
    #[default]
    Other,
}

/// A content block: text, an image, a tool call (its `input` the only part kept as JSON), a tool result (its
/// `content` holding blocks in turn), thinking.
#[derive(Default)]
struct Block<'a> {
    kind: Option<Cow<'a, str>>,
    text: Option<Cow<'a, str>>,
    id: Option<Cow<'a, str>>,
    name: Option<Cow<'a, str>>,
    /// `Some(Value::Null)` for `"input": null`.
    input: Option<Value>,
    tool_use_id: Option<Cow<'a, str>>,
    is_error: Option<bool>,
    content: Content<'a>,
}

impl<'a> Line<'a> {
    /// The line read typed; `None` when it is not JSON. A line the typed reading does not take as serde_json would
    /// (see [`entries`]) is read into a `Value` first, so the two never disagree on a line.
    fn read(line: &'a str) -> Option<Line<'a>> {
        match serde_json::from_str::<Lenient<Line>>(line) {
            Ok(l) => Some(l.0),
            Err(_) => {
                let v: Value = serde_json::from_str(line).ok()?;
                Lenient::<Line>::deserialize(v).ok().map(|l| l.0)
            }
        }
    }
}

/// A piece of a record read from any JSON value: one of another kind than it wants reads as its `Default`, after
/// being parsed through as a `Value` would be (the same nesting limit, numbers, escapes), nothing kept of it.
trait Read<'de>: Default {
    fn borrowed(s: &'de str) -> Self {
        Self::copied(s)
    }
    fn copied(_: &str) -> Self {
        Self::default()
    }
    fn owned(s: String) -> Self {
        Self::copied(&s)
    }
    fn boolean(_: bool) -> Self {
        Self::default()
    }
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<Lenient<()>>()?.is_some() {}
        Ok(Self::default())
    }
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        entries(map, |_, map| map.next_value::<Lenient<()>>().map(drop))?;
        Ok(Self::default())
    }
}

/// serde_json's key for a `RawValue` (private to it): a `Value` made of an object whose first key is this is the
/// JSON text held in its value, not the object.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Each entry of an object: `value` reads the value of the key it is given. An object whose first key is
/// [`RAW_VALUE_TOKEN`] is an error, so that [`Line::read`] reads the line into a `Value`, which makes it something
/// else.
fn entries<'de, A: MapAccess<'de>>(
    mut map: A,
    mut value: impl FnMut(&str, &mut A) -> Result<(), A::Error>,
) -> Result<(), A::Error> {
    let mut first = true;
    while let Some(Lenient(key)) = map.next_key::<Lenient<Option<Cow<str>>>>()? {
        let key = key.unwrap_or_default();
        if std::mem::take(&mut first) && key == RAW_VALUE_TOKEN {
            return Err(de::Error::custom("serde_json's raw value"));
        }
        value(&key, &mut map)?;
    }
    Ok(())
}

/// Reads the value of an entry of an object.
fn value<'de, T: Read<'de>, A: MapAccess<'de>>(map: &mut A) -> Result<T, A::Error> {
    map.next_value::<Lenient<T>>().map(|v| v.0)
}

/// `()`: a value parsed through and dropped.
impl Read<'_> for () {}

impl<'de> Read<'de> for Option<Cow<'de, str>> {
    fn borrowed(s: &'de str) -> Self {
        Some(Cow::Borrowed(s))
    }
    fn copied(s: &str) -> Self {
        Some(Cow::Owned(s.to_string()))
    }
    fn owned(s: String) -> Self {
        Some(Cow::Owned(s))
    }
}

impl Read<'_> for Option<bool> {
    fn boolean(b: bool) -> Self {
        Some(b)
    }
}

impl<'de> Read<'de> for Line<'de> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut l = Line::default();
        // a key written twice: the last counts, as in a `Value`
        entries(map, |key, map| {
            match key {
                "type" => l.kind = value(map)?,
                "timestamp" => l.timestamp = value(map)?,
                "customTitle" => l.custom_title = value(map)?,
                "summary" => l.summary = value(map)?,
                "subtype" => l.subtype = value(map)?,
                "isSidechain" => l.sidechain = value(map)?,
                "sessionId" => l.session_id = value(map)?,
                "cwd" => l.cwd = value(map)?,
                "gitBranch" => l.branch = value(map)?,
                "uuid" => l.uuid = value(map)?,
                "parentUuid" => l.parent = value(map)?,
                "isMeta" => l.meta = value(map)?,
                "message" => l.message = value(map)?,
                _ => value::<(), _>(map)?,
            }
            Ok(())
        })?;
        Ok(l)
    }
}

impl<'de> Read<'de> for ApiMessage<'de> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut m = ApiMessage::default();
        entries(map, |key, map| {
            match key {
                "id" => m.id = value(map)?,
                "model" => m.model = value(map)?,
                "content" => m.content = value(map)?,
                _ => value::<(), _>(map)?,
            }
            Ok(())
        })?;
        Ok(m)
    }
}

impl<'de> Read<'de> for Content<'de> {
    fn borrowed(s: &'de str) -> Self {
        Content::Text(Cow::Borrowed(s))
    }
    fn copied(s: &str) -> Self {
        Content::Text(Cow::Owned(s.to_string()))
    }
    fn owned(s: String) -> Self {
        Content::Text(Cow::Owned(s))
    }
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut blocks = Vec::new();
        while let Some(Lenient(b)) = seq.next_element()? {
            blocks.push(b);
        }
        Ok(Content::Blocks(blocks))
    }
}

impl<'de> Read<'de> for Block<'de> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let mut b = Block::default();
        entries(map, |key, map| {
            match key {
                "type" => b.kind = value(map)?,
                "text" => b.text = value(map)?,
                "id" => b.id = value(map)?,
                "name" => b.name = value(map)?,
                "input" => b.input = Some(map.next_value()?),
                "tool_use_id" => b.tool_use_id = value(map)?,
                "is_error" => b.is_error = value(map)?,
                "content" => b.content = value(map)?,
                _ => value::<(), _>(map)?,
            }
            Ok(())
        })?;
        Ok(b)
    }
}

/// A [`Read`] as serde reads it: from any JSON value.
struct Lenient<T>(T);

impl<'de, T: Read<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientVisitor(PhantomData)).map(Lenient)
    }
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Read<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<T, E> {
        Ok(T::boolean(b))
    }
    fn visit_i64<E>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<T, E> {
        Ok(T::borrowed(s))
    }
    fn visit_str<E>(self, s: &str) -> Result<T, E> {
        Ok(T::copied(s))
    }
    fn visit_string<E>(self, s: String) -> Result<T, E> {
        Ok(T::owned(s))
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_none<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::map(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let c = crate::import::read(crate::import::Source::ClaudeCode, &path).expect("read");
        assert_eq!(segments(&c), vec![vec!["0 user: caf\u{fffd} au lait".to_string()]]);
        assert_eq!(c.notes, vec!["1 line(s) that are not JSON: left out".to_string()]);
    }
}
