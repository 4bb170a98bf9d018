//! The offline demo: the default when no API key is configured, so a fresh install shows the whole
//! loop (a streamed answer, a tool call, its result, the answer after it) without a network. It is
//! deterministic and says plainly what it is. Asked to edit or write something, it offers a small,
//! deterministic change to [`DEMO_FILE`] instead (a `write_file` call), so the approval and the
//! diff review can be tried offline: the first time creates the file, each later time changes two
//! of its lines (two change blocks to accept or reject).

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

/// The workspace file the demo's edits write.
pub const DEMO_FILE: &str = "pseudoclaude-demo.txt";

/// The demo file's text at its `n`th edit.
pub fn demo_file_text(n: usize) -> String {
    format!(
        "This file is written by the offline demo provider of pseudoclaude.\n\
         Edit number {n}.\n\
         \n\
         Each time you ask the demo to edit or write something, it proposes a new version of this file:\n\
         two lines change, so the review shows two changes you can accept or reject one by one\n\
         (see :help pseudoclaude-review).\n\
         \n\
         Last edited by edit number {n}.\n"
    )
}

/// Whether the user asks for a change: a word starting with "edit" or "writ" (edit, edits, write, writing…).
fn asks_for_an_edit(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric()).any(|w| {
        let w = w.to_lowercase();
        w.starts_with("edit") || w.starts_with("writ")
    })
}

/// Whether the user asks to run something: the word "run" (run, running, runs).
fn asks_to_run(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric()).any(|w| {
        let w = w.to_lowercase();
        w == "run" || w == "runs" || w == "running"
    })
}

/// What the demo runs to show the sandbox: a write in `$TMPDIR` (allowed) and one in the home folder
/// (refused in the sandbox; outside it, the file is removed at once).
pub const DEMO_COMMAND: &str = "echo \"TMPDIR=$TMPDIR\"; echo demo > \"$TMPDIR/demo.txt\" && echo 'wrote in $TMPDIR'; \
     f=\"$HOME/.pseudoclaude-demo-$$\"; touch \"$f\" && rm -f \"$f\" && echo \"wrote in $HOME: no sandbox\"";

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
                None if last.is_some_and(|m| asks_for_an_edit(typed(&m.content))) => {
                    let edits = req
                        .messages
                        .iter()
                        .flat_map(|m| &m.tool_calls)
                        .filter(|c| c.name == "write_file" && c.arguments["path"] == DEMO_FILE)
                        .count();
                    let text = format!(
                        "{INTRO} You asked for a change: I will propose a small one to {DEMO_FILE}, so you can \
                         try the approval and the diff review."
                    );
                    let n = req.messages.iter().filter(|m| !m.tool_calls.is_empty()).count();
                    let call = ToolCall::new(
                        format!("demo-{}", n + 1),
                        "write_file",
                        serde_json::json!({"path": DEMO_FILE, "content": demo_file_text(edits + 1)}),
                    );
                    (text, vec![call])
                }
                None if last.is_some_and(|m| asks_to_run(typed(&m.content))) => {
                    let text = format!(
                        "{INTRO} You asked me to run something: I will run a small command that writes in its \
                         $TMPDIR and tries to write in your home folder, so you can see the sandbox at work."
                    );
                    let n = req.messages.iter().filter(|m| !m.tool_calls.is_empty()).count();
                    let call = ToolCall::new(
                        format!("demo-{}", n + 1),
                        "run_command",
                        serde_json::json!({"command": DEMO_COMMAND}),
                    );
                    (text, vec![call])
                }
                None => {
                    let asked = last.map(|m| m.content.trim()).unwrap_or_default();
                    let text = format!(
                        "{INTRO} You said: \"{}\". Let me show you a tool call: I will list the files of your workspace.",
                        first_line(asked)
                    );
                    let n = req.messages.iter().filter(|m| !m.tool_calls.is_empty()).count();
                    (text, vec![ToolCall::new(format!("demo-{}", n + 1), "list_files", serde_json::json!({}))])
                }
                Some(result) if result.content.contains(DEMO_FILE) || result.content.contains("write_file") => {
                    let first = result.content.lines().next().unwrap_or("");
                    let text = format!(
                        "The write_file tool answered: \"{}\". Open {DEMO_FILE} to see what was written; ask again \
                         for another edit. To talk to a real model, set ANTHROPIC_API_KEY (or OPENAI_API_KEY) and \
                         choose a provider in setup(); see :help pseudoclaude-config.",
                        first_line(first)
                    );
                    (text, Vec::new())
                }
                Some(result) if result.content.contains("TMPDIR=") => {
                    let text = if result.content.contains("blocked by the sandbox") {
                        "The sandbox let the command write in its $TMPDIR and refused the write in your home \
                         folder, and the result says so (\"blocked by the sandbox\"). A real model would ask you to \
                         run such a command outside the sandbox (run_command's `sandbox = false`), and you decide."
                    } else {
                        "The command ran without the sandbox (it is off, or this system has none): it could write \
                         in your home folder. See :checkhealth pseudoclaude."
                    };
                    (text.to_string(), Vec::new())
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
            Ok(Response { text, tool_calls, stop_reason, usage, ..Default::default() })
        })
    }
}

/// What the user typed, without the attachments the editor added.
fn typed(content: &str) -> &str {
    content.split("\n\n<attachment ").next().unwrap_or(content)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(80).collect()
}

fn estimate(msgs: &[Message]) -> u64 {
    msgs.iter().map(|m| m.content.len() as u64 / 4).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_requests_are_recognised() {
        assert!(asks_for_an_edit("please edit something"));
        assert!(asks_for_an_edit("Write me a file"));
        assert!(asks_for_an_edit("rewriting? no: WRITING"));
        assert!(!asks_for_an_edit("hello there"));
        assert!(!asks_for_an_edit(typed("hi\n\n<attachment kind=\"file\" path=\"edit.rs\">\nx\n</attachment>")));
    }

    #[test]
    fn two_lines_change_between_edits() {
        let (a, b) = (demo_file_text(1), demo_file_text(2));
        let changed = a.lines().zip(b.lines()).filter(|(x, y)| x != y).count();
        assert_eq!((a.lines().count(), changed), (b.lines().count(), 2));
    }
}
