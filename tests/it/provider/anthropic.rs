//! What only Anthropic's Messages API has: the body sent (content blocks, tool results in the user turn),
//! prompt caching's `cache_control` breakpoints, usage with cache reads and writes from `message_start`
//! and `message_delta`, the overloaded status, and the fake's own rules.

use pseudoclaude::message::{Message, Thinking, ToolCall};
use pseudoclaude::provider::anthropic::Anthropic;
use pseudoclaude::provider::{ProviderConfig, ProviderError, Request, StreamEvent, ThinkingConfig, Usage};
use serde_json::{Value, json};

use super::wire::{Format, ev};
use crate::support::client::{ask, assert_all_valid, run};
use crate::support::{FakeServer, Kind, Reply, anthropic_sse, anthropic_thinking_sse, fake_redacted, fake_signature};

fn config(base_url: String) -> ProviderConfig {
    Format::Anthropic.config(base_url)
}

/// The `cache_control` blocks of a request body, as paths: `system.0`, `tools.3`, `messages.4.content.1`.
fn breakpoints(body: &Value) -> Vec<String> {
    fn walk(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(c) = o.get("cache_control") {
                    assert_eq!(c, &json!({"type": "ephemeral"}), "{at}");
                    out.push(at.clone());
                }
                for (k, v) in o {
                    walk(v, if at.is_empty() { k.clone() } else { format!("{at}.{k}") }, out);
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(v, format!("{at}.{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, String::new(), &mut out);
    out.sort();
    out
}

/// A long agent session, as the runner re-sends it on every turn: the system prompt, the tools and the
/// last two user turns are cache breakpoints, four in all (the API's limit, which the fake enforces);
/// without a system prompt or tools the newest turns still get at most two.
#[tokio::test]
async fn prompt_caching_marks_system_tools_and_the_two_newest_user_turns() {
    let server = FakeServer::start(Kind::Anthropic);
    for _ in 0..3 {
        server.push(Reply::sse(anthropic_sse("ok", &[])));
    }
    let p = Anthropic::new(config(server.base_url())).unwrap();
    let mut req = ask("first question");
    for i in 0..6 {
        req.messages.push(Message::assistant_tool_calls(
            format!("step {i}"),
            vec![ToolCall::new(format!("toolu_{i}"), "read_file", json!({"path": "a"}))],
        ));
        req.messages.push(Message::tool_result(format!("toolu_{i}"), format!("result {i}"), false));
    }
    req.messages.push(Message::user("and now?"));
    run(&p, &req).await.0.unwrap();
    run(&p, &Request { system: String::new(), ..req.clone() }).await.0.unwrap();
    run(&p, &Request { system: String::new(), tools: Vec::new(), messages: req.messages[..1].to_vec(), ..req.clone() })
        .await
        .0
        .unwrap();
    assert_all_valid(&server);
    let reqs = server.requests();

    // The raw bytes: four markers, no more.
    let raw = String::from_utf8(reqs[0].raw_body.clone()).unwrap();
    assert_eq!(raw.matches("\"cache_control\":{\"type\":\"ephemeral\"}").count(), 4, "{raw}");
    let body = &reqs[0].body;
    let last = body["messages"].as_array().unwrap().len() - 1;
    // The last user turn holds the last tool result and the question; the one before it, a result.
    assert_eq!(
        breakpoints(body),
        [
            format!("messages.{}.content.0", last - 2),
            format!("messages.{last}.content.1"),
            "system.0".into(),
            "tools.1".into()
        ]
    );
    assert_eq!(body["messages"][last]["content"][1]["text"], "and now?");
    assert_eq!(body["messages"][last - 2]["content"][0]["tool_use_id"], "toolu_4");

    assert_eq!(
        breakpoints(&reqs[1].body),
        [format!("messages.{}.content.0", last - 2), format!("messages.{last}.content.1"), "tools.1".into()]
    );
    assert!(reqs[1].body.get("system").is_none());
    assert_eq!(breakpoints(&reqs[2].body), ["messages.0.content.0"]);
}

/// `message_start` carries the input side (uncached, written to and read from the cache), `message_delta`
/// the output so far; the counts come back apart, so that each can be priced.
#[tokio::test]
async fn usage_with_cache_reads_and_writes_comes_from_message_start_and_message_delta() {
    let server = FakeServer::start(Kind::Anthropic);
    let mut s = Vec::new();
    for e in [
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 12, "cache_creation_input_tokens": 2048, "cache_read_input_tokens": 9000,
                          "cache_creation": {"ephemeral_5m_input_tokens": 2048, "ephemeral_1h_input_tokens": 0},
                          "output_tokens": 1, "service_tier": "standard"}}}),
        ),
        ev("ping", json!({"type": "ping"})),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Cached."}}),
        ),
        ev("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 57}}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ] {
        s.extend_from_slice(e.as_bytes());
    }
    server.push(Reply::sse(s.clone()));
    // Newer API versions repeat the cumulative input counts in `message_delta`.
    let later = String::from_utf8(s).unwrap().replace(
        r#""usage":{"output_tokens":57}"#,
        r#""usage":{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":9000,"output_tokens":60}"#,
    );
    server.push(Reply::sse(later.into_bytes()));
    let p = Anthropic::new(config(server.base_url())).unwrap();
    let want = Usage { input_tokens: 12, output_tokens: 57, cache_read_tokens: 9000, cache_write_tokens: 2048 };
    assert_eq!(run(&p, &ask("hi")).await.0.unwrap().usage, want);
    assert_eq!(run(&p, &ask("hi")).await.0.unwrap().usage, Usage { output_tokens: 60, ..want });
}

/// Posts `body` to the fake API as a client would, past our provider: for the fake's own rules.
async fn post_raw(server: &FakeServer, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/messages", server.base_url()))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_fake_api_refuses_a_fifth_cache_breakpoint() {
    let server = FakeServer::start(Kind::Anthropic);
    let block = |t: &str| json!({"type": "text", "text": t, "cache_control": {"type": "ephemeral"}});
    let body = json!({"model": "m", "max_tokens": 10, "stream": true,
        "system": [block("s")],
        "messages": [{"role": "user", "content": [block("a"), block("b"), block("c"), block("d")]}]});
    let answer = post_raw(&server, &body).await;
    assert_eq!(answer.status().as_u16(), 400);
    let text = answer.text().await.unwrap();
    assert!(text.contains("A maximum of 4 blocks with cache_control may be provided. Found 5."), "{text}");
}

#[tokio::test]
async fn a_history_broken_by_a_crash_still_passes_the_api_rules() {
    let server = FakeServer::start(Kind::Anthropic);
    server.push(Reply::sse(anthropic_sse("ok", &[])));
    let p = Anthropic::new(config(server.base_url())).unwrap();
    let req = Request {
        messages: vec![
            Message::assistant("(an assistant message first: the log was trimmed)"),
            Message::user("go on"),
            Message::user("please"),
            // The session died before this call's result was logged...
            Message::assistant_tool_calls("", vec![ToolCall::new("toolu_lost", "read_file", json!({"path": "x"}))]),
            Message::user("what happened?"),
            // ...and this result answers no call.
            Message::tool_result("toolu_ghost", "stray output", false),
            Message::assistant(""),
            Message::assistant("Let me retry."),
        ],
        ..ask("")
    };
    let (result, _) = run(&p, &req).await;
    assert_eq!(result.unwrap().text, "ok");
    assert_all_valid(&server);
    let messages = server.requests()[0].body["messages"].clone();
    let roles: Vec<&str> = messages.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user", "assistant"]);
    assert_eq!(messages[4]["content"][0]["tool_use_id"], "toolu_lost");
    assert_eq!(messages[4]["content"][0]["is_error"], true);
}

/// The fake refuses what the real API refuses, so the tests passing through it mean something.
#[tokio::test]
async fn the_fake_api_refuses_invalid_conversations() {
    let server = FakeServer::start(Kind::Anthropic);
    let use_a = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]});
    let cases = [
        (json!([{"role": "assistant", "content": "hi"}]), "first message"),
        (json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]), "alternate"),
        (
            json!([{"role": "user", "content": "a"}, use_a, {"role": "user", "content": "no result"}]),
            "without `tool_result`",
        ),
        (json!([{"role": "user", "content": "a"}, use_a]), "without `tool_result`"),
        (
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]),
            "unexpected `tool_use_id`",
        ),
        (
            json!([{"role": "user", "content": "a"}, use_a, {"role": "user", "content": [
                {"type": "text", "text": "first"},
                {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]),
            "must come before",
        ),
        (json!([{"role": "user", "content": [{"type": "text", "text": " "}]}]), "non-whitespace"),
    ];
    for (messages, why) in cases {
        let body = json!({"model": "m", "max_tokens": 10, "stream": true, "messages": messages});
        let answer = post_raw(&server, &body).await;
        assert_eq!(answer.status().as_u16(), 400, "{messages}");
        let text = answer.text().await.unwrap();
        assert!(text.contains(why), "{messages}: expected {why:?} in {text}");
    }
    let no_model = json!({"max_tokens": 10, "stream": true, "messages": [{"role": "user", "content": "a"}]});
    let answer = post_raw(&server, &no_model).await;
    assert_eq!(answer.status().as_u16(), 400);
    assert!(server.requests().iter().all(|r| r.rejected.is_some()));
}

/// Overloaded before any content on every attempt (the retried case is the shared
/// `an_error_event_before_any_content_is_retried`): unavailable, with the status Anthropic uses for it.
#[tokio::test]
async fn overloaded_on_every_attempt_is_unavailable_with_status_529() {
    let server = FakeServer::start(Kind::Anthropic);
    let overloaded = Format::Anthropic.error_before_content("overloaded_error", "Overloaded");
    for _ in 0..3 {
        server.push(Reply::sse(overloaded.clone()));
    }
    let p = Anthropic::new(config(server.base_url())).unwrap();
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(err, ProviderError::Unavailable { status: 529, attempts: 3, .. }), "{err:?}");
}

fn thinking_config(base_url: String, budget: u32) -> ProviderConfig {
    ProviderConfig { thinking: Some(ThinkingConfig { budget_tokens: budget }), ..config(base_url) }
}

/// Extended thinking: the request asks for it (with `max_tokens` above the budget), the thinking streams as
/// deltas apart from the text, its signature and a redacted block come back in the response exactly as sent,
/// and a tool loop continued with them is accepted; without them, or with one changed, the API refuses it.
#[tokio::test]
async fn thinking_streams_with_its_signature_and_goes_back_as_given_in_a_tool_loop() {
    let server = FakeServer::start(Kind::Anthropic);
    let thought = "The user wants a.rs.\nI should read it first.\nThen answer.";
    let call = ("toolu_T1", "read_file", json!({"path": "a.rs"}));
    server.push(Reply::sse(anthropic_thinking_sse(thought, Some("opaque-1"), "Reading.", std::slice::from_ref(&call))));
    let p = Anthropic::new(thinking_config(server.base_url(), 2048)).unwrap();
    let (result, events) = run(&p, &ask("what is in a.rs?")).await;
    let first = result.unwrap();
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ThinkingDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, thought);
    assert!(events.iter().filter(|e| matches!(e, StreamEvent::ThinkingDelta(_))).count() > 1, "{events:?}");
    assert_eq!(first.text, "Reading.");
    assert_eq!(
        first.thinking,
        [
            Thinking {
                kind: "thinking".into(),
                thinking: thought.into(),
                signature: fake_signature(thought),
                ..Default::default()
            },
            Thinking { kind: "redacted_thinking".into(), data: fake_redacted("opaque-1"), ..Default::default() },
        ]
    );
    let sent = &server.requests()[0].body;
    assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert_eq!(sent["max_tokens"], 2048 + 1000, "max_tokens is raised above the budget");

    // The loop goes on: the answer (thinking first), its tool result.
    let mut answer = Message::assistant_tool_calls(first.text.clone(), first.tool_calls.clone());
    answer.thinking = first.thinking.clone();
    let mut req = ask("what is in a.rs?");
    req.messages.push(answer.clone());
    req.messages.push(Message::tool_result("toolu_T1", "fn main() {}", false));
    server.push(Reply::sse(anthropic_sse("It holds an empty main.", &[])));
    assert_eq!(run(&p, &req).await.0.unwrap().text, "It holds an empty main.");
    let reqs = server.requests();
    assert!(reqs[1].rejected.is_none(), "{:?}", reqs[1].rejected);
    let assistant = &reqs[1].body["messages"][1]["content"];
    assert_eq!(assistant[0], json!({"type": "thinking", "thinking": thought, "signature": fake_signature(thought)}));
    assert_eq!(assistant[1], json!({"type": "redacted_thinking", "data": fake_redacted("opaque-1")}));
    assert_eq!(assistant[2]["type"], "text");
    assert_eq!(assistant[3]["type"], "tool_use");
    // The thinking's bytes, as streamed, are in the request's bytes.
    let raw = String::from_utf8(reqs[1].raw_body.clone()).unwrap();
    assert!(raw.contains(&serde_json::to_string(thought).unwrap()), "{raw}");

    // What the fake refuses, as the API does: the blocks left out, or one changed.
    let mut stripped = req.clone();
    stripped.messages[1].thinking.clear();
    let err = run(&p, &stripped).await.0.unwrap_err();
    assert!(err.to_string().contains("Expected `thinking` or `redacted_thinking`, but found `text`"), "{err}");
    let mut changed = req.clone();
    changed.messages[1].thinking[0].thinking.push_str(" (edited)");
    let err = run(&p, &changed).await.0.unwrap_err();
    assert!(err.to_string().contains("Invalid `signature` in `thinking` block"), "{err}");
    let mut redacted = req.clone();
    redacted.messages[1].thinking[1].data.push('x');
    let err = run(&p, &redacted).await.0.unwrap_err();
    assert!(err.to_string().contains("Invalid `data` in `redacted_thinking` block"), "{err}");
    assert_eq!(server.requests().iter().filter(|r| r.rejected.is_some()).count(), 3);

    // Thinking switched off: the same history goes without its thinking, and is accepted.
    let off = Anthropic::new(config(server.base_url())).unwrap();
    server.push(Reply::sse(anthropic_sse("Still an empty main.", &[])));
    assert_eq!(run(&off, &req).await.0.unwrap().text, "Still an empty main.");
    let last = server.requests().last().unwrap().body.clone();
    assert!(last.get("thinking").is_none());
    assert_eq!(last["messages"][1]["content"][0]["type"], "text", "{last}");
}

#[tokio::test]
async fn a_thinking_budget_under_the_api_minimum_is_a_config_error() {
    let err = Anthropic::new(thinking_config("http://127.0.0.1:1".into(), 1000)).unwrap_err();
    assert!(err.to_string().contains("provider.thinking.budget_tokens must be at least 1024 (got 1000)"), "{err}");
}
