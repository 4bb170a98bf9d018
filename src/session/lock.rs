//! One writer per session: an advisory lock on `<session>/lock`, held while a writer is open.
//!
//! The lock is `flock(2)` (through `std::fs::File::try_lock`), so the kernel drops it when the holder
//! dies: a crashed Neovim never blocks its session. The file also says who holds it (pid, host, since),
//! so a second editor is refused with an error that names the first.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::thread;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::contain::{self, Access, Dir};
use super::{Context, Error, LOCK_FILE_NAME, Result, io_err};

/// Who holds a lock, as written into the lock file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    pub since: i64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let since = chrono::DateTime::from_timestamp(self.since, 0)
            .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default();
        write!(f, "pid {} on {}, since {since}", self.pid, self.host)
    }
}

/// Held while alive; dropping it (or the process dying) releases the lock.
#[derive(Debug)]
pub struct Guard {
    _file: File,
}

/// A listing or a cleanup holds the lock for an instant to test it; retrying briefly keeps such a
/// probe from making an editor's open fail.
const ATTEMPTS: u32 = 5;
const RETRY_DELAY: Duration = Duration::from_millis(20);

/// Takes the session's lock or says who has it.
pub fn acquire(ctx: &Context) -> Result<Guard> {
    let path = ctx.lock_path();
    // A linked lock (or session folder) is refused: the lock is written, and must not land outside.
    let mut file = contain::open(ctx, LOCK_FILE_NAME, Access::ReadWriteCreate)?;
    for attempt in 1..=ATTEMPTS {
        match file.try_lock() {
            Ok(()) => {
                let me = Holder { pid: std::process::id(), host: hostname(), since: crate::message::now() };
                let body = serde_json::to_vec(&me).unwrap_or_default();
                // Who holds it is advice for error messages; failing to write it must not fail the open.
                let _ = file.set_len(0).and_then(|_| file.rewind()).and_then(|_| file.write_all(&body));
                return Ok(Guard { _file: file });
            }
            Err(std::fs::TryLockError::WouldBlock) if attempt < ATTEMPTS => thread::sleep(RETRY_DELAY),
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Locked { id: ctx.id.clone(), holder: describe_holder(&mut file) });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err("cannot lock", &path)(e)),
        }
    }
    unreachable!("the last attempt returns")
}

/// Who holds the session's lock right now, or `None` when nobody does. Never creates a lock file.
pub fn holder(ctx: &Context) -> Option<String> {
    holder_in(&Dir::session(ctx).ok()?)
}

/// [`holder`], for a session folder already open (the list has one for each session).
pub(crate) fn holder_in(dir: &Dir) -> Option<String> {
    let mut file = dir.open(LOCK_FILE_NAME, Access::ReadWrite).ok()?;
    match file.try_lock() {
        Ok(()) => None, // released when `file` drops
        Err(_) => Some(describe_holder(&mut file)),
    }
}

/// One lock `/proc/locks` lists: the locked file's device as the kernel numbers its file system (`MAJOR:MINOR`, as
/// `/proc/self/mountinfo` does, and `stat` may not: a btrfs subvolume reports a device of its own) and inode, and
/// who took it (0 or less: a process outside this PID namespace, or an OFD lock, which has no owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Locked {
    pub dev: (u32, u32),
    pub ino: u64,
    pub pid: i32,
}

/// The locks held on this machine, from `/proc/locks` (one read of a short file); `None` when it cannot be read or
/// understood, and the caller then asks every lock file.
///
/// It is a filter, never the answer: a lock file it points at is still asked ([`holder_in`]), so an inode number of
/// another file system only costs that question. What it can miss: a lock held by a process of another PID namespace
/// (a container sharing the folder), which the kernel leaves out of this process's view; the list then shows that
/// session as free, and a resume of it is still refused by [`acquire`].
pub(crate) fn locks() -> Option<Vec<Locked>> {
    parse_locks(&std::fs::read_to_string("/proc/locks").ok()?)
}

/// [`locks`] of `/proc/locks`'s text: `1: FLOCK  ADVISORY  WRITE 4242 fd:00:1234567 0 EOF` (a waiter has `->` after
/// the number), the device in hexadecimal, the holder's pid just before it. A line not understood fails it whole.
fn parse_locks(text: &str) -> Option<Vec<Locked>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let (at, (major, minor, ino)) = fields.iter().enumerate().find_map(|(i, f)| {
            let mut parts = f.split(':');
            let (major, minor, ino, rest) = (parts.next()?, parts.next()?, parts.next()?, parts.next());
            let parsed =
                (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?, ino.parse().ok()?);
            rest.is_none().then_some((i, parsed))
        })?;
        let pid = fields.get(at.checked_sub(1)?)?.parse::<i32>().ok()?;
        out.push(Locked { dev: (major, minor), ino, pid });
    }
    Some(out)
}

/// The sessions whose lock file some process holds now, among `locks`, told by the path the holder opened it by
/// (`…/<id>/lock`, read from `/proc/PID/fd`): what tells the list which session folders that had no lock file when
/// their row was made (copied in, made by a script, the seed's layout) got one since and are held, without opening
/// every such folder at every list. `device`: the one the sessions' file system has in `/proc/locks`
/// ([`lock_device`]); a lock elsewhere is no session's. `None` when a lock on it cannot be explained (its holder's
/// descriptors unreadable, another user's process, or none of them the locked file): then each such session is asked.
/// `open_files(pid)` is [`open_files`] (a test gives its own).
pub(crate) fn held_sessions(
    locks: &[Locked],
    device: Option<(u32, u32)>,
    mut open_files: impl FnMut(i32) -> Option<Vec<(u64, std::path::PathBuf)>>,
) -> Option<std::collections::HashSet<String>> {
    let mut ids = std::collections::HashSet::new();
    let mut tables: std::collections::HashMap<i32, Option<Vec<(u64, std::path::PathBuf)>>> = Default::default();
    for lock in locks {
        if device.is_some_and(|d| d != lock.dev) {
            continue;
        }
        let table = tables.entry(lock.pid).or_insert_with(|| (lock.pid > 0).then(|| open_files(lock.pid)).flatten());
        let mut found = false;
        for (_, path) in table.as_ref()?.iter().filter(|(ino, _)| *ino == lock.ino) {
            found = true;
            let id = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str());
            if let Some(id) = id.filter(|_| path.file_name().is_some_and(|n| n == LOCK_FILE_NAME)) {
                ids.insert(id.to_string());
            }
        }
        // A lock its taker no longer has open (a child holding the descriptor it inherited): unexplained.
        if !found {
            return None;
        }
    }
    Some(ids)
}

/// The files process `pid` has open, each by inode and the path it was opened by (`/proc/PID/fd`); `None` when they
/// cannot be read (another user's process, or gone).
pub(crate) fn open_files(pid: i32) -> Option<Vec<(u64, std::path::PathBuf)>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for ent in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        // A descriptor closed meanwhile is no lock of its.
        if let (Ok(meta), Ok(path)) = (std::fs::metadata(ent.path()), std::fs::read_link(ent.path())) {
            out.push((meta.ino(), path));
        }
    }
    Some(out)
}

/// The device `/proc/locks` gives the files beneath `dir` (the `MAJOR:MINOR` of its mount in `/proc/self/mountinfo`,
/// found by the mount's id, `statx`'s `STATX_MNT_ID`); `None` when the kernel cannot say (before Linux 5.8).
pub(crate) fn lock_device(dir: &Dir) -> Option<(u32, u32)> {
    let mount = dir.mount_id()?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`: the id, its parent's, the device (decimal)
    text.lines().find_map(|line| {
        let mut f = line.split_ascii_whitespace();
        if f.next()?.parse::<u64>().ok()? != mount {
            return None;
        }
        let (major, minor) = f.nth(1)?.split_once(':')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    })
}

fn describe_holder(file: &mut File) -> String {
    let mut s = String::new();
    let _ = file.rewind().and_then(|_| file.read_to_string(&mut s));
    match serde_json::from_str::<Holder>(&s) {
        Ok(h) if h.pid == std::process::id() && h.host == hostname() => format!("{h}: this editor"),
        Ok(h) => h.to_string(),
        Err(_) => "an unknown process".into(),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock file's descriptor, as another process (or the list's probe) would hold it.
    fn hold(ctx: &Context) -> File {
        let f = std::fs::OpenOptions::new().read(true).write(true).open(ctx.lock_path()).unwrap();
        f.try_lock().unwrap();
        f
    }

    #[test]
    fn a_lock_held_for_an_instant_is_waited_for_not_refused() {
        let ws = tempfile::tempdir().unwrap();
        let ctx = Context::new(ws.path()).unwrap();
        drop(acquire(&ctx).unwrap());
        let probe = hold(&ctx);
        // Released after two retries' worth of waiting: the open must wait for it, not fail.
        let release = thread::spawn(move || {
            thread::sleep(RETRY_DELAY * 2);
            drop(probe);
        });
        let guard = acquire(&ctx);
        release.join().unwrap();
        assert!(guard.is_ok(), "{:?}", guard.err());
    }

    #[test]
    fn a_lock_held_past_the_retries_is_refused_naming_the_holder() {
        let ws = tempfile::tempdir().unwrap();
        let ctx = Context::new(ws.path()).unwrap();
        drop(acquire(&ctx).unwrap()); // the file now names this process
        let _held = hold(&ctx);
        match acquire(&ctx) {
            Err(Error::Locked { id, holder }) => {
                assert_eq!(id, ctx.id);
                assert!(holder.ends_with(": this editor"), "{holder}");
            }
            other => panic!("expected Locked, got {other:?}"),
        }
    }

    #[test]
    fn the_lock_file_names_this_process_and_this_machine() {
        let ws = tempfile::tempdir().unwrap();
        let ctx = Context::new(ws.path()).unwrap();
        let before = crate::message::now();
        let _guard = acquire(&ctx).unwrap();
        let after = crate::message::now();
        let written: Holder = serde_json::from_slice(&std::fs::read(ctx.lock_path()).unwrap()).unwrap();
        // The machine's name as the C library tells it, not through the code under test.
        let mut buf = [0u8; 256];
        assert_eq!(unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) }, 0);
        let host = std::ffi::CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap();
        assert_eq!((written.pid, written.host.as_str()), (std::process::id(), host));
        assert!((before..=after).contains(&written.since), "since is the moment it was taken: {}", written.since);
    }

    #[test]
    fn another_process_holding_the_lock_is_named_as_itself() {
        let ws = tempfile::tempdir().unwrap();
        let ctx = Context::new(ws.path()).unwrap();
        drop(acquire(&ctx).unwrap());
        let other = Holder { pid: std::process::id() + 1, host: hostname(), since: 0 };
        std::fs::write(ctx.lock_path(), serde_json::to_vec(&other).unwrap()).unwrap();
        let _held = hold(&ctx);
        let named = holder(&ctx).expect("held");
        assert_eq!(named, other.to_string(), "another pid is not this editor");
        std::fs::write(ctx.lock_path(), b"not json").unwrap();
        assert_eq!(holder(&ctx).as_deref(), Some("an unknown process"));
    }

    #[test]
    fn proc_locks_lines_give_device_inode_and_taker_and_a_line_not_understood_fails_them_all() {
        let text = "1: FLOCK  ADVISORY  WRITE 4242 fd:00:1234567 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 4243 fd:00:1234567 0 EOF\n\
                    2: OFDLCK ADVISORY  READ  -1 00:1a:77 0 EOF\n";
        let want = [
            Locked { dev: (0xfd, 0), ino: 1234567, pid: 4242 },
            Locked { dev: (0xfd, 0), ino: 1234567, pid: 4243 },
            Locked { dev: (0, 0x1a), ino: 77, pid: -1 },
        ];
        assert_eq!(parse_locks(text), Some(want.to_vec()));
        assert_eq!(parse_locks("1: FLOCK ADVISORY WRITE 4242 fd:00 0 EOF\n"), None);
        assert!(locks().is_some(), "this machine's /proc/locks is understood");
    }

    #[test]
    fn a_lock_is_a_sessions_by_the_path_its_holder_opened_it_by_and_an_unexplained_one_asks_all() {
        use std::path::PathBuf;
        let lock = |dev, ino, pid| Locked { dev: (dev, 0), ino, pid };
        let table = |pid: i32| -> Option<Vec<(u64, PathBuf)>> {
            match pid {
                10 => Some(vec![
                    (5, PathBuf::from("/w/.PseudoClaude/sessions/20261207-101010-abcd/lock")),
                    (6, PathBuf::from("/home/u/.mozilla/places.sqlite")),
                ]),
                11 => Some(vec![(7, PathBuf::from("/other/20261207-111111-ffff/not-a-lock"))]),
                _ => None, // another user's process
            }
        };
        let ids = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<std::collections::HashSet<_>>());
        let ours = [lock(8, 5, 10), lock(8, 6, 10), lock(8, 7, 11)];
        assert_eq!(held_sessions(&ours, Some((8, 0)), table), ids(&["20261207-101010-abcd"]));
        // on another file system, or none at all: nothing to explain, nobody's descriptors read
        let elsewhere = [lock(9, 5, 12), lock(9, 1, -1)];
        assert_eq!(held_sessions(&elsewhere, Some((8, 0)), |_| unreachable!()), ids(&[]));
        // unreadable descriptors, no taker (an OFD lock), or the taker without the file open: the list asks them all
        for unexplained in [lock(8, 5, 12), lock(8, 5, -1), lock(8, 99, 10)] {
            assert_eq!(held_sessions(&[unexplained], Some((8, 0)), table), None, "{unexplained:?}");
        }
        // a kernel that does not name the mount: every lock is looked at
        assert_eq!(held_sessions(&elsewhere[..1], None, table), None);
    }

    #[test]
    fn the_holder_is_named_while_the_lock_is_held_and_none_after() {
        let ws = tempfile::tempdir().unwrap();
        let ctx = Context::new(ws.path()).unwrap();
        assert_eq!(holder(&ctx), None, "no lock file yet, and none is created");
        assert!(!ctx.lock_path().exists());
        let guard = acquire(&ctx).unwrap();
        let named = holder(&ctx).expect("held");
        assert!(named.starts_with(&format!("pid {} on ", std::process::id())) && named.ends_with(": this editor"));
        drop(guard);
        assert_eq!(holder(&ctx), None);
    }
}
