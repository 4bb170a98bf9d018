//! Checkpoints of an answer while it streams, so a crash keeps what the user had read.
//!
//! The streaming loop offers the text seen so far on every tick and at every tool-call boundary;
//! a checkpoint is written when [`Checkpoints::every`] has passed since the last one started (or at
//! once at a boundary) and holds only the text streamed since (see the `checkpoint` entry in
//! `doc/log_format.md`). Design decisions:
//! - The write (one line, `fdatasync`) runs on the blocking pool, not in the streaming loop: deltas
//!   keep flowing to the editor while the disk syncs. At most one write is in flight; a tick that
//!   finds it still running skips, so a slow disk gets fewer checkpoints, never a queue of them.
//! - [`Checkpoints::settle`] waits for the write in flight before the answer's final message is
//!   recorded, so no checkpoint ever lands after the message that supersedes it.
//! - A failed checkpoint is not an error of the turn (the final message will report a failing disk):
//!   its text is offered again by the next one, so the log never has a gap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;

use super::SessionLog;

/// How often an answer is checkpointed while it streams: twice a second, so every character shown
/// more than a second before a crash is on disk even when a sync takes a few hundred milliseconds.
pub const DEFAULT_EVERY: Duration = Duration::from_millis(500);

/// Overrides [`DEFAULT_EVERY`] in milliseconds; `0` turns checkpoints off (the benchmark's baseline).
pub const ENV_EVERY_MS: &str = "PSEUDOCLAUDE_CHECKPOINT_MS";

/// The interval from [`ENV_EVERY_MS`], else [`DEFAULT_EVERY`]; `ZERO` means off.
pub fn every_from_env() -> Duration {
    std::env::var(ENV_EVERY_MS)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_EVERY)
}

/// The checkpoints of one streamed answer.
pub(crate) struct Checkpoints {
    log: Arc<SessionLog>,
    every: Duration,
    answer: String,
    /// Bytes of the answer's text handed to a write so far.
    written: usize,
    last: Instant,
    /// The write in flight: where its text started, and whether it succeeded.
    inflight: Option<(usize, JoinHandle<bool>)>,
}

impl Checkpoints {
    pub(crate) fn new(log: Arc<SessionLog>, every: Duration) -> Checkpoints {
        Checkpoints { log, every, answer: new_answer_id(), written: 0, last: Instant::now(), inflight: None }
    }

    /// How often the streaming loop should offer the text; `None` when checkpoints are off.
    pub(crate) fn tick(&self) -> Option<Duration> {
        (!self.every.is_zero()).then(|| (self.every / 5).max(Duration::from_millis(10)))
    }

    /// Writes the text streamed since the last checkpoint, when it is time (`boundary`: now, after
    /// the write in flight). Returns at once otherwise.
    pub(crate) async fn offer(&mut self, seen: &str, boundary: bool) {
        // Blank text is never kept as an answer (the runner records none either), so it is not
        // checkpointed: memory and the log agree on a cancel or a failure.
        if self.every.is_zero() || seen.len() <= self.written || seen.trim().is_empty() {
            return;
        }
        if let Some((_, h)) = &self.inflight
            && !boundary
            && !h.is_finished()
        {
            return;
        }
        self.settle().await;
        if !boundary && self.last.elapsed() < self.every {
            return;
        }
        let at = self.written;
        let text = seen[at..].to_string();
        self.written = seen.len();
        self.last = Instant::now();
        let (log, answer) = (self.log.clone(), self.answer.clone());
        self.inflight = Some((at, tokio::task::spawn_blocking(move || log.checkpoint(&answer, at, &text).is_ok())));
    }

    /// Waits for the write in flight, if any.
    pub(crate) async fn settle(&mut self) {
        if let Some((at, h)) = self.inflight.take()
            && !h.await.unwrap_or(false)
        {
            self.written = at;
        }
    }
}

/// Unique among a session's answers, across editors and restarts: the clock plus a counter.
fn new_answer_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{nanos:x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}
