//! One turn: send the conversation, stream the answer, record it, run the tools, record their
//! results, and loop until the model answers without tool calls or the user cancels.
//!
//! Every step is recorded through the conversation's hooks before the next one starts, so the log
//! always ends on something a resume accepts. Cancellation at any moment leaves it consistent:
//! - while streaming: the text the user saw is recorded as the assistant's message (marked as
//!   interrupted); tool calls not yet complete are dropped, never recorded without results;
//! - a stream that fails: the text shown is recorded as an interrupted answer, as a crash would
//!   leave it (see [`super::checkpoint`]: the text is checkpointed while it streams).
//! - while tools run: the running tool is stopped and every call of that message without a result
//!   gets an honest one ("cancelled by the user"), so no call is left unanswered.
//!
//! A write failure stops the turn with an error; the conversation stays unsaved in memory until the
//! next write succeeds (see [`crate::conversation`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use tokio::sync::{Notify, mpsc};

use super::Agent;
use super::checkpoint::Checkpoints;
use crate::attachment::{self, Attachment};
use crate::conversation::Unsaved;
use crate::git;
use crate::message::{Message, ToolCall, ToolResult, now};
use crate::provider::{Request, StreamEvent, Usage};
use crate::session::words::{CANCELLED_RESULT, INTERRUPTED_NOTE};
use crate::session::{Entry, spill};

/// What a turn reports, in order, to whoever drives it (the Neovim bridge).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The turn started; the user's message is in the log.
    UserRecorded {
        text: String,
    },
    TextDelta {
        text: String,
    },
    /// A piece of the model's thinking, before its answer.
    ThinkingDelta {
        text: String,
    },
    /// The thinking is over (the answer starts, or the stream ended): how long it took, as the message records it.
    ThinkingDone {
        ms: u64,
    },
    ToolCallStarted {
        id: String,
        name: String,
    },
    /// An ACP agent's tool call under way, as it stands now: sent when the agent announces it and at each update
    /// until it completes or fails, then [`Event::AssistantRecorded`] with the call and [`Event::ToolResult`] take
    /// its place (the log holds the call only with its result). `arguments` are the ones the log will hold.
    ToolCallLive {
        id: String,
        name: String,
        arguments: serde_json::Value,
        /// The agent's `pending` or `in_progress`.
        status: String,
        /// Its content so far (text, diffs, terminal output), as its result will read.
        output: String,
    },
    /// The assistant message is complete and recorded.
    AssistantRecorded {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// `content` is what the screen shows ([`Event::tool_result`]): a large output's start, `cut_bytes` and `lines`
    /// (counted on the whole) saying what it was.
    ToolResult {
        id: String,
        name: String,
        content: String,
        is_error: bool,
        #[serde(skip_serializing_if = "is_zero")]
        cut_bytes: usize,
        #[serde(skip_serializing_if = "is_zero")]
        lines: usize,
    },
    Retrying {
        attempt: u32,
        wait_ms: u64,
        reason: String,
    },
    /// Older history was summarised.
    Compacted,
    /// A provider reported what a request cost: the session's totals so far, and their price when
    /// `pricing` names every model that reported usage.
    Usage {
        usage: Usage,
        cost: Option<f64>,
    },
    /// Whether everything in memory is in the log.
    Saved {
        ok: bool,
        error: Option<String>,
    },
    Error {
        message: String,
    },
    Cancelled,
    /// A line for the chat that is no message: an MCP server that failed to start.
    Notice {
        text: String,
    },
    /// An ACP agent's plan, as one line (`plan: [x] read; [~] write; [ ] test`): drawn as it is, not as a warning.
    Plan {
        text: String,
    },
    /// The turn is over (after `Error` and `Cancelled` too).
    TurnDone {
        stop_reason: String,
    },
}

impl Event {
    /// A tool's result as the screen gets it: a large output cut to [`crate::display::MAX_DISPLAY_BYTES`] here, on
    /// the core's thread, so the editor never converts, counts or splits a megabyte on its main loop (an ACP
    /// terminal's 1 MiB output took 60 ms there).
    pub fn tool_result(id: String, name: String, content: &str, is_error: bool) -> Event {
        let (content, cut_bytes, lines) = crate::display::shown_output(content, crate::display::MAX_DISPLAY_BYTES);
        Event::ToolResult { id, name, content, is_error, cut_bytes, lines }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A cancellation signal shared between the UI and a running turn.
#[derive(Debug, Default, Clone)]
pub struct Cancel(Arc<(AtomicBool, Notify)>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    pub fn cancel(&self) {
        self.0.0.store(true, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.0.load(Ordering::SeqCst)
    }

    /// Resolves once cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.1.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Why a turn stopped early (ours, or an ACP agent's: [`crate::acp::AcpChat`]).
pub(crate) enum Stop {
    Cancelled,
    Failed(String),
    Unsaved(Unsaved),
}

impl From<Unsaved> for Stop {
    fn from(e: Unsaved) -> Self {
        Stop::Unsaved(e)
    }
}

/// A turn's end as the editor hears it: why it stopped early, if it did, then [`Event::TurnDone`] with the reason.
pub(crate) fn report_stop(outcome: Result<String, Stop>, events: &mpsc::UnboundedSender<Event>) {
    let stop_reason = match outcome {
        Ok(reason) => reason,
        Err(Stop::Cancelled) => {
            let _ = events.send(Event::Cancelled);
            "cancelled".into()
        }
        Err(Stop::Failed(message)) => {
            let _ = events.send(Event::Error { message });
            "error".into()
        }
        Err(Stop::Unsaved(e)) => {
            let _ = events.send(Event::Saved { ok: false, error: Some(e.0.to_string()) });
            let _ = events.send(Event::Error { message: e.to_string() });
            "unsaved".into()
        }
    };
    let _ = events.send(Event::TurnDone { stop_reason });
}

impl Agent {
    /// Runs one turn for `text`. Events go to `events`; the function returns when the turn is over.
    pub async fn turn(&self, text: &str, events: mpsc::UnboundedSender<Event>, cancel: Cancel) {
        self.turn_with(text, &[], events, cancel).await
    }

    /// [`Agent::turn`], with context from the editor attached to the message (see [`crate::attachment`]).
    pub async fn turn_with(
        &self,
        text: &str,
        attachments: &[Attachment],
        events: mpsc::UnboundedSender<Event>,
        cancel: Cancel,
    ) {
        let was_unsaved = self.conversation.is_unsaved();
        // `@SERVER:URI` resources are read from their servers first (on these threads, each within mcp.timeout).
        let read = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            read = self.tools.read_resources(attachments) => Some(read),
        };
        let Some(attachments) = read else {
            let _ = events.send(Event::Cancelled);
            let _ = events.send(Event::TurnDone { stop_reason: "cancelled".into() });
            return;
        };
        let attachments = attachments.as_slice();
        let text = match self.compose(text, attachments) {
            Ok(t) => t,
            Err(message) => {
                let _ = events.send(Event::Error { message });
                let _ = events.send(Event::TurnDone { stop_reason: "error".into() });
                return;
            }
        };
        let outcome = self.turn_steps(&text, &events, &cancel, was_unsaved).await;
        report_stop(outcome, &events);
    }

    /// The message the model receives: the text and its attachments, large ones spilled.
    fn compose(&self, text: &str, attachments: &[Attachment]) -> Result<String, String> {
        if attachments.is_empty() {
            return Ok(text.to_string());
        }
        let threshold = self.config.spill_threshold;
        let needs_spill = attachments.iter().any(|a| a.text.as_ref().is_none_or(|t| t.len() > threshold));
        let ctx = if needs_spill { Some(self.log.ensure().map_err(|e| format!("cannot attach: {e}"))?) } else { None };
        let read = |p: &str| self.tools.read_attachment(p);
        let spill = |body: &str| -> Result<(crate::message::SpillRef, String), String> {
            let ctx = ctx.as_ref().ok_or("no session to spill to")?;
            let r = spill::write(ctx, body.as_bytes()).map_err(|e| e.to_string())?;
            let at = ctx.dir.join(&r.path);
            let at = at.strip_prefix(&self.config.workspace).unwrap_or(&at).to_string_lossy().into_owned();
            Ok((r, at))
        };
        Ok(attachment::compose(text, attachments, &read, &spill, threshold))
    }

    async fn turn_steps(
        &self,
        text: &str,
        events: &mpsc::UnboundedSender<Event>,
        cancel: &Cancel,
        was_unsaved: bool,
    ) -> Result<String, Stop> {
        self.commit_pending()?;
        // Told once, with the message the new instructions first apply to.
        let text = match self.refresh_instructions().await {
            Some(note) => format!("{text}\n\n{note}"),
            None => text.to_string(),
        };
        let text = text.as_str();
        // The files as they are before the message: a rewind to it returns them here.
        self.files.add_user_message(Message::user(text)).await?;
        if was_unsaved {
            let _ = events.send(Event::Saved { ok: true, error: None });
        }
        let _ = events.send(Event::UserRecorded { text: text.to_string() });
        self.record_git().await;
        // A first chat waits for the MCP servers still starting (each bounded by `mcp.timeout`), so the
        // model is offered their tools; a cancel does not wait for them.
        self.settling.store(true, Ordering::SeqCst);
        let settled = tokio::select! {
            biased;
            _ = cancel.cancelled() => false,
            _ = self.tools.mcp_settled() => true,
        };
        self.settling.store(false, Ordering::SeqCst);
        if !settled {
            return Err(Stop::Cancelled);
        }
        for text in self.tools.mcp_notices() {
            let _ = events.send(Event::Notice { text });
        }
        // The whole turn with one provider: a model switched meanwhile applies from the next turn.
        let provider = self.provider();
        loop {
            self.maybe_compact(events).await?;
            let req = Request {
                system: self.system(),
                messages: self.conversation.snapshot(),
                tools: self.tools.specs(),
                max_tokens: 8192,
            };
            let (tx, mut rx) = mpsc::unbounded_channel();
            let mut seen = Seen::default();
            let mut checkpoints = Checkpoints::new(self.log.clone(), self.config.checkpoint_every);
            let mut tick = checkpoints.tick().map(|every| {
                let mut t = tokio::time::interval(every);
                t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                t
            });
            let stream = provider.stream(&req, tx);
            tokio::pin!(stream);
            let response = loop {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => {
                        while let Ok(ev) = rx.try_recv() { forward(ev, &mut seen, events); }
                        seen.thought(events);
                        checkpoints.settle().await;
                        let seen = seen.text;
                        if !seen.trim().is_empty() {
                            self.conversation.add_assistant(format!("{seen}\n{INTERRUPTED_NOTE}"))?;
                        }
                        return Err(Stop::Cancelled);
                    }
                    Some(ev) = rx.recv() => {
                        let boundary = matches!(ev, StreamEvent::ToolCallStarted { .. });
                        forward(ev, &mut seen, events);
                        if boundary { checkpoints.offer(&seen.text, true).await; }
                    }
                    _ = next_tick(&mut tick) => {
                        checkpoints.offer(&seen.text, false).await;
                    }
                    r = &mut stream => {
                        while let Ok(ev) = rx.try_recv() { forward(ev, &mut seen, events); }
                        break r;
                    }
                }
            };
            let thinking_ms = seen.thought(events);
            let seen = seen.text;
            // Nothing may land after the message that supersedes the checkpoints.
            checkpoints.settle().await;
            let response = match response {
                Ok(r) => {
                    self.record_usage(provider.model(), &r.usage, events);
                    r
                }
                Err(e) => {
                    // The user read this text and its checkpoints are in the log: keep memory and the
                    // log saying the same thing, an interrupted answer.
                    if !seen.trim().is_empty() {
                        self.conversation.add(Message::assistant_interrupted(seen, now()))?;
                    }
                    return Err(Stop::Failed(e.to_string()));
                }
            };
            let answer = Message {
                thinking: response.thinking,
                thinking_ms,
                model: provider.model().to_string(),
                ..Message::assistant_tool_calls(response.text.clone(), response.tool_calls.clone())
            };
            if response.tool_calls.is_empty() {
                self.conversation.add(answer)?;
                let _ = events.send(Event::AssistantRecorded { text: response.text, tool_calls: Vec::new() });
                return Ok(response.stop_reason);
            }
            let calls = response.tool_calls.clone();
            self.conversation.add(answer)?;
            let _ = events.send(Event::AssistantRecorded { text: response.text, tool_calls: calls.clone() });
            self.run_tools(&calls, events, cancel).await?;
        }
    }

    /// Runs the calls in order, recording each result; on cancel, answers the rest honestly.
    async fn run_tools(
        &self,
        calls: &[ToolCall],
        events: &mpsc::UnboundedSender<Event>,
        cancel: &Cancel,
    ) -> Result<(), Stop> {
        for (i, call) in calls.iter().enumerate() {
            let paths = self.call_paths(call);
            let begun = paths.clone().and_then(|p| self.files.begin_call(p));
            let output = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                out = self.tools.run(call) => Some(out),
            };
            let Some(output) = output else {
                for c in &calls[i..] {
                    self.record_result(c, CANCELLED_RESULT.to_string(), true, None, events)?;
                }
                return Err(Stop::Cancelled);
            };
            let content = self.keep_blobs(output.content, output.blobs)?;
            // What the call did to the files, before its result and in the same write: a crash loses neither
            // alone.
            let checkpoint = match paths {
                Some(only) => self.files.after_call(&call.id, only, begun).await,
                None => None,
            };
            let recorded = self.record_result(call, content, output.is_error, output.sandbox, events);
            if let Some(record) = checkpoint {
                self.files.settle_checkpoint(record, recorded.is_ok());
            }
            recorded?;
        }
        Ok(())
    }

    /// An MCP tool's images and audio, each kept as a spilled file and named by a line in the text.
    fn keep_blobs(&self, mut content: String, blobs: Vec<crate::mcp::Blob>) -> Result<String, Stop> {
        if blobs.is_empty() {
            return Ok(content);
        }
        let ctx = self.log.ensure().map_err(|e| Stop::Failed(format!("cannot keep a tool's image: {e}")))?;
        for (n, blob) in blobs.iter().enumerate() {
            let line = match spill::write(&ctx, &blob.bytes) {
                Ok(r) => format!("[{} {}, {} bytes, kept in {}]", kind_of(&blob.mime), blob.mime, r.bytes, r.path),
                Err(e) => format!("[{} {}, {} bytes, not kept: {e}]", kind_of(&blob.mime), blob.mime, blob.bytes.len()),
            };
            content = content.replacen(&crate::mcp::blob_mark(n), &line, 1);
        }
        Ok(content)
    }

    fn record_result(
        &self,
        call: &ToolCall,
        content: String,
        is_error: bool,
        sandbox: Option<Box<crate::message::CommandSandbox>>,
        events: &mpsc::UnboundedSender<Event>,
    ) -> Result<(), Stop> {
        let result = ToolResult { tool_call_id: call.id.clone(), content, is_error, spill: None, sandbox };
        // Layer 1 at once: the model sees a preview of a large output, the full one stays on disk.
        let result = match self.log.context() {
            Some(ctx) => spill::spill_if_large(&ctx, &result, self.config.spill_threshold)
                .map_err(|e| Stop::Unsaved(Unsaved::new(e)))?,
            None => result,
        };
        let shown = result.content.clone();
        self.conversation.add_tool_result(result)?;
        let _ = events.send(Event::tool_result(call.id.clone(), call.name.clone(), &shown, is_error));
        Ok(())
    }

    /// Records the workspace's git branch and commit when they are not what the log last recorded
    /// (the session's first turn, a checkout or a commit since). Read on a blocking thread: a few
    /// small files, but a slow disk must not hold up the runtime. Outside a repository, nothing.
    async fn record_git(&self) {
        if let Some(w) = &self.config.worktree
            && !self.worktree_logged.load(std::sync::atomic::Ordering::Relaxed)
            && self.log.append_meta(Entry::meta_worktree(w.clone(), now())).is_ok()
        {
            self.worktree_logged.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // A worktree chat's: its branch, which the picker shows.
        let workspace = self.config.root().to_path_buf();
        let Ok(Some(head)) = tokio::task::spawn_blocking(move || git::head(&workspace)).await else { return };
        let mut last = self.git.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_ref() == Some(&head) {
            return;
        }
        // A failed write leaves `last` as it was, so the next turn tries again; the messages' own
        // writes report the disk's trouble.
        if self.log.append_meta(Entry::meta_git(head.clone(), now())).is_ok() {
            *last = Some(head);
        }
    }

    /// Records what a request cost (a `usage` entry) and tells the editor the session's new totals.
    /// Nothing when the provider reported nothing.
    fn record_usage(&self, model: &str, usage: &Usage, events: &mpsc::UnboundedSender<Event>) {
        if usage.is_zero() {
            return;
        }
        let model = model.to_string();
        let _ = self.log.append_meta(Entry::usage(&model, *usage, now()));
        let all = {
            let mut all = self.usage.lock().unwrap_or_else(|p| p.into_inner());
            all.add(&model, usage);
            all.clone()
        };
        let _ = events.send(Event::Usage { usage: all.total(), cost: all.cost(&self.config.pricing) });
    }

    async fn maybe_compact(&self, events: &mpsc::UnboundedSender<Event>) -> Result<(), Stop> {
        let provider = self.provider();
        let mut rt = self.compact.lock().await;
        if let Some(ctx) = self.log.context() {
            let messages = self.conversation.snapshot();
            if let Some(spilled) = rt.layer1(&ctx, &messages).map_err(|e| Stop::Failed(e.to_string()))? {
                self.conversation.replace("spill", spilled)?;
            }
        }
        let system = self.system();
        if rt.needs_compaction(&self.conversation.snapshot(), &system) {
            let compacted = rt
                .compact(&self.conversation, provider.as_ref(), &system)
                .await
                .map_err(|e| Stop::Failed(e.to_string()))?;
            if let Some(usage) = compacted {
                self.record_usage(provider.model(), &usage, events);
                let _ = events.send(Event::Compacted);
            }
        }
        Ok(())
    }
}

/// The next tick, or never when there is no interval (checkpoints are off).
async fn next_tick(tick: &mut Option<tokio::time::Interval>) {
    match tick {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// What an answer streamed so far: its text (the checkpoints') and when its thinking started and ended.
#[derive(Default)]
struct Seen {
    text: String,
    thinking_since: Option<std::time::Instant>,
    thinking_ms: Option<u64>,
}

impl Seen {
    /// Ends the thinking, if it started and is not over yet (telling the editor how long it took); its length
    /// in milliseconds, 0 when there was none.
    fn thought(&mut self, events: &mpsc::UnboundedSender<Event>) -> u64 {
        if let (Some(since), None) = (self.thinking_since, self.thinking_ms) {
            let ms = (since.elapsed().as_millis() as u64).max(1);
            self.thinking_ms = Some(ms);
            let _ = events.send(Event::ThinkingDone { ms });
        }
        self.thinking_ms.unwrap_or(0)
    }
}

fn forward(ev: StreamEvent, seen: &mut Seen, events: &mpsc::UnboundedSender<Event>) {
    let out = match ev {
        StreamEvent::TextDelta(t) => {
            seen.thought(events);
            seen.text.push_str(&t);
            Event::TextDelta { text: t }
        }
        StreamEvent::ThinkingDelta(t) => {
            seen.thinking_since.get_or_insert_with(std::time::Instant::now);
            Event::ThinkingDelta { text: t }
        }
        StreamEvent::ToolCallStarted { id, name } => {
            seen.thought(events);
            Event::ToolCallStarted { id, name }
        }
        StreamEvent::Retrying { attempt, wait, reason } => {
            Event::Retrying { attempt, wait_ms: wait.as_millis() as u64, reason }
        }
    };
    let _ = events.send(out);
}

/// "image", "audio" or "file", from a MIME type.
fn kind_of(mime: &str) -> &'static str {
    match mime.split('/').next() {
        Some("image") => "image",
        Some("audio") => "audio",
        _ => "file",
    }
}
