//! One ACP agent's chat, logged as ours is: the session's log and conversation (the same [`SessionLog`] and
//! [`Conversation`] as [`crate::agent::Agent`]), the agent's process, and what each of its updates becomes.
//!
//! How the protocol's updates map onto the log (doc/log_format.md, "ACP agents"):
//! - the user's message is written first (it creates the session), then the agent is started if it is not running;
//!   to an agent that runs, the prompt goes while the message is synced, and nothing of the answer is handled before
//!   it is on disk (the turn's lock, held meanwhile);
//! - `agent_message_chunk`s stream into the answer, checkpointed as ours
//!   ([`crate::agent::checkpoint::Checkpoints`]): a `kill -9` keeps what had streamed; `agent_thought_chunk`s are
//!   its thinking (`reasoning` blocks, shown folded, never sent back);
//! - a `tool_call` and its `tool_call_update`s are one call and its result, written when the call completes or
//!   fails: the text streamed before it, with the call (title, kind, input, locations), then the result (its
//!   content, diffs and terminal output as text). A call still running when the turn ends is not written: a log only
//!   holds calls with their results. Until it completes, the editor is sent it as it stands at each update
//!   ([`crate::agent::Event::ToolCallLive`]) and draws it in place;
//! - plans, mode and config changes, `usage_update` and each permission asked (with its answer) are `acp` entries;
//!   the agent's name and its own session id are a `meta` entry.
//!
//! The agent's updates are read by one task per connection (the pump), in order; a turn waits for the pump to have
//! handled everything the agent sent before its `session/prompt` answer (a marker, see [`super::client`]) before
//! it writes the final message. Updates a `session/load` replays are dropped: the log has them already.
//!
//! This file holds the chat ([`AcpChat`]: its settings, its state, new and resumed, stopped); its parts, each an
//! `impl AcpChat` of one concern: `connect` (the agent started and its session restored: the resume order),
//! `turn` (one turn), `pump` (what the agent sends, in order), `record` (a turn's updates written as messages:
//! [`record::Turn`]), `requests` (the agent's `fs/*` and permission requests), `modes` (its commands, modes and
//! models) and `rewind`.

mod connect;
mod modes;
mod pump;
mod record;
mod requests;
mod rewind;
mod turn;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::AgentSpec;
use super::client::Connection;
use super::terminal::Terminals;
use crate::agent::rewind::FileCheckpoints;
use crate::agent::{SessionLog, lock};
use crate::conversation::Conversation;
use crate::message::{Message, now};
use crate::rewind::Tracker;
use crate::session::entry::AgentMeta;
use crate::session::{self, Context, Entry, Writer, WriterOptions};
use crate::tools::{Approver, AutoApprove, Tools};
use crate::usage::{Pricing, UsageByModel};
use record::Turn;

/// How long an agent whose input was closed may take to exit before its process group is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

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
    /// A worktree chat's git worktree (issue 47): the agent works there (its `cwd`, our fs and terminal tools,
    /// the checkpoints); the session stays the workspace's.
    pub worktree: Option<crate::session::entry::WorktreeMeta>,
}

impl ChatConfig {
    /// Where the agent works: its worktree's folder in a worktree chat, else the workspace.
    pub fn root(&self) -> &std::path::Path {
        self.worktree.as_ref().map_or(&self.workspace, |w| &w.path)
    }
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
        if let Some(w) = &config.worktree {
            // written with the first message: a resume goes back into the worktree
            log.stage(Entry::meta_worktree(w.clone(), now()), true);
        }
        let tracker = config.rewind.then(|| Tracker::new(config.root(), config.rewind_max_file_bytes));
        AcpChat::assemble(config, approver, log, Vec::new(), None, UsageByModel::default(), tracker)
    }

    /// Reopens session `id` (the lock, a torn tail moved aside, the history loaded), on the caller's thread; the
    /// agent is started again by [`AcpChat::connect`].
    pub fn resume(
        mut config: ChatConfig,
        approver: Arc<dyn Approver>,
        id: &str,
    ) -> session::Result<(Arc<AcpChat>, crate::agent::Resumed)> {
        let ctx = Context::open(&config.workspace, id)?;
        let opts = writer_options(&config);
        let (writer, repair) = Writer::open_with_repair(&ctx, opts.clone())?;
        let mut loaded = session::load(&ctx)?;
        let worktree =
            crate::agent::back_into_worktree(&config.workspace, &mut config.worktree, loaded.worktree.as_ref());
        let log = SessionLog::opened(&config.workspace, opts, writer);
        if let Some(w) = config.worktree.as_ref().filter(|w| loaded.worktree.as_ref() != Some(*w)) {
            // made again in another folder: the log learns it with the next message
            log.stage(Entry::meta_worktree(w.clone(), now()), true);
        }
        let messages = std::mem::take(&mut loaded.messages);
        let usage = loaded.usage_by_model.clone();
        let stale = crate::agent::stale_seconds(loaded.last_message, now(), config.stale_after);
        let tracker = config.rewind.then(|| {
            let last_turn = messages.iter().map(|m| m.turn).max().unwrap_or(0);
            let files = std::mem::take(&mut loaded.files);
            Tracker::resume(config.root(), config.rewind_max_file_bytes, files, last_turn)
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
            worktree,
            handed_over: None,
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
        let files = Arc::new(FileCheckpoints::new(config.root(), log.clone(), conversation.clone(), tracker));
        // the agent asked its own permission for a write or a command: ours would be a second question (a command
        // that cannot be sandboxed is still asked, as ours is)
        let auto = AutoApprove { write_file: true, run_command: true, ..Default::default() };
        let mut tools = Tools::new(config.root(), approver.clone(), auto);
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

    /// The version the agent's `initialize` reported (the last one that ran for this chat).
    pub fn agent_version(&self) -> Option<String> {
        lock(&self.agent).as_ref().map(|a| a.version.clone()).filter(|v| !v.is_empty())
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
}

fn writer_options(config: &ChatConfig) -> WriterOptions {
    WriterOptions { model: config.name.clone(), spill_threshold: config.spill_threshold }
}
