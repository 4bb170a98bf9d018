//! Which sessions moved last, without a stat of every log.
//!
//! Ordering sessions by their logs' modification times costs one `stat` each: about 3 µs on these
//! machines, so 30 ms for 10,000 sessions before the picker can show its first rows. Every writer
//! therefore appends `<id> <unix seconds>\n` to `sessions/activity` after each entry (one small
//! `O_APPEND` write, not synced: it is a hint). [`recent`] reads the file's tail and returns ids, most
//! recent first, so a limited list summarises only those.
//!
//! It is only a hint: a session written by something else (an older version, a copied folder) is not
//! in it, and a lost line only makes a session look older. The list falls back to a full scan when
//! the hint cannot fill the limit, and the picker's full list (a full scan) corrects any order.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::contain::{Access, Dir};
use super::is_valid_id;

pub const ACTIVITY_FILE_NAME: &str = "activity";

/// Above this size the file is rewritten with one line per session.
const COMPACT_ABOVE: u64 = 1 << 20;
/// How much of the file's end [`recent`] reads.
const TAIL_BYTES: u64 = 256 * 1024;

/// Opens the activity file for appending; compacts it first when it has grown large. A linked
/// activity file (or `sessions` folder) is refused: the hint is then simply not written.
pub fn open(sessions_dir: &Path) -> Option<File> {
    let root = root_of(sessions_dir)?;
    let len = root.open(ACTIVITY_FILE_NAME, Access::Read).map(|f| f.metadata().map_or(0, |m| m.len()));
    if len.is_ok_and(|n| n > COMPACT_ABOVE) {
        let _ = compact(&root);
    }
    root.open(ACTIVITY_FILE_NAME, Access::AppendCreate).ok()
}

/// The checked `sessions` folder of `sessions_dir` (`<workspace>/.PseudoClaude/sessions`).
fn root_of(sessions_dir: &Path) -> Option<Dir> {
    Dir::sessions(sessions_dir.parent()?.parent()?).ok()
}

/// Notes that session `id` moved at `ts`. Best effort: the log itself is what counts.
pub fn record(file: &mut File, id: &str, ts: i64) {
    let _ = file.write_all(format!("{id} {ts}\n").as_bytes());
}

/// Session ids from the file's tail, most recent first; `None` when there is no file.
pub fn recent(sessions_dir: &Path) -> Option<Vec<String>> {
    recent_within(sessions_dir, TAIL_BYTES)
}

/// [`recent`] from the file's last `tail` bytes only: the picker's first rows (on the editor's main
/// loop) need the few newest ids, and parsing the whole 256 KiB tail costs milliseconds.
pub fn recent_within(sessions_dir: &Path, tail: u64) -> Option<Vec<String>> {
    let mut f = root_of(sessions_dir)?.open(ACTIVITY_FILE_NAME, Access::Read).ok()?;
    let len = f.metadata().ok()?.len();
    let start = len.saturating_sub(tail);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::with_capacity((len - start) as usize);
    f.read_to_end(&mut buf).ok()?;
    // The first line may be cut: what is left of it names no valid id (ids are 20 characters, and a
    // line is `<id> <ts>`), so order() drops it, while a line that starts exactly at the cut is kept.
    Some(order(String::from_utf8_lossy(&buf).lines()))
}

/// Latest time per id, newest first; lines that are not `<id> <ts>` are ignored.
fn order<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut latest: HashMap<&str, (i64, usize)> = HashMap::new();
    for (i, line) in lines.enumerate() {
        let Some((id, ts)) = line.split_once(' ') else { continue };
        let Ok(ts) = ts.trim().parse::<i64>() else { continue };
        if is_valid_id(id) {
            let e = latest.entry(id).or_insert((ts, i));
            *e = (*e).max((ts, i));
        }
    }
    let mut ids: Vec<(&str, (i64, usize))> = latest.into_iter().collect();
    ids.sort_by_key(|e| std::cmp::Reverse(e.1));
    ids.into_iter().map(|(id, _)| id.to_string()).collect()
}

/// Rewrites the file with one line per session (atomically, by rename).
fn compact(root: &Dir) -> std::io::Result<()> {
    let mut text = String::new();
    root.open(ACTIVITY_FILE_NAME, Access::Read).map_err(std::io::Error::other)?.read_to_string(&mut text)?;
    let mut latest: HashMap<&str, i64> = HashMap::new();
    for line in text.lines() {
        if let Some((id, ts)) = line.split_once(' ').and_then(|(id, ts)| Some((id, ts.trim().parse::<i64>().ok()?))) {
            let e = latest.entry(id).or_insert(ts);
            *e = (*e).max(ts);
        }
    }
    let mut rows: Vec<_> = latest.into_iter().collect();
    rows.sort_by_key(|r| r.1);
    let body: String = rows.iter().map(|(id, ts)| format!("{id} {ts}\n")).collect();
    root.replace_file(ACTIVITY_FILE_NAME, body.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_time_wins_and_garbage_is_ignored() {
        let lines = "20260101-000000-0001 10\nnonsense\n20260101-000000-0002 20\n../x 99\n20260101-000000-0001 30\n";
        assert_eq!(order(lines.lines()), ["20260101-000000-0001", "20260101-000000-0002"]);
    }

    #[test]
    fn recent_reads_the_last_quarter_mebibyte_and_drops_the_line_it_cuts() {
        let ws = tempfile::tempdir().expect("tempdir");
        let sessions = ws.path().join(".PseudoClaude/sessions");
        std::fs::create_dir_all(&sessions).expect("mkdir");
        let id = |i: usize| format!("20260101-{:06}-{:04x}", i / 0x10000, i % 0x10000);
        let write = |n: usize| {
            let text: String = (0..n).map(|i| format!("{} {}\n", id(i), 100_000 + i)).collect();
            std::fs::write(sessions.join(ACTIVITY_FILE_NAME), &text).expect("write");
            text.len() as u64
        };
        // 5,000 lines (140 KB): all of them, newest first
        assert!(write(5_000) < TAIL_BYTES);
        let ids = recent(&sessions).expect("a file");
        assert_eq!((ids.len(), ids[0].as_str(), ids[4_999].as_str()), (5_000, id(4_999).as_str(), id(0).as_str()));
        // 12,000 lines (336 KB): the lines within the last 256 KiB, less the one it starts inside
        let len = write(12_000);
        let line = 28;
        let whole_lines = (TAIL_BYTES as usize) / line;
        assert_eq!(len as usize, 12_000 * line);
        let ids = recent(&sessions).expect("a file");
        assert_eq!(ids.len(), whole_lines);
        assert_eq!(ids.last().map(String::as_str), Some(id(12_000 - whole_lines).as_str()));
        for tail in [2 * line - 1, 2 * line + 1] {
            assert_eq!(recent_within(&sessions, tail as u64).expect("a file"), [id(11_999), id(11_998)][..tail / line]);
        }
        assert_eq!(recent_within(&sessions, 2 * line as u64).expect("a file"), [id(11_999), id(11_998)]);
    }

    #[test]
    fn a_file_above_one_mebibyte_is_compacted_to_a_line_per_session_when_opened() {
        let ws = tempfile::tempdir().expect("tempdir");
        let sessions = ws.path().join(".PseudoClaude/sessions");
        std::fs::create_dir_all(&sessions).expect("mkdir");
        let file = sessions.join(ACTIVITY_FILE_NAME);
        let ids = ["20260101-000000-000a", "20260101-000000-000b", "20260101-000000-000c"];
        // 28-byte lines, then a line of garbage making it exactly 1 MiB: not above, left as it is
        let mut text: String = (0..37_449).map(|i| format!("{} {}\n", ids[i % 3], 100_000 + i)).collect();
        text.push_str("xyz\n");
        assert_eq!(text.len() as u64, COMPACT_ABOVE);
        std::fs::write(&file, &text).expect("write");
        drop(open(&sessions).expect("opened"));
        assert_eq!(std::fs::read_to_string(&file).expect("read"), text);
        // one line more: compacted, the latest time of each, oldest first, before this writer appends
        let mut f = open(&sessions).expect("opened");
        record(&mut f, ids[0], 200_000);
        let mut f = open(&sessions).expect("opened");
        record(&mut f, ids[2], 200_001);
        let expected = format!("{} 137447\n{} 137448\n{} 200000\n{} 200001\n", ids[1], ids[2], ids[0], ids[2]);
        assert_eq!(std::fs::read_to_string(&file).expect("read"), expected);
        assert_eq!(recent(&sessions).expect("a file"), [ids[2], ids[0], ids[1]]);
    }
}
