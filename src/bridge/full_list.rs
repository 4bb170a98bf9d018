//! The workspace's full session list (of this workspace only, all of it, ours only), packed ([`super::rows`]), kept
//! from one call to the next while nothing it depends on changed (issue 39): `sessions.list()` at 100,000 sessions
//! re-read and re-packed the index on the editor's main loop each time (hundreds of milliseconds), where three
//! `stat`s now tell that the last list still holds.
//!
//! What is kept is the list before anyone's lock is looked at ([`session::list::Unlocked`]), packed, with each row's
//! lock inode; who holds a lock is asked at each call ([`session::list::lock_holders`]: one read of `/proc/locks`,
//! then only the sessions locked on this machine), and a list with holders is a copy with their names written in
//! ([`Packed::with_holders`]). It is kept while the workspace's [`Stamp`](session::index::Stamp) is the one taken
//! before it was read: sessions added or removed, or a log written through any writer, change it, as they change
//! what the index gives (a log edited by hand is seen by neither until the activity file is compacted). A list read
//! less than [`FRESH_SECS`] after the `sessions` folder changed is not kept (a change in the same clock tick would
//! not move the folder's time). When all that changed since is logs written through a writer (a chat's messages:
//! the activity file grown by whole lines), the kept list is brought up to date by making those sessions' rows
//! again instead of reading the whole index. One list is kept: the last full list of one workspace with one set of
//! options (the picker and `sessions.list()` ask the same).

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::BridgeResult;
use super::rows::{self, Packed};
use crate::session::index::{self, Stamp};
use crate::session::list::{ListOptions, Unlocked, list_unlocked, lock_holders, unlocked_row};

/// Seconds after a change of the `sessions` folder during which a list is not kept.
pub const FRESH_SECS: i64 = 2;

struct Kept {
    key: String,
    stamp: Stamp,
    data: Arc<Vec<u8>>,
    list: Arc<Unlocked>,
}

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

fn kept() -> MutexGuard<'static, Option<Kept>> {
    KEPT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The workspace's full list (`opts.limit` is not looked at), packed: the kept one when it still holds, else read and
/// packed (and kept).
pub fn packed(workspace: &Path, opts: &ListOptions) -> BridgeResult<Arc<Vec<u8>>> {
    // the options but the lock check, which is done at each call
    let key = format!("{}\0{:?}", workspace.display(), ListOptions { check_locks: false, ..opts.clone() });
    let stamp = index::stamp(workspace);
    let (data, list) = match stamp.as_ref().and_then(|st| hit(&key, st)) {
        Some(hit) => hit,
        None => {
            let list = match stamp.as_ref().and_then(|st| written_since(workspace, &key, st, opts)) {
                Some(list) => list,
                None => list_unlocked(workspace, opts)?,
            };
            let (data, list) = (Arc::new(rows::pack_infos(&list.rows)?), Arc::new(list));
            if let Some(stamp) = stamp.filter(|st| !st.fresh(now_ns(), FRESH_SECS)) {
                *kept() = Some(Kept { key, stamp, data: data.clone(), list: list.clone() });
            }
            (data, list)
        }
    };
    if !opts.check_locks {
        return Ok(data);
    }
    let Some(packed) = Packed::read(&data) else { return Ok(data) };
    let holders = lock_holders(workspace, &list.lock_inos, |i| packed.id(i));
    if holders.is_empty() { Ok(data) } else { Ok(Arc::new(packed.with_holders(&holders)?)) }
}

/// The kept list, when it is of `key` and `stamp` still holds.
fn hit(key: &str, stamp: &Stamp) -> Option<(Arc<Vec<u8>>, Arc<Unlocked>)> {
    let kept = kept();
    let k = kept.as_ref().filter(|k| k.key == key && k.stamp == *stamp)?;
    Some((k.data.clone(), k.list.clone()))
}

/// The kept list brought up to `stamp` when all that changed since is logs written through a writer (a chat's
/// messages): only those sessions' rows are made again ([`index::written_between`], [`unlocked_row`]), where a full
/// read takes in the index (100,000 sessions: hundreds of milliseconds, most of it the index).
fn written_since(workspace: &Path, key: &str, stamp: &Stamp, opts: &ListOptions) -> Option<Unlocked> {
    let k = kept().take_if(|k| k.key == key)?;
    let written = index::written_between(workspace, &k.stamp, stamp)?;
    let mut list = Arc::try_unwrap(k.list)
        .unwrap_or_else(|shared| Unlocked { rows: shared.rows.clone(), lock_inos: shared.lock_inos.clone() });
    if written.is_empty() {
        return Some(list);
    }
    (list.rows, list.lock_inos) =
        list.rows.into_iter().zip(list.lock_inos).filter(|(row, _)| !written.contains(&row.id)).unzip();
    for id in &written {
        if let Some((row, ino)) = unlocked_row(workspace, id, opts) {
            list.rows.push(row);
            list.lock_inos.push(ino);
        }
    }
    list.sort();
    Some(list)
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

    /// The list read anew (never kept), packed: what every kept list must equal.
    fn read_anew(ws: &Path) -> Vec<u8> {
        rows::pack_infos(&crate::session::list(ws, &args()).expect("list")).expect("pack")
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
        assert_eq!(*written, read_anew(ws.path()));
        assert_eq!(Packed::read(&written).expect("packed").id(0), s[0].id, "the written one first");
        // a lock taken: the kept list with its holder, a copy
        let held = lock::acquire(&s[1]).expect("lock");
        let locked = packed(ws.path(), &args()).expect("list");
        assert!(!Arc::ptr_eq(&written, &locked));
        assert_eq!(*locked, read_anew(ws.path()));
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
        assert_eq!(*packed(ws.path(), &args()).expect("list"), read_anew(ws.path()));
        let activity = ws.path().join(".PseudoClaude/sessions/activity");
        let mut f = std::fs::OpenOptions::new().append(true).open(&activity).expect("activity");
        std::io::Write::write_all(&mut f, &s[1].id.as_bytes()[..8]).expect("a cut line");
        assert_eq!(*packed(ws.path(), &args()).expect("list"), read_anew(ws.path()));
        // a session added: read anew, and not kept while the folder's change is that recent
        let third = session(ws.path(), "three");
        let added = packed(ws.path(), &args()).expect("list");
        assert_eq!(*added, read_anew(ws.path()));
        assert_eq!(Packed::read(&added).expect("packed").id(1), third.id, "after the pinned one");
        assert!(!Arc::ptr_eq(&added, &packed(ws.path(), &args()).expect("list")), "the folder just changed");
    }
}
