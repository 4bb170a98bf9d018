//! A session resumed into a chat: built off the editor's loop (lock, repair, replay), installed only if the chat did
//! not change meanwhile, reported through the queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Host, HostError, HostResult, State, forward, note_workspace};
use crate::agent::chat::{ChatId, Driver, Drivers};
use crate::agent::config::{HostConfig, agent_config, make_provider};
use crate::agent::outbox::OutboxApprover;
use crate::agent::outbox::{Outbound, Outbox, ResumeDone, ResumeReport};
use crate::agent::{Agent, Resumed, lock};
use crate::tools::Approver;

impl Host {
    /// Switches chat `chat` (`None`: the current one) to session `id` on the host's threads: returns a ticket at
    /// once; the outcome arrives in the queue as [`Outbound::Resumed`] with that ticket (the lock, torn-tail
    /// repair, replay and spill checks all run off the editor's main loop). The new agent is built first (its
    /// writer opened, its log loaded) and installed only if the chat did not change meanwhile; on any error the
    /// chat's session stays as it was. A session live in another chat of this editor is refused with that chat's
    /// number: the editor shows that chat instead ([`Host::live`]).
    pub fn resume_async(&self, chat: Option<ChatId>, id: &str) -> HostResult<u64> {
        let (chat, config, generation) = self.resume_check(chat, id)?;
        let mcp = self.mcp_servers(&mut lock(&self.state));
        let ticket = self.outbox.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        lock(&self.state).chat_mut(Some(chat))?.resuming = Some(ticket);
        let outbox = self.outbox.clone();
        let state = self.state.clone();
        let id = id.to_string();
        let rt = self.rt.handle().clone();
        let drivers = lock(&self.drivers).clone();
        self.rt.spawn_blocking(move || {
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                build_resumed(chat, &config, mcp, drivers, &outbox, &id)
            }))
            .unwrap_or_else(|_| Err(HostError::Refused(format!("internal error while reading session {id}"))));
            let outcome = {
                let mut st = lock(&state);
                if let Ok(c) = st.chat_mut(Some(chat)) {
                    c.resuming = None;
                }
                built.and_then(|(agent, report)| {
                    install(&mut st, chat, generation, agent.clone())?;
                    // an ACP agent starts again now, and says how it restored its session
                    if let Some(then) = agent.resumed(forward(&rt, &outbox, chat)) {
                        rt.spawn(then);
                    }
                    Ok(report)
                })
            };
            let done = match outcome {
                Ok(report) => ResumeDone { kind: "resumed", ticket, ok: true, report: Some(report), error: None },
                Err(e) => ResumeDone { kind: "resumed", ticket, ok: false, report: None, error: Some(e.to_string()) },
            };
            outbox.push(Some(chat), Outbound::Resumed(done));
        });
        Ok(ticket)
    }

    /// What a resume may start from: not while the chat's turn runs or another resume is read into it, not a
    /// session live in a chat.
    fn resume_check(&self, chat: Option<ChatId>, id: &str) -> HostResult<(ChatId, HostConfig, u64)> {
        let st = lock(&self.state);
        let n = chat.unwrap_or(st.current);
        let c = st.chat(Some(n))?;
        if c.busy() {
            return Err(HostError::Refused(
                "cannot resume while the agent is answering: cancel the turn first (<C-c>)".into(),
            ));
        }
        if c.resuming.is_some() {
            return Err(HostError::Refused("another session is being restored: wait for it to show".into()));
        }
        match st.live(id) {
            Some(live) if live == n => {
                return Err(HostError::Refused(format!("session {id} is already the current one")));
            }
            Some(live) => {
                return Err(HostError::Refused(format!("session {id} is live in chat {live} of this editor")));
            }
            None => {}
        }
        Ok((n, st.config_of(c), c.generation))
    }
}

/// Builds the agent of session `id` for chat `chat` (the slow part of a resume: lock, repair, replay). A session an
/// agent of another kind ran (an ACP agent: its log names it) is resumed with that agent.
fn build_resumed(
    chat: ChatId,
    config: &HostConfig,
    mcp: Option<Arc<crate::mcp::Servers>>,
    drivers: Option<Arc<dyn Drivers>>,
    outbox: &Arc<Outbox>,
    id: &str,
) -> HostResult<(Arc<dyn Driver>, ResumeReport)> {
    let approver: Arc<dyn Approver> = Arc::new(OutboxApprover { outbox: outbox.clone(), chat });
    if let Some(other) = drivers.and_then(|d| d.resume(id, config, approver.clone())) {
        let (driver, resumed) = other.map_err(HostError::Refused)?;
        let report = report(id, driver.messages().len(), &resumed);
        note_workspace(config);
        return Ok((driver, report));
    }
    let provider = make_provider(config)?;
    let (agent, resumed) = Agent::resume(agent_config(config, mcp), provider, approver, id)?;
    let report = report(id, agent.with_messages(|m| m.len()), &resumed);
    note_workspace(config);
    Ok((Arc::new(agent), report))
}

/// Makes `agent` chat `chat`'s, unless the chat changed since the resume began.
fn install(st: &mut State, chat: ChatId, generation: u64, agent: Arc<dyn Driver>) -> HostResult<()> {
    let c = st.chat_mut(Some(chat))?;
    if c.generation != generation {
        return Err(HostError::Refused(
            "the chat changed while the session was being restored: resume it again".into(),
        ));
    }
    if c.busy() {
        return Err(HostError::Refused("a turn started while the session was being restored: resume it again".into()));
    }
    // the chat goes on with the session's kind of agent: `:PseudoNew` there starts the same one
    c.acp = agent.clone().ours().is_none().then(|| agent.agent_name());
    let old = c.agent.replace(agent); // the old agent (and its writer's lock) goes here
    c.turn = None;
    c.failed.store(false, Ordering::SeqCst);
    c.generation += 1;
    if let Some(old) = old {
        old.close();
    }
    Ok(())
}

fn report(id: &str, messages: usize, resumed: &Resumed) -> ResumeReport {
    let mut notice = resumed.loaded.damage_report();
    if resumed.torn_bytes > 0 && resumed.loaded.torn_tail_bytes == 0 {
        let torn = format!("moved a torn last line of {} bytes to conversation.jsonl.broken", resumed.torn_bytes);
        notice = if notice.is_empty() { torn } else { format!("{notice}; {torn}") };
    }
    if let Some(w) = &resumed.worktree {
        let said = match w.state {
            "recreated" => format!("its worktree {} was gone: made again from its branch {}", w.name, w.branch),
            "gone" => format!(
                "its worktree {} and its branch {} are gone: the conversation goes on in the workspace",
                w.name, w.branch
            ),
            "failed" => format!(
                "its worktree {} could not be reached ({}): the conversation goes on in the workspace",
                w.name,
                w.error.as_deref().unwrap_or("")
            ),
            _ => String::new(),
        };
        if !said.is_empty() {
            notice = if notice.is_empty() { said } else { format!("{notice}; {said}") };
        }
    }
    ResumeReport {
        id: id.to_string(),
        messages,
        stale_hours: resumed.stale_seconds.map(|s| s / 3600),
        stale_seconds: resumed.stale_seconds,
        notice,
        worktree: resumed.worktree.clone(),
        handed_over: resumed.handed_over.clone(),
    }
}
