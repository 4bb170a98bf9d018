//! The log's records of what happened to the workspace's files: `files` checkpoints and `rewind` steps.
//!
//! Plain data only; [`crate::rewind`] takes the checkpoints, plans and applies rewinds. Both are
//! additive entry kinds: readers that predate them skip them as unknown types, and a `replace` leaves
//! them be (compacting the talk does not forget what happened to the files).
//!
//! A file's state is a *content id*: the SHA-256 of its bytes in hex (the name of its object in
//! `.PseudoClaude/objects/`), with `:x` appended when it is executable; `big:<bytes>:<mtime_ns>` for a
//! file over the size limit, whose content is not kept ("not restorable"); absent (`null`) when the
//! file does not exist.

use serde::{Deserialize, Serialize};

/// Who made the changes a checkpoint found.
pub const BY_USER: &str = "user";
pub const BY_AGENT: &str = "agent";
pub const BY_REWIND: &str = "rewind";
/// On one change of an agent checkpoint: another chat of the editor may have made it, during this chat's tool call
/// (see [`crate::rewind::calls`]); a rewind reads it as the user's.
pub const BY_CHAT: &str = "chat";

/// One `files` checkpoint: the changes since the previous one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FilesRecord {
    /// Counts the session's checkpoints from 1; a user message's `turn` names the one taken just before it.
    pub seq: u64,
    /// The user message (its `turn`) whose turn the changes belong to; 0 before the first message.
    #[serde(default)]
    pub turn: u64,
    /// [`BY_USER`] (found before a message: made between turns, by anyone but the agent), [`BY_AGENT`]
    /// (found after a tool call of the agent) or [`BY_REWIND`].
    pub by: String,
    /// The tool call after which an agent checkpoint was taken.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub call: String,
    /// On a session's first checkpoint: the object holding the whole tree's state (a JSON object of
    /// path to content id), which the later changes are applied to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FileChange>,
    /// Copies (base64) of the small objects this checkpoint stored new, by hash: durable with this line, so
    /// the objects need no sync of their own on a turn's path; a start after a crash puts back any that never
    /// reached the disk. Only kept in the log (dropped from memory once written).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub copies: std::collections::BTreeMap<String, String>,
}

/// A file that changed between two checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FileChange {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// Content ids; `None`: the file did not exist.
    pub before: Option<String>,
    pub after: Option<String>,
    /// Lines added and removed (0 and 0 for a binary or too large file).
    #[serde(default)]
    pub added: u64,
    #[serde(default)]
    pub removed: u64,
    /// Who made this change when it is not the record's `by`: [`BY_CHAT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

impl FileChange {
    /// Who made it: its own `by`, else its record's.
    pub fn by<'a>(&'a self, record: &'a FilesRecord) -> &'a str {
        self.by.as_deref().unwrap_or(&record.by)
    }

    /// `added`, `modified` or `deleted`.
    pub fn status(&self) -> &'static str {
        match (&self.before, &self.after) {
            (None, _) => "added",
            (_, None) => "deleted",
            _ => "modified",
        }
    }

    /// `added`, `modified`, `deleted` as a sentence says it of a file: `created`, `modified`, `deleted`.
    pub fn status_word(&self) -> &'static str {
        match self.status() {
            "added" => "created",
            s => s,
        }
    }
}

/// A rewind's steps: `begin` (its plan, written before any file is touched) and `done`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RewindRecord {
    /// Pairs a `begin` with its `done`.
    pub id: String,
    /// `begin` or `done`.
    pub state: String,
    /// The user message rewound to: its 1-based index in the history and its `turn`.
    #[serde(default)]
    pub index: usize,
    #[serde(default)]
    pub turn: u64,
    #[serde(default)]
    pub code: bool,
    #[serde(default)]
    pub conversation: bool,
    /// Set when this rewind undoes rewind `undo_of`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_of: Option<String>,
    /// On `begin`: every file to put back, from the state it has now to the one it returns to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<RewindItem>,
    /// On `begin` and `done`: files left as they are (changed by the user after the agent, open with
    /// unsaved changes, or not restorable), each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<Conflict>,
    /// On `done`: finished at the session's next start after the editor died part way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
}

/// One file of a rewind's plan.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RewindItem {
    pub path: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// A file a rewind leaves as it is.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Conflict {
    pub path: String,
    /// `changed by you after the agent`, `open with unsaved changes`, `not restorable: ...`.
    pub why: String,
}
