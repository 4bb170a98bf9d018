//! What a tool asks the user (and the editor) before it changes something, and the answers.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;

use super::{ToolOutput, Tools, diff, path};
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
    /// An ACP agent's permission (`crate::acp`): its options as it names them; "yes" answers its `allow_once`
    /// option, "always" its `allow_always`, "no" its `reject_once`. Empty for our own tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<PermissionChoice>,
}

/// One option of an ACP agent's permission request: its id, its name as the agent words it, and its kind
/// (`allow_once`, `allow_always`, `reject_once`, `reject_always`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PermissionChoice {
    pub id: String,
    pub name: String,
    pub kind: String,
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

    /// The text of `path`'s buffer (real, absolute) when the file is loaded in the editor, unsaved changes
    /// included: what an ACP agent's `fs/read_text_file` reads. `None`: not loaded (the disk is read), or no editor.
    fn buffer_text(&self, path: &Path) -> BoxFuture<'static, Option<String>> {
        let _ = path;
        Box::pin(async { None })
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

// The asking: a tool's question unless auto-approved or approved with Always, the sandbox's forced question, and
// the answer turned into what the model reads.

/// The tools that ask first, indexing [`Tools::always`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Gated {
    WriteFile = 0,
    EditFile = 1,
    RunCommand = 2,
}

impl Gated {
    pub(super) fn name(self) -> &'static str {
        match self {
            Gated::WriteFile => "write_file",
            Gated::EditFile => "edit_file",
            Gated::RunCommand => "run_command",
        }
    }
}

impl Tools {
    /// Asks the user unless auto-approved or approved with Always: `Ok(None)` to go ahead whole,
    /// `Ok(Some(accepted))` for only some change blocks (one flag per block, at least one set), `Err`
    /// the answer to give the model when the user declines.
    pub(super) async fn approve(
        &self,
        tool: Gated,
        summary: String,
        detail: String,
        change: Option<ProposedChange>,
    ) -> Result<Option<Vec<bool>>, ToolOutput> {
        self.approve_gated(tool, summary, detail, change, Gate::default()).await
    }

    /// [`Tools::approve`], with what a command's question lifts: a forced question is asked even when
    /// auto-approved or approved with Always, and its Always is a plain yes.
    pub(super) async fn approve_gated(
        &self,
        tool: Gated,
        summary: String,
        detail: String,
        change: Option<ProposedChange>,
        gate: Gate,
    ) -> Result<Option<Vec<bool>>, ToolOutput> {
        let auto = match tool {
            Gated::WriteFile => self.auto.write_file,
            Gated::EditFile => self.auto.edit_file,
            Gated::RunCommand => self.auto.run_command,
        };
        let always = &self.always[tool as usize];
        if !gate.forced && (auto || always.load(Ordering::Relaxed)) {
            return Ok(None);
        }
        let what = summary.clone();
        let blocks = change.as_ref().map_or(0, |c| c.hunks.len());
        let req = ApprovalRequest {
            tool: tool.name().to_string(),
            summary,
            detail,
            change,
            lifted: gate.lifted,
            warning: gate.warning,
            always: !gate.forced,
            options: Vec::new(),
        };
        let declined = || {
            let nothing = match tool {
                Gated::WriteFile | Gated::EditFile => "the file was not changed",
                Gated::RunCommand => "the command was not run",
            };
            ToolOutput::error(format!(
                "the user declined this {} call ({what}); {nothing}. Do not retry it as is: ask the user how to proceed.",
                tool.name()
            ))
        };
        match self.approver.ask(req).await {
            Approval::Yes => Ok(None),
            Approval::Always => {
                if !gate.forced {
                    always.store(true, Ordering::Relaxed);
                }
                Ok(None)
            }
            Approval::No => Err(declined()),
            Approval::Only(numbers) => {
                let mut accepted = vec![false; blocks];
                for n in numbers {
                    if let Some(slot) = n.checked_sub(1).and_then(|i| accepted.get_mut(i)) {
                        *slot = true;
                    }
                }
                match accepted.iter().filter(|&&a| a).count() {
                    0 => Err(declined()),
                    n if n == blocks => Ok(None),
                    _ => Ok(Some(accepted)),
                }
            }
        }
    }
}

/// What a question must say and whether it must be asked whatever `approve` says.
#[derive(Debug, Default)]
pub(super) struct Gate {
    pub(super) lifted: Vec<String>,
    pub(super) warning: Option<String>,
    pub(super) forced: bool,
}

/// The review's view of a change from `old` to `new`.
pub(super) fn proposed(res: &path::Resolved, old: &str, new: &str) -> ProposedChange {
    let hunks = diff::change_blocks(old, new)
        .into_iter()
        .map(|h| HunkLines {
            old_start: h.old.start + 1,
            old_count: h.old.len(),
            new_start: h.new.start + 1,
            new_count: h.new.len(),
        })
        .collect();
    ProposedChange { path: res.abs.clone(), old: old.to_string(), new: new.to_string(), hunks }
}

/// `new` with only the `accepted` change blocks, and the note telling the model which were rejected.
pub(super) fn partial(old: &str, new: &str, accepted: &[bool]) -> (String, String) {
    let blocks = diff::change_blocks(old, new);
    let text = diff::apply(old, new, &blocks, accepted);
    let rejected: Vec<usize> = (0..blocks.len()).filter(|&k| !accepted.get(k).copied().unwrap_or(false)).collect();
    let mut note = format!(
        "\n[the user accepted {} of the {} changes and rejected {}: {}. Those lines were left as they were, \
         shown below as they are now (-) and as you proposed them (+); do not assume they changed]\n",
        blocks.len() - rejected.len(),
        blocks.len(),
        if rejected.len() == 1 { "change" } else { "changes" },
        rejected.iter().map(|k| (k + 1).to_string()).collect::<Vec<_>>().join(", ")
    );
    let (a, b): (Vec<&str>, Vec<&str>) = (old.split_inclusive('\n').collect(), new.split_inclusive('\n').collect());
    for k in rejected {
        let h = &blocks[k];
        note.push_str(&format!(
            "rejected change {} (lines {}-{} of the file, {}-{} proposed):\n",
            k + 1,
            h.old.start + 1,
            h.old.end,
            h.new.start + 1,
            h.new.end
        ));
        for l in &a[h.old.clone()] {
            note.push('-');
            note.push_str(l.strip_suffix('\n').unwrap_or(l));
            note.push('\n');
        }
        for l in &b[h.new.clone()] {
            note.push('+');
            note.push_str(l.strip_suffix('\n').unwrap_or(l));
            note.push('\n');
        }
    }
    (text, note)
}
