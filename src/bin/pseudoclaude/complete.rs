//! Shell completion, clap_complete's dynamic kind: the script a shell loads is a few lines that call
//! this binary back for each <Tab> (`COMPLETE=bash pseudoclaude -- WORDS...`). So the verbs and
//! options offered are always those of the binary on `PATH` (no script to regenerate after an
//! upgrade), and session ids come from the workspace as it is at the <Tab> (`candidates.rs`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::CommandFactory;
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
