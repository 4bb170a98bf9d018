//! A session as a document: Markdown to read or share, JSON to process.
//!
//! Markdown: a header (title, id, dates, model, the git branch when the log recorded one, the parent
//! of a fork, the files the agent changed), then one section per message of the restored history.
//! Tool calls show their arguments and results in fenced blocks, a long result folded in
//! `<details>`; a spilled result is read back whole from `tool-results/`. The stale-session reminder
//! and interrupted answers say what they are: an answer the editor stopped while it streamed
//! (`interrupted` in the log), one the user cancelled (its text ends with the runner's
//! `[interrupted by the user]`), and the results of tools the cancel stopped. JSON: the restored history in the log's message shape
//! (as `sessions.load(id).messages`, spill references included) with the session's id, title and model.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::loader::Loaded;
use super::words::{CANCELLED_RESULT, INTERRUPTED_NOTE, STALE_REMINDER_PREFIX};
use super::{Context, Error, Result, list, load, spill, touched};
use crate::message::{Message, ToolResult};

/// What an export produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Json,
}

impl Format {
    /// `markdown` (or `md`) and `json`.
    pub fn parse(name: &str) -> Result<Format> {
        match name {
            "markdown" | "md" => Ok(Format::Markdown),
            "json" => Ok(Format::Json),
            other => Err(Error::Invalid(format!(
                "unknown export format {other:?}: use \"markdown\" (or \"md\") or \"json\""
            ))),
        }
    }
}

/// A result longer than this (lines or bytes) is folded in `<details>`.
const FOLD_LINES: usize = 20;
const FOLD_BYTES: usize = 2048;

/// Session `ctx` as a document in `format`. Reads the log (and, for Markdown, the spilled results).
pub fn export(ctx: &Context, format: Format) -> Result<String> {
    let loaded = load(ctx)?;
    match format {
        Format::Json => Ok(json(&loaded)),
        Format::Markdown => {
            // The list entry has what the log records beyond the history (the branch, once recorded).
            let info = list::info(ctx).ok().and_then(|i| serde_json::to_value(i).ok());
            Ok(markdown(ctx, &loaded, info.as_ref()))
        }
    }
}

fn json(loaded: &Loaded) -> String {
    let mut doc = serde_json::json!({
        "id": loaded.id,
        "title": loaded.title,
        "model": loaded.model,
        "messages": loaded.messages,
    });
    if let Some(from) = &loaded.forked_from {
        doc["forked_from"] = serde_json::json!(from);
    }
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

fn markdown(ctx: &Context, loaded: &Loaded, info: Option<&serde_json::Value>) -> String {
    let mut out = String::new();
    let title = if loaded.title.is_empty() { "(untitled)" } else { loaded.title.as_str() };
    let _ = writeln!(out, "# {}\n", one_line(title));
    let _ = writeln!(out, "- Session: `{}`", loaded.id);
    let first = loaded.messages.iter().map(|m| m.ts).filter(|t| *t > 0).min();
    if let Some(t) = first.and_then(date) {
        let _ = writeln!(out, "- Started: {t}");
    }
    if let Some(t) = date(loaded.last_message) {
        let _ = writeln!(out, "- Last message: {t}");
    }
    if !loaded.model.is_empty() {
        let _ = writeln!(out, "- Model: `{}`", loaded.model);
    }
    if let Some(branch) = info.and_then(|i| i.get("branch")).and_then(|b| b.as_str()).filter(|b| !b.is_empty()) {
        let _ = writeln!(out, "- Branch: `{branch}`");
    }
    if let Some(from) = &loaded.forked_from {
        let _ = writeln!(out, "- Forked from: `{}` at message {}", from.id, from.index);
    }
    let _ = writeln!(out, "- Messages: {}", loaded.messages.len());
    let usage = loaded.usage_by_model.total();
    if !usage.is_zero() {
        let prompt = usage.prompt_tokens();
        let cached = (usage.cache_read_tokens * 100).checked_div(prompt).unwrap_or(0);
        let _ = writeln!(out, "- Tokens: {prompt} in ({cached}% read from the cache), {} out", usage.output_tokens);
    }
    let files = touched::files_touched(&loaded.messages);
    if !files.is_empty() {
        let list: Vec<String> = files.iter().map(|f| format!("`{f}`")).collect();
        let _ = writeln!(out, "- Files touched: {}", list.join(", "));
    }
    let report = loaded.damage_report();
    if !report.is_empty() {
        let _ = writeln!(out, "- Repaired on load: {report}");
    }
    let mut names: HashMap<&str, &str> = HashMap::new();
    for (i, m) in loaded.messages.iter().enumerate() {
        let n = i + 1;
        out.push('\n');
        if let Some(r) = &m.tool_result {
            let name = names.get(r.tool_call_id.as_str()).copied().unwrap_or("tool");
            result_section(&mut out, ctx, n, name, r);
            continue;
        }
        message_section(&mut out, n, m);
        for c in &m.tool_calls {
            names.insert(c.id.as_str(), c.name.as_str());
            let args = serde_json::to_string_pretty(&c.arguments).unwrap_or_default();
            let _ = writeln!(out, "\n**Tool call** `{}` (`{}`)\n", c.name, c.id);
            fenced(&mut out, "json", &args);
        }
    }
    out
}

fn message_section(out: &mut String, n: usize, m: &Message) {
    if m.role == crate::message::Role::User {
        if m.content.starts_with(STALE_REMINDER_PREFIX) {
            let _ = writeln!(out, "## {n}. Reminder to the model\n");
            let _ = writeln!(
                out,
                "*Added by pseudoclaude when the session was resumed after a pause: the model read it, the user did not type it.*\n"
            );
            for line in m.content.lines() {
                let _ = writeln!(out, "> {line}");
            }
            return;
        }
        let _ = writeln!(out, "## {n}. You\n");
        text(out, &m.content);
        return;
    }
    // A cancelled answer keeps what was shown, then the runner's note on a line of its own.
    let cancelled = m.content.trim_end().strip_suffix(INTERRUPTED_NOTE).filter(|t| t.is_empty() || t.ends_with('\n'));
    let interrupted = m.interrupted || cancelled.is_some();
    let _ = writeln!(out, "## {n}. Agent{}\n", if interrupted { " (interrupted)" } else { "" });
    text(out, cancelled.unwrap_or(&m.content));
    if m.interrupted {
        let _ = writeln!(out, "\n*[interrupted: the answer stopped here]*");
    } else if cancelled.is_some() {
        let _ = writeln!(out, "\n*[interrupted by the user]*");
    }
}

fn text(out: &mut String, content: &str) {
    let content = content.trim_end_matches('\n');
    if !content.is_empty() {
        out.push_str(content);
        out.push('\n');
    }
}

fn result_section(out: &mut String, ctx: &Context, n: usize, name: &str, r: &ToolResult) {
    let error = match r.is_error {
        true if r.content == CANCELLED_RESULT => " (cancelled)",
        true => " (error)",
        false => "",
    };
    let _ = writeln!(out, "## {n}. Tool result{error}: `{name}` (`{}`)\n", r.tool_call_id);
    // A spilled result is exported whole; the loader already replaced an untrustworthy one's preview
    // with a placeholder that says why.
    let full = r.spill.as_ref().filter(|s| spill::verify(ctx, s).is_ok()).and_then(|s| spill::read(ctx, s).ok());
    let text = full.as_deref().unwrap_or(&r.content);
    let lines = text.lines().count();
    if lines > FOLD_LINES || text.len() > FOLD_BYTES {
        let _ = writeln!(out, "<details>\n<summary>{name}: {lines} lines, {} bytes</summary>\n", text.len());
        fenced(out, "text", text);
        out.push_str("\n</details>\n");
    } else {
        fenced(out, "text", text);
    }
}

/// `text` in a fence longer than any run of backticks inside it.
fn fenced(out: &mut String, lang: &str, text: &str) {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = writeln!(out, "{fence}{lang}\n{}\n{fence}", text.trim_end_matches('\n'));
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Local time with its offset, e.g. `2026-08-28 14:20:30 +02:00`.
fn date(ts: i64) -> Option<String> {
    if ts <= 0 {
        return None;
    }
    let t = chrono::DateTime::from_timestamp(ts, 0)?.with_timezone(&chrono::Local);
    Some(t.format("%Y-%m-%d %H:%M:%S %:z").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use crate::session::{Writer, WriterOptions};
    use serde_json::json;

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        let mut s = String::new();
        fenced(&mut s, "text", "a ```` b\n");
        assert_eq!(s, "`````text\na ```` b\n`````\n");
    }

    #[test]
    fn the_branch_is_shown_only_when_the_list_entry_has_one() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("context");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        w.append(&Message::user("hi")).expect("append");
        drop(w);
        let loaded = load(&ctx).expect("load");
        let with = markdown(&ctx, &loaded, Some(&json!({"branch": "feature/x"})));
        assert!(with.contains("- Branch: `feature/x`\n"), "{with}");
        for info in [None, Some(json!({"branch": ""})), Some(json!({"id": "x"}))] {
            assert!(!markdown(&ctx, &loaded, info.as_ref()).contains("Branch"));
        }
    }

    #[test]
    fn the_tokens_line_sums_every_request_with_its_cached_share() {
        use crate::session::Entry;
        use crate::usage::Usage;
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("context");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        w.append(&Message::user("hi")).expect("append");
        let no_usage = markdown(&ctx, &load(&ctx).expect("load"), None);
        assert!(!no_usage.contains("Tokens"), "{no_usage}");
        let u = |i, o, r| Usage { input_tokens: i, output_tokens: o, cache_read_tokens: r, cache_write_tokens: 0 };
        w.append_entry(Entry::usage("m1", u(100, 20, 300), 1)).expect("usage");
        w.append_entry(Entry::usage("m2", u(50, 5, 550), 2)).expect("usage");
        drop(w);
        let md = markdown(&ctx, &load(&ctx).expect("load"), None);
        assert!(md.contains("- Tokens: 1000 in (85% read from the cache), 25 out\n"), "{md}");
    }

    #[test]
    fn cancelled_answers_and_tools_are_marked_as_such() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("context");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        w.append(&Message::user("explain")).expect("append"); // 1
        w.append(&Message::assistant(format!("It starts with\n{INTERRUPTED_NOTE}"))).expect("append"); // 2
        w.append(&Message::user("run the tests")).expect("append"); // 3
        let calls = vec![
            ToolCall::new("c1", "run_command", json!({"command": "make test"})),
            ToolCall::new("c2", "read_file", json!({"path": "a"})),
        ];
        w.append(&Message::assistant_tool_calls("Running.", calls)).expect("append"); // 4
        w.append(&Message::tool_result("c1", CANCELLED_RESULT, true)).expect("append"); // 5
        w.append(&Message::tool_result("c2", "no such file", true)).expect("append"); // 6
        w.append(&Message::assistant(format!("{INTERRUPTED_NOTE} is what I would write"))).expect("append"); // 7
        drop(w);
        let md = export(&ctx, Format::Markdown).expect("export");
        assert!(
            md.contains("## 2. Agent (interrupted)\n\nIt starts with\n\n*[interrupted by the user]*\n"),
            "the note is a mark, not text: {md}"
        );
        assert!(md.contains("## 5. Tool result (cancelled): `run_command` (`c1`)"), "{md}");
        assert!(md.contains("## 6. Tool result (error): `read_file` (`c2`)"), "{md}");
        // Only the note at the end of an answer, on its own line, is the runner's.
        assert!(md.contains("## 7. Agent\n\n[interrupted by the user] is what I would write\n"), "{md}");
        assert_eq!(md.matches("(interrupted)").count(), 1, "{md}");
    }

    #[test]
    fn markdown_reads_spilled_results_whole_and_folds_long_ones() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("context");
        let w = Writer::open(&ctx, WriterOptions { model: "m1".into(), spill_threshold: 100 }).expect("writer");
        w.append(&Message::user("read it")).expect("append");
        let call = ToolCall::new("c1", "read_file", json!({"path": "big.txt"}));
        w.append(&Message::assistant_tool_calls("Reading.", vec![call])).expect("append");
        let big: String = (0..50).map(|i| format!("line {i} of the file\n")).collect();
        w.append(&Message::tool_result("c1", big.clone(), false)).expect("append");
        w.append(&Message::assistant("It has 50 lines.")).expect("append");
        let md = export(&ctx, Format::Markdown).expect("export");
        assert!(md.starts_with("# read it\n") && md.contains("- Model: `m1`"), "{md}");
        assert!(md.contains("**Tool call** `read_file` (`c1`)\n\n```json\n{\n  \"path\": \"big.txt\"\n}\n```"), "{md}");
        assert!(md.contains("<summary>read_file: 50 lines"), "{md}");
        assert!(md.contains("line 49 of the file\n```\n\n</details>"), "{md}");
        assert!(!md.contains("output truncated"), "the spill file is read, not the preview: {md}");
        let js: serde_json::Value = serde_json::from_str(&export(&ctx, Format::Json).expect("json")).expect("parse");
        assert_eq!(js["messages"].as_array().map(Vec::len), Some(4));
        assert!(js["messages"][2]["tool_result"]["spill"]["path"].is_string());
    }

    /// Writes `lines` as the whole log of a new session.
    fn session_of(ws: &std::path::Path, lines: &[serde_json::Value]) -> Context {
        let ctx = Context::new(ws).expect("context");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&ctx.jsonl_path, text).expect("write");
        ctx
    }

    #[test]
    fn the_dates_are_the_first_and_last_timed_messages_and_damage_is_reported() {
        let ws = tempfile::tempdir().expect("tempdir");
        let local = |ts: i64| {
            let t = chrono::DateTime::from_timestamp(ts, 0).expect("ts").with_timezone(&chrono::Local);
            t.format("%Y-%m-%d %H:%M:%S %:z").to_string()
        };
        // a seed line without a time, then two timed ones
        let ctx = session_of(
            ws.path(),
            &[
                json!({"role": "user", "content": "untimed"}),
                json!({"type": "message", "role": "assistant", "content": "a", "ts": 1_700_000_000}),
                json!({"type": "message", "role": "user", "content": "b", "ts": 1_700_003_600}),
            ],
        );
        let md = export(&ctx, Format::Markdown).expect("export");
        let started = format!("- Started: {}\n", local(1_700_000_000));
        let last = format!("- Last message: {}\n", local(1_700_003_600));
        assert!(md.contains(&started) && md.contains(&last), "{md}");
        assert!(!md.contains("Repaired on load") && !md.contains("Files touched"), "{md}");
        // no time at all: no dates; a bad line: the header says what the load repaired
        let ctx = session_of(ws.path(), &[json!({"role": "user", "content": "untimed"}), json!("not an entry")]);
        let md = export(&ctx, Format::Markdown).expect("export");
        assert!(!md.contains("Started") && !md.contains("Last message"), "{md}");
        assert!(md.contains("- Repaired on load: "), "{md}");
    }

    #[test]
    fn a_result_is_folded_above_twenty_lines_or_two_kib() {
        let ws = tempfile::tempdir().expect("tempdir");
        let fold = |content: String| {
            let ctx = session_of(
                ws.path(),
                &[
                    json!({"type": "message", "role": "assistant", "content": "", "ts": 1,
                           "tool_calls": [{"id": "c1", "name": "grep", "arguments": {}}]}),
                    json!({"type": "message", "role": "tool", "ts": 2,
                           "tool_result": {"tool_call_id": "c1", "content": content, "is_error": false}}),
                ],
            );
            export(&ctx, Format::Markdown).expect("export").contains("<details>")
        };
        let lines = |n: usize| (0..n).map(|i| format!("{i}\n")).collect::<String>();
        assert!(!fold(lines(FOLD_LINES)) && fold(lines(FOLD_LINES + 1)));
        assert!(!fold("x".repeat(FOLD_BYTES)) && fold("x".repeat(FOLD_BYTES + 1)));
    }
}
