//! What only OpenAI's Chat Completions has: the body sent (a system message, tool messages, arguments as
//! strings), `stream_options.include_usage` and the cached share of the usage chunk, no key for local
//! servers, whole tool calls in one fragment, `[DONE]` optional after a finish reason, and the fake's own
//! rules.

use pseudoclaude::message::{Message, Thinking, ToolCall};
use pseudoclaude::provider::openai::OpenAi;
use pseudoclaude::provider::{ProviderConfig, ProviderError, Request, StreamEvent, Usage};
use serde_json::{Value, json};

use super::wire::{Format, chunk};
use crate::support::client::{ask, assert_all_valid, run, set_key};
use crate::support::{FakeServer, Kind, Reply, openai_sse, truncate_before};

fn config(base_url: String) -> ProviderConfig {
    Format::OpenAi.config(base_url)
}

/// The request asks for the usage chunk (the bytes, not only the parsed body), and the final chunk's
/// `prompt_tokens_details.cached_tokens` comes back as cache reads, out of the full-rate input.
#[tokio::test]
async fn usage_is_asked_for_and_its_cached_share_read_from_the_final_chunk() {
    let server = FakeServer::start(Kind::OpenAi);
    // The fake's stream up to its own usage chunk (the one event with empty choices: its `data: ` line is cut
    // whole, whatever order serde_json writes the keys in), then the usage chunk as OpenAI sends it: empty
    // choices, then `[DONE]`.
    let full = openai_sse("Cached.", &[]);
    let marker = b"\"choices\":[],";
    let usage_at = full.windows(marker.len()).position(|w| w == marker).expect("the fake's usage chunk");
    let line_at = full[..usage_at].windows(6).rposition(|w| w == b"data: ").expect("its data line");
    let answer = full[..line_at].to_vec();
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
async fn no_authorization_header_without_a_key_as_local_servers_want() {
    let var = "PSEUDOCLAUDE_TEST_OPENAI_KEY_EMPTY";
    set_key(var, "");
    let server = FakeServer::start(Kind::OpenAi);
    for env in [Format::OpenAi.unset().as_str(), var] {
        server.push(Reply::sse(openai_sse("ok", &[])));
        let p = OpenAi::new(ProviderConfig { api_key_env: env.into(), ..config(server.base_url()) }).unwrap();
        assert_eq!(run(&p, &ask("hi")).await.0.unwrap().text, "ok");
    }
    for r in server.requests() {
        assert_eq!(r.header("authorization"), None);
    }
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

/// A stream closed cleanly after the finish reason but without `[DONE]` is complete (closed before
/// any finish reason, it is cut: the shared `a_stream_closing_before_its_end_is_stream_cut`).
#[tokio::test]
async fn a_finish_reason_ends_the_answer_without_done() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::sse(truncate_before(&openai_sse("complete", &[]), "data: [DONE]")));
    let p = OpenAi::new(config(server.base_url())).unwrap();
    assert_eq!(run(&p, &ask("hi")).await.0.unwrap().text, "complete");
    assert_eq!(server.requests().len(), 1);
}

/// An error chunk before any content that is not transient (the transient case is the shared
/// `an_error_event_before_any_content_is_retried`): rejected, never retried.
#[tokio::test]
async fn an_invalid_request_error_chunk_before_any_content_is_rejected() {
    let server = FakeServer::start(Kind::OpenAi);
    server.push(Reply::sse(Format::OpenAi.error_before_content("invalid_request_error", "context length exceeded")));
    let p = OpenAi::new(config(server.base_url())).unwrap();
    let err = run(&p, &ask("hi")).await.0.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Rejected { status: 400, message } if message.contains("context length")),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

/// An OpenAI-compatible server's reasoning (`reasoning_content`, DeepSeek and vLLM; `reasoning`, Ollama) streams as
/// thinking apart from the text, comes back as one `reasoning` block, and never goes back in a later request, where
/// the answer's text alone does; `reasoning_effort` is passed through; the reasoning tokens are part of the output.
#[tokio::test]
async fn reasoning_content_streams_as_thinking_and_is_never_sent_back() {
    let server = FakeServer::start(Kind::OpenAi);
    let mut s = chunk(json!({"role": "assistant", "content": ""}), Value::Null).into_bytes();
    for piece in ["Let me ", "think.\n", "Done."] {
        s.extend(chunk(json!({"reasoning_content": piece, "content": null}), Value::Null).bytes());
    }
    s.extend(chunk(json!({"content": "Four."}), Value::Null).bytes());
    s.extend(chunk(json!({}), json!("stop")).bytes());
    let usage = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 40, "total_tokens": 50,
                  "completion_tokens_details": {"reasoning_tokens": 38}}});
    s.extend(format!("data: {usage}\n\ndata: [DONE]\n\n").bytes());
    server.push(Reply::sse(s.clone()));
    // Ollama's name for it.
    server.push(Reply::sse(String::from_utf8(s).unwrap().replace("reasoning_content", "reasoning").into_bytes()));
    let p = OpenAi::new(ProviderConfig { reasoning_effort: "high".into(), ..config(server.base_url()) }).unwrap();
    let (result, events) = run(&p, &ask("2+2?")).await;
    let first = result.unwrap();
    let thought: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ThinkingDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thought, ["Let me ", "think.\n", "Done."]);
    assert_eq!(first.text, "Four.");
    assert_eq!(
        first.thinking,
        [Thinking { kind: "reasoning".into(), thinking: "Let me think.\nDone.".into(), ..Default::default() }]
    );
    assert_eq!(first.usage.output_tokens, 40, "the reasoning tokens are in the output");
    assert_eq!(server.requests()[0].body["reasoning_effort"], "high");

    let mut answer = Message::assistant(first.text.clone());
    answer.thinking = first.thinking.clone();
    let mut req = ask("2+2?");
    req.messages.extend([answer, Message::user("and 3+3?")]);
    let second = run(&p, &req).await.0.unwrap();
    assert_eq!(second.thinking[0].thinking, "Let me think.\nDone.");
    assert_all_valid(&server);
    let raw = String::from_utf8(server.requests()[1].raw_body.clone()).unwrap();
    assert!(!raw.contains("Let me") && !raw.contains("reasoning_content"), "{raw}");
    assert_eq!(server.requests()[1].body["messages"][2], json!({"role": "assistant", "content": "Four."}));
}

#[tokio::test]
async fn a_reasoning_effort_other_than_low_medium_high_is_a_config_error() {
    let err = OpenAi::new(ProviderConfig { reasoning_effort: "max".into(), ..config("http://127.0.0.1:1/v1".into()) })
        .unwrap_err();
    assert!(
        err.to_string().contains("provider.reasoning_effort must be \"low\", \"medium\" or \"high\" (got \"max\")"),
        "{err}"
    );
}
