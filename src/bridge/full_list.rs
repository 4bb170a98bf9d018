//! The workspace's full session list (of this workspace only, all of it, ours only), packed ([`super::rows`]), kept
//! from one call to the next while nothing it depends on changed (issue 39): `sessions.list()` at 100,000 sessions
//! re-read and re-packed the index on the editor's main loop each time (hundreds of milliseconds), where three
//! `stat`s now tell that the last list still holds.
//!
//! What is kept is the list before anyone's lock is looked at ([`session::list::Unlocked`]), packed, with each row's
//! time and lock inode ([`Key`]); who holds a lock is asked at each call ([`session::list::lock_holders`]: one read
//! of `/proc/locks`, then only the sessions locked on this machine) and handed over beside the list ([`Listed`]:
//! `sessions.list()` sets them on its rows; [`packed`] writes them into a copy). It is kept while the workspace's
//! [`Stamp`](session::index::Stamp) is the one taken before it was read: sessions added or removed, or a log written
//! through any writer, change it, as they change what the index gives (a log edited by hand is seen by neither until
//! the activity file is compacted). A list read less than [`FRESH_SECS`] after the `sessions` folder changed is not
//! kept (a change in the same clock tick would not move the folder's time). When all that changed since is logs
//! written through a writer (a chat's messages: the activity file grown by whole lines), the kept list is brought up
//! to date by making those sessions' rows again and moving them to their places in the packed list (no re-sort, no
//! re-pack: [`Packed::merged`]) instead of reading the whole index. One list is kept: the last full list of one
//! workspace with one set of options (the picker and `sessions.list()` ask the same).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::BridgeResult;
use super::rows::{self, Packed};
use crate::session::index::{self, Stamp};
use crate::session::list::{ListOptions, list_unlocked, lock_holders, order_key, unlocked_row};

/// Seconds after a change of the `sessions` folder during which a list is not kept.
pub const FRESH_SECS: i64 = 2;

/// What the packed list does not hold of a row: its place in the list's order and its lock file's inode.
#[derive(Debug, Clone, Copy)]
struct Key {
    modified_ns: i64,
    lock_ino: u64,
}

struct Kept {
    key: String,
    stamp: Stamp,
    data: Arc<Vec<u8>>,
    keys: Arc<Vec<Key>>,
    /// Bytes of `data`'s texts no row uses any more ([`Packed::merged`]).
    unused: usize,
}

/// At most this many sessions written: their rows are found by comparing ids (more: by hashing each row's).
const FEW: usize = 8;

/// A list and its keys, as handed out and kept.
type Shared = (Arc<Vec<u8>>, Arc<Vec<Key>>);

/// A list made: packed, its keys, the bytes of its texts no row uses.
type Made = (Arc<Vec<u8>>, Arc<Vec<Key>>, usize);

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

fn kept() -> MutexGuard<'static, Option<Kept>> {
    KEPT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The workspace's full list, packed, and who holds the locks of its rows (row, holder; none without
/// `check_locks`): the list is the kept one, unchanged, when it still holds (then the same `Arc`).
pub struct Listed {
    pub data: Arc<Vec<u8>>,
    pub holders: Vec<(usize, String)>,
}

/// The workspace's full list (`opts.limit` is not looked at), packed, with the holders written in (a copy when
/// there are).
pub fn packed(workspace: &Path, opts: &ListOptions) -> BridgeResult<Arc<Vec<u8>>> {
    let Listed { data, holders } = listed(workspace, opts)?;
    match Packed::read(&data) {
        Some(packed) if !holders.is_empty() => Ok(Arc::new(packed.with_holders(&holders)?)),
        _ => Ok(data),
    }
}

/// The workspace's full list (`opts.limit` is not looked at): the kept one when it still holds, brought up to date
/// when only logs were written since, else read and packed (and kept); the holders apart.
pub fn listed(workspace: &Path, opts: &ListOptions) -> BridgeResult<Listed> {
    // the options but the lock check, which is done at each call
    let key = format!("{}\0{:?}", workspace.display(), ListOptions { check_locks: false, ..opts.clone() });
    let stamp = index::stamp(workspace);
    let (data, keys) = match stamp.as_ref().and_then(|st| hit(&key, st)) {
        Some(hit) => hit,
        None => {
            let (data, keys, unused) = match stamp.as_ref().and_then(|st| written_since(workspace, &key, st, opts)) {
                Some(updated) => updated?,
                None => read_anew(workspace, opts)?,
            };
            if let Some(stamp) = stamp.filter(|st| !st.fresh(now_ns(), FRESH_SECS)) {
                *kept() = Some(Kept { key, stamp, data: data.clone(), keys: keys.clone(), unused });
            }
            (data, keys)
        }
    };
    let holders = match Packed::read(&data) {
        Some(packed) if opts.check_locks => lock_holders(workspace, keys.iter().map(|k| k.lock_ino), |i| packed.id(i)),
        _ => Vec::new(),
    };
    Ok(Listed { data, holders })
}

fn read_anew(workspace: &Path, opts: &ListOptions) -> BridgeResult<Made> {
    let list = list_unlocked(workspace, opts)?;
    let keys = list.rows.iter().zip(&list.lock_inos).map(|(r, &ino)| Key { modified_ns: r.modified_ns, lock_ino: ino });
    Ok((Arc::new(rows::pack_infos(&list.rows)?), Arc::new(keys.collect()), 0))
}

/// The kept list, when it is of `key` and `stamp` still holds.
fn hit(key: &str, stamp: &Stamp) -> Option<Shared> {
    let kept = kept();
    let k = kept.as_ref().filter(|k| k.key == key && k.stamp == *stamp)?;
    Some((k.data.clone(), k.keys.clone()))
}

/// The kept list brought up to `stamp` when all that changed since is logs written through a writer (a chat's
/// messages): only those sessions' rows are made again ([`index::written_between`], [`unlocked_row`]) and moved to
/// their places ([`Packed::merged`]), where a full read takes in the index and a re-sort and re-pack of every row
/// (100,000 sessions: hundreds of milliseconds). `None` when it cannot be.
fn written_since(workspace: &Path, key: &str, stamp: &Stamp, opts: &ListOptions) -> Option<BridgeResult<Made>> {
    let k = kept().take_if(|k| k.key == key)?;
    let written = index::written_between(workspace, &k.stamp, stamp)?;
    if written.is_empty() {
        return Some(Ok((k.data, k.keys, k.unused)));
    }
    Some(merge(workspace, opts, &Packed::read(&k.data)?, &k.keys, &written, k.unused))
}

fn merge(
    workspace: &Path,
    opts: &ListOptions,
    old: &Packed,
    keys: &[Key],
    written: &HashSet<String>,
    mut unused: usize,
) -> BridgeResult<Made> {
    // a few ids (a chat's messages: one) compared as bytes; hashing every row's id cost more than the rest
    let few: Vec<&[u8]> = written.iter().map(|id| id.as_bytes()).take(FEW + 1).collect();
    let gone: Vec<bool> = (0..old.count())
        .map(|i| match old.id_bytes(i) {
            Some(id) if few.len() <= FEW => few.contains(&id),
            Some(id) => std::str::from_utf8(id).is_ok_and(|id| written.contains(id)),
            None => false,
        })
        .collect();
    let mut added: Vec<_> = written.iter().filter_map(|id| unlocked_row(workspace, id, opts)).collect();
    added.sort_by(|(a, _), (b, _)| {
        order_key(a.pinned, a.modified_ns, &a.id).cmp(&order_key(b.pinned, b.modified_ns, &b.id))
    });
    // each written row goes before the first row that stays and comes after it
    let mut at = Vec::with_capacity(added.len());
    let mut i = 0;
    for (row, _) in &added {
        let place = order_key(row.pinned, row.modified_ns, &row.id);
        while i < old.count() && (gone[i] || order_key(old.pinned(i), keys[i].modified_ns, old.id(i)) < place) {
            i += 1;
        }
        at.push(i);
    }
    let infos: Vec<_> = added.iter().map(|(info, _)| info.clone()).collect();
    let packed_added = rows::pack_infos(&infos)?;
    let new = Packed::read(&packed_added).map(|a| old.merged(&gone, &a, &at)).transpose()?.unwrap_or_default();
    // the keys, in the same order
    let mut new_keys = Vec::with_capacity(keys.len() + added.len());
    let mut j = 0;
    for i in 0..=old.count() {
        while at.get(j).is_some_and(|&a| a <= i) {
            new_keys.push(Key { modified_ns: added[j].0.modified_ns, lock_ino: added[j].1 });
            j += 1;
        }
        if i < old.count() {
            if gone[i] {
                unused += old.text_len(i);
            } else {
                new_keys.push(keys[i]);
            }
        }
    }
    // the texts of dropped rows left behind: laid out anew once they are as many bytes as the list's own
    let list = Packed::read(&new).ok_or_else(|| super::BridgeError::msg("the merged list does not read back"))?;
    if unused > list.texts_len() / 2 {
        return Ok((Arc::new(list.part(0, list.count())?), Arc::new(new_keys), 0));
    }
    Ok((Arc::new(new), Arc::new(new_keys), unused))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::session::{Context, Writer, WriterOptions, lock};
    use std::time::{Duration, SystemTime};

    /// One list is kept for the whole process: these tests take turns.
    static TURN: Mutex<()> = Mutex::new(());

    fn session(ws: &Path, text: &str) -> Context {
        let ctx = Context::new(ws).expect("context");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        w.append(&Message::user(text)).expect("append");
        w.close().expect("close");
        ctx
    }

    /// The `sessions` folder changed a minute ago: a list read now is kept.
    fn settle(ws: &Path) {
        let t = SystemTime::now() - Duration::from_secs(60);
        let dir = std::fs::File::open(ws.join(".PseudoClaude/sessions")).expect("open the folder");
        dir.set_modified(t).expect("set_modified");
    }

    fn args() -> ListOptions {
        ListOptions { check_locks: true, ..Default::default() }
    }

    /// The list read anew (never kept), packed: what every kept list must equal (texts laid out anew).
    fn read_anew(ws: &Path) -> Vec<u8> {
        rows::pack_infos(&crate::session::list(ws, &args()).expect("list")).expect("pack")
    }

    /// `data` with its texts laid out anew, in row order: a list brought up to date keeps unused texts.
    fn compact(data: &[u8]) -> Vec<u8> {
        let p = Packed::read(data).expect("packed");
        p.part(0, p.count()).expect("part")
    }

    #[test]
    fn the_kept_list_is_handed_out_again_until_a_session_is_written_added_or_locked() {
        let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        let ws = tempfile::tempdir().expect("tempdir");
        let s = [session(ws.path(), "one"), session(ws.path(), "two")];
        settle(ws.path());
        let first = packed(ws.path(), &args()).expect("list");
        assert_eq!(*first, read_anew(ws.path()));
        assert!(Arc::ptr_eq(&first, &packed(ws.path(), &args()).expect("list")), "nothing changed: the same list");
        // another set of options is another list
        let other = ListOptions { include_empty: true, ..args() };
        assert!(!Arc::ptr_eq(&first, &packed(ws.path(), &other).expect("list")));
        let first = packed(ws.path(), &args()).expect("list");
        // a message written through the writer (the activity file grows)
        let w = Writer::open(&s[0], WriterOptions::default()).expect("writer");
        w.append(&Message::assistant("an answer")).expect("append");
        w.close().expect("close");
        let written = packed(ws.path(), &args()).expect("list");
        assert!(!Arc::ptr_eq(&first, &written));
        assert_eq!(compact(&written), read_anew(ws.path()));
        assert_eq!(Packed::read(&written).expect("packed").id(0), s[0].id, "the written one first");
        // a lock taken: the kept list with its holder, a copy
        let held = lock::acquire(&s[1]).expect("lock");
        let locked = packed(ws.path(), &args()).expect("list");
        assert!(!Arc::ptr_eq(&written, &locked));
        assert_eq!(compact(&locked), read_anew(ws.path()));
        let listed = listed(ws.path(), &args()).expect("list");
        assert!(Arc::ptr_eq(&written, &listed.data), "the holders beside the kept list, not in a copy");
        assert_eq!(listed.holders.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1]);
        drop(held);
        assert!(Arc::ptr_eq(&written, &packed(ws.path(), &args()).expect("list")), "released: the kept list");
        // two sessions written (one pinned: it moves first), and a line cut short in the activity file: each list
        // brought up to date equals a full read
        crate::session::Writer::open(&s[0], WriterOptions::default())
            .and_then(|w| w.append_entry(crate::session::meta::pin_entry(true)).and_then(|_| w.close()))
            .expect("pin");
        let w = Writer::open(&s[1], WriterOptions::default()).expect("writer");
        w.append(&Message::assistant("another")).expect("append");
        w.close().expect("close");
        assert_eq!(compact(&packed(ws.path(), &args()).expect("list")), read_anew(ws.path()));
        let activity = ws.path().join(".PseudoClaude/sessions/activity");
        let mut f = std::fs::OpenOptions::new().append(true).open(&activity).expect("activity");
        std::io::Write::write_all(&mut f, &s[1].id.as_bytes()[..8]).expect("a cut line");
        assert_eq!(compact(&packed(ws.path(), &args()).expect("list")), read_anew(ws.path()));
        // many writes, each to another place of the list (the oldest, the middle, two at once): each list brought
        // up to date equals a full read, through the texts left unused and laid out anew
        let more: Vec<Context> = (0..5).map(|n| session(ws.path(), &format!("more {n}"))).collect();
        settle(ws.path());
        packed(ws.path(), &args()).expect("list");
        for round in 0..12 {
            for ctx in [&more[round % 5], &more[(round * 3) % 5]].iter().take(1 + round % 2) {
                let w = Writer::open(ctx, WriterOptions::default()).expect("writer");
                w.append(&Message::assistant("x".repeat(round * 10))).expect("append");
                w.close().expect("close");
            }
            assert_eq!(compact(&packed(ws.path(), &args()).expect("list")), read_anew(ws.path()), "round {round}");
        }
        // a session added: read anew, and not kept while the folder's change is that recent
        let third = session(ws.path(), "three");
        let added = packed(ws.path(), &args()).expect("list");
        assert_eq!(*added, read_anew(ws.path()));
        assert_eq!(Packed::read(&added).expect("packed").id(1), third.id, "after the pinned one");
        assert!(!Arc::ptr_eq(&added, &packed(ws.path(), &args()).expect("list")), "the folder just changed");
    }
}
