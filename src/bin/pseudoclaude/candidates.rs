//! What a <Tab> offers for a session id: the workspace's ids, from the folder names only (no log
//! read: instant at 10,000 sessions), the most recently active first (`session::list::ids`, what
//! `:PseudoResume {id}` completes from). Called by clap_complete while it answers the shell
//! (`complete.rs`); the workspace is the `-C DIR` of the line being completed.

use std::path::{Path, PathBuf};

use clap_complete::CompletionCandidate;

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
