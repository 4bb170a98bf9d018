//! Replaying `conversation.jsonl` into the history a resume restores.
//!
//! Sequential, no line-length limit, bounded memory: lines are read one at a time into one buffer
//! that is shrunk again after a huge line, so a 100 MiB inline tool result costs its line plus its
//! parsed string, once. Recovery rules are in [`super::replay`]; this file adds two:
//! - A final line without `\n` is a torn append: it is not an entry (the writer will move it aside),
//!   and is reported as `torn_tail_bytes`.
//! - A spilled tool result whose file is missing or altered loads as a placeholder saying so, with
//!   the preview the log kept.

use std::fs::File;
use std::io::{BufRead, BufReader};

use serde::Serialize;

use super::replay::Replay;
use super::{Context, Error, Result, io_err, spill};
use crate::message::Message;

/// A loaded session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Loaded {
    pub id: String,
    /// The history the model reads next, valid for the providers' protocols.
    pub messages: Vec<Message>,
    /// 1-based line numbers of lines that were not valid entries.
    pub bad_lines: Vec<u64>,
    /// A dangling tool call exchange at the end was cut off.
    pub trimmed: bool,
    /// Messages left out in the middle of the log (orphan results, incomplete exchanges).
    pub dropped: usize,
    /// Bytes after the last complete line.
    pub torn_tail_bytes: u64,
    /// Spilled results that loaded as placeholders, one line each.
    pub spill_problems: Vec<String>,
    pub title: String,
    pub model: String,
    /// Valid entry lines in the file.
    pub entries: usize,
    /// Newest message time, unix seconds (0 when unknown).
    pub last_message: i64,
}

impl Loaded {
    /// Whether anything in the log needed repair: the UI shows a notice when it did.
    pub fn damaged(&self) -> bool {
        !self.bad_lines.is_empty()
            || self.trimmed
            || self.dropped > 0
            || self.torn_tail_bytes > 0
            || !self.spill_problems.is_empty()
    }

    /// One sentence on what was repaired, for notices; empty when nothing was.
    pub fn damage_report(&self) -> String {
        let mut parts = Vec::new();
        if !self.bad_lines.is_empty() {
            let shown: Vec<String> = self.bad_lines.iter().take(10).map(u64::to_string).collect();
            let more = if self.bad_lines.len() > 10 { ", ..." } else { "" };
            parts.push(format!("skipped {} unreadable line(s) ({}{more})", self.bad_lines.len(), shown.join(", ")));
        }
        if self.torn_tail_bytes > 0 {
            parts.push(format!("ignored a torn last line of {} bytes", self.torn_tail_bytes));
        }
        if self.trimmed {
            parts.push("cut an unanswered tool call at the end".into());
        }
        if self.dropped > 0 {
            parts.push(format!("left out {} message(s) that broke tool-call pairing", self.dropped));
        }
        if !self.spill_problems.is_empty() {
            parts.push(format!("{} spilled tool result(s) unreadable", self.spill_problems.len()));
        }
        parts.join("; ")
    }
}

/// Loads a session's log. A session whose log does not exist yet loads as empty.
pub fn load(ctx: &Context) -> Result<Loaded> {
    if !ctx.dir.is_dir() {
        return Err(Error::NotFound { id: ctx.id.clone(), dir: ctx.dir.clone() });
    }
    let path = &ctx.jsonl_path;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Loaded { id: ctx.id.clone(), ..Default::default() });
        }
        Err(e) => return Err(io_err("cannot open session log", path)(e)),
    };
    let mut replay = Replay::keeping();
    let torn_tail_bytes = feed_lines(BufReader::with_capacity(256 * 1024, file), 0, &mut replay)
        .map_err(io_err("cannot read session log", path))?
        .torn_bytes;
    let done = replay.finish();
    let mut loaded = Loaded {
        id: ctx.id.clone(),
        messages: done.messages,
        bad_lines: done.bad_line_numbers,
        trimmed: done.trimmed,
        dropped: done.state.dropped,
        torn_tail_bytes,
        spill_problems: Vec::new(),
        title: done.state.title,
        model: done.state.model,
        entries: done.state.entries,
        last_message: done.state.last_message,
    };
    check_spills(ctx, &mut loaded);
    Ok(loaded)
}

fn check_spills(ctx: &Context, loaded: &mut Loaded) {
    for m in &mut loaded.messages {
        let Some(r) = &mut m.tool_result else { continue };
        let Some(s) = r.spill.clone() else { continue };
        if let Err(problem) = spill::verify(ctx, &s) {
            loaded.spill_problems.push(format!("{}: {problem:?}", s.path));
            r.content = spill::placeholder(r, &s, &problem);
        }
    }
}

/// Where feeding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fed {
    /// Offset just past the last complete line fed.
    pub end: u64,
    /// Bytes after it (a line without `\n`).
    pub torn_bytes: u64,
    /// Lines fed (complete lines only).
    pub lines: u64,
}

/// Feeds every complete line of `reader` to `replay`. `start` is the reader's offset in the file and
/// `first_line` the 1-based number of its first line minus one, for reports.
pub(crate) fn feed_lines(mut reader: impl BufRead, start: u64, replay: &mut Replay) -> std::io::Result<Fed> {
    const KEEP_CAPACITY: usize = 1 << 20;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut fed = Fed { end: start, torn_bytes: 0, lines: 0 };
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(fed);
        }
        if buf.last() != Some(&b'\n') {
            fed.torn_bytes = n as u64;
            return Ok(fed);
        }
        fed.lines += 1;
        replay.feed_line(&buf[..n - 1], fed.lines);
        fed.end += n as u64;
        if buf.capacity() > KEEP_CAPACITY {
            buf = Vec::with_capacity(64 * 1024);
        }
    }
}
