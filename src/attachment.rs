//! Context from the editor attached to a user message: a range of a buffer, a whole buffer (its
//! unsaved text), its diagnostics, or a workspace file. The model receives each one in the message
//! text, after what the user typed, in one wrapper (documented in `doc/log_format.md`):
//!
//! ```text
//! <attachment kind="selection" path="src/a.rs" lines="2-4" filetype="rust">
//! …the text, as it is…
//! </attachment>
//! ```
//!
//! The message is logged as it was sent, wrapper and all, so a resume restores it exactly. A body
//! line that is exactly `</attachment>` is sent as `<\/attachment>`, so the wrapper always ends where
//! it says. A body larger than the spill threshold follows the tool results' spill rule: it goes to
//! the session's `tool-results/<sha256>.txt`, and the wrapper holds its start and says where the rest
//! is (`spill`, `bytes`), a path the model can read with `read_file`.

use serde::Deserialize;

use crate::message::SpillRef;

/// The closing line of the wrapper.
pub const CLOSE: &str = "</attachment>";
/// How a body line equal to [`CLOSE`] is sent.
pub const CLOSE_ESCAPED: &str = "<\\/attachment>";

/// One attachment as the editor describes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// `selection`, `buffer`, `diagnostics` or `file`.
    pub kind: String,
    /// Relative to the workspace (or as the buffer names it, outside it).
    pub path: String,
    /// First and last line (1-based) of a selection.
    #[serde(default)]
    pub lines: Option<(u64, u64)>,
    #[serde(default)]
    pub filetype: Option<String>,
    /// The text; absent for `file`, which the core reads (confined to the workspace).
    #[serde(default)]
    pub text: Option<String>,
    /// A `buffer` with unsaved changes: its text is not what the disk holds.
    #[serde(default)]
    pub modified: bool,
    /// A `resource`'s MIME type, as its server gave it (set by the core when it reads the resource).
    #[serde(default)]
    pub mime: Option<String>,
    /// Why it could not be read (set by the core: a `resource` its server could not give).
    #[serde(default)]
    pub error: Option<String>,
}

/// What the body of a `file` attachment is read with: the path as given → (workspace-relative
/// path, text), or why it cannot be.
pub type ReadFile<'a> = dyn Fn(&str) -> Result<(String, String), String> + 'a;
/// Where a large body goes: → its spill reference and the path the model reads it at.
pub type Spill<'a> = dyn Fn(&str) -> Result<(SpillRef, String), String> + 'a;

/// The message the model receives: `text`, then each attachment in its wrapper.
pub fn compose(text: &str, attachments: &[Attachment], read: &ReadFile, spill: &Spill, threshold: usize) -> String {
    if attachments.is_empty() {
        return text.to_string();
    }
    let mut out = text.trim_end().to_string();
    for a in attachments {
        out.push_str("\n\n");
        out.push_str(&wrap(a, read, spill, threshold));
    }
    out
}

fn wrap(a: &Attachment, read: &ReadFile, spill: &Spill, threshold: usize) -> String {
    let mut attrs = vec![("kind", a.kind.clone()), ("path", a.path.clone())];
    if let Some((first, last)) = a.lines {
        attrs.push(("lines", format!("{first}-{last}")));
    }
    if let Some(ft) = a.filetype.as_deref().filter(|f| !f.is_empty()) {
        attrs.push(("filetype", ft.to_string()));
    }
    if a.modified {
        attrs.push(("modified", "true".to_string()));
    }
    if let Some(mime) = &a.mime {
        attrs.push(("mime", mime.clone()));
    }
    let body = match (&a.text, a.kind.as_str()) {
        _ if a.error.is_some() => Err(a.error.clone().unwrap_or_default()),
        (Some(t), _) => Ok(t.clone()),
        (None, "file") => read(&a.path).map(|(rel, text)| {
            attrs[1].1 = rel;
            text
        }),
        (None, kind) => Err(format!("an attachment of kind {kind:?} came without its text")),
    };
    let mut body = match body {
        Ok(b) => b,
        Err(e) => {
            attrs.push(("error", e));
            return format!("{}\n{CLOSE}", open_tag(&attrs));
        }
    };
    if body.len() > threshold {
        match spill(&body) {
            Ok((r, at)) => {
                attrs.push(("bytes", r.bytes.to_string()));
                attrs.push(("spill", at.clone()));
                let mut end = crate::session::spill::PREVIEW_BYTES.min(body.len());
                while !body.is_char_boundary(end) {
                    end -= 1;
                }
                body = format!(
                    "{}\n[... attachment cut: {} bytes in total; read the whole text with read_file at {at}]",
                    &body[..end],
                    r.bytes
                );
            }
            Err(e) => attrs.push(("spill_error", e)),
        }
    }
    let mut out = open_tag(&attrs);
    out.push('\n');
    for line in body.split_inclusive('\n') {
        out.push_str(if line.trim_end_matches(['\n', '\r']) == CLOSE {
            CLOSE_ESCAPED
        } else {
            line.trim_end_matches('\n')
        });
        out.push('\n');
    }
    out.push_str(CLOSE);
    out
}

fn open_tag(attrs: &[(&str, String)]) -> String {
    let mut s = String::from("<attachment");
    for (k, v) in attrs {
        let v = v.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('\n', " ");
        s.push_str(&format!(" {k}=\"{v}\""));
    }
    s.push('>');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_file(_: &str) -> Result<(String, String), String> {
        Err("no files here".into())
    }

    fn no_spill(_: &str) -> Result<(SpillRef, String), String> {
        Err("no spills here".into())
    }

    fn sel(text: &str) -> Attachment {
        Attachment {
            kind: "selection".into(),
            path: "src/a.rs".into(),
            lines: Some((2, 4)),
            filetype: Some("rust".into()),
            text: Some(text.into()),
            modified: false,
            mime: None,
            error: None,
        }
    }

    #[test]
    fn the_wrapper_follows_the_text() {
        let m = compose("explain this  \n", &[sel("a\nb\nc\n")], &no_file, &no_spill, 1000);
        assert_eq!(
            m,
            "explain this\n\n<attachment kind=\"selection\" path=\"src/a.rs\" lines=\"2-4\" filetype=\"rust\">\na\nb\nc\n</attachment>"
        );
        assert_eq!(compose("plain", &[], &no_file, &no_spill, 10), "plain");
    }

    #[test]
    fn the_closing_line_inside_a_body_is_escaped_and_attributes_quoted() {
        let mut a = sel("x\n</attachment>\ny");
        a.path = "we\"ird<&>.rs".into();
        let m = compose("t", &[a], &no_file, &no_spill, 1000);
        assert!(m.contains("path=\"we&quot;ird&lt;&amp;>.rs\""), "{m}");
        assert!(m.ends_with("\nx\n<\\/attachment>\ny\n</attachment>"), "{m}");
    }

    #[test]
    fn a_file_is_read_and_an_unreadable_one_says_why() {
        let read = |p: &str| -> Result<(String, String), String> {
            if p == "ok.txt" { Ok(("ok.txt".into(), "fine\n".into())) } else { Err(format!("{p} does not exist")) }
        };
        let file = |p: &str| Attachment {
            kind: "file".into(),
            path: p.into(),
            lines: None,
            filetype: None,
            text: None,
            modified: false,
            mime: None,
            error: None,
        };
        let m = compose("t", &[file("ok.txt"), file("gone.txt")], &read, &no_spill, 1000);
        assert!(m.contains("<attachment kind=\"file\" path=\"ok.txt\">\nfine\n</attachment>"), "{m}");
        assert!(
            m.contains("<attachment kind=\"file\" path=\"gone.txt\" error=\"gone.txt does not exist\">\n</attachment>"),
            "{m}"
        );
    }

    #[test]
    fn a_large_body_is_spilled_and_previewed() {
        let spill = |body: &str| -> Result<(SpillRef, String), String> {
            Ok((
                SpillRef { path: "tool-results/h.txt".into(), bytes: body.len() as u64, sha256: "h".into() },
                ".PseudoClaude/sessions/s/tool-results/h.txt".into(),
            ))
        };
        let big = "line\n".repeat(2000);
        let m = compose("t", &[sel(&big)], &no_file, &spill, 1000);
        assert!(m.contains(" bytes=\"10000\" spill=\".PseudoClaude/sessions/s/tool-results/h.txt\">"), "{}", &m[..300]);
        assert!(m.len() < 3000, "{}", m.len());
        assert!(m.contains("[... attachment cut: 10000 bytes in total; read the whole text with read_file at"));
    }
}
