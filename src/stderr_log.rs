//! A child process's standard error (an MCP server's, an ACP agent's): each line into the plugin's log file as it
//! comes, the last lines kept for the error message that names the child when it fails.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncBufReadExt;

/// The last lines of a child's standard error kept for its error message.
pub const TAIL_LINES: usize = 20;

/// Reads `stderr` on a task until it closes: each line into `log` as `<time> <kind> <name>: <line>` (one write per
/// line, `O_APPEND`: lines of two children, or of the editor, never interleave), the last [`TAIL_LINES`] in
/// `lines`.
pub fn spawn_reader(
    kind: &'static str,
    name: &str,
    stderr: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    log: Option<&Path>,
    lines: Arc<Mutex<Vec<String>>>,
) {
    let mut log = log.and_then(|p| {
        let _ = p.parent().map(std::fs::create_dir_all);
        std::fs::OpenOptions::new().create(true).append(true).open(p).ok()
    });
    let name = name.to_string();
    tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            if let Some(f) = &mut log {
                use std::io::Write;
                let stamp = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S");
                let _ = f.write_all(format!("{stamp} {kind} {name}: {line}\n").as_bytes());
            }
            let mut l = lines.lock().unwrap_or_else(|p| p.into_inner());
            if l.len() == TAIL_LINES {
                l.remove(0);
            }
            l.push(line);
        }
    });
}
