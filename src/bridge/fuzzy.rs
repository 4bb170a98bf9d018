//! The float picker's fuzzy filter ([`crate::fuzzy`]) for Lua (`lua/pseudoclaude/float/matcher.lua`, engine "rust").
//!
//! | export            | arguments                                      | returns                                       |
//! |-------------------|------------------------------------------------|-----------------------------------------------|
//! | `fuzzy_new`       | texts joined by NUL bytes, their count         | a handle                                      |
//! | `fuzzy_add`       | handle, texts joined by NUL bytes, their count | the handle's number of texts                  |
//! | `fuzzy_filter`    | handle, query, narrow?, candidates?            | the 1-based indices, best first, packed       |
//! | `fuzzy_positions` | handle, query, indices                         | per index: how many, then the offsets, packed |
//! | `fuzzy_free`      | handle                                         | nil                                           |
//!
//! The texts stay here: a keystroke sends the query and gets the matches back as one string of little-endian
//! `uint32` (4 bytes a match; Lua reads it through the FFI), the bulk rule of "How values cross" in
//! [`super`]. `narrow`: only the previous result is searched (typing forward), so the previous matches never
//! cross back. The main thread calls these (a keystroke must draw before the next key); 100,000 texts take a few
//! milliseconds. A handle is freed by `fuzzy_free` (the Lua matcher's finaliser calls it). The full list's matcher
//! is built on the worker thread that reads the list (`sessions_list_async` with `matcher`, [`insert`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nvim_oxi::Object;

use super::{BridgeError, BridgeResult, export, export_object};
use crate::fuzzy::Matcher;

pub fn exports() -> Vec<(&'static str, Object)> {
    vec![
        export("fuzzy_new", |a| {
            let mut m = Matcher::new();
            add(&mut m, &a.bytes(0)?, a.get::<usize>(1)?)?;
            Ok(insert(m))
        }),
        export("fuzzy_add", |a| {
            let (id, texts, count) = (a.get::<u64>(0)?, a.bytes(1)?, a.get::<usize>(2)?);
            let mut all = matchers();
            let m = all.get_mut(&id).ok_or_else(|| gone(id))?;
            add(m, &texts, count)?;
            Ok(m.len())
        }),
        export_object("fuzzy_filter", |a| {
            let (id, query) = (a.get::<u64>(0)?, a.get::<String>(1)?);
            let narrow = a.get::<Option<bool>>(2)?.unwrap_or(false);
            let within = a.get::<Option<Vec<u32>>>(3)?;
            let mut all = matchers();
            let m = all.get_mut(&id).ok_or_else(|| gone(id))?;
            let found = m.filter(&query, within.as_deref(), narrow);
            let mut packed = Vec::with_capacity(found.len() * 4);
            for i in found {
                packed.extend_from_slice(&i.to_le_bytes());
            }
            Ok(Object::from(nvim_oxi::String::from_bytes(&packed)))
        }),
        // the matched characters of the rows on the screen: one crossing for all of them, from the texts kept here
        export_object("fuzzy_positions", |a| {
            let (id, query, indices) = (a.get::<u64>(0)?, a.get::<String>(1)?, a.get::<Vec<u32>>(2)?);
            let all = matchers();
            let m = all.get(&id).ok_or_else(|| gone(id))?;
            let mut packed = Vec::new();
            m.positions_packed(&query, indices, &mut packed);
            Ok(Object::from(nvim_oxi::String::from_bytes(&packed)))
        }),
        export("fuzzy_free", |a| {
            matchers().remove(&a.get::<u64>(0)?);
            Ok(())
        }),
    ]
}

/// Keeps `m` for Lua; returns its handle (a worker thread's too: the full list comes with its matcher built).
pub fn insert(m: Matcher) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    matchers().insert(id, m);
    id
}

/// Adds `count` texts joined by NUL bytes; refuses them (adding none) when there are not `count` of them (a text
/// with a NUL in it: Lua then filters with its own engine).
fn add(m: &mut Matcher, joined: &[u8], count: usize) -> BridgeResult<()> {
    let texts: Vec<&[u8]> = if count == 0 { Vec::new() } else { joined.split(|&b| b == 0).collect() };
    if texts.len() != count {
        return Err(BridgeError::msg(format!("expected {count} texts, got {}", texts.len())));
    }
    texts.into_iter().for_each(|t| m.push(t));
    Ok(())
}

fn gone(id: u64) -> BridgeError {
    BridgeError::msg(format!("no matcher {id} (freed)"))
}

static NEXT: AtomicU64 = AtomicU64::new(1);
static MATCHERS: std::sync::LazyLock<Mutex<HashMap<u64, Matcher>>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

fn matchers() -> MutexGuard<'static, HashMap<u64, Matcher>> {
    MATCHERS.lock().unwrap_or_else(PoisonError::into_inner)
}
