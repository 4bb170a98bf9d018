//! Shell completion, clap_complete's dynamic kind: the script a shell loads is a few lines that call
//! this binary back for each <Tab> (`COMPLETE=bash pseudoclaude -- WORDS...`). So the verbs and
//! options offered are always those of the binary on `PATH` (no script to regenerate after an
//! upgrade), and session ids come from the workspace as it is at the <Tab>: the folder names only, no
//! log read, newest first (`session::list::ids`, what `:PseudoResume {id}` completes from).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::CompletionCandidate;
use clap_complete::env::{Bash, CompleteEnv, EnvCompleter, Fish, Zsh};

use crate::args::{Cli, Shell};

/// The variable that asks for completions, clap_complete's convention (`COMPLETE=bash pseudoclaude`
/// prints the bash script too).
const VAR: &str = "COMPLETE";

/// When the shell asks for completions: answers on standard output and returns `Ok(true)`.
pub fn respond() -> Result<bool, clap::Error> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let cwd = std::env::current_dir().ok();
    CompleteEnv::with_factory(Cli::command).var(VAR).try_complete(args, cwd.as_deref())
}

/// `pseudoclaude completions SHELL`: the script that registers the completion, on `out`.
pub fn script(shell: Shell, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
    };
    completer.write_registration(VAR, "pseudoclaude", "pseudoclaude", &completer_path(), out)
}

/// How the script calls us back: as we were called, made absolute when it was a path (so a
/// `target/release/pseudoclaude` keeps working from another directory), else by name through `PATH`.
fn completer_path() -> String {
    let argv0 = PathBuf::from(std::env::args_os().next().unwrap_or_else(|| "pseudoclaude".into()));
    let path = match std::env::current_dir() {
        Ok(cwd) if argv0.components().count() > 1 => cwd.join(argv0),
        _ => argv0,
    };
    path.to_string_lossy().into_owned()
}

/// Session ids of the workspace, newest first.
pub fn session_ids() -> Vec<CompletionCandidate> {
    pseudoclaude::session::list::ids(&workspace())
        .unwrap_or_default()
        .into_iter()
        .map(CompletionCandidate::new)
        .collect()
}

/// `open`'s: `last`, then the ids.
pub fn open_targets() -> Vec<CompletionCandidate> {
    let last = CompletionCandidate::new("last").help(Some("the newest session".into()));
    std::iter::once(last).chain(session_ids()).collect()
}

/// The workspace of the line being completed: its `-C DIR` (`--workspace DIR`, `-CDIR`,
/// `--workspace=DIR`), else the current directory. The words are as typed: `~/` is expanded here.
fn workspace() -> PathBuf {
    // The words follow the `--` of `pseudoclaude -- pseudoclaude -C DIR sessions show 2026`.
    let args: Vec<String> = std::env::args().collect();
    let words = match args.iter().position(|a| a == "--") {
        Some(i) => &args[i + 1..],
        None => &args[..],
    };
    // The last word is the one being completed: it names no workspace yet.
    let words = &words[..words.len().saturating_sub(1)];
    let mut dir = None;
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if w == "-C" || w == "--workspace" {
            dir = it.next().cloned();
        } else if let Some(d) = w.strip_prefix("--workspace=") {
            dir = Some(d.to_string());
        } else if let Some(d) = w.strip_prefix("-C").filter(|d| !d.is_empty()) {
            dir = Some(d.to_string());
        }
    }
    match dir {
        Some(d) => expand_home(&d),
        None => PathBuf::from("."),
    }
}

fn expand_home(dir: &str) -> PathBuf {
    match (dir.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ if dir == "~" => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| dir.into()),
        _ => PathBuf::from(dir),
    }
}
