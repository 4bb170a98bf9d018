//! MCP tools: the user's Model Context Protocol servers, started on the core's threads at the first chat,
//! their tools offered to the model as `mcp__SERVER__TOOL` (Claude Code's naming).
//!
//! [`Servers`] is shared by every agent of the editor's life: a server started once stays up (its process
//! group is killed when the last handle drops). A server that fails to start is `failed` with its error;
//! one that dies mid-call answers that call with an error result the model sees, and is started again at
//! the next call, at most [`MAX_RESTARTS`] times. `client.rs` is the only file that uses the `rmcp` SDK;
//! `result.rs` turns a `tools/call` result into what the model and the log get.

mod client;
mod http;
mod resource;
mod result;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::provider::ToolSpec;
use client::{CallError, Client};
pub use resource::resource_text;
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
    /// The plugin's log file: each server's standard error goes there, a line per line after the server's name.
    pub log_file: Option<PathBuf>,
    /// The user's secret the answers about the workspace's `.mcp.json` servers are keyed with (`workspace.rs`).
    pub consent_key: Option<PathBuf>,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig { servers: BTreeMap::new(), timeout: DEFAULT_TIMEOUT_SECS, log_file: None, consent_key: None }
    }
}

/// One server, as `.mcp.json` and `setup()` spell it: a command the editor runs (stdio), or the URL of a
/// streamable-HTTP server (`"type": "http"` in Claude Code's `.mcp.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Empty for an HTTP server.
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Relative to the workspace; default the workspace.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// A streamable-HTTP server's endpoint (`http://127.0.0.1:3001/mcp`). `${VAR}` and `${VAR:-default}`
    /// are replaced from the editor's environment, as Claude Code does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent with every request to an HTTP server (`Authorization = "Bearer ${TOKEN}"`); `${VAR}` replaced.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `.mcp.json`'s `"type"`: `stdio`, `http` (or `streamable-http`); absent, the fields decide.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
}

/// How to reach a server, its configuration checked.
pub(crate) enum Transport {
    Stdio,
    Http { url: String, headers: Vec<(String, String)> },
}

impl ServerConfig {
    /// A stdio server's configuration.
    pub fn stdio(command: impl Into<String>, args: Vec<String>) -> ServerConfig {
        ServerConfig { command: command.into(), args, ..ServerConfig::default() }
    }

    /// A streamable-HTTP server's configuration.
    pub fn http(url: impl Into<String>) -> ServerConfig {
        ServerConfig { url: Some(url.into()), ..ServerConfig::default() }
    }

    /// The transport this configuration asks for, or why it is not a server one can reach.
    pub(crate) fn transport(&self) -> Result<Transport, String> {
        let http = match self.transport.as_deref() {
            None => self.url.is_some(),
            Some("stdio") => false,
            Some("http" | "streamable-http" | "streamableHttp") => true,
            Some("sse") => {
                return Err("the legacy SSE transport (\"type\": \"sse\") is not supported: give the server's \
                            streamable HTTP endpoint (\"type\": \"http\")"
                    .into());
            }
            Some(other) => return Err(format!("unknown server type {other:?} (known: \"stdio\", \"http\")")),
        };
        if !self.command.is_empty() && (self.url.is_some() || !self.headers.is_empty()) {
            return Err("a server has a command (stdio) or a url and headers (HTTP), not both".into());
        }
        if !http {
            if self.command.is_empty() {
                return Err("no command to run (and no url of an HTTP server)".into());
            }
            return Ok(Transport::Stdio);
        }
        if !self.command.is_empty() || !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
            return Err("an HTTP server has a url and headers, not a command, args, env or cwd".into());
        }
        let url = expand_env(self.url.as_deref().unwrap_or_default())?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("the url must start with http:// or https://, got {url:?}"));
        }
        let headers = self
            .headers
            .iter()
            .map(|(k, v)| Ok((k.clone(), expand_env(v).map_err(|e| format!("headers.{k}: {e}"))?)))
            .collect::<Result<_, String>>()?;
        Ok(Transport::Http { url, headers })
    }
}

/// `${VAR}` and `${VAR:-default}` replaced from the environment (Claude Code's `.mcp.json` expansion); an unset
/// variable without a default is an error that names it.
pub fn expand_env(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed ${{ in {s:?}"));
        };
        let (name, default) = match after[..end].split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (&after[..end], None),
        };
        match (std::env::var(name), default) {
            (Ok(v), _) => out.push_str(&v),
            (Err(_), Some(d)) => out.push_str(d),
            (Err(_), None) => return Err(format!("the environment variable {name} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
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

/// A server's resource, as `resources/list` gave it: what `@SERVER:URI` completes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// One entry of [`Servers::resources`].
#[derive(Debug, Clone, Serialize)]
pub struct ServerResource {
    pub server: String,
    #[serde(flatten)]
    pub resource: ResourceInfo,
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

/// The question before a server of the workspace's `.mcp.json` first runs: answer with [`Servers::answer`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsentAsk {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The names of the variables it sets (their values may be secrets).
    pub env: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// An HTTP server's endpoint (then `command` is empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The names of the headers it sends (their values may be secrets).
    pub headers: Vec<String>,
    /// The `.mcp.json` it is defined in.
    pub file: PathBuf,
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

type Asker = Arc<dyn Fn(ConsentAsk) + Send + Sync>;

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

/// A server's name as `setup()` takes it: letters, digits, `_` and `-`, without `__` (its tools are
/// `mcp__NAME__TOOL`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains("__") && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

const DECLINED: &str =
    "not started: you declined this server of the workspace's .mcp.json (:PseudoMcp consent asks again)";

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

    /// Reads `.mcp.json` (once) and adds its servers, each in the state the stored answers give it.
    pub fn load(&self) {
        self.loader().load();
    }

    fn loader(&self) -> Loader {
        Loader {
            servers: self.servers.clone(),
            loaded: self.loaded.clone(),
            files: self.files.clone(),
            workspace: self.ctx.workspace.clone(),
            key: self.consent_key.clone(),
            changed: self.ctx.changed.clone(),
        }
    }

    /// The user's answer about a server of `.mcp.json`: `yes` (remembered; it starts now if the servers were
    /// started, else at the first chat), `no` (remembered; stopped if running) or `later` (asked again at the
    /// next `ask_again`; nothing waits for it meanwhile).
    pub fn answer(&self, name: &str, answer: &str) -> Result<(), String> {
        self.load();
        let s = self
            .all()
            .into_iter()
            .find(|s| s.name == name && s.entry.is_some())
            .ok_or_else(|| format!("there is no server {name:?} in the workspace's {}", workspace::FILE))?;
        let entry = s.entry.clone().expect("a workspace server");
        let remembered = match answer {
            "yes" | "no" => {
                let a = if answer == "yes" { workspace::Answer::Yes } else { workspace::Answer::No };
                let _files = lock(&self.files);
                workspace::remember(&self.ctx.workspace, &entry, a)
                    .map_err(|e| format!("cannot remember the answer in {}: {e}", workspace::CONSENT_FILE))
            }
            "later" => Ok(()),
            other => return Err(format!("unknown answer {other:?}: use \"yes\", \"no\" or \"later\"")),
        };
        match answer {
            "yes" if s.config.is_some() => {
                let start = self.started.load(Ordering::SeqCst) && lock(&s.slot).client.is_none();
                // straight to `starting` when it starts now: a first chat waiting must not see it settled between
                set_state(&s, |slot| {
                    if slot.client.is_none() {
                        slot.state = if start { State::Starting } else { State::Stopped };
                    }
                    slot.asking = false;
                    slot.declined = false;
                    slot.error = None;
                });
                if start {
                    spawn_start(&self.ctx, s);
                }
            }
            "no" => {
                let client = lock(&s.slot).client.take();
                if let Some(c) = client {
                    c.kill();
                }
                set_state(&s, |slot| {
                    slot.state = State::Stopped;
                    slot.tools.clear();
                    slot.asking = false;
                    slot.declined = true;
                    slot.error = Some(DECLINED.into());
                });
            }
            _ => set_state(&s, |slot| slot.asking = false),
        }
        remembered
    }

    /// Asks again about `name` (any server of `.mcp.json`), or about every one declined or not answered yet.
    /// Returns how many questions were asked; none is an error that says why.
    pub fn ask_again(&self, name: Option<&str>) -> Result<usize, String> {
        self.load();
        let list: Vec<_> = self
            .all()
            .into_iter()
            .filter(|s| s.entry.is_some() && s.config.is_some())
            .filter(|s| match name {
                Some(n) => s.name == n,
                None => {
                    let slot = lock(&s.slot);
                    slot.declined || slot.state == State::AwaitingConsent
                }
            })
            .collect();
        if list.is_empty() {
            return Err(match name {
                Some(n) => {
                    format!("there is no server {n:?} in the workspace's {} (or it cannot be used)", workspace::FILE)
                }
                None => {
                    format!("no server of the workspace's {} was declined or is awaiting an answer", workspace::FILE)
                }
            });
        }
        if lock(&self.asker).is_none() {
            return Err("nothing can ask: the editor's chat is not set up".into());
        }
        for s in &list {
            set_state(s, |slot| {
                if slot.client.is_none() {
                    slot.state = State::AwaitingConsent;
                }
            });
            ask(&self.asker, &self.ctx, s);
        }
        Ok(list.len())
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

    /// The tools of the running servers, as the model reads them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools()
            .into_iter()
            .map(|(name, _, t)| ToolSpec { name, description: t.description, input_schema: t.input_schema })
            .collect()
    }

    /// Every running server's tools with the name the model calls each by ([`model_names`]).
    fn tools(&self) -> Vec<(String, String, ToolInfo)> {
        let mut all = Vec::new();
        for s in self.all() {
            let slot = lock(&s.slot);
            all.extend(slot.tools.iter().map(|t| (s.name.clone(), t.clone())));
        }
        let pairs: Vec<(&str, &str)> = all.iter().map(|(s, t)| (s.as_str(), t.name.as_str())).collect();
        let names = model_names(&pairs);
        names.into_iter().zip(all).map(|(name, (server, tool))| (name, server, tool)).collect()
    }

    /// The running servers' resources, as they last listed them (nothing is asked here: the editor's
    /// completion calls this on its main loop).
    pub fn resources(&self) -> Vec<ServerResource> {
        let mut out = Vec::new();
        for s in self.all() {
            let slot = lock(&s.slot);
            out.extend(slot.resources.iter().map(|r| ServerResource { server: s.name.clone(), resource: r.clone() }));
        }
        out
    }

    /// Whether `name` is a configured server's (what `@SERVER:URI` must name).
    pub fn has_server(&self, name: &str) -> bool {
        self.all().iter().any(|s| s.name == name)
    }

    /// `resources/read` of `uri` on `server`, bounded by `mcp.timeout`: its contents as the protocol gives
    /// them (`[{uri, mimeType, text|blob}]`), or why not, in one line.
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<Vec<serde_json::Value>, String> {
        let s = self
            .all()
            .into_iter()
            .find(|s| s.name == server)
            .ok_or_else(|| format!("there is no MCP server {server:?}"))?;
        let client = self.client_for(&s).await?;
        let timeout = self.ctx.timeout;
        match tokio::time::timeout(timeout, client.read_resource(uri)).await {
            Err(_) => Err(format!(
                "the MCP server {server:?} did not answer resources/read within {} s (mcp.timeout)",
                timeout.as_secs_f64()
            )),
            Ok(r) => r.map_err(|e| format!("the MCP server {server:?} could not read {uri}: {e}")),
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

    /// The server and tool a model's tool name means, if it names a configured server: a listed tool by the
    /// name [`Servers::specs`] gave it, else `mcp__SERVER__TOOL` read as it is (a tool the server does not list
    /// then gets the server's "no tool" answer).
    pub fn resolve(&self, name: &str) -> Option<(String, String)> {
        let rest = name.strip_prefix(PREFIX)?;
        if let Some((_, server, tool)) = self.tools().into_iter().find(|(n, _, _)| n == name) {
            return Some((server, tool.name));
        }
        self.all().iter().find_map(|s| {
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
        let Some(s) = self.all().into_iter().find(|s| s.name == server) else {
            return CallOutput::error(format!("there is no MCP server {server:?}"));
        };
        let client = match self.client_for(&s).await {
            Ok(c) => c,
            Err(e) => return CallOutput::error(e),
        };
        if !lock(&s.slot).tools.iter().any(|t| t.name == tool) {
            return CallOutput::error(format!("the MCP server {server:?} has no tool {tool:?}"));
        }
        let timeout = self.ctx.timeout;
        match tokio::time::timeout(timeout, client.call(tool, arguments)).await {
            Err(_) => CallOutput::error(format!(
                "the MCP server {server:?} did not answer {tool} within {} s (mcp.timeout); the call was cancelled",
                timeout.as_secs_f64()
            )),
            Ok(Ok(value)) => {
                // A call that changed the server's tools (it said so before answering): the model's next
                // request offers the new list.
                refresh_tools(&s, &client).await;
                result::decode(&value)
            }
            Ok(Err(CallError::Refused(e))) => {
                CallOutput::error(format!("the MCP server {server:?} refused {tool}: {e}"))
            }
            Ok(Err(CallError::Died(e))) => {
                let tail = client.stderr_tail();
                let msg = with_stderr(format!("the MCP server {server:?} stopped during the call ({e})"), &tail);
                set_state(&s, |slot| {
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
        settled_one(s).await;
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
            if slot.state == State::AwaitingConsent || slot.declined || s.config.is_none() {
                return Err(format!(
                    "the MCP server {:?} is not running: {}",
                    s.name,
                    slot.error.clone().unwrap_or_else(|| "it awaits your consent (:PseudoMcp)".into())
                ));
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
            spawn_start(&self.ctx, s.clone());
            settled_one(s).await;
        }
        let slot = lock(&s.slot);
        slot.client.clone().ok_or_else(|| {
            format!("the MCP server {:?} could not be started: {}", s.name, slot.error.clone().unwrap_or_default())
        })
    }
}

/// Reads `.mcp.json` once for a [`Servers`] (a piece of it the start's thread owns).
struct Loader {
    servers: Arc<Mutex<Vec<Arc<Server>>>>,
    loaded: Arc<std::sync::atomic::AtomicBool>,
    files: Arc<Mutex<()>>,
    workspace: PathBuf,
    key: Option<PathBuf>,
    changed: Arc<watch::Sender<u64>>,
}

impl Loader {
    /// Adds the servers of `.mcp.json`, the first time.
    fn load(&self) {
        let _files = lock(&self.files);
        if self.loaded.load(Ordering::SeqCst) {
            return;
        }
        let key = workspace::key(self.key.as_deref());
        let added: Vec<Arc<Server>> = match workspace::read(&self.workspace, &key) {
            Ok(entries) => {
                let taken: Vec<String> = lock(&self.servers).iter().map(|s| s.name.clone()).collect();
                entries
                    .into_iter()
                    // setup()'s own server of the same name is the one the user chose
                    .filter(|e| !taken.contains(&e.name))
                    .map(|e| {
                        let (state, error, declined) = match &e.config {
                            Err(why) => (State::Failed, Some(why.clone()), false),
                            Ok(_) => match workspace::answer(&self.workspace, &e) {
                                Some(workspace::Answer::Yes) => (State::Stopped, None, false),
                                Some(workspace::Answer::No) => (State::Stopped, Some(DECLINED.to_string()), true),
                                None => (State::AwaitingConsent, None, false),
                            },
                        };
                        let slot = new_slot(state, error);
                        lock(&slot).declined = declined;
                        Arc::new(Server {
                            name: e.name.clone(),
                            config: e.config.clone().ok(),
                            entry: Some(e),
                            slot,
                            changed: self.changed.clone(),
                        })
                    })
                    .collect()
            }
            Err(why) => vec![Arc::new(Server {
                name: workspace::FILE.into(),
                config: None,
                entry: None,
                slot: new_slot(State::Failed, Some(why)),
                changed: self.changed.clone(),
            })],
        };
        lock(&self.servers).extend(added);
        self.loaded.store(true, Ordering::SeqCst);
        self.changed.send_modify(|n| *n += 1);
    }
}

/// Puts the question about `s` to the user (when something can ask): a first chat waits for the answer.
fn ask(asker: &Mutex<Option<Asker>>, ctx: &Ctx, s: &Arc<Server>) {
    let Some(asker) = lock(asker).clone() else { return };
    let Some(cfg) = &s.config else { return };
    set_state(s, |slot| slot.asking = true);
    asker(ConsentAsk {
        kind: "mcp_consent",
        name: s.name.clone(),
        command: cfg.command.clone(),
        args: cfg.args.clone(),
        env: cfg.env.keys().cloned().collect(),
        cwd: cfg.cwd.clone(),
        url: cfg.url.clone(),
        headers: cfg.headers.keys().cloned().collect(),
        file: ctx.workspace.join(workspace::FILE),
    });
}

fn spawn_start(ctx: &Ctx, s: Arc<Server>) {
    let Some(config) = s.config.clone() else { return };
    set_state(&s, |slot| {
        slot.state = State::Starting;
        slot.error = None;
        slot.reported = false;
    });
    let ctx2 = ctx.clone();
    ctx.rt.spawn(async move {
        let timeout = ctx2.timeout;
        let started = tokio::time::timeout(timeout, async {
            let client = Client::start(&s.name, &config, &ctx2.workspace, ctx2.log_file.as_deref()).await?;
            let tools = match client.list_tools().await {
                Ok(tools) => tools,
                Err(e) => return Err(with_stderr(e, &client.stderr_tail())),
            };
            // Resources are an extra: a server that fails to list them still offers its tools.
            let resources =
                if client.has_resources() { client.list_resources().await.unwrap_or_default() } else { Vec::new() };
            Ok((client, tools, resources))
        })
        .await
        .unwrap_or_else(|_| Err(format!("did not finish starting within {} s", timeout.as_secs_f64())));
        let mut watch = None;
        set_state(&s, |slot| match started {
            // answered "no" while it started: it stays stopped
            Ok(_) if slot.declined => slot.state = State::Stopped,
            Ok((client, tools, resources)) => {
                slot.state = State::Running;
                slot.tools = tools;
                slot.resources = resources;
                let client = Arc::new(client);
                watch = Some(Arc::downgrade(&client));
                slot.client = Some(client);
            }
            Err(e) => {
                slot.state = State::Failed;
                slot.error = Some(e);
                slot.client = None;
            }
        });
        if let Some(client) = watch {
            watch_tools(s, client).await;
        }
    });
}

async fn settled_one(s: &Arc<Server>) {
    let mut rx = s.changed.subscribe();
    while lock(&s.slot).state == State::Starting {
        if rx.changed().await.is_err() {
            break;
        }
    }
}

/// Lists the server's tools again each time it says they changed, for as long as this client is the server's.
/// Holds the client weakly: the task must not keep a stopped server's process alive.
async fn watch_tools(s: Arc<Server>, client: std::sync::Weak<Client>) {
    loop {
        let Some(changed) = client.upgrade().map(|c| c.notices.tools_changed.clone()) else { return };
        changed.notified().await;
        let Some(c) = client.upgrade() else { return };
        if c.is_closed() {
            return;
        }
        refresh_tools(&s, &c).await;
        refresh_resources(&s, &c).await;
    }
}

/// `resources/list` again if the server said its resources changed since they were listed.
async fn refresh_resources(s: &Server, client: &Arc<Client>) {
    let mut listed = client.resources_listed.lock().await;
    let changes = client.resource_changes();
    if changes == *listed {
        return;
    }
    if let Ok(resources) = client.list_resources().await {
        *listed = changes;
        set_state(s, |slot| {
            if slot.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
                slot.resources = resources;
            }
        });
    }
}

/// `tools/list` again if the server said its tools changed since they were listed; the list replaces the
/// server's if this client is still the server's. One listing at a time: a second caller waits for the one
/// under way and finds the list current. A failed listing keeps the old list (a call to a vanished tool then
/// gets the server's own answer).
async fn refresh_tools(s: &Server, client: &Arc<Client>) {
    let mut listed = client.tools_listed.lock().await;
    let changes = client.tool_changes();
    if changes == *listed {
        return;
    }
    if let Ok(tools) = client.list_tools().await {
        *listed = changes;
        set_state(s, |slot| {
            if slot.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
                slot.tools = tools;
            }
        });
    }
}

fn set_state(s: &Server, f: impl FnOnce(&mut Slot)) {
    f(&mut lock(&s.slot));
    s.changed.send_modify(|n| *n += 1);
}

/// An error in one line: its first, and the last line of the standard error it ends with (the server's last words).
fn one_line(error: &str) -> String {
    let mut lines = error.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default().to_string();
    match lines.next_back() {
        Some(last) => format!("{first} {last}"),
        None => first.trim_end_matches(':').to_string(),
    }
}

fn with_stderr(msg: String, tail: &str) -> String {
    if tail.trim().is_empty() { msg } else { format!("{msg}; its standard error ended with:\n{tail}") }
}

/// `mcp__SERVER__TOOL`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{server}__{tool}")
}

/// The longest tool name the providers take: Anthropic and OpenAI both require `^[a-zA-Z0-9_-]{1,64}$`.
pub const MAX_TOOL_NAME: usize = 64;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The names the model calls these `(server, tool)` pairs by, in their order: `mcp__SERVER__TOOL` when the
/// providers take it as it is. Otherwise each character they refuse becomes `_` (what Claude Code does, so
/// an imported session's calls read the same), and a name still too long, or equal to another one, keeps
/// its first 55 characters and ends with `_` and 8 hex digits of the SHA-256 of `mcp__SERVER__TOOL`: stable
/// from one start to the next, unique, and mapped back by [`Servers::resolve`].
pub fn model_names(pairs: &[(&str, &str)]) -> Vec<String> {
    use sha2::{Digest, Sha256};
    let raw: Vec<String> = pairs.iter().map(|(s, t)| tool_name(s, t)).collect();
    let valid = |n: &str| n.len() <= MAX_TOOL_NAME && n.chars().all(is_name_char);
    let cleaned: Vec<String> = raw
        .iter()
        .map(|n| if valid(n) { n.clone() } else { n.chars().map(|c| if is_name_char(c) { c } else { '_' }).collect() })
        .collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &cleaned {
        *count.entry(n.as_str()).or_default() += 1;
    }
    raw.iter()
        .zip(&cleaned)
        .map(|(raw, clean)| {
            // A name the server gave validly keeps it even when a cleaned one collides with it.
            if valid(raw) || (clean.len() <= MAX_TOOL_NAME && count[clean.as_str()] == 1) {
                return clean.clone();
            }
            let hash = Sha256::digest(raw.as_bytes());
            let hex: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
            // `clean` is ASCII: any byte index is a character boundary.
            format!("{}_{hex}", &clean[..clean.len().min(MAX_TOOL_NAME - 9)])
        })
        .collect()
}
