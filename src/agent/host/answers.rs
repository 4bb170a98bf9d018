//! The editor's answers to what a chat asked it: an approval (yes, no, always, or the change blocks to apply), a
//! buffer check, a buffer read.

use super::{Host, HostError, HostResult};
use crate::agent::lock;
use crate::agent::outbox::Waiting;
use crate::tools::{Approval, BufferState};

impl Host {
    /// Answers an approval of a write or an edit with the change blocks to apply (1-based, in the
    /// order of the ask's `change.hunks`); none is a no.
    pub fn approve_hunks(&self, id: u64, accepted: Vec<usize>) -> HostResult<()> {
        let tx = lock(&self.outbox.approvals).remove(&id);
        match tx {
            Some((_, tx)) => {
                let _ = tx.send(Approval::Only(accepted));
                Ok(())
            }
            None => Err(HostError::Refused(format!("no pending approval {id} (the turn may have been cancelled)"))),
        }
    }

    /// Answers a buffer check: `none` (no loaded buffer holds the file), `unmodified` or `modified`.
    pub fn buffer_state(&self, id: u64, state: &str) -> HostResult<()> {
        let state = match state {
            "none" => BufferState::NotLoaded,
            "unmodified" => BufferState::Unmodified,
            "modified" => BufferState::Modified,
            other => {
                return Err(HostError::Refused(format!(
                    "unknown buffer state {other:?}: use \"none\", \"unmodified\" or \"modified\""
                )));
            }
        };
        answer(&self.outbox.buffer_checks, id, state, "buffer check")
    }

    /// Answers a buffer read ([`BufferReadAsk`]): the buffer's text, or `None` when no loaded
    /// buffer holds the file.
    pub fn buffer_text(&self, id: u64, text: Option<String>) -> HostResult<()> {
        answer(&self.outbox.buffer_reads, id, text, "buffer read")
    }

    /// Answers an approval prompt: `yes`, `no` or `always`.
    pub fn approve(&self, id: u64, answer: &str) -> HostResult<()> {
        let answer = match answer {
            "yes" => Approval::Yes,
            "no" => Approval::No,
            "always" => Approval::Always,
            other => {
                return Err(HostError::Refused(format!("unknown answer {other:?}: use \"yes\", \"no\" or \"always\"")));
            }
        };
        let tx = lock(&self.outbox.approvals).remove(&id);
        match tx {
            Some((_, tx)) => {
                let _ = tx.send(answer);
                Ok(())
            }
            None => Err(HostError::Refused(format!("no pending approval {id} (the turn may have been cancelled)"))),
        }
    }
}

/// Answers the editor's question `id` of a kind (`what`, for the error) that waits in `pending`.
fn answer<T>(pending: &Waiting<T>, id: u64, value: T, what: &str) -> HostResult<()> {
    match lock(pending).remove(&id) {
        Some((_, tx)) => {
            let _ = tx.send(value);
            Ok(())
        }
        None => Err(HostError::Refused(format!("no pending {what} {id} (it timed out, or the turn was cancelled)"))),
    }
}
