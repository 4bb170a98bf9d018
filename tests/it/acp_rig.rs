//! The ACP rig from Rust (support/acp_rig.rs): the real agent (`claude-agent-acp` and the Claude Code it bundles)
//! against the fake Anthropic server run as a child process, driven here by hand-written JSON-RPC lines, the way
//! the core's client tests stand on it. Proves the env, the command and the fake's HTTP script work outside
//! Python: a turn streams the scripted text, asks permission for a Write, writes the file, and the fake saw the
//! tool result and refused nothing.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::acp_rig::{FakeClaudeApi, claude_agent_command, claude_env};

#[test]
fn the_real_agent_streams_asks_and_writes_against_the_fake_run_from_rust() {
    let fake = FakeClaudeApi::start();
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let file = ws.path().join("from_rust.txt");
    fake.push_tools("Writing it.", &[("toolu_w1", "Write", json!({"file_path": file, "content": "rust\n"}))]);
    fake.push_text("All written now.");

    let mut agent = Command::new(claude_agent_command())
        .env_clear()
        .envs(claude_env(&fake.base_url(), home.path()))
        .current_dir(ws.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start claude-agent-acp");
    let mut stdin = agent.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    let stdout = agent.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(serde_json::from_str(&line).expect("a JSON-RPC line")).is_err() {
                break;
            }
        }
    });
    let mut send = |msg: Value| writeln!(stdin, "{msg}").and_then(|_| stdin.flush()).expect("write to the agent");
    let mut updates = Vec::new();
    let mut asked = Vec::new();
    // answers the agent's requests (permission: allow once) and keeps its updates until the answer to `id`
    let mut wait = |send: &mut dyn FnMut(Value), id: u64| -> Value {
        loop {
            let msg = rx.recv_timeout(Duration::from_secs(120)).expect("the agent went silent");
            if msg["id"] == id && msg.get("method").is_none() {
                assert!(msg.get("error").is_none(), "request {id} failed: {msg}");
                return msg["result"].clone();
            }
            match msg["method"].as_str() {
                Some("session/update") => updates.push(msg["params"]["update"].clone()),
                Some("session/request_permission") => {
                    asked.push(msg["params"]["toolCall"]["toolCallId"].clone());
                    let allow = msg["params"]["options"].as_array().unwrap().iter().find(|o| o["kind"] == "allow_once");
                    let option = allow.expect("an allow_once option")["optionId"].clone();
                    send(json!({"jsonrpc": "2.0", "id": msg["id"], "result":
                        {"outcome": {"outcome": "selected", "optionId": option}}}));
                }
                _ => {}
            }
        }
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}}));
    assert_eq!(wait(&mut send, 1)["protocolVersion"], 1);
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": ws.path(), "mcpServers": []}}));
    let sid = wait(&mut send, 2)["sessionId"].clone();
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": sid,
        "prompt": [{"type": "text", "text": "Write the file."}]}}));
    assert_eq!(wait(&mut send, 3)["stopReason"], "end_turn");
    // the agent does not exit when its stdin closes: end its process group (Claude Code is its child)
    unsafe { libc::kill(-(agent.id() as i32), libc::SIGTERM) };
    let _ = agent.wait();

    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Writing it.All written now.");
    assert_eq!(asked, vec![json!("toolu_w1")]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "rust\n");
    assert_eq!(fake.errors(), Vec::<Value>::new());
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    let result = &sent[1]["messages"].as_array().unwrap().last().unwrap()["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_w1");
}
