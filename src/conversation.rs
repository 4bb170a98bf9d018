//! The message sequence the model reads next, and the hooks that put each change on disk.
//!
//! As in the seed, every add fires `on_append` and a whole-context replacement fires `on_replace`,
//! synchronously, after the message lock is released (no IO under it, no re-entrancy deadlock). Past
//! the seed, hooks return `Result`: a failed write marks the conversation unsaved and the error goes
//! back to the caller (the runner stops the turn and the user sees it); the next successful write is
//! one complete snapshot (`replace` with reason `resync`), so once the disk is back nothing in memory
//! is missing from the log.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::message::{Message, ToolCall, ToolResult};

/// Why a hook could not persist a change: the session log's own error (a full disk, a lock lost), kept whole
/// so its sources reach the log file, while the conversation knows nothing of the session module.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;
/// Persists one new message.
pub type OnAppend = Box<dyn Fn(&Message) -> Result<(), HookError> + Send + Sync>;
/// Persists a whole new context, with the reason (`compact`, `resync`, ...).
pub type OnReplace = Box<dyn Fn(&str, &[Message]) -> Result<(), HookError> + Send + Sync>;

/// Persists changes. The seed's two hooks; the session writer is the real one, tests inject others.
pub struct Hooks {
    pub on_append: OnAppend,
    pub on_replace: OnReplace,
}

impl Hooks {
    /// Hooks that persist nothing (a conversation nobody logs, e.g. a summarisation request).
    pub fn none() -> Hooks {
        Hooks { on_append: Box::new(|_| Ok(())), on_replace: Box::new(|_, _| Ok(())) }
    }
}

pub const REASON_RESYNC: &str = "resync";

/// A failed hook: the change is in memory but not on disk (yet).
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the session log could not be written: {0} (the conversation is kept in memory and will be saved whole on the \
     next successful write)"
)]
pub struct Unsaved(#[source] pub Arc<dyn std::error::Error + Send + Sync>);

impl Unsaved {
    pub fn new(e: impl Into<HookError>) -> Unsaved {
        Unsaved(Arc::from(e.into()))
    }
}

pub struct Conversation {
    messages: Mutex<Vec<Message>>,
    /// Held across a whole add (memory + hook) so the log's order is memory's order; never held
    /// by readers, so a snapshot never waits on the disk.
    persist: Mutex<State>,
    hooks: Hooks,
}

struct State {
    unsaved: bool,
}

impl Conversation {
    pub fn new(hooks: Hooks) -> Arc<Conversation> {
        Conversation::from_messages(Vec::new(), hooks)
    }

    /// Rebuilds a conversation from a loaded log (resume). Fires no hook: it is already on disk.
    pub fn from_messages(messages: Vec<Message>, hooks: Hooks) -> Arc<Conversation> {
        Arc::new(Conversation { messages: Mutex::new(messages), persist: Mutex::new(State { unsaved: false }), hooks })
    }

    pub fn add_user(&self, text: impl Into<String>) -> Result<(), Unsaved> {
        self.add(Message::user(text))
    }

    pub fn add_assistant(&self, text: impl Into<String>) -> Result<(), Unsaved> {
        self.add(Message::assistant(text))
    }

    pub fn add_assistant_tool_calls(&self, text: impl Into<String>, calls: Vec<ToolCall>) -> Result<(), Unsaved> {
        self.add(Message::assistant_tool_calls(text, calls))
    }

    pub fn add_tool_result(&self, result: ToolResult) -> Result<(), Unsaved> {
        let mut m = Message::tool_result("", "", false);
        m.tool_result = Some(result);
        self.add(m)
    }

    /// Appends a message and persists it (or, after a failure, the whole conversation).
    pub fn add(&self, m: Message) -> Result<(), Unsaved> {
        let mut state = lock(&self.persist);
        let resync = {
            let mut msgs = lock(&self.messages);
            msgs.push(m.clone());
            state.unsaved.then(|| msgs.clone())
        };
        let written = match &resync {
            Some(all) => (self.hooks.on_replace)(REASON_RESYNC, all),
            None => (self.hooks.on_append)(&m),
        };
        settle(&mut state, written)
    }

    /// Replaces the whole context (compaction) and persists it as one snapshot.
    pub fn replace(&self, reason: &str, messages: Vec<Message>) -> Result<(), Unsaved> {
        let mut state = lock(&self.persist);
        *lock(&self.messages) = messages.clone();
        let written = (self.hooks.on_replace)(reason, &messages);
        settle(&mut state, written)
    }

    /// A copy of the messages: callers can keep it while the conversation moves on.
    pub fn snapshot(&self) -> Vec<Message> {
        lock(&self.messages).clone()
    }

    /// Reads the messages in place, without copying them (a slice of a 100 MiB history for the screen).
    pub fn with_messages<T>(&self, f: impl FnOnce(&[Message]) -> T) -> T {
        f(&lock(&self.messages))
    }

    pub fn len(&self) -> usize {
        lock(&self.messages).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True while something in memory is not in the log.
    pub fn is_unsaved(&self) -> bool {
        lock(&self.persist).unsaved
    }
}

fn settle(state: &mut State, written: Result<(), HookError>) -> Result<(), Unsaved> {
    match written {
        Ok(()) => {
            state.unsaved = false;
            Ok(())
        }
        Err(e) => {
            state.unsaved = true;
            Err(Unsaved::new(e))
        }
    }
}

/// A poisoned lock only means another thread panicked mid-update of plain data; keep going.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    type Log = Arc<Mutex<Vec<String>>>;

    fn recording(fail: Arc<AtomicBool>) -> (Hooks, Log) {
        let log: Log = Arc::default();
        let (l1, l2, f1, f2) = (log.clone(), log.clone(), fail.clone(), fail);
        let hooks = Hooks {
            on_append: Box::new(move |m| {
                if f1.load(Ordering::SeqCst) {
                    return Err("disk full".into());
                }
                l1.lock().unwrap().push(format!("append {}", m.content));
                Ok(())
            }),
            on_replace: Box::new(move |reason, msgs| {
                if f2.load(Ordering::SeqCst) {
                    return Err("disk full".into());
                }
                let all: Vec<_> = msgs.iter().map(|m| m.content.as_str()).collect();
                l2.lock().unwrap().push(format!("replace {reason} {}", all.join(",")));
                Ok(())
            }),
        };
        (hooks, log)
    }

    #[test]
    fn a_failed_write_marks_unsaved_and_the_next_write_resyncs_everything() {
        let fail = Arc::new(AtomicBool::new(false));
        let (hooks, log) = recording(fail.clone());
        let c = Conversation::new(hooks);
        c.add_user("a").unwrap();
        fail.store(true, Ordering::SeqCst);
        let err = c.add_assistant("b").unwrap_err();
        assert!(err.to_string().contains("disk full"));
        assert!(c.is_unsaved());
        assert_eq!(c.len(), 2, "what the user saw stays in memory");
        assert!(c.add_user("c").is_err());
        fail.store(false, Ordering::SeqCst);
        c.add_assistant("d").unwrap();
        assert!(!c.is_unsaved());
        assert_eq!(*log.lock().unwrap(), ["append a", "replace resync a,b,c,d"]);
        c.add_user("e").unwrap();
        assert_eq!(log.lock().unwrap().last().unwrap(), "append e");
    }

    #[test]
    fn snapshots_are_copies() {
        let c = Conversation::new(Hooks::none());
        assert!(c.is_empty());
        c.add_user("a").unwrap();
        assert!(!c.is_empty());
        let mut snap = c.snapshot();
        snap[0].content = "changed".into();
        snap.push(Message::user("x"));
        assert_eq!(c.snapshot()[0].content, "a");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn hooks_run_outside_the_message_lock() {
        // A hook that reads the conversation would deadlock if the message lock were held.
        let c: Arc<Mutex<Option<Arc<Conversation>>>> = Arc::default();
        let c2 = c.clone();
        let hooks = Hooks {
            on_append: Box::new(move |_| {
                let n = c2.lock().unwrap().as_ref().map(|c| c.snapshot().len());
                assert_eq!(n, Some(1));
                Ok(())
            }),
            on_replace: Box::new(|_, _| Ok(())),
        };
        let conv = Conversation::new(hooks);
        *c.lock().unwrap() = Some(conv.clone());
        conv.add_user("a").unwrap();
    }
}
