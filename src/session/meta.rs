//! A session's name and pin, kept as entries of its own log (`title`, `pin`; last one wins), so they
//! travel with the folder and survive the loss of `summary.json`.
//!
//! A log has one writer ([`super::lock`]): the current session's entries go through its agent's
//! writer (see `SessionLog::append_meta` in `src/agent/mod.rs`); [`append`] is for any other session,
//! which it opens under the lock, refusing one that another editor holds.

use super::contain::{Access, Dir};
use super::entry::Entry;
use super::list::{self, SessionInfo};
use super::{CONVERSATION_FILE_NAME, Context, Error, Result, Writer, WriterOptions};
use crate::message::now;

/// The longest name accepted, in characters.
pub const NAME_MAX_CHARS: usize = 200;

/// The `title` entry naming a session `title`: one line (white space runs become one space, so a
/// pasted name with a newline stays one row), at most [`NAME_MAX_CHARS`] characters. An empty or
/// blank `title` returns the session to its automatic title.
pub fn title_entry(title: &str) -> Result<Entry> {
    let name = super::replay::clean_title(title);
    let chars = name.chars().count();
    if chars > NAME_MAX_CHARS {
        return Err(Error::Invalid(format!("the title is too long: {chars} characters, at most {NAME_MAX_CHARS}")));
    }
    Ok(Entry::title(&name, now()))
}

/// The `pin` entry.
pub fn pin_entry(pinned: bool) -> Entry {
    Entry::pin(pinned, now())
}

/// Appends `entry` to the log of session `ctx` (not this editor's current one), under its lock: one
/// line, synced, then the lock is released. Refused while another editor holds the session, and for a
/// folder without a log (there is nothing to name). Returns the session's list entry as it is now.
pub fn append(ctx: &Context, entry: Entry) -> Result<SessionInfo> {
    match Dir::session(ctx)?.open(CONVERSATION_FILE_NAME, Access::Read) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {
            return Err(Error::Invalid(format!("session {} has no log yet: there is nothing to name or pin", ctx.id)));
        }
        Err(e) => return Err(e),
    }
    // No model: the writer writes it on its first entry, and this one is not the session's.
    let writer = Writer::open(ctx, WriterOptions::default())?;
    let hint = entry.pinned;
    writer.append_entry(entry)?;
    writer.close()?;
    if let Some(pinned) = hint {
        noted_pin(ctx, pinned);
    }
    list::info(ctx)
}

/// After a `pin` entry is on disk (whoever wrote it): tells the list's hint ([`super::pins`]).
pub fn noted_pin(ctx: &Context, pinned: bool) {
    if let Some(root) =
        ctx.dir.parent().and_then(|d| d.parent()).and_then(|d| d.parent()).and_then(|ws| Dir::sessions(ws).ok())
    {
        super::pins::record(&root, &ctx.id, pinned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    fn session(ws: &std::path::Path) -> Context {
        let ctx = Context::new(ws).expect("context");
        let w = Writer::open(&ctx, WriterOptions { model: "m1".into(), ..Default::default() }).expect("writer");
        w.append(&Message::user("fix the parser")).expect("append");
        w.append(&Message::assistant("ok")).expect("append");
        ctx
    }

    #[test]
    fn a_name_shows_in_the_list_at_once_and_an_empty_one_gives_the_automatic_title_back() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session(ws.path());
        assert_eq!(list::info(&ctx).expect("info").title, "fix the parser"); // caches the summary
        let info = append(&ctx, title_entry("  Parser\n work ").expect("entry")).expect("append");
        assert_eq!((info.title.as_str(), info.messages), ("Parser work", 2));
        let info = append(&ctx, pin_entry(true)).expect("pin");
        assert!(info.pinned);
        std::fs::remove_file(ctx.summary_path()).expect("cache removed");
        let info = list::info(&ctx).expect("info");
        assert_eq!((info.title.as_str(), info.pinned), ("Parser work", true));
        let info = append(&ctx, title_entry("").expect("entry")).expect("append");
        assert_eq!(info.title, "fix the parser");
        assert_eq!(super::super::load(&ctx).expect("load").messages.len(), 2);
    }

    #[test]
    fn a_cache_written_before_names_existed_does_not_hide_one() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session(ws.path());
        append(&ctx, title_entry("Named").expect("entry")).expect("append");
        // What the previous version left: the same state up to the same offset, without the name.
        let mut cache: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ctx.summary_path()).expect("cache")).expect("json");
        assert_eq!(cache["state"]["name"], "Named");
        cache["version"] = 2.into();
        cache["state"].as_object_mut().expect("state").remove("name");
        std::fs::write(ctx.summary_path(), serde_json::to_vec(&cache).expect("encode")).expect("write");
        assert_eq!(list::info(&ctx).expect("info").title, "Named");
    }

    #[test]
    fn a_limited_list_finds_an_old_pinned_session_through_the_hint() {
        let ws = tempfile::tempdir().expect("tempdir");
        let old = session(ws.path());
        append(&old, pin_entry(true)).expect("pin");
        let unpinned = session(ws.path());
        append(&unpinned, pin_entry(true)).expect("pin");
        append(&unpinned, pin_entry(false)).expect("unpin");
        let newer: Vec<Context> = (0..3).map(|_| session(ws.path())).collect();
        let ids = |opts: &list::ListOptions| -> Vec<String> {
            list::list(ws.path(), opts).expect("list").into_iter().map(|s| s.id).collect()
        };
        let limited = |include_pinned| list::ListOptions { limit: Some(2), include_pinned, ..Default::default() };
        assert_eq!(ids(&limited(true)), [old.id.clone(), newer[2].id.clone()]);
        // `:PseudoResume last` wants the newest, pinned or not
        assert_eq!(ids(&limited(false)), [newer[2].id.clone(), newer[1].id.clone()]);
        assert_eq!(ids(&list::ListOptions::default())[0], old.id, "the full list: pinned first");
        // the hint is only a hint: a log that says unpinned wins over it
        let w = Writer::open(&old, WriterOptions::default()).expect("writer");
        w.append_entry(pin_entry(false)).expect("unpin behind the hint's back");
        drop(w);
        let again = session(ws.path());
        assert_eq!(ids(&limited(true)), [again.id.clone(), old.id.clone()]);
    }

    #[test]
    fn a_held_session_and_an_overlong_name_are_refused() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session(ws.path());
        let before = std::fs::read(&ctx.jsonl_path).expect("read");
        let guard = super::super::lock::acquire(&ctx).expect("lock");
        let err = append(&ctx, pin_entry(true)).unwrap_err();
        assert!(err.to_string().contains("open in another editor"), "{err}");
        drop(guard);
        let err = title_entry(&"x".repeat(NAME_MAX_CHARS + 1)).unwrap_err();
        assert!(err.to_string().contains("too long: 201 characters"), "{err}");
        assert_eq!(std::fs::read(&ctx.jsonl_path).expect("read"), before);
        let empty = Context::new(ws.path()).expect("context");
        let err = append(&empty, pin_entry(true)).unwrap_err();
        assert!(err.to_string().contains("has no log yet"), "{err}");
        assert!(!empty.jsonl_path.exists());
    }

    #[test]
    fn a_name_of_exactly_the_limit_is_taken() {
        let longest = "é".repeat(NAME_MAX_CHARS);
        assert_eq!(title_entry(&longest).expect("at the limit").title.as_deref(), Some(longest.as_str()));
    }

    #[test]
    fn a_log_that_cannot_be_opened_is_reported_as_it_is_not_as_a_missing_one() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = session(ws.path());
        let elsewhere = ws.path().join("elsewhere.jsonl");
        std::fs::rename(&ctx.jsonl_path, &elsewhere).expect("move the log");
        std::os::unix::fs::symlink(&elsewhere, &ctx.jsonl_path).expect("symlink");
        let before = std::fs::read(&elsewhere).expect("read");
        let err = append(&ctx, pin_entry(true)).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(!err.to_string().contains("has no log yet"), "{err}");
        assert_eq!(std::fs::read(&elsewhere).expect("read"), before, "never written through");
    }
}
