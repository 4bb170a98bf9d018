//! Sandbox benchmark (issue 26's goal: a sandboxed `sh -c true` at most 2 ms slower than an unsandboxed one): the
//! same `run_command` through `Tools::run`, auto-approved, with the sandbox on (namespaces and Landlock, or what this
//! system allows) and off, interleaved in one run so both see the same machine.
//!
//! Run with `cargo bench --bench sandbox`; it prints a Markdown table for the "## Sandbox" section of
//! `doc/benchmarks.md`. The workspace lives in `target/bench-tmp/sandbox`, removed at the end.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pseudoclaude::message::ToolCall;
use pseudoclaude::provider::BoxFuture;
use pseudoclaude::sandbox::{self, Settings};
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver, AutoApprove, Tools};
use serde_json::json;

const REPS: usize = 200;
const GOAL_MS: f64 = 2.0;

struct Never;

impl Approver for Never {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        panic!("the bench's commands are auto-approved, yet this was asked: {req:?}");
    }
}

fn tools(ws: &Path, enabled: bool) -> Tools {
    let mut t = Tools::new(ws, Arc::new(Never), AutoApprove { run_command: true, ..Default::default() });
    t.set_sandbox(Settings { enabled, ..Settings::default() });
    t
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p90(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() * 9 / 10]
}

fn main() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ws = manifest.join("target/bench-tmp/sandbox");
    let _ = fs::remove_dir_all(&ws);
    fs::create_dir_all(ws.join(".git")).expect("workspace");
    fs::create_dir_all(ws.join(".PseudoClaude")).expect("workspace");
    let support = sandbox::support();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (on, off) = (tools(&ws, true), tools(&ws, false));
    let call = ToolCall::new("b", "run_command", json!({"command": "true"}));
    let (mut sandboxed, mut plain) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for rep in 0..REPS + 10 {
            for (t, into) in [(&on, &mut sandboxed), (&off, &mut plain)] {
                let start = Instant::now();
                let out = t.run(&call).await;
                let took = start.elapsed();
                assert_eq!(out.content, "exit code: 0\n(no output)\n", "{out:?}");
                if rep >= 10 {
                    into.push(took); // the first ten warm up the page cache and the runtime
                }
            }
        }
    });
    let _ = fs::remove_dir_all(&ws);
    let (ms, mp) = (median(&mut sandboxed), median(&mut plain));
    let (ps, pp) = (p90(&mut sandboxed), p90(&mut plain));
    let ms_f = |d: Duration| d.as_secs_f64() * 1e3;
    let extra = ms_f(ms) - ms_f(mp);
    println!("sandbox mechanism: {} (Landlock ABI {})\n", support.mechanism.name(), support.landlock_abi);
    println!("| Benchmark | Measured | Baseline (same run) | Ratio | Goal | Result |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| `run_command` `true`, median of {REPS}: sandboxed vs unsandboxed | {:.2} ms | {:.2} ms | {:.2}x (+{:.2} ms) | <= +{GOAL_MS} ms | {} |",
        ms_f(ms),
        ms_f(mp),
        ms_f(ms) / ms_f(mp),
        extra,
        if extra <= GOAL_MS { "PASS" } else { "FAIL" }
    );
    println!(
        "| `run_command` `true`, p90: sandboxed vs unsandboxed | {:.2} ms | {:.2} ms | {:.2}x (+{:.2} ms) | - | info |",
        ms_f(ps),
        ms_f(pp),
        ms_f(ps) / ms_f(pp),
        ms_f(ps) - ms_f(pp)
    );
}
