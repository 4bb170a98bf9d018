//! Which of the workspace's folders changed since the last checkpoint, told by the kernel (inotify), so a
//! checkpoint reads those folders instead of walking and stat-ing the whole tree (what git's fsmonitor does
//! for its index).
//!
//! Every folder a scan walks (the ignore rules' choice) gets a watch. The kernel queues an event in the same
//! system call that changes a folder's entry or a file's bytes or mode, so when a tool call (or a command and
//! everything it waited for) returns, all it did is in the queue; a checkpoint drains it without waiting.
//! Design decisions:
//! - Anything the watch cannot vouch for makes the next checkpoint a full scan (with the stat cache): a lost
//!   queue (overflow), an ignore file (`.gitignore`, `.ignore`, `.git/info/exclude`) changed, the
//!   workspace itself moved, a watch that could not be added. Too many folders (over [`MAX_WATCHES`], to leave
//!   the user's own watchers, LSP servers and the like, their share of the per-user limit) or no inotify at
//!   all: no watch, every checkpoint is a full scan.
//! - Events are kept as paths to look at again, never as facts: a folder is listed again, a file stat-ed
//!   again. Seeing too much costs a little time, never a wrong state.
//! - What the watch cannot see (a write through a hard link from outside the workspace, a write through a
//!   shared memory map, a network file system's remote writers) is also what a rewind re-checks before it
//!   writes: such a file is a conflict, never overwritten.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::session::ROOT_DIR_NAME;

/// The most folders one checkpoint tracker watches (the default per-user limit is 8,192 on older
/// kernels; the user's editor and language servers need theirs).
pub const MAX_WATCHES: usize = 4096;

/// What changed since the last checkpoint that consumed it.
#[derive(Debug, Default, Clone)]
pub struct Dirty {
    /// Nothing can be trusted: walk everything.
    pub full: bool,
    /// Folders (workspace-relative, `""` the workspace) whose entries changed: list them again.
    pub dirs: BTreeSet<String>,
    /// Folders created, removed or moved: walk them (and what they hold) again.
    pub trees: BTreeSet<String>,
    /// Files whose bytes or mode changed: stat them again.
    pub files: BTreeSet<String>,
}

pub struct Watch {
    fd: OwnedFd,
    /// Watch descriptor to the folder it watches (workspace-relative).
    dirs: HashMap<i32, String>,
    /// Set when the watch missed something it cannot name (a watch not added): the next checkpoint is full.
    lost: bool,
    /// Seen since the last checkpoint that consumed it.
    dirty: Dirty,
    /// `.git/info/exclude`'s stat: it is outside what is watched.
    exclude: Option<(i64, i64, u64)>,
}

const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_DONT_FOLLOW
    | libc::IN_ONLYDIR
    | libc::IN_EXCL_UNLINK;

impl Watch {
    /// A new, empty watch; `None` where inotify is not available (or the per-user instances are used up).
    pub fn new() -> Option<Watch> {
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(Watch { fd, dirs: HashMap::new(), lost: true, dirty: Dirty::default(), exclude: None })
    }

    /// Watches folder `rel` of `workspace` (before it is listed: nothing created meanwhile is missed).
    /// Returns false when it could not be (too many folders, or the kernel's limit): the watch is lost.
    pub fn add(&mut self, workspace: &Path, rel: &str) -> bool {
        if self.dirs.len() >= MAX_WATCHES {
            self.lost = true;
            return false;
        }
        let path = if rel.is_empty() { workspace.to_path_buf() } else { workspace.join(rel) };
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            self.lost = true;
            return false;
        };
        // SAFETY: a valid descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), MASK) };
        if wd < 0 {
            let e = io::Error::last_os_error();
            // Gone (or replaced by a file) since it was listed: its parent's event names it.
            if !matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) {
                self.lost = true;
            }
            return false;
        }
        // The same folder (inode) watched again gets the same descriptor: its path is the newest.
        self.dirs.insert(wd, rel.to_string());
        true
    }

    /// Whether the watch can tell what changed since the scan that set it up.
    pub fn is_whole(&self) -> bool {
        !self.lost
    }

    /// Starts over for a full scan: everything seen so far is covered by it (the scan [`Watch::add`]s every
    /// folder it walks). Should the scan's record not be logged, [`Watch::lose`] makes the next one full too.
    pub fn restart(&mut self, workspace: &Path) {
        self.drain();
        self.dirty = Dirty::default();
        self.lost = false;
        self.exclude = exclude_stat(workspace);
    }

    /// The next checkpoint is a full scan.
    pub fn lose(&mut self) {
        self.lost = true;
    }

    /// Everything seen since the last [`Watch::consumed`], the queue drained first.
    pub fn changes(&mut self, workspace: &Path) -> Dirty {
        self.drain();
        if exclude_stat(workspace) != self.exclude {
            self.dirty.full = true;
        }
        let mut d = self.dirty.clone();
        d.full |= self.lost;
        d
    }

    /// What a logged checkpoint covered ([`Watch::changes`] it was given) is no longer news.
    pub fn consumed(&mut self, covered: &Dirty) {
        if covered.full {
            return;
        }
        for d in &covered.dirs {
            self.dirty.dirs.remove(d);
        }
        for t in &covered.trees {
            self.dirty.trees.remove(t);
        }
        for f in &covered.files {
            self.dirty.files.remove(f);
        }
    }

    /// Reads every queued event (never waits).
    fn drain(&mut self) {
        let mut buf = [0u8; 16 * 1024];
        loop {
            // SAFETY: reads into a buffer we own, of the length given.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            let mut at = 0usize;
            let n = n as usize;
            let head = std::mem::size_of::<libc::inotify_event>();
            while at + head <= n {
                // SAFETY: the kernel wrote a whole event at `at`; read unaligned.
                let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name_bytes = &buf[at + head..(at + head + ev.len as usize).min(n)];
                let name = &name_bytes[..name_bytes.iter().position(|&b| b == 0).unwrap_or(name_bytes.len())];
                self.event(ev.wd, ev.mask, name);
                at += head + ev.len as usize;
            }
        }
    }

    fn event(&mut self, wd: i32, mask: u32, name: &[u8]) {
        if mask & libc::IN_Q_OVERFLOW != 0 {
            self.dirty.full = true;
            return;
        }
        let Some(dir) = self.dirs.get(&wd).cloned() else { return };
        if mask & libc::IN_IGNORED != 0 {
            self.dirs.remove(&wd);
            if dir.is_empty() {
                self.lost = true;
            }
            return;
        }
        if mask & libc::IN_UNMOUNT != 0 {
            self.dirty.full = true;
            return;
        }
        if name.is_empty() {
            // The folder itself moved or went: its parent's event names it. The workspace itself: start over.
            if dir.is_empty() && mask & (libc::IN_MOVE_SELF | libc::IN_DELETE_SELF) != 0 {
                self.lost = true;
            }
            return;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            // A name the scan cannot hold either (it keeps UTF-8 paths only): nothing to look at.
            return;
        };
        if dir.is_empty() && name == ROOT_DIR_NAME {
            return;
        }
        if name == ".git" || name == ".gitignore" || name == ".ignore" {
            // The ignore rules may have changed (a repository appearing counts: its exclude file applies).
            self.dirty.full = true;
            return;
        }
        let rel = if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
        if mask & libc::IN_ISDIR != 0 {
            self.dirty.trees.insert(rel);
        } else if mask & (libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO) != 0 {
            self.dirty.dirs.insert(dir);
        } else {
            self.dirty.files.insert(rel);
        }
    }
}

/// The stat of the workspace's `.git/info/exclude` (ignore rules the watch does not see change).
fn exclude_stat(workspace: &Path) -> Option<(i64, i64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(workspace.join(".git/info/exclude")).ok()?;
    Some((m.mtime(), m.mtime_nsec(), m.size()))
}
