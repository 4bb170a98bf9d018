//! The agent as an editor drives it: one current agent, turns on the host's own tokio threads,
//! everything they report queued for the editor's main loop.
//!
//! Nothing here knows Neovim. The bridge gives [`Host::new`] a `wake` function (a libuv async
//! handle's `send`); the editor's loop then calls [`Host::drain`] and gets every queued message at
//! once (async handles merge wake-ups, so one wake may stand for many messages). No call of the host
//! waits on a model, a network or a tool: `send` returns as soon as the turn is spawned.
//!
//! Architecture invariant: what the editor calls returns at once: turns and resumes run on the host's tokio
//! threads, and their outcome comes back through the queue `drain()` empties.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::mpsc;

pub use super::config::{AutoApproveConfig, HostConfig, make_provider, resolve_provider};
use super::config::{agent_config, make_servers};
use super::outbox::OutboxApprover;
pub use super::outbox::{ApprovalAsk, BufferAsk, FileWritten, Outbound, Outbox, ResumeDone, ResumeReport};
use super::{Agent, Cancel, Event, Resumed, lock};
use crate::display;
use crate::message::Message;
use crate::provider;
use crate::session::{self, Context};
use crate::tools::{Approval, Approver, BufferState};
use crate::usage::Usage;

#[derive(Debug, Clone, Serialize)]
pub struct CurrentSession {
    pub id: String,
    pub dir: PathBuf,
    pub jsonl: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub busy: bool,
    pub unsaved: bool,
    pub provider: String,
    pub model: String,
    pub session: Option<String>,
    /// Tokens the current session spent (zero before its first answer).
    pub usage: Usage,
    /// Their price, when `pricing` names every model that reported usage.
    pub cost: Option<f64>,
}

pub struct Host {
    rt: tokio::runtime::Runtime,
    outbox: Arc<Outbox>,
    state: Arc<Mutex<State>>,
}

struct State {
    config: HostConfig,
    agent: Option<Arc<Agent>>,
    turn: Option<Cancel>,
    busy: Arc<std::sync::atomic::AtomicBool>,
    /// Bumped whenever the current agent changes, so that a resume finishing after a newer switch
    /// (a new chat, another resume) does not replace it.
    generation: u64,
    /// A resume is being read on the host's threads.
    resuming: Option<u64>,
    /// The MCP servers, made at the first chat and kept for the editor's life (made again when `setup()`
    /// changes them), with the configuration they were made from.
    mcp: Option<(Arc<crate::mcp::Servers>, crate::mcp::McpConfig, AutoApproveConfig)>,
}

/// Why the host did not do what the editor asked. The session's and the provider's errors keep their
/// sources (the bridge logs the chain; the user sees the first sentence).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Session(#[from] session::Error),
    #[error(transparent)]
    Provider(#[from] provider::ProviderError),
    #[error("cannot start the agent's threads: {0}")]
    Threads(#[source] std::io::Error),
    /// Not now, or not this: the sentence says why and what to do.
    #[error("{0}")]
    Refused(String),
}

pub(crate) type HostResult<T> = Result<T, HostError>;

impl Host {
    pub fn new(wake: Box<dyn Fn() + Send + Sync>) -> HostResult<Host> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pseudoclaude")
            .enable_all()
            .build()
            .map_err(HostError::Threads)?;
        let outbox = Arc::new(Outbox {
            queue: Mutex::new(Vec::new()),
            wake,
            approvals: Mutex::new(HashMap::new()),
            buffer_checks: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let state = State {
            config: HostConfig::default(),
            agent: None,
            turn: None,
            busy: Arc::default(),
            generation: 0,
            resuming: None,
            mcp: None,
        };
        Ok(Host { rt, outbox, state: Arc::new(Mutex::new(state)) })
    }

    /// Switches the model: the current chat's next turn and every new chat use it (a turn running keeps its
    /// own). Returns the model now in effect.
    pub fn set_model(&self, model: &str) -> HostResult<String> {
        let model = model.trim();
        if model.is_empty() {
            return Err(provider::ProviderError::Config { message: "no model named".into() }.into());
        }
        let mut st = lock(&self.state);
        let mut config = st.config.clone();
        config.provider = resolve_provider(&config);
        config.provider.model = model.to_string();
        let provider = make_provider(&config)?;
        if let Some(agent) = &st.agent {
            agent.set_provider(provider);
        }
        st.config = config;
        Ok(model.to_string())
    }

    /// Applies a new configuration; the next new chat uses it (a running one keeps its provider).
    pub fn configure(&self, config: HostConfig) {
        lock(&self.state).config = config;
    }

    /// Everything queued since the last call, in order.
    pub fn drain(&self) -> Vec<Outbound> {
        std::mem::take(&mut *lock(&self.outbox.queue))
    }

    /// Starts a turn; returns at once. Creates the agent (not yet its session) when there is none.
    pub fn send(&self, text: &str) -> HostResult<()> {
        self.send_with(text, Vec::new())
    }

    /// [`Host::send`] with context from the editor attached to the message.
    pub fn send_with(&self, text: &str, attachments: Vec<crate::attachment::Attachment>) -> HostResult<()> {
        if text.trim().is_empty() {
            return Err(HostError::Refused("nothing to send: the message is empty".into()));
        }
        let mut st = lock(&self.state);
        if st.busy.load(Ordering::SeqCst) {
            return Err(HostError::Refused("the agent is still answering: wait, or cancel the turn with <C-c>".into()));
        }
        if st.resuming.is_some() {
            return Err(HostError::Refused("a session is being restored: send again once it shows".into()));
        }
        let agent = match &st.agent {
            Some(a) => a.clone(),
            None => {
                let mcp = self.mcp_servers(&mut st);
                let a = Arc::new(self.new_agent(&st.config, mcp)?);
                st.agent = Some(a.clone());
                let config = st.config.clone();
                self.rt.spawn_blocking(move || note_workspace(&config));
                a
            }
        };
        let cancel = Cancel::new();
        st.turn = Some(cancel.clone());
        st.busy.store(true, Ordering::SeqCst);
        let busy = st.busy.clone();
        let outbox = self.outbox.clone();
        let text = text.to_string();
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        // Forward events as they come, so the editor sees streaming text while the turn runs.
        self.rt.spawn(async move {
            while let Some(ev) = rx.recv().await {
                // Idle before the editor hears the turn is done, so it can send again at once.
                if matches!(ev, Event::TurnDone { .. }) {
                    busy.store(false, Ordering::SeqCst);
                }
                outbox.push(Outbound::Event(ev));
            }
        });
        self.rt.spawn(async move { agent.turn_with(&text, &attachments, tx, cancel).await });
        Ok(())
    }

    /// Cancels the running turn, if any. Pending approval prompts count as declined.
    pub fn cancel(&self) -> bool {
        let st = lock(&self.state);
        let running = st.busy.load(Ordering::SeqCst);
        if let Some(c) = &st.turn {
            c.cancel();
        }
        for (_, tx) in lock(&self.outbox.approvals).drain() {
            let _ = tx.send(Approval::No);
        }
        // Unanswered buffer checks refuse their writes.
        lock(&self.outbox.buffer_checks).clear();
        running
    }

    /// Answers an approval of a write or an edit with the change blocks to apply (1-based, in the
    /// order of the ask's `change.hunks`); none is a no.
    pub fn approve_hunks(&self, id: u64, accepted: Vec<usize>) -> HostResult<()> {
        let tx = lock(&self.outbox.approvals).remove(&id);
        match tx {
            Some(tx) => {
                let _ = tx.send(Approval::Only(accepted));
                Ok(())
            }
            None => Err(HostError::Refused(format!("no pending approval {id} (the turn may have been cancelled)"))),
        }
    }

    /// Answers a buffer check: `none` (no loaded buffer holds the file), `unmodified` or `modified`.
    pub fn buffer_state(&self, id: u64, state: &str) -> HostResult<()> {
        let state = match state {
            "none" => BufferState::NotLoaded,
            "unmodified" => BufferState::Unmodified,
            "modified" => BufferState::Modified,
            other => {
                return Err(HostError::Refused(format!(
                    "unknown buffer state {other:?}: use \"none\", \"unmodified\" or \"modified\""
                )));
            }
        };
        match lock(&self.outbox.buffer_checks).remove(&id) {
            Some(tx) => {
                let _ = tx.send(state);
                Ok(())
            }
            None => Err(HostError::Refused(format!(
                "no pending buffer check {id} (it timed out, or the turn was cancelled)"
            ))),
        }
    }

    /// Answers an approval prompt: `yes`, `no` or `always`.
    pub fn approve(&self, id: u64, answer: &str) -> HostResult<()> {
        let answer = match answer {
            "yes" => Approval::Yes,
            "no" => Approval::No,
            "always" => Approval::Always,
            other => {
                return Err(HostError::Refused(format!("unknown answer {other:?}: use \"yes\", \"no\" or \"always\"")));
            }
        };
        let tx = lock(&self.outbox.approvals).remove(&id);
        match tx {
            Some(tx) => {
                let _ = tx.send(answer);
                Ok(())
            }
            None => Err(HostError::Refused(format!("no pending approval {id} (the turn may have been cancelled)"))),
        }
    }

    /// Switches to session `id` on the host's threads: returns a ticket at once; the outcome arrives
    /// in the queue as [`Outbound::Resumed`] with that ticket (the lock, torn-tail repair, replay and
    /// spill checks all run off the editor's main loop). The new agent is built first (its writer
    /// opened, its log loaded) and installed only if the current chat did not change meanwhile; on
    /// any error the current session stays as it was.
    pub fn resume_async(&self, id: &str) -> HostResult<u64> {
        let (config, generation) = self.resume_check(id)?;
        let mcp = self.mcp_servers(&mut lock(&self.state));
        let ticket = self.outbox.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        lock(&self.state).resuming = Some(ticket);
        let outbox = self.outbox.clone();
        let state = self.state.clone();
        let id = id.to_string();
        self.rt.spawn_blocking(move || {
            let built =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build_resumed(&config, mcp, &outbox, &id)))
                    .unwrap_or_else(|_| Err(HostError::Refused(format!("internal error while reading session {id}"))));
            let outcome = {
                let mut st = lock(&state);
                st.resuming = None;
                built.and_then(|(agent, report)| install(&mut st, generation, agent).map(|()| report))
            };
            let done = match outcome {
                Ok(report) => ResumeDone { kind: "resumed", ticket, ok: true, report: Some(report), error: None },
                Err(e) => ResumeDone { kind: "resumed", ticket, ok: false, report: None, error: Some(e.to_string()) },
            };
            outbox.push(Outbound::Resumed(done));
        });
        Ok(ticket)
    }

    /// What a resume may start from: not while a turn runs or another resume is read.
    fn resume_check(&self, id: &str) -> HostResult<(HostConfig, u64)> {
        let st = lock(&self.state);
        if st.busy.load(Ordering::SeqCst) {
            return Err(HostError::Refused(
                "cannot resume while the agent is answering: cancel the turn first (<C-c>)".into(),
            ));
        }
        if st.resuming.is_some() {
            return Err(HostError::Refused("another session is being restored: wait for it to show".into()));
        }
        if st.agent.as_ref().and_then(|a| a.current()).is_some_and(|c| c.id == id) {
            return Err(HostError::Refused(format!("session {id} is already the current one")));
        }
        Ok((st.config.clone(), st.generation))
    }

    /// The messages of the current history just before `to` that fit `max_messages` and about
    /// `budget` bytes, as the screen gets them (see [`crate::display`]).
    pub fn history_slice(&self, to: usize, max_messages: usize, budget: usize) -> display::Slice {
        let agent = lock(&self.state).agent.clone();
        let max = display::MAX_DISPLAY_BYTES;
        match agent {
            Some(a) => a.with_messages(|m| display::slice_back(m, to, max_messages, budget, max)),
            None => display::slice(&[], 0, 0, max),
        }
    }

    /// Starts over with a new, empty chat (the old session stays on disk).
    pub fn new_chat(&self) -> HostResult<()> {
        let mut st = lock(&self.state);
        if st.busy.load(Ordering::SeqCst) {
            return Err(HostError::Refused("cannot start a new chat while the agent is answering".into()));
        }
        st.agent = None;
        st.generation += 1;
        Ok(())
    }

    pub fn current(&self) -> Option<CurrentSession> {
        let ctx: Context = lock(&self.state).agent.as_ref()?.current()?;
        Some(CurrentSession { id: ctx.id, dir: ctx.dir, jsonl: ctx.jsonl_path })
    }

    /// The current agent, for work done off the main loop on its session (naming it, forking it).
    pub fn agent(&self) -> Option<Arc<Agent>> {
        lock(&self.state).agent.clone()
    }

    pub fn messages(&self) -> Vec<Message> {
        lock(&self.state).agent.as_ref().map(|a| a.messages()).unwrap_or_default()
    }

    pub fn status(&self) -> Status {
        let st = lock(&self.state);
        let (provider, model) = match &st.agent {
            Some(a) => {
                let p = a.provider();
                (p.name().to_string(), p.model().to_string())
            }
            None => {
                let p = resolve_provider(&st.config);
                (p.name, p.model)
            }
        };
        let usage = st.agent.as_ref().map(|a| a.usage()).unwrap_or_default();
        Status {
            usage: usage.total(),
            cost: usage.cost(&st.config.pricing),
            busy: st.busy.load(Ordering::SeqCst),
            unsaved: st.agent.as_ref().is_some_and(|a| a.conversation.is_unsaved()),
            provider,
            model,
            session: st.agent.as_ref().and_then(|a| a.current()).map(|c| c.id),
        }
    }

    /// Closes the current session (its lock is released). Waits for nothing.
    pub fn close(&self) {
        self.cancel();
        let mut st = lock(&self.state);
        st.agent = None;
        st.generation += 1;
    }

    fn new_agent(&self, config: &HostConfig, mcp: Option<Arc<crate::mcp::Servers>>) -> HostResult<Agent> {
        let provider = make_provider(config)?;
        let approver: Arc<dyn Approver> = Arc::new(OutboxApprover(self.outbox.clone()));
        Ok(Agent::new(agent_config(config, mcp), provider, approver))
    }

    /// The MCP servers of the current configuration (made, not yet started, the first time).
    fn mcp_servers(&self, st: &mut State) -> Option<Arc<crate::mcp::Servers>> {
        if let Some((s, cfg, approve)) = &st.mcp
            && *cfg == st.config.mcp
            && *approve == st.config.approve
        {
            return Some(s.clone());
        }
        let made = make_servers(&st.config, self.rt.handle().clone());
        if let Some(s) = &made {
            let outbox = self.outbox.clone();
            s.on_consent(move |ask| outbox.push(Outbound::McpConsent(ask)));
        }
        st.mcp = made.clone().map(|s| (s, st.config.mcp.clone(), st.config.approve.clone()));
        made
    }

    /// The running MCP servers' resources as they last listed them (what `@SERVER:URI` completes to); none
    /// before the first chat. Nothing is asked of a server here.
    pub fn mcp_resources(&self) -> Vec<crate::mcp::ServerResource> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        servers.map(|s| s.resources()).unwrap_or_default()
    }

    /// Each configured MCP server's state, tools and last error (`stopped` before the first chat; a server of
    /// the workspace's `.mcp.json` not agreed to: `awaiting_consent`).
    pub fn mcp_status(&self) -> Vec<crate::mcp::Status> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        match servers {
            Some(s) => {
                s.load();
                s.status()
            }
            None => Vec::new(),
        }
    }

    /// The user's answer about a server of the workspace's `.mcp.json`: `yes`, `no` (both remembered in
    /// `.PseudoClaude/mcp-consent.json`) or `later`.
    pub fn mcp_consent(&self, name: &str, answer: &str) -> HostResult<()> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        let s = servers.ok_or_else(|| HostError::Refused("there is no MCP server to answer about".into()))?;
        s.answer(name, answer).map_err(HostError::Refused)
    }

    /// Asks again about a server of `.mcp.json` (`name`), or about every one declined or not answered yet.
    pub fn mcp_ask_again(&self, name: Option<&str>) -> HostResult<usize> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        let s = servers.ok_or_else(|| {
            HostError::Refused(format!(
                "the workspace has no {} and setup() names no server",
                crate::mcp::workspace::FILE
            ))
        })?;
        s.ask_again(name).map_err(HostError::Refused)
    }

    /// At the editor's exit: the current session closed, every MCP server stopped with its process group.
    pub fn shutdown(&self) {
        // the agent's servers may be older ones than `st.mcp` (a setup() changed them since the chat began)
        let agent_servers = lock(&self.state).agent.as_ref().and_then(|a| a.config.mcp.clone());
        self.close();
        let ours = lock(&self.state).mcp.as_ref().map(|(s, _, _)| s.clone());
        for s in agent_servers.iter().chain(ours.iter()) {
            s.stop();
        }
    }
}

/// Builds the agent of session `id` (the slow part of a resume: lock, repair, replay).
fn build_resumed(
    config: &HostConfig,
    mcp: Option<Arc<crate::mcp::Servers>>,
    outbox: &Arc<Outbox>,
    id: &str,
) -> HostResult<(Agent, ResumeReport)> {
    let provider = make_provider(config)?;
    let approver: Arc<dyn Approver> = Arc::new(OutboxApprover(outbox.clone()));
    let (agent, resumed) = Agent::resume(agent_config(config, mcp), provider, approver, id)?;
    let report = report(id, &agent, &resumed);
    note_workspace(config);
    Ok((agent, report))
}

/// A session starts or is resumed in the configured workspace: the registry learns it (a hint, so a
/// failure only costs `:PseudoResume all` this workspace until the next session).
fn note_workspace(config: &HostConfig) {
    if let Some(file) = &config.workspaces_file {
        let _ = crate::workspaces::record(file, &config.workspace);
    }
}

/// Makes `agent` the current one, unless the current one changed since the resume began.
fn install(st: &mut State, generation: u64, agent: Agent) -> HostResult<()> {
    if st.generation != generation {
        return Err(HostError::Refused(
            "the chat changed while the session was being restored: resume it again".into(),
        ));
    }
    if st.busy.load(Ordering::SeqCst) {
        return Err(HostError::Refused("a turn started while the session was being restored: resume it again".into()));
    }
    st.agent = Some(Arc::new(agent)); // the old agent (and its writer's lock) goes here
    st.turn = None;
    st.generation += 1;
    Ok(())
}

fn report(id: &str, agent: &Agent, resumed: &Resumed) -> ResumeReport {
    let mut notice = resumed.loaded.damage_report();
    if resumed.torn_bytes > 0 && resumed.loaded.torn_tail_bytes == 0 {
        let torn = format!("moved a torn last line of {} bytes to conversation.jsonl.broken", resumed.torn_bytes);
        notice = if notice.is_empty() { torn } else { format!("{notice}; {torn}") };
    }
    ResumeReport {
        id: id.to_string(),
        messages: agent.with_messages(|m| m.len()),
        stale_hours: resumed.stale_seconds.map(|s| s / 3600),
        stale_seconds: resumed.stale_seconds,
        notice,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::session::{Writer, WriterOptions};

    #[test]
    fn a_misspelled_config_key_is_refused_with_its_name() {
        let ok: HostConfig = serde_json::from_str(r#"{"approve":{"write_file":true},"provider":{"name":"demo"}}"#)
            .expect("the keys the Lua side sends");
        assert!(ok.approve.write_file);
        for (json, key) in [
            (r#"{"approve":{"write_files":true}}"#, "write_files"),
            (r#"{"provider":{"idle_timeout":5}}"#, "idle_timeout"),
            (r#"{"stale_after":1}"#, "stale_after"),
        ] {
            let err = serde_json::from_str::<HostConfig>(json).expect_err(json).to_string();
            assert!(err.contains(key), "{err}");
        }
    }

    fn host_in(ws: &std::path::Path) -> Host {
        let host = Host::new(Box::new(|| {})).expect("host");
        host.configure(HostConfig { workspace: ws.to_path_buf(), ..HostConfig::default() });
        host
    }

    fn session(ws: &std::path::Path) -> String {
        let ctx = Context::new(ws).expect("context");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        w.append(&Message::user("hello")).expect("append");
        w.append(&Message::assistant("hi")).expect("append");
        ctx.id
    }

    fn resumed(host: &Host) -> ResumeDone {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            for m in host.drain() {
                if let Outbound::Resumed(done) = m {
                    return done;
                }
            }
            assert!(std::time::Instant::now() < deadline, "no Resumed in the queue");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_resume_runs_off_the_calling_thread_and_reports_through_the_queue() {
        let ws = tempfile::tempdir().expect("tempdir");
        let id = session(ws.path());
        let host = host_in(ws.path());
        let ticket = host.resume_async(&id).expect("started");
        let done = resumed(&host);
        assert_eq!((done.ticket, done.ok), (ticket, true), "{:?}", done.error);
        assert_eq!(done.report.expect("report").messages, 2);
        assert_eq!(host.current().expect("current").id, id);
        // the same one again is refused at once, before any thread is started
        assert!(host.resume_async(&id).unwrap_err().to_string().contains("already the current one"));
    }

    #[test]
    fn a_failed_resume_leaves_the_current_session_as_it_was() {
        let ws = tempfile::tempdir().expect("tempdir");
        let first = session(ws.path());
        let held = session(ws.path());
        let host = host_in(ws.path());
        host.resume_async(&first).expect("started");
        assert!(resumed(&host).ok);
        let ctx = Context::open(ws.path(), &held).expect("ctx");
        let _other_editor = crate::session::lock::acquire(&ctx).expect("lock");
        host.resume_async(&held).expect("started");
        let done = resumed(&host);
        assert!(!done.ok && done.error.as_deref().is_some_and(|e| e.contains("open in another editor")), "{done:?}");
        assert_eq!(host.current().expect("current").id, first);
    }
}
