//! The text a search looks for, and the matchers built from it once: over a log's raw JSON bytes (every
//! encoding a writer may have used) and over decoded text.

use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
use serde::{Deserialize, Serialize};

use crate::session::entry::CHECKPOINT_PREFIX;

/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
/// Bytes of context kept before a match in a snippet, and the snippet's length after it.
pub(super) const SNIPPET_BEFORE: usize = 48;
pub(super) const SNIPPET_AFTER: usize = 160;

/// How letters' case is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    /// Case-insensitive unless the query holds an upper-case letter.
    #[default]
    Smart,
    Sensitive,
    Insensitive,
}

/// A query that cannot be searched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query is empty: give the text to search for")]
    Empty,
    #[error("the query is {0} characters long; at most {MAX_QUERY_CHARS} are searched")]
    TooLong(usize),
    /// The pattern built from it is too large for the matcher (should not happen below the limit).
    #[error("cannot search for this text: {0}")]
    Unsupported(String),
}

/// The text searched for, literally, and the matchers built from it once.
#[derive(Debug, Clone)]
pub struct Query {
    pub text: String,
    pub case_sensitive: bool,
    /// Over a log's raw bytes: every JSON encoding of every case variant of the text.
    pub(super) raw: regex::bytes::Regex,
    /// Over decoded text (a message's content, an argument, a spill file's bytes).
    pub(super) decoded: regex::Regex,
    pub(super) decoded_bytes: regex::bytes::Regex,
    pub(super) checkpoint: memchr::memmem::Finder<'static>,
}

impl Query {
    pub fn new(text: &str, case: Case) -> std::result::Result<Query, QueryError> {
        if text.is_empty() {
            return Err(QueryError::Empty);
        }
        let chars = text.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(QueryError::TooLong(chars));
        }
        let case_sensitive = match case {
            Case::Smart => text.chars().any(char::is_uppercase),
            Case::Sensitive => true,
            Case::Insensitive => false,
        };
        let bad = |e: regex::Error| QueryError::Unsupported(e.to_string());
        let literal = regex::escape(text);
        let decoded = regex::RegexBuilder::new(&literal).case_insensitive(!case_sensitive).build().map_err(bad)?;
        let decoded_bytes =
            regex::bytes::RegexBuilder::new(&literal).case_insensitive(!case_sensitive).build().map_err(bad)?;
        let raw = regex::bytes::RegexBuilder::new(&raw_pattern(text, !case_sensitive))
            .size_limit(64 << 20)
            .build()
            .map_err(bad)?;
        let checkpoint = memchr::memmem::Finder::new(CHECKPOINT_PREFIX).into_owned();
        Ok(Query { text: text.to_string(), case_sensitive, raw, decoded, decoded_bytes, checkpoint })
    }
}

/// The pattern over raw JSON bytes that matches wherever a string holding `text` was written, by any
/// writer: for each character, each of its case variants (when `fold`) as itself and as every
/// escape JSON allows for it. Letters, digits and spaces are taken to be written as themselves (no
/// JSON writer escapes them); every other character may also be `\uXXXX` (Go escapes `<>&`,
/// Python every non-ASCII character) or its short escape. A query of plain words is thus exactly the
/// literal `(?i)` search ripgrep runs.
fn raw_pattern(text: &str, fold: bool) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let variants = if fold { case_variants(c) } else { vec![c] };
        let mut alts: Vec<String> = Vec::new();
        for &v in &variants {
            if v >= ' ' && v != '"' && v != '\\' {
                alts.push(regex_syntax::escape(v.encode_utf8(&mut [0; 4])));
            }
            if let Some(short) = short_escape(v) {
                alts.push(regex_syntax::escape(&format!("\\{short}")));
            }
            if !(v.is_ascii_alphanumeric() || v == ' ') {
                let mut units = [0u16; 2];
                let hex: String =
                    v.encode_utf16(&mut units).iter().map(|u| format!(r"\\u{}", hex_pattern(*u))).collect();
                alts.push(hex);
            }
        }
        if alts.len() == 1 {
            out.push_str(&alts[0]);
        } else {
            out.push_str("(?:");
            out.push_str(&alts.join("|"));
            out.push(')');
        }
    }
    out
}

/// `c` and the characters Unicode's simple case folding makes equal to it (`k`: `K` and the Kelvin
/// sign), as the decoded matcher's `(?i)` compares them.
fn case_variants(c: char) -> Vec<char> {
    let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
    if class.try_case_fold_simple().is_err() {
        return vec![c];
    }
    class.iter().flat_map(|r| r.start()..=r.end()).collect()
}

fn short_escape(c: char) -> Option<char> {
    Some(match c {
        '"' => '"',
        '\\' => '\\',
        '/' => '/',
        '\u{8}' => 'b',
        '\u{c}' => 'f',
        '\n' => 'n',
        '\r' => 'r',
        '\t' => 't',
        _ => return None,
    })
}

/// Four hex digits of `u`, each letter in either case.
fn hex_pattern(u: u16) -> String {
    format!("{u:04x}")
        .chars()
        .map(|d| if d.is_ascii_digit() { d.to_string() } else { format!("[{d}{}]", d.to_ascii_uppercase()) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_pattern_finds_the_short_escapes_a_json_writer_uses() {
        // serde_json (our writer) writes \b \f \n \r \t \" \\ as short escapes
        for text in ["a\u{8}b", "a\u{c}b", "a\rb", "a\nb", "a\tb", "say \"hi\"", "C:\\dir"] {
            let q = Query::new(text, Case::Smart).expect("query");
            let json = serde_json::to_string(text).expect("encode");
            assert!(q.raw.is_match(json.as_bytes()), "{text:?} written as {json}");
        }
        // and the escapes other writers use: `\/`, `\u` (Python's every non-ASCII, Go's `<>&`)
        for (text, written) in [("a/b", r"a\/b"), ("é<&>", r"\u00e9\u003C\u0026\u003e"), ("a\rb", r"a\u000Db")] {
            let q = Query::new(text, Case::Smart).expect("query");
            assert!(q.raw.is_match(written.as_bytes()), "{text:?} written as {written}");
        }
    }
}
