//! Unit tests of the fold ([`super::Replay`]): pairing, checkpoints, titles, repairs.

use super::*;
use crate::message::ToolCall;
use serde_json::json;

fn call(ids: &[&str]) -> Message {
    Message::assistant_tool_calls("", ids.iter().map(|i| ToolCall::new(*i, "grep", json!({}))).collect())
}

fn run(msgs: Vec<Message>) -> Finished {
    let mut r = Replay::keeping();
    for m in msgs {
        r.feed_entry(Entry::from_message(m));
    }
    r.finish()
}

#[test]
fn parallel_calls_with_one_result_missing_are_trimmed_at_the_tail() {
    let f = run(vec![Message::user("hi"), call(&["a", "b"]), Message::tool_result("a", "x", false)]);
    assert!(f.trimmed);
    assert_eq!(f.messages.len(), 1);
    assert_eq!(f.state.messages, 1);
}

#[test]
fn incomplete_exchange_in_the_middle_is_dropped_not_spliced() {
    let f = run(vec![
        Message::user("hi"),
        call(&["a", "b"]),
        Message::tool_result("b", "x", false),
        Message::user("again"),
        Message::assistant("ok"),
    ]);
    assert!(!f.trimmed);
    let texts: Vec<_> = f.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["hi", "again", "ok"]);
    assert_eq!(f.state.dropped, 2);
}

#[test]
fn orphan_and_duplicate_results_are_dropped() {
    let f = run(vec![
        Message::tool_result("zz", "orphan", false),
        call(&["a"]),
        Message::tool_result("a", "x", false),
        Message::tool_result("a", "dup", false),
    ]);
    assert_eq!(f.messages.len(), 2);
    assert_eq!(f.state.dropped, 2);
}

fn ckpt(answer: &str, at: usize, text: &str) -> Entry {
    Entry::checkpoint(answer, at, text, 5)
}

fn run_entries(entries: Vec<Entry>) -> Finished {
    let mut r = Replay::keeping();
    for e in entries {
        r.feed_entry(e);
    }
    r.finish()
}

/// The list's counting fold, fed the same entries through a `State` saved and restored after
/// each one (as `summary.json` does), must count what the loader keeps.
fn counted(entries: &[Entry]) -> State {
    let mut state = State::default();
    for e in entries {
        let mut r = Replay::resume_counting(state);
        r.feed_entry(e.clone());
        state = serde_json::from_str(&serde_json::to_string(&r.state).unwrap()).unwrap();
    }
    Replay::resume_counting(state).finish().state
}

#[test]
fn checkpoints_then_the_final_message_replay_as_if_there_were_none() {
    let (user, answer) = (Message::user("hi"), Message::assistant("Hello world."));
    let plain = run(vec![user.clone(), answer.clone()]);
    let entries =
        vec![Entry::from_message(user), ckpt("a1", 0, "Hel"), ckpt("a1", 3, "lo wor"), Entry::from_message(answer)];
    let with = run_entries(entries.clone());
    assert_eq!(with.messages, plain.messages);
    assert_eq!((with.state.messages, with.state.interrupted, with.state.dropped), (2, 0, 0));
    assert_eq!(counted(&entries).messages, 2);
}

#[test]
fn checkpoints_without_a_final_message_become_one_interrupted_answer() {
    let entries = vec![Entry::from_message(Message::user("hi")), ckpt("a1", 0, "Hel"), ckpt("a1", 3, "lo wor")];
    let f = run_entries(entries.clone());
    assert_eq!(f.messages.len(), 2);
    let m = &f.messages[1];
    assert_eq!((m.role.as_str(), m.content.as_str(), m.interrupted, m.ts), ("assistant", "Hello wor", true, 5));
    assert!(m.tool_calls.is_empty());
    assert_eq!((f.state.messages, f.state.interrupted), (2, 1));
    let c = counted(&entries);
    assert_eq!((c.messages, c.interrupted), (2, 1));
}

#[test]
fn an_interrupted_answer_stays_in_place_when_the_log_goes_on_after_a_resume() {
    let entries = vec![
        Entry::from_message(Message::user("hi")),
        ckpt("a1", 0, "Partial"),
        Entry::from_message(Message::user("again")),
        ckpt("a2", 0, "Fine"),
        Entry::from_message(Message::assistant("Fine.")),
    ];
    let f = run_entries(entries.clone());
    let got: Vec<_> = f.messages.iter().map(|m| (m.content.as_str(), m.interrupted)).collect();
    assert_eq!(got, [("hi", false), ("Partial", true), ("again", false), ("Fine.", false)]);
    assert_eq!(counted(&entries).messages, 4);
}

#[test]
fn checkpoints_around_tool_calls_keep_the_pairing() {
    let calls = Message::assistant_tool_calls("Let me look.", vec![ToolCall::new("c1", "grep", json!({}))]);
    let entries = vec![
        Entry::from_message(Message::user("hi")),
        ckpt("a1", 0, "Let me look."), // the boundary: the call starts streaming
        Entry::from_message(calls.clone()),
        Entry::from_message(Message::tool_result("c1", "found", false)),
        ckpt("a2", 0, "It is in "),
        ckpt("a2", 9, "a.rs"),
    ];
    let f = run_entries(entries.clone());
    let got: Vec<_> = f.messages.iter().map(|m| (m.content.as_str(), m.tool_calls.len(), m.interrupted)).collect();
    assert_eq!(got, [("hi", 0, false), ("Let me look.", 1, false), ("", 0, false), ("It is in a.rs", 0, true)]);
    assert!(!f.trimmed);
    assert_eq!(counted(&entries).messages, 4);

    // Killed while the call itself streamed: the text before it survives, the call does not.
    let f = run_entries(entries[..2].to_vec());
    let got: Vec<_> = f.messages.iter().map(|m| (m.content.as_str(), m.tool_calls.len(), m.interrupted)).collect();
    assert_eq!(got, [("hi", 0, false), ("Let me look.", 0, true)]);
}

#[test]
fn a_gap_in_the_checkpoints_keeps_the_text_before_it() {
    let entries = vec![
        Entry::from_message(Message::user("hi")),
        ckpt("a1", 0, "one "),
        ckpt("a1", 9, "three "), // "two " was on a line that is gone
        ckpt("a1", 15, "four"),
    ];
    let f = run_entries(entries.clone());
    assert_eq!(f.messages[1].content, "one ");
    assert_eq!(counted(&entries).messages, 2);
    // A log whose only checkpoint is out of place restores nothing for that answer.
    let f = run_entries(vec![Entry::from_message(Message::user("hi")), ckpt("a1", 4, "x")]);
    assert_eq!((f.messages.len(), f.state.interrupted), (1, 0));
}

#[test]
fn a_replace_supersedes_checkpoints_and_keeps_an_interrupted_mark() {
    let mut kept = Message::assistant("Partial");
    kept.interrupted = true;
    let entries = vec![
        Entry::from_message(Message::user("hi")),
        ckpt("a1", 0, "Partial"),
        Entry::replace("compact", vec![Message::user("hi"), kept.clone()], 9),
    ];
    let f = run_entries(entries.clone());
    assert_eq!(f.messages, [Message { ts: f.messages[0].ts, ..Message::user("hi") }, kept]);
    assert_eq!((f.state.messages, f.state.interrupted), (2, 0));
    assert_eq!(counted(&entries).messages, 2);
}

#[test]
fn a_line_with_invalid_utf8_is_repaired_not_dropped() {
    let mut r = Replay::keeping();
    let mut line = br#"{"type":"message","role":"user","content":"caf"#.to_vec();
    line.extend_from_slice(b"\xe9 au lait\",\"model\":\"m1\"}");
    r.feed_line(&line, 1);
    r.feed_line(br#"{"type":"message","role":"assistant","content":"ok"}"#, 2);
    r.feed_line(b"not json \xe9", 3);
    let f = r.finish();
    assert_eq!(f.messages.len(), 2);
    assert_eq!(f.messages[0].content, "caf\u{FFFD} au lait");
    assert_eq!((f.state.title.as_str(), f.state.model.as_str()), ("caf\u{FFFD} au lait", "m1"));
    assert_eq!((f.repaired_line_numbers, f.bad_line_numbers), (vec![1], vec![3]));
    assert_eq!((f.state.repaired, f.state.bad_lines), (1, 1));
}

#[test]
fn git_and_usage_survive_replaces_and_leave_the_history_alone() {
    use crate::usage::Usage;
    let git = |b: &str| GitHead { branch: b.into(), commit: "abc1234".into() };
    let u = Usage { input_tokens: 10, output_tokens: 2, cache_read_tokens: 5, cache_write_tokens: 1 };
    let entries = vec![
        Entry::from_message(Message::user("hi")),
        Entry::meta_git(git("main"), 1),
        ckpt("a1", 0, "Hel"),
        Entry::usage("m1", u, 2),
        Entry::from_message(Message::assistant("Hello")),
        Entry::replace("compact", vec![Message::user("summary"), Message::assistant("ok")], 3),
        Entry::meta_git(git("topic"), 4),
        Entry::usage("m1", u, 5),
        Entry::usage("m2", u, 6),
    ];
    let f = run_entries(entries.clone());
    assert_eq!((f.messages.len(), f.state.interrupted), (2, 0), "the checkpoints were superseded as usual");
    for s in [f.state, counted(&entries)] {
        assert_eq!((s.git_start, s.git), (Some(git("main")), Some(git("topic"))));
        assert_eq!(s.usage.0["m1"].input_tokens, 20);
        assert_eq!(s.usage.total().prompt_tokens(), 48);
        assert_eq!(s.messages, 2);
    }
}

#[test]
fn titles_and_pins_are_not_messages_and_the_last_one_wins() {
    let calls = Message::assistant_tool_calls("", vec![ToolCall::new("c1", "grep", json!({}))]);
    let entries = vec![
        Entry::from_message(Message::user("fix the parser")),
        Entry::title("Parser  work\n", 2),
        ckpt("a1", 0, "Let me"),
        Entry::pin(true, 3),
        Entry::from_message(calls),
        Entry::title("Lexer", 4), // between a call and its result: the exchange stays whole
        Entry::from_message(Message::tool_result("c1", "found", false)),
        ckpt("a2", 0, "Done"),
        Entry::from_message(Message::assistant("Done.")),
    ];
    let f = run_entries(entries.clone());
    assert_eq!(f.messages.len(), 4);
    assert_eq!((f.state.dropped, f.state.interrupted), (0, 0));
    assert_eq!((f.state.title.as_str(), f.state.name.as_str(), f.state.pinned), ("fix the parser", "Lexer", true));
    assert_eq!(f.state.shown_title(), "Lexer");
    let c = counted(&entries);
    assert_eq!((c.messages, c.name.as_str(), c.pinned), (4, "Lexer", true));
    let mut more = entries;
    more.push(Entry::title("", 5));
    more.push(Entry::pin(false, 6));
    more.push(Entry::replace("compact", vec![Message::user("summary")], 7));
    let f = run_entries(more);
    assert_eq!((f.state.shown_title(), f.state.pinned, f.messages.len()), ("fix the parser", false, 1));
}

#[test]
fn titles_take_the_first_typed_user_line() {
    assert_eq!(title_of("\n  fix the parser  \nplease"), "fix the parser");
    assert_eq!(title_of(&"é".repeat(200)).chars().count(), TITLE_MAX_CHARS);
}

#[test]
fn a_held_back_exchange_is_saved_for_the_list_in_the_same_fields_as_ever() {
    let mut r = Replay::resume_counting(State::default());
    r.feed_entry(Entry::from_message(call(&["a", "b"])));
    r.feed_entry(Entry::from_message(Message::tool_result("a", "x", false)));
    let saved = serde_json::to_string(&r.state).unwrap();
    assert!(saved.contains(r#""pending":{"ids":["a","b"],"answered":[true,false],"len":2}"#), "{saved}");
    let back: State = serde_json::from_str(&saved).unwrap();
    assert_eq!(back, r.state);
}

#[test]
fn the_model_is_the_first_one_the_log_names_as_the_seed_lists_it() {
    let named = |model: &str, m: Message| Entry { model: model.into(), ..Entry::from_message(m) };
    let f = run_entries(vec![
        Entry::from_message(Message::user("no model on the first line")),
        named("first-model", Message::assistant("a")),
        named("", Message::user("b")),
        named("later-model", Message::assistant("c")),
    ]);
    assert_eq!(f.state.model, "first-model");
    assert_eq!(f.state.last_model, "later-model", "what the list shows");
}
