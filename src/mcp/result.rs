//! A `tools/call` result as the model and the log get it: the text blocks as they are, every other block
//! as a line that says what it is (an image or audio is kept as a file the runner spills, with its type),
//! and the structured content as JSON after them.

use base64::Engine;
use serde_json::Value;

/// What a call answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOutput {
    /// The text for the model; `{{blob:N}}` stands where `blobs[N]`'s line goes once it is spilled.
    pub content: String,
    pub is_error: bool,
    pub blobs: Vec<Blob>,
}

/// An image or audio block: its bytes and MIME type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub mime: String,
    pub bytes: Vec<u8>,
}

impl CallOutput {
    pub fn error(content: String) -> CallOutput {
        CallOutput { content, is_error: true, blobs: Vec::new() }
    }
}

/// The placeholder of blob `n` in [`CallOutput::content`].
pub fn blob_mark(n: usize) -> String {
    format!("{{{{blob:{n}}}}}")
}

/// Decodes the protocol's `CallToolResult` JSON (`content`, `structuredContent`, `isError`).
pub fn decode(v: &Value) -> CallOutput {
    let mut out = CallOutput { is_error: v["isError"].as_bool().unwrap_or(false), ..Default::default() };
    let mut parts: Vec<String> = Vec::new();
    for block in v["content"].as_array().into_iter().flatten() {
        let s = |k: &str| block[k].as_str().unwrap_or("").to_string();
        match block["type"].as_str().unwrap_or("") {
            "text" => parts.push(s("text")),
            kind @ ("image" | "audio") => {
                match base64::engine::general_purpose::STANDARD.decode(s("data").as_bytes()) {
                    Ok(bytes) => {
                        parts.push(blob_mark(out.blobs.len()));
                        out.blobs.push(Blob { mime: s("mimeType"), bytes });
                    }
                    Err(e) => parts.push(format!("[{kind} {} that is not valid base64: {e}]", s("mimeType"))),
                }
            }
            "resource_link" => {
                let mut line = format!("[resource link: {}", s("uri"));
                for (k, label) in [("name", "name"), ("mimeType", "type"), ("description", "description")] {
                    if let Some(x) = block[k].as_str() {
                        line.push_str(&format!(", {label}: {x}"));
                    }
                }
                line.push(']');
                parts.push(line);
            }
            "resource" => {
                let r = &block["resource"];
                let uri = r["uri"].as_str().unwrap_or("");
                let mime = r["mimeType"].as_str().unwrap_or("");
                match (r["text"].as_str(), r["blob"].as_str()) {
                    (Some(text), _) => parts.push(format!("[resource {uri} {mime}]\n{text}")),
                    (None, Some(b64)) => match base64::engine::general_purpose::STANDARD.decode(b64.as_bytes()) {
                        Ok(bytes) => {
                            parts.push(format!("[resource {uri}] {}", blob_mark(out.blobs.len())));
                            out.blobs.push(Blob { mime: mime.to_string(), bytes });
                        }
                        Err(e) => parts.push(format!("[resource {uri}: blob not valid base64: {e}]")),
                    },
                    (None, None) => parts.push(format!("[resource {uri}]")),
                }
            }
            other => parts.push(format!("[{other} content block]\n{block}")),
        }
    }
    if let Some(sc) = v.get("structuredContent").filter(|x| !x.is_null()) {
        parts.push(format!("[structured content]\n{sc}"));
    }
    out.content = parts.join("\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_of_block_reaches_the_text() {
        let out = decode(&json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "test://a", "name": "a"},
                {"type": "resource", "resource": {"uri": "test://b", "mimeType": "text/plain", "text": "body"}}
            ],
            "structuredContent": {"n": 1},
            "isError": false
        }));
        assert!(!out.is_error);
        assert_eq!(out.blobs, vec![Blob { mime: "image/png".into(), bytes: vec![0x89, b'P', b'N', b'G'] }]);
        assert_eq!(
            out.content,
            "hello\n{{blob:0}}\n[resource link: test://a, name: a]\n[resource test://b text/plain]\nbody\n[structured content]\n{\"n\":1}"
        );
    }

    #[test]
    fn is_error_is_kept() {
        assert!(decode(&json!({"content": [{"type": "text", "text": "no"}], "isError": true})).is_error);
    }
}
