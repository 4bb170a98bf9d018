//! The two wire formats as the shared scenarios see them: one table, a `match` per question. How the
//! provider is built, what the fake answers in that format (the scripted bytes of each scenario), and
//! what the request looked like on the wire. The one place the suite says how the formats differ.

use std::fmt::Debug;

use pseudoclaude::provider::anthropic::Anthropic;
use pseudoclaude::provider::openai::OpenAi;
use pseudoclaude::provider::{Provider, ProviderConfig};
use serde_json::{Value, json};

use crate::support::client;
use crate::support::{
    FakeServer, Kind, anthropic_error_event, anthropic_sse, openai_error_chunk, openai_sse, truncate_before,
};

/// A provider the tests can also print (to check that the key never shows).
pub trait TestProvider: Provider + Debug {}
impl<T: Provider + Debug> TestProvider for T {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Anthropic's Messages API (`HttpProvider<Messages>`).
    Anthropic,
    /// OpenAI's Chat Completions (`HttpProvider<ChatCompletions>`).
    OpenAi,
}

/// One Anthropic SSE event as the API writes it.
pub fn ev(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// One OpenAI `data:` chunk carrying `choices[0].delta` and `finish_reason`.
pub fn chunk(delta: Value, finish: Value) -> String {
    let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

impl Format {
    pub fn kind(self) -> Kind {
        match self {
            Format::Anthropic => Kind::Anthropic,
            Format::OpenAi => Kind::OpenAi,
        }
    }

    /// An environment variable named for this format and `what`: tests run in parallel threads, and
    /// each sets only its own.
    pub fn var(self, what: &str) -> String {
        let tag = match self {
            Format::Anthropic => "ANTHROPIC",
            Format::OpenAi => "OPENAI",
        };
        format!("PSEUDOCLAUDE_TEST_{tag}_{what}")
    }

    /// An env var no test sets.
    pub fn unset(self) -> String {
        self.var("NEVER_SET")
    }

    pub fn model(self) -> &'static str {
        match self {
            Format::Anthropic => "claude-test",
            Format::OpenAi => "gpt-test",
        }
    }

    pub fn config(self, base_url: String) -> ProviderConfig {
        let name = match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
        };
        client::config(name, self.model(), &self.unset(), base_url)
    }

    pub fn provider(self, cfg: ProviderConfig) -> Box<dyn TestProvider> {
        match self {
            Format::Anthropic => Box::new(Anthropic::new(cfg).unwrap()),
            Format::OpenAi => Box::new(OpenAi::new(cfg).unwrap()),
        }
    }

    /// A fake server of this format and a provider pointed at it with the test config.
    pub fn setup(self) -> (FakeServer, Box<dyn TestProvider>) {
        let server = FakeServer::start(self.kind());
        let p = self.provider(self.config(server.base_url()));
        (server, p)
    }

    /// The fake's complete streamed answer: `text`, then these calls (id, name, arguments).
    pub fn sse(self, text: &str, calls: &[(&str, &str, Value)]) -> Vec<u8> {
        match self {
            Format::Anthropic => anthropic_sse(text, calls),
            Format::OpenAi => openai_sse(text, calls),
        }
    }

    /// The text the assistant streams before its two calls in `calls_and_their_results_sent_back_…`:
    /// Anthropic sends it as a block before the `tool_use` blocks, OpenAI's empty one goes as `null`.
    pub fn exchange_text(self) -> &'static str {
        match self {
            Format::Anthropic => "Reading both.",
            Format::OpenAi => "",
        }
    }

    /// What that scenario's second request holds, as (JSON pointer, value): the system prompt, the
    /// tools and the messages in this format, with read_file (`args_a`, answered "permission denied",
    /// an error) and list_files (`args_b`, answered "a.rs b.rs"), results back in the calls' order.
    pub fn exchange_sent(self, args_a: &Value, args_b: &Value) -> Vec<(&'static str, Value)> {
        let schema = client::tools()[0].input_schema.clone();
        match self {
            Format::Anthropic => {
                let cache = json!({"type": "ephemeral"});
                vec![
                    ("/system", json!([{"type": "text", "text": "You are terse.", "cache_control": cache}])),
                    ("/tools/0", json!({"name": "read_file", "description": "Reads a file", "input_schema": schema})),
                    ("/tools/1/cache_control", cache.clone()),
                    (
                        "/messages",
                        json!([
                            {"role": "user", "content": [
                                {"type": "text", "text": "read a.rs and list src", "cache_control": cache}]},
                            {"role": "assistant", "content": [
                                {"type": "text", "text": "Reading both."},
                                {"type": "tool_use", "id": "toolu_A", "name": "read_file", "input": args_a},
                                {"type": "tool_use", "id": "toolu_B", "name": "list_files", "input": args_b},
                            ]},
                            {"role": "user", "content": [
                                {"type": "tool_result", "tool_use_id": "toolu_A", "content": "permission denied",
                                 "is_error": true},
                                {"type": "tool_result", "tool_use_id": "toolu_B", "content": "a.rs b.rs",
                                 "is_error": false},
                                {"type": "text", "text": "and be quick", "cache_control": cache},
                            ]},
                        ]),
                    ),
                ]
            }
            Format::OpenAi => vec![
                ("/stream_options", json!({"include_usage": true})),
                (
                    "/tools/0",
                    json!({"type": "function", "function": {"name": "read_file", "description": "Reads a file",
                                                            "parameters": schema}}),
                ),
                (
                    "/messages",
                    json!([
                        {"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "read a.rs and list src"},
                        {"role": "assistant", "content": null, "tool_calls": [
                            {"id": "call_A", "type": "function",
                             "function": {"name": "read_file", "arguments": args_a.to_string()}},
                            {"id": "call_B", "type": "function",
                             "function": {"name": "list_files", "arguments": args_b.to_string()}},
                        ]},
                        {"role": "tool", "tool_call_id": "call_A", "content": "Error: permission denied"},
                        {"role": "tool", "tool_call_id": "call_B", "content": "a.rs b.rs"},
                        {"role": "user", "content": "and be quick"},
                    ]),
                ),
            ],
        }
    }

    /// A tool call id as the API makes them.
    pub fn id(self, suffix: &str) -> String {
        match self {
            Format::Anthropic => format!("toolu_{suffix}"),
            Format::OpenAi => format!("call_{suffix}"),
        }
    }

    /// The stop reasons of an answer of text and of one with tool calls.
    pub fn stop_reasons(self) -> (&'static str, &'static str) {
        match self {
            Format::Anthropic => ("end_turn", "tool_use"),
            Format::OpenAi => ("stop", "tool_calls"),
        }
    }

    /// The request's path on the fake (whose base URL includes `/v1` for OpenAI, as the SDKs take it).
    pub fn path(self) -> &'static str {
        match self {
            Format::Anthropic => "/v1/messages",
            Format::OpenAi => "/v1/chat/completions",
        }
    }

    /// The base URLs users write for the same server (`base` as the fake gives it).
    pub fn base_urls(self, base: &str) -> Vec<String> {
        let mut bases = vec![base.to_string(), format!("{base}/")];
        if self == Format::Anthropic {
            bases.push(format!("{base}/v1/"));
        }
        bases
    }

    /// The base URL of a server at `root` (`http://host:port`).
    pub fn base_at(self, root: &str) -> String {
        match self {
            Format::Anthropic => root.to_string(),
            Format::OpenAi => format!("{root}/v1"),
        }
    }

    /// The header carrying `key`, and its value.
    pub fn key_header(self, key: &str) -> (&'static str, String) {
        match self {
            Format::Anthropic => ("x-api-key", key.to_string()),
            Format::OpenAi => ("authorization", format!("Bearer {key}")),
        }
    }

    /// The other headers every request carries (`None`: absent).
    pub fn other_headers(self) -> &'static [(&'static str, Option<&'static str>)] {
        match self {
            Format::Anthropic => &[("anthropic-version", Some("2023-06-01")), ("authorization", None)],
            Format::OpenAi => &[],
        }
    }

    /// What the API says when it refuses the key `secret` (echoing it), and the part of it checked.
    pub fn key_refused(self, secret: &str) -> (String, &'static str) {
        match self {
            Format::Anthropic => (format!("invalid x-api-key {secret}"), "invalid x-api-key"),
            Format::OpenAi => (format!("Incorrect API key provided: {secret}."), "Incorrect API key"),
        }
    }

    /// What the API says with a 429, and the part of it checked.
    pub fn rate_limited(self) -> (&'static str, &'static str) {
        match self {
            Format::Anthropic => ("Number of requests has exceeded your rate limit", "rate limit"),
            Format::OpenAi => ("Rate limit reached for requests", "Rate limit"),
        }
    }

    /// `full` broken off in the middle of an event, once its text streamed.
    pub fn cut_mid_answer(self, full: &[u8]) -> Vec<u8> {
        match self {
            Format::Anthropic => {
                let mut cut = truncate_before(full, "event: content_block_stop");
                cut.extend_from_slice(b"event: content_block_delta\ndata: {\"type\":\"content_blo");
                cut
            }
            Format::OpenAi => {
                // Inside the chunk carrying the finish reason.
                let mut cut = truncate_before(full, "\"finish_reason\":\"stop\"");
                cut.truncate(cut.len() - 5);
                cut
            }
        }
    }

    /// `full` up to the end of its last text event: nothing that ends the answer.
    pub fn text_only(self, full: &[u8]) -> Vec<u8> {
        match self {
            Format::Anthropic => truncate_before(full, "event: content_block_stop"),
            Format::OpenAi => {
                let head = truncate_before(full, "\"finish_reason\":\"stop\"");
                head[..head.iter().rposition(|&b| b == b'\n').unwrap() + 1].to_vec()
            }
        }
    }

    /// A stream that closes cleanly, whole events only, before the event that ends an answer; and
    /// the name of that event, which the error gives.
    pub fn closed_before_the_end(self) -> (Vec<u8>, &'static str) {
        match self {
            Format::Anthropic => {
                (truncate_before(&anthropic_sse("almost", &[]), "event: message_stop"), "message_stop")
            }
            Format::OpenAi => {
                let mut s = b": keep-alive\n\n".to_vec();
                s.extend_from_slice(chunk(json!({"content": "half"}), Value::Null).as_bytes());
                (s, "[DONE]")
            }
        }
    }

    /// `full` broken off before any content (the head of the stream, a piece of an event).
    pub fn cut_before_anything(self, full: &[u8]) -> Vec<u8> {
        match self {
            Format::Anthropic => truncate_before(full, "event: ping"),
            Format::OpenAi => b": keep-alive\n\ndata: {\"id\":".to_vec(),
        }
    }

    /// A stream whose second event's data is not JSON, and what the error names besides.
    pub fn not_json(self) -> (Vec<u8>, &'static str) {
        match self {
            Format::Anthropic => {
                let mut bytes = truncate_before(&anthropic_sse("hi", &[]), "event: ping");
                bytes.extend_from_slice(
                    b"event: content_block_start\ndata: {\"type\": \"content_block_start\", oops}\n\n",
                );
                (bytes, "content_block_start")
            }
            Format::OpenAi => {
                let mut s = chunk(json!({"role": "assistant", "content": ""}), Value::Null).into_bytes();
                s.extend_from_slice(b"data: {\"choices\": [{\"delta\": {\"content\": \"x\"}\n\n");
                (s, "not JSON")
            }
        }
    }

    /// A stream with a byte that is not UTF-8 in an event.
    pub fn not_utf8(self) -> Vec<u8> {
        match self {
            Format::Anthropic => b"event: ping\ndata: {\"type\": \"ping\xff\"}\n\n".to_vec(),
            Format::OpenAi => b"data: {\"choices\": []}\n\ndata: \"\xc3\x28\"\n\n".to_vec(),
        }
    }

    /// A call to `edit_file` (id [`Format::id`]`("X")`) whose streamed arguments are not JSON.
    pub fn bad_tool_arguments(self) -> Vec<u8> {
        match self {
            Format::Anthropic => {
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
                s
            }
            Format::OpenAi => {
                let mut s = String::new();
                s += &chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_X", "type": "function",
                                           "function": {"name": "edit_file", "arguments": ""}}]}),
                    Value::Null,
                );
                s += &chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": \"a.rs\", "}}]}),
                    Value::Null,
                );
                s += &chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"old\": nope}"}}]}),
                    Value::Null,
                );
                s += &chunk(json!({}), json!("tool_calls"));
                s += "data: [DONE]\n\n";
                s.into_bytes()
            }
        }
    }

    /// Text streamed, then an error event in the stream; and the part of its message checked.
    pub fn error_mid_answer(self) -> (Vec<u8>, &'static str) {
        match self {
            Format::Anthropic => {
                let mut s = truncate_before(&anthropic_sse("Working on it", &[]), "event: content_block_stop");
                s.extend(anthropic_error_event("overloaded_error", "Overloaded"));
                (s, "Overloaded")
            }
            Format::OpenAi => {
                let mut s = chunk(json!({"content": "Working on it"}), Value::Null).into_bytes();
                s.extend(openai_error_chunk("server_error", "The model produced invalid content"));
                (s, "invalid content")
            }
        }
    }

    /// An error event of `error_type` in the stream before any content.
    pub fn error_before_content(self, error_type: &str, message: &str) -> Vec<u8> {
        match self {
            Format::Anthropic => {
                let mut s = truncate_before(&anthropic_sse("", &[]), "event: ping");
                s.extend(anthropic_error_event(error_type, message));
                s
            }
            Format::OpenAi => openai_error_chunk(error_type, message),
        }
    }

    /// The API's error type for a transient failure in the stream.
    pub fn transient_error_type(self) -> &'static str {
        match self {
            Format::Anthropic => "overloaded_error",
            Format::OpenAi => "server_error",
        }
    }
}
