//! Placeholder: being written (see issue "agent runtime").

use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, Provider, ProviderConfig, ProviderError, Request, Response, StreamEvent};

pub struct OpenAi {
    cfg: ProviderConfig,
}

impl OpenAi {
    pub fn new(cfg: ProviderConfig) -> Result<Self, ProviderError> {
        Ok(OpenAi { cfg })
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &str {
        "openai"
    }
    fn model(&self) -> &str {
        &self.cfg.model
    }
    fn stream<'a>(
        &'a self,
        _req: &'a Request,
        _events: UnboundedSender<StreamEvent>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async { Err(ProviderError::Config { message: "not implemented yet".into() }) })
    }
}
