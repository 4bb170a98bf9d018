//! A resource's contents (`resources/read`) as the text of an `@SERVER:URI` attachment: text parts as they
//! are, a binary part as one line naming its type and size (the message is text; the model can ask for it
//! through a tool of the server if it needs the bytes).

use base64::Engine;

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
