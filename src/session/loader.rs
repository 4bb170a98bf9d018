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
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::FileExt;

use serde::Serialize;

use super::entry::Entry;
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
    let torn_tail_bytes =
        feed_lines(&file, 0, &mut replay).map_err(io_err("cannot read session log", path))?.torn_bytes;
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
}

/// Lines up to this size are gathered in memory; longer ones are parsed straight from the file.
const GATHER_LIMIT: usize = 1 << 20;

/// Feeds every complete line of `file` from offset `start` to `replay`. Line numbers in reports are
/// counted from `start`, which is the file's start whenever the loader calls this.
///
/// Normal lines are parsed where they sit in the read buffer, with no copy. A line longer than
/// [`GATHER_LIMIT`] is never gathered: its end is found by a scan, then it is parsed from the file,
/// so a 100 MiB tool result costs the parsed string (and the parser's scratch), not a line buffer too.
pub(crate) fn feed_lines(file: &File, start: u64, replay: &mut Replay) -> io::Result<Fed> {
    let mut reader = BufReader::with_capacity(256 * 1024, ReadAt { file, pos: start, end: u64::MAX });
    let mut gathered: Vec<u8> = Vec::new();
    let mut line_no = 0u64;
    let mut line_start = start;
    loop {
        let avail = reader.fill_buf()?;
        if avail.is_empty() {
            return Ok(Fed { end: line_start, torn_bytes: gathered.len() as u64 });
        }
        if gathered.is_empty()
            && let Some(i) = avail.iter().position(|&b| b == b'\n')
        {
            line_no += 1;
            replay.feed_line(&avail[..i], line_no);
            reader.consume(i + 1);
            line_start += i as u64 + 1;
            continue;
        }
        // The line goes on past the buffer.
        match avail.iter().position(|&b| b == b'\n') {
            Some(i) => {
                gathered.extend_from_slice(&avail[..i]);
                reader.consume(i + 1);
                line_no += 1;
                replay.feed_line(&gathered, line_no);
                line_start += gathered.len() as u64 + 1;
                gathered = Vec::new();
            }
            None if gathered.len() + avail.len() <= GATHER_LIMIT => {
                let n = avail.len();
                gathered.extend_from_slice(avail);
                reader.consume(n);
            }
            None => {
                let Some(len) = scan_to_newline(&mut reader)? else {
                    let torn = reader.get_ref().pos - line_start;
                    return Ok(Fed { end: line_start, torn_bytes: torn });
                };
                line_no += 1;
                let line_len = gathered.len() as u64 + len;
                let parsed = serde_json::from_reader::<_, Entry>(BufReader::with_capacity(
                    256 * 1024,
                    ReadAt { file, pos: line_start, end: line_start + line_len },
                ));
                match parsed {
                    Ok(entry) => replay.feed_entry(entry),
                    Err(_) => replay.bad_line(line_no),
                }
                line_start += line_len + 1;
                gathered = Vec::new();
            }
        }
    }
}

/// Consumes bytes up to and including the next `\n`; returns how many came before it, or `None` at
/// the end of the file.
fn scan_to_newline(reader: &mut impl BufRead) -> io::Result<Option<u64>> {
    let mut n = 0u64;
    loop {
        let avail = reader.fill_buf()?;
        if avail.is_empty() {
            return Ok(None);
        }
        if let Some(i) = avail.iter().position(|&b| b == b'\n') {
            reader.consume(i + 1);
            return Ok(Some(n + i as u64));
        }
        n += avail.len() as u64;
        let len = avail.len();
        reader.consume(len);
    }
}

/// Reads a file by position, so two readers of one file never share (or move) its offset.
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (buf.len() as u64).min(self.end.saturating_sub(self.pos)) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
