//! Full-text search over the other agents' sessions of the workspace (issue 46): what `sessions search --external`
//! and `sessions.search(query, { external = true })` add to the search of our own logs.
//!
//! Each session is searched as a resume would restore it: its transcript converted by its reader
//! ([`super::Conversation::restored`]), every message searched whole by our search's own matcher
//! ([`search::search_messages`]), so a hit's index is the message's place in the history a preview shows. Most
//! sessions do not hold the text, and those cost no conversion: the words index ([`super::words`]) names the
//! sessions that may, and a JSON transcript's raw bytes are tested for every JSON encoding of the query
//! ([`search::raw_may_hold`]) before it is converted. A session the index has not seen in its present state is
//! converted and searched whole, and its words indexed for the next search. The sessions are searched newest first
//! on the driver our search uses ([`search::search_in_order`]), hits handed over in that order as they are found.
//!
//! Architecture invariant: as listing, searching opens the other agents' files for reading only.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use super::{ExternalItem, Homes, Source, list, words};
use crate::session::ListOptions;
use crate::session::search::{self, Options, Query, SessionHits, Summary};

/// Searches the workspace's sessions of the other agents (as [`list::list_with`] finds them), newest first, and hands
/// `sink` each that holds the text, in that order. A transcript that cannot be read is skipped and named in the
/// summary.
pub fn search(
    workspace: &Path,
    homes: &Homes,
    query: &Query,
    opts: &Options,
    cancel: &AtomicBool,
    sink: impl FnMut(SessionHits) + Send,
) -> Summary {
    search_listed(workspace, homes, query, opts, &list::ListOptions::default(), cancel, sink)
}

/// [`search`] over the sessions a list with `listing` finds: with `no_refresh`, those the list's cache holds, as it
/// holds them (`sessions search --external --no-refresh`: no store is looked at; a transcript changed since the last
/// list is searched as it is now only when the words index names it).
pub fn search_listed(
    workspace: &Path,
    homes: &Homes,
    query: &Query,
    opts: &Options,
    listing: &list::ListOptions,
    cancel: &AtomicBool,
    sink: impl FnMut(SessionHits) + Send,
) -> Summary {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    std::thread::scope(|scope| {
        // the words index read, and asked, while the list is read (each a few milliseconds at 10,000 sessions)
        let asked = scope.spawn(|| {
            let mut index = words::take(&ws);
            let candidates = index.candidates(&query.text);
            Asked { ws: &ws, index, candidates }
        });
        let none = || Asked { ws: &ws, index: words::Index::default(), candidates: None };
        let asked = || asked.join().unwrap_or_else(|_| none());
        // as `list --external`: a conversation a session of ours holds (one we ran with an ACP agent or handed over,
        // a kept copy's original) is ours to search, not the agent's transcript of it: one hit per message
        let ours = crate::session::list(workspace, &ListOptions { include_empty: true, ..Default::default() })
            .unwrap_or_default();
        let is_ours = list::ours_already_by(&ours, true);
        let mut sink = sink;
        let mut asked = Some(asked);
        if listing.no_refresh {
            // the cache's rows read in place: an item is made only of the few sessions searched
            let served = list::with_cached_rows_in(&ws, homes, listing, false, |rows, names| {
                let rows: Vec<&list::Row> =
                    rows.iter().filter(|r| r.unsupported.is_none() && !is_ours(r.source, r.session_id)).collect();
                let listed: Vec<(&str, words::Stamp)> = rows.iter().map(|r| (r.id, r.stamp)).collect();
                let asked = asked.take().map_or_else(none, |a| a());
                search_among(asked, query, opts, cancel, &mut sink, &listed, |n| rows[n].item(names))
            });
            if let Some(summary) = served {
                return summary;
            }
        }
        let listed: Vec<(ExternalItem, words::Stamp)> = list::list_stamped(&ws, homes, listing)
            .into_iter()
            .filter(|(i, _)| i.unsupported.is_none() && !is_ours(i.source, &i.session_id))
            .collect();
        let keys: Vec<(&str, words::Stamp)> = listed.iter().map(|(i, stamp)| (i.id.as_str(), *stamp)).collect();
        let asked = asked.take().map_or_else(none, |a| a());
        search_among(asked, query, opts, cancel, sink, &keys, |n| listed[n].0.clone())
    })
}

/// The workspace's words index, and the sessions it says may hold the query (`None`: any may).
struct Asked<'a> {
    ws: &'a Path,
    index: words::Index,
    candidates: Option<std::collections::HashSet<String>>,
}

/// The search of the sessions `listed` names (by the words index's key, [`key`], with the stamp each was listed at),
/// newest first: the index rules out the sessions that cannot hold the text, `item` makes the item of each of the
/// others (its place in `listed`), which are searched.
fn search_among(
    Asked { ws, mut index, candidates }: Asked,
    query: &Query,
    opts: &Options,
    cancel: &AtomicBool,
    sink: impl FnMut(SessionHits) + Send,
    listed: &[(&str, words::Stamp)],
    item: impl Fn(usize) -> ExternalItem,
) -> Summary {
    // the state the index holds each listed session at (the list's `stat`: the files are not asked again)
    let known: Vec<Option<words::Stamp>> = listed.iter().map(|(k, _)| index.stamp(k)).collect();
    // the index holds as many as are listed (the keys are unique): none of its sessions is gone, none to look for
    let held = known.iter().filter(|s| s.is_some()).count();
    let mut changed = held < index.len() && {
        let keys: rustc_hash::FxHashSet<&str> = listed.iter().map(|(k, _)| *k).collect();
        index.retain(|k| keys.contains(k))
    };
    // (item, its stamp now, whether the index holds that state of it)
    let mut items: Vec<(ExternalItem, words::Stamp, bool)> = listed
        .iter()
        .enumerate()
        .filter_map(|(n, &(k, stamp))| {
            let fresh = known[n] == Some(stamp);
            let wanted = !fresh || candidates.as_ref().is_none_or(|c| c.contains(k));
            wanted.then(|| (item(n), stamp, fresh))
        })
        .collect();
    // newest first, as a list shows them (`listed` may come in no order)
    items.sort_by(|(a, ..), (b, ..)| {
        b.modified.cmp(&a.modified).then_with(|| a.path.as_os_str().cmp(b.path.as_os_str()))
    });
    let indexed: Mutex<Vec<(String, words::Stamp, Vec<String>)>> = Mutex::new(Vec::new());
    let ruled_out = listed.len() - items.len();
    let mut summary = search::search_in_order(
        items.len(),
        opts,
        cancel,
        |n, buf, stopped| {
            let (item, stamp, fresh) = &items[n];
            let (found, words) = search_one(item, query, buf, stopped, !fresh)?;
            if let Some(w) = words {
                indexed.lock().unwrap_or_else(|p| p.into_inner()).push((key(item), *stamp, w));
            }
            Ok(found)
        },
        sink,
    );
    // the index answered for them: searched, without a hit
    summary.sessions += ruled_out;
    for (k, stamp, w) in indexed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        index.put_words(&k, stamp, &w);
        changed = true;
    }
    words::put(ws, index, changed);
    summary
}

/// Our own sessions' search ([`search::search`]) and then the other agents' ([`search`]), as one: the hits of ours
/// (newest first), then theirs (newest first), `opts.limit` counted over both, one summary. What
/// `sessions.search(query, { external = true })` and the picker's search with `<C-o>` on run.
pub fn search_with_ours(
    workspace: &Path,
    homes: &Homes,
    query: &Query,
    opts: &Options,
    cancel: &AtomicBool,
    mut sink: impl FnMut(SessionHits) + Send,
) -> crate::session::Result<Summary> {
    let mut summary = search::search(workspace, query, opts, cancel, &mut sink)?;
    if summary.truncated || summary.cancelled {
        return Ok(summary);
    }
    let left = opts.limit.map(|l| l.saturating_sub(summary.hits));
    if left == Some(0) {
        return Ok(summary);
    }
    let theirs = search(workspace, homes, query, &Options { limit: left, ..opts.clone() }, cancel, sink);
    summary.sessions += theirs.sessions;
    summary.matched += theirs.matched;
    summary.hits += theirs.hits;
    summary.replayed += theirs.replayed;
    summary.truncated = theirs.truncated;
    summary.cancelled = theirs.cancelled;
    summary.skipped.extend(theirs.skipped);
    Ok(summary)
}

/// [`search`], gathering every hit.
pub fn search_all(workspace: &Path, homes: &Homes, query: &Query, opts: &Options) -> (Vec<search::Hit>, Summary) {
    search_all_listed(workspace, homes, query, opts, &list::ListOptions::default())
}

/// [`search_listed`], gathering every hit.
pub fn search_all_listed(
    workspace: &Path,
    homes: &Homes,
    query: &Query,
    opts: &Options,
    listing: &list::ListOptions,
) -> (Vec<search::Hit>, Summary) {
    let mut hits = Vec::new();
    let no = AtomicBool::new(false);
    let summary = search_listed(workspace, homes, query, opts, listing, &no, |s| hits.extend(s.hits));
    (hits, summary)
}

/// What the index keys a session by: its row's id (`AGENT:SESSION_ID`), unique in the list.
fn key(item: &ExternalItem) -> String {
    item.id.clone()
}

/// Whether the session is a file of its own (a JSONL transcript), as every store but opencode's database keeps them.
fn own_file(item: &ExternalItem) -> bool {
    item.source != Source::Opencode
}

type Searched = (Option<SessionHits>, Option<Vec<String>>);

/// One session's hits; with `index`, also its words (the session is then converted whatever its bytes hold).
fn search_one(
    item: &ExternalItem,
    query: &Query,
    buf: &mut Vec<u8>,
    stopped: &dyn Fn() -> bool,
    index: bool,
) -> std::result::Result<Searched, String> {
    let named = |e: &dyn std::fmt::Display| format!("{}: {e}", item.path.display());
    // opencode's database may hold what is still in its write-ahead log: only a transcript's bytes are tested
    if own_file(item) {
        buf.clear();
        let mut file = std::fs::File::open(&item.path).map_err(|e| named(&e))?;
        // room for it all at once: a buffer grown by doubling copied each transcript twice over
        buf.reserve(file.metadata().map_or(0, |m| m.len() as usize) + 1);
        std::io::Read::read_to_end(&mut file, buf).map_err(|e| named(&e))?;
        if !index && !search::raw_may_hold(buf, query) {
            return Ok((None, None));
        }
    }
    if stopped() {
        return Ok((None, None));
    }
    // a transcript is parsed from the bytes tested (read once)
    let conv = if own_file(item) { super::parse_item(item, buf) } else { super::read_item(item) };
    let conv = conv.map_err(|e| named(&e))?;
    let messages = conv.restored();
    let words = index.then(|| words::distinct_words(&messages));
    let mut hits = search::search_messages(&item.id, &item.title, item.modified, &messages, query);
    for h in &mut hits {
        h.agent = Some(item.source.agent());
    }
    let (id, title) = (item.id.clone(), item.title.clone());
    Ok((Some(SessionHits { id, title, last_message: item.modified, hits, more: 0, bad_lines: 0 }), words))
}
