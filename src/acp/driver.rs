//! An [`AcpChat`] as the host's registry drives a chat ([`Driver`]): its turns, history, usage, modes and end; and
//! [`AcpDrivers`], which the bridge gives the host so that chats can run ACP agents (the host, a floor below, never
//! names this module). The chat itself knows nothing of the registry; this file is the seam between the two.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::{AcpChat, ChatConfig};
use crate::agent::chat::{Driver, Drivers};
use crate::agent::host::HostConfig;
use crate::agent::rewind::FileCheckpoints;
use crate::agent::{Cancel, Event, Resumed};
use crate::attachment::{self, Attachment};
use crate::message::Message;
use crate::provider::BoxFuture;
use crate::rewind::{Report, RewindOptions};
use crate::session::Context;
use crate::tools::Approver;
use crate::usage::UsageByModel;

/// Starts chats with the agents of `setup({ agents })` and the built-in ones, and resumes their sessions.
pub struct AcpDrivers;

impl Drivers for AcpDrivers {
    fn wait_stopped(&self, at_most: Duration) {
        super::client::wait_stops(at_most);
    }

    fn check(&self, name: &str, config: &HostConfig) -> Result<(), String> {
        super::resolve(name, &config.agents).map(|_| ())
    }

    fn open(&self, name: &str, config: &HostConfig, approver: Arc<dyn Approver>) -> Result<Arc<dyn Driver>, String> {
        Ok(AcpChat::new(chat_config(config, name)?, approver))
    }

    fn resume(
        &self,
        id: &str,
        config: &HostConfig,
        approver: Arc<dyn Approver>,
    ) -> Option<Result<(Arc<dyn Driver>, Resumed), String>> {
        // the list's summary (cached) names the agent; a log it cannot read is left to our resume to report
        let ctx = Context::open(&config.workspace, id).ok()?;
        let info = crate::session::list::info(&ctx).ok()?;
        // a kept copy of another agent's session goes on with that agent (issue 46 item 3), the line saying so
        let (name, said) = match info.agent.clone() {
            Some(name) => (name, None),
            None => {
                let homes = crate::import::Homes::from_env();
                let h = super::handover::hand_over_kept(&config.workspace, &info, &config.agents, &homes)?;
                (h.agent?, Some(h.message))
            }
        };
        Some((|| {
            let chat_config =
                chat_config(config, &name).map_err(|e| format!("session {id} ran the agent {name}: {e}"))?;
            let (chat, mut resumed) = AcpChat::resume(chat_config, approver, id).map_err(|e| e.to_string())?;
            resumed.handed_over = said;
            Ok((chat as Arc<dyn Driver>, resumed))
        })())
    }
}

/// The settings of a chat with agent `name` (an error names an unknown agent and the known ones).
fn chat_config(config: &HostConfig, name: &str) -> Result<ChatConfig, String> {
    Ok(ChatConfig {
        name: name.to_string(),
        spec: super::resolve(name, &config.agents)?,
        workspace: config.workspace.clone(),
        log_file: config.mcp.log_file.clone(),
        spill_threshold: config.spill_threshold,
        checkpoint_every: crate::agent::checkpoint::every_from_env(),
        auto_allow: config.approve.agents.get(name).copied().unwrap_or(false),
        pricing: config.pricing.clone(),
        stale_after: Duration::from_secs_f64((config.stale_after_hours * 3600.0).max(0.0)),
        rewind: config.rewind.enabled,
        rewind_max_file_bytes: config.rewind.max_file_bytes,
        sandbox: config.sandbox.clone(),
        worktree: config.worktree.clone(),
    })
}

impl Driver for AcpChat {
    fn agent_name(&self) -> String {
        self.config.name.clone()
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
        Box::pin(async move {
            let text = compose(&self, &text, &attachments);
            AcpChat::turn(&self, &text, events, cancel).await
        })
    }

    fn messages(&self) -> Vec<Message> {
        self.conversation.with_messages(|m| m.to_vec())
    }

    fn unsaved(&self) -> bool {
        self.conversation.is_unsaved()
    }

    fn usage(&self) -> UsageByModel {
        AcpChat::usage(self)
    }

    fn cost(&self, _pricing: &crate::usage::Pricing) -> Option<f64> {
        AcpChat::cost(self)
    }

    fn rewind(&self, index: usize, opts: &RewindOptions) -> Option<Report> {
        Some(AcpChat::rewind(self, index, opts))
    }

    fn undo_rewind(&self, opts: &RewindOptions) -> Option<Report> {
        Some(AcpChat::undo_rewind(self, opts))
    }

    fn files(&self) -> Option<&FileCheckpoints> {
        Some(&self.files)
    }

    /// The agent names its models itself: the winbar shows the agent.
    fn model(&self) -> (String, String) {
        (self.config.name.clone(), self.config.name.clone())
    }

    fn close(&self) {
        AcpChat::close(self);
    }

    fn agent_meta(&self) -> Option<crate::session::entry::AgentMeta> {
        AcpChat::agent_meta(self)
    }

    /// Resumed: the agent starts again now (`session/load`, else `session/resume`, else a new session told our
    /// transcript with the next message), and one line says which; a failure to start is that line.
    fn resumed(self: Arc<Self>, events: mpsc::UnboundedSender<Event>) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(async move {
            if let Err(e) = self.connect(&events).await {
                let _ = events.send(Event::Notice { text: e });
            }
        }))
    }

    fn commands(&self) -> Vec<Value> {
        AcpChat::commands(self)
    }

    fn modes(&self) -> Value {
        AcpChat::modes(self)
    }

    fn models(&self) -> Value {
        AcpChat::models(self)
    }

    fn set_model(
        self: Arc<Self>,
        model: String,
        events: mpsc::UnboundedSender<Event>,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async move { AcpChat::set_model(&self, &model, &events).await })
    }

    fn set_mode(
        self: Arc<Self>,
        mode: String,
        events: mpsc::UnboundedSender<Event>,
    ) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async move { AcpChat::set_mode(&self, &mode, &events).await })
    }
}

/// The message as the agent reads it: the text, then each attachment in the wrapper ours get (a file read from the
/// workspace; nothing spilled: the agent reads large files itself).
fn compose(chat: &AcpChat, text: &str, attachments: &[Attachment]) -> String {
    let root = chat.config.workspace.clone();
    let read = move |p: &str| -> Result<(String, String), String> {
        let path = root.join(p);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {p}: {e}"))?;
        let rel = path.strip_prefix(&root).unwrap_or(&path).to_string_lossy().into_owned();
        Ok((rel, text))
    };
    let spill = |_: &str| -> Result<(crate::message::SpillRef, String), String> { Err("not spilled".into()) };
    attachment::compose(text, attachments, &read, &spill, usize::MAX)
}
