//! opencode sessions: one SQLite database, `$XDG_DATA_HOME/opencode/opencode.db` (WAL mode), written by every opencode
//! running.
//!
//! Tables read: `session` (`id` `ses_…`, `parent_id` (a subagent's session: not listed), `directory`, `title`,
//! `time_created`/`time_updated` in ms), `message` (`id`, `session_id`, `time_created`, JSON `data`: `role`,
//! `modelID`, `summary`, `error`) and `part` (`id`, `message_id`, JSON `data`: `type` text / reasoning / tool with
//! `callID`, `tool`, `state {status, input, output, error}` / step-start / step-finish / file / compaction …).
//! Messages in `(time_created, id)` order, parts in `id` order (opencode's ids grow with time). An assistant message
//! holds several steps (text, then tools, then text…): each step becomes one answer with its calls, each call
//! followed by its result. The summary a compaction wrote (an assistant message with `summary: true`) starts a new
//! segment, as opencode goes on from it.
//!
//! The agent writes the database while we read it, so it is opened as a reader that can neither write nor hold the
//! writer up: `SQLITE_OPEN_READ_ONLY` (no write, no checkpoint: the WAL stays the agent's), `PRAGMA query_only`, one
//! read transaction per look (a snapshot: a session, its messages and parts from the same moment; WAL readers never
//! block the writer, nor it them), and a busy timeout of 200 ms for the rare moments SQLite makes a reader wait
//! (the WAL being recovered after a crash): past it the row says the database is busy, and nothing waits longer.
//! A schema that lacks what is read (a future opencode) is reported, never guessed at.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use super::{Conversation, IMAGE_NOTE, is_injected, strip_injected};
use crate::message::{Message, ToolCall};
use crate::session::{Error, Result};

/// The database's file name in opencode's data folder.
pub const DB_NAME: &str = "opencode.db";

/// How long a read may wait for SQLite's own locks before it gives up and says so.
const BUSY: Duration = Duration::from_millis(200);

/// Whether `path` is an SQLite database (its first 16 bytes), as opencode's is.
pub fn is_database(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 16];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"SQLite format 3\0"
}

/// One session as the `session` table lists it.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub id: String,
    pub directory: PathBuf,
    pub title: String,
    /// Milliseconds.
    pub time_updated: i64,
}

/// An open database, read only.
pub struct Db {
    conn: Connection,
    path: PathBuf,
}

impl Db {
    /// Opens opencode's database for reading (see the module's docs for why it never disturbs the agent).
    pub fn open(path: &Path) -> Result<Db> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| sql_err(path, e))?;
        conn.busy_timeout(BUSY).map_err(|e| sql_err(path, e))?;
        conn.pragma_update(None, "query_only", true).map_err(|e| sql_err(path, e))?;
        Ok(Db { conn, path: path.to_path_buf() })
    }

    /// The top-level sessions (not a subagent's), newest first.
    pub fn sessions(&self) -> Result<Vec<SessionRow>> {
        let sql = "SELECT id, directory, title, time_updated FROM session WHERE parent_id IS NULL \
                   ORDER BY time_updated DESC, id";
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.schema_err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionRow {
                    id: r.get(0)?,
                    directory: PathBuf::from(r.get::<_, String>(1)?),
                    title: r.get(2)?,
                    time_updated: r.get(3)?,
                })
            })
            .map_err(|e| sql_err(&self.path, e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| sql_err(&self.path, e))
    }

    /// Session `id`, whole: its row, messages and parts read in one transaction (one moment of the database).
    pub fn conversation(&self, id: &str) -> Result<Conversation> {
        self.conn.execute_batch("BEGIN").map_err(|e| sql_err(&self.path, e))?;
        let read = self.read_session(id);
        let _ = self.conn.execute_batch("COMMIT");
        read
    }

    fn read_session(&self, id: &str) -> Result<Conversation> {
        let row = self
            .conn
            .query_row("SELECT directory, title, time_updated FROM session WHERE id = ?1", [id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
            })
            .map_err(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Error::Invalid(format!(
                    "no opencode session {id} in {} (it may have been deleted)",
                    self.path.display()
                )),
                e => self.schema_err(e),
            })?;
        let messages =
            self.pairs("SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id", id)?;
        let parts =
            self.pairs("SELECT message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id", id)?;
        let mut c = Conversation {
            id: id.to_string(),
            cwd: Some(PathBuf::from(row.0)),
            title: Some(row.1).filter(|t| !t.trim().is_empty() && !is_default_title(t)),
            modified: row.2.div_euclid(1000),
            modified_ms: row.2,
            ..Default::default()
        };
        convert(&mut c, messages, parts);
        Ok(c)
    }

    /// The rows of `sql` (two text columns: an id and its JSON) for session `id`.
    fn pairs(&self, sql: &str, id: &str) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.schema_err(e))?;
        stmt.query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .and_then(|rows| rows.collect::<std::result::Result<Vec<_>, _>>())
            .map_err(|e| sql_err(&self.path, e))
    }

    fn schema_err(&self, e: rusqlite::Error) -> Error {
        if matches!(e, rusqlite::Error::SqliteFailure(ref f, _) if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
        {
            return sql_err(&self.path, e);
        }
        Error::Invalid(format!(
            "{} is not in a form this version reads (opencode changed its tables?): {e}",
            self.path.display()
        ))
    }
}

const BUSY_WORDS: &str = "is busy (opencode is writing it)";

/// Whether a read failed only because SQLite made it wait too long (the message [`Db`]'s errors give).
pub fn is_busy(message: &str) -> bool {
    message.contains(BUSY_WORDS)
}

fn sql_err(path: &Path, e: rusqlite::Error) -> Error {
    let busy = matches!(&e, rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked));
    if busy {
        return Error::Invalid(format!("{} {BUSY_WORDS}: not read this time, nothing waited for it", path.display()));
    }
    Error::Invalid(format!("cannot read {}: {e}", path.display()))
}

/// opencode's title until the small model names the session ("New session - 2026-…").
fn is_default_title(t: &str) -> bool {
    t.starts_with("New session - ") || t.starts_with("Child session - ")
}

/// Reads session `id` of the database at `path`.
pub fn read(path: &Path, id: &str) -> Result<Conversation> {
    Db::open(path)?.conversation(id)
}

/// The messages and their parts as our messages.
fn convert(c: &mut Conversation, messages: Vec<(String, String)>, parts: Vec<(String, String)>) {
    let mut by_message: HashMap<String, Vec<Value>> = HashMap::new();
    let mut bad = 0;
    for (mid, data) in parts {
        match serde_json::from_str::<Value>(&data) {
            Ok(v) => by_message.entry(mid).or_default().push(v),
            Err(_) => bad += 1,
        }
    }
    let mut segments: Vec<Vec<Message>> = vec![Vec::new()];
    let mut unknown: HashMap<String, usize> = HashMap::new();
    for (mid, data) in messages {
        let Ok(m) = serde_json::from_str::<Value>(&data) else {
            bad += 1;
            continue;
        };
        let ts = m.pointer("/time/created").and_then(Value::as_i64).unwrap_or(0).div_euclid(1000);
        let parts = by_message.remove(&mid).unwrap_or_default();
        match m.get("role").and_then(Value::as_str).unwrap_or("") {
            "user" => user(&parts, ts, segments.last_mut().expect("one"), &mut unknown),
            "assistant" => {
                if let Some(model) = m.get("modelID").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                    c.model = model.to_string();
                }
                if m.get("summary").and_then(Value::as_bool) == Some(true) {
                    // the summary of a compaction: opencode goes on from it
                    let text = texts(&parts);
                    let mut s = Message::user(text);
                    s.ts = ts;
                    segments.push(vec![s]);
                    continue;
                }
                let failed =
                    m.pointer("/error/data/message").or_else(|| m.pointer("/error/name")).and_then(Value::as_str);
                assistant(&parts, ts, failed, segments.last_mut().expect("one"), &mut unknown);
            }
            other => *unknown.entry(format!("message(s) of role {other:?}")).or_default() += 1,
        }
    }
    if bad > 0 {
        c.notes.push(format!("{bad} message(s) or part(s) whose data is not JSON: left out"));
    }
    for (kind, n) in unknown {
        c.notes.push(format!("{n} {kind}: left out"));
    }
    if segments.len() > 1 && segments[0].is_empty() {
        segments.remove(0);
    }
    c.segments = segments;
}

fn texts(parts: &[Value]) -> String {
    let t: Vec<&str> = parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    t.join("\n\n").trim().to_string()
}

fn user(parts: &[Value], ts: i64, out: &mut Vec<Message>, unknown: &mut HashMap<String, usize>) {
    let mut text = Vec::new();
    for p in parts {
        let flag = |k: &str| p.get(k).and_then(Value::as_bool) == Some(true);
        match p.get("type").and_then(Value::as_str).unwrap_or("") {
            // a synthetic text is what opencode added (a file's content it read for an @mention): the model saw it
            "text" if !flag("ignored") => text.extend(p.get("text").and_then(Value::as_str).map(str::to_string)),
            "text" => {}
            "file" => {
                let mime = p.get("mime").and_then(Value::as_str).unwrap_or("");
                if mime.starts_with("image/") {
                    text.push(IMAGE_NOTE.to_string());
                } else if let Some(name) = p.get("filename").and_then(Value::as_str) {
                    text.push(format!("[file attached: {name}]"));
                }
            }
            "compaction" | "agent" | "subtask" | "snapshot" | "patch" => {}
            other => *unknown.entry(format!("part(s) of type {other:?}")).or_default() += 1,
        }
    }
    let text = strip_injected(&text.join("\n\n"));
    if !text.is_empty() && !is_injected(&text) {
        let mut m = Message::user(text);
        m.ts = ts;
        out.push(m);
    }
}

/// An assistant message: one answer per step (its text and calls), each call followed by its result.
fn assistant(
    parts: &[Value],
    ts: i64,
    failed: Option<&str>,
    out: &mut Vec<Message>,
    unknown: &mut HashMap<String, usize>,
) {
    let mut text: Vec<String> = Vec::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut results: Vec<Message> = Vec::new();
    let mut any = false;
    let mut flush =
        |text: &mut Vec<String>, calls: &mut Vec<ToolCall>, results: &mut Vec<Message>, out: &mut Vec<Message>| {
            let t = text.join("\n\n").trim().to_string();
            if !t.is_empty() || !calls.is_empty() {
                let mut m = Message::assistant_tool_calls(t, std::mem::take(calls));
                m.ts = ts;
                out.push(m);
                for mut r in results.drain(..) {
                    r.ts = ts;
                    out.push(r);
                }
                any = true;
            }
            text.clear();
            results.clear();
        };
    for p in parts {
        match p.get("type").and_then(Value::as_str).unwrap_or("") {
            "step-start" => flush(&mut text, &mut calls, &mut results, out),
            "text" => text.extend(p.get("text").and_then(Value::as_str).map(str::to_string)),
            "tool" => {
                let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let state = p.get("state").cloned().unwrap_or(Value::Null);
                let input = state.get("input").cloned().unwrap_or(Value::Object(Default::default()));
                calls.push(ToolCall::new(s("callID"), s("tool"), input));
                let body = |k: &str| state.get(k).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string));
                match state.get("status").and_then(Value::as_str) {
                    Some("completed") => {
                        results.push(Message::tool_result(s("callID"), body("output").unwrap_or_default(), false))
                    }
                    Some("error") => {
                        results.push(Message::tool_result(s("callID"), body("error").unwrap_or_default(), true))
                    }
                    // pending or running: no result yet, and the fold drops the call
                    _ => {}
                }
            }
            "reasoning" | "step-finish" | "snapshot" | "patch" | "agent" | "retry" | "compaction" | "subtask" => {}
            "file" => text.push(IMAGE_NOTE.to_string()),
            other => *unknown.entry(format!("part(s) of type {other:?}")).or_default() += 1,
        }
    }
    flush(&mut text, &mut calls, &mut results, out);
    if !any && let Some(err) = failed {
        let mut m = Message::assistant(format!("[the answer failed: {err}]"));
        m.ts = ts;
        out.push(m);
    }
}
