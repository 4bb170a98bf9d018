//! Which sessions are pinned, without reading every log: `sessions/pins`, a hint beside `activity`.
//!
//! The truth is each session's own log (its last `pin` entry, [`super::meta`]). But the picker's first
//! rows summarise only the newest sessions, and a pinned one from last month is not among them; so each
//! pin or unpin also appends `<id> 1` or `<id> 0` here (one small `O_APPEND` write, not synced), and a
//! limited list summarises the sessions this names as pinned too, keeping those whose log agrees. A lost
//! or missing hint only means a pinned session joins the top once the full list is read.

use std::collections::HashMap;
use std::io::{Read, Write};

use super::contain::{Access, Dir};
use super::is_valid_id;

pub const PINS_FILE_NAME: &str = "pins";

/// The most of the file read: pins are toggled by hand, so it stays far below this.
const MAX_READ: u64 = 1 << 20;

/// Notes that session `id` was pinned or unpinned. Best effort: the log is what counts.
pub(crate) fn record(root: &Dir, id: &str, pinned: bool) {
    if let Ok(mut f) = root.open(PINS_FILE_NAME, Access::AppendCreate) {
        let _ = f.write_all(format!("{id} {}\n", u8::from(pinned)).as_bytes());
    }
}

/// The ids whose last line says pinned, most recently pinned first.
pub(crate) fn pinned(root: &Dir) -> Vec<String> {
    let mut buf = Vec::new();
    let Ok(f) = root.open(PINS_FILE_NAME, Access::Read) else { return Vec::new() };
    if f.take(MAX_READ).read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut last: HashMap<&str, (bool, usize)> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        match line.split_once(' ') {
            Some((id, "1")) if is_valid_id(id) => last.insert(id, (true, i)),
            Some((id, "0")) if is_valid_id(id) => last.insert(id, (false, i)),
            _ => None,
        };
    }
    let mut ids: Vec<(&str, usize)> = last.into_iter().filter(|(_, (p, _))| *p).map(|(id, (_, i))| (id, i)).collect();
    ids.sort_by_key(|e| std::cmp::Reverse(e.1));
    ids.into_iter().map(|(id, _)| id.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(lines: &str) -> (tempfile::TempDir, Dir) {
        let ws = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(ws.path().join(".PseudoClaude/sessions")).expect("mkdir");
        let root = Dir::sessions(ws.path()).expect("sessions");
        let mut f = root.open(PINS_FILE_NAME, Access::AppendCreate).expect("pins");
        f.write_all(lines.as_bytes()).expect("write");
        (ws, root)
    }

    #[test]
    fn the_last_line_of_an_id_wins_and_the_newest_pin_comes_first() {
        let (_ws, root) = root_with("");
        let (a, b, c) = ("20261201-000000-aaaa", "20261202-000000-bbbb", "20261203-000000-cccc");
        for (id, pinned) in [(a, true), (b, true), (c, true), (b, false), (a, false), (a, true)] {
            record(&root, id, pinned);
        }
        assert_eq!(pinned(&root), [a, c]);
    }

    #[test]
    fn a_line_naming_no_session_is_ignored() {
        let (_ws, root) = root_with("../../etc 1\nsome thing 1\n20261201-000000-aaaa 1\n20261201-000000-aaaa\n");
        assert_eq!(pinned(&root), ["20261201-000000-aaaa"]);
    }
}
