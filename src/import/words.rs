//! Which words each of the other agents' sessions holds: the index that lets a search over them
//! ([`super::search`]) convert and search only the sessions that may hold the text (issue 46 item 6).
//!
//! A word is a run of ASCII letters and digits, lower-cased. Searching is literal and may match inside a word, so a
//! session is a candidate when every such run of the query lies inside one of its words; any run of the query that
//! a real match covers lies inside a word of the text, so no session holding the text is ever left out, whatever
//! the case or the characters around it (a non-ASCII letter ends a word; the two that fold to ASCII letters, the
//! Kelvin sign and the long s, are indexed as `k` and `s`). A query without such a run (`é`, `->`) filters nothing.
//!
//! The words are those of the history a resume restores, as the search reads it (a message's text, its tool calls'
//! names and arguments, its tool output), per session keyed by what the list keys it by (its file, or opencode's
//! `db#id`) with the stamp it was read at: a session whose stamp changed is read again, one no longer listed is
//! dropped, the others cost nothing. The index lives in memory for the process's life and in
//! `.PseudoClaude/sessions/external-words.bin` (a name no session id can have), a hint as the list's cache is: a
//! missing or damaged file is rebuilt, never believed, and written only where `.PseudoClaude/sessions/` exists.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use rustc_hash::FxHashMap;

use super::packed;
use crate::message::Message;
use crate::session::contain::{Access, Dir};

/// The index file, in `.PseudoClaude/sessions/`.
pub const FILE_NAME: &str = "external-words.bin";
const MAGIC: &[u8; 8] = b"PCWORDS\n";
/// 2: [`super::packed`]'s checksum at the end (1 had none).
const VERSION: u32 = 2;

/// What a session was indexed at: its file's size and modification time (ns), or what stands for them.
pub type Stamp = (u64, i64);

/// The words of every indexed session, by number, and which sessions hold each word.
#[derive(Debug, Default, Clone)]
pub struct Index {
    /// Every word, `\n` after each, and where each starts: one scan finds every word holding a run.
    text: Vec<u8>,
    starts: Vec<u32>,
    /// (keyed by FxHash: tens of thousands of lookups at each read of the file; SipHash was a tenth of a search)
    ids: FxHashMap<Box<str>, u32>,
    sessions: Vec<Indexed>,
    by_key: FxHashMap<String, usize>,
    /// Per word, the sessions holding it; `None` until a query needs them after a change.
    postings: Option<Vec<Vec<u32>>>,
}

#[derive(Debug, Clone)]
struct Indexed {
    key: String,
    stamp: Stamp,
    /// Sorted word numbers; empty for a session dropped (its number is reused by none: rebuilt on save).
    words: Vec<u32>,
    live: bool,
}

/// The words of `messages`, as the search reads them, handed to `f` one by one (repeats included).
pub fn each_word(messages: &[Message], f: &mut dyn FnMut(&str)) {
    let mut buf = String::new();
    for m in messages {
        words_of(&m.content, &mut buf, f);
        for c in &m.tool_calls {
            words_of(&c.name, &mut buf, f);
            // the arguments' JSON text: its keys and escapes only add words, and every value's words are in it
            words_of(&c.arguments.to_string(), &mut buf, f);
        }
        if let Some(r) = &m.tool_result {
            words_of(&r.content, &mut buf, f);
        }
    }
}

/// The words of `messages`, each once: what a session's entry is made of, computed where the history is at hand.
pub fn distinct_words(messages: &[Message]) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::new();
    each_word(messages, &mut |w| {
        if !seen.contains(w) {
            seen.insert(w.to_string());
        }
    });
    seen.into_iter().collect()
}

fn words_of(text: &str, buf: &mut String, f: &mut dyn FnMut(&str)) {
    buf.clear();
    for ch in text.chars() {
        let folded = match ch {
            'a'..='z' | '0'..='9' => Some(ch),
            'A'..='Z' => Some(ch.to_ascii_lowercase()),
            '\u{212A}' => Some('k'),
            '\u{17F}' => Some('s'),
            _ => None,
        };
        match folded {
            Some(c) => buf.push(c),
            None if !buf.is_empty() => {
                f(buf);
                buf.clear();
            }
            None => {}
        }
    }
    if !buf.is_empty() {
        f(buf);
        buf.clear();
    }
}

/// The runs of the query every candidate must hold inside a word, lower-cased; empty when none can be asked.
pub fn query_runs(query: &str) -> Vec<String> {
    let mut runs = Vec::new();
    let mut buf = String::new();
    for ch in query.chars() {
        if ch.is_ascii_alphanumeric() {
            buf.push(ch.to_ascii_lowercase());
        } else if !buf.is_empty() {
            runs.push(std::mem::take(&mut buf));
        }
    }
    if !buf.is_empty() {
        runs.push(buf);
    }
    runs.sort();
    runs.dedup();
    runs
}

impl Index {
    /// The stamp `key` was indexed at, if it is.
    pub fn stamp(&self, key: &str) -> Option<Stamp> {
        self.by_key.get(key).map(|&i| self.sessions[i].stamp)
    }

    /// Indexes (again) the session `key` with the words of `messages`.
    pub fn put(&mut self, key: &str, stamp: Stamp, messages: &[Message]) {
        self.put_words(key, stamp, &distinct_words(messages));
    }

    /// Indexes (again) the session `key` with `words` (as [`distinct_words`] gives them).
    pub fn put_words(&mut self, key: &str, stamp: Stamp, words: &[String]) {
        let mut words: Vec<u32> = words.iter().map(|w| self.word_id(w)).collect();
        words.sort_unstable();
        words.dedup();
        let entry = Indexed { key: key.to_string(), stamp, words, live: true };
        match self.by_key.get(key) {
            Some(&i) => self.sessions[i] = entry,
            None => {
                self.by_key.insert(key.to_string(), self.sessions.len());
                self.sessions.push(entry);
            }
        }
        self.postings = None;
    }

    /// Keeps only the sessions `keep` says are still listed; true when one was dropped.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) -> bool {
        let mut dropped = false;
        for s in &mut self.sessions {
            if s.live && !keep(&s.key) {
                s.live = false;
                s.words = Vec::new();
                dropped = true;
            }
        }
        if dropped {
            self.by_key.retain(|k, _| keep(k));
            self.postings = None;
        }
        dropped
    }

    fn word_id(&mut self, w: &str) -> u32 {
        if let Some(&id) = self.ids.get(w) {
            return id;
        }
        let id = self.starts.len() as u32;
        self.starts.push(self.text.len() as u32);
        self.text.extend_from_slice(w.as_bytes());
        self.text.push(b'\n');
        self.ids.insert(w.into(), id);
        id
    }

    /// The keys of the sessions that may hold `query` (every other one cannot); `None` when the query has no run the
    /// index can ask for, so every session may.
    pub fn candidates(&mut self, query: &str) -> Option<HashSet<String>> {
        let runs = query_runs(query);
        if runs.is_empty() {
            return None;
        }
        if self.postings.is_none() {
            let mut postings = vec![Vec::new(); self.starts.len()];
            for (n, s) in self.sessions.iter().enumerate().filter(|(_, s)| s.live) {
                for &w in &s.words {
                    postings[w as usize].push(n as u32);
                }
            }
            self.postings = Some(postings);
        }
        let postings = self.postings.as_ref().expect("built above");
        let mut result: Option<HashSet<u32>> = None;
        for run in &runs {
            let mut holding: HashSet<u32> = HashSet::new();
            let mut last_word = u32::MAX;
            for at in memchr::memmem::find_iter(&self.text, run.as_bytes()) {
                // the word the match starts in; a match across the `\n` after a word is none (runs hold no `\n`)
                let w = self.starts.partition_point(|&s| s as usize <= at) as u32 - 1;
                if w == last_word {
                    continue;
                }
                last_word = w;
                let holds = match &result {
                    Some(r) => postings[w as usize].iter().filter(|n| r.contains(n)).copied().collect::<Vec<_>>(),
                    None => postings[w as usize].clone(),
                };
                holding.extend(holds);
            }
            result = Some(holding);
            if result.as_ref().is_some_and(HashSet::is_empty) {
                break;
            }
        }
        let result = result.unwrap_or_default();
        Some(result.into_iter().map(|n| self.sessions[n as usize].key.clone()).collect())
    }

    /// Sessions indexed and still listed.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The index as bytes: the words still used, then each session's key, stamp and words (delta varints).
    fn encode(&self) -> Vec<u8> {
        let live: Vec<&Indexed> = self.sessions.iter().filter(|s| s.live).collect();
        let mut used: Vec<u32> = live.iter().flat_map(|s| s.words.iter().copied()).collect();
        used.sort_unstable();
        used.dedup();
        let renumber: HashMap<u32, u32> = used.iter().enumerate().map(|(i, &w)| (w, i as u32)).collect();
        let mut out = packed::Writer::new(MAGIC, VERSION);
        out.varint(used.len() as u64);
        for &w in &used {
            let start = self.starts[w as usize] as usize;
            let end = start + self.text[start..].iter().position(|&b| b == b'\n').unwrap_or(0);
            out.bytes(&self.text[start..end]);
        }
        out.varint(live.len() as u64);
        for s in live {
            out.str(&s.key);
            out.i64(s.stamp.0 as i64);
            out.i64(s.stamp.1);
            let mut ids: Vec<u32> = s.words.iter().map(|w| renumber[w]).collect();
            ids.sort_unstable();
            out.varint(ids.len() as u64);
            let mut prev = 0u32;
            for id in ids {
                out.varint(u64::from(id - prev));
                prev = id;
            }
        }
        out.finish()
    }

    /// The index `bytes` hold; `Err` for anything but a whole index of this version.
    fn decode(bytes: &[u8]) -> Result<Index, packed::Refused> {
        let mut r = packed::Reader::open(bytes, MAGIC, VERSION)?;
        Index::decode_body(&mut r).filter(|_| r.done()).ok_or(packed::Refused::Damaged)
    }

    fn decode_body(r: &mut packed::Reader) -> Option<Index> {
        let mut index = Index::default();
        let words = r.count()?;
        for _ in 0..words {
            let w = r.str()?;
            if w.is_empty() || !w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
                return None;
            }
            index.word_id(w);
        }
        if index.starts.len() != words {
            return None; // a word twice
        }
        let sessions = r.count()?;
        for _ in 0..sessions {
            let key = r.str()?.to_string();
            let (size, mtime) = (r.i64()? as u64, r.i64()?);
            let n = r.count()?;
            let mut ids = Vec::with_capacity(n);
            let mut prev = 0u64;
            for i in 0..n {
                let d = r.varint()?;
                if i > 0 && d == 0 {
                    return None;
                }
                prev += d;
                if prev >= words as u64 {
                    return None;
                }
                ids.push(prev as u32);
            }
            if index.by_key.insert(key.clone(), index.sessions.len()).is_some() {
                return None;
            }
            index.sessions.push(Indexed { key, stamp: (size, mtime), words: ids, live: true });
        }
        Some(index)
    }
}

/// Per workspace: the index, and whether the disk copy was read already.
#[derive(Default)]
struct Memory {
    index: Index,
    loaded: bool,
}

static INDEXES: LazyLock<Mutex<HashMap<PathBuf, Memory>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn indexes() -> MutexGuard<'static, HashMap<PathBuf, Memory>> {
    INDEXES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The workspace's index, taken out of memory (read from disk the first time); hand it back with [`put`].
pub fn take(ws: &Path) -> Index {
    let mut all = indexes();
    let mem = all.entry(ws.to_path_buf()).or_default();
    if !mem.loaded {
        mem.loaded = true;
        mem.index = read_file(ws).unwrap_or_default();
    }
    std::mem::take(&mut mem.index)
}

/// Puts the index back, and writes its disk copy when it `changed`.
pub fn put(ws: &Path, index: Index, changed: bool) {
    let bytes = changed.then(|| index.encode());
    indexes().entry(ws.to_path_buf()).or_default().index = index;
    if let Some(bytes) = bytes
        && let Ok(dir) = Dir::sessions(ws)
    {
        // written whole and renamed over the old one; no sync: a lost index costs a rebuild, nothing else
        let _ = dir.replace_file(FILE_NAME, &bytes);
    }
}

fn read_file(ws: &Path) -> Option<Index> {
    let dir = Dir::sessions(ws).ok()?;
    let mut data = Vec::new();
    dir.open(FILE_NAME, Access::Read).ok()?.read_to_end(&mut data).ok()?;
    Index::decode(&data)
        .map_err(|why| {
            packed::refused("the words index of the other agents' sessions", &dir.path().join(FILE_NAME), &why)
        })
        .ok()
}

/// Forgets what this process holds (the disk copy stays): for benches measuring a new process.
pub fn forget() {
    indexes().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(sessions: &[(&str, &str)]) -> Index {
        let mut i = Index::default();
        for (key, text) in sessions {
            i.put(key, (1, 1), &[Message::user(*text)]);
        }
        i
    }

    fn keys(i: &mut Index, q: &str) -> Option<Vec<String>> {
        i.candidates(q).map(|s| {
            let mut v: Vec<String> = s.into_iter().collect();
            v.sort();
            v
        })
    }

    #[test]
    fn a_session_is_a_candidate_when_every_run_of_the_query_lies_inside_one_of_its_words() {
        let mut i = index_of(&[("a", "Retry the PLUMTREE budget"), ("b", "plum tree"), ("c", "café → résumé")]);
        assert_eq!(keys(&mut i, "plumtree"), Some(vec!["a".into()]));
        assert_eq!(keys(&mut i, "UMTR"), Some(vec!["a".into()]), "inside a word, any case");
        assert_eq!(keys(&mut i, "plum tree"), Some(vec!["a".into(), "b".into()]), "each run in a word of its own");
        assert_eq!(keys(&mut i, "caf"), Some(vec!["c".into()]));
        assert_eq!(keys(&mut i, "sumé"), Some(vec!["c".into()]), "a non-ASCII letter ends a run");
        assert_eq!(keys(&mut i, "→"), None, "nothing to ask: every session may hold it");
        assert_eq!(keys(&mut i, "nowhere"), Some(vec![]));
    }

    #[test]
    fn the_two_letters_that_fold_to_ascii_are_indexed_as_their_fold() {
        let mut i = index_of(&[("kelvin", "300 \u{212A}elvin"), ("long-s", "Cla\u{17F}\u{17F}")]);
        assert_eq!(keys(&mut i, "kelvin"), Some(vec!["kelvin".into()]));
        assert_eq!(keys(&mut i, "class"), Some(vec!["long-s".into()]));
    }

    #[test]
    fn a_tool_calls_arguments_and_output_are_indexed() {
        let mut call = Message::assistant("");
        call.tool_calls.push(crate::message::ToolCall {
            id: "t1".into(),
            name: "Write".into(),
            arguments: serde_json::json!({"content": "line\nFIGTREE"}),
        });
        let mut i = Index::default();
        i.put("s", (1, 1), &[call]);
        assert_eq!(keys(&mut i, "figtree"), Some(vec!["s".into()]));
        assert_eq!(keys(&mut i, "write"), Some(vec!["s".into()]));
    }

    #[test]
    fn a_session_indexed_again_or_dropped_leaves_none_of_its_old_words() {
        let mut i = index_of(&[("a", "alpha"), ("b", "bravo")]);
        i.put("a", (2, 2), &[Message::user("charlie")]);
        assert_eq!(keys(&mut i, "alpha"), Some(vec![]));
        assert_eq!(keys(&mut i, "charlie"), Some(vec!["a".into()]));
        assert!(i.retain(|k| k != "b"));
        assert_eq!(keys(&mut i, "bravo"), Some(vec![]));
        assert_eq!(i.stamp("a"), Some((2, 2)));
        assert_eq!(i.stamp("b"), None);
    }

    #[test]
    fn the_index_round_trips_through_its_bytes_and_anything_else_is_not_believed() {
        let mut i = index_of(&[("a", "alpha bravo"), ("b", "bravo charlie"), ("gone", "delta")]);
        i.retain(|k| k != "gone");
        let bytes = i.encode();
        let mut back = Index::decode(&bytes).expect("decodes");
        assert_eq!(keys(&mut back, "bravo"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(keys(&mut back, "delta"), Some(vec![]), "a dropped session's words are not written");
        assert_eq!(back.len(), 2);
        for cut in [0, 8, 12, bytes.len() - 1] {
            assert!(Index::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut garbled = bytes.clone();
        garbled[9] ^= 0xff;
        assert!(matches!(Index::decode(&garbled), Err(packed::Refused::Version(_))), "another version");
    }
}
