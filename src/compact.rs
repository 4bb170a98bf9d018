//! Keeping the context within the model's window.
//!
//! Layer 1: a tool result above the spill threshold is replaced in the context by its spill
//! reference and a preview (the full output stays in `tool-results/`). The runner applies it to
//! every new result; [`Runtime::layer1`] applies it to a resumed history that still holds inline
//! results (logs written by the seed).
//!
//! Layer 2: when the estimated context passes a share of the window, the older history is
//! summarised by the provider and the conversation is replaced by the seed's shape: the summary
//! (user), an acknowledgement (assistant), a boundary reminder (user), then the recent messages kept
//! whole. The replacement goes through `on_replace("compact")`, one atomic line in the log.
//!
//! The runtime keeps no state of its own on disk: what was spilled is in the messages' spill
//! references and the boundary is the reminder message, so a resumed session compacts exactly as
//! the original would have ([`Runtime::open`]).

use tokio::sync::mpsc;

use crate::conversation::{Conversation, Unsaved};
use crate::message::{Message, Role};
use crate::provider::{Provider, ProviderError, Request, Usage};
use crate::session::{self, Context};

pub const SUMMARY_PREFIX: &str = "[Summary of the earlier conversation]";
pub const ACK: &str = "Understood. I have the summary of our earlier conversation and will continue from it.";
pub const BOUNDARY: &str = "[The messages after this point are the most recent part of the conversation, kept whole. Anything older is only in the summary above.]";

const SUMMARY_INSTRUCTION: &str = "Summarise the conversation so far for your own later use: the user's goals, decisions \
    made, files read or changed (with paths), commands run and their outcomes, open questions and the next steps. Be \
    specific and complete; this summary replaces the messages it covers.";

/// Tunables, from the config.
#[derive(Debug, Clone)]
pub struct CompactConfig {
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// Compact when the estimate passes this share of the window.
    pub threshold: f64,
    /// Keep at least this many recent messages whole.
    pub keep_recent: usize,
    pub spill_threshold: usize,
}

impl Default for CompactConfig {
    fn default() -> Self {
        CompactConfig {
            context_window: 200_000,
            threshold: 0.8,
            keep_recent: 8,
            spill_threshold: session::spill::DEFAULT_THRESHOLD,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("compaction: the summary request failed: {0}")]
    Provider(#[source] ProviderError),
    #[error("compaction: {0}")]
    Unsaved(#[source] Unsaved),
    #[error("compaction: {0}")]
    Spill(#[source] session::Error),
}

pub struct Runtime {
    pub config: CompactConfig,
    /// Index of the boundary reminder in the current history, when the history was compacted.
    boundary: Option<usize>,
}

impl Runtime {
    /// The runtime of a (possibly resumed) history: finds the boundary of an earlier compaction.
    pub fn open(config: CompactConfig, messages: &[Message]) -> Runtime {
        let boundary = messages.iter().rposition(|m| m.role == Role::User && m.content == BOUNDARY);
        Runtime { config, boundary }
    }

    pub fn boundary(&self) -> Option<usize> {
        self.boundary
    }

    /// Layer 1 over a whole history: spills inline results above the threshold. Returns the new
    /// history when anything changed.
    pub fn layer1(&self, ctx: &Context, messages: &[Message]) -> Result<Option<Vec<Message>>, CompactError> {
        let mut changed = false;
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            match &m.tool_result {
                Some(r) if session::spill::needs_spill(r, self.config.spill_threshold) => {
                    let spilled = session::spill::spill_if_large(ctx, r, self.config.spill_threshold)
                        .map_err(CompactError::Spill)?;
                    out.push(Message { tool_result: Some(spilled), ..m.clone() });
                    changed = true;
                }
                _ => out.push(m.clone()),
            }
        }
        Ok(changed.then_some(out))
    }

    /// Rough token estimate: four bytes a token, as providers' own rules of thumb.
    pub fn estimate_tokens(messages: &[Message], system: &str) -> usize {
        let bytes: usize = messages
            .iter()
            .map(|m| {
                m.content.len()
                    + m.tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len()).sum::<usize>()
                    + m.tool_result.as_ref().map_or(0, |r| r.content.len())
            })
            .sum();
        (bytes + system.len()) / 4
    }

    pub fn needs_compaction(&self, messages: &[Message], system: &str) -> bool {
        Runtime::estimate_tokens(messages, system) as f64 > self.config.threshold * self.config.context_window as f64
    }

    /// Where the recent part starts: at a typed user message (never inside a tool exchange), leaving
    /// at least `keep_recent` messages. `None` when there is nothing old enough to summarise.
    pub fn split_point(&self, messages: &[Message]) -> Option<usize> {
        let latest = messages.len().checked_sub(self.config.keep_recent)?;
        (1..=latest).rev().find(|&i| messages[i].is_user_text() && messages[i].content != BOUNDARY)
    }

    /// Layer 2: summarises the older history with the provider and replaces the conversation.
    /// Returns what the summary request cost, or `None` when there was nothing to compact.
    pub async fn compact(
        &mut self,
        conv: &Conversation,
        provider: &dyn Provider,
        system: &str,
    ) -> Result<Option<Usage>, CompactError> {
        let messages = conv.snapshot();
        let Some(split) = self.split_point(&messages) else { return Ok(None) };
        let mut older = messages[..split].to_vec();
        older.push(Message::user(SUMMARY_INSTRUCTION));
        let req = Request { system: system.to_string(), messages: older, tools: Vec::new(), max_tokens: 4096 };
        let (tx, _rx) = mpsc::unbounded_channel();
        let summary = provider.stream(&req, tx).await.map_err(CompactError::Provider)?;
        let mut next = vec![
            Message::user(format!("{SUMMARY_PREFIX}\n{}", summary.text.trim())),
            Message::assistant(ACK),
            Message::user(BOUNDARY),
        ];
        next.extend_from_slice(&messages[split..]);
        conv.replace("compact", next).map_err(CompactError::Unsaved)?;
        self.boundary = Some(2);
        Ok(Some(summary.usage))
    }
}
