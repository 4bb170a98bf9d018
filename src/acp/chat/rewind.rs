//! An ACP chat's rewind: the files as our agent's are put back, and the agent's own session left behind when the
//! conversation is rewound (returned to by an undo).

use std::sync::atomic::Ordering;

use super::AcpChat;
use crate::agent::lock;
use crate::message::now;
use crate::rewind::{Report, RewindOptions};
use crate::session::Entry;
use crate::session::entry::AgentMeta;

impl AcpChat {
    /// Rewinds to just before user message `index`: the files as [`crate::agent::rewind::FileCheckpoints::rewind`] does for ours (what
    /// the agent's own tools and shell did included: the checkpoints scan the workspace). A conversation rewound
    /// leaves the agent's own session behind (it remembers what was cut): the agent is stopped, the log's meta
    /// forgets its session id, and the next message starts a new session told our transcript up to that message.
    /// Blocking: call it on a blocking thread, with no turn running.
    pub fn rewind(&self, index: usize, opts: &RewindOptions) -> Report {
        let report = self.files.rewind(index, opts);
        let rewound_conversation = opts.conversation && !opts.dry_run && report.ok;
        let left = if rewound_conversation { self.leave_agent_session() } else { None };
        if rewound_conversation {
            lock(&self.pending).clear();
        }
        if !opts.dry_run && report.ok {
            // the undo of this rewind is the one kept: it returns to the agent's session only if this one left it
            *lock(&self.rewound_agent) = left;
        }
        report
    }

    /// Undoes the last rewind (files and conversation); a conversation comes back with the agent's session it had.
    /// Blocking.
    pub fn undo_rewind(&self, opts: &RewindOptions) -> Report {
        let report = self.files.undo_rewind(opts);
        if report.ok
            && let Some(old) = lock(&self.rewound_agent).take()
        {
            self.drop_live();
            *lock(&self.agent) = Some(old.clone());
            self.tell_history.store(false, Ordering::SeqCst);
            let _ = self.log.append_meta(Entry::meta_agent(old, now()));
        }
        report
    }

    /// The pending undo of the last rewind, if no message came since.
    pub fn undo_info(&self) -> Option<(String, i64)> {
        self.files.undo_info()
    }

    /// The agent's changes per turn of this session (its tools' and its shell's).
    pub fn changes(&self) -> Vec<crate::rewind::TurnChanges> {
        self.files.changes()
    }

    /// The agent is stopped and its session forgotten (logged: a resume does not load it); returns what it was.
    fn leave_agent_session(&self) -> Option<AgentMeta> {
        self.drop_live();
        let old = lock(&self.agent).clone().filter(|a| !a.session_id.is_empty())?;
        let meta = AgentMeta { session_id: String::new(), ..old.clone() };
        *lock(&self.agent) = Some(meta.clone());
        let _ = self.log.append_meta(Entry::meta_agent(meta, now()));
        Some(old)
    }
}
