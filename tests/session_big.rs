//! A 100 MiB tool result, spilled by our writer or inline in a seed-format log, loads without a
//! line-length limit and without holding several copies of it. A counting allocator measures the
//! peak of live heap bytes during each load.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::session::{self, Context, Writer, WriterOptions};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // A realloc may hold old and new at once: count the new block before the old one goes.
        let live = LIVE.fetch_add(new, Ordering::Relaxed) + new;
        PEAK.fetch_max(live, Ordering::Relaxed);
        let r = unsafe { System.realloc(p, l, new) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        r
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The two tests measure one process-wide peak: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;
const SIZE: usize = 100 * MIB;

/// Extra heap bytes at the peak of `f`, beyond what was live when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

/// 100 MiB of tool output, with newlines and quotes that JSON must escape.
fn big_output() -> String {
    let line = "src/main.rs:42: let s = \"quoted\"; // a typical grep hit\n";
    let mut s = line.repeat(SIZE / line.len() + 1);
    s.truncate(SIZE);
    s
}

#[test]
fn a_100_mib_tool_result_written_by_us_is_spilled_and_loads_in_constant_memory() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let out = big_output();
    let w = Writer::open(&ctx, WriterOptions::default()).unwrap();
    w.append(&Message::user("grep everything")).unwrap();
    w.append(&Message::assistant_tool_calls("", vec![ToolCall::new("c1", "grep", serde_json::json!({}))])).unwrap();
    let result = Message::tool_result("c1", out.as_str(), false);
    let ((), append_peak) = peak_during(|| w.append(&result).unwrap());
    drop(result);
    drop(w);
    assert!(append_peak < 8 * MIB, "append copied the result: {} MiB", append_peak / MIB);
    assert!(fs::metadata(&ctx.jsonl_path).unwrap().len() < 64 * 1024);

    let (loaded, load_peak) = peak_during(|| session::load(&ctx).unwrap());
    assert!(load_peak < 8 * MIB, "load peak {} MiB", load_peak / MIB);
    let r = loaded.messages[2].tool_result.as_ref().unwrap();
    assert_eq!(r.spill.as_ref().unwrap().bytes, SIZE as u64);
    assert!(loaded.spill_problems.is_empty());
    assert_eq!(session::spill::read(&ctx, r.spill.as_ref().unwrap()).unwrap(), out);
}

#[test]
fn a_100_mib_inline_result_in_a_seed_log_loads_without_several_copies() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    {
        let out = big_output();
        let mut f = fs::File::create(&ctx.jsonl_path).unwrap();
        writeln!(f, r#"{{"role":"user","content":"grep everything","ts":1}}"#).unwrap();
        writeln!(f, r#"{{"role":"assistant","tool_calls":[{{"id":"c1","name":"grep","arguments":"{{}}"}}],"ts":2}}"#)
            .unwrap();
        let line = serde_json::json!({"role": "user", "tool_result": {"tool_call_id": "c1", "content": out}, "ts": 3});
        serde_json::to_writer(&mut f, &line).unwrap();
        writeln!(f).unwrap();
        writeln!(f, r#"{{"role":"assistant","content":"found it","ts":4}}"#).unwrap();
    }
    assert!(fs::metadata(&ctx.jsonl_path).unwrap().len() > 10 * MIB as u64, "past the seed's 10 MiB line limit");
    let (loaded, peak) = peak_during(|| session::load(&ctx).unwrap());
    assert_eq!(loaded.messages.len(), 4);
    assert_eq!(loaded.messages[2].tool_result.as_ref().unwrap().content.len(), SIZE);
    assert_eq!(loaded.messages[3].content, "found it");
    // The result itself plus the parser's scratch buffer: never the raw line as well.
    assert!(peak < SIZE * 5 / 2, "load peak {} MiB for a {} MiB result", peak / MIB, SIZE / MIB);
    eprintln!("peak during load: {} MiB for a {} MiB result", peak / MIB, SIZE / MIB);
}
