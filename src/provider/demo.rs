//! Placeholder: the offline demo provider.

use tokio::sync::mpsc::UnboundedSender;

use super::{BoxFuture, Provider, ProviderError, Request, Response, StreamEvent};

#[derive(Debug, Default)]
pub struct Demo;

impl Provider for Demo {
    fn name(&self) -> &str {
        "demo"
    }
    fn model(&self) -> &str {
        "demo"
    }
    fn stream<'a>(
        &'a self,
        _req: &'a Request,
        _events: UnboundedSender<StreamEvent>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async { Ok(Response::default()) })
    }
}
