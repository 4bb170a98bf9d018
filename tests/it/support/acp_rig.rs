//! The real ACP agent for the Rust tests, offline: `claude-agent-acp` (installed by scripts/ensure-acp; it runs the
//! Claude Code it bundles) pointed at the fake Anthropic server of `tests/e2e/fake_llm.py`, run as a child process
//! and scripted over HTTP, so the Rust and the e2e tests share one fake of what Claude Code asks (see
//! tests/e2e/acp_rig.py: `HEAD /`, `POST /v1/messages?beta=true` streamed, adaptive thinking).
//!
//! ```ignore
//! let fake = FakeClaudeApi::start();
//! fake.push_text("Hello");                                    // the answer to the next model call
//! fake.push_tools("", &[("toolu_1", "Bash", json!({"command": "echo hi", "description": "say hi"}))]);
//! let home = tempfile::tempdir().unwrap();                    // the agent's HOME: its ~/.claude store
//! let env = claude_env(&fake.base_url(), home.path());        // the agent's whole environment
//! let cmd = claude_agent_command();                           // .deps/acp/node_modules/.bin/claude-agent-acp
//! // ... run the agent with exactly `env` (env_clear first) ...
//! assert_eq!(fake.errors(), Vec::<Value>::new());              // nothing refused
//! let sent = fake.requests();                                 // the bodies the model got
//! ```

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `.deps/acp`, once scripts/ensure-acp made sure the pinned agent is there (once per run: the tests run on
/// parallel threads, and two installs into one folder would race).
pub fn acp_deps() -> PathBuf {
    static DEPS: OnceLock<PathBuf> = OnceLock::new();
    DEPS.get_or_init(|| {
        let out = Command::new(root().join("scripts/ensure-acp")).output().expect("run scripts/ensure-acp");
        assert!(out.status.success(), "scripts/ensure-acp failed: {}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
    .clone()
}

/// The agent's command (a node script with its shebang; it takes no arguments).
pub fn claude_agent_command() -> PathBuf {
    acp_deps().join("node_modules/.bin/claude-agent-acp")
}

/// The agent's whole environment (run it with `env_clear()` then these): PATH and the locale from ours, `home` as
/// HOME, the fake's URL and a key, IS_SANDBOX=1 (as root) and what keeps Claude Code off the network (the same as
/// `OFFLINE` in tests/e2e/acp_rig.py).
pub fn claude_env(base_url: &str, home: &Path) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| matches!(k.as_str(), "PATH" | "LANG" | "LC_ALL" | "TERM" | "TMPDIR"))
        .collect();
    for (k, v) in [
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "1"),
        ("IS_SANDBOX", "1"),
        ("ANTHROPIC_API_KEY", "sk-ant-fake-key"),
        ("ANTHROPIC_BASE_URL", base_url),
    ] {
        env.insert(k.into(), v.into());
    }
    env.insert("HOME".into(), home.display().to_string());
    env
}

/// `python3 tests/e2e/fake_llm.py anthropic` as a child: the fake Anthropic server on a free port of 127.0.0.1.
/// Killed when dropped.
pub struct FakeClaudeApi {
    child: Child,
    pub port: u16,
}

impl FakeClaudeApi {
    pub fn start() -> Self {
        let mut child = Command::new("python3")
            .arg(root().join("tests/e2e/fake_llm.py"))
            .arg("anthropic")
            .stdin(Stdio::piped()) // it exits when this closes (the test process gone)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3 tests/e2e/fake_llm.py anthropic");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the fake's first line");
        let hello: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("the fake said {line:?}: {e}"));
        let port = hello["port"].as_u64().expect("a port") as u16;
        FakeClaudeApi { child, port }
    }

    /// What ANTHROPIC_BASE_URL must be (no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// One scripted answer, as `FakeAnthropic.push` takes it (fields `text`, `thinking`, `tools` as
    /// `[[id, name, input]]`, `delay`, `pieces`, `hang`, `status`, `error`), or a list of them.
    pub fn push(&self, answer: Value) {
        let (status, body) = self.http("POST", "/_fake/push", Some(&answer));
        assert_eq!(status, 200, "the fake refused the script {answer}: {body}");
    }

    pub fn push_text(&self, text: &str) {
        self.push(json!({"text": text}));
    }

    /// An answer calling tools: `(id, name, input)`, ids like `toolu_1`.
    pub fn push_tools(&self, text: &str, calls: &[(&str, &str, Value)]) {
        let tools: Vec<Value> = calls.iter().map(|(id, name, input)| json!([id, name, input])).collect();
        self.push(json!({"text": text, "tools": tools}));
    }

    /// Every Messages API request body it got, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.get_list("/_fake/requests")
    }

    /// Why it refused a request, each: a test asserts this is empty.
    pub fn errors(&self) -> Vec<Value> {
        self.get_list("/_fake/errors")
    }

    fn get_list(&self, path: &str) -> Vec<Value> {
        let (status, body) = self.http("GET", path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body.as_array().cloned().unwrap_or_else(|| panic!("GET {path}: not a list: {body}"))
    }

    fn http(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let data = body.map(|b| b.to_string()).unwrap_or_default();
        let mut sock = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the fake");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            data.len()
        );
        sock.write_all(head.as_bytes()).and_then(|_| sock.write_all(data.as_bytes())).expect("send to the fake");
        let mut raw = Vec::new();
        sock.read_to_end(&mut raw).expect("read the fake's answer");
        let text = String::from_utf8(raw).expect("UTF-8 from the fake");
        let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status");
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }
}

impl Drop for FakeClaudeApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
