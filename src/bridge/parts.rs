//! Results handed over a part per main-loop step: a worker thread holds the parts here under a ticket and Lua takes
//! them one at a time (`bulk_take`, and `sessions_list_take` for the session list). Converting a long result into
//! Lua at once is a long step of its own (100,000 messages: tens of MB of JSON text copied in one callback, issue
//! 39); a part is copied only when it is taken, in the step that decodes it.

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

/// `bulk_take(id)` (and `sessions_list_take(id)`): the next part of result `id` as a Lua string, each once (the
/// result is forgotten with its last part); nil when all was taken.
pub fn take(a: &Args) -> BridgeResult<Object> {
    let id: u64 = a.get(0)?;
    let mut held = held();
    let part = held.get_mut(&id).and_then(VecDeque::pop_front);
    if held.get(&id).is_some_and(VecDeque::is_empty) {
        held.remove(&id);
    }
    drop(held);
    Ok(part.map_or(Object::nil(), |d| Object::from(nvim_oxi::String::from_bytes(&d))))
}
