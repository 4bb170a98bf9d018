//! The one place that speaks to the `rmcp` SDK (with `http.rs`, its HTTP requests): start a stdio server or
//! connect to a streamable-HTTP one, list its tools, call one. Everything else in the crate sees plain data
//! ([`ToolInfo`], `serde_json::Value` results), so an upgrade of the SDK touches these files only.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RoleClient, RunningService};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport as RmcpTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::AsyncBufReadExt;

use super::{ServerConfig, ToolInfo, Transport};

/// How long a server whose standard output is not JSON-RPC gets to start answering in JSON-RPC after all.
const GARBAGE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The server's `notifications/tools/list_changed`, counted as they arrive on the transport. Seen there, in
/// the order the server sent them: the SDK runs its notification handlers on tasks of their own, so a handler
/// could see the notice after the answer to the call that caused it, and the model's next request would still
/// offer the old tools.
#[derive(Default, Clone)]
pub(super) struct Notices {
    pub(super) tool_changes: Arc<AtomicU64>,
    /// `notifications/resources/list_changed`, counted the same way.
    pub(super) resource_changes: Arc<AtomicU64>,
    pub(super) tools_changed: Arc<tokio::sync::Notify>,
}

/// A transport that notes the notices it carries ([`Notices`]).
struct Watched<T> {
    inner: T,
    notices: Notices,
}

impl<T: RmcpTransport<RoleClient>> RmcpTransport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let msg = self.inner.receive().await;
        if let Some(JsonRpcMessage::Notification(n)) = &msg
            && matches!(n.notification, ServerNotification::ToolListChangedNotification(_))
        {
            self.notices.tool_changes.fetch_add(1, Ordering::SeqCst);
            self.notices.tools_changed.notify_one();
        }
        if let Some(JsonRpcMessage::Notification(n)) = &msg
            && matches!(n.notification, ServerNotification::ResourceListChangedNotification(_))
        {
            self.notices.resource_changes.fetch_add(1, Ordering::SeqCst);
            self.notices.tools_changed.notify_one();
        }
        msg
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// A running server: the SDK's session with it and its process group.
pub(super) struct Client {
    service: RunningService<RoleClient, ()>,
    pub(super) notices: Notices,
    /// Of `notices.tool_changes`, how many the server's tool list reflects; held while listing again.
    pub(super) tools_listed: tokio::sync::Mutex<u64>,
    /// The same for `notices.resource_changes`.
    pub(super) resources_listed: tokio::sync::Mutex<u64>,
    /// The server's process id, which is also its process group's (it is started as a group leader).
    pgid: Option<i32>,
    pub(super) stderr: Arc<Mutex<Vec<String>>>,
    /// Reaped when the client goes (and killed, with its group); none for an HTTP server.
    _child: Option<tokio::process::Child>,
}

/// The server's standard output as the SDK reads it, each line passed on as it is; the first line that is not
/// JSON is told to `garbage`.
fn tap_stdout(
    stdout: tokio::process::ChildStdout,
    garbage: tokio::sync::watch::Sender<Option<String>>,
) -> tokio::io::DuplexStream {
    let (mut to_sdk, sdk_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let mut reader = tokio::io::BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_ascii();
            if !text.is_empty()
                && garbage.borrow().is_none()
                && serde_json::from_slice::<serde_json::Value>(text).is_err()
            {
                let shown: String = String::from_utf8_lossy(text).chars().take(200).collect();
                garbage.send_replace(Some(shown));
            }
            if to_sdk.write_all(&line).await.is_err() {
                break;
            }
        }
        let _ = to_sdk.shutdown().await;
    });
    sdk_side
}

impl Client {
    /// Starts (stdio) or reaches (HTTP) the server and does the MCP handshake (protocol version
    /// negotiation is the SDK's). See [`Client::spawn`] for a stdio server's standard streams.
    pub(super) async fn start(
        name: &str,
        cfg: &ServerConfig,
        workspace: &std::path::Path,
        log: Option<&std::path::Path>,
    ) -> Result<Client, String> {
        match cfg.transport()? {
            Transport::Stdio => Client::spawn(name, cfg, workspace, log).await,
            Transport::Http { url, headers } => Client::connect(url, headers).await,
        }
    }

    /// A streamable-HTTP server: nothing to start, the handshake is the first POST.
    async fn connect(url: String, headers: Vec<(String, String)>) -> Result<Client, String> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut map = std::collections::HashMap::new();
        for (name, value) in headers {
            let n = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a valid HTTP header name"))?;
            let v = reqwest::header::HeaderValue::from_str(&value)
                .map_err(|_| format!("the value of the header {name:?} is not a valid HTTP header value"))?;
            map.insert(n, v);
        }
        // A server restarted on its port has forgotten our session: the transport starts a new one (404).
        let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
            .custom_headers(map)
            .reinit_on_expired_session(true);
        let transport = StreamableHttpClientTransport::with_client(super::http::Http::new()?, config);
        let notices = Notices::default();
        let transport = Watched { inner: transport, notices: notices.clone() };
        match ().serve(transport).await {
            Ok(service) => Ok(Client::new(service, notices, None, Arc::new(Mutex::new(Vec::new())), None)),
            // The SDK's message wraps the cause in its transport's type names: the cause is what the user needs.
            Err(e) => Err(format!("the MCP handshake with {url} failed: {}", root_cause(&e))),
        }
    }

    /// Spawns the server in its own process group. Each line of its standard error goes to `log` (the
    /// plugin's log file) after `name`, as it comes. A server whose standard output is not JSON-RPC fails its
    /// start [`GARBAGE_GRACE`] after the first such line, with that line in the error (the SDK would ignore it
    /// and wait for the whole `mcp.timeout`).
    async fn spawn(
        name: &str,
        cfg: &ServerConfig,
        workspace: &std::path::Path,
        log: Option<&std::path::Path>,
    ) -> Result<Client, String> {
        let mut cmd = tokio::process::Command::new(&cfg.command);
        cmd.args(&cfg.args).envs(&cfg.env).process_group(0).kill_on_drop(true);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.current_dir(match &cfg.cwd {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => workspace.join(d),
            None => workspace.to_path_buf(),
        });
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {:?}: {e}", cfg.command))?;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            kill_group(pgid);
            return Err("cannot open the server's standard input and output".into());
        };
        let lines = Arc::new(Mutex::new(Vec::new()));
        crate::stderr_log::spawn_reader("mcp", name, stderr, log, lines.clone());
        let (garbage_tx, mut garbage) = tokio::sync::watch::channel(None::<String>);
        let reader = tap_stdout(stdout, garbage_tx);
        let notices = Notices::default();
        let transport = Watched { inner: AsyncRwTransport::new_client(reader, stdin), notices: notices.clone() };
        let handshake = ().serve(transport);
        tokio::pin!(handshake);
        let served = tokio::select! {
            r = &mut handshake => r.map_err(|e| format!("the MCP handshake failed: {e}")),
            line = async {
                let _ = garbage.wait_for(Option::is_some).await;
                tokio::time::sleep(GARBAGE_GRACE).await;
                garbage.borrow().clone().unwrap_or_default()
            } => Err(format!("it answered what is not MCP (JSON-RPC) on its standard output: {line:?}")),
        };
        match served {
            Ok(service) => Ok(Client::new(service, notices, pgid, lines, Some(child))),
            Err(e) => {
                // The last words on its standard error say why, more often than the handshake's error does.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                let e = match child.try_wait() {
                    Ok(Some(status)) => format!("it exited ({status}) before answering the MCP handshake"),
                    _ => e,
                };
                kill_group(pgid);
                let tail = lines.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
                Err(super::with_stderr(e, &tail))
            }
        }
    }

    fn new(
        service: RunningService<RoleClient, ()>,
        notices: Notices,
        pgid: Option<i32>,
        stderr: Arc<Mutex<Vec<String>>>,
        child: Option<tokio::process::Child>,
    ) -> Client {
        Client {
            service,
            notices,
            tools_listed: tokio::sync::Mutex::new(0),
            resources_listed: tokio::sync::Mutex::new(0),
            pgid,
            stderr,
            _child: child,
        }
    }

    /// How many times the server said its tools changed.
    pub(super) fn tool_changes(&self) -> u64 {
        self.notices.tool_changes.load(Ordering::SeqCst)
    }

    pub(super) async fn list_tools(&self) -> Result<Vec<ToolInfo>, String> {
        let tools = self.service.list_all_tools().await.map_err(|e| format!("tools/list failed: {e}"))?;
        Ok(tools
            .into_iter()
            .map(|t| ToolInfo {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    /// Whether the server offers resources (its `resources` capability).
    pub(super) fn has_resources(&self) -> bool {
        self.service.peer().peer_info().is_some_and(|i| i.capabilities.resources.is_some())
    }

    /// `resources/list`, every page; plain data.
    pub(super) async fn list_resources(&self) -> Result<Vec<super::ResourceInfo>, String> {
        let list = self.service.list_all_resources().await.map_err(|e| format!("resources/list failed: {e}"))?;
        let str_of = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        Ok(list
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .filter_map(|v| {
                Some(super::ResourceInfo {
                    uri: str_of(&v, "uri")?,
                    name: str_of(&v, "name").unwrap_or_default(),
                    description: str_of(&v, "description"),
                    mime_type: str_of(&v, "mimeType"),
                })
            })
            .collect())
    }

    /// `resources/read`: the contents as the protocol's JSON (`[{uri, mimeType, text|blob}]`).
    pub(super) async fn read_resource(&self, uri: &str) -> Result<Vec<serde_json::Value>, String> {
        let params = rmcp::model::ReadResourceRequestParams::new(uri.to_string());
        match self.service.read_resource(params).await {
            Ok(r) => {
                let v = serde_json::to_value(&r).map_err(|e| e.to_string())?;
                Ok(v.get("contents").and_then(|c| c.as_array()).cloned().unwrap_or_default())
            }
            Err(rmcp::ServiceError::McpError(e)) => Err(format!("{} (code {})", e.message, e.code.0)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// How many times the server said its resources changed.
    pub(super) fn resource_changes(&self) -> u64 {
        self.notices.resource_changes.load(Ordering::SeqCst)
    }

    /// One `tools/call`; the result as the protocol's JSON. Dropping the future sends
    /// `notifications/cancelled` (the SDK's cancel-on-drop request).
    pub(super) async fn call(&self, tool: &str, arguments: serde_json::Value) -> Result<serde_json::Value, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match arguments {
            serde_json::Value::Object(m) => Some(m),
            serde_json::Value::Null => None,
            other => return Err(CallError::Refused(format!("the arguments must be a JSON object, not {other}"))),
        };
        match self.service.call_tool(params).await {
            Ok(r) => serde_json::to_value(&r).map_err(|e| CallError::Refused(e.to_string())),
            Err(rmcp::ServiceError::McpError(e)) => {
                Err(CallError::Refused(format!("{} (code {})", e.message, e.code.0)))
            }
            Err(rmcp::ServiceError::TransportClosed) | Err(rmcp::ServiceError::TransportSend(_)) => {
                Err(CallError::Died("the connection closed".into()))
            }
            Err(e) => Err(CallError::Refused(e.to_string())),
        }
    }

    /// Kills the server and whatever it started, now (a call under way gets "the connection closed").
    pub(super) fn kill(&self) {
        kill_group(self.pgid);
    }

    pub(super) fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    pub(super) fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).join("\n")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        kill_group(self.pgid);
    }
}

/// Why a call failed.
pub(super) enum CallError {
    /// The server answered with an error, or the request could not be made.
    Refused(String),
    /// The server is gone.
    Died(String),
}

/// The innermost error of a chain (`Connection refused (os error 111)`, `HTTP 401 Unauthorized: ...`).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// The server and whatever it started: a server run through `npx` or `uvx` is a tree of processes.
fn kill_group(pgid: Option<i32>) {
    if let Some(p) = pgid.filter(|&p| p > 1) {
        // SAFETY: a plain kill(2) of a process group we created.
        unsafe {
            libc::kill(-p, libc::SIGKILL);
        }
    }
}
