//! The editor's buffers around a write or an edit: before `write_file` or `edit_file` asks, and again right before
//! it writes, the [`Approver`](super::Approver) is asked whether the file is loaded in a buffer with unsaved
//! changes ([`buffer_state`](super::Approver::buffer_state)); if it is, the call is refused and nothing is touched
//! (the user's text is never overwritten, on disk or in the buffer). The second question holds the buffer (the
//! editor keeps the user from typing into it) until [`written`](super::Approver::written) says the write is done,
//! when the editor reloads it. An editor that does not answer within the timeout is a refusal.

use super::{BufferState, Gated, ToolOutput, Tools, Written, blocking, path};

impl Tools {
    /// Refuses a write to a file the user is editing: `Err` is the answer for the model. `hold`: the
    /// write follows at once, and the editor holds the buffer until it is told how it went.
    pub(super) async fn check_buffer(&self, res: &path::Resolved, tool: Gated, hold: bool) -> Result<(), ToolOutput> {
        let rel = &res.rel;
        let asked = tokio::time::timeout(self.editor_timeout, self.approver.buffer_state(&res.abs, rel, hold)).await;
        match asked {
            Ok(Some(BufferState::NotLoaded | BufferState::Unmodified)) => Ok(()),
            Ok(Some(BufferState::Modified)) if hold => Err(ToolOutput::error(format!(
                "the user changed {rel} in the editor while this {} call waited for approval: it has unsaved \
                 changes there now, so nothing was written (the file and the buffer are as they were). Ask the \
                 user to save or discard them, read the file again, and retry.",
                tool.name()
            ))),
            Ok(Some(BufferState::Modified)) => Err(ToolOutput::error(format!(
                "{rel} is open in the editor with unsaved changes, so this {} call was refused: nothing was \
                 written, the file and the buffer are as they were. Tell the user; ask them to save or discard \
                 their changes (then read the file again) before you change it.",
                tool.name()
            ))),
            Ok(None) => Err(ToolOutput::error(format!(
                "the editor did not answer whether {rel} has unsaved changes (the turn was cancelled or the \
                 editor closed); nothing was written"
            ))),
            Err(_) => Err(ToolOutput::error(format!(
                "the editor did not say within {} s whether {rel} is open with unsaved changes; nothing was \
                 written, to be safe. Retry in a moment.",
                self.editor_timeout.as_secs_f64()
            ))),
        }
    }

    /// The last check (holding the buffer), the write, and the editor told how it went.
    pub(super) async fn write_through_editor<F>(
        &self,
        res: &path::Resolved,
        tool: Gated,
        existed: bool,
        write: F,
    ) -> ToolOutput
    where
        F: FnOnce(&path::Resolved) -> Result<String, String> + Send + 'static,
    {
        if let Err(out) = self.check_buffer(res, tool, true).await {
            self.approver.written(&res.abs, &res.rel, Written::Failed);
            return out;
        }
        let target = res.clone();
        let out = blocking(move |_| write(&target)).await;
        let outcome = match (out.is_error, existed) {
            (true, _) => Written::Failed,
            (false, true) => Written::Changed,
            (false, false) => Written::Created,
        };
        self.approver.written(&res.abs, &res.rel, outcome);
        out
    }
}
