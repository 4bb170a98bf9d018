//! MCP tools: the user's Model Context Protocol servers, started on the core's threads at the first chat,
//! their tools offered to the model as `mcp__SERVER__TOOL` (Claude Code's naming).
//!
//! [`Servers`] is shared by every agent of the editor's life: a server started once stays up (its process
//! group is killed when the last handle drops). A server that fails to start is `failed` with its error;
//! one that dies mid-call answers that call with an error result the model sees, and is started again at
//! the next call, at most [`MAX_RESTARTS`] times. `client.rs` is the only file that uses the `rmcp` SDK;
//! `result.rs` turns a `tools/call` result into what the model and the log get.

mod client;
mod result;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::provider::ToolSpec;
use client::{CallError, Client};
pub use result::{Blob, CallOutput, blob_mark};

/// `mcp.timeout`'s default, in seconds: the longest one call (or a server's start) may take.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
/// A server that died is started again at the next call this many times at most.
pub const MAX_RESTARTS: u32 = 3;
/// The prefix of every MCP tool's name as the model reads it.
pub const PREFIX: &str = "mcp__";

/// The `mcp` table of `setup()`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    pub servers: BTreeMap<String, ServerConfig>,
    /// Seconds.
    pub timeout: f64,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig { servers: BTreeMap::new(), timeout: DEFAULT_TIMEOUT_SECS }
    }
}

/// One stdio server: the command the editor runs, as `.mcp.json` and `setup()` spell it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Relative to the workspace; default the workspace.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

/// `approve.mcp.SERVER`: every tool of the server, or these.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ApproveTools {
    All(bool),
    Some(Vec<String>),
}

/// A server's tool, as it listed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Starting,
    Running,
    Failed,
    Stopped,
}

/// One row of `mcp.status()`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub name: String,
    pub state: State,
    pub tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

struct Slot {
    state: State,
    tools: Vec<ToolInfo>,
    error: Option<String>,
    client: Option<Arc<Client>>,
    restarts: u32,
}

struct Server {
    name: String,
    config: ServerConfig,
    slot: Mutex<Slot>,
    /// Bumped at each change of `slot.state`, so a waiter wakes when a start ends.
    changed: watch::Sender<u64>,
}

/// The configured servers. Cheap to share; every method is called from the core's threads.
pub struct Servers {
    servers: Vec<Arc<Server>>,
    timeout: Duration,
    workspace: PathBuf,
    approve: BTreeMap<String, ApproveTools>,
    rt: tokio::runtime::Handle,
}

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Servers").field("servers", &self.servers.len()).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Servers {
    /// The servers of `config`, not started yet ([`Servers::start`]).
    pub fn new(
        config: &McpConfig,
        approve: BTreeMap<String, ApproveTools>,
        workspace: &Path,
        rt: tokio::runtime::Handle,
    ) -> Servers {
        let servers = config
            .servers
            .iter()
            .map(|(name, cfg)| {
                Arc::new(Server {
                    name: name.clone(),
                    config: cfg.clone(),
                    slot: Mutex::new(Slot {
                        state: State::Stopped,
                        tools: Vec::new(),
                        error: None,
                        client: None,
                        restarts: 0,
                    }),
                    changed: watch::channel(0).0,
                })
            })
            .collect();
        let secs =
            if config.timeout.is_finite() && config.timeout > 0.0 { config.timeout } else { DEFAULT_TIMEOUT_SECS };
        Servers { servers, timeout: Duration::from_secs_f64(secs), workspace: workspace.to_path_buf(), approve, rt }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Starts every server not started yet, on the runtime's threads; returns at once.
    pub fn start(&self) {
        for s in &self.servers {
            if lock(&s.slot).state == State::Stopped && lock(&s.slot).client.is_none() && lock(&s.slot).error.is_none()
            {
                self.spawn_start(s.clone());
            }
        }
    }

    fn spawn_start(&self, s: Arc<Server>) {
        set_state(&s, |slot| {
            slot.state = State::Starting;
            slot.error = None;
        });
        let workspace = self.workspace.clone();
        let timeout = self.timeout;
        self.rt.spawn(async move {
            let started = tokio::time::timeout(timeout, async {
                let client = Client::start(&s.config, &workspace).await?;
                match client.list_tools().await {
                    Ok(tools) => Ok((client, tools)),
                    Err(e) => Err(with_stderr(e, &client.stderr_tail())),
                }
            })
            .await
            .unwrap_or_else(|_| Err(format!("did not finish starting within {} s", timeout.as_secs_f64())));
            set_state(&s, |slot| match started {
                Ok((client, tools)) => {
                    slot.state = State::Running;
                    slot.tools = tools;
                    slot.client = Some(Arc::new(client));
                }
                Err(e) => {
                    slot.state = State::Failed;
                    slot.error = Some(e);
                    slot.client = None;
                }
            });
        });
    }

    /// Waits until no server is starting (each start is bounded by the timeout).
    pub async fn settled(&self) {
        for s in &self.servers {
            let mut rx = s.changed.subscribe();
            while lock(&s.slot).state == State::Starting {
                if rx.changed().await.is_err() {
                    break;
                }
            }
        }
    }

    /// The tools of the running servers, as the model reads them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut out = Vec::new();
        for s in &self.servers {
            let slot = lock(&s.slot);
            for t in &slot.tools {
                out.push(ToolSpec {
                    name: tool_name(&s.name, &t.name),
                    description: t.description.clone(),
                    input_schema: t.input_schema.clone(),
                });
            }
        }
        out
    }

    /// Each server's state, tools and last error.
    pub fn status(&self) -> Vec<Status> {
        self.servers
            .iter()
            .map(|s| {
                let slot = lock(&s.slot);
                Status {
                    name: s.name.clone(),
                    state: slot.state,
                    tools: slot.tools.iter().map(|t| t.name.clone()).collect(),
                    error: slot.error.clone(),
                }
            })
            .collect()
    }

    /// The server and tool a model's tool name means, if it names a configured server.
    pub fn resolve(&self, name: &str) -> Option<(String, String)> {
        let rest = name.strip_prefix(PREFIX)?;
        self.servers.iter().find_map(|s| {
            let tool = rest.strip_prefix(s.name.as_str())?.strip_prefix("__")?;
            Some((s.name.clone(), tool.to_string()))
        })
    }

    /// Whether `approve.mcp` lets this tool run without asking.
    pub fn auto_approved(&self, server: &str, tool: &str) -> bool {
        match self.approve.get(server) {
            Some(ApproveTools::All(b)) => *b,
            Some(ApproveTools::Some(list)) => list.iter().any(|t| t == tool),
            None => false,
        }
    }

    /// One call. Never fails: a dead, failed or slow server is an error output the model reads. Cancel by
    /// dropping the future (the server is told).
    pub async fn call(&self, server: &str, tool: &str, arguments: serde_json::Value) -> CallOutput {
        let Some(s) = self.servers.iter().find(|s| s.name == server) else {
            return CallOutput::error(format!("there is no MCP server {server:?}"));
        };
        let client = match self.client_for(s).await {
            Ok(c) => c,
            Err(e) => return CallOutput::error(e),
        };
        if !lock(&s.slot).tools.iter().any(|t| t.name == tool) {
            return CallOutput::error(format!("the MCP server {server:?} has no tool {tool:?}"));
        }
        match tokio::time::timeout(self.timeout, client.call(tool, arguments)).await {
            Err(_) => CallOutput::error(format!(
                "the MCP server {server:?} did not answer {tool} within {} s (mcp.timeout); the call was cancelled",
                self.timeout.as_secs_f64()
            )),
            Ok(Ok(value)) => result::decode(&value),
            Ok(Err(CallError::Refused(e))) => {
                CallOutput::error(format!("the MCP server {server:?} refused {tool}: {e}"))
            }
            Ok(Err(CallError::Died(e))) => {
                let tail = client.stderr_tail();
                let msg = with_stderr(format!("the MCP server {server:?} stopped during the call ({e})"), &tail);
                set_state(s, |slot| {
                    if slot.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, &client)) {
                        slot.state = State::Stopped;
                        slot.client = None;
                        slot.error = Some(msg.clone());
                    }
                });
                CallOutput::error(format!("{msg}; it will be restarted at the next call"))
            }
        }
    }

    /// The server's running client; one that died is started again (at most [`MAX_RESTARTS`] times).
    async fn client_for(&self, s: &Arc<Server>) -> Result<Arc<Client>, String> {
        self.settled_one(s).await;
        let restart = {
            let mut slot = lock(&s.slot);
            if let Some(c) = slot.client.clone() {
                if !c.is_closed() {
                    return Ok(c);
                }
                slot.client = None;
                slot.state = State::Stopped;
                slot.error = Some(with_stderr("the server exited".into(), &c.stderr_tail()));
            }
            if slot.restarts >= MAX_RESTARTS {
                return Err(format!(
                    "the MCP server {:?} is not running and was restarted {MAX_RESTARTS} times already: {}",
                    s.name,
                    slot.error.clone().unwrap_or_default()
                ));
            }
            slot.restarts += 1;
            true
        };
        if restart {
            self.spawn_start(s.clone());
            self.settled_one(s).await;
        }
        let slot = lock(&s.slot);
        slot.client.clone().ok_or_else(|| {
            format!("the MCP server {:?} could not be started: {}", s.name, slot.error.clone().unwrap_or_default())
        })
    }

    async fn settled_one(&self, s: &Arc<Server>) {
        let mut rx = s.changed.subscribe();
        while lock(&s.slot).state == State::Starting {
            if rx.changed().await.is_err() {
                break;
            }
        }
    }
}

fn set_state(s: &Server, f: impl FnOnce(&mut Slot)) {
    f(&mut lock(&s.slot));
    s.changed.send_modify(|n| *n += 1);
}

fn with_stderr(msg: String, tail: &str) -> String {
    if tail.trim().is_empty() { msg } else { format!("{msg}; its standard error ended with:\n{tail}") }
}

/// `mcp__SERVER__TOOL`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{server}__{tool}")
}
