//! A provider that answers from a script, with no HTTP in between: for the tests whose subject is the agent, its
//! log or its files, not a wire format (the fake servers of `support/mod.rs` are for those). It records every
//! request, answers a compaction's summary request apart from the script, and says "ok" once the script is spent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pseudoclaude::message::ToolCall;
use pseudoclaude::provider::{BoxFuture, Provider, ProviderError, Request, Response, StreamEvent, Usage};
use tokio::sync::mpsc;

/// One scripted answer: its text, then the tool calls it asks for, with the usage it reports; or a hang after the
/// text (the model stalls mid-answer, until the turn is cancelled).
#[derive(Clone, Default)]
pub struct Script {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub usage: Usage,
    pub hang: bool,
}

/// An answer of text alone.
pub fn say(text: &str) -> Script {
    Script { text: text.into(), ..Default::default() }
}

impl Script {
    pub fn calls(self, calls: Vec<ToolCall>) -> Script {
        Script { calls, ..self }
    }
    pub fn usage(self, usage: Usage) -> Script {
        Script { usage, ..self }
    }
    pub fn hang(self) -> Script {
        Script { hang: true, ..self }
    }
}

pub struct Scripted {
    model: String,
    /// The text arrives word by word (a delta each, 1 ms apart), as a model streams, before the answer.
    stream: bool,
    pub answers: Mutex<VecDeque<Script>>,
    pub requests: Mutex<Vec<Request>>,
}

impl Scripted {
    /// Answers whole, as model `scripted-1`.
    pub fn new(answers: Vec<Script>) -> Arc<Scripted> {
        Scripted::with_model("scripted-1", answers)
    }
    /// Answers whole, as `model`.
    pub fn with_model(model: &str, answers: Vec<Script>) -> Arc<Scripted> {
        Arc::new(Scripted {
            model: model.into(),
            stream: false,
            answers: Mutex::new(answers.into()),
            requests: Mutex::default(),
        })
    }
    /// Streams each answer's text word by word first.
    pub fn streaming(answers: Vec<Script>) -> Arc<Scripted> {
        let mut s = Arc::into_inner(Scripted::new(answers)).expect("just made");
        s.stream = true;
        Arc::new(s)
    }
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn stream<'a>(
        &'a self,
        req: &'a Request,
        events: mpsc::UnboundedSender<StreamEvent>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            self.requests.lock().unwrap().push(req.clone());
            // Compaction's summary request is answered apart from the script.
            if req.messages.last().is_some_and(|m| m.content.starts_with("Summarise the conversation")) {
                let text = format!("SUMMARY of {} messages", req.messages.len() - 1);
                return Ok(Response { text, stop_reason: "end_turn".into(), ..Default::default() });
            }
            let s = self.answers.lock().unwrap().pop_front().unwrap_or_else(|| say("ok"));
            if self.stream {
                for w in s.text.split_inclusive(' ') {
                    let _ = events.send(StreamEvent::TextDelta(w.to_string()));
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            if s.hang {
                std::future::pending::<()>().await;
            }
            Ok(Response {
                text: s.text,
                tool_calls: s.calls,
                usage: s.usage,
                stop_reason: "end_turn".into(),
                ..Default::default()
            })
        })
    }
}
