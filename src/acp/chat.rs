//! One ACP agent's chat, logged as ours is: the session's log and conversation (the same [`SessionLog`] and
//! [`Conversation`] as [`crate::agent::Agent`]), the agent's process, and what each of its updates becomes.
//!
//! How the protocol's updates map onto the log (doc/log_format.md, "ACP agents"):
//! - the user's message is written first (it creates the session), then the agent is started if it is not running;
//!   to an agent that runs, the prompt goes while the message is synced, and nothing of the answer is handled before
//!   it is on disk (the turn's lock, held meanwhile);
//! - `agent_message_chunk`s stream into the answer, checkpointed as ours ([`Checkpoints`]): a `kill -9` keeps what
//!   had streamed; `agent_thought_chunk`s are its thinking (`reasoning` blocks, shown folded, never sent back);
//! - a `tool_call` and its `tool_call_update`s are one call and its result, written when the call completes or
//!   fails: the text streamed before it, with the call (title, kind, input, locations), then the result (its
//!   content, diffs and terminal output as text). A call still running when the turn ends is not written: a log only
//!   holds calls with their results. Until it completes, the editor is sent it as it stands at each update
//!   ([`Event::ToolCallLive`]) and draws it in place;
//! - plans, mode and config changes, `usage_update` and each permission asked (with its answer) are `acp` entries;
//!   the agent's name and its own session id are a `meta` entry.
//!
//! The agent's updates are read by one task per connection (the pump), in order; a turn waits for the pump to have
//! handled everything the agent sent before its `session/prompt` answer (a marker, see [`super::client`]) before
//! it writes the final message. Updates a `session/load` replays are dropped: the log has them already.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::AgentSpec;
use super::client::{Connection, Incoming, is_closed_error};
use super::terminal::Terminals;
use crate::agent::checkpoint::Checkpoints;
use crate::agent::rewind::FileCheckpoints;
use crate::agent::runner::{Stop, report_stop};
use crate::agent::{Cancel, Event, SessionLog, lock};
use crate::conversation::{Conversation, Unsaved};
use crate::message::{Message, Role, Thinking, ToolCall, now};
use crate::rewind::calls::Begun;
use crate::rewind::{Report, RewindOptions, Tracker};
use crate::session::entry::AgentMeta;
use crate::session::{self, Context, Entry, Writer, WriterOptions};
use crate::tools::{Approval, ApprovalRequest, Approver, AutoApprove, PermissionChoice, Tools};
use crate::usage::{Pricing, Usage, UsageByModel};

/// How long an agent whose input was closed may take to exit before its process group is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// How long a cancelled turn waits for the agent's answer to `session/cancel` before giving up on it.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// One chat's settings (the host's configuration, resolved).
#[derive(Debug, Clone)]
pub struct ChatConfig {
    /// The agent's name in `setup({ agents })`.
    pub name: String,
    pub spec: AgentSpec,
    pub workspace: PathBuf,
    /// The plugin's log file: the agent's standard error goes there.
    pub log_file: Option<PathBuf>,
    pub spill_threshold: usize,
    pub checkpoint_every: Duration,
    /// `approve.agents.NAME`: permissions are answered "allow once" without asking.
    pub auto_allow: bool,
    pub pricing: Pricing,
    /// A resumed session idle longer than this gets the reminder ours get ([`crate::agent::stale_reminder_after`]).
    pub stale_after: Duration,
    /// Checkpoints of the workspace's files for rewind ([`crate::rewind`]), as our agent's; off: none are taken.
    pub rewind: bool,
    pub rewind_max_file_bytes: u64,
    /// The `sandbox` settings: the agent's terminals run confined by them (as our `run_command`), and with
    /// `agents.NAME.sandbox` ([`AgentSpec::sandbox`]) the agent itself.
    pub sandbox: crate::sandbox::Settings,
}

/// The agent's process and its session, once started.
struct Live {
    conn: Arc<Connection>,
    session_id: String,
    closed: Arc<AtomicBool>,
}

pub struct AcpChat {
    pub config: ChatConfig,
    pub log: Arc<SessionLog>,
    pub conversation: Arc<Conversation>,
    approver: Arc<dyn Approver>,
    live: tokio::sync::Mutex<Option<Live>>,
    /// The answer streaming now, if a turn runs.
    turn: tokio::sync::Mutex<Option<Turn>>,
    /// A `session/load` is replaying the agent's history: its updates are not ours to log or show.
    replaying: AtomicBool,
    /// The agent's own session (from the log's `meta`, or the one it started), and its version.
    agent: Mutex<Option<AgentMeta>>,
    /// The agent's session lacks the conversation (it forgot it, or it was started anew after a rewind): our
    /// transcript of it goes with the next message.
    tell_history: AtomicBool,
    /// The checkpoints of the workspace's files: before each message, after each tool call that can change files.
    pub files: Arc<FileCheckpoints>,
    /// The agent's own session a conversation rewind left, until the next message: an undo of the rewind returns
    /// to it.
    rewound_agent: Mutex<Option<AgentMeta>>,
    /// Messages the agent reads with the next message, logged with it (the stale reminder), as ours.
    pending: Mutex<Vec<Message>>,
    usage: Mutex<UsageByModel>,
    /// Dollars the agent reported (`usage_update.cost`), when it does.
    cost: Mutex<Option<f64>>,
    /// The agent's `fs/*` and `terminal/*` requests go through our tools' paths (confinement, the buffer check, the
    /// write, the command sandbox).
    tools: Arc<Tools>,
    /// The agent's terminals (`terminal/*`).
    terminals: Arc<Terminals>,
    /// What the agent offers: `available_commands_update`'s commands, its modes (`session/new`'s `modes`).
    commands: Mutex<Vec<Value>>,
    modes: Mutex<Value>,
    /// The session's config options (`configOptions` of `session/new` and its kin, `config_option_update`): the
    /// model among them.
    options: Mutex<Value>,
}

impl AcpChat {
    /// A new chat with agent `config.name`; its session appears with its first message, the agent starts then.
    pub fn new(config: ChatConfig, approver: Arc<dyn Approver>) -> Arc<AcpChat> {
        let log = SessionLog::lazy(&config.workspace, writer_options(&config));
        let tracker = config.rewind.then(|| Tracker::new(&config.workspace, config.rewind_max_file_bytes));
        AcpChat::assemble(config, approver, log, Vec::new(), None, UsageByModel::default(), tracker)
    }

    /// Reopens session `id` (the lock, a torn tail moved aside, the history loaded), on the caller's thread; the
    /// agent is started again by [`AcpChat::connect`].
    pub fn resume(
        config: ChatConfig,
        approver: Arc<dyn Approver>,
        id: &str,
    ) -> session::Result<(Arc<AcpChat>, crate::agent::Resumed)> {
        let ctx = Context::open(&config.workspace, id)?;
        let opts = writer_options(&config);
        let (writer, repair) = Writer::open_with_repair(&ctx, opts.clone())?;
        let mut loaded = session::load(&ctx)?;
        let log = SessionLog::opened(&config.workspace, opts, writer);
        let messages = std::mem::take(&mut loaded.messages);
        let usage = loaded.usage_by_model.clone();
        let stale = crate::agent::stale_seconds(loaded.last_message, now(), config.stale_after);
        let tracker = config.rewind.then(|| {
            let last_turn = messages.iter().map(|m| m.turn).max().unwrap_or(0);
            let files = std::mem::take(&mut loaded.files);
            Tracker::resume(&config.workspace, config.rewind_max_file_bytes, files, last_turn)
        });
        let unfinished = crate::rewind::unfinished(&loaded.rewinds).cloned();
        let chat = AcpChat::assemble(config, approver, log, messages, loaded.agent.clone(), usage, tracker);
        if let Some(idle) = stale {
            lock(&chat.pending).push(Message::user(crate::agent::stale_reminder_after(idle)));
        }
        let recovered_rewind = unfinished.map(|begin| chat.files.recover_rewind(&begin));
        let changed_since = chat.files.changed_since_last();
        crate::agent::note_changes(&mut lock(&chat.pending), loaded.last_message, &changed_since);
        let resumed = crate::agent::Resumed {
            torn_bytes: repair.torn_bytes,
            stale_hours: stale.map(|s| s / 3600),
            stale_seconds: stale,
            changed_since,
            recovered_rewind,
            loaded,
        };
        Ok((chat, resumed))
    }

    fn assemble(
        config: ChatConfig,
        approver: Arc<dyn Approver>,
        log: Arc<SessionLog>,
        messages: Vec<Message>,
        agent: Option<AgentMeta>,
        usage: UsageByModel,
        tracker: Option<Tracker>,
    ) -> Arc<AcpChat> {
        let conversation = Conversation::from_messages(messages, log.hooks());
        let files = Arc::new(FileCheckpoints::new(&config.workspace, log.clone(), conversation.clone(), tracker));
        // the agent asked its own permission for a write or a command: ours would be a second question (a command
        // that cannot be sandboxed is still asked, as ours is)
        let auto = AutoApprove { write_file: true, run_command: true, ..Default::default() };
        let mut tools = Tools::new(&config.workspace, approver.clone(), auto);
        tools.set_sandbox(config.sandbox.clone());
        // a sandboxed agent's $TMPDIR is the session's private folder, as our commands' is
        let session = log.clone();
        tools.set_session_dir(Box::new(move || session.context().map(|c| c.dir)));
        Arc::new(AcpChat {
            config,
            log,
            conversation,
            approver,
            live: tokio::sync::Mutex::new(None),
            turn: tokio::sync::Mutex::new(None),
            replaying: AtomicBool::new(false),
            agent: Mutex::new(agent),
            tell_history: AtomicBool::new(false),
            tools: Arc::new(tools),
            terminals: Arc::default(),
            files,
            rewound_agent: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
            usage: Mutex::new(usage),
            cost: Mutex::new(None),
            commands: Mutex::new(Vec::new()),
            modes: Mutex::new(Value::Null),
            options: Mutex::new(Value::Null),
        })
    }

    /// The session, once it exists.
    pub fn current(&self) -> Option<Context> {
        self.log.context()
    }

    /// The agent's own session as the log's meta names it (none before the agent first started).
    pub fn agent_meta(&self) -> Option<AgentMeta> {
        lock(&self.agent).clone()
    }

    /// The agent's own session id, once it has one.
    pub fn agent_session(&self) -> Option<String> {
        lock(&self.agent).as_ref().map(|a| a.session_id.clone()).filter(|s| !s.is_empty())
    }

    pub fn usage(&self) -> UsageByModel {
        lock(&self.usage).clone()
    }

    /// What the session cost: the agent's own figure when it reports one, else our pricing of its tokens.
    pub fn cost(&self) -> Option<f64> {
        (*lock(&self.cost)).or_else(|| self.usage().cost(&self.config.pricing))
    }

    /// The agent's slash commands (`available_commands_update`), as it sent them.
    pub fn commands(&self) -> Vec<Value> {
        lock(&self.commands).clone()
    }

    /// The agent's modes (`{currentModeId, availableModes}`), when it offers some.
    pub fn modes(&self) -> Value {
        lock(&self.modes).clone()
    }

    /// The models the agent lets the user choose (its session's config option of category `model`):
    /// `{current, available: [{id, name}]}`, `null` when it offers no choice (or has not started).
    pub fn models(&self) -> Value {
        let options = lock(&self.options);
        let Some(o) = model_option(&options) else { return Value::Null };
        let mut available = Vec::new();
        for v in o["options"].as_array().into_iter().flatten() {
            // a select's options, or groups of them
            for m in v["options"].as_array().cloned().unwrap_or_else(|| vec![v.clone()]) {
                available.push(json!({ "id": m["value"], "name": m["name"] }));
            }
        }
        json!({ "current": o["currentValue"], "available": available })
    }

    /// Asks the agent to switch to model `model` (`session/set_config_option` of its model option); logged as the
    /// agent's own `config_option_update` would be.
    pub async fn set_model(
        self: &Arc<Self>,
        model: &str,
        events: &mpsc::UnboundedSender<Event>,
    ) -> Result<String, String> {
        let (conn, sid) = self.ensure_live(events).await?;
        let option = model_option(&lock(&self.options))
            .and_then(|o| o["id"].as_str().map(str::to_string))
            .ok_or_else(|| format!("the agent {} offers no model choice", self.config.name))?;
        let answer = conn.set_config_option(&sid, &option, model).await?;
        if answer["configOptions"].is_array() {
            *lock(&self.options) = answer["configOptions"].clone();
        }
        let update = json!({ "sessionUpdate": "config_option_update", "configOptions": answer["configOptions"] });
        let _ = self.log.append_meta(Entry::acp(update, now()));
        Ok(self.models()["current"].as_str().unwrap_or(model).to_string())
    }

    /// The version the agent's `initialize` reported (the last one that ran for this chat).
    pub fn agent_version(&self) -> Option<String> {
        lock(&self.agent).as_ref().map(|a| a.version.clone()).filter(|v| !v.is_empty())
    }

    /// Asks the agent to switch to mode `mode` (`session/set_mode`).
    pub async fn set_mode(self: &Arc<Self>, mode: &str, events: &mpsc::UnboundedSender<Event>) -> Result<(), String> {
        let (conn, sid) = self.ensure_live(events).await?;
        conn.set_mode(&sid, mode).await?;
        let update = json!({ "sessionUpdate": "current_mode_update", "currentModeId": mode });
        self.apply_mode(&update);
        let _ = self.log.append_meta(Entry::acp(update, now()));
        Ok(())
    }

    /// Rewinds to just before user message `index`: the files as [`FileCheckpoints::rewind`] does for ours (what
    /// the agent's own tools and shell did included: the checkpoints scan the workspace). A conversation rewound
    /// leaves the agent's own session behind (it remembers what was cut): the agent is stopped, the log's meta
    /// forgets its session id, and the next message starts a new session told our transcript up to that message.
    /// Blocking: call it on a blocking thread, with no turn running.
    pub fn rewind(&self, index: usize, opts: &RewindOptions) -> Report {
        let report = self.files.rewind(index, opts);
        let rewound_conversation = opts.conversation && !opts.dry_run && report.ok;
        let left = if rewound_conversation { self.leave_agent_session() } else { None };
        if rewound_conversation {
            lock(&self.pending).clear();
        }
        if !opts.dry_run && report.ok {
            // the undo of this rewind is the one kept: it returns to the agent's session only if this one left it
            *lock(&self.rewound_agent) = left;
        }
        report
    }

    /// Undoes the last rewind (files and conversation); a conversation comes back with the agent's session it had.
    /// Blocking.
    pub fn undo_rewind(&self, opts: &RewindOptions) -> Report {
        let report = self.files.undo_rewind(opts);
        if report.ok
            && let Some(old) = lock(&self.rewound_agent).take()
        {
            self.drop_live();
            *lock(&self.agent) = Some(old.clone());
            self.tell_history.store(false, Ordering::SeqCst);
            let _ = self.log.append_meta(Entry::meta_agent(old, now()));
        }
        report
    }

    /// The pending undo of the last rewind, if no message came since.
    pub fn undo_info(&self) -> Option<(String, i64)> {
        self.files.undo_info()
    }

    /// The agent's changes per turn of this session (its tools' and its shell's).
    pub fn changes(&self) -> Vec<crate::rewind::TurnChanges> {
        self.files.changes()
    }

    /// The agent is stopped and its session forgotten (logged: a resume does not load it); returns what it was.
    fn leave_agent_session(&self) -> Option<AgentMeta> {
        self.drop_live();
        let old = lock(&self.agent).clone().filter(|a| !a.session_id.is_empty())?;
        let meta = AgentMeta { session_id: String::new(), ..old.clone() };
        *lock(&self.agent) = Some(meta.clone());
        let _ = self.log.append_meta(Entry::meta_agent(meta, now()));
        Some(old)
    }

    /// Stops the agent gracefully in the background ([`Connection::stop_in_background`]) and forgets the
    /// connection: the next message starts the agent again.
    fn drop_live(&self) {
        self.terminals.release_all();
        if let Ok(mut live) = self.live.try_lock()
            && let Some(l) = live.take()
        {
            l.conn.stop_in_background(STOP_GRACE);
        }
    }

    /// Starts the agent (when it is not running) and its session: `session/load` of the agent's own id when it
    /// offers it, else `session/resume`, else a new session told the transcript with the next message. One line
    /// in `events` says which happened when a session was restored.
    pub async fn connect(self: &Arc<Self>, events: &mpsc::UnboundedSender<Event>) -> Result<(), String> {
        self.ensure_live(events).await.map(|_| ())
    }

    /// Ends the agent and waits for it (its input closed, `SIGTERM`, its process group killed after at most
    /// [`STOP_GRACE`]: [`Connection::shutdown`]); the chat's next message starts it again.
    pub async fn stop(&self) {
        if let Some(l) = self.live.lock().await.take() {
            l.conn.shutdown(STOP_GRACE).await;
        }
    }

    /// The chat is closed or replaced (`chat.close()`, `:PseudoNew`, a resume or a fork in its place, the editor's
    /// exit): its terminals end, and the agent is stopped as [`AcpChat::stop`] does, without waiting for it. The
    /// agent's own record of the session (which a resume or a fork of it reads next) is then complete: a `SIGKILL`
    /// could cut Claude Code's last transcript write.
    pub fn close(&self) {
        self.drop_live();
    }

    /// Kills the agent without a grace (it dies mid-write).
    pub fn kill(&self) {
        self.terminals.release_all();
        if let Ok(live) = self.live.try_lock()
            && let Some(l) = live.as_ref()
        {
            l.conn.kill();
        }
    }

    async fn ensure_live(
        self: &Arc<Self>,
        events: &mpsc::UnboundedSender<Event>,
    ) -> Result<(Arc<Connection>, String), String> {
        let mut live = self.live.lock().await;
        if let Some(l) = live.as_ref()
            && !l.closed.load(Ordering::SeqCst)
        {
            return Ok((l.conn.clone(), l.session_id.clone()));
        }
        *live = None;
        let name = &self.config.name;
        // an agent being stopped may still be writing the store this one reads (a fork or a resume of its session)
        super::client::stops_done(STOP_GRACE).await;
        let (conn, rx) = Connection::start(
            name,
            &self.config.spec,
            &self.config.workspace,
            self.config.log_file.as_deref(),
            &self.tools,
        )
        .await?;
        let conn = Arc::new(conn);
        let closed = Arc::new(AtomicBool::new(false));
        spawn_pump(Arc::downgrade(self), rx, closed.clone());
        let caps = &conn.init["agentCapabilities"];
        let version = conn.init["agentInfo"]["version"].as_str().unwrap_or_default().to_string();
        let known = self.agent_session();
        let fork_of = lock(&self.agent).as_ref().map(|a| a.fork_of.clone()).filter(|s| !s.is_empty());
        let ws = &self.config.workspace;
        let mut restored = None;
        if let Some(id) = &known {
            if caps["loadSession"].as_bool() == Some(true) {
                self.replaying.store(true, Ordering::SeqCst);
                let r = conn.load_session(id, ws).await;
                conn.marker().await;
                self.replaying.store(false, Ordering::SeqCst);
                match r {
                    Ok(v) => restored = Some((v, "session/load: the agent restored its own session")),
                    Err(e) if is_closed_error(&e) => return Err(format!("the agent {name} exited: {e}")),
                    Err(_) => {}
                }
            }
            if restored.is_none() && caps["sessionCapabilities"]["resume"].is_object() {
                match conn.resume_session(id, ws).await {
                    Ok(v) => restored = Some((v, "session/resume: the agent resumed its own session")),
                    Err(e) if is_closed_error(&e) => return Err(format!("the agent {name} exited: {e}")),
                    Err(_) => {}
                }
            }
        }
        // a fork of a whole session: the agent forks its own (it then has the history)
        let mut forked = None;
        if known.is_none()
            && let Some(source) = &fork_of
            && caps["sessionCapabilities"]["fork"].is_object()
        {
            match conn.fork_session(source, ws).await {
                Ok(v) if v["sessionId"].as_str().is_some_and(|s| !s.is_empty()) => forked = Some(v),
                Err(e) if is_closed_error(&e) => return Err(format!("the agent {name} exited: {e}")),
                _ => {}
            }
        }
        let session_id = match (&restored, &known, &forked) {
            (Some((answer, how)), Some(id), _) => {
                self.apply_session(answer);
                let _ = events.send(Event::Notice { text: format!("{name}: {how}") });
                id.clone()
            }
            (_, _, Some(answer)) => {
                self.apply_session(answer);
                let _ = events.send(Event::Notice {
                    text: format!("{name}: session/fork: the agent forked its own session of the conversation"),
                });
                answer["sessionId"].as_str().unwrap_or_default().to_string()
            }
            _ => {
                let answer = conn.new_session(ws).await?;
                self.apply_session(&answer);
                let id = answer["sessionId"].as_str().unwrap_or_default().to_string();
                if id.is_empty() {
                    return Err(format!("the agent {name} started a session without an id"));
                }
                if known.is_some() || self.has_history() {
                    // a session that lacks the conversation: the history goes with the next message
                    self.tell_history.store(true, Ordering::SeqCst);
                }
                if known.is_some() {
                    let _ = events.send(Event::Notice {
                        text: format!(
                            "{name}: session/new: the agent no longer has this session; a new one started, and the \
                             conversation so far goes with your next message"
                        ),
                    });
                } else if self.has_history() {
                    // a fork (at an earlier message, or of an agent that cannot fork), or a conversation rewound
                    let _ = events.send(Event::Notice {
                        text: format!(
                            "{name}: session/new: a new session of the agent, told the conversation so far with your \
                             next message"
                        ),
                    });
                }
                id
            }
        };
        super::note_version(name, &version);
        let meta = AgentMeta { name: name.clone(), session_id: session_id.clone(), version, ..Default::default() };
        let changed = lock(&self.agent).as_ref() != Some(&meta);
        if changed {
            *lock(&self.agent) = Some(meta.clone());
            // written with the next message (a resume leaves the log as it was until then)
            self.log.stage(Entry::meta_agent(meta, now()), true);
        }
        *live = Some(Live { conn: conn.clone(), session_id: session_id.clone(), closed });
        Ok((conn, session_id))
    }

    /// Whether the conversation has an answer: a new agent session would lack it.
    fn has_history(&self) -> bool {
        self.conversation.with_messages(|m| m.iter().any(|m| m.role == Role::Assistant))
    }

    /// The conversation's first `upto` messages as text, for an agent session that lacks them.
    fn transcript(&self, upto: usize) -> String {
        let mut out = String::from(
            "[The conversation so far, from the editor's log of this session; the agent's own record of it is gone]\n",
        );
        self.conversation.with_messages(|msgs| {
            for m in &msgs[..upto.min(msgs.len())] {
                if let Some(r) = &m.tool_result {
                    out.push_str(&format!("\n[tool result]\n{}\n", r.content));
                    continue;
                }
                let who = if m.role == Role::Assistant { "Assistant" } else { "User" };
                out.push_str(&format!("\n{who}: {}\n", m.content));
                for c in &m.tool_calls {
                    out.push_str(&format!("[tool call {}: {}]\n", c.name, c.arguments));
                }
            }
        });
        out.push_str("\n[End of the earlier conversation. The new message follows.]\n\n");
        out
    }

    fn apply_session(&self, answer: &Value) {
        if answer["modes"].is_object() {
            *lock(&self.modes) = answer["modes"].clone();
        }
        if answer["configOptions"].is_array() {
            *lock(&self.options) = answer["configOptions"].clone();
        }
    }

    fn apply_mode(&self, update: &Value) {
        let mut modes = lock(&self.modes);
        if modes.is_object() {
            modes["currentModeId"] = update["currentModeId"].clone();
        }
    }

    /// Runs one turn for `text`; events go to `events`; returns when the turn is over.
    pub async fn turn(self: &Arc<Self>, text: &str, events: mpsc::UnboundedSender<Event>, cancel: Cancel) {
        let was_unsaved = self.conversation.is_unsaved();
        let outcome = self.turn_steps(text, &events, &cancel, was_unsaved).await;
        report_stop(outcome, &events);
    }

    async fn turn_steps(
        self: &Arc<Self>,
        text: &str,
        events: &mpsc::UnboundedSender<Event>,
        cancel: &Cancel,
        was_unsaved: bool,
    ) -> Result<String, Stop> {
        let earlier = self.conversation.len();
        // the stale reminder, logged before the message and read by the agent with it
        let pending = std::mem::take(&mut *lock(&self.pending));
        let mut preamble = String::new();
        for m in &pending {
            preamble.push_str(&m.content);
            preamble.push_str("\n\n");
        }
        // The agent already running (and nothing else to log first): the prompt goes while the message is written
        // and synced (see `overlapped` below). Else the message is logged first: the agent's start takes seconds,
        // and the message must not wait for it to be durable.
        let warm = pending.is_empty() && self.is_live().await;
        // the files as they are before the message (a rewind to it returns them here), always taken before the
        // agent hears of it: its hooks may change files before its first word
        let before = match warm {
            true => Some(self.files.checkpoint_before_message().await),
            false => {
                for m in pending {
                    self.conversation.add(m)?;
                }
                self.files.add_user_message(Message::user(text)).await?;
                self.user_recorded(text, events, was_unsaved);
                None
            }
        };
        let name = self.config.name.clone();
        let started = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Stop::Cancelled),
            r = self.ensure_live(events) => r,
        };
        let (conn, sid) = started.map_err(Stop::Failed)?;
        if !warm {
            // what ensure_live staged (the agent's meta) is written now, after the message it follows (warm, the
            // message's own write takes anything staged: it follows the message)
            let (before, after) = self.log.take_staged();
            for e in before.into_iter().chain(after) {
                let _ = self.log.append_meta(e);
            }
        }
        let prompt = match self.tell_history.swap(false, Ordering::SeqCst) {
            true => format!("{}{preamble}{text}", self.transcript(earlier)),
            false => format!("{preamble}{text}"),
        };
        // Held until the message is on disk: the pump handles the agent's updates (and its permission questions)
        // under this lock, so nothing of the answer is shown or logged before the message it answers.
        let mut turn = self.turn.lock().await;
        let mut t =
            Turn::new(events.clone(), self.log.clone(), self.config.checkpoint_every, &name, self.files.clone());
        t.terminals = self.terminals.clone();
        *turn = Some(t);
        let asked = {
            let (conn, sid) = (conn.clone(), sid.clone());
            async move { conn.prompt(&sid, &prompt).await }
        };
        tokio::pin!(asked);
        // The prompt is sent while the message is written and synced, on a blocking thread: the agent's own work
        // before its first word overlaps our sync. A crash meanwhile loses nothing that was acknowledged: the
        // message shows as recorded only once synced, and nothing of the answer is logged before that. (The agent
        // may then have a message our log lacks: on resume it knows more than we show, never less.) A failed
        // write cancels the agent's turn, as the turn would not have started before.
        let mut early = None;
        if let Some(before) = before {
            let files = self.files.clone();
            let message = Message::user(text);
            let mut logging = tokio::task::spawn_blocking(move || {
                stall_for_tests();
                files.add_after_checkpoint(before, message)
            });
            let logged = loop {
                tokio::select! {
                    r = &mut logging => break r.unwrap_or_else(|e| Err(Unsaved::new(e.to_string()))),
                    r = &mut asked, if early.is_none() => early = Some(r),
                }
            };
            if let Err(e) = logged {
                *turn = None;
                drop(turn);
                if early.is_none() {
                    conn.cancel(&sid);
                    let _ = tokio::time::timeout(CANCEL_GRACE, &mut asked).await;
                }
                return Err(e.into());
            }
            self.user_recorded(text, events, was_unsaved);
        }
        drop(turn);
        let mut cancelled = false;
        let answer = match early {
            // answered while the message was synced (its prompt can no longer be cancelled)
            Some(r) => r,
            None => tokio::select! {
                r = &mut asked => r,
                _ = cancel.cancelled() => {
                    cancelled = true;
                    conn.cancel(&sid);
                    let grace = CANCEL_GRACE.as_secs();
                    tokio::time::timeout(CANCEL_GRACE, &mut asked)
                        .await
                        .unwrap_or_else(|_| Err(format!("the agent did not stop within {grace}s of session/cancel")))
                }
            },
        };
        // every update the agent sent before its answer, handled
        conn.marker().await;
        let turn = self.turn.lock().await.take();
        let stopped_early = cancelled || answer.is_err();
        let outcome = match turn {
            Some(t) => t.finish(&self.conversation, stopped_early).await,
            None => Ok(()),
        };
        outcome?;
        match answer {
            Ok(answer) => {
                self.record_usage(&answer["usage"], events);
                let reason = answer["stopReason"].as_str().unwrap_or("end_turn").to_string();
                if cancelled || reason == "cancelled" {
                    return Err(Stop::Cancelled);
                }
                Ok(reason)
            }
            Err(_) if cancelled => Err(Stop::Cancelled),
            Err(e) => {
                let gone = conn.clone();
                let dead = {
                    let live = self.live.lock().await;
                    live.as_ref().is_none_or(|l| l.closed.load(Ordering::SeqCst))
                } || is_closed_error(&e);
                if dead {
                    // the next message starts it again (with session/load)
                    self.live.lock().await.take();
                    gone.kill();
                    Err(Stop::Failed(format!(
                        "the agent {name} exited mid-turn ({}); what it had answered is kept, and your next message \
                         starts it again",
                        first_line(&e)
                    )))
                } else {
                    Err(Stop::Failed(format!("{name}: {e}")))
                }
            }
        }
    }

    /// The user's message is on disk: the chat draws it as recorded.
    fn user_recorded(&self, text: &str, events: &mpsc::UnboundedSender<Event>, was_unsaved: bool) {
        lock(&self.rewound_agent).take();
        if was_unsaved {
            let _ = events.send(Event::Saved { ok: true, error: None });
        }
        let _ = events.send(Event::UserRecorded { text: text.to_string() });
    }

    /// Whether the agent runs, with its session (the next turn needs no start).
    async fn is_live(&self) -> bool {
        self.live.lock().await.as_ref().is_some_and(|l| !l.closed.load(Ordering::SeqCst))
    }

    /// `session/prompt`'s `usage`: a `usage` entry of the tokens, as ours are.
    fn record_usage(&self, usage: &Value, events: &mpsc::UnboundedSender<Event>) {
        let n = |k: &str| usage[k].as_u64().unwrap_or(0);
        let u = Usage {
            input_tokens: n("inputTokens"),
            output_tokens: n("outputTokens"),
            cache_read_tokens: n("cachedReadTokens"),
            cache_write_tokens: n("cachedWriteTokens"),
        };
        if u.is_zero() {
            return;
        }
        let model = self.config.name.clone();
        let _ = self.log.append_meta(Entry::usage(&model, u, now()));
        let all = {
            let mut all = lock(&self.usage);
            all.add(&model, &u);
            all.clone()
        };
        let _ = events.send(Event::Usage { usage: all.total(), cost: self.cost() });
    }

    /// One thing the agent sent, in order (the pump's body).
    async fn handle(self: &Arc<Self>, m: Incoming) {
        match m {
            Incoming::Update { update, .. } => self.on_update(update).await,
            Incoming::Permission { request, reply } => {
                // logged with its answer: never before the message of the turn (held under the turn's lock until it
                // is on disk)
                drop(self.turn.lock().await);
                let chat = self.clone();
                // answered off the pump: the user may take minutes, and the agent's updates keep flowing
                tokio::spawn(async move { chat.on_permission(request, reply).await });
            }
            Incoming::Marker(done) => {
                let _ = done.send(());
            }
            Incoming::Service { method, params, reply } => {
                let chat = self.clone();
                // served off the pump: a read may wait on the editor, a write on its buffer, a terminal on its command
                tokio::spawn(async move {
                    let answer = match method.starts_with("terminal/") {
                        true => chat.terminals.handle(method, &params, &chat.tools).await,
                        false => chat.on_fs(method, &params).await,
                    };
                    let _ = reply.send(answer);
                });
            }
            Incoming::Closed(_) => {}
        }
    }

    async fn on_update(self: &Arc<Self>, update: Value) {
        let kind = update["sessionUpdate"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "available_commands_update" => {
                *lock(&self.commands) = update["availableCommands"].as_array().cloned().unwrap_or_default();
                return;
            }
            "current_mode_update" => self.apply_mode(&update),
            "config_option_update" if update["configOptions"].is_array() => {
                *lock(&self.options) = update["configOptions"].clone()
            }
            _ => {}
        }
        if self.replaying.load(Ordering::SeqCst) {
            return;
        }
        match kind.as_str() {
            "agent_message_chunk" | "agent_thought_chunk" | "tool_call" | "tool_call_update" => {
                let mut turn = self.turn.lock().await;
                let Some(t) = turn.as_mut() else { return };
                let result = match kind.as_str() {
                    "agent_message_chunk" => {
                        t.text(&content_text(&update["content"])).await;
                        Ok(())
                    }
                    "agent_thought_chunk" => {
                        t.thought(&content_text(&update["content"]));
                        Ok(())
                    }
                    "tool_call" => t.tool_call(update, &self.conversation).await,
                    _ => t.tool_update(update, &self.conversation).await,
                };
                if let Err(e) = result {
                    t.unsaved.get_or_insert(e);
                }
                for (call, writes) in t.terminals_to_follow() {
                    follow_terminal(Arc::downgrade(self), call, writes);
                }
            }
            "plan" | "current_mode_update" | "config_option_update" | "usage_update" | "session_info_update" => {
                if kind == "usage_update"
                    && let Some(amount) = update["cost"]["amount"].as_f64()
                {
                    *lock(&self.cost) = Some(amount);
                }
                let turn = self.turn.lock().await;
                if let Some(t) = turn.as_ref()
                    && kind == "plan"
                {
                    let _ = t.events.send(Event::Plan { text: plan_text(&update) });
                }
                if let Some(t) = turn.as_ref()
                    && kind == "usage_update"
                {
                    let usage = self.usage().total();
                    let _ = t.events.send(Event::Usage { usage, cost: self.cost() });
                }
                let _ = self.log.append_meta(Entry::acp(update, now()));
            }
            _ => {}
        }
    }

    /// The agent's `fs/read_text_file` and `fs/write_text_file`, on the workspace's files only (confined as our
    /// tools' paths are). A read takes the editor's buffer when the file is loaded there (unsaved text included),
    /// else the disk; `line` (1-based) and `limit` cut it to lines. A write goes the way our `write_file` does
    /// (without a second question: the agent asked its permission): refused when the file's buffer has unsaved
    /// changes, the buffer held during the write and reloaded after; the agent's tool call that wrote it is
    /// checkpointed when it completes.
    async fn on_fs(&self, method: &str, params: &Value) -> Result<Value, String> {
        let raw = params["path"].as_str().ok_or_else(|| format!("{method}: no path"))?;
        let (abs, rel) = self.tools.resolve_path(raw)?;
        match method {
            "fs/read_text_file" => {
                let buffer = tokio::time::timeout(self.tools.editor_timeout(), self.approver.buffer_text(&abs)).await;
                let text = match buffer {
                    Ok(Some(text)) => text,
                    _ => {
                        let path = abs.clone();
                        tokio::task::spawn_blocking(move || std::fs::read(&path))
                            .await
                            .map_err(|e| e.to_string())?
                            .map_err(|e| format!("cannot read {rel}: {e}"))
                            .and_then(|b| String::from_utf8(b).map_err(|_| format!("{rel} is not UTF-8 text")))?
                    }
                };
                let line = params["line"].as_u64().unwrap_or(1).max(1) as usize;
                let limit = params["limit"].as_u64().map(|l| l as usize);
                Ok(json!({ "content": lines_of(&text, line, limit) }))
            }
            "fs/write_text_file" => {
                let content = params["content"].as_str().ok_or("fs/write_text_file: no content")?;
                let id = format!("acp-fs-{:x}", rand::random::<u64>());
                let call = ToolCall::new(id, "write_file", json!({ "path": rel, "content": content }));
                let out = self.tools.run(&call).await;
                if out.is_error { Err(out.content) } else { Ok(json!({})) }
            }
            other => Err(format!("{other} is not served")),
        }
    }

    /// `session/request_permission`: asked through the same approval prompt as our tools (the agent's options,
    /// named as it names them), or answered "allow once" by `approve.agents.NAME`; logged with its answer.
    async fn on_permission(&self, request: Value, reply: oneshot::Sender<Option<String>>) {
        let options: Vec<PermissionChoice> = request["options"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|o| PermissionChoice {
                        id: o["optionId"].as_str().unwrap_or_default().to_string(),
                        name: o["name"].as_str().unwrap_or_default().to_string(),
                        kind: o["kind"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let pick = |kind: &str| options.iter().find(|o| o.kind == kind).map(|o| o.id.clone());
        let call = &request["toolCall"];
        let title = call["title"].as_str().unwrap_or("a tool call").to_string();
        let (answer, by) = if self.config.auto_allow {
            (pick("allow_once"), "config")
        } else {
            let ask = ApprovalRequest {
                tool: format!("{}:{}", self.config.name, call["kind"].as_str().unwrap_or("tool")),
                summary: title.clone(),
                detail: call_detail(call),
                change: None,
                lifted: Vec::new(),
                warning: None,
                always: pick("allow_always").is_some(),
                options: options.clone(),
            };
            let answer = match self.approver.ask(ask).await {
                Approval::Yes => pick("allow_once").or_else(|| pick("allow_always")),
                Approval::Always => pick("allow_always").or_else(|| pick("allow_once")),
                Approval::Only(hunks) if !hunks.is_empty() => pick("allow_once"),
                _ => pick("reject_once").or_else(|| pick("reject_always")),
            };
            (answer, "user")
        };
        let entry = json!({ "permission": {
            "tool_call_id": call["toolCallId"], "title": title, "options": options,
            "answer": answer, "by": by,
        }});
        let _ = self.log.append_meta(Entry::acp(entry, now()));
        let _ = reply.send(answer);
    }
}

/// The agent's updates, read in order by one task until its connection ends. Holds the chat weakly: a chat
/// dropped (closed, replaced) ends its agent, whose connection ends this task.
fn spawn_pump(chat: Weak<AcpChat>, mut rx: mpsc::UnboundedReceiver<Incoming>, closed: Arc<AtomicBool>) {
    tokio::spawn(async move {
        loop {
            let tick = match chat.upgrade() {
                Some(c) => c.turn.lock().await.as_ref().and_then(|t| t.checkpoints.tick()),
                None => return,
            };
            let next = match tick {
                Some(t) => match tokio::time::timeout(t, rx.recv()).await {
                    Ok(m) => m,
                    Err(_) => {
                        if let Some(c) = chat.upgrade()
                            && let Some(t) = c.turn.lock().await.as_mut()
                        {
                            t.offer_text().await;
                        }
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            let Some(m) = next else { return };
            if matches!(m, Incoming::Closed(_)) {
                closed.store(true, Ordering::SeqCst);
            }
            let Some(c) = chat.upgrade() else { return };
            c.handle(m).await;
        }
    });
}

/// For the e2e test of a message synced while the agent answers (tests/e2e/test_acp_services.py): with
/// `PSEUDOCLAUDE_TEST_MESSAGE_STALL` set to a path, the write of a message sent to a running agent waits, that file
/// created, until the file is removed.
fn stall_for_tests() {
    if let Some(marker) = std::env::var_os("PSEUDOCLAUDE_TEST_MESSAGE_STALL") {
        let marker = PathBuf::from(marker);
        let _ = std::fs::write(&marker, b"stalled");
        while marker.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// How often at most a running call is redrawn for its terminal's output (a chatty command's every write would
/// otherwise be a redraw on the editor's loop).
const LIVE_EVERY: Duration = Duration::from_millis(100);

/// The end of a running call's output the editor is sent to draw (it shows the last lines; its result has all).
const LIVE_OUTPUT_BYTES: usize = 16 * 1024;

/// Redraws call `call` of the chat's turn as its terminal is written to ([`Terminals::follow`]), at most every
/// [`LIVE_EVERY`], until the call is recorded, the turn ends or the terminal is gone.
fn follow_terminal(chat: Weak<AcpChat>, call: String, mut writes: tokio::sync::watch::Receiver<u64>) {
    tokio::spawn(async move {
        while writes.changed().await.is_ok() {
            let Some(c) = chat.upgrade() else { return };
            match c.turn.lock().await.as_ref() {
                Some(t) if t.calls.contains_key(&call) => t.show(&call),
                _ => return,
            }
            drop(c);
            tokio::time::sleep(LIVE_EVERY).await;
        }
    });
}

/// The answer streaming in a turn: the text since its last recorded message, its thinking, its tool calls under way.
struct Turn {
    events: mpsc::UnboundedSender<Event>,
    log: Arc<SessionLog>,
    every: Duration,
    model: String,
    text: String,
    checkpoints: Checkpoints,
    thinking: String,
    thinking_since: Option<Instant>,
    thoughts: Vec<Thinking>,
    thinking_ms: u64,
    /// Tool calls under way, by id: the `tool_call` with every update merged in.
    calls: HashMap<String, Value>,
    /// A write that failed while the turn ran.
    unsaved: Option<Unsaved>,
    files: Arc<FileCheckpoints>,
    /// The calls under way that can change files, as the workspace's board of the chats' calls knows them.
    begun: HashMap<String, Begun>,
    /// The agent's terminals: a call that shows one has its output in its result.
    terminals: Arc<Terminals>,
    /// The (call, terminal) pairs whose output is followed ([`follow_terminal`]).
    followed: HashSet<(String, String)>,
}

impl Turn {
    fn new(
        events: mpsc::UnboundedSender<Event>,
        log: Arc<SessionLog>,
        every: Duration,
        model: &str,
        files: Arc<FileCheckpoints>,
    ) -> Turn {
        Turn {
            files,
            begun: HashMap::new(),
            checkpoints: Checkpoints::new(log.clone(), every),
            events,
            log,
            every,
            model: model.to_string(),
            text: String::new(),
            thinking: String::new(),
            thinking_since: None,
            thoughts: Vec::new(),
            thinking_ms: 0,
            calls: HashMap::new(),
            unsaved: None,
            terminals: Arc::default(),
            followed: HashSet::new(),
        }
    }

    async fn text(&mut self, chunk: &str) {
        if chunk.is_empty() {
            return;
        }
        self.end_thinking();
        self.text.push_str(chunk);
        let _ = self.events.send(Event::TextDelta { text: chunk.to_string() });
        self.checkpoints.offer(&self.text, false).await;
    }

    async fn offer_text(&mut self) {
        self.checkpoints.offer(&self.text, false).await;
    }

    fn thought(&mut self, chunk: &str) {
        if chunk.is_empty() {
            return;
        }
        self.thinking_since.get_or_insert_with(Instant::now);
        self.thinking.push_str(chunk);
        let _ = self.events.send(Event::ThinkingDelta { text: chunk.to_string() });
    }

    fn end_thinking(&mut self) {
        let Some(since) = self.thinking_since.take() else { return };
        let ms = since.elapsed().as_millis() as u64;
        self.thinking_ms += ms;
        self.thoughts.push(Thinking {
            kind: Thinking::REASONING.into(),
            thinking: std::mem::take(&mut self.thinking),
            ..Default::default()
        });
        let _ = self.events.send(Event::ThinkingDone { ms });
    }

    async fn tool_call(&mut self, update: Value, conv: &Conversation) -> Result<(), Unsaved> {
        self.end_thinking();
        // the text before a call is on disk before the call runs, as ours is
        self.checkpoints.offer(&self.text, true).await;
        let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
        let _ = self.events.send(Event::ToolCallStarted { id: id.clone(), name: call_name(&update) });
        let done = is_done(&update);
        if may_change_files(&update)
            && !self.begun.contains_key(&id)
            && let Some(begun) = self.files.begin_call(None)
        {
            self.begun.insert(id.clone(), begun);
        }
        self.calls.insert(id.clone(), update);
        if done {
            return self.record(&id, conv).await;
        }
        self.show(&id);
        Ok(())
    }

    /// A call under way, drawn as it stands (the editor updates it in place until its result is recorded): the
    /// end of its output only.
    fn show(&self, id: &str) {
        let Some(call) = self.calls.get(id) else { return };
        let _ = self.events.send(Event::ToolCallLive {
            id: id.to_string(),
            name: call_name(call),
            arguments: call_arguments(call),
            status: call["status"].as_str().unwrap_or("pending").to_string(),
            output: tail_lines(self.result_of(call), LIVE_OUTPUT_BYTES),
        });
    }

    /// The terminals the calls under way show that are not followed yet, with the call showing each.
    fn terminals_to_follow(&mut self) -> Vec<(String, tokio::sync::watch::Receiver<u64>)> {
        let mut out = Vec::new();
        for (id, call) in &self.calls {
            for item in call["content"].as_array().into_iter().flatten() {
                if let Some(term) = item["terminalId"].as_str().filter(|_| item["type"] == "terminal")
                    && self.followed.insert((id.clone(), term.to_string()))
                    && let Some(writes) = self.terminals.follow(term)
                {
                    out.push((id.clone(), writes));
                }
            }
        }
        out
    }

    /// A call's result as text ([`result_text`]), a terminal it shows as the terminal's command, output and exit.
    fn result_of(&self, call: &Value) -> String {
        let mut content = result_text(call);
        for item in call["content"].as_array().into_iter().flatten() {
            if let Some(id) = item["terminalId"].as_str().filter(|_| item["type"] == "terminal")
                && let Some(summary) = self.terminals.summary(id)
            {
                content = content.replace(&format!("[terminal {id}]"), &summary);
            }
        }
        content
    }

    async fn tool_update(&mut self, update: Value, conv: &Conversation) -> Result<(), Unsaved> {
        let id = update["toolCallId"].as_str().unwrap_or_default().to_string();
        let call = self.calls.entry(id.clone()).or_insert_with(|| json!({ "toolCallId": id }));
        if let (Some(call), Some(fields)) = (call.as_object_mut(), update.as_object()) {
            for (k, v) in fields {
                if k != "sessionUpdate" && !v.is_null() {
                    call.insert(k.clone(), v.clone());
                }
            }
        }
        if is_done(&update) {
            return self.record(&id, conv).await;
        }
        self.show(&id);
        Ok(())
    }

    /// A call that completed or failed: the text before it with the call, then its result.
    async fn record(&mut self, id: &str, conv: &Conversation) -> Result<(), Unsaved> {
        let Some(call) = self.calls.remove(id) else { return Ok(()) };
        self.checkpoints.settle().await;
        let name = call_name(&call);
        let arguments = call_arguments(&call);
        let text = std::mem::take(&mut self.text);
        let calls = vec![ToolCall::new(id, name.clone(), arguments)];
        let message = Message {
            thinking: std::mem::take(&mut self.thoughts),
            thinking_ms: std::mem::take(&mut self.thinking_ms),
            model: self.model.clone(),
            ..Message::assistant_tool_calls(text.clone(), calls.clone())
        };
        self.checkpoints = Checkpoints::new(self.log.clone(), self.every);
        conv.add(message)?;
        let _ = self.events.send(Event::AssistantRecorded { text, tool_calls: calls });
        let is_error = call["status"].as_str() == Some("failed");
        let content = self.result_of(&call);
        // what the call did to the files (the agent's own tools and shell write them: the checkpoint scans the
        // workspace), before its result and in the same write
        let begun = self.begun.remove(id);
        let checkpoint = match may_change_files(&call) {
            true => self.files.after_call(id, None, begun).await,
            false => None,
        };
        let recorded = conv.add(Message::tool_result(id, content.clone(), is_error));
        if let Some(record) = checkpoint {
            self.files.settle_checkpoint(record, recorded.is_ok());
        }
        recorded?;
        let _ = self.events.send(Event::ToolResult { id: id.to_string(), name, content, is_error });
        Ok(())
    }

    /// The turn is over: the answer's last text becomes its final message (interrupted when the turn stopped early).
    async fn finish(mut self, conv: &Conversation, stopped_early: bool) -> Result<(), Unsaved> {
        self.end_thinking();
        self.checkpoints.settle().await;
        if let Some(e) = self.unsaved.take() {
            return Err(e);
        }
        if self.text.trim().is_empty() && self.thoughts.is_empty() {
            return Ok(());
        }
        let text = std::mem::take(&mut self.text);
        let message = Message {
            thinking: std::mem::take(&mut self.thoughts),
            thinking_ms: self.thinking_ms,
            model: self.model.clone(),
            interrupted: stopped_early && !text.trim().is_empty(),
            ..Message::assistant(text.clone())
        };
        conv.add(message)?;
        let _ = self.events.send(Event::AssistantRecorded { text, tool_calls: Vec::new() });
        Ok(())
    }
}

/// The session's option that chooses the model: of category `model` (else named `model`).
fn model_option(options: &Value) -> Option<&Value> {
    let all = options.as_array()?;
    all.iter().find(|o| o["category"] == "model").or_else(|| all.iter().find(|o| o["id"] == "model"))
}

/// The end of `text`, at most about `max` bytes of it, from the start of a line (a line longer than that: cut at a
/// character's start).
fn tail_lines(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let tail = &text[cut..];
    match tail.find('\n') {
        Some(nl) if nl + 1 < tail.len() => tail[nl + 1..].to_string(),
        _ => tail.to_string(),
    }
}

/// Lines `line..` (1-based) of `text`, at most `limit` of them, each with its line ending.
fn lines_of(text: &str, line: usize, limit: Option<usize>) -> String {
    if line <= 1 && limit.is_none() {
        return text.to_string();
    }
    text.split_inclusive('\n').skip(line - 1).take(limit.unwrap_or(usize::MAX)).collect()
}

/// Whether a call can change the workspace's files: any but the kinds that only look (ACP's `ToolKind`); a call of
/// no kind may.
fn may_change_files(call: &Value) -> bool {
    !matches!(call["kind"].as_str(), Some("read" | "search" | "think" | "fetch" | "switch_mode"))
}

/// A call's arguments in our log: what the agent said it does (its title, kind, input and the places it touches).
fn call_arguments(call: &Value) -> Value {
    json!({ "title": call["title"], "kind": call["kind"], "input": call["rawInput"], "locations": call["locations"] })
}

fn is_done(update: &Value) -> bool {
    matches!(update["status"].as_str(), Some("completed") | Some("failed"))
}

/// A call's name in our log: the agent's kind of tool (`execute`, `edit`, `read`...).
fn call_name(call: &Value) -> String {
    call["kind"].as_str().filter(|k| !k.is_empty()).unwrap_or("other").to_string()
}

/// The text of a content block (`{"type":"text","text":..}`; other kinds by their type).
fn content_text(block: &Value) -> String {
    match block["type"].as_str() {
        Some("text") => block["text"].as_str().unwrap_or_default().to_string(),
        Some("resource_link") => format!("[{}]", block["uri"].as_str().unwrap_or_default()),
        Some("resource") => block["resource"]["text"].as_str().unwrap_or_default().to_string(),
        Some(other) => format!("[{other}]"),
        None => String::new(),
    }
}

/// A call's result as text: its content (text, diffs as unified diffs, terminals by id), else its raw output.
fn result_text(call: &Value) -> String {
    let mut parts = Vec::new();
    for item in call["content"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("content") => parts.push(content_text(&item["content"])),
            Some("diff") => {
                let path = item["path"].as_str().unwrap_or_default();
                let old = item["oldText"].as_str().unwrap_or_default();
                let new = item["newText"].as_str().unwrap_or_default();
                let diff = similar::TextDiff::from_lines(old, new);
                parts.push(diff.unified_diff().context_radius(3).header(path, path).to_string());
            }
            Some("terminal") => parts.push(format!("[terminal {}]", item["terminalId"].as_str().unwrap_or_default())),
            _ => {}
        }
    }
    if parts.iter().all(|p| p.trim().is_empty()) {
        match &call["rawOutput"] {
            Value::Null => {}
            Value::String(s) => parts.push(s.clone()),
            v => parts.push(v.to_string()),
        }
    }
    parts.join("\n")
}

/// What a permission prompt shows below its title: the call's input and proposed content.
fn call_detail(call: &Value) -> String {
    let mut out = result_text(call);
    if let Some(input) = call.get("rawInput").filter(|v| !v.is_null()) {
        let input = serde_json::to_string_pretty(input).unwrap_or_default();
        out = if out.is_empty() { input } else { format!("{input}\n{out}") };
    }
    out
}

fn plan_text(update: &Value) -> String {
    let mut out = String::from("plan:");
    for e in update["entries"].as_array().into_iter().flatten() {
        let mark = match e["status"].as_str() {
            Some("completed") => "[x]",
            Some("in_progress") => "[~]",
            _ => "[ ]",
        };
        out.push_str(&format!(" {mark} {};", e["content"].as_str().unwrap_or_default()));
    }
    out.trim_end_matches(';').to_string()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

fn writer_options(config: &ChatConfig) -> WriterOptions {
    WriterOptions { model: config.name.clone(), spill_threshold: config.spill_threshold }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_result_is_its_content_with_diffs_as_unified_diffs_else_its_raw_output() {
        let call = json!({ "content": [
            { "type": "content", "content": { "type": "text", "text": "wrote it" } },
            { "type": "diff", "path": "a.txt", "oldText": "one\n", "newText": "two\n" },
        ]});
        let text = result_text(&call);
        assert!(text.starts_with("wrote it\n--- a.txt\n+++ a.txt") && text.contains("-one\n+two"), "{text}");
        assert_eq!(result_text(&json!({ "rawOutput": "done" })), "done");
        assert_eq!(result_text(&json!({ "rawOutput": { "code": 0 } })), r#"{"code":0}"#);
    }

    #[test]
    fn a_read_takes_the_lines_asked_with_their_endings() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(lines_of(text, 1, None), text);
        assert_eq!(lines_of(text, 2, Some(1)), "two\n");
        assert_eq!(lines_of(text, 3, Some(5)), "three\n");
        assert_eq!(lines_of(text, 9, None), "");
    }

    #[test]
    fn a_running_calls_output_is_sent_from_a_line_start_near_its_end() {
        assert_eq!(tail_lines("one\ntwo\n".into(), 64), "one\ntwo\n");
        assert_eq!(tail_lines("one\ntwo\nthree\n".into(), 8), "three\n");
        // one long line: cut at a character's start
        assert_eq!(tail_lines("ééé".into(), 3), "é");
    }

    #[test]
    fn a_plan_is_one_line_of_its_steps() {
        let plan = json!({ "entries": [
            { "content": "read", "status": "completed" }, { "content": "write", "status": "pending" },
        ]});
        assert_eq!(plan_text(&plan), "plan: [x] read; [ ] write");
    }
}
