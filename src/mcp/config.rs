//! The `mcp` settings: `setup({ mcp })`'s table, one server's definition (stdio or streamable HTTP, as
//! `.mcp.json` and `setup()` spell it) checked into the transport it asks for, the `${VAR}` expansion every field of
//! a server goes through, the names a server may have, and `approve.mcp`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Servers;

/// `mcp.timeout`'s default, in seconds: the longest one call (or a server's start) may take.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

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

/// A server's name as `setup()` takes it: letters, digits, `_` and `-`, without `__` (its tools are
/// `mcp__NAME__TOOL`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains("__") && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Servers {
    /// Whether `approve.mcp` lets this tool run without asking.
    pub fn auto_approved(&self, server: &str, tool: &str) -> bool {
        match self.approve.get(server) {
            Some(ApproveTools::All(b)) => *b,
            Some(ApproveTools::Some(list)) => list.iter().any(|t| t == tool),
            None => false,
        }
    }
}
