//! The one HTTP provider, [`HttpProvider`], generic over a [`WireFormat`] (Anthropic's Messages API,
//! OpenAI's Chat Completions): one streamed POST, the endpoint and its client, bounded retries,
//! timeouts, and HTTP failures mapped to [`ProviderError`](super::ProviderError). What a request's
//! body holds, how its key travels and what an attempt's events mean is the wire format's.

use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::sync::mpsc::UnboundedSender;

use super::sse::{Event, Parser};
use crate::provider::{BoxFuture, Provider, ProviderConfig, ProviderError, Request, Response, StreamEvent};

/// Longest `retry-after` worth waiting for; a server asking for more is reported as unavailable.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
/// Longest exponential backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How much of an error body is read.
const MAX_ERROR_BODY: usize = 64 << 10;

/// Where the deltas go; remembers whether any went (after which nothing is retried).
pub struct Emitter {
    tx: UnboundedSender<StreamEvent>,
    streamed: bool,
}

impl Emitter {
    pub fn text(&mut self, text: &str) {
        if !text.is_empty() {
            self.streamed = true;
            let _ = self.tx.send(StreamEvent::TextDelta(text.to_owned()));
        }
    }

    pub fn thinking(&mut self, text: &str) {
        if !text.is_empty() {
            self.streamed = true;
            let _ = self.tx.send(StreamEvent::ThinkingDelta(text.to_owned()));
        }
    }

    pub fn tool_started(&mut self, id: &str, name: &str) {
        self.streamed = true;
        let _ = self.tx.send(StreamEvent::ToolCallStarted { id: id.to_owned(), name: name.to_owned() });
    }

    pub fn streamed(&self) -> bool {
        self.streamed
    }
}

/// How an attempt failed.
pub enum Fail {
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
pub trait Decoder {
    /// One event; `Some` once the answer is complete.
    fn event(&mut self, ev: &Event, out: &mut Emitter) -> Result<Option<Response>, Fail>;
    /// The stream ended without the answer being complete by [`Decoder::event`].
    fn end(&mut self, out: &mut Emitter) -> Result<Response, Fail>;
}

/// One request, as both providers make it.
struct Call<'a> {
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

/// What makes one HTTP API: where its requests go, the body it sends, how its key travels, and
/// the decoder of its events. [`HttpProvider`] does the rest (the POST, retries, timeouts, errors).
pub trait WireFormat: Send + Sync + Sized + 'static {
    /// Decodes the events of one attempt; a fresh one per attempt.
    type Decoder: Decoder + Default + Send;
    /// The provider's name (`anthropic`, `openai`), as [`Provider::name`] reports it and errors name it.
    const NAME: &'static str;
    /// Taken when `base_url` is empty.
    const DEFAULT_BASE_URL: &'static str;
    /// Taken when `api_key_env` is empty.
    const DEFAULT_API_KEY_ENV: &'static str;
    /// The request URL from the base (without a trailing slash).
    fn url(base: &str) -> String;
    /// The format's own settings, from the request URL.
    fn new(url: &str) -> Self;
    /// The JSON body sent for `req`; `max_tokens` is already resolved; `cfg` for the format's own options
    /// (thinking, reasoning effort).
    fn body(&self, cfg: &ProviderConfig, max_tokens: u32, req: &Request) -> serde_json::Value;
    /// How the key is sent.
    fn key_header(&self) -> KeyHeader;
    /// Headers every request carries besides the key and the content type.
    fn headers(&self) -> HeaderMap {
        HeaderMap::new()
    }
}

/// A model API reached over HTTP in the wire format `W`: the one [`Provider::stream`] both HTTP
/// providers share.
#[derive(Debug)]
pub struct HttpProvider<W> {
    pub(crate) http: Endpoint,
    pub(crate) wire: W,
}

impl<W: WireFormat> HttpProvider<W> {
    /// The model must be set; an empty `base_url` or `api_key_env` takes the format's default.
    pub fn new(cfg: ProviderConfig) -> Result<Self, ProviderError> {
        cfg.check()?;
        let http = Endpoint::new(cfg, W::NAME, W::DEFAULT_BASE_URL, W::DEFAULT_API_KEY_ENV, W::url)?;
        let wire = W::new(&http.url);
        Ok(HttpProvider { http, wire })
    }

    /// The JSON body sent for `req`.
    pub(crate) fn body(&self, req: &Request) -> serde_json::Value {
        let max_tokens = [req.max_tokens, self.http.cfg.max_tokens].into_iter().find(|&n| n > 0).unwrap_or(4096);
        self.wire.body(&self.http.cfg, max_tokens, req)
    }
}

impl<W: WireFormat> Provider for HttpProvider<W> {
    fn name(&self) -> &str {
        W::NAME
    }

    fn model(&self) -> &str {
        &self.http.cfg.model
    }

    /// Posts the body as JSON with the format's headers and the key (when its variable is set), and
    /// streams the answer through a fresh decoder per attempt.
    fn stream<'a>(
        &'a self,
        req: &'a Request,
        events: UnboundedSender<StreamEvent>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let http = &self.http;
            let key = api_key(&http.env_var);
            let mut headers = self.wire.headers();
            headers
                .insert(reqwest::header::CONTENT_TYPE, reqwest::header::HeaderValue::from_static("application/json"));
            if let Some(key) = &key {
                let key_header = self.wire.key_header();
                headers.insert(key_header.name, secret_header(&format!("{}{key}", key_header.prefix), &http.env_var)?);
            }
            let body = serde_json::to_vec(&self.body(req))
                .map_err(|e| ProviderError::Config { message: format!("cannot encode the request: {e}") })?;
            let call = Call {
                client: &http.client,
                cfg: &http.cfg,
                url: &http.url,
                env_var: &http.env_var,
                key,
                headers,
                body,
            };
            run(call, events, W::Decoder::default).await
        })
    }
}

/// Where a provider sends its requests, with which key, through which client.
pub(crate) struct Endpoint {
    pub(crate) cfg: ProviderConfig,
    pub(crate) url: String,
    pub(crate) env_var: String,
    pub(crate) client: reqwest::Client,
}

/// How a wire format sends the API key: the header's name and what comes before the key in it.
pub struct KeyHeader {
    pub name: reqwest::header::HeaderName,
    pub prefix: &'static str,
}

impl Endpoint {
    /// Resolves a provider's configuration: the model must be set; an empty `base_url` or
    /// `api_key_env` takes the provider's default; `path` makes the request URL from the base
    /// (without a trailing slash).
    fn new(
        cfg: ProviderConfig,
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
        let client = client(&cfg, &url)?;
        Ok(Endpoint { cfg, url, env_var, client })
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("model", &self.cfg.model)
            .field("url", &self.url)
            .field("api_key_env", &self.env_var)
            .finish_non_exhaustive()
    }
}

/// Builds the HTTP client for `url`. Loopback URLs (a local model server) bypass any proxy.
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
async fn run<D: Decoder>(
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
    let location = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).map(String::from);
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
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok());
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
