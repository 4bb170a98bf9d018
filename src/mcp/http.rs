//! The streamable-HTTP transport's HTTP requests, made with the crate's one HTTP client (`reqwest` 0.12,
//! rustls, the providers' stack).
//!
//! `rmcp` keeps the protocol (sessions, the SSE streams, reconnection, `Mcp-Session-Id`,
//! `MCP-Protocol-Version`) and asks an implementation of its `StreamableHttpClient` trait for the three
//! HTTP exchanges: POST a message, GET the server's stream, DELETE the session. Its own implementation is
//! for `reqwest` 0.13: enabling it would build a second reqwest, hyper client and TLS root store
//! (rustls-platform-verifier) beside ours and need a process-wide rustls crypto provider installed from
//! inside Neovim; these hundred lines do it over the client we already have.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

const SESSION_ID: &str = "Mcp-Session-Id";
const LAST_EVENT_ID: &str = "Last-Event-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";
/// A JSON answer larger than this is refused (rmcp's own limit): a server gone wrong must not fill memory.
const MAX_JSON_BYTES: usize = 16 * 1024 * 1024;
/// Of an HTTP error's body, this much goes into the error message.
const ERROR_BODY_BYTES: usize = 2048;

type Error = StreamableHttpError<reqwest::Error>;

/// `reqwest::Client` as rmcp's HTTP client (a newtype: both are foreign to this crate).
#[derive(Clone)]
pub(super) struct Http(pub(super) reqwest::Client);

impl Http {
    pub(super) fn new() -> Result<Http, String> {
        reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(30))
            .build()
            .map(Http)
            .map_err(|e| format!("cannot make an HTTP client: {e}"))
    }

    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session_id: Option<&str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let mut req = self.0.request(method, uri).header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        for (name, value) in headers {
            req = req.header(name, value);
        }
        if let Some(token) = auth {
            req = req.bearer_auth(token);
        }
        if let Some(id) = session_id {
            req = req.header(SESSION_ID, id);
        }
        req
    }
}

/// Whether a `Content-Type` is `expected`, whatever its case and parameters (`; charset=utf-8`).
fn media_type_is(value: Option<&HeaderValue>, expected: &str) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

fn sse(response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
    SseStream::from_bytes_stream(response.bytes_stream()).boxed()
}

async fn read_body(response: reqwest::Response, max: usize) -> Result<Vec<u8>, Error> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if body.len() + chunk.len() > max {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An HTTP error as one line: its status and the start of its body.
async fn status_error(response: reqwest::Response) -> Error {
    let status = response.status();
    let body = read_body(response, 1 << 20).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]).trim().replace('\n', " ");
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }))
}

impl StreamableHttpClient for Http {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let body = serde_json::to_vec(&message)?;
        let response = self
            .request(reqwest::Method::POST, &uri, session_id.as_deref(), auth, headers)
            .header(CONTENT_TYPE, JSON)
            .body(body)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        let new_session = response.headers().get(SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_string);
        if !status.is_success() {
            // A JSON-RPC error sent with an HTTP error status is still the server's answer to the request.
            if media_type_is(content_type.as_ref(), JSON) {
                let body = read_body(response, MAX_JSON_BYTES).await?;
                if let Ok(msg @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&body) {
                    return Ok(StreamableHttpPostResponse::Json(msg, new_session));
                }
                let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]).into_owned();
                return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                    "HTTP {status}: {text}"
                ))));
            }
            return Err(status_error(response).await);
        }
        if media_type_is(content_type.as_ref(), EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(sse(response), new_session));
        }
        if media_type_is(content_type.as_ref(), JSON) {
            let body = read_body(response, MAX_JSON_BYTES).await?;
            return match serde_json::from_slice(&body) {
                Ok(msg) => Ok(StreamableHttpPostResponse::Json(msg, new_session)),
                // Some servers answer a notification with 200 and a body nobody needs.
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(e.into()),
            };
        }
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            content_type.map(|c| String::from_utf8_lossy(c.as_bytes()).into_owned()),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let response = self
            .request(reqwest::Method::DELETE, &uri, Some(&session_id), auth, headers)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        // 405: the server keeps its sessions itself.
        if response.status().is_success() || response.status() == StatusCode::METHOD_NOT_ALLOWED {
            Ok(())
        } else {
            Err(status_error(response).await)
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let mut req = self.request(reqwest::Method::GET, &uri, session_id.as_deref(), auth, headers);
        if let Some(id) = last_event_id {
            req = req.header(LAST_EVENT_ID, id);
        }
        let response = req.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !response.status().is_success() {
            return Err(status_error(response).await);
        }
        let content_type = response.headers().get(CONTENT_TYPE);
        if !media_type_is(content_type, EVENT_STREAM) && !media_type_is(content_type, JSON) {
            return Err(StreamableHttpError::UnexpectedContentType(
                content_type.map(|c| String::from_utf8_lossy(c.as_bytes()).into_owned()),
            ));
        }
        Ok(sse(response))
    }
}
