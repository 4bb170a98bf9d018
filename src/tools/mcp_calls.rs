//! The MCP servers' tools among ours: offered after ours, a `mcp__SERVER__TOOL` call routed to its server
//! ([`crate::mcp::Servers`]), asked first unless `approve.mcp` or an earlier Always says not to.

use std::sync::Arc;

use super::{Approval, ApprovalRequest, ToolOutput, Tools};
use crate::message::ToolCall;

impl Tools {
    /// Offers the tools of these MCP servers too (and starts the servers not started yet).
    pub fn set_mcp(&mut self, servers: Arc<crate::mcp::Servers>) {
        servers.start();
        self.mcp = Some(servers);
    }

    /// Waits until no MCP server is still starting, so the first request offers their tools (each start
    /// is bounded by `mcp.timeout`).
    pub async fn mcp_settled(&self) {
        if let Some(m) = &self.mcp {
            m.settled().await;
        }
    }

    /// Whether a question about a server of the workspace's `.mcp.json` is on screen, unanswered.
    pub fn mcp_asking(&self) -> bool {
        self.mcp.as_ref().is_some_and(|m| m.asking())
    }

    /// The MCP servers' failures not said in the chat yet.
    pub fn mcp_notices(&self) -> Vec<String> {
        self.mcp.as_ref().map(|m| m.take_notices()).unwrap_or_default()
    }

    /// An MCP tool's call, asked first unless `approve.mcp` or an earlier Always says not to.
    pub(super) async fn mcp_call(&self, call: &ToolCall, server: &str, tool: &str) -> ToolOutput {
        let Some(m) = &self.mcp else { return ToolOutput::error("no MCP servers are configured".into()) };
        let always = self.mcp_always.lock().unwrap_or_else(|p| p.into_inner()).contains(&call.name);
        if !always && !m.auto_approved(server, tool) {
            let detail = serde_json::to_string_pretty(&call.arguments).unwrap_or_default();
            let req = ApprovalRequest {
                tool: call.name.clone(),
                summary: format!("{server}: {tool}"),
                detail,
                change: None,
                lifted: Vec::new(),
                warning: None,
                always: true,
                options: Vec::new(),
            };
            match self.approver.ask(req).await {
                Approval::Yes | Approval::Only(_) => {}
                Approval::Always => {
                    self.mcp_always.lock().unwrap_or_else(|p| p.into_inner()).insert(call.name.clone());
                }
                Approval::No => {
                    return ToolOutput::error(format!(
                        "the user declined this call of {tool} on the MCP server {server}; it was not run. Do not \
                         retry it as is: ask the user how to proceed."
                    ));
                }
            }
        }
        let out = m.call(server, tool, call.arguments.clone()).await;
        ToolOutput { content: out.content, is_error: out.is_error, sandbox: None, blobs: out.blobs }
    }
}
