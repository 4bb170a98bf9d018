//! Large tool results live beside the log, in `tool-results/`, not inside it.
//!
//! A 12.8 million character tool result once froze a peer's resume, and re-embedding results in every
//! compaction snapshot grew another's logs to 11 GiB. So a result above the threshold is written to
//! `tool-results/<sha256>.txt` first (synced, then renamed into place), and the log line carries a
//! preview plus a [`SpillRef`] (path, size, hash). Files are content-addressed: a snapshot that holds
//! the same output again points at the same file and never writes it twice.
//!
//! A spill is durable before the log line that references it is written: the file's data is synced
//! before the rename, and `tool-results/` and the session directory after it. A file (or folder)
//! already in place is trusted only after its directory is synced, since the process that made it
//! may have failed or died before syncing.

use std::fs::File;
use std::io::{self, Read};

use sha2::{Digest, Sha256};

use super::contain::{Access, Dir};
use super::disk::{self, Disk, Open, OsDisk};
use super::{Context, Result, TOOL_RESULTS_DIR_NAME, io_err};
use crate::message::{SpillRef, ToolResult};

/// Default size above which a tool result is spilled.
pub const DEFAULT_THRESHOLD: usize = 64 * 1024;
/// How much of a spilled result stays in the log line.
pub const PREVIEW_BYTES: usize = 2048;

/// The result as the log stores it: a large one's content moved to a spill file, leaving a preview.
/// Results already spilled, or small enough, are copied as they are. The large content itself is
/// never copied in memory.
pub fn spill_if_large(ctx: &Context, result: &ToolResult, threshold: usize) -> Result<ToolResult> {
    spill_if_large_on(&OsDisk, ctx, result, threshold)
}

/// The one rule of layer 1: a result held inline whose text is over `threshold` bytes goes to its own
/// file. The runner (so that the model sees the preview at once), the writer (whatever reaches the
/// log) and compaction (an inline result of an older log) all ask this.
pub fn needs_spill(result: &ToolResult, threshold: usize) -> bool {
    result.spill.is_none() && result.content.len() > threshold
}

/// [`spill_if_large`] on another [`Disk`].
pub fn spill_if_large_on(disk: &dyn Disk, ctx: &Context, result: &ToolResult, threshold: usize) -> Result<ToolResult> {
    if !needs_spill(result, threshold) {
        return Ok(result.clone());
    }
    let spill = write_on(disk, ctx, result.content.as_bytes())?;
    Ok(ToolResult {
        tool_call_id: result.tool_call_id.clone(),
        content: preview(&result.content, &spill),
        is_error: result.is_error,
        spill: Some(spill),
        sandbox: result.sandbox.clone(),
    })
}

/// Writes `data` to its content-addressed file unless an intact copy is already there.
pub fn write(ctx: &Context, data: &[u8]) -> Result<SpillRef> {
    write_on(&OsDisk, ctx, data)
}

/// [`write`] on another [`Disk`]. On [`OsDisk`] every step goes through checked descriptors: a
/// linked session or `tool-results` folder is refused.
pub fn write_on(disk: &dyn Disk, ctx: &Context, data: &[u8]) -> Result<SpillRef> {
    let sha256 = hex(&Sha256::digest(data));
    let name = format!("{sha256}.txt");
    let spill = SpillRef { path: format!("{TOOL_RESULTS_DIR_NAME}/{name}"), bytes: data.len() as u64, sha256 };
    let path = ctx.spill_dir.join(&name);
    let dir = &ctx.spill_dir;
    disk::ensure_dir(disk, dir)?;
    if disk.file_len(&path) != Some(spill.bytes) {
        let tmp = dir.join(format!(".{name}.{:08x}.tmp", rand::random::<u32>()));
        let mut f = disk.open(&tmp, Open::CreateNew { mode: 0o600 })?;
        let written = f
            .write_all(data)
            .and_then(|_| f.sync_all())
            .map_err(io_err("cannot write spilled tool result", &path))
            .and_then(|_| disk.rename(&tmp, &path));
        if let Err(e) = written {
            disk.remove_file(&tmp);
            return Err(e);
        }
    }
    disk.sync_dir(dir)?;
    Ok(spill)
}

/// The text kept in the log: the start of the output and where the rest is.
pub fn preview(content: &str, spill: &SpillRef) -> String {
    let mut end = PREVIEW_BYTES.min(content.len());
    while !content.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... output truncated: {} bytes in total, the full output is in {}]",
        &content[..end],
        spill.bytes,
        spill.path
    )
}

/// Why a spill file cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The reference does not name a file of our own `tool-results/` folder.
    InvalidPath,
    Missing,
    Altered,
    /// The file or a folder on its way is a link, or not a regular file: it was not opened.
    Refused,
}

/// Checks a spill file's size and hash, streaming it (a 100 MiB file is never held in memory).
pub fn verify(ctx: &Context, spill: &SpillRef) -> std::result::Result<(), Problem> {
    let mut f = open_checked(ctx, spill)?;
    let len = f.metadata().map_err(|_| Problem::Missing)?.len();
    if len != spill.bytes {
        return Err(Problem::Altered);
    }
    let mut hasher = Sha256::new();
    // io::copy streams it in small blocks and retries an interrupted read.
    io::copy(&mut f, &mut hasher).map_err(|_| Problem::Missing)?;
    if hex(&hasher.finalize()) != spill.sha256 { Err(Problem::Altered) } else { Ok(()) }
}

/// Reads a spilled result in full (for tools and the UI; the loader never does).
pub fn read(ctx: &Context, spill: &SpillRef) -> Result<String> {
    let name = resolve(spill).ok_or_else(|| super::Error::Io {
        action: "refusing spill reference outside tool-results".into(),
        path: spill.path.clone().into(),
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })?;
    let path = ctx.spill_dir.join(name);
    let mut text = String::new();
    Dir::session(ctx)?
        .subdir(TOOL_RESULTS_DIR_NAME)?
        .open(name, Access::Read)?
        .read_to_string(&mut text)
        .map_err(io_err("cannot read spilled tool result", &path))?;
    Ok(text)
}

/// The spill file a reference names, opened through checked descriptors.
fn open_checked(ctx: &Context, spill: &SpillRef) -> std::result::Result<File, Problem> {
    let name = resolve(spill).ok_or(Problem::InvalidPath)?;
    let opened =
        Dir::session(ctx).and_then(|d| d.subdir(TOOL_RESULTS_DIR_NAME)).and_then(|d| d.open(name, Access::Read));
    match opened {
        Ok(f) => Ok(f),
        Err(super::Error::Refused { .. }) => Err(Problem::Refused),
        Err(_) => Err(Problem::Missing),
    }
}

/// The file name a reference names in `tool-results/`, only when it is `tool-results/<64 hex>.txt`: a
/// log line is data, and must not be able to point the loader at `../../etc/passwd`.
pub(crate) fn resolve(spill: &SpillRef) -> Option<&str> {
    let name = spill.path.strip_prefix(TOOL_RESULTS_DIR_NAME)?.strip_prefix('/')?;
    is_file_name(name).then_some(name)
}

/// Whether `name` is a spill file's name: `<64 hex>.txt`.
pub(crate) fn is_file_name(name: &str) -> bool {
    name.strip_suffix(".txt").is_some_and(|stem| stem.len() == 64 && stem.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// What the loader puts in place of a spilled result it cannot trust.
pub fn placeholder(result: &ToolResult, spill: &SpillRef, problem: &Problem) -> String {
    let why = match problem {
        Problem::InvalidPath => "the log names an invalid spill file",
        Problem::Missing => "that file is missing",
        Problem::Altered => "that file has been altered since it was written",
        Problem::Refused => "that file (or its folder) is a symbolic link or not a regular file, and was not opened",
    };
    format!(
        "[pseudoclaude: the full output of this tool call ({} bytes) was saved to {}, but {why}. \
         What the log kept of it follows.]\n{}",
        spill.bytes, spill.path, result.content
    )
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preview_stops_before_a_character_the_limit_would_cut() {
        let content = "€".repeat(1000); // 3 bytes each: byte 2048 falls inside the 683rd
        let spill = SpillRef { path: "tool-results/x.txt".into(), bytes: 3000, sha256: String::new() };
        let p = preview(&content, &spill);
        assert_eq!(
            p,
            format!(
                "{}\n[... output truncated: 3000 bytes in total, the full output is in tool-results/x.txt]",
                "€".repeat(682)
            )
        );
    }

    #[test]
    fn only_64_hex_digits_name_a_spill_file() {
        let named =
            |path: &str| resolve(&SpillRef { path: path.into(), bytes: 0, sha256: String::new() }).map(str::to_string);
        let hex = "0123456789abcdef".repeat(4);
        assert_eq!(named(&format!("tool-results/{hex}.txt")), Some(format!("{hex}.txt")));
        for bad in [
            "tool-results/abc.txt".to_string(),              // hex, but short
            format!("tool-results/{}.txt", "g".repeat(64)),  // long enough, not hex
            format!("tool-results/../../{}.txt", &hex[6..]), // 64 characters that climb out
            format!("elsewhere/{hex}.txt"),
            format!("tool-results/{hex}"),
        ] {
            assert_eq!(named(&bad), None, "{bad}");
        }
    }

    #[test]
    fn the_default_threshold_is_64_kib() {
        let result = |n: usize| ToolResult { content: "x".repeat(n), ..Default::default() };
        assert!(!needs_spill(&result(64 * 1024), DEFAULT_THRESHOLD));
        assert!(needs_spill(&result(64 * 1024 + 1), DEFAULT_THRESHOLD));
    }

    #[test]
    fn an_identical_output_is_stored_once() {
        use std::os::unix::fs::MetadataExt;
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("context");
        let data = "z".repeat(100_000);
        let first = write(&ctx, data.as_bytes()).expect("spill");
        let file = ctx.spill_dir.join(resolve(&first).expect("name"));
        let inode = std::fs::metadata(&file).expect("stat").ino();
        assert_eq!(write(&ctx, data.as_bytes()).expect("again"), first);
        assert_eq!(std::fs::metadata(&file).expect("stat").ino(), inode, "left in place, not written again");
        assert_eq!(verify(&ctx, &first), Ok(()));
    }

    #[test]
    fn a_spill_that_cannot_be_put_in_place_is_reported_and_leaves_no_temporary_file() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ctx = Context::new(ws.path()).expect("context");
        let data = b"output that cannot be stored";
        let name = format!("{}.txt", hex(&Sha256::digest(data)));
        // a folder holding a file where the spill goes: the rename over it fails
        std::fs::create_dir_all(ctx.spill_dir.join(&name).join("inside")).expect("mkdir");
        let err = write(&ctx, data).unwrap_err();
        assert!(err.to_string().contains(&name), "{err}");
        let left: Vec<String> = std::fs::read_dir(&ctx.spill_dir)
            .expect("read")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [name]);
    }
}
