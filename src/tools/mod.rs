//! The agent's tools: read, list, search, write, edit files and run commands in the workspace.
//!
//! [`Tools::run`] never fails and never panics: bad arguments, refused paths, declined approvals and
//! I/O errors all become `is_error` outputs worded for the model. Every path is confined to the
//! workspace (see `path.rs`); `.PseudoClaude/` (the session logs) cannot be written or edited.
//! Changes (`write_file`, `edit_file`, `run_command`) are approved through an [`Approver`] first,
//! unless [`AutoApprove`] or an earlier [`Approval::Always`] says not to ask. `.git/` cannot be
//! written or edited either.
//!
//! Edits go through the editor (`buffers.rs`): a file loaded in a buffer with unsaved changes is refused, before
//! the approval and again right before the write, the buffer held meanwhile. The approval of a write or an edit
//! carries the whole proposed change ([`ProposedChange`]), so the user may accept only some of its change blocks
//! ([`Approval::Only`]); the result then tells the model which ones were rejected.
//!
//! The approval prompt: `summary` is one line (the workspace-relative path, or the command's first
//! line); `detail` is, for `write_file` and `edit_file`, a unified diff (`--- a/<path>`, `+++
//! b/<path>`, `@@` hunks with 3 lines of context; `--- /dev/null` for a new file), and for
//! `run_command` the full command text.
//!
//! `run_command` runs in the sandbox (`crate::sandbox`, `sandboxed.rs`): leaving it, or its network ban,
//! is asked for that one command every time, whatever `approve` or an earlier Always says.
//!
//! This file holds the tool set and the dispatch of a call (each tool's arguments, then `fs.rs`, `grep.rs`,
//! `sandboxed.rs`); the rest by concern: `approval.rs` the questions (the sandbox's forced one included) and their
//! answers, `buffers.rs` the editor's buffers around a write, `mcp_calls.rs` the MCP servers' tools among ours,
//! `attachments.rs` what a message attaches.

mod approval;
mod args;
mod attachments;
mod buffers;
pub(crate) mod command;
mod diff;
mod fs;
mod grep;
mod mcp_calls;
mod path;
mod sandboxed;
mod specs;

pub use approval::{
    Approval, ApprovalRequest, Approver, AutoApprove, BufferState, DEFAULT_EDITOR_TIMEOUT, HunkLines, PermissionChoice,
    ProposedChange, Written,
};
use approval::{Gate, Gated, partial, proposed};
use specs::specs;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::message::ToolCall;
use crate::provider::ToolSpec;
use crate::sandbox::{self, CommandSandbox, Settings, Support};

use args::Args;
use path::Root;

/// A tool's answer, as the model will see it (before the session log spills a large one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// For `run_command`: how it ran (sandboxed or not, what the user allowed), for the log.
    pub sandbox: Option<Box<CommandSandbox>>,
    /// An MCP tool's images and audio, whose lines stand in `content` as placeholders (`mcp::blob_mark`)
    /// until the runner keeps them as spilled files.
    pub blobs: Vec<crate::mcp::Blob>,
}

impl ToolOutput {
    fn ok(content: String) -> ToolOutput {
        ToolOutput { content, is_error: false, sandbox: None, blobs: Vec::new() }
    }

    fn error(content: String) -> ToolOutput {
        ToolOutput { content, is_error: true, sandbox: None, blobs: Vec::new() }
    }
}

/// How a command ended: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// Where a command's output goes as it comes (stdout and stderr as they arrive), besides the capture its result
/// holds: an ACP agent's terminal (`crate::acp`).
pub type Tap = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// The hard limit on one output, protecting memory; the session log spills large outputs itself.
pub const DEFAULT_OUTPUT_CAP: usize = 10 * 1024 * 1024;
/// `read_file` shows this many lines unless told otherwise.
pub const DEFAULT_READ_LIMIT: u64 = 2000;
/// `list_files` shows at most this many paths.
pub const LIST_CAP: usize = 1000;
/// `grep` stops after this many matching lines.
pub const GREP_CAP: usize = 200;
/// `run_command`'s default and longest time limits, in seconds.
pub const DEFAULT_COMMAND_TIMEOUT_SECS: u64 = 120;
pub const MAX_COMMAND_TIMEOUT_SECS: u64 = 600;

/// The tool names, in the order of [`Tools::specs`].
pub const TOOL_NAMES: [&str; 6] = ["read_file", "list_files", "grep", "write_file", "edit_file", "run_command"];

pub struct Tools {
    workspace: PathBuf,
    root: Root,
    approver: Arc<dyn Approver>,
    auto: AutoApprove,
    /// Tools the user answered [`Approval::Always`] for.
    always: [AtomicBool; 3],
    output_cap: usize,
    editor_timeout: Duration,
    /// The `sandbox` table of `setup()`.
    sandbox: Settings,
    /// What this system can do; `None`: [`sandbox::support`], probed once.
    support: Option<Support>,
    /// The session's folder, once it exists: commands get `<it>/tmp` as `$TMPDIR`.
    session_dir: Option<SessionDir>,
    /// The user's MCP servers, shared by every agent of the editor's life.
    mcp: Option<Arc<crate::mcp::Servers>>,
    /// MCP tools (`mcp__SERVER__TOOL`) the user answered [`Approval::Always`] for.
    mcp_always: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Where the current session lives (its folder), once it exists.
pub type SessionDir = Box<dyn Fn() -> Option<PathBuf> + Send + Sync>;

/// The private temporary folder of a session's commands, inside its folder (removed with it).
pub const SESSION_TMP_DIR: &str = "tmp";

impl Tools {
    pub fn new(workspace: &Path, approver: Arc<dyn Approver>, auto: AutoApprove) -> Tools {
        Tools {
            workspace: workspace.to_path_buf(),
            root: Root::new(workspace),
            approver,
            auto,
            always: Default::default(),
            output_cap: DEFAULT_OUTPUT_CAP,
            editor_timeout: DEFAULT_EDITOR_TIMEOUT,
            sandbox: Settings::default(),
            support: None,
            session_dir: None,
            mcp: None,
            mcp_always: Default::default(),
        }
    }

    /// How commands are confined (default: [`Settings::default`], on, no network).
    pub fn set_sandbox(&mut self, settings: Settings) {
        self.sandbox = settings;
    }

    /// Stands in for the system's probed [`sandbox::support`] (tests simulate a system without one).
    pub fn set_sandbox_support(&mut self, support: Support) {
        self.support = Some(support);
    }

    /// Tells the tools where the session's folder is, for the commands' `$TMPDIR`. Without it (tools used
    /// without a session) commands share `.PseudoClaude/tmp`.
    pub fn set_session_dir(&mut self, dir: SessionDir) {
        self.session_dir = Some(dir);
    }

    fn support(&self) -> &Support {
        self.support.as_ref().unwrap_or_else(|| sandbox::support())
    }

    /// How long the editor may take to answer [`Approver::buffer_state`] (default
    /// [`DEFAULT_EDITOR_TIMEOUT`]); past it the write is refused.
    pub fn set_editor_timeout(&mut self, timeout: Duration) {
        self.editor_timeout = timeout;
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// A path confined as every tool's is (inside the workspace, links resolved): the real path and its
    /// workspace-relative name; the error says why it is refused.
    pub fn resolve_path(&self, raw: &str) -> Result<(std::path::PathBuf, String), String> {
        self.root.resolve(raw).map(|r| (r.abs, r.rel))
    }

    /// How long the editor may take to answer a question about its buffers.
    pub fn editor_timeout(&self) -> Duration {
        self.editor_timeout
    }

    /// The most bytes one output may have (default [`DEFAULT_OUTPUT_CAP`]); longer ones are cut
    /// with a note, and read_file/run_command stop collecting once they reach it.
    pub fn output_cap(&self) -> usize {
        self.output_cap
    }

    pub fn set_output_cap(&mut self, bytes: usize) {
        self.output_cap = bytes.max(1024);
    }

    /// Our tools, then the running MCP servers' (`mcp__SERVER__TOOL`).
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut all = specs();
        if let Some(m) = &self.mcp {
            all.extend(m.specs());
        }
        all
    }

    /// Runs one call. Never fails: errors become `is_error` outputs the model sees. Cancel by
    /// dropping the future (a running command is killed).
    pub async fn run(&self, call: &ToolCall) -> ToolOutput {
        if let Some((server, tool)) = self.mcp.as_ref().and_then(|m| m.resolve(&call.name)) {
            return cap_output(self.mcp_call(call, &server, &tool).await, self.output_cap);
        }
        let out = match Args::new(&call.name, &call.arguments) {
            Err(e) => ToolOutput::error(e),
            Ok(args) => match call.name.as_str() {
                "read_file" => self.read_file(&args).await,
                "list_files" => self.list_files(&args).await,
                "grep" => self.grep(&args).await,
                "write_file" => self.write_file(&args).await,
                "edit_file" => self.edit_file(&args).await,
                "run_command" => self.run_command(&args).await,
                other => ToolOutput::error(format!("unknown tool {other:?}; the tools are: {}", TOOL_NAMES.join(", "))),
            },
        };
        cap_output(out, self.output_cap)
    }

    async fn read_file(&self, args: &Args<'_>) -> ToolOutput {
        let run = || -> Result<fs::ReadRequest, String> {
            let res = self.root.resolve(args.str("path")?)?;
            let offset = args.uint_opt("offset")?.unwrap_or(1).max(1);
            let limit = args.uint_opt("limit")?.unwrap_or(DEFAULT_READ_LIMIT);
            if limit == 0 {
                return Err("`limit` must be at least 1".to_string());
            }
            Ok(fs::ReadRequest { res, offset, limit, cap: self.output_cap })
        };
        match run() {
            Err(e) => ToolOutput::error(e),
            Ok(req) => blocking(move |cancel| fs::read_file(&req, cancel)).await,
        }
    }

    async fn list_files(&self, args: &Args<'_>) -> ToolOutput {
        let res = match args.str_opt("path").and_then(|p| self.root.resolve(p.unwrap_or("."))) {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(e),
        };
        let root = self.root.clone();
        blocking(move |cancel| fs::list_files(&root, &res, LIST_CAP, cancel)).await
    }

    async fn grep(&self, args: &Args<'_>) -> ToolOutput {
        let run = || -> Result<(regex::Regex, path::Resolved), String> {
            let pattern = args.str("pattern")?;
            let path = args.str_opt("path")?;
            let re = regex::Regex::new(pattern).map_err(|e| format!("invalid regex {pattern:?}: {e}"))?;
            Ok((re, self.root.resolve(path.unwrap_or("."))?))
        };
        let (re, res) = match run() {
            Ok(x) => x,
            Err(e) => return ToolOutput::error(e),
        };
        let root = self.root.clone();
        let cap = self.output_cap;
        blocking(move |cancel| grep::grep(&root, &res, &re, GREP_CAP, cap, cancel)).await
    }

    async fn write_file(&self, args: &Args<'_>) -> ToolOutput {
        let run = || -> Result<(path::Resolved, String), String> {
            let res = self.root.resolve(args.str("path")?)?;
            let content = args.str("content")?.to_string();
            self.root.check_writable(&res)?;
            Ok((res, content))
        };
        let (res, content) = match run() {
            Ok(x) => x,
            Err(e) => return ToolOutput::error(e),
        };
        let plan = {
            let res = res.clone();
            let content = content.clone();
            match blocking_res(move |_| fs::plan_write(&res, &content)).await {
                Ok(p) => p,
                Err(e) => return ToolOutput::error(e),
            }
        };
        if let Err(out) = self.check_buffer(&res, Gated::WriteFile, false).await {
            return out;
        }
        let change = plan.old.as_ref().map(|old| proposed(&res, old, &content));
        let only = match self.approve(Gated::WriteFile, res.rel.clone(), plan.diff.clone(), change).await {
            Ok(only) => only,
            Err(out) => return out,
        };
        let (content, note) = match (&only, &plan.old) {
            (Some(accepted), Some(old)) => partial(old, &content, accepted),
            _ => (content, String::new()),
        };
        self.write_through_editor(&res, Gated::WriteFile, plan.before_exists(), move |res| {
            fs::write_file(res, &content, &plan).map(|s| format!("{s}{note}"))
        })
        .await
    }

    async fn edit_file(&self, args: &Args<'_>) -> ToolOutput {
        let run = || -> Result<(path::Resolved, String, String), String> {
            let res = self.root.resolve(args.str("path")?)?;
            let old = args.str("old")?.to_string();
            let new = args.str("new")?.to_string();
            self.root.check_writable(&res)?;
            Ok((res, old, new))
        };
        let (res, old, new) = match run() {
            Ok(x) => x,
            Err(e) => return ToolOutput::error(e),
        };
        let mut plan = {
            let res = res.clone();
            match blocking_res(move |_| fs::plan_edit(&res, &old, &new)).await {
                Ok(p) => p,
                Err(e) => return ToolOutput::error(e),
            }
        };
        if let Err(out) = self.check_buffer(&res, Gated::EditFile, false).await {
            return out;
        }
        let change = proposed(&res, plan.text(), plan.updated());
        let note = match self.approve(Gated::EditFile, res.rel.clone(), plan.diff.clone(), Some(change)).await {
            Ok(None) => String::new(),
            Ok(Some(accepted)) => {
                let (updated, note) = partial(plan.text(), plan.updated(), &accepted);
                plan.set_updated(updated);
                note
            }
            Err(out) => return out,
        };
        self.write_through_editor(&res, Gated::EditFile, true, move |res| {
            fs::apply_edit(res, &plan).map(|s| format!("{s}{note}"))
        })
        .await
    }
}

/// Cuts an output longer than `cap` bytes (at a character boundary) and says so.
fn cap_output(mut out: ToolOutput, cap: usize) -> ToolOutput {
    if out.content.len() > cap {
        let total = out.content.len();
        let keep = fs::cut_str(&out.content, cap).len();
        out.content.truncate(keep);
        out.content.push_str(&format!("\n[output cut: {total} bytes in all, only the first {keep} are shown]"));
    }
    out
}

/// Runs blocking file-system work off the async threads. The closure gets a flag set when the
/// caller's future is dropped, so long walks stop early when the turn is cancelled.
async fn blocking<F>(f: F) -> ToolOutput
where
    F: FnOnce(&AtomicBool) -> Result<String, String> + Send + 'static,
{
    match blocking_res(f).await {
        Ok(s) => ToolOutput::ok(s),
        Err(e) => ToolOutput::error(e),
    }
}

async fn blocking_res<T, F>(f: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(&AtomicBool) -> Result<T, String> + Send + 'static,
{
    struct CancelOnDrop(Arc<AtomicBool>);
    impl Drop for CancelOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let flag = Arc::new(AtomicBool::new(false));
    let _guard = CancelOnDrop(flag.clone());
    match tokio::task::spawn_blocking(move || f(&flag)).await {
        Ok(r) => r,
        Err(e) => Err(format!("internal error in the tool: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_named_and_described() {
        let names: Vec<String> = specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, TOOL_NAMES);
        for s in specs() {
            assert!(s.description.len() > 50, "{}", s.name);
            assert_eq!(s.input_schema["type"], "object");
        }
    }

    #[test]
    fn cap_cuts_on_a_char_boundary() {
        let out = cap_output(ToolOutput::ok("é".repeat(1000)), 1001);
        assert!(out.content.starts_with(&"é".repeat(500)));
        assert!(out.content.ends_with("[output cut: 2000 bytes in all, only the first 1000 are shown]"));
    }
}
