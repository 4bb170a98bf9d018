//! The sandbox `run_command` runs in: a command may write only inside the workspace (never its `.git/`
//! nor `.PseudoClaude/`), its session's private `$TMPDIR` and the folders `writable` names, and has no
//! network, unless the user lifts it for one command. Reading stays open.
//!
//! Two mechanisms, the stronger first, chosen once per process by [`support`]:
//!
//! - **namespaces**: in the child, before `exec`, a new user, mount and (network off) network namespace.
//!   `.git` and `.PseudoClaude` are bind-mounted read-only over themselves (the private `$TMPDIR` beneath
//!   `.PseudoClaude` stays writable: a bind of its own, made first), and a fresh network namespace has no
//!   interface up: no TCP, no UDP, no bind, while Unix sockets on the file system still work. Then Landlock
//!   allows writes only beneath the workspace, `$TMPDIR` and `writable`; it also forbids `mount`/`umount`,
//!   so the command cannot lift the read-only binds it was given, although it holds capabilities in its
//!   user namespace.
//! - **landlock** (no user namespace allowed, as under AppArmor's user-namespace limit): Landlock alone,
//!   with its TCP rules (ABI 4) and a seccomp filter refusing sockets other than Unix ones (UDP and the rest).
//!   With an allowlist the proxy listens on the host's loopback and Landlock can only open its port, on every
//!   host: the core checks each `connect` then ([`guard`]), so that only the proxy's address is reached.
//!   Landlock grants rights to a whole hierarchy, so the workspace's `.git` and `.PseudoClaude` cannot be
//!   excepted from it: they are not protected, and the approval and `:checkhealth` say so.
//!
//! Without Landlock there is no sandbox: every command asks, whatever `approve.run_command` says
//! (fails closed). `PSEUDOCLAUDE_SANDBOX_SIMULATE=none|landlock` makes the probe report that, for tests.
//!
//! Everything that allocates (the Landlock ruleset, paths as C strings, the seccomp program) is built in
//! the parent ([`Plan::new`]); the child only makes raw system calls ([`spawn`]), as `fork` requires.

mod blocked;
pub mod env;
pub mod guard;
pub mod proxy;
mod seccomp;
mod spawn;
mod waiter;

pub use crate::message::CommandSandbox;
pub use blocked::blocked_report;
pub use spawn::{Plan, Spawned, landlock_abi, receive_fd, receive_listener};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The `sandbox` table of `setup()`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub enabled: bool,
    /// Network for every command: off, on, or only through the allowlist proxy.
    pub network: Network,
    /// More folders commands may write in (absolute paths).
    pub writable: Vec<PathBuf>,
    /// Commands may connect to Unix sockets (the editor's own server among them).
    pub unix_sockets: bool,
    /// Variables passed on purpose, and set, in every command's environment.
    pub env: EnvSettings,
    /// More paths that read as empty inside the sandbox (absolute), besides [`secret_stores`].
    pub deny_read: Vec<PathBuf>,
    /// The provider's key variable, removed from every command's environment whatever its name (set
    /// by the agent from the provider's configuration, not an option of its own).
    #[serde(skip)]
    pub provider_key_env: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: true,
            network: Network::Off,
            writable: Vec::new(),
            unix_sockets: false,
            env: EnvSettings::default(),
            deny_read: Vec::new(),
            provider_key_env: None,
        }
    }
}

/// `sandbox.network`: `false`, `true`, or `{ allow = { "crates.io", "*.npmjs.org", "127.0.0.1:8080" } }`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(from = "NetworkSetting")]
pub enum Network {
    #[default]
    Off,
    On,
    /// Only these hosts (`name`, `*.suffix`, with an optional `:port`), through the core's proxy.
    Allow(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NetworkSetting {
    Flag(bool),
    Allow(AllowList),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowList {
    allow: Vec<String>,
}

impl From<NetworkSetting> for Network {
    fn from(s: NetworkSetting) -> Network {
        match s {
            NetworkSetting::Flag(false) => Network::Off,
            NetworkSetting::Flag(true) => Network::On,
            NetworkSetting::Allow(a) => Network::Allow(a.allow),
        }
    }
}

impl Network {
    /// Every destination open.
    pub fn is_open(&self) -> bool {
        *self == Network::On
    }
}

/// `sandbox.env = { keep = { "NPM_TOKEN" }, set = { CI = "1" } }`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvSettings {
    /// Names kept although they look secret.
    pub keep: Vec<String>,
    /// Set in every command's environment (after the scrub: a secret set here reaches the command).
    pub set: std::collections::BTreeMap<String, String>,
}

/// How commands can be confined on this system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// User, mount and network namespaces, then Landlock.
    Namespaces,
    /// Landlock (and seccomp) only: `.git` and `.PseudoClaude` not protected.
    Landlock,
    /// No sandbox at all.
    Unavailable,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Namespaces => "namespaces+landlock",
            Mechanism::Landlock => "landlock",
            Mechanism::Unavailable => "none",
        }
    }
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Support {
    pub mechanism: Mechanism,
    /// The kernel's Landlock ABI version; 0 without Landlock.
    pub landlock_abi: i32,
    /// Why the stronger mechanisms are not available (empty when namespaces work).
    pub why: String,
}

/// The sentence the approval and `:checkhealth` show when `.git` and `.PseudoClaude` are not protected.
pub const UNPROTECTED: &str = "this system allows no user namespace, so the sandbox cannot keep commands from \
                               changing .git/ and .PseudoClaude/ (the rest of it holds)";
/// The words of the approval on a system without any sandbox.
pub const NO_SANDBOX: &str = "no sandbox on this system";
impl Support {
    /// A system without a sandbox (for tests, and what the probe reports when nothing works).
    pub fn unavailable(why: impl Into<String>) -> Support {
        Support { mechanism: Mechanism::Unavailable, landlock_abi: 0, why: why.into() }
    }

    /// Landlock without namespaces (for tests, and what the probe reports without a user namespace).
    pub fn landlock_only(abi: i32, why: impl Into<String>) -> Support {
        Support { mechanism: Mechanism::Landlock, landlock_abi: abi, why: why.into() }
    }

    pub fn available(&self) -> bool {
        self.mechanism != Mechanism::Unavailable
    }

    /// Whether `.git/` and `.PseudoClaude/` are kept read-only.
    pub fn protects_repository(&self) -> bool {
        self.mechanism == Mechanism::Namespaces
    }

    /// One plain sentence for the approval prompt when the sandbox is weaker than promised, or absent.
    pub fn warning(&self) -> Option<String> {
        match self.mechanism {
            Mechanism::Namespaces => None,
            Mechanism::Landlock if self.landlock_abi < 6 => Some(format!(
                "{UNPROTECTED}; and Landlock below ABI 6 has no signal scope: a process the command moves out of its \
                 process group (setsid) can outlive it"
            )),
            Mechanism::Landlock => Some(UNPROTECTED.to_string()),
            Mechanism::Unavailable => {
                Some(format!("{NO_SANDBOX} ({}): the command runs with all your rights", self.why))
            }
        }
    }
}

/// The environment variable that makes [`support`] report a weaker system (tests).
pub const SIMULATE_ENV: &str = "PSEUDOCLAUDE_SANDBOX_SIMULATE";

/// How commands can be confined here, probed once per process (a command run in each mechanism, the
/// stronger first). Takes a few milliseconds the first time: call it off the editor's main loop.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| match std::env::var(SIMULATE_ENV).as_deref() {
        Ok("none") => Support::unavailable(format!("simulated by ${SIMULATE_ENV}")),
        Ok("landlock") => Support::landlock_only(landlock_abi(), format!("simulated by ${SIMULATE_ENV}")),
        _ => probe(),
    })
}

/// Runs `true` under each mechanism in a scratch folder; the first that works is the one in use.
pub fn probe() -> Support {
    if cfg!(not(target_os = "linux")) {
        return Support::unavailable("the sandbox needs Linux (Landlock)");
    }
    let abi = landlock_abi();
    if abi < 1 {
        return Support::unavailable("the kernel has no Landlock (Linux 5.13 or later, with lsm=landlock)");
    }
    let scratch = match tempfile_dir() {
        Ok(d) => d,
        Err(e) => return Support::unavailable(format!("cannot make a scratch folder to test it in: {e}")),
    };
    let run = |mechanism: Mechanism| -> Result<(), String> {
        let limits = Limits {
            workspace: scratch.clone(),
            temp: scratch.join(".PseudoClaude/tmp"),
            writable: Vec::new(),
            network: Network::Off,
            unix_sockets: false,
            hidden: Vec::new(),
            proxy_port: None,
        };
        let plan = Plan::new(&limits, mechanism)?;
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "exit 0"]).current_dir(&scratch).stdin(std::process::Stdio::null());
        let status = if plan.spawns_itself() {
            plan.spawn(&cmd, false).map(|s| s.wait_blocking())
        } else {
            plan.install(&mut cmd);
            cmd.status()
        };
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("the test command ended with {s}")),
            Err(e) => Err(e.to_string()),
        }
    };
    let _ = std::fs::create_dir_all(scratch.join(".git"));
    let _ = std::fs::create_dir_all(scratch.join(".PseudoClaude/tmp"));
    let result = match run(Mechanism::Namespaces) {
        Ok(()) => Support { mechanism: Mechanism::Namespaces, landlock_abi: abi, why: String::new() },
        Err(ns) => match run(Mechanism::Landlock) {
            Ok(()) => Support::landlock_only(abi, format!("no user namespace ({ns})")),
            Err(ll) => {
                Support { landlock_abi: abi, ..Support::unavailable(format!("Landlock could not be applied: {ll}")) }
            }
        },
    };
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn tempfile_dir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    for n in 0..100u32 {
        let d = base.join(format!("pseudoclaude-sandbox-probe-{}-{n}", std::process::id()));
        match std::fs::create_dir(&d) {
            Ok(()) => return d.canonicalize(),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free name"))
}

/// What one sandboxed command may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The workspace (canonical).
    pub workspace: PathBuf,
    /// The private `$TMPDIR` (created before the command runs).
    pub temp: PathBuf,
    /// More writable folders (those that exist).
    pub writable: Vec<PathBuf>,
    pub network: Network,
    /// Unix sockets allowed (`sandbox.unix_sockets`).
    pub unix_sockets: bool,
    /// What reads as empty: [`hidden_paths`].
    pub hidden: Vec<PathBuf>,
    /// With an allowlist: the port of the proxy as the command reaches it on 127.0.0.1 (in its own network
    /// namespace, [`proxy::NAMESPACE_PORT`]; Landlock alone, the host's port the proxy listens on).
    pub proxy_port: Option<u16>,
}

/// The secret stores beneath `$HOME` that read as empty inside the sandbox (besides `sandbox.deny_read` and
/// the plugin's own state folder, which the editor adds to it).
pub const SECRET_STORES: [&str; 15] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
];

/// The paths to hide from a command: [`SECRET_STORES`] beneath `home` and `deny_read`, those that exist,
/// links resolved (a bind or a rule applies to what a link leads to). One that holds the workspace is
/// left out (hiding it would hide the workspace): returned second, for the note.
pub fn hidden_paths(home: Option<&Path>, deny_read: &[PathBuf], workspace: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let stores = home.into_iter().flat_map(|h| SECRET_STORES.iter().map(move |s| h.join(s)));
    let (mut hidden, mut kept) = (Vec::new(), Vec::new());
    for p in stores.chain(deny_read.iter().cloned()) {
        let Ok(real) = p.canonicalize() else { continue };
        if workspace.starts_with(&real) {
            kept.push(real);
        } else if !hidden.contains(&real) {
            hidden.push(real);
        }
    }
    (hidden, kept)
}

/// The folders beneath the workspace a command may not change (with namespaces).
pub const PROTECTED: [&str; 2] = [".git", ".PseudoClaude"];

impl Limits {
    /// Whether a write to `path` (absolute) is one the sandbox allows.
    pub fn allows_write(&self, path: &Path, mechanism: Mechanism) -> bool {
        if path.starts_with(&self.temp) || self.writable.iter().any(|w| path.starts_with(w)) {
            return true;
        }
        if ["/dev/null", "/dev/zero", "/dev/full"].iter().any(|d| path == Path::new(d)) {
            return true;
        }
        if !path.starts_with(&self.workspace) {
            return false;
        }
        mechanism != Mechanism::Namespaces || !PROTECTED.iter().any(|p| path.starts_with(self.workspace.join(p)))
    }

    /// One sentence for the model: what the command could do.
    pub fn describe(&self, mechanism: Mechanism) -> String {
        let mut places = vec![format!("in the workspace {}", self.workspace.display())];
        if mechanism == Mechanism::Namespaces {
            places[0].push_str(" (but not in its .git/ or .PseudoClaude/)");
        }
        places.push(format!("in $TMPDIR ({})", self.temp.display()));
        for w in &self.writable {
            places.push(format!("in {}", w.display()));
        }
        let network = match &self.network {
            Network::On => "open".to_string(),
            Network::Off => "off (no TCP or UDP connection, no bind)".to_string(),
            Network::Allow(hosts) => format!("only {} through a proxy (sandbox.network)", hosts.join(", ")),
        };
        let unix = if self.unix_sockets {
            "Unix sockets were open (sandbox.unix_sockets): it could drive the editor itself"
        } else {
            "no Unix socket could be opened (the editor's, an ssh agent's, the Docker daemon's)"
        };
        let mut s = format!("it could write only {}; the network was {network}; {unix}", places.join(", "));
        if !self.hidden.is_empty() {
            let names: Vec<String> = self.hidden.iter().map(|p| p.display().to_string()).collect();
            s.push_str(&format!("; these read as empty (secret stores, sandbox.deny_read): {}", names.join(", ")));
            if mechanism == Mechanism::Landlock {
                s.push_str(" (and the folders above them cannot be listed)");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_allowed_beneath_the_workspace_but_not_its_protected_folders() {
        let l = Limits {
            workspace: "/w".into(),
            temp: "/w/.PseudoClaude/sessions/s/tmp".into(),
            writable: vec!["/opt/x".into()],
            network: Network::Off,
            unix_sockets: false,
            hidden: Vec::new(),
            proxy_port: None,
        };
        assert!(l.allows_write(Path::new("/w/src/a.rs"), Mechanism::Namespaces));
        assert!(!l.allows_write(Path::new("/w/.git/HEAD"), Mechanism::Namespaces));
        assert!(l.allows_write(Path::new("/w/.git/HEAD"), Mechanism::Landlock));
        assert!(!l.allows_write(Path::new("/w/.PseudoClaude/sessions/s/conversation.jsonl"), Mechanism::Namespaces));
        assert!(l.allows_write(Path::new("/w/.PseudoClaude/sessions/s/tmp/x"), Mechanism::Namespaces));
        assert!(l.allows_write(Path::new("/opt/x/y"), Mechanism::Namespaces));
        assert!(!l.allows_write(Path::new("/tmp/y"), Mechanism::Namespaces));
        assert!(!l.allows_write(Path::new("/w2/y"), Mechanism::Namespaces));
    }
}
