//! What the host queues for the editor's main loop ([`Outbound`]): the agent's events, the questions a
//! tool asks the user or the editor (approvals, buffer checks), writes done, resumes finished. The
//! editor empties the queue with [`super::host::Host::drain`] and answers questions through the host.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::oneshot;

use super::chat::{ChatId, ChatState};
use super::{Event, lock};
use crate::provider::BoxFuture;
use crate::tools::{Approval, ApprovalRequest, Approver, BufferState, Written};

/// What the editor's loop receives.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outbound {
    Event(Event),
    Approval(ApprovalAsk),
    Resumed(ResumeDone),
    Buffer(BufferAsk),
    BufferRead(BufferReadAsk),
    Written(FileWritten),
    /// A server of the workspace's `.mcp.json` asks to run: answer with [`super::host::Host::mcp_consent`].
    McpConsent(crate::mcp::ConsentAsk),
    /// What a chat is doing now: [`super::host::Host::drain`] adds one after each batch's messages about a chat.
    State(StateNow),
}

/// A chat's state as the host decides it ([`ChatState::of`]), which the editor draws as it is (`{type = "state"}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateNow {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub state: ChatState,
}

/// One message of the queue and the chat it is about (none: the editor's, as an MCP server's consent). Drained as
/// the message's own fields with `chat` beside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Addressed {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatId>,
    #[serde(flatten)]
    pub message: Outbound,
}

/// A tool is about to write `path`: is it loaded in a buffer, and modified? Reply with
/// [`Host::buffer_state`]. With `hold`, the write follows the answer: keep the buffer as it is until
/// the [`FileWritten`] of the same path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BufferAsk {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: u64,
    pub path: PathBuf,
    pub rel: String,
    pub hold: bool,
}

/// An ACP agent reads `path` (`fs/read_text_file`): the text of its loaded buffer, unsaved changes included, or
/// nothing when no buffer holds it. Reply with [`Host::buffer_text`] in the same step (the read waits on it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BufferReadAsk {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: u64,
    pub path: PathBuf,
}

/// A write asked about with `hold` is over: `outcome` is `created`, `changed` or `failed`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileWritten {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub path: PathBuf,
    pub rel: String,
    pub outcome: &'static str,
}

/// A resume started by [`Host::resume_async`] has finished: the history is in place (`ok`), or the
/// current session is as it was and `error` says why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeDone {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub ticket: u64,
    pub ok: bool,
    pub report: Option<ResumeReport>,
    pub error: Option<String>,
}

/// A tool waits for the user's answer; reply with [`Host::approve`]. The question is the tool's request as it
/// stands (its fields side by side with `type` and `id`): for a write or an edit, the review answers some of the
/// change's blocks with [`Host::approve_hunks`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalAsk {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: u64,
    #[serde(flatten)]
    pub request: ApprovalRequest,
}

/// Questions waiting for the editor's answer, by number, each with its chat and where its answer goes.
pub(super) type Waiting<T> = Mutex<HashMap<u64, (ChatId, oneshot::Sender<T>)>>;

/// The queue between the host's threads and the editor's loop.
/// Each question waiting for its answer is kept with its chat: a cancel answers only that chat's, and a chat with an
/// approval pending is `waiting`.
pub struct Outbox {
    pub(super) queue: Mutex<Vec<Addressed>>,
    pub(super) wake: Box<dyn Fn() + Send + Sync>,
    pub(super) approvals: Waiting<Approval>,
    pub(super) buffer_checks: Waiting<BufferState>,
    /// Reads of a buffer's text waiting for the editor ([`BufferReadAsk`]).
    pub(super) buffer_reads: Waiting<Option<String>>,
    pub(super) next_id: AtomicU64,
}

impl Outbox {
    /// A new question's number, with the receiver its answer (put in `waiting` by the host) will arrive on.
    fn question<T>(&self, chat: ChatId, waiting: &Waiting<T>) -> (u64, oneshot::Receiver<T>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let (tx, rx) = oneshot::channel();
        lock(waiting).insert(id, (chat, tx));
        (id, rx)
    }

    /// Queues a message about `chat` (none: about no chat) and wakes the editor.
    pub(super) fn push(&self, chat: Option<ChatId>, message: Outbound) {
        lock(&self.queue).push(Addressed { chat, message });
        (self.wake)();
    }

    /// Whether `chat` waits for the user's answer.
    pub(super) fn asks(&self, chat: ChatId) -> bool {
        lock(&self.approvals).values().any(|(c, _)| *c == chat)
    }

    /// `chat`'s questions answered "no" (its turn was cancelled): its approvals declined, its buffer checks dropped
    /// (an unanswered one refuses its write), its buffer reads dropped (the disk is read).
    pub(super) fn decline(&self, chat: ChatId) {
        let mine: Vec<_> = {
            let mut approvals = lock(&self.approvals);
            let ids: Vec<u64> = approvals.iter().filter(|(_, (c, _))| *c == chat).map(|(id, _)| *id).collect();
            ids.into_iter().filter_map(|id| approvals.remove(&id)).collect()
        };
        for (_, tx) in mine {
            let _ = tx.send(Approval::No);
        }
        lock(&self.buffer_checks).retain(|_, (c, _)| *c != chat);
        lock(&self.buffer_reads).retain(|_, (c, _)| *c != chat);
    }
}

/// Removes an unanswered question from its map when its waiter is dropped (a timeout), so the map does not grow.
struct Forget<T: Send + 'static>(Arc<Outbox>, u64, fn(&Outbox) -> &Waiting<T>);

impl<T: Send + 'static> Drop for Forget<T> {
    fn drop(&mut self) {
        lock((self.2)(&self.0)).remove(&self.1);
    }
}

/// The [`Approver`] of one chat's tools: its questions go through the queue, named with the chat.
pub struct OutboxApprover {
    pub(super) outbox: Arc<Outbox>,
    pub(super) chat: ChatId,
}

impl Approver for OutboxApprover {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        let outbox = self.outbox.clone();
        let (id, rx) = outbox.question(self.chat, &outbox.approvals);
        outbox.push(Some(self.chat), Outbound::Approval(ApprovalAsk { kind: "approval", id, request: req }));
        // An unanswered prompt (the turn was cancelled, the editor closed) counts as a no.
        Box::pin(async move { rx.await.unwrap_or(Approval::No) })
    }

    fn buffer_state(&self, path: &std::path::Path, rel: &str, hold: bool) -> BoxFuture<'static, Option<BufferState>> {
        let outbox = self.outbox.clone();
        let (id, rx) = outbox.question(self.chat, &outbox.buffer_checks);
        outbox.push(
            Some(self.chat),
            Outbound::Buffer(BufferAsk {
                kind: "buffer_check",
                id,
                path: path.to_path_buf(),
                rel: rel.to_string(),
                hold,
            }),
        );
        let forget = Forget(outbox.clone(), id, |o: &Outbox| &o.buffer_checks);
        Box::pin(async move {
            let _forget = forget;
            rx.await.ok()
        })
    }

    /// Asked of the editor as [`BufferReadAsk`]; `None` when no buffer holds the file, or the editor did not
    /// answer (the caller bounds the wait and reads the disk then).
    fn buffer_text(&self, path: &std::path::Path) -> BoxFuture<'static, Option<String>> {
        let outbox = self.outbox.clone();
        let (id, rx) = outbox.question(self.chat, &outbox.buffer_reads);
        outbox.push(
            Some(self.chat),
            Outbound::BufferRead(BufferReadAsk { kind: "buffer_read", id, path: path.to_path_buf() }),
        );
        let forget = Forget(outbox.clone(), id, |o: &Outbox| &o.buffer_reads);
        Box::pin(async move {
            let _forget = forget;
            rx.await.ok().flatten()
        })
    }

    fn written(&self, path: &std::path::Path, rel: &str, outcome: Written) {
        let outcome = match outcome {
            Written::Created => "created",
            Written::Changed => "changed",
            Written::Failed => "failed",
        };
        self.outbox.push(
            Some(self.chat),
            Outbound::Written(FileWritten {
                kind: "file_written",
                path: path.to_path_buf(),
                rel: rel.to_string(),
                outcome,
            }),
        );
    }
}

/// Where a session came from and how it went, for the editor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeReport {
    pub id: String,
    pub messages: usize,
    pub stale_hours: Option<u64>,
    /// Seconds between the last message and the resume, when the stale reminder was added.
    pub stale_seconds: Option<u64>,
    /// What was repaired, one sentence; empty when nothing was.
    pub notice: String,
    /// A worktree chat's worktree: where the chat works now (`present`, `recreated`, or `gone`/`failed`: in the
    /// workspace, the notice says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::agent::WorktreeResumed>,
    /// A kept copy of another agent's session handed to that agent by this resume: how it goes on, one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handed_over: Option<String>,
}
