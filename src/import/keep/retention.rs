//! Each agent's store and what the agent deletes by itself (Claude Code's `cleanupPeriodDays`, Gemini CLI's
//! `general.sessionRetention` merged as Gemini merges it), for `:checkhealth`: why keeping copies matters.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::import::list::{ListOptions, list_with};
use crate::import::{Homes, Source};

/// One agent's store, as `:checkhealth` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Store {
    /// The agent's name (as `sessions.list` rows name it).
    pub agent: String,
    /// Where its sessions are.
    pub path: PathBuf,
    /// The folder (opencode: the database) exists.
    pub found: bool,
    /// The workspace's sessions in it (listed).
    pub sessions: usize,
    /// What the agent deletes by itself, as a sentence ("Gemini CLI deletes sessions older than 30 days, at each
    /// start"); `None`: nothing (or nothing known).
    pub deletes: Option<String>,
    /// Days after which the agent deletes a session itself, when it deletes by age.
    pub deletes_after_days: Option<f64>,
    /// Where that comes from (its setting and file, or the default).
    pub retention: String,
}

/// What an agent's settings say it deletes.
struct Retention {
    deletes: Option<String>,
    days: Option<f64>,
    text: String,
}

impl Retention {
    fn never(source: Source) -> Retention {
        Retention {
            deletes: None,
            days: None,
            text: format!("{} deletes no session by itself (none known)", source.name()),
        }
    }
}

/// The stores of the agents whose sessions this build reads, with what each agent deletes by itself.
pub fn stores(workspace: &Path, homes: &Homes) -> Vec<Store> {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let items = list_with(&ws, homes, &ListOptions::default());
    let mut out = Vec::new();
    let mut add = |source: Source, path: PathBuf, r: Retention| {
        out.push(Store {
            agent: source.agent().to_string(),
            found: path.exists(),
            path,
            sessions: items.iter().filter(|i| i.source == source).count(),
            deletes: r.deletes,
            deletes_after_days: r.days,
            retention: r.text,
        })
    };
    if let Some(claude) = &homes.claude {
        add(Source::ClaudeCode, claude.join("projects"), claude_retention(claude));
    }
    if let Some(codex) = &homes.codex {
        add(Source::Codex, codex.join("sessions"), Retention::never(Source::Codex));
    }
    if let Some(gemini) = &homes.gemini {
        add(Source::GeminiCli, gemini.join("tmp"), gemini_retention(gemini, &ws));
    }
    if let Some(qwen) = &homes.qwen {
        add(Source::QwenCode, qwen.join("projects"), Retention::never(Source::QwenCode));
    }
    if let Some(opencode) = &homes.opencode {
        add(Source::Opencode, opencode.join("opencode.db"), Retention::never(Source::Opencode));
    }
    if let Some(pi) = &homes.pi {
        let dir = homes.pi_session_dir.clone().unwrap_or_else(|| pi.join("sessions"));
        add(Source::Pi, dir, Retention::never(Source::Pi));
    }
    out
}

fn read_json(file: &Path) -> Option<serde_json::Value> {
    std::fs::read(file).ok().and_then(|b| serde_json::from_slice(&b).ok())
}

/// Claude Code removes transcripts older than `cleanupPeriodDays` (settings.json; 30 when unset) at its start-up.
fn claude_retention(config: &Path) -> Retention {
    let file = config.join("settings.json");
    let setting = read_json(&file).and_then(|v| v.get("cleanupPeriodDays").cloned());
    let (days, text) = match setting.as_ref().and_then(serde_json::Value::as_f64) {
        Some(d) => (d, format!("cleanupPeriodDays = {} in {}", setting.unwrap_or_default(), file.display())),
        None => (30.0, format!("cleanupPeriodDays unset in {} (default 30)", file.display())),
    };
    let deletes = format!("Claude Code deletes sessions older than {days} days at its start");
    Retention { deletes: Some(deletes), days: Some(days), text }
}

/// Gemini CLI deletes, at each start in a project, the sessions last updated longer than
/// `general.sessionRetention.maxAge` ago, and all but the newest `maxCount`: on unless `enabled` is false, `maxAge`
/// `30d` when unset (its settings' defaults). The user's `settings.json`, then the workspace's `.gemini/settings.json`
/// (Gemini reads it in a trusted folder), each key overriding the one before, as Gemini merges them. A setting Gemini
/// refuses (a period not `<n>h|d|w|m`, under `minRetention`, `maxCount` under 1, neither key) turns its clean-up off.
fn gemini_retention(gemini: &Path, ws: &Path) -> Retention {
    use serde_json::Value;
    let mut enabled = (true, None::<PathBuf>);
    let mut max_age = (Some("30d".to_string()), None::<PathBuf>);
    let mut min = "1d".to_string();
    let mut max_count = (None::<f64>, None::<PathBuf>);
    let mut files = Vec::new();
    for file in [gemini.join("settings.json"), ws.join(".gemini").join("settings.json")] {
        let Some(r) = read_json(&file).and_then(|v| v.pointer("/general/sessionRetention").cloned()) else { continue };
        if let Some(e) = r.get("enabled").and_then(Value::as_bool) {
            enabled = (e, Some(file.clone()));
        }
        match r.get("maxAge") {
            // an empty period is none, as Gemini's `if (maxAge)` reads it
            Some(Value::String(a)) if !a.is_empty() => max_age = (Some(a.clone()), Some(file.clone())),
            Some(Value::String(_) | Value::Null) => max_age = (None, Some(file.clone())),
            _ => {}
        }
        if let Some(m) = r.get("minRetention").and_then(Value::as_str) {
            min = m.to_string();
        }
        if let Some(c) = r.get("maxCount").and_then(Value::as_f64) {
            max_count = (Some(c), Some(file.clone()));
        }
        files.push(file);
    }
    let shown = |p: &Option<PathBuf>| p.as_ref().map_or("by default".to_string(), |p| format!("in {}", p.display()));
    let off = |text: String| Retention { deletes: None, days: None, text };
    if files.is_empty() {
        let text = format!(
            "general.sessionRetention unset in {} (default: on, maxAge 30d)",
            gemini.join("settings.json").display()
        );
        return gemini_deletes(Some(30.0), None, text);
    }
    if !enabled.0 {
        return off(format!("general.sessionRetention.enabled = false {}", shown(&enabled.1)));
    }
    let days = match &max_age.0 {
        Some(a) => match gemini_period_days(a) {
            Some(d) if d >= gemini_period_days(&min).unwrap_or(1.0) => Some(d),
            Some(_) => {
                return off(format!(
                    "general.sessionRetention.maxAge = {a} is under minRetention = {min}: Gemini CLI deletes nothing"
                ));
            }
            None => {
                return off(format!(
                    "general.sessionRetention.maxAge = {a} {} is no period Gemini CLI reads (<n>h, d, w or m): it deletes nothing",
                    shown(&max_age.1)
                ));
            }
        },
        None => None,
    };
    if max_count.0.is_some_and(|c| c < 1.0) || (days.is_none() && max_count.0.is_none()) {
        return off(
            "general.sessionRetention sets neither a valid maxAge nor maxCount: Gemini CLI deletes nothing".into()
        );
    }
    let mut text = Vec::new();
    if let Some(a) = &max_age.0 {
        text.push(format!("general.sessionRetention.maxAge = {a} {}", shown(&max_age.1)));
    }
    if let Some(c) = max_count.0 {
        text.push(format!("maxCount = {c} {}", shown(&max_count.1)));
    }
    gemini_deletes(days, max_count.0, text.join(", "))
}

fn gemini_deletes(days: Option<f64>, count: Option<f64>, text: String) -> Retention {
    let what = match (days, count) {
        (Some(d), Some(c)) => format!("sessions older than {d} days and all but the newest {c}"),
        (Some(d), None) => format!("sessions older than {d} days"),
        (None, Some(c)) => format!("all but the newest {c} sessions"),
        (None, None) => return Retention { deletes: None, days: None, text },
    };
    Retention { deletes: Some(format!("Gemini CLI deletes {what} at each start")), days, text }
}

/// A Gemini CLI period (`30d`, `24h`, `2w`, `1m` = 30 days) in days.
fn gemini_period_days(period: &str) -> Option<f64> {
    let unit = period.chars().last()?;
    let digits = &period[..period.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok().filter(|n| *n > 0)?;
    let per = match unit {
        'h' => 1.0 / 24.0,
        'd' => 1.0,
        'w' => 7.0,
        'm' => 30.0,
        _ => return None,
    };
    Some(n as f64 * per)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geminis_periods_are_read_as_gemini_reads_them() {
        assert_eq!(gemini_period_days("30d"), Some(30.0));
        assert_eq!(gemini_period_days("2w"), Some(14.0));
        assert_eq!(gemini_period_days("24h"), Some(1.0));
        assert_eq!(gemini_period_days("1m"), Some(30.0));
        for refused in ["0d", "d", "+5d", "5", "5y", "", "1.5d"] {
            assert_eq!(gemini_period_days(refused), None, "{refused}");
        }
    }
}
