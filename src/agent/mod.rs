//! One agent conversation bound to its session: the conversation, its log, its provider, its tools
//! and its compaction runtime. The host ([`host::Host`], what the editor drives) holds the current
//! [`Agent`] and swaps it whole on resume.
//!
//! A new agent creates no session until its first message is written (an opened and closed empty
//! chat leaves nothing behind). A resumed agent ([`Agent::resume`]) follows the seed's switch-over:
//! load the log, open the writer (torn-tail repair, the lock), rebuild the conversation, and only
//! then may the caller drop the old agent; when the last message is older than `stale_after`, a
//! reminder is added that the model sees with the next request. The reminder is *pending* until the
//! user sends: it shows in [`Agent::messages`] at once but reaches the log only with the next user
//! message, so a resume that is left without a word leaves the log byte-identical (and the session's
//! place in the list unchanged).

pub mod chat;
pub mod checkpoint;
mod config;
pub mod host;
mod outbox;
pub mod rewind;
pub mod runner;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::compact::{CompactConfig, Runtime};
use crate::conversation::{Conversation, Hooks};
use crate::git::GitHead;
use crate::instructions::{self, Instructions, Sources};
use crate::message::{Message, now};
use crate::provider::Provider;
use crate::session::words::STALE_REMINDER_PREFIX;
use crate::session::{self, Context, Loaded, Writer, WriterOptions};
use crate::tools::{Approver, AutoApprove, Tools};
use crate::usage::{Pricing, UsageByModel};

pub use runner::{Cancel, Event};

/// How long a session may stay idle before a resume reminds the model of the pause: the one definition
/// of the default (`config.lua` states the same six hours for the user to read; `test_doc.py` holds them equal).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(6 * 3600);

/// Everything an agent is configured with (the Lua config, resolved).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub workspace: PathBuf,
    pub stale_after: Duration,
    pub spill_threshold: usize,
    pub auto_approve: AutoApprove,
    pub compact: CompactConfig,
    /// How often a streaming answer is checkpointed to the log; `ZERO` turns it off.
    pub checkpoint_every: Duration,
    /// Prices by model, for the session's cost ([`Event::Usage`]).
    pub pricing: Pricing,
    /// The user's own instructions file, read before the workspace's ([`crate::instructions`]).
    pub user_instructions: Option<PathBuf>,
    /// How `run_command` is confined (the `sandbox` table of `setup()`).
    pub sandbox: crate::sandbox::Settings,
    /// The editor's MCP servers, their tools offered next to ours.
    pub mcp: Option<Arc<crate::mcp::Servers>>,
    /// Checkpoints of the workspace's files for rewind ([`crate::rewind`]); off: none are taken.
    pub rewind: bool,
    /// Files larger than this are recorded as changed but not kept.
    pub rewind_max_file_bytes: u64,
    /// A worktree chat's git worktree (issue 47): where it works (tools, commands, instructions, checkpoints),
    /// while its session stays the workspace's.
    pub worktree: Option<session::entry::WorktreeMeta>,
}

impl AgentConfig {
    pub fn new(workspace: &Path) -> AgentConfig {
        AgentConfig {
            workspace: workspace.to_path_buf(),
            stale_after: DEFAULT_STALE_AFTER,
            spill_threshold: session::spill::DEFAULT_THRESHOLD,
            auto_approve: AutoApprove::default(),
            compact: CompactConfig::default(),
            checkpoint_every: checkpoint::every_from_env(),
            pricing: Pricing::default(),
            user_instructions: None,
            sandbox: crate::sandbox::Settings::default(),
            mcp: None,
            rewind: true,
            rewind_max_file_bytes: crate::rewind::DEFAULT_MAX_FILE_BYTES,
            worktree: None,
        }
    }

    /// Where the agent works: its worktree's folder in a worktree chat, else the workspace.
    pub fn root(&self) -> &Path {
        self.worktree.as_ref().map_or(&self.workspace, |w| &w.path)
    }

    /// Where this agent's instructions come from.
    pub fn instruction_sources(&self) -> Sources {
        Sources::new(self.root(), self.user_instructions.clone())
    }
}

/// The session a conversation is logged to; created on the first write when the agent is new.
pub struct SessionLog {
    workspace: PathBuf,
    opts: WriterOptions,
    writer: Mutex<Option<Writer>>,
    /// The writer's context, apart from its lock: the editor asks for it (status, current) while a
    /// write, a checkpoint twice a second while an answer streams, holds the writer through its sync.
    ctx: OnceLock<Context>,
    /// Entries written with the next message, in its write and its sync: (before it, after it).
    staged: Mutex<(Vec<session::Entry>, Vec<session::Entry>)>,
}

impl SessionLog {
    pub(crate) fn lazy(workspace: &Path, opts: WriterOptions) -> Arc<SessionLog> {
        Arc::new(SessionLog {
            workspace: workspace.to_path_buf(),
            opts,
            writer: Mutex::new(None),
            ctx: OnceLock::new(),
            staged: Mutex::default(),
        })
    }

    pub(crate) fn opened(workspace: &Path, opts: WriterOptions, writer: Writer) -> Arc<SessionLog> {
        let ctx = OnceLock::from(writer.context().clone());
        Arc::new(SessionLog {
            workspace: workspace.to_path_buf(),
            opts,
            writer: Mutex::new(Some(writer)),
            ctx,
            staged: Mutex::default(),
        })
    }

    /// The session's context, once it exists. Never waits on a write.
    pub fn context(&self) -> Option<Context> {
        self.ctx.get().cloned()
    }

    fn with_writer(&self, f: impl FnOnce(&Writer) -> session::Result<()>) -> session::Result<()> {
        let mut slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            let ctx = Context::new(&self.workspace)?;
            *slot = Some(Writer::open(&ctx, self.opts.clone())?);
            let _ = self.ctx.set(ctx);
        }
        f(slot.as_ref().expect("just opened"))
    }

    /// The session's context, creating the session when it does not exist yet (a message is about to
    /// be written, and something of it must be spilled first).
    pub fn ensure(&self) -> Result<Context, String> {
        self.with_writer(|_| Ok(())).map_err(|e| e.to_string())?;
        self.context().ok_or_else(|| "the session could not be created".to_string())
    }

    /// Appends a `title` or `pin` entry ([`session::meta`]), or a `meta` (git) or `usage` one, through
    /// this session's one writer. Never creates the session: a chat with nothing sent has nothing to
    /// name, and git state and usage follow the user's message, which creates it.
    pub fn append_meta(&self, entry: session::Entry) -> Result<(), String> {
        let slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let writer = slot.as_ref().ok_or("this chat has no session yet: send a message first")?;
        writer.append_entry(entry).map_err(|e| e.to_string())
    }

    /// Has `entry` written with the next message appended (`after` it or before it): one sync for both.
    pub(crate) fn stage(&self, entry: session::Entry, after: bool) {
        let mut s = self.staged.lock().unwrap_or_else(|p| p.into_inner());
        if after { s.1.push(entry) } else { s.0.push(entry) }
    }

    /// Takes what was staged: the write that takes it writes it (or fails with it).
    pub(crate) fn take_staged(&self) -> (Vec<session::Entry>, Vec<session::Entry>) {
        std::mem::take(&mut *self.staged.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Writes a checkpoint of a streaming answer. Never creates the session: an answer streams only
    /// after its question was written.
    fn checkpoint(&self, answer: &str, at: usize, text: &str) -> Result<(), String> {
        let slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let writer = slot.as_ref().ok_or("no session to checkpoint to")?;
        writer.checkpoint(answer, at, text).map_err(|e| e.to_string())
    }

    pub(crate) fn hooks(self: &Arc<Self>) -> Hooks {
        let (a, r) = (self.clone(), self.clone());
        Hooks {
            on_append: Box::new(move |m| {
                Ok(a.with_writer(|w| {
                    let (before, after) = a.take_staged();
                    w.append_between(before, m, after)
                })?)
            }),
            on_replace: Box::new(move |reason, msgs| Ok(r.with_writer(|w| w.replace(reason, msgs))?)),
        }
    }
}

/// What a resume found, for the UI.
#[derive(Debug, Clone, Default)]
pub struct Resumed {
    pub loaded: Loaded,
    /// Bytes of a torn tail the writer moved aside.
    pub torn_bytes: u64,
    /// Hours since the last message, when the stale reminder was added.
    pub stale_hours: Option<u64>,
    /// The same in seconds.
    pub stale_seconds: Option<u64>,
    /// Files changed since the session's last checkpoint, by anyone.
    pub changed_since: Vec<crate::session::files::FileChange>,
    /// A rewind the editor died in, finished now.
    pub recovered_rewind: Option<crate::rewind::Report>,
    /// What became of a worktree chat's worktree ([`back_into_worktree`]); `None` for another chat.
    pub worktree: Option<WorktreeResumed>,
    /// A kept copy of another agent's session handed to that agent by this resume: the line saying how it goes on
    /// (`crate::acp::handover`).
    pub handed_over: Option<String>,
}

/// A worktree chat resumed: `present` (back into it), `recreated` (made again from its branch), `gone` (neither
/// folder nor branch: the chat goes on in the workspace), or `failed` (it could not be reached: also in the
/// workspace, `error` says why).
#[derive(Debug, Clone, Default, serde::Serialize, PartialEq, Eq)]
pub struct WorktreeResumed {
    pub state: &'static str,
    pub name: String,
    pub branch: String,
    /// Where the chat works now.
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Puts a resumed worktree chat back into its worktree (`config.worktree`), re-created from its branch when its
/// folder is gone; in the workspace when neither is there. Runs git: on the resume's thread, never the editor's.
pub fn back_into_worktree(
    workspace: &Path,
    worktree: &mut Option<session::entry::WorktreeMeta>,
    logged: Option<&session::entry::WorktreeMeta>,
) -> Option<WorktreeResumed> {
    let Some(logged) = logged else {
        // a session of the workspace resumed in a chat that was a worktree chat works in the workspace
        *worktree = None;
        return None;
    };
    let mut report = WorktreeResumed {
        state: "gone",
        name: logged.name.clone(),
        branch: logged.branch.clone(),
        path: workspace.to_path_buf(),
        error: None,
    };
    use crate::worktree::Resumed as R;
    let found = match crate::worktree::resume(workspace, &logged.name) {
        Ok(R::Present(w)) => Some(("present", w)),
        Ok(R::Recreated(w)) => Some(("recreated", w)),
        Ok(R::Gone) => None,
        Err(e) => {
            report.state = "failed";
            report.error = Some(e.to_string());
            None
        }
    };
    *worktree = found.map(|(state, w)| {
        report.state = state;
        report.path = w.root.clone();
        session::entry::WorktreeMeta { name: w.id, branch: w.branch, path: w.root }
    });
    Some(report)
}

pub struct Agent {
    pub config: AgentConfig,
    /// The provider of the next turn (`:PseudoModel` switches it between turns).
    provider: Mutex<Arc<dyn Provider>>,
    pub tools: Arc<Tools>,
    pub conversation: Arc<Conversation>,
    pub log: Arc<SessionLog>,
    pub compact: tokio::sync::Mutex<Runtime>,
    /// The system prompt, built from the instructions in `instructions`: the same bytes every turn until a file
    /// changes (the provider's prompt cache depends on it).
    system: Mutex<String>,
    instructions: Mutex<Instructions>,
    /// Messages the model reads next that the log gets with the next user message (the stale reminder).
    pending: Mutex<Vec<Message>>,
    /// Tokens the session spent, per model: the log's `usage` entries on resume, then each answer's.
    usage: Mutex<UsageByModel>,
    /// The git state the log last recorded; a turn records it again only when it changed.
    git: Mutex<Option<GitHead>>,
    /// The session's checkpoints of the workspace's files, for rewind.
    pub(crate) files: rewind::FileCheckpoints,
    /// A turn waits for the MCP servers to settle (a question about one of `.mcp.json` may be on screen).
    settling: std::sync::atomic::AtomicBool,
    /// The log names this chat's worktree (`config.worktree`) already: written with the first turn otherwise.
    pub(crate) worktree_logged: std::sync::atomic::AtomicBool,
}

impl Agent {
    /// A fresh agent; its session appears with its first message.
    pub fn new(config: AgentConfig, provider: Arc<dyn Provider>, approver: Arc<dyn Approver>) -> Agent {
        let log = SessionLog::lazy(&config.workspace, writer_options(&config, provider.as_ref()));
        let conversation = Conversation::new(log.hooks());
        let files = config.rewind.then(|| crate::rewind::Tracker::new(config.root(), config.rewind_max_file_bytes));
        Agent::assemble(config, provider, approver, conversation, log, Vec::new(), files)
    }

    /// Reopens session `id`. Nothing of the caller's current agent is touched: on error it stays.
    pub fn resume(
        mut config: AgentConfig,
        provider: Arc<dyn Provider>,
        approver: Arc<dyn Approver>,
        id: &str,
    ) -> session::Result<(Agent, Resumed)> {
        let ctx = Context::open(&config.workspace, id)?;
        let opts = writer_options(&config, provider.as_ref());
        // The writer first: it takes the lock (a second editor is refused before anything else) and
        // moves a torn tail aside, so the load below sees exactly what the writer will append to.
        let (writer, repair) = Writer::open_with_repair(&ctx, opts.clone())?;
        let mut loaded = session::load(&ctx)?;
        let worktree = back_into_worktree(&config.workspace, &mut config.worktree, loaded.worktree.as_ref());
        let log = SessionLog::opened(&config.workspace, opts, writer);
        // Moved, not copied: a 100 MiB history is held once.
        let conversation = Conversation::from_messages(std::mem::take(&mut loaded.messages), log.hooks());
        let mut resumed = Resumed { torn_bytes: repair.torn_bytes, worktree, ..Default::default() };
        let mut pending = Vec::new();
        if let Some(idle) = stale_seconds(loaded.last_message, now(), config.stale_after) {
            pending.push(Message::user(stale_reminder_after(idle)));
            resumed.stale_hours = Some(idle / 3600);
            resumed.stale_seconds = Some(idle);
        }
        let files = config.rewind.then(|| {
            let last_turn = conversation.with_messages(|m| m.iter().map(|m| m.turn).max().unwrap_or(0));
            crate::rewind::Tracker::resume(
                config.root(),
                config.rewind_max_file_bytes,
                std::mem::take(&mut loaded.files),
                last_turn,
            )
        });
        let unfinished = crate::rewind::unfinished(&loaded.rewinds).cloned();
        let logged = config.worktree.is_none() || config.worktree == loaded.worktree;
        let mut agent = Agent::assemble(config, provider, approver, conversation, log, pending, files);
        *agent.worktree_logged.get_mut() = logged;
        if let Some(begin) = unfinished {
            resumed.recovered_rewind = Some(agent.files.recover_rewind(&begin));
        }
        resumed.changed_since = agent.files.changed_since_last();
        note_changes(
            agent.pending.get_mut().unwrap_or_else(|p| p.into_inner()),
            loaded.last_message,
            &resumed.changed_since,
        );
        *agent.usage.get_mut().unwrap_or_else(|p| p.into_inner()) = loaded.usage_by_model.clone();
        *agent.git.get_mut().unwrap_or_else(|p| p.into_inner()) = loaded.git.clone();
        resumed.loaded = loaded;
        Ok((agent, resumed))
    }

    fn assemble(
        config: AgentConfig,
        provider: Arc<dyn Provider>,
        approver: Arc<dyn Approver>,
        conversation: Arc<Conversation>,
        log: Arc<SessionLog>,
        pending: Vec<Message>,
        files: Option<crate::rewind::Tracker>,
    ) -> Agent {
        let mut tools = Tools::new(config.root(), approver, config.auto_approve);
        tools.set_sandbox(config.sandbox.clone());
        // The commands' $TMPDIR lives in the session's folder, so it goes when the session is deleted.
        let session = log.clone();
        tools.set_session_dir(Box::new(move || session.context().map(|c| c.dir)));
        if let Some(m) = &config.mcp {
            tools.set_mcp(m.clone());
        }
        let tools = Arc::new(tools);
        let compact = tokio::sync::Mutex::new(conversation.with_messages(|m| Runtime::open(config.compact.clone(), m)));
        let instructions = instructions::load(&config.instruction_sources());
        let system = system_prompt_with(config.root(), &instructions);
        let files = rewind::FileCheckpoints::new(config.root(), log.clone(), conversation.clone(), files);
        Agent {
            config,
            provider: Mutex::new(provider),
            tools,
            conversation,
            log,
            compact,
            system: Mutex::new(system),
            instructions: Mutex::new(instructions),
            pending: Mutex::new(pending),
            usage: Mutex::default(),
            git: Mutex::default(),
            files,
            settling: Default::default(),
            worktree_logged: Default::default(),
        }
    }

    /// Whether a turn of this agent waits for the user: its first request held until a server of the workspace's
    /// `.mcp.json` is answered about (approvals are the host's to know).
    pub fn waits_for_consent(&self) -> bool {
        self.settling.load(std::sync::atomic::Ordering::SeqCst) && self.tools.mcp_asking()
    }

    /// The provider the next turn uses.
    pub fn provider(&self) -> Arc<dyn Provider> {
        self.provider.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Switches the provider (a model) from the next turn on; a turn running keeps its own.
    pub fn set_provider(&self, provider: Arc<dyn Provider>) {
        *self.provider.lock().unwrap_or_else(|p| p.into_inner()) = provider;
    }

    /// The system prompt the next request carries.
    pub fn system(&self) -> String {
        self.system.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The instructions in the system prompt: their files, and the imports that were not expanded.
    pub fn instructions(&self) -> Instructions {
        self.instructions.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the instruction files again (a few small files, on a blocking thread); when their text changed, the
    /// system prompt takes it from now on, and the note to tell the model so once is returned.
    pub(crate) async fn refresh_instructions(&self) -> Option<String> {
        let sources = self.config.instruction_sources();
        let fresh = tokio::task::spawn_blocking(move || instructions::load(&sources)).await.ok()?;
        let mut current = self.instructions.lock().unwrap_or_else(|p| p.into_inner());
        if fresh.text == current.text {
            *current = fresh; // the same text; the files' list may name a new import's path the same way
            return None;
        }
        let names: Vec<String> = fresh
            .files
            .iter()
            .chain(current.files.iter())
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .fold(Vec::new(), |mut v, n| {
                if !v.contains(&n) {
                    v.push(n);
                }
                v
            });
        *self.system.lock().unwrap_or_else(|p| p.into_inner()) = system_prompt_with(self.config.root(), &fresh);
        *current = fresh;
        Some(format!(
            "{INSTRUCTIONS_CHANGED_PREFIX} The project instructions ({}) changed since the last message; the system \
             prompt holds their new text, which applies from now on.",
            names.join(", ")
        ))
    }

    /// Tokens the session spent so far, per model (what was reported before a resume included).
    pub fn usage(&self) -> UsageByModel {
        self.usage.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The session, once it exists.
    pub fn current(&self) -> Option<Context> {
        self.log.context()
    }

    /// The history the model sees next (pending messages included).
    pub fn messages(&self) -> Vec<Message> {
        let mut all = self.conversation.snapshot();
        all.extend(self.pending.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned());
        all
    }

    /// Reads the history the model sees next in place (pending messages included), without copying it.
    pub fn with_messages<T>(&self, f: impl FnOnce(&[&Message]) -> T) -> T {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        self.conversation.with_messages(|m| f(&m.iter().chain(pending.iter()).collect::<Vec<_>>()))
    }

    /// Moves the pending messages into the conversation (and so the log), before the user's next one.
    pub(crate) fn commit_pending(&self) -> Result<(), crate::conversation::Unsaved> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        for m in pending {
            self.conversation.add(m)?;
        }
        Ok(())
    }
}

fn writer_options(config: &AgentConfig, provider: &dyn Provider) -> WriterOptions {
    WriterOptions { model: provider.model().to_string(), spill_threshold: config.spill_threshold }
}

/// Whole hours since `last`, when more than `stale_after` has passed. A log without times is not stale.
pub fn stale_hours(last: i64, now: i64, stale_after: Duration) -> Option<u64> {
    stale_seconds(last, now, stale_after).map(|s| s / 3600)
}

/// Seconds since `last`, when more than `stale_after` has passed.
pub fn stale_seconds(last: i64, now: i64, stale_after: Duration) -> Option<u64> {
    if last <= 0 {
        return None;
    }
    let idle = now.saturating_sub(last).max(0) as u64;
    (idle > stale_after.as_secs()).then_some(idle)
}

/// The reminder the model reads after a long pause of `hours`.
pub fn stale_reminder(hours: u64) -> String {
    stale_reminder_after(hours * 3600)
}

/// The reminder after `idle` seconds: in minutes under one hour (a `stale_after_hours` of 0.5 is
/// allowed), in hours above.
pub fn stale_reminder_after(idle: u64) -> String {
    let pause = match idle {
        i if i < 3600 => plural(i / 60, "minute"),
        i => plural(i / 3600, "hour"),
    };
    format!(
        "{STALE_REMINDER_PREFIX} This conversation was resumed {pause} after its last message. Files in the \
         workspace and any external state (processes, branches, services) may have changed since: re-read files and \
         re-check state before acting on what the earlier messages say about them."
    )
}

/// "Since this session's last message (7 hours ago): src/a.rs modified, notes.txt deleted."
/// Tells the model, with the next message, what changed in the workspace since the session's last message
/// (`changes`, none: nothing): added to the stale reminder when there is one.
pub(crate) fn note_changes(pending: &mut Vec<Message>, last: i64, changes: &[crate::session::files::FileChange]) {
    if changes.is_empty() {
        return;
    }
    let note = changed_note(last, now(), changes);
    match pending.first_mut() {
        Some(reminder) => reminder.content.push_str(&format!("\n\n{note}")),
        None => pending.push(Message::user(format!("{STALE_REMINDER_PREFIX} {note}"))),
    }
}

pub fn changed_note(last: i64, now: i64, changes: &[crate::session::files::FileChange]) -> String {
    let ago = now.saturating_sub(last).max(0) as u64;
    let ago = match ago {
        a if a < 60 => "moments ago".to_string(),
        a if a < 3600 => format!("{} ago", plural(a / 60, "minute")),
        a if a < 2 * 86400 => format!("{} ago", plural(a / 3600, "hour")),
        a => format!("{} ago", plural(a / 86400, "day")),
    };
    format!(
        "Since this session's last message ({ago}): {}. Re-read these files before relying on what the earlier \
         messages say about them.",
        crate::rewind::describe(changes, 20)
    )
}

fn plural(n: u64, unit: &str) -> String {
    if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") }
}

const BASE_PROMPT: &str = "You are pseudoclaude, a coding agent working inside the user's Neovim, in the workspace \
    below. Use the tools to read, search, edit files and run commands; paths are relative to the workspace. Be concise: \
    answer in a few sentences unless asked for more. Before changing a file, read it. Say what you changed.";

pub const INSTRUCTIONS_FILE: &str = "PSEUDOCLAUDE.md";

/// Starts the note that tells the model its instructions changed (at the end of the user's message).
pub const INSTRUCTIONS_CHANGED_PREFIX: &str = "[Instructions changed]";

/// The built-in prompt, plus the workspace's instruction files ([`crate::instructions`], no user file).
pub fn system_prompt(workspace: &Path) -> String {
    system_prompt_with(workspace, &instructions::load(&Sources::new(workspace, None)))
}

/// The built-in prompt, then the instructions.
pub fn system_prompt_with(workspace: &Path, found: &Instructions) -> String {
    let mut s = format!("{BASE_PROMPT}\n\nWorkspace: {}", workspace.display());
    if !found.text.is_empty() {
        s.push_str("\n\n");
        s.push_str(&found.text);
    }
    s
}

/// A mutex of the host's or the outbox's, taken even when a thread panicked holding it: what it guards
/// (a queue, the current agent) stays usable, and a panic is already reported where it happened.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_at_6h01_not_at_5h59() {
        let six = Duration::from_secs(6 * 3600);
        let now = 1_000_000;
        assert_eq!(stale_hours(now - (5 * 3600 + 59 * 60), now, six), None);
        assert_eq!(stale_hours(now - (6 * 3600 + 60), now, six), Some(6));
        assert_eq!(stale_hours(0, now, six), None);
    }

    #[test]
    fn the_reminder_speaks_in_minutes_under_an_hour() {
        assert!(stale_reminder_after(40 * 60 + 5).contains("resumed 40 minutes after"));
        assert!(stale_reminder_after(61).contains("resumed 1 minute after"));
        assert!(stale_reminder_after(7 * 3600 + 100).contains("resumed 7 hours after"));
        assert!(stale_reminder_after(3600).contains("resumed 1 hour after"));
    }
}
