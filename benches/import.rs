//! Import benchmark: a 3 MB, 1,500-line Claude Code transcript imported as a session of ours (issue 11's goal:
//! at most 100 ms), next to the least any reader of that file costs: `fs::read` and a `serde_json::Value` parse of
//! every line (same run, interleaved).
//!
//! Run with `cargo bench --bench import`; it prints a Markdown table for the "## Import" section of
//! `doc/benchmarks.md`. Scratch files live in `target/bench-tmp/import`, removed at the end.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pseudoclaude::import;
use serde_json::{Value, json};

const LINES: usize = 1500;
const TARGET_BYTES: usize = 3 << 20;
const REPS: usize = 15;
const GOAL_MS: f64 = 100.0;

fn main() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = manifest.join("target/bench-tmp/import");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).expect("scratch");
    let ws = scratch.join("ws");
    fs::create_dir_all(&ws).expect("ws");
    let ws = ws.canonicalize().expect("ws");
    let path = scratch.join("transcript.jsonl");
    let text = transcript(&ws);
    fs::write(&path, &text).expect("write");
    let bytes = text.len();
    let lines = text.lines().count();

    let mut ours = Vec::new();
    let mut base = Vec::new();
    for rep in 0..REPS {
        // a new workspace each time: an unchanged file imported twice into one gives the session made before
        let into = scratch.join(format!("into{rep}"));
        fs::create_dir_all(&into).expect("into");
        let t = Instant::now();
        let done = import::import(&into, &path).expect("import");
        ours.push(t.elapsed());
        assert!(!done.existing && done.messages > 500, "{} messages", done.messages);
        let t = Instant::now();
        let data = fs::read(&path).expect("read");
        let n = data
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter(|l| serde_json::from_slice::<Value>(l).is_ok())
            .count();
        base.push(t.elapsed());
        assert_eq!(n, lines);
    }
    let (m, b) = (median(&mut ours), median(&mut base));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut out = String::new();
    let _ = writeln!(out, "| Benchmark | Measured | Baseline (same run) | Ratio | Goal |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    let _ = writeln!(
        out,
        "| Import of a {:.1} MB, {lines}-line Claude Code transcript (median of {REPS}) vs `fs::read` + `Value` per line | {:.1} ms | {:.1} ms | {:.2}x | <= {GOAL_MS} ms: {} |",
        bytes as f64 / 1e6,
        ms(m),
        ms(b),
        ms(m) / ms(b),
        if ms(m) <= GOAL_MS { "met" } else { "not met" }
    );
    print!("{out}");
    let _ = fs::remove_dir_all(&scratch);
}

fn median(xs: &mut [Duration]) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// A transcript as Claude Code writes one: prompts, answers spread over several lines sharing `message.id`, tool
/// calls (some parallel) with their results and progress records, padded to about [`TARGET_BYTES`].
fn transcript(ws: &PathBuf) -> String {
    let pad = TARGET_BYTES / LINES;
    let mut out = String::new();
    let mut parent: Option<String> = None;
    let mut n = 0;
    let mut push = |out: &mut String, kind: &str, message: Value, parent: &mut Option<String>| {
        n += 1;
        let uuid = format!("u{n}");
        let line = json!({
            "type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "bench", "cwd": ws,
            "gitBranch": "main", "version": "2.0.0", "isSidechain": false,
            "timestamp": "2026-11-30T10:00:00.000Z", "message": message,
        });
        out.push_str(&line.to_string());
        out.push('\n');
        *parent = Some(uuid);
    };
    let mut turn = 0;
    while out.lines().count() < LINES {
        turn += 1;
        let filler = "lorem ipsum dolor sit amet ".repeat(pad * 32 / 10 / 27);
        push(
            &mut out,
            "user",
            json!({"role": "user", "content": format!("question {turn}: {}", &filler[..filler.len() / 4])}),
            &mut parent,
        );
        let id = format!("msg_{turn}");
        push(
            &mut out,
            "assistant",
            json!({"id": id, "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": format!("Looking. {}", &filler[..filler.len() / 4])}]}),
            &mut parent,
        );
        let calls = if turn % 3 == 0 { 2 } else { 1 };
        for c in 0..calls {
            push(
                &mut out,
                "assistant",
                json!({"id": id, "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": format!("toolu_{turn}_{c}"), "name": "read_file", "input": {"path": format!("src/f{c}.rs")}}]}),
                &mut parent,
            );
        }
        for c in 0..calls {
            out.push_str(&json!({"type": "progress", "uuid": format!("p{turn}_{c}"), "parentUuid": parent, "sessionId": "bench"}).to_string());
            out.push('\n');
            push(
                &mut out,
                "user",
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{turn}_{c}"), "content": filler.clone()}]}),
                &mut parent,
            );
        }
        push(
            &mut out,
            "assistant",
            json!({"id": format!("msg_{turn}b"), "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "Done."}]}),
            &mut parent,
        );
    }
    out
}
