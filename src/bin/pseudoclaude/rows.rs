//! How sessions, messages and hits read on a terminal: the rows of `list`, the lines of `show` and
//! `search`. Pure functions of the core's values.

use pseudoclaude::message::Message;
use pseudoclaude::session;
use pseudoclaude::usage::Usage;

pub fn list_row(s: &session::SessionInfo) -> String {
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

pub fn usage_summary(u: &Usage, cost: Option<f64>) -> Option<String> {
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

pub fn tokens(n: u64) -> String {
    match n {
        n if n < 1000 => n.to_string(),
        n if n < 1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        n => format!("{:.1}M", n as f64 / 1e6),
    }
}

pub fn money(dollars: f64) -> String {
    match dollars {
        d if d < 0.01 => format!("${d:.4}"),
        d if d < 100.0 => format!("${d:.2}"),
        d => format!("${d:.0}"),
    }
}

pub fn damage(s: &session::SessionInfo) -> String {
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

pub fn role_label(h: &session::search::Hit) -> &str {
    if h.kind == "text" { &h.role } else { h.kind }
}

pub fn render(m: &Message) -> String {
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

pub fn one_line(s: &str) -> String {
    let first: String = s.lines().next().unwrap_or("").chars().take(120).collect();
    if s.len() > first.len() { format!("{first} ...") } else { first }
}

pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}
