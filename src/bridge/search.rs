//! The session search's exports: what `lua/pseudoclaude/search.lua` calls.
//!
//! | export                      | arguments                                        | returns                     |
//! |-----------------------------|--------------------------------------------------|-----------------------------|
//! | `sessions_search`           | workspace, query, opts?                          | JSON `{hits, summary}` (blocks: for scripts) |
//! | `sessions_search_async`     | workspace, query, opts?, `callback(ok, value, more)` | a ticket, at once       |
//! | `sessions_search_cancel`    | ticket                                           | whether the search was still running |
//! | `sessions_preview_at_async` | workspace, id, index, `callback(ok, preview)`    | a ticket, at once           |
//!
//! `opts`: `{case?: "smart"|"sensitive"|"insensitive", exclude?, limit?, per_session?, external?}`; with `external`,
//! the other agents' sessions of the workspace are searched after ours ([`import::search::search_with_ours`]), each
//! of their hits naming its `agent`, and `sessions_preview_at_async` takes their ids (`claude:…`). The async
//! search runs on the worker threads ([`super::jobs`], lane `search`: a new search cancels the
//! running one) and hands back batches of hits as JSON arrays (`callback(true, json, true)`), newest
//! sessions first, the first as soon as a session with a hit is done and then at most every
//! [`BATCH_EVERY`]; then `callback(true, summary, false)`, or `callback(false, "cancelled", false)`.
//! A query that cannot be searched (empty, too long) is an error of the call itself.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nvim_oxi::Object;
use serde::{Deserialize, Serialize};

use super::preview::{Preview, PreviewArgs};
use super::{Args, BridgeError, BridgeResult, export, jobs, table_arg, workspace};
use crate::display;
use crate::import::{self, Homes};
use crate::message::Message;
use crate::session::search::{self, Case, Hit, Options, Query, Summary};
use crate::session::{self, Context};

pub fn exports() -> Vec<(&'static str, Object)> {
    vec![
        export("sessions_search", search_sync),
        export("sessions_search_async", search_async),
        export("sessions_search_cancel", |a| Ok(jobs::cancel(a.get::<u64>(0)?))),
        export("sessions_preview_at_async", preview_at_async),
    ]
}

/// Options of a search, as Lua passes them (every key optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SearchArgs {
    pub case: Case,
    pub exclude: Option<String>,
    pub limit: Option<usize>,
    pub per_session: Option<usize>,
    /// The other agents' sessions too.
    pub external: bool,
}

impl SearchArgs {
    fn options(&self) -> Options {
        Options {
            exclude: self.exclude.clone(),
            limit: self.limit,
            per_session: self.per_session,
            ..Default::default()
        }
    }
}

/// A batch is sent at most this often after the first one: each costs the main loop a decode and a
/// redraw.
pub const BATCH_EVERY: Duration = Duration::from_millis(30);

#[derive(Serialize)]
struct Everything {
    hits: Vec<Hit>,
    summary: Summary,
}

fn query_args(a: &Args) -> BridgeResult<(PathBuf, Query, SearchArgs)> {
    let ws = workspace(a)?;
    let text: String = a.get(1)?;
    let args = table_arg::<SearchArgs>(a, 2)?;
    let query = Query::new(&text, args.case)?;
    Ok((ws, query, args))
}

/// `sessions_search(workspace, query, opts)`: every hit, on the calling thread.
fn search_sync(a: &Args) -> BridgeResult<String> {
    let (ws, query, args) = query_args(a)?;
    let (hits, summary) = if args.external {
        let mut hits = Vec::new();
        let never = std::sync::atomic::AtomicBool::new(false);
        let summary =
            import::search::search_with_ours(&ws, &Homes::from_env(), &query, &args.options(), &never, |s| {
                hits.extend(s.hits)
            })?;
        (hits, summary)
    } else {
        search::search_all(&ws, &query, &args.options())?
    };
    super::bulk(&Everything { hits, summary })
}

/// `sessions_search_async(workspace, query, opts, callback)`.
fn search_async(a: &Args) -> BridgeResult<u64> {
    let (ws, query, args) = query_args(a)?;
    let callback: jobs::StreamCallback = a.function(3)?;
    jobs::spawn_stream("sessions_search_async", Some("search"), callback, move |stream| {
        let mut pending: Vec<Hit> = Vec::new();
        let mut last: Option<Instant> = None;
        let flush = |pending: &mut Vec<Hit>| -> BridgeResult<()> {
            if !pending.is_empty() {
                stream.send(super::bulk(&pending)?);
                pending.clear();
            }
            Ok(())
        };
        let mut failed = None;
        let sink = |found: search::SessionHits| {
            pending.extend(found.hits);
            if last.is_none_or(|t| t.elapsed() >= BATCH_EVERY) {
                if let Err(e) = flush(&mut pending) {
                    failed = Some(e);
                }
                last = Some(Instant::now());
            }
        };
        let summary = match args.external {
            true => {
                import::search::search_with_ours(&ws, &Homes::from_env(), &query, &args.options(), stream.flag(), sink)?
            }
            false => search::search(&ws, &query, &args.options(), stream.flag(), sink)?,
        };
        if let Some(e) = failed {
            return Err(e);
        }
        flush(&mut pending)?;
        Ok(summary)
    })
}

/// Messages shown before the hit in its preview.
const CONTEXT_BEFORE: usize = 3;

/// What the picker's preview of a hit shows: the session's summary and its history around message
/// `at` (1-based), from a few messages before it; `tail.from` says where the slice starts.
#[derive(Debug, Serialize)]
pub struct PreviewAt {
    #[serde(flatten)]
    pub preview: Preview,
    pub at: usize,
}

pub fn preview_at(workspace: &std::path::Path, id: &str, at: usize, limits: &PreviewArgs) -> BridgeResult<PreviewAt> {
    if import::is_external_id(id) {
        let preview = super::preview::external(workspace, id, |messages| around(id, messages, at, limits))?;
        return Ok(PreviewAt { preview, at });
    }
    let ctx = Context::open(workspace, id)?;
    let loaded = session::load(&ctx)?;
    let tail = around(id, &loaded.messages, at, limits)?;
    Ok(PreviewAt { preview: Preview::new(loaded, tail, &limits.pricing), at })
}

/// The slice of `messages` a preview at message `at` (1-based) shows.
fn around(id: &str, messages: &[Message], at: usize, limits: &PreviewArgs) -> BridgeResult<display::Slice> {
    let total = messages.len();
    if at == 0 || at > total {
        return Err(BridgeError::msg(format!("session {id} has no message {at} (it has {total})")));
    }
    let refs: Vec<&Message> = messages.iter().collect();
    let from = (at - 1).saturating_sub(CONTEXT_BEFORE);
    let mut to = at;
    let mut used = 0;
    while to < total && to - from < limits.max_messages {
        let m = refs[to];
        used += m.content.len().min(limits.max_bytes)
            + m.tool_result.as_ref().map_or(0, |t| t.content.len().min(limits.max_bytes));
        if used > limits.budget {
            break;
        }
        to += 1;
    }
    let mut tail = display::slice(&refs, from, to, limits.max_bytes);
    // The hit's own message as the agent buffer shows it, so the match is in what is drawn.
    tail.messages[at - 1 - from] = display::shown(refs[at - 1], display::MAX_DISPLAY_BYTES);
    Ok(tail)
}

/// `sessions_preview_at_async(workspace, id, at, callback)`: [`preview_at`] on a worker thread, in
/// the previews' lane.
fn preview_at_async(a: &Args) -> BridgeResult<u64> {
    let ws = workspace(a)?;
    let id: String = a.get(1)?;
    let at: usize = a.get(2)?;
    let callback: jobs::Callback = a.function(3)?;
    jobs::spawn("sessions_preview_at_async", Some("preview"), callback, move || {
        let limits = PreviewArgs { max_messages: 40, ..Default::default() };
        preview_at(&ws, &id, at, &limits).and_then(|p| super::bulk(&p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Writer, WriterOptions};

    #[test]
    fn a_preview_at_a_hit_starts_a_few_messages_before_it_and_shows_it_whole() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("ctx");
        let w = Writer::open(&ctx, WriterOptions::default()).expect("writer");
        for i in 0..20 {
            w.append(&Message::user(format!("message {i} {}", "x".repeat(3000)))).expect("append");
        }
        w.close().expect("close");
        let p = preview_at(ws.path(), &ctx.id, 10, &PreviewArgs::default()).expect("preview");
        assert_eq!((p.at, p.preview.tail.from, p.preview.messages), (10, 6, 20));
        assert_eq!(p.preview.tail.messages[3].cut_bytes, 0, "the hit itself is not cut to the preview's 2 KiB");
        assert!(p.preview.tail.messages[0].cut_bytes > 0);
        let err = preview_at(ws.path(), &ctx.id, 21, &PreviewArgs::default()).unwrap_err();
        assert!(err.message().contains("has no message 21 (it has 20)"), "{err}");
        assert!(preview_at(ws.path(), "../x", 1, &PreviewArgs::default()).is_err());
    }

    #[test]
    fn search_args_parse_their_case() {
        let v = serde_json::json!({"case": "sensitive", "limit": 3});
        let a: SearchArgs = serde_json::from_value(v).expect("args");
        assert_eq!((a.case, a.limit), (Case::Sensitive, Some(3)));
        assert!(serde_json::from_value::<SearchArgs>(serde_json::json!({"case": "loud"})).is_err());
    }
}
