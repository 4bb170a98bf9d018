//! Which copy is whose: the map of originals (`source:id`) to their copies, read once per workspace and written to
//! `sessions/kept.json` when it changed, rebuilt from the logs' first lines when that file is missing or damaged; and
//! the one-sync-at-a-time rule of a workspace, held while a sync has the map.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::MAP_FILE_NAME;
use crate::session::contain::{Access, Dir};
use crate::session::entry::Entry;
use crate::session::{self, Context};

#[derive(Debug, Default, Serialize, Deserialize)]
struct MapFile {
    version: u32,
    workspace: PathBuf,
    copies: HashMap<String, String>,
}

const MAP_VERSION: u32 = 1;

/// Per workspace: the originals-to-copies map, once read.
static MAPS: LazyLock<Mutex<HashMap<PathBuf, HashMap<String, String>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn maps() -> MutexGuard<'static, HashMap<PathBuf, HashMap<String, String>>> {
    MAPS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Syncs of one workspace run one at a time (the keeper's, `:PseudoKeep`'s, an import's), so two never copy the same
/// original twice.
static SYNCS: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// Forgets the maps this process read (the files stay): for tests that lose a map on purpose.
pub fn forget() {
    maps().clear();
}

pub(super) fn take_map(ws: &Path) -> HashMap<String, String> {
    // wait for another sync of the workspace to put the map back
    loop {
        {
            let mut busy = SYNCS.lock().unwrap_or_else(PoisonError::into_inner);
            if busy.insert(ws.to_path_buf()) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Some(m) = maps().get(ws) {
        return m.clone();
    }
    read_map(ws).unwrap_or_else(|| scan(ws))
}

pub(super) fn put_map(ws: &Path, map: HashMap<String, String>, before: HashMap<String, String>) {
    if map != before {
        let file = MapFile { version: MAP_VERSION, workspace: ws.to_path_buf(), copies: map.clone() };
        if let (Ok(dir), Ok(data)) = (Dir::sessions(ws), serde_json::to_vec(&file)) {
            let _ = dir.replace_file(MAP_FILE_NAME, &data);
        }
    }
    maps().insert(ws.to_path_buf(), map);
    SYNCS.lock().unwrap_or_else(PoisonError::into_inner).remove(ws);
}

fn read_map(ws: &Path) -> Option<HashMap<String, String>> {
    let dir = Dir::sessions(ws).ok()?;
    let mut data = Vec::new();
    dir.open(MAP_FILE_NAME, Access::Read).ok()?.read_to_end(&mut data).ok()?;
    let file = serde_json::from_slice::<MapFile>(&data).ok()?;
    (file.version == MAP_VERSION && file.workspace == ws).then_some(file.copies)
}

/// The map rebuilt from the logs: every session whose first line says it is a kept copy.
fn scan(ws: &Path) -> HashMap<String, String> {
    let mut found: HashMap<String, (i64, String)> = HashMap::new();
    let Ok(dir) = std::fs::read_dir(session::sessions_dir(ws)) else { return HashMap::new() };
    for e in dir.flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        let Ok(ctx) = Context::for_id(ws, &id) else { continue };
        let Some(first) = crate::import::first_line(&ctx.jsonl_path) else { continue };
        let Ok(entry) = serde_json::from_str::<Entry>(&first) else { continue };
        let Some(from) = entry.imported_from.filter(|f| f.kept) else { continue };
        let key = format!("{}:{}", from.source, from.id);
        // two copies of one original (two editors raced): the older one is kept up to date
        if found.get(&key).is_none_or(|(ts, old)| (entry.ts, &id) < (*ts, old)) {
            found.insert(key, (entry.ts, id));
        }
    }
    found.into_iter().map(|(k, (_, id))| (k, id)).collect()
}
