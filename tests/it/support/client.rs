//! What the provider tests (and the agent tests) do as a client: a request with tools, a run that collects the
//! streamed events, and checks on them.

use std::time::Duration;

use pseudoclaude::message::Message;
use pseudoclaude::provider::{Provider, ProviderConfig, ProviderError, Request, Response, StreamEvent, ToolSpec};
use serde_json::json;

use super::FakeServer;

/// A provider config for tests: short timeouts, quick retries, a key variable nobody sets.
pub fn config(name: &str, model: &str, unset_key_env: &str, base_url: String) -> ProviderConfig {
    ProviderConfig {
        name: name.into(),
        model: model.into(),
        base_url,
        api_key_env: unset_key_env.into(),
        connect_timeout_secs: 2,
        idle_timeout_secs: 5,
        max_retries: 2,
        retry_base_ms: 10,
        max_tokens: 1000,
        ..Default::default()
    }
}

/// Puts `value` in `var`, a name only the calling test uses (tests run in parallel threads).
pub fn set_key(var: &str, value: &str) {
    unsafe { std::env::set_var(var, value) }
}

pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Reads a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolSpec {
            name: "list_files".into(),
            description: "Lists files".into(),
            input_schema: json!({"type": "object", "properties": {"dir": {"type": "string"}}}),
        },
    ]
}

pub fn ask(text: &str) -> Request {
    Request { system: "You are terse.".into(), messages: vec![Message::user(text)], tools: tools(), max_tokens: 0 }
}

/// Streams `req`. The deadline is a safety net for a provider that never returns (a timeout that does not fire),
/// so that such a test fails instead of hanging: never a speed check (those are the benches').
pub async fn run(p: &dyn Provider, req: &Request) -> (Result<Response, ProviderError>, Vec<StreamEvent>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let result = tokio::time::timeout(std::time::Duration::from_secs(120), p.stream(req, tx))
        .await
        .expect("the provider never returned (120 s safety net)");
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    (result, events)
}

pub fn deltas(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

pub fn retries(events: &[StreamEvent]) -> Vec<(u32, Duration, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { attempt, wait, reason } => Some((*attempt, *wait, reason.clone())),
            _ => None,
        })
        .collect()
}

pub fn assert_all_valid(server: &FakeServer) {
    for (i, r) in server.requests().iter().enumerate() {
        assert!(r.rejected.is_none(), "request {i} refused by the fake API: {:?}", r.rejected);
    }
}

/// Runs one agent turn to its end and returns every event it sent, in order.
pub async fn agent_turn(agent: &pseudoclaude::agent::Agent, text: &str) -> Vec<pseudoclaude::agent::Event> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    agent.turn(text, tx, pseudoclaude::agent::Cancel::new()).await;
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}
