//! One live chat of the editor, as the host's registry holds it: a number of its own, the agent that drives its
//! turns, the running turn's cancel, and whether it needs the user.
//!
//! A chat is named by its [`ChatId`], a number given when it opens and kept for its life in the editor (its session
//! appears only with the first message, and a resume or `:PseudoNew` changes the session a chat shows; the number
//! stays). Everything the host queues for the editor about a chat carries that number.
//!
//! The seam for a second kind of agent: the registry holds a chat's agent as an `Arc<dyn` [`Driver`]`>`. Ours is
//! [`Agent`]; an ACP agent (src/acp/) that runs its own turns implements the same trait, reports through the same
//! [`Event`]s and asks the user through the [`Approver`] the host hands it (bound to its chat, so the question is
//! routed and the chat shows as waiting), and is put in a chat with [`super::host::Host::open_chat_with`].

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::mpsc;

use super::rewind::FileCheckpoints;
use super::{Agent, Cancel, Event};
use crate::attachment::Attachment;
use crate::message::Message;
use crate::provider::BoxFuture;
use crate::rewind::{Report, RewindOptions, TurnChanges};
use crate::session::Context;
use crate::session::replay::title_of;
use crate::usage::UsageByModel;

/// A chat's number in this editor.
pub type ChatId = u64;

/// What a chat is doing, as the editor shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatState {
    /// No turn runs.
    Idle,
    /// A turn runs.
    Running,
    /// A turn waits for the user's answer (an approval).
    Waiting,
    /// The last turn ended with an error; the next message starts afresh.
    Failed,
}

impl ChatState {
    /// The one decision of what a chat is doing: the winbar, `chats()`, the picker's rows and `:PseudoChats` show it
    /// as the host sends it (the editor never works it out again). `waits` is asked only while a turn runs.
    pub fn of(busy: bool, waits: impl FnOnce() -> bool, failed: bool) -> ChatState {
        match (busy, failed) {
            (true, _) if waits() => ChatState::Waiting,
            (true, _) => ChatState::Running,
            (false, true) => ChatState::Failed,
            (false, false) => ChatState::Idle,
        }
    }
}

/// What drives a chat's turns: our own [`Agent`], or an agent of its own kind (ACP) that runs them itself.
pub trait Driver: Send + Sync {
    /// The agent's name as the editor lists it: `pseudoclaude` for ours, the ACP agent's (`claude`, `codex`…).
    fn agent_name(&self) -> String;

    /// The session the chat is logged to, once it exists.
    fn session(&self) -> Option<Context>;

    /// Runs one turn: every [`Event`] of it sent on `events`, [`Event::TurnDone`] last, stopping soon after
    /// `cancel` is raised. The future runs on the host's threads; it must never block them.
    fn turn(
        self: Arc<Self>,
        text: String,
        attachments: Vec<Attachment>,
        events: mpsc::UnboundedSender<Event>,
        cancel: Cancel,
    ) -> BoxFuture<'static, ()>;

    /// The history the chat shows, in the log's shape.
    fn messages(&self) -> Vec<Message>;

    /// What the list of chats calls it: the first line of its first typed message, as a session's automatic title.
    fn title(&self) -> String {
        self.messages().iter().find(|m| m.is_user_text()).map(|m| title_of(&m.content)).unwrap_or_default()
    }

    /// Whether something in memory did not reach the log.
    fn unsaved(&self) -> bool {
        false
    }

    /// Tokens spent by model (empty when the agent does not say).
    fn usage(&self) -> UsageByModel {
        UsageByModel::default()
    }

    /// What the session cost: by default `pricing` applied to [`Driver::usage`]; an agent that reports its own
    /// cost says so here.
    fn cost(&self, pricing: &crate::usage::Pricing) -> Option<f64> {
        self.usage().cost(pricing)
    }

    /// `(provider, model)` as the winbar shows them.
    fn model(&self) -> (String, String);

    /// Whether its turn waits for the user for a reason of its own (our agent: a question about an MCP server of
    /// `.mcp.json`); the approvals the host asks for are known to the host.
    fn waits(&self) -> bool {
        false
    }

    /// Rewinds to just before user message `index`: the files its checkpoints hold, and the conversation (see
    /// `:help pseudoclaude-rewind`). None: this kind of agent keeps no checkpoints. Blocking: call it on a blocking
    /// thread, with no turn running.
    fn rewind(&self, _index: usize, _opts: &RewindOptions) -> Option<Report> {
        None
    }

    /// Undoes the last rewind (until the next message). None as for [`Driver::rewind`]. Blocking.
    fn undo_rewind(&self, _opts: &RewindOptions) -> Option<Report> {
        None
    }

    /// The checkpoints of its files ([`FileCheckpoints`], which our agent and an ACP chat each hold), when it keeps
    /// some: the pending undo and the changes per turn are theirs.
    fn files(&self) -> Option<&FileCheckpoints> {
        None
    }

    /// The pending undo of the last rewind (its id and unix time), if no message came since.
    fn undo_info(&self) -> Option<(String, i64)> {
        self.files()?.undo_info()
    }

    /// Its changes to the workspace's files, per turn (what `:PseudoRewind` lists).
    fn changes(&self) -> Vec<TurnChanges> {
        self.files().map(|f| f.changes()).unwrap_or_default()
    }

    /// The ACP agent's own session as the log's meta names it (a fork of the chat is that agent's too); none for ours.
    fn agent_meta(&self) -> Option<crate::session::entry::AgentMeta> {
        None
    }

    /// Our own agent, for what only it does (a model switch, slices of its history).
    fn ours(self: Arc<Self>) -> Option<Arc<Agent>> {
        None
    }

    /// The git worktree a worktree chat works in (issue 47); none for a chat in the workspace.
    fn worktree(&self) -> Option<crate::session::entry::WorktreeMeta> {
        None
    }

    /// The chat is closed (the editor exits, or the user closed it): stop what runs apart from turns (an ACP
    /// agent's process group). Called once; a turn still running was cancelled first.
    fn close(&self) {}

    /// A resume has just put it in a chat: what it does then, reporting on `events` (an ACP agent starts again and
    /// says how it restored its session). None: nothing.
    fn resumed(self: Arc<Self>, _events: mpsc::UnboundedSender<Event>) -> Option<BoxFuture<'static, ()>> {
        None
    }

    /// The agent's slash commands, as it describes them (`[{name, description}]`; empty for ours).
    fn commands(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    /// The agent's modes (`{currentModeId, availableModes: [{id, name}]}`), `null` when it offers none.
    fn modes(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// The models the agent lets the user choose (`{current, available: [{id, name}]}`), `null` when it offers none
    /// (ours: `:PseudoModel` switches our provider's model instead).
    fn models(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Switches the agent to model `model`, reporting on `events`; the model it took, or why not.
    fn set_model(
        self: Arc<Self>,
        _model: String,
        _events: mpsc::UnboundedSender<Event>,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async { Err("this chat's agent offers no model choice".to_string()) })
    }

    /// Switches the agent to mode `mode`, reporting on `events`; an error when it offers no modes.
    fn set_mode(
        self: Arc<Self>,
        _mode: String,
        _events: mpsc::UnboundedSender<Event>,
    ) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Err("this chat's agent offers no modes".to_string()) })
    }
}

/// Makes the drivers of agents of other kinds (ACP, src/acp/, a floor above the agent): the bridge gives the host
/// one ([`super::host::Host::set_drivers`]); without it, every chat runs ours.
pub trait Drivers: Send + Sync {
    /// Whether `name` is an agent it can start with `config` (the sentence says why not).
    fn check(&self, name: &str, config: &super::config::HostConfig) -> Result<(), String>;

    /// A new chat's driver for agent `name`, not started (its first turn starts it).
    fn open(
        &self,
        name: &str,
        config: &super::config::HostConfig,
        approver: Arc<dyn crate::tools::Approver>,
    ) -> Result<Arc<dyn Driver>, String>;

    /// Session `id`'s driver when an agent of its kind ran it (its log says so), reopened: `None` when the session
    /// is our agent's. Runs on the host's threads (it reads the log).
    #[allow(clippy::type_complexity)]
    fn resume(
        &self,
        id: &str,
        config: &super::config::HostConfig,
        approver: Arc<dyn crate::tools::Approver>,
    ) -> Option<Result<(Arc<dyn Driver>, super::Resumed), String>>;

    /// Blocks until the agents that closed chats are stopping have stopped, or for `at_most` (the editor's exit,
    /// after every chat closed: an agent still writing its own record of a session is given that time).
    fn wait_stopped(&self, _at_most: std::time::Duration) {}
}

impl Driver for Agent {
    fn agent_name(&self) -> String {
        "pseudoclaude".to_string()
    }

    fn worktree(&self) -> Option<crate::session::entry::WorktreeMeta> {
        self.config.worktree.clone()
    }

    fn session(&self) -> Option<Context> {
        self.current()
    }

    fn turn(
        self: Arc<Self>,
        text: String,
        attachments: Vec<Attachment>,
        events: mpsc::UnboundedSender<Event>,
        cancel: Cancel,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.turn_with(&text, &attachments, events, cancel).await })
    }

    fn messages(&self) -> Vec<Message> {
        Agent::messages(self)
    }

    fn title(&self) -> String {
        self.with_messages(|m| m.iter().find(|m| m.is_user_text()).map(|m| title_of(&m.content)).unwrap_or_default())
    }

    fn unsaved(&self) -> bool {
        self.conversation.is_unsaved()
    }

    fn usage(&self) -> UsageByModel {
        Agent::usage(self)
    }

    fn model(&self) -> (String, String) {
        let p = self.provider();
        (p.name().to_string(), p.model().to_string())
    }

    fn waits(&self) -> bool {
        self.waits_for_consent()
    }

    fn rewind(&self, index: usize, opts: &RewindOptions) -> Option<Report> {
        Some(Agent::rewind(self, index, opts))
    }

    fn undo_rewind(&self, opts: &RewindOptions) -> Option<Report> {
        Some(Agent::undo_rewind(self, opts))
    }

    fn files(&self) -> Option<&FileCheckpoints> {
        Some(&self.files)
    }

    fn ours(self: Arc<Self>) -> Option<Arc<Agent>> {
        Some(self)
    }
}

/// One row of [`super::host::Host::chats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatInfo {
    pub chat: ChatId,
    /// Its session's id, once it has one.
    pub session: Option<String>,
    /// The first line of its first message ("" before it).
    pub title: String,
    pub agent: String,
    pub state: ChatState,
    /// The chat the single-chat calls (no chat named) act on.
    pub current: bool,
    /// A worktree chat's worktree (its `path`: where the chat works).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::session::entry::WorktreeMeta>,
}
