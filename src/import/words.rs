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
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use rustc_hash::FxHashMap;

use super::packed;
use crate::message::Message;
use crate::session::contain::{Access, Dir};

/// The index file, in `.PseudoClaude/sessions/`.
pub const FILE_NAME: &str = "external-words.bin";
const MAGIC: &[u8; 8] = b"PCWORDS\n";
/// 2: [`super::packed`]'s checksum at the end (1 had none). 3: the sessions holding each word (postings) and a
/// table of the sessions by key, so a search reads the file in place ([`Packed`]) instead of decoding all of it;
/// the checksum in four lanes.
const VERSION: u32 = 3;

/// What a session was indexed at: its file's size and modification time (ns), or what stands for them.
pub type Stamp = (u64, i64);

/// The words of every indexed session: as the file holds them, answering in place until something changes, then
/// in the form changes are made in.
#[derive(Debug, Clone)]
pub struct Index {
    form: Form,
}

#[derive(Debug, Clone)]
enum Form {
    Packed(Packed),
    Open(Open),
}

impl Default for Index {
    fn default() -> Index {
        Index { form: Form::Open(Open::default()) }
    }
}

/// The index being changed: the words by number, and which words each session holds.
#[derive(Debug, Default, Clone)]
struct Open {
    /// Every word, `\n` after each, and where each starts: one scan finds every word holding a run.
    text: Vec<u8>,
    starts: Vec<u32>,
    /// (keyed by FxHash: tens of thousands of lookups; SipHash was a tenth of a search)
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
        match &self.form {
            Form::Packed(p) => p.find(key).map(|n| p.stamp(n)),
            Form::Open(o) => o.by_key.get(key).map(|&i| o.sessions[i].stamp),
        }
    }

    /// Indexes (again) the session `key` with the words of `messages`.
    pub fn put(&mut self, key: &str, stamp: Stamp, messages: &[Message]) {
        self.put_words(key, stamp, &distinct_words(messages));
    }

    /// Indexes (again) the session `key` with `words` (as [`distinct_words`] gives them).
    pub fn put_words(&mut self, key: &str, stamp: Stamp, words: &[String]) {
        self.open().put_words(key, stamp, words);
    }

    /// Keeps only the sessions `keep` says are still listed; true when one was dropped.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) -> bool {
        if let Form::Packed(p) = &self.form
            && (0..p.sessions).all(|n| keep(p.key(n)))
        {
            return false;
        }
        self.open().retain(keep)
    }

    /// The keys of the sessions that may hold `query` (every other one cannot); `None` when the query has no run the
    /// index can ask for, so every session may.
    pub fn candidates(&mut self, query: &str) -> Option<HashSet<String>> {
        let runs = query_runs(query);
        if runs.is_empty() {
            return None;
        }
        match &mut self.form {
            // postings that do not decode (a file this code did not write): every session may hold it
            Form::Packed(p) => {
                let held = p.holding(&runs)?;
                Some(held.into_iter().map(|n| p.key(n as usize).to_string()).collect())
            }
            Form::Open(o) => Some(o.candidates(&runs)),
        }
    }

    /// Sessions indexed and still listed.
    pub fn len(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.sessions,
            Form::Open(o) => o.by_key.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index in the form changes are made in (the file's form unpacked the first time).
    fn open(&mut self) -> &mut Open {
        if let Form::Packed(p) = &self.form {
            self.form = Form::Open(p.unpack());
        }
        match &mut self.form {
            Form::Open(o) => o,
            Form::Packed(_) => unreachable!("unpacked above"),
        }
    }

    fn encode(&self) -> Vec<u8> {
        match &self.form {
            Form::Packed(p) => p.file.to_vec(),
            Form::Open(o) => o.encode(),
        }
    }

    /// The index the file `bytes` holds; `Err` for anything but a whole index of this version.
    fn decode(bytes: impl Into<packed::Bytes>) -> Result<Index, packed::Refused> {
        Packed::read(bytes.into()).map(|p| Index { form: Form::Packed(p) })
    }
}

/// The sessions holding, for each run, a word with the run inside: the index's one query, in either form.
/// `start(w)` is where word `w` starts in `text` (each word followed by `\n`, the first at 0), `holders(w)` the
/// sessions holding it (`None`: the index cannot say).
fn sessions_holding(
    runs: &[String],
    text: &[u8],
    words: usize,
    start: impl Fn(usize) -> usize,
    holders: impl Fn(usize) -> Option<Vec<u32>>,
) -> Option<HashSet<u32>> {
    let mut result: Option<HashSet<u32>> = None;
    for run in runs {
        let mut holding: HashSet<u32> = HashSet::new();
        let mut last_word = usize::MAX;
        for at in memchr::memmem::find_iter(text, run.as_bytes()) {
            // the word the match starts in (the last starting at or before it); a match across the `\n` after a word
            // is none (runs hold no `\n`)
            let (mut lo, mut hi) = (0, words);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if start(mid) <= at { lo = mid + 1 } else { hi = mid }
            }
            let w = lo.checked_sub(1)?;
            if w == last_word {
                continue;
            }
            last_word = w;
            let held = holders(w)?;
            holding.extend(held.into_iter().filter(|n| result.as_ref().is_none_or(|r| r.contains(n))));
        }
        let none = holding.is_empty();
        result = Some(holding);
        if none {
            break;
        }
    }
    result
}

impl Open {
    fn put_words(&mut self, key: &str, stamp: Stamp, words: &[String]) {
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

    fn retain(&mut self, keep: impl Fn(&str) -> bool) -> bool {
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

    fn candidates(&mut self, runs: &[String]) -> HashSet<String> {
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
        let held = sessions_holding(
            runs,
            &self.text,
            self.starts.len(),
            |w| self.starts[w] as usize,
            |w| Some(postings[w].clone()),
        );
        held.unwrap_or_default().into_iter().map(|n| self.sessions[n as usize].key.clone()).collect()
    }

    /// The index as the file's bytes ([`Packed`] reads them): the words still used, the sessions holding each
    /// (delta varints), then each session's key and stamp, and the table finding a session by its key.
    fn encode(&self) -> Vec<u8> {
        let live: Vec<&Indexed> = self.sessions.iter().filter(|s| s.live).collect();
        let mut used: Vec<u32> = live.iter().flat_map(|s| s.words.iter().copied()).collect();
        used.sort_unstable();
        used.dedup();
        let renumber: HashMap<u32, u32> = used.iter().enumerate().map(|(i, &w)| (w, i as u32)).collect();
        let mut postings: Vec<Vec<u32>> = vec![Vec::new(); used.len()];
        for (n, s) in live.iter().enumerate() {
            for w in &s.words {
                postings[renumber[w] as usize].push(n as u32);
            }
        }
        let (mut text, mut starts) = (Vec::new(), Vec::new());
        for &w in &used {
            let start = self.starts[w as usize] as usize;
            let end = start + self.text[start..].iter().position(|&b| b == b'\n').unwrap_or(0);
            starts.extend_from_slice(&(text.len() as u32).to_le_bytes());
            text.extend_from_slice(&self.text[start..=end]);
        }
        let (mut post, mut post_at) = (Vec::new(), Vec::new());
        for holders in &postings {
            post_at.extend_from_slice(&(post.len() as u32).to_le_bytes());
            let mut prev = 0;
            for &n in holders {
                packed::push_varint(&mut post, u64::from(n - prev));
                prev = n;
            }
        }
        post_at.extend_from_slice(&(post.len() as u32).to_le_bytes());
        let (mut table, mut keys) = (Vec::with_capacity(live.len() * ROW), Vec::new());
        let mut slots = vec![0u32; (2 * live.len()).next_power_of_two()];
        let mask = slots.len() - 1;
        for (n, s) in live.iter().enumerate() {
            table.extend_from_slice(&(keys.len() as u32).to_le_bytes());
            table.extend_from_slice(&(s.key.len() as u32).to_le_bytes());
            table.extend_from_slice(&(s.stamp.0 as i64).to_le_bytes());
            table.extend_from_slice(&s.stamp.1.to_le_bytes());
            keys.extend_from_slice(s.key.as_bytes());
            let mut slot = key_hash(&s.key) as usize & mask;
            while slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            slots[slot] = n as u32 + 1;
        }
        let slots: Vec<u8> = slots.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = packed::Writer::new(MAGIC, VERSION);
        out.varint(used.len() as u64);
        for section in [&text, &starts, &post_at, &post] {
            out.bytes(section);
        }
        out.varint(live.len() as u64);
        for section in [&table, &keys, &slots] {
            out.bytes(section);
        }
        out.finish()
    }
}

/// Bytes per session in [`Packed`]'s table: its key's start and length in the keys, its stamp's size and time.
const ROW: usize = 24;

/// Where a key's search for its slot starts (a hash of our own: the file's table must not depend on a crate's),
/// 8 bytes a step.
fn key_hash(key: &str) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut words = key.as_bytes().chunks_exact(8);
    let mut h = (key.len() as u64).wrapping_mul(K);
    for c in &mut words {
        h = (h ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(K).rotate_left(29);
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(K);
    h ^ (h >> 29)
}

/// The index file as read, answering in place: a search reads the words that hold its runs, the sessions it asks
/// about, and nothing of the other sessions' words (decoding all 10,000 sessions' words was most of a search that
/// found nothing).
#[derive(Debug, Clone)]
struct Packed {
    file: packed::Bytes,
    words: usize,
    /// Every word, `\n` after each; where each starts (a u32 each).
    text: Range<usize>,
    starts: Range<usize>,
    /// Where each word's postings start in `post`, and where the last ends (u32s); the postings: the numbers of the
    /// sessions holding the word, ascending, as delta varints.
    post_at: Range<usize>,
    post: Range<usize>,
    sessions: usize,
    /// [`ROW`] bytes per session; the keys, one after the other; the slots (u32s, a power of two of them, more than
    /// the sessions): 1 + the number of the session whose key's hash leads there (or to a slot before it), 0 none.
    table: Range<usize>,
    keys: Range<usize>,
    slots: Range<usize>,
}

impl Packed {
    fn read(file: packed::Bytes) -> Result<Packed, packed::Refused> {
        let sections = {
            let mut r = packed::Reader::open(&file, MAGIC, VERSION)?;
            Packed::sections(&mut r).filter(|_| r.done())
        };
        let mut p = sections.ok_or(packed::Refused::Damaged)?;
        p.file = file;
        if p.valid() { Ok(p) } else { Err(packed::Refused::Damaged) }
    }

    fn sections(r: &mut packed::Reader) -> Option<Packed> {
        fn section(r: &mut packed::Reader) -> Option<Range<usize>> {
            let len = r.bytes()?.len();
            Some(r.at() - len..r.at())
        }
        let words = r.count()?;
        let (text, starts, post_at, post) = (section(r)?, section(r)?, section(r)?, section(r)?);
        let sessions = r.count()?;
        let (table, keys, slots) = (section(r)?, section(r)?, section(r)?);
        Some(Packed { file: Vec::new().into(), words, text, starts, post_at, post, sessions, table, keys, slots })
    }

    /// Whether the sections hold together (the checksum found no change: this finds a file written otherwise), at
    /// a cost in the words and sessions, not in the postings (a posting that does not decode is found when read).
    fn valid(&self) -> bool {
        let text = &self.file[self.text.clone()];
        let slots = self.slots.len() / 4;
        let sizes = self.starts.len() == 4 * self.words
            && self.post_at.len() == 4 * (self.words + 1)
            && self.table.len() == ROW * self.sessions
            && self.slots.len().is_multiple_of(4)
            && slots.is_power_of_two()
            && slots > self.sessions;
        if !sizes
            || !text.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'\n')
            || memchr::memchr_iter(b'\n', text).count() != self.words
            || text.last().is_some_and(|&b| b != b'\n')
        {
            return false;
        }
        // each word starts after the `\n` ending the one before, and is not empty
        let words_hold = (0..self.words).all(|w| {
            let (s, next) = (self.start(w), if w + 1 < self.words { self.start(w + 1) } else { text.len() });
            s + 1 < next && (w == 0 && s == 0 || w > 0 && text[s - 1] == b'\n')
        });
        let postings_hold = (0..self.words).all(|w| self.post_at(w) <= self.post_at(w + 1))
            && self.post_at(0) == 0
            && self.post_at(self.words) == self.post.len();
        let keys_hold = (0..self.sessions).all(|n| {
            let (at, len) = (self.u32_in(&self.table, n * ROW / 4), self.u32_in(&self.table, n * ROW / 4 + 1));
            at.checked_add(len).is_some_and(|end| end <= self.keys.len())
                && std::str::from_utf8(&self.file[self.keys.start + at..self.keys.start + at + len]).is_ok()
        });
        // a slot empty at least (more slots than sessions, one taken by each): every probe ends
        let taken = (0..slots)
            .map(|s| self.u32_in(&self.slots, s))
            .try_fold(0, |taken, n| (n <= self.sessions).then_some(taken + usize::from(n > 0)));
        let slots_hold = taken.is_some_and(|t| t <= self.sessions);
        words_hold && postings_hold && keys_hold && slots_hold
    }

    /// The `i`th u32 of `section`.
    fn u32_in(&self, section: &Range<usize>, i: usize) -> usize {
        let at = section.start + 4 * i;
        u32::from_le_bytes(self.file[at..at + 4].try_into().expect("4 bytes")) as usize
    }

    fn start(&self, w: usize) -> usize {
        self.u32_in(&self.starts, w)
    }

    fn post_at(&self, w: usize) -> usize {
        self.u32_in(&self.post_at, w)
    }

    fn word(&self, w: usize) -> &str {
        let text = &self.file[self.text.clone()];
        let s = self.start(w);
        let end = s + text[s..].iter().position(|&b| b == b'\n').unwrap_or(0);
        std::str::from_utf8(&text[s..end]).unwrap_or_default()
    }

    fn key(&self, n: usize) -> &str {
        std::str::from_utf8(self.key_bytes(n)).unwrap_or_default()
    }

    fn key_bytes(&self, n: usize) -> &[u8] {
        let (at, len) = (self.u32_in(&self.table, n * ROW / 4), self.u32_in(&self.table, n * ROW / 4 + 1));
        &self.file[self.keys.start + at..self.keys.start + at + len]
    }

    fn stamp(&self, n: usize) -> Stamp {
        let at = self.table.start + n * ROW + 8;
        let i64_at = |at: usize| i64::from_le_bytes(self.file[at..at + 8].try_into().expect("8 bytes"));
        (i64_at(at) as u64, i64_at(at + 8))
    }

    /// The number of the session `key` names.
    fn find(&self, key: &str) -> Option<usize> {
        let slots = self.slots.len() / 4;
        let mut slot = key_hash(key) as usize & (slots - 1);
        // a slot is empty at least: the probe ends
        loop {
            let n = self.u32_in(&self.slots, slot).checked_sub(1)?;
            if self.key_bytes(n) == key.as_bytes() {
                return Some(n);
            }
            slot = (slot + 1) & (slots - 1);
        }
    }

    /// The sessions holding word `w`; `None` for postings this code did not write.
    fn holders(&self, w: usize) -> Option<Vec<u32>> {
        let post = &self.file[self.post.start + self.post_at(w)..self.post.start + self.post_at(w + 1)];
        let (mut at, mut prev, mut out) = (0, 0u64, Vec::new());
        while at < post.len() {
            let d = packed::read_varint(post, &mut at)?;
            if !out.is_empty() && d == 0 {
                return None;
            }
            prev = prev.checked_add(d).filter(|&n| n < self.sessions as u64)?;
            out.push(prev as u32);
        }
        Some(out)
    }

    fn holding(&self, runs: &[String]) -> Option<HashSet<u32>> {
        let text = &self.file[self.text.clone()];
        sessions_holding(runs, text, self.words, |w| self.start(w), |w| self.holders(w))
    }

    /// The index in the form changes are made in; what does not decode is left out (indexed again when searched).
    fn unpack(&self) -> Open {
        let mut o = Open::default();
        let ids: Vec<u32> = (0..self.words).map(|w| o.word_id(self.word(w))).collect();
        for n in 0..self.sessions {
            let key = self.key(n).to_string();
            // a key twice (a file written otherwise): the first stands
            let live = !o.by_key.contains_key(&key);
            if live {
                o.by_key.insert(key.clone(), n);
            }
            o.sessions.push(Indexed { key, stamp: self.stamp(n), words: Vec::new(), live });
        }
        for (w, &id) in ids.iter().enumerate() {
            let Some(holders) = self.holders(w) else { return Open::default() };
            for n in holders {
                o.sessions[n as usize].words.push(id);
            }
        }
        for s in &mut o.sessions {
            s.words.sort_unstable();
            s.words.dedup();
            if !s.live {
                s.words = Vec::new();
            }
        }
        o
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
    let data = packed::Bytes::map(&dir.open(FILE_NAME, Access::Read).ok()?)?;
    Index::decode(data)
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
        let mut back = Index::decode(bytes.clone()).expect("decodes");
        assert!(matches!(back.form, Form::Packed(_)), "answered in place");
        assert_eq!(keys(&mut back, "bravo"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(keys(&mut back, "delta"), Some(vec![]), "a dropped session's words are not written");
        assert_eq!(back.len(), 2);
        for cut in [0, 8, 12, bytes.len() - 1] {
            assert!(Index::decode(bytes[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        let mut garbled = bytes.clone();
        garbled[9] ^= 0xff;
        assert!(matches!(Index::decode(garbled), Err(packed::Refused::Version(_))), "another version");
    }

    /// Sessions of made-up words, some shared, some not: what both forms are checked on.
    fn many(n: usize) -> Index {
        let mut i = Index::default();
        for s in 0..n {
            let text: Vec<String> =
                (0..(s % 7 + 1)).map(|k| format!("w{} common x{}y", (s * 31 + k * 17) % 97, s % 5)).collect();
            i.put(&format!("claude:{s:04}"), (s as u64, -(s as i64)), &[Message::user(text.join(" "))]);
        }
        i
    }

    #[test]
    fn the_file_answered_in_place_answers_as_the_index_it_was_written_from() {
        let mut open = many(300);
        let mut packed = Index::decode(open.encode()).expect("decodes");
        for q in ["w1", "w12", "common", "x3y", "w5 x2", "3y", "nothing", "W96 COMMON", "x"] {
            assert_eq!(keys(&mut packed, q), keys(&mut open, q), "{q}");
        }
        for s in [0, 1, 150, 299] {
            let k = format!("claude:{s:04}");
            assert_eq!(packed.stamp(&k), Some((s as u64, -(s as i64))));
        }
        assert_eq!(packed.stamp("claude:0300"), None);
        assert_eq!(packed.len(), 300);
        // kept as it is while nothing is dropped; unpacked (and answering the same) once something is
        assert!(!packed.retain(|_| true));
        assert!(matches!(packed.form, Form::Packed(_)));
        assert!(packed.retain(|k| k != "claude:0007"));
        assert!(open.retain(|k| k != "claude:0007"));
        assert!(matches!(packed.form, Form::Open(_)));
        for q in ["w1", "common", "x2y"] {
            assert_eq!(keys(&mut packed, q), keys(&mut open, q), "{q} after a drop");
        }
        packed.put("claude:0400", (4, 4), &[Message::user("zulu")]);
        assert_eq!(keys(&mut packed, "zulu"), Some(vec!["claude:0400".into()]));
        assert_eq!(packed.stamp("claude:0001"), Some((1, -1)));
        assert_eq!(Index::decode(packed.encode()).expect("decodes again").len(), 300);
    }

    #[test]
    fn a_file_whose_sections_do_not_hold_together_is_not_believed_even_with_its_checksum_right() {
        let bytes = many(20).encode();
        let p = Packed::read(bytes.clone().into()).expect("reads");
        let body = bytes.len() - 8;
        // each byte of the words, the word starts, the tables and the slots changed in turn, the checksum made
        // right again: refused, or (a posting or a stamp changed) read without a panic
        for at in 12..body {
            let mut changed = bytes[..body].to_vec();
            changed[at] ^= 0x41;
            let mut w = packed::Writer::new(MAGIC, VERSION);
            w.raw(&changed[12..]);
            let file = w.finish();
            if let Ok(mut i) = Index::decode(file) {
                let _ = (i.candidates("w1 common"), i.stamp("claude:0003"), i.len());
                let _ = i.open();
            }
        }
        assert_eq!(p.sessions, 20);
    }
}
