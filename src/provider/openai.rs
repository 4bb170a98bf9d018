//! OpenAI's Chat Completions API, streamed, and the servers that speak it (Ollama, vLLM,
//! llama.cpp, LM Studio...).
//!
//! `POST {base_url}/chat/completions` with `stream: true` and `stream_options.include_usage`;
//! `Authorization: Bearer <key>` from `$api_key_env` (default `OPENAI_API_KEY`), omitted when the
//! variable is unset or empty, as local servers need no key. The answer arrives as `data:` chunks
//! ending with `data: [DONE]`; tool calls arrive in fragments keyed by `index`.

use reqwest::header::AUTHORIZATION;
use serde_json::{Value, json};

use super::http::{self as transport, Decoder, Emitter, Fail, HttpProvider, KeyHeader, WireFormat, protocol};
use super::sse::Event;
use super::turns::{Turn, turns};
use super::{ProviderConfig, Request, Response, Usage};
use crate::message::{Thinking, ToolCall};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The Chat Completions API as a [`WireFormat`].
#[derive(Debug)]
pub struct ChatCompletions {
    /// OpenAI itself wants `max_completion_tokens` (its reasoning models refuse `max_tokens`); the
    /// compatible servers know `max_tokens`.
    completion_tokens_field: bool,
}

/// The OpenAI provider (and the servers speaking its API).
pub type OpenAi = HttpProvider<ChatCompletions>;

impl WireFormat for ChatCompletions {
    type Decoder = CompletionsStream;
    const NAME: &'static str = "openai";
    const DEFAULT_BASE_URL: &'static str = DEFAULT_BASE_URL;
    const DEFAULT_API_KEY_ENV: &'static str = DEFAULT_API_KEY_ENV;

    fn url(base: &str) -> String {
        format!("{base}/chat/completions")
    }

    fn new(url: &str) -> Self {
        let completion_tokens_field = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(|h| h.eq_ignore_ascii_case("api.openai.com")))
            .unwrap_or(false);
        ChatCompletions { completion_tokens_field }
    }

    fn key_header(&self) -> KeyHeader {
        KeyHeader { name: AUTHORIZATION, prefix: "Bearer " }
    }

    /// The JSON body sent for `req`.
    fn body(&self, cfg: &ProviderConfig, max_tokens: u32, req: &Request) -> Value {
        let mut messages = Vec::new();
        if !req.system.trim().is_empty() {
            messages.push(json!({"role": "system", "content": req.system}));
        }
        for turn in turns(&req.messages) {
            match turn {
                Turn::User { results, texts } => {
                    for r in results {
                        let content = match (r.is_error, r.content.is_empty()) {
                            (false, false) => r.content.to_owned(),
                            (false, true) => "(no output)".to_owned(),
                            (true, _) => format!("Error: {}", r.content),
                        };
                        messages.push(json!({"role": "tool", "tool_call_id": r.id, "content": content}));
                    }
                    if !texts.is_empty() {
                        messages.push(json!({"role": "user", "content": texts.join("\n\n")}));
                    }
                }
                // Reasoning is never sent back: the servers that stream it document it as output only
                // (DeepSeek refuses a request carrying `reasoning_content`).
                Turn::Assistant { texts, calls, .. } => {
                    let mut m = json!({"role": "assistant", "content": texts.join("\n\n")});
                    if !calls.is_empty() {
                        if texts.is_empty() {
                            m["content"] = Value::Null;
                        }
                        m["tool_calls"] = calls
                            .iter()
                            .map(|c| {
                                json!({
                                    "id": c.id,
                                    "type": "function",
                                    "function": {"name": c.name, "arguments": arguments_string(&c.arguments)},
                                })
                            })
                            .collect();
                    }
                    messages.push(m);
                }
            }
        }
        let mut body = json!({
            "model": cfg.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        let field = if self.completion_tokens_field { "max_completion_tokens" } else { "max_tokens" };
        body[field] = json!(max_tokens);
        if !cfg.reasoning_effort.is_empty() {
            body["reasoning_effort"] = json!(cfg.reasoning_effort);
        }
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                    })
                })
                .collect();
        }
        body
    }
}

/// The final chunk's `usage` (with `stream_options.include_usage`; some servers send one on every
/// chunk, each a total so far). `prompt_tokens` counts the cached tokens too
/// (`prompt_tokens_details.cached_tokens`; DeepSeek's `prompt_cache_hit_tokens`): they are taken out
/// of `input_tokens`, so that each count has one price.
fn read_usage(usage: &Value) -> Usage {
    let n = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
    let prompt = n("/prompt_tokens").unwrap_or(0);
    let cached = n("/prompt_tokens_details/cached_tokens").or_else(|| n("/prompt_cache_hit_tokens")).unwrap_or(0);
    let cached = cached.min(prompt);
    Usage {
        input_tokens: prompt - cached,
        output_tokens: n("/completion_tokens").unwrap_or(0),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    }
}

/// The wire wants the arguments as a string of JSON.
fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::Null => "{}".into(),
        other => other.to_string(),
    }
}

/// A tool call being assembled from fragments.
struct Partial {
    index: u64,
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

/// Decodes one streamed chat completion.
#[derive(Default)]
pub struct CompletionsStream {
    text: String,
    /// `reasoning_content` (DeepSeek, vLLM) or `reasoning` (Ollama, OpenRouter) deltas, joined.
    reasoning: String,
    calls: Vec<Partial>,
    finish_reason: Option<String>,
    usage: Usage,
}

impl CompletionsStream {
    fn fragment(&mut self, position: usize, f: &Value, out: &mut Emitter) -> Result<(), Fail> {
        let id = f.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
        // Some servers leave out `index`: then a new id starts a new call, and a fragment without one
        // continues the last.
        let slot = match f.get("index").and_then(Value::as_u64) {
            Some(index) => self.calls.iter().position(|c| c.index == index),
            None => match id {
                Some(id) => self.calls.iter().position(|c| c.id == id),
                None if !self.calls.is_empty() => Some(self.calls.len() - 1),
                None => None,
            },
        };
        let slot = match slot {
            Some(slot) => slot,
            None => {
                let index = f.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
                let index = if self.calls.iter().any(|c| c.index == index) { self.calls.len() as u64 } else { index };
                self.calls.push(Partial {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                    started: false,
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[slot];
        if let Some(id) = id
            && call.id.is_empty()
        {
            id.clone_into(&mut call.id);
        }
        let function = f.get("function").unwrap_or(&Value::Null);
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && call.name.is_empty()
        {
            name.clone_into(&mut call.name);
        }
        match function.get("arguments") {
            Some(Value::String(s)) => call.arguments.push_str(s),
            Some(Value::Null) | None => {}
            // Not the wire format, but some servers send the object itself.
            Some(other) => call.arguments.push_str(&other.to_string()),
        }
        if !call.started && !call.name.is_empty() {
            if call.id.is_empty() {
                call.id = format!("call_{}", call.index);
            }
            call.started = true;
            out.tool_started(&call.id, &call.name);
        }
        Ok(())
    }

    fn response(&mut self) -> Result<Response, Fail> {
        let finish_reason = self.finish_reason.take().unwrap_or_default();
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|c| c.index);
        let mut tool_calls = Vec::with_capacity(calls.len());
        for c in calls {
            if c.name.is_empty() {
                return Err(protocol(format!("tool call {} arrived without a function name", c.index)));
            }
            let arguments = if c.arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&c.arguments).map_err(|e| {
                    let cause = if finish_reason == "length" { " (the answer was cut off at max_tokens)" } else { "" };
                    protocol(format!("the arguments of tool `{}` are not valid JSON{cause}: {e}", c.name))
                })?
            };
            tool_calls.push(ToolCall { id: c.id, name: c.name, arguments });
        }
        let reasoning = std::mem::take(&mut self.reasoning);
        let thinking = if reasoning.is_empty() {
            Vec::new()
        } else {
            vec![Thinking { kind: Thinking::REASONING.into(), thinking: reasoning, ..Default::default() }]
        };
        Ok(Response {
            text: std::mem::take(&mut self.text),
            tool_calls,
            thinking,
            stop_reason: finish_reason,
            usage: self.usage,
        })
    }
}

impl Decoder for CompletionsStream {
    fn event(&mut self, ev: &Event, out: &mut Emitter) -> Result<Option<Response>, Fail> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            return self.response().map(Some);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| protocol(format!("a data chunk is not JSON ({e}): {}", transport::snippet(data, 200))))?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let (kind, message) = match err {
                Value::String(s) => (String::new(), s.clone()),
                _ => (
                    ["type", "code"]
                        .iter()
                        .filter_map(|k| err.get(*k))
                        .find_map(|c| match c {
                            Value::String(s) => Some(s.clone()),
                            Value::Number(n) => Some(n.to_string()),
                            _ => None,
                        })
                        .unwrap_or_default(),
                    err.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_owned(),
                ),
            };
            return Err(transport::stream_error(&kind, &message, out));
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = read_usage(usage);
        }
        let choices = v.get("choices").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for choice in choices.iter().filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0) {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(text) =
                ["reasoning_content", "reasoning"].iter().find_map(|k| delta.get(*k).and_then(Value::as_str))
            {
                out.thinking(text);
                self.reasoning.push_str(text);
            }
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                out.text(text);
                self.text.push_str(text);
            }
            if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, f) in fragments.iter().enumerate() {
                    self.fragment(position, f, out)?;
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(None)
    }

    fn end(&mut self, _out: &mut Emitter) -> Result<Response, Fail> {
        // Some servers close without `[DONE]`; a finish reason says the answer was complete.
        if self.finish_reason.is_some() {
            self.response()
        } else {
            Err(transport::cut("the stream ended before [DONE] and without a finish_reason"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::provider::ProviderConfig;

    fn provider(base: &str) -> OpenAi {
        OpenAi::new(ProviderConfig { model: "m".into(), base_url: base.into(), ..Default::default() }).unwrap()
    }

    #[test]
    fn base_urls_and_token_field() {
        assert_eq!(provider("").http.url, "https://api.openai.com/v1/chat/completions");
        assert!(provider("").wire.completion_tokens_field);
        assert_eq!(provider("http://localhost:11434/v1/").http.url, "http://localhost:11434/v1/chat/completions");
        assert!(!provider("http://localhost:11434/v1").wire.completion_tokens_field);
        assert!(provider("http://localhost:11434/v1").body(&Request::default()).get("max_tokens").is_some());
    }

    #[test]
    fn tool_messages_and_null_content() {
        let req = Request {
            system: "sys".into(),
            messages: vec![
                Message::user("go"),
                Message::assistant_tool_calls("", vec![ToolCall::new("a", "x", Value::Null)]),
                Message::tool_result("a", "boom", true),
            ],
            ..Default::default()
        };
        let body = provider("").body(&req);
        let m = &body["messages"];
        assert_eq!(m[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(m[2]["content"], Value::Null);
        assert_eq!(m[2]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(m[3], json!({"role": "tool", "tool_call_id": "a", "content": "Error: boom"}));
        assert!(body.get("tools").is_none(), "an empty tools array is refused by OpenAI");
    }
}
