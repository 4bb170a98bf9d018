//! The agent's exports: the Lua chat drives a [`Host`] through these, and hears back through one
//! libuv async handle.
//!
//! Turns run on the host's tokio threads. When they have something to say, the host wakes the
//! async handle; its callback (on Neovim's main thread, where libuv's loop calls it) schedules the
//! Lua handler given to `agent_setup`, which calls `agent_drain` and renders everything queued.
//! Wake-ups merge, so one call of the handler may see many messages; none is ever lost because the
//! queue, not the wake-up, holds them.

use std::cell::RefCell;
use std::sync::Arc;

use nvim_oxi::libuv::AsyncHandle;
use nvim_oxi::{Function, Object};

use super::{Args, BridgeError, BridgeResult, CallbackPoint, export, guarded_callback, test_panic_point};
use crate::agent::Agent;
use crate::agent::chat::Driver;
use crate::agent::host::{ChatId, Host, HostConfig};
use crate::session::fork;

struct Installed {
    host: Host,
    _wake: AsyncHandle,
}

thread_local! {
    // Exports run on Neovim's main thread only, so the host lives there.
    static HOST: RefCell<Option<Installed>> = const { RefCell::new(None) };
    static HANDLER: RefCell<Option<Function<(), ()>>> = const { RefCell::new(None) };
}

fn with_host<T>(f: impl FnOnce(&Host) -> BridgeResult<T>) -> BridgeResult<T> {
    HOST.with(|h| match h.borrow().as_ref() {
        Some(i) => f(&i.host),
        None => Err(BridgeError::msg("the agent is not set up: call agent_setup first")),
    })
}

/// The ACP agents of `setup({ agents })` (empty before the host is set up: the built-in ones then stand alone).
pub(super) fn agents_config() -> std::collections::BTreeMap<String, crate::acp::AgentSpec> {
    HOST.with(|h| h.borrow().as_ref().map(|i| i.host.config().agents.clone()).unwrap_or_default())
}

/// The agent of the live chat whose session is `id`, when the host is set up and one holds it (main thread only,
/// like every export): a name or pin of that session goes through its writer.
pub(super) fn live_agent(id: &str) -> Option<Arc<Agent>> {
    HOST.with(|h| {
        h.borrow()
            .as_ref()
            .and_then(|i| i.host.agents().into_iter().map(|(_, a)| a).find(|a| a.current().is_some_and(|c| c.id == id)))
    })
}

/// The chat an export names in its argument `index` (nil: the current chat).
fn chat_arg(a: &Args, index: usize) -> BridgeResult<Option<ChatId>> {
    a.get::<Option<ChatId>>(index)
}

/// `agent_fork_async(index, callback, chat?)`: forks the chat at message `index` (1-based, in the
/// history the agent buffer shows, a pending stale reminder included) on a worker thread;
/// `callback(true, {id, messages, forked_from})`. The chat's session is not touched.
fn fork_async(a: &Args) -> BridgeResult<u64> {
    let index: usize = a.get(0)?;
    let callback: super::jobs::Callback = a.function(1)?;
    let chat = chat_arg(a, 2)?;
    let (driver, workspace) = with_host(|h| Ok((h.driver(chat), h.config().workspace.clone())))?;
    let driver = driver.ok_or_else(|| BridgeError::msg("there is no chat to fork: send a message first"))?;
    let source =
        driver.session().ok_or_else(|| BridgeError::msg("this chat has no session yet: send a message first"))?;
    let what = format!("the fork of session {}", source.id);
    super::jobs::spawn_write("agent_fork_async", what, callback, move || {
        // Copied out under the history's lock, written after: a fork's sync never holds up the chat.
        let (history, len, model) = match driver.clone().ours() {
            Some(agent) => {
                let (history, len) = agent.with_messages(|m| {
                    let end = fork::whole_exchanges(m, index.min(m.len()));
                    (m[..end.max(index.min(m.len()))].iter().map(|x| (*x).clone()).collect::<Vec<_>>(), m.len())
                });
                (history, len, agent.provider().model().to_string())
            }
            // an ACP agent's chat: the fork is that agent's too (its first start forks the agent's session, or tells
            // it our transcript)
            None => {
                let history = driver.messages();
                let len = history.len();
                (history, len, driver.model().1)
            }
        };
        if index == 0 || index > len {
            return Err(BridgeError::msg(format!(
                "message {index} is out of range: the chat has {len} message(s), numbered 1 to {len}"
            )));
        }
        Ok(fork::create(&workspace, &source, &history, index, &model, driver.agent_meta().as_ref())?)
    })
}

/// The configuration, a table like every other argument (its empty maps left out: a Lua table cannot tell one
/// from an empty list; every key has a default).
/// The options of a rewind, a table: `code`, `conversation` (both default true), `modified` (paths open with
/// unsaved changes), `force` (conflicts to overwrite), `dry_run`.
#[derive(serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RewindArgs {
    code: bool,
    conversation: bool,
    modified: Vec<String>,
    force: Vec<String>,
    dry_run: bool,
}

impl Default for RewindArgs {
    fn default() -> Self {
        RewindArgs { code: true, conversation: true, modified: Vec::new(), force: Vec::new(), dry_run: false }
    }
}

fn rewind_options(a: &Args, index: usize) -> BridgeResult<crate::rewind::RewindOptions> {
    let r: RewindArgs = super::table_arg(a, index).map_err(|e| BridgeError::msg(format!("bad rewind options: {e}")))?;
    Ok(crate::rewind::RewindOptions {
        code: r.code,
        conversation: r.conversation,
        modified: r.modified,
        force: r.force,
        dry_run: r.dry_run,
    })
}

/// The chat's agent (ours or an ACP one), when no turn runs in it: a rewind must not race one.
fn idle_driver(chat: Option<ChatId>, what: &str) -> BridgeResult<Arc<dyn Driver>> {
    with_host(|h| {
        if h.status(chat)?.busy {
            return Err(BridgeError::msg(format!(
                "cannot {what} while the agent is answering: cancel the turn first (<C-c>)"
            )));
        }
        h.driver(chat).ok_or_else(|| BridgeError::msg(format!("there is nothing to {what}: send a message first")))
    })
}

fn no_checkpoints(driver: &dyn Driver) -> BridgeError {
    BridgeError::msg(format!(
        "the agent {:?} keeps no checkpoints of the files: nothing to rewind",
        driver.agent_name()
    ))
}

/// `agent_rewind_async(index, opts, callback, chat?)`: [`Driver::rewind`] on a worker thread; `callback(true, report)`.
fn rewind_async(a: &Args) -> BridgeResult<u64> {
    let index: usize = a.get(0)?;
    let opts = rewind_options(a, 1)?;
    let callback: super::jobs::Callback = a.function(2)?;
    let driver = idle_driver(chat_arg(a, 3)?, "rewind")?;
    super::jobs::spawn("agent_rewind_async", None, callback, move || {
        driver.rewind(index, &opts).ok_or_else(|| no_checkpoints(driver.as_ref()))
    })
}

/// `agent_undo_rewind_async(opts, callback, chat?)`: [`Driver::undo_rewind`] on a worker thread.
fn undo_rewind_async(a: &Args) -> BridgeResult<u64> {
    let opts = rewind_options(a, 0)?;
    let callback: super::jobs::Callback = a.function(1)?;
    let driver = idle_driver(chat_arg(a, 2)?, "undo the rewind")?;
    super::jobs::spawn("agent_undo_rewind_async", None, callback, move || {
        driver.undo_rewind(&opts).ok_or_else(|| no_checkpoints(driver.as_ref()))
    })
}

/// What `:PseudoRewind` lists: the current session's changes per turn and the undo of the last rewind.
#[derive(serde::Serialize)]
struct RewindPoints {
    turns: Vec<crate::rewind::TurnChanges>,
    /// The last rewind (its id and unix time), undoable until the next message.
    undo: Option<UndoPoint>,
}

#[derive(serde::Serialize)]
struct UndoPoint {
    id: String,
    at: i64,
}

/// What a chat's agent offers (`agent_offers`).
#[derive(serde::Serialize)]
struct Offers {
    agent: Option<String>,
    commands: Vec<serde_json::Value>,
    modes: serde_json::Value,
    /// `{current, available: [{id, name}]}`: the models an ACP agent lets the user choose; `null`: none.
    models: serde_json::Value,
}

fn config_from(a: &Args, index: usize) -> BridgeResult<HostConfig> {
    super::table_arg::<HostConfig>(a, index).map_err(|e| BridgeError::msg(format!("bad configuration: {e}")))
}

/// Creates the host on first use; later calls replace the handler and the configuration.
fn setup(a: &Args) -> BridgeResult<()> {
    let handler: super::LuaFn<(), ()> = a.function(0)?;
    let config = config_from(a, 1)?;
    // The sandbox's probe runs commands: never on the editor's loop, and before the first one needs it.
    std::thread::spawn(|| {
        let _ = crate::sandbox::support();
    });
    // the one it replaces is freed from Lua's registry (nvim-oxi's `Function` has no `Drop`)
    if let Some(old) = HANDLER.with(|h| h.borrow_mut().replace(handler.keep())) {
        old.remove_from_lua_registry();
    }
    HOST.with(|h| -> BridgeResult<()> {
        let mut slot = h.borrow_mut();
        if slot.is_none() {
            let wake = AsyncHandle::new(|| {
                guarded_callback("the agent's wake-up", || {
                    test_panic_point(CallbackPoint::Wakeup);
                    nvim_oxi::schedule(|_| {
                        guarded_callback("the agent's event delivery", || {
                            test_panic_point(CallbackPoint::Scheduled);
                            HANDLER.with(|h| {
                                if let Some(f) = h.borrow().as_ref() {
                                    // The handler is Lua's own (pcall'd by nvim-oxi); its errors stay there.
                                    let _ = f.call(());
                                }
                            })
                        })
                    });
                })
            })
            .map_err(|e| BridgeError::msg(format!("cannot create the event handle: {e}")))?;
            let sender = wake.clone();
            let host = Host::new(Box::new(move || {
                let _ = sender.send();
            }))?;
            // chats can run ACP agents (src/acp/, which the host's floor does not know)
            host.set_drivers(Arc::new(crate::acp::AcpDrivers));
            *slot = Some(Installed { host, _wake: wake });
        }
        slot.as_ref().expect("installed").host.configure(config);
        Ok(())
    })
}

pub(super) fn exports() -> Vec<(&'static str, Object)> {
    vec![
        export("agent_setup", setup),
        // How commands are confined here (`:checkhealth`): probed once per process, a few milliseconds
        // the first time; `agent_setup` has it probed on a thread of its own, so it is usually ready.
        export("sandbox_support", |_| Ok(crate::sandbox::support().clone())),
        export("agent_configure", |a| {
            let c = config_from(a, 0)?;
            with_host(|h| {
                h.configure(c);
                Ok(())
            })
        }),
        // Every call about a chat takes the chat's number last; nil is the current chat.
        export("agent_send", |a| {
            let text: String = a.get(0)?;
            // A list of attachment tables (nil or `{}`: none), like every argument.
            let attachments = super::table_arg::<Vec<crate::attachment::Attachment>>(a, 1)
                .map_err(|e| BridgeError::msg(format!("bad attachments: {e}")))?;
            let chat = chat_arg(a, 2)?;
            with_host(|h| Ok(h.send_with(chat, &text, attachments)?))
        }),
        export("agent_cancel", |a| {
            let chat = chat_arg(a, 0)?;
            with_host(|h| Ok(h.cancel_chat(chat)?))
        }),
        export("agent_approve", |a| {
            let (id, answer): (u64, String) = (a.get(0)?, a.get(1)?);
            with_host(|h| Ok(h.approve(id, &answer)?))
        }),
        export("agent_approve_hunks", |a| {
            let (id, accepted): (u64, Vec<usize>) = (a.get(0)?, a.get(1)?);
            with_host(|h| Ok(h.approve_hunks(id, accepted)?))
        }),
        export("agent_buffer_state", |a| {
            let (id, state): (u64, String) = (a.get(0)?, a.get(1)?);
            with_host(|h| Ok(h.buffer_state(id, &state)?))
        }),
        export("agent_buffer_text", |a| {
            let (id, text): (u64, Option<String>) = (a.get(0)?, a.get(1)?);
            with_host(|h| Ok(h.buffer_text(id, text)?))
        }),
        export("agent_resume_async", |a| {
            let id: String = a.get(0)?;
            let chat = chat_arg(a, 1)?;
            with_host(|h| Ok(h.resume_async(chat, &id)?))
        }),
        export("agent_history_slice", |a| {
            let (to, max_messages, budget): (usize, usize, usize) = (a.get(0)?, a.get(1)?, a.get(2)?);
            let chat = chat_arg(a, 3)?;
            // As JSON: `vim.json.decode` builds the tables several times faster than nvim-oxi's
            // object-by-object conversion.
            with_host(|h| super::bulk(&h.history_slice(chat, to, max_messages, budget)))
        }),
        export("agent_fork_async", fork_async),
        export("agent_set_model", |a| {
            let model = a.get::<String>(0)?;
            let chat = chat_arg(a, 1)?;
            with_host(|h| Ok(h.set_model(chat, &model)?))
        }),
        export("agent_rewind_async", rewind_async),
        export("agent_undo_rewind_async", undo_rewind_async),
        export("agent_rewind_points", |a| {
            let chat = chat_arg(a, 0)?;
            let driver = with_host(|h| Ok(h.driver(chat)))?;
            let points = match driver {
                Some(a) => {
                    RewindPoints { turns: a.changes(), undo: a.undo_info().map(|(id, at)| UndoPoint { id, at }) }
                }
                None => RewindPoints { turns: Vec::new(), undo: None },
            };
            super::bulk(&points)
        }),
        export("agent_new_chat", |a| {
            let chat = chat_arg(a, 0)?;
            with_host(|h| Ok(h.new_chat(chat)?))
        }),
        export("agent_current", |a| {
            let chat = chat_arg(a, 0)?;
            with_host(|h| Ok(h.current(chat)))
        }),
        // the whole history: bulk data, as JSON text (bridge/mod.rs, "How values cross")
        export("agent_messages", |a| {
            let chat = chat_arg(a, 0)?;
            with_host(|h| super::bulk(&h.messages(chat)))
        }),
        // `messages({ on_done })`: the history copied and written as JSON on a worker thread, in chunks Lua decodes
        // one per main-loop step (10,000 messages at once is over a frame)
        export("agent_messages_async", |a| {
            let callback: super::jobs::Callback = a.function(0)?;
            let chat = chat_arg(a, 1)?;
            let driver = with_host(|h| Ok(h.driver(chat)))?;
            super::jobs::spawn("agent_messages_async", None, callback, move || {
                let messages = driver.map(|d| d.messages()).unwrap_or_default();
                Ok(super::parts::hold_chunks(super::bulk_chunks(&messages, super::CHUNK_BYTES)?))
            })
        }),
        export("agent_status", |a| {
            let chat = chat_arg(a, 0)?;
            with_host(|h| Ok(h.status(chat)?))
        }),
        // The registry of chats: open one (its own configuration, or nil: the host's), make one current, close one,
        // list them, find the one a session is live in.
        // `agent_chat_open(config?, agent?)`: with `agent`, a chat with that ACP agent (`config`, else the host's)
        export("agent_chat_open", |a| {
            let agent: Option<String> = a.get(1)?;
            let config = match a.get::<Option<Object>>(0)? {
                Some(_) => Some(config_from(a, 0)?),
                None => None,
            };
            if let Some(name) = agent {
                return with_host(|h| Ok(h.open_acp_chat(&name, config)?));
            }
            with_host(|h| Ok(h.open_chat(config)))
        }),
        export("agent_chat_focus", |a| {
            let chat: ChatId = a.get(0)?;
            with_host(|h| Ok(h.focus(chat)?))
        }),
        export("agent_chat_close", |a| {
            let chat = chat_arg(a, 0)?;
            with_host(|h| Ok(h.close_chat(chat)?))
        }),
        export("agent_chats", |_| with_host(|h| Ok(h.chats()))),
        // `:PseudoMode MODE`: the ACP agent's mode (`session/set_mode`); the outcome is a line in the chat
        export("agent_set_mode", |a| {
            let mode: String = a.get(0)?;
            let chat = chat_arg(a, 1)?;
            with_host(|h| Ok(h.set_mode(chat, &mode)?))
        }),
        // what the chat's agent offers: its name, slash commands and modes (`{ agent, commands, modes }`)
        export("agent_offers", |a| {
            let chat = chat_arg(a, 0)?;
            with_host(|h| {
                let driver = h.driver(chat);
                Ok(Offers {
                    // an ACP chat's agent is named before it starts: `:PseudoModel` then completes none of ours
                    agent: h.agent_name(chat),
                    commands: driver.as_ref().map(|d| d.commands()).unwrap_or_default(),
                    modes: driver.as_ref().map(|d| d.modes()).unwrap_or_default(),
                    models: driver.as_ref().map(|d| d.models()).unwrap_or_default(),
                })
            })
        }),
        // `:checkhealth`: each ACP agent, its command line, whether it is found, the version it reported
        export("agent_acp_agents", |_| {
            with_host(|h| {
                let c = h.config();
                Ok(crate::acp::found(&c.agents, c.agent.as_deref()))
            })
        }),
        export("agent_chat_live", |a| {
            let id: String = a.get(0)?;
            with_host(|h| Ok(h.live(&id)))
        }),
        // `mcp.status()`: each MCP server's state, tools and last error
        export("agent_mcp_status", |_| with_host(|h| Ok(h.mcp_status()))),
        // `@SERVER:URI` completion: the running servers' resources, from memory
        export("agent_mcp_resources", |_| with_host(|h| Ok(h.mcp_resources()))),
        export("agent_drain", |_| with_host(|h| Ok(h.drain()))),
        // `mcp.consent` answers: (name, "yes"|"no"|"later")
        export("agent_mcp_consent", |a| {
            let (name, answer): (String, String) = (a.get(0)?, a.get(1)?);
            with_host(|h| Ok(h.mcp_consent(&name, &answer)?))
        }),
        // `:PseudoMcp consent [NAME]`: how many questions were asked
        export("agent_mcp_ask_again", |a| {
            let name: Option<String> = a.get(0)?;
            with_host(|h| Ok(h.mcp_ask_again(name.as_deref())?))
        }),
        // at VimLeavePre: the session closed, the MCP servers stopped with their process groups
        export("agent_close", |_| {
            HOST.with(|h| {
                if let Some(i) = h.borrow().as_ref() {
                    i.host.shutdown();
                }
            });
            Ok(())
        }),
    ]
}
