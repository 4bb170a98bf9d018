//! Servers' resources: what each lists (`resources/list`, kept in memory for the editor's `@SERVER:URI`
//! completion), one read (`resources/read`, bounded by `mcp.timeout`) and its contents as the text of an
//! `@SERVER:URI` attachment: text parts as they are, a binary part as one line naming its type and size (the
//! message is text; the model can ask for it through a tool of the server if it needs the bytes).

use base64::Engine;
use serde::Serialize;

use super::{Servers, lock};

/// A server's resource, as `resources/list` gave it: what `@SERVER:URI` completes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// One entry of [`Servers::resources`].
#[derive(Debug, Clone, Serialize)]
pub struct ServerResource {
    pub server: String,
    #[serde(flatten)]
    pub resource: ResourceInfo,
}

impl Servers {
    /// The running servers' resources, as they last listed them (nothing is asked here: the editor's
    /// completion calls this on its main loop).
    pub fn resources(&self) -> Vec<ServerResource> {
        let mut out = Vec::new();
        for s in self.all() {
            let slot = lock(&s.slot);
            out.extend(slot.resources.iter().map(|r| ServerResource { server: s.name.clone(), resource: r.clone() }));
        }
        out
    }

    /// Whether `name` is a configured server's (what `@SERVER:URI` must name).
    pub fn has_server(&self, name: &str) -> bool {
        self.all().iter().any(|s| s.name == name)
    }

    /// `resources/read` of `uri` on `server`, bounded by `mcp.timeout`: its contents as the protocol gives
    /// them (`[{uri, mimeType, text|blob}]`), or why not, in one line.
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<Vec<serde_json::Value>, String> {
        let s = self
            .all()
            .into_iter()
            .find(|s| s.name == server)
            .ok_or_else(|| format!("there is no MCP server {server:?}"))?;
        let client = self.client_for(&s).await?;
        let timeout = self.ctx.timeout;
        match tokio::time::timeout(timeout, client.read_resource(uri)).await {
            Err(_) => Err(format!(
                "the MCP server {server:?} did not answer resources/read within {} s (mcp.timeout)",
                timeout.as_secs_f64()
            )),
            Ok(r) => r.map_err(|e| format!("the MCP server {server:?} could not read {uri}: {e}")),
        }
    }
}

/// The attachment's body and, when every part agrees, its MIME type.
pub fn resource_text(contents: &[serde_json::Value]) -> (String, Option<String>) {
    let mut out = String::new();
    let mut mimes: Vec<&str> = Vec::new();
    for part in contents {
        let mime = part.get("mimeType").and_then(|m| m.as_str());
        if let Some(m) = mime {
            mimes.push(m);
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if let Some(text) = part.get("text").and_then(|t| t.as_str()) {
            out.push_str(text);
        } else if let Some(blob) = part.get("blob").and_then(|b| b.as_str()) {
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(blob).map(|b| b.len()).unwrap_or(blob.len() * 3 / 4);
            let uri = part.get("uri").and_then(|u| u.as_str()).unwrap_or_default();
            out.push_str(&format!("[binary {}, {bytes} bytes: {uri}]", mime.unwrap_or("application/octet-stream")));
        }
    }
    mimes.dedup();
    let mime = if mimes.len() == 1 { Some(mimes[0].to_string()) } else { None };
    (out, mime)
}
