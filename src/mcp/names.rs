//! The names the model calls MCP tools by: `mcp__SERVER__TOOL` (Claude Code's naming), cleaned and hashed where
//! the providers would refuse it, and mapped back to the server and tool by [`Servers::resolve`].

use std::collections::BTreeMap;

use super::{Servers, ToolInfo, lock};
use crate::provider::ToolSpec;

/// The prefix of every MCP tool's name as the model reads it.
pub const PREFIX: &str = "mcp__";

impl Servers {
    /// The tools of the running servers, as the model reads them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools()
            .into_iter()
            .map(|(name, _, t)| ToolSpec { name, description: t.description, input_schema: t.input_schema })
            .collect()
    }

    /// Every running server's tools with the name the model calls each by ([`model_names`]).
    fn tools(&self) -> Vec<(String, String, ToolInfo)> {
        let mut all = Vec::new();
        for s in self.all() {
            let slot = lock(&s.slot);
            all.extend(slot.tools.iter().map(|t| (s.name.clone(), t.clone())));
        }
        let pairs: Vec<(&str, &str)> = all.iter().map(|(s, t)| (s.as_str(), t.name.as_str())).collect();
        let names = model_names(&pairs);
        names.into_iter().zip(all).map(|(name, (server, tool))| (name, server, tool)).collect()
    }

    /// The server and tool a model's tool name means, if it names a configured server: a listed tool by the
    /// name [`Servers::specs`] gave it, else `mcp__SERVER__TOOL` read as it is (a tool the server does not list
    /// then gets the server's "no tool" answer).
    pub fn resolve(&self, name: &str) -> Option<(String, String)> {
        let rest = name.strip_prefix(PREFIX)?;
        if let Some((_, server, tool)) = self.tools().into_iter().find(|(n, _, _)| n == name) {
            return Some((server, tool.name));
        }
        self.all().iter().find_map(|s| {
            let tool = rest.strip_prefix(s.name.as_str())?.strip_prefix("__")?;
            Some((s.name.clone(), tool.to_string()))
        })
    }
}

/// `mcp__SERVER__TOOL`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{server}__{tool}")
}

/// The longest tool name the providers take: Anthropic and OpenAI both require `^[a-zA-Z0-9_-]{1,64}$`.
pub const MAX_TOOL_NAME: usize = 64;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The names the model calls these `(server, tool)` pairs by, in their order: `mcp__SERVER__TOOL` when the
/// providers take it as it is. Otherwise each character they refuse becomes `_` (what Claude Code does, so
/// an imported session's calls read the same), and a name still too long, or equal to another one, keeps
/// its first 55 characters and ends with `_` and 8 hex digits of the SHA-256 of `mcp__SERVER__TOOL`: stable
/// from one start to the next, unique, and mapped back by [`Servers::resolve`].
pub fn model_names(pairs: &[(&str, &str)]) -> Vec<String> {
    use sha2::{Digest, Sha256};
    let raw: Vec<String> = pairs.iter().map(|(s, t)| tool_name(s, t)).collect();
    let valid = |n: &str| n.len() <= MAX_TOOL_NAME && n.chars().all(is_name_char);
    let cleaned: Vec<String> = raw
        .iter()
        .map(|n| if valid(n) { n.clone() } else { n.chars().map(|c| if is_name_char(c) { c } else { '_' }).collect() })
        .collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &cleaned {
        *count.entry(n.as_str()).or_default() += 1;
    }
    raw.iter()
        .zip(&cleaned)
        .map(|(raw, clean)| {
            // A name the server gave validly keeps it even when a cleaned one collides with it.
            if valid(raw) || (clean.len() <= MAX_TOOL_NAME && count[clean.as_str()] == 1) {
                return clean.clone();
            }
            let hash = Sha256::digest(raw.as_bytes());
            let hex: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
            // `clean` is ASCII: any byte index is a character boundary.
            format!("{}_{hex}", &clean[..clean.len().min(MAX_TOOL_NAME - 9)])
        })
        .collect()
}
