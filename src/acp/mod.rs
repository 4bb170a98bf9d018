//! Other agents' conversations in our log: Claude Code, Codex, Gemini CLI, Qwen Code, opencode, Pi, goose... driven over the Agent
//! Client Protocol (JSON-RPC on the agent's standard streams), every word and every tool call written to the
//! session's `conversation.jsonl` as it happens, in the same format as our own agent's (doc/log_format.md).
//!
//! - [`client`]: the one file that speaks to the `agent-client-protocol` SDK (start, requests, what the agent sends).
//! - [`chat`]: an [`AcpChat`], the ACP counterpart of [`crate::agent::Agent`]: a session's log and conversation, the
//!   agent's process, turns, resume (`session/load`, else `session/resume`, else a new session told the transcript).
//!
//! - [`handover`]: another agent's session handed back to it: imported, recorded as that agent's session, loaded.
//! - `driver`: an [`AcpChat`] as the host's registry drives a chat (the [`crate::agent::chat::Driver`] seam).
//! - [`terminal`]: the agent's terminals (`terminal/*`), run as our `run_command` runs a command.
//!
//! Nothing here knows Neovim; the host drives a chat and hears back through the same events as our agent's.
//! Architecture invariant: a chat never waits on the editor: what the editor must answer (a permission) goes
//! through the same [`crate::tools::Approver`] as our tools' approvals.

pub mod chat;
pub mod client;
mod driver;
pub mod handover;
pub mod terminal;

use std::collections::BTreeMap;

pub use chat::{AcpChat, ChatConfig};
pub use driver::AcpDrivers;

use crate::agent::host::AgentSandbox;
/// How to start one agent (`setup({ agents })`): defined with the host's configuration, which carries it.
pub use crate::agent::host::AgentSpec;

/// The agents known without configuration: the command line only (a user's entry of the same name overrides it),
/// and where to get the command.
const BUILTINS: &[(&str, &str, &[&str], &str)] = &[
    ("claude", "claude-agent-acp", &[], "npm install -g @zed-industries/claude-agent-acp"),
    ("codex", "codex-acp", &[], "npm install -g @zed-industries/codex-acp"),
    ("gemini", "gemini", &["--acp"], "npm install -g @google/gemini-cli"),
    ("qwen", "qwen", &["--acp"], "npm install -g @qwen-code/qwen-code"),
    ("opencode", "opencode", &["acp"], "npm install -g opencode-ai"),
    // pi-acp drives Pi 1.6+ (`pi` on PATH, or `PI_ACP_PI_COMMAND`)
    ("pi", "pi-acp", &[], "npm install -g pi-acp @earendil-works/pi-coding-agent"),
    ("goose", "goose", &["acp"], "see https://block.github.io/goose/docs/getting-started/installation"),
];

/// What a built-in agent needs in the sandbox (`agents.NAME.sandbox`): the paths it writes its sessions and
/// settings in, and the variables it reads its API key from (the sandbox's filter removes them otherwise).
const BUILTIN_SANDBOX: &[(&str, &[&str], &[&str])] = &[
    (
        "claude",
        &["~/.claude", "~/.claude.json"],
        &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"],
    ),
    ("codex", &["~/.codex"], &["OPENAI_API_KEY", "CODEX_API_KEY"]),
    ("gemini", &["~/.gemini"], &["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
    ("qwen", &["~/.qwen"], &["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DASHSCOPE_API_KEY"]),
    (
        "pi",
        &["~/.pi"],
        &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "PI_ACP_PI_COMMAND"],
    ),
    (
        "opencode",
        &["~/.local/share/opencode", "~/.local/state/opencode", "~/.config/opencode", "~/.cache/opencode"],
        &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"],
    ),
    (
        "goose",
        &["~/.config/goose", "~/.local/share/goose", "~/.local/state/goose"],
        &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY"],
    ),
];

/// The names of the built-in agents.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.0)
}

/// Agent `name` as configured: the user's entry over the built-in one (an entry without `command` keeps the
/// built-in command line and adds its `env`).
pub fn resolve(name: &str, user: &BTreeMap<String, AgentSpec>) -> Result<AgentSpec, String> {
    let builtin = BUILTINS.iter().find(|b| b.0 == name).map(|b| AgentSpec {
        command: b.1.to_string(),
        args: b.2.iter().map(|a| a.to_string()).collect(),
        env: BTreeMap::new(),
        sandbox: AgentSandbox::default(),
        fs_reads: None,
    });
    let with_builtin_needs = |mut spec: AgentSpec| {
        if let Some((_, writable, keep)) = BUILTIN_SANDBOX.iter().find(|b| b.0 == name) {
            let own = &mut spec.sandbox;
            own.writable.splice(0..0, writable.iter().map(|w| w.to_string()));
            own.keep.splice(0..0, keep.iter().map(|k| k.to_string()));
        }
        spec
    };
    match (user.get(name), builtin) {
        (Some(u), Some(b)) if u.command.is_empty() => Ok(with_builtin_needs(AgentSpec {
            env: u.env.clone(),
            args: if u.args.is_empty() { b.args } else { u.args.clone() },
            sandbox: u.sandbox.clone(),
            fs_reads: u.fs_reads,
            ..b
        })),
        (Some(u), Some(_)) => Ok(with_builtin_needs(u.clone())),
        (Some(u), _) if !u.command.is_empty() => Ok(u.clone()),
        (Some(_), None) => Err(format!("agents.{name} has no command: give it one (`command = \"...\"`)")),
        (_, Some(b)) => Ok(b),
        (None, None) => {
            let mut known: Vec<&str> = builtin_names().collect();
            known.extend(user.keys().map(String::as_str));
            Err(format!("no agent named {name:?}: the known ones are {}", known.join(", ")))
        }
    }
}

/// How to install an agent's command, when it is a built-in one's.
pub fn install_hint(command: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|b| b.1 == command).map(|b| b.3)
}

/// A failed start as the user reads it: a command not found names itself and how to get it.
pub(crate) fn spawn_error(name: &str, spec: &AgentSpec, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::NotFound {
        let how = match install_hint(&spec.command) {
            Some(hint) => format!("install it ({hint}) or set agents.{name}.command"),
            None => format!("check agents.{name}.command in setup()"),
        };
        return format!("cannot start the agent {name}: the command {:?} was not found on PATH: {how}", spec.command);
    }
    format!("cannot start the agent {name} ({:?}): {e}", spec.command)
}

/// The version each agent's `initialize` reported, by name, since the editor started (`:checkhealth` shows it;
/// nothing is started only to ask).
static VERSIONS: std::sync::Mutex<BTreeMap<String, String>> = std::sync::Mutex::new(BTreeMap::new());

pub(crate) fn note_version(name: &str, version: &str) {
    if !version.is_empty() {
        VERSIONS.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), version.to_string());
    }
}

/// The version agent `name` reported when it last started in this process, if it did.
pub fn known_version(name: &str) -> Option<String> {
    VERSIONS.lock().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
}

/// One agent as `:checkhealth` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Found {
    pub name: String,
    /// Its command line.
    pub command: String,
    /// Where the command is, when it is found.
    pub found: Option<String>,
    /// What its `initialize` reported when it last ran in this editor ("" when it has not).
    pub version: String,
    /// Named in `setup({ agents })` (not only built in).
    pub configured: bool,
    /// `setup({ agent })` names it.
    pub default: bool,
    /// How to install the command, for a built-in agent's.
    pub install: Option<String>,
    /// Why it cannot be used (an entry without a command).
    pub error: Option<String>,
    /// `agents.NAME.sandbox`: it runs in the command sandbox.
    pub sandboxed: bool,
}

/// Every agent a chat can run (the built-in ones and the user's), whether its command is found, and the version its
/// `initialize` reported when it last ran here: nothing is started to ask.
pub fn found(user: &BTreeMap<String, AgentSpec>, default: Option<&str>) -> Vec<Found> {
    let mut names: Vec<String> = builtin_names().map(str::to_string).collect();
    names.extend(user.keys().filter(|k| !names.contains(k)).cloned().collect::<Vec<_>>());
    names
        .into_iter()
        .map(|name| {
            let spec = resolve(&name, user);
            let (command, found, error) = match &spec {
                Ok(s) => (
                    std::iter::once(s.command.clone()).chain(s.args.clone()).collect::<Vec<_>>().join(" "),
                    find_command(&s.command).map(|p| p.display().to_string()),
                    None,
                ),
                Err(e) => (String::new(), None, Some(e.clone())),
            };
            Found {
                configured: user.contains_key(&name),
                default: default == Some(name.as_str()),
                install: spec.as_ref().ok().and_then(|s| install_hint(&s.command)).map(str::to_string),
                version: known_version(&name).unwrap_or_default(),
                sandboxed: spec.as_ref().is_ok_and(|s| s.sandbox.enabled),
                name,
                command,
                found,
                error,
            }
        })
        .collect()
}

/// Where a command would be run from: its path when found on `PATH` (or as given, when it names a file).
pub fn find_command(command: &str) -> Option<std::path::PathBuf> {
    if command.contains('/') {
        let p = std::path::PathBuf::from(command);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(command)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_entry_overrides_the_builtin_and_an_unknown_name_lists_the_known_ones() {
        let mut user = BTreeMap::new();
        assert_eq!(resolve("gemini", &user).unwrap().args, vec!["--acp"]);
        assert_eq!(resolve("qwen", &user).unwrap().args, vec!["--acp"]);
        assert_eq!(resolve("pi", &user).unwrap().command, "pi-acp");
        user.insert("claude".into(), AgentSpec { command: "/opt/claude-acp".into(), ..Default::default() });
        let env = BTreeMap::from([("A".to_string(), "1".to_string())]);
        user.insert("codex".into(), AgentSpec { env: env.clone(), ..Default::default() });
        assert_eq!(resolve("claude", &user).unwrap().command, "/opt/claude-acp");
        let codex = resolve("codex", &user).unwrap();
        assert_eq!((codex.command.as_str(), codex.env), ("codex-acp", env));
        let err = resolve("nope", &user).unwrap_err();
        assert!(err.contains("\"nope\"") && err.contains("goose"), "{err}");
        user.insert("mine".into(), AgentSpec::default());
        assert!(resolve("mine", &user).unwrap_err().contains("agents.mine has no command"));
    }

    #[test]
    fn a_command_not_found_names_itself_and_how_to_install_it() {
        let spec = resolve("claude", &BTreeMap::new()).unwrap();
        let e = std::io::Error::from(std::io::ErrorKind::NotFound);
        let msg = spawn_error("claude", &spec, &e);
        assert!(msg.contains("\"claude-agent-acp\" was not found") && msg.contains("@zed-industries/claude-agent-acp"));
    }
}
