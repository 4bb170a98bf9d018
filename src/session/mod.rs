//! The durable session log: one append-only `conversation.jsonl` per session, written as the chat
//! happens and replayed on resume.
//!
//! Layout, per workspace:
//!
//! ```text
//! <workspace>/.PseudoClaude/.gitignore            "*": transcripts are never committed by accident
//! <workspace>/.PseudoClaude/sessions/<id>/
//!     conversation.jsonl                          the log (see doc/pseudoclaude.txt, *pseudoclaude-log*)
//!     conversation.jsonl.broken                   torn tails moved aside by the writer, never deleted
//!     tool-results/<sha256>.txt                   large tool outputs, referenced from the log
//!     lock                                        advisory lock + who holds it
//!     summary.json                                list cache, rebuilt when missing or stale
//! ```
//!
//! Where things live: [`Context`] (paths and ids, this file), [`writer`] (appending), [`loader`]
//! (replaying), [`replay`] (the fold both the loader and the list use, so they cannot disagree),
//! [`list`], [`retention`], [`lock`], [`spill`], [`meta`] (names and pins), [`fork`], [`export`];
//! [`contain`] opens every one of their files, so that
//! none is ever reached through a link; [`disk`] holds the file operations the writer and
//! [`Context::new`] use, so a simulated disk can stand in for the real one.

pub mod activity;
pub(crate) mod contain;
pub mod disk;
pub mod entry;
pub mod export;
pub mod files;
pub mod fork;
pub mod index;
pub mod list;
pub mod loader;
pub mod lock;
pub mod meta;
pub mod pins;
pub mod replay;
pub mod retention;
pub mod search;
pub mod spill;
pub mod touched;
pub mod words;
pub mod writer;

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use disk::{Disk, Open, OsDisk};

pub use entry::Entry;
pub use list::{ListOptions, SessionInfo, list};
pub use loader::{Loaded, load};
pub use retention::{RetentionOptions, cleanup};
pub use writer::{Writer, WriterOptions};

pub const ROOT_DIR_NAME: &str = ".PseudoClaude";
pub const SESSIONS_DIR_NAME: &str = "sessions";
pub const CONVERSATION_FILE_NAME: &str = "conversation.jsonl";
pub const BROKEN_FILE_NAME: &str = "conversation.jsonl.broken";
pub const TOOL_RESULTS_DIR_NAME: &str = "tool-results";
pub const LOCK_FILE_NAME: &str = "lock";
pub const SUMMARY_FILE_NAME: &str = "summary.json";

/// How many times [`Context::new`] draws a fresh id when the directory already exists.
const NEW_ID_ATTEMPTS: usize = 10;

/// Errors of the session log. Each names the session or file and says what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The id does not have the shape `YYYYMMDD-HHMMSS-xxxx`; refusing it keeps `../../etc` and friends out.
    #[error("invalid session id {0:?}: expected the form YYYYMMDD-HHMMSS-xxxx (e.g. 20260828-142030-a1b2)")]
    InvalidId(String),
    /// No such session in this workspace.
    #[error("no session {id} (looked in {})", dir.display())]
    NotFound { id: String, dir: PathBuf },
    /// Another process holds the session's writer lock.
    #[error("session {id} is open in another editor ({holder}); close it there first")]
    Locked { id: String, holder: String },
    /// Ten ids in a row were taken.
    #[error("could not find a free session id after {NEW_ID_ATTEMPTS} attempts")]
    IdExhausted,
    /// A disk operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io { action: String, path: PathBuf, source: io::Error },
    /// A path under `.PseudoClaude/` is a link or not what it should be: it is never followed (see
    /// [`contain`]).
    #[error(
        "refusing {}: {why}; session files must be real files and folders inside .PseudoClaude/sessions \
         (nothing was read or written through it)",
        path.display()
    )]
    Refused { path: PathBuf, why: String },
    /// A request that cannot be carried out as asked (an index out of range, a name too long); the
    /// message says what and why.
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A disk operation failed because the file or folder does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Wraps an `io::Error` with what was being done and to which path.
pub(crate) fn io_err(action: impl Into<String>, path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    let action = action.into();
    move |source| Error::Io { action, path: path.to_path_buf(), source }
}

/// One session's place on disk. Creating a context makes the directories; the log file itself
/// appears when a [`Writer`] opens it, so an empty chat leaves at most an empty directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub id: String,
    pub dir: PathBuf,
    pub jsonl_path: PathBuf,
    pub spill_dir: PathBuf,
}

impl Context {
    /// A new session with a fresh id (local time + 2 random bytes), directories created private (0700).
    pub fn new(workspace: &Path) -> Result<Context> {
        Context::new_on(&OsDisk, workspace)
    }

    /// [`Context::new`] on another [`Disk`]. Each new directory is synced into its parent before this
    /// returns: without that, a power cut could take the session directory, and every entry
    /// acknowledged in it, away.
    pub fn new_on(disk: &dyn Disk, workspace: &Path) -> Result<Context> {
        let sessions = ensure_sessions_dir(disk, workspace)?;
        for _ in 0..NEW_ID_ATTEMPTS {
            let id = new_id();
            let ctx = Context::at(&sessions, &id);
            // Through checked descriptors ([`OsDisk`]), so a linked `sessions` cannot take the new
            // folder elsewhere.
            if disk.create_dir(&ctx.dir)? {
                disk.create_dir(&ctx.spill_dir)?;
                disk.sync_dir(&ctx.dir)?;
                disk.sync_dir(&sessions)?;
                return Ok(ctx);
            }
        }
        Err(Error::IdExhausted)
    }

    /// An existing session. The id is validated before it touches a path.
    pub fn open(workspace: &Path, id: &str) -> Result<Context> {
        let ctx = Context::for_id(workspace, id)?;
        // Checked on the descriptor, component by component: a linked session folder is refused here.
        match contain::Dir::session(&ctx) {
            Ok(_) => Ok(ctx),
            Err(e) if e.is_not_found() => Err(Error::NotFound { id: id.to_string(), dir: sessions_dir(workspace) }),
            Err(e) => Err(e),
        }
    }

    /// The paths of a session id, validated, without checking that it exists.
    pub fn for_id(workspace: &Path, id: &str) -> Result<Context> {
        if !is_valid_id(id) {
            return Err(Error::InvalidId(id.to_string()));
        }
        Ok(Context::at(&sessions_dir(workspace), id))
    }

    fn at(sessions: &Path, id: &str) -> Context {
        let dir = sessions.join(id);
        Context {
            id: id.to_string(),
            jsonl_path: dir.join(CONVERSATION_FILE_NAME),
            spill_dir: dir.join(TOOL_RESULTS_DIR_NAME),
            dir,
        }
    }

    pub fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE_NAME)
    }

    pub fn broken_path(&self) -> PathBuf {
        self.dir.join(BROKEN_FILE_NAME)
    }

    pub fn summary_path(&self) -> PathBuf {
        self.dir.join(SUMMARY_FILE_NAME)
    }
}

/// `<workspace>/.PseudoClaude/sessions`.
pub fn sessions_dir(workspace: &Path) -> PathBuf {
    workspace.join(ROOT_DIR_NAME).join(SESSIONS_DIR_NAME)
}

/// Creates `.PseudoClaude/` with its `.gitignore` (and `sessions/`) when missing, as a first session would: what
/// else goes there (a worktree chat's folder) is then never shown by `git status`.
pub fn ensure_root(workspace: &Path) -> Result<PathBuf> {
    ensure_sessions_dir(&OsDisk, workspace).map(|_| workspace.join(ROOT_DIR_NAME))
}

/// Creates `.PseudoClaude/` with its `.gitignore` only (no `sessions/`): a worktree chat's worktree, whose
/// checkpoints are stored there and whose sessions are the workspace's.
pub fn ensure_ignored_root(dir: &Path) -> Result<PathBuf> {
    ensure_ignored(&OsDisk, dir)
}

/// Creates `.PseudoClaude/sessions` (0700) and `.PseudoClaude/.gitignore` when missing. A linked
/// `.PseudoClaude` or `sessions` is refused before anything is created through it ([`OsDisk`] reaches
/// them with `O_NOFOLLOW`).
fn ensure_sessions_dir(disk: &dyn Disk, workspace: &Path) -> Result<PathBuf> {
    let root = ensure_ignored(disk, workspace)?;
    let sessions = root.join(SESSIONS_DIR_NAME);
    disk::ensure_dir(disk, &sessions)?;
    Ok(sessions)
}

/// `.PseudoClaude/` and its `.gitignore` of `*`, created when missing; returns the folder.
fn ensure_ignored(disk: &dyn Disk, workspace: &Path) -> Result<PathBuf> {
    let root = workspace.join(ROOT_DIR_NAME);
    disk::ensure_dir(disk, &root)?;
    let gitignore = root.join(".gitignore");
    if disk.file_len(&gitignore).is_none() {
        // Synced: an empty `.gitignore` left by a power cut would never be rewritten, and would
        // ignore nothing.
        let written = disk.open(&gitignore, Open::CreateNew { mode: 0o644 }).and_then(|mut f| {
            f.write_all(b"# Written by pseudoclaude.nvim: session transcripts stay out of git.\n*\n")
                .and_then(|()| f.sync_all())
                .map_err(io_err("cannot write", &gitignore))?;
            disk.sync_dir(&root)
        });
        match written {
            // Already there (or a link, which is left alone).
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {}
            other => other?,
        }
    }
    Ok(root)
}

pub(crate) fn private_dir_builder() -> DirBuilder {
    let mut b = DirBuilder::new();
    b.mode(0o700);
    b
}

/// `20260828-142030-a1b2`: local time, then two random bytes in hex.
pub fn new_id() -> String {
    let now = chrono::Local::now();
    let r: u16 = rand::random();
    format!("{}-{:04x}", now.format("%Y%m%d-%H%M%S"), r)
}

/// Strict: 8 digits, '-', 6 digits, '-', 4 lower-case hex digits. Nothing else reaches a path.
pub fn is_valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 20
        && b[8] == b'-'
        && b[15] == b'-'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
        && b[16..].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

#[cfg(test)]
mod tests {
    use super::disk::DiskFile;
    use super::*;

    #[test]
    fn ids_have_the_seed_shape_and_validate() {
        let id = new_id();
        assert!(is_valid_id(&id), "{id}");
        assert!(is_valid_id("20260828-142030-a1b2"));
    }

    #[test]
    fn hostile_ids_are_refused() {
        for bad in [
            "",
            "../../etc",
            "a/b",
            "/etc/passwd",
            "20260828-142030-A1B2",
            "20260828-142030-a1b2/..",
            "20260828_142030-a1b2",
            "20260828-142030-a1b",
        ] {
            assert!(!is_valid_id(bad), "{bad:?} accepted");
            let err = Context::for_id(Path::new("/tmp"), bad).unwrap_err();
            assert!(err.to_string().contains("invalid session id"), "{err}");
        }
    }

    #[test]
    fn a_missing_workspace_is_made_and_one_that_cannot_be_is_named() {
        let ws = tempfile::tempdir().expect("tempdir");
        let deep = ws.path().join("a/b/c");
        Context::new(&deep).expect("made, parents and all");
        assert!(deep.join(ROOT_DIR_NAME).join(SESSIONS_DIR_NAME).is_dir());
        let file = ws.path().join("notes");
        std::fs::write(&file, b"notes").expect("write");
        let err = Context::new(&file.join("project")).unwrap_err().to_string();
        let want = format!("cannot create directory {}: Not a directory", file.join("project").display());
        assert!(err.starts_with(&want), "{err}");
    }

    #[test]
    fn a_linked_gitignore_is_left_alone() {
        let ws = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(ws.path().join(ROOT_DIR_NAME)).expect("mkdir");
        let gitignore = ws.path().join(ROOT_DIR_NAME).join(".gitignore");
        std::os::unix::fs::symlink("../elsewhere", &gitignore).expect("symlink");
        Context::new(ws.path()).expect("a session beside the link");
        assert_eq!(std::fs::read_link(&gitignore).expect("still a link"), Path::new("../elsewhere"));
        assert!(!ws.path().join("elsewhere").exists(), "nothing written through it");
    }

    /// The real disk, except that `.gitignore` cannot be created (a full disk).
    #[derive(Debug)]
    struct NoRoomForGitignore;

    impl Disk for NoRoomForGitignore {
        fn open(&self, path: &Path, how: Open) -> Result<Box<dyn DiskFile>> {
            if path.ends_with(".gitignore") {
                let source = io::Error::from_raw_os_error(libc::ENOSPC);
                return Err(Error::Io { action: "cannot create".into(), path: path.into(), source });
            }
            OsDisk.open(path, how)
        }
        fn create_dir(&self, path: &Path) -> Result<bool> {
            OsDisk.create_dir(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            OsDisk.rename(from, to)
        }
        fn remove_file(&self, path: &Path) {
            OsDisk.remove_file(path)
        }
        fn sync_dir(&self, path: &Path) -> Result<()> {
            OsDisk.sync_dir(path)
        }
        fn file_len(&self, path: &Path) -> Option<u64> {
            OsDisk.file_len(path)
        }
        fn is_dir(&self, path: &Path) -> bool {
            OsDisk.is_dir(path)
        }
        fn lock(&self, ctx: &Context) -> Result<Option<lock::Guard>> {
            OsDisk.lock(ctx)
        }
        fn activity(&self, sessions_dir: &Path) -> Option<std::fs::File> {
            OsDisk.activity(sessions_dir)
        }
    }

    #[test]
    fn a_gitignore_that_cannot_be_written_is_reported() {
        let ws = tempfile::tempdir().expect("tempdir");
        let err = Context::new_on(&NoRoomForGitignore, ws.path()).unwrap_err();
        assert!(err.to_string().contains(".gitignore"), "{err}");
        assert!(format!("{err:?}").contains("StorageFull"), "{err:?}");
    }
}
