//! MCP tools: the user's Model Context Protocol servers, started on the core's threads at the first chat,
//! their tools offered to the model as `mcp__SERVER__TOOL` (Claude Code's naming).
//!
//! [`Servers`] is shared by every agent of the editor's life: a server started once stays up (its process
//! group is killed when the last handle drops). A server that fails to start is `failed` with its error;
//! one that dies mid-call answers that call with an error result the model sees, and is started again at
//! the next call, at most [`MAX_RESTARTS`] times.
//!
//! This file holds the servers and each one's state; the rest by concern: `config.rs` the settings and the
//! `${VAR}` expansion, `start.rs` a server's start and restart, `consent.rs` the question before a server of the
//! workspace's `.mcp.json` runs (`workspace.rs` its files), `names.rs` the tools' names as the model reads them,
//! `resource.rs` the resources, `call.rs` the timed call. `client.rs` is the only file that uses the `rmcp` SDK
//! (`http.rs` its HTTP transport); `result.rs` turns a `tools/call` result into what the model and the log get.

mod call;
mod client;
mod config;
mod consent;
mod http;
mod names;
mod resource;
mod result;
mod start;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;

use client::Client;
pub(crate) use config::Transport;
pub use config::{ApproveTools, DEFAULT_TIMEOUT_SECS, McpConfig, ServerConfig, expand_env, valid_name};
pub use consent::ConsentAsk;
use consent::{Asker, ask};
pub use names::{MAX_TOOL_NAME, PREFIX, model_names, tool_name};
pub use resource::{ResourceInfo, ServerResource, resource_text};
pub use result::{Blob, CallOutput, blob_mark};
pub use start::MAX_RESTARTS;
use start::{one_line, spawn_start, with_stderr};

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
    /// A server of the workspace's `.mcp.json` the user has not said yes to (for this definition).
    AwaitingConsent,
}

/// One row of `mcp.status()`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub name: String,
    pub state: State,
    pub tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `workspace`: from the workspace's `.mcp.json`; `setup`: from `setup()`.
    pub source: &'static str,
}

struct Slot {
    state: State,
    tools: Vec<ToolInfo>,
    resources: Vec<ResourceInfo>,
    error: Option<String>,
    client: Option<Arc<Client>>,
    restarts: u32,
    /// Awaiting consent with the question on screen: a first chat waits for the answer.
    asking: bool,
    /// The user said no (for this definition).
    declined: bool,
    /// The failure in `error` was said in the chat already.
    reported: bool,
}

struct Server {
    name: String,
    /// None for a `.mcp.json` entry that cannot be used (`slot.error` says why).
    config: Option<ServerConfig>,
    /// From the workspace's `.mcp.json`: started only with the user's consent.
    entry: Option<workspace::Entry>,
    slot: Mutex<Slot>,
    /// Bumped at each change of any server's `slot.state`, so a waiter wakes when a start ends.
    changed: Arc<watch::Sender<u64>>,
}

/// What a start needs, cloned into the tasks that start servers.
#[derive(Clone)]
struct Ctx {
    timeout: Duration,
    workspace: PathBuf,
    log_file: Option<PathBuf>,
    rt: tokio::runtime::Handle,
    changed: Arc<watch::Sender<u64>>,
}

/// The configured servers. Cheap to share; every method is called from the core's threads (`status`,
/// `answer` and `ask_again` also from the editor's: they read or write two small files, never wait on a server).
pub struct Servers {
    servers: Arc<Mutex<Vec<Arc<Server>>>>,
    ctx: Ctx,
    approve: BTreeMap<String, ApproveTools>,
    consent_key: Option<PathBuf>,
    /// `.mcp.json` was read (its servers are in `servers`).
    loaded: Arc<std::sync::atomic::AtomicBool>,
    /// Held while `.mcp.json` is read or an answer written: one reader, one writer.
    files: Arc<Mutex<()>>,
    started: std::sync::atomic::AtomicBool,
    /// The start has started (or asked about) every server of `.mcp.json`: until then a first chat waits.
    launched: Arc<std::sync::atomic::AtomicBool>,
    asker: Arc<Mutex<Option<Asker>>>,
}

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Servers").field("servers", &lock(&self.servers).len()).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn new_slot(state: State, error: Option<String>) -> Mutex<Slot> {
    Mutex::new(Slot {
        state,
        tools: Vec::new(),
        resources: Vec::new(),
        error,
        client: None,
        restarts: 0,
        asking: false,
        declined: false,
        reported: false,
    })
}

impl Servers {
    /// The servers of `config`, not started yet ([`Servers::start`]); those of the workspace's `.mcp.json` are
    /// read at the start (or by [`Servers::status`]).
    pub fn new(
        config: &McpConfig,
        approve: BTreeMap<String, ApproveTools>,
        workspace: &Path,
        rt: tokio::runtime::Handle,
    ) -> Servers {
        let changed = Arc::new(watch::channel(0).0);
        let servers = config
            .servers
            .iter()
            .map(|(name, cfg)| {
                Arc::new(Server {
                    name: name.clone(),
                    config: Some(cfg.clone()),
                    entry: None,
                    slot: new_slot(State::Stopped, None),
                    changed: changed.clone(),
                })
            })
            .collect();
        let secs =
            if config.timeout.is_finite() && config.timeout > 0.0 { config.timeout } else { DEFAULT_TIMEOUT_SECS };
        Servers {
            servers: Arc::new(Mutex::new(servers)),
            ctx: Ctx {
                timeout: Duration::from_secs_f64(secs),
                workspace: workspace.to_path_buf(),
                log_file: config.log_file.clone(),
                rt,
                changed,
            },
            approve,
            consent_key: config.consent_key.clone(),
            loaded: Arc::default(),
            files: Arc::default(),
            started: Default::default(),
            launched: Arc::default(),
            asker: Arc::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        lock(&self.servers).is_empty() && self.loaded.load(Ordering::SeqCst)
    }

    /// Who asks the user about a server of `.mcp.json` (the editor's outbox). Without one, such a server stays
    /// awaiting consent and nothing waits for it.
    pub fn on_consent(&self, ask: impl Fn(ConsentAsk) + Send + Sync + 'static) {
        *lock(&self.asker) = Some(Arc::new(ask));
    }

    fn all(&self) -> Vec<Arc<Server>> {
        lock(&self.servers).clone()
    }

    /// Starts every server not started yet, on the runtime's threads; returns at once. The workspace's
    /// `.mcp.json` is read there too: a server the user agreed to starts, one not answered about is asked about.
    pub fn start(&self) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        for s in self.all() {
            if s.entry.is_none() && lock(&s.slot).state == State::Stopped {
                spawn_start(&self.ctx, s);
            }
        }
        let load = self.loader();
        let ctx = self.ctx.clone();
        let asker = self.asker.clone();
        let servers = self.servers.clone();
        let launched = self.launched.clone();
        self.ctx.rt.spawn_blocking(move || {
            load.load(); // or read before, by a status
            let workspace_servers: Vec<_> = lock(&servers).iter().filter(|s| s.entry.is_some()).cloned().collect();
            for s in workspace_servers {
                let (state, declined) = {
                    let slot = lock(&s.slot);
                    (slot.state, slot.declined)
                };
                match state {
                    State::Stopped if !declined && s.config.is_some() => spawn_start(&ctx, s),
                    State::AwaitingConsent => ask(&asker, &ctx, &s),
                    _ => {}
                }
            }
            launched.store(true, Ordering::SeqCst);
            ctx.changed.send_modify(|n| *n += 1);
        });
    }

    /// Waits until no server is starting or asked about (each start is bounded by the timeout; a question by
    /// the user).
    pub async fn settled(&self) {
        let mut rx = self.ctx.changed.subscribe();
        loop {
            let pending = (self.started.load(Ordering::SeqCst) && !self.launched.load(Ordering::SeqCst))
                || self.all().iter().any(|s| {
                    let slot = lock(&s.slot);
                    slot.state == State::Starting || (slot.state == State::AwaitingConsent && slot.asking)
                });
            if !pending || rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Whether a question about a server of `.mcp.json` is on screen, unanswered (a first chat waits for it).
    pub fn asking(&self) -> bool {
        self.all().iter().any(|s| {
            let slot = lock(&s.slot);
            slot.state == State::AwaitingConsent && slot.asking
        })
    }

    /// The failures not said yet, a sentence each, for the chat (each is said once).
    pub fn take_notices(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in self.all() {
            let mut slot = lock(&s.slot);
            if slot.state == State::Failed && !slot.reported {
                slot.reported = true;
                let why = one_line(slot.error.as_deref().unwrap_or("no error given"));
                out.push(format!(
                    "MCP server {:?} failed: {why}; the chat goes on without it (:PseudoMcp shows more)",
                    s.name
                ));
            }
        }
        out
    }

    /// Stops every server and whatever it started (its process group), at the editor's exit.
    pub fn stop(&self) {
        for s in self.all() {
            let client = lock(&s.slot).client.take();
            if let Some(c) = client {
                c.kill();
                set_state(&s, |slot| {
                    slot.state = State::Stopped;
                    slot.error = Some("stopped with the editor".into());
                    // no restart: the editor is leaving
                    slot.restarts = MAX_RESTARTS;
                });
            }
        }
    }

    /// Each server's state, tools and last error.
    pub fn status(&self) -> Vec<Status> {
        self.all()
            .iter()
            .map(|s| {
                let slot = lock(&s.slot);
                Status {
                    name: s.name.clone(),
                    state: slot.state,
                    tools: slot.tools.iter().map(|t| t.name.clone()).collect(),
                    error: slot.error.clone(),
                    source: if s.entry.is_some() { "workspace" } else { "setup" },
                }
            })
            .collect()
    }
}

fn set_state(s: &Server, f: impl FnOnce(&mut Slot)) {
    f(&mut lock(&s.slot));
    s.changed.send_modify(|n| *n += 1);
}
