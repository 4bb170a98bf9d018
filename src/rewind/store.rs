//! The workspace's content store: `.PseudoClaude/objects/<2 hex>/<62 hex>`, each object the bytes of a
//! file, named by their SHA-256. Shared by every session of the workspace, so a file held by a thousand
//! checkpoints is stored once.
//!
//! An object is written to a temporary name and renamed into place, never changed afterwards. Objects
//! are not synced one by one: a checkpoint that stored any calls [`Store::sync`] once (`syncfs`, one
//! call for ten thousand files) before the log line that names them is written, the rule spills keep.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::atomic::{Durable, Mode};
use crate::session::{ROOT_DIR_NAME, io_err};

pub const OBJECTS_DIR_NAME: &str = "objects";

#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// SHA-256 of `data`, in hex.
pub fn hash_bytes(data: &[u8]) -> String {
    crate::session::spill::hex(&Sha256::digest(data))
}

/// Whether `hash` is 64 lower-case hex digits: nothing else reaches a path.
pub fn is_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Store {
    pub fn new(workspace: &Path) -> Store {
        Store { dir: workspace.join(ROOT_DIR_NAME).join(OBJECTS_DIR_NAME) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, hash: &str) -> Option<PathBuf> {
        is_hash(hash).then(|| self.dir.join(&hash[..2]).join(&hash[2..]))
    }

    pub fn has(&self, hash: &str) -> bool {
        self.path(hash).is_some_and(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
    }

    /// The size of object `hash` on disk, if it is there.
    pub fn size(&self, hash: &str) -> Option<u64> {
        self.path(hash).and_then(|p| fs::symlink_metadata(p).ok()).filter(|m| m.is_file()).map(|m| m.len())
    }

    /// Stores `data` under its hash unless it is there already. Not synced: see [`Store::sync`] (or a
    /// checkpoint's copies, [`crate::session::files::FilesRecord::copies`]).
    pub fn put(&self, hash: &str, data: &[u8]) -> crate::session::Result<bool> {
        let path = self.path(hash).ok_or_else(|| crate::session::Error::Invalid(format!("bad object name {hash}")))?;
        // There already, whole (a copy a crash cut short, never synced, is written again).
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == data.len() as u64) {
            return Ok(false);
        }
        let parent = path.parent().expect("an object has a folder");
        if let Err(e) = fs::create_dir(parent)
            && e.kind() != io::ErrorKind::AlreadyExists
        {
            // The first object of all: make `objects/` (and `.PseudoClaude/`) too.
            fs::create_dir_all(parent).map_err(io_err("cannot create", parent))?;
        }
        // not synced here: a checkpoint makes its copies durable in one `syncfs` (`Store::sync`) or in its line
        crate::atomic::replace(&path, data, Durable::No, Mode::Set(0o600))
            .map_err(io_err("cannot store a checkpoint's copy of a file in", &self.dir))?;
        Ok(true)
    }

    /// The bytes of object `hash`, checked against their name.
    pub fn get(&self, hash: &str) -> io::Result<Vec<u8>> {
        let path = self.path(hash).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut data = Vec::new();
        File::open(path)?.read_to_end(&mut data)?;
        if hash_bytes(&data) != hash {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("object {hash} was altered")));
        }
        Ok(data)
    }

    /// Makes every object written so far durable: one `syncfs` of the file system holding them (their
    /// data and their folders' entries), instead of a sync per file.
    pub fn sync(&self) -> crate::session::Result<()> {
        let dir = File::open(&self.dir).map_err(io_err("cannot open", &self.dir))?;
        sync_fs(&dir).map_err(io_err("cannot sync", &self.dir))
    }

    /// Every object's hash (for cleanup).
    pub fn all(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(top) = fs::read_dir(&self.dir) else { return out };
        for d in top.flatten() {
            let prefix = d.file_name().to_string_lossy().into_owned();
            if prefix.len() != 2 {
                continue;
            }
            let Ok(inner) = fs::read_dir(d.path()) else { continue };
            for f in inner.flatten() {
                let h = format!("{prefix}{}", f.file_name().to_string_lossy());
                if is_hash(&h) {
                    out.push(h);
                }
            }
        }
        out
    }

    /// When object `hash` was written.
    pub fn modified(&self, hash: &str) -> Option<std::time::SystemTime> {
        self.path(hash).and_then(|p| fs::symlink_metadata(p).ok()).and_then(|m| m.modified().ok())
    }

    /// Removes object `hash`.
    pub fn remove(&self, hash: &str) -> bool {
        self.path(hash).is_some_and(|p| fs::remove_file(p).is_ok())
    }
}

#[cfg(target_os = "linux")]
fn sync_fs(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: syncfs takes a descriptor we own for the duration of the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn sync_fs(_f: &File) -> io::Result<()> {
    // SAFETY: sync(2) takes no arguments.
    unsafe { libc::sync() };
    Ok(())
}
