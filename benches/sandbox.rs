//! Sandbox benchmark (issue 35's goals: a sandboxed `sh -c true` at most 3 ms slower than an unsandboxed one, with
//! every protection on; a 100 MB download from 127.0.0.1 through the allowlist proxy at least 0.8x the direct speed):
//! the same `run_command` through `Tools::run`, auto-approved, with the sandbox on (namespaces and Landlock, or what
//! this system allows) and off, or with `sandbox.network` an allowlist and `true`, interleaved in one run so both see
//! the same machine.
//!
//! Run with `cargo bench --bench sandbox`; it prints a Markdown table for the "## Sandbox" section of
//! `doc/benchmarks.md`. The workspace lives in `target/bench-tmp/sandbox`, removed at the end.

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pseudoclaude::message::ToolCall;
use pseudoclaude::provider::BoxFuture;
use pseudoclaude::sandbox::{self, Network, Settings};
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver, AutoApprove, Tools};
use serde_json::json;

const REPS: usize = 200;
/// The memory an editor holding a big session may have touched; the `true` rows are measured again with this much
/// of the bench's own memory in use, since a `fork` copies the page tables of all of it.
const BALLAST_MB: usize = 200;
const BALLAST_REPS: usize = 100;
const GOAL_MS: f64 = 3.0;
const DOWNLOAD_REPS: usize = 15;
const DOWNLOAD_BYTES: usize = 100 * 1024 * 1024;
const GOAL_RATIO: f64 = 0.8;

struct Never;

impl Approver for Never {
    fn ask(&self, req: ApprovalRequest) -> BoxFuture<'static, Approval> {
        panic!("the bench's commands are auto-approved, yet this was asked: {req:?}");
    }
}

fn tools(ws: &Path, settings: Settings) -> Tools {
    let mut t = Tools::new(ws, Arc::new(Never), AutoApprove { run_command: true, ..Default::default() });
    t.set_sandbox(settings);
    t
}

/// A local HTTP server sending `DOWNLOAD_BYTES` to every request; its port.
fn big_file_server() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = l.local_addr().expect("port").port();
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 256 * 1024];
        for conn in l.incoming().flatten() {
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {DOWNLOAD_BYTES}\r\nConnection: close\r\n\r\n");
                if conn.write_all(head.as_bytes()).is_err() {
                    return;
                }
                for _ in 0..DOWNLOAD_BYTES / chunk.len() {
                    if conn.write_all(&chunk).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// CPU time (user + system) of this process and of its children waited for, the command's own (curl) included.
fn cpu_time() -> Duration {
    let of = |who| {
        // SAFETY: getrusage fills the struct it is given.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut r) };
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        tv(r.ru_utime) + tv(r.ru_stime)
    };
    of(libc::RUSAGE_SELF) + of(libc::RUSAGE_CHILDREN)
}

/// Runs `true` with the sandbox on and off, interleaved; the medians and p90s.
async fn true_rows(on: &Tools, off: &Tools, reps: usize) -> (Vec<Duration>, Vec<Duration>) {
    let call = ToolCall::new("b", "run_command", json!({"command": "true"}));
    let (mut sandboxed, mut plain) = (Vec::new(), Vec::new());
    for rep in 0..reps + 10 {
        for (t, into) in [(on, &mut sandboxed), (off, &mut plain)] {
            let start = Instant::now();
            let out = t.run(&call).await;
            let took = start.elapsed();
            assert_eq!(out.content, "exit code: 0\n(no output)\n", "{out:?}");
            if rep >= 10 {
                into.push(took); // the first ten warm up the page cache and the runtime
            }
        }
    }
    (sandboxed, plain)
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
    let (on, off) = (tools(&ws, Settings::default()), tools(&ws, Settings { enabled: false, ..Settings::default() }));
    let (mut sandboxed, mut plain) = rt.block_on(true_rows(&on, &off, REPS));
    let ballast = vec![1u8; BALLAST_MB << 20];
    let (mut big_sandboxed, mut big_plain) = rt.block_on(true_rows(&on, &off, BALLAST_REPS));
    drop(std::hint::black_box(ballast));
    let port = big_file_server();
    let allow = Settings { network: Network::Allow(vec![format!("127.0.0.1:{port}")]), ..Settings::default() };
    let (proxied, open) = (tools(&ws, allow), tools(&ws, Settings { network: Network::On, ..Settings::default() }));
    let curl = format!("curl -sS -o /dev/null -w '%{{size_download}}' http://127.0.0.1:{port}/big");
    let download = ToolCall::new("d", "run_command", json!({"command": curl}));
    let (mut through, mut direct) = (Vec::new(), Vec::new());
    let (mut cpu_through, mut cpu_direct) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for rep in 0..DOWNLOAD_REPS + 2 {
            for (t, into, cpu) in [(&proxied, &mut through, &mut cpu_through), (&open, &mut direct, &mut cpu_direct)] {
                let (start, cpu_start) = (Instant::now(), cpu_time());
                let out = t.run(&download).await;
                let took = start.elapsed();
                let cpu_took = cpu_time() - cpu_start;
                assert_eq!(out.content, format!("exit code: 0\n[stdout]\n{DOWNLOAD_BYTES}\n"), "{out:?}");
                if rep >= 2 {
                    into.push(took);
                    cpu.push(cpu_took);
                }
            }
        }
    });
    let _ = fs::remove_dir_all(&ws);
    let (mt, md) = (median(&mut through), median(&mut direct));
    let mbps = |d: Duration| DOWNLOAD_BYTES as f64 / 1e6 / d.as_secs_f64();
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
    let (bs, bp) = (median(&mut big_sandboxed), median(&mut big_plain));
    println!(
        "| `run_command` `true`, median of {BALLAST_REPS}, with {BALLAST_MB} MB of the process in use: sandboxed vs unsandboxed | {:.2} ms | {:.2} ms | {:.2}x (+{:.2} ms) | - | info |",
        ms_f(bs),
        ms_f(bp),
        ms_f(bs) / ms_f(bp),
        ms_f(bs) - ms_f(bp)
    );
    let speed = mbps(mt) / mbps(md);
    println!(
        "| 100 MB download from 127.0.0.1 (`curl` in `run_command`), median of {DOWNLOAD_REPS}: through the allowlist proxy vs `network = true` | {:.0} MB/s | {:.0} MB/s | {speed:.2}x | >= {GOAL_RATIO}x | {} |",
        mbps(mt),
        mbps(md),
        if speed >= GOAL_RATIO { "PASS" } else { "FAIL" }
    );
    let (ct, cd) = (median(&mut cpu_through), median(&mut cpu_direct));
    println!(
        "| CPU time of that download (curl, the server, the proxy), median: through the proxy vs direct | {:.0} ms | {:.0} ms | {:.2}x | - | info |",
        ms_f(ct),
        ms_f(cd),
        ms_f(ct) / ms_f(cd)
    );
}
