//! Crashes and failures that only another process can show: SIGKILL mid-write, a dead lock holder,
//! a lock held by another process, a full disk (RLIMIT_FSIZE), and the syncs the writer makes on the
//! real disk (strace).
//!
//! The child processes are this test binary run again with `PSEUDO_CHILD` set: `child_process_entry`
//! below is then the child's main. It is an ignored test run with `--ignored` by the parent only (a plain
//! `cargo test` lists it as ignored, never as a pass), and it fails when run without `PSEUDO_CHILD`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::session::{self, Context, Error, Writer, WriterOptions};
use rand::{Rng, SeedableRng};

const CHILD_ENV: &str = "PSEUDO_CHILD";

fn spawn_child(mode: &str, ws: &Path, id: &str) -> (Child, impl Iterator<Item = String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "session_crash::child_process_entry", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{mode}|{}|{id}", ws.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The test harness prints its own words on the child's stdout; ours are the lines starting with '#'.
    let out = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix('#').map(String::from));
    (child, out)
}

/// A line for the parent, flushed at once (the parent may kill us right after).
fn say(s: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "\n#{s}\n");
    let _ = out.flush();
}

fn kill9(child: &mut Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
}

/// The child's main. Prints `ready`, then one line per event the parent checks.
#[test]
#[ignore = "the crash tests' child process: run by them with PSEUDO_CHILD set"]
fn child_process_entry() {
    let spec = std::env::var(CHILD_ENV)
        .expect("child_process_entry is the crash tests' child: they run it with PSEUDO_CHILD=<mode>|<workspace>|<id>");
    let parts: Vec<&str> = spec.splitn(3, '|').collect();
    let ws = Path::new(parts[1]);
    let ctx = || Context::open(ws, parts[2]).unwrap();
    match parts[0] {
        "append-forever" => append_forever(&ctx()),
        "hold-lock" => {
            let _w = Writer::open(&ctx(), WriterOptions::default()).unwrap();
            say("ready");
            std::thread::sleep(Duration::from_secs(60));
        }
        "disk-full" => disk_full(&ctx()),
        "synced" => synced(ws),
        other => panic!("unknown child mode {other}"),
    }
}

/// Appends text messages, tool call exchanges and the odd replace, acknowledging each on stdout
/// once the call returned. A tool call is acknowledged with its result: until then, the loader
/// rightly trims it.
fn append_forever(ctx: &Context) {
    let w = Writer::open(ctx, WriterOptions { model: "crash".into(), spill_threshold: 4096 }).unwrap();
    let pid = std::process::id();
    let mut rng = rand::rngs::StdRng::seed_from_u64(pid as u64);
    say("ready");
    for n in 0.. {
        let label = format!("p{pid}-{n}");
        match rng.random_range(0..10) {
            0..=5 => w.append(&Message::user(format!("{label} {}", "x".repeat(rng.random_range(0..300))))).unwrap(),
            6..=8 => {
                w.append(&Message::assistant_tool_calls(
                    &label,
                    vec![ToolCall::new(&label, "t", serde_json::json!({}))],
                ))
                .unwrap();
                let size = rng.random_range(0..9000);
                w.append(&Message::tool_result(&label, "y".repeat(size), false)).unwrap();
            }
            _ => {
                // A compaction: keep the recent history, as the real one does.
                let loaded = session::load(ctx).unwrap();
                let keep_from = loaded.messages.len().saturating_sub(8);
                let mut msgs: Vec<Message> = loaded.messages[keep_from..].to_vec();
                while msgs.first().is_some_and(|m| m.tool_result.is_some()) {
                    msgs.remove(0);
                }
                msgs.push(Message::assistant(&label));
                // Said first: the kill may land after the line is on disk but before the ack.
                say(&format!("begin-replace {label}"));
                w.replace("compact", &msgs).unwrap();
                say(&format!("ack {label} replace"));
                continue;
            }
        }
        say(&format!("ack {label}"));
    }
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_entry() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut acked: Vec<String> = Vec::new();
    let (mut replaces, mut total_acks) = (0, 0);
    for round in 0..200 {
        let (mut child, mut out) = spawn_child("append-forever", ws.path(), &ctx.id);
        assert_eq!(out.next().as_deref(), Some("ready"), "round {round}: child did not start");
        let wanted = rng.random_range(0..12);
        // After an acknowledged replace, only it and what follows must be there.
        let mut in_flight_replace: Option<String> = None;
        let mut note = |line: String, acked: &mut Vec<String>| {
            if let Some(label) = line.strip_prefix("begin-replace ") {
                in_flight_replace = Some(label.to_string());
                return;
            }
            let Some(ack) = line.strip_prefix("ack ") else { return };
            if let Some(label) = ack.strip_suffix(" replace") {
                in_flight_replace = None;
                replaces += 1;
                acked.clear();
                acked.push(label.to_string());
            } else {
                acked.push(ack.to_string());
            }
        };
        for _ in 0..wanted {
            match out.next() {
                Some(l) => note(l, &mut acked),
                None => break,
            }
        }
        // Land the kill at an arbitrary point of the next write, not just between acknowledgements.
        std::thread::sleep(Duration::from_micros(rng.random_range(0..1500)));
        kill9(&mut child);
        // Acknowledgements that reached the pipe before the kill count too.
        for l in out {
            note(l, &mut acked);
        }
        total_acks += wanted;

        let loaded = session::load(&ctx).unwrap();
        assert!(loaded.bad_lines.is_empty(), "round {round}: {}", loaded.damage_report());
        let text: Vec<&str> = loaded.messages.iter().map(|m| m.content.as_str()).collect();
        // A replace cut short by the kill is either wholly there (its snapshot ends with its label,
        // and what it summarised is gone) or wholly absent; never a part.
        if let Some(label) = in_flight_replace.take() {
            if text.last() == Some(&label.as_str()) {
                acked.clear();
                acked.push(label);
            } else {
                assert!(!text.contains(&label.as_str()), "round {round}: a partial replace");
            }
        }
        let mut from = 0;
        for label in &acked {
            let prefix = format!("{label} ");
            let at = text[from..].iter().position(|t| *t == label || t.starts_with(&prefix));
            let at = at.unwrap_or_else(|| panic!("round {round}: acknowledged {label} lost"));
            from += at;
        }
        let info = session::list::info(&ctx).unwrap();
        assert_eq!(info.messages, loaded.messages.len(), "round {round}");
    }
    assert!(total_acks > 500 && replaces > 10, "exercised too little: {total_acks} acks, {replaces} replaces");
}

#[test]
fn a_crashed_lock_holder_does_not_block_the_session() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let (mut child, mut out) = spawn_child("hold-lock", ws.path(), &ctx.id);
    assert_eq!(out.next().as_deref(), Some("ready"));
    let err = Writer::open(&ctx, WriterOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }));
    assert!(err.to_string().contains(&format!("pid {}", child.id())), "names the holder: {err}");
    kill9(&mut child);
    Writer::open(&ctx, WriterOptions::default()).expect("the dead holder's lock is gone");
}

#[test]
fn a_session_without_a_lock_file_that_another_editor_opens_since_the_list_shows_held() {
    use pseudoclaude::session::ListOptions;
    let ws = tempfile::tempdir().unwrap();
    // sessions without a lock file (the seed's layout, folders copied in): their rows are made without one
    let ids: Vec<String> = (0..3)
        .map(|i| {
            let ctx = Context::new(ws.path()).unwrap();
            let w = Writer::open(&ctx, WriterOptions::default()).unwrap();
            w.append(&Message::user(format!("session {i}"))).unwrap();
            drop(w);
            std::fs::remove_file(ctx.lock_path()).unwrap();
            ctx.id
        })
        .collect();
    let check = ListOptions { check_locks: true, ..Default::default() };
    let held = || -> Vec<(String, Option<String>)> {
        let mut rows: Vec<_> =
            session::list(ws.path(), &check).unwrap().into_iter().map(|s| (s.id, s.held_by)).collect();
        rows.sort();
        rows
    };
    assert!(held().iter().all(|(_, h)| h.is_none()), "nobody holds any");
    // another editor opens one (its writer makes the lock file): the list names it, and only it
    let (mut child, mut out) = spawn_child("hold-lock", ws.path(), &ids[1]);
    assert_eq!(out.next().as_deref(), Some("ready"));
    let rows = held();
    let named: Vec<&str> = rows.iter().filter(|(_, h)| h.is_some()).map(|(id, _)| id.as_str()).collect();
    assert_eq!(named, [ids[1].as_str()], "{rows:?}");
    let holder = rows.iter().find_map(|(_, h)| h.clone()).unwrap();
    assert!(holder.starts_with(&format!("pid {} on ", child.id())), "{holder}");
    kill9(&mut child);
    assert!(held().iter().all(|(_, h)| h.is_none()), "its lock went with it");
}

/// Fills the "disk" with RLIMIT_FSIZE mid-line, then frees it, and reports what the file looked like.
fn disk_full(ctx: &Context) {
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let w = Writer::open(ctx, WriterOptions::default()).unwrap();
    w.append(&Message::user("before")).unwrap();
    let committed = std::fs::metadata(&ctx.jsonl_path).unwrap().len();
    let limit = |bytes: u64| {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut r) };
        r.rlim_cur = bytes;
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &r) }, 0);
    };
    limit(committed + 100); // room for part of the next line only
    let err = w.append(&Message::user(format!("lost {}", "z".repeat(1000)))).unwrap_err();
    say(&format!("error {err}"));
    say(&format!("len-after-failure {}", std::fs::metadata(&ctx.jsonl_path).unwrap().len()));
    say(&format!("committed {committed}"));
    limit(libc::RLIM_INFINITY);
    w.append(&Message::user("after")).unwrap();
    say("done");
}

#[test]
fn a_failed_write_leaves_the_log_ending_on_a_committed_entry() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let (mut child, out) = spawn_child("disk-full", ws.path(), &ctx.id);
    let lines: Vec<String> = out.collect();
    child.wait().unwrap();
    let get = |k: &str| {
        lines.iter().find_map(|l| l.strip_prefix(k)).unwrap_or_else(|| panic!("{k} in {lines:?}")).to_string()
    };
    let error = get("error ");
    assert!(error.contains("cannot write to session log") && error.contains("conversation.jsonl"), "{error}");
    assert!(error.to_lowercase().contains("file too large"), "the OS reason reaches the caller: {error}");
    assert_eq!(get("len-after-failure "), get("committed "), "the half line was cut back");
    assert!(lines.iter().any(|l| l == "done"));
    let loaded = session::load(&ctx).unwrap();
    let text: Vec<&str> = loaded.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(text, ["before", "after"]);
    assert!(!loaded.damaged(), "{}", loaded.damage_report());
    assert!(!ctx.broken_path().exists());
}

/// A session in a workspace folder that does not exist yet: three entries, the last one spilled, each
/// acknowledged once its call returned.
fn synced(ws: &Path) {
    let ctx = Context::new(&ws.join("project")).unwrap();
    let w = Writer::open(&ctx, WriterOptions { model: "sync".into(), spill_threshold: 4096 }).unwrap();
    w.append(&Message::user("one")).unwrap();
    say("ack 1");
    w.append(&Message::assistant_tool_calls("", vec![ToolCall::new("c1", "t", serde_json::json!({}))])).unwrap();
    say("ack 2");
    w.append(&Message::tool_result("c1", "y".repeat(10_000), false)).unwrap();
    say("ack 3");
    w.close().unwrap();
}

/// The simulated disk (`session_sim.rs`) proves the writer asks for every sync it needs; this proves
/// the real disk does them: a sync made a no-op, or of the wrong folder, passes every other test,
/// since a SIGKILL keeps the page cache.
#[test]
fn every_acknowledged_entry_and_every_new_name_is_synced_on_the_real_disk() {
    let strace = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("strace")).find(|f| f.is_file()))
        .expect("this test watches the writer's syncs with strace, which is not installed: scripts/ensure-debs installs it (Debian: apt-get install strace)");
    let ws = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let trace = out.path().join("trace");
    let status = Command::new(strace)
        .args(["-f", "-qq", "-y", "-e", "trace=write,fsync,fdatasync,renameat,renameat2,rename", "-o"])
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "session_crash::child_process_entry", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("synced|{}|-", ws.path().display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the traced child failed: {status}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let project = ws.path().join("project");
    let root = project.join(".PseudoClaude");
    let sessions = root.join("sessions");
    let session = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("the session folder");
    let log = session.join("conversation.jsonl");
    // `fsync(5</path>) = 0`: the paths the process synced, in order, with what else it did between.
    let on = |line: &str, path: &Path| line.contains(&format!("<{}>", path.display()));
    let synced = |line: &str| (line.contains(" fsync(") || line.contains(" fdatasync(")) && line.ends_with("= 0");
    let (mut acks, mut unsynced_write) = (0, false);
    for line in text.lines() {
        if line.contains(" write(") && on(line, &log) {
            unsynced_write = true;
        } else if synced(line) && on(line, &log) {
            unsynced_write = false;
        } else if line.contains(" write(1<") && line.contains("#ack ") {
            assert!(!unsynced_write, "an entry was acknowledged before the log was synced:\n{text}");
            acks += 1;
        }
    }
    assert_eq!(acks, 3, "{text}");
    let synced_paths: Vec<&str> =
        text.lines().filter(|l| synced(l)).filter_map(|l| l.split_once('<')?.1.split_once('>').map(|p| p.0)).collect();
    // Each new name is durable once the folder holding it is synced: the workspace (for
    // `.PseudoClaude`), `.PseudoClaude` (`sessions`, `.gitignore`), `sessions` (the session's
    // folder), the session's folder (the log, `tool-results`) and `tool-results` (the spill).
    let spills = session.join("tool-results");
    for dir in [&project, &root, &sessions, &session, &spills] {
        assert!(synced_paths.contains(&dir.to_str().unwrap()), "{} never synced: {synced_paths:#?}", dir.display());
    }
    let gitignore = root.join(".gitignore");
    assert!(synced_paths.contains(&gitignore.to_str().unwrap()), "the new .gitignore is synced: {synced_paths:#?}");
    // The spill's data is synced under its temporary name, before the rename that puts it in place.
    let rename = text.lines().position(|l| l.contains(" rename") && l.contains(".txt")).expect("the spill renamed");
    let spill_sync = text.lines().position(|l| synced(l) && on_spills(l, &spills)).expect("the spill synced");
    assert!(spill_sync < rename, "the spill's data synced before its rename:\n{text}");
}

fn on_spills(line: &str, spills: &Path) -> bool {
    line.contains(&format!("<{}/", spills.display())) && line.contains(".txt")
}
