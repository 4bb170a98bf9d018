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

/// The inode numbers of the files locked on this machine, from `/proc/locks` (one read of a short
/// file); `None` when it cannot be read or understood, and the caller then asks every lock file.
///
/// It is a filter, never the answer: a lock file listed there is still asked ([`holder_in`]), so an
/// inode number of another file system only costs that question. What it can miss: a lock held by a
/// process of another PID namespace (a container sharing the folder), which the kernel leaves out of
/// this process's view; the list then shows that session as free, and a resume of it is still
/// refused by [`acquire`].
pub(crate) fn locked_inodes() -> Option<std::collections::HashSet<u64>> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let mut out = std::collections::HashSet::new();
    for line in text.lines() {
        // `1: FLOCK  ADVISORY  WRITE 4242 fd:00:1234567 0 EOF` (a waiter has `->` after the number):
        // the first field of the form MAJOR:MINOR:INODE.
        let ino = line.split_ascii_whitespace().find_map(|f| {
            let mut parts = f.split(':');
            let (_, _, ino, rest) = (parts.next()?, parts.next()?, parts.next()?, parts.next());
            if rest.is_some() { None } else { ino.parse::<u64>().ok() }
        });
        out.insert(ino?);
    }
    Some(out)
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
