//! The client's terminals (`terminal/create`, `terminal/output`, `terminal/wait_for_exit`, `terminal/kill`,
//! `terminal/release`): an agent's command run the way our `run_command` runs one ([`Tools::run_terminal`]: in the
//! sandbox, its environment filtered, its process group ended when it is killed or released), its output kept for the
//! agent (the last `outputByteLimit` bytes) and for the chat's log: a tool call that shows a terminal has the
//! terminal's output in its result ([`Terminals::summary`]).
//!
//! The chat draws a terminal's output as it is written ([`Terminals::follow`]: each write and the exit counted, so
//! a tool call showing the terminal is redrawn while it runs, at most every so often).
//!
//! A terminal's command runs on a task of its own; killing or releasing it aborts that task, and dropping the
//! running command ends its process group (or, in the sandbox, its whole namespace). Nothing here waits on the
//! editor: the agent's requests are answered on the host's threads.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::agent::lock;
use crate::tools::{Exit, Tools};

/// The output kept for the agent when it names no limit.
const DEFAULT_LIMIT: usize = 1 << 20;

/// Released terminals whose output a tool call completed after the release may still show in its result.
const KEPT: usize = 32;

/// One chat's terminals, by id.
#[derive(Default)]
pub struct Terminals {
    next: AtomicU64,
    live: Mutex<HashMap<String, Arc<Terminal>>>,
    /// The summaries of the last [`KEPT`] released ones.
    released: Mutex<VecDeque<(String, String)>>,
}

struct Terminal {
    /// The command line as it ran.
    command: String,
    output: Mutex<Output>,
    exit: watch::Sender<Option<Exit>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
    /// Counts the writes to its output and its exit, for the chat to follow ([`Terminals::follow`]).
    writes: watch::Sender<u64>,
}

/// The end of a terminal's output: at most `limit` bytes, cut at a character's start.
struct Output {
    bytes: VecDeque<u8>,
    limit: usize,
    truncated: bool,
}

impl Output {
    fn push(&mut self, data: &[u8]) {
        self.bytes.extend(data);
        if self.bytes.len() > self.limit {
            let cut = self.bytes.len() - self.limit;
            self.bytes.drain(..cut);
            // never half a character: the protocol's output is a string
            while self.bytes.front().is_some_and(|b| b & 0xC0 == 0x80) {
                self.bytes.pop_front();
            }
            self.truncated = true;
        }
    }

    fn text(&mut self) -> String {
        String::from_utf8_lossy(self.bytes.make_contiguous()).into_owned()
    }
}

impl Terminals {
    /// One of the agent's `terminal/*` requests; the result in the protocol's shape, or an error's message.
    pub async fn handle(&self, method: &str, params: &Value, tools: &Arc<Tools>) -> Result<Value, String> {
        if method == "terminal/create" {
            return self.create(params, tools);
        }
        let id = params["terminalId"].as_str().ok_or_else(|| format!("{method}: no terminalId"))?;
        let terminal = lock(&self.live).get(id).cloned().ok_or_else(|| format!("{method}: no terminal {id:?}"))?;
        match method {
            "terminal/output" => {
                let (output, truncated) = {
                    let mut o = lock(&terminal.output);
                    (o.text(), o.truncated)
                };
                let mut answer = json!({ "output": output, "truncated": truncated });
                if let Some(exit) = *terminal.exit.borrow() {
                    answer["exitStatus"] = exit_json(exit);
                }
                Ok(answer)
            }
            "terminal/wait_for_exit" => {
                let mut rx = terminal.exit.subscribe();
                let exit = match rx.wait_for(Option::is_some).await {
                    Ok(e) => (*e).unwrap_or_default(),
                    Err(_) => Exit::default(),
                };
                Ok(exit_json(exit))
            }
            "terminal/kill" => {
                terminal.kill();
                Ok(json!({}))
            }
            "terminal/release" => {
                terminal.kill();
                lock(&self.live).remove(id);
                let mut released = lock(&self.released);
                released.push_back((id.to_string(), terminal.summary()));
                while released.len() > KEPT {
                    released.pop_front();
                }
                Ok(json!({}))
            }
            other => Err(format!("{other} is not served")),
        }
    }

    fn create(&self, params: &Value, tools: &Arc<Tools>) -> Result<Value, String> {
        let command =
            params["command"].as_str().filter(|c| !c.trim().is_empty()).ok_or("terminal/create: no command")?;
        let args: Vec<&str> = params["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        // without arguments the command is a shell line (as agents send `npm test && npm run lint`)
        let line = match args.is_empty() {
            true => command.to_string(),
            false => std::iter::once(command).chain(args).map(quote).collect::<Vec<_>>().join(" "),
        };
        let dir = match params["cwd"].as_str() {
            Some(cwd) => {
                let (abs, rel) = tools.resolve_path(cwd)?;
                if !abs.is_dir() {
                    return Err(format!("terminal/create: the cwd {rel} is not a folder"));
                }
                abs
            }
            None => PathBuf::from(tools.workspace()),
        };
        let env: Vec<(String, String)> = params["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some((v["name"].as_str()?.to_string(), v["value"].as_str().unwrap_or_default().to_string()))
            })
            .collect();
        let limit = params["outputByteLimit"].as_u64().map_or(DEFAULT_LIMIT, |l| l as usize).min(tools.output_cap());
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::SeqCst) + 1);
        let terminal = Arc::new(Terminal {
            command: line.clone(),
            output: Mutex::new(Output { bytes: VecDeque::new(), limit, truncated: false }),
            exit: watch::Sender::new(None),
            task: Mutex::new(None),
            writes: watch::Sender::new(0),
        });
        let tap = {
            let t = terminal.clone();
            Arc::new(move |data: &[u8]| {
                lock(&t.output).push(data);
                t.writes.send_modify(|n| *n += 1);
            })
        };
        let (t, tools) = (terminal.clone(), tools.clone());
        let task = tokio::spawn(async move {
            let (out, exit) = tools.run_terminal(&line, &dir, env, tap).await;
            if exit.is_none() {
                // it did not start, or the sandbox could not be set up: the agent reads why
                lock(&t.output).push(out.content.as_bytes());
            }
            t.exit.send_if_modified(|e| e.is_none() && e.replace(exit.unwrap_or_default()).is_none());
            t.writes.send_modify(|n| *n += 1);
        });
        *lock(&terminal.task) = Some(task.abort_handle());
        lock(&self.live).insert(id.clone(), terminal);
        Ok(json!({ "terminalId": id }))
    }

    /// A terminal's command, output and exit as a tool call's result shows them (live or released).
    pub fn summary(&self, id: &str) -> Option<String> {
        if let Some(t) = lock(&self.live).get(id) {
            return Some(t.summary());
        }
        lock(&self.released).iter().find(|(i, _)| i == id).map(|(_, s)| s.clone())
    }

    /// Terminal `id`'s writes and exit as they happen (a change each time; closed once the terminal is released and
    /// no longer running), if it is live.
    pub fn follow(&self, id: &str) -> Option<watch::Receiver<u64>> {
        lock(&self.live).get(id).map(|t| t.writes.subscribe())
    }

    /// Every terminal ended and forgotten (the chat closes, the agent is gone).
    pub fn release_all(&self) {
        for (_, t) in lock(&self.live).drain() {
            t.kill();
        }
    }
}

impl Drop for Terminals {
    fn drop(&mut self) {
        self.release_all();
    }
}

impl Terminal {
    /// Ends the command (its task aborted: the running command, dropped, ends its process group); its output and
    /// exit stay readable.
    fn kill(&self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
        let killed = Exit { code: None, signal: Some(libc::SIGKILL) };
        if self.exit.send_if_modified(|e| e.is_none() && e.replace(killed).is_none()) {
            self.writes.send_modify(|n| *n += 1);
        }
    }

    fn summary(&self) -> String {
        let (text, truncated) = {
            let mut o = lock(&self.output);
            (o.text(), o.truncated)
        };
        let mut out = format!("$ {}\n", self.command);
        if truncated {
            out.push_str("[… the beginning was cut …]\n");
        }
        out.push_str(&text);
        if !text.is_empty() && !text.ends_with('\n') {
            out.push('\n');
        }
        match *self.exit.borrow() {
            Some(Exit { code: Some(c), .. }) => out.push_str(&format!("[exit code: {c}]")),
            Some(Exit { signal: Some(s), .. }) => out.push_str(&format!("[killed by {}]", signal_name(s))),
            Some(_) => out.push_str("[ended]"),
            None => out.push_str("[still running]"),
        }
        out
    }
}

fn exit_json(exit: Exit) -> Value {
    json!({
        "exitCode": exit.code.and_then(|c| u32::try_from(c).ok()),
        "signal": exit.signal.map(signal_name),
    })
}

fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        other => return format!("signal {other}"),
    };
    name.to_string()
}

/// `s` as one word of a `sh` command line.
fn quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_keeps_its_end_cut_at_a_characters_start() {
        let mut o = Output { bytes: VecDeque::new(), limit: 5, truncated: false };
        o.push(b"ab");
        assert_eq!((o.text(), o.truncated), ("ab".to_string(), false));
        o.push("cdé".as_bytes());
        // "abcdé" is 6 bytes: the cut falls before "b", and nothing is half a character
        assert_eq!((o.text(), o.truncated), ("bcdé".to_string(), true));
        o.push("é".as_bytes());
        assert_eq!(o.text(), "déé");
    }

    #[test]
    fn arguments_are_quoted_for_sh() {
        assert_eq!(quote("ls"), "ls");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
