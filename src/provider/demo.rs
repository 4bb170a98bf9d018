//! The offline demo: the default when no API key is configured, so a fresh install shows the whole
//! loop (a streamed answer, a tool call, its result, the answer after it) without a network. It is
//! deterministic and says plainly what it is.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, Provider, ProviderError, Request, Response, StreamEvent, Usage};
use crate::message::{Message, ToolCall};

#[derive(Debug, Default)]
pub struct Demo {
    /// Pause between streamed words; zero in tests.
    pub word_delay: Duration,
}

impl Demo {
    pub fn new(word_delay: Duration) -> Demo {
        Demo { word_delay }
    }
}

pub const INTRO: &str = "This is the offline demo provider of pseudoclaude (no API key is set), not a real model.";

impl Provider for Demo {
    fn name(&self) -> &str {
        "demo"
    }

    fn model(&self) -> &str {
        "demo"
    }

    fn stream<'a>(
        &'a self,
        req: &'a Request,
        events: UnboundedSender<StreamEvent>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let last = req.messages.last();
            let (text, tool_calls) = match last.and_then(|m| m.tool_result.as_ref()) {
                None => {
                    let asked = last.map(|m| m.content.trim()).unwrap_or_default();
                    let text = format!(
                        "{INTRO} You said: \"{}\". Let me show you a tool call: I will list the files of your workspace.",
                        first_line(asked)
                    );
                    let n = req.messages.iter().filter(|m| !m.tool_calls.is_empty()).count();
                    (text, vec![ToolCall::new(format!("demo-{}", n + 1), "list_files", serde_json::json!({}))])
                }
                Some(result) => {
                    let count = result.content.lines().filter(|l| !l.trim().is_empty()).count();
                    let text = format!(
                        "The tool answered with {count} line(s). That was the whole loop: your message, a streamed \
                         answer, a tool call, its result, and this reply, each saved to the session log as it \
                         happened. To talk to a real model, set ANTHROPIC_API_KEY (or OPENAI_API_KEY) and choose a \
                         provider in setup(); see :help pseudoclaude-config."
                    );
                    (text, Vec::new())
                }
            };
            for (i, word) in text.split(' ').enumerate() {
                if !self.word_delay.is_zero() {
                    tokio::time::sleep(self.word_delay).await;
                }
                let piece = if i == 0 { word.to_string() } else { format!(" {word}") };
                let _ = events.send(StreamEvent::TextDelta(piece));
            }
            for c in &tool_calls {
                let _ = events.send(StreamEvent::ToolCallStarted { id: c.id.clone(), name: c.name.clone() });
            }
            let stop_reason = if tool_calls.is_empty() { "end_turn" } else { "tool_use" }.to_string();
            // Made up, but deterministic (four bytes a token), so that the totals show something offline.
            let usage = Usage {
                input_tokens: estimate(&req.messages),
                output_tokens: (text.len() / 4) as u64,
                ..Usage::default()
            };
            Ok(Response { text, tool_calls, stop_reason, usage })
        })
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(80).collect()
}

fn estimate(msgs: &[Message]) -> u64 {
    msgs.iter().map(|m| m.content.len() as u64 / 4).sum()
}
