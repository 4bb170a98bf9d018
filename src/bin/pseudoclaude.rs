//! `pseudoclaude`: inspect a workspace's sessions without the editor.
//!
//! ```text
//! pseudoclaude [-C DIR] sessions list [--json] [--all] [--limit N] [--pricing FILE]
//! pseudoclaude [-C DIR] sessions show ID [--json]
//! pseudoclaude [-C DIR] sessions check ID [--json]
//! pseudoclaude [-C DIR] sessions cleanup [--days N]
//! pseudoclaude [-C DIR] sessions search TEXT [--json] [--limit N]
//! pseudoclaude [-C DIR] sessions rename ID TITLE
//! pseudoclaude [-C DIR] sessions pin ID [on|off]
//! pseudoclaude [-C DIR] sessions fork ID INDEX
//! pseudoclaude [-C DIR] sessions export ID [--format md|json]
//! pseudoclaude [-C DIR] sessions list --external [--json]
//! pseudoclaude [-C DIR] sessions import PATH
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use pseudoclaude::import;
use pseudoclaude::message::Message;
use pseudoclaude::session::export::Format;
use pseudoclaude::session::{self, Context, ListOptions, RetentionOptions, fork, meta, retention};
use pseudoclaude::usage::{Pricing, Usage};

/// Where `sessions list` finds prices when `--pricing` is not given.
const PRICING_ENV: &str = "PSEUDOCLAUDE_PRICING";

const USAGE: &str = "usage: pseudoclaude [-C DIR] sessions <list [--json] [--all] [--limit N] [--pricing FILE] | show ID [--json] | check ID [--json] | cleanup [--days N] | search TEXT [--json] [--limit N] | rename ID TITLE | pin ID [on|off] | fork ID INDEX | export ID [--format md|json] | import PATH>

  list     sessions of the workspace, pinned first, then newest first (--all: include empty ones), each
           with its marks: [pinned], [fork of ID at message N], [git: BRANCH COMMIT], the tokens
           reported ([12.3k in (80% cached), 1.2k out]) and their cost when prices are given;
           --pricing FILE: the prices, a JSON object of dollars per million tokens by model,
             {\"MODEL\": {\"input\": 3, \"output\": 15, \"cache_read\": 0.3, \"cache_write\": 3.75}}
             (the Lua `pricing` option's shape; cache prices default to input); without it, the
             file $PSEUDOCLAUDE_PRICING names, if set. The total and the models without a price
             go to standard error
  show     the history a resume would restore
  check    report damage in a session's log; exit status 1 when there is any
  cleanup  remove sessions idle for more than N days (default 30)
  search   the messages holding TEXT (literal; case-insensitive unless TEXT has an upper-case letter),
           newest sessions first, one line each: ID:INDEX:ROLE: snippet (INDEX as `show` numbers them
           from 1); exit status 1 when nothing matched
  rename   name a session (an empty TITLE, \"\", gives it back its automatic title)
  pin      pin a session (on, the default) or unpin it (off): pinned sessions are listed first
  fork     a new session holding messages 1..INDEX of ID (whole tool exchanges); prints its id
  export   the session as Markdown (default) or JSON, on standard output
  list --external
           the workspace's Claude Code ($CLAUDE_CONFIG_DIR, else ~/.claude) and Codex ($CODEX_HOME, else
           ~/.codex) sessions: SOURCE ID MESSAGES MODEL TITLE PATH; the files are only read
  import   a Claude Code transcript or Codex rollout as a new session (or the one it was imported into
           before, when the file has not changed since); prints its id. The file is only read
  -C DIR   the workspace (default: the current directory)";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut workspace = PathBuf::from(".");
    if let Some(i) = args.iter().position(|a| a == "-C" || a == "--workspace") {
        if i + 1 >= args.len() {
            return usage_error("-C needs a directory");
        }
        workspace = PathBuf::from(args.remove(i + 1));
        args.remove(i);
    }
    let json = take_flag(&mut args, "--json");
    let all = take_flag(&mut args, "--all");
    let external = take_flag(&mut args, "--external");
    let pricing_file = match take_option(&mut args, "--pricing") {
        Ok(file) => file,
        Err(why) => return usage_error(&why),
    };
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    if pricing_file.is_some() && !matches!(words.as_slice(), ["sessions", "list", ..]) {
        return usage_error("--pricing is an option of `sessions list`");
    }
    let list = |limit| match pricing(pricing_file.as_deref()) {
        Ok(pricing) => cmd_list(&workspace, json, all, limit, pricing),
        Err(e) => Err(e),
    };
    if external && !matches!(words.as_slice(), ["sessions", "list"]) {
        return usage_error("--external is an option of `sessions list`");
    }
    let result = match words.as_slice() {
        ["sessions", "list"] if external => cmd_list_external(&workspace, json),
        ["sessions", "import", path] => cmd_import(&workspace, std::path::Path::new(path)),
        ["sessions", "list"] => list(None),
        ["sessions", "list", "--limit", n] => match n.parse() {
            Ok(limit) => list(Some(limit)),
            Err(_) => return usage_error(&format!("--limit needs a number, not {n:?}")),
        },
        ["sessions", "search", rest @ ..] => match search_args(rest) {
            Ok((text, limit)) => cmd_search(&workspace, &text, json, limit),
            Err(why) => return usage_error(&why),
        },
        ["sessions", "show", id] => cmd_show(&workspace, id, json),
        ["sessions", "check", id] => cmd_check(&workspace, id, json),
        ["sessions", "rename", id, title @ ..] if !title.is_empty() => cmd_rename(&workspace, id, &title.join(" ")),
        ["sessions", "pin", id] => cmd_pin(&workspace, id, true),
        ["sessions", "pin", id, "on"] => cmd_pin(&workspace, id, true),
        ["sessions", "pin", id, "off"] => cmd_pin(&workspace, id, false),
        ["sessions", "pin", _, other] => return usage_error(&format!("pin takes on or off, not {other:?}")),
        ["sessions", "fork", id, index] => match index.parse::<usize>() {
            Ok(index) => cmd_fork(&workspace, id, index),
            Err(_) => return usage_error(&format!("INDEX must be a message number (1 or more), not {index:?}")),
        },
        ["sessions", "export", id] => cmd_export(&workspace, id, "markdown"),
        ["sessions", "export", id, "--format", format] => cmd_export(&workspace, id, format),
        ["sessions", "cleanup"] => cmd_cleanup(&workspace, retention::DEFAULT_DAYS),
        ["sessions", "cleanup", "--days", n] => match n.parse() {
            Ok(days) => cmd_cleanup(&workspace, days),
            Err(_) => return usage_error(&format!("--days needs a number, not {n:?}")),
        },
        ["-h"] | ["--help"] | ["help"] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => return usage_error("unknown command"),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pseudoclaude: {e}");
            ExitCode::from(2)
        }
    }
}

fn take_flag(args: &mut Vec<String>, flag: &str) -> bool {
    let before = args.len();
    args.retain(|a| a != flag);
    args.len() != before
}

/// `OPTION VALUE` or `OPTION=VALUE`, anywhere on the line, taken out of `args`.
fn take_option(args: &mut Vec<String>, option: &str) -> Result<Option<String>, String> {
    let prefix = format!("{option}=");
    let mut value = None;
    while let Some(i) = args.iter().position(|a| a == option || a.starts_with(&prefix)) {
        let v = if args[i] == option {
            if i + 1 >= args.len() {
                return Err(format!("{option} needs a file"));
            }
            args.remove(i + 1)
        } else {
            args[i][prefix.len()..].to_string()
        };
        args.remove(i);
        if value.is_some() {
            return Err(format!("{option} is given twice"));
        }
        value = Some(v);
    }
    Ok(value)
}

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

fn usage_error(why: &str) -> ExitCode {
    eprintln!("pseudoclaude: {why}\n{USAGE}");
    ExitCode::from(2)
}

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

fn cmd_list(
    workspace: &std::path::Path,
    json: bool,
    all: bool,
    limit: Option<usize>,
    pricing: Option<(Pricing, String)>,
) -> CmdResult {
    let (pricing, pricing_file) = pricing.unzip();
    let sessions = session::list(
        workspace,
        &ListOptions {
            include_empty: all,
            check_locks: true,
            limit,
            include_pinned: true,
            pricing: pricing.clone().unwrap_or_default(),
            ..Default::default()
        },
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&sessions)?);
    } else {
        for s in &sessions {
            println!("{}", list_row(s));
        }
    }
    if sessions.is_empty() {
        eprintln!("no sessions in {}", session::sessions_dir(workspace).display());
    }
    if let (Some(pricing), Some(file)) = (&pricing, &pricing_file) {
        cost_notes(&sessions, pricing, file);
    }
    Ok(ExitCode::SUCCESS)
}

/// One session of `sessions list`: id, messages, size, model, title, then its marks.
fn list_row(s: &session::SessionInfo) -> String {
    let mut marks = String::new();
    if s.pinned {
        marks.push_str("  [pinned]");
    }
    if let Some(f) = &s.forked_from {
        marks.push_str(&format!("  [fork of {} at message {}]", f.id, f.index));
    }
    match (&s.branch, &s.commit) {
        (Some(b), Some(c)) => marks.push_str(&format!("  [git: {b} {c}]")),
        (Some(b), None) => marks.push_str(&format!("  [git: {b}]")),
        (None, Some(c)) => marks.push_str(&format!("  [git: detached {c}]")),
        (None, None) => {}
    }
    if let Some(usage) = usage_summary(&s.usage, s.cost) {
        marks.push_str(&format!("  [{usage}]"));
    }
    if let Some(h) = &s.held_by {
        marks.push_str(&format!("  [open: {h}]"));
    }
    if s.damaged {
        marks.push_str(&format!("  [damaged: {}]", damage(s)));
    }
    let title = match s.title.as_str() {
        "" if s.messages == 0 && s.damaged => "(unreadable session)",
        t => t,
    };
    format!(
        "{}  {:>4} msgs  {:>9}  {:<20}  {title}{marks}",
        s.id,
        s.messages,
        human_bytes(s.bytes),
        if s.model.is_empty() { "-" } else { &s.model },
    )
}

/// "3.6k in (83% cached), 200 out, $0.0013", as the winbar reads (`lua/pseudoclaude/usage.lua`): the
/// whole prompt, the share of it read from the provider's cache, the output, the cost when known.
/// `None` when nothing was reported.
fn usage_summary(u: &Usage, cost: Option<f64>) -> Option<String> {
    if u.is_zero() {
        return None;
    }
    let prompt = u.prompt_tokens();
    let mut out = format!("{} in", tokens(prompt));
    if u.cache_read_tokens > 0 {
        let share = (u.cache_read_tokens as f64 * 100.0 / prompt as f64 + 0.5).floor();
        out.push_str(&format!(" ({share}% cached)"));
    }
    out.push_str(&format!(", {} out", tokens(u.output_tokens)));
    if let Some(dollars) = cost {
        out.push_str(&format!(", {}", money(dollars)));
    }
    Some(out)
}

/// "950", "12.3k", "4.1M".
fn tokens(n: u64) -> String {
    match n {
        n if n < 1000 => n.to_string(),
        n if n < 1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        n => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// "$0.0042", "$1.27", "$240".
fn money(dollars: f64) -> String {
    match dollars {
        d if d < 0.01 => format!("${d:.4}"),
        d if d < 100.0 => format!("${d:.2}"),
        d => format!("${d:.0}"),
    }
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
        eprintln!("total cost: {} over {n} session{}", money(sum), if n == 1 { "" } else { "s" });
    }
    for (model, n) in unpriced {
        let sessions = if n == 1 { "1 session shows".to_string() } else { format!("{n} sessions show") };
        eprintln!("no price for model {model:?} in {file}: {sessions} no cost");
    }
}

/// What a damaged session's row says: unreadable lines, repaired lines, a torn last line.
fn damage(s: &session::SessionInfo) -> String {
    let mut parts = Vec::new();
    if s.bad_lines > 0 {
        parts.push(format!("{} bad lines", s.bad_lines));
    }
    if s.repaired > 0 {
        parts.push(format!("{} repaired", s.repaired));
    }
    if s.torn_tail_bytes > 0 {
        parts.push(format!("torn last line of {} bytes", s.torn_tail_bytes));
    }
    format!("{}; see `pseudoclaude sessions check {}`", parts.join(", "), s.id)
}

/// TEXT (its words joined by one space) and `--limit N`.
fn search_args(rest: &[&str]) -> Result<(String, Option<usize>), String> {
    let mut words = Vec::new();
    let mut limit = None;
    let mut it = rest.iter();
    while let Some(w) = it.next() {
        if *w == "--limit" {
            let n = it.next().ok_or("--limit needs a number")?;
            limit = Some(n.parse().map_err(|_| format!("--limit needs a number, not {n:?}"))?);
        } else {
            words.push(*w);
        }
    }
    if words.is_empty() {
        return Err("search needs the text to look for".into());
    }
    Ok((words.join(" "), limit))
}

fn cmd_search(workspace: &std::path::Path, text: &str, json: bool, limit: Option<usize>) -> CmdResult {
    let query = session::search::Query::new(text, session::search::Case::Smart)?;
    let opts = session::search::Options { limit, ..Default::default() };
    let (hits, summary) = session::search::search_all(workspace, &query, &opts)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&hits)?);
    } else {
        let mut out = std::io::stdout().lock();
        for h in &hits {
            use std::io::Write;
            writeln!(out, "{}:{}:{}: {}", h.id, h.index, role_label(h), h.snippet)?;
        }
    }
    for why in &summary.skipped {
        eprintln!("pseudoclaude: skipped {why}");
    }
    if hits.is_empty() {
        eprintln!("no message holds {text:?} ({} sessions searched)", summary.sessions);
        return Ok(ExitCode::from(1));
    }
    if summary.truncated {
        eprintln!("stopped after {} hits (--limit)", summary.hits);
    }
    Ok(ExitCode::SUCCESS)
}

/// `user`, `assistant`, or what a tool message is: `tool_call`, `tool_result`.
fn role_label(h: &session::search::Hit) -> &str {
    if h.kind == "text" { &h.role } else { h.kind }
}

fn cmd_show(workspace: &std::path::Path, id: &str, json: bool) -> CmdResult {
    let loaded = session::load(&Context::open(workspace, id)?)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&loaded)?);
        return Ok(ExitCode::SUCCESS);
    }
    for m in &loaded.messages {
        println!("{}", render(m));
    }
    if loaded.damaged() {
        eprintln!("note: {}", loaded.damage_report());
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_check(workspace: &std::path::Path, id: &str, json: bool) -> CmdResult {
    let ctx = Context::open(workspace, id)?;
    let loaded = session::load(&ctx)?;
    if json {
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
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if loaded.damaged() {
        println!("{}: {}", loaded.id, loaded.damage_report());
    } else {
        println!("{}: ok ({} messages restored from {} entries)", loaded.id, loaded.messages.len(), loaded.entries);
    }
    Ok(if loaded.damaged() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn cmd_rename(workspace: &std::path::Path, id: &str, title: &str) -> CmdResult {
    let ctx = Context::open(workspace, id)?;
    let info = meta::append(&ctx, meta::title_entry(title)?)?;
    if title.trim().is_empty() {
        println!("{id}: back to its automatic title {:?}", info.title);
    } else {
        println!("{id}: renamed {:?}", info.title);
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_pin(workspace: &std::path::Path, id: &str, pinned: bool) -> CmdResult {
    let ctx = Context::open(workspace, id)?;
    let info = meta::append(&ctx, meta::pin_entry(pinned))?;
    println!("{id}: {}", if info.pinned { "pinned" } else { "unpinned" });
    Ok(ExitCode::SUCCESS)
}

fn cmd_fork(workspace: &std::path::Path, id: &str, index: usize) -> CmdResult {
    let forked = fork::fork(workspace, id, Some(index))?;
    eprintln!("forked {id} at message {} ({} messages)", forked.forked_from.index, forked.messages);
    println!("{}", forked.id);
    Ok(ExitCode::SUCCESS)
}

fn cmd_list_external(workspace: &std::path::Path, json: bool) -> CmdResult {
    let items = import::list(workspace, &import::Homes::from_env());
    if json {
        println!("{}", serde_json::to_string_pretty(&items)?);
    } else {
        for i in &items {
            let what = match &i.unsupported {
                Some(why) => format!("(not importable: {why})"),
                None => {
                    format!("{} msgs  {}  {}", i.messages, if i.model.is_empty() { "-" } else { &i.model }, i.title)
                }
            };
            println!("{}  {}  {}  {}", i.source, i.id, what, i.path.display());
        }
    }
    if items.is_empty() {
        eprintln!("no Claude Code or Codex session of {}", workspace.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_import(workspace: &std::path::Path, path: &std::path::Path) -> CmdResult {
    let done = import::import(workspace, path)?;
    for n in &done.notes {
        eprintln!("note: {n}");
    }
    if done.existing {
        eprintln!("already imported, unchanged since: session {} ({} messages)", done.id, done.messages);
    } else {
        eprintln!("imported {} ({} messages)", path.display(), done.messages);
    }
    println!("{}", done.id);
    Ok(ExitCode::SUCCESS)
}

fn cmd_export(workspace: &std::path::Path, id: &str, format: &str) -> CmdResult {
    let format = Format::parse(format)?;
    print!("{}", session::export::export(&Context::open(workspace, id)?, format)?);
    Ok(ExitCode::SUCCESS)
}

fn cmd_cleanup(workspace: &std::path::Path, days: u32) -> CmdResult {
    let removed = session::cleanup(workspace, &RetentionOptions::new(days))?;
    for id in &removed {
        println!("removed {id}");
    }
    if removed.is_empty() {
        eprintln!("nothing idle for more than {days} days");
    }
    Ok(ExitCode::SUCCESS)
}

fn render(m: &Message) -> String {
    if let Some(r) = &m.tool_result {
        let err = if r.is_error { " (error)" } else { "" };
        return format!("[tool result {}{err}] {}", r.tool_call_id, one_line(&r.content));
    }
    let mut s = format!("{}: {}", m.role, m.content);
    for c in &m.tool_calls {
        s.push_str(&format!("\n  -> {} {} {}", c.id, c.name, c.arguments));
    }
    if m.interrupted {
        s.push_str("\n  [interrupted: the answer stopped here]");
    }
    s
}

fn one_line(s: &str) -> String {
    let first: String = s.lines().next().unwrap_or("").chars().take(120).collect();
    if s.len() > first.len() { format!("{first} ...") } else { first }
}

fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}
