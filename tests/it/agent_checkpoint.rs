//! Checkpoints through each real provider against a fake server that validates the protocol: the
//! text of an answer killed mid-stream is restored, marked interrupted, and told to the model in a
//! request both APIs accept; a completed answer leaves the log it left before checkpoints existed.

use std::fs;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::client::agent_turn as turn;
use crate::support::{FakeServer, Kind, Reply, anthropic_sse, openai_sse, truncate_before};
use pseudoclaude::agent::{Agent, AgentConfig, Event};
use pseudoclaude::provider::{self, BoxFuture, ProviderConfig};
use pseudoclaude::session;
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver};
use serde_json::{Value, json};

struct Never;
impl Approver for Never {
    fn ask(&self, _: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(async { Approval::No })
    }
}

const STREAMED: &str = "The parser fails on nested quotes because the lexer ";
const NOTE: &str = "[This answer was interrupted here";

/// The wire bytes of one answer (text, then tool calls) in `kind`'s format.
fn sse(kind: Kind, text: &str, calls: &[(&str, &str, Value)]) -> Vec<u8> {
    match kind {
        Kind::Anthropic => anthropic_sse(text, calls),
        Kind::OpenAi => openai_sse(text, calls),
    }
}

fn provider_for(kind: Kind, server: &FakeServer) -> Arc<dyn provider::Provider> {
    let name = match kind {
        Kind::Anthropic => "anthropic",
        Kind::OpenAi => "openai",
    };
    let cfg = ProviderConfig {
        name: name.into(),
        model: "fake-model".into(),
        base_url: server.base_url(),
        api_key_env: "PC_AGENT_CHECKPOINT_NO_KEY".into(),
        retry_base_ms: 5,
        ..Default::default()
    };
    Arc::from(provider::from_config(&cfg).unwrap())
}

fn config(ws: &std::path::Path, every: Duration) -> AgentConfig {
    let mut c = AgentConfig::new(ws);
    c.checkpoint_every = every;
    c
}

fn entries(path: &std::path::Path) -> Vec<Value> {
    fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn checkpointed(path: &std::path::Path) -> String {
    entries(path).iter().filter(|e| e["type"] == "checkpoint").map(|e| e["content"].as_str().unwrap()).collect()
}

/// The answer streams `STREAMED`, then the server goes silent with the connection open; once the
/// log holds all of it the turn is dropped where it stands (nothing runs after it: as a SIGKILL
/// leaves it), then the session is resumed and the conversation goes on.
async fn killed_mid_stream_then_resumed(kind: Kind) {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(kind);
    let cut = match kind {
        Kind::Anthropic => "event: content_block_stop",
        Kind::OpenAi => "\"finish_reason\":\"stop\"",
    };
    server.push(Reply::StallAfter(vec![truncate_before(&sse(kind, STREAMED, &[]), cut)]));
    server.push(Reply::sse(sse(kind, "Picking up: the lexer treats the second quote as an end.", &[])));
    let provider = provider_for(kind, &server);
    let agent = Arc::new(Agent::new(config(ws.path(), Duration::from_millis(20)), provider.clone(), Arc::new(Never)));
    let log = Arc::downgrade(&agent.log);
    let running = {
        let agent = agent.clone();
        tokio::spawn(async move { turn(&agent, "why does the parser fail?").await })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let jsonl = loop {
        if let Some(ctx) = agent.current()
            && checkpointed(&ctx.jsonl_path) == STREAMED
        {
            break ctx.jsonl_path;
        }
        assert!(Instant::now() < deadline, "the streamed text never reached the log");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    running.abort();
    let _ = running.await;
    drop(agent);
    // A checkpoint still being synced holds the writer (and its lock) until it is done.
    while log.upgrade().is_some() {
        assert!(Instant::now() < deadline, "the writer was never released");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let id = jsonl.parent().unwrap().file_name().unwrap().to_str().unwrap().to_string();
    let loaded = session::load(&session::Context::open(ws.path(), &id).unwrap()).unwrap();
    assert_eq!(loaded.messages.len(), 2, "{:?}", loaded.messages);
    let answer = &loaded.messages[1];
    assert_eq!((answer.role.as_str(), answer.content.as_str(), answer.interrupted), ("assistant", STREAMED, true));
    assert_eq!(loaded.interrupted, 1);
    assert!(loaded.damaged() && loaded.damage_report().contains("interrupted"), "{}", loaded.damage_report());

    let (again, _) =
        Agent::resume(config(ws.path(), Duration::from_millis(20)), provider, Arc::new(Never), &id).unwrap();
    let events = turn(&again, "go on").await;
    assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.rejected.is_none()), "{:?}", reqs.iter().map(|r| &r.rejected).collect::<Vec<_>>());
    let sent = &reqs[1].body["messages"];
    let assistant = sent.as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap().to_string();
    assert!(assistant.contains(STREAMED.trim_end()) && assistant.contains(NOTE), "{assistant}");
    // Memory and the log agree after the turn, and the mark survives.
    let loaded = session::load(&again.current().unwrap()).unwrap();
    let strip = |ms: &[pseudoclaude::message::Message]| {
        ms.iter().map(|m| (m.role.clone(), m.content.clone(), m.interrupted)).collect::<Vec<_>>()
    };
    assert_eq!(strip(&loaded.messages), strip(&again.messages()));
    assert_eq!(strip(&loaded.messages)[1], ("assistant".into(), STREAMED.into(), true));
}

#[tokio::test]
async fn anthropic_an_answer_killed_mid_stream_is_restored_and_told_to_the_model() {
    killed_mid_stream_then_resumed(Kind::Anthropic).await;
}

#[tokio::test]
async fn openai_an_answer_killed_mid_stream_is_restored_and_told_to_the_model() {
    killed_mid_stream_then_resumed(Kind::OpenAi).await;
}

/// One turn (text, a tool call, the answer after it) with checkpoints on and off: apart from the
/// checkpoint lines, and the times, the two logs hold the same entries and load the same history.
async fn completed_turn_leaves_the_log_of_today(kind: Kind) {
    let run = |every: Duration| async move {
        let ws = tempfile::tempdir().unwrap();
        fs::write(ws.path().join("notes.md"), "remember the milk\n").unwrap();
        let server = FakeServer::start(kind);
        server.set_piece_delay(Duration::from_millis(5));
        server.push(Reply::sse(sse(
            kind,
            "Reading the notes first.",
            &[("call_a", "read_file", json!({"path": "notes.md"}))],
        )));
        server.push(Reply::sse(sse(kind, "They say: remember the milk.", &[])));
        let agent = Agent::new(config(ws.path(), every), provider_for(kind, &server), Arc::new(Never));
        let events = turn(&agent, "what do my notes say?").await;
        assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
        assert!(server.requests().iter().all(|r| r.rejected.is_none()));
        let ctx = agent.current().unwrap();
        drop(agent);
        let loaded = session::load(&ctx).unwrap();
        (ws, entries(&ctx.jsonl_path), loaded)
    };
    let (_a, without, plain) = run(Duration::ZERO).await;
    let (_b, with, checked) = run(Duration::from_millis(1)).await;
    assert!(!without.iter().any(|e| e["type"] == "checkpoint"));
    // The tool call's start is a boundary: the text before it is checkpointed whatever the timing.
    let ckpts: Vec<_> = with.iter().filter(|e| e["type"] == "checkpoint").collect();
    assert!(!ckpts.is_empty(), "{with:?}");
    let untimed = |es: &[Value]| {
        es.iter()
            .filter(|e| e["type"] != "checkpoint")
            .map(|e| {
                let mut e = e.clone();
                e["ts"] = json!(0);
                e
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(untimed(&with), untimed(&without));
    assert_eq!(checked.entries, plain.entries + ckpts.len());
    let strip = |l: &session::Loaded| {
        l.messages.iter().map(|m| pseudoclaude::message::Message { ts: 0, ..m.clone() }).collect::<Vec<_>>()
    };
    assert_eq!(strip(&checked), strip(&plain));
    assert!(!checked.damaged(), "{}", checked.damage_report());
    assert_eq!((checked.messages.len(), checked.interrupted), (4, 0));
}

#[tokio::test]
async fn anthropic_a_completed_turn_with_checkpoints_loads_as_without() {
    completed_turn_leaves_the_log_of_today(Kind::Anthropic).await;
}

#[tokio::test]
async fn openai_a_completed_turn_with_checkpoints_loads_as_without() {
    completed_turn_leaves_the_log_of_today(Kind::OpenAi).await;
}

/// A stream that breaks after some text (the server, the network): the text shown is recorded as an
/// interrupted answer, in memory and in the log alike, and the next request carries the note.
#[tokio::test]
async fn a_stream_cut_after_some_text_keeps_it_as_an_interrupted_answer() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::CutAfter(truncate_before(&sse(Kind::OpenAi, STREAMED, &[]), "\"finish_reason\":\"stop\"")));
    server.push(Reply::sse(sse(Kind::OpenAi, "Again, in full.", &[])));
    let agent =
        Agent::new(config(ws.path(), Duration::from_millis(20)), provider_for(Kind::OpenAi, &server), Arc::new(Never));
    let events = turn(&agent, "why?").await;
    assert!(events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    let loaded = session::load(&agent.current().unwrap()).unwrap();
    let strip = |ms: &[pseudoclaude::message::Message]| {
        ms.iter().map(|m| (m.role.clone(), m.content.clone(), m.interrupted)).collect::<Vec<_>>()
    };
    assert_eq!(strip(&loaded.messages), strip(&agent.messages()));
    assert_eq!(strip(&loaded.messages)[1], ("assistant".into(), STREAMED.into(), true));
    let events = turn(&agent, "try again").await;
    assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    let reqs = server.requests();
    assert!(reqs.iter().all(|r| r.rejected.is_none()), "{:?}", reqs.iter().map(|r| &r.rejected).collect::<Vec<_>>());
    let assistant =
        reqs[1].body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap().to_string();
    assert!(assistant.contains(NOTE), "{assistant}");
}
