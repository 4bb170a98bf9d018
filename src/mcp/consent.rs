//! The consent flow for the servers of the workspace's `.mcp.json`: read once, each in the state the stored answers
//! give it, the question put to the user (`ConsentAsk`, through the editor's outbox), the answer remembered
//! (`workspace.rs` keeps the files) and asked again with `:PseudoMcp consent`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::watch;

use super::start::spawn_start;
use super::{Ctx, Server, Servers, State, lock, new_slot, set_state, workspace};

/// The question before a server of the workspace's `.mcp.json` first runs: answer with [`Servers::answer`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsentAsk {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The names of the variables it sets (their values may be secrets).
    pub env: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// An HTTP server's endpoint (then `command` is empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The names of the headers it sends (their values may be secrets).
    pub headers: Vec<String>,
    /// The `.mcp.json` it is defined in.
    pub file: PathBuf,
}

pub(super) type Asker = Arc<dyn Fn(ConsentAsk) + Send + Sync>;

const DECLINED: &str =
    "not started: you declined this server of the workspace's .mcp.json (:PseudoMcp consent asks again)";

impl Servers {
    /// Reads `.mcp.json` (once) and adds its servers, each in the state the stored answers give it.
    pub fn load(&self) {
        self.loader().load();
    }

    pub(super) fn loader(&self) -> Loader {
        Loader {
            servers: self.servers.clone(),
            loaded: self.loaded.clone(),
            files: self.files.clone(),
            workspace: self.ctx.workspace.clone(),
            key: self.consent_key.clone(),
            changed: self.ctx.changed.clone(),
        }
    }

    /// The user's answer about a server of `.mcp.json`: `yes` (remembered; it starts now if the servers were
    /// started, else at the first chat), `no` (remembered; stopped if running) or `later` (asked again at the
    /// next `ask_again`; nothing waits for it meanwhile).
    pub fn answer(&self, name: &str, answer: &str) -> Result<(), String> {
        self.load();
        let s = self
            .all()
            .into_iter()
            .find(|s| s.name == name && s.entry.is_some())
            .ok_or_else(|| format!("there is no server {name:?} in the workspace's {}", workspace::FILE))?;
        let entry = s.entry.clone().expect("a workspace server");
        let remembered = match answer {
            "yes" | "no" => {
                let a = if answer == "yes" { workspace::Answer::Yes } else { workspace::Answer::No };
                let _files = lock(&self.files);
                workspace::remember(&self.ctx.workspace, &entry, a)
                    .map_err(|e| format!("cannot remember the answer in {}: {e}", workspace::CONSENT_FILE))
            }
            "later" => Ok(()),
            other => return Err(format!("unknown answer {other:?}: use \"yes\", \"no\" or \"later\"")),
        };
        match answer {
            "yes" if s.config.is_some() => {
                let start = self.started.load(Ordering::SeqCst) && lock(&s.slot).client.is_none();
                // straight to `starting` when it starts now: a first chat waiting must not see it settled between
                set_state(&s, |slot| {
                    if slot.client.is_none() {
                        slot.state = if start { State::Starting } else { State::Stopped };
                    }
                    slot.asking = false;
                    slot.declined = false;
                    slot.error = None;
                });
                if start {
                    spawn_start(&self.ctx, s);
                }
            }
            "no" => {
                let client = lock(&s.slot).client.take();
                if let Some(c) = client {
                    c.kill();
                }
                set_state(&s, |slot| {
                    slot.state = State::Stopped;
                    slot.tools.clear();
                    slot.asking = false;
                    slot.declined = true;
                    slot.error = Some(DECLINED.into());
                });
            }
            _ => set_state(&s, |slot| slot.asking = false),
        }
        remembered
    }

    /// Asks again about `name` (any server of `.mcp.json`), or about every one declined or not answered yet.
    /// Returns how many questions were asked; none is an error that says why.
    pub fn ask_again(&self, name: Option<&str>) -> Result<usize, String> {
        self.load();
        let list: Vec<_> = self
            .all()
            .into_iter()
            .filter(|s| s.entry.is_some() && s.config.is_some())
            .filter(|s| match name {
                Some(n) => s.name == n,
                None => {
                    let slot = lock(&s.slot);
                    slot.declined || slot.state == State::AwaitingConsent
                }
            })
            .collect();
        if list.is_empty() {
            return Err(match name {
                Some(n) => {
                    format!("there is no server {n:?} in the workspace's {} (or it cannot be used)", workspace::FILE)
                }
                None => {
                    format!("no server of the workspace's {} was declined or is awaiting an answer", workspace::FILE)
                }
            });
        }
        if lock(&self.asker).is_none() {
            return Err("nothing can ask: the editor's chat is not set up".into());
        }
        for s in &list {
            set_state(s, |slot| {
                if slot.client.is_none() {
                    slot.state = State::AwaitingConsent;
                }
            });
            ask(&self.asker, &self.ctx, s);
        }
        Ok(list.len())
    }
}

/// Reads `.mcp.json` once for a [`Servers`] (a piece of it the start's thread owns).
pub(super) struct Loader {
    servers: Arc<Mutex<Vec<Arc<Server>>>>,
    loaded: Arc<std::sync::atomic::AtomicBool>,
    files: Arc<Mutex<()>>,
    workspace: PathBuf,
    key: Option<PathBuf>,
    changed: Arc<watch::Sender<u64>>,
}

impl Loader {
    /// Adds the servers of `.mcp.json`, the first time.
    pub(super) fn load(&self) {
        let _files = lock(&self.files);
        if self.loaded.load(Ordering::SeqCst) {
            return;
        }
        let key = workspace::key(self.key.as_deref());
        let added: Vec<Arc<Server>> = match workspace::read(&self.workspace, &key) {
            Ok(entries) => {
                let taken: Vec<String> = lock(&self.servers).iter().map(|s| s.name.clone()).collect();
                entries
                    .into_iter()
                    // setup()'s own server of the same name is the one the user chose
                    .filter(|e| !taken.contains(&e.name))
                    .map(|e| {
                        let (state, error, declined) = match &e.config {
                            Err(why) => (State::Failed, Some(why.clone()), false),
                            Ok(_) => match workspace::answer(&self.workspace, &e) {
                                Some(workspace::Answer::Yes) => (State::Stopped, None, false),
                                Some(workspace::Answer::No) => (State::Stopped, Some(DECLINED.to_string()), true),
                                None => (State::AwaitingConsent, None, false),
                            },
                        };
                        let slot = new_slot(state, error);
                        lock(&slot).declined = declined;
                        Arc::new(Server {
                            name: e.name.clone(),
                            config: e.config.clone().ok(),
                            entry: Some(e),
                            slot,
                            changed: self.changed.clone(),
                        })
                    })
                    .collect()
            }
            Err(why) => vec![Arc::new(Server {
                name: workspace::FILE.into(),
                config: None,
                entry: None,
                slot: new_slot(State::Failed, Some(why)),
                changed: self.changed.clone(),
            })],
        };
        lock(&self.servers).extend(added);
        self.loaded.store(true, Ordering::SeqCst);
        self.changed.send_modify(|n| *n += 1);
    }
}

/// Puts the question about `s` to the user (when something can ask): a first chat waits for the answer.
pub(super) fn ask(asker: &Mutex<Option<Asker>>, ctx: &Ctx, s: &Arc<Server>) {
    let Some(asker) = lock(asker).clone() else { return };
    let Some(cfg) = &s.config else { return };
    set_state(s, |slot| slot.asking = true);
    asker(ConsentAsk {
        kind: "mcp_consent",
        name: s.name.clone(),
        command: cfg.command.clone(),
        args: cfg.args.clone(),
        env: cfg.env.keys().cloned().collect(),
        cwd: cfg.cwd.clone(),
        url: cfg.url.clone(),
        headers: cfg.headers.keys().cloned().collect(),
        file: ctx.workspace.join(workspace::FILE),
    });
}
