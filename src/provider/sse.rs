//! Server-sent events, and the plumbing the two HTTP providers ([`super::anthropic`] and
//! [`super::openai`]) share.
//!
//! * [`Parser`]: an incremental SSE parser after the WHATWG rules. Feed it byte chunks cut anywhere
//!   (inside a multi-byte character, between `\r` and `\n`) and complete events come out.
//! * `transport` (crate-private): one streamed POST with bounded retries, timeouts and the mapping of
//!   HTTP failures to [`ProviderError`](super::ProviderError).
//! * `turns` (crate-private): the conversation regrouped into alternating user/assistant turns in
//!   which every tool call is answered, whatever the log holds (a crash between a call and its
//!   result must not make every later request invalid).

use std::fmt;

/// The most bytes one event (its pending line plus its data) may hold: a stream that never ends a
/// line must not eat the memory.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 32 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; `message` when the event had none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Why a byte stream is not an event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// A line is not UTF-8. (The WHATWG decoder would substitute U+FFFD; a replaced byte inside tool
    /// arguments would silently corrupt an edit, so this parser refuses instead.)
    InvalidUtf8 { line: u64 },
    /// An event grew beyond the limit without being dispatched.
    TooLong { limit: usize },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::InvalidUtf8 { line } => write!(f, "line {line} of the event stream is not valid UTF-8"),
            SseError::TooLong { limit } => write!(f, "an event of the stream exceeds {limit} bytes"),
        }
    }
}

impl std::error::Error for SseError {}

/// Incremental SSE parser.
///
/// Lines end with `\n`, `\r\n` or `\r`; a leading byte-order mark is skipped; lines starting with `:`
/// are comments; `event:` names the event, `data:` lines accumulate (joined with `\n`), `id:`,
/// `retry:` and unknown fields are ignored; a blank line dispatches the event (an event without any
/// `data:` line is not dispatched). An unterminated event at the end of the stream is never
/// dispatched: see [`Parser::pending`].
#[derive(Debug)]
pub struct Parser {
    /// The bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The previous byte was a `\r`: a `\n` right after it is part of the same line ending.
    after_cr: bool,
    lines: u64,
    event: String,
    data: String,
    limit: usize,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    pub fn new() -> Self {
        Parser::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    pub fn with_limit(limit: usize) -> Self {
        Parser { line: Vec::new(), after_cr: false, lines: 0, event: String::new(), data: String::new(), limit }
    }

    /// Feeds the next bytes; the events they complete are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        while !chunk.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if chunk[0] == b'\n' {
                    chunk = &chunk[1..];
                    continue;
                }
            }
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.take(&chunk[..i])?;
                    self.after_cr = chunk[i] == b'\r';
                    chunk = &chunk[i + 1..];
                    self.end_line(out)?;
                }
                None => {
                    self.take(chunk)?;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Whether bytes of an undispatched event are waiting (at the end of a stream they are dropped).
    pub fn pending(&self) -> bool {
        !self.line.is_empty() || !self.data.is_empty()
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + bytes.len() > self.limit {
            return Err(SseError::TooLong { limit: self.limit });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<Event>) -> Result<(), SseError> {
        let buf = std::mem::take(&mut self.line);
        let mut bytes = &buf[..];
        if self.lines == 0 {
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        self.lines += 1;
        let line = std::str::from_utf8(bytes).map_err(|_| SseError::InvalidUtf8 { line: self.lines })?;
        if line.is_empty() {
            self.dispatch(out);
        } else if !line.starts_with(':') {
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "event" => value.clone_into(&mut self.event),
                "data" => {
                    self.data.push_str(value);
                    self.data.push('\n');
                }
                _ => {}
            }
        }
        self.line = buf;
        self.line.clear();
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last data line
        out.push(Event { event: if event.is_empty() { "message".into() } else { event }, data });
    }
}

/// One streamed POST: retries, timeouts, and HTTP failures mapped to [`ProviderError`].
pub(crate) mod transport {
    use std::time::Duration;

    use reqwest::header::HeaderMap;
    use tokio::sync::mpsc::UnboundedSender;

    use super::{Event, Parser};
    use crate::provider::{ProviderConfig, ProviderError, Response, StreamEvent};

    /// Longest `retry-after` worth waiting for; a server asking for more is reported as unavailable.
    const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
    /// Longest exponential backoff between two attempts.
    const MAX_BACKOFF: Duration = Duration::from_secs(60);
    /// How much of an error body is read.
    const MAX_ERROR_BODY: usize = 64 << 10;

    /// Where the deltas go; remembers whether any went (after which nothing is retried).
    pub(crate) struct Emitter {
        tx: UnboundedSender<StreamEvent>,
        streamed: bool,
    }

    impl Emitter {
        pub(crate) fn text(&mut self, text: &str) {
            if !text.is_empty() {
                self.streamed = true;
                let _ = self.tx.send(StreamEvent::TextDelta(text.to_owned()));
            }
        }

        pub(crate) fn tool_started(&mut self, id: &str, name: &str) {
            self.streamed = true;
            let _ = self.tx.send(StreamEvent::ToolCallStarted { id: id.to_owned(), name: name.to_owned() });
        }

        pub(crate) fn streamed(&self) -> bool {
            self.streamed
        }
    }

    /// How an attempt failed.
    pub(crate) enum Fail {
        /// Final, whatever was streamed.
        Fatal(ProviderError),
        /// Worth another attempt, provided nothing was streamed yet. `err` is what is reported once
        /// the retries are spent.
        Transient { err: ProviderError, reason: String, retry_after: Option<Duration> },
    }

    pub(crate) fn protocol(message: impl Into<String>) -> Fail {
        Fail::Fatal(ProviderError::Protocol { message: message.into() })
    }

    pub(crate) fn cut(message: impl Into<String>) -> Fail {
        let message = message.into();
        Fail::Transient { reason: message.clone(), err: ProviderError::StreamCut { message }, retry_after: None }
    }

    /// Turns the events of one attempt into a [`Response`].
    pub(crate) trait Decoder {
        /// One event; `Some` once the answer is complete.
        fn event(&mut self, ev: &Event, out: &mut Emitter) -> Result<Option<Response>, Fail>;
        /// The stream ended without the answer being complete by [`Decoder::event`].
        fn end(&mut self, out: &mut Emitter) -> Result<Response, Fail>;
    }

    /// One request, as both providers make it.
    pub(crate) struct Call<'a> {
        pub client: &'a reqwest::Client,
        pub cfg: &'a ProviderConfig,
        pub url: &'a str,
        /// Named by authentication errors.
        pub env_var: &'a str,
        /// Only to scrub it from error messages (it is already in `headers`, marked sensitive).
        pub key: Option<String>,
        pub headers: HeaderMap,
        pub body: Vec<u8>,
    }

    /// Builds the HTTP client for `url`. Loopback URLs (a local model server) bypass any proxy.
    /// Where a provider sends its requests, with which key, through which client.
    pub(crate) struct Endpoint {
        pub(crate) url: String,
        pub(crate) env_var: String,
        pub(crate) client: reqwest::Client,
    }

    /// Resolves a provider's configuration: the model must be set; an empty `base_url` or
    /// `api_key_env` takes the provider's default; `path` makes the request URL from the base
    /// (without a trailing slash).
    pub(crate) fn endpoint(
        cfg: &ProviderConfig,
        provider: &str,
        default_base: &str,
        default_env: &str,
        path: impl Fn(&str) -> String,
    ) -> Result<Endpoint, ProviderError> {
        if cfg.model.trim().is_empty() {
            return Err(ProviderError::Config { message: format!("{provider}: no model set (provider.model)") });
        }
        let base = cfg.base_url.trim().trim_end_matches('/');
        let url = path(if base.is_empty() { default_base } else { base });
        let env_var = match cfg.api_key_env.trim() {
            "" => default_env.to_owned(),
            name => name.to_owned(),
        };
        let client = client(cfg, &url)?;
        Ok(Endpoint { url, env_var, client })
    }

    pub(crate) fn client(cfg: &ProviderConfig, url: &str) -> Result<reqwest::Client, ProviderError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| ProviderError::Config { message: format!("invalid base_url ({url}): {e}") })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ProviderError::Config { message: format!("base_url must be http or https: {url}") });
        }
        let host = parsed.host_str().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
        let loopback =
            host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .user_agent(concat!("pseudoclaude/", env!("CARGO_PKG_VERSION")));
        if cfg.connect_timeout_secs > 0 {
            builder = builder.connect_timeout(Duration::from_secs(cfg.connect_timeout_secs));
        }
        if loopback {
            builder = builder.no_proxy();
        }
        builder.build().map_err(|e| ProviderError::Config { message: format!("cannot build the HTTP client: {e}") })
    }

    /// Makes the call, retrying transient failures until something was streamed.
    pub(crate) async fn run<D: Decoder>(
        call: Call<'_>,
        events: UnboundedSender<StreamEvent>,
        mut decoder: impl FnMut() -> D,
    ) -> Result<Response, ProviderError> {
        let key = call.key.as_deref();
        let mut out = Emitter { tx: events, streamed: false };
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let (err, reason, retry_after) = match once(&call, &mut decoder(), &mut out).await {
                Ok(response) => return Ok(response),
                Err(Fail::Fatal(err)) => return Err(scrub(err, key)),
                Err(Fail::Transient { err, reason, retry_after }) => (err, reason, retry_after),
            };
            if out.streamed {
                return Err(scrub(
                    match err {
                        err @ ProviderError::StreamCut { .. } => err,
                        _ => ProviderError::StreamCut { message: reason },
                    },
                    key,
                ));
            }
            if attempt > call.cfg.max_retries {
                return Err(scrub(spent(err, attempt, None), key));
            }
            let backoff = Duration::from_millis(call.cfg.retry_base_ms)
                .saturating_mul(1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX))
                .min(MAX_BACKOFF);
            let wait = retry_after.unwrap_or(backoff);
            if wait > MAX_RETRY_AFTER {
                return Err(scrub(spent(err, attempt, Some(wait)), key));
            }
            let reason = scrub_str(reason, key);
            let _ = out.tx.send(StreamEvent::Retrying { attempt, wait, reason });
            tokio::time::sleep(wait).await;
        }
    }

    /// The error reported when no more attempts will be made.
    fn spent(err: ProviderError, attempts: u32, asked: Option<Duration>) -> ProviderError {
        match err {
            ProviderError::Unavailable { status, mut message, .. } => {
                if let Some(asked) = asked {
                    message.push_str(&format!(" (the server asked to retry after {}s)", asked.as_secs()));
                }
                ProviderError::Unavailable { status, attempts, message }
            }
            other => other,
        }
    }

    async fn once<D: Decoder>(call: &Call<'_>, decoder: &mut D, out: &mut Emitter) -> Result<Response, Fail> {
        let cfg = call.cfg;
        let idle = (cfg.idle_timeout_secs > 0).then(|| Duration::from_secs(cfg.idle_timeout_secs));
        // reqwest cannot tell when the connection is up: the wait for the answer's head includes it.
        let head_wait = idle.map(|idle| idle + Duration::from_secs(cfg.connect_timeout_secs));
        let request = call.client.post(call.url).headers(call.headers.clone()).body(call.body.clone());
        let mut response = match within(head_wait, request.send()).await? {
            Ok(response) => response,
            Err(e) => return Err(send_failure(call, &e)),
        };
        let status = response.status().as_u16();
        if !response.status().is_success() {
            return Err(status_failure(call, &mut response, status, idle).await);
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if !content_type.is_empty() && !content_type.contains("event-stream") {
            let body = read_some(&mut response, idle).await;
            return Err(protocol(format!(
                "expected an event stream (text/event-stream) but got {content_type}: {}",
                error_message(&body)
            )));
        }
        let mut parser = Parser::new();
        let mut events = Vec::new();
        loop {
            let chunk = match within(idle, response.chunk()).await? {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return decoder.end(out),
                Err(e) => return Err(cut(format!("the connection broke: {}", chain(&e)))),
            };
            parser.feed(&chunk, &mut events).map_err(|e| protocol(e.to_string()))?;
            for ev in events.drain(..) {
                if let Some(response) = decoder.event(&ev, out)? {
                    return Ok(response);
                }
            }
        }
    }

    /// Awaits `fut` for at most `limit` (no limit when `None`).
    async fn within<T>(limit: Option<Duration>, fut: impl Future<Output = T>) -> Result<T, Fail> {
        match limit {
            None => Ok(fut.await),
            Some(limit) => {
                tokio::time::timeout(limit, fut).await.map_err(|_| Fail::Fatal(ProviderError::Timeout { after: limit }))
            }
        }
    }

    fn send_failure(call: &Call<'_>, e: &reqwest::Error) -> Fail {
        if e.is_builder() {
            return Fail::Fatal(ProviderError::Config { message: format!("cannot build the request: {}", chain(e)) });
        }
        let message = if e.is_connect() && e.is_timeout() {
            format!("no connection within {}s", call.cfg.connect_timeout_secs)
        } else {
            chain(e)
        };
        Fail::Transient {
            reason: format!("cannot reach {}: {message}", call.url),
            err: ProviderError::Connect { url: call.url.to_owned(), message },
            retry_after: None,
        }
    }

    async fn status_failure(
        call: &Call<'_>,
        response: &mut reqwest::Response,
        status: u16,
        idle: Option<Duration>,
    ) -> Fail {
        let retry_after = retry_after(response.headers());
        let location =
            response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).map(String::from);
        let body = read_some(response, idle).await;
        let mut message = error_message(&body);
        match status {
            401 | 403 => {
                if call.key.is_none() {
                    message.push_str(&format!(" (${} is not set)", call.env_var));
                }
                Fail::Fatal(ProviderError::Auth { status, env_var: call.env_var.to_owned(), message })
            }
            408 | 429 | 500..=599 => Fail::Transient {
                reason: format!("HTTP {status}: {message}"),
                err: ProviderError::Unavailable { status, attempts: 1, message },
                retry_after,
            },
            300..=399 => Fail::Fatal(ProviderError::Rejected {
                status,
                message: format!("redirected to {} (check base_url)", location.as_deref().unwrap_or("?")),
            }),
            _ => Fail::Fatal(ProviderError::Rejected { status, message }),
        }
    }

    /// `retry-after-ms` (milliseconds) or `retry-after` (seconds; the HTTP-date form is ignored).
    fn retry_after(headers: &HeaderMap) -> Option<Duration> {
        let get =
            |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok());
        let secs = get("retry-after-ms").map(|ms| ms / 1000.0).or_else(|| get("retry-after"))?;
        (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e6)))
    }

    /// The start of a body, for error messages; whatever arrived if it breaks.
    async fn read_some(response: &mut reqwest::Response, idle: Option<Duration>) -> Vec<u8> {
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            match within(idle, response.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body
    }

    /// The message of an error body: `error.message` (with `error.type`) as both APIs send it, a
    /// bare `error` string (Ollama), or the start of the text.
    pub(crate) fn error_message(body: &[u8]) -> String {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
            let err = v.get("error").filter(|e| !e.is_null()).unwrap_or(&v);
            if let Some(s) = err.as_str() {
                return s.to_owned();
            }
            if let Some(message) = err.get("message").and_then(|m| m.as_str()) {
                return match err.get("type").and_then(|t| t.as_str()) {
                    Some(kind) if !kind.is_empty() => format!("{kind}: {message}"),
                    _ => message.to_owned(),
                };
            }
        }
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        if text.is_empty() {
            return "(no details)".into();
        }
        snippet(text, 300)
    }

    /// The first `max` characters of `text`.
    pub(crate) fn snippet(text: &str, max: usize) -> String {
        match text.char_indices().nth(max) {
            Some((end, _)) => format!("{}...", &text[..end]),
            None => text.to_owned(),
        }
    }

    /// An error reported inside the stream (Anthropic's `error` event, an OpenAI chunk with `error`).
    /// `kind` is the error's type or code.
    pub(crate) fn stream_error(kind: &str, message: &str, out: &Emitter) -> Fail {
        let status = match kind {
            "invalid_request_error" | "invalid_request" => 400,
            "authentication_error" | "invalid_api_key" => 401,
            "permission_error" => 403,
            "not_found_error" => 404,
            "request_too_large" => 413,
            "rate_limit_error" | "rate_limit_exceeded" | "insufficient_quota" => 429,
            "overloaded_error" => 529,
            "timeout_error" => 504,
            _ => 500,
        };
        let message = if kind.is_empty() { message.to_owned() } else { format!("{kind}: {message}") };
        if out.streamed() {
            Fail::Fatal(ProviderError::StreamCut { message })
        } else if status == 429 || status >= 500 {
            Fail::Transient {
                reason: format!("{message} (reported in the stream)"),
                err: ProviderError::Unavailable { status, attempts: 1, message },
                retry_after: None,
            }
        } else {
            Fail::Fatal(ProviderError::Rejected { status, message })
        }
    }

    /// An error and its sources, without repeats.
    fn chain(e: &(dyn std::error::Error + 'static)) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut cur = Some(e);
        while let Some(err) = cur {
            let s = err.to_string();
            if !parts.iter().any(|p| p.contains(&s)) {
                parts.push(s);
            }
            cur = err.source();
        }
        parts.join(": ")
    }

    fn scrub_str(s: String, key: Option<&str>) -> String {
        match key {
            Some(key) if key.len() >= 4 && s.contains(key) => s.replace(key, "[redacted]"),
            _ => s,
        }
    }

    /// The key never appears in an error, even when a server echoes it.
    fn scrub(mut err: ProviderError, key: Option<&str>) -> ProviderError {
        let fix = |s: &mut String| *s = scrub_str(std::mem::take(s), key);
        match &mut err {
            ProviderError::Auth { message, .. }
            | ProviderError::Unavailable { message, .. }
            | ProviderError::Rejected { message, .. }
            | ProviderError::StreamCut { message }
            | ProviderError::Protocol { message }
            | ProviderError::Config { message } => fix(message),
            ProviderError::Connect { url, message } => {
                fix(url);
                fix(message);
            }
            ProviderError::Timeout { .. } => {}
        }
        err
    }

    /// The key from `env_var`; `None` when unset or blank.
    pub(crate) fn api_key(env_var: &str) -> Option<String> {
        std::env::var(env_var).ok().map(|k| k.trim().to_owned()).filter(|k| !k.is_empty())
    }

    /// `value` as a header value hidden from Debug output.
    pub(crate) fn secret_header(value: &str, env_var: &str) -> Result<reqwest::header::HeaderValue, ProviderError> {
        let mut v = reqwest::header::HeaderValue::from_str(value).map_err(|_| ProviderError::Config {
            message: format!("the API key in ${env_var} holds characters not allowed in an HTTP header"),
        })?;
        v.set_sensitive(true);
        Ok(v)
    }
}

/// The conversation as alternating turns in which every tool call is answered.
pub(crate) mod turns {
    use std::borrow::Cow;

    use crate::message::{Message, ROLE_ASSISTANT, ToolCall};

    /// Answers a tool call the log holds no result for (the session stopped before it had one).
    pub(crate) const MISSING_RESULT: &str =
        "No result was recorded for this tool call (the session was interrupted before it finished).";
    /// Opens a conversation whose first kept message is the assistant's.
    pub(crate) const CONTINUED: &str = "(continued)";
    /// Follows the text of an answer that stopped mid-stream ([`Message::interrupted`]), as text of
    /// the same assistant turn: both APIs accept it, and the model knows its answer was cut short.
    pub(crate) const INTERRUPTED_ANSWER: &str =
        "[This answer was interrupted here: the editor stopped before it was complete.]";

    pub(crate) enum Turn<'a> {
        /// Tool results (answering the previous assistant turn's calls, in their order), then text.
        User {
            results: Vec<Answer<'a>>,
            texts: Vec<Cow<'a, str>>,
        },
        Assistant {
            texts: Vec<&'a str>,
            calls: Vec<&'a ToolCall>,
        },
    }

    pub(crate) struct Answer<'a> {
        pub id: &'a str,
        pub content: &'a str,
        pub is_error: bool,
    }

    /// Consecutive messages of one side merge; the first turn is the user's; each assistant turn
    /// with calls is followed by a user turn answering each call exactly once (results the log lacks
    /// are stood in for by [`MISSING_RESULT`]); results answering no call of the turn before become
    /// text; blank texts and empty messages are dropped.
    pub(crate) fn turns(messages: &[Message]) -> Vec<Turn<'_>> {
        let mut grouped: Vec<Turn<'_>> = Vec::new();
        for m in messages {
            let text = Some(m.content.as_str()).filter(|t| !t.trim().is_empty());
            if let Some(r) = &m.tool_result {
                let (results, texts) = user(&mut grouped);
                results.push(Answer { id: &r.tool_call_id, content: &r.content, is_error: r.is_error });
                texts.extend(text.map(Cow::Borrowed));
            } else if m.role == ROLE_ASSISTANT {
                if text.is_none() && m.tool_calls.is_empty() {
                    continue;
                }
                if !matches!(grouped.last(), Some(Turn::Assistant { .. })) {
                    grouped.push(Turn::Assistant { texts: Vec::new(), calls: Vec::new() });
                }
                if let Some(Turn::Assistant { texts, calls }) = grouped.last_mut() {
                    texts.extend(text);
                    if m.interrupted {
                        texts.push(INTERRUPTED_ANSWER);
                    }
                    for call in &m.tool_calls {
                        if !calls.iter().any(|c| c.id == call.id) {
                            calls.push(call);
                        }
                    }
                }
            } else if let Some(text) = text {
                user(&mut grouped).1.push(Cow::Borrowed(text));
            }
        }

        let mut out = Vec::with_capacity(grouped.len() + 2);
        if matches!(grouped.first(), Some(Turn::Assistant { .. })) {
            out.push(Turn::User { results: Vec::new(), texts: vec![Cow::Borrowed(CONTINUED)] });
        }
        // The calls of the assistant turn just pushed; the next turn (a user one, since grouped turns
        // alternate) answers them.
        let mut pending: Vec<&ToolCall> = Vec::new();
        let mut grouped = grouped.into_iter().peekable();
        while let Some(turn) = grouped.next() {
            match turn {
                Turn::Assistant { texts, calls } => {
                    pending.clone_from(&calls);
                    out.push(Turn::Assistant { texts, calls });
                    if grouped.peek().is_none() && !pending.is_empty() {
                        let results = answer(&pending, Vec::new()).0;
                        out.push(Turn::User { results, texts: Vec::new() });
                    }
                }
                Turn::User { results, texts } => {
                    let (results, orphans) = answer(&pending, results);
                    pending.clear();
                    out.push(Turn::User { results, texts: orphans.into_iter().chain(texts).collect() });
                }
            }
        }
        out
    }

    /// The user turn at the end of `grouped`, opened if needed.
    fn user<'t, 'a>(grouped: &'t mut Vec<Turn<'a>>) -> (&'t mut Vec<Answer<'a>>, &'t mut Vec<Cow<'a, str>>) {
        if !matches!(grouped.last(), Some(Turn::User { .. })) {
            grouped.push(Turn::User { results: Vec::new(), texts: Vec::new() });
        }
        match grouped.last_mut() {
            Some(Turn::User { results, texts }) => (results, texts),
            _ => unreachable!("a user turn was just ensured"),
        }
    }

    /// One answer per call, in the calls' order; results no call asked for come back as text.
    fn answer<'a>(calls: &[&'a ToolCall], results: Vec<Answer<'a>>) -> (Vec<Answer<'a>>, Vec<Cow<'a, str>>) {
        let mut results: Vec<Option<Answer<'a>>> = results.into_iter().map(Some).collect();
        let mut answers = Vec::with_capacity(calls.len());
        for call in calls {
            let found = results.iter_mut().find(|r| r.as_ref().is_some_and(|r| r.id == call.id)).and_then(Option::take);
            answers.push(found.unwrap_or(Answer { id: &call.id, content: MISSING_RESULT, is_error: true }));
        }
        let orphans = results
            .into_iter()
            .flatten()
            .map(|r| {
                Cow::Owned(format!(
                    "[Result of tool call {} (the call is no longer in the conversation){}]\n{}",
                    r.id,
                    if r.is_error { ", an error" } else { "" },
                    r.content
                ))
            })
            .collect();
        (answers, orphans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Result<Vec<Event>, SseError> {
        let mut p = Parser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out)?;
        }
        Ok(out)
    }

    fn ev(event: &str, data: &str) -> Event {
        Event { event: event.into(), data: data.into() }
    }

    /// Every line ending, comments, BOM, multi-line data, multi-byte characters, ignored fields.
    const CORPUS: &[u8] = "\u{FEFF}: a comment\r\n\
        event: message_start\r\n\
        data: {\"t\":\"h\u{e9}llo \u{2713} \u{1F600}\"}\r\n\
        \r\n\
        data: one\n\
        data:two\n\
        data\n\
        id: 7\n\
        retry: 100\n\
        unknown: x\n\
        \n\
        event: ping\r\
        data: p\u{e9}\r\
        \r\
        event: no-data\n\
        \n\
        data: \u{1F600}\r\n\
        data: b\r\n\
        \r\n\
        :tail\n\
        data: incomplete"
        .as_bytes();

    fn corpus_events() -> Vec<Event> {
        vec![
            ev("message_start", "{\"t\":\"h\u{e9}llo \u{2713} \u{1F600}\"}"),
            ev("message", "one\ntwo\n"),
            ev("ping", "p\u{e9}"),
            ev("message", "\u{1F600}\nb"),
        ]
    }

    #[test]
    fn whole_corpus_parses_per_spec() {
        assert_eq!(parse_all(&[CORPUS]).unwrap(), corpus_events());
        let mut p = Parser::new();
        p.feed(CORPUS, &mut Vec::new()).unwrap();
        assert!(p.pending(), "the unterminated event waits, never dispatched");
    }

    #[test]
    fn one_byte_at_a_time() {
        let chunks: Vec<&[u8]> = CORPUS.chunks(1).collect();
        assert_eq!(parse_all(&chunks).unwrap(), corpus_events());
    }

    #[test]
    fn every_single_boundary() {
        for i in 0..=CORPUS.len() {
            let (a, b) = CORPUS.split_at(i);
            assert_eq!(parse_all(&[a, b]).unwrap(), corpus_events(), "split at byte {i}");
        }
    }

    #[test]
    fn every_pair_of_boundaries() {
        for i in 0..=CORPUS.len() {
            for j in i..=CORPUS.len() {
                let chunks = [&CORPUS[..i], &CORPUS[i..j], &CORPUS[j..]];
                assert_eq!(parse_all(&chunks).unwrap(), corpus_events(), "splits at {i} and {j}");
            }
        }
    }

    #[test]
    fn cr_then_lf_in_the_next_chunk_is_one_line_ending() {
        let events = parse_all(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "a\nb")]);
        let events = parse_all(&[b"data: a\r", b"\r"]).unwrap();
        assert_eq!(events, vec![ev("message", "a")], "two CRs are two line endings");
    }

    #[test]
    fn field_without_space_and_with_two_spaces() {
        let events = parse_all(&[b"data:x\n\ndata:  y\n\nevent:\ndata: z\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "x"), ev("message", " y"), ev("message", "z")]);
    }

    #[test]
    fn empty_data_line_dispatches_an_empty_event() {
        assert_eq!(parse_all(&[b"data\n\ndata:\n\n"]).unwrap(), vec![ev("message", ""), ev("message", "")]);
    }

    #[test]
    fn event_type_resets_after_dispatch_and_blank_events() {
        let events = parse_all(&[b"event: a\n\ndata: 1\n\nevent: b\ndata: 2\n\ndata: 3\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "1"), ev("b", "2"), ev("message", "3")]);
    }

    #[test]
    fn bom_only_at_the_very_start() {
        let events = parse_all(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "a")]);
        // A BOM later is part of a field name, so the line is an unknown field.
        let events = parse_all(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "a")]);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        assert_eq!(parse_all(&[b"data: ok\n\ndata: \xFF\n\n"]), Err(SseError::InvalidUtf8 { line: 3 }));
    }

    #[test]
    fn an_endless_line_hits_the_limit() {
        let mut p = Parser::with_limit(100);
        let mut out = Vec::new();
        p.feed(&[b'a'; 60], &mut out).unwrap();
        assert_eq!(p.feed(&[b'a'; 60], &mut out), Err(SseError::TooLong { limit: 100 }));
        // Data accumulated over many lines counts too.
        let mut p = Parser::with_limit(100);
        let line = b"data: 0123456789012345678901234567890123456789\n";
        p.feed(line, &mut out).unwrap();
        p.feed(line, &mut out).unwrap();
        assert!(p.feed(line, &mut out).is_err());
    }

    mod turns {
        use serde_json::json;

        use super::super::turns::{CONTINUED, INTERRUPTED_ANSWER, MISSING_RESULT, Turn, turns};
        use crate::message::{Message, ToolCall};

        fn shape(ts: &[Turn<'_>]) -> Vec<String> {
            ts.iter()
                .map(|t| match t {
                    Turn::User { results, texts } => format!(
                        "user[{}|{}]",
                        results.iter().map(|r| format!("{}={}", r.id, r.content)).collect::<Vec<_>>().join(","),
                        texts.join(",")
                    ),
                    Turn::Assistant { texts, calls } => format!(
                        "assistant[{}|{}]",
                        texts.join(","),
                        calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(",")
                    ),
                })
                .collect()
        }

        fn call(id: &str) -> ToolCall {
            ToolCall::new(id, "t", json!({}))
        }

        #[test]
        fn results_and_following_text_merge_into_one_user_turn() {
            let msgs = vec![
                Message::user("hi"),
                Message::assistant_tool_calls("looking", vec![call("a"), call("b")]),
                Message::tool_result("b", "B", false),
                Message::tool_result("a", "A", false),
                Message::user("and also"),
                Message::user("this"),
                Message::assistant("done"),
            ];
            assert_eq!(
                shape(&turns(&msgs)),
                ["user[|hi]", "assistant[looking|a,b]", "user[a=A,b=B|and also,this]", "assistant[done|]"]
            );
        }

        #[test]
        fn an_interrupted_answer_is_followed_by_a_note_in_its_own_turn() {
            let msgs =
                vec![Message::user("hi"), Message::assistant_interrupted("Hello wor", 1), Message::user("go on")];
            assert_eq!(
                shape(&turns(&msgs)),
                ["user[|hi]".to_string(), format!("assistant[Hello wor,{INTERRUPTED_ANSWER}|]"), "user[|go on]".into()]
            );
        }

        #[test]
        fn interrupted_calls_get_a_stand_in_result_and_orphans_become_text() {
            let msgs = vec![
                Message::assistant("earlier"),
                Message::assistant_tool_calls("", vec![call("a")]),
                Message::user("what happened?"),
                Message::tool_result("zz", "late", true),
                Message::assistant("   "),
                Message::assistant_tool_calls("", vec![call("c")]),
            ];
            let got = shape(&turns(&msgs));
            assert_eq!(got[0], format!("user[|{CONTINUED}]"));
            assert_eq!(got[1], "assistant[earlier|a]");
            assert!(got[2].starts_with(&format!("user[a={MISSING_RESULT}|[Result of tool call zz")), "{}", got[2]);
            assert!(got[2].ends_with("late,what happened?]"), "{}", got[2]);
            assert_eq!(got[3], "assistant[|c]");
            assert_eq!(got[4], format!("user[c={MISSING_RESULT}|]"));
            assert_eq!(got.len(), 5);
        }
    }
}
