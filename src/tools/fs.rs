//! read_file, list_files, write_file and edit_file, plus the file helpers grep shares.
//!
//! Files are streamed: a read never holds more than the lines it shows (each cut at
//! [`MAX_LINE_BYTES`]), so reading a 1 GB file costs what the answer costs. Writes go to a temp file
//! in the same directory and are renamed into place, keeping the old file's permissions.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use ignore::WalkBuilder;

use super::diff;
use super::path::{Resolved, Root};
use crate::atomic::{Durable, Mode};

/// read_file shows at most this many bytes of one line.
pub(crate) const MAX_LINE_BYTES: usize = 2000;
/// A file whose first this many bytes hold a NUL is binary.
const BINARY_PROBE: u64 = 8192;
/// read_file counts the lines of files up to this size to say how many there are in all.
const COUNT_LINES_UP_TO: u64 = 64 * 1024 * 1024;
/// edit_file loads the whole file: larger ones are refused.
pub(crate) const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// write_file diffs against the old content only up to this size.
const MAX_DIFF_BYTES: u64 = 4 * 1024 * 1024;
/// The approval prompt's detail is cut beyond this.
const MAX_DETAIL_BYTES: usize = 512 * 1024;

const CANCELLED: &str = "cancelled";

/// read_file and grep stop this far below the output cap, leaving room for their closing note.
pub(crate) const NOTE_ROOM: usize = 512;

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn cut_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The same, from the other side: the start of a suffix, moved forward to a boundary.
fn ceil_boundary(s: &str, mut at: usize) -> usize {
    while at < s.len() && !s.is_char_boundary(at) {
        at += 1;
    }
    at.min(s.len())
}

fn is_binary(head: &[u8]) -> bool {
    head.contains(&0)
}

/// A file whose first bytes were already read (to tell text from binary), read from the start.
pub(crate) type TextReader = BufReader<io::Chain<Cursor<Vec<u8>>, File>>;

/// Opens a file and reads its first bytes: `None` when it looks binary, else a reader over all of it.
pub(crate) fn open_text(path: &Path) -> io::Result<Option<TextReader>> {
    let mut file = File::open(path)?;
    let mut head = Vec::new();
    (&mut file).take(BINARY_PROBE).read_to_end(&mut head)?;
    if is_binary(&head) {
        return Ok(None);
    }
    Ok(Some(BufReader::with_capacity(64 * 1024, Cursor::new(head).chain(file))))
}

/// Reads one line into `buf` without its `\n` (and a `\r` before it), keeping at most `max` bytes of
/// it. Returns the line's full length in bytes, or `None` at the end of the input.
pub(crate) fn read_line_capped<R: BufRead>(r: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<Option<usize>> {
    buf.clear();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            break;
        }
        any = true;
        let newline = avail.iter().position(|&c| c == b'\n');
        let chunk = &avail[..newline.unwrap_or(avail.len())];
        let room = max.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        total += chunk.len();
        let used = newline.map_or(avail.len(), |i| i + 1);
        r.consume(used);
        if newline.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if buf.len() == total && buf.last() == Some(&b'\r') {
        buf.pop();
        total -= 1;
    }
    Ok(Some(total))
}

/// A line's bytes as text, and a note when it was cut.
fn line_text(buf: &mut Vec<u8>, total: usize) -> String {
    if total > buf.len() {
        // Drop a character the cut split in two.
        if let Err(e) = std::str::from_utf8(buf)
            && e.error_len().is_none()
        {
            buf.truncate(e.valid_up_to());
        }
        format!("{}… [line cut: {total} bytes in all]", String::from_utf8_lossy(buf))
    } else {
        String::from_utf8_lossy(buf).into_owned()
    }
}

fn io_error(rel: &str, e: io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("{rel} does not exist"),
        io::ErrorKind::PermissionDenied => format!("cannot read {rel}: permission denied"),
        _ => format!("cannot read {rel}: {e}"),
    }
}

/// A regular file's metadata, or why it cannot be read as one.
fn regular_file(res: &Resolved) -> Result<std::fs::Metadata, String> {
    let meta = std::fs::metadata(&res.abs).map_err(|e| io_error(&res.rel, e))?;
    if meta.is_dir() {
        return Err(format!("{} is a directory; use list_files to see what it holds", res.rel));
    }
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", res.rel));
    }
    Ok(meta)
}

/// A whole text file (up to [`MAX_EDIT_BYTES`]), invalid UTF-8 replaced.
pub(crate) fn read_text(res: &Resolved) -> Result<String, String> {
    let rel = &res.rel;
    let meta = regular_file(res)?;
    if meta.len() > MAX_EDIT_BYTES {
        return Err(format!("{rel} is too large to attach ({} bytes; at most {MAX_EDIT_BYTES})", meta.len()));
    }
    let bytes = std::fs::read(&res.abs).map_err(|e| io_error(rel, e))?;
    if is_binary(&bytes) {
        return Err(format!("{rel} is a binary file"));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

pub(crate) struct ReadRequest {
    pub res: Resolved,
    /// First line, 1-based.
    pub offset: u64,
    pub limit: u64,
    pub cap: usize,
}

pub(crate) fn read_file(req: &ReadRequest, cancel: &AtomicBool) -> Result<String, String> {
    let rel = &req.res.rel;
    let size = regular_file(&req.res)?.len();
    let Some(mut r) = open_text(&req.res.abs).map_err(|e| io_error(rel, e))? else {
        return Err(format!("{rel} is a binary file ({size} bytes); read_file only shows text files"));
    };
    if size == 0 {
        return Ok(format!("[{rel} is empty]\n"));
    }
    let mut out = String::new();
    let mut buf = Vec::new();
    let mut n: u64 = 0;
    let mut cut_by_cap = false;
    let mut stopped = false;
    loop {
        if n.is_multiple_of(4096) && cancel.load(Ordering::Relaxed) {
            return Err(CANCELLED.to_string());
        }
        let max = if n + 1 >= req.offset { MAX_LINE_BYTES } else { 0 };
        let Some(total) = read_line_capped(&mut r, &mut buf, max).map_err(|e| io_error(rel, e))? else {
            break;
        };
        n += 1;
        if n < req.offset {
            continue;
        }
        let line = format!("{n:>6}\t{}\n", line_text(&mut buf, total));
        if !out.is_empty() && out.len() + line.len() > req.cap.saturating_sub(NOTE_ROOM) {
            // Stop below the cap, so the note saying how to read on is not cut off.
            n -= 1;
            stopped = true;
            cut_by_cap = true;
            break;
        }
        out.push_str(&line);
        if n - req.offset + 1 >= req.limit {
            stopped = true;
            break;
        }
    }
    if n < req.offset {
        return Err(format!("offset {} is past the end of {rel}, which has {n} lines", req.offset));
    }
    // Cut by the cap, the unshown line is still to read.
    let more = cut_by_cap || (stopped && !r.fill_buf().map_err(|e| io_error(rel, e))?.is_empty());
    if more {
        let why = if cut_by_cap { "output limit reached: " } else { "" };
        let (first, last) = (req.offset, n);
        if size <= COUNT_LINES_UP_TO {
            let total = n + u64::from(cut_by_cap) + count_lines(&mut r).map_err(|e| io_error(rel, e))?;
            out.push_str(&format!(
                "[{why}lines {first}-{last} of {total} shown; to read on, call read_file with offset={}]\n",
                last + 1
            ));
        } else {
            out.push_str(&format!(
                "[{why}lines {first}-{last} shown, the file goes on ({size} bytes in all); to read on, call read_file with offset={}]\n",
                last + 1
            ));
        }
    }
    Ok(out)
}

/// The lines left in a reader (a last line without `\n` counts).
fn count_lines<R: BufRead>(r: &mut R) -> io::Result<u64> {
    let mut lines = 0;
    let mut last = b'\n';
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            break;
        }
        lines += avail.iter().filter(|&&c| c == b'\n').count() as u64;
        last = avail[avail.len() - 1];
        let used = avail.len();
        r.consume(used);
    }
    Ok(lines + u64::from(last != b'\n'))
}

/// Walks like ripgrep: hidden files and ignored files skipped (.gitignore even outside a git repo,
/// .ignore, .git/info/exclude), symlinks not followed, names sorted, `.PseudoClaude/` left out.
pub(crate) fn walker(root: &Root, start: &Path) -> ignore::Walk {
    let mut b = WalkBuilder::new(start);
    b.standard_filters(true).require_git(false).follow_links(false).sort_by_file_name(|a, b| a.cmp(b));
    let r = root.clone();
    b.filter_entry(move |e| !r.is_log_dir(e.path()));
    b.build()
}

pub(crate) fn list_files(root: &Root, res: &Resolved, cap: usize, cancel: &AtomicBool) -> Result<String, String> {
    let meta = std::fs::metadata(&res.abs).map_err(|e| io_error(&res.rel, e))?;
    if !meta.is_dir() {
        return Ok(format!("{}\n", res.rel));
    }
    let mut out = String::new();
    let mut count = 0usize;
    for entry in walker(root, &res.abs) {
        if cancel.load(Ordering::Relaxed) {
            return Err(CANCELLED.to_string());
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 || entry.file_type().is_none_or(|t| t.is_dir()) {
            continue;
        }
        count += 1;
        if count <= cap {
            out.push_str(&root.rel(entry.path()));
            out.push('\n');
        }
    }
    if count == 0 {
        let under = if res.rel == "." { "the workspace".to_string() } else { res.rel.clone() };
        return Ok(format!("[no files under {under} (hidden and ignored files are not listed)]\n"));
    }
    if count > cap {
        out.push_str(&format!(
            "[{} more files not shown ({count} in all); list a subdirectory, or use grep, to see them]\n",
            count - cap
        ));
    }
    Ok(out)
}

/// What a file looked like when the user was asked, to notice a change before writing.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

fn stamp(path: &Path) -> Option<Stamp> {
    std::fs::metadata(path).ok().map(|m| Stamp { len: m.len(), modified: m.modified().ok() })
}

pub(crate) struct WritePlan {
    /// The approval detail: a unified diff.
    pub diff: String,
    /// The file's text now (`""` for a new file); `None` when it is binary or too large to diff.
    pub old: Option<String>,
    before: Option<Stamp>,
}

impl WritePlan {
    /// Whether the file existed when the plan was made.
    pub fn before_exists(&self) -> bool {
        self.before.is_some()
    }
}

pub(crate) fn plan_write(res: &Resolved, content: &str) -> Result<WritePlan, String> {
    let rel = &res.rel;
    let (old_name, new_name) = (format!("a/{rel}"), format!("b/{rel}"));
    let mut text = None;
    let diff = match std::fs::metadata(&res.abs) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            text = Some(String::new());
            diff::unified("", content, "/dev/null", &new_name)
        }
        Err(e) => return Err(io_error(rel, e)),
        Ok(m) if m.is_dir() => return Err(format!("{rel} is a directory")),
        Ok(m) if !m.is_file() => return Err(format!("{rel} is not a regular file")),
        Ok(m) => {
            let old = if m.len() <= MAX_DIFF_BYTES {
                let bytes = std::fs::read(&res.abs).map_err(|e| io_error(rel, e))?;
                if is_binary(&bytes) { None } else { String::from_utf8(bytes).ok() }
            } else {
                None
            };
            text.clone_from(&old);
            match old {
                Some(old) if old == content => format!("(no change: {rel} already has this content)\n"),
                Some(old) => diff::unified(&old, content, &old_name, &new_name),
                None => format!(
                    "(replaces {rel}: {} bytes, binary or too large to show as a diff)\n{}",
                    m.len(),
                    diff::unified("", content, "/dev/null", &new_name)
                ),
            }
        }
    };
    Ok(WritePlan { diff: cut_detail(diff), old: text, before: stamp(&res.abs) })
}

fn cut_detail(mut d: String) -> String {
    if d.len() > MAX_DETAIL_BYTES {
        let total = d.len();
        let keep = cut_str(&d, MAX_DETAIL_BYTES).len();
        d.truncate(keep);
        d.push_str(&format!("\n[diff cut: {total} bytes in all]\n"));
    }
    d
}

pub(crate) fn write_file(res: &Resolved, content: &str, plan: &WritePlan) -> Result<String, String> {
    let rel = &res.rel;
    if stamp(&res.abs) != plan.before {
        return Err(format!("{rel} changed while waiting for approval; nothing was written. Read it again and retry."));
    }
    write_whole(&res.abs, content.as_bytes()).map_err(|e| format!("cannot write {rel}: {e}"))?;
    let verb = if plan.before.is_some() { "overwrote" } else { "created" };
    let lines = content.lines().count();
    Ok(format!("{verb} {rel} ({} bytes, {lines} line{})", content.len(), if lines == 1 { "" } else { "s" }))
}

pub(crate) struct EditPlan {
    pub diff: String,
    original: Vec<u8>,
    updated: String,
    rel: String,
}

impl EditPlan {
    /// The file's text when the plan was made.
    pub fn text(&self) -> &str {
        // Checked to be UTF-8 when the plan was made.
        std::str::from_utf8(&self.original).unwrap_or_default()
    }

    pub fn updated(&self) -> &str {
        &self.updated
    }

    /// Writes `updated` instead (only some change blocks were accepted); the answer's diff follows.
    pub fn set_updated(&mut self, updated: String) {
        let rel = &self.rel;
        self.diff = cut_detail(diff::unified(self.text(), &updated, &format!("a/{rel}"), &format!("b/{rel}")));
        self.updated = updated;
    }
}

/// Where `needle` occurs in `hay`, overlapping occurrences included: the count and the first.
fn occurrences(hay: &str, needle: &str) -> (usize, Option<usize>) {
    let mut count = 0;
    let mut first = None;
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let at = from + i;
        first.get_or_insert(at);
        count += 1;
        from = ceil_boundary(hay, at + 1);
    }
    (count, first)
}

pub(crate) fn plan_edit(res: &Resolved, old: &str, new: &str) -> Result<EditPlan, String> {
    let rel = &res.rel;
    if old.is_empty() {
        return Err("`old` is empty; to create a file or replace all of it, use write_file".to_string());
    }
    if old == new {
        return Err("`old` and `new` are the same; there is nothing to change".to_string());
    }
    let meta = match regular_file(res) {
        Err(e) if !res.abs.exists() => return Err(format!("{e}; use write_file to create it")),
        other => other?,
    };
    if meta.len() > MAX_EDIT_BYTES {
        return Err(format!(
            "{rel} is too large to edit ({} bytes; edit_file handles up to {MAX_EDIT_BYTES})",
            meta.len()
        ));
    }
    let original = std::fs::read(&res.abs).map_err(|e| io_error(rel, e))?;
    if is_binary(&original) {
        return Err(format!("{rel} is a binary file; edit_file only edits text files"));
    }
    let text = std::str::from_utf8(&original)
        .map_err(|_| format!("{rel} is not valid UTF-8 text; edit_file only edits UTF-8 text files"))?;

    let (mut count, mut first) = occurrences(text, old);
    let (mut old, mut new) = (old.to_string(), new.to_string());
    // A file with Windows line ends, and an `old` written with `\n` ones.
    if count == 0 && text.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        let (o, n) = (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"));
        (count, first) = occurrences(text, &o);
        if count > 0 {
            (old, new) = (o, n);
        }
    }
    let at = match (count, first) {
        (1, Some(at)) => at,
        (0, _) | (_, None) => {
            return Err(format!(
                "not found: `old` does not occur in {rel}. It must match the file exactly, whitespace and \
                 indentation included; read the file again (leaving out read_file's line-number prefixes) and retry."
            ));
        }
        (n, _) => {
            return Err(format!(
                "`old` occurs {n} times in {rel}; it must occur exactly once. Include more of the surrounding \
                 lines in `old` (and `new`) so that it picks one place."
            ));
        }
    };
    let updated = format!("{}{}{}", &text[..at], new, &text[at + old.len()..]);
    let diff = cut_detail(diff::unified(text, &updated, &format!("a/{rel}"), &format!("b/{rel}")));
    Ok(EditPlan { diff, original, updated, rel: rel.clone() })
}

pub(crate) fn apply_edit(res: &Resolved, plan: &EditPlan) -> Result<String, String> {
    let rel = &res.rel;
    let now = std::fs::read(&res.abs).map_err(|e| io_error(rel, e))?;
    if now != plan.original {
        return Err(format!("{rel} changed while waiting for approval; it was not edited. Read it again and retry."));
    }
    write_whole(&res.abs, plan.updated.as_bytes()).map_err(|e| format!("cannot write {rel}: {e}"))?;
    Ok(format!("edited {rel}\n{}", plan.diff))
}

/// Replaces `path` whole, keeping its permissions, synced with its folder (a write the agent reported done
/// survives a power cut); creates missing parent directories.
fn write_whole(path: &Path, data: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::atomic::replace(path, data, Durable::Full, Mode::Keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_lines() {
        let mut r = Cursor::new(b"short\r\nabcdefghij\nlast".to_vec());
        let mut buf = Vec::new();
        assert_eq!(read_line_capped(&mut r, &mut buf, 100).unwrap(), Some(5));
        assert_eq!(buf, b"short");
        assert_eq!(read_line_capped(&mut r, &mut buf, 4).unwrap(), Some(10));
        assert_eq!(buf, b"abcd");
        assert_eq!(read_line_capped(&mut r, &mut buf, 100).unwrap(), Some(4));
        assert_eq!(read_line_capped(&mut r, &mut buf, 100).unwrap(), None);
    }

    #[test]
    fn cut_line_drops_split_char() {
        let mut buf = "aé".as_bytes()[..2].to_vec();
        assert_eq!(line_text(&mut buf, 10), "a… [line cut: 10 bytes in all]");
    }

    #[test]
    fn overlapping_occurrences_count() {
        assert_eq!(occurrences("aaa", "aa"), (2, Some(0)));
        assert_eq!(occurrences("éaé", "é"), (2, Some(0)));
        assert_eq!(occurrences("abc", "x"), (0, None));
    }

    #[test]
    fn counts_remaining_lines() {
        assert_eq!(count_lines(&mut Cursor::new(b"a\nb\n".to_vec())).unwrap(), 2);
        assert_eq!(count_lines(&mut Cursor::new(b"a\nb".to_vec())).unwrap(), 2);
        assert_eq!(count_lines(&mut Cursor::new(Vec::new())).unwrap(), 0);
    }
}
