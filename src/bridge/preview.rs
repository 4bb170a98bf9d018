//! The picker's preview of a session: its summary and the end of its history, read on a worker thread.

use std::path::Path;

use nvim_oxi::Object;
use serde::{Deserialize, Serialize};

use super::{Args, BridgeResult, export, jobs, table_arg, workspace};
use crate::display;
use crate::git::GitHead;
use crate::import;
use crate::message::Message;
use crate::session::entry::{AgentMeta, ForkedFrom, ImportedFrom};
use crate::session::{self, Context};
use crate::usage::{Pricing, Usage};

/// Limits of a preview (`sessions_preview_async`), every key optional.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct PreviewArgs {
    pub max_messages: usize,
    pub budget: usize,
    pub max_bytes: usize,
    /// Prices by model, for the preview's `cost`.
    pub pricing: Pricing,
}

impl Default for PreviewArgs {
    fn default() -> Self {
        // 16 KiB is a few screens of the preview window; more only costs the main loop its render
        PreviewArgs { max_messages: 200, budget: 16 * 1024, max_bytes: 2 * 1024, pricing: Pricing::default() }
    }
}

/// What the picker's preview shows of a session: its summary and the end of its history.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    pub id: String,
    pub title: String,
    pub model: String,
    /// Messages a resume restores.
    pub messages: usize,
    pub last_message: i64,
    pub damage_report: String,
    pub tail: display::Slice,
    /// Files the agent wrote or edited in the session (see [`session::touched`]).
    pub files_touched: Vec<String>,
    /// What the agent's tool calls changed in the files, per turn (commands included; [`crate::rewind`]):
    /// the turns that changed any, oldest first.
    pub changes: Vec<crate::rewind::TurnChanges>,
    pub pinned: bool,
    pub forked_from: Option<ForkedFrom>,
    /// The other agent's session this one is a copy of (an import, a kept copy), and whether its file is still there
    /// (the preview shows both places).
    pub imported_from: Option<ImportedFrom>,
    pub original_exists: bool,
    /// The ACP agent whose own session this one goes on in (`meta`), and its id of it.
    pub agent: Option<AgentMeta>,
    /// The git branch and short commit at the latest recorded turn, as in the list (`None` outside a
    /// repository; no branch on a detached HEAD).
    pub branch: Option<String>,
    pub commit: Option<String>,
    /// Where the session started, when that was another branch or commit.
    pub git_start: Option<GitHead>,
    /// Tokens the providers reported, summed over the session.
    pub usage: Usage,
    /// Dollars, when the preview's `pricing` prices every model that reported usage.
    pub cost: Option<f64>,
}

impl Preview {
    /// The preview of a loaded session, showing `tail` of it, its cost priced by `pricing`.
    pub fn new(loaded: session::Loaded, tail: display::Slice, pricing: &Pricing) -> Preview {
        let git = loaded.git.clone().unwrap_or_default();
        let some = |v: String| (!v.is_empty()).then_some(v);
        Preview {
            branch: some(git.branch),
            commit: some(git.commit),
            git_start: loaded.git_start.clone().filter(|start| Some(start) != loaded.git.as_ref()),
            usage: loaded.usage_by_model.total(),
            cost: loaded.usage_by_model.cost(pricing),
            files_touched: session::touched::files_touched(&loaded.messages),
            changes: crate::rewind::changes(&loaded.files, &loaded.messages)
                .into_iter()
                .filter(|t| !t.files.is_empty())
                .collect(),
            damage_report: loaded.damage_report(),
            messages: loaded.messages.len(),
            pinned: loaded.pinned,
            forked_from: loaded.forked_from,
            original_exists: loaded.imported_from.as_ref().is_some_and(|f| Path::new(&f.path).exists()),
            imported_from: loaded.imported_from,
            agent: loaded.agent.filter(|a| !a.session_id.is_empty()),
            id: loaded.id,
            title: loaded.title,
            model: loaded.model,
            last_message: loaded.last_message,
            tail,
        }
    }
}

/// The preview of session `id`, read and cut to `limits`; another agent's session (`gemini:…`, as its row gives
/// it): the history an import would restore, read from its store.
pub fn preview(workspace: &Path, id: &str, limits: &PreviewArgs) -> BridgeResult<Preview> {
    if import::is_external_id(id) {
        return external(workspace, id, |m| Ok(display::tail(m, limits.max_messages, limits.budget, limits.max_bytes)));
    }
    let ctx = Context::open(workspace, id)?;
    let loaded = session::load(&ctx)?;
    let tail = display::tail(&loaded.messages, limits.max_messages, limits.budget, limits.max_bytes);
    Ok(Preview::new(loaded, tail, &limits.pricing))
}

/// Another agent's session's preview, the part of its history `slice` cuts (the tail, or the messages around a hit).
pub fn external(
    workspace: &Path,
    id: &str,
    slice: impl FnOnce(&[Message]) -> BridgeResult<display::Slice>,
) -> BridgeResult<Preview> {
    let item = import::find(workspace, &import::Homes::from_env(), id)?;
    let c = import::read_item(&item)?;
    let messages = c.restored();
    let tail = slice(&messages)?;
    Ok(Preview {
        id: item.id.clone(),
        title: c.shown_title(),
        model: c.model.clone(),
        messages: messages.len(),
        last_message: item.modified,
        // what the reader left out is the row's `notes`, which the picker shows: nothing was repaired
        damage_report: String::new(),
        tail,
        files_touched: session::touched::files_touched(&messages),
        changes: Vec::new(),
        pinned: false,
        forked_from: None,
        imported_from: None,
        original_exists: false,
        agent: None,
        branch: c.branch.clone(),
        commit: None,
        git_start: None,
        usage: Usage::default(),
        cost: None,
    })
}

/// The preview's export, chained into the export table by [`super::exports`].
pub fn exports() -> Vec<(&'static str, Object)> {
    vec![export("sessions_preview_async", preview_async)]
}

/// `sessions_preview_async(workspace, id, limits, callback)`: [`preview`] on a worker thread. Previews
/// share one lane: asking for another drops one not yet started.
fn preview_async(a: &Args) -> BridgeResult<u64> {
    let ws = workspace(a)?;
    let id: String = a.get(1)?;
    let limits = table_arg::<PreviewArgs>(a, 2)?;
    let callback: jobs::Callback = a.function(3)?;
    // As JSON, decoded by `vim.json.decode`: faster than converting hundreds of messages one object at a time.
    jobs::spawn("sessions_preview_async", Some("preview"), callback, move || {
        preview(&ws, &id, &limits).and_then(|p| super::bulk(&p))
    })
}
