//! The checkpoints of the workspace's files around a chat's turns ([`crate::rewind`]), for our agent and an ACP
//! agent alike ([`FileCheckpoints`]): taken before each user message and after each tool call that can change files,
//! the rewind itself (and its undo), and the recovery of a rewind the editor died in. Everything here runs on the
//! host's threads; the scans on blocking ones.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{Agent, SessionLog};
use crate::conversation::{Conversation, Unsaved};
use crate::message::{Message, ToolCall, now};
use crate::rewind::calls::{Begun, Board};
use crate::rewind::{Report, RewindOptions, Tracker, restore};
use crate::session::Entry;
use crate::session::files::{BY_AGENT, BY_CHAT, BY_REWIND, BY_USER, FileChange, FilesRecord, RewindItem, RewindRecord};

/// What undoes the last rewind, until the next message.
#[derive(Debug, Clone)]
pub struct Undo {
    pub id: String,
    /// Unix seconds of the rewind.
    pub at: i64,
    messages: Vec<Message>,
    /// The files the rewind changed, from what they were to what it made them.
    applied: Vec<RewindItem>,
    conversation: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One session's checkpoints of the workspace's files and what a rewind needs besides: its log and conversation.
pub struct FileCheckpoints {
    log: Arc<SessionLog>,
    conversation: Arc<Conversation>,
    /// `None` when rewind is off: no checkpoint is taken.
    tracker: Option<Arc<Mutex<Tracker>>>,
    /// What undoes the last rewind, until the next message.
    undo: Mutex<Option<Undo>>,
    /// The workspace's board of the chats' tool calls and this session's number on it (with checkpoints only): which
    /// changes a checkpoint after a call are another chat's ([`crate::rewind::calls`]).
    calls: Option<(Arc<Board>, u64)>,
}

impl FileCheckpoints {
    /// The checkpoints of a session's log and conversation: `tracker` its files' state (new or resumed), `None`
    /// with rewind off.
    pub fn new(
        workspace: &Path,
        log: Arc<SessionLog>,
        conversation: Arc<Conversation>,
        tracker: Option<Tracker>,
    ) -> FileCheckpoints {
        let calls = tracker.is_some().then(|| (Board::of(workspace), crate::rewind::calls::owner()));
        FileCheckpoints {
            log,
            conversation,
            tracker: tracker.map(|t| Arc::new(Mutex::new(t))),
            undo: Mutex::default(),
            calls,
        }
    }

    /// Whether checkpoints are taken.
    pub fn enabled(&self) -> bool {
        self.tracker.is_some()
    }

    /// Adds the user's `message` to the conversation with the checkpoint of the files before it: the message is
    /// logged first (a log starts with what the user said), carrying the checkpoint's `seq` as its `turn`, then the
    /// checkpoint, in the same write and sync. A new message ends the undo of the last rewind.
    pub(crate) async fn add_user_message(&self, message: Message) -> Result<(), Unsaved> {
        let taken = self.checkpoint_before_message().await;
        self.add_after_checkpoint(taken, message)
    }

    /// The second half of [`FileCheckpoints::add_user_message`], once the checkpoint before the message (`taken`,
    /// by [`FileCheckpoints::checkpoint_before_message`]) is: the message and the checkpoint written and synced.
    /// Blocking (a write and its sync).
    pub(crate) fn add_after_checkpoint(&self, taken: Option<FilesRecord>, message: Message) -> Result<(), Unsaved> {
        self.forget_undo();
        let turn = taken.as_ref().map_or(0, |r| r.seq);
        if let Some(record) = &taken {
            self.stage_checkpoint(record, true);
        }
        let added = self.conversation.add(Message { turn, ..message });
        if let Some(record) = taken {
            self.settle_checkpoint(record, added.is_ok());
        }
        added
    }

    /// Runs `f` on the tracker on a blocking thread; `None` when checkpoints are off.
    async fn with_tracker<T: Send + 'static>(&self, f: impl FnOnce(&mut Tracker) -> T + Send + 'static) -> Option<T> {
        let tracker = self.tracker.clone()?;
        tokio::task::spawn_blocking(move || f(&mut lock(&tracker))).await.ok()
    }

    /// Logs `record` and makes it the tracker's last state; on a failed write the tracker forgets it.
    fn log_files(&self, tracker: &mut Tracker, record: FilesRecord) -> Result<(), String> {
        match self.log.append_meta(Entry::files(record.clone(), now())) {
            Ok(()) => {
                tracker.commit(record);
                Ok(())
            }
            Err(e) => {
                tracker.forget();
                Err(e)
            }
        }
    }

    /// The checkpoint before a user message, taken (its objects durable) but not logged: the message goes first,
    /// carrying the record's `seq` as its `turn`, then [`Agent::log_checkpoint`] logs the record. `None`: none taken.
    pub(crate) async fn checkpoint_before_message(&self) -> Option<FilesRecord> {
        if self.tracker.is_none() || self.log.ensure().is_err() {
            return None;
        }
        let taken = self.with_tracker(move |t| t.take(BY_USER, "", None).map_err(|e| e.to_string())).await;
        taken.and_then(Result::ok)
    }

    /// Has a checkpoint's record written with the next message (`after` it: the user's message; before it: a
    /// tool call's result), in the same write and sync; [`Agent::settle_checkpoint`] once the message is added.
    pub(crate) fn stage_checkpoint(&self, record: &FilesRecord, after: bool) {
        self.log.stage(Entry::files(record.clone(), now()), after);
    }

    /// After the message a checkpoint was staged with: `written`, it is logged and becomes the tracker's last
    /// state. A message that went another way (a resync rewrites the history) left it staged: logged on its own.
    pub(crate) fn settle_checkpoint(&self, record: FilesRecord, written: bool) {
        let (before, after) = self.log.take_staged();
        let Some(tracker) = &self.tracker else { return };
        let mut t = lock(tracker);
        if before.is_empty() && after.is_empty() {
            if written { t.commit(record) } else { t.forget() }
        } else {
            let _ = self.log_files(&mut t, record);
        }
    }

    /// A tool call that can change files begins: the other chats of the workspace learn it
    /// ([`crate::rewind::calls`]). `None`: it changes none, or checkpoints are off.
    /// `paths`: what the call can change, as [`FileCheckpoints::after_call`] takes it.
    pub(crate) fn begin_call(&self, paths: Option<Vec<String>>) -> Option<Begun> {
        let (board, owner) = self.calls.as_ref()?;
        Some(board.begin(*owner, paths))
    }

    /// The checkpoint after a tool call that can change files: the one path a write or an edit named,
    /// everything after a command. Returned (and staged before the call's result) only when something changed.
    /// `begun`: the call as [`Agent::begin_call`] noted it; a change another chat's call may have made meanwhile
    /// is marked as that chat's (`by: "chat"`).
    /// `only`: the paths a write or an edit named (workspace-relative), `None` for anything (a command).
    pub(crate) async fn after_call(
        &self,
        id: &str,
        only: Option<Vec<String>>,
        begun: Option<Begun>,
    ) -> Option<FilesRecord> {
        let others = begun.map(Begun::end).unwrap_or_default();
        let id = id.to_string();
        let taken = self
            .with_tracker(move |t| {
                if let Some(paths) = &only {
                    paths.iter().for_each(|p| t.note_written(p));
                }
                let mut record = t.take(BY_AGENT, &id, only.as_deref()).map_err(|e| e.to_string())?;
                for c in &mut record.changes {
                    if others.claim(&c.path, only.as_deref()) {
                        c.by = Some(BY_CHAT.to_string());
                    }
                }
                Ok::<_, String>(record)
            })
            .await;
        let Some(Ok(record)) = taken else { return None };
        if record.changes.is_empty() {
            lock(self.tracker.as_ref().expect("taken")).forget();
            return None;
        }
        self.stage_checkpoint(&record, false);
        Some(record)
    }

    /// The files changed since the session's last checkpoint, by anyone (nothing is logged).
    pub fn changed_since_last(&self) -> Vec<FileChange> {
        let Some(tracker) = &self.tracker else { return Vec::new() };
        let mut t = lock(tracker);
        if t.manifest().is_none() {
            return Vec::new();
        }
        let found = t.take(BY_USER, "", None).map(|r| r.changes).unwrap_or_default();
        t.forget();
        found
    }

    /// The pending undo of the last rewind, if no message came since.
    pub fn undo_info(&self) -> Option<(String, i64)> {
        lock(&self.undo).as_ref().map(|u| (u.id.clone(), u.at))
    }

    /// A new message ends the undo of the last rewind.
    pub(crate) fn forget_undo(&self) {
        *lock(&self.undo) = None;
    }

    /// Rewinds to just before user message `index` (1-based in [`Agent::messages`]). Blocking: call it on a
    /// blocking thread, with no turn running.
    pub fn rewind(&self, index: usize, opts: &RewindOptions) -> Report {
        let history = self.conversation.snapshot();
        let target = match index.checked_sub(1).and_then(|i| history.get(i)) {
            Some(m) if m.is_user_text() => m.clone(),
            Some(_) => return failed(format!("message {index} is not a message you sent")),
            None => return failed(format!("no message {index}: the session has {} messages", history.len())),
        };
        if !opts.code && !opts.conversation {
            return failed("nothing to rewind: both code and conversation are off".into());
        }
        let code = opts.code;
        if code && (self.tracker.is_none() || target.turn == 0) {
            return failed(format!(
                "message {index} has no checkpoint of the files (checkpoints were off, or it was sent by an older \
                 version): rewind the conversation only"
            ));
        }
        let id = format!("{:016x}", rand::random::<u64>());
        let mut report = Report { id: id.clone(), ..Default::default() };
        let mut items = Vec::new();
        let mut tracker_guard = self.tracker.as_ref().map(|t| lock(t));
        if code {
            let t = tracker_guard.as_mut().expect("checked above");
            // The disk as it is now: changes since the last checkpoint are someone else's.
            match t.take(BY_USER, "", None) {
                Ok(mut r) if !r.changes.is_empty() => {
                    r.turn = t.current_turn();
                    if let Err(e) = self.log_files(t, r) {
                        return failed(format!("cannot record the files before rewinding: {e}"));
                    }
                }
                Ok(_) => t.forget(),
                Err(e) => return failed(format!("cannot read the workspace's files: {e}")),
            }
            let now_state = t.manifest().cloned().unwrap_or_default();
            let (plan, conflicts) =
                restore::plan(t.store(), t.records(), target.turn, &now_state, &opts.modified, &opts.force);
            items = plan;
            report.conflicts = conflicts;
        }
        if opts.dry_run {
            report.note_applied(&items);
            report.ok = true;
            return report;
        }
        let begin = RewindRecord {
            id: id.clone(),
            state: "begin".into(),
            index,
            turn: target.turn,
            code,
            conversation: opts.conversation,
            plan: items.clone(),
            conflicts: report.conflicts.clone(),
            ..Default::default()
        };
        if let Err(e) = self.log.append_meta(Entry::rewind(begin, now())) {
            return failed(format!("cannot record the rewind: {e}"));
        }
        let mut applied = Vec::new();
        if let Some(t) = tracker_guard.as_mut() {
            let (done, conflicts) = restore::apply(t.workspace(), t.store(), &items, t.max_file_bytes());
            report.conflicts.extend(conflicts);
            applied = done;
            if let Err(e) = self.log_rewound_files(t, &applied) {
                report.error = Some(e);
            }
        }
        report.note_applied(&applied);
        if opts.conversation {
            if let Err(e) = self.conversation.replace("rewind", history[..index - 1].to_vec()) {
                report.error = Some(e.to_string());
            }
            report.text = target.content.clone();
        }
        let done = RewindRecord {
            id: id.clone(),
            state: "done".into(),
            conflicts: report.conflicts.clone(),
            ..Default::default()
        };
        if let Err(e) = self.log.append_meta(Entry::rewind(done, now())) {
            report.error.get_or_insert(e);
        }
        *lock(&self.undo) = Some(Undo { id, at: now(), messages: history, applied, conversation: opts.conversation });
        report.ok = report.error.is_none();
        report
    }

    /// Undoes the last rewind (files and conversation), with the same conflict rule. Blocking.
    pub fn undo_rewind(&self, opts: &RewindOptions) -> Report {
        let Some(undo) = lock(&self.undo).take() else {
            return failed("there is no rewind to undo (a message was sent since, or none was made)".into());
        };
        let id = format!("{:016x}", rand::random::<u64>());
        let mut report = Report { id: id.clone(), ..Default::default() };
        let inverse: Vec<RewindItem> = undo
            .applied
            .iter()
            .map(|i| RewindItem { path: i.path.clone(), from: i.to.clone(), to: i.from.clone() })
            .filter(|i| !opts.modified.contains(&i.path))
            .collect();
        for p in undo.applied.iter().filter(|i| opts.modified.contains(&i.path)) {
            report
                .conflicts
                .push(crate::session::files::Conflict { path: p.path.clone(), why: restore::WHY_BUFFER.into() });
        }
        let begin = RewindRecord {
            id: id.clone(),
            state: "begin".into(),
            code: !inverse.is_empty(),
            conversation: undo.conversation,
            undo_of: Some(undo.id.clone()),
            plan: inverse.clone(),
            ..Default::default()
        };
        if let Err(e) = self.log.append_meta(Entry::rewind(begin, now())) {
            return failed(format!("cannot record the undo: {e}"));
        }
        if let Some(tracker) = &self.tracker {
            let mut t = lock(tracker);
            let (done, conflicts) = restore::apply(t.workspace(), t.store(), &inverse, t.max_file_bytes());
            report.conflicts.extend(conflicts);
            report.note_applied(&done);
            if let Err(e) = self.log_rewound_files(&mut t, &done) {
                report.error = Some(e);
            }
        }
        if undo.conversation
            && let Err(e) = self.conversation.replace("rewind", undo.messages)
        {
            report.error = Some(e.to_string());
        }
        let done = RewindRecord { id, state: "done".into(), conflicts: report.conflicts.clone(), ..Default::default() };
        if let Err(e) = self.log.append_meta(Entry::rewind(done, now())) {
            report.error.get_or_insert(e);
        }
        report.ok = report.error.is_none();
        report
    }

    /// The `files` entry of what a rewind wrote.
    fn log_rewound_files(&self, t: &mut Tracker, applied: &[RewindItem]) -> Result<(), String> {
        if applied.is_empty() {
            return Ok(());
        }
        let record = t.rewound(applied);
        self.log_files(t, record)
    }

    /// Finishes a rewind the editor died in (its `begin` logged, its `done` not): files still at their
    /// `from` are written, the history is cut if its `replace` never landed. Returns what it did.
    pub(crate) fn recover_rewind(&self, begin: &RewindRecord) -> Report {
        let mut report = Report { id: begin.id.clone(), ..Default::default() };
        if let Some(tracker) = &self.tracker {
            let mut t = lock(tracker);
            let (done, conflicts) = restore::apply(t.workspace(), t.store(), &begin.plan, t.max_file_bytes());
            report.conflicts = conflicts;
            report.note_applied(&done);
            // What the files are now, against the last state the log knows (the `files` entry of the
            // rewind may or may not have landed).
            match t.take(BY_REWIND, "", None) {
                Ok(mut r) if !r.changes.is_empty() => {
                    r.turn = t.current_turn();
                    if let Err(e) = self.log_files(&mut t, r) {
                        report.error = Some(e);
                    }
                }
                Ok(_) => t.forget(),
                Err(e) => report.error = Some(e.to_string()),
            }
        }
        if begin.conversation {
            let history = self.conversation.snapshot();
            let cut = begin.index.saturating_sub(1);
            let still_there = history.get(cut).is_some_and(|m| m.is_user_text() && m.turn == begin.turn);
            if still_there && let Err(e) = self.conversation.replace("rewind", history[..cut].to_vec()) {
                report.error = Some(e.to_string());
            }
        }
        let done = RewindRecord {
            id: begin.id.clone(),
            state: "done".into(),
            conflicts: report.conflicts.clone(),
            recovered: true,
            ..Default::default()
        };
        if let Err(e) = self.log.append_meta(Entry::rewind(done, now())) {
            report.error.get_or_insert(e);
        }
        report.ok = report.error.is_none();
        report
    }

    /// The agent's changes per turn of this session.
    pub fn changes(&self) -> Vec<crate::rewind::TurnChanges> {
        let Some(tracker) = &self.tracker else { return Vec::new() };
        let records = lock(tracker).records().to_vec();
        self.conversation.with_messages(|m| crate::rewind::changes(&records, m))
    }
}

fn failed(error: String) -> Report {
    Report { ok: false, error: Some(error), ..Default::default() }
}

/// A tool's path argument as a checkpoint names it: relative, `/`-separated, without `./`.
fn normalize(p: &str) -> String {
    let p = p.trim_start_matches("./");
    p.split('/').filter(|s| !s.is_empty() && *s != ".").collect::<Vec<_>>().join("/")
}

impl Agent {
    /// What a tool call can change: `Some(None)` anything (a command), `Some(Some(paths))` the path a write or an
    /// edit names; `None`: no file (no checkpoint after it).
    pub(crate) fn call_paths(&self, call: &ToolCall) -> Option<Option<Vec<String>>> {
        match call.name.as_str() {
            "write_file" | "edit_file" => {
                let p = call.arguments.get("path").and_then(|p| p.as_str())?;
                let p = std::path::Path::new(p);
                let rel = p.strip_prefix(self.config.root()).unwrap_or(p);
                Some(Some(vec![normalize(&rel.to_string_lossy())]))
            }
            "run_command" => Some(None),
            _ => None,
        }
    }

    /// Rewinds to just before user message `index` (see [`FileCheckpoints::rewind`]); the reminder that was to go
    /// with the next message goes when the conversation is rewound. Blocking.
    pub fn rewind(&self, index: usize, opts: &RewindOptions) -> Report {
        let report = self.files.rewind(index, opts);
        if opts.conversation && !opts.dry_run && report.ok {
            lock(&self.pending).clear();
        }
        report
    }

    /// Undoes the last rewind (see [`FileCheckpoints::undo_rewind`]). Blocking.
    pub fn undo_rewind(&self, opts: &RewindOptions) -> Report {
        self.files.undo_rewind(opts)
    }

    /// The pending undo of the last rewind, if no message came since.
    pub fn undo_info(&self) -> Option<(String, i64)> {
        self.files.undo_info()
    }

    /// The agent's changes per turn of this session.
    pub fn changes(&self) -> Vec<crate::rewind::TurnChanges> {
        self.files.changes()
    }
}
