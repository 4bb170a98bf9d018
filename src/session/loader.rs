//! Replaying `conversation.jsonl` into the history a resume restores.
//!
//! Sequential, no line-length limit, bounded memory: lines are read one at a time into one buffer
//! that is shrunk again after a huge line, so a 100 MiB inline tool result costs its line plus its
//! parsed string, once. Recovery rules are in [`super::replay`]; this file adds two:
//! - A final line without `\n` is a torn append: it is not an entry (the writer will move it aside),
//!   and is reported as `torn_tail_bytes`.
//! - A spilled tool result whose file is missing or altered loads as a placeholder saying so, with
//!   the preview the log kept.
//! - A line holding bytes that are not UTF-8 is restored with U+FFFD in their place and reported as
//!   `repaired` (see [`super::replay`]); a huge one is decoded that way while it streams.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::FileExt;

use serde::Serialize;

use super::contain::{Access, Dir};
use super::entry::Entry;
use super::replay::Replay;
use super::{CONVERSATION_FILE_NAME, Context, Error, Result, io_err, spill};
use crate::git::GitHead;
use crate::message::Message;
use crate::usage::UsageByModel;

/// A loaded session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Loaded {
    pub id: String,
    /// The history the model reads next, valid for the providers' protocols.
    pub messages: Vec<Message>,
    /// 1-based line numbers of lines that were not valid entries.
    pub bad_lines: Vec<u64>,
    /// 1-based line numbers of lines restored after their invalid UTF-8 was read as U+FFFD (they are
    /// entries, and in the history; `bad_lines` does not hold them).
    pub repaired: Vec<u64>,
    /// A dangling tool call exchange at the end was cut off.
    pub trimmed: bool,
    /// Messages left out in the middle of the log (orphan results, incomplete exchanges).
    pub dropped: usize,
    /// Bytes after the last complete line.
    pub torn_tail_bytes: u64,
    /// Spilled results that loaded as placeholders, one line each.
    pub spill_problems: Vec<String>,
    /// The session's name when it has one, else the automatic title (as the list shows it).
    pub title: String,
    pub model: String,
    /// Valid entry lines in the file.
    pub entries: usize,
    /// Newest message time, unix seconds (0 when unknown).
    pub last_message: i64,
    /// Answers restored from their checkpoints: the editor stopped while they streamed, so each
    /// holds the text shown until then and is marked `interrupted`.
    pub interrupted: usize,
    /// The workspace's git branch and commit when the session started, and at its latest recorded
    /// turn (`meta` entries); `None` outside a git repository.
    pub git_start: Option<GitHead>,
    pub git: Option<GitHead>,
    /// Tokens the providers reported (`usage` entries), per model.
    pub usage_by_model: UsageByModel,
    /// Pinned (its last `pin` entry).
    pub pinned: bool,
    /// The session this one was forked from.
    pub forked_from: Option<super::entry::ForkedFrom>,
    /// The other agent's session this one is a copy of (an import, a kept copy).
    pub imported_from: Option<super::entry::ImportedFrom>,
    /// The ACP agent the session runs, and its own id of the session (`meta` entries).
    pub agent: Option<super::entry::AgentMeta>,
    /// The git worktree the session works in (`meta` entries).
    pub worktree: Option<super::entry::WorktreeMeta>,
    /// The `files` checkpoints and `rewind` steps, in order ([`super::files`]); not sent to the editor.
    #[serde(skip)]
    pub files: Vec<super::files::FilesRecord>,
    #[serde(skip)]
    pub rewinds: Vec<super::files::RewindRecord>,
}

impl Loaded {
    /// Whether anything in the log needed repair: the UI shows a notice when it did.
    pub fn damaged(&self) -> bool {
        !self.bad_lines.is_empty()
            || !self.repaired.is_empty()
            || self.trimmed
            || self.dropped > 0
            || self.torn_tail_bytes > 0
            || !self.spill_problems.is_empty()
            || self.interrupted > 0
    }

    /// One sentence on what was repaired, for notices; empty when nothing was.
    pub fn damage_report(&self) -> String {
        let mut parts = Vec::new();
        if !self.bad_lines.is_empty() {
            parts.push(format!(
                "skipped {} unreadable line(s) ({})",
                self.bad_lines.len(),
                list_numbers(&self.bad_lines)
            ));
        }
        if !self.repaired.is_empty() {
            parts.push(format!(
                "repaired {} line(s) holding bytes that are not UTF-8 ({}), now shown as \u{FFFD}",
                self.repaired.len(),
                list_numbers(&self.repaired)
            ));
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
        if self.interrupted > 0 {
            parts.push(format!(
                "{} answer(s) were interrupted while streaming (kept up to their last checkpoint, marked interrupted)",
                self.interrupted
            ));
        }
        parts.join("; ")
    }
}

/// Line numbers for a report: the first ten, then "...".
fn list_numbers(numbers: &[u64]) -> String {
    let shown: Vec<String> = numbers.iter().take(10).map(u64::to_string).collect();
    let more = if numbers.len() > 10 { ", ..." } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// Loads a session's log. A session whose log does not exist yet loads as empty. The file is only
/// read, never rewritten: repairs live in the returned history. A linked folder or log is refused.
pub fn load(ctx: &Context) -> Result<Loaded> {
    let dir = match Dir::session(ctx) {
        Ok(d) => d,
        Err(e) if e.is_not_found() => return Err(Error::NotFound { id: ctx.id.clone(), dir: ctx.dir.clone() }),
        Err(e) => return Err(e),
    };
    let path = &ctx.jsonl_path;
    let file = match dir.open(CONVERSATION_FILE_NAME, Access::Read) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(Loaded { id: ctx.id.clone(), ..Default::default() }),
        Err(e) => return Err(e),
    };
    let mut replay = Replay::keeping();
    let torn_tail_bytes =
        feed_lines(&file, 0, &mut replay).map_err(io_err("cannot read session log", path))?.torn_bytes;
    let done = replay.finish();
    let mut loaded = Loaded {
        id: ctx.id.clone(),
        messages: done.messages,
        bad_lines: done.bad_line_numbers,
        repaired: done.repaired_line_numbers,
        trimmed: done.trimmed,
        dropped: done.state.dropped,
        torn_tail_bytes,
        spill_problems: Vec::new(),
        title: done.state.shown_title().to_string(),
        pinned: done.state.pinned,
        forked_from: done.state.forked_from.clone(),
        imported_from: done.state.imported_from.clone(),
        agent: done.state.agent.clone(),
        worktree: done.state.worktree.clone(),
        model: done.state.shown_model().to_string(),
        entries: done.state.entries,
        last_message: done.state.last_message,
        interrupted: done.state.interrupted,
        git_start: done.state.git_start,
        git: done.state.git,
        usage_by_model: done.state.usage,
        files: done.files,
        rewinds: done.rewinds,
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
                    // Parsed again through a decoder that reads invalid UTF-8 as U+FFFD, still streaming:
                    // only a line that failed pays for the second pass.
                    Err(_) => match serde_json::from_reader::<_, Entry>(BufReader::with_capacity(
                        256 * 1024,
                        Lossy::new(ReadAt { file, pos: line_start, end: line_start + line_len }),
                    )) {
                        // The decoder changes nothing in valid UTF-8, so a line that parses now had some.
                        Ok(entry) => replay.repaired_entry(entry, line_no),
                        Err(_) => replay.bad_line(line_no),
                    },
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

/// A reader that passes valid UTF-8 through and turns each invalid sequence into U+FFFD, as
/// `String::from_utf8_lossy` does, without holding more than one buffer.
struct Lossy<R> {
    inner: R,
    /// Bytes read from `inner` not yet decoded (`buf[start..end]`).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Decoded bytes waiting to be handed out.
    out: Vec<u8>,
    out_pos: usize,
    eof: bool,
    replaced: bool,
}

impl<R: Read> Lossy<R> {
    fn new(inner: R) -> Self {
        Lossy {
            inner,
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
            out: Vec::new(),
            out_pos: 0,
            eof: false,
            replaced: false,
        }
    }

    /// Decodes what is buffered into `out`; an incomplete sequence at the end waits for more input.
    fn decode(&mut self) {
        let mut chunk = &self.buf[self.start..self.end];
        self.out.clear();
        self.out_pos = 0;
        loop {
            match std::str::from_utf8(chunk) {
                Ok(s) => {
                    self.out.extend_from_slice(s.as_bytes());
                    self.start = self.end;
                    return;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    self.out.extend_from_slice(&chunk[..good]);
                    match e.error_len() {
                        Some(n) => {
                            self.out.extend_from_slice("\u{FFFD}".as_bytes());
                            self.replaced = true;
                            chunk = &chunk[good + n..];
                        }
                        None if self.eof => {
                            self.out.extend_from_slice("\u{FFFD}".as_bytes());
                            self.replaced = true;
                            self.start = self.end;
                            return;
                        }
                        None => {
                            self.start = self.end - (chunk.len() - good);
                            return;
                        }
                    }
                }
            }
        }
    }
}

impl<R: Read> Read for Lossy<R> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        while self.out_pos == self.out.len() {
            if self.eof && self.start == self.end {
                return Ok(0);
            }
            // Keep an incomplete sequence, then fill the rest of the buffer.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            let n = self.inner.read(&mut self.buf[self.end..])?;
            if n == 0 {
                self.eof = true;
            }
            self.end += n;
            self.decode();
        }
        let n = dst.len().min(self.out.len() - self.out_pos);
        dst[..n].copy_from_slice(&self.out[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        Ok(n)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    #[test]
    fn a_session_without_a_log_yet_loads_empty_and_a_missing_one_is_not_found() {
        let ws = tempfile::tempdir().unwrap();
        let ctx = Context::new(ws.path()).unwrap(); // the folder, no conversation.jsonl before the first message
        let l = load(&ctx).unwrap();
        assert_eq!((l.id.as_str(), l.messages.len(), l.damaged()), (ctx.id.as_str(), 0, false));
        // A folder removed after the context was made (another editor's cleanup): NotFound, naming it.
        std::fs::remove_dir_all(&ctx.dir).unwrap();
        match load(&ctx) {
            Err(Error::NotFound { id, .. }) => assert_eq!(id, ctx.id),
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    /// Lines of every size the reader treats apart: in its buffer, gathered past it, parsed from the file past
    /// the gathering limit; then a torn tail, short or itself past the limit. Every offset must carry over.
    #[test]
    fn lines_in_the_buffer_gathered_and_read_from_the_file_load_in_order_with_their_torn_tail() {
        let line = |text: &str| {
            let mut l = serde_json::to_vec(&Entry::from_message(Message::user(text))).unwrap();
            l.push(b'\n');
            l
        };
        let texts = ["short one".to_string(), "g".repeat(300 << 10), "f".repeat(3 << 19), "short two".into()];
        for tail in [b"{\"type\":\"mess".to_vec(), vec![b'x'; 3 << 19]] {
            let ws = tempfile::tempdir().unwrap();
            let ctx = Context::new(ws.path()).unwrap();
            let mut log: Vec<u8> = texts.iter().flat_map(|t| line(t)).collect();
            log.extend_from_slice(b"not json\n"); // line 5: its number must survive the long lines before it
            log.extend_from_slice(&tail);
            std::fs::write(&ctx.jsonl_path, &log).unwrap();
            let l = load(&ctx).unwrap();
            let got: Vec<&str> = l.messages.iter().map(|m| m.content.as_str()).collect();
            assert_eq!(got, texts.iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(l.torn_tail_bytes, tail.len() as u64);
            assert_eq!(l.bad_lines, [5]);
        }
    }

    #[test]
    fn each_kind_of_damage_alone_marks_the_session_damaged_and_is_reported() {
        let cases: Vec<(&str, Loaded)> = vec![
            ("bad line", Loaded { bad_lines: vec![3], ..Default::default() }),
            ("repaired", Loaded { repaired: vec![4], ..Default::default() }),
            ("trimmed", Loaded { trimmed: true, ..Default::default() }),
            ("dropped", Loaded { dropped: 1, ..Default::default() }),
            ("torn tail", Loaded { torn_tail_bytes: 9, ..Default::default() }),
            ("spill", Loaded { spill_problems: vec!["x.txt is missing".into()], ..Default::default() }),
            ("interrupted", Loaded { interrupted: 1, ..Default::default() }),
        ];
        for (what, l) in cases {
            assert!(l.damaged(), "{what}");
            assert!(!l.damage_report().is_empty(), "{what}");
        }
        assert!(!Loaded::default().damaged());
        assert_eq!(Loaded::default().damage_report(), "");
        // Line numbers: the first ten, then "..." only when there are more.
        let ten = Loaded { bad_lines: (1..=10).collect(), ..Default::default() };
        assert_eq!(ten.damage_report(), "skipped 10 unreadable line(s) (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)");
        let twelve = Loaded { bad_lines: (1..=12).collect(), torn_tail_bytes: 7, ..Default::default() };
        assert_eq!(
            twelve.damage_report(),
            "skipped 12 unreadable line(s) (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...); ignored a torn last line of 7 bytes"
        );
    }

    fn lossy(input: &[u8], chunk: usize) -> (Vec<u8>, bool) {
        struct Chunks<'a>(&'a [u8], usize);
        impl Read for Chunks<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut r = Lossy::new(Chunks(input, chunk));
        let mut out = Vec::new();
        r.read_to_end(&mut out).expect("read");
        (out, r.replaced)
    }

    #[test]
    fn the_lossy_reader_matches_from_utf8_lossy_at_every_chunk_size() {
        let input = "aé€😀".bytes().chain([0xe9, b'x', 0xf0, 0x9f, b'y', 0xe2, 0x82]).collect::<Vec<u8>>();
        for chunk in 1..=input.len() {
            let (out, replaced) = lossy(&input, chunk);
            assert_eq!(String::from_utf8(out).expect("utf-8"), String::from_utf8_lossy(&input), "chunk {chunk}");
            assert!(replaced);
        }
        assert_eq!(lossy("é€😀".as_bytes(), 1), ("é€😀".as_bytes().to_vec(), false));
    }
}
