//! Every file the plugin opens under `.PseudoClaude/` stays inside `.PseudoClaude/sessions/`.
//!
//! A symlink once let a session escape the workspace: with `sessions/<id>` linked to a folder
//! elsewhere, a resume appended the user's messages to the file outside and created `lock` and
//! `summary.json` there. Checking names (`is_dir`, `canonicalize`) cannot stop that: the check and the
//! open are two lookups, and the link can appear between them. So nothing here opens a path whole.
//! A [`Dir`] is an open descriptor, reached from the workspace one component at a time with
//! `openat(O_DIRECTORY | O_NOFOLLOW)`; files are opened relative to it with `O_NOFOLLOW`, and the
//! opened descriptor is checked (`fstat`: a regular file) before it is used. A link anywhere below the
//! workspace (`.PseudoClaude`, `sessions`, the session folder, `tool-results`, the file itself) is
//! refused with [`Error::Refused`], naming the path; it is never followed, read or written through.
//!
//! The workspace itself may be a link (a checkout under a symlinked home is common); only what the
//! plugin owns below it is held to this rule.
//!
//! Architecture invariant: every file below `.PseudoClaude/sessions` is reached through descriptors opened
//! with `O_NOFOLLOW` from the workspace; a link is refused with its path, never followed.

use std::ffi::CString;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::{Context, Error, ROOT_DIR_NAME, Result, SESSIONS_DIR_NAME};

/// How a file is opened. Created files are private (0600).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    ReadWrite,
    /// Read and write, created when missing, never truncated (the lock).
    ReadWriteCreate,
    /// Read, and append, created when missing (the log).
    ReadAppendCreate,
    /// Append, created when missing (`.broken`, the activity hint).
    AppendCreate,
    /// Write a file that must not exist yet (a temporary file before its rename).
    CreateNew,
}

impl Access {
    fn flags(self) -> libc::c_int {
        match self {
            Access::Read => libc::O_RDONLY,
            Access::ReadWrite => libc::O_RDWR,
            Access::ReadWriteCreate => libc::O_RDWR | libc::O_CREAT,
            Access::ReadAppendCreate => libc::O_RDWR | libc::O_APPEND | libc::O_CREAT,
            Access::AppendCreate => libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
            Access::CreateNew => libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        }
    }
}

/// An open directory below the workspace, every component of its path checked to be a real
/// directory when it was reached.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// `<workspace>/.PseudoClaude/sessions`.
    pub(crate) fn sessions(workspace: &Path) -> Result<Dir> {
        Dir::workspace(workspace)?.subdir(ROOT_DIR_NAME)?.subdir(SESSIONS_DIR_NAME)
    }

    /// The workspace itself, reached as the user reaches it.
    pub(crate) fn workspace(workspace: &Path) -> Result<Dir> {
        let ws = if workspace.as_os_str().is_empty() { Path::new(".") } else { workspace };
        let c = cstring(ws.as_os_str().as_bytes(), ws)?;
        // The workspace is the user's: it may be reached through links.
        // SAFETY: `c` is a valid NUL-terminated string; the returned descriptor is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Io {
                action: "cannot open workspace".into(),
                path: ws.to_path_buf(),
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path: ws.to_path_buf() })
    }

    /// The folder of a session, `sessions/<id>`.
    pub(crate) fn session(ctx: &Context) -> Result<Dir> {
        let workspace = ctx.dir.ancestors().nth(3).unwrap_or(Path::new("."));
        Dir::sessions(workspace)?.subdir(&ctx.id)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory `name` inside this one; refused when it is a link or not a directory.
    pub(crate) fn subdir(&self, name: &str) -> Result<Dir> {
        let path = self.path.join(name);
        let c = cstring(name.as_bytes(), &path)?;
        // SAFETY: valid descriptor and NUL-terminated name; the result is owned below.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => self.refusal(name, path, "a directory"),
                _ => Error::Io { action: "cannot open directory".into(), path, source: e },
            });
        }
        // SAFETY: `fd` was just returned by openat(2).
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path })
    }

    /// Opens file `name` of this directory; refused when it is a link or not a regular file.
    pub(crate) fn open(&self, name: &str, access: Access) -> Result<File> {
        self.open_stat(name, access).map(|(f, _)| f)
    }

    /// [`Dir::open`], also returning the opened file's metadata (the `fstat` it was checked with).
    pub(crate) fn open_stat(&self, name: &str, access: Access) -> Result<(File, Metadata)> {
        self.open_mode(name, access, 0o600)
    }

    /// [`Dir::open_stat`], creating the file with `mode` instead of 0600 (`.gitignore` is 0644).
    pub(crate) fn open_mode(&self, name: &str, access: Access, mode: u32) -> Result<(File, Metadata)> {
        let path = self.path.join(name);
        let c = cstring(name.as_bytes(), &path)?;
        // O_NONBLOCK: a FIFO planted under the name must not hang the open; it is refused below. The flag
        // stays on the descriptor, where it does nothing: only regular files get through, and their reads
        // and writes ignore it.
        let flags = access.flags() | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: valid descriptor and NUL-terminated name; the result is owned below.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, mode as libc::c_uint) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => self.refusal(name, path, "a regular file"),
                _ => Error::Io { action: action_of(access).into(), path, source: e },
            });
        }
        // SAFETY: `fd` was just returned by openat(2).
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let meta =
            file.metadata().map_err(|source| Error::Io { action: "cannot stat".into(), path: path.clone(), source })?;
        if !meta.file_type().is_file() {
            return Err(Error::Refused { path, why: "it is not a regular file".into() });
        }
        Ok((file, meta))
    }

    /// Creates directory `name` (0700) here; an existing one is left as it is.
    pub(crate) fn mkdir(&self, name: &str) -> Result<bool> {
        let path = self.path.join(name);
        let c = cstring(name.as_bytes(), &path)?;
        // SAFETY: valid descriptor and NUL-terminated name.
        if unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o700) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::AlreadyExists {
            return Ok(false);
        }
        Err(Error::Io { action: "cannot create directory".into(), path, source: e })
    }

    /// Renames `from` to `to`, both in this directory. A link at `to` is replaced, never followed.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (cstring_io(from)?, cstring_io(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: valid descriptor and NUL-terminated names.
        if unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Replaces file `name` with `data`: written whole to a new temporary file, then renamed over it, so a reader
    /// sees the old bytes or the new ones, never a mix. No sync: for caches, which a crash only makes stale (the
    /// sessions' `summary.json`, the index, the activity file, the import cache: each is rebuilt from the logs
    /// when stale, damaged or missing). Not [`crate::atomic::replace`], which is the same rename by path
    /// (`Durable::No`): under `.PseudoClaude/sessions` every file is reached through this directory's descriptor,
    /// opened without following links from the workspace, so a link planted there cannot turn the write elsewhere.
    /// The temporary name is [`crate::atomic::temp_name`]'s.
    pub(crate) fn replace_file(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let tmp = crate::atomic::temp_name(name);
        let result = (|| {
            let mut f = self.open(&tmp, Access::CreateNew).map_err(io::Error::other)?;
            io::Write::write_all(&mut f, data)?;
            self.rename(&tmp, name)
        })();
        if result.is_err() {
            self.unlink(&tmp);
        }
        result
    }

    /// Removes file `name` of this directory (best effort cleanup of a temporary file).
    pub(crate) fn unlink(&self, name: &str) {
        if let Ok(c) = cstring_io(name) {
            // SAFETY: valid descriptor and NUL-terminated name.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }

    /// Makes this directory's entries (a new file, a rename) durable.
    pub(crate) fn sync(&self) -> Result<()> {
        #[cfg(test)]
        tests::DIR_SYNCS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: valid descriptor.
        if unsafe { libc::fsync(self.fd.as_raw_fd()) } == 0 {
            Ok(())
        } else {
            Err(Error::Io {
                action: "cannot sync directory".into(),
                path: self.path.clone(),
                source: io::Error::last_os_error(),
            })
        }
    }

    /// The refusal for `name`, saying what it is instead of what was expected.
    fn refusal(&self, name: &str, path: PathBuf, expected: &str) -> Error {
        let why = match self.lstat(name) {
            Some(mode) if mode & libc::S_IFMT == libc::S_IFLNK => match std::fs::read_link(&path) {
                Ok(target) => format!("it is a symbolic link (to {})", target.display()),
                Err(_) => "it is a symbolic link".to_string(),
            },
            _ => format!("it is not {expected}"),
        };
        Error::Refused { path, why }
    }

    fn lstat(&self, name: &str) -> Option<libc::mode_t> {
        self.stat_nofollow(name).map(|st| st.st_mode)
    }

    /// Modification time of `rel` (relative to this directory; a link is not followed), nanoseconds
    /// since the epoch. Only for ordering: nothing is opened.
    pub(crate) fn mtime_ns(&self, rel: &str) -> Option<i64> {
        self.stat_nofollow(rel).map(|st| st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec))
    }

    /// Size and modification time (ns) of `rel`, a link not followed: whether a file changed.
    pub(crate) fn size_mtime_ns(&self, rel: &str) -> Option<(u64, i64)> {
        self.stat_nofollow(rel)
            .map(|st| (st.st_size as u64, st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec)))
    }

    /// Inode number, size and modification time (ns) of `rel`, a link not followed, in one `stat`.
    pub(crate) fn stat_file(&self, rel: &str) -> Option<(u64, u64, i64)> {
        self.stat_nofollow(rel).map(|st| {
            let mtime = st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec);
            (st.st_ino, st.st_size as u64, mtime)
        })
    }

    /// Inode number of `rel`, a link not followed.
    pub(crate) fn ino(&self, rel: &str) -> Option<u64> {
        self.stat_nofollow(rel).map(|st| st.st_ino)
    }

    /// The id of the mount this directory is on (`statx`'s `STATX_MNT_ID`, Linux 5.8), as `/proc/self/mountinfo`
    /// numbers it; `None` when the kernel does not say.
    pub(crate) fn mount_id(&self) -> Option<u64> {
        // SAFETY: `st` is plain data filled by the call; valid descriptor, empty name with AT_EMPTY_PATH.
        unsafe {
            let mut st: libc::statx = std::mem::zeroed();
            let ok = libc::statx(self.fd.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_MNT_ID, &mut st);
            (ok == 0 && st.stx_mask & libc::STATX_MNT_ID != 0).then_some(st.stx_mnt_id)
        }
    }

    fn stat_nofollow(&self, rel: &str) -> Option<libc::stat> {
        let c = cstring_io(rel).ok()?;
        // SAFETY: `st` is plain data filled by the call; valid descriptor and name.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            (libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0).then_some(st)
        }
    }
}

/// The checked directory holding `path`, and `path`'s name in it, for a path below
/// `<workspace>/.PseudoClaude` (the workspace being what comes before the last `.PseudoClaude`
/// component), or `.PseudoClaude` itself; `None` for any other path (the workspace, which is the
/// user's). This is how [`super::disk::OsDisk`] turns the writer's paths into checked descriptors.
pub(crate) fn parent_of(path: &Path) -> Result<Option<(Dir, String)>> {
    let comps: Vec<Component> = path.components().collect();
    let Some(root) = comps.iter().rposition(|c| c.as_os_str() == ROOT_DIR_NAME) else { return Ok(None) };
    let ws: PathBuf = comps[..root].iter().collect();
    let mut names = Vec::with_capacity(comps.len() - root);
    for c in &comps[root..] {
        match c {
            Component::Normal(n) => names.push(
                n.to_str()
                    .ok_or_else(|| Error::Refused { path: path.to_path_buf(), why: "its name is not UTF-8".into() })?,
            ),
            _ => return Err(Error::Refused { path: path.to_path_buf(), why: "it is not a plain path".into() }),
        }
    }
    let Some((last, between)) = names.split_last() else { return Ok(None) };
    let mut dir = Dir::workspace(&ws)?;
    for name in between {
        dir = dir.subdir(name)?;
    }
    Ok(Some((dir, last.to_string())))
}

/// Opens file `name` of session `ctx`'s folder, the whole path checked (see the module docs).
pub(crate) fn open(ctx: &Context, name: &str, access: Access) -> Result<File> {
    Dir::session(ctx)?.open(name, access)
}

fn action_of(access: Access) -> &'static str {
    match access {
        Access::Read => "cannot open",
        _ => "cannot open for writing",
    }
}

fn cstring(bytes: &[u8], path: &Path) -> Result<CString> {
    CString::new(bytes)
        .map_err(|_| Error::Refused { path: path.to_path_buf(), why: "its name holds a NUL byte".into() })
}

fn cstring_io(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn ws_with_sessions() -> tempfile::TempDir {
        let ws = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(ws.path().join(ROOT_DIR_NAME).join(SESSIONS_DIR_NAME)).expect("mkdir");
        ws
    }

    #[test]
    fn a_symlinked_session_folder_is_refused_naming_the_path() {
        let ws = ws_with_sessions();
        let outside = tempfile::tempdir().expect("outside");
        let ctx = Context::for_id(ws.path(), "20260101-000000-abcd").expect("ctx");
        symlink(outside.path(), &ctx.dir).expect("symlink");
        let err = Dir::session(&ctx).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Refused { .. }), "{text}");
        assert!(text.contains(&ctx.dir.display().to_string()) && text.contains("symbolic link"), "{text}");
        assert!(open(&ctx, "lock", Access::ReadWriteCreate).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).expect("read").count(), 0, "nothing created outside");
    }

    #[test]
    fn a_symlinked_file_is_refused_and_never_written_through() {
        let ws = ws_with_sessions();
        let outside = tempfile::tempdir().expect("outside");
        let target = outside.path().join("log");
        std::fs::write(&target, b"outside\n").expect("write");
        let ctx = Context::for_id(ws.path(), "20260101-000000-abcd").expect("ctx");
        std::fs::create_dir(&ctx.dir).expect("mkdir");
        symlink(&target, &ctx.jsonl_path).expect("symlink");
        for access in [Access::Read, Access::ReadAppendCreate, Access::AppendCreate, Access::ReadWriteCreate] {
            let err = open(&ctx, super::super::CONVERSATION_FILE_NAME, access).unwrap_err();
            assert!(err.to_string().contains("symbolic link"), "{err}");
        }
        assert_eq!(std::fs::read(&target).expect("read"), b"outside\n");
    }

    #[test]
    fn a_symlinked_sessions_folder_is_refused() {
        let ws = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::create_dir(ws.path().join(ROOT_DIR_NAME)).expect("mkdir");
        symlink(outside.path(), ws.path().join(ROOT_DIR_NAME).join(SESSIONS_DIR_NAME)).expect("symlink");
        assert!(matches!(Dir::sessions(ws.path()), Err(Error::Refused { .. })));
    }

    #[test]
    fn a_fifo_or_a_folder_in_place_of_a_file_is_refused_without_hanging() {
        let ws = ws_with_sessions();
        let ctx = Context::for_id(ws.path(), "20260101-000000-abcd").expect("ctx");
        std::fs::create_dir(&ctx.dir).expect("mkdir");
        let c = CString::new(ctx.lock_path().as_os_str().as_bytes()).expect("cstring");
        // SAFETY: valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(open(&ctx, "lock", Access::ReadWrite), Err(Error::Refused { .. })));
        std::fs::create_dir(&ctx.jsonl_path).expect("mkdir");
        assert!(open(&ctx, super::super::CONVERSATION_FILE_NAME, Access::Read).is_err());
    }

    /// Every [`Dir::sync`] of this test process: nothing else shows that a directory was synced.
    pub(super) static DIR_SYNCS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn a_new_session_folder_is_synced_into_its_parent_and_a_temporary_file_is_removed() {
        let ws = tempfile::tempdir().expect("tempdir");
        let before = DIR_SYNCS.load(std::sync::atomic::Ordering::SeqCst);
        let ctx = Context::new(ws.path()).expect("context");
        // `.PseudoClaude` (its new .gitignore) and `sessions` (the new session folder), at least
        let synced = DIR_SYNCS.load(std::sync::atomic::Ordering::SeqCst) - before;
        assert!(synced >= 2, "{synced} directory syncs");
        let dir = Dir::session(&ctx).expect("session");
        dir.open("x.tmp", Access::CreateNew).expect("create");
        dir.unlink("x.tmp");
        assert!(!ctx.dir.join("x.tmp").exists());
    }

    fn closed_on_exec(fd: std::os::fd::RawFd) -> bool {
        // SAFETY: F_GETFD on a descriptor this test owns.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        flags >= 0 && flags & libc::FD_CLOEXEC != 0
    }

    #[test]
    fn every_descriptor_is_closed_on_exec() {
        // A command the agent runs must not inherit the log, its lock or a folder of the workspace.
        let ws = ws_with_sessions();
        assert!(closed_on_exec(Dir::workspace(ws.path()).expect("workspace").fd.as_raw_fd()));
        let dir = Dir::sessions(ws.path()).expect("sessions");
        assert!(closed_on_exec(dir.fd.as_raw_fd()));
        for (name, access) in [
            ("a", Access::ReadWriteCreate),
            ("a", Access::Read),
            ("a", Access::ReadWrite),
            ("b", Access::ReadAppendCreate),
            ("c", Access::AppendCreate),
            ("d", Access::CreateNew),
        ] {
            let file = dir.open(name, access).unwrap_or_else(|e| panic!("{name} {access:?}: {e}"));
            assert!(closed_on_exec(file.as_raw_fd()), "{name} {access:?}");
        }
    }

    #[test]
    fn a_fifo_opened_for_reading_is_refused_without_waiting_for_a_writer() {
        let ws = ws_with_sessions();
        let fifo = ws.path().join(ROOT_DIR_NAME).join(SESSIONS_DIR_NAME).join("activity");
        let c = CString::new(fifo.as_os_str().as_bytes()).expect("cstring");
        // SAFETY: valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let root = ws.path().to_path_buf();
        // A safety net only: without O_NONBLOCK the open would wait for a writer that never comes.
        std::thread::spawn(move || {
            let _ = tx.send(Dir::sessions(&root).and_then(|d| d.open("activity", Access::Read)).map(|_| ()));
        });
        let opened = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the open waited for a writer");
        assert!(matches!(opened, Err(Error::Refused { .. })), "{opened:?}");
    }

    #[test]
    fn a_workspace_or_a_session_folder_that_is_a_file_is_refused() {
        let ws = ws_with_sessions();
        let file = ws.path().join("notes.txt");
        std::fs::write(&file, b"notes").expect("write");
        let err = Dir::workspace(&file).unwrap_err();
        assert!(matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(libc::ENOTDIR)), "{err:?}");
        let err = Dir::workspace(&ws.path().join("missing")).unwrap_err();
        assert!(matches!(&err, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound), "{err:?}");
        let ctx = Context::for_id(ws.path(), "20260101-000000-abcd").expect("ctx");
        std::fs::write(&ctx.dir, b"").expect("a file where the session folder goes");
        let err = Dir::session(&ctx).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&ctx.dir.display().to_string()) && text.contains("it is not a directory"), "{text}");
    }

    #[test]
    fn a_file_that_cannot_be_opened_is_named_with_what_was_being_done() {
        let ws = ws_with_sessions();
        let dir = Dir::sessions(ws.path()).expect("sessions");
        let path = dir.path().join("missing").display().to_string();
        let read = dir.open("missing", Access::Read).unwrap_err().to_string();
        assert!(read.starts_with(&format!("cannot open {path}")), "{read}");
        let write = dir.open("missing", Access::ReadWrite).unwrap_err().to_string();
        assert!(write.starts_with(&format!("cannot open for writing {path}")), "{write}");
    }
}
