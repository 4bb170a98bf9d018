//! Placeholder: being written (see issue "agent runtime").

use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, Provider, ProviderConfig, ProviderError, Request, Response, StreamEvent};

pub struct Anthropic {
    cfg: ProviderConfig,
}

impl Anthropic {
    pub fn new(cfg: ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Anthropic { cfg })
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
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
