//! The matches inside one message, a tool result's spill file or a piece of text, each with its snippet.

use std::collections::HashMap;
use std::fs;
use std::io::Read;

use super::query::{Query, SNIPPET_AFTER, SNIPPET_BEFORE};
use super::{Found, MessageRef, Spill};
use crate::session::contain::{Access, Dir};
use crate::session::{Result, TOOL_RESULTS_DIR_NAME, spill};

/// The matches in a message: its text (when its line matched), its calls' names and arguments, its
/// tool output (a spilled one from the spill file, when that file is intact, else the preview the
/// log kept, as a load shows it).
pub(super) fn search_message(
    m: MessageRef<'_>,
    query: &Query,
    spills: &HashMap<String, Spill>,
    line_matched: bool,
) -> Option<Found> {
    if let Some(r) = m.tool_result {
        if let Some(s) = &r.spill
            && let Some(name) = spill::resolve(s)
            && let Some(spill) = spills.get(name)
            && spill.bytes == s.bytes
        {
            return spill.found.clone();
        }
        return if line_matched { search_text(&r.content, query, "tool_result") } else { None };
    }
    if !line_matched {
        return None;
    }
    // The first field that matches gives the snippet; all of them count.
    let mut first: Option<Found> = None;
    let mut add = |f: Option<Found>| match (&mut first, f) {
        (None, f) => first = f,
        (Some(kept), Some(f)) => kept.matches += f.matches,
        (Some(_), None) => {}
    };
    add(search_text(m.content, query, "text"));
    for call in m.tool_calls {
        add(search_text(&call.name, query, "tool_call").map(|f| prefixed(f, "▸ ")));
        leaves(&call.arguments, &mut String::new(), &mut |key, value| {
            add(search_text(value, query, "tool_call").map(|f| prefixed(f, &format!("▸ {} {key}: ", call.name))));
        });
    }
    first
}

/// Every leaf of a JSON value as text (strings decoded), with its key path (`a.b`, `list[2]`).
fn leaves(v: &serde_json::Value, path: &mut String, f: &mut dyn FnMut(&str, &str)) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                leaves(x, path, f);
                path.truncate(len);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                leaves(x, path, f);
                path.truncate(len);
            }
        }
        serde_json::Value::String(s) => f(path, s),
        serde_json::Value::Null => {}
        other => f(path, &other.to_string()),
    }
}

fn prefixed(mut f: Found, prefix: &str) -> Found {
    f.snippet.insert_str(0, prefix);
    for r in &mut f.ranges {
        r[0] += prefix.len();
        r[1] += prefix.len();
    }
    f
}

pub(super) fn search_text(text: &str, query: &Query, kind: &'static str) -> Option<Found> {
    let mut it = query.decoded.find_iter(text);
    let first = it.next()?;
    let matches = 1 + it.count();
    let (snippet, ranges) = snippet(text.as_bytes(), first.start(), query);
    Some(Found { role: String::new(), kind, snippet, ranges, matches })
}

/// The spill files of the session (their names checked), each searched; none when the folder is
/// missing.
pub(super) fn search_spills(dir: &Dir, query: &Query) -> Result<HashMap<String, Spill>> {
    let mut out = HashMap::new();
    let Ok(rd) = fs::read_dir(dir.path().join(TOOL_RESULTS_DIR_NAME)) else { return Ok(out) };
    let names: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| spill::is_file_name(n))
        .collect();
    if names.is_empty() {
        return Ok(out);
    }
    let tool_results = dir.subdir(TOOL_RESULTS_DIR_NAME)?;
    let mut data = Vec::new();
    for name in names {
        // Opened through the checked folder: a linked file is refused, and so skipped.
        let Ok((mut f, meta)) = tool_results.open_stat(&name, Access::Read) else { continue };
        data.clear();
        if f.read_to_end(&mut data).is_err() {
            continue;
        }
        let found = query.decoded_bytes.find_iter(&data).fold(None, |acc: Option<(usize, usize)>, m| match acc {
            None => Some((m.start(), 1)),
            Some((at, n)) => Some((at, n + 1)),
        });
        let found = found.map(|(at, matches)| {
            let (snippet, ranges) = snippet(&data, at, query);
            Found { role: String::new(), kind: "tool_result", snippet, ranges, matches }
        });
        out.insert(name, Spill { bytes: meta.len(), found });
    }
    Ok(out)
}

/// One line of `text` around the match at byte `at`: from the line's start (at most
/// [`SNIPPET_BEFORE`] bytes before the match), whitespace runs collapsed to one space, `…` where
/// the text was cut; and the byte ranges of the matches in it.
fn snippet(text: &[u8], at: usize, query: &Query) -> (String, Vec<[usize; 2]>) {
    let line_start = memchr::memrchr(b'\n', &text[..at]).map_or(0, |i| i + 1);
    let mut start = line_start.max(at.saturating_sub(SNIPPET_BEFORE));
    while start < at && (text[start] & 0xC0) == 0x80 {
        start += 1;
    }
    let mut end = (at + SNIPPET_AFTER).min(text.len());
    while end < text.len() && (text[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let window = String::from_utf8_lossy(&text[start..end]);
    let mut out = String::with_capacity(window.len() + 6);
    if start > 0 && text[start - 1] != b'\n' {
        out.push('…');
    }
    let mut space = false;
    for c in window.trim_start().chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c);
    }
    if end < text.len() {
        out.push('…');
    }
    let ranges = query.decoded.find_iter(&out).map(|m| [m.start(), m.end()]).collect();
    (out, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::search::query::Case;

    fn around(text: &str) -> (String, Vec<[usize; 2]>) {
        let at = text.find("needle").expect("a needle");
        snippet(text.as_bytes(), at, &Query::new("needle", Case::Smart).expect("query"))
    }

    #[test]
    fn a_snippet_is_cut_on_character_boundaries_with_an_ellipsis_where_text_was_left_out() {
        // 48 bytes before the match fall inside an `é`: the cut moves past it
        let before = format!("line one\nAB{}z", "é".repeat(29));
        let (s, ranges) = around(&format!("{before}needle{}", "x".repeat(10)));
        assert_eq!(s, format!("…{}zneedle{}", "é".repeat(23), "x".repeat(10)));
        assert_eq!(ranges, [[50, 56]]);
        // 160 bytes after the match start fall inside an `é`: the cut moves past it
        let (s, ranges) = around(&format!("needlea{}", "é".repeat(100)));
        assert_eq!(s, format!("needlea{}…", "é".repeat(77)));
        assert_eq!(ranges, [[0, 6]]);
        // from the line's start, white space and control characters as one space
        let (s, _) = around("a\n   spaced \u{7}  out\tneedle  \r end");
        assert_eq!(s, "spaced out needle end");
    }
}
