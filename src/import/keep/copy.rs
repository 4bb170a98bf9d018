//! A kept copy's rule: made from its original flattened (`create`), then only ever grown (`update`: the messages the
//! original gained appended after the last `kept` line, the original's rewrites joined to what the copy holds, the
//! one `replace` when its last message grew), and left alone once a chat wrote to it (`tail`).

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{Outcome, REASON_KEPT};
use crate::import::{Conversation, ExternalItem, fold};
use crate::message::{Message, Role, now};
use crate::session::contain::Access;
use crate::session::entry::{Entry, ImportedFrom, KeptState, Kind};
use crate::session::{self, Context, Error, Result, Writer, WriterOptions};

/// Bytes read from the end of a copy's log to find its last `kept` line.
const TAIL_BYTES: u64 = 16 * 1024;

/// The original's conversion, flattened: every segment folded as the loader folds a log, one after the other.
fn flattened(c: &Conversation) -> Vec<Message> {
    c.segments.iter().flat_map(|s| fold(s)).collect()
}

fn read_item(item: &ExternalItem) -> Result<Conversation> {
    crate::import::read_item(item)
}

/// The original's size and time: what says it may have changed. A database in WAL mode (opencode's) changes in its
/// `-wal` file first (the database file only at a checkpoint): both count.
fn stat(path: &Path) -> Result<(u64, i64)> {
    let m = std::fs::metadata(path).map_err(session::io_err("cannot read", path))?;
    let (mut bytes, mut mtime) = (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(w) = std::fs::metadata(&wal) {
        bytes += w.len();
        mtime = mtime.max(w.mtime() * 1_000_000_000 + w.mtime_nsec());
    }
    Ok((bytes, mtime))
}

pub(super) fn create(ws: &Path, item: &ExternalItem) -> Result<Outcome> {
    let (bytes, mtime_ns) = stat(&item.path)?;
    let conv = read_item(item)?;
    let messages = flattened(&conv);
    if messages.is_empty() {
        return Ok(Outcome::Skipped("holds no conversation yet (no user or assistant message)".into()));
    }
    let ctx = Context::new(ws)?;
    let written = (|| {
        let writer = Writer::open(&ctx, WriterOptions { model: conv.model.clone(), ..Default::default() })?;
        let ts = now();
        let logged = messages.iter().map(|m| writer.as_logged(m)).collect::<Result<Vec<_>>>()?;
        let mut first = Entry::replace(crate::import::REASON_IMPORT, logged, ts);
        first.model = conv.model.clone();
        first.imported_from = Some(ImportedFrom {
            source: item.source.as_str().to_string(),
            id: conv.id.clone(),
            path: item.path.to_string_lossy().into_owned(),
            bytes: Some(bytes),
            mtime: Some(mtime_ns.div_euclid(1_000_000_000)),
            kept: true,
        });
        let mut entries = vec![first];
        let title = conv.shown_title();
        if !title.is_empty() {
            entries.push(Entry::title(&title, ts));
        }
        entries.push(Entry::kept(state(item, bytes, mtime_ns, &messages), ts));
        // one write: a copy without its `kept` line would look continued, and never be synced again
        writer.append_entries(entries)?;
        writer.close()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&ctx.dir);
        return Err(e);
    }
    Ok(Outcome::Copied(ctx.id))
}

fn state(item: &ExternalItem, bytes: u64, mtime_ns: i64, messages: &[Message]) -> KeptState {
    KeptState {
        source: item.source.as_str().to_string(),
        id: item.session_id.clone(),
        bytes,
        mtime_ns,
        messages: messages.len(),
        hash: hash(messages),
        hash_head: hash(&messages[..messages.len().saturating_sub(1)]),
    }
}

/// Where a copy's log stands after its last `kept` line.
enum Tail {
    /// Only `title`, `pin` and `kept` lines since: the copy follows its original.
    Kept(KeptState),
    /// A chat wrote to it since (or it has no `kept` line at all): left alone.
    Continued,
}

pub(super) fn update(ctx: &Context, item: &ExternalItem) -> Result<Outcome> {
    let Tail::Kept(last) = tail(ctx)? else { return Ok(Outcome::Continued(ctx.id.clone())) };
    let (bytes, mtime_ns) = stat(&item.path)?;
    if last.bytes == bytes && last.mtime_ns == mtime_ns {
        return Ok(Outcome::Unchanged(ctx.id.clone()));
    }
    let conv = read_item(item)?;
    let new = flattened(&conv);
    let writer = match Writer::open(ctx, WriterOptions::default()) {
        Ok(w) => w,
        Err(Error::Locked { holder, .. }) => {
            return Ok(Outcome::Skipped(format!("its copy {} is open in {holder}: kept at the next sync", ctx.id)));
        }
        Err(e) => return Err(e),
    };
    // the lock is ours now: a chat that wrote meanwhile shows in the tail
    let Tail::Kept(last) = tail(ctx)? else { return Ok(Outcome::Continued(ctx.id.clone())) };
    let n = last.messages;
    let kept = Entry::kept(state(item, bytes, mtime_ns, &new), now());
    if new.len() == n && hash(&new) == last.hash {
        // the file changed, not its conversation (a record that is no message; another session of a database)
        return Ok(Outcome::Unchanged(ctx.id.clone()));
    }
    let grew = if new.len() >= n && hash(&new[..n]) == last.hash {
        // the usual case: the original gained messages at its end
        append(&writer, &new[n..], kept)?
    } else if n > 0 && new.len() >= n && hash(&new[..n - 1]) == last.hash_head {
        // only the last message changed: it grew (read while the agent was writing it), or it was rewritten
        let mut had = session::load(ctx)?.messages;
        match had.last() {
            Some(old) if subsumed(old, &new[n - 1]) => {
                had.pop();
                had.extend_from_slice(&new[n - 1..]);
                let logged = had.iter().map(|m| writer.as_logged(m)).collect::<Result<Vec<_>>>()?;
                writer.append_entries(vec![Entry::replace(REASON_KEPT, logged, now()), kept])?;
                true
            }
            _ => union(ctx, &writer, &new, kept)?,
        }
    } else {
        union(ctx, &writer, &new, kept)?
    };
    writer.close()?;
    Ok(if grew { Outcome::Updated(ctx.id.clone()) } else { Outcome::Unchanged(ctx.id.clone()) })
}

/// Appends `messages` and the `kept` line in one write (one sync). True when there were messages.
fn append(writer: &Writer, messages: &[Message], kept: Entry) -> Result<bool> {
    let Some((last, before)) = messages.split_last() else {
        writer.append_entry(kept)?;
        return Ok(false);
    };
    let before = before.iter().map(|m| writer.as_logged(m).map(Entry::from_message)).collect::<Result<Vec<_>>>()?;
    writer.append_between(before, last, vec![kept])?;
    Ok(true)
}

/// The original was rewritten: what the copy holds stays, and each exchange of the original the copy does not hold
/// (a user or assistant message with the results of its calls) is appended after it, in the original's order.
fn union(ctx: &Context, writer: &Writer, new: &[Message], kept: Entry) -> Result<bool> {
    let had = session::load(ctx)?.messages;
    let held: HashSet<String> = had.iter().map(key).collect();
    let mut add = Vec::new();
    let mut i = 0;
    while i < new.len() {
        let mut j = i + 1;
        while j < new.len() && new[j].tool_result.is_some() {
            j += 1;
        }
        if !held.contains(&key(&new[i])) {
            add.extend_from_slice(&new[i..j]);
        }
        i = j;
    }
    append(writer, &add, kept)
}

/// What makes a message the same message for a sync: who, when, what it says and which calls it makes or answers.
/// A tool result's text is left out (a copy's large results are spilled: its log holds a preview).
fn key(m: &Message) -> String {
    let role = match m.role {
        Role::User => "u",
        Role::Assistant => "a",
        _ => "o",
    };
    let calls: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
    match &m.tool_result {
        Some(r) => format!("{role}\u{1}{}\u{1}r{}\u{1}{}", m.ts, r.tool_call_id, r.is_error),
        None => format!("{role}\u{1}{}\u{1}{}\u{1}{}", m.ts, m.content, calls.join(",")),
    }
}

/// `old` is an earlier form of `new`: the same message, its text and calls only grown.
fn subsumed(old: &Message, new: &Message) -> bool {
    old.role == new.role
        && old.ts == new.ts
        && old.tool_result.is_none()
        && new.tool_result.is_none()
        && new.content.starts_with(&old.content)
        && old.tool_calls.iter().all(|c| new.tool_calls.iter().any(|d| d.id == c.id))
}

fn hash(messages: &[Message]) -> String {
    let mut h = Sha256::new();
    for m in messages {
        h.update(key(m).as_bytes());
        h.update([0u8]);
    }
    h.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The copy's last `kept` state, read from the end of its log.
fn tail(ctx: &Context) -> Result<Tail> {
    let mut f = session::contain::open(ctx, session::CONVERSATION_FILE_NAME, Access::Read)?;
    let len = f.metadata().map_err(session::io_err("cannot read", &ctx.jsonl_path))?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(start)).map_err(session::io_err("cannot read", &ctx.jsonl_path))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(session::io_err("cannot read", &ctx.jsonl_path))?;
    // whole lines only: the first one read may be cut (unless the read started at the file's start), the bytes
    // after the last newline are a torn append
    let end = memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1);
    let from = if start == 0 { 0 } else { memchr::memchr(b'\n', &buf).map_or(buf.len(), |i| i + 1) };
    let text = String::from_utf8_lossy(&buf[from.min(end)..end]);
    for line in text.lines().rev() {
        let Ok(e) = serde_json::from_str::<Entry>(line) else { return Ok(Tail::Continued) };
        match e.kind.as_ref() {
            Some(Kind::Kept) => return Ok(e.kept.map_or(Tail::Continued, Tail::Kept)),
            Some(Kind::Title) | Some(Kind::Pin) => continue,
            _ => return Ok(Tail::Continued),
        }
    }
    Ok(Tail::Continued)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(role: Role, content: &str, ts: i64) -> Message {
        Message { role, content: content.into(), ts, ..Default::default() }
    }

    #[test]
    fn an_answer_read_half_written_is_subsumed_by_its_whole_form() {
        let half = text(Role::Assistant, "Look", 5);
        let whole = text(Role::Assistant, "Looking.", 5);
        assert!(subsumed(&half, &whole));
        assert!(!subsumed(&whole, &half));
        assert!(!subsumed(&half, &text(Role::Assistant, "Looking.", 6)));
    }

    #[test]
    fn the_hash_of_the_keys_tells_a_rewritten_message_apart() {
        let a = vec![text(Role::User, "hi", 1), text(Role::Assistant, "hello", 2)];
        let b = vec![text(Role::User, "hi", 1), text(Role::Assistant, "hullo", 2)];
        assert_eq!(hash(&a), hash(&a.clone()));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a[..1]), hash(&b[..1]));
    }
}
