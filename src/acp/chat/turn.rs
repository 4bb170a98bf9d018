//! One turn: the user's message logged (while the prompt goes, to an agent that runs), the prompt, the cancel, the
//! answer's end and its usage.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::AcpChat;
use super::record::Turn;
use crate::acp::client::is_closed_error;
use crate::agent::runner::{Stop, report_stop};
use crate::agent::{Cancel, Event, lock};
use crate::conversation::Unsaved;
use crate::message::{Message, now};
use crate::session::Entry;
use crate::usage::Usage;

/// How long a cancelled turn waits for the agent's answer to `session/cancel` before giving up on it.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

impl AcpChat {
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

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
