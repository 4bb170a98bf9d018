//! The verbs of `pseudoclaude sessions`, one function each: the workspace, [`Out`] and the verb's
//! arguments in; lines on standard output, notes on standard error (after the output is flushed, so
//! a terminal shows them in order); an exit status back (1 where a verb documents it: damage found,
//! nothing matched). An `Err` is one line on standard error and exit status 2.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use pseudoclaude::import;
use pseudoclaude::session::export::Format;
use pseudoclaude::session::{self, Context, ListOptions, RetentionOptions, fork, meta};
use pseudoclaude::usage::Pricing;

use crate::out::{Out, note};
use crate::rows::{list_row, money, render, role_label};

pub type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Where `sessions list` finds prices when `--pricing` is not given.
const PRICING_ENV: &str = "PSEUDOCLAUDE_PRICING";

/// The program `open` starts when it is set; else `nvim` on `PATH`.
const NVIM_ENV: &str = "PSEUDOCLAUDE_NVIM";

/// The prices of `--pricing FILE`, else of the file `$PSEUDOCLAUDE_PRICING` names, else none, with
/// the file's name for the messages. A file that cannot be read or holds a bad entry is an error
/// naming both: a cost computed without the price meant would be wrong.
fn pricing(file: Option<&str>) -> Result<Option<(Pricing, String)>, Box<dyn std::error::Error>> {
    let (path, from) = match file {
        Some(f) => (f.to_string(), "--pricing"),
        None => match std::env::var(PRICING_ENV) {
            Ok(f) if !f.is_empty() => (f, PRICING_ENV),
            _ => return Ok(None),
        },
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path} ({from}): {e}"))?;
    let pricing = Pricing::from_json(&text).map_err(|e| format!("{path} ({from}): {e}"))?;
    Ok(Some((pricing, path)))
}

/// Pretty JSON and a newline: the shape of every `--json` (doc/cli.md).
fn json<T: serde::Serialize>(out: &mut Out, value: &T) -> Result<(), Box<dyn std::error::Error>> {
    // Made whole first: serde_json's writer would hide a closed pipe inside its own error type.
    let text = serde_json::to_string_pretty(value)?;
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    Ok(())
}

pub fn list(
    ws: &Path,
    out: &mut Out,
    json_out: bool,
    all: bool,
    limit: Option<usize>,
    pricing_file: Option<&str>,
) -> CmdResult {
    let (pricing, pricing_file) = pricing(pricing_file)?.unzip();
    let sessions = session::list(
        ws,
        &ListOptions {
            include_empty: all,
            check_locks: true,
            limit,
            include_pinned: true,
            pricing: pricing.clone().unwrap_or_default(),
            ..Default::default()
        },
    )?;
    if json_out {
        json(out, &sessions)?;
    } else {
        for s in &sessions {
            writeln!(out, "{}", list_row(s))?;
        }
    }
    out.flush()?;
    if sessions.is_empty() {
        note!("no sessions in {}", session::sessions_dir(ws).display());
    }
    if let (Some(pricing), Some(file)) = (&pricing, &pricing_file) {
        cost_notes(&sessions, pricing, file);
    }
    Ok(ExitCode::SUCCESS)
}

/// After a priced list, on standard error: the total of the costs shown, and the models that used
/// tokens without a price in `file` (a model name spelled differently from the log's is the usual
/// reason a cost is missing).
fn cost_notes(sessions: &[session::SessionInfo], pricing: &Pricing, file: &str) {
    let priced: Vec<f64> = sessions.iter().filter_map(|s| s.cost).collect();
    let mut unpriced: std::collections::BTreeMap<&str, usize> = Default::default();
    for s in sessions {
        for model in s.usage_by_model.unpriced(pricing) {
            *unpriced.entry(model).or_default() += 1;
        }
    }
    if !priced.is_empty() {
        let sum: f64 = priced.iter().sum();
        let n = priced.len();
        note!("total cost: {} over {n} session{}", money(sum), if n == 1 { "" } else { "s" });
    }
    for (model, n) in unpriced {
        let sessions = if n == 1 { "1 session shows".to_string() } else { format!("{n} sessions show") };
        note!("no price for model {model:?} in {file}: {sessions} no cost");
    }
}

/// `no_refresh`: the list as its cache holds it (`--no-refresh`).
pub fn list_external(ws: &Path, out: &mut Out, json_out: bool, no_refresh: bool) -> CmdResult {
    // the sessions we ran with an ACP agent are ours to list, not the agent's transcripts of them
    let ours = session::list(ws, &ListOptions { include_empty: true, ..Default::default() })?;
    let listing = import::list::ListOptions { no_refresh, ..Default::default() };
    let items = import::list::list_with(ws, &import::Homes::from_env(), &listing);
    let items = import::list::without_ours(items, &ours);
    for n in import::packed::notes() {
        note!("note: {n}");
    }
    if json_out {
        json(out, &items)?;
    } else {
        for i in &items {
            let what = match &i.unsupported {
                Some(why) => format!("(not importable: {why})"),
                None => {
                    format!("{} msgs  {}  {}", i.messages, if i.model.is_empty() { "-" } else { &i.model }, i.title)
                }
            };
            writeln!(out, "{}  {}  {}  {}", i.agent, i.id, what, i.path.display())?;
        }
    }
    out.flush()?;
    for i in &items {
        for n in &i.notes {
            note!("note: {}: {n}", i.id);
        }
    }
    if items.is_empty() {
        note!(
            "no session of another agent (Claude Code, Codex, Gemini CLI, Qwen Code, opencode, Pi) in {}",
            ws.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn show(ws: &Path, out: &mut Out, id: &str, json_out: bool) -> CmdResult {
    let loaded = session::load(&Context::open(ws, id)?)?;
    if json_out {
        json(out, &loaded)?;
        return Ok(ExitCode::SUCCESS);
    }
    for m in &loaded.messages {
        writeln!(out, "{}", render(m))?;
    }
    out.flush()?;
    if loaded.damaged() {
        note!("note: {}", loaded.damage_report());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check(ws: &Path, out: &mut Out, id: &str, json_out: bool) -> CmdResult {
    let ctx = Context::open(ws, id)?;
    let loaded = session::load(&ctx)?;
    if json_out {
        let report = serde_json::json!({
            "id": loaded.id,
            "ok": !loaded.damaged(),
            "messages": loaded.messages.len(),
            "entries": loaded.entries,
            "bad_lines": loaded.bad_lines,
            "repaired": loaded.repaired,
            "torn_tail_bytes": loaded.torn_tail_bytes,
            "trimmed": loaded.trimmed,
            "dropped": loaded.dropped,
            "spill_problems": loaded.spill_problems,
            "interrupted": loaded.interrupted,
            "held_by": session::lock::holder(&ctx),
        });
        json(out, &report)?;
    } else if loaded.damaged() {
        writeln!(out, "{}: {}", loaded.id, loaded.damage_report())?;
    } else {
        writeln!(
            out,
            "{}: ok ({} messages restored from {} entries)",
            loaded.id,
            loaded.messages.len(),
            loaded.entries
        )?;
    }
    Ok(if loaded.damaged() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// TEXT is the words given joined by one space; `external`: the other agents' sessions instead of ours, `Some(true)`
/// as the list's cache holds them (`--no-refresh`).
pub fn search(
    ws: &Path,
    out: &mut Out,
    words: &[String],
    json_out: bool,
    limit: Option<usize>,
    external: Option<bool>,
) -> CmdResult {
    let text = words.join(" ");
    let query = session::search::Query::new(&text, session::search::Case::Smart)?;
    let opts = session::search::Options { limit, ..Default::default() };
    let (hits, summary) = match external {
        Some(no_refresh) => {
            let listing = import::list::ListOptions { no_refresh, ..Default::default() };
            let found = import::search::search_all_listed(ws, &import::Homes::from_env(), &query, &opts, &listing);
            for n in import::packed::notes() {
                note!("note: {n}");
            }
            found
        }
        None => session::search::search_all(ws, &query, &opts)?,
    };
    if json_out {
        json(out, &hits)?;
    } else {
        for h in &hits {
            writeln!(out, "{}:{}:{}: {}", h.id, h.index, role_label(h), h.snippet)?;
        }
    }
    out.flush()?;
    for why in &summary.skipped {
        note!("pseudoclaude: skipped {why}");
    }
    if hits.is_empty() {
        note!("no message holds {text:?} ({} sessions searched)", summary.sessions);
        return Ok(ExitCode::from(1));
    }
    if summary.truncated {
        note!("stopped after {} hits (--limit)", summary.hits);
    }
    Ok(ExitCode::SUCCESS)
}

/// Replaces this process with Neovim in the workspace, `:PseudoResume ID` run once it has started
/// (`:PseudoResume` alone, the picker, without an id). The id is checked first, so a typo is an
/// error in the shell rather than in the editor; `last` is the newest session, as
/// `:PseudoResume last` resolves it (by activity; pins do not count).
pub fn open(ws: &Path, target: Option<&str>) -> CmdResult {
    let command = match target {
        None => "PseudoResume".to_string(),
        Some("last") => {
            let newest = session::list(ws, &ListOptions { limit: Some(1), max_read: Some(0), ..Default::default() })?;
            match newest.first() {
                Some(s) => format!("PseudoResume {}", s.id),
                None => return Err(format!("no session to resume in {}", session::sessions_dir(ws).display()).into()),
            }
        }
        Some(id) => {
            Context::open(ws, id)?;
            format!("PseudoResume {id}")
        }
    };
    let (program, from) = match std::env::var(NVIM_ENV) {
        Ok(p) if !p.is_empty() => (p, format!(" (${NVIM_ENV})")),
        _ => ("nvim".to_string(), String::new()),
    };
    use std::os::unix::process::CommandExt;
    // `exec` only returns on failure: Neovim gets the terminal, the signals and the exit status.
    let e = std::process::Command::new(&program).arg("-c").arg(&command).current_dir(ws).exec();
    Err(format!("cannot start {program}{from}: {e}").into())
}

pub fn rename(ws: &Path, out: &mut Out, id: &str, title: &[String]) -> CmdResult {
    let title = title.join(" ");
    let ctx = Context::open(ws, id)?;
    let info = meta::append(&ctx, meta::title_entry(&title)?)?;
    if title.trim().is_empty() {
        writeln!(out, "{id}: back to its automatic title {:?}", info.title)?;
    } else {
        writeln!(out, "{id}: renamed {:?}", info.title)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn pin(ws: &Path, out: &mut Out, id: &str, pinned: bool) -> CmdResult {
    let ctx = Context::open(ws, id)?;
    let info = meta::append(&ctx, meta::pin_entry(pinned))?;
    writeln!(out, "{id}: {}", if info.pinned { "pinned" } else { "unpinned" })?;
    Ok(ExitCode::SUCCESS)
}

pub fn fork(ws: &Path, out: &mut Out, id: &str, index: usize) -> CmdResult {
    let forked = fork::fork(ws, id, Some(index))?;
    note!("forked {id} at message {} ({} messages)", forked.forked_from.index, forked.messages);
    writeln!(out, "{}", forked.id)?;
    Ok(ExitCode::SUCCESS)
}

pub fn changes(ws: &Path, out: &mut Out, id: &str, json_out: bool) -> CmdResult {
    let turns = pseudoclaude::rewind::changes_of(ws, id)?;
    if json_out {
        json(out, &turns)?;
        return Ok(ExitCode::SUCCESS);
    }
    for t in &turns {
        for f in &t.files {
            let lost = if f.restorable { "" } else { " [not restorable]" };
            writeln!(out, "{} {} {} +{} -{}{lost}", t.index, f.status, f.path, f.added, f.removed)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Rewinds session `id` as the editor's `rewind()` does, through the same agent: its lock (refused while an
/// editor has it open), its recovery of an unfinished rewind, its log.
pub fn rewind(ws: &Path, out: &mut Out, id: &str, index: usize, code: bool, conversation: bool) -> CmdResult {
    use pseudoclaude::agent::{Agent, AgentConfig};
    use pseudoclaude::rewind::RewindOptions;
    let provider = std::sync::Arc::new(pseudoclaude::provider::demo::Demo::new(std::time::Duration::ZERO));
    let (agent, _) = Agent::resume(AgentConfig::new(ws), provider, std::sync::Arc::new(NoQuestions), id)?;
    let report = agent.rewind(index, &RewindOptions { code, conversation, ..Default::default() });
    if let Some(e) = &report.error {
        return Err(e.clone().into());
    }
    for p in &report.restored {
        writeln!(out, "restored {p}")?;
    }
    for p in &report.removed {
        writeln!(out, "removed {p}")?;
    }
    for c in &report.conflicts {
        writeln!(out, "kept {} ({})", c.path, c.why)?;
    }
    out.flush()?;
    if conversation {
        note!("the history of {id} now ends before message {index}");
    }
    Ok(if report.conflicts.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The CLI asks nothing: a rewind runs no tool.
struct NoQuestions;

impl pseudoclaude::tools::Approver for NoQuestions {
    fn ask(
        &self,
        _req: pseudoclaude::tools::ApprovalRequest,
    ) -> pseudoclaude::provider::BoxFuture<'static, pseudoclaude::tools::Approval> {
        Box::pin(async { pseudoclaude::tools::Approval::No })
    }
}

pub fn export(ws: &Path, out: &mut Out, id: &str, format: &str) -> CmdResult {
    let format = Format::parse(format)?;
    write!(out, "{}", session::export::export(&Context::open(ws, id)?, format)?)?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(ws: &Path, out: &mut Out, path: &Path) -> CmdResult {
    // an id as `list --external` shows it, unless a file of that name is there
    let done = match path.to_str() {
        Some(what) => import::import_any(ws, &import::Homes::from_env(), what)?,
        None => import::import(ws, path)?,
    };
    for n in &done.notes {
        note!("note: {n}");
    }
    if done.existing {
        note!("already imported, unchanged since: session {} ({} messages)", done.id, done.messages);
    } else {
        note!("imported {} ({} messages)", path.display(), done.messages);
    }
    writeln!(out, "{}", done.id)?;
    Ok(ExitCode::SUCCESS)
}

pub fn cleanup(ws: &Path, out: &mut Out, days: u32) -> CmdResult {
    let removed = session::cleanup(ws, &RetentionOptions::new(days))?;
    for id in &removed {
        writeln!(out, "removed {id}")?;
    }
    // The files' copies (rewind) no session names any more go too, as the editor's cleanup does.
    let objects = pseudoclaude::rewind::collect_garbage(ws)?;
    out.flush()?;
    if removed.is_empty() {
        note!("nothing idle for more than {days} days");
    }
    if objects > 0 {
        note!("removed {objects} stored copies of files no session refers to");
    }
    Ok(ExitCode::SUCCESS)
}
