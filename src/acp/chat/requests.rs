//! What the agent asks of us: `fs/read_text_file` and `fs/write_text_file` on the workspace's files, and
//! `session/request_permission`, asked as our tools' approvals are.

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::AcpChat;
use super::record::result_text;
use crate::acp::client::ServiceError;
use crate::message::{ToolCall, now};
use crate::session::Entry;
use crate::tools::{Approval, ApprovalRequest, PermissionChoice};

impl AcpChat {
    /// The agent's `fs/read_text_file` and `fs/write_text_file`, on the workspace's files only (confined as our
    /// tools' paths are). A read takes the editor's buffer when the file is loaded there (unsaved text included),
    /// else the disk; `line` (1-based) and `limit` cut it to lines. A write goes the way our `write_file` does
    /// (without a second question: the agent asked its permission): refused when the file's buffer has unsaved
    /// changes, the buffer held during the write and reloaded after; the agent's tool call that wrote it is
    /// checkpointed when it completes.
    pub(super) async fn on_fs(&self, method: &str, params: &Value) -> Result<Value, ServiceError> {
        let raw = params["path"].as_str().ok_or_else(|| format!("{method}: no path"))?;
        let (abs, rel) = self.tools.resolve_path(raw)?;
        match method {
            "fs/read_text_file" => {
                let buffer = tokio::time::timeout(self.tools.editor_timeout(), self.approver.buffer_text(&abs)).await;
                let text = match buffer {
                    Ok(Some(text)) => text,
                    _ => {
                        let path = abs.clone();
                        tokio::task::spawn_blocking(move || std::fs::read(&path))
                            .await
                            .map_err(|e| e.to_string())?
                            .map_err(|e| match e.kind() {
                                std::io::ErrorKind::NotFound => ServiceError::NotFound(rel.clone()),
                                _ => ServiceError::Other(format!("cannot read {rel}: {e}")),
                            })
                            .and_then(|b| String::from_utf8(b).map_err(|_| format!("{rel} is not UTF-8 text").into()))?
                    }
                };
                let line = params["line"].as_u64().unwrap_or(1).max(1) as usize;
                let limit = params["limit"].as_u64().map(|l| l as usize);
                Ok(json!({ "content": lines_of(&text, line, limit) }))
            }
            "fs/write_text_file" => {
                let content = params["content"].as_str().ok_or("fs/write_text_file: no content")?;
                let id = format!("acp-fs-{:x}", rand::random::<u64>());
                let call = ToolCall::new(id, "write_file", json!({ "path": rel, "content": content }));
                let out = self.tools.run(&call).await;
                if out.is_error { Err(out.content.into()) } else { Ok(json!({})) }
            }
            other => Err(format!("{other} is not served").into()),
        }
    }

    /// `session/request_permission`: asked through the same approval prompt as our tools (the agent's options,
    /// named as it names them), or answered "allow once" by `approve.agents.NAME`; logged with its answer.
    pub(super) async fn on_permission(&self, request: Value, reply: oneshot::Sender<Option<String>>) {
        let options: Vec<PermissionChoice> = request["options"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|o| PermissionChoice {
                        id: o["optionId"].as_str().unwrap_or_default().to_string(),
                        name: o["name"].as_str().unwrap_or_default().to_string(),
                        kind: o["kind"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let pick = |kind: &str| options.iter().find(|o| o.kind == kind).map(|o| o.id.clone());
        let call = &request["toolCall"];
        let title = call["title"].as_str().unwrap_or("a tool call").to_string();
        let (answer, by) = if self.config.auto_allow {
            (pick("allow_once"), "config")
        } else {
            let ask = ApprovalRequest {
                tool: format!("{}:{}", self.config.name, call["kind"].as_str().unwrap_or("tool")),
                summary: title.clone(),
                detail: call_detail(call),
                change: None,
                lifted: Vec::new(),
                warning: None,
                always: pick("allow_always").is_some(),
                options: options.clone(),
            };
            let answer = match self.approver.ask(ask).await {
                Approval::Yes => pick("allow_once").or_else(|| pick("allow_always")),
                Approval::Always => pick("allow_always").or_else(|| pick("allow_once")),
                Approval::Only(hunks) if !hunks.is_empty() => pick("allow_once"),
                _ => pick("reject_once").or_else(|| pick("reject_always")),
            };
            (answer, "user")
        };
        let entry = json!({ "permission": {
            "tool_call_id": call["toolCallId"], "title": title, "options": options,
            "answer": answer, "by": by,
        }});
        let _ = self.log.append_meta(Entry::acp(entry, now()));
        let _ = reply.send(answer);
    }
}

/// Lines `line..` (1-based) of `text`, at most `limit` of them, each with its line ending.
fn lines_of(text: &str, line: usize, limit: Option<usize>) -> String {
    if line <= 1 && limit.is_none() {
        return text.to_string();
    }
    text.split_inclusive('\n').skip(line - 1).take(limit.unwrap_or(usize::MAX)).collect()
}

/// What a permission prompt shows below its title: the call's input and proposed content.
fn call_detail(call: &Value) -> String {
    let mut out = result_text(call);
    if let Some(input) = call.get("rawInput").filter(|v| !v.is_null()) {
        let input = serde_json::to_string_pretty(input).unwrap_or_default();
        out = if out.is_empty() { input } else { format!("{input}\n{out}") };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_takes_the_lines_asked_with_their_endings() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(lines_of(text, 1, None), text);
        assert_eq!(lines_of(text, 2, Some(1)), "two\n");
        assert_eq!(lines_of(text, 3, Some(5)), "three\n");
        assert_eq!(lines_of(text, 9, None), "");
    }
}
