//! A chat's model and mode switched: ours by its provider, an ACP agent's by its own session's options.

use super::{Host, HostError, HostResult, forward};
use crate::agent::chat::ChatId;
use crate::agent::config::{make_provider, resolve_provider};
use crate::agent::{Event, lock};
use crate::provider;

impl Host {
    /// Switches the model: the chat's next turn and every new chat use it (a turn running keeps its
    /// own). Returns the model now in effect.
    pub fn set_model(&self, chat: Option<ChatId>, model: &str) -> HostResult<String> {
        let model = model.trim();
        if model.is_empty() {
            return Err(provider::ProviderError::Config { message: "no model named".into() }.into());
        }
        let mut st = lock(&self.state);
        let id = chat.unwrap_or(st.current);
        let c = st.chat(Some(id))?;
        if c.agent.is_none()
            && let Some(name) = st.acp_of(c)
        {
            return Err(HostError::Refused(format!(
                "the agent {name} has not started yet: send a message first, then choose among its models"
            )));
        }
        if let Some(driver) = st.chat(Some(id))?.agent.clone().filter(|d| d.clone().ours().is_none()) {
            // an ACP agent's own models (`session/set_config_option`): the outcome is a line in the chat
            let name = driver.agent_name();
            if driver.models().is_null() {
                return Err(HostError::Refused(format!(
                    "the agent {name} offers no model choice (or has not started yet: send a message first)"
                )));
            }
            let events = forward(self.rt.handle(), &self.outbox, id);
            let asked = model.to_string();
            self.rt.spawn(async move {
                let text = match driver.set_model(asked.clone(), events.clone()).await {
                    Ok(took) => format!("{name}: model {took}"),
                    Err(e) => format!("{name}: cannot switch to model {asked}: {e}"),
                };
                let _ = events.send(Event::Notice { text });
            });
            return Ok(model.to_string());
        }
        let mut config = st.config.clone();
        config.provider = resolve_provider(&config);
        config.provider.model = model.to_string();
        let provider = make_provider(&config)?;
        let c = st.chat(chat)?;
        if let Some(agent) = c.ours() {
            agent.set_provider(provider);
        }
        st.config = config;
        Ok(model.to_string())
    }

    /// Switches chat `chat`'s agent to mode `mode` (an ACP agent's `session/set_mode`, `:PseudoMode`): returns at
    /// once; the outcome is a line in the chat.
    pub fn set_mode(&self, chat: Option<ChatId>, mode: &str) -> HostResult<()> {
        let (id, driver) = {
            let st = lock(&self.state);
            let id = chat.unwrap_or(st.current);
            (id, st.chat(Some(id))?.agent.clone())
        };
        let driver = driver.ok_or_else(|| {
            HostError::Refused("this chat's agent has not started yet: send a message first, then switch modes".into())
        })?;
        if driver.modes().is_null() {
            return Err(HostError::Refused(format!("the agent {} offers no modes", driver.agent_name())));
        }
        let events = forward(self.rt.handle(), &self.outbox, id);
        let (mode, name) = (mode.to_string(), driver.agent_name());
        self.rt.spawn(async move {
            let text = match driver.set_mode(mode.clone(), events.clone()).await {
                Ok(()) => format!("{name}: mode {mode}"),
                Err(e) => format!("{name}: cannot switch to mode {mode}: {e}"),
            };
            let _ = events.send(Event::Notice { text });
        });
        Ok(())
    }
}
