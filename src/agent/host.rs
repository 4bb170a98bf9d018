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
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::{Agent, AgentConfig, Cancel, Event, Resumed};
use crate::display;
use crate::message::Message;
use crate::provider::{self, BoxFuture, Provider, ProviderConfig};
use crate::session::{self, Context};
use crate::tools::{Approval, ApprovalRequest, Approver, AutoApprove, BufferState, ProposedChange, Written};
use crate::usage::{Pricing, Usage};

/// The editor's configuration, as `setup()` validated it. An unknown key is refused, not defaulted: a
/// name the Lua side spells differently would otherwise turn an option off without a word.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostConfig {
    pub workspace: PathBuf,
    pub provider: ProviderConfig,
    pub stale_after_hours: f64,
    pub spill_threshold: usize,
    pub approve: AutoApproveConfig,
    /// Days, fractions allowed (as `sessions.cleanup()` takes them); 0 keeps everything.
    pub retention_days: f64,
    /// Dollars per million tokens, by model (the Lua config's `pricing`).
    pub pricing: Pricing,
    /// The registry of workspaces ([`crate::workspaces`]) a session that starts or is resumed notes
    /// its workspace in; none: not noted.
    pub workspaces_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoApproveConfig {
    pub write_file: bool,
    pub edit_file: bool,
    pub run_command: bool,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            workspace: std::env::current_dir().unwrap_or_default(),
            provider: ProviderConfig { name: String::new(), ..Default::default() },
            stale_after_hours: 6.0,
            spill_threshold: session::spill::DEFAULT_THRESHOLD,
            approve: AutoApproveConfig::default(),
            retention_days: f64::from(session::retention::DEFAULT_DAYS),
            pricing: Pricing::default(),
            workspaces_file: None,
        }
    }
}

/// What the editor's loop receives.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outbound {
    Event(Event),
    Approval(ApprovalAsk),
    Resumed(ResumeDone),
    Buffer(BufferAsk),
    Written(FileWritten),
}

/// A tool is about to write `path`: is it loaded in a buffer, and modified? Reply with
/// [`Host::buffer_state`]. With `hold`, the write follows the answer: keep the buffer as it is until
/// the [`FileWritten`] of the same path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BufferAsk {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: u64,
    pub path: PathBuf,
    pub rel: String,
    pub hold: bool,
}

/// A write asked about with `hold` is over: `outcome` is `created`, `changed` or `failed`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileWritten {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub path: PathBuf,
    pub rel: String,
    pub outcome: &'static str,
}

/// A resume started by [`Host::resume_async`] has finished: the history is in place (`ok`), or the
/// current session is as it was and `error` says why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeDone {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub ticket: u64,
    pub ok: bool,
    pub report: Option<ResumeReport>,
    pub error: Option<String>,
}

/// A tool waits for the user's answer; reply with [`Host::approve`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalAsk {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: u64,
    pub tool: String,
    pub summary: String,
    pub detail: String,
    /// For a write or an edit of a text file: the file's text, the proposal and the change blocks,
    /// for the review (answer some of them with [`Host::approve_hunks`]).
    pub change: Option<ProposedChange>,
}

/// The queue between the host's threads and the editor's loop.
pub struct Outbox {
    queue: Mutex<Vec<Outbound>>,
    wake: Box<dyn Fn() + Send + Sync>,
    approvals: Mutex<HashMap<u64, oneshot::Sender<Approval>>>,
    buffer_checks: Mutex<HashMap<u64, oneshot::Sender<BufferState>>>,
    next_id: AtomicU64,
}

impl Outbox {
    fn push(&self, m: Outbound) {
        lock(&self.queue).push(m);
        (self.wake)();
    }
}

struct OutboxApprover(Arc<Outbox>);

impl Approver for OutboxApprover {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        let outbox = self.0.clone();
        let id = outbox.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let (tx, rx) = oneshot::channel();
        lock(&outbox.approvals).insert(id, tx);
        outbox.push(Outbound::Approval(ApprovalAsk {
            kind: "approval",
            id,
            tool: req.tool,
            summary: req.summary,
            detail: req.detail,
            change: req.change,
        }));
        // An unanswered prompt (the turn was cancelled, the editor closed) counts as a no.
        Box::pin(async move { rx.await.unwrap_or(Approval::No) })
    }

    fn buffer_state(&self, path: &std::path::Path, rel: &str, hold: bool) -> BoxFuture<'static, Option<BufferState>> {
        let outbox = self.0.clone();
        let id = outbox.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let (tx, rx) = oneshot::channel();
        lock(&outbox.buffer_checks).insert(id, tx);
        outbox.push(Outbound::Buffer(BufferAsk {
            kind: "buffer_check",
            id,
            path: path.to_path_buf(),
            rel: rel.to_string(),
            hold,
        }));
        let stale = outbox.clone();
        Box::pin(async move {
            // Dropped unanswered (a timeout): its entry goes, so the map does not grow.
            struct Forget(Arc<Outbox>, u64);
            impl Drop for Forget {
                fn drop(&mut self) {
                    lock(&self.0.buffer_checks).remove(&self.1);
                }
            }
            let _forget = Forget(stale, id);
            rx.await.ok()
        })
    }

    fn written(&self, path: &std::path::Path, rel: &str, outcome: Written) {
        let outcome = match outcome {
            Written::Created => "created",
            Written::Changed => "changed",
            Written::Failed => "failed",
        };
        self.0.push(Outbound::Written(FileWritten {
            kind: "file_written",
            path: path.to_path_buf(),
            rel: rel.to_string(),
            outcome,
        }));
    }
}

/// Where a session came from and how it went, for the editor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeReport {
    pub id: String,
    pub messages: usize,
    pub stale_hours: Option<u64>,
    /// Seconds between the last message and the resume, when the stale reminder was added.
    pub stale_seconds: Option<u64>,
    /// What was repaired, one sentence; empty when nothing was.
    pub notice: String,
}

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
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HostError(pub String);

impl From<session::Error> for HostError {
    fn from(e: session::Error) -> Self {
        HostError(e.to_string())
    }
}

impl From<provider::ProviderError> for HostError {
    fn from(e: provider::ProviderError) -> Self {
        HostError(e.to_string())
    }
}

type HostResult<T> = Result<T, HostError>;

impl Host {
    pub fn new(wake: Box<dyn Fn() + Send + Sync>) -> HostResult<Host> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pseudoclaude")
            .enable_all()
            .build()
            .map_err(|e| HostError(format!("cannot start the agent's threads: {e}")))?;
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
        };
        Ok(Host { rt, outbox, state: Arc::new(Mutex::new(state)) })
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
            return Err(HostError("nothing to send: the message is empty".into()));
        }
        let mut st = lock(&self.state);
        if st.busy.load(Ordering::SeqCst) {
            return Err(HostError("the agent is still answering: wait, or cancel the turn with <C-c>".into()));
        }
        if st.resuming.is_some() {
            return Err(HostError("a session is being restored: send again once it shows".into()));
        }
        let agent = match &st.agent {
            Some(a) => a.clone(),
            None => {
                let a = Arc::new(self.new_agent(&st.config)?);
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
            None => Err(HostError(format!("no pending approval {id} (the turn may have been cancelled)"))),
        }
    }

    /// Answers a buffer check: `none` (no loaded buffer holds the file), `unmodified` or `modified`.
    pub fn buffer_state(&self, id: u64, state: &str) -> HostResult<()> {
        let state = match state {
            "none" => BufferState::NotLoaded,
            "unmodified" => BufferState::Unmodified,
            "modified" => BufferState::Modified,
            other => {
                return Err(HostError(format!(
                    "unknown buffer state {other:?}: use \"none\", \"unmodified\" or \"modified\""
                )));
            }
        };
        match lock(&self.outbox.buffer_checks).remove(&id) {
            Some(tx) => {
                let _ = tx.send(state);
                Ok(())
            }
            None => Err(HostError(format!("no pending buffer check {id} (it timed out, or the turn was cancelled)"))),
        }
    }

    /// Answers an approval prompt: `yes`, `no` or `always`.
    pub fn approve(&self, id: u64, answer: &str) -> HostResult<()> {
        let answer = match answer {
            "yes" => Approval::Yes,
            "no" => Approval::No,
            "always" => Approval::Always,
            other => return Err(HostError(format!("unknown answer {other:?}: use \"yes\", \"no\" or \"always\""))),
        };
        let tx = lock(&self.outbox.approvals).remove(&id);
        match tx {
            Some(tx) => {
                let _ = tx.send(answer);
                Ok(())
            }
            None => Err(HostError(format!("no pending approval {id} (the turn may have been cancelled)"))),
        }
    }

    /// Switches to session `id` on the host's threads: returns a ticket at once; the outcome arrives
    /// in the queue as [`Outbound::Resumed`] with that ticket (the lock, torn-tail repair, replay and
    /// spill checks all run off the editor's main loop). The new agent is built first (its writer
    /// opened, its log loaded) and installed only if the current chat did not change meanwhile; on
    /// any error the current session stays as it was.
    pub fn resume_async(&self, id: &str) -> HostResult<u64> {
        let (config, generation) = self.resume_check(id)?;
        let ticket = self.outbox.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        lock(&self.state).resuming = Some(ticket);
        let outbox = self.outbox.clone();
        let state = self.state.clone();
        let id = id.to_string();
        self.rt.spawn_blocking(move || {
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build_resumed(&config, &outbox, &id)))
                .unwrap_or_else(|_| Err(HostError(format!("internal error while reading session {id}"))));
            let outcome = {
                let mut st = lock(&state);
                st.resuming = None;
                built.and_then(|(agent, report)| install(&mut st, generation, agent).map(|()| report))
            };
            let done = match outcome {
                Ok(report) => ResumeDone { kind: "resumed", ticket, ok: true, report: Some(report), error: None },
                Err(e) => ResumeDone { kind: "resumed", ticket, ok: false, report: None, error: Some(e.0) },
            };
            outbox.push(Outbound::Resumed(done));
        });
        Ok(ticket)
    }

    /// What a resume may start from: not while a turn runs or another resume is read.
    fn resume_check(&self, id: &str) -> HostResult<(HostConfig, u64)> {
        let st = lock(&self.state);
        if st.busy.load(Ordering::SeqCst) {
            return Err(HostError("cannot resume while the agent is answering: cancel the turn first (<C-c>)".into()));
        }
        if st.resuming.is_some() {
            return Err(HostError("another session is being restored: wait for it to show".into()));
        }
        if st.agent.as_ref().and_then(|a| a.current()).is_some_and(|c| c.id == id) {
            return Err(HostError(format!("session {id} is already the current one")));
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
            return Err(HostError("cannot start a new chat while the agent is answering".into()));
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
            Some(a) => (a.provider.name().to_string(), a.provider.model().to_string()),
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

    fn new_agent(&self, config: &HostConfig) -> HostResult<Agent> {
        let provider = make_provider(config)?;
        let approver: Arc<dyn Approver> = Arc::new(OutboxApprover(self.outbox.clone()));
        Ok(Agent::new(agent_config(config), provider, approver))
    }
}

/// Builds the agent of session `id` (the slow part of a resume: lock, repair, replay).
fn build_resumed(config: &HostConfig, outbox: &Arc<Outbox>, id: &str) -> HostResult<(Agent, ResumeReport)> {
    let provider = make_provider(config)?;
    let approver: Arc<dyn Approver> = Arc::new(OutboxApprover(outbox.clone()));
    let (agent, resumed) = Agent::resume(agent_config(config), provider, approver, id)?;
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
        return Err(HostError("the chat changed while the session was being restored: resume it again".into()));
    }
    if st.busy.load(Ordering::SeqCst) {
        return Err(HostError("a turn started while the session was being restored: resume it again".into()));
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

/// The provider configuration in effect: with no name (or "auto"), the first provider whose key is
/// set, else the offline demo; with no model, the provider's default.
pub fn resolve_provider(config: &HostConfig) -> ProviderConfig {
    let mut p = config.provider.clone();
    if p.name.is_empty() || p.name == "auto" {
        let has = |v: &str| std::env::var(v).is_ok_and(|k| !k.is_empty());
        p.name = if has("ANTHROPIC_API_KEY") {
            "anthropic".into()
        } else if has("OPENAI_API_KEY") {
            "openai".into()
        } else {
            "demo".into()
        };
    }
    if p.model.is_empty() {
        p.model = match p.name.as_str() {
            "anthropic" => "claude-sonnet-4-5".into(),
            "openai" => "gpt-4.1".into(),
            _ => "demo".into(),
        };
    }
    p
}

/// The configured provider, built (an HTTP client for the real ones).
pub fn make_provider(config: &HostConfig) -> HostResult<Arc<dyn Provider>> {
    let p = resolve_provider(config);
    if p.name == "demo" {
        return Ok(Arc::new(provider::demo::Demo::new(Duration::from_millis(8))));
    }
    Ok(Arc::from(provider::from_config(&p)?))
}

fn agent_config(config: &HostConfig) -> AgentConfig {
    let mut c = AgentConfig::new(&config.workspace);
    c.stale_after = Duration::from_secs_f64((config.stale_after_hours * 3600.0).max(0.0));
    c.spill_threshold = config.spill_threshold;
    c.pricing = config.pricing.clone();
    c.compact.spill_threshold = config.spill_threshold;
    c.auto_approve = AutoApprove {
        write_file: config.approve.write_file,
        edit_file: config.approve.edit_file,
        run_command: config.approve.run_command,
    };
    c
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert!(host.resume_async(&id).unwrap_err().0.contains("already the current one"));
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
