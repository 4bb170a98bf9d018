//! `pseudoclaude`: inspect, search and script a workspace's sessions without the editor.
//!
//! `args.rs` declares the command line (clap), `verbs.rs` does each verb, `rows.rs` is how sessions
//! read on a terminal, `out.rs` the output that ends quietly on a closed pipe, `complete.rs` the
//! shell completion (`candidates.rs` what it offers for an id). `pseudoclaude --help` and
//! doc/cli.md say what each verb does; the `--json` shapes in doc/cli.md are contracts, as the
//! log's fields are.

mod args;
mod candidates;
mod complete;
mod out;
mod rows;
mod verbs;

use std::path::PathBuf;
use std::process::ExitCode;

use args::{Top, Verb};
use out::{Out, closed_pipe, note};

fn main() -> ExitCode {
    match complete::respond() {
        Ok(false) => {}
        Ok(true) => return ExitCode::SUCCESS,
        Err(e) if io_broken_pipe(&e) => return ExitCode::SUCCESS,
        Err(e) => e.exit(),
    }
    let cli = match args::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        // Help and version on standard output (status 0), bad input on standard error (status 2).
        Err(e) => e.exit(),
    };
    let workspace = cli.workspace.unwrap_or_else(|| PathBuf::from("."));
    let mut out = Out::new();
    let result = run(cli.command, &workspace, &mut out).and_then(|code| {
        out.finish()?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        Err(e) if closed_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            note!("pseudoclaude: {e}");
            ExitCode::from(2)
        }
    }
}

/// One verb, to its function in `verbs.rs`.
fn run(command: Top, ws: &std::path::Path, out: &mut Out) -> verbs::CmdResult {
    let sessions = match command {
        Top::Completions { shell } => {
            complete::script(shell, out)?;
            return Ok(ExitCode::SUCCESS);
        }
        Top::Sessions(s) => s,
    };
    match sessions.verb {
        Verb::List { json, external: true, no_refresh, .. } => {
            if sessions.pricing.is_some() {
                return Err("--pricing is not an option of `sessions list --external`".into());
            }
            verbs::list_external(ws, out, json, no_refresh)
        }
        Verb::List { json, all, limit, pricing, external: false, .. } => {
            let pricing = match (pricing, sessions.pricing) {
                (Some(_), Some(_)) => return Err("--pricing is given twice".into()),
                (a, b) => a.or(b),
            };
            verbs::list(ws, out, json, all, limit, pricing.as_deref())
        }
        _ if sessions.pricing.is_some() => Err("--pricing is an option of `sessions list`".into()),
        Verb::Show { id, json } => verbs::show(ws, out, &id, json),
        Verb::Check { id, json } => verbs::check(ws, out, &id, json),
        Verb::Search { text, json, limit, external, no_refresh } => {
            verbs::search(ws, out, &text, json, limit, external.then_some(no_refresh))
        }
        Verb::Open { id } => verbs::open(ws, id.as_deref()),
        Verb::Rename { id, title } => verbs::rename(ws, out, &id, &title),
        Verb::Pin { id, state } => verbs::pin(ws, out, &id, state.unwrap_or(true)),
        Verb::Fork { id, index } => verbs::fork(ws, out, &id, index),
        Verb::Changes { id, json } => verbs::changes(ws, out, &id, json),
        Verb::Rewind { id, index, code_only, conversation_only } => {
            verbs::rewind(ws, out, &id, index, !conversation_only, !code_only)
        }
        Verb::Export { id, format } => verbs::export(ws, out, &id, &format),
        Verb::Import { path } => verbs::import(ws, out, &path),
        Verb::Cleanup { days } => verbs::cleanup(ws, out, days),
    }
}

/// A closed pipe under clap_complete's answer (it writes standard output itself).
fn io_broken_pipe(e: &clap::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) {
            return true;
        }
        cause = c.source();
    }
    false
}
