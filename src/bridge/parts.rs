//! Results handed over a part per main-loop step: a worker thread holds the parts here under a ticket and Lua takes
//! them one at a time (`bulk_take`, and `sessions_list_take` for the session list). Converting a long result into
//! Lua at once is a long step of its own (100,000 messages: tens of MB of JSON text copied in one callback, issue
//! 39); a part is copied only when it is taken, in the step that decodes it. A packed session list can be kept
//! instead (`sessions_list_keep`): lent in place to Lua's FFI until Lua releases it, never copied.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use nvim_oxi::Object;
use serde::Serialize;

use super::{Args, BridgeResult};

/// A result waiting to be taken: its parts, in order.
pub type Parts = VecDeque<Arc<Vec<u8>>>;

static NEXT: AtomicU64 = AtomicU64::new(1);
static HELD: LazyLock<Mutex<HashMap<u64, Parts>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// Results lent to Lua in place ([`keep`]), until [`release`]. Locked only around the map's own change: a release can
/// come from a Lua finalizer, run by any allocation of Lua's.
static KEPT: LazyLock<Mutex<HashMap<u64, Arc<Vec<u8>>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn held() -> MutexGuard<'static, HashMap<u64, Parts>> {
    HELD.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Holds `parts` to be taken; their ticket (a result without parts holds nothing: there is none to take).
pub fn hold(parts: Parts) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if !parts.is_empty() {
        held().insert(id, parts);
    }
    id
}

/// A long JSON result held in parts ([`super::bulk_chunks`]): what the `on_done` callback gets, `{id, count}`;
/// `core.decode_parts()` takes and decodes a part per main-loop step.
#[derive(Debug, Serialize)]
pub struct Held {
    pub id: u64,
    pub count: usize,
}

/// `chunks` held as parts.
pub fn hold_chunks(chunks: Vec<String>) -> Held {
    let count = chunks.len();
    Held { id: hold(chunks.into_iter().map(|c| Arc::new(c.into_bytes())).collect()), count }
}

/// The next part of result `id`, taken from the held ones (the result is forgotten with its last part).
fn pop(id: u64) -> Option<Arc<Vec<u8>>> {
    let mut held = held();
    let part = held.get_mut(&id).and_then(VecDeque::pop_front);
    if held.get(&id).is_some_and(VecDeque::is_empty) {
        held.remove(&id);
    }
    part
}

/// `bulk_take(id)` (and `sessions_list_take(id)`): the next part of result `id` as a Lua string, each once (the
/// result is forgotten with its last part); nil when all was taken.
pub fn take(a: &Args) -> BridgeResult<Object> {
    let id: u64 = a.get(0)?;
    let part = pop(id);
    Ok(part.map_or(Object::nil(), |d| Object::from(nvim_oxi::String::from_bytes(&d))))
}

/// Where a kept result is in the core's memory ([`keep`]).
#[derive(Debug, Serialize)]
pub struct Kept {
    pub addr: u64,
    pub len: usize,
}

/// `sessions_list_keep(id)`: the next part of result `id` (a whole packed list) lent instead of copied into a Lua
/// string: its address and length, valid until `sessions_list_release(id)`; nil when there is none. The picker's
/// full list of 10,000 other agents' sessions is 4.4 MB, whose two copies into Lua took ~9 ms of one main-loop step.
pub fn keep(a: &Args) -> BridgeResult<Option<Kept>> {
    let id: u64 = a.get(0)?;
    let part = pop(id);
    Ok(part.map(|data| {
        let kept = Kept { addr: data.as_ptr() as u64, len: data.len() };
        KEPT.lock().unwrap_or_else(PoisonError::into_inner).insert(id, data);
        kept
    }))
}

/// `sessions_list_release(id)`: forgets the result [`keep`] lent under `id` (true when there was one).
pub fn release(a: &Args) -> BridgeResult<bool> {
    let id: u64 = a.get(0)?;
    let gone = KEPT.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
    Ok(gone.is_some())
}

/// How many results are lent now (the tests' check that a released list is gone).
pub fn kept_count() -> usize {
    KEPT.lock().unwrap_or_else(PoisonError::into_inner).len()
}
