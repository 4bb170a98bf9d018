//! grep: a regex over the lines of the files the ignore-aware walker yields.

use std::sync::atomic::{AtomicBool, Ordering};

use regex::Regex;

use super::fs::{NOTE_ROOM, cut_str, open_text, read_line_capped, walker};
use super::path::{Resolved, Root};

/// Lines are matched in their first this many bytes (memory stays bounded on huge lines).
const MAX_MATCH_LINE: usize = 1024 * 1024;
/// A matching line is shown up to this many bytes, around its match.
const MAX_SHOWN: usize = 300;

pub(crate) fn grep(
    root: &Root,
    res: &Resolved,
    re: &Regex,
    max_matches: usize,
    cap: usize,
    cancel: &AtomicBool,
) -> Result<String, String> {
    if let Err(e) = std::fs::metadata(&res.abs) {
        return Err(if e.kind() == std::io::ErrorKind::NotFound {
            format!("{} does not exist", res.rel)
        } else {
            format!("cannot search {}: {e}", res.rel)
        });
    }
    let mut out = String::new();
    let mut count = 0;
    let mut buf = Vec::new();
    'files: for entry in walker(root, &res.abs) {
        if cancel.load(Ordering::Relaxed) {
            return Err("cancelled".to_string());
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(Some(mut r)) = open_text(entry.path()) else { continue };
        let rel = root.rel(entry.path());
        let mut n = 0u64;
        while let Ok(Some(_)) = read_line_capped(&mut r, &mut buf, MAX_MATCH_LINE) {
            n += 1;
            let text = String::from_utf8_lossy(&buf);
            if let Some(m) = re.find(&text) {
                let line = format!("{rel}:{n}: {}\n", excerpt(&text, m.start()));
                if out.len() + line.len() > cap.saturating_sub(NOTE_ROOM) {
                    out.push_str(&format!(
                        "[stopped at the output limit after {count} matching lines; there are more: narrow the pattern or the path]\n"
                    ));
                    break 'files;
                }
                out.push_str(&line);
                count += 1;
                if count >= max_matches {
                    out.push_str(&format!(
                        "[stopped after {count} matching lines; there may be more: narrow the pattern or the path]\n"
                    ));
                    break 'files;
                }
            }
        }
    }
    if count == 0 {
        return Ok("no matches\n".to_string());
    }
    Ok(out)
}

/// The line, or a window of it around the match when it is long.
fn excerpt(line: &str, at: usize) -> String {
    if line.len() <= MAX_SHOWN {
        return line.to_string();
    }
    let mut start = at.saturating_sub(MAX_SHOWN / 3).min(line.len() - MAX_SHOWN);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let shown = cut_str(&line[start..], MAX_SHOWN);
    let mut s = String::new();
    if start > 0 {
        s.push('…');
    }
    s.push_str(shown);
    if start + shown.len() < line.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_whole_long_lines_around_the_match() {
        assert_eq!(excerpt("abc", 1), "abc");
        let line = format!("{}NEEDLE{}", "x".repeat(1000), "y".repeat(1000));
        let e = excerpt(&line, 1000);
        assert!(e.starts_with('…') && e.ends_with('…'), "{e}");
        assert!(e.contains("NEEDLE"));
        let head = format!("NEEDLE{}", "y".repeat(1000));
        assert!(excerpt(&head, 0).starts_with("NEEDLE"));
    }
}
