//! A chat's turn started on the host's threads (its events forwarded to the editor's queue as they come), and
//! its cancel.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use super::{Host, HostError, HostResult, note_workspace};
use crate::agent::chat::{ChatId, Driver};
use crate::agent::outbox::Outbound;
use crate::agent::{Cancel, Event, lock};

impl Host {
    /// Starts a turn in the current chat; returns at once. Creates the agent (not yet its session) when there is
    /// none.
    pub fn send(&self, text: &str) -> HostResult<()> {
        self.send_with(None, text, Vec::new())
    }

    /// [`Host::send`] in chat `chat` (`None`: the current one), with context from the editor attached to the
    /// message.
    pub fn send_with(
        &self,
        chat: Option<ChatId>,
        text: &str,
        attachments: Vec<crate::attachment::Attachment>,
    ) -> HostResult<()> {
        if text.trim().is_empty() {
            return Err(HostError::Refused("nothing to send: the message is empty".into()));
        }
        let mut st = lock(&self.state);
        let id = chat.unwrap_or(st.current);
        let c = st.chat(Some(id))?;
        if c.busy() {
            return Err(HostError::Refused("the agent is still answering: wait, or cancel the turn with <C-c>".into()));
        }
        if c.resuming.is_some() {
            return Err(HostError::Refused("a session is being restored: send again once it shows".into()));
        }
        let agent = match c.agent.clone() {
            Some(a) => a,
            None => {
                let config = st.config_of(c);
                let a: Arc<dyn Driver> = match st.acp_of(c) {
                    Some(name) => self.new_acp(id, &config, &name)?,
                    None => {
                        let mcp = self.mcp_servers(&mut st);
                        Arc::new(self.new_agent(id, &config, mcp)?)
                    }
                };
                st.chat_mut(Some(id))?.agent = Some(a.clone());
                self.rt.spawn_blocking(move || note_workspace(&config));
                a
            }
        };
        let c = st.chat_mut(Some(id))?;
        let cancel = Cancel::new();
        c.turn = Some(cancel.clone());
        c.busy.store(true, Ordering::SeqCst);
        c.failed.store(false, Ordering::SeqCst);
        let (busy, failed) = (c.busy.clone(), c.failed.clone());
        let outbox = self.outbox.clone();
        let text = text.to_string();
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        // Forward events as they come, so the editor sees streaming text while the turn runs.
        self.rt.spawn(async move {
            while let Some(ev) = rx.recv().await {
                if matches!(ev, Event::Error { .. }) {
                    failed.store(true, Ordering::SeqCst);
                }
                // Idle before the editor hears the turn is done, so it can send again at once.
                if matches!(ev, Event::TurnDone { .. }) {
                    busy.store(false, Ordering::SeqCst);
                }
                outbox.push(Some(id), Outbound::Event(ev));
            }
            // A driver that ended without its `TurnDone` (it panicked) leaves the chat sendable.
            busy.store(false, Ordering::SeqCst);
        });
        self.rt.spawn(agent.turn(text, attachments, tx, cancel));
        Ok(())
    }

    /// Cancels the current chat's running turn, if any. Its pending approval prompts count as declined.
    pub fn cancel(&self) -> bool {
        self.cancel_chat(None).unwrap_or(false)
    }

    /// Cancels chat `chat`'s running turn (and only its): its approvals declined, its buffer checks dropped.
    /// Returns whether one was running.
    pub fn cancel_chat(&self, chat: Option<ChatId>) -> HostResult<bool> {
        let st = lock(&self.state);
        let id = chat.unwrap_or(st.current);
        let c = st.chat(Some(id))?;
        let running = c.busy();
        if let Some(t) = &c.turn {
            t.cancel();
        }
        self.outbox.decline(id);
        Ok(running)
    }
}
