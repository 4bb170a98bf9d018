//! The editor's configuration of the agent, as `setup()` validated it, and what is built from it: the
//! provider in effect and the agent's own settings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::{AgentConfig, DEFAULT_STALE_AFTER};
use crate::mcp::{ApproveTools, McpConfig, Servers};
use crate::provider::{self, Provider, ProviderConfig, ProviderError};
use crate::session;
use crate::tools::AutoApprove;
use crate::usage::Pricing;

/// The editor's configuration, as `setup()` validated it. An unknown key is refused, not defaulted: a
/// name the Lua side spells differently would otherwise turn an option off without a word.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostConfig {
    pub workspace: PathBuf,
    pub provider: ProviderConfig,
    pub stale_after_hours: f64,
    pub spill_threshold: usize,
    pub approve: AutoApproveConfig,
    /// Days, fractions allowed (as `sessions.cleanup()` takes them); 0 keeps everything.
    pub retention_days: f64,
    /// Dollars per million tokens, by model (the Lua config's `pricing`).
    pub pricing: Pricing,
    /// The registry of workspaces ([`crate::workspaces`]) a session that starts or is resumed notes
    /// its workspace in; none: not noted.
    pub workspaces_file: Option<PathBuf>,
    /// The user's own instructions file (`stdpath("config")/pseudoclaude/AGENTS.md`), read before the workspace's.
    pub user_instructions: Option<PathBuf>,
    /// How `run_command` is confined (`sandbox = { enabled, network, writable, unix_sockets, env, deny_read }`).
    pub sandbox: crate::sandbox::Settings,
    /// The user's MCP servers and the per-call timeout (`crate::mcp`).
    pub mcp: McpConfig,
    /// Checkpoints of the workspace's files, for rewind (the Lua config's `rewind`).
    pub rewind: RewindConfig,
    /// The ACP agents by name (`setup({ agents = { NAME = { command, args, env } } })`), over the built-in ones.
    pub agents: BTreeMap<String, AgentSpec>,
    /// The agent new chats use (`setup({ agent = NAME })`); none: our own provider.
    pub agent: Option<String>,
    /// A worktree chat's own configuration: the git worktree it works in (`chat.new({ worktree })`, issue 47).
    pub worktree: Option<session::entry::WorktreeMeta>,
}

/// How to start one ACP agent: `setup({ agents = { NAME = { command, args, env } } })` (src/acp/ starts it).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// `agents.NAME.sandbox`: the agent's whole process in the command sandbox.
    pub sandbox: AgentSandbox,
    /// `agents.NAME.fs_reads`: whether the agent is offered `fs/read_text_file` (the editor's buffers); unset: all
    /// but Gemini CLI, known by its command line (`acp::client`'s `reads_through_us`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_reads: Option<bool>,
}

/// `agents.NAME.sandbox = true`, or `{ writable = { … }, keep = { … } }` (also on): the agent's process, its own
/// shell included, confined as our commands are (the `sandbox` settings: the workspace writable, the secret stores
/// hidden, no Unix sockets, the network as `sandbox.network` says). `writable`: more paths it may write (its own
/// store of sessions and settings; `~` is the home folder); `keep`: variables passed despite the secret filter
/// (its API key's). A built-in agent's entry knows both for its agent; these add to them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AgentSandbox {
    pub enabled: bool,
    pub writable: Vec<String>,
    pub keep: Vec<String>,
}

impl<'de> Deserialize<'de> for AgentSandbox {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            #[serde(default)]
            writable: Vec<String>,
            #[serde(default)]
            keep: Vec<String>,
            // as serialized (`:checkhealth` hands the spec back)
            #[serde(default = "yes")]
            enabled: bool,
        }
        fn yes() -> bool {
            true
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Setting {
            On(bool),
            Table(Table),
            // `{}` from Lua crosses as an empty list
            Empty(Vec<serde::de::IgnoredAny>),
        }
        match Setting::deserialize(d) {
            Ok(Setting::On(enabled)) => Ok(AgentSandbox { enabled, ..Default::default() }),
            Ok(Setting::Empty(v)) if v.is_empty() => Ok(AgentSandbox { enabled: true, ..Default::default() }),
            Ok(Setting::Table(t)) => Ok(AgentSandbox { enabled: t.enabled, writable: t.writable, keep: t.keep }),
            _ => Err(serde::de::Error::custom(
                "expected true, false or { writable = { paths }, keep = { variable names } }",
            )),
        }
    }
}

/// `rewind = { enabled = true, max_file_bytes = 16 MiB }`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewindConfig {
    pub enabled: bool,
    pub max_file_bytes: u64,
}

impl Default for RewindConfig {
    fn default() -> Self {
        RewindConfig { enabled: true, max_file_bytes: crate::rewind::DEFAULT_MAX_FILE_BYTES }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoApproveConfig {
    pub write_file: bool,
    pub edit_file: bool,
    pub run_command: bool,
    /// `approve.mcp.SERVER`: `true` for all its tools, or a list of tool names.
    pub mcp: BTreeMap<String, ApproveTools>,
    /// `approve.agents.NAME = true`: that ACP agent's permission requests are answered "allow once".
    pub agents: BTreeMap<String, bool>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            workspace: std::env::current_dir().unwrap_or_default(),
            provider: ProviderConfig { name: String::new(), ..Default::default() },
            stale_after_hours: DEFAULT_STALE_AFTER.as_secs_f64() / 3600.0,
            spill_threshold: session::spill::DEFAULT_THRESHOLD,
            approve: AutoApproveConfig::default(),
            retention_days: f64::from(session::retention::DEFAULT_DAYS),
            pricing: Pricing::default(),
            workspaces_file: None,
            user_instructions: None,
            sandbox: crate::sandbox::Settings::default(),
            mcp: McpConfig::default(),
            rewind: RewindConfig::default(),
            agents: BTreeMap::new(),
            agent: None,
            worktree: None,
        }
    }
}

/// The provider configuration in effect: with no name (or "auto"), the first provider whose key is
/// set, else the offline demo; with no model, the provider's default.
pub fn resolve_provider(config: &HostConfig) -> ProviderConfig {
    let mut p = config.provider.clone();
    if p.name.is_empty() || p.name == "auto" {
        let has = |v: &str| std::env::var(v).is_ok_and(|k| !k.is_empty());
        p.name = if has("ANTHROPIC_API_KEY") {
            "anthropic".into()
        } else if has("OPENAI_API_KEY") {
            "openai".into()
        } else {
            "demo".into()
        };
    }
    if p.model.is_empty() {
        p.model = match p.name.as_str() {
            "anthropic" => "claude-sonnet-4-5".into(),
            "openai" => "gpt-4.1".into(),
            _ => "demo".into(),
        };
    }
    p
}

/// The configured provider, built (an HTTP client for the real ones).
pub fn make_provider(config: &HostConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    let p = resolve_provider(config);
    if p.name == "demo" {
        return Ok(Arc::new(provider::demo::Demo::new(Duration::from_millis(8))));
    }
    Ok(Arc::from(provider::from_config(&p)?))
}

/// The agent's settings; `mcp`: the editor's MCP servers, shared by every agent.
pub(super) fn agent_config(config: &HostConfig, mcp: Option<Arc<Servers>>) -> AgentConfig {
    let mut c = AgentConfig::new(&config.workspace);
    c.worktree = config.worktree.clone();
    c.mcp = mcp;
    c.stale_after = Duration::from_secs_f64((config.stale_after_hours * 3600.0).max(0.0));
    c.spill_threshold = config.spill_threshold;
    c.pricing = config.pricing.clone();
    c.user_instructions = config.user_instructions.clone();
    c.sandbox = config.sandbox.clone();
    // The default key variables (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`) look secret by their names already.
    let key_env = resolve_provider(config).api_key_env;
    c.sandbox.provider_key_env = (!key_env.trim().is_empty()).then(|| key_env.trim().to_string());
    c.rewind = config.rewind.enabled;
    c.rewind_max_file_bytes = config.rewind.max_file_bytes;
    c.compact.spill_threshold = config.spill_threshold;
    c.auto_approve = AutoApprove {
        write_file: config.approve.write_file,
        edit_file: config.approve.edit_file,
        run_command: config.approve.run_command,
    };
    c
}

/// The MCP servers of `config` and of the workspace's `.mcp.json`, not started: none when neither names any.
pub(super) fn make_servers(config: &HostConfig, rt: tokio::runtime::Handle) -> Option<Arc<Servers>> {
    if config.mcp.servers.is_empty() && !config.workspace.join(crate::mcp::workspace::FILE).exists() {
        return None;
    }
    Some(Arc::new(Servers::new(&config.mcp, config.approve.mcp.clone(), &config.workspace, rt)))
}
