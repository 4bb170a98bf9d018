//! The OpenAI-compatible provider against a fake Chat Completions API speaking the real wire
//! format, which refuses (400) any request breaking the API's rules.

mod support;

use std::time::{Duration, Instant};

use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::provider::openai::OpenAi;
use pseudoclaude::provider::{ProviderConfig, ProviderError, Request, StreamEvent, Usage};
use serde_json::{Value, json};
use support::client::{self, ask, assert_all_valid, deltas, retries, run, set_key, tools};
use support::{
    FakeServer, Kind, Reply, SSE_INPUT_TOKENS, SSE_OUTPUT_TOKENS, crlf, openai_error_chunk, openai_sse,
    refused_base_url, split_awkwardly, truncate_before,
};

/// An env var no test sets.
const UNSET: &str = "PSEUDOCLAUDE_TEST_OPENAI_NEVER_SET";

fn config(base_url: String) -> ProviderConfig {
    client::config("openai", "gpt-test", UNSET, base_url)
}

/// One `data:` chunk carrying `choices[0].delta` and `finish_reason`.
fn chunk(delta: Value, finish: Value) -> String {
    let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

#[tokio::test]
async fn text_streams_as_deltas_and_comes_back_whole() {
    let server = FakeServer::start(Kind::OpenAi);
    let text = "Hello, wörld — ✓ done 😀 and more text";
    server.push(Reply::sse(openai_sse(text, &[])));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let response = result.unwrap();
    assert_eq!(response.text, text);
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, "stop");
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (SSE_INPUT_TOKENS, SSE_OUTPUT_TOKENS));
    let d = deltas(&events);
    assert!(d.len() >= 3, "several deltas, not one: {d:?}");
    assert_eq!(d.concat(), text);
    assert_all_valid(&server);
}

/// The request asks for the usage chunk (the bytes, not only the parsed body), and the final chunk's
/// `prompt_tokens_details.cached_tokens` comes back as cache reads, out of the full-rate input.
#[tokio::test]
async fn usage_is_asked_for_and_its_cached_share_read_from_the_final_chunk() {
    let server = FakeServer::start(Kind::OpenAi);
    // The fake's stream up to its own usage chunk (keys are written sorted: it is the one starting so),
    // then the usage chunk as OpenAI sends it: empty choices, then `[DONE]`.
    let answer = truncate_before(&openai_sse("Cached.", &[]), "data: {\"choices\":[],");
    let body = |usage: Value| {
        let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                       "choices": [], "usage": usage});
        let mut b = answer.clone();
        b.extend_from_slice(format!("data: {c}\n\ndata: [DONE]\n\n").as_bytes());
        b
    };
    server.push(Reply::sse(body(json!({
        "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}))));
    // DeepSeek names the cached share differently.
    server.push(Reply::sse(body(json!({
        "prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
        "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36}))));
    let p = OpenAi::new(config(server.base_url())).unwrap();
    let first = run(&p, &ask("hi")).await.0.unwrap();
    assert_eq!(first.text, "Cached.");
    assert_eq!(
        first.usage,
        Usage { input_tokens: 86, output_tokens: 300, cache_read_tokens: 1920, cache_write_tokens: 0 }
    );
    let second = run(&p, &ask("hi")).await.0.unwrap();
    assert_eq!(
        second.usage,
        Usage { input_tokens: 36, output_tokens: 5, cache_read_tokens: 64, cache_write_tokens: 0 }
    );
    assert_all_valid(&server);
    let raw = String::from_utf8(server.requests()[0].raw_body.clone()).unwrap();
    assert!(raw.contains(r#""stream":true"#) && raw.contains(r#""stream_options":{"include_usage":true}"#), "{raw}");
}

#[tokio::test]
async fn two_parallel_tool_calls_come_back_with_their_arguments() {
    let server = FakeServer::start(Kind::OpenAi);
    let a = json!({"path": "src/main.rs", "range": [1, 20], "note": "naïve \"quotes\" \\ ✓"});
    let b = json!({"dir": "src/ü", "deep": {"glob": "*.rs", "max": 3}});
    server.push(Reply::sse(openai_sse(
        "Let me look.",
        &[("call_A", "read_file", a.clone()), ("call_B", "list_files", b.clone())],
    )));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("look")).await;
    let response = result.unwrap();
    assert_eq!(response.text, "Let me look.");
    assert_eq!(response.stop_reason, "tool_calls");
    assert_eq!(
        response.tool_calls,
        vec![ToolCall::new("call_A", "read_file", a), ToolCall::new("call_B", "list_files", b)]
    );
    let started: Vec<&StreamEvent> =
        events.iter().filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. })).collect();
    assert_eq!(
        started,
        [
            &StreamEvent::ToolCallStarted { id: "call_A".into(), name: "read_file".into() },
            &StreamEvent::ToolCallStarted { id: "call_B".into(), name: "list_files".into() },
        ]
    );
}

#[tokio::test]
async fn calls_and_their_results_sent_back_pass_the_api_rules() {
    let server = FakeServer::start(Kind::OpenAi);
    let args_a = json!({"path": "a.rs"});
    let args_b = json!({"dir": "src"});
    server.push(Reply::sse(openai_sse(
        "",
        &[("call_A", "read_file", args_a.clone()), ("call_B", "list_files", args_b.clone())],
    )));
    server.push(Reply::sse(openai_sse("Both read.", &[])));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let mut req = ask("read a.rs and list src");
    let first = run(&p, &req).await.0.unwrap();
    req.messages.push(Message::assistant_tool_calls(first.text.clone(), first.tool_calls.clone()));
    req.messages.push(Message::tool_result("call_B", "a.rs b.rs", false));
    req.messages.push(Message::tool_result("call_A", "permission denied", true));
    req.messages.push(Message::user("and be quick"));
    let second = run(&p, &req).await.0.unwrap();
    assert_eq!(second.text, "Both read.");
    assert_all_valid(&server);

    let body = &server.requests()[1].body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 1000, "a compatible server gets max_tokens");
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "read_file", "description": "Reads a file",
                                                "parameters": tools()[0].input_schema}})
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "read a.rs and list src"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_A", "type": "function", "function": {"name": "read_file", "arguments": args_a.to_string()}},
                {"id": "call_B", "type": "function", "function": {"name": "list_files", "arguments": args_b.to_string()}},
            ]},
            {"role": "tool", "tool_call_id": "call_A", "content": "Error: permission denied"},
            {"role": "tool", "tool_call_id": "call_B", "content": "a.rs b.rs"},
            {"role": "user", "content": "and be quick"},
        ])
    );
}

#[tokio::test]
async fn a_history_broken_by_a_crash_still_passes_the_api_rules() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::sse(openai_sse("ok", &[])));
    let p = OpenAi::new(config(server.base_url())).unwrap();
    let req = Request {
        messages: vec![
            Message::user("go"),
            Message::assistant_tool_calls("Trying.", vec![ToolCall::new("call_lost", "read_file", json!({}))]),
            Message::user("what happened?"),
            Message::tool_result("call_ghost", "stray output", false),
        ],
        ..ask("")
    };
    assert_eq!(run(&p, &req).await.0.unwrap().text, "ok");
    assert_all_valid(&server);
    let messages = &server.requests()[0].body["messages"];
    assert_eq!(messages[2]["content"], "Trying.");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_lost");
    assert_eq!(messages[4]["role"], "user");
    assert!(messages[4]["content"].as_str().unwrap().contains("stray output"));
}

/// The fake refuses what the real API refuses, so the tests passing through it mean something.
#[tokio::test]
async fn the_fake_api_refuses_invalid_conversations() {
    let server = FakeServer::start(Kind::OpenAi);
    let url = format!("{}/chat/completions", server.base_url());
    let client = reqwest::Client::new();
    let call = |args: Value| {
        json!({"role": "assistant", "content": null,
               "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": args}}]})
    };
    let user = json!({"role": "user", "content": "a"});
    let tool = json!({"role": "tool", "tool_call_id": "c1", "content": "r"});
    let cases = [
        (json!([user, tool]), "preceeding message with 'tool_calls'"),
        (json!([user, call(json!("{}")), user]), "did not have response messages: c1"),
        (json!([user, call(json!("{}"))]), "did not have response messages: c1"),
        (json!([user, call(json!({"a": 1})), tool]), "must be a string"),
        (json!([user, call(json!("{nope")), tool]), "not valid JSON"),
        (json!([user, call(json!("{}")), tool, tool]), "preceeding message with 'tool_calls'"),
        (json!([{"role": "assistant", "content": null}]), "a string is required"),
    ];
    for (messages, why) in cases {
        let body = json!({"model": "m", "stream": true, "messages": messages});
        let answer =
            client.post(&url).header("content-type", "application/json").body(body.to_string()).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), 400, "{messages}");
        let text = answer.text().await.unwrap();
        assert!(text.contains(why), "{messages}: expected {why:?} in {text}");
    }
    let empty_tools = json!({"model": "m", "stream": true, "messages": [user], "tools": []});
    let answer = client
        .post(&url)
        .header("content-type", "application/json")
        .body(empty_tools.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    assert!(server.requests().iter().all(|r| r.rejected.is_some()));
}

#[tokio::test]
async fn the_key_goes_in_a_bearer_header() {
    let var = "PSEUDOCLAUDE_TEST_OPENAI_KEY_BEARER";
    set_key(var, "sk-test-bearer-123");
    let server = FakeServer::start(Kind::OpenAi);
    server.require_api_key("sk-test-bearer-123");
    server.push(Reply::sse(openai_sse("ok", &[])));
    let p = OpenAi::new(ProviderConfig { api_key_env: var.into(), ..config(server.base_url()) }).unwrap();

    run(&p, &ask("hi")).await.0.unwrap();
    let r = &server.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(r.header("authorization"), Some("Bearer sk-test-bearer-123"));
    assert_eq!(r.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn no_authorization_header_without_a_key_as_local_servers_want() {
    let var = "PSEUDOCLAUDE_TEST_OPENAI_KEY_EMPTY";
    set_key(var, "");
    let server = FakeServer::start(Kind::OpenAi);
    for env in [UNSET, var] {
        server.push(Reply::sse(openai_sse("ok", &[])));
        let p = OpenAi::new(ProviderConfig { api_key_env: env.into(), ..config(server.base_url()) }).unwrap();
        assert_eq!(run(&p, &ask("hi")).await.0.unwrap().text, "ok");
    }
    for r in server.requests() {
        assert_eq!(r.header("authorization"), None);
    }
}

#[tokio::test]
async fn base_url_with_or_without_a_trailing_slash() {
    let server = FakeServer::start(Kind::OpenAi);
    for base in [server.base_url(), format!("{}/", server.base_url())] {
        server.push(Reply::sse(openai_sse("ok", &[])));
        let p = OpenAi::new(config(base.clone())).unwrap();
        assert_eq!(run(&p, &ask("hi")).await.0.unwrap().text, "ok", "{base}");
    }
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/chat/completions"; 2]);
}

#[tokio::test]
async fn unauthorized_names_the_env_var_hides_the_key_and_is_not_retried() {
    let var = "PSEUDOCLAUDE_TEST_OPENAI_KEY_401";
    let secret = "sk-very-secret-openai-401";
    set_key(var, secret);
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::error(Kind::OpenAi, 401, &format!("Incorrect API key provided: {secret}.")));
    let p = OpenAi::new(ProviderConfig { api_key_env: var.into(), ..config(server.base_url()) }).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Auth { status: 401, env_var, message } = &err else { panic!("{err:?}") };
    assert_eq!(env_var, var);
    assert!(message.contains("Incorrect API key"), "{message}");
    for shown in [err.to_string(), format!("{err:?}"), format!("{p:?}")] {
        assert!(!shown.contains(secret), "the key leaked: {shown}");
    }
    assert_eq!(server.requests().len(), 1);
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn forbidden_is_an_auth_error_too() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::error(Kind::OpenAi, 403, "Project does not have access to model gpt-test"));
    let p = OpenAi::new(config(server.base_url())).unwrap();
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Auth { status: 403, env_var, .. } if env_var == UNSET), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limit_waits_as_long_as_retry_after_says() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::error_retry_after(Kind::OpenAi, 429, "Rate limit reached for requests", 1));
    server.push(Reply::sse(openai_sse("finally", &[])));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let started = Instant::now();
    let (result, events) = run(&p, &ask("hi")).await;
    let elapsed = started.elapsed();
    assert_eq!(result.unwrap().text, "finally");
    // the wait is the behaviour: at least what Retry-After said (no upper bound: a slow machine is not a bug)
    assert!(elapsed >= Duration::from_millis(950), "{elapsed:?}");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].0, r[0].1), (1, Duration::from_secs(1)));
    assert!(r[0].2.contains("429"), "{}", r[0].2);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_then_unavailable() {
    let server = FakeServer::start(Kind::OpenAi);
    for status in [500, 502, 503] {
        server.push(Reply::error(Kind::OpenAi, status, "The server had an error"));
    }
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Unavailable { status: 503, attempts: 3, message } = &err else { panic!("{err:?}") };
    assert!(message.contains("The server had an error"), "{message}");
    assert_eq!(server.requests().len(), 3);
    let waits: Vec<(u32, Duration)> = retries(&events).into_iter().map(|(a, w, _)| (a, w)).collect();
    assert_eq!(waits, [(1, Duration::from_millis(10)), (2, Duration::from_millis(20))]);
}

#[tokio::test]
async fn connection_refused_is_retried_then_names_the_url() {
    let base = format!("{}/v1", refused_base_url());
    let p = OpenAi::new(config(base.clone())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Connect { url, .. } = &err else { panic!("{err:?}") };
    assert_eq!(url, &format!("{base}/chat/completions"));
    assert_eq!(retries(&events).len(), 2);
}

#[tokio::test]
async fn a_stream_cut_mid_answer_is_stream_cut_and_not_retried() {
    let server = FakeServer::start(Kind::OpenAi);
    let full = openai_sse("A long answer that will not finish", &[]);
    // Broken off inside the chunk carrying the finish reason.
    let mut cut = truncate_before(&full, "\"finish_reason\":\"stop\"");
    cut.truncate(cut.len() - 5);
    server.push(Reply::CutAfter(cut));
    server.push(Reply::sse(full)); // must not be used
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    assert!(matches!(result, Err(ProviderError::StreamCut { .. })), "{result:?}");
    assert!(!deltas(&events).is_empty());
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.unused_replies(), 1);
}

#[tokio::test]
async fn the_end_of_the_stream_needs_done_or_a_finish_reason() {
    let server = FakeServer::start(Kind::OpenAi);
    let full = openai_sse("complete", &[]);
    // Closed cleanly after the finish reason but without [DONE]: complete.
    server.push(Reply::sse(truncate_before(&full, "data: [DONE]")));
    // Closed cleanly before any finish reason: cut.
    let mut s = b": keep-alive\n\n".to_vec();
    s.extend_from_slice(chunk(json!({"content": "half"}), Value::Null).as_bytes());
    server.push(Reply::sse(s));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    assert_eq!(run(&p, &ask("hi")).await.0.unwrap().text, "complete");
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::StreamCut { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("[DONE]"), "{message}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_cut_before_anything_streamed_is_retried() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::CutAfter(b": keep-alive\n\ndata: {\"id\":".to_vec()));
    server.push(Reply::sse(openai_sse("second time lucky", &[])));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "second time lucky");
    assert_eq!(retries(&events).len(), 1);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn data_that_is_not_json_is_a_protocol_error() {
    let server = FakeServer::start(Kind::OpenAi);
    let mut s = chunk(json!({"role": "assistant", "content": ""}), Value::Null).into_bytes();
    s.extend_from_slice(b"data: {\"choices\": [{\"delta\": {\"content\": \"x\"}\n\n");
    server.push(Reply::sse(s));
    server.push(Reply::Stream(vec![b"data: {\"choices\": []}\n\ndata: \"\xc3\x28\"\n\n".to_vec()]));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Protocol { message } if message.contains("not JSON")), "{err:?}");
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Protocol { message } if message.contains("UTF-8")), "{err:?}");
}

#[tokio::test]
async fn tool_arguments_that_are_not_json_name_the_tool() {
    let server = FakeServer::start(Kind::OpenAi);
    let mut s = String::new();
    s += &chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_X", "type": "function",
                               "function": {"name": "edit_file", "arguments": ""}}]}),
        Value::Null,
    );
    s += &chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": \"a.rs\", "}}]}), Value::Null);
    s += &chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"old\": nope}"}}]}), Value::Null);
    s += &chunk(json!({}), json!("tool_calls"));
    s += "data: [DONE]\n\n";
    server.push(Reply::sse(s.into_bytes()));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("edit")).await;
    let err = result.unwrap_err();
    let ProviderError::Protocol { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("edit_file"), "{message}");
    assert!(events.contains(&StreamEvent::ToolCallStarted { id: "call_X".into(), name: "edit_file".into() }));
}

/// Ollama and friends: whole calls in one fragment, sometimes without `index`, no usage, no comment.
#[tokio::test]
async fn whole_tool_calls_in_one_fragment_as_local_servers_send_them() {
    let server = FakeServer::start(Kind::OpenAi);
    let mut s = String::new();
    s += &chunk(json!({"role": "assistant", "content": "Sure."}), Value::Null);
    s += &chunk(
        json!({"tool_calls": [{"id": "call_1", "type": "function",
                               "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]}),
        Value::Null,
    );
    s += &chunk(
        json!({"tool_calls": [{"id": "call_2", "type": "function",
                               "function": {"name": "read_file", "arguments": "{\"path\":\"b\"}"}}]}),
        Value::Null,
    );
    s += &chunk(json!({}), json!("stop"));
    s += "data: [DONE]\n\n";
    server.push(Reply::sse(s.into_bytes()));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let response = run(&p, &ask("read a and b")).await.0.unwrap();
    assert_eq!(response.text, "Sure.");
    assert_eq!(
        response.tool_calls,
        [
            ToolCall::new("call_1", "read_file", json!({"path": "a"})),
            ToolCall::new("call_2", "read_file", json!({"path": "b"}))
        ]
    );
}

#[tokio::test]
async fn silence_before_the_answer_is_a_timeout() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::Hang);
    let p = OpenAi::new(ProviderConfig { idle_timeout_secs: 1, connect_timeout_secs: 1, ..config(server.base_url()) })
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
    let server = FakeServer::start(Kind::OpenAi);
    let head = truncate_before(&openai_sse("half an answer", &[]), "\"finish_reason\":\"stop\"");
    server.push(Reply::StallAfter(split_awkwardly(&head[..head.iter().rposition(|&b| b == b'\n').unwrap() + 1])));
    let p = OpenAi::new(ProviderConfig { idle_timeout_secs: 1, ..config(server.base_url()) }).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    assert_eq!(result, Err(ProviderError::Timeout { after: Duration::from_secs(1) }));
    assert_eq!(deltas(&events).concat(), "half an answer");
}

#[tokio::test]
async fn an_error_chunk_mid_answer_is_stream_cut_with_its_message() {
    let server = FakeServer::start(Kind::OpenAi);
    let mut s = chunk(json!({"content": "Working on it"}), Value::Null).into_bytes();
    s.extend(openai_error_chunk("server_error", "The model produced invalid content"));
    server.push(Reply::sse(s));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::StreamCut { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("invalid content"), "{message}");
    assert_eq!(server.requests().len(), 1);
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn an_error_chunk_before_any_content_is_retried_or_rejected() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::sse(openai_error_chunk("server_error", "try again")));
    server.push(Reply::sse(openai_sse("recovered", &[])));
    server.push(Reply::sse(openai_error_chunk("invalid_request_error", "context length exceeded")));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let (result, events) = run(&p, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "recovered");
    assert_eq!(retries(&events).len(), 1);
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Rejected { status: 400, message } if message.contains("context length")),
        "{err:?}"
    );
}

#[tokio::test]
async fn crlf_line_endings_parse_the_same() {
    let server = FakeServer::start(Kind::OpenAi);
    let args = json!({"path": "é.rs"});
    server.push(Reply::sse(crlf(&openai_sse("línea\r\nuno", &[("call_C", "read_file", args.clone())]))));
    let p = OpenAi::new(config(server.base_url())).unwrap();
    let response = run(&p, &ask("hi")).await.0.unwrap();
    assert_eq!(response.text, "línea\r\nuno");
    assert_eq!(response.tool_calls, [ToolCall::new("call_C", "read_file", args)]);
}

#[tokio::test]
async fn a_bad_request_is_rejected_with_the_servers_message() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::error(Kind::OpenAi, 404, "The model `gpt-test` does not exist"));
    let p = OpenAi::new(config(server.base_url())).unwrap();

    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::Rejected { status: 404, message } = &err else { panic!("{err:?}") };
    assert!(message.contains("does not exist"), "{message}");
    assert_eq!(server.requests().len(), 1);
}
