//! The writer's file operations, behind a small trait.
//!
//! A SIGKILL keeps the page cache, so no crash test of a real process can tell a synced line from an
//! unsynced one: removing the `fdatasync` after an append passed every test. The writer, its spills,
//! its torn-tail repair and [`super::Context::new`] therefore reach the disk only through [`Disk`] and
//! [`DiskFile`]. [`OsDisk`] is the real file system, used everywhere outside tests; the crash
//! simulation (`tests/it/support/sim_disk.rs`, driven by `tests/it/session_sim.rs`) implements the same
//! trait over a disk that keeps written-but-unsynced bytes and directory entries apart from synced
//! ones and loses them at a power cut, as FoundationDB's and TigerBeetle's simulators do.
//!
//! [`OsDisk`] reaches every path below `.PseudoClaude/` through [`super::contain`]'s checked
//! descriptors (`O_NOFOLLOW`, one component at a time), so no link is ever followed there.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::contain::{self, Access};
use super::lock::{self, Guard};
use super::{Context, Error, Result, activity, io_err, private_dir_builder};

/// How [`Disk::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// Read and append (`O_APPEND`), created 0600 when missing: the log and its `.broken` file.
    Append,
    /// Write a file that must not exist yet, created with `mode`: a spill's temporary file, `.gitignore`.
    CreateNew { mode: u32 },
}

/// The directory operations of the writer. Errors name the path and what was being done.
pub trait Disk: Send + Sync + fmt::Debug {
    fn open(&self, path: &Path, how: Open) -> Result<Box<dyn DiskFile>>;
    /// Creates one directory (0700): `true` when it was made, `false` when something is there. Not
    /// durable until its parent is synced ([`Disk::sync_dir`]).
    fn create_dir(&self, path: &Path) -> Result<bool>;
    /// Renames within one directory; durable once that directory is synced.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Best effort: a temporary file left behind costs only its space.
    fn remove_file(&self, path: &Path);
    /// Makes the directory's entries (created files and directories, renames) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;
    /// The length of the regular file at `path` (a link is not followed); `None` when there is none.
    fn file_len(&self, path: &Path) -> Option<u64>;
    fn is_dir(&self, path: &Path) -> bool;
    /// The session's writer lock ([`super::lock`]); `None` where no other process can exist (a
    /// simulated disk).
    fn lock(&self, ctx: &Context) -> Result<Option<Guard>>;
    /// `sessions/activity` for appending ([`super::activity`]): a hint for the list, never synced and
    /// no part of what a crash must keep, so a simulated disk has none.
    fn activity(&self, sessions_dir: &Path) -> Option<File>;
}

/// An open file of a [`Disk`].
pub trait DiskFile: Send + fmt::Debug {
    /// Writes all of `buf` at the end of the file (`O_APPEND`, or sequentially for a new file).
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// The file's length.
    fn size(&self) -> io::Result<u64>;
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// `fdatasync(2)`: the file's bytes and length are durable.
    fn sync_data(&mut self) -> io::Result<()>;
    /// `fsync(2)`.
    fn sync_all(&mut self) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsDisk;

impl Disk for OsDisk {
    fn open(&self, path: &Path, how: Open) -> Result<Box<dyn DiskFile>> {
        let (dir, name) = contained(path)?;
        let (file, _) = match how {
            Open::Append => dir.open_mode(&name, Access::ReadAppendCreate, 0o600)?,
            Open::CreateNew { mode } => dir.open_mode(&name, Access::CreateNew, mode)?,
        };
        Ok(Box::new(file))
    }

    fn create_dir(&self, path: &Path) -> Result<bool> {
        match contain::parent_of(path)? {
            Some((dir, name)) => dir.mkdir(&name),
            // The workspace, when it is missing: the user's, reached as the user reaches it.
            None => match private_dir_builder().create(path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(io_err("cannot create directory", path)(e)),
            },
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (dir, from_name) = contained(from)?;
        let to_name = to.file_name().and_then(|n| n.to_str()).filter(|_| to.parent() == from.parent());
        let to_name =
            to_name.ok_or_else(|| Error::Refused { path: to.into(), why: "not beside the file renamed".into() })?;
        dir.rename(&from_name, to_name).map_err(io_err("cannot rename into place", to))
    }

    fn remove_file(&self, path: &Path) {
        if let Ok((dir, name)) = contained(path) {
            dir.unlink(&name);
        }
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        match contain::parent_of(path)? {
            Some((dir, name)) => dir.subdir(&name)?.sync(),
            None => File::open(path).and_then(|d| d.sync_all()).map_err(io_err("cannot sync directory", path)),
        }
    }

    fn file_len(&self, path: &Path) -> Option<u64> {
        std::fs::symlink_metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len())
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn lock(&self, ctx: &Context) -> Result<Option<Guard>> {
        lock::acquire(ctx).map(Some)
    }

    fn activity(&self, sessions_dir: &Path) -> Option<File> {
        activity::open(sessions_dir)
    }
}

/// The checked directory of a file of ours, and its name there.
fn contained(path: &Path) -> Result<(contain::Dir, String)> {
    contain::parent_of(path)?
        .ok_or_else(|| Error::Refused { path: path.into(), why: format!("it is not inside {}", super::ROOT_DIR_NAME) })
}

impl DiskFile for File {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        Write::write_all(self, buf)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn sync_all(&mut self) -> io::Result<()> {
        File::sync_all(self)
    }
}

/// Creates `dir` (and missing parents) unless it is there, then syncs its parent either way: a
/// directory is durable only once its parent is synced, and one found in place may have been made by
/// an earlier call that failed, or a process that died, before syncing it.
pub fn ensure_dir(disk: &dyn Disk, dir: &Path) -> Result<()> {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !disk.is_dir(parent) {
        ensure_dir(disk, parent)?;
    }
    disk.create_dir(dir)?;
    disk.sync_dir(parent)
}
