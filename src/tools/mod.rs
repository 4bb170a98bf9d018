//! The agent's tools: read, list, search, write, edit files and run commands in the workspace.
//!
//! [`Tools::run`] never fails and never panics: bad arguments, refused paths, declined approvals and
//! I/O errors all become `is_error` outputs worded for the model. Every path is confined to the
//! workspace (see `path.rs`); `.PseudoClaude/` (the session logs) cannot be written or edited.
//! Changes (`write_file`, `edit_file`, `run_command`) are approved through an [`Approver`] first,
//! unless [`AutoApprove`] or an earlier [`Approval::Always`] says not to ask.
//!
//! The approval prompt: `summary` is one line (the workspace-relative path, or the command's first
//! line); `detail` is, for `write_file` and `edit_file`, a unified diff (`--- a/<path>`, `+++
//! b/<path>`, `@@` hunks with 3 lines of context; `--- /dev/null` for a new file), and for
//! `run_command` the full command text.

mod args;
mod command;
mod diff;
mod fs;
mod grep;
mod path;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::message::ToolCall;
use crate::provider::{BoxFuture, ToolSpec};

use args::Args;
use path::Root;

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

impl ToolOutput {
    fn ok(content: String) -> ToolOutput {
        ToolOutput { content, is_error: false }
    }

    fn error(content: String) -> ToolOutput {
        ToolOutput { content, is_error: true }
    }
}

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
}

/// The tools that ask first, indexing [`Tools::always`].
#[derive(Debug, Clone, Copy)]
enum Gated {
    WriteFile = 0,
    EditFile = 1,
    RunCommand = 2,
}

impl Gated {
    fn name(self) -> &'static str {
        match self {
            Gated::WriteFile => "write_file",
            Gated::EditFile => "edit_file",
            Gated::RunCommand => "run_command",
        }
    }
}

impl Tools {
    pub fn new(workspace: &Path, approver: Arc<dyn Approver>, auto: AutoApprove) -> Tools {
        Tools {
            workspace: workspace.to_path_buf(),
            root: Root::new(workspace),
            approver,
            auto,
            always: Default::default(),
            output_cap: DEFAULT_OUTPUT_CAP,
        }
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The most bytes one output may have (default [`DEFAULT_OUTPUT_CAP`]); longer ones are cut
    /// with a note, and read_file/run_command stop collecting once they reach it.
    pub fn output_cap(&self) -> usize {
        self.output_cap
    }

    pub fn set_output_cap(&mut self, bytes: usize) {
        self.output_cap = bytes.max(1024);
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        specs()
    }

    /// Runs one call. Never fails: errors become `is_error` outputs the model sees. Cancel by
    /// dropping the future (a running command is killed).
    pub async fn run(&self, call: &ToolCall) -> ToolOutput {
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
        if let Err(out) = self.approve(Gated::WriteFile, res.rel.clone(), plan.diff.clone()).await {
            return out;
        }
        blocking(move |_| fs::write_file(&res, &content, &plan)).await
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
        let plan = {
            let res = res.clone();
            match blocking_res(move |_| fs::plan_edit(&res, &old, &new)).await {
                Ok(p) => p,
                Err(e) => return ToolOutput::error(e),
            }
        };
        if let Err(out) = self.approve(Gated::EditFile, res.rel.clone(), plan.diff.clone()).await {
            return out;
        }
        blocking(move |_| fs::apply_edit(&res, &plan)).await
    }

    async fn run_command(&self, args: &Args<'_>) -> ToolOutput {
        let run = || -> Result<(String, u64), String> {
            let command = args.str("command")?;
            if command.trim().is_empty() {
                return Err("`command` is empty".to_string());
            }
            let timeout = args.uint_opt("timeout")?.unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECS);
            if timeout == 0 {
                return Err("`timeout` must be at least 1 second".to_string());
            }
            Ok((command.to_string(), timeout.min(MAX_COMMAND_TIMEOUT_SECS)))
        };
        let (command, timeout) = match run() {
            Ok(x) => x,
            Err(e) => return ToolOutput::error(e),
        };
        if let Err(out) = self.approve(Gated::RunCommand, command_summary(&command), command.clone()).await {
            return out;
        }
        command::run(self.root.canon(), &command, Duration::from_secs(timeout), self.output_cap).await
    }

    /// Asks the user unless auto-approved or approved with Always; `Err` is the answer to give the
    /// model when the user declines.
    async fn approve(&self, tool: Gated, summary: String, detail: String) -> Result<(), ToolOutput> {
        let auto = match tool {
            Gated::WriteFile => self.auto.write_file,
            Gated::EditFile => self.auto.edit_file,
            Gated::RunCommand => self.auto.run_command,
        };
        let always = &self.always[tool as usize];
        if auto || always.load(Ordering::Relaxed) {
            return Ok(());
        }
        let what = summary.clone();
        let req = ApprovalRequest { tool: tool.name().to_string(), summary, detail };
        match self.approver.ask(req).await {
            Approval::Yes => Ok(()),
            Approval::Always => {
                always.store(true, Ordering::Relaxed);
                Ok(())
            }
            Approval::No => {
                let nothing = match tool {
                    Gated::WriteFile | Gated::EditFile => "the file was not changed",
                    Gated::RunCommand => "the command was not run",
                };
                Err(ToolOutput::error(format!(
                    "the user declined this {} call ({what}); {nothing}. Do not retry it as is: ask the user how to proceed.",
                    tool.name()
                )))
            }
        }
    }
}

/// The command's first line, shortened, for the one-line approval summary.
fn command_summary(command: &str) -> String {
    let trimmed = command.trim();
    let first = trimmed.lines().next().unwrap_or("");
    let mut s = fs::cut_str(first, 200).to_string();
    if s.len() < trimmed.len() {
        s.push_str(" …");
    }
    s
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

fn specs() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, input_schema: serde_json::Value| ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema,
    };
    vec![
        spec(
            "read_file",
            "Read a text file of the workspace. Lines come numbered from 1, as `cat -n` shows them \
             (the number, a tab, the line); the numbers are not part of the file. Shows up to 2000 lines \
             from `offset`; when the file goes on, the answer ends with a note saying which offset to \
             read on from. Very long lines are cut. Binary files are refused. Paths are relative to the \
             workspace root (absolute paths must lie inside the workspace).",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1, "description": "The first line to show (1-based). Default 1."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show. Default 2000."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        spec(
            "list_files",
            "List the files under a directory of the workspace, recursively, sorted, one path per line \
             relative to the workspace root (directories are not listed on their own lines). Like \
             ripgrep, it skips hidden files and directories and whatever .gitignore, .ignore and \
             .git/info/exclude exclude. Shows at most 1000 paths and says how many more there are.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The directory to list, relative to the workspace root. Default: the whole workspace."}
                },
                "additionalProperties": false
            }),
        ),
        spec(
            "grep",
            "Search file contents with a regular expression (Rust `regex` syntax, like ripgrep's: \
             `(?i)` for case-insensitive, `\\b` word boundaries; no look-around or backreferences). Matches \
             line by line in the files list_files would show (binary files skipped) and answers \
             `path:line: text` per matching line, paths relative to the workspace root. Long lines are \
             cut around the match. Stops after 200 matching lines.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The regular expression."},
                    "path": {"type": "string", "description": "A directory or file to search, relative to the workspace root. Default: the whole workspace."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        spec(
            "write_file",
            "Create a file, or replace a file's whole content, in the workspace. Missing parent \
             directories are created. The user is asked to approve the change first (shown as a diff). \
             To change part of an existing file, prefer edit_file.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace root."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        spec(
            "edit_file",
            "Replace one exact piece of text in an existing file. `old` must occur exactly once in the \
             file, matching it character for character, whitespace and indentation included (read the \
             file first, and do not copy read_file's line-number prefixes); include enough surrounding \
             lines to make it unique. The user is asked to approve the change first (shown as a diff). \
             Answers with the diff of the change.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace root."},
                    "old": {"type": "string", "description": "The exact text to replace; must occur exactly once."},
                    "new": {"type": "string", "description": "The text to put in its place."}
                },
                "required": ["path", "old", "new"],
                "additionalProperties": false
            }),
        ),
        spec(
            "run_command",
            "Run a shell command (`sh -c`) in the workspace root directory, without input (stdin is \
             empty; interactive programs will not wait for you). The user is asked to approve it first. \
             Answers with the exit code, then the standard output and the standard error. The command \
             is killed with all its child processes when the timeout passes; background processes that \
             keep the output open count as still running.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command line."},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Seconds before the command is killed. Default 120, at most 600."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
    ]
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

    #[test]
    fn summary_is_one_line() {
        assert_eq!(command_summary("make\nmake test"), "make …");
        assert_eq!(command_summary("  ls -la  "), "ls -la");
    }
}
