//! The state of the workspace's files: a walk that honours the workspace's ignore rules (`.gitignore`,
//! `.ignore`, in a repository or not), never enters `.git/` or `.PseudoClaude/`, and skips links.
//!
//! Hashing every file at every checkpoint would cost a 200 MB workspace 200 MB of reading per tool call.
//! So, as git's index does, a stat cache keeps each file's size, modification and change times and inode
//! with its content id: a file whose stat is unchanged is not read again. A file modified within the
//! last two seconds is never cached (its next change could keep the same times: git's "racy clean"). The
//! cache is derived (`.PseudoClaude/objects/stat-cache.json`, written atomically, shared by the
//! workspace's sessions); missing or damaged, the files are hashed again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::{Store, hash_bytes};
use super::watch::{Dirty, Watch};
use crate::atomic::{Durable, Mode};
use crate::session::ROOT_DIR_NAME;

/// Path (workspace-relative, `/`-separated) to content id (see [`crate::session::files`]).
pub type Manifest = BTreeMap<String, String>;

/// Paths whose state changed, each with its state now (`None`: gone or no longer tracked).
pub type Delta = Vec<(String, Option<String>)>;

pub const STAT_CACHE_FILE_NAME: &str = "stat-cache.json";

/// New objects of one checkpoint up to this many bytes in all are copied into its log line (and need no
/// sync of their own); more are synced before the line is written.
pub const INLINE_MAX_BYTES: usize = 256 * 1024;

/// Files over this size are recorded as changed, not kept (the `rewind.max_file_bytes` default).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct StatKey {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
    mode: u32,
}

impl StatKey {
    fn of(m: &fs::Metadata) -> StatKey {
        StatKey {
            size: m.size(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()),
            ino: m.ino(),
            mode: m.mode(),
        }
    }
}

/// The stat cache: what each file's content id was at a stat.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct StatCache {
    files: HashMap<String, (StatKey, String)>,
    #[serde(skip)]
    changed: bool,
}

impl StatCache {
    fn path(workspace: &Path) -> PathBuf {
        workspace.join(ROOT_DIR_NAME).join(super::store::OBJECTS_DIR_NAME).join(STAT_CACHE_FILE_NAME)
    }

    pub fn load(workspace: &Path) -> StatCache {
        fs::read(Self::path(workspace)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// Writes the cache when it changed (temporary file, then rename; not synced: it is derived).
    pub fn save(&mut self, workspace: &Path) {
        if !self.changed {
            return;
        }
        let path = Self::path(workspace);
        let Some(dir) = path.parent() else { return };
        if fs::create_dir_all(dir).is_err() {
            return;
        }
        let ok = serde_json::to_vec(self)
            .map_err(io::Error::other)
            .and_then(|b| crate::atomic::replace(&path, &b, Durable::No, Mode::Keep));
        if ok.is_ok() {
            self.changed = false;
        }
    }

    /// Forgets everything (cleanup removed objects the cache may name).
    pub fn remove(workspace: &Path) {
        let _ = fs::remove_file(Self::path(workspace));
    }
}

/// What a scan needs besides the paths.
pub struct Scanner<'a> {
    pub workspace: &'a Path,
    pub store: &'a Store,
    pub cache: &'a mut StatCache,
    pub max_file_bytes: u64,
    /// Set by the scan when it stored an object (the checkpoint must [`Store::sync`] before logging, unless
    /// they are all in `fresh`).
    pub stored: bool,
    /// The objects the scan stored, with their bytes, while they fit in [`INLINE_MAX_BYTES`]; `None` once
    /// they do not.
    pub fresh: Option<Vec<(String, Vec<u8>)>>,
    /// Check that every object a cached id names is in the store, whole (a session's first checkpoint: its base
    /// must be restorable whatever a cleanup removed or a crash cut short).
    pub verify_store: bool,
}

impl Scanner<'_> {
    /// The whole workspace, plus `extra` paths (files the agent's tools wrote, kept even when ignored) and the
    /// files of `known` (the last state: a file tracked once stays tracked). Every folder walked is added to
    /// `watch`.
    pub fn scan<'p>(
        &mut self,
        extra: impl IntoIterator<Item = &'p String>,
        known: Option<&'p Manifest>,
        mut watch: Option<&mut Watch>,
    ) -> io::Result<Manifest> {
        let mut out = Manifest::new();
        let now_ns = now_ns();
        if let Some(w) = watch.as_deref_mut() {
            w.add(self.workspace, "");
        }
        for rel in walk(self.workspace, "", None, None, watch) {
            if let Some(id) = self.state_of(&rel, now_ns)? {
                out.insert(rel, id);
            }
        }
        for rel in extra.into_iter().chain(known.into_iter().flat_map(|m| m.keys())) {
            if !out.contains_key(rel)
                && let Some(id) = self.state_of(rel, now_ns)?
            {
                out.insert(rel.clone(), id);
            }
        }
        Ok(out)
    }

    /// What changed from `manifest` in the places `dirty` names (and the `extra` paths), as paths with their
    /// state now (`None`: gone, or no longer tracked). The same answer a [`Scanner::scan`] would give there.
    pub fn update(
        &mut self,
        manifest: &Manifest,
        dirty: &Dirty,
        extra: &BTreeSet<String>,
        watch: &mut Watch,
    ) -> io::Result<Delta> {
        let now_ns = now_ns();
        let mut found: BTreeMap<String, Option<String>> = BTreeMap::new();
        // Trees first (a folder created, removed or moved), the outermost only.
        let mut trees: Vec<&String> = Vec::new();
        for t in &dirty.trees {
            if !trees.last().is_some_and(|p| is_under(t, p)) {
                trees.push(t);
            }
        }
        let in_tree = |p: &str| trees.iter().any(|t| is_under(p, t));
        for t in &trees {
            // Walked from its parent, so that the parent's rules decide whether it is ignored.
            let (parent, name) = t.rsplit_once('/').unwrap_or(("", t.as_str()));
            let mut seen = BTreeSet::new();
            for rel in walk(self.workspace, parent, None, Some(name), Some(&mut *watch)) {
                let id = self.state_of(&rel, now_ns)?;
                seen.insert(rel.clone());
                found.insert(rel, id);
            }
            let prefix = format!("{t}/");
            for old in
                manifest.range::<String, _>(prefix.clone()..).map(|(k, _)| k).take_while(|k| k.starts_with(&prefix))
            {
                if !seen.contains(old) {
                    found.insert(old.clone(), self.state_of(old, now_ns)?);
                }
            }
        }
        for d in dirty.dirs.iter().filter(|d| !in_tree(d)) {
            let mut seen = BTreeSet::new();
            for rel in walk(self.workspace, d, Some(1), None, None) {
                let id = self.state_of(&rel, now_ns)?;
                seen.insert(rel.clone());
                found.insert(rel, id);
            }
            let prefix = if d.is_empty() { String::new() } else { format!("{d}/") };
            for old in manifest
                .range::<String, _>(prefix.clone()..)
                .map(|(k, _)| k)
                .take_while(|k| k.starts_with(&prefix))
                .filter(|k| !k[prefix.len()..].contains('/'))
            {
                if !seen.contains(old) {
                    found.insert(old.clone(), self.state_of(old, now_ns)?);
                }
            }
        }
        for f in dirty.files.iter().chain(extra) {
            if !found.contains_key(f) && !in_tree(f) && (manifest.contains_key(f) || extra.contains(f)) {
                found.insert(f.clone(), self.state_of(f, now_ns)?);
            }
        }
        Ok(found.into_iter().filter(|(p, id)| manifest.get(p) != id.as_ref()).collect())
    }

    /// Only `paths`: those whose state now differs from `manifest`'s, with it.
    pub fn rescan<'p>(
        &mut self,
        manifest: &Manifest,
        paths: impl IntoIterator<Item = &'p String>,
    ) -> io::Result<Delta> {
        let now_ns = now_ns();
        let mut out = Delta::new();
        for rel in paths {
            let id = self.state_of(rel, now_ns)?;
            if manifest.get(rel) != id.as_ref() {
                out.push((rel.clone(), id));
            }
        }
        Ok(out)
    }

    fn note_fresh(&mut self, hash: &str) {
        let Some(fresh) = &mut self.fresh else { return };
        let held: usize = fresh.iter().map(|(_, b)| b.len()).sum();
        match self.store.get(hash) {
            Ok(bytes) if held + bytes.len() <= INLINE_MAX_BYTES => fresh.push((hash.to_string(), bytes)),
            _ => self.fresh = None,
        }
    }

    /// The content id of one file; `None` when it is not a regular file (gone, a link, a folder).
    fn state_of(&mut self, rel: &str, now_ns: i64) -> io::Result<Option<String>> {
        if !is_tracked_path(rel) {
            return Ok(None);
        }
        let path = self.workspace.join(rel);
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => m,
            Ok(_) => return Ok(None),
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => return Ok(None),
            Err(e) => return Err(e),
        };
        let key = StatKey::of(&meta);
        if let Some((k, id)) = self.cache.files.get(rel)
            && *k == key
            && (!self.verify_store || id.starts_with("big:") || self.store.size(content_hash(id)) == Some(key.size))
        {
            return Ok(Some(id.clone()));
        }
        let Some((id, stored)) = content_id(&path, &meta, self.max_file_bytes, Some(self.store))? else {
            return Ok(None);
        };
        self.stored |= stored;
        if stored {
            self.note_fresh(content_hash(&id));
        }
        // Racy clean: a file written in the last two seconds could change again within its time stamp's step.
        if key.mtime_ns < now_ns - 2_000_000_000 && key.ctime_ns < now_ns - 2_000_000_000 {
            self.cache.files.insert(rel.to_string(), (key, id.clone()));
            self.cache.changed = true;
        }
        Ok(Some(id))
    }
}

/// The content id of the regular file `path` whose metadata is `meta` (`None`: it went away meanwhile), its bytes
/// put in `store` when one is given (`true`: they were new there). The one place an id is made: a checkpoint's
/// scan and a rewind's check of a file before it writes agree by construction.
pub fn content_id(
    path: &Path,
    meta: &fs::Metadata,
    max_file_bytes: u64,
    store: Option<&Store>,
) -> io::Result<Option<(String, bool)>> {
    let key = StatKey::of(meta);
    if key.size > max_file_bytes {
        return Ok(Some((format!("big:{}:{}", key.size, key.mtime_ns), false)));
    }
    let mut data = Vec::with_capacity(key.size as usize);
    match File::open(path).and_then(|mut f| f.read_to_end(&mut data)) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let hash = hash_bytes(&data);
    let stored = match store {
        Some(store) => store.put(&hash, &data).map_err(io::Error::other)?,
        None => false,
    };
    Ok(Some((if meta.mode() & 0o111 != 0 { format!("{hash}:x") } else { hash }, stored)))
}

/// The object a content id names (`<hash>` of `<hash>:x`); a `big:` id names none.
pub fn content_hash(id: &str) -> &str {
    id.split(':').next().unwrap_or("")
}

/// Whether a content id's file is executable.
pub fn is_exec(id: &str) -> bool {
    id.ends_with(":x")
}

/// Whether a content id's bytes were kept.
pub fn is_restorable(id: &str) -> bool {
    !id.starts_with("big:")
}

/// A relative path a checkpoint may hold: no `..`, not absolute, not in `.git/` or `.PseudoClaude/`.
pub fn is_tracked_path(rel: &str) -> bool {
    let mut first = true;
    for part in rel.split('/') {
        if part.is_empty() || part == "." || part == ".." || part == ".git" || (first && part == ROOT_DIR_NAME) {
            return false;
        }
        first = false;
    }
    !rel.is_empty()
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX)
}

/// Whether `path` is `dir` or inside it (`""` holds everything).
fn is_under(path: &str, dir: &str) -> bool {
    dir.is_empty() || path.strip_prefix(dir).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Every regular file the ignore rules leave in, workspace-relative, under folder `from` (`""`: the
/// workspace) to `depth` levels (`only`: of its entries, only the one of that name); each folder walked is added
/// to `watch` before it is read. Walking a folder applies its parents' ignore files too, so any part of the
/// tree gets the answer a walk of the whole gives.
fn walk(
    workspace: &Path,
    from: &str,
    depth: Option<usize>,
    only: Option<&str>,
    mut watch: Option<&mut Watch>,
) -> Vec<String> {
    let mut out = Vec::new();
    let start = if from.is_empty() { workspace.to_path_buf() } else { workspace.join(from) };
    if !fs::symlink_metadata(&start).is_ok_and(|m| m.is_dir()) {
        return out;
    }
    let ws = workspace.to_path_buf();
    let only = only.map(std::ffi::OsString::from);
    let walker = ignore::WalkBuilder::new(&start)
        .hidden(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(depth)
        .filter_entry(move |e| {
            let name = e.file_name();
            name != ".git"
                && !(name == ROOT_DIR_NAME && e.path().parent() == Some(ws.as_path()))
                && (e.depth() != 1 || only.as_ref().is_none_or(|o| o == name))
        })
        .build();
    for entry in walker.flatten() {
        let Some(t) = entry.file_type() else { continue };
        let Ok(rel) = entry.path().strip_prefix(workspace) else { continue };
        let Some(rel) = rel.to_str() else { continue };
        if t.is_dir() {
            if entry.depth() > 0
                && let Some(w) = watch.as_deref_mut()
            {
                w.add(workspace, rel);
            }
        } else if t.is_file() {
            out.push(rel.to_string());
        }
    }
    out
}
