//! The Anthropic provider against a fake Messages API speaking the real wire format, which refuses
//! (400) any request breaking the API's rules.

mod support;

use std::time::{Duration, Instant};

use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::provider::anthropic::Anthropic;
use pseudoclaude::provider::{ProviderConfig, ProviderError, Request, StreamEvent, Usage};
use serde_json::{Value, json};
use support::client::{self, ask, assert_all_valid, deltas, retries, run, set_key, tools};
use support::{
    FakeServer, Kind, Reply, SSE_INPUT_TOKENS, SSE_OUTPUT_TOKENS, anthropic_error_event, anthropic_sse, crlf,
    refused_base_url, split_awkwardly, truncate_before,
};

/// An env var no test sets.
const UNSET: &str = "PSEUDOCLAUDE_TEST_ANTHROPIC_NEVER_SET";

fn config(base_url: String) -> ProviderConfig {
    client::config("anthropic", "claude-test", UNSET, base_url)
}

/// One SSE event as the API writes it.
fn ev(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

#[tokio::test]
async fn text_streams_as_deltas_and_comes_back_whole() {
    let server = FakeServer::start(Kind::Anthropic);
    let text = "Hello, wörld — ✓ done 😀 and more text";
    server.push(Reply::sse(anthropic_sse(text, &[])));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let response = result.unwrap();
    assert_eq!(response.text, text);
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, "end_turn");
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (SSE_INPUT_TOKENS, SSE_OUTPUT_TOKENS));
    let d = deltas(&events);
    assert!(d.len() >= 3, "several deltas, not one: {d:?}");
    assert_eq!(d.concat(), text);
    assert_eq!(server.requests().len(), 1);
    assert_all_valid(&server);
}

#[tokio::test]
async fn two_parallel_tool_calls_come_back_with_their_arguments() {
    let server = FakeServer::start(Kind::Anthropic);
    let a = json!({"path": "src/main.rs", "range": [1, 20], "note": "naïve \"quotes\" \\ ✓"});
    let b = json!({"dir": "src/ü", "deep": {"glob": "*.rs", "max": 3}});
    server.push(Reply::sse(anthropic_sse(
        "Let me look.",
        &[("toolu_01A", "read_file", a.clone()), ("toolu_01B", "list_files", b.clone())],
    )));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("look")).await;
    let response = result.unwrap();
    assert_eq!(response.text, "Let me look.");
    assert_eq!(response.stop_reason, "tool_use");
    assert_eq!(
        response.tool_calls,
        vec![ToolCall::new("toolu_01A", "read_file", a), ToolCall::new("toolu_01B", "list_files", b)]
    );
    let started: Vec<&StreamEvent> =
        events.iter().filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. })).collect();
    assert_eq!(
        started,
        [
            &StreamEvent::ToolCallStarted { id: "toolu_01A".into(), name: "read_file".into() },
            &StreamEvent::ToolCallStarted { id: "toolu_01B".into(), name: "list_files".into() },
        ]
    );
    assert!(matches!(events[0], StreamEvent::TextDelta(_)), "text streams before the calls: {events:?}");
}

#[tokio::test]
async fn calls_and_their_results_sent_back_pass_the_api_rules() {
    let server = FakeServer::start(Kind::Anthropic);
    let args_a = json!({"path": "a.rs"});
    let args_b = json!({"dir": "src"});
    server.push(Reply::sse(anthropic_sse(
        "Reading both.",
        &[("toolu_A", "read_file", args_a.clone()), ("toolu_B", "list_files", args_b.clone())],
    )));
    server.push(Reply::sse(anthropic_sse("Both read.", &[])));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let mut req = ask("read a.rs and list src");
    let first = run(&p, &req).await.0.unwrap();
    // The runner's shape: the assistant's calls, one user message per result, then a user remark.
    req.messages.push(Message::assistant_tool_calls(first.text.clone(), first.tool_calls.clone()));
    req.messages.push(Message::tool_result("toolu_A", "fn main() {}", false));
    req.messages.push(Message::tool_result("toolu_B", "permission denied", true));
    req.messages.push(Message::user("and be quick"));
    let second = run(&p, &req).await.0.unwrap();
    assert_eq!(second.text, "Both read.");
    assert_all_valid(&server);

    let body = &server.requests()[1].body;
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 1000);
    assert_eq!(body["stream"], true);
    let cache = json!({"type": "ephemeral"});
    assert_eq!(body["system"], json!([{"type": "text", "text": "You are terse.", "cache_control": cache}]));
    assert_eq!(
        body["tools"][0],
        json!({"name": "read_file", "description": "Reads a file", "input_schema": tools()[0].input_schema})
    );
    assert_eq!(body["tools"][1]["cache_control"], cache);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read a.rs and list src", "cache_control": cache}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": args_a},
                {"type": "tool_use", "id": "toolu_B", "name": "list_files", "input": args_b},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": "fn main() {}", "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_B", "content": "permission denied", "is_error": true},
                {"type": "text", "text": "and be quick", "cache_control": cache},
            ]},
        ])
    );
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

#[tokio::test]
async fn headers_carry_the_key_the_version_and_the_content_type() {
    let var = "PSEUDOCLAUDE_TEST_ANTHROPIC_KEY_HEADERS";
    set_key(var, "sk-ant-test-headers-123");
    let server = FakeServer::start(Kind::Anthropic);
    server.require_api_key("sk-ant-test-headers-123");
    server.push(Reply::sse(anthropic_sse("ok", &[])));
    let p = Anthropic::new(ProviderConfig { api_key_env: var.into(), ..config(server.base_url()) }).unwrap();

    run(&p, &ask("hi")).await.0.unwrap();
    let r = &server.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(r.header("x-api-key"), Some("sk-ant-test-headers-123"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("authorization"), None);
}

#[tokio::test]
async fn base_url_with_or_without_a_trailing_slash_or_v1() {
    let server = FakeServer::start(Kind::Anthropic);
    let bases = [server.base_url(), format!("{}/", server.base_url()), format!("{}/v1/", server.base_url())];
    for base in &bases {
        server.push(Reply::sse(anthropic_sse("ok", &[])));
        let p = Anthropic::new(config(base.clone())).unwrap();
        assert_eq!(run(&p, &ask("hi")).await.0.unwrap().text, "ok", "{base}");
    }
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/messages"; 3]);
}

#[tokio::test]
async fn unauthorized_names_the_env_var_hides_the_key_and_is_not_retried() {
    let var = "PSEUDOCLAUDE_TEST_ANTHROPIC_KEY_401";
    let secret = "sk-ant-very-secret-401";
    set_key(var, secret);
    let server = FakeServer::start(Kind::Anthropic);
    // A server echoing the key it refused: it must not reach the error.
    server.push(Reply::error(Kind::Anthropic, 401, &format!("invalid x-api-key {secret}")));
    let p = Anthropic::new(ProviderConfig { api_key_env: var.into(), ..config(server.base_url()) }).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Auth { status: 401, env_var, message } = &err else { panic!("{err:?}") };
    assert_eq!(env_var, var);
    assert!(message.contains("invalid x-api-key"), "{message}");
    assert!(err.to_string().contains(var), "{err}");
    for shown in [err.to_string(), format!("{err:?}"), format!("{p:?}")] {
        assert!(!shown.contains(secret), "the key leaked: {shown}");
    }
    assert_eq!(server.requests().len(), 1);
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn an_unset_key_is_sent_without_header_and_reported_as_not_set() {
    let server = FakeServer::start(Kind::Anthropic);
    server.require_api_key("whatever");
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::Auth { env_var, message, .. } = &err else { panic!("{err:?}") };
    assert_eq!(env_var, UNSET);
    assert!(message.contains("is not set"), "{message}");
    assert_eq!(server.requests()[0].header("x-api-key"), None);
}

#[tokio::test]
async fn rate_limit_waits_as_long_as_retry_after_says() {
    let server = FakeServer::start(Kind::Anthropic);
    server.push(Reply::error_retry_after(Kind::Anthropic, 429, "Number of requests has exceeded your rate limit", 1));
    server.push(Reply::sse(anthropic_sse("finally", &[])));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let started = Instant::now();
    let (result, events) = run(&p, &ask("hi")).await;
    let elapsed = started.elapsed();
    assert_eq!(result.unwrap().text, "finally");
    // the wait is the behaviour: at least what Retry-After said (no upper bound: a slow machine is not a bug)
    assert!(elapsed >= Duration::from_millis(950), "{elapsed:?}");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].0, r[0].1), (1, Duration::from_secs(1)));
    assert!(r[0].2.contains("429") && r[0].2.contains("rate limit"), "{}", r[0].2);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_then_unavailable() {
    let server = FakeServer::start(Kind::Anthropic);
    for _ in 0..3 {
        server.push(Reply::error(Kind::Anthropic, 500, "Internal server error"));
    }
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Unavailable { status: 500, attempts: 3, message } = &err else { panic!("{err:?}") };
    assert!(message.contains("Internal server error"), "{message}");
    assert_eq!(server.requests().len(), 3);
    let waits: Vec<(u32, Duration)> = retries(&events).into_iter().map(|(a, w, _)| (a, w)).collect();
    assert_eq!(waits, [(1, Duration::from_millis(10)), (2, Duration::from_millis(20))]);
}

#[tokio::test]
async fn connection_refused_is_retried_then_names_the_url() {
    let base = refused_base_url();
    let p = Anthropic::new(config(base.clone())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Connect { url, .. } = &err else { panic!("{err:?}") };
    assert_eq!(url, &format!("{base}/v1/messages"));
    assert!(err.to_string().contains(&base), "{err}");
    assert_eq!(retries(&events).len(), 2);
}

#[tokio::test]
async fn a_stream_cut_mid_answer_is_stream_cut_and_not_retried() {
    let server = FakeServer::start(Kind::Anthropic);
    let full = anthropic_sse("A long answer that will not finish", &[]);
    let mut cut = truncate_before(&full, "event: content_block_stop");
    cut.extend_from_slice(b"event: content_block_delta\ndata: {\"type\":\"content_blo");
    server.push(Reply::CutAfter(cut));
    server.push(Reply::sse(full)); // must not be used
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    assert!(matches!(result, Err(ProviderError::StreamCut { .. })), "{result:?}");
    assert_eq!(deltas(&events).concat(), "A long answer that will not finish");
    assert_eq!(server.requests().len(), 1);
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn a_stream_closing_before_message_stop_is_stream_cut() {
    let server = FakeServer::start(Kind::Anthropic);
    server.push(Reply::sse(truncate_before(&anthropic_sse("almost", &[]), "event: message_stop")));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::StreamCut { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("message_stop"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_before_anything_streamed_is_retried() {
    let server = FakeServer::start(Kind::Anthropic);
    let full = anthropic_sse("second time lucky", &[]);
    server.push(Reply::CutAfter(truncate_before(&full, "event: ping")));
    server.push(Reply::sse(full));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "second time lucky");
    assert_eq!(retries(&events).len(), 1);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn data_that_is_not_json_is_a_protocol_error() {
    let server = FakeServer::start(Kind::Anthropic);
    let mut bytes = truncate_before(&anthropic_sse("hi", &[]), "event: ping");
    bytes.extend_from_slice(b"event: content_block_start\ndata: {\"type\": \"content_block_start\", oops}\n\n");
    server.push(Reply::sse(bytes));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::Protocol { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("content_block_start") && message.contains("not JSON"), "{message}");
}

#[tokio::test]
async fn malformed_event_streams_are_protocol_errors() {
    let server = FakeServer::start(Kind::Anthropic);
    // Not UTF-8.
    server.push(Reply::Stream(vec![b"event: ping\ndata: {\"type\": \"ping\xff\"}\n\n".to_vec()]));
    // Not an event stream at all.
    server.push(Reply::Status(200, vec![("content-type".into(), "text/html".into())], "<html>portal</html>".into()));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Protocol { message } if message.contains("UTF-8")), "{err:?}");
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Protocol { message } if message.contains("text/html")), "{err:?}");
}

#[tokio::test]
async fn tool_arguments_that_are_not_json_name_the_tool() {
    let server = FakeServer::start(Kind::Anthropic);
    let mut s = truncate_before(&anthropic_sse("", &[]), "event: ping");
    for e in [
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_X", "name": "edit_file", "input": {}}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a.rs\", "}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "\"old\": nope}"}}),
        ),
        ev("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ] {
        s.extend_from_slice(e.as_bytes());
    }
    server.push(Reply::sse(s));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("edit")).await;
    let err = result.unwrap_err();
    let ProviderError::Protocol { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("edit_file"), "{message}");
    assert!(events.contains(&StreamEvent::ToolCallStarted { id: "toolu_X".into(), name: "edit_file".into() }));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_tool_without_input_deltas_has_empty_arguments() {
    let server = FakeServer::start(Kind::Anthropic);
    server.push(Reply::sse(anthropic_sse("", &[("toolu_E", "list_files", json!({}))])));
    let p = Anthropic::new(config(server.base_url())).unwrap();
    let response = run(&p, &ask("list")).await.0.unwrap();
    assert_eq!(response.tool_calls, [ToolCall::new("toolu_E", "list_files", json!({}))]);
}

#[tokio::test]
async fn silence_before_the_answer_is_a_timeout() {
    let server = FakeServer::start(Kind::Anthropic);
    server.push(Reply::Hang);
    let p =
        Anthropic::new(ProviderConfig { idle_timeout_secs: 1, connect_timeout_secs: 1, ..config(server.base_url()) })
            .unwrap();

    let started = Instant::now();
    let (result, _) = run(&p, &ask("hi")).await;
    assert!(matches!(result, Err(ProviderError::Timeout { .. })), "{result:?}");
    // the wait is the behaviour: not before the idle timeout (no upper bound: client::run has a safety net)
    assert!(started.elapsed() >= Duration::from_millis(950), "{:?}", started.elapsed());
    assert_eq!(server.requests().len(), 1, "a timeout is not retried");
}

#[tokio::test]
async fn silence_in_the_middle_of_the_stream_is_a_timeout() {
    let server = FakeServer::start(Kind::Anthropic);
    let head = truncate_before(&anthropic_sse("half an answer", &[]), "event: content_block_stop");
    server.push(Reply::StallAfter(split_awkwardly(&head)));
    let p = Anthropic::new(ProviderConfig { idle_timeout_secs: 1, ..config(server.base_url()) }).unwrap();

    let started = Instant::now();
    let (result, events) = run(&p, &ask("hi")).await;
    assert_eq!(result, Err(ProviderError::Timeout { after: Duration::from_secs(1) }));
    assert!(started.elapsed() >= Duration::from_millis(950), "{:?}", started.elapsed());
    assert_eq!(deltas(&events).concat(), "half an answer");
}

#[tokio::test]
async fn an_error_event_mid_answer_is_stream_cut_with_its_message() {
    let server = FakeServer::start(Kind::Anthropic);
    let mut s = truncate_before(&anthropic_sse("Working on it", &[]), "event: content_block_stop");
    s.extend(anthropic_error_event("overloaded_error", "Overloaded"));
    server.push(Reply::sse(s));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::StreamCut { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("Overloaded"), "{message}");
    assert_eq!(server.requests().len(), 1, "never retried once text streamed");
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn overloaded_before_any_content_is_retried() {
    let server = FakeServer::start(Kind::Anthropic);
    let full = anthropic_sse("recovered", &[]);
    let mut s = truncate_before(&full, "event: ping");
    s.extend(anthropic_error_event("overloaded_error", "Overloaded"));
    server.push(Reply::sse(s.clone()));
    server.push(Reply::sse(full));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "recovered");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert!(r[0].2.contains("overloaded_error"), "{}", r[0].2);

    // Every attempt overloaded: unavailable, with the status Anthropic uses for it.
    for _ in 0..3 {
        server.push(Reply::sse(s.clone()));
    }
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(err, ProviderError::Unavailable { status: 529, attempts: 3, .. }), "{err:?}");
}

#[tokio::test]
async fn crlf_line_endings_parse_the_same() {
    let server = FakeServer::start(Kind::Anthropic);
    let args = json!({"path": "é.rs"});
    server.push(Reply::sse(crlf(&anthropic_sse("línea\r\nuno", &[("toolu_C", "read_file", args.clone())]))));
    let p = Anthropic::new(config(server.base_url())).unwrap();
    let response = run(&p, &ask("hi")).await.0.unwrap();
    assert_eq!(response.text, "línea\r\nuno");
    assert_eq!(response.tool_calls, [ToolCall::new("toolu_C", "read_file", args)]);
}

#[tokio::test]
async fn a_bad_request_is_rejected_with_the_servers_message() {
    let server = FakeServer::start(Kind::Anthropic);
    server.push(Reply::error(Kind::Anthropic, 400, "prompt is too long: 250000 tokens > 200000 maximum"));
    let p = Anthropic::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Rejected { status: 400, message } = &err else { panic!("{err:?}") };
    assert!(message.contains("prompt is too long"), "{message}");
    assert_eq!(server.requests().len(), 1);
    assert!(events.is_empty());
}
