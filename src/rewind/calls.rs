//! Whose changes a checkpoint found: the tool calls of this editor's chats that can change a workspace's files, so
//! that a chat's checkpoint after its own call tells its changes from another chat's made meanwhile.
//!
//! A checkpoint after a tool call finds every change since the last one, by anyone. With one chat, those are its
//! agent's (the rule of [`super::tracker`]). With several chats in one workspace, another chat's call may have run
//! at the same time: a change it may have made is not this chat's to rewind. The rule, per changed path:
//! - another chat's write or edit of that path ran during this call: the other chat's (or both's);
//! - this call was a write or an edit of the path: this chat's;
//! - this call was a command and another chat's command ran during it: either may have made it, so both count it
//!   as the other's, and a rewind in either names it a conflict instead of putting it back.
//!
//! Such a change is kept in the checkpoint with `by: "chat"` ([`crate::session::files::BY_CHAT`]), which a rewind
//! reads as the user's: never put back silently, a conflict when the chat had changed the file before. The calls
//! are known in memory only, for the editor's life: a session resumed later keeps what its checkpoints say.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The calls running or recently run in one workspace.
#[derive(Debug, Default)]
pub struct Board {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Counts begins and ends: the order of events, which is all an overlap needs.
    tick: u64,
    calls: Vec<Call>,
}

#[derive(Debug, Clone)]
struct Call {
    id: u64,
    /// The tracker (one session's) that made it.
    owner: u64,
    started: u64,
    ended: Option<u64>,
    /// `None`: a command, which may change anything; else the paths a write or an edit named.
    paths: Option<Vec<String>>,
}

/// Another chat's calls that ran during one of ours.
#[derive(Debug, Default, PartialEq)]
pub struct Others {
    /// A command of another chat ran.
    pub command: bool,
    /// The paths another chat's writes and edits named.
    pub paths: BTreeSet<String>,
}

impl Others {
    /// Whether `path`, changed during our call, may be another chat's: see the module's rule. `ours`: the paths
    /// our call named (`None`: it was a command).
    pub fn claim(&self, path: &str, ours: Option<&[String]>) -> bool {
        if self.paths.contains(path) {
            return true;
        }
        match ours {
            Some(named) if named.iter().any(|p| p == path) => false,
            _ => self.command,
        }
    }
}

/// A call begun with [`Board::begin`]; [`Begun::end`] it to learn what ran meanwhile. Dropped (the turn was
/// cancelled), it ends all the same, so it never stands for a call still running.
#[derive(Debug)]
pub struct Begun {
    board: Arc<Board>,
    id: u64,
    ended: bool,
}

impl Begun {
    /// The call is over: what other owners' calls ran during it (still running, or ended after it began).
    pub fn end(mut self) -> Others {
        self.ended = true;
        self.board.end(self.id)
    }
}

impl Drop for Begun {
    fn drop(&mut self) {
        if !self.ended {
            self.board.end(self.id);
        }
    }
}

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A new tracker's number on the boards.
pub fn owner() -> u64 {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Board {
    /// The board of `workspace`, shared by every chat of this process working there.
    pub fn of(workspace: &Path) -> Arc<Board> {
        static BOARDS: OnceLock<Mutex<HashMap<PathBuf, Arc<Board>>>> = OnceLock::new();
        let boards = BOARDS.get_or_init(Mutex::default);
        let mut boards = boards.lock().unwrap_or_else(|p| p.into_inner());
        boards.entry(workspace.to_path_buf()).or_default().clone()
    }

    /// A call of `owner` begins: a command (`paths` `None`) or a write or an edit of `paths`.
    pub fn begin(self: &Arc<Self>, owner: u64, paths: Option<Vec<String>>) -> Begun {
        let mut st = lock(&self.state);
        st.tick += 1;
        let started = st.tick;
        st.calls.push(Call { id: started, owner, started, ended: None, paths });
        Begun { board: self.clone(), id: started, ended: false }
    }

    fn end(&self, id: u64) -> Others {
        let mut st = lock(&self.state);
        st.tick += 1;
        let now = st.tick;
        let Some(mine) = st.calls.iter_mut().find(|c| c.id == id) else { return Others::default() };
        mine.ended = Some(now);
        let (owner, started) = (mine.owner, mine.started);
        let mut others = Others::default();
        for c in st.calls.iter().filter(|c| c.owner != owner && c.ended.is_none_or(|e| e > started)) {
            match &c.paths {
                None => others.command = true,
                Some(paths) => others.paths.extend(paths.iter().cloned()),
            }
        }
        // A call that ended before every running one began overlaps nothing that is still to end.
        let oldest = st.calls.iter().filter(|c| c.ended.is_none()).map(|c| c.started).min().unwrap_or(now);
        st.calls.retain(|c| c.ended.is_none_or(|e| e > oldest));
        others
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Option<Vec<String>> {
        Some(p.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn alone_every_change_is_ours() {
        let board = Arc::new(Board::default());
        let call = board.begin(1, None);
        let others = call.end();
        assert_eq!(others, Others::default());
        assert!(!others.claim("a.txt", None));
    }

    #[test]
    fn a_write_of_another_chat_during_our_command_is_theirs_and_the_rest_ours() {
        let board = Arc::new(Board::default());
        let ours = board.begin(1, None);
        let theirs = board.begin(2, paths(&["b.txt"]));
        let _ = theirs.end();
        let others = ours.end();
        assert!(others.claim("b.txt", None));
        assert!(!others.claim("a.txt", None));
    }

    #[test]
    fn two_commands_at_once_leave_every_change_to_neither() {
        let board = Arc::new(Board::default());
        let a = board.begin(1, None);
        let b = board.begin(2, None);
        let from_a = a.end();
        let from_b = b.end();
        assert!(from_a.claim("x", None) && from_b.claim("x", None));
        // our own write is ours even while a command of theirs runs, unless they wrote it too
        assert!(!from_a.claim("mine.txt", paths(&["mine.txt"]).as_deref()));
    }

    #[test]
    fn a_call_that_ended_before_ours_began_is_not_counted() {
        let board = Arc::new(Board::default());
        let theirs = board.begin(2, None);
        let _ = theirs.end();
        let ours = board.begin(1, None);
        assert_eq!(ours.end(), Others::default());
    }
}
