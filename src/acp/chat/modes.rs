//! What the agent offers besides turns: its slash commands, its modes and its models (a session config option),
//! as it last sent them, and the switches of mode and model.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::AcpChat;
use crate::agent::{Event, lock};
use crate::message::now;
use crate::session::Entry;

impl AcpChat {
    /// The agent's slash commands (`available_commands_update`), as it sent them.
    pub fn commands(&self) -> Vec<Value> {
        lock(&self.commands).clone()
    }

    /// The agent's modes (`{currentModeId, availableModes}`), when it offers some.
    pub fn modes(&self) -> Value {
        lock(&self.modes).clone()
    }

    /// The models the agent lets the user choose (its session's config option of category `model`):
    /// `{current, available: [{id, name}]}`, `null` when it offers no choice (or has not started).
    pub fn models(&self) -> Value {
        let options = lock(&self.options);
        let Some(o) = model_option(&options) else { return Value::Null };
        let mut available = Vec::new();
        for v in o["options"].as_array().into_iter().flatten() {
            // a select's options, or groups of them
            for m in v["options"].as_array().cloned().unwrap_or_else(|| vec![v.clone()]) {
                available.push(json!({ "id": m["value"], "name": m["name"] }));
            }
        }
        json!({ "current": o["currentValue"], "available": available })
    }

    /// Asks the agent to switch to model `model` (`session/set_config_option` of its model option); logged as the
    /// agent's own `config_option_update` would be.
    pub async fn set_model(
        self: &Arc<Self>,
        model: &str,
        events: &mpsc::UnboundedSender<Event>,
    ) -> Result<String, String> {
        let (conn, sid) = self.ensure_live(events).await?;
        let option = model_option(&lock(&self.options))
            .and_then(|o| o["id"].as_str().map(str::to_string))
            .ok_or_else(|| format!("the agent {} offers no model choice", self.config.name))?;
        let answer = conn.set_config_option(&sid, &option, model).await?;
        if answer["configOptions"].is_array() {
            *lock(&self.options) = answer["configOptions"].clone();
        }
        let update = json!({ "sessionUpdate": "config_option_update", "configOptions": answer["configOptions"] });
        let _ = self.log.append_meta(Entry::acp(update, now()));
        Ok(self.models()["current"].as_str().unwrap_or(model).to_string())
    }

    /// Asks the agent to switch to mode `mode` (`session/set_mode`).
    pub async fn set_mode(self: &Arc<Self>, mode: &str, events: &mpsc::UnboundedSender<Event>) -> Result<(), String> {
        let (conn, sid) = self.ensure_live(events).await?;
        conn.set_mode(&sid, mode).await?;
        let update = json!({ "sessionUpdate": "current_mode_update", "currentModeId": mode });
        self.apply_mode(&update);
        let _ = self.log.append_meta(Entry::acp(update, now()));
        Ok(())
    }

    pub(super) fn apply_session(&self, answer: &Value) {
        if answer["modes"].is_object() {
            *lock(&self.modes) = answer["modes"].clone();
        }
        if answer["configOptions"].is_array() {
            *lock(&self.options) = answer["configOptions"].clone();
        }
    }

    pub(super) fn apply_mode(&self, update: &Value) {
        let mut modes = lock(&self.modes);
        if modes.is_object() {
            modes["currentModeId"] = update["currentModeId"].clone();
        }
    }
}

/// The session's option that chooses the model: of category `model` (else named `model`).
fn model_option(options: &Value) -> Option<&Value> {
    let all = options.as_array()?;
    all.iter().find(|o| o["category"] == "model").or_else(|| all.iter().find(|o| o["id"] == "model"))
}
