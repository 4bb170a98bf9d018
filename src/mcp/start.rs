//! A server's start and restart, on the core's threads: the client started within `mcp.timeout`, its tools and
//! resources listed (again whenever the server says they changed), a dead server started again at its next call,
//! at most [`MAX_RESTARTS`] times.

use std::sync::Arc;

use super::client::Client;
use super::{Ctx, Server, Servers, State, lock, set_state};

/// A server that died is started again at the next call this many times at most.
pub const MAX_RESTARTS: u32 = 3;

impl Servers {
    /// The server's running client; one that died is started again (at most [`MAX_RESTARTS`] times).
    pub(super) async fn client_for(&self, s: &Arc<Server>) -> Result<Arc<Client>, String> {
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

pub(super) fn spawn_start(ctx: &Ctx, s: Arc<Server>) {
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

pub(super) async fn settled_one(s: &Arc<Server>) {
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
pub(super) async fn refresh_tools(s: &Server, client: &Arc<Client>) {
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

/// An error in one line: its first, and the last line of the standard error it ends with (the server's last words).
pub(super) fn one_line(error: &str) -> String {
    let mut lines = error.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default().to_string();
    match lines.next_back() {
        Some(last) => format!("{first} {last}"),
        None => first.trim_end_matches(':').to_string(),
    }
}

pub(super) fn with_stderr(msg: String, tail: &str) -> String {
    if tail.trim().is_empty() { msg } else { format!("{msg}; its standard error ended with:\n{tail}") }
}
