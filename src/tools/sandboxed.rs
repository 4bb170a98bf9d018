//! How `run_command` runs: in the sandbox (`crate::sandbox`) or, when the user allows it for this one
//! command, outside it; what the approval must say and whether it must be asked whatever `approve` says;
//! what the result tells the model when the sandbox may have refused something.
//!
//! Leaving the sandbox is the user's decision every time: the model's `sandbox: false` (with a `reason`)
//! or `network: true` is asked even with `approve.run_command = true` and after an "Always", and its
//! "Always" is a plain yes. Where no sandbox can be set up, every command is asked (fails closed).

use std::path::{Path, PathBuf};

use super::fs;
use std::time::Duration;

use super::args::Args;
use super::{
    DEFAULT_COMMAND_TIMEOUT_SECS, Exit, Gate, Gated, MAX_COMMAND_TIMEOUT_SECS, SESSION_TMP_DIR, Tap, ToolOutput, Tools,
    blocking_res, command,
};

/// An ACP agent's terminal runs until the agent kills or releases it (or its chat ends); this bounds a forgotten one.
const TERMINAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
use crate::sandbox::{self, CommandSandbox, Limits, Mechanism, Network, env::EnvPlan};

impl Tools {
    /// The private `$TMPDIR` of this session's commands.
    pub fn command_temp_dir(&self) -> PathBuf {
        match self.session_dir.as_ref().and_then(|f| f()) {
            Some(dir) => dir.join(SESSION_TMP_DIR),
            None => self.root.canon().join(crate::session::ROOT_DIR_NAME).join(SESSION_TMP_DIR),
        }
    }

    pub(super) async fn run_command(&self, args: &Args<'_>) -> ToolOutput {
        let (req, timeout) = match CommandRequest::parse(args) {
            Ok(x) => x,
            Err(e) => return ToolOutput::error(e),
        };
        let dir = self.root.canon().to_path_buf();
        self.run_request(&req, Duration::from_secs(timeout), &dir, Vec::new(), None).await.0
    }

    /// An ACP agent's terminal (`terminal/create`, `crate::acp`): `command` (a `sh -c` line) run in `dir` (in the
    /// workspace) as `run_command` runs one, in the sandbox with its environment filtered, `env` set on top (the
    /// agent's own values), without a time limit (the agent kills or releases it); `tap` gets its output as it
    /// comes. Asked as a command is when that is forced (no sandbox on this system); how it ended, when it ran.
    pub async fn run_terminal(
        &self,
        command: &str,
        dir: &Path,
        env: Vec<(String, String)>,
        tap: Tap,
    ) -> (ToolOutput, Option<Exit>) {
        let req = CommandRequest { command: command.to_string(), sandbox: None, reason: None, network: None };
        self.run_request(&req, TERMINAL_TIMEOUT, dir, env, Some(tap)).await
    }

    async fn run_request(
        &self,
        req: &CommandRequest,
        timeout: Duration,
        dir: &Path,
        extra_env: Vec<(String, String)>,
        tap: Option<Tap>,
    ) -> (ToolOutput, Option<Exit>) {
        let way = self.command_way(req);
        let gate = Gate { lifted: way.lifted.clone(), warning: way.warning.clone(), forced: way.forced };
        let summary = command_summary(&req.command);
        if let Err(mut out) = self.approve_gated(Gated::RunCommand, summary, req.command.clone(), None, gate).await {
            out.sandbox = Some(way.record(false));
            return (out, None);
        }
        let mut env = EnvPlan::current(&self.sandbox);
        env.set.extend(extra_env);
        let Some(limits) = way.limits.clone() else {
            let (mut out, _, exit) = command::run(dir, &req.command, timeout, self.output_cap, &env, None, tap).await;
            out.sandbox = Some(way.record(true));
            return (out, exit);
        };
        let mechanism = way.mechanism;
        let (confined, limits) = match confine(limits, mechanism).await {
            Ok(x) => x,
            Err(e) => {
                let mut out = ToolOutput::error(format!(
                    "{e}, so the command was not run. Tell the user; with their consent you may ask to run it with \
                     `sandbox: false` and a `reason`."
                ));
                out.sandbox = Some(way.record(false));
                return (out, None);
            }
        };
        let (mut out, contacts, exit) =
            command::run(dir, &req.command, timeout, self.output_cap, &env, Some(confined), tap).await;
        let mut blocked = sandbox::blocked_report(&out.content, &limits, mechanism, dir);
        for c in contacts.iter().filter(|c| !c.allowed) {
            blocked.push(format!(
                "blocked by the sandbox: network to {} (not in sandbox.network's allow list; the user can add it)",
                c.host
            ));
        }
        // A non-zero exit may be the sandbox's doing; a timeout or a lost child is not.
        let failed = out.content.starts_with("exit code: ") && !out.content.starts_with("exit code: 0\n");
        if failed || !blocked.is_empty() {
            out.content.push_str(&format!(
                "\n[this command ran in the sandbox ({}): {}.",
                mechanism.name(),
                limits.describe(mechanism)
            ));
            for b in &blocked {
                out.content.push_str(&format!("\n{b}"));
            }
            out.content.push_str(
                "\nIf it failed because of that, do not work around the sandbox: call run_command again with \
                 `sandbox: false` and a `reason` (or `network: true` when only the network is missing); the user \
                 is asked.]\n",
            );
        }
        let mut record = way.record(true);
        record.hosts = contacts.iter().filter(|c| c.allowed).map(|c| c.host.clone()).collect();
        record.refused_hosts = contacts.iter().filter(|c| !c.allowed).map(|c| c.host.clone()).collect();
        out.sandbox = Some(record);
        (out, exit)
    }

    /// How a command will run: in the sandbox or not, what the user must be asked.
    fn command_way(&self, req: &CommandRequest) -> CommandWay {
        let support = self.support();
        let settings = &self.sandbox;
        let mut way = CommandWay {
            mechanism: Mechanism::Unavailable,
            limits: None,
            lifted: Vec::new(),
            warning: None,
            forced: false,
            allowed: Vec::new(),
            reason: None,
            network: true,
        };
        if !settings.enabled {
            return way;
        }
        if !support.available() {
            // Fails closed: asked every time, with why.
            way.warning = support.warning();
            way.forced = true;
            way.allowed.push("unsandboxed_system".to_string());
            return way;
        }
        if req.sandbox == Some(false) {
            let reason = req.reason.clone().unwrap_or_default();
            way.lifted.push(format!("the sandbox (the model's reason: {reason})"));
            way.forced = true;
            way.allowed.push("no_sandbox".to_string());
            way.reason = Some(reason);
            return way;
        }
        let network = if req.network == Some(true) { Network::On } else { settings.network.clone() };
        if network.is_open() && !settings.network.is_open() {
            way.lifted.push("the network ban (this command may connect and listen)".to_string());
            way.forced = true;
            way.allowed.push("network".to_string());
        }
        way.mechanism = support.mechanism;
        let warnings: Vec<String> =
            support.warning().into_iter().chain(settings.unix_sockets.then(|| UNIX_OPEN.to_string())).collect();
        way.warning = (!warnings.is_empty()).then(|| warnings.join("; "));
        way.network = network.is_open();
        way.limits = Some(self.limits(network, self.command_temp_dir(), &[]));
        way
    }

    /// What a child confined by these settings may touch: the workspace, `temp`, `sandbox.writable` and
    /// `more_writable` (those that exist), the secret stores hidden, `network`.
    fn limits(&self, network: Network, temp: PathBuf, more_writable: &[PathBuf]) -> Limits {
        let settings = &self.sandbox;
        let writable = settings.writable.iter().chain(more_writable).filter_map(|w| w.canonicalize().ok()).collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let (hidden, _holding_the_workspace) =
            sandbox::hidden_paths(home.as_deref(), &settings.deny_read, self.root.canon());
        Limits {
            hidden,
            workspace: self.root.canon().to_path_buf(),
            temp,
            writable,
            network,
            unix_sockets: settings.unix_sockets,
            proxy_port: None,
        }
    }

    /// Starts a long-lived child (an ACP agent with `agents.NAME.sandbox`) in the command sandbox, confined as
    /// a command is, with `more_writable` writable too (the agent's own store of sessions and settings), its
    /// `$TMPDIR` the commands' private folder, its network as `sandbox.network` says (with an allowlist,
    /// through the proxy, serving while the returned [`command::Started`] is kept). `cmd` has its standard
    /// streams set, stdin piped. Fails closed: where no sandbox can be set up nothing starts, and the error
    /// says why.
    /// Its environment is filtered as a command's is, but for `keep` and the variables `cmd` sets on purpose.
    pub(crate) async fn spawn_confined(
        &self,
        mut cmd: tokio::process::Command,
        more_writable: &[PathBuf],
        keep: &[String],
    ) -> Result<command::Started, String> {
        let support = self.support();
        if !self.sandbox.enabled {
            return Err("sandbox.enabled is false".to_string());
        }
        if !support.available() {
            let why = support.warning().unwrap_or_else(|| "no mechanism".to_string());
            return Err(format!("the sandbox cannot be set up on this system ({why})"));
        }
        if self.sandbox.network == Network::Off {
            return Err("sandbox.network is false, so it could not reach its model: name the model's API host in \
                        sandbox.network's allow list (e.g. { allow = { \"api.anthropic.com\" } })"
                .to_string());
        }
        let mut settings = self.sandbox.clone();
        settings.env.keep.extend(keep.iter().cloned());
        let set = cmd.as_std().get_envs().filter(|(_, v)| v.is_some()).map(|(k, _)| k.to_string_lossy().into_owned());
        settings.env.keep.extend(set.collect::<Vec<_>>());
        EnvPlan::current(&settings).apply(&mut cmd);
        let limits = self.limits(self.sandbox.network.clone(), self.command_temp_dir(), more_writable);
        let (confined, _) = confine(limits, support.mechanism).await?;
        command::spawn(cmd, Some(confined), true).map_err(|e| match e {
            command::Unstarted::Spawn(e) => e.to_string(),
            command::Unstarted::Proxy(e) => format!("the sandbox's network proxy could not be started: {e}"),
        })
    }
}

/// A child's confinement made ready off the runtime's threads: its private folder, its allowlist proxy's
/// listening socket (Landlock alone: the host's loopback; with namespaces the child makes it in its own),
/// the plan. Also returns the limits with the proxy's port.
async fn confine(mut limits: Limits, mechanism: Mechanism) -> Result<(command::Sandboxed, Limits), String> {
    let mut proxy = None;
    if let Network::Allow(allow) = &limits.network {
        let (port, listener) = if mechanism == Mechanism::Namespaces {
            (sandbox::proxy::NAMESPACE_PORT, None)
        } else {
            let l = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| Ok((l.local_addr()?.port(), l)))
                .map_err(|e| format!("the sandbox's network proxy could not listen: {e}"))?;
            (l.0, Some(l.1))
        };
        limits.proxy_port = Some(port);
        proxy = Some(command::ProxySource { allow: allow.clone(), port, listener });
    }
    let plan = {
        let limits = limits.clone();
        blocking_res(move |_| {
            make_private_dir(&limits.temp)?;
            sandbox::Plan::new(&limits, mechanism)
        })
        .await
        .map_err(|e| format!("the sandbox could not be set up: {e}"))?
    };
    Ok((command::Sandboxed { plan, temp: limits.temp.clone(), proxy }, limits))
}

/// What the approval says when `sandbox.unix_sockets` is on.
pub const UNIX_OPEN: &str = "sandbox.unix_sockets = true: the command may connect to Unix sockets, the editor's own \
                             server among them, so it can drive the editor itself (and through it, anything)";

/// `run_command`'s arguments.
struct CommandRequest {
    command: String,
    sandbox: Option<bool>,
    reason: Option<String>,
    network: Option<bool>,
}

impl CommandRequest {
    fn parse(args: &Args<'_>) -> Result<(CommandRequest, u64), String> {
        let command = args.str("command")?;
        if command.trim().is_empty() {
            return Err("`command` is empty".to_string());
        }
        let timeout = args.uint_opt("timeout")?.unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECS);
        if timeout == 0 {
            return Err("`timeout` must be at least 1 second".to_string());
        }
        let sandbox = args.bool_opt("sandbox")?;
        let reason = args.str_opt("reason")?.map(str::trim).filter(|r| !r.is_empty()).map(String::from);
        if sandbox == Some(false) && reason.is_none() {
            return Err("`sandbox: false` needs a `reason`: say in one sentence why the command cannot run in the \
                        sandbox (the user reads it before deciding)"
                .to_string());
        }
        let network = args.bool_opt("network")?;
        let req = CommandRequest { command: command.to_string(), sandbox, reason, network };
        Ok((req, timeout.min(MAX_COMMAND_TIMEOUT_SECS)))
    }
}

/// How one command runs.
struct CommandWay {
    mechanism: Mechanism,
    /// `None`: outside the sandbox.
    limits: Option<Limits>,
    lifted: Vec<String>,
    warning: Option<String>,
    forced: bool,
    allowed: Vec<String>,
    reason: Option<String>,
    network: bool,
}

impl CommandWay {
    /// What the log records; `ran`: the command was started (else nothing was allowed).
    fn record(&self, ran: bool) -> Box<CommandSandbox> {
        Box::new(CommandSandbox {
            sandboxed: self.limits.is_some(),
            mechanism: self.mechanism.name().to_string(),
            network: self.network,
            allowed: if ran { self.allowed.clone() } else { Vec::new() },
            reason: self.reason.clone(),
            hosts: Vec::new(),
            refused_hosts: Vec::new(),
        })
    }
}

/// Creates the commands' private folder (0700) when missing; refuses a link in its place.
fn make_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => return Err(format!("{} is not a folder (a link or a file is in its place)", dir.display())),
        Err(_) => {}
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create the commands' temporary folder {}: {e}", dir.display()))
}

/// The command's first line, shortened, for the one-line approval summary.
fn command_summary(command: &str) -> String {
    let trimmed = command.trim();
    let first = trimmed.lines().next().unwrap_or("");
    let mut s = fs::cut_str(first, 200).to_string();
    if s.len() < trimmed.len() {
        s.push_str(" …");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_one_line() {
        assert_eq!(command_summary("make\nmake test"), "make …");
        assert_eq!(command_summary("  ls -la  "), "ls -la");
    }
}
