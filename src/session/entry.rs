//! One line of `conversation.jsonl`.
//!
//! The seed's fields (`type`, `reason`, `role`, `content`, `tool_calls`, `tool_result`, `ts`, `model`)
//! keep their names and meaning, so a log written by the seed loads here. We add two fields:
//!
//! - `messages` on a `replace` entry: the whole new snapshot on the same line. A line is either all on
//!   disk (it ends with `\n`) or it is a torn tail, so a crash anywhere in a replace leaves the loader
//!   with the whole old history or the whole new one, never a part. (The seed wrote the snapshot as
//!   separate lines after the marker; such logs still load the seed's way.)
//! - `count` on a `replace` entry: how many messages the snapshot holds, for `jq` and humans.
//! - `spill` inside `tool_result`: where a large output went (see [`super::spill`]).
//! - `checkpoint` entries, with `answer` and `at`: the text of an answer while it streams, so a crash
//!   (the editor killed mid-answer) keeps what the user had read. Each carries only the text streamed
//!   since the previous one (`content`) and where it goes in the answer's text (`at`, a byte offset),
//!   so a long answer costs its text once, not once per second. The answer's final `message` entry
//!   supersedes its checkpoints; without one, replay restores their text as an interrupted answer
//!   ([`super::replay`]). Readers that predate them ignore them as an unknown type.
//! - `interrupted` on a message: the answer stopped before it was complete (written only when true).
//! - `title` and `pin` entries ([`super::meta`]): the session's name and whether it is pinned, last one
//!   wins. They carry no `role`, so they never become messages, and readers that predate them ignore
//!   them as an unknown type.
//! - `forked_from` on the `replace` (reason `fork`) that starts a fork ([`super::fork`]).
//! - `meta` entries with `git`: the workspace's branch and short commit when the session started and
//!   whenever a later turn found them changed ([`crate::git`]).
//! - `usage` entries, with `model` and `usage`: the tokens one request cost, as its provider reported
//!   them ([`crate::usage`]).
//! - `model` on an assistant message: the model that wrote it (the seed wrote `model` on a log's first entry
//!   only; both stay).
//! - `thinking` and `thinking_ms` on an assistant message: the model's thinking blocks as the provider
//!   sent them (signatures included, sent back as they are) and how long it thought. Written only when
//!   there is thinking, so every other message keeps its bytes; readers that predate them skip them.
//!
//! - `files` entries ([`super::files`]): what happened to the workspace's files, checkpointed before each
//!   user message and after each tool call that can change files; `rewind` entries: a rewind's plan and
//!   its end. A user message carries `turn`, the `seq` of the checkpoint taken just before it.
//!
//! Neither of the last two is a message, and neither is undone by a `replace`: they tell where the
//! session ran and what it spent, not what the model reads. Readers that predate them ignore them as
//! unknown types.
//!
//! - `kept` entries ([`KeptState`]): where a copy of another agent's session stands against its original
//!   ([`crate::import::keep`]); no message either.

use serde::{Deserialize, Serialize};

use super::files::{FilesRecord, RewindRecord};
use crate::git::GitHead;
use crate::message::{Message, Role, Thinking, ToolCall, ToolResult, is_zero};
use crate::usage::Usage;

/// An entry's `type`. A missing or empty `type` is a message (the seed omitted it); a type this version does not
/// know ([`Kind::Other`], e.g. one a newer version wrote) is kept as written and read as no message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Message,
    Replace,
    Checkpoint,
    Meta,
    Usage,
    Title,
    Pin,
    Files,
    Rewind,
    Acp,
    Kept,
    Other(String),
}

impl Kind {
    pub fn as_str(&self) -> &str {
        match self {
            Kind::Message => "message",
            Kind::Replace => "replace",
            Kind::Checkpoint => "checkpoint",
            Kind::Meta => "meta",
            Kind::Usage => "usage",
            Kind::Title => "title",
            Kind::Pin => "pin",
            Kind::Files => "files",
            Kind::Rewind => "rewind",
            Kind::Acp => "acp",
            Kind::Kept => "kept",
            Kind::Other(name) => name,
        }
    }
}

impl From<String> for Kind {
    fn from(name: String) -> Kind {
        match name.as_str() {
            "message" | "" => Kind::Message,
            "replace" => Kind::Replace,
            "checkpoint" => Kind::Checkpoint,
            "meta" => Kind::Meta,
            "usage" => Kind::Usage,
            "title" => Kind::Title,
            "pin" => Kind::Pin,
            "files" => Kind::Files,
            "rewind" => Kind::Rewind,
            "acp" => Kind::Acp,
            "kept" => Kind::Kept,
            _ => Kind::Other(name),
        }
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        String::deserialize(d).map(Kind::from)
    }
}

pub const REASON_FORK: &str = "fork";

/// Where a fork came from: the source session and how many of its messages the fork starts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedFrom {
    pub id: String,
    /// 1-based position, in the source's restored history, of the last message the fork took.
    pub index: usize,
}

/// The git worktree a worktree chat works in (issue 47; `crate::worktree`): its name, its branch and the folder the
/// chat worked in. On a `meta` entry; a resume goes back into it (or makes it again from the branch).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WorktreeMeta {
    pub name: String,
    pub branch: String,
    pub path: std::path::PathBuf,
}

/// The ACP agent a session ran (`crate::acp`): the name `setup()` gave it, its own id of the session (what a
/// `session/load` or `session/resume` names), and the version its `initialize` reported. On a `meta` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// A fork of a whole session the agent ran (`session_id` empty until it starts): the agent's session to fork
    /// with `session/fork` when the fork first starts the agent (a fork at an earlier message is told our transcript
    /// instead: the agent's session would remember what came after).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fork_of: String,
}

/// Where an imported session came from: the tool (`claude-code`, `codex`), its id of the session, the file, and
/// the file's size and modification time when it was imported (an unchanged file is not imported twice).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportedFrom {
    pub source: String,
    pub id: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime: Option<i64>,
    /// A copy `external.keep` keeps up to date ([`crate::import::keep`]): its history is the original's, every
    /// segment flattened, and it only ever grows. Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

/// On a `kept` entry: what a kept copy held of its original after a sync ([`crate::import::keep`]): the tool and its
/// id of the session, the original's size and modification time (nanoseconds) then, and the messages of its
/// conversion (`messages`, with the hash of their keys, and of all but the last), so the next sync appends what is
/// new without reading the copy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KeptState {
    pub source: String,
    pub id: String,
    pub bytes: u64,
    pub mtime_ns: i64,
    pub messages: usize,
    pub hash: String,
    pub hash_head: String,
}

/// How our writer's lines of three kinds start, so a reader can tell them without parsing
/// (`search/raw.rs`'s scan of a log's bytes). They rely on [`Entry`]'s field order below: `type`
/// first, then `reason` (left out when empty, as it is on a message), then `role`; serde writes the
/// fields in declaration order. Moving a field changes them: `prefixes_follow_the_field_order` fails.
pub const CHECKPOINT_PREFIX: &[u8] = br#"{"type":"checkpoint","#;
pub const ASSISTANT_PREFIX: &[u8] = br#"{"type":"message","role":"assistant","#;
pub const REPLACE_PREFIX: &[u8] = br#"{"type":"replace","#;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Entry {
    /// Missing means `message` (the seed omitted it).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// On a message; an entry without one is skipped, as the seed did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    #[serde(default)]
    pub ts: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<Message>>,
    /// On a `checkpoint`: which answer it belongs to (unique per streamed answer).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub answer: String,
    /// On a `checkpoint`: the byte offset in the answer's text where `content` starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<usize>,
    /// On a message: see [`Message::interrupted`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// On a user message: see [`Message::turn`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turn: u64,
    /// On a `meta` entry: the git branch and short commit of the workspace at a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitHead>,
    /// On a `usage` entry: the tokens of one request (`model` says whose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// On a `title`: the session's name; empty returns to the automatic title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// On a `pin`: pinned or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    /// On the `replace` that starts a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// On the `replace` (reason `import`) that starts a session imported from another tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<ImportedFrom>,
    /// On an assistant message: see [`Message::thinking`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<Thinking>,
    /// On an assistant message: see [`Message::thinking_ms`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thinking_ms: u64,
    /// On a `files` entry: a checkpoint of the workspace's files ([`super::files`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesRecord>,
    /// On a `rewind` entry: one step of a rewind ([`super::files`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewind: Option<RewindRecord>,
    /// On a `meta` entry: the ACP agent the session runs, and its own id of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentMeta>,
    /// On a `meta` entry: the git worktree the session works in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeMeta>,
    /// On an `acp` entry: what an ACP agent reported that is no message (a plan, a mode or model change, its
    /// usage, a permission it asked and the answer), as the protocol carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acp: Option<serde_json::Value>,
    /// On a `kept` entry: see [`KeptState`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptState>,
}

impl Entry {
    pub fn from_message(m: Message) -> Entry {
        Entry {
            kind: Some(Kind::Message),
            role: Some(m.role),
            content: m.content,
            tool_calls: m.tool_calls,
            tool_result: m.tool_result,
            ts: m.ts,
            interrupted: m.interrupted,
            thinking: m.thinking,
            thinking_ms: m.thinking_ms,
            model: m.model,
            turn: m.turn,
            ..Default::default()
        }
    }

    /// `text` streamed into answer `answer` since its previous checkpoint, starting at byte `at`.
    pub fn checkpoint(answer: &str, at: usize, text: &str, ts: i64) -> Entry {
        Entry {
            kind: Some(Kind::Checkpoint),
            content: text.into(),
            ts,
            answer: answer.into(),
            at: Some(at),
            ..Default::default()
        }
    }

    pub fn replace(reason: &str, messages: Vec<Message>, ts: i64) -> Entry {
        Entry {
            kind: Some(Kind::Replace),
            reason: reason.into(),
            ts,
            count: Some(messages.len()),
            messages: Some(messages),
            ..Default::default()
        }
    }

    /// Where the workspace's git HEAD stood at a turn.
    pub fn meta_git(git: GitHead, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Meta), ts, git: Some(git), ..Default::default() }
    }

    /// The ACP agent a session runs, and its own session id.
    pub fn meta_agent(agent: AgentMeta, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Meta), ts, agent: Some(agent), ..Default::default() }
    }

    /// The git worktree the session works in.
    pub fn meta_worktree(worktree: WorktreeMeta, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Meta), ts, worktree: Some(worktree), ..Default::default() }
    }

    /// `{"type":"acp","acp":{..}}`: an ACP agent's report that is no message.
    pub fn acp(report: serde_json::Value, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Acp), ts, acp: Some(report), ..Default::default() }
    }

    /// `{"type":"kept","kept":{..}}`: where a kept copy stands against its original.
    pub fn kept(state: KeptState, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Kept), ts, kept: Some(state), ..Default::default() }
    }

    /// The tokens one request to `model` cost.
    pub fn usage(model: &str, usage: Usage, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Usage), ts, model: model.into(), usage: Some(usage), ..Default::default() }
    }

    /// `{"type":"title","title":..}`: names the session (`""`: back to the automatic title).
    pub fn title(title: &str, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Title), title: Some(title.into()), ts, ..Default::default() }
    }

    /// `{"type":"pin","pinned":..}`.
    pub fn pin(pinned: bool, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Pin), pinned: Some(pinned), ts, ..Default::default() }
    }

    /// `{"type":"files","files":{..}}`: a checkpoint of the workspace's files.
    pub fn files(record: FilesRecord, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Files), files: Some(record), ts, ..Default::default() }
    }

    /// `{"type":"rewind","rewind":{..}}`: a step of a rewind.
    pub fn rewind(record: RewindRecord, ts: i64) -> Entry {
        Entry { kind: Some(Kind::Rewind), rewind: Some(record), ts, ..Default::default() }
    }

    /// The snapshot a fork starts with: a `replace` (reason `fork`) naming its source.
    pub fn fork(messages: Vec<Message>, from: ForkedFrom, ts: i64) -> Entry {
        Entry { forked_from: Some(from), ..Entry::replace(REASON_FORK, messages, ts) }
    }

    pub fn is(&self, kind: Kind) -> bool {
        self.kind.as_ref() == Some(&kind)
    }

    pub fn is_replace(&self) -> bool {
        self.is(Kind::Replace)
    }

    pub fn is_checkpoint(&self) -> bool {
        self.is(Kind::Checkpoint)
    }

    pub fn is_message(&self) -> bool {
        matches!(self.kind, None | Some(Kind::Message))
    }

    /// The role of a message entry that has one: `None` for other entries and for a message without a
    /// role (or an empty one), which the seed skipped too.
    pub fn message_role(&self) -> Option<&Role> {
        self.role.as_ref().filter(|r| self.is_message() && !r.as_str().is_empty())
    }

    /// The message this entry carries; `None` for replaces, unknown types and entries without a role
    /// (the seed skipped those too).
    pub fn into_message(self) -> Option<Message> {
        let assistant = *self.message_role()? == Role::Assistant;
        Some(Message {
            role: self.role?,
            content: self.content,
            tool_calls: self.tool_calls,
            tool_result: self.tool_result,
            ts: self.ts,
            interrupted: self.interrupted,
            thinking: self.thinking,
            thinking_ms: self.thinking_ms,
            // `model` on another entry is the writer's (its first line) or a usage entry's, not the message's
            model: if assistant { self.model } else { String::new() },
            turn: self.turn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_follow_the_field_order() {
        let line = |e: &Entry| serde_json::to_vec(e).expect("json");
        assert!(line(&Entry::checkpoint("a1", 0, "text", 1)).starts_with(CHECKPOINT_PREFIX));
        assert!(line(&Entry::from_message(Message::assistant("hi"))).starts_with(ASSISTANT_PREFIX));
        assert!(line(&Entry::replace("compact", vec![Message::user("hi")], 1)).starts_with(REPLACE_PREFIX));
    }

    #[test]
    fn seed_lines_parse_with_string_arguments_and_missing_type() {
        let line = r#"{"role":"assistant","tool_calls":[{"id":"c1","name":"read_file","arguments":"{\"path\":\"a.rs\"}"}],"ts":1,"model":"m"}"#;
        let e: Entry = serde_json::from_str(line).unwrap();
        assert!(e.is_message());
        let m = e.into_message().unwrap();
        assert_eq!(m.tool_calls[0].arguments["path"], "a.rs");
    }

    #[test]
    fn roles_and_types_this_version_does_not_know_keep_their_bytes() {
        let tool = r#"{"type":"message","role":"tool","content":"x","ts":1}"#;
        let e: Entry = serde_json::from_str(tool).unwrap();
        assert_eq!(e.message_role(), Some(&Role::Other("tool".into())));
        assert_eq!(serde_json::to_string(&e).unwrap(), tool);
        let m = e.into_message().unwrap();
        assert!(!m.is_user_text());
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"role":"tool","content":"x","ts":1}"#);

        let future = r#"{"type":"bookmark","content":"x","ts":2}"#;
        let e: Entry = serde_json::from_str(future).unwrap();
        assert_eq!(e.kind, Some(Kind::Other("bookmark".into())));
        assert!(!e.is_message() && !e.is_replace());
        assert_eq!(serde_json::to_string(&e).unwrap(), future);

        // The seed's `""` type and a missing one are messages; an empty role is none.
        let e: Entry = serde_json::from_str(r#"{"type":"","role":"user","content":"hi"}"#).unwrap();
        assert_eq!(e.into_message().map(|m| m.role), Some(Role::User));
        let e: Entry = serde_json::from_str(r#"{"role":"","content":"no role"}"#).unwrap();
        assert!(e.into_message().is_none());
    }

    #[test]
    fn arguments_are_written_as_objects() {
        let m =
            Message::assistant_tool_calls("", vec![ToolCall::new("c1", "grep", serde_json::json!({"pattern": "x"}))]);
        let s = serde_json::to_string(&Entry::from_message(m)).unwrap();
        assert!(s.contains(r#""arguments":{"pattern":"x"}"#), "{s}");
    }

    #[test]
    fn checkpoints_have_no_role_and_other_entries_keep_their_bytes() {
        let s = serde_json::to_string(&Entry::checkpoint("a1", 5, "world", 7)).unwrap();
        assert_eq!(s, r#"{"type":"checkpoint","content":"world","ts":7,"answer":"a1","at":5}"#);
        let mut m = Message::assistant("hi");
        m.ts = 3;
        let s = serde_json::to_string(&Entry::from_message(m)).unwrap();
        assert_eq!(s, r#"{"type":"message","role":"assistant","content":"hi","ts":3}"#);
    }

    #[test]
    fn meta_and_usage_entries_are_not_messages() {
        let git = GitHead { branch: "main".into(), commit: "0123abc".into() };
        let s = serde_json::to_string(&Entry::meta_git(git, 4)).unwrap();
        assert_eq!(s, r#"{"type":"meta","ts":4,"git":{"branch":"main","commit":"0123abc"}}"#);
        let u = Usage { input_tokens: 1, output_tokens: 2, cache_read_tokens: 3, cache_write_tokens: 4 };
        let e = Entry::usage("m", u, 5);
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"usage","ts":5,"model":"m","usage":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":3,"cache_write_tokens":4}}"#
        );
        assert!(!e.is_message() && e.into_message().is_none());
    }

    #[test]
    fn a_replace_line_carries_its_reason_time_count_and_snapshot() {
        let mut m = Message::user("kept");
        m.ts = 2;
        let s = serde_json::to_string(&Entry::replace("compact", vec![m], 9)).unwrap();
        assert_eq!(
            s,
            r#"{"type":"replace","reason":"compact","ts":9,"count":1,"messages":[{"role":"user","content":"kept","ts":2}]}"#
        );
    }

    #[test]
    fn meta_entries_are_not_messages() {
        let s = serde_json::to_string(&Entry::title("Parser work", 4)).unwrap();
        assert_eq!(s, r#"{"type":"title","ts":4,"title":"Parser work"}"#);
        let s = serde_json::to_string(&Entry::pin(false, 5)).unwrap();
        assert_eq!(s, r#"{"type":"pin","ts":5,"pinned":false}"#);
        for e in [Entry::title("x", 1), Entry::pin(true, 1)] {
            assert!(!e.is_message() && e.into_message().is_none());
        }
    }
}
