//! The pump: what the agent sends, read in order by one task per connection; each update handled under the turn's
//! lock, a permission question or a service request answered off it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::AcpChat;
use super::record::content_text;
use crate::acp::client::Incoming;
use crate::agent::{Event, lock};
use crate::message::now;
use crate::session::Entry;

impl AcpChat {
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
                        true => chat.terminals.handle(method, &params, &chat.tools).await.map_err(Into::into),
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
}

/// The agent's updates, read in order by one task until its connection ends. Holds the chat weakly: a chat
/// dropped (closed, replaced) ends its agent, whose connection ends this task.
pub(super) fn spawn_pump(chat: Weak<AcpChat>, mut rx: mpsc::UnboundedReceiver<Incoming>, closed: Arc<AtomicBool>) {
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

/// How often at most a running call is redrawn for its terminal's output (a chatty command's every write would
/// otherwise be a redraw on the editor's loop).
const LIVE_EVERY: Duration = Duration::from_millis(100);

/// Redraws call `call` of the chat's turn as its terminal is written to ([`crate::acp::terminal::Terminals::follow`]), at most every
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_plan_is_one_line_of_its_steps() {
        let plan = json!({ "entries": [
            { "content": "read", "status": "completed" }, { "content": "write", "status": "pending" },
        ]});
        assert_eq!(plan_text(&plan), "plan: [x] read; [ ] write");
    }
}
