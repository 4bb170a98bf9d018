//! The workspace's `.mcp.json` (`{"mcpServers": {NAME: {...}}}`, the file Claude Code and others write) and the
//! user's answers about its servers, kept in `.PseudoClaude/mcp-consent.json`.
//!
//! A server of that file is a command from someone else's repository: it runs only once the user said yes for
//! this workspace and this exact definition. An answer is stored as a digest of (workspace, name, definition)
//! keyed with a secret of the user's (`mcp.consent_key`, outside every repository), so a repository cannot ship a
//! "yes" of its own in its `.PseudoClaude/`, and a definition changed since the answer asks again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ServerConfig;

/// The workspace's MCP servers file.
pub const FILE: &str = ".mcp.json";
/// Where the answers are kept, under the workspace.
pub const CONSENT_FILE: &str = ".PseudoClaude/mcp-consent.json";

/// One server of `.mcp.json`: its definition, or why it cannot be used.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub config: Result<ServerConfig, String>,
    /// The digest an answer about this definition is stored under.
    pub digest: String,
}

/// What the user answered about a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Yes,
    No,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ConsentFile {
    #[serde(default)]
    servers: BTreeMap<String, Stored>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    answer: Answer,
    /// The digest of the definition answered about.
    definition: String,
    at: String,
}

/// The servers of the workspace's `.mcp.json`; none when there is no such file. A file that is not JSON of the
/// expected shape is an error naming the problem.
pub fn read(workspace: &Path, key: &[u8]) -> Result<Vec<Entry>, String> {
    let path = workspace.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let root: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not valid JSON: {e}", path.display()))?;
    let Some(servers) = root.get("mcpServers") else { return Ok(Vec::new()) };
    let servers = servers
        .as_object()
        .ok_or_else(|| format!("{}: \"mcpServers\" must be an object of servers by name", path.display()))?;
    Ok(servers
        .iter()
        .map(|(name, def)| {
            let config = parse(name, def);
            let digest = match &config {
                Ok(c) => digest(key, workspace, name, &serde_json::to_value(c).unwrap_or_default()),
                Err(_) => String::new(),
            };
            Entry { name: name.clone(), config, digest }
        })
        .collect())
}

/// A definition as Claude Code writes it: `type` ("stdio", "http", or none) and `${VAR}` / `${VAR:-default}` in
/// the command, arguments and environment (an HTTP server's `url` and `headers` are expanded when it starts,
/// `ServerConfig::transport`).
fn parse(name: &str, def: &serde_json::Value) -> Result<ServerConfig, String> {
    let at = format!("{FILE}: server {name:?}");
    if !super::valid_name(name) {
        return Err(format!(
            "{at}: a server's name is letters, digits, `_` and `-` (no `__`), as its tools are mcp__NAME__TOOL"
        ));
    }
    let obj = def.as_object().cloned().ok_or_else(|| format!("{at}: expected an object"))?;
    match obj.get("type") {
        None => {}
        Some(serde_json::Value::String(t)) if matches!(t.as_str(), "stdio" | "http" | "streamable-http") => {}
        Some(serde_json::Value::String(t)) if t == "sse" => {
            return Err(format!(
                "{at}: the legacy SSE transport (\"type\": \"sse\") is not supported: give the server's streamable \
                 HTTP endpoint (\"type\": \"http\")"
            ));
        }
        Some(other) => return Err(format!("{at}: servers of type {other} are not supported here")),
    }
    let mut config: ServerConfig =
        serde_json::from_value(serde_json::Value::Object(obj)).map_err(|e| format!("{at}: {e}"))?;
    // one expansion rule for every field (super::expand_env): an unset variable without a default fails the
    // server with its name, as Claude Code refuses such a file, rather than running a command with a hole in it
    let expand = |what: &str, s: &str| super::expand_env(s).map_err(|e| format!("{at}: {what}: {e}"));
    config.command = expand("command", &config.command)?;
    config.args = config.args.iter().map(|a| expand("args", a)).collect::<Result<_, _>>()?;
    config.env = config
        .env
        .iter()
        .map(|(k, v)| Ok((k.clone(), expand(&format!("env.{k}"), v)?)))
        .collect::<Result<_, String>>()?;
    Ok(config)
}

/// HMAC-SHA256 (RFC 2104) of the workspace, the name and the definition (its JSON with sorted keys) under `key`.
fn digest(key: &[u8], workspace: &Path, name: &str, def: &serde_json::Value) -> String {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| block.iter().map(|k| k ^ b).collect::<Vec<u8>>();
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    inner.update(workspace.as_os_str().as_encoded_bytes());
    inner.update([0]);
    inner.update(name.as_bytes());
    inner.update([0]);
    inner.update(def.to_string().as_bytes());
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize());
    outer.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The user's secret the answers are keyed with: read from `path`, made (32 random bytes, mode 0600) the first
/// time. Without a path (or when it cannot be made), no secret: answers are keyed by the definition alone.
pub fn key(path: Option<&Path>) -> Vec<u8> {
    let Some(path) = path else { return Vec::new() };
    if let Ok(k) = std::fs::read(path)
        && k.len() >= 32
    {
        return k;
    }
    let k: [u8; 32] = rand::random();
    let made = (|| {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
        f.write_all(&k)?;
        f.sync_all()
    })();
    match made {
        Ok(()) => k.to_vec(),
        // Another editor made it meanwhile: theirs is the one.
        Err(_) => std::fs::read(path).ok().filter(|k| k.len() >= 32).unwrap_or_default(),
    }
}

/// The stored answer about `entry`'s definition; none when never answered or answered about another definition.
pub fn answer(workspace: &Path, entry: &Entry) -> Option<Answer> {
    let file = load(workspace);
    file.servers.get(&entry.name).filter(|s| s.definition == entry.digest && !entry.digest.is_empty()).map(|s| s.answer)
}

/// Keeps `answer` about `entry`'s definition (replacing any answer about the same name).
pub fn remember(workspace: &Path, entry: &Entry, answer: Answer) -> std::io::Result<()> {
    let mut file = load(workspace);
    file.servers.insert(
        entry.name.clone(),
        Stored {
            answer,
            definition: entry.digest.clone(),
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        },
    );
    let text = serde_json::to_string_pretty(&file).map_err(std::io::Error::other)?;
    write_atomic(&consent_path(workspace), format!("{text}\n").as_bytes())
}

/// A temporary file beside `path`, renamed over it: another editor reading the answers sees the old or the new.
/// Not synced: the answer is written on the editor's main loop, which never waits on a sync; a power cut loses at
/// most the last answer, and a server without one is asked about again (never run unasked).
fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    crate::atomic::replace(path, data, crate::atomic::Durable::No, crate::atomic::Mode::Keep)
}

fn consent_path(workspace: &Path) -> PathBuf {
    workspace.join(CONSENT_FILE)
}

/// The answers file; an unreadable or damaged one is no answer (everything is asked again).
fn load(workspace: &Path) -> ConsentFile {
    std::fs::read(consent_path(workspace)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_with_defaults() {
        // SAFETY: a variable only this test reads.
        unsafe { std::env::set_var("PC_MCP_TEST_VAR", "tok") };
        let def = serde_json::json!({
            "command": "${PC_MCP_UNSET_VAR:-run}",
            "args": ["a ${PC_MCP_TEST_VAR} b"],
            "env": {"K": "${PC_MCP_UNSET_VAR:-dflt}/x"},
        });
        let config = parse("s", &def).unwrap();
        assert_eq!((config.command.as_str(), config.args[0].as_str()), ("run", "a tok b"));
        assert_eq!(config.env["K"], "dflt/x");
        let unset = parse("s", &serde_json::json!({"command": "x", "env": {"T": "${PC_MCP_UNSET_VAR}"}}));
        assert_eq!(
            unset.unwrap_err(),
            ".mcp.json: server \"s\": env.T: the environment variable PC_MCP_UNSET_VAR is not set"
        );
        let unclosed = parse("s", &serde_json::json!({"command": "plain ${unclosed"}));
        assert!(unclosed.unwrap_err().contains("command: unclosed ${"));
    }

    #[test]
    fn the_digest_depends_on_key_workspace_name_and_definition() {
        let d = serde_json::json!({"command": "x"});
        let a = digest(b"k1", Path::new("/w"), "s", &d);
        assert_eq!(a.len(), 64);
        assert_ne!(a, digest(b"k2", Path::new("/w"), "s", &d));
        assert_ne!(a, digest(b"k1", Path::new("/v"), "s", &d));
        assert_ne!(a, digest(b"k1", Path::new("/w"), "t", &d));
        assert_ne!(a, digest(b"k1", Path::new("/w"), "s", &serde_json::json!({"command": "y"})));
        assert_eq!(a, digest(b"k1", Path::new("/w"), "s", &d));
    }
}
