//! Appending to `conversation.jsonl`: one JSON line per entry, written and synced before the call
//! returns.
//!
//! Rules, each for a failure seen in the field:
//! - An entry exists iff its line ends with `\n`. On open, bytes after the last `\n` (a torn append,
//!   NUL blocks left by a crash, garbage) are copied to `conversation.jsonl.broken` and cut off, so the
//!   next entry starts on a clean line instead of being glued to them. Committed lines are never touched.
//! - A write or sync that fails cuts the file back to the last committed line before the error is
//!   returned, so a full disk leaves no half line behind. If even that fails, the next call retries it
//!   before writing anything.
//! - A replace is a single line holding the whole snapshot, so it is atomic like any other line.
//! - One writer per session ([`super::lock`]).
//! - A created file is durable only once its directory is synced: the log and `.broken` are, before
//!   anything is written to them.
//! - What an open finds is synced before it is trusted: a line whose writer was killed before its
//!   `fdatasync` is whole in the page cache, a resume shows it, and a power cut could still take it.
//! - Every file operation goes through [`Disk`], so the crash simulation can check each rule above.
//!
//! Architecture invariant: when `append` returns `Ok`, the line and every directory entry it depends on are
//! synced; when it fails, the file is cut back to the last committed line. Every file operation goes
//! through `disk::Disk`, so the crash simulation sees it.

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex};

use super::disk::{Disk, DiskFile, Open, OsDisk};
use super::lock::Guard;
use super::{Context, Entry, Error, Result, activity, io_err, spill};
use crate::message::{Message, now};

/// How a writer behaves.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Written on the first entry this writer writes, as the seed does.
    pub model: String,
    /// Tool results larger than this many bytes are spilled to `tool-results/`.
    pub spill_threshold: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions { model: String::new(), spill_threshold: spill::DEFAULT_THRESHOLD }
    }
}

/// The single writer of a session's log. Safe to share between threads; entries are serialised
/// under its mutex.
#[derive(Debug)]
pub struct Writer {
    ctx: Context,
    opts: WriterOptions,
    disk: Arc<dyn Disk>,
    inner: Mutex<Inner>,
    _lock: Option<Guard>,
}

#[derive(Debug)]
struct Inner {
    file: Box<dyn DiskFile>,
    /// Length of the file up to and including the last committed line.
    committed_len: u64,
    wrote_entry: bool,
    /// A failed write could not be cut back; the next write must do that first.
    needs_truncate: bool,
    /// `sessions/activity`, told of each entry (see [`super::activity`]).
    activity: Option<File>,
}

/// What [`Writer::open`] found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repair {
    /// Bytes of a torn tail moved to `conversation.jsonl.broken`.
    pub torn_bytes: u64,
}

impl Writer {
    /// Opens (creating when needed) the session's log for appending: takes the lock, then repairs a
    /// torn tail.
    pub fn open(ctx: &Context, opts: WriterOptions) -> Result<Writer> {
        Ok(Writer::open_with_repair(ctx, opts)?.0)
    }

    /// [`Writer::open`], also telling what was repaired, so the UI can say so.
    pub fn open_with_repair(ctx: &Context, opts: WriterOptions) -> Result<(Writer, Repair)> {
        Writer::open_on(Arc::new(OsDisk), ctx, opts)
    }

    /// [`Writer::open_with_repair`] on another [`Disk`] (the crash simulation's).
    pub fn open_on(disk: Arc<dyn Disk>, ctx: &Context, opts: WriterOptions) -> Result<(Writer, Repair)> {
        if !disk.is_dir(&ctx.dir) {
            return Err(Error::NotFound { id: ctx.id.clone(), dir: ctx.dir.clone() });
        }
        let guard = disk.lock(ctx)?;
        let path = &ctx.jsonl_path;
        let created = disk.file_len(path).is_none();
        let mut file = disk.open(path, Open::Append)?;
        // An empty log may be one an earlier open created and then failed (or died) to sync into
        // the directory: it has no committed line yet, so syncing it again costs nothing else.
        if created || file.size().map_err(io_err("cannot stat", path))? == 0 {
            disk.sync_dir(&ctx.dir)?;
        }
        let (committed_len, torn_bytes) = repair_torn_tail(disk.as_ref(), ctx, file.as_mut())?;
        if torn_bytes == 0 {
            // A writer killed between its write and its sync leaves a whole line that only the page
            // cache holds. A resume shows it, so it is made durable before anything is built on it.
            file.sync_data().map_err(io_err("cannot sync", path))?;
        }
        let activity = ctx.dir.parent().and_then(|d| disk.activity(d));
        let inner = Inner { file, committed_len, wrote_entry: false, needs_truncate: false, activity };
        let writer = Writer { ctx: ctx.clone(), opts, disk, inner: Mutex::new(inner), _lock: guard };
        Ok((writer, Repair { torn_bytes }))
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Appends one message; when this returns `Ok`, the line is on disk.
    pub fn append(&self, msg: &Message) -> Result<()> {
        self.append_between(Vec::new(), msg, Vec::new())
    }

    /// Appends `msg` with `before` and `after` around it: one write, one sync (a message and the rewind
    /// checkpoint that goes with it cost one flush, not two). A torn tail loses the last lines first.
    pub fn append_between(&self, before: Vec<Entry>, msg: &Message, after: Vec<Entry>) -> Result<()> {
        let msg = self.as_logged(msg)?;
        let mut entries = before;
        entries.push(Entry::from_message(msg));
        entries.extend(after);
        self.write_entries(entries)
    }

    /// Records that the whole history was replaced (compaction, resync): one line, applied whole or
    /// not at all. Spilled results stay references; large new ones are spilled first.
    pub fn replace(&self, reason: &str, msgs: &[Message]) -> Result<()> {
        let msgs = msgs.iter().map(|m| self.as_logged(m)).collect::<Result<Vec<_>>>()?;
        self.write_entry(Entry::replace(reason, msgs, now()))
    }

    /// Records the text an answer streamed since its last checkpoint (see [`Entry::checkpoint`]).
    pub fn checkpoint(&self, answer: &str, at: usize, text: &str) -> Result<()> {
        self.write_entry(Entry::checkpoint(answer, at, text, now()))
    }

    /// Appends an entry as it is (a `title`, a `pin`, a fork's snapshot: see [`super::meta`] and
    /// [`super::fork`]; a `meta` or `usage` entry); nothing is spilled. When this returns `Ok`, the line is on disk.
    pub fn append_entry(&self, entry: Entry) -> Result<()> {
        self.write_entry(entry)
    }

    /// Appends entries as they are, in one write and one sync (a kept copy's snapshot and the line saying where it
    /// stands: both or neither). Nothing is spilled ([`Writer::as_logged`] first where that matters).
    pub fn append_entries(&self, entries: Vec<Entry>) -> Result<()> {
        self.write_entries(entries)
    }

    /// A copy of `msg` with a large tool result spilled (and not copied).
    pub(crate) fn as_logged(&self, msg: &Message) -> Result<Message> {
        let tool_result = msg
            .tool_result
            .as_ref()
            .map(|r| spill::spill_if_large_on(self.disk.as_ref(), &self.ctx, r, self.opts.spill_threshold))
            .transpose()?;
        Ok(Message {
            role: msg.role.clone(),
            content: msg.content.clone(),
            tool_calls: msg.tool_calls.clone(),
            tool_result,
            ts: msg.ts,
            interrupted: msg.interrupted,
            thinking: msg.thinking.clone(),
            thinking_ms: msg.thinking_ms,
            model: msg.model.clone(),
            turn: msg.turn,
        })
    }

    fn write_entry(&self, entry: Entry) -> Result<()> {
        self.write_entries(vec![entry])
    }

    fn write_entries(&self, mut entries: Vec<Entry>) -> Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.first_mut()
            && !inner.wrote_entry
            && !self.opts.model.is_empty()
            && entry.model.is_empty()
        {
            entry.model = self.opts.model.clone();
        }
        let mut line = Vec::new();
        for entry in &entries {
            serde_json::to_writer(&mut line, entry).map_err(|e| Error::Io {
                action: "cannot encode entry for".into(),
                path: self.ctx.jsonl_path.clone(),
                source: io::Error::other(e),
            })?;
            line.push(b'\n');
        }
        let path = &self.ctx.jsonl_path;
        if inner.needs_truncate {
            inner.truncate_back().map_err(io_err("cannot repair after an earlier failed write to", path))?;
        }
        let written = inner.file.write_all(&line).and_then(|_| inner.file.sync_data());
        if let Err(e) = written {
            inner.needs_truncate = inner.truncate_back().is_err();
            return Err(io_err("cannot write to session log", path)(e));
        }
        inner.committed_len += line.len() as u64;
        inner.wrote_entry = true;
        if let Some(a) = &mut inner.activity {
            activity::record(a, &self.ctx.id, now());
        }
        Ok(())
    }

    /// Closes the log, releasing the lock. Dropping the writer does the same without reporting.
    pub fn close(self) -> Result<()> {
        let mut inner = self.inner.into_inner().unwrap_or_else(|p| p.into_inner());
        inner.file.sync_all().map_err(io_err("cannot sync session log", &self.ctx.jsonl_path))
    }
}

impl Inner {
    fn truncate_back(&mut self) -> io::Result<()> {
        self.file.set_len(self.committed_len)?;
        self.file.sync_data()?;
        self.needs_truncate = false;
        Ok(())
    }
}

/// Cuts everything after the last `\n` into `conversation.jsonl.broken`. Returns the committed
/// length and how many bytes were moved.
fn repair_torn_tail(disk: &dyn Disk, ctx: &Context, file: &mut dyn DiskFile) -> Result<(u64, u64)> {
    let path = &ctx.jsonl_path;
    let len = file.size().map_err(io_err("cannot stat", path))?;
    let committed = committed_len(file, len).map_err(io_err("cannot read", path))?;
    if committed == len {
        return Ok((len, 0));
    }
    // Keep the torn bytes: they may be the only copy of something a user wants to look at. They are
    // durable (data and directory entry) before the log loses them.
    let broken = ctx.broken_path();
    let created = disk.file_len(&broken).is_none();
    let mut out = disk.open(&broken, Open::Append)?;
    let header = format!("--- {} torn bytes cut from offset {committed} at {} ---\n", len - committed, now());
    (|| -> io::Result<()> {
        out.write_all(header.as_bytes())?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut pos = committed;
        while pos < len {
            let want = buf.len().min((len - pos) as usize);
            let n = file.read_at(&mut buf[..want], pos)?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])?;
            pos += n as u64;
        }
        out.write_all(b"\n")?;
        out.sync_all()
    })()
    .map_err(io_err("cannot save torn tail to", &broken))?;
    if created {
        disk.sync_dir(&ctx.dir)?;
    }
    file.set_len(committed).map_err(io_err("cannot cut torn tail of", path))?;
    file.sync_all().map_err(io_err("cannot sync", path))?;
    Ok((committed, len - committed))
}

/// The offset just past the last `\n` in the file's first `len` bytes, scanning back from the end.
fn committed_len(file: &dyn DiskFile, len: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        read_exact_at(file, chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn read_exact_at(file: &dyn DiskFile, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A file whose reads come short (at most 3 bytes) and are interrupted every other call, as
    /// `pread(2)` may: the scan for the last committed line must still land on the right byte.
    #[derive(Debug)]
    struct Stingy {
        data: Vec<u8>,
        calls: AtomicU32,
    }

    impl DiskFile for Stingy {
        fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
            self.data.extend_from_slice(buf);
            Ok(())
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            if self.calls.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let from = (offset as usize).min(self.data.len());
            let n = buf.len().min(3).min(self.data.len() - from);
            buf[..n].copy_from_slice(&self.data[from..from + n]);
            Ok(n)
        }
        fn size(&self) -> io::Result<u64> {
            Ok(self.data.len() as u64)
        }
        fn set_len(&mut self, len: u64) -> io::Result<()> {
            self.data.truncate(len as usize);
            Ok(())
        }
        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn sync_all(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_last_committed_line_is_found_through_short_and_interrupted_reads() {
        let data = b"{\"a\":1}\n{\"b\":2}\n{\"torn".to_vec();
        let len = data.len() as u64;
        let f = Stingy { data, calls: Default::default() };
        assert_eq!(committed_len(&f, len).unwrap(), 16);
        let whole = Stingy { data: b"{\"a\":1}\n".to_vec(), calls: Default::default() };
        assert_eq!(committed_len(&whole, 8).unwrap(), 8);
        let none = Stingy { data: b"torn only".to_vec(), calls: Default::default() };
        assert_eq!(committed_len(&none, 9).unwrap(), 0);
    }
}
