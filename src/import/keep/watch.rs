//! The keeper: a thread per workspace that syncs at start, on an inotify event in the stores' folders (after a quiet
//! [`SETTLE`]) and every [`RESCAN`] whatever the watch says; its [`Status`] for `:checkhealth` and the tests.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{RESCAN, Report, SETTLE, keep};
use crate::import::Homes;
use crate::import::list::{ListOptions, list_with};
use crate::message::now;
use crate::session::{self, Result};

/// The workspaces kept by this process, each with its keeper's stop flag.
static KEEPERS: LazyLock<Mutex<HashMap<PathBuf, Arc<AtomicBool>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// What the keeper of a workspace has done so far (for `:checkhealth` and the tests).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    pub running: bool,
    pub syncs: u64,
    /// Unix seconds of the last sync's end (0: none yet).
    pub last_sync: i64,
    pub last: Option<Report>,
    /// Folders watched; 0 with no inotify (then a sync every [`RESCAN`] only).
    pub watched: usize,
}

static STATUS: LazyLock<Mutex<HashMap<PathBuf, Status>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn status_mut<R>(ws: &Path, f: impl FnOnce(&mut Status) -> R) -> R {
    f(STATUS.lock().unwrap_or_else(PoisonError::into_inner).entry(ws.to_path_buf()).or_default())
}

/// The keeper's status for the workspace.
pub fn status(workspace: &Path) -> Status {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    STATUS.lock().unwrap_or_else(PoisonError::into_inner).get(&ws).cloned().unwrap_or_default()
}

/// Starts keeping the workspace's other-agent sessions on a thread of its own (nothing when it is kept already).
/// Returns at once.
pub fn start(workspace: &Path, homes: Homes) -> Result<bool> {
    let ws = workspace.canonicalize().map_err(session::io_err("cannot open the workspace", workspace))?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let mut keepers = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner);
        if keepers.contains_key(&ws) {
            return Ok(false);
        }
        keepers.insert(ws.clone(), stop.clone());
    }
    status_mut(&ws, |s| s.running = true);
    let thread_ws = ws.clone();
    let spawned = std::thread::Builder::new().name("pseudoclaude-keep".into()).spawn(move || {
        let ws = thread_ws;
        // a panic ends the keeper, never the editor
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&ws, &homes, &stop)));
        status_mut(&ws, |s| s.running = false);
        KEEPERS.lock().unwrap_or_else(PoisonError::into_inner).remove(&ws);
    });
    if let Err(e) = spawned {
        KEEPERS.lock().unwrap_or_else(PoisonError::into_inner).remove(&ws);
        status_mut(&ws, |s| s.running = false);
        return Err(session::io_err("cannot start the keeper for", &ws)(e));
    }
    Ok(true)
}

/// Stops the workspace's keeper after the sync under way, if any.
pub fn stop(workspace: &Path) {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    if let Some(flag) = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner).get(&ws) {
        flag.store(true, Ordering::SeqCst);
    }
}

fn run(ws: &Path, homes: &Homes, stop: &AtomicBool) {
    let mut watch = Inotify::new();
    let add_watches = |watch: &mut Option<Inotify>| {
        if let Some(w) = watch {
            for dir in watched_dirs(ws, homes) {
                w.add(&dir);
            }
        }
    };
    // watched before the first sync too: a turn written while it reads is then an event, not a wait for the rescan
    add_watches(&mut watch);
    loop {
        let report = keep(ws, homes);
        // and after each: a folder made meanwhile (a new day's, a new project's)
        add_watches(&mut watch);
        status_mut(ws, |s| {
            s.syncs += 1;
            s.last_sync = now();
            s.last = Some(report);
            s.watched = watch.as_ref().map_or(0, |w| w.dirs.len());
        });
        // wait for a change (or the rescan), then for the stores to be quiet
        let deadline = Instant::now() + RESCAN;
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let step = left.min(Duration::from_millis(250));
            let changed = match &mut watch {
                Some(w) => w.wait(step),
                None => {
                    std::thread::sleep(step);
                    false
                }
            };
            if changed {
                // quiet for SETTLE, but never more than a second: an agent busy for minutes is still followed
                let until = Instant::now() + Duration::from_secs(1);
                while Instant::now() < until && watch.as_mut().is_some_and(|w| w.wait(SETTLE)) {}
                break;
            }
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
    }
}

/// The folders whose changes may change what [`keep`] copies: each store's root, and every folder on the way from
/// it to the workspace's sessions (where a new session's file, or a new day's folder, appears).
pub fn watched_dirs(ws: &Path, homes: &Homes) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let roots = store_roots(homes);
    for r in &roots {
        dirs.push(r.clone());
    }
    if let Some(claude) = &homes.claude {
        let projects = claude.join("projects");
        let prefix = crate::import::claude_code::folder_name(ws);
        if let Ok(entries) = std::fs::read_dir(&projects) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    dirs.push(e.path());
                }
            }
        }
    }
    if let Some(codex) = &homes.codex {
        // sessions/YYYY/MM/DD: every year and month folder (a new day's folder appears in them), and the days
        let mut level = vec![codex.join("sessions")];
        for _ in 0..3 {
            let mut next = Vec::new();
            for d in &level {
                if let Ok(entries) = std::fs::read_dir(d) {
                    next.extend(
                        entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()),
                    );
                }
            }
            dirs.extend(next.iter().cloned());
            level = next;
        }
    }
    for item in list_with(ws, homes, &ListOptions { quick: true, ..Default::default() }) {
        dirs.extend(item.path.parent().map(Path::to_path_buf));
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The folder of each store where a new session (or the folder that will hold it) appears.
pub fn store_roots(homes: &Homes) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(claude) = &homes.claude {
        roots.push(claude.join("projects"));
    }
    if let Some(codex) = &homes.codex {
        roots.push(codex.join("sessions"));
    }
    if let Some(gemini) = &homes.gemini {
        roots.push(gemini.join("tmp"));
    }
    if let Some(qwen) = &homes.qwen {
        roots.push(qwen.join("projects"));
    }
    if let Some(opencode) = &homes.opencode {
        roots.push(opencode.clone());
    }
    if let Some(pi) = &homes.pi {
        roots.push(pi.join("sessions"));
    }
    roots
}

/// An inotify instance watching folders (not their trees): any event is "look again".
struct Inotify {
    fd: std::os::fd::OwnedFd,
    dirs: HashSet<PathBuf>,
}

impl Inotify {
    fn new() -> Option<Inotify> {
        use std::os::fd::FromRawFd;
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a descriptor we just opened and own.
        Some(Inotify { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }, dirs: HashSet::new() })
    }

    /// Watches `dir` (once); a folder that does not exist yet is tried again at the next sync.
    fn add(&mut self, dir: &Path) {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        if self.dirs.contains(dir) {
            return;
        }
        let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return };
        let mask = libc::IN_CREATE
            | libc::IN_MODIFY
            | libc::IN_CLOSE_WRITE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | libc::IN_ONLYDIR;
        // SAFETY: a valid descriptor and a NUL-terminated path.
        if unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) } >= 0 {
            self.dirs.insert(dir.to_path_buf());
        }
    }

    /// Waits up to `timeout` for events; true when there were some (all drained).
    fn wait(&mut self, timeout: Duration) -> bool {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
        if n <= 0 {
            return false;
        }
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            // SAFETY: reading into a buffer we own, of its length.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if r <= 0 {
                break;
            }
            any |= events(&buf[..r as usize]).any(|name| !is_readers_file(name));
        }
        any
    }
}

/// The names of the events in what one `read` of an inotify descriptor returned (a folder's own event: empty).
fn events(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + HEAD > buf.len() {
            return None;
        }
        // the event's `len` (of its NUL-padded name) is its last field
        let len = u32::from_ne_bytes(buf[at + HEAD - 4..at + HEAD].try_into().ok()?) as usize;
        let name = buf.get(at + HEAD..at + HEAD + len)?;
        at += HEAD + len;
        Some(name.split(|b| *b == 0).next().unwrap_or_default())
    })
}

/// SQLite's shared-memory index (`opencode.db-shm`): every reader of a database in WAL mode, ours included, writes
/// it (the first one to open truncates it). A change there is no change of a session: watching it would make each
/// sync of opencode's sessions wake the next.
fn is_readers_file(name: &[u8]) -> bool {
    name.ends_with(b"-shm")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_events_of_one_read_are_split_by_their_names() {
        let mut buf = Vec::new();
        for name in ["opencode.db-shm", "opencode.db-wal", ""] {
            let padded = if name.is_empty() { 0 } else { (name.len() + 1).div_ceil(16) * 16 };
            let head = libc::inotify_event { wd: 1, mask: libc::IN_MODIFY, cookie: 0, len: padded as u32 };
            // SAFETY: a plain C struct of integers, read as its bytes.
            buf.extend_from_slice(unsafe {
                std::slice::from_raw_parts(
                    (&head as *const libc::inotify_event).cast::<u8>(),
                    std::mem::size_of_val(&head),
                )
            });
            let mut n = name.as_bytes().to_vec();
            n.resize(padded, 0);
            buf.extend_from_slice(&n);
        }
        let names: Vec<&[u8]> = events(&buf).collect();
        assert_eq!(names, [&b"opencode.db-shm"[..], b"opencode.db-wal", b""]);
        assert!(is_readers_file(names[0]) && !is_readers_file(names[1]) && !is_readers_file(names[2]));
    }
}
