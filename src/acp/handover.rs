//! Another agent's session handed back to that agent (issue 46 item 3): its transcript imported as a session of ours
//! (or the copy our store already holds), which is then recorded as an ACP session of the agent whose own id of it is
//! the original's (a `meta` entry, as a session we ran with the agent has): resumed, the chat starts the agent and
//! `session/load`s that very session ([`super::chat`]'s resume order), so the agent goes on in its own transcript with
//! all its context, while our log holds the earlier messages as imported (the `replace` with `imported_from`) and
//! every new one.
//!
//! Which way it goes on, decided here and said by the chat:
//! - [`Way::Agent`]: the agent's command is found; it loads its session, else (deleted, no `loadSession`, a failed
//!   load) it starts a new one told our transcript of it (the agent's own line at its start says which);
//! - [`Way::NotInstalled`]: the agent is known (built in or `agents.NAME`) but its command is not found: the session is
//!   the agent's all the same (its next start, once installed, loads it or is told the transcript), and the chat says
//!   how to install it;
//! - [`Way::Ours`]: no agent of that name at all: the copy is resumed by our own agent, as before this existed.
//!
//! A copy of ours is reused rather than imported again when it holds the original as it is and nothing else (a kept
//! copy, an earlier import nobody continued), or when it was handed over already (its `meta` names the same agent
//! session): one conversation, one session of ours.
//!
//! A session whose load would leave the agent a history its model's API refuses (Gemini CLI 0.61's tool-call
//! sessions: [`crate::import::gemini::refused_on_load`], read from the file) is not loaded: the agent goes on as a new
//! session of its own, told our transcript with the next message, and the chat's line says why.
//!
//! Gemini CLI's `session/load` makes its next start delete the session it loaded (a stray empty file sharing the
//! session's short id, see `shared/AGENT_STORES.md`): the agent never loads the original. It is handed a copy of the
//! original's file under a new session id, written beside it in the agent's store ([`Handover::agent_copy`]); the
//! original stays as the terminal left it, listed and resumable there. The copy is this conversation's agent session
//! from then on (our `meta` names it), so the list still shows one row: ours.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::AgentSpec;
use crate::import::{self, Imported};
use crate::message::now;
use crate::session::contain::{Access, Dir};
use crate::session::entry::{AgentMeta, Entry, Kind};
use crate::session::{self, CONVERSATION_FILE_NAME, Context, Error, Result, meta};

/// How the session goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Way {
    /// With the agent that had it (a `session/load` of its own session, else a new session told our transcript).
    Agent,
    /// With that agent once its command is installed (the session is recorded as the agent's).
    NotInstalled,
    /// With our own agent: there is no agent of that name.
    Ours,
}

/// What [`hand_over`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Handover {
    /// Our session to resume.
    pub id: String,
    /// The ACP agent whose session it now is (`None`: our own agent's).
    pub agent: Option<String>,
    pub way: Way,
    /// One line for the chat: which way it goes on, and why.
    pub message: String,
    /// Messages our copy restores.
    pub messages: usize,
    /// Our copy existed already (a kept copy, an earlier import or handover).
    pub existing: bool,
    /// What the import left out, one line each.
    pub notes: Vec<String>,
    /// The copy of the agent's file written for it to load instead of its original (Gemini CLI), when one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_copy: Option<PathBuf>,
}

/// The built-in ACP agent that continues a session of `source` (a list row's `source`, an `imported_from.source`).
pub fn agent_for(source: &str) -> &str {
    match source {
        "claude-code" => "claude",
        "gemini-cli" => "gemini",
        "qwen-code" => "qwen",
        other => other,
    }
}

/// Hands the other agent's session in file `path` to agent `agent` (`setup({ agents })`'s name or a built-in one,
/// resolved through `agents`): imports it (or takes our copy of it), records it as that agent's session, and says
/// which way it goes on. The original file is only read here (the agent writes it when it loads it; Gemini CLI is
/// handed a copy of it instead).
pub fn hand_over(workspace: &Path, path: &Path, agent: &str, agents: &BTreeMap<String, AgentSpec>) -> Result<Handover> {
    let path = path.canonicalize().map_err(session::io_err("cannot read", path))?;
    let (source, conv) = import::read_any(&path)?;
    let what = format!("{} session {}", source_title(source.as_str()), short(&conv.id));
    let spec = match super::resolve(agent, agents) {
        Ok(spec) => spec,
        Err(why) => {
            let imported = import::import(workspace, &path)?;
            let message = format!("{what}: continued by our own agent ({why}); its messages are imported here");
            return Ok(handover(imported, None, Way::Ours, message, None));
        }
    };
    let imported = match handed_over_before(workspace, source.as_str(), agent, &conv.id) {
        Some(id) => {
            let loaded = session::load(&Context::open(workspace, &id)?)?;
            let imported = Imported { id, messages: loaded.messages.len(), existing: true, notes: conv.notes.clone() };
            let (way, message) = way_of(&what, agent, &spec);
            return Ok(handover(imported, Some(agent.to_string()), way, message, None));
        }
        None => {
            let mut imported = import::import(workspace, &path)?;
            if imported.existing && !untouched_copy(&Context::open(workspace, &imported.id)?)? {
                // a copy our own agent went on with: the agent's session lacks that, so a new copy goes to the agent
                imported = import::import_anew(workspace, &path)?;
            }
            imported
        }
    };
    let refused = refused_on_load(source, &path);
    let (session_id, agent_copy) = match (&refused, loses_on_load(agent)) {
        (Some(_), _) => (String::new(), None),
        (None, true) => agent_copy(&path, &conv.id).map(|(id, p)| (id, Some(p)))?,
        (None, false) => (conv.id.clone(), None),
    };
    let agent_meta = AgentMeta { name: agent.to_string(), session_id, ..Default::default() };
    meta::append(&Context::open(workspace, &imported.id)?, Entry::meta_agent(agent_meta, now()))?;
    let (way, mut message) = match &refused {
        Some(why) => way_told(&what, agent, &spec, IMPORTED_HERE, why),
        None => way_of(&what, agent, &spec),
    };
    if let Some(copy) = &agent_copy {
        message.push_str(&copy_said(copy));
    }
    Ok(handover(imported, Some(agent.to_string()), way, message, agent_copy))
}

/// Hands over the other agent's session `id` (`AGENT:SESSION_ID`, as its row gives it): the session of ours already
/// handed to it, else its row in the agent's store (as [`hand_over`]), else our untouched copy of it (a kept copy whose
/// original is gone: the agent is then told our transcript).
pub fn hand_over_id(
    workspace: &Path,
    id: &str,
    agents: &BTreeMap<String, AgentSpec>,
    homes: &import::Homes,
) -> Result<Handover> {
    let (agent, session_id) = id.split_once(':').filter(|_| import::is_external_id(id)).ok_or_else(|| {
        Error::Invalid(format!("no session {id:?}: not another agent's session id (AGENT:ID, as its row gives it)"))
    })?;
    let ours = session::list(workspace, &session::ListOptions::default())?;
    let what = |source: &str| format!("{} session {}", source_title(source), short(session_id));
    let handed = ours.iter().find(|s| {
        s.agent.as_deref() == Some(agent)
            && (s.agent_session.as_deref() == Some(session_id)
                || s.imported_from.as_ref().is_some_and(|f| f.id == session_id && agent_for(&f.source) == agent))
    });
    if let Some(s) = handed {
        let source = s.imported_from.as_ref().map_or(agent, |f| f.source.as_str());
        let (way, message) = match super::resolve(agent, agents) {
            Ok(spec) => way_of(&what(source), agent, &spec),
            Err(why) => (Way::Ours, format!("{}: {why}", what(source))),
        };
        let imported = Imported { id: s.id.clone(), messages: s.messages, existing: true, notes: Vec::new() };
        return Ok(handover(imported, Some(agent.to_string()), way, message, None));
    }
    let missing = match import::find(workspace, homes, id) {
        Ok(item) => {
            if let Some(why) = &item.unsupported {
                return Err(Error::Invalid(format!("{} cannot be continued: {why}", item.path.display())));
            }
            if item.source == import::Source::Opencode {
                return hand_over_imported(workspace, &item, agents);
            }
            return hand_over(workspace, &item.path, &item.agent, agents);
        }
        Err(e) => e,
    };
    let copy = ours.iter().find(|s| {
        s.agent.is_none()
            && s.imported_from.as_ref().is_some_and(|f| f.id == session_id && agent_for(&f.source) == agent)
    });
    let Some((s, from)) = copy.and_then(|s| s.imported_from.as_ref().map(|f| (s, f))) else { return Err(missing) };
    if !untouched_copy(&Context::open(workspace, &s.id)?)? {
        return Err(Error::Invalid(format!(
            "{id} is gone from {agent}'s store and our copy of it was continued by our own agent: resume session {} \
             instead",
            s.id
        )));
    }
    let imported = Imported { id: s.id.clone(), messages: s.messages, existing: true, notes: Vec::new() };
    let spec = match super::resolve(agent, agents) {
        Ok(spec) => spec,
        Err(why) => {
            let message = format!("{}: continued by our own agent ({why})", what(&from.source));
            return Ok(handover(imported, None, Way::Ours, message, None));
        }
    };
    let agent_meta = AgentMeta { name: agent.to_string(), session_id: session_id.to_string(), ..Default::default() };
    meta::append(&Context::open(workspace, &s.id)?, Entry::meta_agent(agent_meta, now()))?;
    let (way, message) = way_of(&what(&from.source), agent, &spec);
    Ok(handover(imported, Some(agent.to_string()), way, message, None))
}

/// A kept copy (`external.keep`, [`crate::import::keep`]) resumed by our own id (the list's one row for it): handed to
/// the agent that had the original, as [`hand_over_id`] hands the original: brought up to date from the original
/// first when it still exists (Gemini CLI is handed a copy of it), recorded as that agent's session, and resumed by
/// the agent ([`super::AcpDrivers`]). `None` (resumed by our own agent, as any session of ours): not a kept copy, one
/// continued already, no agent of that name or its command not installed.
pub fn hand_over_kept(
    workspace: &Path,
    info: &session::SessionInfo,
    agents: &BTreeMap<String, AgentSpec>,
    homes: &import::Homes,
) -> Option<Handover> {
    let from = info.imported_from.as_ref().filter(|f| f.kept && info.agent.is_none())?;
    let agent = agent_for(&from.source);
    let spec = super::resolve(agent, agents).ok()?;
    // an agent that is not installed leaves the copy ours (bound to it, the copy could not go on until it is)
    super::find_command(&spec.command)?;
    let ctx = Context::open(workspace, &info.id).ok()?;
    // the original, when it is still there: the copy brought up to date from it first
    let original = import::find(workspace, homes, &format!("{agent}:{}", from.id)).ok();
    if let Some(item) = original.as_ref().filter(|i| i.unsupported.is_none()) {
        let _ = import::keep::update_copy(workspace, item.source, &item.session_id, &item.path);
    }
    if !untouched_copy(&ctx).ok()? {
        return None;
    }
    let what = format!("{} session {}", source_title(&from.source), short(&from.id));
    let refused = original.as_ref().and_then(|item| refused_on_load(item.source, &item.path));
    let copy = match original.filter(|_| loses_on_load(agent) && refused.is_none()) {
        Some(item) => agent_copy(&item.path, &from.id).ok(),
        None => None,
    };
    let session_id = match (&refused, &copy) {
        (Some(_), _) => String::new(),
        (None, Some((id, _))) => id.clone(),
        (None, None) => from.id.clone(),
    };
    let agent_meta = AgentMeta { name: agent.to_string(), session_id, ..Default::default() };
    meta::append(&ctx, Entry::meta_agent(agent_meta, now())).ok()?;
    let whence = "its earlier messages are our kept copy's";
    let (way, mut message) = match &refused {
        Some(why) => way_told(&what, agent, &spec, whence, why),
        None => way_said(&what, agent, &spec, whence),
    };
    let agent_copy = copy.map(|(_, p)| p);
    if let Some(p) = &agent_copy {
        message.push_str(&copy_said(p));
    }
    let imported = Imported { id: info.id.clone(), messages: info.messages, existing: true, notes: Vec::new() };
    Some(handover(imported, Some(agent.to_string()), way, message, agent_copy))
}

/// An opencode session (one of many in its database, so no file of its own to import again): imported as a row,
/// reused as [`import::import_item`] does, and recorded as the agent's.
fn hand_over_imported(
    workspace: &Path,
    item: &import::ExternalItem,
    agents: &BTreeMap<String, AgentSpec>,
) -> Result<Handover> {
    let what = format!("{} session {}", source_title(item.source.as_str()), short(&item.session_id));
    let imported = import::import_item(workspace, item)?;
    let spec = match super::resolve(&item.agent, agents) {
        Ok(spec) => spec,
        Err(why) => {
            let message = format!("{what}: continued by our own agent ({why}); its messages are imported here");
            return Ok(handover(imported, None, Way::Ours, message, None));
        }
    };
    let ctx = Context::open(workspace, &imported.id)?;
    if !untouched_copy(&ctx)? {
        return Err(Error::Invalid(format!(
            "{} was continued by our own agent as session {}: resume that one",
            item.id, imported.id
        )));
    }
    let agent_meta = AgentMeta { name: item.agent.clone(), session_id: item.session_id.clone(), ..Default::default() };
    meta::append(&ctx, Entry::meta_agent(agent_meta, now()))?;
    let (way, message) = way_of(&what, &item.agent, &spec);
    Ok(handover(imported, Some(item.agent.clone()), way, message, None))
}

/// Which way a session of agent `agent` (resolved to `spec`) goes on, and the chat's line saying it.
fn way_of(what: &str, agent: &str, spec: &AgentSpec) -> (Way, String) {
    way_said(what, agent, spec, IMPORTED_HERE)
}

/// Where the chat's earlier messages come from, as the line says it.
const IMPORTED_HERE: &str = "its earlier messages are imported here";

/// [`way_of`], the line saying where the earlier messages come from with `whence`.
fn way_said(what: &str, agent: &str, spec: &AgentSpec, whence: &str) -> (Way, String) {
    if super::find_command(&spec.command).is_some() {
        let message = format!("{what}: continued by {agent}, which loads the session itself ({whence})");
        return (Way::Agent, message);
    }
    let how = super::install_hint(&spec.command).map(|h| format!(" ({h})")).unwrap_or_default();
    let message = format!(
        "{what}: continued as a session of {agent}, whose command {:?} is not installed: install it{how} or set \
         agents.{agent}.command, then send a message (it loads its session if it still has it, else it is told this \
         conversation); {whence}",
        spec.command
    );
    (Way::NotInstalled, message)
}

/// [`way_said`] for a session the agent is not to load, as its load would fail (`why`): the agent goes on as a new
/// session of its own, told our transcript with the next message (the log's `meta` names the agent and no session of
/// it, as a rewound conversation's does).
fn way_told(what: &str, agent: &str, spec: &AgentSpec, whence: &str, why: &str) -> (Way, String) {
    if super::find_command(&spec.command).is_none() {
        return way_said(what, agent, spec, whence);
    }
    let message = format!(
        "{what}: continued by {agent} in a new session of its own, told the conversation so far with your next \
         message, not loaded: {why} ({whence})"
    );
    (Way::Agent, message)
}

/// Why the agent's own load of the session in `path` (of `source`) would leave it a history its model's API refuses,
/// when it would: Gemini CLI's tool-call sessions ([`import::gemini::refused_on_load`]). Read from the file, before
/// any agent starts: the chat then never sends a message the API refuses, and no prompt has to be sent again.
fn refused_on_load(source: import::Source, path: &Path) -> Option<String> {
    match source {
        import::Source::GeminiCli => import::gemini::refused_on_load(path).ok().flatten(),
        _ => None,
    }
}

/// [`refused_on_load`] for the session `id` of our chat's agent `agent` (run by `spec`, in `root`), found in the
/// agent's own store by its id (Gemini CLI's chats folder, under the `HOME` or `GEMINI_CLI_HOME` its entry sets, else
/// ours): a resume of the chat then starts a new session of the agent told our transcript instead of its load.
pub fn refused_by_agent(agent: &str, spec: &AgentSpec, root: &Path, id: &str) -> Option<String> {
    if agent != "gemini" {
        return None;
    }
    let var = |v: &str| {
        let set = spec.env.get(v).map(PathBuf::from).or_else(|| std::env::var_os(v).map(PathBuf::from));
        set.filter(|p| !p.as_os_str().is_empty())
    };
    let file = import::gemini::session_file(&import::Homes::from_vars(var).gemini?, root, id)?;
    refused_on_load(import::Source::GeminiCli, &file)
}

fn handover(
    imported: Imported,
    agent: Option<String>,
    way: Way,
    message: String,
    agent_copy: Option<PathBuf>,
) -> Handover {
    Handover {
        id: imported.id,
        agent,
        way,
        message,
        messages: imported.messages,
        existing: imported.existing,
        notes: imported.notes,
        agent_copy,
    }
}

/// The session of ours already handed to `agent` as its session of the original `source`/`id` (the newest).
fn handed_over_before(workspace: &Path, source: &str, agent: &str, id: &str) -> Option<String> {
    let ours = session::list(workspace, &session::ListOptions::default()).ok()?;
    ours.into_iter()
        .find(|s| {
            s.agent.as_deref() == Some(agent)
                && s.imported_from.as_ref().is_some_and(|f| f.source == source && f.id == id)
        })
        .map(|s| s.id)
}

/// The session holds its copy of the original and nothing of its own: after the import's lines (and a kept copy's
/// syncs, `kept` lines) only names and pins follow.
fn untouched_copy(ctx: &Context) -> Result<bool> {
    let mut text = String::new();
    Dir::session(ctx)?
        .open(CONVERSATION_FILE_NAME, Access::Read)?
        .read_to_string(&mut text)
        .map_err(session::io_err("cannot read", &ctx.jsonl_path))?;
    let entries: Vec<Entry> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let copied = |e: &Entry| {
        e.is(Kind::Kept)
            || (e.is(Kind::Replace)
                && matches!(
                    e.reason.as_str(),
                    import::REASON_IMPORT | import::keep::REASON_KEPT | import::REASON_COMPACT
                ))
    };
    let Some(last_copied) = entries.iter().rposition(copied) else { return Ok(false) };
    Ok(entries[last_copied + 1..].iter().all(|e| e.is(Kind::Title) || e.is(Kind::Pin)))
}

/// The agents whose `session/load` may cost the session loaded (Gemini CLI: its next start deletes it).
fn loses_on_load(agent: &str) -> bool {
    agent == "gemini"
}

/// A copy of the agent's file `original` (a Gemini CLI chat of session `id`) under a new session id, written beside it
/// with a name as Gemini gives one (`session-<minute>-<first 8 of the id>.jsonl`): every record naming the session
/// names the copy's id instead, the rest byte for byte. Returns the new id and the copy.
fn agent_copy(original: &Path, id: &str) -> Result<(String, PathBuf)> {
    let text = std::fs::read_to_string(original).map_err(session::io_err("cannot read", original))?;
    let new_id = uuid_v4();
    let renamed = |line: &str| -> Option<String> {
        let mut v: Value = serde_json::from_str(line).ok()?;
        let named = v.get("sessionId").and_then(Value::as_str) == Some(id);
        named.then(|| {
            v["sessionId"] = Value::String(new_id.clone());
            v.to_string()
        })
    };
    let legacy = original.extension().is_some_and(|e| e == "json");
    let copy = match (legacy, renamed(&text)) {
        (true, Some(whole)) => whole,
        _ => text.lines().map(|l| renamed(l).unwrap_or_else(|| l.to_string()) + "\n").collect(),
    };
    // Named for the minute before this one: a load names the file it records into by the current minute and the id's
    // first 8 characters, and writes over a file of that name (the copy, had it been named for now, as a load in
    // the same minute as a terminal's start writes over the original). Gemini sorts by the header's times.
    let minute = (chrono::Utc::now() - chrono::Duration::minutes(1)).format("%Y-%m-%dT%H-%M");
    let ext = if legacy { "json" } else { "jsonl" };
    let to = original.with_file_name(format!("session-{minute}-{}.{ext}", short(&new_id)));
    crate::atomic::replace(&to, copy.as_bytes(), crate::atomic::Durable::Data, crate::atomic::Mode::Keep)
        .map_err(session::io_err("cannot write the agent's copy", &to))?;
    Ok((new_id, to))
}

/// The words the chat's line gains when the agent was handed a copy of its file (its store now holds two sessions of
/// the conversation).
fn copy_said(copy: &Path) -> String {
    format!(
        "; it is handed a copy of its file ({}), as its load would cost the original its next start",
        copy.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
    )
}

/// A random (version 4) UUID, as the agents name their sessions.
fn uuid_v4() -> String {
    let b: [u8; 16] = rand::random();
    let hex = |r: std::ops::Range<usize>| r.map(|i| format!("{:02x}", b[i])).collect::<String>();
    let (v, var) =
        (format!("4{:x}{:02x}", b[6] & 0x0f, b[7]), format!("{:x}{:x}{:02x}", 8 | (b[8] >> 6), b[8] & 0x0f, b[9]));
    format!("{}-{}-{v}-{var}-{}", hex(0..4), hex(4..6), hex(10..16))
}

/// "Claude Code", "Codex"…: the tool a row's `source` names.
fn source_title(source: &str) -> &str {
    import::Source::ALL.into_iter().find(|s| s.as_str() == source).map_or(source, |s| s.name())
}

/// The first 8 characters of an id, as the agents show them.
fn short(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(i, _)| &id[..i])
}
