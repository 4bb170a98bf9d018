//! Another agent's session handed back to it (issue 46 item 3), through the core's API: which session of ours it
//! becomes (a new import, the untouched copy already here, the one handed over before, never a copy our own agent went
//! on with), what its log records (the import, then the agent's session as a `meta` entry), which way it goes on (the
//! agent, not installed, our own agent), one row in the list, and the byte copies of an agent whose load loses files.
//! The real agents loading them: tests/e2e/test_continue.py.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use pseudoclaude::acp::AgentSpec;
use pseudoclaude::acp::handover::{self, Way};
use pseudoclaude::import::{self, Homes};
use pseudoclaude::message::Message;
use pseudoclaude::session::{self, Context, ListOptions, Writer, WriterOptions};
use serde_json::json;

const ID: &str = "abcdef12-3456-7890-abcd-ef1234567890";

/// A Claude Code transcript of session `ID` recorded in `ws`: one exchange.
fn transcript(ws: &Path) -> String {
    let cwd = ws.canonicalize().unwrap();
    let rec = |kind: &str, uuid: &str, parent: Option<&str>, message: serde_json::Value| {
        json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": ID, "cwd": cwd, "version": "2.0.0",
               "isSidechain": false, "timestamp": "2026-11-30T10:00:00.000Z", "message": message})
        .to_string()
            + "\n"
    };
    rec("user", "u1", None, json!({"role": "user", "content": "remember PLUMTREE"}))
        + &rec(
            "assistant",
            "a1",
            Some("u1"),
            json!({"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                   "content": [{"type": "text", "text": "PLUMTREE, noted."}]}),
        )
}

/// The transcript where Claude Code keeps it, under `home` (its `$CLAUDE_CONFIG_DIR`).
fn claude_file(home: &Path, ws: &Path, name: &str) -> PathBuf {
    let folder = import::claude_code::folder_name(&ws.canonicalize().unwrap());
    let path = home.join("projects").join(folder).join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, transcript(ws)).unwrap();
    path
}

/// `agents` with `name` run by `command`.
fn agents(name: &str, command: &str) -> BTreeMap<String, AgentSpec> {
    BTreeMap::from([(name.to_string(), AgentSpec { command: command.into(), ..Default::default() })])
}

fn homes(home: &Path) -> Homes {
    Homes { claude: Some(home.to_path_buf()), ..Default::default() }
}

fn ours(ws: &Path) -> Vec<session::SessionInfo> {
    session::list(ws, &ListOptions::default()).unwrap()
}

#[test]
fn a_handed_over_session_is_the_agents_its_messages_imported_and_the_same_one_next_time() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = claude_file(home.path(), ws.path(), &format!("{ID}.jsonl"));
    let before = fs::read(&path).unwrap();
    let found = agents("claude", "/bin/true");
    let h = handover::hand_over(ws.path(), &path, "claude", &found).unwrap();
    assert_eq!((h.way, h.agent.as_deref(), h.messages, h.existing), (Way::Agent, Some("claude"), 2, false));
    assert!(h.message.contains("Claude Code session abcdef12: continued by claude"), "{}", h.message);
    let loaded = session::load(&Context::open(ws.path(), &h.id).unwrap()).unwrap();
    let agent = loaded.agent.expect("the agent's session recorded");
    assert_eq!((agent.name.as_str(), agent.session_id.as_str()), ("claude", ID));
    let from = loaded.imported_from.expect("marked imported");
    assert_eq!((from.source.as_str(), from.id.as_str()), ("claude-code", ID));
    assert_eq!(
        loaded.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["remember PLUMTREE", "PLUMTREE, noted."]
    );
    // the original is only read
    assert_eq!(fs::read(&path).unwrap(), before);

    // again, by its file or by the agent's id of it: the same session, nothing added
    let entries = loaded.entries;
    let again = handover::hand_over(ws.path(), &path, "claude", &found).unwrap();
    assert_eq!((again.id.as_str(), again.existing), (h.id.as_str(), true));
    let by_id = handover::hand_over_id(ws.path(), &format!("claude:{ID}"), &found, &homes(home.path())).unwrap();
    assert_eq!((by_id.id.as_str(), by_id.way), (h.id.as_str(), Way::Agent));
    assert_eq!(session::load(&Context::open(ws.path(), &h.id).unwrap()).unwrap().entries, entries);
    assert_eq!(ours(ws.path()).len(), 1);

    // one row: the agent's own transcript of it is not listed beside ours
    let theirs = import::list(ws.path(), &homes(home.path()));
    assert_eq!(theirs.iter().map(|t| t.session_id.as_str()).collect::<Vec<_>>(), [ID]);
    assert!(import::list::without_ours(theirs, &ours(ws.path())).is_empty());
}

#[test]
fn an_untouched_import_is_handed_over_itself_and_one_our_agent_went_on_with_is_left_alone() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = claude_file(home.path(), ws.path(), &format!("{ID}.jsonl"));
    let found = agents("claude", "/bin/true");
    // an import nobody continued: it is the copy handed over
    let untouched = import::import(ws.path(), &path).unwrap();
    let h = handover::hand_over(ws.path(), &path, "claude", &found).unwrap();
    assert_eq!((h.id.as_str(), h.existing), (untouched.id.as_str(), true));

    // an import our own agent went on with: the agent's session lacks that, so a new copy is handed over
    let ws2 = tempfile::tempdir().unwrap();
    let path2 = claude_file(home.path(), ws2.path(), &format!("{ID}.jsonl"));
    let continued = import::import(ws2.path(), &path2).unwrap();
    let ctx = Context::open(ws2.path(), &continued.id).unwrap();
    let w = Writer::open(&ctx, WriterOptions::default()).unwrap();
    w.append(&Message::user("and one more thing")).unwrap();
    w.append(&Message::assistant("ours")).unwrap();
    w.close().unwrap();
    let h2 = handover::hand_over(ws2.path(), &path2, "claude", &found).unwrap();
    assert_ne!(h2.id, continued.id);
    assert_eq!(h2.messages, 2);
    assert!(session::load(&ctx).unwrap().agent.is_none(), "the session our agent went on with is untouched");
}

#[test]
fn an_agent_not_installed_is_said_with_how_and_no_agent_of_that_name_leaves_it_to_ours() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = claude_file(home.path(), ws.path(), &format!("{ID}.jsonl"));
    let h = handover::hand_over(ws.path(), &path, "claude", &agents("claude", "no-such-claude-acp")).unwrap();
    assert_eq!((h.way, h.agent.as_deref()), (Way::NotInstalled, Some("claude")));
    assert!(h.message.contains("\"no-such-claude-acp\" is not installed"), "{}", h.message);
    // still the agent's session: once installed, its start loads it
    let loaded = session::load(&Context::open(ws.path(), &h.id).unwrap()).unwrap();
    assert_eq!(loaded.agent.map(|a| a.session_id), Some(ID.to_string()));
    // a built-in agent's command not on PATH says how to install it
    let builtin = handover::hand_over(ws.path(), &path, "claude", &BTreeMap::new()).unwrap();
    if builtin.way == Way::NotInstalled {
        assert!(builtin.message.contains("npm install -g @zed-industries/claude-agent-acp"), "{}", builtin.message);
    }

    let ws2 = tempfile::tempdir().unwrap();
    let path2 = claude_file(home.path(), ws2.path(), &format!("{ID}.jsonl"));
    let h2 = handover::hand_over(ws2.path(), &path2, "nobody", &BTreeMap::new()).unwrap();
    assert_eq!((h2.way, h2.agent.as_deref()), (Way::Ours, None));
    assert!(h2.message.contains("our own agent") && h2.message.contains("no agent named \"nobody\""), "{}", h2.message);
    let loaded = session::load(&Context::open(ws2.path(), &h2.id).unwrap()).unwrap();
    assert!(loaded.agent.is_none() && loaded.imported_from.is_some());
}

/// A Gemini CLI chat of session `ID` recorded in `ws`, where Gemini keeps it under `home` (its `.gemini`): a header
/// and one exchange (the format of `shared/AGENT_STORES.md`; the real Gemini CLI's: tests/e2e/test_continue.py).
fn gemini_file(home: &Path, ws: &Path) -> PathBuf {
    gemini_chat(
        home,
        ws,
        &[
            json!({"id": "u1", "timestamp": AT, "type": "user", "content": [{"text": "remember PLUMTREE"}]}),
            json!({"id": "g1", "timestamp": AT, "type": "gemini", "content": "PLUMTREE, noted.", "model": "gemini-2.5"}),
        ],
    )
}

const AT: &str = "2026-11-30T10:00:00.000Z";

/// A Gemini CLI chat of session `ID` with the message records `messages`, as [`gemini_file`].
fn gemini_chat(home: &Path, ws: &Path, messages: &[serde_json::Value]) -> PathBuf {
    let project = home.join("tmp").join("work");
    fs::create_dir_all(project.join("chats")).unwrap();
    fs::write(project.join(".project_root"), ws.canonicalize().unwrap().to_string_lossy().as_bytes()).unwrap();
    let header = json!({"sessionId": ID, "projectHash": "0", "startTime": AT, "lastUpdated": AT, "kind": "main"});
    let lines: Vec<_> =
        [header].into_iter().chain(messages.iter().cloned()).chain([json!({"$set": {"lastUpdated": AT}})]).collect();
    let path = project.join("chats").join("session-2026-11-30T10-00-abcdef12.jsonl");
    fs::write(&path, lines.iter().map(|l| l.to_string() + "\n").collect::<String>()).unwrap();
    path
}

#[test]
fn gemini_is_handed_a_copy_under_a_new_id_and_its_original_stays_as_it_was() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = gemini_file(home.path(), ws.path());
    let before = fs::read(&path).unwrap();
    let found = agents("gemini", "/bin/true");
    let h = handover::hand_over(ws.path(), &path, "gemini", &found).unwrap();
    assert_eq!((h.way, h.messages), (Way::Agent, 2));
    // the copy: beside the original, named as Gemini names a chat, the same records under its own id
    let copy = h.agent_copy.clone().expect("a copy for the agent");
    assert_eq!(copy.parent(), path.parent());
    let agent = session::load(&Context::open(ws.path(), &h.id).unwrap()).unwrap().agent.unwrap();
    assert_ne!(agent.session_id, ID);
    let name = copy.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("session-") && name.ends_with(&format!("-{}.jsonl", &agent.session_id[..8])), "{name}");
    let text = fs::read_to_string(&copy).unwrap();
    assert_eq!(text, String::from_utf8(before.clone()).unwrap().replace(ID, &agent.session_id));
    assert!(h.message.contains("handed a copy of its file"), "{}", h.message);
    assert_eq!(fs::read(&path).unwrap(), before, "the original is only read");

    // Gemini's store lists both; our list shows the conversation once, as ours
    let theirs = import::list(ws.path(), &Homes { gemini: Some(home.path().to_path_buf()), ..Default::default() });
    let mut ids: Vec<&str> = theirs.iter().map(|t| t.session_id.as_str()).collect();
    ids.sort();
    let mut both = vec![ID, agent.session_id.as_str()];
    both.sort();
    assert_eq!(ids, both, "{theirs:#?}");
    assert!(import::list::without_ours(theirs, &ours(ws.path())).is_empty());

    // again, by its file or by the original's id: the same session and copy, nothing more written
    let again = handover::hand_over(ws.path(), &path, "gemini", &found).unwrap();
    assert_eq!((again.id.as_str(), again.agent_copy.as_ref()), (h.id.as_str(), None));
    let homes = Homes { gemini: Some(home.path().to_path_buf()), ..Default::default() };
    let by_id = handover::hand_over_id(ws.path(), &format!("gemini:{ID}"), &found, &homes).unwrap();
    assert_eq!(by_id.id, h.id);
    assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 2);
    assert_eq!(ours(ws.path()).len(), 1);
    // claude's load costs nothing: no copy
    let c = handover::hand_over(
        ws.path(),
        &claude_file(home.path(), ws.path(), &format!("{ID}.jsonl")),
        "claude",
        &agents("claude", "/bin/true"),
    )
    .unwrap();
    assert!(c.agent_copy.is_none());
}

/// A Gemini CLI tool-call exchange: the answer's record with its call and the call's `result` (Gemini writes the
/// record again once the call ran), then, when `sent` (as Gemini 0.61 records it), the `user` record that sent the
/// result to the model, then the final answer.
fn gemini_tool_records(sent: bool) -> Vec<serde_json::Value> {
    let response = json!({"functionResponse": {"id": "c1", "name": "write_file", "response": {"output": "written"}}});
    let mut records = vec![
        json!({"id": "u1", "timestamp": AT, "type": "user", "content": [{"text": "write FIGTREE"}]}),
        json!({"id": "g1", "timestamp": AT, "type": "gemini", "content": "Writing it.", "toolCalls": [
            {"id": "c1", "name": "write_file", "args": {"content": "FIGTREE"}, "result": [response],
             "status": "success"}]}),
    ];
    if sent {
        records.push(json!({"id": "u2", "timestamp": AT, "type": "user", "content": [response]}));
    }
    records.push(json!({"id": "g2", "timestamp": AT, "type": "gemini", "content": "Done: FIGTREE."}));
    records
}

#[test]
fn a_gemini_session_whose_load_the_api_would_refuse_goes_on_in_a_new_session_told_our_transcript() {
    // Gemini 0.61 rebuilds this file's call as answered twice (its result, then the record that sent it): the API
    // refuses the history, so the agent is not handed the session to load but told our transcript in a new one
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = gemini_chat(home.path(), ws.path(), &gemini_tool_records(true));
    let why = import::gemini::refused_on_load(&path).unwrap().expect("refused");
    assert!(why.contains("write_file") && why.contains("API refuses"), "{why}");
    let before = fs::read(&path).unwrap();
    let h = handover::hand_over(ws.path(), &path, "gemini", &agents("gemini", "/bin/true")).unwrap();
    assert_eq!((h.way, h.messages, h.agent_copy.as_ref()), (Way::Agent, 4, None));
    assert!(h.message.contains("in a new session of its own, told the conversation so far"), "{}", h.message);
    assert!(h.message.contains(&why), "{}", h.message);
    // the log names the agent and no session of it (the chat starts a new one); nothing written in Gemini's store
    let agent = session::load(&Context::open(ws.path(), &h.id).unwrap()).unwrap().agent.unwrap();
    assert_eq!((agent.name.as_str(), agent.session_id.as_str()), ("gemini", ""));
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    // one row: ours
    let theirs = import::list(ws.path(), &Homes { gemini: Some(home.path().to_path_buf()), ..Default::default() });
    assert!(import::list::without_ours(theirs, &ours(ws.path())).is_empty());

    // the same call answered once (its result only): loaded (a copy, as any Gemini session)
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = gemini_chat(home.path(), ws.path(), &gemini_tool_records(false));
    assert_eq!(import::gemini::refused_on_load(&path).unwrap(), None);
    let h = handover::hand_over(ws.path(), &path, "gemini", &agents("gemini", "/bin/true")).unwrap();
    assert!(h.agent_copy.is_some() && h.message.contains("loads the session itself"), "{}", h.message);
    // a call with no result, nor a record that sent one: the next prompt would leave it unanswered
    let mut unanswered = gemini_tool_records(false);
    unanswered[1]["toolCalls"][0]["result"] = serde_json::Value::Null;
    unanswered.pop();
    let path = gemini_chat(home.path(), ws.path(), &unanswered);
    let why = import::gemini::refused_on_load(&path).unwrap().expect("refused");
    assert!(why.contains("answers the call(s) of write_file with 0 response(s)"), "{why}");
}

#[test]
fn a_chat_of_ours_whose_gemini_session_the_api_would_refuse_is_found_by_its_id_under_the_agents_home() {
    // our chat's resume asks first (src/acp/chat/connect.rs): Gemini's file found by the id, under the HOME the
    // agent's entry sets (its `.gemini`), and read as the hand-over reads it
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = gemini_chat(&home.path().join(".gemini"), ws.path(), &gemini_tool_records(true));
    let why = import::gemini::refused_on_load(&path).unwrap().expect("refused");
    let spec = AgentSpec {
        env: BTreeMap::from([("HOME".into(), home.path().to_string_lossy().into_owned())]),
        ..Default::default()
    };
    assert_eq!(handover::refused_by_agent("gemini", &spec, ws.path(), ID), Some(why));
    // another id, another agent: nothing to refuse (the agent loads it, or says it has no such session)
    assert_eq!(handover::refused_by_agent("gemini", &spec, ws.path(), "abcdef12-0000-0000-0000-000000000000"), None);
    assert_eq!(handover::refused_by_agent("qwen", &spec, ws.path(), ID), None);
    // the call answered once: loaded
    gemini_chat(&home.path().join(".gemini"), ws.path(), &gemini_tool_records(false));
    assert_eq!(handover::refused_by_agent("gemini", &spec, ws.path(), ID), None);
}

#[test]
fn an_id_that_names_no_session_is_refused_naming_it_and_nothing_is_written() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    claude_file(home.path(), ws.path(), &format!("{ID}.jsonl"));
    for id in ["11111111-0000-0000-0000-000000000000", "../../etc/passwd"] {
        let err = handover::hand_over_id(ws.path(), id, &BTreeMap::new(), &homes(home.path())).unwrap_err();
        assert!(err.to_string().contains(&format!("no session {id:?}")), "{err}");
    }
    assert!(ours(ws.path()).is_empty());
}

#[test]
fn a_kept_copy_is_the_conversations_one_row_and_resumed_by_our_id_goes_on_with_the_agent() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = claude_file(home.path(), ws.path(), &format!("{ID}.jsonl"));
    let homes = homes(home.path());
    let found = agents("claude", "/bin/true");
    assert_eq!(import::keep::keep(ws.path(), &homes).copied, 1);
    let kept = ours(ws.path()).remove(0);
    assert!(kept.imported_from.as_ref().is_some_and(|f| f.kept && f.id == ID), "{kept:?}");
    // one row: the copy; its original is left out of the other agents' rows
    assert!(import::list::without_ours(import::list(ws.path(), &homes), &ours(ws.path())).is_empty());

    // resumed by our id (what the host's resume asks first): handed to claude, the copy itself, its line saying so
    let h = handover::hand_over_kept(ws.path(), &kept, &found, &homes).expect("handed over");
    assert_eq!((h.id.as_str(), h.agent.as_deref(), h.way), (kept.id.as_str(), Some("claude"), Way::Agent));
    assert!(h.message.contains("continued by claude") && h.message.contains("our kept copy's"), "{}", h.message);
    let loaded = session::load(&Context::open(ws.path(), &kept.id).unwrap()).unwrap();
    assert_eq!(loaded.agent.map(|a| a.session_id), Some(ID.to_string()));
    // the agent's session now: not handed over again, the original's id names it, the keeper leaves it alone
    assert!(handover::hand_over_kept(ws.path(), &ours(ws.path())[0], &found, &homes).is_none());
    let by_id = handover::hand_over_id(ws.path(), &format!("claude:{ID}"), &found, &homes).unwrap();
    assert_eq!(by_id.id, kept.id);
    let again = import::keep::keep(ws.path(), &homes);
    assert_eq!((again.copied, again.updated), (0, 0), "{again:?}");
    assert_eq!(ours(ws.path()).len(), 1);
    assert!(import::list::without_ours(import::list(ws.path(), &homes), &ours(ws.path())).is_empty());

    // a kept copy our own agent went on with stays ours; the agent is handed a new import of its original
    let ws2 = tempfile::tempdir().unwrap();
    let path2 = claude_file(home.path(), ws2.path(), &format!("{ID}.jsonl"));
    assert_eq!(import::keep::keep(ws2.path(), &homes).copied, 1);
    let kept2 = ours(ws2.path()).remove(0);
    let ctx = Context::open(ws2.path(), &kept2.id).unwrap();
    let w = Writer::open(&ctx, WriterOptions::default()).unwrap();
    w.append(&Message::user("and one more thing")).unwrap();
    w.close().unwrap();
    let info = ours(ws2.path()).into_iter().find(|s| s.id == kept2.id).unwrap();
    assert!(handover::hand_over_kept(ws2.path(), &info, &found, &homes).is_none());
    let h2 = handover::hand_over(ws2.path(), &path2, "claude", &found).unwrap();
    assert_ne!(h2.id, kept2.id);
    assert_eq!(h2.messages, 2);
    assert!(session::load(&ctx).unwrap().agent.is_none());
    let _ = path;
}
