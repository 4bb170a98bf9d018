//! Running `git` for the worktree chats, and the repository a workspace belongs to.
//!
//! Every call goes through [`git`]: `-C DIR`, hooks off (`core.hooksPath=/dev/null`: a hook is a command of the
//! repository, which never runs unasked; `git worktree add` would run `post-checkout`, `update-ref` the
//! `reference-transaction` hook), the `GIT_*` variables that would point it at another repository removed, English
//! messages, no prompt. Plumbing only where a porcelain command would run hooks or leave state behind.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::Error;

/// The oldest git that has everything used here: `merge-tree --write-tree` (2.38) with `--merge-base` (2.40).
pub const MIN_VERSION: (u32, u32) = (2, 40);

/// The variables that would make git work on another repository, index or tree than the one `-C` names.
const REPO_VARS: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// `git -C dir` with hooks off and the environment cleaned (see the module's doc).
pub fn git(dir: &Path) -> Command {
    let mut cmd = Command::new(program());
    cmd.arg("-C").arg(dir).args(["-c", "core.hooksPath=/dev/null", "-c", "core.quotePath=false"]);
    for var in REPO_VARS {
        cmd.env_remove(var);
    }
    cmd.env("LC_ALL", "C").env("GIT_TERMINAL_PROMPT", "0").env("GIT_OPTIONAL_LOCKS", "0");
    cmd.stdin(Stdio::null());
    cmd
}

/// `git`, or the program `PSEUDOCLAUDE_GIT` names (the tests' way to a missing or too old one).
fn program() -> std::ffi::OsString {
    std::env::var_os("PSEUDOCLAUDE_GIT").unwrap_or_else(|| "git".into())
}

/// Runs `cmd` to its end; a failure (or a missing git) is an [`Error`] naming the command and git's message.
pub fn run(cmd: &mut Command) -> Result<Output, Error> {
    let out = output(cmd)?;
    if out.status.success() { Ok(out) } else { Err(failed(cmd, &out)) }
}

/// Runs `cmd` to its end whatever its status (a merge's conflicts are status 1).
pub fn output(cmd: &mut Command) -> Result<Output, Error> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.output().map_err(|e| spawn_error(cmd, e))
}

/// Runs `cmd` with `input` on its standard input.
pub fn run_with_input(cmd: &mut Command, input: &[u8]) -> Result<Output, Error> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| spawn_error(cmd, e))?;
    let mut stdin = child.stdin.take().expect("stdin piped");
    let data = input.to_vec();
    // Written from a thread: git may fill its output pipe before it has read all of its input.
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().map_err(|e| spawn_error(cmd, e))?;
    let _ = writer.join();
    if out.status.success() { Ok(out) } else { Err(failed(cmd, &out)) }
}

/// Standard output as text, its last newline cut.
pub fn text(out: &Output) -> String {
    let s = String::from_utf8_lossy(&out.stdout);
    s.strip_suffix('\n').unwrap_or(&s).to_owned()
}

/// `git ARGS` in `dir`, its output as text.
pub fn ask(dir: &Path, args: &[&str]) -> Result<String, Error> {
    run(git(dir).args(args)).map(|o| text(&o))
}

/// Whether `git ARGS` in `dir` succeeds (a `--verify`, an `--is-ancestor`); an error only when git cannot run.
pub fn holds(dir: &Path, args: &[&str]) -> Result<bool, Error> {
    Ok(output(git(dir).args(args))?.status.success())
}

fn spawn_error(cmd: &Command, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::GitMissing { program: cmd.get_program().to_string_lossy().into_owned() }
    } else {
        Error::Io { what: format!("cannot run {}", cmd.get_program().to_string_lossy()), source: e }
    }
}

fn failed(cmd: &Command, out: &Output) -> Error {
    let args: Vec<&OsStr> = cmd.get_args().collect();
    // `-C DIR -c … -c …` are ours; the command is what follows.
    let shown: Vec<String> = args.iter().skip(6).map(|a| a.to_string_lossy().into_owned()).collect();
    let message = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    Error::Git { command: format!("git {}", shown.join(" ")), message }
}

/// `git version 2.47.3` → `(2, 47)`.
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let rest = text.trim().strip_prefix("git version ")?;
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Refuses a git older than [`MIN_VERSION`] (or none), saying which one was found.
pub fn check_version() -> Result<(), Error> {
    let out = run(git(Path::new(".")).arg("--version"))?;
    let found = text(&out);
    match parse_version(&found) {
        Some(v) if v >= MIN_VERSION => Ok(()),
        _ => Err(Error::GitTooOld { found }),
    }
}

/// The repository holding a workspace, as its checkout sees it.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The workspace (canonical): where `.PseudoClaude/` is.
    pub workspace: PathBuf,
    /// The top of the checkout's work tree (canonical).
    pub top: PathBuf,
    /// The checkout's own git directory (the journal of a merge is kept there).
    pub git_dir: PathBuf,
}

impl Repo {
    /// The repository of `workspace`: a clear error when git is missing or too old, or this is no work tree.
    pub fn open(workspace: &Path) -> Result<Repo, Error> {
        check_version()?;
        let workspace = std::fs::canonicalize(workspace)
            .map_err(|e| Error::Io { what: format!("cannot open {}", workspace.display()), source: e })?;
        let out = output(git(&workspace).args(["rev-parse", "--show-toplevel", "--absolute-git-dir"]))?;
        if !out.status.success() {
            return Err(Error::NotARepository { dir: workspace });
        }
        let text = text(&out);
        let mut lines = text.lines();
        let (Some(top), Some(git_dir)) = (lines.next(), lines.next()) else {
            return Err(Error::NotARepository { dir: workspace });
        };
        let top = std::fs::canonicalize(top).unwrap_or_else(|_| PathBuf::from(top));
        Ok(Repo { workspace, top, git_dir: PathBuf::from(git_dir) })
    }

    /// The branch the checkout is on (`refs/heads/main`); a detached HEAD is refused.
    pub fn branch(&self) -> Result<String, Error> {
        let out = output(git(&self.top).args(["symbolic-ref", "-q", "HEAD"]))?;
        if out.status.success() { Ok(text(&out)) } else { Err(Error::DetachedHead { dir: self.top.clone() }) }
    }

    /// The commit HEAD names; a branch without a commit yet is refused.
    pub fn head(&self) -> Result<String, Error> {
        let out = output(git(&self.top).args(["rev-parse", "-q", "--verify", "HEAD^{commit}"]))?;
        if out.status.success() { Ok(text(&out)) } else { Err(Error::NoCommit { dir: self.top.clone() }) }
    }

    /// Where the workspace is inside the work tree (`""` at its top).
    pub fn prefix(&self) -> PathBuf {
        self.workspace.strip_prefix(&self.top).map(Path::to_path_buf).unwrap_or_default()
    }
}

/// Identity for the commits made here when the user has none configured (a fresh machine, a container): git would
/// refuse to commit, and the merge would fail on a question the user never asked about.
pub fn with_identity(cmd: &mut Command, dir: &Path) -> Result<(), Error> {
    if !holds(dir, &["var", "GIT_COMMITTER_IDENT"])? {
        for (k, v) in [
            ("GIT_AUTHOR_NAME", "PseudoClaude"),
            ("GIT_AUTHOR_EMAIL", "pseudoclaude@localhost"),
            ("GIT_COMMITTER_NAME", "PseudoClaude"),
            ("GIT_COMMITTER_EMAIL", "pseudoclaude@localhost"),
        ] {
            cmd.env(k, v);
        }
    }
    Ok(())
}

/// A commit of `tree` with `parents` and `message` (`commit-tree`: no hook, no index touched).
pub fn commit_tree(dir: &Path, tree: &str, parents: &[&str], message: &str) -> Result<String, Error> {
    let mut cmd = git(dir);
    cmd.args(["commit-tree", tree]);
    for p in parents {
        cmd.args(["-p", p]);
    }
    cmd.args(["-m", message]);
    with_identity(&mut cmd, dir)?;
    run(&mut cmd).map(|o| text(&o))
}

/// Splits NUL-terminated output into its fields.
pub fn nul_fields(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes.split(|b| *b == 0).filter(|f| !f.is_empty()).map(|f| String::from_utf8_lossy(f).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_git_prints() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(parse_version("git version 2.39.5 (Apple Git-154)"), Some((2, 39)));
        assert_eq!(parse_version("git version 2.40.0.windows.1"), Some((2, 40)));
        assert_eq!(parse_version("hub version 2.14"), None);
    }
}
