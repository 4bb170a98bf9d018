//! The agent started and its session found again, in this order: `session/load` of the agent's own session when it
//! offers it, else `session/resume`, else `session/fork` of the session a fork of a whole session came from, else
//! a new session, told our transcript with the next message ([`AcpChat::ensure_live`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

use super::pump::spawn_pump;
use super::{AcpChat, Live, STOP_GRACE};
use crate::acp::client::{Connection, is_closed_error};
use crate::acp::handover::refused_by_agent;
use crate::agent::{Event, lock};
use crate::message::{Role, now};
use crate::session::Entry;
use crate::session::entry::AgentMeta;

impl AcpChat {
    /// Starts the agent (when it is not running) and its session: `session/load` of the agent's own id when it
    /// offers it, else `session/resume`, else a new session told the transcript with the next message. One line
    /// in `events` says which happened when a session was restored.
    pub async fn connect(self: &Arc<Self>, events: &mpsc::UnboundedSender<Event>) -> Result<(), String> {
        self.ensure_live(events).await.map(|_| ())
    }

    pub(super) async fn ensure_live(
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
        crate::acp::client::stops_done(STOP_GRACE).await;
        let (conn, rx) = Connection::start(
            name,
            &self.config.spec,
            self.config.root(),
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
        // the agent's `cwd`: a worktree chat's folder (the agent keeps its sessions by it)
        let ws = self.config.root();
        let mut restored = None;
        // a session whose load the agent's model would refuse the next message of (Gemini CLI's with a tool call)
        let refused = known.as_deref().and_then(|id| refused_by_agent(name, &self.config.spec, ws, id));
        if let Some(id) = known.as_ref().filter(|_| refused.is_none()) {
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
                if let Some(why) = &refused {
                    let _ = events.send(Event::Notice {
                        text: format!(
                            "{name}: session/new: a new session of the agent, told the conversation so far with your \
                             next message; its own session not loaded: {why}"
                        ),
                    });
                } else if known.is_some() {
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
        crate::acp::note_version(name, &version);
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
    pub(super) fn transcript(&self, upto: usize) -> String {
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

    /// Whether the agent runs, with its session (the next turn needs no start).
    pub(super) async fn is_live(&self) -> bool {
        self.live.lock().await.as_ref().is_some_and(|l| !l.closed.load(Ordering::SeqCst))
    }
}
