//! Forking a session at a message: a new session whose history is the source's first messages.
//!
//! The fork's log starts with one line, a `replace` (reason `fork`) holding the whole history and
//! `forked_from = {id, index}`: like any line it is on disk whole or not at all, so a fork is either
//! complete or absent. Its spilled tool results are copied into the fork's own `tool-results/`
//! (content-addressed, synced before the line that names them), so deleting the source loses the fork
//! nothing. The source is only read: its folder is not written to, not even its `summary.json`.
//!
//! A fork of a session an ACP agent ran is that agent's too: a `meta` entry after the first names it, without its
//! session id (the fork's first start makes one), and with `fork_of` the source's id in the agent when the fork takes
//! the whole history (the agent can fork its own session then; an earlier cut is told our transcript instead).
//!
//! The history is cut where no tool exchange is split: a fork at a tool call (or at one of its results)
//! takes every result of that call; a call whose results are not all there yet (a turn still running
//! tools) is left out with them. So the fork is valid for every provider, as a load is.

use std::borrow::Borrow;
use std::path::Path;

use serde::Serialize;

use super::entry::{AgentMeta, Entry, ForkedFrom};
use super::{Context, Error, Result, Writer, WriterOptions, load, spill};
use crate::message::{Message, now};

/// A fork just made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Forked {
    pub id: String,
    /// Messages in the fork's history.
    pub messages: usize,
    pub forked_from: ForkedFrom,
}

/// Forks session `id` of `workspace` at message `index` (1-based, in `load(id).messages`; `None`: at
/// its end).
pub fn fork(workspace: &Path, id: &str, index: Option<usize>) -> Result<Forked> {
    let source = Context::open(workspace, id)?;
    let loaded = load(&source)?;
    let index = index.unwrap_or(loaded.messages.len());
    create(workspace, &source, &loaded.messages, index, &loaded.model, loaded.agent.as_ref())
}

/// Makes a new session of `workspace` holding `history[..index]` of session `source` (extended or cut
/// to whole tool exchanges), its first entry naming `model`; `agent`: the ACP agent the source ran.
pub fn create<M: Borrow<Message>>(
    workspace: &Path,
    source: &Context,
    history: &[M],
    index: usize,
    model: &str,
    agent: Option<&AgentMeta>,
) -> Result<Forked> {
    let len = history.len();
    if len == 0 {
        return Err(Error::Invalid(format!("session {} has no message to fork", source.id)));
    }
    if index == 0 || index > len {
        return Err(Error::Invalid(format!(
            "message {index} is out of range: session {} has {len} message(s), numbered 1 to {len}",
            source.id
        )));
    }
    let end = whole_exchanges(history, index);
    if end == 0 {
        return Err(Error::Invalid(format!(
            "session {} cannot be forked at message {index}: its tool call there has no result yet",
            source.id
        )));
    }
    let ctx = Context::new(workspace)?;
    let from = ForkedFrom { id: source.id.clone(), index: end };
    let agent = agent.map(|a| AgentMeta {
        name: a.name.clone(),
        version: a.version.clone(),
        fork_of: if end == len { a.session_id.clone() } else { String::new() },
        session_id: String::new(),
    });
    let written = write(&ctx, source, &history[..end], from.clone(), model, agent);
    if let Err(e) = written {
        // Nothing half made stays behind: the folder holds at most a cut-back log and copied spills.
        let _ = std::fs::remove_dir_all(&ctx.dir);
        return Err(e);
    }
    Ok(Forked { id: ctx.id, messages: end, forked_from: from })
}

fn write<M: Borrow<Message>>(
    ctx: &Context,
    source: &Context,
    history: &[M],
    from: ForkedFrom,
    model: &str,
    agent: Option<AgentMeta>,
) -> Result<()> {
    let mut messages = Vec::with_capacity(history.len());
    for m in history {
        let mut m = m.borrow().clone();
        if let Some(r) = &mut m.tool_result
            && let Some(s) = r.spill.clone()
        {
            if spill::verify(source, &s).is_ok() {
                spill::write(ctx, spill::read(source, &s)?.as_bytes())?;
            } else {
                // The loader already put a placeholder saying so in `content`; the fork keeps that,
                // not a reference to a file it does not have.
                r.spill = None;
            }
        }
        messages.push(m);
    }
    let writer = Writer::open(ctx, WriterOptions { model: model.to_string(), ..Default::default() })?;
    writer.append_entry(Entry::fork(messages, from, now()))?;
    if let Some(agent) = agent {
        writer.append_entry(Entry::meta_agent(agent, now()))?;
    }
    writer.close()
}

/// Where a history cut after message `index` (1-based) ends once no tool exchange is split: past
/// the remaining results of a call, or, when that call is not fully answered, before the call.
pub fn whole_exchanges<M: Borrow<Message>>(history: &[M], index: usize) -> usize {
    let msg = |i: usize| history[i].borrow();
    let mut end = index.min(history.len());
    while end < history.len() && msg(end).tool_result.is_some() {
        end += 1;
    }
    let mut start = end;
    while start > 0 && msg(start - 1).tool_result.is_some() {
        start -= 1;
    }
    if start == 0 {
        return end;
    }
    let call = msg(start - 1);
    if call.tool_calls.is_empty() {
        return end;
    }
    let answered = |id: &str| (start..end).any(|i| msg(i).tool_result.as_ref().is_some_and(|r| r.tool_call_id == id));
    if call.tool_calls.iter().all(|c| answered(&c.id)) { end } else { start - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use serde_json::json;

    fn calls(ids: &[&str]) -> Message {
        Message::assistant_tool_calls("", ids.iter().map(|i| ToolCall::new(*i, "grep", json!({}))).collect())
    }

    #[test]
    fn a_cut_never_splits_a_tool_exchange() {
        let h = vec![
            Message::user("hi"),                   // 1
            calls(&["a", "b"]),                    // 2
            Message::tool_result("a", "x", false), // 3
            Message::tool_result("b", "y", false), // 4
            Message::assistant("done"),            // 5
            calls(&["c"]),                         // 6
        ];
        assert_eq!([1, 2, 3, 4, 5].map(|i| whole_exchanges(&h, i)), [1, 4, 4, 4, 5]);
        // The last call has no result yet (its tool is running): cut before it.
        assert_eq!(whole_exchanges(&h, 6), 5);
        assert_eq!(whole_exchanges(&h[..3], 2), 1);
        // results with no call before them (a hand-made history): nothing to keep whole
        let orphans = [Message::tool_result("z", "x", false), Message::user("hi")];
        assert_eq!([0, 1, 2].map(|i| whole_exchanges(&orphans, i)), [1, 1, 2]);
    }

    #[test]
    fn a_fork_takes_any_message_from_the_first_to_the_last() {
        let ws = tempfile::tempdir().expect("tempdir");
        let source = Context::new(ws.path()).expect("context");
        let h = [Message::user("one"), Message::assistant("two"), Message::user("three")];
        for (index, kept) in [(1, 1), (3, 3)] {
            let forked = create(ws.path(), &source, &h, index, "m1", None).expect("fork");
            assert_eq!((forked.messages, forked.forked_from.index), (kept, kept));
            let loaded = load(&Context::open(ws.path(), &forked.id).expect("open")).expect("load");
            assert_eq!(loaded.messages.len(), kept);
            assert_eq!(loaded.messages[kept - 1].content, h[kept - 1].content);
        }
        for index in [0, 4] {
            let err = create(ws.path(), &source, &h, index, "m1", None).unwrap_err().to_string();
            assert!(
                err.contains(&format!("message {index} is out of range")) && err.contains("numbered 1 to 3"),
                "{err}"
            );
        }
        let none: [Message; 0] = [];
        let err = create(ws.path(), &source, &none, 1, "m1", None).unwrap_err().to_string();
        assert!(err.contains("has no message to fork"), "{err}");
    }

    #[test]
    fn a_fork_of_an_acp_session_runs_its_agent_and_forks_its_session_only_when_whole() {
        let ws = tempfile::tempdir().expect("tempdir");
        let source = Context::new(ws.path()).expect("context");
        let h = [Message::user("one"), Message::assistant("two"), Message::user("three"), Message::assistant("4")];
        let ran = AgentMeta {
            name: "claude".into(),
            session_id: "s-1".into(),
            version: "0.23.1".into(),
            ..Default::default()
        };
        for (index, fork_of) in [(2, ""), (4, "s-1")] {
            let forked = create(ws.path(), &source, &h, index, "claude", Some(&ran)).expect("fork");
            let agent = load(&Context::open(ws.path(), &forked.id).expect("open")).expect("load").agent.expect("agent");
            assert_eq!(
                (agent.name.as_str(), agent.session_id.as_str(), agent.fork_of.as_str()),
                ("claude", "", fork_of)
            );
        }
    }
}
