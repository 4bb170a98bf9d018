//! Session-log benchmarks: append latency, load throughput, list cost.
//!
//! Run with `cargo bench --bench session`. The machines this runs on are small and noisy, so every
//! figure is measured next to a baseline in the same run and reported as a ratio. Results go to
//! stdout and to `doc/benchmarks.md`. Scratch files live in `target/bench-tmp`, removed at the end.
//!
//! The baselines are the least a log of this format can cost:
//! - append: the same bytes (`Entry` lines serialised beforehand) written with `write_all` +
//!   `sync_data` to a file opened for appending;
//! - load: `fs::read` of the same file, then `serde_json::from_slice` of every line;
//! - list: a full replay (`session::load`) of the same sessions.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::session::{self, Context, Entry, ListOptions, Writer, WriterOptions, lock};
use serde_json::json;

const MODEL: &str = "bench-model";
const SPILL_THRESHOLD: usize = 64 * 1024;

const APPEND_N: usize = 2000;
const APPEND_WARMUP: usize = 50;
const APPEND_BLOCK: usize = 100;
const APPEND_GOAL: f64 = 1.2;

const LOAD_TARGET_BYTES: u64 = 50 << 20;
const LOAD_REPLACE_EVERY: u64 = 10 << 20;
const LOAD_REPS: usize = 5;
const LOAD_GOAL: f64 = 0.5;

const BIG_RESULT_BYTES: usize = 100 << 20;
const BIG_REPS: usize = 5;

const LIST_SESSIONS: usize = 1000;
const LIST_SMALL_BYTES: u64 = 10 << 10;
const LIST_LARGE_BYTES: u64 = 10 << 20;
const LIST_COLD_SMALL_REPS: usize = 3;
const LIST_WARM_ROUNDS: usize = 11;
const FULL_REPLAY_SAMPLE: usize = 100;
const LIST_GOAL: f64 = 2.0;

/// Set in the environment of the child processes that measure one big load and its peak RSS.
const CHILD_ENV: &str = "PSEUDOCLAUDE_BENCH_CHILD";
const CHILD_WS_ENV: &str = "PSEUDOCLAUDE_BENCH_WS";
const CHILD_ID_ENV: &str = "PSEUDOCLAUDE_BENCH_ID";

fn main() {
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        child_main(&mode);
        return;
    }
    let started = Instant::now();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.join("target").join("bench-tmp");
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).expect("create target/bench-tmp");

    let mut rows = Vec::new();
    let machine = machine_note(&root);
    println!("session benchmarks ({machine})\n");

    // `PSEUDOCLAUDE_BENCH_ONLY=index`: the sessions index's rows only, printed, the doc left alone.
    if std::env::var("PSEUDOCLAUDE_BENCH_ONLY").as_deref() == Ok("index") {
        println!("{}", render_table(&bench_index(&root)));
        let _ = fs::remove_dir_all(&root);
        return;
    }
    let t = Instant::now();
    rows.extend(bench_append(&root));
    println!("  [append took {:.1} s]\n", t.elapsed().as_secs_f64());

    let t = Instant::now();
    rows.extend(bench_load(&root));
    println!("  [load took {:.1} s]\n", t.elapsed().as_secs_f64());

    let t = Instant::now();
    rows.extend(bench_big_line(&root));
    println!("  [100 MiB line took {:.1} s]\n", t.elapsed().as_secs_f64());

    let t = Instant::now();
    rows.extend(bench_list(&root));
    println!("  [list took {:.1} s]\n", t.elapsed().as_secs_f64());

    let t = Instant::now();
    rows.extend(bench_index(&root));
    println!("  [index took {:.1} s]\n", t.elapsed().as_secs_f64());

    let _ = fs::remove_dir_all(&root);
    let total = started.elapsed();
    let table = render_table(&rows);
    println!("{table}");
    println!("total run time {:.0} s", total.as_secs_f64());

    let doc = manifest.join("doc");
    fs::create_dir_all(&doc).expect("create doc/");
    let mut md = render_markdown(&machine, total, &table);
    // Other benchmarks own the later sections (`## Picker`, `## Main loop and start-up`): keep them.
    let path = doc.join("benchmarks.md");
    md.push_str(&other_sections(&fs::read_to_string(&path).unwrap_or_default()));
    fs::write(&path, md).expect("write doc/benchmarks.md");
    println!("written to doc/benchmarks.md");
}

// ---------------------------------------------------------------------------------------------
// Realistic content, deterministic.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// Words of a coding chat: code, paths, quotes and a few non-ASCII characters, so strings need escaping.
const WORDS: &[&str] = &[
    "the",
    "parser",
    "returns",
    "an",
    "error",
    "when",
    "input",
    "line",
    "is",
    "longer",
    "than",
    "buffer",
    "so",
    "we",
    "should",
    "split",
    "it",
    "before",
    "calling",
    "`read_until`",
    "Vec<u8>",
    "Result<()>",
    "\"quoted\"",
    "src/session/loader.rs",
    "naïve",
    "résumé",
    "→",
    "fn",
    "impl",
    "let",
    "mut",
    "self",
    "async",
    "test",
    "fails",
    "with",
    "panicked",
    "at",
    "index",
    "out",
    "of",
    "bounds:",
    "0x1f",
    "42",
    "ok",
    "I'll",
    "look",
    "file",
    "first",
    "then",
    "fix",
    "{",
    "}",
    "=>",
    "&mut",
    "Option<String>",
    "C:\\path",
    "TODO:",
];

const TOOLS: &[&str] = &["read_file", "grep", "list_dir", "run_command", "edit_file"];

fn prose(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 32);
    while s.len() < bytes {
        s.push_str(rng.pick(WORDS));
        s.push(if rng.below(12) == 0 { '\n' } else { ' ' });
    }
    s
}

/// Looks like `cat -n` of source code: numbered, tab-separated, indented lines.
fn tool_output(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 128);
    let mut n = 1 + rng.below(400);
    while s.len() < bytes {
        let _ = write!(s, "{n:>5}\t{}", " ".repeat(rng.below(4) * 4));
        let end = s.len() + 20 + rng.below(60);
        while s.len() < end {
            s.push_str(rng.pick(WORDS));
            s.push(' ');
        }
        s.push('\n');
        n += 1;
    }
    s
}

/// A coding conversation, one turn at a time: a ~300-byte user message, zero to two tool exchanges
/// (one or two calls each, ~2 KiB results, one in ten an error), a ~300-byte answer.
struct Conv {
    rng: Rng,
    calls: u64,
    ts: i64,
}

impl Conv {
    fn new(seed: u64) -> Conv {
        Conv { rng: Rng(0x9E37_79B9_7F4A_7C15 ^ seed), calls: 0, ts: 1_780_000_000 }
    }

    fn stamp(&mut self, mut m: Message) -> Message {
        self.ts += 1 + self.rng.below(30) as i64;
        m.ts = self.ts;
        m
    }

    fn turn(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        let n = 250 + self.rng.below(100);
        let user = Message::user(prose(&mut self.rng, n));
        out.push(self.stamp(user));
        for _ in 0..self.rng.below(3) {
            let mut calls = Vec::new();
            for _ in 0..1 + self.rng.below(2) {
                self.calls += 1;
                let args = json!({
                    "path": format!("src/module_{}.rs", self.rng.below(50)),
                    "pattern": self.rng.pick(WORDS),
                });
                calls.push(ToolCall::new(format!("toolu_{:08x}", self.calls), self.rng.pick(TOOLS), args));
            }
            let n = 60 + self.rng.below(120);
            let ask = Message::assistant_tool_calls(prose(&mut self.rng, n), calls.clone());
            out.push(self.stamp(ask));
            for c in &calls {
                let n = 1800 + self.rng.below(500);
                let is_error = self.rng.below(10) == 0;
                let result = Message::tool_result(c.id.clone(), tool_output(&mut self.rng, n), is_error);
                out.push(self.stamp(result));
            }
        }
        let n = 250 + self.rng.below(100);
        let answer = Message::assistant(prose(&mut self.rng, n));
        out.push(self.stamp(answer));
        out
    }
}

/// The line `Writer::append` writes for `m` (with the model on a writer's first entry).
fn entry_line(m: &Message, model: Option<&str>) -> Vec<u8> {
    let mut e = Entry::from_message(m.clone());
    if let Some(model) = model {
        e.model = model.into();
    }
    let mut line = serde_json::to_vec(&e).expect("entry encodes");
    line.push(b'\n');
    line
}

/// Appends whole turns to `path` (unsynced, buffered) until it holds at least `until` bytes; returns
/// the last turn.
fn append_turns(path: &Path, conv: &mut Conv, until: u64) -> Vec<Message> {
    let f = OpenOptions::new().create(true).append(true).open(path).expect("open log for seeding");
    let mut size = f.metadata().expect("stat").len();
    let mut first = size == 0;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut last = Vec::new();
    while size < until {
        last = conv.turn();
        for m in &last {
            let line = entry_line(m, first.then_some(MODEL));
            first = false;
            w.write_all(&line).expect("write seed log");
            size += line.len() as u64;
        }
    }
    w.flush().expect("flush seed log");
    last
}

fn writer_options() -> WriterOptions {
    WriterOptions { model: MODEL.into(), spill_threshold: SPILL_THRESHOLD }
}

// ---------------------------------------------------------------------------------------------
// Results.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    Miss,
    Info,
}

struct Row {
    name: String,
    measured: String,
    baseline: String,
    ratio: String,
    goal: String,
    verdict: Verdict,
}

fn row(name: &str, measured: String, baseline: String, ratio: f64, goal: &str, verdict: Verdict) -> Row {
    let ratio = if ratio >= 0.01 { format!("{ratio:.2}x") } else { format!("{ratio:.5}x (1/{:.0})", 1.0 / ratio) };
    Row { name: name.into(), measured, baseline, ratio, goal: goal.into(), verdict }
}

fn render_table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str("| Benchmark | Measured | Baseline (same run) | Ratio | Goal | Result |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    for r in rows {
        let v = match r.verdict {
            Verdict::Pass => "PASS",
            Verdict::Miss => "**MISS**",
            Verdict::Info => "info",
        };
        let _ = writeln!(s, "| {} | {} | {} | {} | {} | {} |", r.name, r.measured, r.baseline, r.ratio, r.goal, v);
    }
    s
}

fn render_markdown(machine: &str, total: Duration, table: &str) -> String {
    let date = chrono::Local::now().format("%Y-%m-%d %H:%M %:z");
    format!(
        "# Session log benchmarks\n\n\
         Produced by `cargo bench --bench session` (`benches/session.rs`); rerun it to refresh this file.\n\n\
         - Date: {date}\n\
         - Code: HEAD {} plus the working tree at that time\n\
         - Machine: {machine}\n\
         - Total run time: {:.0} s\n\n\
         The machine is small and noisy, so absolute figures move from run to run; every figure has a\n\
         baseline measured in the same run, and the goals are on the ratios. Append blocks of the\n\
         library and of the baseline are interleaved to cancel drift; load repetitions rotate their order.\n\n\
         {table}\n\
         ## What each row measures\n\n\
         - **Append**: {APPEND_N} `Writer::append` calls of a realistic chat (~300-byte user and assistant\n  \
           texts, tool calls, ~2 KiB tool results), each synced (`fdatasync`), after {APPEND_WARMUP} warm-up\n  \
           appends. Baseline: the same bytes, serialised beforehand, written with `write_all` + `sync_data`\n  \
           to another file opened for appending, in alternating blocks of {APPEND_BLOCK}. The run checks the\n  \
           two files are byte-identical. Ratio = library / baseline.\n\
         - **Load**: a ~50 MiB log of the same chat with 4 `Writer::replace` compactions, read by\n  \
           `session::load`; median of {LOAD_REPS}. Baselines: `fs::read` of the same file and\n  \
           `serde_json::from_slice` of each line into `serde_json::Value` / into `Entry`. The file is in\n  \
           the page cache for all of them. MB = 10^6 bytes. Ratio = library throughput / baseline throughput.\n\
         - **100 MiB line**: a seed-format log whose tool result holds 100 MiB of text inline (with\n  \
           newlines, so the JSON string has escapes), loaded in a fresh child process each time so its\n  \
           peak RSS (`VmHWM`) is its own; median time of {BIG_REPS}. Baselines, also in children: `fs::read` +\n  \
           `from_slice::<Entry>` per line, and `serde_json::Deserializer::from_reader` (256 KiB `BufReader`)\n  \
           streaming `Entry` values from the file. RSS growth = `VmHWM` at the end minus `VmHWM` at the start.\n\
         - **List**: {LIST_SESSIONS} sessions with ~10 KiB logs and {LIST_SESSIONS} with ~10 MiB logs (one\n  \
           log each, hard-linked into every session directory, so it is read from the page cache).\n  \
           Cold = no `summary.json` yet (a full counting replay of every log, writing the caches); warm =\n  \
           caches present; warm lists of the two sets alternate, median of {LIST_WARM_ROUNDS}. Full replay =\n  \
           `session::load` of {FULL_REPLAY_SAMPLE} of the 10 MiB sessions, extrapolated x{}.\n",
        git_head(),
        total.as_secs_f64(),
        LIST_SESSIONS / FULL_REPLAY_SAMPLE,
    )
}

fn git_head() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

// ---------------------------------------------------------------------------------------------
// Statistics and formatting.

fn sorted(v: &[Duration]) -> Vec<Duration> {
    let mut s = v.to_vec();
    s.sort();
    s
}

/// Nearest-rank percentile.
fn pct(v: &[Duration], p: f64) -> Duration {
    let s = sorted(v);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

fn median(v: &[Duration]) -> Duration {
    let s = sorted(v);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2 }
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn fmt_d(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

fn mb_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn machine_note(dir: &Path) -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default();
    let mem_gib = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / (1 << 20) as f64);
    let load = fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!(
        "nproc {nproc}, {cpu}, {mem_gib:.1} GiB RAM, Linux {kernel}, scratch on {}, load average at start {load}",
        filesystem_of(dir)
    )
}

/// The type and device of the mount holding `dir`, from /proc/mounts (longest matching mount point).
fn filesystem_of(dir: &Path) -> String {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && dir.starts_with(f[1])).then(|| (f[1].len(), format!("{} ({})", f[2], f[0])))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown filesystem".into(), |(_, s)| s)
}

// ---------------------------------------------------------------------------------------------
// 1. Append latency.

fn bench_append(root: &Path) -> Vec<Row> {
    println!("1. append: {APPEND_N} synced appends, Writer::append vs write_all + sync_data of the same bytes");
    let ws = root.join("append-ws");
    let ctx = Context::new(&ws).expect("new session");
    let mut conv = Conv::new(1);
    let total = APPEND_WARMUP + APPEND_N;
    let mut msgs = Vec::new();
    while msgs.len() < total {
        msgs.extend(conv.turn());
    }
    msgs.truncate(total);
    let lines: Vec<Vec<u8>> = msgs.iter().enumerate().map(|(i, m)| entry_line(m, (i == 0).then_some(MODEL))).collect();
    let bytes: usize = lines[APPEND_WARMUP..].iter().map(Vec::len).sum();
    let tool_results = msgs.iter().filter(|m| m.tool_result.is_some()).count();

    let writer = Writer::open(&ctx, writer_options()).expect("open writer");
    let raw_path = ctx.dir.join("baseline.jsonl");
    let mut raw = OpenOptions::new().create(true).append(true).open(&raw_path).expect("open baseline file");
    // The writer synced the directory when it created its log; do the same for the baseline's file so
    // that neither pays for a new directory entry inside the timing.
    File::open(&ctx.dir).and_then(|d| d.sync_all()).expect("sync session dir");

    let mut lib_t = Vec::with_capacity(APPEND_N);
    let mut raw_t = Vec::with_capacity(APPEND_N);
    for (block, start) in (0..total).step_by(APPEND_BLOCK).enumerate() {
        let end = (start + APPEND_BLOCK).min(total);
        for pass in 0..2 {
            let lib_turn = (block % 2 == 0) == (pass == 0);
            for i in start..end {
                let t = Instant::now();
                if lib_turn {
                    writer.append(&msgs[i]).expect("append");
                } else {
                    raw.write_all(&lines[i]).expect("baseline write");
                    raw.sync_data().expect("baseline sync");
                }
                let d = t.elapsed();
                if i >= APPEND_WARMUP {
                    if lib_turn { lib_t.push(d) } else { raw_t.push(d) }
                }
            }
        }
    }
    writer.close().expect("close writer");
    drop(raw);
    let same = fs::read(&ctx.jsonl_path).expect("read log") == fs::read(&raw_path).expect("read baseline");
    assert!(same, "the baseline did not write the bytes Writer::append wrote");

    let (lm, rm) = (median(&lib_t), median(&raw_t));
    let (l99, r99) = (pct(&lib_t, 99.0), pct(&raw_t, 99.0));
    let (lsum, rsum): (Duration, Duration) = (lib_t.iter().sum(), raw_t.iter().sum());
    let r_med = ratio(lm, rm);
    println!(
        "   {} messages ({} tool results), {:.0} bytes/line on average; files byte-identical",
        APPEND_N,
        tool_results,
        bytes as f64 / APPEND_N as f64
    );
    println!("   Writer::append   median {:>9}  p99 {:>9}  total {}", fmt_d(lm), fmt_d(l99), fmt_d(lsum));
    println!("   raw write+sync   median {:>9}  p99 {:>9}  total {}", fmt_d(rm), fmt_d(r99), fmt_d(rsum));
    println!(
        "   ratio (median) {r_med:.2}x  (p99 {:.2}x, total {:.2}x)  goal <= {APPEND_GOAL}x",
        ratio(l99, r99),
        ratio(lsum, rsum)
    );
    let verdict = if r_med <= APPEND_GOAL { Verdict::Pass } else { Verdict::Miss };
    vec![
        row(
            &format!("Append, median per op ({APPEND_N} synced appends)"),
            fmt_d(lm),
            fmt_d(rm),
            r_med,
            &format!("<= {APPEND_GOAL}x"),
            verdict,
        ),
        row("Append, p99 per op", fmt_d(l99), fmt_d(r99), ratio(l99, r99), "-", Verdict::Info),
    ]
}

// ---------------------------------------------------------------------------------------------
// 2. Load throughput.

fn raw_parse<T: serde::de::DeserializeOwned>(path: &Path) -> usize {
    let data = fs::read(path).expect("read log");
    let mut n = 0;
    for line in data.split(|&b| b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let v: T = serde_json::from_slice(line).expect("baseline parses every line");
        black_box(&v);
        n += 1;
    }
    n
}

fn bench_load(root: &Path) -> Vec<Row> {
    println!("2. load: ~50 MiB log (with replace entries), session::load vs fs::read + serde_json per line");
    let ws = root.join("load-ws");
    let ctx = Context::new(&ws).expect("new session");
    let mut conv = Conv::new(2);
    let mut replaces = 0;
    let mut mark = LOAD_REPLACE_EVERY;
    loop {
        let last = append_turns(&ctx.jsonl_path, &mut conv, mark.min(LOAD_TARGET_BYTES));
        if mark >= LOAD_TARGET_BYTES {
            break;
        }
        // A compaction: a summary plus the last turn, through the library's own writer.
        let n = 800 + conv.rng.below(400);
        let summary = Message::user(format!("Summary of the conversation so far:\n{}", prose(&mut conv.rng, n)));
        let mut snapshot = vec![conv.stamp(summary)];
        snapshot.extend(last);
        let w = Writer::open(&ctx, writer_options()).expect("open writer");
        w.replace("compact", &snapshot).expect("replace");
        w.close().expect("close writer");
        replaces += 1;
        mark += LOAD_REPLACE_EVERY;
    }
    let bytes = fs::metadata(&ctx.jsonl_path).expect("stat log").len();
    let lines = fs::read(&ctx.jsonl_path).expect("read log").iter().filter(|&&b| b == b'\n').count();

    let check = session::load(&ctx).expect("load");
    assert_eq!(check.entries, lines, "every line is an entry");
    assert!(!check.damaged(), "the seeded log loads clean: {}", check.damage_report());
    assert!(!check.messages.is_empty());
    let kept = check.messages.len();
    drop(check);

    let (mut lib_t, mut val_t, mut ent_t) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..LOAD_REPS {
        for k in 0..3 {
            match (rep + k) % 3 {
                0 => {
                    let t = Instant::now();
                    let l = session::load(&ctx).expect("load");
                    lib_t.push(t.elapsed());
                    assert_eq!(l.messages.len(), kept);
                    black_box(l);
                }
                1 => {
                    let t = Instant::now();
                    let n = raw_parse::<serde_json::Value>(&ctx.jsonl_path);
                    val_t.push(t.elapsed());
                    assert_eq!(n, lines);
                }
                _ => {
                    let t = Instant::now();
                    let n = raw_parse::<Entry>(&ctx.jsonl_path);
                    ent_t.push(t.elapsed());
                    assert_eq!(n, lines);
                }
            }
        }
    }
    let (lm, vm, em) = (median(&lib_t), median(&val_t), median(&ent_t));
    let best = |v: &[Duration]| *v.iter().min().expect("reps");
    let (lr, vr, er) = (mb_per_s(bytes, lm), mb_per_s(bytes, vm), mb_per_s(bytes, em));
    println!(
        "   {:.1} MiB, {lines} lines, {replaces} replace entries, {kept} messages after the last replace",
        mib(bytes)
    );
    for (name, v, r) in [("session::load", &lib_t, lr), ("raw -> Value", &val_t, vr), ("raw -> Entry", &ent_t, er)] {
        println!(
            "   {name:<14} median {:>9} = {r:>6.0} MB/s   best {:>9} = {:>6.0} MB/s",
            fmt_d(median(v)),
            fmt_d(best(v)),
            mb_per_s(bytes, best(v))
        );
    }
    let (rv, re) = (lr / vr, lr / er);
    println!(
        "   ratio vs Value {rv:.2}x (best-of: {:.2}x), vs Entry {re:.2}x (best-of: {:.2}x)  goal >= {LOAD_GOAL}x",
        mb_per_s(bytes, best(&lib_t)) / mb_per_s(bytes, best(&val_t)),
        mb_per_s(bytes, best(&lib_t)) / mb_per_s(bytes, best(&ent_t)),
    );
    let verdict = |r: f64| if r >= LOAD_GOAL { Verdict::Pass } else { Verdict::Miss };
    vec![
        row(
            &format!("Load {:.0} MiB log, throughput (vs `Value` per line)", mib(bytes)),
            format!("{lr:.0} MB/s"),
            format!("{vr:.0} MB/s"),
            rv,
            &format!(">= {LOAD_GOAL}x"),
            verdict(rv),
        ),
        row(
            &format!("Load {:.0} MiB log, throughput (vs `Entry` per line)", mib(bytes)),
            format!("{lr:.0} MB/s"),
            format!("{er:.0} MB/s"),
            re,
            &format!(">= {LOAD_GOAL}x"),
            verdict(re),
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// 2b. One 100 MiB tool result inline, in the seed's format; time and peak RSS, in child processes.

fn bench_big_line(root: &Path) -> Vec<Row> {
    println!("2b. load of a seed-format log with one 100 MiB inline tool result (child processes, for peak RSS)");
    let ws = root.join("big-ws");
    let ctx = Context::new(&ws).expect("new session");
    let mut rng = Rng(3);
    let mut chunk = tool_output(&mut rng, 64 * 1024);
    let mut cut = 64 * 1024;
    while !chunk.is_char_boundary(cut) {
        cut -= 1;
    }
    chunk.truncate(cut);
    let reps = BIG_RESULT_BYTES.div_ceil(chunk.len());
    let content_len = reps * chunk.len();
    let escaped = serde_json::to_string(&chunk).expect("encode chunk");
    let escaped = &escaped.as_bytes()[1..escaped.len() - 1];
    {
        let mut f = BufWriter::new(File::create(&ctx.jsonl_path).expect("create log"));
        let head = concat!(
            r#"{"role":"user","content":"summarise big.log","ts":1,"model":"m"}"#,
            "\n",
            r#"{"role":"assistant","tool_calls":[{"id":"c1","name":"read_file","arguments":"{\"path\":\"big.log\"}"}],"ts":1}"#,
            "\n",
            r#"{"role":"user","tool_result":{"tool_call_id":"c1","content":""#,
        );
        f.write_all(head.as_bytes()).expect("write");
        for _ in 0..reps {
            f.write_all(escaped).expect("write");
        }
        f.write_all(b"\"},\"ts\":1}\n").expect("write");
        f.flush().expect("flush");
    }
    let bytes = fs::metadata(&ctx.jsonl_path).expect("stat").len();

    let modes = ["lib", "raw", "stream"];
    let mut results: [Vec<ChildResult>; 3] = Default::default();
    for rep in 0..BIG_REPS {
        for k in 0..modes.len() {
            let m = (rep + k) % modes.len();
            let r = run_child(modes[m], &ws, &ctx.id);
            assert_eq!(r.messages, 3, "user, call, result");
            assert_eq!(r.content_len, content_len, "the whole result loads");
            results[m].push(r);
        }
    }
    let [lib, raw, stream] = results;
    let med_time = |v: &[ChildResult]| median(&v.iter().map(|r| r.time).collect::<Vec<_>>());
    let max_growth = |v: &[ChildResult]| v.iter().map(|r| r.hwm_kb.saturating_sub(r.start_hwm_kb)).max().unwrap_or(0);
    let (lt, rt) = (med_time(&lib), med_time(&raw));
    let (lg, rg) = (max_growth(&lib) << 10, max_growth(&raw) << 10);
    println!(
        "   log {:.1} MiB, content {:.1} MiB (JSON-escaped newlines and quotes)",
        mib(bytes),
        mib(content_len as u64)
    );
    println!(
        "   session::load  {:>9} ({:.0} MB/s)  peak RSS growth {:.0} MiB ({:.2}x the content)",
        fmt_d(lt),
        mb_per_s(bytes, lt),
        mib(lg),
        lg as f64 / content_len as f64
    );
    println!(
        "   raw -> Entry   {:>9} ({:.0} MB/s)  peak RSS growth {:.0} MiB ({:.2}x the content)",
        fmt_d(rt),
        mb_per_s(bytes, rt),
        mib(rg),
        rg as f64 / content_len as f64
    );
    let (st, sg) = (med_time(&stream), max_growth(&stream) << 10);
    println!(
        "   raw streamed   {:>9} ({:.0} MB/s)  peak RSS growth {:.0} MiB ({:.2}x the content)  [Deserializer::from_reader -> Entry]",
        fmt_d(st),
        mb_per_s(bytes, st),
        mib(sg),
        sg as f64 / content_len as f64
    );
    println!(
        "   ratio vs fs::read + from_slice: time {:.2}x, peak RSS growth {:.2}x; vs streamed from_reader: time {:.2}x, peak RSS growth {:.2}x",
        ratio(lt, rt),
        lg as f64 / rg as f64,
        ratio(lt, st),
        lg as f64 / sg as f64
    );
    vec![
        row(
            "Load, one 100 MiB inline tool result: time (vs `fs::read` + `from_slice`)",
            fmt_d(lt),
            fmt_d(rt),
            ratio(lt, rt),
            "-",
            Verdict::Info,
        ),
        row(
            "Load, one 100 MiB inline tool result: peak RSS growth (vs `fs::read` + `from_slice`)",
            format!("{:.0} MiB", mib(lg)),
            format!("{:.0} MiB", mib(rg)),
            lg as f64 / rg as f64,
            "-",
            Verdict::Info,
        ),
        row(
            "Load, one 100 MiB inline tool result: time (vs streamed `from_reader`)",
            fmt_d(lt),
            fmt_d(st),
            ratio(lt, st),
            "-",
            Verdict::Info,
        ),
        row(
            "Load, one 100 MiB inline tool result: peak RSS growth (vs streamed `from_reader`)",
            format!("{:.0} MiB", mib(lg)),
            format!("{:.0} MiB", mib(sg)),
            lg as f64 / sg as f64,
            "-",
            Verdict::Info,
        ),
    ]
}

struct ChildResult {
    time: Duration,
    start_hwm_kb: u64,
    hwm_kb: u64,
    messages: usize,
    content_len: usize,
}

fn run_child(mode: &str, ws: &Path, id: &str) -> ChildResult {
    let exe = std::env::current_exe().expect("current exe");
    let out =
        Command::new(exe).env(CHILD_ENV, mode).env(CHILD_WS_ENV, ws).env(CHILD_ID_ENV, id).output().expect("run child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child {mode} failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")).expect("child prints RESULT");
    let f: Vec<u64> = line.split_whitespace().map(|x| x.parse().expect("number")).collect();
    ChildResult {
        time: Duration::from_nanos(f[0]),
        start_hwm_kb: f[1],
        hwm_kb: f[2],
        messages: f[3] as usize,
        content_len: f[4] as usize,
    }
}

fn vm_kb(field: &str) -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn child_main(mode: &str) {
    let ws = PathBuf::from(std::env::var_os(CHILD_WS_ENV).expect("workspace"));
    let id = std::env::var(CHILD_ID_ENV).expect("id");
    let ctx = Context::for_id(&ws, &id).expect("context");
    let start_hwm = vm_kb("VmHWM");
    let t = Instant::now();
    let (messages, content_len) = match mode {
        "lib" => {
            let l = session::load(&ctx).expect("load");
            assert!(!l.damaged(), "{}", l.damage_report());
            let len = l.messages.last().and_then(|m| m.tool_result.as_ref()).map_or(0, |r| r.content.len());
            (l.messages.len(), len)
        }
        "stream" => {
            let f = File::open(&ctx.jsonl_path).expect("open");
            let entries = serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(256 * 1024, f))
                .into_iter::<Entry>()
                .collect::<Result<Vec<_>, _>>()
                .expect("parse");
            let len = entries.last().and_then(|e| e.tool_result.as_ref()).map_or(0, |r| r.content.len());
            (entries.len(), len)
        }
        _ => {
            let data = fs::read(&ctx.jsonl_path).expect("read");
            let entries: Vec<Entry> = data
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).expect("parse"))
                .collect();
            let len = entries.last().and_then(|e| e.tool_result.as_ref()).map_or(0, |r| r.content.len());
            (entries.len(), len)
        }
    };
    let time = t.elapsed();
    let hwm = vm_kb("VmHWM");
    println!("RESULT {} {start_hwm} {hwm} {messages} {content_len}", time.as_nanos());
}

// ---------------------------------------------------------------------------------------------
// 3. List.

struct ListSet {
    ws: PathBuf,
    ids: Vec<String>,
    log_bytes: u64,
}

/// `LIST_SESSIONS` sessions sharing one log of about `bytes`, hard-linked into each session directory.
fn make_list_set(root: &Path, name: &str, bytes: u64, seed: u64) -> ListSet {
    let ws = root.join(name);
    let sessions = session::sessions_dir(&ws);
    fs::create_dir_all(&sessions).expect("create sessions dir");
    let master = root.join(format!("{name}-master.jsonl"));
    append_turns(&master, &mut Conv::new(seed), bytes);
    let log_bytes = fs::metadata(&master).expect("stat").len();
    let mut ids = Vec::with_capacity(LIST_SESSIONS);
    for i in 0..LIST_SESSIONS {
        let id = format!("20260101-120000-{i:04x}");
        let ctx = Context::for_id(&ws, &id).expect("valid id");
        fs::create_dir(&ctx.dir).expect("create session dir");
        fs::hard_link(&master, &ctx.jsonl_path).expect("hard link log");
        ids.push(id);
    }
    ListSet { ws, ids, log_bytes }
}

fn timed_list(set: &ListSet) -> Duration {
    let t = Instant::now();
    let v = session::list(&set.ws, &ListOptions::default()).expect("list");
    let d = t.elapsed();
    assert_eq!(v.len(), LIST_SESSIONS, "every session is listed");
    black_box(v);
    d
}

fn drop_caches(set: &ListSet) {
    for id in &set.ids {
        let ctx = Context::for_id(&set.ws, id).expect("valid id");
        let _ = fs::remove_file(ctx.summary_path());
    }
}

fn bench_list(root: &Path) -> Vec<Row> {
    println!("3. list: {LIST_SESSIONS} sessions of ~10 KiB vs {LIST_SESSIONS} of ~10 MiB (hard-linked logs)");
    let small = make_list_set(root, "list-small", LIST_SMALL_BYTES, 4);
    let large = make_list_set(root, "list-large", LIST_LARGE_BYTES, 5);
    println!("   logs: {:.1} KiB and {:.2} MiB", small.log_bytes as f64 / 1024.0, mib(large.log_bytes));

    let mut cold_small = Vec::new();
    for _ in 0..LIST_COLD_SMALL_REPS {
        drop_caches(&small);
        cold_small.push(timed_list(&small));
    }
    let cold_large = timed_list(&large);

    let (mut warm_small, mut warm_large) = (Vec::new(), Vec::new());
    for round in 0..LIST_WARM_ROUNDS {
        if round % 2 == 0 {
            warm_small.push(timed_list(&small));
            warm_large.push(timed_list(&large));
        } else {
            warm_large.push(timed_list(&large));
            warm_small.push(timed_list(&small));
        }
    }

    // The list must agree with a resume.
    let ctx = Context::for_id(&large.ws, &large.ids[0]).expect("valid id");
    let loaded = session::load(&ctx).expect("load");
    let info = session::list::info(&ctx).expect("info");
    assert_eq!(info.messages, loaded.messages.len(), "list count = resume count");
    drop(loaded);

    let t = Instant::now();
    for id in &large.ids[..FULL_REPLAY_SAMPLE] {
        let ctx = Context::for_id(&large.ws, id).expect("valid id");
        black_box(session::load(&ctx).expect("load"));
    }
    let replay = t.elapsed() * (LIST_SESSIONS / FULL_REPLAY_SAMPLE) as u32;

    let (cs, ws_, wl) = (median(&cold_small), median(&warm_small), median(&warm_large));
    let warm_ratio = ratio(wl, ws_);
    println!("   cold list  10 KiB set {:>9} (median of {LIST_COLD_SMALL_REPS})", fmt_d(cs));
    println!(
        "   cold list  10 MiB set {:>9} (once; {:.0} MB/s over {:.1} GiB)",
        fmt_d(cold_large),
        mb_per_s(large.log_bytes * LIST_SESSIONS as u64, cold_large),
        (large.log_bytes * LIST_SESSIONS as u64) as f64 / (1u64 << 30) as f64
    );
    println!(
        "   warm list  10 KiB set {:>9}, 10 MiB set {:>9} (medians of {LIST_WARM_ROUNDS}, {:.1} µs per session)",
        fmt_d(ws_),
        fmt_d(wl),
        wl.as_secs_f64() * 1e6 / LIST_SESSIONS as f64
    );
    println!("   warm ratio 10 MiB / 10 KiB {warm_ratio:.2}x  goal <= {LIST_GOAL}x");
    println!(
        "   full replay (session::load) of {FULL_REPLAY_SAMPLE} x 10 MiB sessions, x{}: {}; warm list is {:.4}x of it ({:.0}x faster); cold list {:.2}x of it",
        LIST_SESSIONS / FULL_REPLAY_SAMPLE,
        fmt_d(replay),
        ratio(wl, replay),
        ratio(replay, wl),
        ratio(cold_large, replay)
    );
    vec![
        row(
            "List 1000 sessions, warm: 10 MiB logs vs 10 KiB logs",
            fmt_d(wl),
            fmt_d(ws_),
            warm_ratio,
            &format!("<= {LIST_GOAL}x"),
            if warm_ratio <= LIST_GOAL { Verdict::Pass } else { Verdict::Miss },
        ),
        row(
            "List 1000 sessions, cold: 10 MiB logs vs 10 KiB logs",
            fmt_d(cold_large),
            fmt_d(cs),
            ratio(cold_large, cs),
            "-",
            Verdict::Info,
        ),
        row(
            "List 1000 x 10 MiB warm vs full replay (`load`, 100 sessions x10)",
            fmt_d(wl),
            fmt_d(replay),
            ratio(wl, replay),
            "-",
            Verdict::Info,
        ),
        row(
            "List 1000 x 10 MiB cold vs full replay (`load`, 100 sessions x10)",
            fmt_d(cold_large),
            fmt_d(replay),
            ratio(cold_large, replay),
            "-",
            Verdict::Info,
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// 4. The full list through the sessions index, at 10,000 and 100,000 sessions.

const INDEX_SIZES: [usize; 2] = [10_000, 100_000];
const INDEX_WARM_ROUNDS: usize = 7;
const INDEX_GOALS_MS: [f64; 2] = [15.0, 100.0];

/// `n` sessions of one ~4 KiB log each (hard links of one file), each with the lock file its writer left.
fn make_index_set(root: &Path, n: usize) -> ListSet {
    let ws = root.join(format!("index-{n}"));
    fs::create_dir_all(session::sessions_dir(&ws)).expect("create sessions dir");
    let master = root.join(format!("index-{n}-master.jsonl"));
    append_turns(&master, &mut Conv::new(9), 4 << 10);
    let log_bytes = fs::metadata(&master).expect("stat").len();
    let ids: Vec<String> = (0..n).map(|i| format!("20260101-{:06}-{:04x}", i / 0x10000, i % 0x10000)).collect();
    for (i, id) in ids.iter().enumerate() {
        let ctx = Context::for_id(&ws, id).expect("valid id");
        fs::create_dir(&ctx.dir).expect("create session dir");
        // A file takes at most 65,000 links on ext4: a copy of the log per 50,000 sessions.
        let copy = master.with_extension(format!("{}.jsonl", i / 50_000));
        if i % 50_000 == 0 {
            fs::copy(&master, &copy).expect("copy the log");
        }
        fs::hard_link(&copy, &ctx.jsonl_path).expect("hard link log");
        fs::write(ctx.lock_path(), b"").expect("lock file");
    }
    ListSet { ws, ids, log_bytes }
}

fn index_file(set: &ListSet) -> PathBuf {
    set.ws.join(".PseudoClaude").join(session::index::INDEX_FILE_NAME)
}

/// The full list as it is read without the index (a limit no workspace reaches: a scan of every summary).
fn timed_scan(set: &ListSet) -> Duration {
    let t = Instant::now();
    let v = session::list(&set.ws, &ListOptions { limit: Some(usize::MAX), ..Default::default() }).expect("list");
    let d = t.elapsed();
    assert_eq!(v.len(), set.ids.len(), "every session is listed");
    d
}

/// CPU time (user + system) this process has used, every thread's.
fn cpu_time() -> Duration {
    // SAFETY: `ru` is plain data the call fills.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(us(ru.ru_utime) + us(ru.ru_stime))
}

fn timed_indexed(set: &ListSet) -> (Duration, Vec<session::list::SessionInfo>) {
    let t = Instant::now();
    let v = session::list(&set.ws, &ListOptions::default()).expect("list");
    (t.elapsed(), v)
}

fn bench_index(root: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    for (n, goal_ms) in INDEX_SIZES.into_iter().zip(INDEX_GOALS_MS) {
        let t = Instant::now();
        let set = make_index_set(root, n);
        println!(
            "4. index: {n} sessions of {:.1} KiB made in {:.1} s",
            set.log_bytes as f64 / 1024.0,
            t.elapsed().as_secs_f64()
        );
        // Cold: no summary, no index; then the same without the index, its summaries removed again.
        let (cold, reference) = timed_indexed(&set);
        drop_caches(&set);
        let _ = fs::remove_file(index_file(&set));
        let cold_scan = timed_scan(&set);
        assert_eq!(session::list(&set.ws, &ListOptions::default()).expect("list"), reference, "same list");
        // Warm, alternating with the scan; the CPU time of the warm list too (on a loaded machine the wall time
        // includes waiting for a core).
        let (mut warm, mut warm_cpu, mut scan) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..INDEX_WARM_ROUNDS {
            let cpu = cpu_time();
            warm.push(timed_indexed(&set).0);
            warm_cpu.push(cpu_time() - cpu);
            scan.push(timed_scan(&set));
        }
        let (warm, warm_cpu, scan) = (median(&warm), median(&warm_cpu), median(&scan));
        // Who holds a lock: the list with `check_locks` (as the picker asks), and every session's lock asked
        // one by one (what it did before /proc/locks), alternating.
        let (mut locks, mut asked) = (Vec::new(), Vec::new());
        for _ in 0..INDEX_WARM_ROUNDS {
            let t = Instant::now();
            let v = session::list(&set.ws, &ListOptions { check_locks: true, ..Default::default() }).expect("list");
            locks.push(t.elapsed());
            assert_eq!(v.len(), n);
            let t = Instant::now();
            let held = set.ids.iter().filter_map(|id| lock::holder(&Context::for_id(&set.ws, id).expect("id"))).count();
            asked.push(t.elapsed());
            assert_eq!(held, 0);
        }
        let (locks, asked) = (median(&locks), median(&asked));
        let _ = fs::remove_file(index_file(&set));
        let (deleted, v) = timed_indexed(&set);
        assert_eq!(v, reference, "rebuilt when deleted");
        fs::write(index_file(&set), b"{\"version\":1,\"damaged").expect("damage the index");
        let (damaged, v) = timed_indexed(&set);
        assert_eq!(v, reference, "rebuilt when damaged");
        // Stale: 10 sessions written by another writer, one removed, one added.
        for id in &set.ids[..10] {
            let ctx = Context::for_id(&set.ws, id).expect("valid id");
            fs::remove_file(&ctx.jsonl_path).expect("unlink the shared log");
            fs::copy(root.join(format!("index-{n}-master.jsonl")), &ctx.jsonl_path).expect("copy");
            let w = Writer::open(&ctx, writer_options()).expect("writer");
            w.append(&Message::user("one more")).expect("append");
        }
        fs::remove_dir_all(Context::for_id(&set.ws, &set.ids[n - 1]).expect("id").dir).expect("remove one");
        let added = Context::for_id(&set.ws, "20270101-000000-0000").expect("id");
        fs::create_dir(&added.dir).expect("add one");
        fs::copy(root.join(format!("index-{n}-master.jsonl")), &added.jsonl_path).expect("copy");
        let (stale, v) = timed_indexed(&set);
        let scanned = session::list(&set.ws, &ListOptions { limit: Some(usize::MAX), ..Default::default() });
        assert_eq!(v, scanned.expect("list"), "stale: the same list as the scan");
        let (after, _) = timed_indexed(&set);
        let index_mib = fs::metadata(index_file(&set)).map_or(0, |m| m.len()) as f64 / (1 << 20) as f64;
        println!(
            "   warm {} (CPU {}) vs scan {} (index {index_mib:.1} MiB); locks {} vs asking each {}; cold {} vs {}; deleted {}, \
             damaged {}, stale {}, then {}",
            fmt_d(warm),
            fmt_d(warm_cpu),
            fmt_d(scan),
            fmt_d(locks),
            fmt_d(asked),
            fmt_d(cold),
            fmt_d(cold_scan),
            fmt_d(deleted),
            fmt_d(damaged),
            fmt_d(stale),
            fmt_d(after)
        );
        let r = |name: &str, d: Duration, base: Duration, goal: &str, v: Verdict| {
            row(&format!("Full list, {n} sessions: {name}"), fmt_d(d), fmt_d(base), ratio(d, base), goal, v)
        };
        let met = warm.as_secs_f64() * 1e3 <= goal_ms;
        rows.push(r(
            "warm, index vs scan of the summaries",
            warm,
            scan,
            &format!("<= {goal_ms} ms"),
            if met { Verdict::Pass } else { Verdict::Miss },
        ));
        rows.push(r("warm: CPU time (both threads) vs wall time", warm_cpu, warm, "-", Verdict::Info));
        rows.push(r("warm with lock checks (`check_locks`) vs without", locks, warm, "-", Verdict::Info));
        rows.push(r(
            "warm with lock checks vs every session's lock asked (before)",
            locks,
            warm + asked,
            "-",
            Verdict::Info,
        ));
        rows.push(r("cold (no summary, no index) vs cold scan", cold, cold_scan, "~1x", Verdict::Info));
        rows.push(r("index deleted vs warm scan", deleted, scan, "-", Verdict::Info));
        rows.push(r("index damaged vs warm scan", damaged, scan, "-", Verdict::Info));
        rows.push(r("index stale (10 written, 1 removed, 1 added) vs warm scan", stale, scan, "-", Verdict::Info));
        let _ = fs::remove_dir_all(&set.ws);
    }
    rows
}

/// The sections of an existing `doc/benchmarks.md` that this bench does not write.
fn other_sections(old: &str) -> String {
    const OURS: &[&str] = &["## What each row measures"];
    let mut out = String::new();
    let mut keep = false;
    for line in old.split_inclusive('\n') {
        if line.starts_with("## ") {
            keep = !OURS.iter().any(|h| line.trim_end() == *h);
            if keep && !out.is_empty() && !out.ends_with("\n\n") {
                out.push('\n');
            }
        }
        if keep {
            out.push_str(line);
        }
    }
    if out.is_empty() { out } else { format!("\n{out}") }
}
