//! The raw log's bytes, scanned without parsing: which lines may hold the query, and whether an answer
//! restored from checkpoints alone may.

use super::query::Query;
use crate::session::entry::{ASSISTANT_PREFIX, CHECKPOINT_PREFIX, REPLACE_PREFIX};
use crate::session::replay::{Parsed, parse_line};

/// Whether an answer restored from checkpoints alone may hold the text: its text is spread over
/// several lines, so no line needs to match. A run of checkpoints of one answer followed by that
/// answer's final message (an assistant message, or a replace) is superseded and left out at the
/// cost of comparing a few bytes; any other run is parsed and its text searched.
pub(super) fn interrupted_match(log: &[u8], query: &Query) -> bool {
    let mut pos = 0;
    while let Some(at) = query.checkpoint.find(&log[pos..]) {
        let start = pos + at;
        pos = start + 1;
        // Only our writer writes checkpoints, always with this prefix at the start of the line (inside
        // a line it is a tool call's arguments).
        if start > 0 && log[start - 1] != b'\n' {
            continue;
        }
        let mut run = Vec::new();
        let mut next = start;
        let mut following: &[u8] = &[];
        while next < log.len() {
            let end = memchr::memchr(b'\n', &log[next..]).map_or(log.len(), |i| next + i);
            let line = &log[next..end];
            if !line.starts_with(CHECKPOINT_PREFIX) {
                following = line;
                break;
            }
            run.push(line);
            next = end + 1;
        }
        pos = next;
        let one_answer = answer_of(run[0]).is_some() && answer_of(run[0]) == answer_of(run[run.len() - 1]);
        if one_answer && (following.starts_with(ASSISTANT_PREFIX) || following.starts_with(REPLACE_PREFIX)) {
            continue;
        }
        let mut text = String::new();
        let mut answer = None;
        for line in run {
            let (Parsed::Entry(e) | Parsed::Repaired(e)) = parse_line(line) else { continue };
            if answer.as_ref() != Some(&e.answer) {
                if query.decoded.is_match(&text) {
                    return true;
                }
                text.clear();
                answer = Some(e.answer.clone());
            }
            text.push_str(&e.content);
        }
        if query.decoded.is_match(&text) {
            return true;
        }
    }
    false
}

/// Where the checkpoint lines that end `chunk` (complete lines) start; `None` when it does not end
/// with one.
pub(super) fn trailing_checkpoints(chunk: &[u8]) -> Option<usize> {
    let mut start = chunk.len();
    while start > 0 {
        let line_start = memchr::memrchr(b'\n', &chunk[..start - 1]).map_or(0, |i| i + 1);
        if !chunk[line_start..].starts_with(CHECKPOINT_PREFIX) {
            break;
        }
        start = line_start;
    }
    (start < chunk.len()).then_some(start)
}

/// The raw `answer` id of a checkpoint line.
pub(super) fn answer_of(line: &[u8]) -> Option<&[u8]> {
    let at = memchr::memmem::find(line, br#""answer":""#)? + br#""answer":""#.len();
    let len = memchr::memchr(b'"', &line[at..])?;
    Some(&line[at..at + len])
}

/// Start offsets (plus `base`) of the lines of `log` where `raw` matches, in order, each once.
pub(super) fn candidate_lines(log: &[u8], base: u64, raw: &regex::bytes::Regex) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(m) = raw.find_at(log, at) {
        let start = memchr::memrchr(b'\n', &log[..m.start()]).map_or(0, |i| i + 1);
        out.push(base + start as u64);
        // The rest of the line is a candidate already.
        match memchr::memchr(b'\n', &log[m.end()..]) {
            Some(i) => at = m.end() + i + 1,
            None => break,
        }
    }
    out
}
