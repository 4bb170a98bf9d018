//! The one place that speaks to the `agent-client-protocol` SDK: start an agent in its own process group, connect
//! to it over its standard streams, send requests, and hand what it sends back as plain data ([`Incoming`]).
//! Requests and answers cross this file as `serde_json::Value` in the protocol's own wire shape (the ACP
//! specification is the stable contract; the SDK's Rust types changed at each major this year), so an upgrade of the
//! SDK touches this file only.
//!
//! Ordering, which the chat relies on: the SDK handles incoming messages one at a time, and a response is delivered
//! only after every message that arrived before it was handled. The handlers below only queue what they receive, so
//! when a request's answer is awaited, every update the agent sent before it is already in the queue: a marker pushed
//! after the answer ([`Connection::marker`]) comes after all of them.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Agent, Client, JsonRpcRequest, Lines};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::AgentSpec;
use crate::tools::Tools;
use crate::tools::command::{self, Process, Unstarted};

/// How long a stopping agent is given to exit by itself once its input closed, before it is asked to (`SIGTERM`).
pub const INPUT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// How long an agent that cannot be signalled on its own is given to write what it keeps before it is ended.
pub const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// What the agent sends, queued in the order it arrived.
pub enum Incoming {
    /// A `session/update`: the `update` object as the protocol carries it (`sessionUpdate` names its kind).
    Update { session_id: String, update: Value },
    /// A `session/request_permission` (its params as sent); `reply` takes the chosen option's id, `None` for
    /// "cancelled".
    Permission { request: Value, reply: oneshot::Sender<Option<String>> },
    /// A request of the client's services (`fs/read_text_file`, `fs/write_text_file`, `terminal/*`; its params as
    /// sent): `reply` takes the result's JSON, or why it failed.
    Service { method: &'static str, params: Value, reply: oneshot::Sender<Result<Value, ServiceError>> },
    /// Everything queued before this was handled (see the module's ordering note).
    Marker(oneshot::Sender<()>),
    /// The connection ended: the agent exited or closed its output. The text says how, with its last words.
    Closed(String),
}

/// Why a request of the client's services failed, as the agent is answered: the JSON-RPC error's code follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceError {
    /// `fs/read_text_file` of a file that does not exist (its path as the agent reads it): ACP's "Resource not found"
    /// (-32002), which the agents take for a new file (Qwen Code's write_file checks that code).
    NotFound(String),
    /// Any other failure, its message what the agent shows.
    Other(String),
}

impl From<String> for ServiceError {
    fn from(message: String) -> Self {
        ServiceError::Other(message)
    }
}

impl From<&str> for ServiceError {
    fn from(message: &str) -> Self {
        ServiceError::Other(message.to_string())
    }
}

/// A running agent: the SDK's connection to it and its process group.
pub struct Connection {
    cx: ConnectionTo<Agent>,
    queue: mpsc::UnboundedSender<Incoming>,
    /// The `initialize` answer, as sent.
    pub init: Value,
    pgid: Option<i32>,
    stderr: Arc<Mutex<Vec<String>>>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    /// Reaped when the connection goes (and killed, with its group).
    child: Mutex<Process>,
    /// In the sandbox with a network allowlist: the proxy the agent reaches its model through, serving while
    /// the agent runs.
    _proxy: Option<crate::sandbox::proxy::Running>,
    /// In the sandbox without namespaces: stopped by asking its waiter, which ends its whole domain.
    through_waiter: bool,
    /// The runtime it was started on: a stop begun from the editor's thread runs there.
    rt: tokio::runtime::Handle,
}

/// Agents being stopped now ([`Connection::stop_in_background`]): a new agent process waits for them before it
/// starts ([`stops_done`]), as it may read what they are still writing (Claude Code's own transcript, which
/// `session/load` and `session/fork` read), and the editor's exit waits for them ([`wait_stops`]). [`STOPPED`] is
/// notified when the count falls to 0: the waits end the moment the last stop does.
static STOPPING: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
static STOPPED: std::sync::Condvar = std::sync::Condvar::new();

/// Counts one stop under way in [`STOPPING`] while it lives (a stop that panics is not counted forever).
struct Stopping;

impl Stopping {
    fn begin() -> Stopping {
        *crate::agent::lock(&STOPPING) += 1;
        Stopping
    }
}

impl Drop for Stopping {
    fn drop(&mut self) {
        let mut n = crate::agent::lock(&STOPPING);
        *n = n.saturating_sub(1);
        if *n == 0 {
            STOPPED.notify_all();
        }
    }
}

/// Resolves when no agent is being stopped, or after `at_most` (the wait on a thread of the runtime's blocking
/// pool: a stop ends on another task, which this one must not hold up).
pub async fn stops_done(at_most: std::time::Duration) {
    if *crate::agent::lock(&STOPPING) == 0 {
        return;
    }
    let _ = tokio::task::spawn_blocking(move || wait_stops(at_most)).await;
}

/// Blocks until no agent is being stopped, or for `at_most` (the editor exits: its threads go with it).
pub fn wait_stops(at_most: std::time::Duration) {
    let n = crate::agent::lock(&STOPPING);
    let _ = STOPPED.wait_timeout_while(n, at_most, |n| *n > 0);
}

impl Connection {
    /// Starts the agent in the workspace, in a process group of its own, and does the `initialize` handshake.
    /// Each line of its standard error goes to `log` (the plugin's log file) after its name. With
    /// `spec.sandbox` on, the agent runs in the command sandbox of `tools` (its settings and the system's
    /// support), or does not start.
    pub async fn start(
        name: &str,
        spec: &AgentSpec,
        workspace: &Path,
        log: Option<&Path>,
        tools: &Tools,
    ) -> Result<(Connection, mpsc::UnboundedReceiver<Incoming>), String> {
        let mut cmd = tokio::process::Command::new(&spec.command);
        cmd.args(&spec.args).envs(&spec.env).current_dir(workspace).process_group(0).kill_on_drop(true);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = if spec.sandbox.enabled {
            if super::find_command(&spec.command).is_none() {
                return Err(super::spawn_error(name, spec, &std::io::ErrorKind::NotFound.into()));
            }
            // the agent's home: its own `env`'s when set there
            let home =
                spec.env.get("HOME").map(Into::into).or_else(|| std::env::var_os("HOME")).map(std::path::PathBuf::from);
            let writable: Vec<_> = spec.sandbox.writable.iter().map(|w| expand_home(w, home.as_deref())).collect();
            writable.iter().for_each(|w| make_missing(w));
            // Claude Code's shell keeps its files in /tmp/claude-<uid>, read-only here, unless told the private
            // $TMPDIR this way (it ignores TMPDIR for them)
            cmd.env("CLAUDE_CODE_TMPDIR", tools.command_temp_dir());
            tools
                .spawn_confined(cmd, &writable, &spec.sandbox.keep)
                .await
                .map_err(|e| format!("cannot start the agent {name} in the sandbox (agents.{name}.sandbox): {e}"))?
        } else {
            command::spawn(cmd, None, true).map_err(|e| match e {
                Unstarted::Spawn(e) => super::spawn_error(name, spec, &e),
                Unstarted::Proxy(e) => e,
            })?
        };
        let command::Started { process: mut child, proxy, through_waiter } = started;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        let (Some(stdin), Some((stdout, stderr))) = (child.take_stdin(), child.take_output()) else {
            command::end(pgid, through_waiter);
            return Err(format!("cannot open the standard streams of the agent {name}"));
        };
        let lines = Arc::new(Mutex::new(Vec::new()));
        crate::stderr_log::spawn_reader("acp", name, stderr, log, lines.clone());
        let (queue, rx) = mpsc::unbounded_channel();
        let (cx_tx, cx_rx) = oneshot::channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        spawn_connection(stdin, stdout, queue.clone(), cx_tx, stop_rx, lines.clone());
        let mut conn = Connection {
            cx: match cx_rx.await {
                Ok(cx) => cx,
                Err(_) => {
                    command::end(pgid, through_waiter);
                    return Err(with_stderr(format!("the agent {name} closed its connection at once"), &lines));
                }
            },
            queue,
            init: Value::Null,
            pgid,
            stderr: lines,
            stop: Mutex::new(Some(stop)),
            child: Mutex::new(child),
            _proxy: proxy,
            through_waiter,
            rt: tokio::runtime::Handle::current(),
        };
        let init = serde_json::json!({
            "protocolVersion": 1,
            "clientCapabilities": { "fs": { "readTextFile": reads_through_us(spec), "writeTextFile": true }, "terminal": true },
            "clientInfo": { "name": "pseudoclaude.nvim", "version": env!("CARGO_PKG_VERSION") },
        });
        match conn.request::<acp::InitializeRequest>(init).await {
            Ok(v) => conn.init = v,
            Err(e) => {
                // its last words on standard error say why more often than the handshake's error does
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                let exited = conn.child.lock().unwrap_or_else(|p| p.into_inner()).try_wait();
                let e = match exited {
                    Ok(Some(status)) => format!("the agent {name} exited ({status}) before answering `initialize`"),
                    _ => format!("the agent {name} did not answer `initialize`: {e}"),
                };
                return Err(with_stderr(e, &conn.stderr));
            }
        }
        Ok((conn, rx))
    }

    /// One request with its params in the protocol's shape; its result in the same shape.
    pub async fn request<Req>(&self, params: Value) -> Result<Value, String>
    where
        Req: JsonRpcRequest + serde::de::DeserializeOwned,
        Req::Response: serde::Serialize,
    {
        let req: Req = serde_json::from_value(params).map_err(|e| format!("cannot make the request: {e}"))?;
        let resp = self.cx.send_request(req).block_task().await.map_err(|e| describe(&e))?;
        serde_json::to_value(resp).map_err(|e| format!("cannot read the answer: {e}"))
    }

    pub async fn new_session(&self, cwd: &Path) -> Result<Value, String> {
        self.request::<acp::NewSessionRequest>(serde_json::json!({ "cwd": cwd, "mcpServers": [] })).await
    }

    pub async fn load_session(&self, id: &str, cwd: &Path) -> Result<Value, String> {
        let params = serde_json::json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
        self.request::<acp::LoadSessionRequest>(params).await
    }

    pub async fn resume_session(&self, id: &str, cwd: &Path) -> Result<Value, String> {
        let params = serde_json::json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
        self.request::<acp::ResumeSessionRequest>(params).await
    }

    /// `session/fork` (the agent's `sessionCapabilities.fork`): a new session of the agent with `id`'s history.
    pub async fn fork_session(&self, id: &str, cwd: &Path) -> Result<Value, String> {
        let params = serde_json::json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
        self.request::<acp::ForkSessionRequest>(params).await
    }

    pub async fn prompt(&self, id: &str, text: &str) -> Result<Value, String> {
        let params = serde_json::json!({ "sessionId": id, "prompt": [{ "type": "text", "text": text }] });
        self.request::<acp::PromptRequest>(params).await
    }

    pub async fn set_mode(&self, id: &str, mode: &str) -> Result<Value, String> {
        self.request::<acp::SetSessionModeRequest>(serde_json::json!({ "sessionId": id, "modeId": mode })).await
    }

    /// `session/set_config_option`: one of the session's options (its model) set to `value`.
    pub async fn set_config_option(&self, id: &str, option: &str, value: &str) -> Result<Value, String> {
        let params = serde_json::json!({ "sessionId": id, "configId": option, "value": value });
        self.request::<acp::SetSessionConfigOptionRequest>(params).await
    }

    /// `session/cancel`: the agent stops the turn and answers its `session/prompt` with `cancelled`.
    pub fn cancel(&self, id: &str) {
        if let Ok(n) = serde_json::from_value::<acp::CancelNotification>(serde_json::json!({ "sessionId": id })) {
            let _ = self.cx.send_notification(n);
        }
    }

    /// Resolves once everything the agent sent before this call was handled.
    pub async fn marker(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Incoming::Marker(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// The agent's last lines on standard error, for an error message.
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).join("\n")
    }

    /// Kills the agent and whatever it started, now (it dies mid-write: see [`Connection::shutdown`]).
    pub fn kill(&self) {
        command::end(self.pgid, self.through_waiter);
    }

    /// Ends the agent gracefully, as a terminal would end a program: its input closed, and when it does not exit
    /// within [`INPUT_WAIT`] (Claude Code's does not) a `SIGTERM` to its process group, so that it finishes writing
    /// its own record of the session (Claude Code flushes its transcript on a ~100 ms timer, and on `SIGTERM`);
    /// whatever is left of the group is killed once it all exited or `grace` passed. In the sandbox the agent
    /// itself may not get the signal (pid 1 of its namespace gets only the signals it handles; in the Landlock-only
    /// fallback only its waiter can be signalled, which ends the whole domain at once, so nothing is sent): there
    /// the grace is at most [`FLUSH_WAIT`], its time to write.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(());
        }
        let start = std::time::Instant::now();
        if self.wait_exit(start + INPUT_WAIT).await {
            return command::end(self.pgid, self.through_waiter);
        }
        if !self.through_waiter {
            command::terminate_group(self.pgid);
        }
        let plain = matches!(*self.child.lock().unwrap_or_else(|p| p.into_inner()), Process::Plain(_));
        let grace = if plain { grace } else { grace.min(FLUSH_WAIT) };
        self.wait_exit(start + grace).await;
        command::end(self.pgid, self.through_waiter);
    }

    /// Waits until the agent and every process of its group exited (Claude Code's adapter may exit before the
    /// Claude Code it runs, which writes the transcript), or until `deadline`; whether they did.
    async fn wait_exit(&self, deadline: std::time::Instant) -> bool {
        loop {
            let exited = matches!(self.child.lock().unwrap_or_else(|p| p.into_inner()).try_wait(), Ok(Some(_)));
            if exited && self.pgid.is_none_or(|g| !command::group_running(g)) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// [`Connection::shutdown`] on the runtime the agent was started on, without waiting for it (the chat closes,
    /// or another agent replaces it: the editor's loop never waits on an agent); counted in [`STOPPING`] until
    /// done.
    pub fn stop_in_background(self: Arc<Self>, grace: std::time::Duration) {
        let stopping = Stopping::begin();
        let rt = self.rt.clone();
        rt.spawn(async move {
            self.shutdown(grace).await;
            drop(stopping);
        });
    }

    pub fn pid(&self) -> Option<i32> {
        self.pgid
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(());
        }
        command::end(self.pgid, self.through_waiter);
    }
}

/// The SDK's connection on the agent's streams, driven on a task of its own until the agent closes its output or
/// the [`Connection`] goes. Its handlers only queue (never wait), so the agent's messages flow whatever the chat does.
fn spawn_connection(
    stdin: Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
    stdout: Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    queue: mpsc::UnboundedSender<Incoming>,
    cx_tx: oneshot::Sender<ConnectionTo<Agent>>,
    stop: oneshot::Receiver<()>,
    stderr: Arc<Mutex<Vec<String>>>,
) {
    let outgoing = futures::sink::unfold(stdin, |mut w, line: String| async move {
        w.write_all(line.as_bytes()).await?;
        w.write_all(b"\n").await?;
        w.flush().await?;
        Ok::<_, std::io::Error>(w)
    });
    let incoming = futures::stream::unfold(tokio::io::BufReader::new(stdout).lines(), |mut lines| async move {
        match lines.next_line().await {
            Ok(Some(l)) => Some((Ok(l), lines)),
            Ok(None) => None,
            Err(e) => Some((Err(e), lines)),
        }
    });
    let (updates, permissions, reads, writes, terminals, closed) =
        (queue.clone(), queue.clone(), queue.clone(), queue.clone(), queue.clone(), queue);
    let (outputs, waits, kills, releases) =
        (terminals.clone(), terminals.clone(), terminals.clone(), terminals.clone());
    let driver = Client
        .v1()
        .name("pseudoclaude")
        .on_receive_notification(
            async move |n: acp::SessionNotification, _cx| {
                let session_id = n.session_id.to_string();
                if let Ok(update) = serde_json::to_value(&n.update) {
                    let _ = updates.send(Incoming::Update { session_id, update });
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: acp::RequestPermissionRequest, responder, _cx| {
                let request = serde_json::to_value(&r).unwrap_or(Value::Null);
                let (reply, answer) = oneshot::channel();
                let _ = permissions.send(Incoming::Permission { request, reply });
                // answered later, off the dispatch loop: the user may take minutes
                tokio::spawn(async move {
                    let outcome = match answer.await.ok().flatten() {
                        Some(id) => serde_json::json!({ "outcome": "selected", "optionId": id }),
                        None => serde_json::json!({ "outcome": "cancelled" }),
                    };
                    match serde_json::from_value::<acp::RequestPermissionResponse>(
                        serde_json::json!({ "outcome": outcome }),
                    ) {
                        Ok(resp) => drop(responder.respond(resp)),
                        Err(e) => drop(responder.respond_with_internal_error(e)),
                    }
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::ReadTextFileRequest, responder, _cx| {
                let answer = ask(&reads, "fs/read_text_file", &r);
                // answered off the dispatch loop: a read may wait on the editor
                tokio::spawn(async move {
                    drop(responder.respond_with_result(answer_of::<acp::ReadTextFileResponse>(answer).await));
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::WriteTextFileRequest, responder, _cx| {
                let answer = ask(&writes, "fs/write_text_file", &r);
                tokio::spawn(async move {
                    drop(responder.respond_with_result(answer_of::<acp::WriteTextFileResponse>(answer).await));
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::CreateTerminalRequest, responder, _cx| {
                serve::<acp::CreateTerminalResponse, _>(ask(&terminals, "terminal/create", &r), responder);
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::TerminalOutputRequest, responder, _cx| {
                serve::<acp::TerminalOutputResponse, _>(ask(&outputs, "terminal/output", &r), responder);
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::WaitForTerminalExitRequest, responder, _cx| {
                // answered when the command ends, off the dispatch loop
                serve::<acp::WaitForTerminalExitResponse, _>(ask(&waits, "terminal/wait_for_exit", &r), responder);
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::KillTerminalRequest, responder, _cx| {
                serve::<acp::KillTerminalResponse, _>(ask(&kills, "terminal/kill", &r), responder);
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::ReleaseTerminalRequest, responder, _cx| {
                serve::<acp::ReleaseTerminalResponse, _>(ask(&releases, "terminal/release", &r), responder);
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(Lines::new(Box::pin(outgoing), Box::pin(incoming)), async move |cx: ConnectionTo<Agent>| {
            let _ = cx_tx.send(cx.clone());
            tokio::select! {
                _ = stop => {}
                _ = cx.incoming_closed() => {}
            }
            Ok(())
        });
    tokio::spawn(async move {
        let how = match driver.await {
            Ok(()) => "it closed its connection".to_string(),
            Err(e) => describe(&e),
        };
        // its last words arrive on standard error just after
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let _ = closed.send(Incoming::Closed(with_stderr(how, &stderr)));
    });
}

/// Queues a request of the agent for the chat; the receiver gets the chat's answer.
fn ask(
    queue: &mpsc::UnboundedSender<Incoming>,
    method: &'static str,
    request: &impl serde::Serialize,
) -> oneshot::Receiver<Result<Value, ServiceError>> {
    let params = serde_json::to_value(request).unwrap_or(Value::Null);
    let (reply, answer) = oneshot::channel();
    let _ = queue.send(Incoming::Service { method, params, reply });
    answer
}

/// Responds with the chat's answer once it comes, off the dispatch loop (a request may wait on the editor, or on a
/// command to end).
fn serve<T, P>(
    answer: oneshot::Receiver<Result<Value, ServiceError>>,
    responder: agent_client_protocol::Responder<T, P>,
) where
    T: serde::de::DeserializeOwned + agent_client_protocol::JsonRpcResponse + Send + 'static,
    P: agent_client_protocol::Protocol + Send + 'static,
{
    tokio::spawn(async move {
        drop(responder.respond_with_result(answer_of::<T>(answer).await));
    });
}

/// The chat's answer as the protocol's response `T`, or an error whose message is the chat's (what the agent shows):
/// a missing file's is ACP's "Resource not found" (-32002, the path in its data), any other the generic code.
async fn answer_of<T: serde::de::DeserializeOwned>(
    answer: oneshot::Receiver<Result<Value, ServiceError>>,
) -> Result<T, agent_client_protocol::Error> {
    let result = match answer.await {
        Ok(Ok(v)) => serde_json::from_value::<T>(v).map_err(|e| ServiceError::Other(e.to_string())),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ServiceError::Other("the chat was closed before it answered".to_string())),
    };
    result.map_err(|e| match e {
        ServiceError::NotFound(path) => agent_client_protocol::Error::new(
            agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND,
            format!("Resource not found: {path}"),
        )
        .data(serde_json::json!({ "uri": path })),
        ServiceError::Other(message) => {
            agent_client_protocol::Error::new(agent_client_protocol::ErrorCode::INTERNAL_ERROR, message)
        }
    })
}

/// Whether the agent is offered `fs/read_text_file` (the editor's buffer text, unsaved changes included):
/// `agents.NAME.fs_reads` when set, else every agent but Gemini CLI (0.61): its connection rejects a request with the
/// bare error object, in which its check for a missing file (`normalizeFileSystemError`: an `Error`'s message) never
/// finds one, so its write_file of a new file fails ("Error checking existing file"). It reads the disk itself then;
/// its writes still come to us. Known by its command line: `gemini`, or a word naming it (`npx @google/gemini-cli`, a
/// wrapper such as `nsenter … gemini --acp`); a wrapper of another name is said by `fs_reads = false`.
fn reads_through_us(spec: &AgentSpec) -> bool {
    let gemini =
        |w: &String| Path::new(w).file_name().is_some_and(|n| n == "gemini") || w.contains("@google/gemini-cli");
    spec.fs_reads.unwrap_or_else(|| !(gemini(&spec.command) || spec.args.iter().any(gemini)))
}

fn with_stderr(message: String, lines: &Mutex<Vec<String>>) -> String {
    let tail = lines.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
    let tail = tail.trim();
    if tail.is_empty() { message } else { format!("{message}; its standard error ended with:\n{tail}") }
}

/// An SDK error as one sentence: the agent's own message, and its data when it has some.
fn describe(e: &agent_client_protocol::Error) -> String {
    let v = serde_json::to_value(e).unwrap_or(Value::Null);
    let message = v.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string());
    match v.get("data") {
        Some(Value::Null) | None => message,
        Some(Value::String(d)) => format!("{message}: {d}"),
        Some(d) => format!("{message}: {d}"),
    }
}

/// Whether an error of [`Connection::request`] means the agent is gone (its connection closed).
pub fn is_closed_error(e: &str) -> bool {
    e.contains("incoming_transport_closed") || e.contains("connection_terminated") || e.contains("terminated")
}

/// Creates a writable path the agent has not made yet (its first run), as Landlock grants rights only on what
/// exists and the folder above it (the home folder) stays read-only: a `.json` name as a file holding `{}` (Claude
/// Code's `~/.claude.json`, which it then rewrites in place), any other as a folder. A failure leaves it missing;
/// the agent's own error then says what it could not write.
fn make_missing(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok() {
        return;
    }
    if path.extension().is_some_and(|e| e == "json") {
        let new = std::fs::OpenOptions::new().write(true).create_new(true).open(path);
        let _ = new.and_then(|mut f| std::io::Write::write_all(&mut f, b"{}"));
    } else {
        let _ = std::fs::create_dir_all(path);
    }
}

/// `~/x` beneath `home`; any other path as given.
fn expand_home(path: &str, home: Option<&Path>) -> std::path::PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => std::path::PathBuf::from(path),
    }
}
