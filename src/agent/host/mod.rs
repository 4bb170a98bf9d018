//! The agent as an editor drives it: a registry of live chats, each with its own agent (its session, log, lock and
//! provider), its turn and its cancel; turns on the host's own tokio threads, everything they report queued for the
//! editor's main loop, each message named with its chat.
//!
//! Nothing here knows Neovim. The bridge gives [`Host::new`] a `wake` function (a libuv async
//! handle's `send`); the editor's loop then calls [`Host::drain`] and gets every queued message at
//! once (async handles merge wake-ups, so one wake may stand for many messages). No call of the host
//! waits on a model, a network or a tool: `send` returns as soon as the turn is spawned.
//!
//! Chats are named by their [`ChatId`] (see [`super::chat`]). One of them is *current*: the calls that name no chat
//! act on it, which is the single-chat editor of before (`:PseudoChat`, `:PseudoNew`, a resume into the chat). The
//! chats' turns run side by side; none waits for another, and a cancel stops only its own. The MCP servers are
//! the editor's, shared by every chat.
//!
//! Architecture invariant: what the editor calls returns at once: turns and resumes run on the host's tokio
//! threads, and their outcome comes back through the queue `drain()` empties.

mod answers;
mod mcp;
mod modes;
mod resume;
mod send;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;

pub use super::chat::{ChatId, ChatInfo, ChatState, Driver, Drivers};
use super::config::agent_config;
pub use super::config::{AgentSandbox, AgentSpec, AutoApproveConfig, HostConfig, make_provider, resolve_provider};
use super::outbox::OutboxApprover;
pub use super::outbox::{
    Addressed, ApprovalAsk, BufferAsk, BufferReadAsk, FileWritten, Outbound, Outbox, ResumeDone, ResumeReport, StateNow,
};
use super::{Agent, Cancel, Event, lock};
use crate::display;
use crate::message::Message;
use crate::provider;
use crate::session::{self, Context};
use crate::tools::Approver;
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
    /// The chat this is the status of, and what it is doing.
    pub chat: ChatId,
    pub state: ChatState,
}

pub struct Host {
    rt: tokio::runtime::Runtime,
    outbox: Arc<Outbox>,
    state: Arc<Mutex<State>>,
    /// The other kinds of agents (ACP), when the bridge gave them.
    drivers: Mutex<Option<Arc<dyn Drivers>>>,
}

struct State {
    config: HostConfig,
    chats: BTreeMap<ChatId, Chat>,
    /// The chat the calls that name none act on; always in `chats`.
    current: ChatId,
    next_chat: ChatId,
    /// The MCP servers, made at the first chat and kept for the editor's life (made again when `setup()`
    /// changes them), with the configuration they were made from.
    mcp: Option<(Arc<crate::mcp::Servers>, crate::mcp::McpConfig, AutoApproveConfig)>,
}

/// One live chat: its agent (none before its first message), its turn, and its own configuration when it was opened
/// with one (else the host's).
struct Chat {
    agent: Option<Arc<dyn Driver>>,
    config: Option<HostConfig>,
    /// The ACP agent it runs (`chat.new({ agent })`, `:PseudoChat NAME`); none: `setup({ agent })`, else ours.
    acp: Option<String>,
    turn: Option<Cancel>,
    busy: Arc<AtomicBool>,
    /// The last turn ended with an error.
    failed: Arc<AtomicBool>,
    /// Bumped whenever the chat's agent changes, so that a resume finishing after a newer switch
    /// (a new chat, another resume) does not replace it.
    generation: u64,
    /// A resume is being read on the host's threads.
    resuming: Option<u64>,
}

impl Chat {
    fn new(config: Option<HostConfig>) -> Chat {
        Chat {
            agent: None,
            config,
            acp: None,
            turn: None,
            busy: Arc::default(),
            failed: Arc::default(),
            generation: 0,
            resuming: None,
        }
    }

    fn busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    fn ours(&self) -> Option<Arc<Agent>> {
        self.agent.clone().and_then(|a| a.ours())
    }

    fn session(&self) -> Option<Context> {
        self.agent.as_ref().and_then(|a| a.session())
    }
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

/// How long the editor's exit waits for the cancelled turns to record what they had streamed.
const EXIT_DRAIN: Duration = Duration::from_secs(5);

/// How long the editor's exit waits at most for the closed chats' ACP agents to stop ([`Drivers::wait_stopped`]).
const EXIT_STOP: Duration = Duration::from_secs(2);

impl State {
    /// Chat `chat`, or the current one (`None`).
    fn chat(&self, chat: Option<ChatId>) -> HostResult<&Chat> {
        let id = chat.unwrap_or(self.current);
        self.chats.get(&id).ok_or_else(|| no_chat(id))
    }

    fn chat_mut(&mut self, chat: Option<ChatId>) -> HostResult<&mut Chat> {
        let id = chat.unwrap_or(self.current);
        self.chats.get_mut(&id).ok_or_else(|| no_chat(id))
    }

    fn config_of(&self, chat: &Chat) -> HostConfig {
        chat.config.clone().unwrap_or_else(|| self.config.clone())
    }

    /// The chat whose agent holds session `id`.
    fn live(&self, id: &str) -> Option<ChatId> {
        self.chats.iter().find(|(_, c)| c.session().is_some_and(|s| s.id == id)).map(|(n, _)| *n)
    }

    /// The name of the agent that drives `chat`, or will at its first message.
    fn agent_of(&self, chat: &Chat) -> String {
        match &chat.agent {
            Some(a) => a.agent_name(),
            None => self.acp_of(chat).unwrap_or_else(|| "pseudoclaude".into()),
        }
    }

    /// The ACP agent a chat without a driver yet starts with: its own, else `setup({ agent })`'s.
    fn acp_of(&self, chat: &Chat) -> Option<String> {
        chat.acp.clone().or_else(|| self.config_of(chat).agent)
    }

    fn open(&mut self, config: Option<HostConfig>) -> ChatId {
        self.next_chat += 1;
        let id = self.next_chat;
        self.chats.insert(id, Chat::new(config));
        id
    }
}

fn no_chat(id: ChatId) -> HostError {
    HostError::Refused(format!("there is no chat {id} (it was closed)"))
}

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
            approvals: Mutex::default(),
            buffer_checks: Mutex::default(),
            buffer_reads: Mutex::default(),
            next_id: AtomicU64::new(0),
        });
        let mut state =
            State { config: HostConfig::default(), chats: BTreeMap::new(), current: 0, next_chat: 0, mcp: None };
        state.current = state.open(None);
        Ok(Host { rt, outbox, state: Arc::new(Mutex::new(state)), drivers: Mutex::new(None) })
    }

    /// Lets chats run agents of other kinds (ACP): `chat.new({ agent })`, `setup({ agent })`, their sessions resumed.
    pub fn set_drivers(&self, drivers: Arc<dyn Drivers>) {
        *lock(&self.drivers) = Some(drivers);
    }

    fn drivers(&self) -> HostResult<Arc<dyn Drivers>> {
        lock(&self.drivers).clone().ok_or_else(|| HostError::Refused("no other kind of agent is available here".into()))
    }

    /// The host's threads, for a driver of another kind (an ACP agent) that runs its own work there.
    pub fn runtime(&self) -> tokio::runtime::Handle {
        self.rt.handle().clone()
    }

    /// Opens another chat (no session until its first message) with its own configuration, or the host's; the
    /// current chat stays current. Returns its number.
    pub fn open_chat(&self, config: Option<HostConfig>) -> ChatId {
        lock(&self.state).open(config)
    }

    /// Opens a chat driven by an agent of another kind: `make` is given the chat's number and the [`Approver`] its
    /// questions go through, and returns the driver.
    pub fn open_chat_with(&self, make: impl FnOnce(ChatId, Arc<dyn Approver>) -> Arc<dyn Driver>) -> ChatId {
        let mut st = lock(&self.state);
        let id = st.open(None);
        let approver: Arc<dyn Approver> = Arc::new(OutboxApprover { outbox: self.outbox.clone(), chat: id });
        if let Some(c) = st.chats.get_mut(&id) {
            c.agent = Some(make(id, approver));
        }
        id
    }

    /// Opens a chat with ACP agent `name` (`setup({ agents })`'s or a built-in one); the agent starts with its first
    /// message, on the host's threads. An unknown name is refused before anything opens. `config`: the chat's own
    /// (a worktree chat's names its worktree), else the host's.
    pub fn open_acp_chat(&self, name: &str, config: Option<HostConfig>) -> HostResult<ChatId> {
        let drivers = self.drivers()?;
        let mut st = lock(&self.state);
        drivers.check(name, &st.config).map_err(HostError::Refused)?;
        let id = st.open(config);
        st.chat_mut(Some(id))?.acp = Some(name.to_string());
        Ok(id)
    }

    /// Makes `chat` the one the calls that name no chat act on.
    pub fn focus(&self, chat: ChatId) -> HostResult<()> {
        let mut st = lock(&self.state);
        st.chat(Some(chat))?;
        st.current = chat;
        Ok(())
    }

    /// The current chat's number.
    pub fn current_chat(&self) -> ChatId {
        lock(&self.state).current
    }

    /// Closes `chat`: its turn cancelled, its agent dropped (its session's lock released once the turn has
    /// recorded its end). The last chat is never removed: it becomes empty. When the current chat closes, the
    /// newest other one becomes current.
    pub fn close_chat(&self, chat: Option<ChatId>) -> HostResult<()> {
        self.cancel_chat(chat)?;
        let mut st = lock(&self.state);
        let id = chat.unwrap_or(st.current);
        let closed = if st.chats.len() > 1 {
            st.chats.remove(&id)
        } else {
            let c = st.chat_mut(Some(id))?;
            c.generation += 1;
            c.turn = None;
            Some(std::mem::replace(c, Chat::new(None)))
        };
        if st.current == id && !st.chats.contains_key(&id) {
            st.current = *st.chats.keys().next_back().expect("one chat is always left");
        }
        drop(st);
        if let Some(agent) = closed.and_then(|c| c.agent) {
            agent.close();
        }
        Ok(())
    }

    /// Every live chat, oldest first.
    pub fn chats(&self) -> Vec<ChatInfo> {
        let st = lock(&self.state);
        st.chats
            .iter()
            .map(|(id, c)| ChatInfo {
                chat: *id,
                session: c.session().map(|s| s.id),
                title: c.agent.as_ref().map(|a| a.title()).unwrap_or_default(),
                agent: st.agent_of(c),
                state: self.state_of(*id, c),
                current: *id == st.current,
                worktree: c
                    .agent
                    .as_ref()
                    .map_or_else(|| c.config.as_ref().and_then(|k| k.worktree.clone()), |a| a.worktree()),
            })
            .collect()
    }

    /// The chat whose agent holds session `id` (a resume of it shows that chat instead of opening it twice).
    pub fn live(&self, id: &str) -> Option<ChatId> {
        lock(&self.state).live(id)
    }

    /// Chat `id`'s state ([`ChatState::of`]): whether a turn runs, waits for the user (an approval the host asked
    /// for, or its agent's own question), or the last one failed.
    fn state_of(&self, id: ChatId, c: &Chat) -> ChatState {
        let waits = || self.outbox.asks(id) || c.agent.as_ref().is_some_and(|a| a.waits());
        ChatState::of(c.busy(), waits, c.failed.load(Ordering::SeqCst))
    }

    /// The configuration in effect (what `setup()` gave last).
    pub fn config(&self) -> HostConfig {
        lock(&self.state).config.clone()
    }

    /// Applies a new configuration; the next new chat uses it (a running one keeps its provider).
    pub fn configure(&self, config: HostConfig) {
        lock(&self.state).config = config;
    }

    /// Everything queued since the last call, in order; then, for each chat a message was about, its state as the
    /// host decides it now ([`Outbound::State`]): the editor draws that, and never works a chat's state out itself.
    pub fn drain(&self) -> Vec<Addressed> {
        let mut out = std::mem::take(&mut *lock(&self.outbox.queue));
        let about: BTreeSet<ChatId> = out.iter().filter_map(|m| m.chat).collect();
        let st = lock(&self.state);
        for id in about {
            if let Some(c) = st.chats.get(&id) {
                let state = self.state_of(id, c);
                out.push(Addressed { chat: Some(id), message: Outbound::State(StateNow { kind: "state", state }) });
            }
        }
        out
    }

    /// The messages of the chat's history just before `to` that fit `max_messages` and about
    /// `budget` bytes, as the screen gets them (see [`crate::display`]).
    pub fn history_slice(&self, chat: Option<ChatId>, to: usize, max_messages: usize, budget: usize) -> display::Slice {
        let agent = lock(&self.state).chat(chat).ok().and_then(|c| c.agent.clone());
        let max = display::MAX_DISPLAY_BYTES;
        match agent.clone().and_then(|a| a.ours()) {
            Some(a) => a.with_messages(|m| display::slice_back(m, to, max_messages, budget, max)),
            None => {
                let messages = agent.map(|a| a.messages()).unwrap_or_default();
                let refs: Vec<&Message> = messages.iter().collect();
                display::slice_back(&refs, to, max_messages, budget, max)
            }
        }
    }

    /// Starts chat `chat` (`None`: the current one) over, empty (the old session stays on disk).
    pub fn new_chat(&self, chat: Option<ChatId>) -> HostResult<()> {
        let mut st = lock(&self.state);
        let c = st.chat_mut(chat)?;
        if c.busy() {
            return Err(HostError::Refused("cannot start a new chat while the agent is answering".into()));
        }
        let old = c.agent.take();
        c.failed.store(false, Ordering::SeqCst);
        c.generation += 1;
        drop(st);
        if let Some(a) = old {
            a.close();
        }
        Ok(())
    }

    pub fn current(&self, chat: Option<ChatId>) -> Option<CurrentSession> {
        let ctx: Context = lock(&self.state).chat(chat).ok()?.session()?;
        Some(CurrentSession { id: ctx.id, dir: ctx.dir, jsonl: ctx.jsonl_path })
    }

    /// The chat's agent when it is ours, for work done off the main loop on its session (naming it, forking it).
    pub fn agent(&self, chat: Option<ChatId>) -> Option<Arc<Agent>> {
        lock(&self.state).chat(chat).ok()?.ours()
    }

    /// Every chat's agent of our own, for what concerns them all (the files a rewind must not take back).
    pub fn agents(&self) -> Vec<(ChatId, Arc<Agent>)> {
        lock(&self.state).chats.iter().filter_map(|(id, c)| c.ours().map(|a| (*id, a))).collect()
    }

    /// The chat's driver (its agent, of any kind), for reading its history off the main loop.
    pub fn driver(&self, chat: Option<ChatId>) -> Option<Arc<dyn Driver>> {
        lock(&self.state).chat(chat).ok()?.agent.clone()
    }

    /// The name of the agent a chat runs (its driver's), or will run at its first message: an ACP agent's name
    /// before it started; `None` for ours before its first message.
    pub fn agent_name(&self, chat: Option<ChatId>) -> Option<String> {
        let st = lock(&self.state);
        let c = st.chat(chat).ok()?;
        c.agent.as_ref().map(|d| d.agent_name()).or_else(|| st.acp_of(c))
    }

    pub fn messages(&self, chat: Option<ChatId>) -> Vec<Message> {
        let agent = lock(&self.state).chat(chat).ok().and_then(|c| c.agent.clone());
        agent.map(|a| a.messages()).unwrap_or_default()
    }

    pub fn status(&self, chat: Option<ChatId>) -> HostResult<Status> {
        let st = lock(&self.state);
        let id = chat.unwrap_or(st.current);
        let c = st.chat(Some(id))?;
        let (provider, model) = match &c.agent {
            Some(a) => a.model(),
            None if st.acp_of(c).is_some() => {
                let name = st.acp_of(c).unwrap_or_default();
                (name.clone(), name)
            }
            None => {
                let p = resolve_provider(&st.config_of(c));
                (p.name, p.model)
            }
        };
        let usage = c.agent.as_ref().map(|a| a.usage()).unwrap_or_default();
        let cost = match &c.agent {
            Some(a) => a.cost(&st.config.pricing),
            None => usage.cost(&st.config.pricing),
        };
        Ok(Status {
            usage: usage.total(),
            cost,
            busy: c.busy(),
            unsaved: c.agent.as_ref().is_some_and(|a| a.unsaved()),
            provider,
            model,
            session: c.session().map(|c| c.id),
            chat: id,
            state: self.state_of(id, c),
        })
    }

    /// Closes the current chat's session (its lock is released). Waits for nothing.
    pub fn close(&self) {
        let _ = self.close_chat(None);
    }

    fn new_agent(&self, chat: ChatId, config: &HostConfig, mcp: Option<Arc<crate::mcp::Servers>>) -> HostResult<Agent> {
        let provider = make_provider(config)?;
        let approver: Arc<dyn Approver> = Arc::new(OutboxApprover { outbox: self.outbox.clone(), chat });
        Ok(Agent::new(agent_config(config, mcp), provider, approver))
    }

    /// A chat with ACP agent `name`, not started (its first turn starts it, off the editor's loop).
    fn new_acp(&self, chat: ChatId, config: &HostConfig, name: &str) -> HostResult<Arc<dyn Driver>> {
        let approver: Arc<dyn Approver> = Arc::new(OutboxApprover { outbox: self.outbox.clone(), chat });
        self.drivers()?.open(name, config, approver).map_err(HostError::Refused)
    }

    /// At the editor's exit: every chat's turn cancelled, and given up to [`EXIT_DRAIN`] to record what it had
    /// streamed (a cancelled turn writes its text as an interrupted answer, and its commands' process groups are
    /// killed); every chat closed; every MCP server stopped with its process group.
    pub fn shutdown(&self) {
        let ids: Vec<ChatId> = lock(&self.state).chats.keys().copied().collect();
        for id in &ids {
            let _ = self.cancel_chat(Some(*id));
        }
        let deadline = Instant::now() + EXIT_DRAIN;
        while lock(&self.state).chats.values().any(|c| c.busy()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // the agents' servers may be older ones than `st.mcp` (a setup() changed them since the chat began)
        let agent_servers: Vec<_> = self.agents().into_iter().filter_map(|(_, a)| a.config.mcp.clone()).collect();
        for id in ids {
            let _ = self.close_chat(Some(id));
        }
        // the closed chats' agents stop in the background (input closed, then SIGTERM): given their grace, as
        // the process exits next and would take their stop with it
        if let Ok(drivers) = self.drivers() {
            drivers.wait_stopped(EXIT_STOP);
        }
        let ours = lock(&self.state).mcp.as_ref().map(|(s, _, _)| s.clone());
        for s in agent_servers.iter().chain(ours.iter()) {
            s.stop();
        }
    }
}

/// A sender whose events reach the editor's queue as chat `chat`'s, as they come (what runs outside a turn: an
/// ACP agent started again by a resume).
fn forward(rt: &tokio::runtime::Handle, outbox: &Arc<Outbox>, chat: ChatId) -> mpsc::UnboundedSender<Event> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let outbox = outbox.clone();
    rt.spawn(async move {
        while let Some(ev) = rx.recv().await {
            outbox.push(Some(chat), Outbound::Event(ev));
        }
    });
    tx
}

/// A session starts or is resumed in the configured workspace: the registry learns it (a hint, so a
/// failure only costs `:PseudoResume all` this workspace until the next session).
fn note_workspace(config: &HostConfig) {
    if let Some(file) = &config.workspaces_file {
        let _ = crate::workspaces::record(file, &config.workspace);
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
                if let Outbound::Resumed(done) = m.message {
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
        let ticket = host.resume_async(None, &id).expect("started");
        let done = resumed(&host);
        assert_eq!((done.ticket, done.ok), (ticket, true), "{:?}", done.error);
        assert_eq!(done.report.expect("report").messages, 2);
        assert_eq!(host.current(None).expect("current").id, id);
        // the same one again is refused at once, before any thread is started
        assert!(host.resume_async(None, &id).unwrap_err().to_string().contains("already the current one"));
    }

    #[test]
    fn a_failed_resume_leaves_the_current_session_as_it_was() {
        let ws = tempfile::tempdir().expect("tempdir");
        let first = session(ws.path());
        let held = session(ws.path());
        let host = host_in(ws.path());
        host.resume_async(None, &first).expect("started");
        assert!(resumed(&host).ok);
        let ctx = Context::open(ws.path(), &held).expect("ctx");
        let _other_editor = crate::session::lock::acquire(&ctx).expect("lock");
        host.resume_async(None, &held).expect("started");
        let done = resumed(&host);
        assert!(!done.ok && done.error.as_deref().is_some_and(|e| e.contains("open in another editor")), "{done:?}");
        assert_eq!(host.current(None).expect("current").id, first);
    }

    /// Drains until chat `chat`'s turn is done; returns its events.
    fn turn_of(host: &Host, chat: ChatId, seen: &mut Vec<Addressed>) -> Vec<Event> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            seen.extend(host.drain());
            let mine: Vec<Event> = seen
                .iter()
                .filter(|m| m.chat == Some(chat))
                .filter_map(|m| match &m.message {
                    Outbound::Event(ev) => Some(ev.clone()),
                    _ => None,
                })
                .collect();
            if mine.iter().any(|e| matches!(e, Event::TurnDone { .. })) {
                return mine;
            }
            assert!(std::time::Instant::now() < deadline, "chat {chat} never finished its turn: {seen:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn two_chats_run_side_by_side_each_in_its_own_session() {
        let ws = tempfile::tempdir().expect("tempdir");
        let host = host_in(ws.path());
        let first = host.current_chat();
        let second = host.open_chat(None);
        assert_eq!(host.current_chat(), first, "opening a chat leaves the current one current");
        host.send_with(Some(first), "the first chat's question", Vec::new()).expect("sent");
        host.send_with(Some(second), "the second chat's question", Vec::new()).expect("sent");
        let states: Vec<ChatState> = host.chats().iter().map(|c| c.state).collect();
        assert_eq!(states, vec![ChatState::Running, ChatState::Running]);
        let mut seen = Vec::new();
        turn_of(&host, first, &mut seen);
        turn_of(&host, second, &mut seen);
        let (a, b) = (host.current(Some(first)).expect("a session"), host.current(Some(second)).expect("a session"));
        assert_ne!(a.id, b.id);
        for (session, mine, theirs) in
            [(&a, "the first chat's question", "the second"), (&b, "the second chat's question", "the first")]
        {
            let log = std::fs::read_to_string(&session.jsonl).expect("log");
            assert!(log.contains(mine) && !log.contains(theirs), "{log}");
        }
        let rows = host.chats();
        assert!(rows.iter().all(|c| c.state == ChatState::Idle), "{rows:?}");
        assert_eq!(rows[1].title, "the second chat's question");
        assert_eq!(host.live(&b.id), Some(second));
        // a session live in a chat is not opened a second time
        let err = host.resume_async(Some(first), &b.id).unwrap_err().to_string();
        assert!(err.contains(&format!("live in chat {second}")), "{err}");
    }

    #[test]
    fn a_cancel_stops_only_its_own_chat() {
        let ws = tempfile::tempdir().expect("tempdir");
        let host = host_in(ws.path());
        let first = host.current_chat();
        let second = host.open_chat(None);
        host.send_with(Some(first), "one", Vec::new()).expect("sent");
        host.send_with(Some(second), "two", Vec::new()).expect("sent");
        assert!(host.cancel_chat(Some(first)).expect("a chat"));
        let mut seen = Vec::new();
        let cancelled = turn_of(&host, first, &mut seen);
        let finished = turn_of(&host, second, &mut seen);
        assert!(cancelled.contains(&Event::Cancelled), "{cancelled:?}");
        assert!(!finished.contains(&Event::Cancelled), "{finished:?}");
        assert!(finished.iter().any(|e| matches!(e, Event::AssistantRecorded { .. })), "{finished:?}");
    }

    #[test]
    fn closing_a_chat_makes_another_current_and_the_last_one_stays() {
        let ws = tempfile::tempdir().expect("tempdir");
        let host = host_in(ws.path());
        let first = host.current_chat();
        let second = host.open_chat(None);
        host.focus(second).expect("focus");
        host.close_chat(None).expect("closed");
        assert_eq!(host.current_chat(), first);
        assert!(host.send_with(Some(second), "hello", Vec::new()).unwrap_err().to_string().contains("no chat"));
        host.close_chat(Some(first)).expect("closed");
        assert_eq!(host.chats().len(), 1, "the last chat is emptied, not removed");
    }
}
