//! Other agents' sessions, read-only: Claude Code transcripts, Codex rollouts, Gemini CLI and Qwen Code chats,
//! opencode's database and Pi's session trees of this workspace, listed and imported as sessions of ours (issues 11
//! and 46).
//!
//! Each reader turns its tool's records into [`Conversation`]: our messages, in order, cut into segments at
//! the tool's own compactions. [`import`] writes that as a new session: one `replace` (reason `import`,
//! carrying `imported_from`) with the first segment, then one `replace` (reason `compact`) per compaction, so
//! what came before a compaction stays in the log for search and export while a resume starts from the
//! summary the tool itself resumed from.
//!
//! Architecture invariant: the source files are only opened for reading (never written, locked or moved), and
//! the imported history goes through the loader's own fold ([`crate::session::replay::Replay`]) before it is
//! counted, so its tool calls follow the rule every history of ours follows: each answered once, right after
//! it, no orphan results, nothing invented.

pub mod claude_code;
pub mod codex;
pub mod gemini;
pub mod keep;
pub mod list;
pub mod opencode;
pub mod packed;
pub mod pi;
pub mod qwen;
pub mod search;
pub mod words;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::message::{Message, now};
use crate::session::entry::{Entry, ImportedFrom};
use crate::session::replay::{Replay, title_of};
use crate::session::{self, Context, Error, Result, Writer, WriterOptions};

/// The tools whose sessions can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    ClaudeCode,
    Codex,
    GeminiCli,
    QwenCode,
    Opencode,
    Pi,
}

impl Source {
    pub const ALL: [Source; 6] =
        [Source::ClaudeCode, Source::Codex, Source::GeminiCli, Source::QwenCode, Source::Opencode, Source::Pi];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::ClaudeCode => "claude-code",
            Source::Codex => "codex",
            Source::GeminiCli => "gemini-cli",
            Source::QwenCode => "qwen-code",
            Source::Opencode => "opencode",
            Source::Pi => "pi",
        }
    }

    /// The built-in ACP agent that continues a session of this tool (`agents.NAME`): a row's `agent`, and the prefix
    /// of its `id`.
    pub fn agent(self) -> &'static str {
        match self {
            Source::ClaudeCode => "claude",
            Source::Codex => "codex",
            Source::GeminiCli => "gemini",
            Source::QwenCode => "qwen",
            Source::Opencode => "opencode",
            Source::Pi => "pi",
        }
    }

    /// The tool's name in a sentence.
    pub fn name(self) -> &'static str {
        match self {
            Source::ClaudeCode => "Claude Code",
            Source::Codex => "Codex",
            Source::GeminiCli => "Gemini CLI",
            Source::QwenCode => "Qwen Code",
            Source::Opencode => "opencode",
            Source::Pi => "Pi",
        }
    }

    fn of_agent(agent: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|s| s.agent() == agent)
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One conversation of another tool, converted.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// The tool's own id of the session (Claude Code's `sessionId`, Codex's `session_meta.id`).
    pub id: String,
    pub cwd: Option<PathBuf>,
    /// The custom title or thread name, if the tool has one.
    pub title: Option<String>,
    /// Set when the session is in a form this version does not read (an unknown format version): why. Its
    /// segments are then empty: nothing is guessed.
    pub unsupported: Option<String>,
    pub model: String,
    pub branch: Option<String>,
    /// Unix seconds of the last record.
    pub modified: i64,
    /// opencode: the session's `time_updated` in milliseconds (what tells one version of it from the next).
    pub modified_ms: i64,
    /// The history, cut at each compaction: `segments[0]` is the start, each later one starts with the
    /// summary the tool resumed from.
    pub segments: Vec<Vec<Message>>,
    /// What was left out and why, one line each (unknown record and block types, a bad line): shown by the
    /// CLI, never silently lost.
    pub notes: Vec<String>,
}

/// One row of `sessions.list({ external = true })`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalItem {
    pub source: Source,
    /// The built-in ACP agent that continues it ([`Source::agent`]).
    pub agent: String,
    /// `<agent>:<session_id>` ([`external_id`]): what `resume(id)` and [`find`] take. Never one of our ids (they hold no
    /// `:`), and only ever matched against listed rows, never made into a path.
    pub id: String,
    /// The tool's own id of the session (Claude Code's `sessionId`, opencode's `ses_…`): what the agent's
    /// `session/load` takes.
    pub session_id: String,
    /// The transcript file; for opencode, its database.
    pub path: PathBuf,
    pub title: String,
    pub modified: i64,
    /// The count an import restores.
    pub messages: usize,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Set when the file cannot be imported (a compressed rollout, an unknown format version): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    /// What the reader left out or found damaged (a cut last line, lines that are not JSON, unknown records), one
    /// sentence each: the row says so instead of hiding it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Summarised from the file's head and tail only (a quick list): `messages` is not known yet (0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// Where the tools keep their sessions; `None` when not set (the home folder's default then applies).
#[derive(Debug, Clone, Default)]
pub struct Homes {
    pub claude: Option<PathBuf>,
    pub codex: Option<PathBuf>,
    /// Gemini CLI's `.gemini` folder (holding `tmp/` and `projects.json`).
    pub gemini: Option<PathBuf>,
    /// Qwen Code's folder holding `projects/`.
    pub qwen: Option<PathBuf>,
    /// opencode's data folder, holding `opencode.db`.
    pub opencode: Option<PathBuf>,
    /// Pi's agent folder, holding `sessions/`.
    pub pi: Option<PathBuf>,
    /// Pi's own session folder when one is set (`$PI_CODING_AGENT_SESSION_DIR`): every workspace's sessions in it,
    /// instead of a folder per workspace under `<pi>/sessions`.
    pub pi_session_dir: Option<PathBuf>,
}

impl Homes {
    /// Where each tool looks, by the variables the tool itself honours: `$CLAUDE_CONFIG_DIR` else `~/.claude`;
    /// `$CODEX_HOME` else `~/.codex`; `$GEMINI_CLI_HOME/.gemini` else `~/.gemini`; `$QWEN_RUNTIME_DIR`, else
    /// `$QWEN_HOME`, else `~/.qwen`; `$XDG_DATA_HOME/opencode` else `~/.local/share/opencode`; `$PI_CODING_AGENT_DIR`
    /// else `~/.pi/agent` (and `$PI_CODING_AGENT_SESSION_DIR`).
    pub fn from_env() -> Homes {
        Homes::from_vars(|v| std::env::var_os(v).filter(|v| !v.is_empty()).map(PathBuf::from))
    }

    /// [`Homes::from_env`] with the variables read through `var` (set and non-empty, else `None`).
    pub fn from_vars(var: impl Fn(&str) -> Option<PathBuf>) -> Homes {
        let home = var("HOME");
        let under = |dir: &str| home.as_ref().map(|h| h.join(dir));
        // a leading `~` as the tools expand it (Qwen and Pi do; a literal `~` folder is never meant)
        let expand = |p: PathBuf| match (p.strip_prefix("~"), &home) {
            (Ok(rest), Some(h)) => h.join(rest),
            _ => p,
        };
        Homes {
            claude: var("CLAUDE_CONFIG_DIR").or_else(|| under(".claude")),
            codex: var("CODEX_HOME").or_else(|| under(".codex")),
            gemini: var("GEMINI_CLI_HOME").map(|h| expand(h).join(".gemini")).or_else(|| under(".gemini")),
            qwen: var("QWEN_RUNTIME_DIR").or_else(|| var("QWEN_HOME")).map(expand).or_else(|| under(".qwen")),
            opencode: var("XDG_DATA_HOME").map(|d| d.join("opencode")).or_else(|| under(".local/share/opencode")),
            pi: var("PI_CODING_AGENT_DIR").map(expand).or_else(|| under(".pi/agent")),
            pi_session_dir: var("PI_CODING_AGENT_SESSION_DIR").map(expand),
        }
    }
}

/// The id of another tool's session as a row gives it: `<agent>:<session id>`.
pub fn external_id(source: Source, session_id: &str) -> String {
    format!("{}:{session_id}", source.agent())
}

/// Whether `id` has the form of [`external_id`] (a known agent, `:`, a session id of the characters the tools use):
/// the editor's `resume(id)` asks before it takes an id for one of ours.
pub fn is_external_id(id: &str) -> bool {
    parse_external_id(id).is_some()
}

fn parse_external_id(id: &str) -> Option<(Source, &str)> {
    let (agent, session) = id.split_once(':')?;
    let ok = !session.is_empty()
        && session.len() <= 200
        && session.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !session.starts_with('.');
    Some((Source::of_agent(agent)?, session)).filter(|_| ok)
}

/// The row of `id` ([`external_id`]) among the workspace's other-agent sessions; an error naming what is wrong (a
/// malformed id, none such in this workspace).
pub fn find(workspace: &Path, homes: &Homes, id: &str) -> Result<ExternalItem> {
    let Some((source, _)) = parse_external_id(id) else {
        return Err(Error::Invalid(format!(
            "{id:?} is not another agent's session id (AGENT:ID, AGENT one of claude, codex, gemini, qwen, opencode, pi)"
        )));
    };
    let opts = list::ListOptions { quick: true, only: Some(source), ..Default::default() };
    list::list_with(workspace, homes, &opts).into_iter().find(|i| i.id == id).ok_or_else(|| {
        Error::Invalid(format!(
            "no {} session {id} in {} (it may have been deleted)",
            source.name(),
            workspace.display()
        ))
    })
}

/// Imports `what`: another agent's session id as a row gives it ([`external_id`]; unless a file of that name exists),
/// else a session file ([`import`]).
pub fn import_any(workspace: &Path, homes: &Homes, what: &str) -> Result<Imported> {
    // `AGENT:…` with a known agent is taken for an id (a malformed one refused as such), unless it is a file
    let agent_prefix = what.split_once(':').is_some_and(|(a, _)| Source::of_agent(a).is_some());
    if agent_prefix && !Path::new(what).exists() {
        return import_item(workspace, &find(workspace, homes, what)?);
    }
    import(workspace, Path::new(what))
}

/// The conversation of a listed row, read whole.
pub fn read_item(item: &ExternalItem) -> Result<Conversation> {
    let c = match item.source {
        Source::Opencode => opencode::read(&item.path, &item.session_id)?,
        source => read(source, &item.path)?,
    };
    supported(item, c)
}

/// [`read_item`] of a transcript whose `bytes` were read already (a search read them to test them first).
pub fn parse_item(item: &ExternalItem, bytes: &[u8]) -> Result<Conversation> {
    supported(item, parse_read(item.source, bytes, &item.path)?)
}

fn supported(item: &ExternalItem, c: Conversation) -> Result<Conversation> {
    match &c.unsupported {
        Some(why) => Err(Error::Invalid(format!("{} cannot be imported: {why}", item.path.display()))),
        None => Ok(c),
    }
}

impl Conversation {
    /// The history a resume restores: the last segment, folded as the loader folds a log.
    pub fn restored(&self) -> Vec<Message> {
        let mut r = Replay::keeping();
        for e in self.entries("", now()) {
            r.feed_entry(e);
        }
        r.finish().messages
    }

    /// The title the list shows: the tool's own name for it, else the first real prompt.
    pub fn shown_title(&self) -> String {
        if let Some(t) = self.title.as_deref().filter(|t| !t.trim().is_empty()) {
            return t.trim().to_string();
        }
        let first = self.segments.iter().flatten().find(|m| m.is_user_text()).map(|m| m.content.as_str());
        first.map(title_of).unwrap_or_default()
    }

    fn entries(&self, model: &str, ts: i64) -> Vec<Entry> {
        let mut out = Vec::new();
        for (i, seg) in self.segments.iter().enumerate() {
            let reason = if i == 0 { REASON_IMPORT } else { REASON_COMPACT };
            let mut e = Entry::replace(reason, fold(seg), ts);
            if i == 0 {
                e.model = model.to_string();
            }
            out.push(e);
        }
        out
    }
}

/// A segment as the loader would restore it: calls without all their results dropped with them, orphan
/// results dropped (the loader's own fold decides; nothing is invented).
fn fold(seg: &[Message]) -> Vec<Message> {
    let mut r = Replay::keeping();
    r.feed_entry(Entry::replace(REASON_IMPORT, seg.to_vec(), 0));
    r.finish().messages
}

pub const REASON_IMPORT: &str = "import";
pub const REASON_COMPACT: &str = "compact";

/// The workspace's transcripts of both tools, newest first, each read whole (or taken from the cache, see
/// [`list::list_with`]): `messages` is the count an import restores.
pub fn list(workspace: &Path, homes: &Homes) -> Vec<ExternalItem> {
    list::list_with(workspace, homes, &list::ListOptions::default())
}

/// The chain of `items` from the first to `items[last]` along their parent links, in order (Qwen Code's records, Pi's
/// entries): `parent` names an item's parent (`None`: the root), `find` the index of the item with an id. A loop, or a
/// parent missing from the file (a damaged line), ends it there with a note; `(one, all)` name an item's and the
/// items' in it (`("a record's", "the records'")`).
pub(crate) fn parent_chain<'a, T>(
    items: &'a [T],
    last: Option<usize>,
    parent: impl Fn(&'a T) -> Option<&'a str>,
    find: impl Fn(&str) -> Option<usize>,
    (one, all): (&str, &str),
    notes: &mut Vec<String>,
) -> Vec<&'a T> {
    let mut out = Vec::new();
    let Some(mut at) = last else { return out };
    let mut seen = vec![false; items.len()];
    loop {
        if std::mem::replace(&mut seen[at], true) {
            notes.push(format!("{all} parent links loop: the history before the loop is left out"));
            break;
        }
        out.push(&items[at]);
        let Some(p) = parent(&items[at]) else { break };
        match find(p) {
            Some(i) => at = i,
            None => {
                notes.push(format!(
                    "{one} parent ({p}) is missing from the file (a damaged line?): the history before it is \
                     left out"
                ));
                break;
            }
        }
    }
    out.reverse();
    out
}

/// The records of another tool's JSONL text, each line that parses, in order. What is left out is said in `notes`:
/// a last line cut short (the tool was still writing it, or the list read only the file's head) and the count of
/// lines that are not JSON. Both readers go through it.
pub(crate) fn json_records(text: &str, notes: &mut Vec<String>) -> Vec<serde_json::Value> {
    json_lines(text, notes, |line| serde_json::from_str(line).ok())
}

/// [`json_records`] with each line read by `record` (`None`: the line is not JSON), for a reader that reads its
/// records typed; it must take and refuse the lines that `serde_json::from_str::<Value>` does.
pub(crate) fn json_lines<'a, T>(
    text: &'a str,
    notes: &mut Vec<String>,
    mut record: impl FnMut(&'a str) -> Option<T>,
) -> Vec<T> {
    let lines: Vec<&str> = text.lines().collect();
    let mut records = Vec::with_capacity(lines.len());
    let mut bad = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match record(line) {
            Some(v) => records.push(v),
            None if i + 1 == lines.len() && !text.ends_with('\n') => {
                notes.push("the last line is cut short (the tool was still writing it): left out".into())
            }
            None => bad += 1,
        }
    }
    if bad > 0 {
        notes.push(format!("{bad} line(s) that are not JSON: left out"));
    }
    records
}

/// A transcript belongs to the workspace when it was recorded in it or below it.
pub fn belongs(cwd: Option<&Path>, workspace: &Path) -> bool {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    cwd.is_some_and(|c| c.starts_with(&ws) || c.starts_with(workspace))
}

/// Reads a transcript of either tool; which one is told by its records.
pub fn read_any(path: &Path) -> Result<(Source, Conversation)> {
    let source = detect(path)?;
    Ok((source, read(source, path)?))
}

/// Reads a transcript of `source`.
pub(crate) fn read(source: Source, path: &Path) -> Result<Conversation> {
    if source == Source::Opencode {
        return Err(not_a_transcript(path));
    }
    parse_read(source, &std::fs::read(path).map_err(session::io_err("cannot read", path))?, path)
}

/// A transcript's bytes as text: checked by `str::from_utf8` first (the lossy check is several times slower, a tenth
/// of converting a Claude Code transcript, and a transcript is UTF-8 unless damaged), lossily only when that fails.
pub(crate) fn text_of(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// [`text_of`], owning the bytes (not copied when they are UTF-8).
pub(crate) fn into_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A transcript of `source` from its `bytes`.
fn parse_read(source: Source, bytes: &[u8], path: &Path) -> Result<Conversation> {
    let text = text_of(bytes);
    Ok(match source {
        Source::ClaudeCode => claude_code::parse(&text, path),
        Source::Codex => codex::parse(&text, path, &codex::thread_names(path)),
        Source::GeminiCli => gemini::parse(&text, path, gemini::project_root(path).as_deref()),
        Source::QwenCode => qwen::parse(&text, path),
        Source::Pi => pi::parse(&text, path),
        Source::Opencode => return Err(not_a_transcript(path)),
    })
}

fn not_a_transcript(path: &Path) -> Error {
    Error::Invalid(format!(
        "{} is opencode's database, which holds many sessions: import one by its id (opencode:ses_…, as `sessions list --external` shows it)",
        path.display()
    ))
}

fn detect(path: &Path) -> Result<Source> {
    if path.extension().is_some_and(|e| e == "zst") {
        return Err(Error::Invalid(format!(
            "{} is a zstd-compressed Codex rollout, which cannot be imported as it is: decompress it with `zstd -d` first",
            path.display()
        )));
    }
    if opencode::is_database(path) {
        return Ok(Source::Opencode);
    }
    let text = std::fs::read_to_string(path).map_err(session::io_err("cannot read", path))?;
    if path.extension().is_some_and(|e| e == "json") && gemini::is_legacy(&text) {
        return Ok(Source::GeminiCli);
    }
    for line in text.lines().take(50) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if let Some(source) = source_of_record(&v) {
            return Ok(source);
        }
    }
    Err(Error::Invalid(format!(
        "{} is not a session file of Claude Code, Codex, Gemini CLI, Qwen Code or Pi (no record of any in its first lines)",
        path.display()
    )))
}

/// Which tool writes a record of this shape.
fn source_of_record(v: &serde_json::Value) -> Option<Source> {
    let has = |k: &str| v.get(k).is_some();
    if v.get("type").and_then(|t| t.as_str()) == Some("session") && v.get("id").is_some_and(|i| i.is_string()) {
        return Some(Source::Pi);
    }
    if has("projectHash") {
        return Some(Source::GeminiCli);
    }
    if v.pointer("/message/parts").is_some() {
        return Some(Source::QwenCode);
    }
    if has("payload") && has("type") {
        return Some(Source::Codex);
    }
    if has("sessionId") || has("parentUuid") {
        return Some(Source::ClaudeCode);
    }
    None
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Imported {
    pub id: String,
    pub messages: usize,
    /// True when the same, unchanged transcript had been imported before: `id` is that session.
    pub existing: bool,
    pub notes: Vec<String>,
}

/// Imports the transcript at `path` into `workspace` as a new session of ours, or returns the session it was
/// imported into before when the file has not changed since (same size and modification time).
pub fn import(workspace: &Path, path: &Path) -> Result<Imported> {
    import_with(workspace, path, true)
}

/// [`import`] into a new session even when the unchanged file was imported or kept before (that session went on
/// without the original's agent: [`crate::acp::handover`]).
pub fn import_anew(workspace: &Path, path: &Path) -> Result<Imported> {
    import_with(workspace, path, false)
}

fn import_with(workspace: &Path, path: &Path, reuse: bool) -> Result<Imported> {
    let path = path.canonicalize().map_err(session::io_err("cannot read", path))?;
    let (source, c) = read_any(&path)?;
    let meta = std::fs::metadata(&path).map_err(session::io_err("cannot read", &path))?;
    import_conversation(workspace, source, &path, c, Some(meta.len()), mtime(&path), reuse)
}

/// Imports a listed row ([`find`]): a file as [`import`] does; an opencode session, whose database changes with every
/// session, is the same as before while its `time_updated` (milliseconds, kept as `imported_from.mtime`) is.
pub fn import_item(workspace: &Path, item: &ExternalItem) -> Result<Imported> {
    if item.source != Source::Opencode {
        return import(workspace, &item.path);
    }
    let c = read_item(item)?;
    let updated = c.modified_ms;
    import_conversation(workspace, item.source, &item.path, c, None, updated, true)
}

fn import_conversation(
    workspace: &Path,
    source: Source,
    path: &Path,
    c: Conversation,
    bytes: Option<u64>,
    mtime: i64,
    reuse: bool,
) -> Result<Imported> {
    // a conversation kept in our store already is that session, brought up to date: one session per conversation
    // (unless a new session is asked for: the copy went on without the original's agent)
    if reuse && let Some(kept) = keep::update_copy(workspace, source, &c.id, path) {
        let id = kept?;
        let messages = session::load(&Context::open(workspace, &id)?)?.messages.len();
        return Ok(Imported { id, messages, existing: true, notes: c.notes });
    }
    if let Some(why) = &c.unsupported {
        return Err(Error::Invalid(format!("{} cannot be imported: {why}", path.display())));
    }
    if c.segments.iter().all(Vec::is_empty) {
        return Err(Error::Invalid(format!(
            "{} holds no conversation to import (no user or assistant message)",
            path.display()
        )));
    }
    let from = ImportedFrom {
        source: source.as_str().to_string(),
        id: c.id.clone(),
        path: path.to_string_lossy().into_owned(),
        bytes,
        mtime: Some(mtime),
        kept: false,
    };
    let restored = c.restored().len();
    for id in imports_of(workspace, &from).into_iter().filter(|_| reuse) {
        // An import writes one line per segment: one killed part way (its first line written, a later compaction's
        // not) has fewer, and is not offered again; the newest whole one is (continued here since or not), else the
        // file is imported anew.
        let loaded = session::load(&Context::open(workspace, &id)?)?;
        if loaded.entries >= c.segments.len() {
            return Ok(Imported { id, messages: loaded.messages.len(), existing: true, notes: c.notes });
        }
    }
    let ctx = Context::new(workspace)?;
    let written = write(&ctx, &c, from);
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&ctx.dir);
        return Err(e);
    }
    Ok(Imported { id: ctx.id, messages: restored, existing: false, notes: c.notes })
}

fn write(ctx: &Context, c: &Conversation, from: ImportedFrom) -> Result<()> {
    let writer = Writer::open(ctx, WriterOptions { model: c.model.clone(), ..Default::default() })?;
    let ts = now();
    for (i, mut e) in c.entries(&c.model, ts).into_iter().enumerate() {
        if i == 0 {
            e.imported_from = Some(from.clone());
        }
        // large tool results are spilled to the session's tool-results/ as a live turn's are
        let logged =
            e.messages.take().unwrap_or_default().iter().map(|m| writer.as_logged(m)).collect::<Result<Vec<_>>>()?;
        e.messages = Some(logged);
        writer.append_entry(e)?;
    }
    let title = c.shown_title();
    if !title.is_empty() {
        writer.append_entry(Entry::title(&title, ts))?;
    }
    writer.close()
}

/// The sessions an unchanged `from` was imported into, newest first: the first line of each log is read.
fn imports_of(workspace: &Path, from: &ImportedFrom) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(session::sessions_dir(workspace)) else { return Vec::new() };
    let mut found: Vec<(i64, String)> = Vec::new();
    for e in dir.flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        let Ok(ctx) = Context::for_id(workspace, &id) else { continue };
        let Some(first) = first_line(&ctx.jsonl_path) else { continue };
        let Ok(entry) = serde_json::from_str::<Entry>(&first) else { continue };
        if entry.imported_from.as_ref() == Some(from) {
            found.push((entry.ts, id));
        }
    }
    // newest first by the time of the first line, then by id (its creation time; within a second, any whole one)
    found.sort_by(|a, b| b.cmp(a));
    found.into_iter().map(|(_, id)| id).collect()
}

fn first_line(path: &Path) -> Option<String> {
    use std::io::BufRead;
    let f = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(f).read_line(&mut line).ok()?;
    Some(line)
}

fn mtime(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// RFC 3339 time as unix seconds; 0 when missing or not a time.
pub(crate) fn unix_time(v: Option<&serde_json::Value>) -> i64 {
    v.and_then(|v| v.as_str()).map_or(0, unix_seconds)
}

/// RFC 3339 time as unix seconds; 0 when not a time.
pub(crate) fn unix_seconds(s: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s).map_or(0, |t| t.timestamp())
}

/// Context a tool injects into the conversation (not something the user typed).
pub(crate) fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<environment_context>",
        "<user_instructions>",
        "<system-reminder>",
        "<command-name>",
        "<local-command-",
        "<command-message>",
        "# AGENTS.md instructions",
        "<INSTRUCTIONS>",
        "<session_context>",
        "Caveat: The messages below were generated by the user",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// Text with the injected blocks (`<system-reminder>…</system-reminder>` and friends) taken out.
pub(crate) fn strip_injected(text: &str) -> String {
    // copied only when there is something to take out, searched only when a tag may be there: it runs on every
    // prompt of every transcript read
    if !text.contains('<') {
        return text.trim().to_string();
    }
    let mut out = std::borrow::Cow::Borrowed(text);
    for (open, close) in [
        ("<system-reminder>", "</system-reminder>"),
        ("<environment_context>", "</environment_context>"),
        ("<user_instructions>", "</user_instructions>"),
    ] {
        while let Some(a) = out.find(open) {
            let Some(b) = out[a..].find(close) else { break };
            out.to_mut().replace_range(a..a + b + close.len(), "");
        }
    }
    out.trim().to_string()
}

pub(crate) const IMAGE_NOTE: &str = "[an image was attached here in the original session; it was not imported]";
