//! The session search (`session::search`) over real files: every hit names the message a load
//! restores (`load(id).messages[index - 1]` holds the text), through replaces, dropped and trimmed
//! exchanges, checkpoints, spills and damaged lines; smart case; the ways JSON writers escape text;
//! order, limits and cancellation.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::session::search::{self, Case, Hit, Options, Query, QueryError};
use pseudoclaude::session::{self, Context, Entry, Writer, WriterOptions};
use serde_json::json;

fn q(text: &str) -> Query {
    Query::new(text, Case::Smart).expect("query")
}

fn find(ws: &Path, text: &str) -> Vec<Hit> {
    search::search_all(ws, &q(text), &Options::default()).expect("search").0
}

/// The text a load restores for a message, all of it: content, calls, the output (a spilled one read
/// back in full).
fn message_text(ctx: &Context, m: &Message) -> String {
    let mut t = m.content.clone();
    for c in &m.tool_calls {
        t.push_str(&format!("\n{} {}", c.name, c.arguments));
    }
    if let Some(r) = &m.tool_result {
        match &r.spill {
            Some(s) => t.push_str(&session::spill::read(ctx, s).expect("spill")),
            None => t.push_str(&r.content),
        }
    }
    t
}

/// Every hit of `text` is a message of `load()` holding it, and every such message is a hit; a log
/// read in small chunks and replayed as it streams (as a log over 64 MiB is) gives the same hits.
fn assert_hits_match_load(ws: &Path, text: &str) -> Vec<Hit> {
    let hits = find(ws, text);
    let chunked = Options { whole_log: 97, ..Default::default() };
    assert_eq!(search::search_all(ws, &q(text), &chunked).expect("search").0, hits, "read in chunks: {text:?}");
    for id in session::list::ids(ws).expect("ids") {
        let ctx = Context::open(ws, &id).expect("ctx");
        let loaded = session::load(&ctx).expect("load");
        let lower = text.to_lowercase();
        let want: Vec<usize> = loaded
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| message_text(&ctx, m).to_lowercase().contains(&lower))
            .map(|(i, _)| i + 1)
            .collect();
        let got: Vec<usize> = hits.iter().filter(|h| h.id == id).map(|h| h.index).collect();
        assert_eq!(got, want, "session {id}, query {text:?}: hits against the loaded history");
        for h in hits.iter().filter(|h| h.id == id) {
            assert_eq!(h.role, loaded.messages[h.index - 1].role.as_str(), "{h:?}");
        }
    }
    hits
}

/// Wherever a log read in chunks is cut, the checkpoints of one answer are searched together: the
/// hits are `hits`.
fn assert_same_hits_wherever_cut(ws: &Path, text: &str, hits: &[Hit]) {
    for chunk in [1, 7, 40, 97, 150, 333, 1000] {
        let opts = Options { whole_log: chunk, ..Default::default() };
        assert_eq!(search::search_all(ws, &q(text), &opts).unwrap().0, hits, "chunks of {chunk} bytes");
    }
}

fn writer(ctx: &Context) -> Writer {
    Writer::open(ctx, WriterOptions { model: "m1".into(), ..Default::default() }).expect("writer")
}

fn call(id: &str, name: &str, args: serde_json::Value) -> Message {
    Message::assistant_tool_calls("", vec![ToolCall::new(id, name, args)])
}

fn write_lines(ctx: &Context, lines: &[String]) {
    fs::write(&ctx.jsonl_path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("write");
}

fn line(e: &Entry) -> String {
    serde_json::to_string(e).expect("json")
}

#[test]
fn hits_name_the_message_a_load_restores_in_every_part_of_it() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("Where is the lexer bug?")).unwrap();
    w.append(&call("c1", "grep", json!({"pattern": "fn lex_number", "path": "src/lexer.rs"}))).unwrap();
    w.append(&Message::tool_result("c1", "src/lexer.rs:40: fn lex_number(&mut self)", false)).unwrap();
    w.append(&Message::assistant("The Lexer drops the sign in lex_number.")).unwrap();
    w.close().unwrap();
    let hits = assert_hits_match_load(ws.path(), "lex_number");
    let got: Vec<_> = hits.iter().map(|h| (h.index, h.role.as_str(), h.kind)).collect();
    assert_eq!(got, [(2, "assistant", "tool_call"), (3, "user", "tool_result"), (4, "assistant", "text")]);
    assert_eq!(hits[0].snippet, "▸ grep pattern: fn lex_number");
    assert_eq!(hits[0].title, "Where is the lexer bug?");
    for h in &hits {
        assert!(!h.ranges.is_empty(), "{h:?}");
        for [s, e] in &h.ranges {
            assert_eq!(h.snippet[*s..*e].to_lowercase(), "lex_number", "{h:?}");
        }
    }
    // The tool's name is text of the call too.
    assert_eq!(find(ws.path(), "grep").iter().map(|h| h.index).collect::<Vec<_>>(), [2]);
}

#[test]
fn a_replace_restarts_the_history_and_its_snapshot_has_the_indexes() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("first: the kestrel question")).unwrap();
    w.append(&Message::assistant("an answer about falcons")).unwrap();
    w.append(&Message::user("third, forgotten by the summary")).unwrap();
    w.replace("compact", &[Message::user("Summary: kestrel"), Message::assistant("noted")]).unwrap();
    w.append(&Message::user("after the summary: kestrel again")).unwrap();
    w.close().unwrap();
    let hits = assert_hits_match_load(ws.path(), "kestrel");
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(hits[0].snippet, "Summary: kestrel");
    // Text only before the replace is not in the history.
    assert!(find(ws.path(), "falcons").is_empty());
    assert!(find(ws.path(), "forgotten").is_empty());
    // The title is the log's first one, as the list says.
    assert_eq!(hits[0].title, "first: the kestrel question");
}

#[test]
fn dropped_and_trimmed_exchanges_are_not_hits_and_do_not_shift_indexes() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let lines = [
        line(&Entry::from_message(Message::user("start osprey"))),
        // a call whose result was lost, then the chat went on: the exchange is dropped
        line(&Entry::from_message(call("c1", "read_file", json!({"path": "osprey.rs"})))),
        line(&Entry::from_message(Message::user("go on osprey"))),
        // an orphan result
        line(&Entry::from_message(Message::tool_result("zz", "orphan osprey", false))),
        line(&Entry::from_message(Message::assistant("osprey answer"))),
        // a dangling call at the end: trimmed
        line(&Entry::from_message(call("c2", "grep", json!({"pattern": "osprey"})))),
    ];
    write_lines(&ctx, &lines);
    let loaded = session::load(&ctx).unwrap();
    assert!(loaded.trimmed && loaded.dropped == 2, "{}", loaded.damage_report());
    let hits = assert_hits_match_load(ws.path(), "osprey");
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [1, 2, 3]);
}

#[test]
fn an_interrupted_answer_is_found_across_its_checkpoints_and_a_superseded_one_is_not_doubled() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("why?")).unwrap();
    w.checkpoint("a1", 0, "Because the heron").unwrap();
    w.checkpoint("a1", 17, " flies").unwrap();
    w.append(&Message::assistant("Because the heron flies.")).unwrap();
    w.append(&Message::user("and then?")).unwrap();
    w.checkpoint("a2", 0, "The egr").unwrap();
    w.checkpoint("a2", 7, "et lands").unwrap();
    drop(w); // the editor died mid-answer
    let hits = assert_hits_match_load(ws.path(), "heron flies");
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [2]);
    // "egret" is in no single line: the interrupted answer's text is searched whole.
    let hits = assert_hits_match_load(ws.path(), "egret");
    assert_eq!(hits.iter().map(|h| (h.index, h.role.as_str())).collect::<Vec<_>>(), [(4, "assistant")]);
    assert_same_hits_wherever_cut(ws.path(), "egret", &hits);
}

/// However a log read in chunks is cut, an answer's checkpoints are held back until the run ends, so
/// a match across its second and third lines is found; a line holding the checkpoint prefix inside it
/// (not written by our writer: a bad line) is passed over.
#[test]
fn a_run_of_checkpoints_is_searched_whole_wherever_a_chunk_ends() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let lines = [
        line(&Entry::from_message(Message::user("which bird?"))),
        r#"noise {"type":"checkpoint","answer":"x","at":0,"content":"plover"}"#.to_string(),
        line(&Entry::checkpoint("a1", 0, "A ", 1)),
        line(&Entry::checkpoint("a1", 2, "small eg", 1)),
        line(&Entry::checkpoint("a1", 10, "ret, white", 1)),
    ];
    write_lines(&ctx, &lines);
    let hits = assert_hits_match_load(ws.path(), "egret");
    assert_eq!(hits.iter().map(|h| (h.index, h.snippet.as_str())).collect::<Vec<_>>(), [(2, "A small egret, white")]);
    assert_same_hits_wherever_cut(ws.path(), "egret", &hits);
    assert!(find(ws.path(), "plover").is_empty(), "a bad line is not in the history");
}

/// A run of checkpoints longer than four chunks is not held back whole (memory is a few chunks, not
/// the answer) but searched in parts: a match across a cut between two of its lines is still found,
/// whatever the chunk size, and the lines the run passes over are not doubled.
#[test]
fn a_run_of_checkpoints_longer_than_four_chunks_is_found_across_any_cut() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let mut lines = vec![line(&Entry::from_message(Message::user("which bird?")))];
    let mut at = 0;
    let mut push = |text: &str| {
        lines.push(line(&Entry::checkpoint("a1", at, text, 1)));
        at += text.len();
    };
    (0..20).for_each(|_| push("the reeds and the mud, "));
    push("then a small eg");
    push("ret, white, ");
    (0..20).for_each(|_| push("walks the shallows again, "));
    write_lines(&ctx, &lines);
    let len = fs::metadata(&ctx.jsonl_path).unwrap().len();
    let hits = assert_hits_match_load(ws.path(), "egret");
    assert_eq!(hits.iter().map(|h| (h.index, h.role.as_str(), h.matches)).collect::<Vec<_>>(), [(2, "assistant", 1)]);
    for chunk in 1..len {
        let opts = Options { whole_log: chunk, ..Default::default() };
        assert_eq!(search::search_all(ws.path(), &q("egret"), &opts).unwrap().0, hits, "chunks of {chunk} bytes");
    }
}

/// The pre-filter: a session is replayed only when its raw bytes may hold the text (a line matches, or
/// an interrupted answer's text spread over its checkpoints does), so every other session costs one
/// read and one scan. Not replayed: a session without the text, an answer superseded by its final
/// message, two answers' texts that hold it only together, a line not written by us holding the
/// checkpoint prefix inside it; and the same whether a log is read whole or in chunks, wherever a
/// chunk ends, while an answer's checkpoints are held back.
#[test]
fn only_a_session_whose_raw_bytes_may_hold_the_text_is_replayed() {
    let ws = tempfile::tempdir().unwrap();
    let plain = Context::new(ws.path()).unwrap();
    let w = writer(&plain);
    w.append(&Message::user("where do herons nest?")).unwrap();
    w.append(&Message::assistant("In colonies, high in the trees.")).unwrap();
    w.close().unwrap();
    let noise = r#"noise {"type":"checkpoint","answer":"x","at":0,"content":"plo\u0076er"}"#;
    fs::OpenOptions::new()
        .append(true)
        .open(&plain.jsonl_path)
        .unwrap()
        .write_all(format!("{noise}\n").as_bytes())
        .unwrap();
    let interrupted = Context::new(ws.path()).unwrap();
    let w = writer(&interrupted);
    // a question longer than many chunks: the run after it starts deep in the chunk that ends it
    w.append(&Message::user(format!("which bird?{}", " Tell me.".repeat(60)))).unwrap();
    for (at, text) in [(0, "A grey "), (7, "heron, stand"), (19, "ing still")] {
        w.checkpoint("a1", at, text).unwrap();
    }
    drop(w); // the editor died mid-answer
    let superseded = Context::new(ws.path()).unwrap();
    let w = writer(&superseded);
    w.append(&Message::user("and the little one?")).unwrap();
    w.checkpoint("a2", 0, "A little egr").unwrap();
    w.checkpoint("a2", 12, "et wades").unwrap();
    w.append(&Message::assistant("A little egret wades.")).unwrap();
    w.close().unwrap();
    // an answer cut off by a retry: two answers' texts in one run, which only together hold "egret"
    let retried = Context::new(ws.path()).unwrap();
    let w = writer(&retried);
    w.append(&Message::user("and the other one?")).unwrap();
    w.checkpoint("a3", 0, "A little egr").unwrap();
    w.checkpoint("a4", 0, "et cetera").unwrap();
    w.append(&Message::assistant("et cetera")).unwrap();
    w.close().unwrap();

    let logs = [&plain, &interrupted, &superseded, &retried].map(|c| fs::read_to_string(&c.jsonl_path).unwrap());
    let longest = logs.iter().map(|l| l.len() as u64).max().unwrap();
    // no log has more bytes of checkpoint lines than this, so no run of them is longer
    let ours = |l: &&str| l.starts_with(r#"{"type":"checkpoint","#);
    let run = logs.iter().map(|l| l.lines().filter(ours).map(|c| c.len() as u64 + 1).sum::<u64>()).max().unwrap();
    // `trees."`: a raw `"` ends a string, it is not text. `plover` is only in the line that is not ours,
    // behind the checkpoint prefix inside it and with its `v` written `\u0076`, as no writer writes a letter.
    let none = [("nowhere", 0, 0), ("trees.\"", 0, 0), ("plover", 0, 0)];
    for (text, replayed, hits) in none.into_iter().chain([("standing", 1, 1), ("egret", 1, 1), ("heron", 2, 2)]) {
        // whole, then in chunks small enough to cut every log and big enough to hold any run back
        for whole_log in [0].into_iter().chain(run / 4 + 1..longest) {
            let opts = Options { whole_log, ..Default::default() };
            let (found, summary) = search::search_all(ws.path(), &q(text), &opts).unwrap();
            let got = (summary.sessions, summary.replayed, summary.matched, found.len());
            assert_eq!(got, (4, replayed, hits, hits), "{text:?}, whole_log {whole_log}");
        }
    }
}

/// A retry that starts a new answer ends the one streaming before it: that one is restored as
/// interrupted even though the retry's final message follows, so its text is searched; the retry's
/// own checkpoints are superseded.
#[test]
fn an_answer_cut_off_by_a_retry_is_found_though_a_final_message_follows() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("where does it land?")).unwrap();
    w.checkpoint("a1", 0, "The egr").unwrap();
    w.checkpoint("a1", 7, "et lands").unwrap();
    w.checkpoint("a2", 0, "On the sho").unwrap();
    w.checkpoint("a2", 10, "re, the egret").unwrap();
    w.append(&Message::assistant("On the shore, the egret.")).unwrap();
    w.close().unwrap();
    let loaded = session::load(&ctx).unwrap();
    assert_eq!(loaded.messages.len(), 3, "{:?}", loaded.messages);
    let hits = assert_hits_match_load(ws.path(), "egret lands");
    assert_eq!(hits.iter().map(|h| (h.index, h.kind)).collect::<Vec<_>>(), [(2, "text")]);
    assert_eq!(hits[0].snippet, "The egret lands");
    // the retry's text is found once, in its final message, not in its checkpoints
    let hits = assert_hits_match_load(ws.path(), "shore");
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [3]);
    let hits = find(ws.path(), "egret lands");
    assert_same_hits_wherever_cut(ws.path(), "egret lands", &hits);
}

/// A long log is searched to its end, read whole or in chunks (the cancel check every 4096 lines
/// does not end it), and a torn last line is no entry and no bad line either way, as for the loader.
#[test]
fn a_long_log_is_searched_to_its_end_and_a_torn_tail_is_not_a_bad_line() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let mut lines: Vec<String> =
        (0..5000).map(|k| line(&Entry::from_message(Message::user(format!("note {k}"))))).collect();
    lines[4500] = line(&Entry::from_message(Message::user("the bittern booms")));
    lines.push("garbage".into());
    write_lines(&ctx, &lines);
    let mut log = fs::OpenOptions::new().append(true).open(&ctx.jsonl_path).unwrap();
    std::io::Write::write_all(&mut log, br#"{"type":"message","role":"user","content":"bittern torn"}"#).unwrap();
    drop(log);
    let loaded = session::load(&ctx).unwrap();
    assert_eq!((loaded.messages.len(), loaded.bad_lines, loaded.torn_tail_bytes > 0), (5000, vec![5001], true));
    let hits = assert_hits_match_load(ws.path(), "bittern");
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [4501]);
    for whole_log in [0, 97, 4096] {
        let mut bad = Vec::new();
        let opts = Options { whole_log, ..Default::default() };
        search::search(ws.path(), &q("bittern"), &opts, &AtomicBool::new(false), |s| bad.push(s.bad_lines)).unwrap();
        assert_eq!(bad, [1], "read whole up to {whole_log} bytes");
    }
}

#[test]
fn a_spilled_result_is_searched_in_full_from_its_file() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = Writer::open(&ctx, WriterOptions { spill_threshold: 1024, ..Default::default() }).unwrap();
    w.append(&Message::user("run the tests")).unwrap();
    w.append(&call("c1", "run_command", json!({"command": "cargo test"}))).unwrap();
    let output = format!("{}\nthread 'main' panicked: albatross overflow\n", "ok line\n".repeat(2000));
    w.append(&Message::tool_result("c1", &output, false)).unwrap();
    w.append(&Message::assistant("A test panicked.")).unwrap();
    w.close().unwrap();
    let loaded = session::load(&ctx).unwrap();
    assert!(loaded.messages[2].tool_result.as_ref().unwrap().spill.is_some(), "the result is spilled");
    assert!(!fs::read_to_string(&ctx.jsonl_path).unwrap().contains("albatross"), "only in the spill file");
    let hits = assert_hits_match_load(ws.path(), "albatross overflow");
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].index, hits[0].kind), (3, "tool_result"));
    assert!(hits[0].snippet.contains("panicked: albatross overflow"), "{:?}", hits[0].snippet);
    // The truncation note of the preview is the log's, not the tool's output.
    assert!(find(ws.path(), "output truncated").is_empty());
    // An altered spill file is not what a load shows: its preview is searched instead.
    let spill = fs::read_dir(&ctx.spill_dir).unwrap().next().unwrap().unwrap().path();
    fs::write(&spill, "something else albatross").unwrap();
    assert!(find(ws.path(), "albatross").is_empty());
    assert_eq!(find(ws.path(), "ok line").iter().map(|h| h.index).collect::<Vec<_>>(), [3]);
}

#[test]
fn smart_case_and_explicit_case() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("the PARSER is slow")).unwrap();
    w.append(&Message::assistant("the parser, in parser.rs")).unwrap();
    w.close().unwrap();
    let idx = |hits: Vec<Hit>| hits.iter().map(|h| h.index).collect::<Vec<_>>();
    assert_eq!(idx(find(ws.path(), "parser")), [1, 2]);
    assert_eq!(idx(find(ws.path(), "PARSER")), [1]);
    assert_eq!(idx(find(ws.path(), "Parser")), Vec::<usize>::new());
    let insensitive = Query::new("Parser", Case::Insensitive).unwrap();
    assert_eq!(idx(search::search_all(ws.path(), &insensitive, &Options::default()).unwrap().0), [1, 2]);
    let sensitive = Query::new("parser", Case::Sensitive).unwrap();
    let hits = search::search_all(ws.path(), &sensitive, &Options::default()).unwrap().0;
    assert_eq!((idx(hits.clone()), hits[0].matches), (vec![2], 2));
    // Unicode case folding: É matches é, and k the Kelvin sign.
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("CAFÉ au lait, 300 \u{212a}")).unwrap();
    w.close().unwrap();
    assert_eq!(idx(find(ws.path(), "café")), [1]);
    assert_eq!(idx(find(ws.path(), "300 k")), [1]);
}

#[test]
fn text_is_matched_decoded_whatever_escapes_the_writer_used() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    // As Python's json.dumps (ensure_ascii), Go (HTML-safe) and JavaScript write them.
    let lines = [
        r#"{"type":"message","role":"user","content":"say \"hi\" to C:\\temp\\x and caf\u00e9 \ud83d\ude00","ts":1}"#,
        r#"{"type":"message","role":"assistant","content":"a \u003cb\u003e tag \u0026 more, path a\/b\/c\ttab","ts":2}"#,
        r#"{"type":"message","role":"user","content":"line one\nline two","ts":3}"#,
    ];
    write_lines(&ctx, &lines.map(String::from));
    let idx = |text: &str| find(ws.path(), text).iter().map(|h| h.index).collect::<Vec<_>>();
    assert_eq!(idx(r#"say "hi""#), [1]);
    assert_eq!(idx(r"C:\temp\x"), [1]);
    assert_eq!(idx("café"), [1]);
    assert_eq!(idx("CAFÉ"), Vec::<usize>::new(), "smart case: an upper-case query is exact");
    assert_eq!(idx("😀"), [1]);
    assert_eq!(idx("<b> tag & more"), [2]);
    assert_eq!(idx("a/b/c\ttab"), [2]);
    assert_eq!(idx("one\nline"), [3]);
    // What is only in the JSON around the text is not a hit.
    assert!(find(ws.path(), "\"role\"").is_empty());
    assert!(find(ws.path(), "content").is_empty());
    assert!(find(ws.path(), "\\\"hi").is_empty(), "the escape itself is not the text");
    let hit = &find(ws.path(), "hi")[0];
    assert_eq!(hit.snippet, r#"say "hi" to C:\temp\x and café 😀"#);
    assert_eq!(hit.ranges, [[5, 7]]);
}

#[test]
fn a_damaged_log_is_searched_in_what_it_restores() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let mut log = Vec::new();
    log.extend_from_slice(b"garbage with plover in it\n");
    log.extend_from_slice(line(&Entry::from_message(Message::user("plover one"))).as_bytes());
    log.extend_from_slice(b"\n{\"role\":\"user\",\"content\":\"plover broken\n");
    log.extend_from_slice(b"{\"role\":\"assistant\",\"content\":\"caf\xe9 plover\"}\n");
    log.extend_from_slice(line(&Entry::from_message(Message::assistant("plover three"))).as_bytes());
    log.extend_from_slice(b"\n{\"role\":\"user\",\"content\":\"torn plover");
    fs::write(&ctx.jsonl_path, &log).unwrap();
    let loaded = session::load(&ctx).unwrap();
    assert_eq!((loaded.bad_lines.len(), loaded.repaired.len(), loaded.messages.len()), (2, 1, 3));
    let hits = assert_hits_match_load(ws.path(), "plover");
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(hits[1].snippet, "caf\u{FFFD} plover");
}

#[test]
fn newest_sessions_come_first_and_limits_hold() {
    let ws = tempfile::tempdir().unwrap();
    let mut ids = Vec::new();
    for n in 0..6 {
        let ctx = Context::for_id(ws.path(), &format!("20260101-00000{n}-abcd")).unwrap();
        fs::create_dir_all(&ctx.dir).unwrap();
        let lines: Vec<String> =
            (0..3).map(|k| line(&Entry::from_message(Message::user(format!("wren {n}.{k}"))))).collect();
        write_lines(&ctx, &lines);
        // session 3 is the newest, then 5, 4, 2, 1, 0
        let age = if n == 3 { 0 } else { 100 - n as u64 };
        fs::File::options()
            .write(true)
            .open(&ctx.jsonl_path)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(age * 60))
            .unwrap();
        ids.push(ctx.id);
    }
    let hits = find(ws.path(), "wren");
    let order: Vec<&str> = hits.iter().map(|h| &h.id[14..15]).collect();
    assert_eq!(order.join(""), "333555444222111000");
    let (hits, summary) = search::search_all(
        ws.path(),
        &q("wren"),
        &Options { per_session: Some(2), limit: Some(5), ..Default::default() },
    )
    .unwrap();
    assert_eq!(
        hits.iter().map(|h| format!("{}.{}", &h.id[14..15], h.index)).collect::<Vec<_>>(),
        ["3.1", "3.2", "5.1", "5.2", "4.1"]
    );
    assert!(summary.truncated);
    // Each session's hits beyond the cap are counted in `more`; a limit reached exactly by a session
    // stops the search there (the sessions after it are not searched) and says so.
    let mut batches = Vec::new();
    let opts = Options { per_session: Some(2), limit: Some(6), threads: 1, ..Default::default() };
    let summary = search::search(ws.path(), &q("wren"), &opts, &AtomicBool::new(false), |s| {
        batches.push((s.id[14..15].to_string(), s.hits.len(), s.more))
    })
    .unwrap();
    let want: Vec<(String, usize, usize)> = ["3", "5", "4"].iter().map(|n| (n.to_string(), 2, 1)).collect();
    assert_eq!(batches, want);
    assert_eq!((summary.sessions, summary.matched, summary.hits, summary.truncated), (3, 3, 6, true));
    let opts = Options { per_session: Some(3), ..Default::default() };
    let (hits, summary) = search::search_all(ws.path(), &q("wren"), &opts).unwrap();
    assert_eq!((hits.len(), summary.sessions, summary.truncated), (18, 6, false), "a cap of exactly 3 leaves none out");
    // The current session left out.
    let current = ids[3].clone();
    let opts = Options { exclude: Some(current.clone()), ..Default::default() };
    let (hits, _) = search::search_all(ws.path(), &q("wren"), &opts).unwrap();
    assert!(hits.iter().all(|h| h.id != current) && hits.len() == 15);
}

#[test]
fn a_search_stops_when_cancelled() {
    let ws = tempfile::tempdir().unwrap();
    for _ in 0..40 {
        let ctx = Context::new(ws.path()).unwrap();
        let w = writer(&ctx);
        w.append(&Message::user("grebe")).unwrap();
        w.close().unwrap();
    }
    let cancel = AtomicBool::new(true);
    let mut seen = 0;
    let summary = search::search(ws.path(), &q("grebe"), &Options::default(), &cancel, |_| seen += 1).unwrap();
    assert!(summary.cancelled && seen == 0 && summary.sessions == 0, "{summary:?}");
    // Cancelled by the first batch it delivers: the others are never delivered.
    let cancel = AtomicBool::new(false);
    let mut seen = 0;
    let summary =
        search::search(ws.path(), &q("grebe"), &Options { threads: 1, ..Default::default() }, &cancel, |_| {
            seen += 1;
            cancel.store(true, Ordering::Relaxed);
        })
        .unwrap();
    assert!(summary.cancelled, "{summary:?}");
    assert_eq!(seen, 1);
    let (hits, summary) = search::search_all(ws.path(), &q("grebe"), &Options::default()).unwrap();
    assert_eq!((hits.len(), summary.sessions, summary.matched, summary.cancelled), (40, 40, 40, false));
}

#[test]
fn bad_input_gets_clear_answers() {
    assert_eq!(Query::new("", Case::Smart).unwrap_err(), QueryError::Empty);
    let long = "x".repeat(search::MAX_QUERY_CHARS + 1);
    assert!(Query::new(&long, Case::Smart).unwrap_err().to_string().contains("at most 1000"));
    // No sessions folder: nothing to find, no error.
    let ws = tempfile::tempdir().unwrap();
    let (hits, summary) = search::search_all(ws.path(), &q("x"), &Options::default()).unwrap();
    assert!(hits.is_empty() && summary == search::Summary::default());
    // A linked session folder is skipped, named, and nothing outside is read.
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("conversation.jsonl"), "{\"role\":\"user\",\"content\":\"secret\"}\n").unwrap();
    let ctx = Context::for_id(ws.path(), "20260101-000000-abcd").unwrap();
    fs::create_dir_all(ctx.dir.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(outside.path(), &ctx.dir).unwrap();
    let real = Context::new(ws.path()).unwrap();
    let w = writer(&real);
    w.append(&Message::user("secret too")).unwrap();
    w.close().unwrap();
    let (hits, summary) = search::search_all(ws.path(), &q("secret"), &Options::default()).unwrap();
    assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), [real.id.as_str()]);
    assert!(summary.skipped.is_empty(), "a link is not a session folder: {summary:?}");
    // A session folder that cannot be read is skipped with the reason.
    let locked = Context::new(ws.path()).unwrap();
    fs::write(&locked.jsonl_path, "{\"role\":\"user\",\"content\":\"secret\"}\n").unwrap();
    let mode = |p: &Path, m: u32| fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
    mode(&locked.jsonl_path, 0o000);
    let readable = fs::read(&locked.jsonl_path).is_ok(); // root reads anyway
    let (_, summary) = search::search_all(ws.path(), &q("secret"), &Options::default()).unwrap();
    mode(&locked.jsonl_path, 0o600);
    if !readable {
        assert!(summary.skipped.len() == 1 && summary.skipped[0].starts_with(&locked.id), "{summary:?}");
    }
    fs::remove_dir_all(&locked.dir).unwrap();
    // A log that is a link (root or not) is refused, and its session skipped with the reason; a session
    // folder without a log yet is no error and has no hits.
    let linked = Context::new(ws.path()).unwrap();
    std::os::unix::fs::symlink(outside.path().join("conversation.jsonl"), &linked.jsonl_path).unwrap();
    let empty = Context::new(ws.path()).unwrap();
    fs::create_dir_all(&empty.dir).unwrap();
    let (hits, summary) = search::search_all(ws.path(), &q("secret"), &Options::default()).unwrap();
    assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), [real.id.as_str()]);
    assert_eq!(summary.sessions, 3, "{summary:?}");
    assert!(summary.skipped.len() == 1 && summary.skipped[0].starts_with(&linked.id), "{summary:?}");
    assert!(summary.skipped[0].contains("link"), "{summary:?}");
}

/// Random logs of every kind of entry and damage, each message holding tokens of its own (and
/// snapshots repeating earlier ones): for every token, the hits are exactly the loaded messages
/// that hold it.
#[test]
fn random_logs_every_hit_is_a_loaded_message_and_every_loaded_message_is_found() {
    let ws = tempfile::tempdir().unwrap();
    let mut rng_state = 0x9e3779b97f4a7c15u64;
    let mut rnd = |n: u64| {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state % n
    };
    let mut tokens = Vec::new();
    for s in 0..12 {
        let ctx = Context::new(ws.path()).unwrap();
        let mut lines = Vec::new();
        let mut history: Vec<Message> = Vec::new();
        let mut open_calls: Vec<String> = Vec::new();
        for k in 0..60 {
            let tok = format!("tok{s}q{k}z");
            tokens.push(tok.clone());
            let m = match rnd(10) {
                0 => Message::user(format!("user {tok}")),
                1 | 2 => Message::assistant(format!("answer {tok} \"quoted\" é")),
                3 => {
                    let ids: Vec<String> = (0..1 + rnd(2)).map(|i| format!("c{k}_{i}")).collect();
                    open_calls = ids.clone();
                    Message::assistant_tool_calls(
                        "",
                        ids.iter().map(|id| ToolCall::new(id, "grep", json!({"pattern": tok}))).collect(),
                    )
                }
                4 | 5 if !open_calls.is_empty() => {
                    let id = open_calls.remove(rnd(open_calls.len() as u64) as usize);
                    Message::tool_result(id, format!("out\n{tok}\n"), false)
                }
                6 => {
                    // a compaction keeping part of what came before, plus a new summary
                    let keep = rnd(history.len() as u64 + 1) as usize;
                    let mut snap: Vec<Message> = history[history.len() - keep..].to_vec();
                    snap.insert(0, Message::user(format!("summary {tok}")));
                    lines.push(line(&Entry::replace("compact", snap.clone(), 1)));
                    history = snap;
                    open_calls.clear();
                    continue;
                }
                7 => {
                    lines.push(line(&Entry::checkpoint(&format!("a{k}"), 0, &format!("stream {tok}"), 1)));
                    continue;
                }
                8 => {
                    lines.push(format!("garbage {tok}"));
                    continue;
                }
                _ => Message::tool_result("nobody", format!("orphan {tok}"), false),
            };
            history.push(m.clone());
            lines.push(line(&Entry::from_message(m)));
        }
        write_lines(&ctx, &lines);
    }
    let mut found = 0;
    for tok in &tokens {
        found += assert_hits_match_load(ws.path(), tok).len();
    }
    assert!(found > 100, "the logs hold hits: {found}");
}

/// A hit counts every match in its message: in the text and in every call's arguments, and in the
/// whole of a spill file; the snippet is the first field's.
#[test]
fn a_hit_counts_every_match_in_its_message() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = Writer::open(&ctx, WriterOptions { spill_threshold: 1024, ..Default::default() }).unwrap();
    w.append(&Message::user("find the kestrel")).unwrap();
    let calls = vec![
        ToolCall::new("c1", "grep", json!({"pattern": "kestrel", "path": "birds/kestrel.md"})),
        ToolCall::new("c2", "read_file", json!({"path": "kestrel.txt"})),
    ];
    w.append(&Message::assistant_tool_calls("Looking for kestrel, the Kestrel:", calls)).unwrap();
    let output = format!("kestrel one\n{}kestrel two\nkestrel three\n", "filler line\n".repeat(200));
    w.append(&Message::tool_result("c1", &output, false)).unwrap();
    w.append(&Message::tool_result("c2", "no such file", true)).unwrap();
    w.close().unwrap();
    let hits = assert_hits_match_load(ws.path(), "kestrel");
    let got: Vec<_> = hits.iter().map(|h| (h.index, h.kind, h.matches)).collect();
    // 2 in the text, 2 in c1's arguments, 1 in c2's; the spilled output holds 3
    assert_eq!(got, [(1, "text", 1), (2, "text", 5), (3, "tool_result", 3)]);
    assert_eq!(hits[1].snippet, "Looking for kestrel, the Kestrel:");
    assert_eq!(hits[1].ranges, [[12, 19], [25, 32]]);
    assert!(session::load(&ctx).unwrap().messages[2].tool_result.as_ref().unwrap().spill.is_some(), "spilled");
}

/// A query that matches the end of a line (every log line ends with `}`) names each line once:
/// the scan goes on after the line's newline, not at the brace before it.
#[test]
fn a_match_at_the_end_of_a_line_counts_that_line_once() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = Context::new(ws.path()).unwrap();
    let w = writer(&ctx);
    w.append(&Message::user("fn main() { }")).unwrap();
    w.append(&Message::assistant("Close it with }")).unwrap();
    w.close().unwrap();
    let hits = assert_hits_match_load(ws.path(), "}");
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [1, 2]);
}
