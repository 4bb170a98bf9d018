//! A full turn with two parallel tool calls through each real provider, against a fake server that
//! validates the protocol: persisted, reloaded in a new agent, and sent again.

use std::fs;
use std::sync::Arc;

use crate::support::client::agent_turn as turn;
use crate::support::{
    FakeServer, Kind, Reply, anthropic_sse, anthropic_thinking_sse, fake_redacted, fake_signature, openai_sse,
};
use pseudoclaude::agent::{Agent, AgentConfig, Event};
use pseudoclaude::provider::{self, BoxFuture, ProviderConfig, ThinkingConfig};
use pseudoclaude::session;
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver};
use serde_json::json;

struct Never;
impl Approver for Never {
    fn ask(&self, _: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(async { Approval::No })
    }
}

async fn two_tool_calls_then_resume(kind: Kind, name: &str) {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("notes.md"), "# notes\nremember the milk\n").unwrap();
    let server = FakeServer::start(kind);
    let sse = match kind {
        Kind::Anthropic => anthropic_sse,
        Kind::OpenAi => openai_sse,
    };
    let calls = [("call_a", "read_file", json!({"path": "notes.md"})), ("call_b", "grep", json!({"pattern": "milk"}))];
    server.push(Reply::sse(sse("Reading both.", &calls)));
    server.push(Reply::sse(sse("The notes say: remember the milk.", &[])));
    server.push(Reply::sse(sse("Welcome back.", &[])));
    let cfg = ProviderConfig {
        name: name.into(),
        model: "fake-model".into(),
        base_url: server.base_url(),
        api_key_env: format!("PC_AGENT_PROVIDERS_{}", name.to_uppercase()),
        retry_base_ms: 5,
        ..Default::default()
    };
    let provider: Arc<dyn provider::Provider> = Arc::from(provider::from_config(&cfg).unwrap());
    let agent = Agent::new(AgentConfig::new(ws.path()), provider.clone(), Arc::new(Never));
    let events = turn(&agent, "what do my notes say?").await;
    assert!(matches!(events.last(), Some(Event::TurnDone { .. })), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    let results: Vec<_> = events.iter().filter(|e| matches!(e, Event::ToolResult { is_error: false, .. })).collect();
    assert_eq!(results.len(), 2, "{events:?}");

    let id = agent.current().unwrap().id;
    drop(agent);
    let loaded = session::load(&session::Context::open(ws.path(), &id).unwrap()).unwrap();
    assert_eq!(loaded.messages.len(), 5);
    assert!(!loaded.damaged());
    let (again, _) = Agent::resume(AgentConfig::new(ws.path()), provider, Arc::new(Never), &id).unwrap();
    turn(&again, "thanks").await;
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs.iter().all(|r| r.rejected.is_none()), "{:?}", reqs.iter().map(|r| &r.rejected).collect::<Vec<_>>());
    let body = reqs[2].body.to_string();
    assert!(body.contains("remember the milk") && body.contains("call_a") && body.contains("call_b"), "{body}");
    assert_eq!(again.messages().last().unwrap().content, "Welcome back.");
}

#[tokio::test]
async fn anthropic_two_parallel_tool_calls_persist_reload_and_send_again() {
    two_tool_calls_then_resume(Kind::Anthropic, "anthropic").await;
}

#[tokio::test]
async fn openai_two_parallel_tool_calls_persist_reload_and_send_again() {
    two_tool_calls_then_resume(Kind::OpenAi, "openai").await;
}

#[tokio::test]
async fn the_api_key_is_sent_but_never_written_to_the_session() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(Kind::Anthropic);
    let secret = "sk-ant-test-0123456789-do-not-log";
    server.require_api_key(secret);
    server.push(Reply::sse(anthropic_sse("Hello.", &[])));
    let env = "PC_AGENT_PROVIDERS_SECRET_KEY";
    unsafe { std::env::set_var(env, secret) };
    let cfg = ProviderConfig {
        name: "anthropic".into(),
        model: "fake-model".into(),
        base_url: server.base_url(),
        api_key_env: env.into(),
        ..Default::default()
    };
    let provider: Arc<dyn provider::Provider> = Arc::from(provider::from_config(&cfg).unwrap());
    let agent = Agent::new(AgentConfig::new(ws.path()), provider, Arc::new(Never));
    let events = turn(&agent, "hi").await;
    assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    assert_eq!(server.requests()[0].header("x-api-key"), Some(secret));
    let dir = agent.current().unwrap().dir;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = fs::read(&path).unwrap();
            assert!(!String::from_utf8_lossy(&bytes).contains(secret), "{} holds the key", path.display());
        }
    }
}

/// Extended thinking through the agent: the thinking and its signature are logged with the answer (additive
/// fields), the session stops right after the tool result (the next request fails), and a resumed agent goes on
/// with the blocks sent back as they came: the fake refuses a tool loop whose last turn lacks them. Resumed with
/// thinking switched off, it goes on too.
#[tokio::test]
async fn anthropic_thinking_is_logged_and_sent_back_after_a_resume_mid_tool_loop() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("notes.md"), "remember the milk\n").unwrap();
    let server = FakeServer::start(Kind::Anthropic);
    let thought = "Notes first.\nThen answer.";
    let call = [("toolu_r1", "read_file", json!({"path": "notes.md"}))];
    server.push(Reply::sse(anthropic_thinking_sse(thought, Some("opaque"), "Reading.", &call)));
    server.push(Reply::error(Kind::Anthropic, 400, "the editor stops here"));
    server.push(Reply::sse(anthropic_sse("They say: remember the milk.", &[])));
    server.push(Reply::sse(anthropic_sse("Still the milk.", &[])));
    let cfg = ProviderConfig {
        name: "anthropic".into(),
        model: "fake-model".into(),
        base_url: server.base_url(),
        api_key_env: "PC_AGENT_PROVIDERS_THINKING".into(),
        thinking: Some(ThinkingConfig { budget_tokens: 1024 }),
        ..Default::default()
    };
    let provider: Arc<dyn provider::Provider> = Arc::from(provider::from_config(&cfg).unwrap());
    let agent = Agent::new(AgentConfig::new(ws.path()), provider.clone(), Arc::new(Never));
    let events = turn(&agent, "what do my notes say?").await;
    let thinking: String = events
        .iter()
        .filter_map(|e| match e {
            Event::ThinkingDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, thought);
    let done = events.iter().position(|e| matches!(e, Event::ThinkingDone { .. })).expect("thinking done");
    let first_text = events.iter().position(|e| matches!(e, Event::TextDelta { .. })).unwrap();
    assert!(done < first_text, "{events:?}");
    assert!(events.iter().any(|e| matches!(e, Event::ToolResult { is_error: false, .. })), "{events:?}");
    let ctx = agent.current().unwrap();
    drop(agent);

    let log = fs::read_to_string(&ctx.jsonl_path).unwrap();
    let line = log.lines().find(|l| l.contains("\"toolu_r1\"") && l.contains("\"assistant\"")).unwrap();
    let entry: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        entry["thinking"],
        json!([{"type": "thinking", "thinking": thought, "signature": fake_signature(thought)},
               {"type": "redacted_thinking", "data": fake_redacted("opaque")}])
    );
    assert!(entry["thinking_ms"].as_u64().unwrap() >= 1, "{line}");
    // Messages without thinking keep their bytes: no empty fields.
    for l in log.lines().filter(|l| !l.contains("toolu_r1\",\"name")) {
        assert!(!l.contains("\"thinking\"") && !l.contains("thinking_ms"), "{l}");
    }

    let (again, _) = Agent::resume(AgentConfig::new(ws.path()), provider, Arc::new(Never), &ctx.id).unwrap();
    let events = turn(&again, "go on").await;
    assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs[2].rejected.is_none(), "{:?}", reqs[2].rejected);
    assert_eq!(reqs[2].body["messages"][1]["content"][0]["signature"], fake_signature(thought));
    drop(again);

    let off = ProviderConfig { thinking: None, ..cfg };
    let off: Arc<dyn provider::Provider> = Arc::from(provider::from_config(&off).unwrap());
    let (later, _) = Agent::resume(AgentConfig::new(ws.path()), off, Arc::new(Never), &ctx.id).unwrap();
    let events = turn(&later, "and now?").await;
    assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    let last = server.requests().last().unwrap().clone();
    assert!(last.rejected.is_none() && last.body.get("thinking").is_none(), "{:?}", last.rejected);
    assert_eq!(later.messages().last().unwrap().content, "Still the milk.");
}
