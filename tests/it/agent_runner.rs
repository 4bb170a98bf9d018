//! The runner through its real log: turns with parallel tool calls, cancellation at each stage, a
//! failing disk, the stale reminder, compaction then resume then another turn.

use std::collections::VecDeque;
use std::fs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pseudoclaude::agent::{Agent, AgentConfig, Cancel, Event, stale_reminder};
use pseudoclaude::attachment::Attachment;
use pseudoclaude::compact::{ACK, BOUNDARY, SUMMARY_PREFIX};
use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::provider::BoxFuture;
use pseudoclaude::session::{self, Context, Writer, WriterOptions};
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver};
use serde_json::json;
use tokio::sync::mpsc;

use crate::support::scripted::{Scripted, say};

/// Answers from a queue; with nothing queued, never answers (the user walked away).
#[derive(Default)]
struct Answers(Mutex<VecDeque<Approval>>, Mutex<Vec<ApprovalRequest>>);

impl Approver for Answers {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        self.1.lock().unwrap().push(req);
        let a = self.0.lock().unwrap().pop_front();
        Box::pin(async move {
            match a {
                Some(a) => a,
                None => std::future::pending().await,
            }
        })
    }
}

fn agent(ws: &std::path::Path, provider: Arc<Scripted>) -> (Agent, Arc<Answers>) {
    let answers = Arc::new(Answers::default());
    (Agent::new(AgentConfig::new(ws), provider, answers.clone()), answers)
}

async fn run_turn(agent: &Agent, text: &str, cancel: Cancel) -> Vec<Event> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    agent.turn(text, tx, cancel).await;
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// Runs a turn and cancels it as soon as `when(events so far)` holds: at a moment the test names, not after a
/// sleep that a slow machine may outlast.
async fn run_turn_cancelled_when(agent: &Agent, text: &str, when: impl Fn(&[Event]) -> bool) -> Vec<Event> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = Cancel::new();
    let turn = agent.turn(text, tx, cancel.clone());
    tokio::pin!(turn);
    let mut out = Vec::new();
    loop {
        tokio::select! {
            _ = &mut turn => break,
            Some(e) = rx.recv() => {
                out.push(e);
                if when(&out) {
                    cancel.cancel();
                }
            }
        }
    }
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

/// What a resume would restore equals what the model sees next.
fn assert_log_matches(agent: &Agent) -> session::Loaded {
    let ctx = agent.current().expect("a session exists");
    let loaded = session::load(&ctx).unwrap();
    let strip = |m: &[Message]| {
        m.iter()
            .map(|m| (m.role.clone(), m.content.clone(), m.tool_calls.clone(), m.tool_result.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&loaded.messages), strip(&agent.messages()));
    assert!(!loaded.damaged(), "{}", loaded.damage_report());
    loaded
}

#[tokio::test]
async fn a_turn_with_two_parallel_tool_calls_is_logged_and_resumes() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let provider = Scripted::streaming(vec![
        say("Looking. ")
            .calls(vec![call("c1", "read_file", json!({"path": "a.txt"})), call("c2", "list_files", json!({}))]),
        say("Both done."),
    ]);
    let (agent, _) = agent(ws.path(), provider.clone());
    assert!(agent.current().is_none());
    let events = run_turn(&agent, "read a.txt and list files", Cancel::new()).await;
    assert!(matches!(events.last(), Some(Event::TurnDone { stop_reason }) if stop_reason == "end_turn"));
    let results: Vec<&Event> = events.iter().filter(|e| matches!(e, Event::ToolResult { .. })).collect();
    assert_eq!(results.len(), 2);
    let loaded = assert_log_matches(&agent);
    let roles: Vec<&str> = loaded.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "user", "assistant"]);
    assert_eq!(loaded.model, "scripted-1");
    // The second request carried both results right after the calls.
    let second = provider.requests.lock().unwrap()[1].clone();
    assert_eq!(second.messages.len(), 4);
    assert_eq!(second.messages[2].tool_result.as_ref().unwrap().tool_call_id, "c1");
    assert_eq!(second.messages[3].tool_result.as_ref().unwrap().tool_call_id, "c2");

    // Resume in a "second editor" once the first let go, and go on.
    let id = agent.current().unwrap().id;
    drop(agent);
    let provider2 = Scripted::streaming(vec![say("Welcome back.")]);
    let (resumed, info) =
        Agent::resume(AgentConfig::new(ws.path()), provider2.clone(), Arc::new(Answers::default()), &id).unwrap();
    assert_eq!(info.stale_hours, None);
    run_turn(&resumed, "continue", Cancel::new()).await;
    assert_eq!(provider2.requests.lock().unwrap()[0].messages.len(), 6);
    assert_log_matches(&resumed);
}

#[tokio::test]
async fn cancelling_while_streaming_records_the_text_the_user_saw() {
    let ws = tempfile::tempdir().unwrap();
    let provider = Scripted::streaming(vec![say("half an answer ").hang()]);
    let (agent, _) = agent(ws.path(), provider);
    // once the whole text reached the user (the provider then hangs)
    let shown = |events: &[Event]| {
        let text: String = events
            .iter()
            .filter_map(|e| if let Event::TextDelta { text } = e { Some(text.as_str()) } else { None })
            .collect();
        text == "half an answer "
    };
    let events = run_turn_cancelled_when(&agent, "go", shown).await;
    assert!(events.contains(&Event::Cancelled));
    let loaded = assert_log_matches(&agent);
    assert_eq!(loaded.messages.len(), 2);
    assert!(loaded.messages[1].content.starts_with("half an answer"));
    assert!(loaded.messages[1].content.contains("[interrupted by the user]"));
}

#[tokio::test]
async fn cancelling_while_a_tool_waits_answers_every_call_honestly() {
    let ws = tempfile::tempdir().unwrap();
    let provider = Scripted::streaming(vec![
        say("").calls(vec![
            call("c1", "run_command", json!({"command": "echo hi"})),
            call("c2", "read_file", json!({"path": "x"})),
        ]),
        say("after cancel"),
    ]);
    let (agent, answers) = agent(ws.path(), provider);
    let cancel = Cancel::new();
    let (c2, asked) = (cancel.clone(), answers.clone());
    // once run_command waits for its approval (the answer never comes)
    tokio::spawn(async move {
        while asked.1.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        c2.cancel();
    });
    let events = run_turn(&agent, "run it", cancel).await;
    assert!(events.contains(&Event::Cancelled));
    assert_eq!(answers.1.lock().unwrap().len(), 1, "run_command asked for approval");
    let loaded = assert_log_matches(&agent);
    let results: Vec<_> = loaded.messages.iter().filter_map(|m| m.tool_result.as_ref()).collect();
    assert_eq!(results.len(), 2, "both calls answered");
    assert!(results.iter().all(|r| r.is_error && r.content.contains("cancelled by the user")));
    // The next turn goes on from a valid history.
    run_turn(&agent, "next", Cancel::new()).await;
    assert_log_matches(&agent);
}

#[tokio::test]
async fn a_failing_disk_stops_the_turn_and_the_next_write_resyncs_everything() {
    let ws = tempfile::tempdir().unwrap();
    let provider = Scripted::streaming(vec![say("first answer"), say("second answer")]);
    let (agent, _) = agent(ws.path(), provider);
    // The sessions folder cannot be created: `.PseudoClaude` is a file.
    fs::write(ws.path().join(".PseudoClaude"), "in the way").unwrap();
    let events = run_turn(&agent, "hello", Cancel::new()).await;
    assert!(events.iter().any(|e| matches!(e, Event::Saved { ok: false, .. })));
    assert!(events.iter().any(|e| matches!(e, Event::Error { message } if message.contains("could not be written"))));
    assert!(agent.conversation.is_unsaved());
    assert_eq!(agent.messages().len(), 1, "the message the user typed is kept");
    fs::remove_file(ws.path().join(".PseudoClaude")).unwrap();
    let events = run_turn(&agent, "again", Cancel::new()).await;
    assert!(events.contains(&Event::Saved { ok: true, error: None }));
    let loaded = assert_log_matches(&agent);
    assert_eq!(loaded.messages.len(), 3);
    let text = fs::read_to_string(&agent.current().unwrap().jsonl_path).unwrap();
    assert!(text.lines().next().unwrap().contains("\"reason\":\"resync\""));
}

fn session_last_active(ws: &std::path::Path, ago: i64) -> String {
    let ctx = Context::new(ws).unwrap();
    let w = Writer::open(&ctx, WriterOptions::default()).unwrap();
    let now = chrono::Utc::now().timestamp();
    let mut m = Message::user("old question");
    m.ts = now - ago - 5;
    w.append(&m).unwrap();
    let mut a = Message::assistant("old answer");
    a.ts = now - ago;
    w.append(&a).unwrap();
    ctx.id
}

#[tokio::test]
async fn the_stale_reminder_comes_at_6h01_not_5h59_and_reaches_the_model() {
    let ws = tempfile::tempdir().unwrap();
    let fresh = session_last_active(ws.path(), 5 * 3600 + 59 * 60);
    let stale = session_last_active(ws.path(), 6 * 3600 + 60);
    let answers: Arc<dyn Approver> = Arc::new(Answers::default());
    let (a, info) =
        Agent::resume(AgentConfig::new(ws.path()), Scripted::streaming(vec![]), answers.clone(), &fresh).unwrap();
    assert_eq!((info.stale_hours, a.messages().len()), (None, 2));
    drop(a);
    let provider = Scripted::streaming(vec![say("rechecking")]);
    let log = Context::open(ws.path(), &stale).unwrap().jsonl_path;
    let before = fs::read(&log).unwrap();
    let (a, info) = Agent::resume(AgentConfig::new(ws.path()), provider.clone(), answers, &stale).unwrap();
    assert_eq!(info.stale_hours, Some(6));
    assert_eq!(a.messages().last().unwrap().content, stale_reminder(6));
    assert!(stale_reminder(6).contains("6 hours") && stale_reminder(6).contains("re-read files"));
    // Shown at once, but not written until the user sends: a resume left alone changes nothing on disk.
    assert_eq!(fs::read(&log).unwrap(), before);
    run_turn(&a, "go on", Cancel::new()).await;
    // Then persisted like any message: the log equals what the model saw.
    assert_log_matches(&a);
    let sent = &provider.requests.lock().unwrap()[0].messages;
    assert_eq!(sent[2].content, stale_reminder(6));
    assert_eq!(sent[3].content, "go on");
}

#[tokio::test]
async fn compaction_then_resume_then_another_turn() {
    let ws = tempfile::tempdir().unwrap();
    let long = "word ".repeat(400);
    let provider = Scripted::streaming(vec![]);
    let mut config = AgentConfig::new(ws.path());
    config.compact.context_window = 2000;
    config.compact.keep_recent = 2;
    let agent = Agent::new(config.clone(), provider.clone(), Arc::new(Answers::default()));
    let mut turns = 0;
    loop {
        turns += 1;
        assert!(turns < 10, "compaction never happened");
        let events = run_turn(&agent, &long, Cancel::new()).await;
        if events.contains(&Event::Compacted) {
            break;
        }
    }
    let msgs = agent.messages();
    assert!(msgs[0].content.starts_with(SUMMARY_PREFIX) && msgs[0].content.contains("SUMMARY of"), "{:?}", msgs[0]);
    assert_eq!((msgs[1].content.as_str(), msgs[2].content.as_str()), (ACK, BOUNDARY));
    assert_eq!(msgs.len(), 7, "summary, ack, boundary, the last exchange, the new question and its answer");
    let text = fs::read_to_string(&agent.current().unwrap().jsonl_path).unwrap();
    assert_eq!(text.lines().filter(|l| l.contains("\"reason\":\"compact\"")).count(), 1);
    assert_log_matches(&agent);
    let agent_msgs_head = msgs[..3].to_vec();
    let id = agent.current().unwrap().id;
    drop(agent);
    let (resumed, _) = Agent::resume(config, provider.clone(), Arc::new(Answers::default()), &id).unwrap();
    assert_eq!(resumed.compact.lock().await.boundary(), Some(2), "the boundary is found again");
    provider.answers.lock().unwrap().push_back(say("after resume"));
    run_turn(&resumed, "and now?", Cancel::new()).await;
    assert_eq!(resumed.messages().last().unwrap().content, "after resume");
    assert_eq!(resumed.messages()[..3], agent_msgs_head, "the compacted head survives the resume");
    assert_log_matches(&resumed);
}

#[tokio::test]
async fn the_system_prompt_carries_pseudoclaude_md() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("PSEUDOCLAUDE.md"), "Always answer in French.\n").unwrap();
    let provider = Scripted::streaming(vec![say("Bonjour.")]);
    let (agent, _) = agent(ws.path(), provider.clone());
    run_turn(&agent, "hello", Cancel::new()).await;
    let system = provider.requests.lock().unwrap()[0].system.clone();
    assert!(system.contains("coding agent") && system.contains("Always answer in French."), "{system}");
}

#[tokio::test]
async fn a_resumed_seed_log_with_a_large_inline_result_is_spilled_before_the_next_request() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let big = "x".repeat(200_000);
    let lines = [
        json!({"role": "user", "content": "grep it", "ts": 1}),
        json!({"role": "assistant", "tool_calls": [{"id": "c1", "name": "grep", "arguments": "{}"}], "ts": 2}),
        json!({"role": "user", "tool_result": {"tool_call_id": "c1", "content": big}, "ts": 3}),
        json!({"role": "assistant", "content": "found", "ts": 4}),
    ];
    fs::write(&ctx.jsonl_path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let provider = Scripted::streaming(vec![say("ok")]);
    let mut config = AgentConfig::new(ws.path());
    config.stale_after = Duration::from_secs(u64::MAX / 4);
    let (agent, _) = Agent::resume(config, provider.clone(), Arc::new(Answers::default()), &ctx.id).unwrap();
    run_turn(&agent, "and?", Cancel::new()).await;
    let sent = provider.requests.lock().unwrap()[0].messages[2].tool_result.clone().unwrap();
    assert!(sent.spill.is_some() && sent.content.len() < 4096, "the model sees a preview");
    assert_eq!(session::spill::read(&ctx, sent.spill.as_ref().unwrap()).unwrap(), big);
    let text = fs::read_to_string(&ctx.jsonl_path).unwrap();
    assert!(text.lines().any(|l| l.contains("\"reason\":\"spill\"")));
    assert_log_matches(&agent);
}

#[tokio::test]
async fn attachments_reach_the_model_in_the_message_are_logged_and_a_large_one_spills() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.md"), "# Notes\nfrom disk\n").unwrap();
    let provider = Scripted::streaming(vec![say("seen")]);
    let mut config = AgentConfig::new(ws.path());
    config.spill_threshold = 1024;
    let agent = Agent::new(config, provider.clone(), Arc::new(Answers::default()));
    let big = "unsaved line\n".repeat(200);
    let attachments: Vec<Attachment> = serde_json::from_value(json!([
        {"kind": "selection", "path": "src/a.rs", "lines": [2, 3], "filetype": "rust", "text": "two\nthree\n"},
        {"kind": "file", "path": "notes.md"},
        {"kind": "file", "path": "../outside.txt"},
        {"kind": "buffer", "path": "big.txt", "text": big, "modified": true},
    ]))
    .unwrap();
    let (tx, _rx) = mpsc::unbounded_channel();
    agent.turn_with("look at these", &attachments, tx, Cancel::new()).await;
    let sent = provider.requests.lock().unwrap()[0].messages[0].content.clone();
    assert!(sent.starts_with("look at these\n\n<attachment kind=\"selection\" path=\"src/a.rs\" lines=\"2-3\" filetype=\"rust\">\ntwo\nthree\n</attachment>"), "{sent}");
    assert!(sent.contains("<attachment kind=\"file\" path=\"notes.md\">\n# Notes\nfrom disk\n</attachment>"), "{sent}");
    assert!(
        sent.contains("path=\"../outside.txt\" error=\"path &quot;../outside.txt&quot; is outside the workspace"),
        "{sent}"
    );
    // The large one: its start, and where the rest is, a file holding exactly the text.
    let ctx = agent.current().unwrap();
    let at = sent.split("spill=\"").nth(1).and_then(|s| s.split('"').next()).expect("spilled");
    assert!(at.starts_with(".PseudoClaude/sessions/") && at.contains("/tool-results/"), "{at}");
    assert_eq!(std::fs::read_to_string(ws.path().join(at)).unwrap(), big);
    assert!(sent.len() < 6000, "{}", sent.len());
    // Logged as sent: a resume restores it exactly.
    let loaded = assert_log_matches(&agent);
    assert_eq!(loaded.messages[0].content, sent);
    assert!(ctx.dir.join("tool-results").is_dir());
}
