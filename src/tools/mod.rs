//! The agent's tools: placeholder interface (see issue "agent runtime", section Tools).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::message::ToolCall;
use crate::provider::{BoxFuture, ToolSpec};

/// What the user is asked before a tool changes something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// `write_file`, `edit_file`, `run_command`.
    pub tool: String,
    /// One line: the path or the command.
    pub summary: String,
    /// The diff or the full command, shown in the prompt.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    Yes,
    No,
    /// Yes, and do not ask again for this tool in this session.
    Always,
}

/// Asks the user (the Neovim bridge implements it; tests script it).
pub trait Approver: Send + Sync {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval>;
}

/// Which tools run without asking (the `approve` config table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AutoApprove {
    pub write_file: bool,
    pub edit_file: bool,
    pub run_command: bool,
}

/// A tool's answer, as the model will see it (before the session log spills a large one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

pub struct Tools {
    workspace: PathBuf,
    #[allow(dead_code)]
    approver: Arc<dyn Approver>,
    #[allow(dead_code)]
    auto: AutoApprove,
}

impl Tools {
    pub fn new(workspace: &Path, approver: Arc<dyn Approver>, auto: AutoApprove) -> Tools {
        Tools { workspace: workspace.to_path_buf(), approver, auto }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    /// Runs one call. Never fails: errors become `is_error` outputs the model sees. Cancel by
    /// dropping the future (a running command is killed).
    pub async fn run(&self, call: &ToolCall) -> ToolOutput {
        ToolOutput { content: format!("unknown tool {}", call.name), is_error: true }
    }
}
