//! One session's checkpoints: the files' state at the last one (its manifest), the session's `files`
//! records so far, and the paths the agent's file tools wrote (tracked even when ignored).
//!
//! A session's first checkpoint stores the whole tree once (its `base`, an object holding the
//! manifest); every later one records only what changed. On resume the manifest is rebuilt from the
//! base and the changes, so "what changed since" compares the disk with the session's own last state.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::scan::{Delta, Manifest, Scanner, StatCache, content_hash, is_restorable};
use super::store::{Store, hash_bytes};
use super::watch::{Dirty, Watch};
use crate::session::files::{BY_AGENT, BY_REWIND, BY_USER, FileChange, FilesRecord, RewindItem};

pub struct Tracker {
    workspace: PathBuf,
    store: Store,
    cache: StatCache,
    max_file_bytes: u64,
    /// The files' state at the last checkpoint; `None` before the session's first.
    manifest: Option<Manifest>,
    /// The session's records, in order.
    records: Vec<FilesRecord>,
    /// Paths the agent's file tools wrote: tracked even when the ignore rules leave them out.
    written: BTreeSet<String>,
    /// The state a checkpoint taken but not yet committed found.
    pending: Option<Pending>,
    /// What changed since the last checkpoint, as the kernel tells it; `None`: every checkpoint walks the tree.
    watch: Option<Watch>,
    /// The highest seq handed out: a user message may carry one whose record never reached the log.
    issued: u64,
}

impl Tracker {
    pub fn new(workspace: &Path, max_file_bytes: u64) -> Tracker {
        Tracker {
            workspace: workspace.to_path_buf(),
            store: Store::new(workspace),
            cache: StatCache::load(workspace),
            max_file_bytes,
            manifest: None,
            records: Vec::new(),
            written: BTreeSet::new(),
            pending: None,
            watch: Watch::new(),
            issued: 0,
        }
    }

    /// The tracker of a resumed session: its manifest rebuilt from the log's records. `last_turn`: the
    /// highest `turn` a message of the history carries (its record may have been lost).
    pub fn resume(workspace: &Path, max_file_bytes: u64, records: Vec<FilesRecord>, last_turn: u64) -> Tracker {
        let mut t = Tracker::new(workspace, max_file_bytes);
        let mut records = records;
        restore_copies(&t.store, &mut records);
        t.issued = last_turn;
        t.manifest = rebuild(&t.store, &records);
        for r in &records {
            for c in &r.changes {
                if r.by == BY_AGENT {
                    t.written.insert(c.path.clone());
                }
            }
        }
        t.records = records;
        t
    }

    /// Drops the watch: every checkpoint walks the tree (with the stat cache). For the benchmark's row of a
    /// full scan.
    pub fn unwatched(mut self) -> Tracker {
        self.watch = None;
        self
    }

    /// Whether checkpoints are told what changed (an inotify watch holds) rather than walking the tree.
    pub fn is_watching(&self) -> bool {
        self.watch.as_ref().is_some_and(|w| w.is_whole())
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn records(&self) -> &[FilesRecord] {
        &self.records
    }

    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// The seq the next checkpoint gets.
    fn next_seq(&self) -> u64 {
        self.records.last().map_or(0, |r| r.seq).max(self.issued) + 1
    }

    /// The turn the next agent checkpoint belongs to: the seq of the last checkpoint taken before a message.
    pub fn current_turn(&self) -> u64 {
        self.records.iter().rev().find(|r| r.by == BY_USER && r.turn == r.seq).map_or(0, |r| r.seq)
    }

    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// The record of what a rewind wrote (`from` → `to` of each item now at its `to`); commit it once logged.
    pub fn rewound(&mut self, applied: &[RewindItem]) -> FilesRecord {
        let mut delta = Delta::new();
        let mut changes = Vec::new();
        for i in applied {
            delta.push((i.path.clone(), i.to.clone()));
            changes.push(FileChange {
                path: i.path.clone(),
                before: i.from.clone(),
                after: i.to.clone(),
                added: 0,
                removed: 0,
                by: None,
            });
        }
        self.pending = Some(Pending { state: State::Delta(delta), covered: None, unchanged: false });
        FilesRecord {
            seq: self.next_seq(),
            turn: self.current_turn(),
            by: BY_REWIND.into(),
            changes,
            ..Default::default()
        }
    }

    /// Notes a path a file tool of the agent wrote (so it is tracked even when ignored).
    pub fn note_written(&mut self, rel: &str) {
        if super::scan::is_tracked_path(rel) {
            self.written.insert(rel.to_string());
        }
    }

    /// A checkpoint of the whole workspace, `by` whom the changes since the last one were made. The
    /// objects it names are durable when it returns; the caller logs the record, then [`Tracker::commit`]s it.
    pub fn take(&mut self, by: &str, call: &str, only: Option<&[String]>) -> crate::session::Result<FilesRecord> {
        let first = self.manifest.is_none();
        let mut scanner = Scanner {
            workspace: &self.workspace,
            store: &self.store,
            cache: &mut self.cache,
            max_file_bytes: self.max_file_bytes,
            stored: false,
            fresh: Some(Vec::new()),
            verify_store: first,
        };
        let io = |e: std::io::Error| crate::session::Error::Io {
            action: "cannot checkpoint the workspace's files in".into(),
            path: self.workspace.clone(),
            source: e,
        };
        // A write or an edit: the one path. Otherwise the places the watch names, or the whole tree.
        let dirty = match (&self.manifest, &mut self.watch) {
            (Some(_), Some(w)) if only.is_none() => Some(w.changes(&self.workspace)).filter(|d| !d.full),
            _ => None,
        };
        let (state, covered) = match (only, &self.manifest, dirty, &mut self.watch) {
            (Some(paths), Some(m), _, _) => (State::Delta(scanner.rescan(m, paths.iter()).map_err(io)?), None),
            (None, Some(m), Some(dirty), Some(w)) => {
                (State::Delta(scanner.update(m, &dirty, &self.written, w).map_err(io)?), Some(dirty))
            }
            (_, known, _, watch) => {
                if let Some(w) = watch.as_mut() {
                    w.restart(&self.workspace);
                }
                let now = scanner.scan(self.written.iter(), known.as_ref(), watch.as_mut()).map_err(io)?;
                // A watch that missed folders (too many, or the kernel's limit) holds watches for nothing.
                if watch.as_ref().is_some_and(|w| !w.is_whole()) {
                    *watch = None;
                }
                (State::Full(now), None)
            }
        };
        let mut stored = scanner.stored;
        let fresh = scanner.fresh.take();
        let seq = self.next_seq();
        if by == BY_USER {
            self.issued = seq;
        }
        let mut record = FilesRecord {
            seq,
            turn: if by == BY_USER { seq } else { self.current_turn() },
            by: by.to_string(),
            call: call.to_string(),
            ..Default::default()
        };
        match (&self.manifest, &state) {
            (None, State::Full(now)) => {
                let bytes = serde_json::to_vec(now).map_err(|e| crate::session::Error::Invalid(e.to_string()))?;
                let hash = hash_bytes(&bytes);
                stored |= self.store.put(&hash, &bytes)?;
                record.base = Some(hash);
            }
            (None, State::Delta(_)) => unreachable!("a first checkpoint walks the tree"),
            (Some(before), State::Full(now)) => record.changes = diff(&self.store, before, now),
            (Some(before), State::Delta(delta)) => {
                record.changes = delta
                    .iter()
                    .map(|(path, id)| change(&self.store, path, before.get(path).cloned(), id.clone()))
                    .collect();
                record.changes.sort_by(|a, b| a.path.cmp(&b.path));
            }
        }
        // Small new objects ride in the record's line (its own sync makes them durable); a base, or more, is
        // synced now, before the line that names it is written.
        match fresh {
            Some(fresh) if stored && record.base.is_none() => {
                use base64::Engine;
                let b64 = base64::engine::general_purpose::STANDARD;
                record.copies = fresh.into_iter().map(|(h, bytes)| (h, b64.encode(bytes))).collect();
            }
            _ if stored => self.store.sync()?,
            _ => {}
        }
        self.cache.save(&self.workspace);
        let unchanged = record.base.is_none() && record.changes.is_empty();
        self.pending = Some(Pending { state, covered, unchanged });
        Ok(record)
    }
}

impl Tracker {
    /// The record was logged: its state is the session's last.
    pub fn commit(&mut self, mut record: FilesRecord) {
        record.copies.clear();
        if let Some(p) = self.pending.take() {
            match p.state {
                State::Full(m) => self.manifest = Some(m),
                State::Delta(delta) => {
                    let m = self.manifest.get_or_insert_default();
                    for (path, id) in delta {
                        match id {
                            Some(id) => m.insert(path, id),
                            None => m.remove(&path),
                        };
                    }
                }
            }
            if let (Some(covered), Some(w)) = (&p.covered, &mut self.watch) {
                w.consumed(covered);
            }
        }
        self.records.push(record);
    }

    /// The record was not logged (or had nothing to say): the next checkpoint compares with the last logged
    /// state again.
    pub fn forget(&mut self) {
        let Some(p) = self.pending.take() else { return };
        match (&p.state, &p.covered, &mut self.watch) {
            // Nothing changed there: the last logged state still holds for what the watch told.
            (_, Some(covered), Some(w)) if p.unchanged => w.consumed(covered),
            // A full scan restarted the watch: what it found must be found again.
            (State::Full(_), _, Some(w)) if !p.unchanged => w.lose(),
            _ => {}
        }
    }
}

/// A checkpoint taken, not yet logged.
struct Pending {
    state: State,
    /// What the watch told that this checkpoint looked at.
    covered: Option<Dirty>,
    /// It found no change.
    unchanged: bool,
}

/// The files' state a checkpoint found: whole, or what changed from the last.
enum State {
    Full(Manifest),
    Delta(Delta),
}

/// Puts back the objects a crash took before they reached the disk, from the copies in the records that name
/// them (then drops the copies: the store has them). Never fails: an object that cannot be put back is "not
/// restorable" where a rewind needs it.
fn restore_copies(store: &Store, records: &mut [FilesRecord]) {
    use base64::Engine;
    let mut put = false;
    for r in records.iter_mut() {
        for (hash, b64) in std::mem::take(&mut r.copies) {
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64.as_bytes()) else { continue };
            if store.size(&hash) != Some(bytes.len() as u64) && hash_bytes(&bytes) == hash {
                put |= store.put(&hash, &bytes).unwrap_or(false);
            }
        }
    }
    if put {
        let _ = store.sync();
    }
}

/// The changes from `before` to `after`, each with its lines added and removed.
pub fn diff(store: &Store, before: &Manifest, after: &Manifest) -> Vec<FileChange> {
    let mut out = Vec::new();
    for (path, id) in after {
        match before.get(path) {
            Some(old) if old == id => {}
            old => out.push(change(store, path, old.cloned(), Some(id.clone()))),
        }
    }
    for (path, id) in before {
        if !after.contains_key(path) {
            out.push(change(store, path, Some(id.clone()), None));
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Texts over this size are not diffed for their line counts (a change to them counts as 0 and 0).
const LINE_COUNT_LIMIT: usize = 4 << 20;

fn change(store: &Store, path: &str, before: Option<String>, after: Option<String>) -> FileChange {
    let text = |id: &Option<String>| -> Option<String> {
        match id {
            None => Some(String::new()),
            Some(id) if !is_restorable(id) => None,
            Some(id) => {
                let data = store.get(content_hash(id)).ok()?;
                if data.len() > LINE_COUNT_LIMIT || data.contains(&0) {
                    return None;
                }
                String::from_utf8(data).ok()
            }
        }
    };
    let (added, removed) = match (text(&before), text(&after)) {
        (Some(a), Some(b)) => line_counts(&a, &b),
        _ => (0, 0),
    };
    FileChange { path: path.to_string(), before, after, added, removed, by: None }
}

/// Lines added and removed from `a` to `b`.
pub fn line_counts(a: &str, b: &str) -> (u64, u64) {
    let diff = similar::TextDiff::from_lines(a, b);
    let (mut added, mut removed) = (0, 0);
    for c in diff.iter_all_changes() {
        match c.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

/// The state at the last of `records`: the first base, then every change applied in order. `None`
/// without a base (no checkpoint, or its object lost: the next checkpoint starts a new base).
pub fn rebuild(store: &Store, records: &[FilesRecord]) -> Option<Manifest> {
    let mut manifest: Option<Manifest> = None;
    for r in records {
        if let Some(base) = &r.base {
            manifest = store.get(base).ok().and_then(|b| serde_json::from_slice(&b).ok());
        }
        let Some(m) = &mut manifest else { continue };
        for c in &r.changes {
            match &c.after {
                Some(id) => m.insert(c.path.clone(), id.clone()),
                None => m.remove(&c.path),
            };
        }
    }
    manifest
}
