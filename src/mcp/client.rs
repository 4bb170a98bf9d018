//! The one place that speaks to the `rmcp` SDK: start a stdio server, list its tools, call one.
//! Everything else in the crate sees plain data ([`ToolInfo`], `serde_json::Value` results), so an
//! upgrade of the SDK touches this file only.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use tokio::io::AsyncBufReadExt;

use super::{ServerConfig, ToolInfo};

/// The last lines of a server's standard error kept for its error message.
const STDERR_LINES: usize = 20;

/// A running server: the SDK's session with it and its process group.
pub(super) struct Client {
    service: RunningService<RoleClient, ()>,
    /// The server's process id, which is also its process group's (it is started as a group leader).
    pgid: Option<i32>,
    pub(super) stderr: Arc<Mutex<Vec<String>>>,
}

impl Client {
    /// Spawns the server in its own process group and does the MCP handshake (protocol version
    /// negotiation is the SDK's).
    pub(super) async fn start(cfg: &ServerConfig, workspace: &std::path::Path) -> Result<Client, String> {
        let mut cmd = tokio::process::Command::new(&cfg.command);
        cmd.args(&cfg.args).envs(&cfg.env).process_group(0).kill_on_drop(true);
        cmd.current_dir(match &cfg.cwd {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => workspace.join(d),
            None => workspace.to_path_buf(),
        });
        let (proc, stderr) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cfg.command))?;
        let pgid = proc.id().and_then(|p| i32::try_from(p).ok());
        let lines = Arc::new(Mutex::new(Vec::new()));
        if let Some(stderr) = stderr {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut reader = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let mut l = lines.lock().unwrap_or_else(|p| p.into_inner());
                    if l.len() == STDERR_LINES {
                        l.remove(0);
                    }
                    l.push(line);
                }
            });
        }
        match ().serve(proc).await {
            Ok(service) => Ok(Client { service, pgid, stderr: lines }),
            Err(e) => {
                kill_group(pgid);
                // The last words on its standard error say why, more often than the handshake's error does.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                let tail = lines.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
                Err(super::with_stderr(format!("the MCP handshake failed: {e}"), &tail))
            }
        }
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

/// The server and whatever it started: a server run through `npx` or `uvx` is a tree of processes.
fn kill_group(pgid: Option<i32>) {
    if let Some(p) = pgid.filter(|&p| p > 1) {
        // SAFETY: a plain kill(2) of a process group we created.
        unsafe {
            libc::kill(-p, libc::SIGKILL);
        }
    }
}
