//! One way to replace a file whole: the bytes go to a new temporary file beside it, then a rename puts it in place,
//! so a reader (another editor, a crash) finds the old file or the new one, never half of one.
//!
//! Every file of the core that is replaced this way goes through [`replace`]: the agent's writes and edits, a
//! rewind's restored files, the checkpoints' copies and stat cache, the workspaces' registry, an export, the MCP
//! consent answers. The session log does not: its writes go through `session::disk::Disk` (which the crash
//! simulation sees), whose own temporary names come from [`temp_name`] too.
//!
//! The temporary name fits whatever the file's name is: a name near the 255-byte limit of a folder entry is cut
//! (at a character boundary) before the random part and the suffix are added.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// How much of a replaced file a power cut may lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durable {
    /// Nothing synced: a cache a crash only makes stale, a copy made durable later in one batch (`syncfs`), a small
    /// file written on the editor's main loop, which never waits on a sync.
    No,
    /// The data synced before the rename: after a power cut the old file or the whole new one, never an empty one;
    /// the replacement itself may be lost.
    Data,
    /// The data synced, then the folder (the ALICE rule): once this returns, the new file survives a power cut.
    Full,
}

/// The permissions of the new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Those of the file replaced; a new file gets the default (`0o666` less the umask).
    Keep,
    /// These (the lower 12 bits of `st_mode`).
    Set(u32),
}

/// The longest part of the file's name kept in its temporary name, in bytes: with the dot, the random part and the
/// suffix, a temporary name stays far below the 255 bytes of a folder entry.
const NAME_KEPT: usize = 100;

/// A temporary name for a new version of file `name`, in the same folder: hidden, unique, and short enough for any
/// `name`.
pub fn temp_name(name: &str) -> String {
    let mut end = name.len().min(NAME_KEPT);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.{:016x}.pseudoclaude-tmp", &name[..end], rand::random::<u64>())
}

/// Replaces the file at `path` (or creates it) with `data`, whole or not at all. Its folder must exist. On an
/// error nothing is left behind: the old file is as it was and the temporary file is removed.
pub fn replace(path: &Path, data: &[u8], durable: Durable, mode: Mode) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a file's path", path.display())));
    };
    let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
    let perms = match mode {
        Mode::Set(bits) => Some(Permissions::from_mode(bits)),
        Mode::Keep => fs::metadata(path).ok().map(|m| m.permissions()),
    };
    let name = name.to_string_lossy();
    let (tmp, mut file) = loop {
        let tmp = parent.join(temp_name(&name));
        let mut open = OpenOptions::new();
        open.write(true).create_new(true);
        if let Mode::Set(bits) = mode {
            // never readable by others, even for a moment, when the final mode says so
            open.mode(bits & 0o700);
        }
        match open.open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let written = (|| {
        file.write_all(data)?;
        if let Some(p) = perms {
            file.set_permissions(p)?;
        }
        if durable != Durable::No {
            file.sync_data()?;
        }
        drop(file);
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if durable == Durable::Full {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// Replaces whatever is at `path` with a symbolic link to `target`, whole or not at all (a merge's link, which git
/// checks out as a link). Nothing synced.
pub fn replace_link(path: &Path, target: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a file's path", path.display())));
    };
    let tmp = parent.join(temp_name(&name.to_string_lossy()));
    std::os::unix::fs::symlink(target, &tmp)?;
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    }

    #[test]
    fn a_file_whose_name_has_255_bytes_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a".repeat(255), format!("{}é", "b".repeat(253))] {
            let path = dir.path().join(&name);
            fs::write(&path, "old").unwrap();
            replace(&path, b"new", Durable::Full, Mode::Keep).unwrap();
            assert_eq!(fs::read(&path).unwrap(), b"new");
        }
        assert_eq!(names(dir.path()).len(), 2, "no temporary file left");
    }

    #[test]
    fn the_mode_is_kept_or_set() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o751)).unwrap();
        replace(&path, b"new", Durable::Data, Mode::Keep).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o751);
        replace(&path, b"newer", Durable::No, Mode::Set(0o600)).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o600);
        assert_eq!(fs::read(&path).unwrap(), b"newer");
    }

    #[test]
    fn a_failed_replace_leaves_the_old_file_and_no_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        // a folder where the file goes: the rename over it fails
        let path = dir.path().join("taken");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), "kept").unwrap();
        assert!(replace(&path, b"new", Durable::Full, Mode::Keep).is_err());
        assert_eq!(names(dir.path()), ["taken"]);
        assert_eq!(fs::read(path.join("inside")).unwrap(), b"kept");
        // a missing folder is an error, not a created one
        assert!(replace(&dir.path().join("no/such"), b"x", Durable::No, Mode::Keep).is_err());
        assert!(!dir.path().join("no").exists());
    }

    #[test]
    fn temporary_names_fit_any_name() {
        let long = "é".repeat(127); // 254 bytes
        let t = temp_name(&long);
        assert!(t.len() < 255 && t.starts_with('.') && t.ends_with(".pseudoclaude-tmp"), "{t}");
        assert_ne!(temp_name("x"), temp_name("x"));
    }
}
