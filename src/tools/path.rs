//! Confines the model's paths to the workspace.
//!
//! A path is resolved lexically first (`.` and `..` folded, relative paths joined to the workspace),
//! then for real: the nearest ancestor that exists is canonicalized (following every symlink) and the
//! not-yet-existing rest is appended. Both results must lie inside the workspace; the tools then work
//! on the real path, so a symlink cannot lead them out of it later in the same call.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::session::ROOT_DIR_NAME;

/// The workspace root, as given and as the file system names it.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    /// Absolute and lexically normalized, symlinks kept (what the user may type).
    given: PathBuf,
    /// Canonical (what every resolved path is compared with).
    canon: PathBuf,
}

/// A path the tools may use.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The real path (canonical for the part that exists).
    pub abs: PathBuf,
    /// Relative to the workspace, `/`-separated, `.` for the root itself: what outputs show.
    pub rel: String,
}

impl Root {
    pub fn new(workspace: &Path) -> Root {
        let abs = if workspace.is_absolute() {
            workspace.to_path_buf()
        } else {
            std::env::current_dir().map(|d| d.join(workspace)).unwrap_or_else(|_| workspace.to_path_buf())
        };
        let given = normalize(&abs);
        let canon = std::fs::canonicalize(&given).unwrap_or_else(|_| given.clone());
        Root { given, canon }
    }

    pub fn canon(&self) -> &Path {
        &self.canon
    }

    /// The workspace-relative name of a real path inside the workspace.
    pub fn rel(&self, real: &Path) -> String {
        match real.strip_prefix(&self.canon) {
            Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
            Ok(r) => r.to_string_lossy().into_owned(),
            Err(_) => real.to_string_lossy().into_owned(),
        }
    }

    /// Resolves a path the model gave; the error says why it is refused.
    pub fn resolve(&self, raw: &str) -> Result<Resolved, String> {
        if raw.is_empty() {
            return Err("`path` is empty".to_string());
        }
        if raw.contains('\0') {
            return Err("`path` contains a NUL character".to_string());
        }
        let outside = || {
            format!(
                "path {raw:?} is outside the workspace ({}); only files inside it can be used",
                self.given.display()
            )
        };
        let p = Path::new(raw);
        let joined = if p.is_absolute() { p.to_path_buf() } else { self.canon.join(p) };
        let norm = normalize(&joined);
        let inside = norm
            .strip_prefix(&self.canon)
            .or_else(|_| norm.strip_prefix(&self.given))
            .map_err(|_| outside())?
            .to_path_buf();

        // The nearest existing ancestor, canonicalized, and the rest appended.
        let mut cur = self.canon.join(&inside);
        let mut rest: Vec<std::ffi::OsString> = Vec::new();
        loop {
            match std::fs::symlink_metadata(&cur) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if cur == self.canon {
                        return Err(format!("the workspace {} does not exist", self.given.display()));
                    }
                    match (cur.file_name(), cur.parent()) {
                        (Some(name), Some(parent)) => {
                            rest.push(name.to_os_string());
                            cur = parent.to_path_buf();
                        }
                        _ => return Err(outside()),
                    }
                }
                Err(e) => return Err(format!("cannot use path {raw:?}: {e}")),
            }
        }
        let mut real = match std::fs::canonicalize(&cur) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let target = std::fs::read_link(&cur).map(|t| t.display().to_string()).unwrap_or_default();
                return Err(format!(
                    "path {raw:?} goes through {}, a symlink to {target:?}, which does not exist",
                    self.rel(&cur)
                ));
            }
            Err(e) => return Err(format!("cannot use path {raw:?}: {e}")),
        };
        for name in rest.iter().rev() {
            real.push(name);
        }
        if !real.starts_with(&self.canon) {
            return Err(format!(
                "path {raw:?} leads through a symlink to {}, outside the workspace ({}); only files inside it can be used",
                real.display(),
                self.given.display()
            ));
        }
        let rel = self.rel(&real);
        Ok(Resolved { abs: real, rel })
    }

    /// Refuses paths inside `.PseudoClaude/` (the session logs) and inside any `.git/` (a
    /// repository's own files: a write there can rewrite history or run code at the next git
    /// command), for the tools that change files. Compared without regard to case, for
    /// case-insensitive file systems.
    pub fn check_writable(&self, res: &Resolved) -> Result<(), String> {
        let rel = res.abs.strip_prefix(&self.canon).unwrap_or(&res.abs);
        let in_git = rel
            .components()
            .any(|c| matches!(c, Component::Normal(n) if n.to_string_lossy().eq_ignore_ascii_case(".git")));
        if in_git {
            return Err(format!(
                "{} is inside a .git/ folder, where git keeps the repository itself; tools may not change it \
                 (use run_command with git for that)",
                res.rel
            ));
        }
        match rel.components().next() {
            Some(Component::Normal(first)) if first.to_string_lossy().eq_ignore_ascii_case(ROOT_DIR_NAME) => Err(
                format!("{} is inside {ROOT_DIR_NAME}/, where the session logs live; tools may not change it", res.rel),
            ),
            None => Err("the path is the workspace itself, not a file".to_string()),
            _ => Ok(()),
        }
    }

    /// Whether a real path is the session-log folder at the workspace root (left out of walks).
    pub fn is_log_dir(&self, real: &Path) -> bool {
        real.parent() == Some(self.canon.as_path())
            && real.file_name().is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case(ROOT_DIR_NAME))
    }
}

/// Folds `.` and `..` without touching the file system (`..` above `/` stays at `/`).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_dots() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/a/../../..")), PathBuf::from("/"));
    }

    #[test]
    fn resolve_inside_and_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(root.resolve("sub/../x.txt").unwrap().rel, "x.txt");
        assert_eq!(root.resolve(".").unwrap().rel, ".");
        assert_eq!(root.resolve("sub/new/deeper.txt").unwrap().rel, "sub/new/deeper.txt");
        assert!(root.resolve("../x").unwrap_err().contains("outside the workspace"));
        assert!(root.resolve("/etc/passwd").unwrap_err().contains("outside the workspace"));
        let abs = dir.path().join("sub/a.txt");
        assert_eq!(root.resolve(abs.to_str().unwrap()).unwrap().rel, "sub/a.txt");
    }

    #[test]
    fn log_dir_is_not_writable() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let r = root.resolve(".PseudoClaude/sessions/x").unwrap();
        assert!(root.check_writable(&r).is_err());
        let r = root.resolve(".pseudoclaude/x").unwrap();
        assert!(root.check_writable(&r).is_err());
        let r = root.resolve("src/x").unwrap();
        assert!(root.check_writable(&r).is_ok());
        for git in [".git/config", ".git", "sub/.GIT/hooks/pre-commit"] {
            let r = root.resolve(git).unwrap();
            assert!(root.check_writable(&r).unwrap_err().contains("inside a .git/ folder"), "{git}");
        }
        let r = root.resolve(".github/workflows/ci.yml").unwrap();
        assert!(root.check_writable(&r).is_ok());
        assert!(root.is_log_dir(&root.canon().join(".PseudoClaude")));
        let r = root.resolve(".").unwrap();
        assert_eq!(root.check_writable(&r).unwrap_err(), "the path is the workspace itself, not a file");
    }

    #[test]
    fn a_path_through_a_file_is_refused_with_the_systems_reason() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        // not "not found" (which would resolve to a file to create under a file)
        let err = root.resolve("a.txt/new.txt").unwrap_err();
        assert!(err.starts_with("cannot use path \"a.txt/new.txt\": ") && err.contains("Not a directory"), "{err}");
    }

    #[test]
    fn a_dangling_symlink_is_named_and_a_symlink_loop_is_the_systems_reason() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::os::unix::fs::symlink("missing", dir.path().join("dangling")).unwrap();
        let err = root.resolve("dangling/x.txt").unwrap_err();
        assert_eq!(
            err,
            "path \"dangling/x.txt\" goes through dangling, a symlink to \"missing\", which does not exist"
        );
        std::os::unix::fs::symlink("loop-b", dir.path().join("loop-a")).unwrap();
        std::os::unix::fs::symlink("loop-a", dir.path().join("loop-b")).unwrap();
        let err = root.resolve("loop-a").unwrap_err();
        assert!(err.starts_with("cannot use path \"loop-a\": ") && err.contains("symbolic links"), "{err}");
    }
}
