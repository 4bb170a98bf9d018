//! The session list packed for Lua: one string of fixed-size binary records and the texts they point to, read by
//! `lua/pseudoclaude/session_rows.lua` through LuaJIT's FFI (issue 39).
//!
//! Why not JSON: `vim.json.decode` builds a table per object field by field (10,000 sessions: 27 ms), and
//! nvim-oxi's conversion is slower still (190 ms). From fixed records Lua builds each row with one table
//! constructor whose keys are constants (LuaJIT copies a template), reading numbers straight out of the string:
//! what is left is the rows themselves. The picker does not even build them: it reads a row when it draws it.
//!
//! Layout (native byte order; every producer and reader is this machine):
//!
//! ```text
//! header   "PCL1", u32 count, u32 record size (192), u32 0
//! records  count x { f64 x 14 (NUMBERS, in that order; cost NaN = none), u32 flags, u32 0,
//!                    (u32 offset, u32 length) x 9 (STRINGS, in that order; offset u32::MAX = none) }
//! texts    the strings, offsets counted from the first byte after the records
//! ```
//!
//! A row of another tool's session ([`ListItem::External`], flag [`EXTERNAL`]) is rare and shaped otherwise: its
//! `id` string holds the item as JSON (`bridge::bulk`'s form), which Lua decodes as it would the whole list.

use super::{BridgeError, BridgeResult};
use crate::import::list::ListItem;
use crate::session::SessionInfo;

pub const MAGIC: &[u8; 4] = b"PCL1";
pub const HEADER: usize = 16;
/// 14 numbers, flags and padding, 9 strings.
pub const RECORD: usize = 14 * 8 + 8 + 9 * 8;

/// The numeric fields of a record, in order (`usage`'s four are its fields; `forked_index` is `forked_from.index`).
pub const NUMBERS: [&str; 14] = [
    "messages",
    "entries",
    "bytes",
    "modified",
    "last_message",
    "bad_lines",
    "repaired",
    "torn_tail_bytes",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
    "forked_index",
];
/// The string fields of a record, in order (`forked_id` is `forked_from.id`; `agent`: the ACP agent's name, none for
/// ours).
pub const STRINGS: [&str; 9] =
    ["id", "title", "model", "held_by", "branch", "commit", "forked_id", "workspace", "agent"];

pub const PARTIAL: u32 = 1;
pub const DAMAGED: u32 = 2;
pub const PINNED: u32 = 4;
pub const EXTERNAL: u32 = 8;

const NONE: u32 = u32::MAX;

/// `items` packed as the module docs say.
pub fn pack(items: &[ListItem]) -> BridgeResult<Vec<u8>> {
    pack_items(
        items.len(),
        items.iter().map(|i| match i {
            ListItem::Ours(info) => Item::Ours(info),
            ListItem::External(ext) => Item::External(ext.as_ref()),
        }),
    )
}

/// Sessions of ours packed, without making them list items first (the kept full list, `bridge::full_list`).
pub fn pack_infos(infos: &[SessionInfo]) -> BridgeResult<Vec<u8>> {
    pack_items(infos.len(), infos.iter().map(Item::Ours))
}

enum Item<'a> {
    Ours(&'a SessionInfo),
    External(&'a crate::import::ExternalItem),
}

fn pack_items<'a>(n: usize, items: impl Iterator<Item = Item<'a>>) -> BridgeResult<Vec<u8>> {
    let mut records = Vec::with_capacity(HEADER + n * RECORD);
    records.extend_from_slice(MAGIC);
    records.extend_from_slice(&u32::try_from(n).map_err(too_big)?.to_ne_bytes());
    records.extend_from_slice(&(RECORD as u32).to_ne_bytes());
    records.extend_from_slice(&0u32.to_ne_bytes());
    let mut texts: Vec<u8> = Vec::with_capacity(n * 64);
    for item in items {
        match item {
            Item::Ours(info) => record(&mut records, &mut texts, info)?,
            Item::External(ext) => {
                let json = super::bulk(&super::lua_value(ext)?)?;
                for _ in 0..14 {
                    records.extend_from_slice(&0f64.to_ne_bytes());
                }
                records.extend_from_slice(&EXTERNAL.to_ne_bytes());
                records.extend_from_slice(&0u32.to_ne_bytes());
                text(&mut records, &mut texts, Some(&json))?;
                for _ in 1..STRINGS.len() {
                    text(&mut records, &mut texts, None)?;
                }
            }
        }
    }
    records.extend_from_slice(&texts);
    Ok(records)
}

fn record(out: &mut Vec<u8>, texts: &mut Vec<u8>, i: &SessionInfo) -> BridgeResult<()> {
    let u = &i.usage;
    let numbers = [
        i.messages as f64,
        i.entries as f64,
        i.bytes as f64,
        i.modified as f64,
        i.last_message as f64,
        i.bad_lines as f64,
        i.repaired as f64,
        i.torn_tail_bytes as f64,
        u.input_tokens as f64,
        u.output_tokens as f64,
        u.cache_read_tokens as f64,
        u.cache_write_tokens as f64,
        i.cost.unwrap_or(f64::NAN),
        i.forked_from.as_ref().map_or(0.0, |f| f.index as f64),
    ];
    for n in numbers {
        out.extend_from_slice(&n.to_ne_bytes());
    }
    let flag = |on: bool, bit: u32| if on { bit } else { 0 };
    let flags = flag(i.partial, PARTIAL) | flag(i.damaged, DAMAGED) | flag(i.pinned, PINNED);
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    let workspace = i.workspace.as_ref().map(|w| w.to_string_lossy());
    for s in [
        Some(i.id.as_str()),
        Some(i.title.as_str()),
        Some(i.model.as_str()),
        i.held_by.as_deref(),
        i.branch.as_deref(),
        i.commit.as_deref(),
        i.forked_from.as_ref().map(|f| f.id.as_str()),
        workspace.as_deref(),
        i.agent.as_deref(),
    ] {
        text(out, texts, s)?;
    }
    Ok(())
}

fn text(out: &mut Vec<u8>, texts: &mut Vec<u8>, s: Option<&str>) -> BridgeResult<()> {
    let (off, len) = match s {
        None => (NONE, 0),
        Some(s) => {
            let off = u32::try_from(texts.len()).ok().filter(|&o| o != NONE).ok_or_else(|| too_big(()))?;
            texts.extend_from_slice(s.as_bytes());
            (off, u32::try_from(s.len()).map_err(too_big)?)
        }
    };
    out.extend_from_slice(&off.to_ne_bytes());
    out.extend_from_slice(&len.to_ne_bytes());
    Ok(())
}

fn too_big<E>(_: E) -> BridgeError {
    BridgeError::msg("the list is too large to hand to Lua (over 4 GiB of text)")
}

/// A packed list read back (the core's side of `session_rows.lua`): the bridge keeps the last full list packed and
/// answers from it (its ids for the lock check, its haystacks for the matcher, `held_by` filled in).
pub struct Packed<'a>(&'a [u8]);

/// Where the strings' (offset, length) pairs start in a record: after the numbers, the flags and the padding.
const STRINGS_AT: usize = 14 * 8 + 8;
const HELD_BY: usize = 3;

impl<'a> Packed<'a> {
    /// `data` when it is a packed list of this layout, whole.
    pub fn read(data: &'a [u8]) -> Option<Self> {
        let p = Packed(data);
        let whole = data.get(..4) == Some(MAGIC.as_slice())
            && p.u32_at(8) as usize == RECORD
            && data.len() >= HEADER + p.count() * RECORD;
        whole.then_some(p)
    }

    pub fn count(&self) -> usize {
        self.u32_at(4) as usize
    }

    fn u32_at(&self, at: usize) -> u32 {
        self.0.get(at..at + 4).map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn flags(&self, i: usize) -> u32 {
        self.u32_at(HEADER + i * RECORD + 14 * 8)
    }

    /// String `k` (of [`STRINGS`]) of row `i`; `None` when it has none.
    fn string(&self, i: usize, k: usize) -> Option<&'a str> {
        self.string_bytes(i, k).and_then(|b| std::str::from_utf8(b).ok())
    }

    fn string_bytes(&self, i: usize, k: usize) -> Option<&'a [u8]> {
        let at = HEADER + i * RECORD + STRINGS_AT + 8 * k;
        let (off, len) = (self.u32_at(at), self.u32_at(at + 4) as usize);
        if off == NONE {
            return None;
        }
        let texts = HEADER + self.count() * RECORD;
        self.0.get(texts + off as usize..texts + off as usize + len)
    }

    /// Row `i`'s session id as bytes, unchecked (`None`: the row has none).
    pub fn id_bytes(&self, i: usize) -> Option<&'a [u8]> {
        self.string_bytes(i, 0)
    }

    /// Row `i`'s session id (a row of another tool's session: its JSON, not an id of ours).
    pub fn id(&self, i: usize) -> &'a str {
        self.string(i, 0).unwrap_or("")
    }

    /// What the float picker's fuzzy filter searches for row `i`: `float/finder.lua`'s `haystack()` (title, model,
    /// id, branch, then the other tool's name and the workspace when there are).
    pub fn haystack(&self, i: usize) -> String {
        let s = |k| self.string(i, k);
        if self.flags(i) & EXTERNAL != 0 {
            let item: serde_json::Value = serde_json::from_str(s(0).unwrap_or("")).unwrap_or_default();
            let field = |k: &str| item[k].as_str().unwrap_or("").to_string();
            let mut hay = format!("{} {} {} {}", field("title"), field("model"), field("id"), field("branch"));
            if let Some(source) = item["source"].as_str() {
                hay.push(' ');
                hay.push_str(source);
            }
            return hay;
        }
        let mut hay =
            format!("{} {} {} {}", s(1).unwrap_or(""), s(2).unwrap_or(""), s(0).unwrap_or(""), s(4).unwrap_or(""));
        if let Some(w) = s(7) {
            hay.push(' ');
            hay.push_str(w);
        }
        hay
    }

    /// Rows `from..to` as a packed list of their own (their texts copied after them).
    pub fn part(&self, from: usize, to: usize) -> BridgeResult<Vec<u8>> {
        let n = to.saturating_sub(from);
        let mut out = Vec::with_capacity(HEADER + n * RECORD);
        out.extend_from_slice(&self.0[..4]);
        out.extend_from_slice(&u32::try_from(n).map_err(too_big)?.to_ne_bytes());
        out.extend_from_slice(&self.0[8..HEADER]);
        let mut texts = Vec::new();
        for i in from..to {
            let rec = &self.0[HEADER + i * RECORD..][..RECORD];
            out.extend_from_slice(&rec[..STRINGS_AT]);
            for k in 0..STRINGS.len() {
                let bytes = self.string_bytes(i, k);
                let (off, len) = match bytes {
                    None => (NONE, 0),
                    Some(b) => {
                        let off = u32::try_from(texts.len()).map_err(too_big)?;
                        texts.extend_from_slice(b);
                        (off, b.len() as u32)
                    }
                };
                out.extend_from_slice(&off.to_ne_bytes());
                out.extend_from_slice(&len.to_ne_bytes());
            }
        }
        out.extend_from_slice(&texts);
        Ok(out)
    }

    /// Whether row `i` is pinned.
    pub fn pinned(&self, i: usize) -> bool {
        self.flags(i) & PINNED != 0
    }

    /// The bytes of row `i`'s texts (what is left behind unused when the row is dropped from a [`Self::merged`]).
    pub fn text_len(&self, i: usize) -> usize {
        (0..STRINGS.len()).filter_map(|k| self.string_bytes(i, k)).map(<[u8]>::len).sum()
    }

    /// The bytes of the texts, used or not.
    pub fn texts_len(&self) -> usize {
        self.0.len() - HEADER - self.count() * RECORD
    }

    /// This list without the rows `gone` marks, with the rows of `added` (each `added` row `j` before this list's
    /// row `at[j]`, `count()` for the end; `at` in order): records copied in runs, this list's texts copied whole
    /// (a dropped row's texts stay, unused, until a [`Self::part`] of it all) and `added`'s after them. Work
    /// proportional to the bytes, none per row: the kept full list after a few sessions were written (issue 39).
    pub fn merged(&self, gone: &[bool], added: &Packed, at: &[usize]) -> BridgeResult<Vec<u8>> {
        let n = self.count();
        let count = gone.iter().filter(|&&g| !g).count() + added.count();
        let texts = &self.0[HEADER + n * RECORD..];
        let added_texts = &added.0[HEADER + added.count() * RECORD..];
        let shift = u32::try_from(texts.len()).map_err(too_big)?;
        let mut out = Vec::with_capacity(HEADER + count * RECORD + texts.len() + added_texts.len());
        out.extend_from_slice(&self.0[..4]);
        out.extend_from_slice(&u32::try_from(count).map_err(too_big)?.to_ne_bytes());
        out.extend_from_slice(&self.0[8..HEADER]);
        let (mut j, mut run) = (0, 0);
        for i in 0..=n {
            let gone_here = i < n && gone.get(i).copied().unwrap_or(false);
            if !(gone_here || i == n || at.get(j) == Some(&i)) {
                continue;
            }
            out.extend_from_slice(&self.0[HEADER + run * RECORD..HEADER + i * RECORD]);
            while at.get(j).is_some_and(|&a| a <= i) {
                let rec = &added.0[HEADER + j * RECORD..][..RECORD];
                out.extend_from_slice(&rec[..STRINGS_AT]);
                for pair in rec[STRINGS_AT..].chunks_exact(8) {
                    let off = u32::from_ne_bytes([pair[0], pair[1], pair[2], pair[3]]);
                    let off = if off == NONE {
                        NONE
                    } else {
                        off.checked_add(shift).filter(|&o| o != NONE).ok_or_else(|| too_big(()))?
                    };
                    out.extend_from_slice(&off.to_ne_bytes());
                    out.extend_from_slice(&pair[4..]);
                }
                j += 1;
            }
            run = if gone_here { i + 1 } else { i };
        }
        out.extend_from_slice(texts);
        out.extend_from_slice(added_texts);
        Ok(out)
    }

    /// This list with `held_by` of the rows of `holders` (row, who) set: a copy, the holders' texts at its end.
    pub fn with_holders(&self, holders: &[(usize, String)]) -> BridgeResult<Vec<u8>> {
        let mut out = self.0.to_vec();
        let texts = HEADER + self.count() * RECORD;
        for (i, who) in holders {
            let off = u32::try_from(out.len() - texts).ok().filter(|&o| o != NONE).ok_or_else(|| too_big(()))?;
            let len = u32::try_from(who.len()).map_err(too_big)?;
            let at = HEADER + i * RECORD + STRINGS_AT + 8 * HELD_BY;
            out[at..at + 4].copy_from_slice(&off.to_ne_bytes());
            out[at + 4..at + 8].copy_from_slice(&len.to_ne_bytes());
            out.extend_from_slice(who.as_bytes());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::entry::ForkedFrom;
    use crate::usage::Usage;

    fn full() -> SessionInfo {
        SessionInfo {
            id: "20260101-000000-abcd".into(),
            title: "fix the parser".into(),
            model: "m".into(),
            messages: 3,
            entries: 5,
            bytes: 1 << 40,
            modified: 1_700_000_000,
            modified_ns: 0,
            last_message: 1_700_000_001,
            bad_lines: 1,
            partial: true,
            held_by: Some("pid 1".into()),
            repaired: 2,
            torn_tail_bytes: 7,
            damaged: true,
            branch: Some("main".into()),
            commit: Some("0f0f0f0".into()),
            usage: Usage { input_tokens: 1, output_tokens: 2, cache_read_tokens: 3, cache_write_tokens: 4 },
            usage_by_model: Default::default(),
            cost: Some(0.5),
            pinned: true,
            forked_from: Some(ForkedFrom { id: "20250101-000000-ffff".into(), index: 9 }),
            agent: Some("claude".into()),
            agent_session: Some("0b1d".into()),
            imported_from: None,
            workspace: Some("/w".into()),
        }
    }

    /// Every field the JSON crossing gives a row (`bulk`) has its place in a record: a field added to
    /// `SessionInfo` fails here until `pack` (and session_rows.lua) carry it.
    #[test]
    fn a_record_carries_every_field_the_json_row_has() {
        let json = serde_json::to_value(full()).expect("json");
        let mut keys: Vec<String> = json.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        let mut packed: Vec<String> = NUMBERS
            .iter()
            .chain(STRINGS.iter())
            .filter(|k| !k.ends_with("_tokens") && !k.starts_with("forked_"))
            .map(|k| k.to_string())
            .chain(["usage", "forked_from", "partial", "damaged", "pinned"].map(String::from))
            .collect();
        packed.sort();
        assert_eq!(keys, packed);
        // Sorted: serde_json keeps insertion order when a dependency turns on its `preserve_order` (the ACP crate does).
        let mut usage: Vec<&String> = json["usage"].as_object().expect("usage").keys().collect();
        usage.sort();
        assert_eq!(usage, ["cache_read_tokens", "cache_write_tokens", "input_tokens", "output_tokens"]);
    }

    #[test]
    fn records_hold_numbers_flags_and_texts_at_their_places() {
        let none = SessionInfo { held_by: None, cost: None, forked_from: None, workspace: None, agent: None, ..full() };
        let packed = pack(&[ListItem::Ours(Box::new(full())), ListItem::Ours(Box::new(none))]).expect("pack");
        assert_eq!(&packed[..4], MAGIC);
        let u32_at = |at: usize| u32::from_ne_bytes(packed[at..at + 4].try_into().expect("4"));
        let f64_at = |at: usize| f64::from_ne_bytes(packed[at..at + 8].try_into().expect("8"));
        assert_eq!((u32_at(4), u32_at(8) as usize), (2, RECORD));
        let texts = HEADER + 2 * RECORD;
        let string = |rec: usize, k: usize| {
            let at = HEADER + rec * RECORD + 120 + 8 * k;
            let (off, len) = (u32_at(at), u32_at(at + 4) as usize);
            (off != NONE).then(|| String::from_utf8(packed[texts + off as usize..][..len].to_vec()).expect("utf-8"))
        };
        assert_eq!(f64_at(HEADER + 2 * 8), (1u64 << 40) as f64);
        assert_eq!(f64_at(HEADER + 12 * 8), 0.5);
        assert_eq!(f64_at(HEADER + 13 * 8), 9.0);
        assert_eq!(u32_at(HEADER + 112), PARTIAL | DAMAGED | PINNED);
        assert_eq!(string(0, 6).as_deref(), Some("20250101-000000-ffff"));
        assert_eq!(string(0, 7).as_deref(), Some("/w"));
        assert!(f64_at(HEADER + RECORD + 12 * 8).is_nan());
        assert_eq!(string(0, 8).as_deref(), Some("claude"));
        assert_eq!((string(1, 3), string(1, 6), string(1, 7), string(1, 8)), (None, None, None, None));
        assert_eq!(string(1, 1).as_deref(), Some("fix the parser"));
    }

    #[test]
    fn the_haystack_is_the_finders() {
        let bare = SessionInfo { branch: None, workspace: None, ..full() };
        let packed = pack(&[ListItem::Ours(Box::new(full())), ListItem::Ours(Box::new(bare))]).expect("pack");
        let p = Packed::read(&packed).expect("packed");
        assert_eq!(p.haystack(0), "fix the parser m 20260101-000000-abcd main /w");
        assert_eq!(p.haystack(1), "fix the parser m 20260101-000000-abcd ");
        assert_eq!((p.count(), p.id(1)), (2, "20260101-000000-abcd"));
    }

    #[test]
    fn a_merged_list_is_the_kept_rows_with_the_added_ones_at_their_places() {
        let row = |id: &str, title: &str| SessionInfo { id: id.into(), title: title.into(), ..full() };
        let (a, b, c, d) = (row("a", "one"), row("b", "two"), row("c", "three"), row("d", "four"));
        let old = pack_infos(&[a.clone(), b.clone(), c.clone()]).expect("pack");
        let new_b = SessionInfo { branch: None, ..row("b", "two, again") };
        let added = pack_infos(&[new_b.clone(), d.clone()]).expect("pack");
        let (old, added) = (Packed::read(&old).expect("packed"), Packed::read(&added).expect("packed"));
        // b moves to the front, d goes last, a is dropped
        let merged = old.merged(&[true, true, false], &added, &[0, 3]).expect("merged");
        let m = Packed::read(&merged).expect("packed");
        assert_eq!(m.part(0, m.count()).expect("part"), pack_infos(&[new_b, c, d]).expect("pack"));
        assert_eq!(m.texts_len(), old.texts_len() + added.texts_len(), "the dropped rows' texts left unused");
        assert_eq!(
            old.text_len(0),
            "a".len() + "one".len() + ["m", "pid 1", "main", "0f0f0f0"].concat().len() + 20 + 2 + 6
        );
        let none = Packed::read(&pack_infos(&[]).expect("pack")).map(|p| old.merged(&[false; 3], &p, &[]));
        assert_eq!(none.expect("packed").expect("merged"), pack_infos(&[a, b, row("c", "three")]).expect("pack"));
    }

    #[test]
    fn holders_are_written_into_a_copy() {
        let free = SessionInfo { held_by: None, ..full() };
        let packed = pack(&[ListItem::Ours(Box::new(free.clone())), ListItem::Ours(Box::new(free))]).expect("pack");
        let p = Packed::read(&packed).expect("packed");
        assert_eq!(p.string(1, HELD_BY), None);
        let held = p.with_holders(&[(1, "pid 7 on h".into())]).expect("holders");
        let h = Packed::read(&held).expect("packed");
        assert_eq!((h.string(0, HELD_BY), h.string(1, HELD_BY)), (None, Some("pid 7 on h")));
        assert_eq!((h.string(1, 1), h.id(0)), (Some("fix the parser"), "20260101-000000-abcd"));
        assert!(Packed::read(&held[..20]).is_none() && Packed::read(b"nope").is_none());
    }

    #[test]
    fn a_part_is_a_packed_list_of_its_rows() {
        let other = SessionInfo { id: "20260101-000000-bbbb".into(), title: "other".into(), branch: None, ..full() };
        let items = [full(), other.clone(), full()].map(|i| ListItem::Ours(Box::new(i)));
        let packed = pack(&items).expect("pack");
        let part = Packed::read(&packed).expect("packed").part(1, 3).expect("part");
        assert_eq!(part, pack(&items[1..]).expect("pack"), "the same bytes as the two rows packed alone");
        assert_eq!(Packed::read(&part).expect("packed").id(0), other.id);
        assert_eq!(Packed::read(&packed).expect("packed").part(3, 3).expect("part"), pack(&[]).expect("pack"));
    }
}
