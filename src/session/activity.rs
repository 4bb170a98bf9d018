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
use std::path::{Path, PathBuf};

use super::contain::{Access, Dir};
use super::is_valid_id;

pub const ACTIVITY_FILE_NAME: &str = "activity";

/// Above this size the file is rewritten with one line per session.
const COMPACT_ABOVE: u64 = 1 << 20;
/// How much of the file's end [`recent`] reads.
const TAIL_BYTES: u64 = 256 * 1024;

pub fn path(sessions_dir: &Path) -> PathBuf {
    sessions_dir.join(ACTIVITY_FILE_NAME)
}

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
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.lines();
    if start > 0 {
        lines.next(); // cut in the middle
    }
    Some(order(lines))
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
}
