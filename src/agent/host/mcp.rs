//! The editor's MCP servers, shared by every chat: made at the first chat (again when `setup()` changes them), their
//! state, resources and the user's consent.

use std::sync::Arc;

use super::{Host, HostError, HostResult, State};
use crate::agent::config::make_servers;
use crate::agent::lock;
use crate::agent::outbox::Outbound;

impl Host {
    /// The MCP servers of the current configuration (made, not yet started, the first time).
    pub(super) fn mcp_servers(&self, st: &mut State) -> Option<Arc<crate::mcp::Servers>> {
        if let Some((s, cfg, approve)) = &st.mcp
            && *cfg == st.config.mcp
            && *approve == st.config.approve
        {
            return Some(s.clone());
        }
        let made = make_servers(&st.config, self.rt.handle().clone());
        if let Some(s) = &made {
            let outbox = self.outbox.clone();
            s.on_consent(move |ask| outbox.push(None, Outbound::McpConsent(ask)));
        }
        st.mcp = made.clone().map(|s| (s, st.config.mcp.clone(), st.config.approve.clone()));
        made
    }

    /// The running MCP servers' resources as they last listed them (what `@SERVER:URI` completes to); none
    /// before the first chat. Nothing is asked of a server here.
    pub fn mcp_resources(&self) -> Vec<crate::mcp::ServerResource> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        servers.map(|s| s.resources()).unwrap_or_default()
    }

    /// Each configured MCP server's state, tools and last error (`stopped` before the first chat; a server of
    /// the workspace's `.mcp.json` not agreed to: `awaiting_consent`).
    pub fn mcp_status(&self) -> Vec<crate::mcp::Status> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        match servers {
            Some(s) => {
                s.load();
                s.status()
            }
            None => Vec::new(),
        }
    }

    /// The user's answer about a server of the workspace's `.mcp.json`: `yes`, `no` (both remembered in
    /// `.PseudoClaude/mcp-consent.json`) or `later`.
    pub fn mcp_consent(&self, name: &str, answer: &str) -> HostResult<()> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        let s = servers.ok_or_else(|| HostError::Refused("there is no MCP server to answer about".into()))?;
        s.answer(name, answer).map_err(HostError::Refused)
    }

    /// Asks again about a server of `.mcp.json` (`name`), or about every one declined or not answered yet.
    pub fn mcp_ask_again(&self, name: Option<&str>) -> HostResult<usize> {
        let servers = self.mcp_servers(&mut lock(&self.state));
        let s = servers.ok_or_else(|| {
            HostError::Refused(format!(
                "the workspace has no {} and setup() names no server",
                crate::mcp::workspace::FILE
            ))
        })?;
        s.ask_again(name).map_err(HostError::Refused)
    }
}
