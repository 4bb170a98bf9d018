//! Rewind's checkpoint cost, side by side with what Conductor and Cline do per message (`git add -A && git
//! write-tree` into a private index of the same tree) in one run, and a turn with three tool calls with
//! checkpoints on and off. The checkpoint is measured twice: as the editor takes it (its inotify watch names
//! the folders that changed) and with the watch off (a walk of the whole tree with the stat cache: what every
//! checkpoint costs where inotify is missing or the workspace has more folders than the watch takes).
//!
//! Run with `cargo bench --bench rewind` (`-- --write` puts the table into `doc/benchmarks.md`). The workspace:
//! 10,000 files of 20 KiB (200 MB) in 100 folders, in `target/bench-tmp/rewind`. Each warm figure is a median
//! of rounds that each change one file first.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pseudoclaude::agent::{Agent, AgentConfig, Cancel};
use pseudoclaude::message::ToolCall;
use pseudoclaude::provider::{BoxFuture, Provider, ProviderError, Request, Response, StreamEvent};
use pseudoclaude::rewind::Tracker;
use pseudoclaude::session::files::BY_AGENT;
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver, AutoApprove};
use serde_json::json;
use tokio::sync::mpsc;

const FILES: usize = 10_000;
const FILE_BYTES: usize = 20 * 1024;
const ROUNDS: usize = 9;
/// Turns measured each way (alternated): a turn is tens of milliseconds, most of them the log's syncs, so the
/// medians need more rounds than the checkpoints' to be steady on a shared machine.
const TURNS: usize = 15;

fn main() {
    let write = std::env::args().any(|a| a == "--write");
    // The machine is shared: the table says how busy it was (the ratios are of one run; the times are not).
    let load = fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split(' ').next().map(String::from));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-tmp/rewind");
    let _ = fs::remove_dir_all(&root);
    let ws = root.join("ws");
    make_tree(&ws);
    let mut out = String::new();

    // git: a private index and object folder, as the snapshot tools keep theirs.
    let git_dir = root.join("snap.git");
    run(Command::new("git").args(["init", "-q", "--bare"]).arg(&git_dir));
    let git = |ws: &Path| {
        let t = Instant::now();
        let ok = Command::new("sh")
            .arg("-c")
            .arg("git add -A && git write-tree >/dev/null")
            .current_dir(ws)
            .env("GIT_DIR", &git_dir)
            .env("GIT_WORK_TREE", ws)
            .env("GIT_INDEX_FILE", root.join("snap.index"))
            .status()
            .expect("git")
            .success();
        assert!(ok, "git add failed");
        t.elapsed()
    };
    let git_cold = git(&ws);
    let mut tracker = Tracker::new(&ws, pseudoclaude::rewind::DEFAULT_MAX_FILE_BYTES);
    let t = Instant::now();
    let r = tracker.take("user", "", None).expect("checkpoint");
    tracker.commit(r);
    let ours_cold = t.elapsed();

    assert!(tracker.is_watching(), "the checkpoint measured is the editor's, with its watch");
    let mut walking = Tracker::new(&ws, pseudoclaude::rewind::DEFAULT_MAX_FILE_BYTES).unwatched();
    let r = walking.take("user", "", None).expect("checkpoint");
    walking.commit(r);

    let (mut gits, mut ours, mut walks) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        touch(&ws, round);
        // Alternate who goes first: the page cache favours neither.
        if round % 2 == 0 {
            gits.push(git(&ws));
            ours.push(checkpoint(&mut tracker));
            walks.push(checkpoint(&mut walking));
        } else {
            walks.push(checkpoint(&mut walking));
            ours.push(checkpoint(&mut tracker));
            gits.push(git(&ws));
        }
    }
    let (g, o, w) = (median(&mut gits), median(&mut ours), median(&mut walks));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let (on, off) = rt.block_on(turns(&root));

    let _ = writeln!(out, "| What | Ours | Baseline | Ratio | Goal |\n|---|---|---|---|---|");
    let _ = writeln!(
        out,
        "| Checkpoint of 10,000 files (200 MB), one changed, warm, vs `git add -A && git write-tree` (private index) | {} | {} | {:.2}x | at most 0.5x |",
        ms(o),
        ms(g),
        o.as_secs_f64() / g.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| The same with the watch off (a walk of the whole tree with the stat cache) | {} | {} | {:.2}x | - |",
        ms(w),
        ms(g),
        w.as_secs_f64() / g.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| First checkpoint of the same tree (stores every file) vs git's first add | {} | {} | {:.2}x | - |",
        ms(ours_cold),
        ms(git_cold),
        ours_cold.as_secs_f64() / git_cold.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| A turn with three tool calls (a write, an edit, a command) on that workspace, checkpoints on vs off | {} | {} | {:.2}x | at most 1.05x |",
        ms(on),
        ms(off),
        on.as_secs_f64() / off.as_secs_f64()
    );
    print!("{out}");
    if write {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("doc/benchmarks.md");
        let doc = fs::read_to_string(&path).unwrap_or_default();
        let head = "## Rewind checkpoints\n";
        let start = doc.find(head).unwrap_or(doc.len());
        let end = doc[start + head.len().min(doc.len() - start)..]
            .find("\n## ")
            .map_or(doc.len(), |i| start + head.len() + i + 1);
        let section = format!(
            "{head}\nProduced by `cargo bench --bench rewind -- --write` (`benches/rewind.rs`; {FILES} files of {} KiB, medians of {ROUNDS} rounds, each changing one file first; the turn: medians of {TURNS}, a provider that answers at once, so the checkpoints' whole cost shows; load average {} at the start).\n\n{out}\n",
            FILE_BYTES / 1024,
            load.as_deref().unwrap_or("unknown"),
        );
        let mut new = doc.clone();
        new.replace_range(start..end, &section);
        fs::write(&path, new).unwrap();
    }
    let _ = fs::remove_dir_all(&root);
}

fn checkpoint(tracker: &mut Tracker) -> Duration {
    let t = Instant::now();
    let r = tracker.take(BY_AGENT, "", None).expect("checkpoint");
    tracker.commit(r);
    t.elapsed()
}

fn make_tree(ws: &Path) {
    let mut seed = 1u64;
    for i in 0..FILES {
        let dir = ws.join(format!("d{:02}", i % 100));
        fs::create_dir_all(&dir).unwrap();
        let mut body = String::with_capacity(FILE_BYTES);
        while body.len() < FILE_BYTES {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let _ = writeln!(body, "line {i} {seed:x}");
        }
        fs::write(dir.join(format!("f{i}.txt")), body).unwrap();
    }
    // Old enough for both stat caches.
    let old = std::time::SystemTime::now() - Duration::from_secs(60);
    for d in fs::read_dir(ws).unwrap().flatten() {
        for f in fs::read_dir(d.path()).unwrap().flatten() {
            let _ = fs::File::options().write(true).open(f.path()).and_then(|f| f.set_modified(old));
        }
    }
}

fn touch(ws: &Path, round: usize) {
    let p = ws.join("d07").join("f7.txt");
    let mut s = fs::read_to_string(&p).unwrap();
    let _ = writeln!(s, "round {round}");
    fs::write(p, s).unwrap();
}

fn run(c: &mut Command) {
    assert!(c.status().expect("spawn").success());
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

struct Scripted(Mutex<Vec<(String, Vec<ToolCall>)>>);

impl Provider for Scripted {
    fn name(&self) -> &str {
        "bench"
    }
    fn model(&self) -> &str {
        "bench"
    }
    fn stream<'a>(
        &'a self,
        _r: &'a Request,
        _e: mpsc::UnboundedSender<StreamEvent>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let next = self.0.lock().unwrap().pop();
            let (text, tool_calls) = next.unwrap_or_else(|| ("done".into(), vec![]));
            Ok(Response { text, tool_calls, stop_reason: "end_turn".into(), ..Default::default() })
        })
    }
}

struct Never;
impl Approver for Never {
    fn ask(&self, _r: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(std::future::pending())
    }
}

/// Medians of a turn with three tool calls, checkpoints on and off, alternated.
async fn turns(root: &Path) -> (Duration, Duration) {
    let ws = root.join("ws");
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for round in 0..2 * TURNS {
        let enabled = round % 2 == 0;
        let mut c = AgentConfig::new(&ws);
        c.auto_approve = AutoApprove { write_file: true, edit_file: true, run_command: true };
        c.rewind = enabled;
        let calls = vec![
            ToolCall::new("c1", "write_file", json!({ "path": "d01/new.txt", "content": format!("round {round}\n") })),
            ToolCall::new(
                "c2",
                "edit_file",
                json!({ "path": "d01/new.txt", "old_string": "round", "new_string": "turn" }),
            ),
            ToolCall::new("c3", "run_command", json!({ "command": "echo x >> d02/f2.txt" })),
        ];
        // Popped from the end: the warm-up's answer, then the calls, then the answer after them.
        let provider = Arc::new(Scripted(Mutex::new(vec![
            ("done".into(), vec![]),
            ("working".into(), calls),
            ("hi".into(), vec![]),
        ])));
        let agent = Agent::new(c, provider, Arc::new(Never));
        // The session's first checkpoint (its base) is the once-per-session cost: not part of the turn measured.
        let (tx, _rx) = mpsc::unbounded_channel();
        agent.turn("warm up", tx, Cancel::new()).await;
        let (tx, _rx) = mpsc::unbounded_channel();
        let t = Instant::now();
        agent.turn("go", tx, Cancel::new()).await;
        if enabled { on.push(t.elapsed()) } else { off.push(t.elapsed()) }
    }
    (median(&mut on), median(&mut off))
}
