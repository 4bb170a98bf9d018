//! The float picker's fuzzy filter over many texts (issue 30: a keystroke over 100,000 sessions within a frame).
//!
//! The ranking is exactly that of `lua/pseudoclaude/float/matcher.lua` (`H.score`), and so are the matched positions
//! it gives for highlighting the visible rows (`Matcher::positions`): the query's characters in order (smart case: a query with an ASCII
//! capital matches case-sensitively, else both sides are ASCII-lower-cased, as Lua's `string.lower` does); the query
//! as a plain substring scores best, else the leftmost match tightened from its end backwards; word starts and runs
//! earn bonuses, gaps cost. Best first, ties by position in the list. Indices are 1-based, as Lua's.

use memchr::memmem;

const BONUS_START: i32 = 12;
const BONUS_BOUNDARY: i32 = 8;
const BONUS_CONSECUTIVE: i32 = 6;
const BONUS_SUBSTRING: i32 = 10;
const MATCH: i32 = 16;

/// Bytes after which a match starts a word (matcher.lua's `SEPARATORS`).
fn separator(b: u8) -> bool {
    matches!(b, b' ' | b'-' | b'_' | b'.' | b'/' | b':' | b',' | b'(' | b'[' | b'{' | b'\'' | b'"' | b'\t')
}

/// The texts, kept twice (as given and ASCII-lower-cased) in one buffer each, and the last result (what a
/// narrowing query searches).
#[derive(Debug, Default)]
pub struct Matcher {
    text: Vec<u8>,
    lower: Vec<u8>,
    /// End of each text in `text` (its start is the previous end).
    ends: Vec<usize>,
    last: Vec<u32>,
}

impl Matcher {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, hay: &[u8]) {
        self.text.extend_from_slice(hay);
        self.lower.extend(hay.iter().map(u8::to_ascii_lowercase));
        self.ends.push(self.text.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The 1-based indices of the texts matching `query` (not empty), best first, ties in list order. `within`:
    /// only these candidates (1-based, any order; out-of-range ones ignored); `narrow`: only the previous result's.
    pub fn filter(&mut self, query: &str, within: Option<&[u32]>, narrow: bool) -> &[u32] {
        let smart = query.bytes().any(|b| b.is_ascii_uppercase());
        let q: Vec<u8> = if smart { query.as_bytes().to_vec() } else { query.as_bytes().to_ascii_lowercase() };
        let hays = if smart { &self.text } else { &self.lower };
        let query = Query::new(&q);
        let mut keys: Vec<u64> = Vec::new();
        let mut consider = |i: u32| {
            let end = self.ends[i as usize - 1];
            let start = if i == 1 { 0 } else { self.ends[i as usize - 2] };
            if let Some(s) = query.score(&hays[start..end]) {
                // score descending, then index ascending: one integer sort (|score| is far below 2^31)
                keys.push(((i64::from(i32::MAX) - i64::from(s)) as u64) << 32 | u64::from(i));
            }
        };
        let n = self.ends.len() as u32;
        match (within, narrow) {
            (Some(c), _) => c.iter().copied().filter(|&i| i >= 1 && i <= n).for_each(&mut consider),
            (None, true) => std::mem::take(&mut self.last).into_iter().for_each(&mut consider),
            (None, false) => (1..=n).for_each(&mut consider),
        }
        keys.sort_unstable();
        self.last = keys.into_iter().map(|k| k as u32).collect();
        &self.last
    }

    /// The 0-based byte offsets, in text `i` (1-based), of the characters `query` matched there, one per character
    /// of the query (matcher.lua's `Matcher:positions`, for highlighting); `None` when it does not match (or there is
    /// no text `i`).
    pub fn positions(&self, query: &str, i: u32) -> Option<Vec<u32>> {
        let mut out = None;
        self.each_positions(query, [i], |found| out = found.map(<[u32]>::to_vec));
        out
    }

    /// `positions` of each of `indices`, packed for Lua (bridge/fuzzy.rs `fuzzy_positions`): per index, the count
    /// of offsets (0: no match), then the offsets, each a little-endian `u32`.
    pub fn positions_packed(&self, query: &str, indices: impl IntoIterator<Item = u32>, packed: &mut Vec<u8>) {
        self.each_positions(query, indices, |found| {
            let found = found.unwrap_or_default();
            packed.extend_from_slice(&(found.len() as u32).to_le_bytes());
            for p in found {
                packed.extend_from_slice(&p.to_le_bytes());
            }
        });
    }

    /// `each(positions)` of each of `indices` in turn, the query prepared once for all of them.
    fn each_positions(
        &self,
        query: &str,
        indices: impl IntoIterator<Item = u32>,
        mut each: impl FnMut(Option<&[u32]>),
    ) {
        let smart = query.bytes().any(|b| b.is_ascii_uppercase());
        let q: Vec<u8> = if smart { query.as_bytes().to_vec() } else { query.as_bytes().to_ascii_lowercase() };
        let hays = if smart { &self.text } else { &self.lower };
        let query = Query::new(&q);
        let mut found = Vec::new();
        for i in indices.into_iter().map(|i| i as usize) {
            found.clear();
            let matched = (1..=self.ends.len()).contains(&i) && {
                let start = if i == 1 { 0 } else { self.ends[i - 2] };
                query.scored(&hays[start..self.ends[i - 1]], Some(&mut found)).is_some()
            };
            each(matched.then_some(found.as_slice()));
        }
    }
}

/// A query cut into its characters (UTF-8 sequences), with finders made once for all texts.
struct Query<'q> {
    units: Vec<&'q [u8]>,
    whole_finder: memmem::Finder<'q>,
}

impl<'q> Query<'q> {
    fn new(q: &'q [u8]) -> Self {
        let mut units = Vec::new();
        let mut i = 0;
        while i < q.len() {
            let mut j = i + 1;
            while j < q.len() && (q[j] & 0xC0) == 0x80 {
                j += 1;
            }
            units.push(&q[i..j]);
            i = j;
        }
        Query { units, whole_finder: memmem::Finder::new(q) }
    }

    /// matcher.lua's `H.score` (see there for the why of each step); `None`: no match.
    fn score(&self, s: &[u8]) -> Option<i32> {
        self.scored(s, None)
    }

    /// `score`, and the 0-based offsets of the matched characters put in `out`.
    fn scored(&self, s: &[u8], mut out: Option<&mut Vec<u32>>) -> Option<i32> {
        let n = self.units.len() as i32;
        // forward: does it match at all, and where does the leftmost match end?
        let mut pos = 0; // 0-based: where the next unit is looked for
        for u in &self.units {
            let at = find(&s[pos..], u)? + pos;
            pos = at + u.len();
        }
        if let Some(a) = self.whole_finder.find(s) {
            let mut score = BONUS_SUBSTRING + MATCH * n + BONUS_CONSECUTIVE * (n - 1);
            if a == 0 {
                score += BONUS_START;
            } else if separator(s[a - 1]) {
                score += BONUS_BOUNDARY;
            }
            if let Some(out) = out {
                let mut p = a;
                for u in &self.units {
                    out.push(p as u32);
                    p += u.len();
                }
            }
            return Some(score - lead_penalty(a));
        }
        // backward from the end of the leftmost match: the latest start that still matches
        let mut score = 0;
        let mut p = pos; // exclusive end of the span still to search
        let mut next_start: Option<usize> = None;
        for u in self.units.iter().rev() {
            let len = u.len();
            let mut at = p.checked_sub(len)?;
            loop {
                if s[at] == u[0] && (len == 1 || s[at..].starts_with(u)) {
                    break;
                }
                at = at.checked_sub(1)?;
            }
            score += MATCH;
            if at == 0 {
                score += BONUS_START;
            } else if separator(s[at - 1]) {
                score += BONUS_BOUNDARY;
            }
            if let Some(next) = next_start {
                let gap = next as i64 - (at + len) as i64;
                if gap == 0 {
                    score += BONUS_CONSECUTIVE;
                } else {
                    score -= gap.min(24) as i32;
                }
            }
            if let Some(out) = out.as_deref_mut() {
                out.push(at as u32);
            }
            next_start = Some(at);
            p = at;
        }
        if let Some(out) = out {
            out.reverse();
        }
        Some(score - lead_penalty(next_start.unwrap_or(0)))
    }
}

/// The first occurrence of `u` in `s`.
fn find(s: &[u8], u: &[u8]) -> Option<usize> {
    if u.len() == 1 { memchr::memchr(u[0], s) } else { memmem::find(s, u) }
}

/// A small cost for starting late in the text (`start`: 0-based).
fn lead_penalty(start: usize) -> i32 {
    (start / 8).min(8) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(texts: &[&str]) -> Matcher {
        let mut m = Matcher::new();
        for t in texts {
            m.push(t.as_bytes());
        }
        m
    }

    #[test]
    fn best_first_then_list_order_and_narrowing_searches_the_previous_matches() {
        let mut m = matcher(&["a parser", "xpxaxrxsxe", "parse it", "nothing", "Parse", "parse it"]);
        // substring at the start beats a word start, beats a scattered match; ties keep list order
        assert_eq!(m.filter("parse", None, false), [3, 5, 6, 1, 2]);
        assert_eq!(m.filter("parse i", None, true), [3, 6]);
        // smart case: a capital matches case-sensitively
        assert_eq!(m.filter("Parse", None, false), [5]);
        assert_eq!(m.filter("zz", None, false), [] as [u32; 0]);
        assert_eq!(m.filter("it", Some(&[6, 3, 99, 0]), false), [3, 6]);
    }

    #[test]
    fn positions_are_those_of_the_lua_matcher() {
        // as lua/pseudoclaude/float/matcher.lua's Matcher:positions gives them (test_picker's matcher test)
        let m = matcher(&["a parser", "xpxaxrxsxe", "Parse", "café au lait"]);
        assert_eq!(m.positions("parse", 1), Some(vec![2, 3, 4, 5, 6]));
        assert_eq!(m.positions("pae", 2), Some(vec![1, 3, 9]));
        assert_eq!(m.positions("Pa", 3), Some(vec![0, 1]));
        assert_eq!(m.positions("Pa", 1), None);
        assert_eq!(m.positions("éa", 4), Some(vec![3, 6]));
        assert_eq!(m.positions("a", 5), None);
    }

    #[test]
    fn positions_packed_gives_each_index_its_count_then_its_offsets() {
        let m = matcher(&["a parser", "nothing", "Parse it"]);
        let mut packed = Vec::new();
        m.positions_packed("pa", [3, 2, 1, 9, 0], &mut packed);
        let words: Vec<u32> = packed.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        // 3: "Pa" at 0; 2: no match; 1: "pa" at 2; 9 and 0: no such text
        assert_eq!(words, [2, 0, 1, 0, 2, 2, 3, 0, 0]);
    }

    #[test]
    fn scores_are_those_of_the_lua_matcher() {
        // computed with lua/pseudoclaude/float/matcher.lua's H.score
        let q = Query::new(b"pae");
        assert_eq!(q.score(b"parse"), Some(16 * 3 + 12 + 6 - 2));
        let q = Query::new("é".as_bytes());
        assert_eq!(q.score("café au lait".as_bytes()), Some(10 + 16));
        assert_eq!(Query::new(b"ab").score(b"b a"), None);
    }
}
