//! Fake model servers for tests: Anthropic's Messages API and OpenAI's Chat Completions, on
//! `127.0.0.1`, speaking hand-written HTTP/1.1 with the real streaming wire formats.
//!
//! Self-contained (std, tokio, serde_json only): use it from any test file with `mod support;`.
//!
//! ```ignore
//! mod support;
//! use support::{FakeServer, Kind, Reply, anthropic_sse};
//!
//! let server = FakeServer::start(Kind::Anthropic);        // its own thread and runtime
//! server.push(Reply::sse(anthropic_sse("Hello", &[])));    // the answer to the 1st request
//! server.push(Reply::sse(anthropic_sse("", &[("toolu_1", "read_file", json!({"path": "a.rs"}))])));
//! let cfg = ProviderConfig { base_url: server.base_url(), .. };
//! // ... run the provider ...
//! let reqs = server.requests();                            // what arrived, parsed
//! assert_eq!(reqs[0].body["model"], "claude-test");
//! assert!(reqs.iter().all(|r| r.rejected.is_none()));      // all passed the protocol checks
//! ```
//!
//! * Every request is checked against the protocol's rules before any scripted reply is used (see
//!   [`validate_anthropic`] and [`validate_openai`]); a violation is answered `400` with an error in
//!   the API's own format explaining it, and recorded in [`Recorded::rejected`]. The scripted reply
//!   is then kept for the next request.
//! * Replies are used in the order pushed, one per request. A request finding none is answered `400`
//!   `fake server: no reply scripted ...` (not retryable, so the test fails fast).
//! * Each connection serves one request and is closed (`connection: close`).
//! * Streams are sent with `transfer-encoding: chunked`, one HTTP chunk per piece, with a short
//!   pause between pieces so they reach the client as separate reads.

#![allow(dead_code)] // each test binary uses a different part of it

pub mod acp_rig;
pub mod client;
pub mod scripted;
pub mod sim_disk;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Which API the server imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `POST /v1/messages`; [`FakeServer::base_url`] is `http://127.0.0.1:PORT`.
    Anthropic,
    /// `POST /v1/chat/completions`; [`FakeServer::base_url`] is `http://127.0.0.1:PORT/v1`.
    OpenAi,
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200`, `content-type: text/event-stream`, the pieces written one by one, then a proper end.
    Stream(Vec<Vec<u8>>),
    /// A plain answer: status, extra headers (`("retry-after", "1")`), body (JSON usually; the
    /// content type is `application/json` unless a header says otherwise).
    Status(u16, Vec<(String, String)>, String),
    /// `200` event-stream head, these bytes (in a few pieces), then the connection is dropped in the
    /// middle of the chunked body: the client sees the stream break.
    CutAfter(Vec<u8>),
    /// Reads the request and never answers (the connection stays open until the server is dropped).
    Hang,
    /// `200` event-stream head and these pieces, then silence with the connection open.
    StallAfter(Vec<Vec<u8>>),
}

impl Reply {
    /// A stream of `bytes`, cut by [`split_awkwardly`].
    pub fn sse(bytes: Vec<u8>) -> Reply {
        Reply::Stream(split_awkwardly(&bytes))
    }

    /// An error answer with the body in `kind`'s error format (see [`error_body`]).
    pub fn error(kind: Kind, status: u16, message: &str) -> Reply {
        Reply::Status(status, Vec::new(), error_body(kind, status, message))
    }

    /// [`Reply::error`] with a `retry-after` header (seconds).
    pub fn error_retry_after(kind: Kind, status: u16, message: &str, seconds: u64) -> Reply {
        Reply::Status(status, vec![("retry-after".into(), seconds.to_string())], error_body(kind, status, message))
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// With the query string, e.g. `/v1/messages`.
    pub path: String,
    /// Names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Value::Null` when it is not JSON.
    pub body: Value,
    pub raw_body: Vec<u8>,
    /// Why the server refused it (`Some` = answered with the error, no scripted reply used).
    pub rejected: Option<String>,
}

impl Recorded {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

struct State {
    kind: Kind,
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    api_key: Mutex<Option<String>>,
    piece_delay: Mutex<Duration>,
}

/// A fake API server on `127.0.0.1:<free port>`, running on its own thread (so it works from any
/// test, async or not, and outlives the test's runtime). Stops when dropped.
pub struct FakeServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeServer {
    pub fn start(kind: Kind) -> FakeServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking listener");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            kind,
            replies: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            api_key: Mutex::new(None),
            piece_delay: Mutex::new(Duration::from_millis(2)),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shared = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fake-{kind:?}-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    let accept = async {
                        loop {
                            let Ok((sock, _)) = listener.accept().await else { continue };
                            tokio::spawn(serve(sock, shared.clone()));
                        }
                    };
                    tokio::select! {
                        _ = accept => {}
                        _ = stopped => {}
                    }
                });
                // Dropping the runtime cancels the connections still open (hanging ones included).
            })
            .expect("spawn the fake server thread");
        FakeServer { addr, state, stop: Some(stop), thread: Some(thread) }
    }

    /// What to put in `ProviderConfig::base_url`: `http://127.0.0.1:PORT` (Anthropic) or
    /// `http://127.0.0.1:PORT/v1` (OpenAI), as the vendors' SDKs write them.
    pub fn base_url(&self) -> String {
        match self.state.kind {
            Kind::Anthropic => format!("http://127.0.0.1:{}", self.addr.port()),
            Kind::OpenAi => format!("http://127.0.0.1:{}/v1", self.addr.port()),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Scripts the answer to the next request not yet answered.
    pub fn push(&self, reply: Reply) {
        self.state.replies.lock().unwrap().push_back(reply);
    }

    /// The requests received so far, in order (refused ones included).
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Scripted replies not used yet.
    pub fn unused_replies(&self) -> usize {
        self.state.replies.lock().unwrap().len()
    }

    /// From now on, answer `401` (in the API's format) unless the request carries this key
    /// (`x-api-key` for Anthropic, `Authorization: Bearer` for OpenAI).
    pub fn require_api_key(&self, key: &str) {
        *self.state.api_key.lock().unwrap() = Some(key.to_owned());
    }

    /// The pause between two pieces of a stream (2 ms by default).
    pub fn set_piece_delay(&self, delay: Duration) {
        *self.state.piece_delay.lock().unwrap() = delay;
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A `http://127.0.0.1:PORT` nothing listens on (the port was just free), for connection-refused
/// tests.
pub fn refused_base_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

// ---------------------------------------------------------------------------------------------
// HTTP

struct RawRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn serve(mut sock: TcpStream, state: Arc<State>) {
    let _ = sock.set_nodelay(true);
    let raw = match read_request(&mut sock).await {
        Ok(Some(raw)) => raw,
        Ok(None) | Err(_) => return,
    };
    let kind = state.kind;
    let body: Value = serde_json::from_slice(&raw.body).unwrap_or(Value::Null);
    let verdict = check(kind, &raw, &body, &state);
    let number = {
        let mut requests = state.requests.lock().unwrap();
        requests.push(Recorded {
            method: raw.method.clone(),
            path: raw.path.clone(),
            headers: raw.headers.clone(),
            body,
            raw_body: raw.body,
            rejected: verdict.as_ref().err().map(|(_, why)| why.clone()),
        });
        requests.len()
    };
    let reply = match verdict {
        Err((status, why)) => Reply::error(kind, status, &why),
        Ok(()) => state.replies.lock().unwrap().pop_front().unwrap_or_else(|| {
            Reply::error(kind, 400, &format!("fake server: no reply scripted for request #{number}"))
        }),
    };
    let delay = *state.piece_delay.lock().unwrap();
    let _ = write_reply(&mut sock, reply, delay).await;
}

/// Path, key, then the protocol's rules.
fn check(kind: Kind, raw: &RawRequest, body: &Value, state: &State) -> Result<(), (u16, String)> {
    let path = match kind {
        Kind::Anthropic => "/v1/messages",
        Kind::OpenAi => "/v1/chat/completions",
    };
    if raw.path != path {
        return Err((404, format!("fake server: no route {} {} (expected POST {path})", raw.method, raw.path)));
    }
    if raw.method != "POST" {
        return Err((405, format!("fake server: {} {path}: only POST", raw.method)));
    }
    if let Some(key) = state.api_key.lock().unwrap().as_deref() {
        let ok = match kind {
            Kind::Anthropic => header(&raw.headers, "x-api-key") == Some(key),
            Kind::OpenAi => header(&raw.headers, "authorization") == Some(&format!("Bearer {key}")),
        };
        if !ok {
            return Err((401, "invalid api key".into()));
        }
    }
    let ct = header(&raw.headers, "content-type").unwrap_or("");
    if !ct.starts_with("application/json") {
        return Err((400, format!("content-type must be application/json, got {ct:?}")));
    }
    if kind == Kind::Anthropic && header(&raw.headers, "anthropic-version").is_none() {
        return Err((400, "anthropic-version: header is required".into()));
    }
    if body.is_null() {
        return Err((400, "the body is not JSON".into()));
    }
    match kind {
        Kind::Anthropic => validate_anthropic(body),
        Kind::OpenAi => validate_openai(body),
    }
    .map_err(|why| (400, why))
}

fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<RawRequest>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_owned();
    let path = first.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = buf[head_end + 4..].to_vec();
    // Clients send a length for a buffered body (reqwest does); chunked request bodies are not
    // supported: such a request arrives with an empty body and fails validation.
    let length = header(&headers, "content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    while body.len() < length {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    body.truncate(length);
    Ok(Some(RawRequest { method, path, headers, body }))
}

const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                           transfer-encoding: chunked\r\nconnection: close\r\n\r\n";

async fn write_piece(sock: &mut TcpStream, piece: &[u8]) -> std::io::Result<()> {
    if piece.is_empty() {
        return Ok(()); // an empty HTTP chunk would end the body
    }
    let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
    frame.extend_from_slice(piece);
    frame.extend_from_slice(b"\r\n");
    sock.write_all(&frame).await?;
    sock.flush().await
}

async fn write_reply(sock: &mut TcpStream, reply: Reply, delay: Duration) -> std::io::Result<()> {
    match reply {
        Reply::Status(status, headers, body) => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
                head.push_str("content-type: application/json\r\n");
            }
            for (n, v) in &headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()));
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(body.as_bytes()).await?;
            sock.flush().await?;
            sock.shutdown().await
        }
        Reply::Stream(pieces) => {
            sock.write_all(STREAM_HEAD.as_bytes()).await?;
            for piece in pieces {
                write_piece(sock, &piece).await?;
                tokio::time::sleep(delay).await;
            }
            sock.write_all(b"0\r\n\r\n").await?;
            sock.flush().await?;
            sock.shutdown().await
        }
        Reply::CutAfter(bytes) => {
            sock.write_all(STREAM_HEAD.as_bytes()).await?;
            for piece in split_awkwardly(&bytes) {
                write_piece(sock, &piece).await?;
                tokio::time::sleep(delay).await;
            }
            // No terminating chunk: the body breaks off.
            sock.shutdown().await
        }
        Reply::Hang => std::future::pending().await,
        Reply::StallAfter(pieces) => {
            sock.write_all(STREAM_HEAD.as_bytes()).await?;
            for piece in pieces {
                write_piece(sock, &piece).await?;
                tokio::time::sleep(delay).await;
            }
            std::future::pending().await
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// An error body in the API's format: Anthropic
/// `{"type":"error","error":{"type":"invalid_request_error","message":...}}`, OpenAI
/// `{"error":{"message":...,"type":...,"param":null,"code":...}}`. The type follows the status.
pub fn error_body(kind: Kind, status: u16, message: &str) -> String {
    match kind {
        Kind::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
        }
        Kind::OpenAi => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                429 => ("requests", json!("rate_limit_exceeded")),
                500..=599 => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Wire formats

/// Input tokens reported by [`anthropic_sse`] and [`openai_sse`].
pub const SSE_INPUT_TOKENS: u64 = 42;
/// Output tokens reported by [`anthropic_sse`] and [`openai_sse`].
pub const SSE_OUTPUT_TOKENS: u64 = 7;

/// `text` in a few pieces, cut at character boundaries (2 to 4 pieces when long enough).
fn text_pieces(text: &str) -> Vec<&str> {
    let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    if chars.len() < 2 {
        return if text.is_empty() { Vec::new() } else { vec![text] };
    }
    let n = chars.len().min(4);
    let mut cuts: Vec<usize> = (1..n).map(|k| chars[k * chars.len() / n]).collect();
    cuts.dedup();
    let mut pieces = Vec::new();
    let mut start = 0;
    for cut in cuts {
        pieces.push(&text[start..cut]);
        start = cut;
    }
    pieces.push(&text[start..]);
    pieces
}

fn sse_event(out: &mut Vec<u8>, event: &str, data: &Value) {
    out.extend_from_slice(format!("event: {event}\ndata: {data}\n\n").as_bytes());
}

/// The exact bytes of a streamed Messages answer: `message_start`, a `ping`, a text block (if
/// `text` is not empty) in several `text_delta`s, then one `tool_use` block per call (id, name,
/// arguments) whose input arrives as an empty `input_json_delta` then the JSON in 3+ pieces, another
/// `ping`, `message_delta` (stop reason `tool_use` or `end_turn`, [`SSE_OUTPUT_TOKENS`]) and
/// `message_stop`. Input tokens: [`SSE_INPUT_TOKENS`].
pub fn anthropic_sse(text: &str, tool_calls: &[(&str, &str, Value)]) -> Vec<u8> {
    anthropic_thinking_sse("", None, text, tool_calls)
}

/// FNV-1a, 64 bits: the fake's stand-in for the API's signatures (deterministic, and any change to the
/// text changes it). tests/e2e/fake_llm.py signs the same way.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3))
}

/// The signature the fake gives a thinking block of `thinking`.
pub fn fake_signature(thinking: &str) -> String {
    format!("EqSig{:016x}", fnv64(thinking.as_bytes()))
}

/// The encrypted data of a redacted thinking block made of `secret`.
pub fn fake_redacted(secret: &str) -> String {
    format!("EmRed{:016x}{secret}", fnv64(secret.as_bytes()))
}

/// What is wrong with a thinking block sent back (its signature or data not the fake's for its text).
fn thinking_block_problem(b: &Value) -> Option<&'static str> {
    match b.get("type").and_then(Value::as_str) {
        Some("thinking") => {
            let (Some(text), Some(sig)) =
                (b.get("thinking").and_then(Value::as_str), b.get("signature").and_then(Value::as_str))
            else {
                return Some("a `thinking` block needs `thinking` and `signature`");
            };
            (sig != fake_signature(text)).then_some("Invalid `signature` in `thinking` block")
        }
        Some("redacted_thinking") => {
            let data = b.get("data").and_then(Value::as_str).unwrap_or("");
            let ok = data.len() >= 21
                && data.starts_with("EmRed")
                && data.is_char_boundary(21)
                && data[5..21] == format!("{:016x}", fnv64(&data.as_bytes()[21..]));
            (!ok).then_some("Invalid `data` in `redacted_thinking` block")
        }
        _ => None,
    }
}

/// [`anthropic_sse`] with extended thinking first: a `thinking` block streamed as `thinking_delta`s then
/// one `signature_delta` ([`fake_signature`]) when `thinking` is not empty, then a `redacted_thinking` block
/// ([`fake_redacted`] of `redacted`) when given.
pub fn anthropic_thinking_sse(
    thinking: &str,
    redacted: Option<&str>,
    text: &str,
    tool_calls: &[(&str, &str, Value)],
) -> Vec<u8> {
    let mut out = Vec::new();
    sse_event(
        &mut out,
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_fake01", "type": "message", "role": "assistant", "model": "fake-model",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": SSE_INPUT_TOKENS, "output_tokens": 1}}}),
    );
    sse_event(&mut out, "ping", &json!({"type": "ping"}));
    let mut index = 0;
    if !thinking.is_empty() {
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        );
        for piece in text_pieces(thinking) {
            sse_event(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "thinking_delta", "thinking": piece}}),
            );
        }
        sse_event(
            &mut out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "signature_delta", "signature": fake_signature(thinking)}}),
        );
        sse_event(&mut out, "content_block_stop", &json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    if let Some(secret) = redacted {
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "redacted_thinking", "data": fake_redacted(secret)}}),
        );
        sse_event(&mut out, "content_block_stop", &json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    if !text.is_empty() {
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        );
        for piece in text_pieces(text) {
            sse_event(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            );
        }
        sse_event(&mut out, "content_block_stop", &json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for (id, name, arguments) in tool_calls {
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        );
        let json = arguments.to_string();
        let mut pieces = vec![""];
        pieces.extend(text_pieces(&json));
        for piece in pieces {
            sse_event(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}),
            );
        }
        sse_event(&mut out, "content_block_stop", &json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    sse_event(&mut out, "ping", &json!({"type": "ping"}));
    let stop = if tool_calls.is_empty() { "end_turn" } else { "tool_use" };
    sse_event(
        &mut out,
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": SSE_OUTPUT_TOKENS}}),
    );
    sse_event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    out
}

/// An Anthropic `error` event, e.g. `("overloaded_error", "Overloaded")`.
pub fn anthropic_error_event(error_type: &str, message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    sse_event(&mut out, "error", &json!({"type": "error", "error": {"type": error_type, "message": message}}));
    out
}

fn openai_chunk(out: &mut Vec<u8>, delta: Value, finish: Value) {
    let chunk = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
                       "model": "fake-model", "system_fingerprint": "fp_fake",
                       "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    out.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
}

/// The exact bytes of a streamed chat completion: a `: keep-alive` comment, a role chunk, `text` in
/// several content chunks, each tool call as a first fragment (index, id, type, name, empty
/// arguments) then its arguments string in 3+ fragments, a finish chunk (`tool_calls` or `stop`), a
/// usage chunk with empty choices ([`SSE_INPUT_TOKENS`], [`SSE_OUTPUT_TOKENS`]) and `data: [DONE]`.
pub fn openai_sse(text: &str, tool_calls: &[(&str, &str, Value)]) -> Vec<u8> {
    let mut out = b": keep-alive\n\n".to_vec();
    openai_chunk(&mut out, json!({"role": "assistant", "content": "", "refusal": null}), Value::Null);
    for piece in text_pieces(text) {
        openai_chunk(&mut out, json!({"content": piece}), Value::Null);
    }
    for (index, (id, name, arguments)) in tool_calls.iter().enumerate() {
        openai_chunk(
            &mut out,
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        );
        let json = arguments.to_string();
        for piece in text_pieces(&json) {
            openai_chunk(
                &mut out,
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            );
        }
    }
    let finish = if tool_calls.is_empty() { "stop" } else { "tool_calls" };
    openai_chunk(&mut out, json!({}), json!(finish));
    let usage = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
                       "model": "fake-model", "choices": [],
                       "usage": {"prompt_tokens": SSE_INPUT_TOKENS, "completion_tokens": SSE_OUTPUT_TOKENS,
                                 "total_tokens": SSE_INPUT_TOKENS + SSE_OUTPUT_TOKENS}});
    out.extend_from_slice(format!("data: {usage}\n\n").as_bytes());
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

/// An OpenAI error chunk: `data: {"error": {"message": ..., "type": ..., "code": null}}`.
pub fn openai_error_chunk(error_type: &str, message: &str) -> Vec<u8> {
    let chunk = json!({"error": {"message": message, "type": error_type, "param": null, "code": null}});
    format!("data: {chunk}\n\n").into_bytes()
}

/// `bytes` up to (not including) the first occurrence of `marker`; all of it when absent.
pub fn truncate_before(bytes: &[u8], marker: &str) -> Vec<u8> {
    let m = marker.as_bytes();
    match bytes.windows(m.len()).position(|w| w == m) {
        Some(i) => bytes[..i].to_vec(),
        None => bytes.to_vec(),
    }
}

/// The same stream with every `\n` turned into `\r\n`.
pub fn crlf(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8);
    for &b in bytes {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// Cuts `bytes` into pieces of irregular sizes (1, 3, 7, 2, 11... bytes, scaled up for long
/// inputs, at most ~60 pieces), always also cutting inside the first multi-byte UTF-8 character
/// and between the first `\r\n`, so events, lines and characters straddle pieces.
pub fn split_awkwardly(bytes: &[u8]) -> Vec<Vec<u8>> {
    const SIZES: [usize; 11] = [1, 3, 7, 2, 11, 5, 23, 13, 47, 31, 97];
    let scale = bytes.len().div_ceil(1200).max(1);
    let mut cuts = Vec::new();
    let mut at = 0;
    for size in SIZES.iter().cycle() {
        at += size * scale;
        if at >= bytes.len() {
            break;
        }
        cuts.push(at);
    }
    if let Some(i) = bytes.iter().position(|&b| b >= 0xC0) {
        cuts.push(i + 1);
    }
    if let Some(i) = bytes.windows(2).position(|w| w == b"\r\n") {
        cuts.push(i + 1);
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for cut in cuts {
        if cut > start && cut < bytes.len() {
            pieces.push(bytes[start..cut].to_vec());
            start = cut;
        }
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}

// ---------------------------------------------------------------------------------------------
// Protocol rules

fn obj<'v>(v: &'v Value, what: &str) -> Result<&'v serde_json::Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("{what}: must be an object"))
}

fn non_empty_str<'v>(v: Option<&'v Value>, what: &str) -> Result<&'v str, String> {
    match v.and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(format!("{what}: a non-empty string is required")),
    }
}

fn tool_use_id_ok(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The Messages API's rules (the subset that matters to an agent), with the API's own wording
/// where it has one:
///
/// * `model` (non-empty string), `max_tokens` (integer >= 1), `messages` (non-empty array) present;
///   `stream: true` (this fake only streams);
/// * `system`, when present, a string or an array of text blocks; `tools`, when present, objects
///   with a unique `name` (`^[a-zA-Z0-9_-]{1,64}$`) and an object `input_schema`;
/// * at most four blocks (system, tools, content) carry `cache_control`, each `{"type": "ephemeral"}`;
/// * roles are `user` or `assistant`, alternate, and the first is `user`;
/// * content is a non-empty string or a non-empty array of blocks; text blocks hold non-blank text;
///   `tool_use` only from the assistant (id `^[a-zA-Z0-9_-]+$`, unique, a name, an object input);
///   `tool_result` only from the user;
/// * every `tool_use` of an assistant message is answered by exactly one `tool_result` in the
///   immediately following user message, where tool results come before any other block; no
///   `tool_result` names an id the previous assistant message did not use.
pub fn validate_anthropic(body: &Value) -> Result<(), String> {
    let body = obj(body, "body")?;
    non_empty_str(body.get("model"), "model")?;
    match body.get("max_tokens").and_then(Value::as_u64) {
        Some(n) if n >= 1 => {}
        _ => return Err("max_tokens: an integer >= 1 is required".into()),
    }
    if body.get("stream") != Some(&Value::Bool(true)) {
        return Err("stream: this fake server only streams; send \"stream\": true".into());
    }
    match body.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) => {
            for b in blocks {
                if b.get("type").and_then(Value::as_str) != Some("text") || !b.get("text").is_some_and(Value::is_string)
                {
                    return Err("system: must be a string or an array of text blocks".into());
                }
            }
        }
        Some(_) => return Err("system: must be a string or an array of text blocks".into()),
    }
    if let Some(tools) = body.get("tools") {
        let tools = tools.as_array().ok_or("tools: must be an array")?;
        let mut names = Vec::new();
        for (i, t) in tools.iter().enumerate() {
            let name = non_empty_str(t.get("name"), &format!("tools.{i}.name"))?;
            if name.len() > 64 || !tool_use_id_ok(name) {
                return Err(format!("tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"));
            }
            if names.contains(&name) {
                return Err(format!("tools: Tool names must be unique ({name})"));
            }
            names.push(name);
            obj(t.get("input_schema").unwrap_or(&Value::Null), &format!("tools.{i}.input_schema"))?;
        }
    }
    let messages = body.get("messages").and_then(Value::as_array).ok_or("messages: an array is required")?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    let thinking_on = match body.get("thinking") {
        None => false,
        Some(t) if t.get("type").and_then(Value::as_str) == Some("disabled") => false,
        Some(t) => {
            let budget = t.get("budget_tokens").and_then(Value::as_u64);
            if t.get("type").and_then(Value::as_str) != Some("enabled") {
                return Err("thinking.type: Input should be 'enabled' or 'disabled'".into());
            }
            match budget {
                Some(b) if b >= 1024 => {}
                _ => return Err("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024".into()),
            }
            if budget >= body.get("max_tokens").and_then(Value::as_u64) {
                return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
            }
            true
        }
    };
    let breakpoints = cache_breakpoints(&Value::Object(body.clone()))?;
    if breakpoints > 4 {
        return Err(format!("A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."));
    }
    let mut previous_role = "";
    let mut asked: Vec<String> = Vec::new(); // tool_use ids of the previous assistant message
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(format!("messages.{i}.role: Input should be 'user' or 'assistant'"));
        }
        if i == 0 && role != "user" {
            return Err("messages: the first message must use the \"user\" role".into());
        }
        if role == previous_role {
            return Err(format!(
                "messages: roles must alternate between \"user\" and \"assistant\" (messages {} and {i} are both {role})",
                i - 1
            ));
        }
        previous_role = role;
        let string_block;
        let blocks: &[Value] = match m.get("content") {
            Some(Value::String(s)) if !s.trim().is_empty() => {
                string_block = [json!({"type": "text", "text": s})];
                &string_block
            }
            Some(Value::Array(blocks)) if !blocks.is_empty() => blocks,
            _ => return Err(format!("messages.{i}: all messages must have non-empty content")),
        };
        let mut used: Vec<String> = Vec::new();
        let mut answered: Vec<String> = Vec::new();
        let mut seen_other = false;
        for (j, b) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            match b.get("type").and_then(Value::as_str).unwrap_or("") {
                "text" => {
                    let text = b.get("text").and_then(Value::as_str).ok_or(format!("{at}.text: Field required"))?;
                    if text.trim().is_empty() {
                        return Err(format!("{at}: text content blocks must contain non-whitespace text"));
                    }
                    seen_other = true;
                }
                "tool_use" => {
                    if role != "assistant" {
                        return Err(format!("{at}: tool_use blocks are only allowed in assistant messages"));
                    }
                    let id = non_empty_str(b.get("id"), &format!("{at}.id"))?;
                    if !tool_use_id_ok(id) {
                        return Err(format!("{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"));
                    }
                    if used.iter().any(|u| u == id) {
                        return Err(format!("{at}: `tool_use` ids must be unique ({id})"));
                    }
                    used.push(id.to_owned());
                    non_empty_str(b.get("name"), &format!("{at}.name"))?;
                    obj(b.get("input").unwrap_or(&Value::Null), &format!("{at}.input"))?;
                }
                "tool_result" => {
                    if role != "user" {
                        return Err(format!("{at}: tool_result blocks are only allowed in user messages"));
                    }
                    if seen_other {
                        return Err(format!("{at}: tool_result blocks must come before any other content"));
                    }
                    let id = non_empty_str(b.get("tool_use_id"), &format!("{at}.tool_use_id"))?;
                    if !asked.iter().any(|a| a == id) {
                        return Err(format!(
                            "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` \
                             block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    if answered.iter().any(|a| a == id) {
                        return Err(format!("{at}: duplicate tool_result for tool_use_id {id}"));
                    }
                    answered.push(id.to_owned());
                    match b.get("content") {
                        None | Some(Value::String(_)) | Some(Value::Array(_)) => {}
                        _ => return Err(format!("{at}.content: must be a string or an array of blocks")),
                    }
                    if !matches!(b.get("is_error"), None | Some(Value::Bool(_))) {
                        return Err(format!("{at}.is_error: must be a boolean"));
                    }
                }
                kind @ ("thinking" | "redacted_thinking") => {
                    if role != "assistant" {
                        return Err(format!("{at}: {kind} blocks are only allowed in assistant messages"));
                    }
                    if let Some(problem) = thinking_block_problem(b) {
                        return Err(format!("{at}: {problem}"));
                    }
                    seen_other = true;
                }
                "" => return Err(format!("{at}.type: Field required")),
                _ => seen_other = true, // images, documents...
            }
        }
        if role == "user" {
            let missing: Vec<&str> = asked.iter().filter(|id| !answered.contains(id)).map(String::as_str).collect();
            if !missing.is_empty() {
                return Err(unanswered(&format!("messages.{i}"), &missing));
            }
        }
        asked = used;
    }
    if !asked.is_empty() {
        let missing: Vec<&str> = asked.iter().map(String::as_str).collect();
        return Err(unanswered("messages", &missing));
    }
    if thinking_on {
        final_turn_starts_with_thinking(messages)?;
    }
    Ok(())
}

/// With thinking on, a request that continues a tool loop (it ends with tool results) must give the last
/// assistant message back starting with its thinking blocks, in the API's words.
fn final_turn_starts_with_thinking(messages: &[Value]) -> Result<(), String> {
    let blocks = |m: &Value| m.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(last) = messages.last() else { return Ok(()) };
    let in_tool_loop = blocks(last).iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
    let Some(i) = messages.iter().rposition(|m| m.get("role").and_then(Value::as_str) == Some("assistant")) else {
        return Ok(());
    };
    if !in_tool_loop {
        return Ok(());
    }
    let first =
        blocks(&messages[i]).first().and_then(|b| b.get("type")).and_then(Value::as_str).unwrap_or("text").to_string();
    if first == "thinking" || first == "redacted_thinking" {
        return Ok(());
    }
    Err(format!(
        "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` \
         is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of \
         `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid \
         this requirement, disable `thinking`."
    ))
}

/// How many objects of `v` carry `cache_control`, each of which must be `{"type": "ephemeral"}` (a
/// `ttl` of `5m` or `1h` allowed).
fn cache_breakpoints(v: &Value) -> Result<usize, String> {
    match v {
        Value::Object(o) => {
            let mut n = 0;
            if let Some(c) = o.get("cache_control") {
                let ok = c.get("type").and_then(Value::as_str) == Some("ephemeral")
                    && c.as_object().is_some_and(|c| c.keys().all(|k| k == "type" || k == "ttl"))
                    && matches!(c.get("ttl").map(Value::as_str), None | Some(Some("5m" | "1h")));
                if !ok {
                    return Err(format!("cache_control: Input tag does not match the expected tag 'ephemeral': {c}"));
                }
                n += 1;
            }
            for v in o.values() {
                n += cache_breakpoints(v)?;
            }
            Ok(n)
        }
        Value::Array(a) => a.iter().map(cache_breakpoints).sum(),
        _ => Ok(0),
    }
}

fn unanswered(at: &str, ids: &[&str]) -> String {
    format!(
        "{at}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` \
         block must have a corresponding `tool_result` block in the next message.",
        ids.join(", ")
    )
}

/// Chat Completions' rules (the subset that matters to an agent), with the API's own wording where
/// it has one:
///
/// * `model` (non-empty string) and `messages` (non-empty array) present; `stream: true` (this fake
///   only streams); `stream_options`, when present, an object;
/// * `tools`, when present, a non-empty array of `{"type": "function", "function": {"name", ...}}`
///   with unique names and an object `parameters` when given;
/// * roles are `system`, `developer`, `user`, `assistant` or `tool`; system/developer/user content
///   is a string or an array;
/// * an assistant message has string content, or `null`/absent content with `tool_calls`; each tool
///   call has a unique non-empty `id`, `type: "function"`, a `function.name` and a
///   `function.arguments` that is a *string* holding JSON;
/// * an assistant message with `tool_calls` is followed directly by one `tool` message per call id
///   (`tool_call_id`, string `content`); no `tool` message answers anything else.
pub fn validate_openai(body: &Value) -> Result<(), String> {
    let body = obj(body, "body")?;
    non_empty_str(body.get("model"), "model")?;
    if body.get("stream") != Some(&Value::Bool(true)) {
        return Err("stream: this fake server only streams; send \"stream\": true".into());
    }
    if let Some(options) = body.get("stream_options") {
        obj(options, "stream_options")?;
    }
    for field in ["max_tokens", "max_completion_tokens"] {
        if let Some(v) = body.get(field)
            && v.as_u64().is_none_or(|n| n < 1)
        {
            return Err(format!("{field}: an integer >= 1 is expected"));
        }
    }
    if let Some(tools) = body.get("tools") {
        let tools = tools.as_array().ok_or("tools: must be an array")?;
        if tools.is_empty() {
            return Err("Invalid 'tools': empty array. Expected an array with minimum length 1".into());
        }
        let mut names = Vec::new();
        for (i, t) in tools.iter().enumerate() {
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return Err(format!("tools[{i}].type: must be \"function\""));
            }
            let name = non_empty_str(t.pointer("/function/name"), &format!("tools[{i}].function.name"))?;
            if names.contains(&name) {
                return Err(format!("tools: duplicate function name {name}"));
            }
            names.push(name);
            if let Some(p) = t.pointer("/function/parameters") {
                obj(p, &format!("tools[{i}].function.parameters"))?;
            }
        }
    }
    let messages = body.get("messages").and_then(Value::as_array).ok_or("messages: an array is required")?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    if let Some(effort) = body.get("reasoning_effort")
        && !matches!(effort.as_str(), Some("minimal" | "low" | "medium" | "high"))
    {
        return Err(format!(
            "Invalid value for 'reasoning_effort': {effort}. Supported values are: 'minimal', 'low', 'medium', and 'high'."
        ));
    }
    // DeepSeek's rule for its reasoner: the reasoning is output only; a request carrying it back is refused.
    if let Some(i) = messages.iter().position(|m| m.get("reasoning_content").is_some() || m.get("reasoning").is_some())
    {
        return Err(format!("messages[{i}]: reasoning_content is not allowed in input messages"));
    }
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "system" | "developer" | "user" => {
                if !matches!(m.get("content"), Some(Value::String(_)) | Some(Value::Array(_))) {
                    return Err(format!("messages[{i}].content: a string or an array is required"));
                }
                i += 1;
            }
            "tool" => {
                return Err(format!(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with \
                     'tool_calls'. (messages[{i}])"
                ));
            }
            "assistant" => {
                let calls = match m.get("tool_calls") {
                    None | Some(Value::Null) => &[][..],
                    Some(Value::Array(calls)) if !calls.is_empty() => calls.as_slice(),
                    Some(_) => return Err(format!("messages[{i}].tool_calls: a non-empty array is expected")),
                };
                match m.get("content") {
                    Some(Value::String(_)) | Some(Value::Array(_)) => {}
                    None | Some(Value::Null) if !calls.is_empty() => {}
                    _ => {
                        return Err(format!(
                            "messages[{i}].content: a string is required when the message has no tool_calls"
                        ));
                    }
                }
                let mut ids: Vec<&str> = Vec::new();
                for (j, c) in calls.iter().enumerate() {
                    let at = format!("messages[{i}].tool_calls[{j}]");
                    let id = non_empty_str(c.get("id"), &format!("{at}.id"))?;
                    if ids.contains(&id) {
                        return Err(format!("{at}.id: duplicate tool call id {id}"));
                    }
                    ids.push(id);
                    if c.get("type").and_then(Value::as_str) != Some("function") {
                        return Err(format!("{at}.type: must be \"function\""));
                    }
                    non_empty_str(c.pointer("/function/name"), &format!("{at}.function.name"))?;
                    let arguments = c
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .ok_or(format!("{at}.function.arguments: must be a string (of JSON)"))?;
                    if serde_json::from_str::<Value>(arguments).is_err() {
                        return Err(format!("{at}.function.arguments: not valid JSON: {arguments:?}"));
                    }
                }
                i += 1;
                while i < messages.len() && messages[i].get("role").and_then(Value::as_str) == Some("tool") {
                    let t = &messages[i];
                    let id = non_empty_str(t.get("tool_call_id"), &format!("messages[{i}].tool_call_id"))?;
                    match ids.iter().position(|x| *x == id) {
                        Some(k) => {
                            ids.remove(k);
                        }
                        None => {
                            return Err(format!(
                                "Invalid parameter: messages with role 'tool' must be a response to a preceeding \
                                 message with 'tool_calls'. (messages[{i}] answers {id})"
                            ));
                        }
                    }
                    if !matches!(t.get("content"), Some(Value::String(_)) | Some(Value::Array(_))) {
                        return Err(format!("messages[{i}].content: a string is required"));
                    }
                    i += 1;
                }
                if !ids.is_empty() {
                    return Err(format!(
                        "An assistant message with 'tool_calls' must be followed by tool messages responding to \
                         each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                        ids.join(", ")
                    ));
                }
            }
            other => return Err(format!("messages[{i}].role: invalid role {other:?}")),
        }
    }
    Ok(())
}
