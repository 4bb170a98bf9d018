//! What a tool asks the user (and the editor) before it changes something, and the answers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::provider::BoxFuture;

/// What the user is asked before a tool changes something (the editor's question is made of it: `ApprovalAsk`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRequest {
    /// `write_file`, `edit_file`, `run_command`.
    pub tool: String,
    /// One line: the path or the command.
    pub summary: String,
    /// The diff or the full command, shown in the prompt.
    pub detail: String,
    /// For `write_file` and `edit_file` on a text file: the whole change, for a review hunk by hunk.
    pub change: Option<ProposedChange>,
    /// For `run_command`: the restrictions of the sandbox this approval lifts, each named ("the sandbox
    /// (the model's reason: …)", "the network ban"). Such a question is always asked, whatever
    /// `approve` says, and [`Approval::Always`] counts as a plain yes.
    pub lifted: Vec<String>,
    /// One plain sentence on what the sandbox cannot do here ("no sandbox on this system …").
    pub warning: Option<String>,
    /// Whether "Always" may be offered (not when something is lifted, nor without a sandbox).
    pub always: bool,
}

/// A write or an edit as the review shows it: the file's text now, the text proposed, and the change
/// blocks between them (numbered from 1 in [`Approval::Only`]'s answer, in this order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposedChange {
    /// The real path of the file.
    pub path: PathBuf,
    /// Its text now (empty for a new file).
    pub old: String,
    /// The text proposed.
    pub new: String,
    pub hunks: Vec<HunkLines>,
}

/// One change block, in 1-based lines: `old_count` lines from `old_start` in the file become
/// `new_count` lines from `new_start` in the proposal. A count of 0 is a pure insertion (the lines
/// go after line `old_start - 1`) or deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HunkLines {
    pub old_start: usize,
    pub old_count: usize,
    pub new_start: usize,
    pub new_count: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    Yes,
    No,
    /// Yes, and do not ask again for this tool in this session.
    Always,
    /// Only these change blocks of the [`ProposedChange`] (1-based); the others are left as they are.
    Only(Vec<usize>),
}

/// What the editor knows of a file the agent is about to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferState {
    /// No buffer holds it (or none is loaded): only the disk matters.
    NotLoaded,
    /// A buffer shows it, as it is on disk: write, and the editor reloads the buffer.
    Unmodified,
    /// A buffer holds unsaved changes to it: the agent must not write.
    Modified,
}

/// How a write the editor was told about ended ([`Approver::written`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Created,
    Changed,
    /// Nothing was written (the buffer held for it is released).
    Failed,
}

/// Asks the user and the editor (the Neovim bridge implements it; tests script it). Without an
/// editor (the CLI, tests), no file is ever loaded in a buffer.
pub trait Approver: Send + Sync {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval>;

    /// Whether `path` (real, absolute; `rel` as the model named it) is loaded in a buffer and
    /// modified. With `hold`, the write follows at once: the editor keeps the buffer as it is until
    /// [`Approver::written`]. `None`: the editor gave no answer (it was closed, the turn cancelled).
    fn buffer_state(&self, path: &Path, rel: &str, hold: bool) -> BoxFuture<'static, Option<BufferState>> {
        let _ = (path, rel, hold);
        Box::pin(async { Some(BufferState::NotLoaded) })
    }

    /// A write asked about with `hold` is over: the editor reloads an unmodified buffer of the file.
    fn written(&self, path: &Path, rel: &str, outcome: Written) {
        let _ = (path, rel, outcome);
    }
}

/// How long the editor may take to say whether a file has unsaved changes.
pub const DEFAULT_EDITOR_TIMEOUT: Duration = Duration::from_secs(5);

/// Which tools run without asking (the `approve` config table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AutoApprove {
    pub write_file: bool,
    pub edit_file: bool,
    pub run_command: bool,
}
