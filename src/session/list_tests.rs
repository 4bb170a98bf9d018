//! Unit tests of `list.rs`: the limited list and its hints, ids, the summary cache.

use super::*;
use crate::message::Message;
use crate::session::{Writer, WriterOptions, meta};
use std::time::{Duration, SystemTime};

/// `n` sessions written one after the other (the activity hint names them in that order), their
/// logs' modification times a second apart in the same order.
fn sessions(ws: &Path, n: usize) -> Vec<Context> {
    (0..n).map(|i| session(ws, i)).collect()
}

/// Session number `i`: one message, its log's modification time `i` seconds after a fixed moment.
fn session(ws: &Path, i: usize) -> Context {
    let ctx = Context::new(ws).expect("context");
    let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
    w.append(&Message::user(format!("session {i}"))).expect("append");
    set_mtime(&ctx, i as u64);
    ctx
}

/// Sets the log's modification time to `secs` after a fixed moment, without writing to it.
fn set_mtime(ctx: &Context, secs: u64) {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs);
    File::options().append(true).open(&ctx.jsonl_path).expect("open").set_modified(t).expect("set_modified");
}

fn ids_of(list: &[SessionInfo]) -> Vec<&str> {
    list.iter().map(|s| s.id.as_str()).collect()
}

fn limited(limit: usize, include_pinned: bool) -> ListOptions {
    ListOptions { limit: Some(limit), include_pinned, ..Default::default() }
}

#[test]
fn a_limited_list_takes_the_newest_sessions_the_activity_hint_names() {
    let ws = tempfile::tempdir().expect("tempdir");
    let s = sessions(ws.path(), 5);
    // touched by something that does not write the hint (a copy, an older version)
    set_mtime(&s[0], 100);
    let full = list(ws.path(), &ListOptions::default()).expect("list");
    assert_eq!(ids_of(&full), [&s[0].id, &s[4].id, &s[3].id, &s[2].id, &s[1].id]);
    // the picker's first rows: the hint's newest two, not a stat of every log
    assert_eq!(ids_of(&list(ws.path(), &limited(2, false)).expect("list")), [&s[4].id, &s[3].id]);
    // excluded (the current session): the next one the hint names
    let opts = ListOptions { exclude: Some(s[4].id.clone()), ..limited(2, false) };
    assert_eq!(ids_of(&list(ws.path(), &opts).expect("list")), [&s[3].id, &s[2].id]);
    // without the hint: the modification times
    fs::remove_file(ws.path().join(".PseudoClaude/sessions/activity")).expect("remove the hint");
    assert_eq!(ids_of(&list(ws.path(), &limited(2, false)).expect("list")), [&s[0].id, &s[4].id]);
}

#[test]
fn pinned_sessions_join_a_limited_list_once_whether_the_hint_or_the_folder_is_read() {
    let ws = tempfile::tempdir().expect("tempdir");
    let mut s = sessions(ws.path(), 2);
    meta::append(&s[1], meta::pin_entry(true)).expect("pin one that grows old");
    set_mtime(&s[1], 1);
    s.extend((2..5).map(|i| session(ws.path(), i)));
    meta::append(&s[4], meta::pin_entry(true)).expect("pin the newest");
    set_mtime(&s[4], 4);
    let with_pins = [&s[4].id, &s[1].id, &s[3].id];
    let newest = [&s[4].id, &s[3].id, &s[2].id];
    assert_eq!(ids_of(&list(ws.path(), &limited(3, true)).expect("list")), with_pins);
    assert_eq!(ids_of(&list(ws.path(), &limited(3, false)).expect("list")), newest);
    // s[1] unpinned in its log behind the hint's back (an older version wrote it): the log wins
    let mut log = File::options().append(true).open(&s[1].jsonl_path).expect("open");
    std::io::Write::write_all(&mut log, b"{\"type\":\"pin\",\"ts\":1,\"pinned\":false}\n").expect("write");
    drop(log);
    // (and touched since, newer than all: were it taken as pinned, it would stay in the list)
    set_mtime(&s[1], 100);
    assert_eq!(ids_of(&list(ws.path(), &limited(3, true)).expect("list")), newest);
    // pinned again, and no activity hint: a scan of the folder, then the pins
    let mut log = File::options().append(true).open(&s[1].jsonl_path).expect("open");
    std::io::Write::write_all(&mut log, b"{\"type\":\"pin\",\"ts\":1,\"pinned\":true}\n").expect("write");
    drop(log);
    set_mtime(&s[1], 1);
    fs::remove_file(ws.path().join(".PseudoClaude/sessions/activity")).expect("remove the hint");
    assert_eq!(ids_of(&list(ws.path(), &limited(3, true)).expect("list")), with_pins);
    assert_eq!(ids_of(&list(ws.path(), &limited(3, false)).expect("list")), newest);
}

#[test]
fn ids_come_from_the_hint_then_by_id_and_only_folders_count() {
    let ws = tempfile::tempdir().expect("tempdir");
    assert_eq!(ids(ws.path()).expect("no sessions yet"), Vec::<String>::new());
    assert!(list(ws.path(), &ListOptions::default()).expect("no sessions yet").is_empty());
    let s = sessions(ws.path(), 3);
    let root = ws.path().join(".PseudoClaude/sessions");
    fs::create_dir(root.join("20990101-000000-0000")).expect("a folder the hint does not name");
    fs::create_dir(root.join("20000101-000000-0000")).expect("another");
    std::os::unix::fs::symlink(&s[0].dir, root.join("20500101-000000-0000")).expect("a link");
    fs::write(root.join("20600101-000000-0000"), b"").expect("a file");
    fs::create_dir(root.join("not-a-session")).expect("a folder without an id");
    assert_eq!(
        ids(ws.path()).expect("ids"),
        [&s[2].id, &s[1].id, &s[0].id, "20990101-000000-0000", "20000101-000000-0000"]
    );
}

#[test]
fn a_sessions_folder_that_cannot_be_read_is_an_error_not_an_empty_list() {
    let ws = tempfile::tempdir().expect("tempdir");
    fs::create_dir(ws.path().join(".PseudoClaude")).expect("mkdir");
    fs::write(ws.path().join(".PseudoClaude/sessions"), b"").expect("a file where the folder goes");
    for err in [ids(ws.path()).unwrap_err(), list(ws.path(), &ListOptions::default()).unwrap_err()] {
        assert!(err.to_string().contains("cannot read sessions directory"), "{err}");
    }
}

#[test]
fn every_workspace_lists_its_own_sessions_newest_first() {
    let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let sa = sessions(a.path(), 2);
    let sb = sessions(b.path(), 1);
    set_mtime(&sb[0], 50);
    let gone = a.path().join("removed");
    let workspaces = [a.path().to_path_buf(), gone, b.path().to_path_buf()];
    let all = list_every(&workspaces, &ListOptions::default());
    assert_eq!(ids_of(&all), [&sb[0].id, &sa[1].id, &sa[0].id]);
    let places: Vec<_> = all.iter().map(|s| s.workspace.clone().expect("named")).collect();
    assert_eq!(places, [b.path(), a.path(), a.path()]);
    let two = list_every(&workspaces, &ListOptions { limit: Some(2), ..Default::default() });
    assert_eq!(ids_of(&two), [&sb[0].id, &sa[1].id]);
}

#[test]
fn a_session_without_a_log_yet_is_listed_empty_when_asked() {
    let ws = tempfile::tempdir().expect("tempdir");
    let fresh = Context::new(ws.path()).expect("context");
    let info = info(&fresh).expect("info");
    assert_eq!((info.messages, info.bytes, info.damaged), (0, 0, false));
    assert!(list(ws.path(), &ListOptions::default()).expect("list").is_empty());
    let opts = ListOptions { include_empty: true, ..Default::default() };
    assert_eq!(ids_of(&list(ws.path(), &opts).expect("list")), [&fresh.id]);
}

#[test]
fn a_log_rewritten_under_its_cache_is_read_again() {
    let ws = tempfile::tempdir().expect("tempdir");
    let ctx = session(ws.path(), 0);
    assert_eq!(info(&ctx).expect("info").title, "session 0"); // writes the cache
    assert!(ctx.summary_path().exists());
    // another log in its place (a folder copied over this one), longer than the cached offset
    let other = "{\"type\":\"message\",\"role\":\"user\",\"content\":\"a different session\",\"ts\":5}\n";
    fs::write(&ctx.jsonl_path, other.repeat(3)).expect("write");
    let info = info(&ctx).expect("info");
    assert_eq!((info.title.as_str(), info.messages), ("a different session", 3));
}

#[test]
fn a_limited_list_reads_at_most_max_read_bytes_of_a_log_without_a_cache() {
    let ws = tempfile::tempdir().expect("tempdir");
    let ctx = session(ws.path(), 0);
    let len = fs::metadata(&ctx.jsonl_path).expect("stat").len();
    let first_rows = |max: u64| {
        let opts = ListOptions { limit: Some(1), max_read: Some(max), ..Default::default() };
        let info = list(ws.path(), &opts).expect("list").remove(0);
        (info.partial, info.messages)
    };
    assert_eq!(first_rows(len - 1), (true, 0), "one byte too many: listed partial, nothing read");
    assert!(!ctx.summary_path().exists());
    assert_eq!(first_rows(len), (false, 1));
}

#[test]
fn the_cache_is_written_once_per_change_of_the_log() {
    use std::os::unix::fs::MetadataExt;
    let ws = tempfile::tempdir().expect("tempdir");
    let ino = |ctx: &Context| fs::metadata(ctx.summary_path()).expect("the cache").ino();
    // an empty log too: the next list must not read it again either
    let empty = Context::new(ws.path()).expect("context");
    fs::write(&empty.jsonl_path, b"").expect("write");
    let ctx = session(ws.path(), 0);
    for c in [&empty, &ctx] {
        info(c).expect("info");
        let first = ino(c);
        info(c).expect("info");
        assert_eq!(ino(c), first, "unchanged: not rewritten");
    }
    let first = ino(&ctx);
    Writer::open(&ctx, WriterOptions::default()).expect("writer").append(&Message::user("more")).expect("append");
    assert_eq!(info(&ctx).expect("info").messages, 2);
    assert_ne!(ino(&ctx), first, "grown: rewritten");
}

/// The list as it is read without the index: a scan of every log's summary (a limit no workspace reaches).
fn without_index(ws: &Path) -> Vec<SessionInfo> {
    list(ws, &ListOptions { limit: Some(usize::MAX), ..Default::default() }).expect("list")
}

fn index_path(ws: &Path) -> PathBuf {
    ws.join(".PseudoClaude").join(super::super::index::INDEX_FILE_NAME)
}

/// The index with session `id`'s title replaced by `title`: what the list shows when it trusts the row.
fn forge_title(ws: &Path, id: &str, title: &str) {
    let text = fs::read_to_string(index_path(ws)).expect("read the index");
    let forged: String = text
        .lines()
        .map(|l| {
            if l.starts_with(&format!("[\"{id}\"")) {
                let mut row: serde_json::Value = serde_json::from_str(l).expect("a row");
                row[3] = title.into();
                format!("{row}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    fs::write(index_path(ws), forged).expect("write the index");
}

fn titles(list: &[SessionInfo]) -> Vec<(&str, &str, usize)> {
    list.iter().map(|s| (s.id.as_str(), s.title.as_str(), s.messages)).collect()
}

#[test]
fn the_index_is_built_when_missing_and_read_after_giving_the_same_list() {
    let ws = tempfile::tempdir().expect("tempdir");
    let s = sessions(ws.path(), 4);
    meta::append(&s[1], meta::title_entry("named").expect("title")).expect("name one");
    let reference = without_index(ws.path());
    assert_eq!(reference.len(), 4);
    assert!(!index_path(ws.path()).exists());
    assert_eq!(list(ws.path(), &ListOptions::default()).expect("list"), reference, "built from the logs");
    assert!(index_path(ws.path()).exists());
    // read from the index: a row it vouches for is what the list shows (proved by forging one)
    assert_eq!(list(ws.path(), &ListOptions::default()).expect("list"), reference, "read from the index");
    forge_title(ws.path(), &s[2].id, "from the index");
    let listed = list(ws.path(), &ListOptions::default()).expect("list");
    assert_eq!(listed.iter().find(|x| x.id == s[2].id).map(|x| x.title.as_str()), Some("from the index"));
    // the options still apply: excluded, the same order
    let opts = ListOptions { exclude: Some(s[3].id.clone()), ..Default::default() };
    let rest: Vec<&str> = ids_of(&reference).into_iter().filter(|id| *id != s[3].id).collect();
    assert_eq!(ids_of(&list(ws.path(), &opts).expect("list")), rest);
    // deleted: rebuilt from the logs, the forged row gone
    fs::remove_file(index_path(ws.path())).expect("delete the index");
    assert_eq!(list(ws.path(), &ListOptions::default()).expect("list"), reference);
}

#[test]
fn a_damaged_index_is_rebuilt_from_the_logs() {
    let ws = tempfile::tempdir().expect("tempdir");
    sessions(ws.path(), 3);
    let reference = without_index(ws.path());
    list(ws.path(), &ListOptions::default()).expect("list");
    let whole = fs::read(index_path(ws.path())).expect("read the index");
    let damages: [Vec<u8>; 4] = [
        b"not json at all\n".to_vec(),
        whole[..whole.len() - 7].to_vec(),                                 // cut
        whole.iter().map(|&b| if b == b',' { b';' } else { b }).collect(), // a bad row
        Vec::new(),
    ];
    for damaged in damages {
        fs::write(index_path(ws.path()), &damaged).expect("damage the index");
        assert_eq!(list(ws.path(), &ListOptions::default()).expect("list"), reference);
        assert_eq!(fs::read(index_path(ws.path())).expect("rewritten").len(), whole.len(), "rewritten whole");
    }
}

#[test]
fn the_index_is_never_trusted_for_a_session_whose_log_changed_since() {
    let ws = tempfile::tempdir().expect("tempdir");
    let s = sessions(ws.path(), 4);
    list(ws.path(), &ListOptions::default()).expect("build the index");
    // every row forged: only the sessions that changed may lose their forged title
    for c in &s {
        forge_title(ws.path(), &c.id, "forged");
    }
    // another editor appends to s[1] through its writer (which notes it in the activity file)
    let w = Writer::open(&s[1], WriterOptions::default()).expect("writer");
    w.append(&Message::assistant("an answer from elsewhere")).expect("append");
    drop(w);
    // s[0] removed, a new session added
    fs::remove_dir_all(&s[0].dir).expect("remove a session");
    let added = session(ws.path(), 10);
    let listed = list(ws.path(), &ListOptions::default()).expect("list");
    // (s[1], written now, is older than the others' modification times, set in 2027)
    assert_eq!(
        titles(&listed),
        [
            (added.id.as_str(), "session 10", 1),
            (s[3].id.as_str(), "forged", 1),
            (s[2].id.as_str(), "forged", 1),
            (s[1].id.as_str(), "session 1", 2),
        ]
    );
    // with the index deleted: the same sessions in the same order
    fs::remove_file(index_path(ws.path())).expect("delete the index");
    assert_eq!(ids_of(&list(ws.path(), &ListOptions::default()).expect("list")), ids_of(&listed));
    assert_eq!(list(ws.path(), &ListOptions::default()).expect("list"), without_index(ws.path()));
}

#[test]
fn when_the_activity_file_was_replaced_every_row_is_checked_against_its_log() {
    let ws = tempfile::tempdir().expect("tempdir");
    let s = sessions(ws.path(), 3);
    list(ws.path(), &ListOptions::default()).expect("build the index");
    for c in &s {
        forge_title(ws.path(), &c.id, "forged");
    }
    // a log changed by something that does not write the hint, and the hint compacted (a new file)
    let mut f = File::options().append(true).open(&s[0].jsonl_path).expect("open");
    std::io::Write::write_all(&mut f, b"{\"type\":\"nonsense\"}\n").expect("append");
    drop(f);
    let activity = ws.path().join(".PseudoClaude/sessions/activity");
    let compacted: String = s.iter().map(|c| format!("{} 1800000000\n", c.id)).collect();
    assert_ne!(fs::read_to_string(&activity).expect("read the hint"), compacted);
    fs::remove_file(&activity).expect("remove");
    fs::write(&activity, compacted).expect("rewrite the hint");
    let listed = list(ws.path(), &ListOptions::default()).expect("list");
    let changed = listed.iter().find(|x| x.id == s[0].id).expect("listed");
    assert_eq!((changed.title.as_str(), changed.entries), ("session 0", without_index(ws.path())[2].entries));
    assert!(listed.iter().filter(|x| x.id != s[0].id).all(|x| x.title == "forged"), "unchanged logs: the index's rows");
}

#[test]
fn the_indexed_list_names_the_holders_of_locks_taken_since_whether_the_lock_file_is_old_or_new() {
    use std::os::unix::fs::MetadataExt;
    let ws = tempfile::tempdir().expect("tempdir");
    let s = sessions(ws.path(), 3);
    // s[2] has no lock file when its row is made (a folder copied in by hand); its editor creates one later
    fs::remove_file(s[2].lock_path()).expect("remove a lock file");
    let check = ListOptions { check_locks: true, ..Default::default() };
    assert!(list(ws.path(), &check).expect("list").iter().all(|x| x.held_by.is_none()), "nobody holds any");
    assert!(index_path(ws.path()).exists());
    let _held = (lock::acquire(&s[0]).expect("lock"), lock::acquire(&s[2]).expect("lock"));
    // a lock on another file beside them, not a session's: explained (its path), never taken for one
    let other = File::create(ws.path().join("other.lock")).expect("create");
    other.try_lock().expect("lock it");
    let locks = lock::locks().expect("/proc/locks is read");
    let root = Dir::sessions(ws.path()).expect("sessions");
    let device = lock::lock_device(&root).expect("this kernel names the mount (statx STATX_MNT_ID)");
    let ino = fs::metadata(s[0].lock_path()).expect("stat").ino();
    assert!(locks.iter().any(|l| (l.dev, l.ino, l.pid) == (device, ino, std::process::id() as i32)), "{locks:?}");
    // only the sessions whose lock a process holds are asked (other sessions of this machine's tests may be held)
    let held = lock::held_sessions(&locks, Some(device), lock::open_files).expect("every lock explained");
    assert!(held.contains(&s[0].id) && held.contains(&s[2].id) && !held.contains(&s[1].id), "{held:?}");
    let listed = list(ws.path(), &check).expect("list");
    let held: Vec<(&str, bool)> = listed.iter().map(|x| (x.id.as_str(), x.held_by.is_some())).collect();
    assert_eq!(held, [(s[2].id.as_str(), true), (s[1].id.as_str(), false), (s[0].id.as_str(), true)]);
    assert!(listed[0].held_by.as_deref().is_some_and(|h| h.ends_with(": this editor")), "{:?}", listed[0].held_by);
    // the same as a scan of every session's lock
    let scan = list(ws.path(), &ListOptions { limit: Some(usize::MAX), ..check });
    assert_eq!(listed, scan.expect("scan"));
}
