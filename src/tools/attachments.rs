//! What a message attaches, read through the tools: a workspace file (`@path`, confined like every tool's path)
//! and an MCP server's resource (`@SERVER:URI`).

use super::{Tools, fs};

impl Tools {
    /// The text of a workspace file attached to a message (`@path`), confined like every tool's path:
    /// (its workspace-relative name, its text), or why it cannot be attached.
    pub fn read_attachment(&self, raw: &str) -> Result<(String, String), String> {
        let res = self.root.resolve(raw)?;
        let text = fs::read_text(&res)?;
        Ok((res.rel, text))
    }

    /// The attachments with each `resource` (`@SERVER:URI`, its `path` `SERVER:URI`) read from its MCP
    /// server: its text and type, or the error that says why not. The others as they are.
    pub async fn read_resources(
        &self,
        attachments: &[crate::attachment::Attachment],
    ) -> Vec<crate::attachment::Attachment> {
        let mut out = attachments.to_vec();
        for a in out.iter_mut().filter(|a| a.kind == "resource" && a.text.is_none() && a.error.is_none()) {
            let read = match (a.path.split_once(':'), &self.mcp) {
                (Some((server, uri)), Some(m)) if m.has_server(server) => m.read_resource(server, uri).await,
                (Some((server, _)), _) => Err(format!("there is no MCP server {server:?}")),
                (None, _) => Err("a resource is named SERVER:URI".to_string()),
            };
            match read {
                Ok(contents) => {
                    let (text, mime) = crate::mcp::resource_text(&contents);
                    a.text = Some(text);
                    a.mime = mime;
                }
                Err(e) => a.error = Some(e),
            }
        }
        out
    }
}
