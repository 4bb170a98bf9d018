//! The session log under a simulated disk that loses power, in the style of FoundationDB's and
//! TigerBeetle's simulators: seeded workloads of appends, replaces (compaction snapshots, resyncs
//! after a failed write), streamed answers (checkpoints), spills of large tool results and reopens
//! (torn-tail repair), over a disk ([`sim_disk::SimDisk`]) that fails operations now and then and
//! crashes at a random operation.
//!
//! After each crash (a power cut that loses unsynced bytes and directory entries, or a SIGKILL that
//! keeps the page cache), recovery runs as a resume does: the writer reopens the session on the
//! simulated disk (repairing a torn tail; it may crash again while doing so), then the real loader
//! reads what survived, copied to a real directory. The history it returns must be exactly what the
//! acknowledged entries make (an answer cut mid-stream as the interrupted answer its checkpoints
//! make), or that plus the one line in flight: never an acknowledged entry lost, never a partial
//! replace, every spilled result of an acknowledged entry readable and intact. The line in flight may
//! come back with garbage in place of some of its characters (a torn sector inside a string): with no
//! checksum in the format, nothing can tell; it is allowed for that line only, and counted.
//!
//! A failing seed prints itself; `PSEUDOCLAUDE_SIM_SEED=<seed> cargo test --test it session_sim::` replays
//! it alone. `make sim` (part of `make test`) runs 10,000 seeds in release mode and prints what was
//! injected; `PSEUDOCLAUDE_SIM_SEEDS=<n>` changes the count, `PSEUDOCLAUDE_SIM_TRACE=1` prints every
//! disk operation and line written, to follow a failing seed.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::support::sim_disk::{Sabotage, SimDisk, Stats};
use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::session::{self, Context, Error, Writer, WriterOptions, spill};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const WORKSPACE: &str = "/ws";
/// Small, so that spills are frequent and small.
const SPILL_THRESHOLD: usize = 512;
const QUICK_SEEDS: u64 = 300;
const FULL_SEEDS: u64 = 10_000;

/// One line the workload asked the writer for.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // a test's list of a few hundred items: boxing would only add noise
enum Item {
    Append(Message),
    Replace(&'static str, Vec<Message>),
    /// Text streamed into answer `answer` since its previous checkpoint, from byte `at`.
    Checkpoint {
        answer: String,
        at: usize,
        text: String,
    },
}

/// The loader's fold, written again from doc/log_format.md (not replay.rs) so the two check each
/// other: a replace starts over; an exchange is held back until every call has its result, dropped
/// when anything else comes first, trimmed at the end; orphan results are dropped. Checkpoints of an
/// answer gather its text; its final assistant message (or a replace) supersedes them, anything else
/// (or the end) makes the text an interrupted answer; a checkpoint out of place ends the gathering.
#[derive(Debug, Clone, Default)]
struct Fold {
    committed: Vec<Message>,
    held: Vec<Message>,
    unanswered: Vec<String>,
    /// The answer being gathered: its id, its text, and whether a checkpoint broke the sequence.
    streaming: Option<(String, String, bool)>,
}

impl Fold {
    fn from(history: &[Message]) -> Fold {
        let mut f = Fold::default();
        history.iter().cloned().for_each(|m| f.feed(m));
        f
    }

    fn apply(&mut self, item: &Item) {
        match item {
            Item::Append(m) => {
                self.end_streaming(m.role == "assistant" && m.tool_result.is_none());
                self.feed(m.clone())
            }
            Item::Replace(_, msgs) => {
                *self = Fold::from(msgs);
            }
            Item::Checkpoint { answer, at, text } => {
                if self.streaming.as_ref().is_some_and(|(a, _, _)| a != answer) {
                    self.end_streaming(false);
                }
                let (_, gathered, broken) =
                    self.streaming.get_or_insert_with(|| (answer.clone(), String::new(), false));
                if *broken || *at != gathered.len() {
                    *broken = true;
                } else {
                    gathered.push_str(text);
                }
            }
        }
    }

    /// The interrupted answer's time is the writer's clock at its last checkpoint, which the
    /// workload does not see: 0 here, and 0 in what the loader returns (see [`Sim::check`]).
    fn end_streaming(&mut self, superseded: bool) {
        if let Some((_, text, _)) = self.streaming.take()
            && !text.is_empty()
            && !superseded
        {
            self.feed(Message::assistant_interrupted(text, 0));
        }
    }

    /// The history a load at this point returns.
    fn visible(&self) -> Vec<Message> {
        let mut f = self.clone();
        f.end_streaming(false);
        f.committed
    }

    fn feed(&mut self, m: Message) {
        if let Some(r) = &m.tool_result {
            if let Some(i) = self.unanswered.iter().position(|id| *id == r.tool_call_id) {
                self.unanswered.remove(i);
                self.held.push(m);
                if self.unanswered.is_empty() {
                    self.committed.append(&mut self.held);
                }
            }
            return;
        }
        self.held.clear();
        self.unanswered.clear();
        if m.tool_calls.is_empty() {
            self.committed.push(m);
        } else {
            self.unanswered = m.tool_calls.iter().map(|c| c.id.clone()).collect();
            self.held.push(m);
        }
    }
}

/// Where the agent is in a turn.
#[derive(Debug, Clone, PartialEq)]
enum Turn {
    Idle,
    /// The user spoke, or all results are in: the assistant answers next.
    Assistant,
    /// The answer `message` streams: `sent` bytes of its text are checkpointed; `after` comes next.
    Streaming {
        answer: String,
        sent: usize,
        message: Box<Message>,
        after: Box<Turn>,
    },
    Results(Vec<String>),
}

/// An agent-like source of entries: turns of user text, assistant text and tool calls with their
/// results (some large, some the same large output again), compactions between turns, and the
/// conversation's resync snapshot after a failed write.
struct Workload {
    rng: StdRng,
    /// What the agent holds in memory (a failed write stays in it, as in `Conversation`).
    memory: Vec<Message>,
    unsaved: bool,
    turn: Turn,
    calls: u64,
    answers: u64,
    big_outputs: Vec<String>,
}

const WORDS: &[&str] = &[
    "the",
    "log",
    "parse",
    "file",
    "é",
    "日本語",
    "fn",
    "main",
    "\"quoted\"",
    "tab\there",
    "line\nbreak",
    "sync",
    "write",
    "{json}",
    "\\",
    "ok",
    "error",
];

impl Workload {
    fn text(&mut self, max_words: usize) -> String {
        let n = self.rng.random_range(1..=max_words);
        (0..n).map(|_| WORDS[self.rng.random_range(0..WORDS.len())]).collect::<Vec<_>>().join(" ")
    }

    fn output(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0..6 => self.text(40),
            6..8 if !self.big_outputs.is_empty() => {
                self.big_outputs[self.rng.random_range(0..self.big_outputs.len())].clone()
            }
            _ => {
                let big = self.text(1200);
                let big =
                    if big.len() <= SPILL_THRESHOLD { format!("{big}{}", "x".repeat(SPILL_THRESHOLD)) } else { big };
                self.big_outputs.push(big.clone());
                big
            }
        }
    }

    /// The next line to write, already applied to memory.
    fn next(&mut self) -> Item {
        if self.unsaved {
            return Item::Replace("resync", self.memory.clone());
        }
        let item = match self.turn.clone() {
            Turn::Idle if !self.memory.is_empty() && self.rng.random_bool(0.15) => {
                // A compaction: a summary, then the history from some typed user message on.
                let starts: Vec<usize> = (0..self.memory.len()).filter(|&i| self.memory[i].is_user_text()).collect();
                let from = starts.get(self.rng.random_range(0..starts.len().max(1))).copied().unwrap_or(0);
                let mut snapshot = vec![Message::user(format!("[summary] {}", self.text(30)))];
                snapshot.extend_from_slice(&self.memory[from..]);
                self.memory = snapshot.clone();
                return Item::Replace("compact", snapshot);
            }
            Turn::Idle => {
                self.turn = Turn::Assistant;
                Item::Append(Message::user(self.text(60)))
            }
            Turn::Assistant => {
                let (message, after) = if self.rng.random_bool(0.5) {
                    (Message::assistant(self.text(80)), Turn::Idle)
                } else {
                    let n = self.rng.random_range(1..=3);
                    let calls: Vec<ToolCall> = (0..n)
                        .map(|_| {
                            self.calls += 1;
                            ToolCall::new(format!("call_{}", self.calls), "read_file", json!({"path": self.text(3)}))
                        })
                        .collect();
                    let ids = calls.iter().map(|c| c.id.clone()).collect();
                    (Message::assistant_tool_calls(self.text(10), calls), Turn::Results(ids))
                };
                if self.rng.random_bool(0.6) {
                    // Streamed: checkpoints of its text first, as the runner writes them.
                    self.answers += 1;
                    let answer = format!("answer-{}", self.answers);
                    self.turn = Turn::Streaming { answer, sent: 0, message: Box::new(message), after: Box::new(after) };
                    return self.next();
                }
                self.turn = after;
                Item::Append(message)
            }
            Turn::Streaming { answer, sent, message, after } => {
                let text = &message.content;
                if sent < text.len() {
                    // Two or three checkpoints an answer, about as many as a second apart would make.
                    let mut cut = if self.rng.random_bool(0.5) {
                        text.len()
                    } else {
                        self.rng.random_range((sent + (text.len() - sent) / 2).max(sent + 1)..=text.len())
                    };
                    while !text.is_char_boundary(cut) {
                        cut += 1;
                    }
                    return Item::Checkpoint { answer, at: sent, text: text[sent..cut].to_string() };
                }
                self.turn = *after;
                Item::Append(*message)
            }
            Turn::Results(mut ids) => {
                let id = ids.remove(0);
                self.turn = if ids.is_empty() { Turn::Assistant } else { Turn::Results(ids) };
                let is_error = self.rng.random_bool(0.1);
                let output = self.output();
                Item::Append(Message::tool_result(id, output, is_error))
            }
        };
        if let Item::Append(m) = &item {
            self.memory.push(m.clone());
        }
        item
    }

    /// What became of `item`. A failed message leaves memory ahead of the log, so the next write is
    /// a resync (as in `Conversation`); a failed checkpoint is sent again from the same offset (as the
    /// runner's checkpointer does).
    fn written(&mut self, item: &Item, ok: bool) {
        match item {
            Item::Checkpoint { at, text, .. } => {
                if let (true, Turn::Streaming { sent, .. }) = (ok, &mut self.turn) {
                    *sent = at + text.len();
                }
            }
            _ => self.unsaved = !ok,
        }
    }
}

/// One seed's run.
struct Sim {
    rng: StdRng,
    disk: SimDisk,
    workload: Workload,
    ctx: Option<Context>,
    writer: Option<Writer>,
    /// The history at the last recovery, and the lines acknowledged since.
    base: Vec<Message>,
    acked: Vec<Item>,
    /// Lines that failed since the last acknowledged one: one of them may still be in the file.
    unacked: Vec<Item>,
    checks: u64,
    acknowledged: u64,
    damaged_in_flight: u64,
    damaged_in_flight_reported: u64,
    checkpoints: u64,
    interrupted_restored: u64,
}

fn opts() -> WriterOptions {
    WriterOptions { model: "sim-model".into(), spill_threshold: SPILL_THRESHOLD }
}

impl Sim {
    fn new(seed: u64, sabotage: Sabotage) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let fault_rate = if rng.random_bool(0.5) { 0.0 } else { rng.random_range(0.005..0.05) };
        let disk = SimDisk::new(rng.random(), fault_rate);
        disk.mkdir_durable(Path::new(WORKSPACE));
        disk.sabotage(sabotage);
        let workload = Workload {
            rng: StdRng::seed_from_u64(rng.random()),
            memory: Vec::new(),
            unsaved: false,
            turn: Turn::Idle,
            calls: 0,
            answers: 0,
            big_outputs: Vec::new(),
        };
        Sim {
            rng,
            disk,
            workload,
            ctx: None,
            writer: None,
            base: Vec::new(),
            acked: Vec::new(),
            unacked: Vec::new(),
            checks: 0,
            acknowledged: 0,
            damaged_in_flight: 0,
            damaged_in_flight_reported: 0,
            checkpoints: 0,
            interrupted_restored: 0,
        }
    }

    fn run(&mut self) -> Result<(), String> {
        let rounds = self.rng.random_range(1..=4);
        for _ in 0..rounds {
            self.disk.schedule_crash(self.rng.random_range(0..400));
            let mut steps = 0;
            while !self.disk.is_down() {
                self.step();
                steps += 1;
                if steps > 5000 {
                    self.disk.crash_now();
                }
            }
            self.writer = None;
            self.recover()?;
        }
        Ok(())
    }

    /// Creates the session, opens its writer, or writes one line, whichever is due.
    fn step(&mut self) {
        let Some(ctx) = &self.ctx else {
            // A failure here (injected, or the crash) is retried, as a next send would.
            self.ctx = Context::new_on(&self.disk, Path::new(WORKSPACE)).ok();
            return;
        };
        let Some(w) = &self.writer else {
            self.writer = Writer::open_on(Arc::new(self.disk.clone()), ctx, opts()).ok().map(|(w, _)| w);
            return;
        };
        let item = self.workload.next();
        let written = match &item {
            Item::Append(m) => w.append(m),
            Item::Replace(reason, msgs) => w.replace(reason, msgs),
            Item::Checkpoint { answer, at, text } => w.checkpoint(answer, *at, text),
        };
        if std::env::var_os("PSEUDOCLAUDE_SIM_TRACE").is_some() {
            let what = match &item {
                Item::Append(m) => format!("append {} {:?}", m.role, m.tool_result.as_ref().map(|r| r.content.len())),
                Item::Replace(r, msgs) => format!("replace {r} of {}", msgs.len()),
                Item::Checkpoint { answer, at, text } => format!("checkpoint {answer} at {at}, {} bytes", text.len()),
            };
            eprintln!("sim: {what}: {:?}", written.as_ref().map_err(|e| e.to_string()));
        }
        self.workload.written(&item, written.is_ok());
        if written.is_ok() {
            self.checkpoints += u64::from(matches!(item, Item::Checkpoint { .. }));
            self.acked.push(item);
            self.unacked.clear();
            self.acknowledged += 1;
        } else {
            self.unacked.push(item);
        }
    }

    /// The histories recovery may show: the acknowledged lines', or that plus one failed line.
    fn candidates(&self) -> Vec<Vec<Message>> {
        let acked = self.acked_fold();
        let mut out = vec![acked.visible()];
        for u in &self.unacked {
            let mut f = acked.clone();
            f.apply(u);
            out.push(f.visible());
        }
        out
    }

    fn acked_fold(&self) -> Fold {
        let mut acked = Fold::from(&self.base);
        self.acked.iter().for_each(|i| acked.apply(i));
        acked
    }

    /// Crash, then recover as a resume does, until a recovery completes; then check what it shows.
    fn recover(&mut self) -> Result<(), String> {
        loop {
            if self.rng.random_bool(0.2) {
                self.disk.restart();
            } else {
                self.disk.power_cycle();
            }
            if self.rng.random_bool(0.15) {
                // Crash again during the torn-tail repair.
                self.disk.schedule_crash(self.rng.random_range(0..8));
            }
            let Some(ctx) = self.ctx.clone() else { return Ok(()) };
            let mut attempts = 0;
            let reopened = loop {
                attempts += 1;
                match Writer::open_on(Arc::new(self.disk.clone()), &ctx, opts()) {
                    Ok((w, _)) => break Some(w),
                    Err(_) if self.disk.is_down() => break None,
                    Err(Error::NotFound { .. }) => break None,
                    Err(e) if attempts > 100 => return Err(format!("cannot reopen the session: {e}")),
                    Err(_) => {}
                }
            };
            if self.disk.is_down() {
                continue;
            }
            self.disk.schedule_crash(u64::MAX);
            let log = self.disk.read(&ctx.jsonl_path).unwrap_or_default();
            if reopened.is_some() && log.last().is_some_and(|&b| b != b'\n') {
                return Err(format!(
                    "after the writer's repair the log still ends without a newline ({} bytes)",
                    log.len()
                ));
            }
            self.check(&ctx)?;
            self.writer = reopened;
            return Ok(());
        }
    }

    fn check(&mut self, ctx: &Context) -> Result<(), String> {
        self.checks += 1;
        // On tmpfs when there is one: thousands of small copies cost a journal nothing there.
        let shm = Path::new("/dev/shm");
        let tmp = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
        let tmp = tmp.map_err(|e| e.to_string())?;
        let real = Context::for_id(tmp.path(), &ctx.id).expect("valid id");
        let session_gone = !self.disk.materialize(&ctx.dir, &real.dir).map_err(|e| e.to_string())?;
        let mut seen = String::from("no log");
        let mut repaired = false;
        let (got, problems) = if session_gone {
            (Vec::new(), Vec::new())
        } else {
            let loaded = session::load(&real).map_err(|e| format!("the loader failed: {e}"))?;
            seen = format!(
                "{} bytes, {} entries, bad lines {:?}, torn tail {} bytes",
                std::fs::metadata(&real.jsonl_path).map(|m| m.len()).unwrap_or(0),
                loaded.entries,
                loaded.bad_lines,
                loaded.torn_tail_bytes
            );
            repaired = !loaded.repaired.is_empty();
            full_outputs(&real, loaded.messages)
        };
        let candidates = self.candidates();
        // The line in flight, torn by the power cut, can come back with garbage in place of some of its
        // bytes and still parse: no per-line checksum can tell (the format has none). Acknowledged
        // lines are never in flight, so this touches only the one that may or may not survive.
        let damaged = !candidates.contains(&got)
            && self.unacked.iter().zip(&candidates[1..]).any(|(u, c)| damaged_form(&got, c, u));
        if self.acked_fold().streaming.is_some_and(|(_, text, _)| !text.is_empty()) {
            // The crash came while an answer streamed: what it had checkpointed must come back.
            self.interrupted_restored += 1;
        }
        if damaged {
            self.damaged_in_flight += 1;
            self.damaged_in_flight_reported += u64::from(repaired);
        }
        if !candidates.contains(&got) && !damaged {
            if std::env::var_os("PSEUDOCLAUDE_SIM_TRACE").is_some() {
                for (i, c) in candidates.iter().enumerate() {
                    let d = got.iter().zip(c).position(|(a, b)| a != b);
                    eprintln!("candidate {i}: {} messages, first difference {d:?}", c.len());
                    if let Some(d) = d {
                        let (g, e) = (got[d].content.as_bytes(), c[d].content.as_bytes());
                        let at = g.iter().zip(e).position(|(a, b)| a != b).unwrap_or(g.len().min(e.len()));
                        let end = |b: &[u8]| (at + 40).min(b.len());
                        eprintln!(
                            "  content differs at byte {at} of {}/{}: got {:?}, expected {:?}",
                            g.len(),
                            e.len(),
                            String::from_utf8_lossy(&g[at..end(g)]),
                            String::from_utf8_lossy(&e[at..end(e)])
                        );
                    }
                }
            }
            let expected = &candidates[0];
            let first_diff =
                got.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(got.len().min(expected.len()));
            return Err(format!(
                "recovery shows {} message(s), the acknowledged entries make {} (or one failed line more: {:?}); \
                 first difference at message {first_diff}: got {:?}, expected {:?}; session directory {}; \
                 log: {seen}; spill problems: {problems:?}",
                got.len(),
                expected.len(),
                candidates[1..].iter().map(Vec::len).collect::<Vec<_>>(),
                got.get(first_diff).map(short),
                expected.get(first_diff).map(short),
                if session_gone { "gone" } else { "present" },
            ));
        }
        if session_gone {
            self.ctx = None;
        }
        self.base = got.clone();
        self.acked.clear();
        self.unacked.clear();
        self.workload.memory = got;
        self.workload.unsaved = false;
        self.workload.turn = Turn::Idle;
        Ok(())
    }
}

/// Whether `got` is `candidate` except for damaged text in messages that came from `line`.
fn damaged_form(got: &[Message], candidate: &[Message], line: &Item) -> bool {
    let from_line: Vec<&Message> = match line {
        Item::Append(m) => vec![m],
        Item::Replace(_, msgs) => msgs.iter().collect(),
        Item::Checkpoint { .. } => Vec::new(),
    };
    let streamed = matches!(line, Item::Checkpoint { .. });
    let same_shape = |g: &Message, c: &Message| {
        g.role == c.role
            && g.tool_calls.iter().map(|t| &t.id).eq(c.tool_calls.iter().map(|t| &t.id))
            && g.tool_result.as_ref().map(|r| &r.tool_call_id) == c.tool_result.as_ref().map(|r| &r.tool_call_id)
    };
    got.len() == candidate.len()
        && got
            .iter()
            .zip(candidate)
            .all(|(g, c)| g == c || ((from_line.contains(&c) || (streamed && c.interrupted)) && same_shape(g, c)))
}

fn short(m: &Message) -> String {
    let mut s = format!("{m:?}");
    s.truncate(300);
    s
}

/// Messages with each spilled result's full output read back from its file, so they compare with
/// what was written; a spill that does not verify is reported (and its placeholder left in place).
/// An interrupted answer's time is set to 0 (see [`Fold::end_streaming`]).
fn full_outputs(ctx: &Context, mut msgs: Vec<Message>) -> (Vec<Message>, Vec<String>) {
    let mut problems = Vec::new();
    for m in &mut msgs {
        if m.interrupted {
            m.ts = 0;
        }
        let Some(r) = &mut m.tool_result else { continue };
        let Some(s) = r.spill.take() else { continue };
        match spill::verify(ctx, &s)
            .map_err(|p| format!("{p:?}"))
            .and_then(|_| spill::read(ctx, &s).map_err(|e| e.to_string()))
        {
            Ok(full) => r.content = full,
            Err(p) => problems.push(format!("{}: {p}", s.path)),
        }
    }
    (msgs, problems)
}

/// What one seed did.
#[derive(Debug, Default)]
struct Report {
    checks: u64,
    acknowledged: u64,
    damaged_in_flight: u64,
    damaged_in_flight_reported: u64,
    checkpoints: u64,
    interrupted_restored: u64,
    stats: Stats,
}

fn run_seed(seed: u64, sabotage: Sabotage) -> Result<Report, String> {
    let outcome = std::panic::catch_unwind(move || {
        let mut sim = Sim::new(seed, sabotage);
        sim.run().map(|()| Report {
            checks: sim.checks,
            acknowledged: sim.acknowledged,
            damaged_in_flight: sim.damaged_in_flight,
            damaged_in_flight_reported: sim.damaged_in_flight_reported,
            checkpoints: sim.checkpoints,
            interrupted_restored: sim.interrupted_restored,
            stats: sim.disk.stats(),
        })
    });
    match outcome {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

/// Runs the seeds (or the one in `PSEUDOCLAUDE_SIM_SEED`), failing with the first failing seed.
fn run_seeds(count: u64) -> (Report, u64) {
    let seeds: Vec<u64> = match env_u64("PSEUDOCLAUDE_SIM_SEED") {
        Some(s) => vec![s],
        None => (0..env_u64("PSEUDOCLAUDE_SIM_SEEDS").unwrap_or(count)).collect(),
    };
    let mut total = Report::default();
    for &seed in &seeds {
        match run_seed(seed, Sabotage::default()) {
            Ok(r) => {
                total.checks += r.checks;
                total.acknowledged += r.acknowledged;
                total.damaged_in_flight += r.damaged_in_flight;
                total.damaged_in_flight_reported += r.damaged_in_flight_reported;
                total.checkpoints += r.checkpoints;
                total.interrupted_restored += r.interrupted_restored;
                total.stats.add(&r.stats);
            }
            Err(e) => panic!(
                "simulation seed {seed} failed: {e}\nreplay it: PSEUDOCLAUDE_SIM_SEED={seed} cargo test --test it session_sim::"
            ),
        }
    }
    (total, seeds.len() as u64)
}

fn print_report(r: &Report, seeds: u64, secs: f64) {
    let s = &r.stats;
    println!(
        "session_sim: {seeds} seeds in {secs:.1} s; {} crash points ({} power cuts, {} SIGKILL restarts), {} recoveries \
         checked, {} entries acknowledged ({} of them checkpoints); {} recoveries came mid-stream and restored an \
         interrupted answer; {} showed the line in flight with damaged text ({} of them reported by the loader as \
         repaired)",
        s.power_cuts + s.restarts,
        s.power_cuts,
        s.restarts,
        r.checks,
        r.acknowledged,
        r.checkpoints,
        r.interrupted_restored,
        r.damaged_in_flight,
        r.damaged_in_flight_reported
    );
    println!(
        "  files with unsynced changes at a power cut: {} kept whole, {} lost whole, {} cut to a prefix, {} mixed by \
         sector ({} new, {} old, {} zero, {} garbage, {} torn mid-sector)",
        s.files_kept_whole,
        s.files_lost_whole,
        s.files_cut_to_prefix,
        s.files_sector_mix,
        s.sectors_new,
        s.sectors_old,
        s.sectors_zero,
        s.sectors_garbage,
        s.sectors_torn
    );
    println!(
        "  unsynced directory entry changes: {} kept, {} lost; faults: {} writes (stopped part way), {} syncs, {} \
         cut-backs, {} directory ops; {} cut-backs retried after a failed one",
        s.dir_changes_kept,
        s.dir_changes_lost,
        s.faults_write,
        s.faults_sync,
        s.faults_set_len,
        s.faults_dir,
        s.cutback_retries
    );
}

#[test]
fn every_crash_recovers_exactly_the_acknowledged_entries() {
    let start = Instant::now();
    let (report, seeds) = run_seeds(QUICK_SEEDS);
    print_report(&report, seeds, start.elapsed().as_secs_f64());
    if seeds >= QUICK_SEEDS {
        let s = &report.stats;
        // The quick run must reach every kind of loss, or it proves less than it says.
        for (what, n) in [
            ("power cuts", s.power_cuts),
            ("restarts", s.restarts),
            ("lost files", s.files_lost_whole),
            ("prefixes", s.files_cut_to_prefix),
            ("torn sectors", s.sectors_torn),
            ("garbage sectors", s.sectors_garbage),
            ("zero sectors", s.sectors_zero),
            ("lost directory entries", s.dir_changes_lost),
            ("write faults", s.faults_write),
            ("cut-back faults", s.faults_set_len),
            ("crashes mid-stream", report.interrupted_restored),
        ] {
            assert!(n > 0, "the quick run injected no {what}");
        }
    }
}

/// `make sim`: the full run, in release mode.
#[test]
#[ignore = "10,000 seeds: run by `make sim` (part of `make test`) in release mode"]
fn ten_thousand_seeds() {
    let start = Instant::now();
    let (report, seeds) = run_seeds(FULL_SEEDS);
    print_report(&report, seeds, start.elapsed().as_secs_f64());
}

/// The simulation has teeth: a disk whose syncs do nothing (as a writer that forgot them) fails it.
fn some_seed_fails(sabotage: Sabotage) -> Option<(u64, String)> {
    (0..QUICK_SEEDS).find_map(|seed| run_seed(seed, sabotage).err().map(|e| (seed, e)))
}

#[test]
fn a_writer_without_file_syncs_loses_acknowledged_entries() {
    let failed = some_seed_fails(Sabotage { skip_file_sync: true, ..Default::default() });
    let (seed, why) = failed.expect("no seed failed although no file sync made anything durable");
    assert!(why.contains("recovery shows"), "seed {seed}: {why}");
}

#[test]
fn a_writer_without_directory_syncs_loses_acknowledged_entries() {
    let failed = some_seed_fails(Sabotage { skip_dir_sync: true, ..Default::default() });
    let (seed, why) = failed.expect("no seed failed although no directory sync made anything durable");
    assert!(why.contains("recovery shows"), "seed {seed}: {why}");
}

#[test]
fn a_seed_replays_exactly() {
    let runs: Vec<String> = (0..2).map(|_| format!("{:?}", run_seed(7, Sabotage::default()))).collect();
    assert!(runs[0].contains("Ok("), "{}", runs[0]);
    assert_eq!(runs[0], runs[1]);
}

/// The instrument itself: synced bytes and entries survive every power cut; unsynced ones may not.
#[test]
fn the_simulated_disk_keeps_what_was_synced_and_may_lose_the_rest() {
    use pseudoclaude::session::disk::{Disk, Open};
    let (dir, synced, unsynced) = (Path::new("/d"), Path::new("/d/synced"), Path::new("/d/unsynced"));
    let (mut lost_files, mut kept_files, mut changed_tails) = (0, 0, 0);
    for seed in 0..200 {
        let disk = SimDisk::new(seed, 0.0);
        disk.mkdir_durable(dir);
        let mut f = disk.open(synced, Open::Append).unwrap();
        f.write_all(b"durable\n").unwrap();
        f.sync_data().unwrap();
        disk.sync_dir(dir).unwrap();
        f.write_all(b"maybe\n").unwrap();
        let mut g = disk.open(unsynced, Open::Append).unwrap();
        g.write_all(b"data synced, entry not\n").unwrap();
        g.sync_data().unwrap();
        disk.power_cycle();
        let after = disk.read(synced).expect("a synced entry survives");
        assert!(after.starts_with(b"durable\n"), "seed {seed}: synced bytes changed: {after:?}");
        changed_tails += usize::from(after != b"durable\nmaybe\n");
        match disk.read(unsynced) {
            Some(b) => {
                assert_eq!(b, b"data synced, entry not\n", "seed {seed}");
                kept_files += 1;
            }
            None => lost_files += 1,
        }
        drop((f, g));
    }
    assert!(lost_files > 0 && kept_files > 0, "unsynced entries: {lost_files} lost, {kept_files} kept");
    assert!(changed_tails > 0, "unsynced bytes always survived whole");
}

/// A writer killed between its write and its sync leaves a whole line in the page cache only; the
/// resume that shows it must make it durable (the next open syncs it), or a power cut right after
/// takes back what the user was shown.
#[test]
fn the_next_open_makes_a_line_left_unsynced_by_a_killed_writer_durable() {
    use pseudoclaude::session::disk::{Disk, Open};
    for seed in 0..50 {
        let disk = SimDisk::new(seed, 0.0);
        disk.mkdir_durable(Path::new(WORKSPACE));
        let ctx = Context::new_on(&disk, Path::new(WORKSPACE)).unwrap();
        let (w, _) = Writer::open_on(Arc::new(disk.clone()), &ctx, opts()).unwrap();
        w.append(&Message::user("synced")).unwrap();
        drop(w);
        // the killed writer's last line: written whole, never synced
        let mut f = disk.open(&ctx.jsonl_path, Open::Append).unwrap();
        f.write_all(b"{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"seen\",\"ts\":1}\n").unwrap();
        drop(f);
        disk.restart();
        let (w, repair) = Writer::open_on(Arc::new(disk.clone()), &ctx, opts()).unwrap();
        assert_eq!(repair.torn_bytes, 0);
        let shown = String::from_utf8(disk.read(&ctx.jsonl_path).unwrap()).unwrap();
        assert!(shown.contains("\"content\":\"seen\""), "seed {seed}: what a resume reads holds the line");
        drop(w);
        disk.power_cycle();
        let log = String::from_utf8(disk.read(&ctx.jsonl_path).unwrap()).unwrap();
        assert!(log.contains("\"content\":\"seen\""), "seed {seed}: the line a resume showed was lost: {log:?}");
    }
}

/// `close` reports a sync that fails (a disk gone bad at the end), where a drop cannot.
#[test]
fn close_reports_a_failing_sync() {
    let disk = SimDisk::new(1, 0.0);
    disk.mkdir_durable(Path::new(WORKSPACE));
    let ctx = Context::new_on(&disk, Path::new(WORKSPACE)).unwrap();
    let (w, _) = Writer::open_on(Arc::new(disk.clone()), &ctx, opts()).unwrap();
    w.append(&Message::user("one")).unwrap();
    disk.crash_now();
    let err = w.close().unwrap_err();
    assert!(err.to_string().contains("cannot sync session log"), "{err}");
}
