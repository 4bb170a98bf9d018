//! ACP chats against the real agent: `@zed-industries/claude-agent-acp` (installed by scripts/ensure-acp into
//! .deps/acp), which runs the real Claude Code it bundles, pointed at the fake Anthropic server
//! (`python3 tests/e2e/fake_llm.py anthropic`, a process of its own scripted over HTTP). Each test has its own
//! workspace and its own HOME (Claude Code's store of sessions: `$HOME/.claude/projects`).

use std::collections::{BTreeMap, HashMap};

use pseudoclaude::sandbox::{Network, Settings as SandboxSettings};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pseudoclaude::acp::{AcpChat, AgentSpec, ChatConfig};
use pseudoclaude::agent::{Cancel, Event};
use pseudoclaude::provider::BoxFuture;
use pseudoclaude::rewind::RewindOptions;
use pseudoclaude::session::{self, Context};
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver, BufferState, Written};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::acp_rig::{FakeClaudeApi, claude_agent_command, claude_env};

/// Answers every permission "yes", and remembers what it was asked.
#[derive(Default)]
struct Yes(Mutex<Vec<ApprovalRequest>>);

impl Approver for Yes {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        self.0.lock().unwrap().push(req);
        Box::pin(async { Approval::Yes })
    }
}

struct Setup {
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
    fake: FakeClaudeApi,
    rt: tokio::runtime::Runtime,
}

impl Setup {
    fn new() -> Setup {
        let _ = claude_agent_command();
        Setup {
            ws: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
            fake: FakeClaudeApi::start(),
            rt: tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap(),
        }
    }

    fn config(&self, auto_allow: bool) -> ChatConfig {
        let env = claude_env(&self.fake.base_url(), self.home.path());
        ChatConfig {
            name: "claude".into(),
            spec: AgentSpec { command: claude_agent_command().display().to_string(), env, ..Default::default() },
            workspace: self.ws.path().canonicalize().unwrap(),
            log_file: Some(self.home.path().join("agent.log")),
            spill_threshold: session::spill::DEFAULT_THRESHOLD,
            checkpoint_every: Duration::from_millis(100),
            auto_allow,
            pricing: Default::default(),
            stale_after: Duration::from_secs(6 * 3600),
            rewind: true,
            rewind_max_file_bytes: pseudoclaude::rewind::DEFAULT_MAX_FILE_BYTES,
            sandbox: Default::default(),
            worktree: None,
        }
    }

    /// A chat with the scripted agent (support/acp_fs_agent.py) instead of the real one: the client's side of the
    /// protocol that claude-agent-acp never asks for (`fs/*`, `terminal/*`), and an agent's end as the tests set it.
    fn scripted_config(&self) -> ChatConfig {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/acp_fs_agent.py");
        let spec =
            AgentSpec { command: "python3".into(), args: vec![script.display().to_string()], ..Default::default() };
        ChatConfig { spec, ..self.config(true) }
    }

    /// One turn to its end; the events it reported.
    fn turn(&self, chat: &Arc<AcpChat>, text: &str) -> Vec<Event> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let chat = chat.clone();
        let text = text.to_string();
        self.rt.block_on(async move {
            tokio::time::timeout(Duration::from_secs(90), chat.turn(&text, tx, Cancel::new())).await.expect("turn");
            let mut out = Vec::new();
            while let Ok(e) = rx.try_recv() {
                out.push(e);
            }
            out
        })
    }

    fn log_lines(&self, chat: &AcpChat) -> Vec<Value> {
        let ctx = chat.current().expect("a session");
        std::fs::read_to_string(&ctx.jsonl_path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

fn errors_in(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Error { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn notices_in(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Notice { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_chat_with_a_write_and_a_shell_command_is_logged_as_it_happens() {
    let s = Setup::new();
    let ws = s.config(false).workspace;
    let file = ws.join("a.txt");
    s.fake.push(json!([
        { "text": "I will write it.", "thinking": "The user wants a file.",
          "tools": [["toolu_1", "Write", { "file_path": file, "content": "hello\n" }]] },
        { "tools": [["toolu_2", "Bash", { "command": "echo shell-ran > b.txt", "description": "write b.txt" }]] },
        { "text": "Done: a.txt written and the shell ran." },
    ]));
    let approver = Arc::new(Yes::default());
    let chat = AcpChat::new(s.config(false), approver.clone());
    let events = s.turn(&chat, "write a.txt, then run the shell");
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\n");
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap().trim(), "shell-ran");
    assert!(matches!(events.last(), Some(Event::TurnDone { stop_reason }) if stop_reason == "end_turn"), "{events:?}");

    // the permissions went through our approval prompt, with the agent's own options
    let asked = approver.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(asked.iter().all(|a| a.options.iter().any(|o| o.kind == "allow_once")), "{asked:#?}");

    // the log: the user's message, each call with its result, the final answer; the agent and its session id
    let ctx = chat.current().unwrap();
    let loaded = session::load(&ctx).unwrap();
    let roles: Vec<String> = loaded
        .messages
        .iter()
        .map(|m| match (&m.tool_result, m.tool_calls.first()) {
            (Some(_), _) => "result".to_string(),
            (None, Some(c)) => format!("call:{}", c.name),
            (None, None) => m.role.to_string(),
        })
        .collect();
    assert_eq!(roles, ["user", "call:edit", "result", "call:execute", "result", "assistant"], "{loaded:#?}");
    assert_eq!(loaded.messages[0].content, "write a.txt, then run the shell");
    assert!(loaded.messages[1].content.contains("I will write it."), "{:?}", loaded.messages[1]);
    assert!(
        loaded.messages[1].thinking.iter().any(|t| t.thinking.contains("wants a file")),
        "{:?}",
        loaded.messages[1]
    );
    assert!(loaded.messages[3].tool_calls[0].arguments.to_string().contains("echo shell-ran"), "{loaded:#?}");
    assert_eq!(loaded.messages[5].content, "Done: a.txt written and the shell ran.");
    let agent = loaded.agent.clone().expect("the agent's meta");
    assert_eq!(agent.name, "claude");
    assert!(!agent.session_id.is_empty() && !agent.version.is_empty(), "{agent:?}");
    assert_eq!(chat.agent_session().as_deref(), Some(agent.session_id.as_str()));
    let lines = s.log_lines(&chat);
    let permissions: Vec<&Value> = lines.iter().filter(|l| !l["acp"]["permission"].is_null()).collect();
    assert_eq!(permissions.len(), 2, "{lines:#?}");
    assert!(permissions.iter().all(|p| p["acp"]["permission"]["by"] == "user"), "{permissions:?}");
    // the list's row names the agent
    let row = session::list::info(&ctx).unwrap();
    assert_eq!(row.agent.as_deref(), Some("claude"));
    assert_eq!(s.fake.errors(), Vec::<Value>::new());
}

#[test]
fn approve_agents_answers_allow_once_without_asking() {
    let s = Setup::new();
    let ws = s.config(true).workspace;
    s.fake.push(json!([
        { "tools": [["toolu_1", "Write", { "file_path": ws.join("c.txt"), "content": "c\n" }]] },
        { "text": "ok" },
    ]));
    let approver = Arc::new(Yes::default());
    let chat = AcpChat::new(s.config(true), approver.clone());
    let events = s.turn(&chat, "write c.txt");
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    assert!(approver.0.lock().unwrap().is_empty(), "nothing is asked");
    let lines = s.log_lines(&chat);
    let p = lines.iter().find(|l| !l["acp"]["permission"].is_null()).expect("the permission logged");
    assert_eq!(p["acp"]["permission"]["by"], "config");
    let answer = p["acp"]["permission"]["answer"].as_str().unwrap();
    let options = p["acp"]["permission"]["options"].as_array().unwrap();
    let chosen = options.iter().find(|o| o["id"] == answer).unwrap();
    assert_eq!(chosen["kind"], "allow_once", "never \"always\"");
}

/// The session's messages as (role, text) pairs, for comparisons.
fn texts(ctx: &Context) -> Vec<(String, String)> {
    session::load(ctx).unwrap().messages.iter().map(|m| (m.role.to_string(), m.content.clone())).collect()
}

#[test]
fn a_resume_with_the_agents_store_intact_loads_its_session_and_logs_nothing_twice() {
    let s = Setup::new();
    s.fake.push(json!([{ "text": "The answer is 42." }]));
    let chat = AcpChat::new(s.config(true), Arc::new(Yes::default()));
    let first = s.turn(&chat, "what is the answer?");
    assert!(errors_in(&first).is_empty(), "{first:#?}");
    let ctx = chat.current().unwrap();
    let agent_id = chat.agent_session().unwrap();
    s.rt.block_on(chat.stop());
    drop(chat);
    let before = std::fs::read(&ctx.jsonl_path).unwrap();

    let (chat, _) = AcpChat::resume(s.config(true), Arc::new(Yes::default()), &ctx.id).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    s.rt.block_on(chat.connect(&tx)).expect("connect");
    let mut notices = Vec::new();
    while let Ok(Event::Notice { text }) = rx.try_recv() {
        notices.push(text);
    }
    assert!(notices.iter().any(|n| n.contains("session/load")), "{notices:?}");
    assert_eq!(chat.agent_session().as_deref(), Some(agent_id.as_str()));
    // the replayed history is neither logged again nor kept twice
    assert_eq!(std::fs::read(&ctx.jsonl_path).unwrap(), before, "the log is unchanged until the next message");
    assert_eq!(chat.conversation.snapshot().len(), 2);

    s.fake.push(json!([{ "text": "Still 42." }]));
    let next = s.turn(&chat, "and again?");
    assert!(errors_in(&next).is_empty(), "{next:#?}");
    assert_eq!(
        texts(&ctx),
        [
            ("user".into(), "what is the answer?".into()),
            ("assistant".into(), "The answer is 42.".into()),
            ("user".into(), "and again?".into()),
            ("assistant".into(), "Still 42.".into()),
        ]
    );
    // the agent's own memory carried the history: its request holds the first answer
    let last = s.fake.requests().last().cloned().unwrap();
    assert!(last.to_string().contains("The answer is 42."), "{last}");
}

#[test]
fn a_resume_after_the_agents_store_is_gone_sends_our_transcript_with_the_next_message() {
    let s = Setup::new();
    s.fake.push(json!([{ "text": "The password is swordfish." }]));
    let chat = AcpChat::new(s.config(true), Arc::new(Yes::default()));
    assert!(errors_in(&s.turn(&chat, "remember the password")).is_empty());
    let ctx = chat.current().unwrap();
    let old_id = chat.agent_session().unwrap();
    s.rt.block_on(chat.stop());
    drop(chat);
    std::fs::remove_dir_all(s.home.path().join(".claude/projects")).expect("the agent's store");

    let (chat, _) = AcpChat::resume(s.config(true), Arc::new(Yes::default()), &ctx.id).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    s.rt.block_on(chat.connect(&tx)).expect("connect");
    let notices: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|e| if let Event::Notice { text } = e { Some(text) } else { None })
        .collect();
    assert!(notices.iter().any(|n| n.contains("session/new")), "{notices:?}");
    assert_ne!(chat.agent_session().unwrap(), old_id);

    s.fake.push(json!([{ "text": "It was swordfish." }]));
    let events = s.turn(&chat, "what was the password?");
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    let last = s.fake.requests().last().cloned().unwrap();
    assert!(last.to_string().contains("The password is swordfish."), "the history reached the model: {last}");
    // our log holds the user's words, not the transcript sent with them; and the new agent session id
    let msgs = texts(&ctx);
    assert_eq!(msgs[2], ("user".to_string(), "what was the password?".to_string()));
    assert_eq!(session::load(&ctx).unwrap().agent.unwrap().session_id, chat.agent_session().unwrap());
}

#[test]
fn an_agent_that_dies_mid_turn_keeps_the_partial_answer_and_the_next_message_restarts_it() {
    let s = Setup::new();
    let words: Vec<String> = (0..400).map(|i| format!("w{i}")).collect();
    s.fake.push(json!([{ "text": words.join(" "), "delay": 0.02 }]));
    let chat = AcpChat::new(s.config(true), Arc::new(Yes::default()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let turn = {
        let chat = chat.clone();
        s.rt.spawn(async move { chat.turn("stream a long answer", tx, Cancel::new()).await })
    };
    // some text streamed (and was checkpointed), then the agent's whole process group is killed
    let mut streamed = String::new();
    s.rt.block_on(async {
        while streamed.len() < 200 {
            match tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.expect("text").unwrap() {
                Event::TextDelta { text } => streamed.push_str(&text),
                Event::Error { message } => panic!("{message}"),
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
    chat.kill();
    s.rt.block_on(turn).unwrap();
    let events: Vec<Event> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    let errors = errors_in(&events);
    assert_eq!(errors.len(), 1, "one line: {events:#?}");
    assert!(errors[0].contains("exited mid-turn") && errors[0].contains("next message"), "{errors:?}");
    let ctx = chat.current().unwrap();
    let loaded = session::load(&ctx).unwrap();
    assert_eq!(loaded.messages.len(), 2, "{loaded:#?}");
    assert!(loaded.messages[1].interrupted && loaded.messages[1].content.starts_with("w0 w1"), "{loaded:#?}");

    s.fake.push(json!([{ "text": "Back." }]));
    let next = s.turn(&chat, "are you there?");
    assert!(errors_in(&next).is_empty(), "{next:#?}");
    assert!(notices_in(&next).iter().any(|n| n.contains("session/load")), "{next:#?}");
    assert_eq!(texts(&ctx).last().unwrap().1, "Back.");
}

#[test]
fn an_agent_command_not_found_is_a_plain_error_naming_it() {
    let s = Setup::new();
    let mut config = s.config(true);
    config.spec.command = "claude-agent-acp-not-installed".into();
    let chat = AcpChat::new(config, Arc::new(Yes::default()));
    let events = s.turn(&chat, "hello");
    let errors = errors_in(&events);
    assert_eq!(errors.len(), 1, "{events:#?}");
    assert!(errors[0].contains("\"claude-agent-acp-not-installed\" was not found on PATH"), "{errors:?}");
    // the message is kept: the next one (after a fix) continues the session
    assert_eq!(texts(&chat.current().unwrap()), [("user".to_string(), "hello".to_string())]);
}

#[test]
fn a_rewind_puts_back_what_the_agents_own_write_and_shell_changed_and_starts_a_new_agent_session() {
    let s = Setup::new();
    let ws = s.config(true).workspace;
    std::fs::write(ws.join("kept.txt"), "before\n").unwrap();
    s.fake.push(json!([{ "text": "The code word is albatross." }]));
    let chat = AcpChat::new(s.config(true), Arc::new(Yes::default()));
    assert!(errors_in(&s.turn(&chat, "remember the code word")).is_empty());
    let first_agent_session = chat.agent_session().unwrap();
    // the second turn: the agent's Write tool, and its shell changing one file and creating another
    s.fake.push(json!([
        { "tools": [["toolu_1", "Write", { "file_path": ws.join("new.txt"), "content": "written by the agent\n" }]] },
        { "tools": [["toolu_2", "Bash", {
            "command": "sh -c 'echo x > f; echo changed > kept.txt'", "description": "write f and kept.txt" }]] },
        { "text": "Both done." },
    ]));
    let events = s.turn(&chat, "write new.txt and run the shell");
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    assert_eq!(std::fs::read_to_string(ws.join("new.txt")).unwrap(), "written by the agent\n");
    assert_eq!(std::fs::read_to_string(ws.join("f")).unwrap(), "x\n");
    assert_eq!(std::fs::read_to_string(ws.join("kept.txt")).unwrap(), "changed\n");

    // sessions.changes(id) lists both, under the turn that made them (read from the log, as the editor does)
    let ctx = chat.current().unwrap();
    let changes = pseudoclaude::rewind::changes_of(&ws, &ctx.id).unwrap();
    assert_eq!(changes, chat.changes());
    let turn = changes.iter().find(|t| t.index == 3).expect("the second message's turn");
    let mut files: Vec<(&str, &str)> = turn.files.iter().map(|f| (f.path.as_str(), f.status.as_str())).collect();
    files.sort();
    assert_eq!(files, [("f", "added"), ("kept.txt", "modified"), ("new.txt", "added")], "{changes:#?}");
    assert!(changes.iter().find(|t| t.index == 1).unwrap().files.is_empty(), "{changes:#?}");

    // the rewind to the second message: the code back, the conversation cut there
    let opts = RewindOptions { code: true, conversation: true, ..Default::default() };
    let report = chat.rewind(3, &opts);
    assert!(report.ok, "{report:?}");
    assert_eq!(report.text, "write new.txt and run the shell");
    assert_eq!(std::fs::read_to_string(ws.join("kept.txt")).unwrap(), "before\n");
    assert!(!ws.join("f").exists() && !ws.join("new.txt").exists(), "what the Write and the shell created is gone");
    assert_eq!(chat.conversation.snapshot().len(), 2);
    assert_eq!(chat.agent_session(), None, "the agent's session remembers what was cut: left");
    assert!(chat.undo_info().is_some());

    // the next message starts a new agent session told the transcript up to that message, nothing after it
    s.fake.push(json!([{ "text": "It is albatross." }]));
    let events = s.turn(&chat, "what was the code word?");
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    let new_session = chat.agent_session().expect("a new agent session");
    assert_ne!(new_session, first_agent_session);
    let last = s.fake.requests().last().cloned().unwrap().to_string();
    assert!(last.contains("The code word is albatross."), "the history up to the message reached the model: {last}");
    assert!(!last.contains("written by the agent") && !last.contains("Both done"), "nothing after it: {last}");
    let loaded = session::load(&ctx).unwrap();
    assert_eq!(loaded.agent.unwrap().session_id, new_session, "the log's meta names the new session");
    assert_eq!(texts(&ctx).last().unwrap().1, "It is albatross.");
    assert!(chat.undo_info().is_none(), "a new message ends the undo");
}

#[test]
fn an_undone_rewind_returns_to_the_agents_own_session() {
    let s = Setup::new();
    let ws = s.config(true).workspace;
    s.fake.push(json!([
        { "tools": [["toolu_1", "Bash", { "command": "echo one > one.txt", "description": "write one" }]] },
        { "text": "Wrote one." },
    ]));
    let chat = AcpChat::new(s.config(true), Arc::new(Yes::default()));
    assert!(errors_in(&s.turn(&chat, "write one.txt")).is_empty());
    let agent_session = chat.agent_session().unwrap();
    let report = chat.rewind(1, &RewindOptions { code: true, conversation: true, ..Default::default() });
    assert!(report.ok && report.removed == ["one.txt"], "{report:?}");
    assert!(!ws.join("one.txt").exists());
    let undo = chat.undo_rewind(&RewindOptions::default());
    assert!(undo.ok, "{undo:?}");
    assert_eq!(std::fs::read_to_string(ws.join("one.txt")).unwrap(), "one\n");
    assert_eq!(chat.agent_session().as_deref(), Some(agent_session.as_str()));
    let ctx = chat.current().unwrap();
    assert_eq!(session::load(&ctx).unwrap().agent.unwrap().session_id, agent_session);
    // the next message goes on in the agent's own session (session/load), with no transcript
    s.fake.push(json!([{ "text": "Still here." }]));
    let events = s.turn(&chat, "go on");
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    assert!(notices_in(&events).iter().any(|n| n.contains("session/load")), "{events:#?}");
    let last = s.fake.requests().last().cloned().unwrap().to_string();
    assert!(!last.contains("the agent's own record of it is gone"), "{last}");
}

/// The editor as the fs tests need it: buffers (`path -> (text, modified)`), every permission answered yes, the
/// writes it was told of (each would reload its buffer).
struct Editor {
    buffers: HashMap<PathBuf, (String, bool)>,
    written: Mutex<Vec<(PathBuf, Written)>>,
}

impl Approver for Editor {
    fn ask(&self, _req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(async { Approval::Yes })
    }

    fn buffer_state(&self, path: &Path, _rel: &str, _hold: bool) -> BoxFuture<'static, Option<BufferState>> {
        let state = match self.buffers.get(path) {
            Some((_, true)) => BufferState::Modified,
            Some(_) => BufferState::Unmodified,
            None => BufferState::NotLoaded,
        };
        Box::pin(async move { Some(state) })
    }

    fn written(&self, path: &Path, _rel: &str, outcome: Written) {
        self.written.lock().unwrap().push((path.to_path_buf(), outcome));
    }

    fn buffer_text(&self, path: &Path) -> BoxFuture<'static, Option<String>> {
        let text = self.buffers.get(path).map(|b| b.0.clone());
        Box::pin(async move { text })
    }
}

/// Protocol level: claude-agent-acp never calls the client's `fs/*` (its own tools read and write), so a scripted
/// agent (support/acp_fs_agent.py) makes the requests a Gemini CLI or a Codex would.
#[test]
fn the_clients_fs_methods_read_the_buffer_or_the_disk_and_write_the_way_write_file_does() {
    let s = Setup::new();
    let config = s.scripted_config();
    let ws = config.workspace.clone();
    std::fs::write(ws.join("disk.txt"), "l1\nl2\nl3\n").unwrap();
    std::fs::write(ws.join("open.txt"), "saved\n").unwrap();
    std::fs::write(ws.join("shown.txt"), "old\n").unwrap();
    std::fs::write(ws.join("dirty.txt"), "on disk\n").unwrap();
    let editor = Arc::new(Editor {
        buffers: HashMap::from([
            (ws.join("open.txt"), ("unsaved text\n".to_string(), true)),
            (ws.join("shown.txt"), ("old\n".to_string(), false)),
            (ws.join("dirty.txt"), ("the user's edit\n".to_string(), true)),
        ]),
        written: Mutex::new(Vec::new()),
    });
    let chat = AcpChat::new(config, editor.clone());
    let read = |path: PathBuf, extra: Value| {
        let mut params = json!({ "path": path });
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({ "method": "fs/read_text_file", "params": params })
    };
    let write = |path: PathBuf, content: &str| json!({ "method": "fs/write_text_file", "params": { "path": path, "content": content } });
    let script = json!([
        read(ws.join("disk.txt"), json!({ "line": 2, "limit": 1 })),
        read(ws.join("open.txt"), json!({})),
        write(ws.join("new.txt"), "fresh\n"),
        write(ws.join("shown.txt"), "new\n"),
        write(ws.join("dirty.txt"), "agent\n"),
        read(PathBuf::from("/etc/hostname"), json!({})),
        read(ws.join("missing.txt"), json!({})),
    ]);
    let events = s.turn(&chat, &script.to_string());
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    let answer: Value = serde_json::from_str(&chat.conversation.snapshot().last().unwrap().content).unwrap();
    assert_eq!(answer["caps"]["fs"], json!({ "readTextFile": true, "writeTextFile": true }), "advertised");
    let r = &answer["results"];
    assert_eq!(r[0]["content"], "l2\n", "line 2, one line, from the disk");
    assert_eq!(r[1]["content"], "unsaved text\n", "the open buffer, unsaved text included");
    assert_eq!((&r[2], &r[3]), (&json!({}), &json!({})), "{r}");
    assert_eq!(std::fs::read_to_string(ws.join("new.txt")).unwrap(), "fresh\n");
    assert_eq!(std::fs::read_to_string(ws.join("shown.txt")).unwrap(), "new\n");
    let written = editor.written.lock().unwrap().clone();
    assert!(written.contains(&(ws.join("shown.txt"), Written::Changed)), "the open buffer reloads: {written:?}");
    let refused = r[4]["error"].as_str().unwrap_or_default();
    assert!(refused.contains("unsaved changes"), "a modified buffer is never written: {r}");
    assert_eq!(std::fs::read_to_string(ws.join("dirty.txt")).unwrap(), "on disk\n");
    assert!(!r[5]["error"].as_str().unwrap_or_default().is_empty(), "outside the workspace: refused: {r}");
    assert_ne!(r[5]["code"], -32002, "refused, not missing: {r}");
    // a missing file is ACP's "Resource not found" (-32002), which the agents take for a new file to write
    assert_eq!(r[6]["code"], -32002, "{r}");
    assert_eq!(r[6]["error"], "Resource not found: missing.txt", "{r}");
}

/// `agents.NAME.fs_reads`: whether `initialize` offers the agent `fs/read_text_file`. Unset, every agent but Gemini
/// CLI, known by its command line (here a wrapper named `gemini` that starts the scripted agent); set, as it says,
/// whatever the command line (a Gemini wrapper of another name says `false`).
#[test]
fn fs_reads_says_whether_the_agent_is_offered_reads_over_what_its_command_line_suggests() {
    let s = Setup::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/acp_fs_agent.py");
    let bin = tempfile::tempdir().unwrap();
    let gemini = bin.path().join("gemini");
    std::fs::write(&gemini, format!("#!/bin/sh\nexec python3 '{}' \"$@\"\n", script.display())).unwrap();
    std::fs::set_permissions(&gemini, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let python = |fs_reads| AgentSpec {
        command: "python3".into(),
        args: vec![script.display().to_string()],
        fs_reads,
        ..Default::default()
    };
    let wrapper = |fs_reads| AgentSpec { command: gemini.display().to_string(), fs_reads, ..Default::default() };
    for (spec, offered) in
        [(python(None), true), (python(Some(false)), false), (wrapper(None), false), (wrapper(Some(true)), true)]
    {
        let what = format!("{spec:?}");
        let chat = AcpChat::new(ChatConfig { spec, ..s.config(true) }, Arc::new(Yes::default()));
        let events = s.turn(&chat, "[]");
        assert!(errors_in(&events).is_empty(), "{what}: {events:#?}");
        let answer: Value = serde_json::from_str(&chat.conversation.snapshot().last().unwrap().content).unwrap();
        assert_eq!(answer["caps"]["fs"], json!({ "readTextFile": offered, "writeTextFile": true }), "{what}");
    }
}

/// `agents.NAME.sandbox = true`: the real agent's whole process in the command sandbox, its network through the
/// allowlist proxy (the fake model server on 127.0.0.1 allowed), its own shell confined as ours is: it writes in
/// the workspace, not outside it, finds no secret in its environment and cannot reach a Unix socket.
#[test]
fn an_agent_in_the_sandbox_reaches_its_model_through_the_allowlist_and_its_shell_is_confined() {
    let s = Setup::new();
    let outside = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let mut config = s.config(true);
    // as setup({ agents = { claude = { command = …, env = …, sandbox = true } } }) gives it: the built-in entry's
    // writable paths and kept variables added
    let mut user = BTreeMap::new();
    let mut own = config.spec.clone();
    own.sandbox.enabled = true;
    user.insert("claude".to_string(), own);
    config.spec = pseudoclaude::acp::resolve("claude", &user).unwrap();
    assert!(config.spec.sandbox.writable.contains(&"~/.claude".to_string()), "{:?}", config.spec.sandbox);
    config.sandbox = SandboxSettings { network: Network::Allow(vec!["127.0.0.1".into()]), ..Default::default() };
    let ws = config.workspace.clone();
    let escape = outside.path().join("escaped.txt");
    let socket_path = outside.path().join("s.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let command = format!(
        "echo in > inside.txt; echo out > {}; env > env.txt; \
         python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' {} \
         && echo socket-reached > socket.txt; echo tried",
        escape.display(),
        socket_path.display()
    );
    s.fake.push(json!([
        { "tools": [["toolu_1", "Bash", { "command": command, "description": "write in and out" }]] },
        { "text": "Tried both." },
    ]));
    // SAFETY: a name no other test reads; set before the agent's process is started from this environment.
    unsafe { std::env::set_var("PSEUDOCLAUDE_TEST_SECRET_TOKEN", "s3cr3t") };
    let chat = AcpChat::new(config, Arc::new(Yes::default()));
    let events = s.turn(&chat, "write inside and outside the workspace");
    let stderr = std::fs::read_to_string(s.home.path().join("agent.log")).unwrap_or_default();
    assert!(errors_in(&events).is_empty(), "{events:#?}\nits standard error:\n{stderr}");
    let log = s.log_lines(&chat);
    let result: Vec<String> = log.iter().map(|l| l.to_string()).filter(|l| l.contains("toolu_1")).collect();
    let result = result.join("\n");
    assert_eq!(std::fs::read_to_string(ws.join("inside.txt")).ok().as_deref(), Some("in\n"), "{result}");
    assert!(!escape.exists(), "the agent's shell cannot write outside the workspace: {result}");
    assert!(!ws.join("socket.txt").exists() && listener.accept().is_err(), "no Unix socket reached: {result}");
    let env = std::fs::read_to_string(ws.join("env.txt")).unwrap();
    assert!(!env.contains("s3cr3t"), "the editor's secrets stay out of the agent's environment");
    assert!(env.contains("ANTHROPIC_API_KEY=sk-ant-fake-key"), "its own key, set on purpose, is there");
    assert!(env.contains("HTTPS_PROXY=http://127.0.0.1:"), "its network goes through the allowlist proxy");
    assert_eq!(texts(&chat.current().unwrap()).last().unwrap().1, "Tried both.");
    assert!(s.fake.requests().len() >= 2, "the model was reached through the proxy");
    assert_eq!(s.fake.errors(), Vec::<Value>::new());
}

/// A chat closed or replaced (`chat.close()`, `:PseudoNew`, a resume or a fork in its place) stops its agent as
/// gracefully as it can without the caller waiting: its input closed, `SIGTERM`, a grace to write its own record of
/// the session (Claude Code flushes its transcript on a timer, read next by `session/load` or `session/fork`), and
/// only then what is left killed. The scripted agent behaves as Claude Code does (it ignores the end of its input and
/// writes its record 200 ms after a `SIGTERM`); a `SIGKILL` leaves no record.
#[test]
fn a_closed_chats_agent_is_stopped_gracefully_and_writes_its_own_record_first() {
    let s = Setup::new();
    let mut config = s.scripted_config();
    let record = s.home.path().join("agent-record.json");
    config.spec.env.insert("ACP_FS_AGENT_END".into(), record.display().to_string());
    let marker = format!("stop-{}{}", std::process::id(), rand_suffix());
    config.spec.args.push(marker.clone());
    let chat = AcpChat::new(config, Arc::new(Yes::default()));
    let events = s.turn(&chat, "[]");
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    assert_eq!(processes_with(&marker).len(), 1, "the agent runs");
    chat.close();
    // the caller did not wait for the agent: it writes its record after a delay
    assert!(!record.exists(), "close() returned before the agent's record was written");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !processes_with(&marker).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_with(&marker), Vec::<String>::new(), "no agent process left");
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&record).expect("the agent's record")).unwrap();
    assert_eq!((&record["how"], &record["input_closed"]), (&json!("SIGTERM"), &json!(true)), "{record}");
    let answer: Value = serde_json::from_str(record["last_answer"].as_str().unwrap()).unwrap();
    assert_eq!(answer["results"], json!([]), "its record holds the last answer: {record}");
}

/// The processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(marker)
        {
            found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
        }
    }
    found
}

/// Protocol level, as the fs test above: the client's terminals run the way `run_command` does (in the sandbox),
/// give their output and exit status, and end when killed or released.
#[test]
fn the_clients_terminals_run_in_the_sandbox_and_end_when_killed_or_released() {
    let s = Setup::new();
    let config = s.scripted_config();
    let ws = config.workspace.clone();
    std::fs::create_dir(ws.join("sub")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    // in the sleeps' own arguments (a shell may exec its last command): `.N` is found on any process left
    let marker = format!(".{}{}", std::process::id(), rand_suffix());
    let chat = AcpChat::new(config, Arc::new(Yes::default()));
    let t = |method: &str, params: Value| json!({ "method": method, "params": params });
    let id = |n: usize| json!({ "terminalId": format!("${n}") });
    let script = json!([
        /* 0 */ t("terminal/create", json!({ "command": "printf 'out\\n'; echo err >&2; exit 3" })),
        /* 1 */ t("terminal/wait_for_exit", id(0)),
        /* 2 */ t("terminal/output", id(0)),
        /* 3 */ t("terminal/create", json!({ "command": "sh", "args": ["-c", format!("sleep 601{marker}")] })),
        /* 4 */ t("sleep", json!({ "seconds": 0.5 })),
        /* 5 */ t("terminal/kill", id(3)),
        /* 6 */ t("terminal/wait_for_exit", id(3)),
        /* 7 */ t("terminal/release", id(3)),
        /* 8 */ t("terminal/output", id(3)),
        /* 9 */ t("terminal/create", json!({ "command": format!("echo started; sleep 602{marker}") })),
        /* 10 */ t("sleep", json!({ "seconds": 0.5 })),
        /* 11 */ t("terminal/output", id(9)),
        /* 12 */ t("terminal/release", id(9)),
        /* 13 */ t("terminal/create", json!({ "command": "printf abcdef", "outputByteLimit": 3 })),
        /* 14 */ t("terminal/wait_for_exit", id(13)),
        /* 15 */ t("terminal/output", id(13)),
        /* 16 */
        t(
            "terminal/create",
            json!({
                "command": format!("pwd; echo $PC_TERM; echo x > {}/escaped", outside.path().display()),
                "env": [{ "name": "PC_TERM", "value": "from the agent" }], "cwd": ws.join("sub"),
            })
        ),
        /* 17 */ t("terminal/wait_for_exit", id(16)),
        /* 18 */ t("terminal/output", id(16)),
        /* 19 */ t("terminal/create", json!({ "command": "true", "cwd": "/etc" })),
    ]);
    let events = s.turn(&chat, &script.to_string());
    assert!(errors_in(&events).is_empty(), "{events:#?}");
    let answer: Value = serde_json::from_str(&chat.conversation.snapshot().last().unwrap().content).unwrap();
    assert_eq!(answer["caps"]["terminal"], json!(true), "advertised in initialize");
    let r = &answer["results"];
    // (a field that is null is left out of the answer)
    assert_eq!(r[1], json!({ "exitCode": 3 }), "{r}");
    // stdout and stderr both, as a terminal shows them (two pipes: their order between them is the reads')
    let mut lines: Vec<&str> = r[2]["output"].as_str().unwrap_or_default().lines().collect();
    lines.sort();
    assert_eq!(lines, ["err", "out"], "{r}");
    assert_eq!((&r[2]["truncated"], &r[2]["exitStatus"]["exitCode"]), (&json!(false), &json!(3)), "{r}");
    assert_eq!(r[6], json!({ "signal": "SIGKILL" }), "killed: {r}");
    assert!(r[8]["error"].as_str().unwrap_or_default().contains("no terminal"), "released, forgotten: {r}");
    assert_eq!(r[11]["output"], "started\n", "it ran before its release: {r}");
    assert!(r[11].get("exitStatus").is_none_or(Value::is_null), "still running then: {r}");
    assert_eq!((&r[15]["output"], &r[15]["truncated"]), (&json!("def"), &json!(true)), "the last 3 bytes: {r}");
    let sub = ws.join("sub").display().to_string();
    let shown = r[18]["output"].as_str().unwrap_or_default();
    assert!(shown.contains(&format!("{sub}\nfrom the agent\n")), "its cwd and env: {r}");
    assert!(shown.contains("escaped: Permission denied"), "{r}");
    assert_ne!(r[17]["exitCode"], json!(0), "the write outside the workspace failed: {r}");
    assert!(!outside.path().join("escaped").exists(), "the sandbox kept the command in the workspace");
    assert!(r[19]["error"].as_str().unwrap_or_default().contains("outside"), "a cwd outside the workspace: {r}");
    // no process left behind by the kill or the release
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_with(&marker).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000
}
