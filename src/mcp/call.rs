//! One `tools/call`, bounded by `mcp.timeout`: never fails, a dead, refused or slow server is an error output the
//! model reads; a server that died during the call is marked stopped, to be started again at the next one.

use std::sync::Arc;

use super::client::CallError;
use super::start::{refresh_tools, with_stderr};
use super::{CallOutput, Servers, State, lock, result, set_state};

impl Servers {
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
}
