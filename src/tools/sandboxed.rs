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
    DEFAULT_COMMAND_TIMEOUT_SECS, Gate, Gated, MAX_COMMAND_TIMEOUT_SECS, SESSION_TMP_DIR, ToolOutput, Tools,
    blocking_res, command,
};
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
        let way = self.command_way(&req);
        let gate = Gate { lifted: way.lifted.clone(), warning: way.warning.clone(), forced: way.forced };
        let summary = command_summary(&req.command);
        if let Err(mut out) = self.approve_gated(Gated::RunCommand, summary, req.command.clone(), None, gate).await {
            out.sandbox = Some(way.record(false));
            return out;
        }
        let timeout = Duration::from_secs(timeout);
        let dir = self.root.canon().to_path_buf();
        let env = EnvPlan::current(&self.sandbox);
        let Some(limits) = way.limits.clone() else {
            let (mut out, _) = command::run(&dir, &req.command, timeout, self.output_cap, &env, None).await;
            out.sandbox = Some(way.record(true));
            return out;
        };
        let mechanism = way.mechanism;
        let mut limits = limits;
        let mut proxy = None;
        if let Network::Allow(allow) = &limits.network {
            let (port, listener) = if mechanism == Mechanism::Namespaces {
                (sandbox::proxy::NAMESPACE_PORT, None)
            } else {
                match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| Ok((l.local_addr()?.port(), l))) {
                    Ok((port, l)) => (port, Some(l)),
                    Err(e) => {
                        let mut out = ToolOutput::error(format!(
                            "the sandbox's network proxy could not listen, so the command was not run: {e}"
                        ));
                        out.sandbox = Some(way.record(false));
                        return out;
                    }
                }
            };
            limits.proxy_port = Some(port);
            proxy = Some(command::ProxySource { allow: allow.clone(), port, listener });
        }
        let prepared = {
            let limits = limits.clone();
            blocking_res(move |_| {
                make_private_dir(&limits.temp)?;
                sandbox::Plan::new(&limits, mechanism)
            })
            .await
        };
        let plan = match prepared {
            Ok(p) => p,
            Err(e) => {
                let mut out = ToolOutput::error(format!(
                    "the sandbox could not be set up, so the command was not run: {e}. Tell the user; with their \
                     consent you may ask to run it with `sandbox: false` and a `reason`."
                ));
                out.sandbox = Some(way.record(false));
                return out;
            }
        };
        let confined = command::Sandboxed { plan, temp: limits.temp.clone(), proxy };
        let (mut out, contacts) =
            command::run(&dir, &req.command, timeout, self.output_cap, &env, Some(confined)).await;
        let mut blocked = sandbox::blocked_report(&out.content, &limits, mechanism, &dir);
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
        out
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
        let writable = settings.writable.iter().filter_map(|w| w.canonicalize().ok()).collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let (hidden, _holding_the_workspace) =
            sandbox::hidden_paths(home.as_deref(), &settings.deny_read, self.root.canon());
        way.limits = Some(Limits {
            hidden,
            workspace: self.root.canon().to_path_buf(),
            temp: self.command_temp_dir(),
            writable,
            network,
            unix_sockets: settings.unix_sockets,
            proxy_port: None,
        });
        way
    }
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
