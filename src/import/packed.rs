//! The compact binary form of the import's two caches in `.PseudoClaude/sessions/` (the list's summaries,
//! [`super::list`], and the words index, [`super::words`]): a magic, a version, the body, and a checksum of all
//! that, so a run reads 10,000 sessions' worth in a few milliseconds instead of parsing megabytes of JSON.
//!
//! A cache is only a hint: a file this code cannot read whole (another program's, another version's, cut short,
//! a byte changed) is never believed, and what is wrong goes to [`notes`] for the CLI to say once.

use std::sync::{Arc, Mutex, PoisonError};

/// Why a file was not believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not a file of this kind (its first bytes are not the magic).
    Foreign,
    /// Of this kind, another version (an older or a newer plugin wrote it).
    Version(u32),
    /// Cut short, a byte changed, or a body this code does not understand.
    Damaged,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Foreign => f.write_str("not a file this plugin wrote"),
            Refused::Version(v) => write!(f, "written by another version (format {v})"),
            Refused::Damaged => f.write_str("damaged (cut short or changed)"),
        }
    }
}

const SUM_BYTES: usize = 8;

/// A fast 64-bit checksum (not cryptographic: it finds a file cut short or a byte changed, not an attacker): four
/// lanes of 8 bytes each, independent, so the processor runs them side by side (one lane was a tenth of a search).
/// Each step of a lane is a bijection of its state, so a changed block changes the lane and the result.
fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let step = |h: u64, v: u64| (h ^ v).wrapping_mul(K).rotate_left(29);
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    let seed = (bytes.len() as u64).wrapping_mul(K);
    let mut lanes = [seed, seed ^ 1, seed ^ 2, seed ^ 3];
    let mut blocks = bytes.chunks_exact(32);
    for b in &mut blocks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = step(*lane, word(&b[8 * i..8 * i + 8]));
        }
    }
    let mut words = blocks.remainder().chunks_exact(8);
    let mut h = lanes.iter().enumerate().fold(0u64, |h, (i, &l)| h ^ l.rotate_left(16 * i as u32));
    for c in &mut words {
        h = step(h, word(c));
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    h = step(h, u64::from_le_bytes(last));
    h ^ (h >> 32)
}

/// Builds a file: [`Writer::new`], the body, [`Writer::finish`].
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    pub fn new(magic: &[u8; 8], version: u32) -> Writer {
        let mut out = Vec::with_capacity(1 << 16);
        out.extend_from_slice(magic);
        out.extend_from_slice(&version.to_le_bytes());
        Writer { out }
    }

    /// A part of a file to be written whole in it ([`Writer::bytes`]), read with [`Reader::nested`].
    pub fn nested() -> Writer {
        Writer { out: Vec::new() }
    }

    /// A [`Writer::nested`]'s bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    pub fn varint(&mut self, v: u64) {
        push_varint(&mut self.out, v);
    }

    pub fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.out.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// `None` and `Some("")` differ: a flag byte first.
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
        }
    }

    /// Bytes as they are (a test writing a body of its own).
    #[cfg(test)]
    pub fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    /// The file's bytes, its checksum appended.
    pub fn finish(mut self) -> Vec<u8> {
        let sum = checksum(&self.out);
        self.out.extend_from_slice(&sum.to_le_bytes());
        self.out
    }
}

/// `v` as a varint (7 bits a byte, the last without the high bit), at the end of `out`.
pub fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at `*at` in `bytes`, `*at` moved past it; `None` past the end or for one longer than 64 bits.
pub fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Reads a file [`Writer`] made; every read is `None` past the end or on a malformed value.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// The body of `file`, once its magic, version and checksum are right.
    pub fn open(file: &'a [u8], magic: &[u8; 8], version: u32) -> Result<Reader<'a>, Refused> {
        if file.get(..8) != Some(magic.as_slice()) {
            return Err(Refused::Foreign);
        }
        let found = file.get(8..12).map(|v| u32::from_le_bytes(v.try_into().expect("4 bytes")));
        match found {
            Some(v) if v == version => {}
            Some(v) => return Err(Refused::Version(v)),
            None => return Err(Refused::Damaged),
        }
        if file.len() < 12 + SUM_BYTES {
            return Err(Refused::Damaged);
        }
        let (body, sum) = file.split_at(file.len() - SUM_BYTES);
        if checksum(body).to_le_bytes() != sum {
            return Err(Refused::Damaged);
        }
        Ok(Reader { bytes: body, at: 12 })
    }

    /// A part [`Writer::nested`] made, read from its first byte.
    pub fn nested(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    pub fn varint(&mut self) -> Option<u64> {
        read_varint(self.bytes, &mut self.at)
    }

    /// Where the next read starts, from the file's first byte.
    pub fn at(&self) -> usize {
        self.at
    }

    /// A count of things each at least one byte long: never more than the bytes left (a damaged count would
    /// otherwise reserve gigabytes).
    pub fn count(&mut self) -> Option<usize> {
        let n = usize::try_from(self.varint()?).ok()?;
        (n <= self.bytes.len() - self.at).then_some(n)
    }

    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }

    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n)
    }

    pub fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    pub fn opt_str(&mut self) -> Option<Option<&'a str>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(self.str()?)),
            _ => None,
        }
    }

    /// Whether the body was read to its last byte (a whole file, nothing left over).
    pub fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// A cache file's bytes, mapped rather than copied (reading the two caches, 5 MB at 10,000 sessions, was a fifth of
/// a CLI search that found nothing), or held (a file written in this process). Cheap to clone.
#[derive(Clone)]
pub struct Bytes(Arc<Held>);

enum Held {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    /// The bytes of `file`, open for reading; `None` when it cannot be mapped (the caller rebuilds the cache).
    pub fn map(file: &std::fs::File) -> Option<Bytes> {
        // SAFETY: a mapping is undefined behaviour if the file changes under it. The caches are never written in
        // place: a new file is renamed over the old one (`Dir::replace_file`), which leaves the mapped inode as it
        // was; only a hand truncating the file in place while it is read could change it.
        let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
        Some(Bytes(Arc::new(Held::Mapped(map))))
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes(Arc::new(Held::Owned(v)))
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &*self.0 {
            Held::Mapped(m) => m,
            Held::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len())
    }
}

static NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Says (once, through [`notes`]) that a cache file was not believed and is being rebuilt.
pub fn refused(what: &str, path: &std::path::Path, why: &Refused) {
    let mut notes = NOTES.lock().unwrap_or_else(PoisonError::into_inner);
    // a workspace's cache is read once per process: this bounds the list all the same
    if notes.len() < 32 {
        notes.push(format!("{what} {} was {why}: not used, rebuilt", path.display()));
    }
}

/// What [`refused`] noted since the last call.
pub fn notes() -> Vec<String> {
    std::mem::take(&mut *NOTES.lock().unwrap_or_else(PoisonError::into_inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAGIC: &[u8; 8] = b"PCTEST1\n";

    #[test]
    fn a_file_reads_back_and_any_change_or_cut_is_refused() {
        let mut w = Writer::new(MAGIC, 3);
        w.str("héllo");
        w.opt_str(None);
        w.opt_str(Some(""));
        w.varint(300);
        w.i64(-5);
        let file = w.finish();
        let mut r = Reader::open(&file, MAGIC, 3).expect("opens");
        assert_eq!(r.str(), Some("héllo"));
        assert_eq!(r.opt_str(), Some(None));
        assert_eq!(r.opt_str(), Some(Some("")));
        assert_eq!((r.varint(), r.i64()), (Some(300), Some(-5)));
        assert!(r.done());
        assert_eq!(Reader::open(&file, MAGIC, 4).err(), Some(Refused::Version(3)));
        assert_eq!(Reader::open(&file, b"PCOTHER\n", 3).err(), Some(Refused::Foreign));
        assert_eq!(Reader::open(b"{\"version\":3}", MAGIC, 3).err(), Some(Refused::Foreign));
        for cut in [9, 12, 15, file.len() - 1] {
            assert!(Reader::open(&file[..cut], MAGIC, 3).is_err(), "cut at {cut}");
        }
        for at in 12..file.len() {
            let mut changed = file.clone();
            changed[at] ^= 0x20;
            assert_eq!(Reader::open(&changed, MAGIC, 3).err(), Some(Refused::Damaged), "byte {at} changed");
        }
    }
}
