//! Importing other agents' sessions (issue 11): Claude Code transcripts and Codex rollouts written here from
//! their formats, imported through the core's API and the CLI, then resumed and continued against the fake
//! Anthropic and OpenAI servers, which refuse any request that breaks their protocol.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::support::client::agent_turn as turn;
use crate::support::{FakeServer, Kind, Reply, anthropic_sse, openai_sse};
use pseudoclaude::agent::{Agent, AgentConfig, Event};
use pseudoclaude::import::{self, Homes};
use pseudoclaude::message::Message;
use pseudoclaude::provider::{self, BoxFuture, ProviderConfig};
use pseudoclaude::session::{self, Context};
use pseudoclaude::tools::{Approval, ApprovalRequest, Approver};
use serde_json::{Value, json};

struct Never;
impl Approver for Never {
    fn ask(&self, _: ApprovalRequest) -> BoxFuture<'static, Approval> {
        Box::pin(async { Approval::No })
    }
}

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A Claude Code record of `kind` in session `s1`, recorded in `cwd`.
fn cc(kind: &str, uuid: &str, parent: Option<&str>, cwd: &Path, message: Value) -> Value {
    json!({
        "type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", "cwd": cwd,
        "gitBranch": "main", "version": "2.0.0", "isSidechain": false,
        "timestamp": "2026-11-30T10:00:00.000Z", "message": message,
    })
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn assistant(id: &str, blocks: Value) -> Value {
    json!({"id": id, "role": "assistant", "model": "claude-sonnet-4-5", "content": blocks})
}

fn result(id: &str, text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]})
}

/// A transcript with every hard case of the format: a rewound branch, one response over several lines with two
/// parallel calls, progress records hanging off a call, a sidechain, an injected reminder, thinking, an image, a
/// compaction, unknown record and block types, and a last line cut short.
fn claude_transcript(ws: &Path) -> String {
    let mut l = vec![
        json!({"type": "file-history-snapshot", "messageId": "x"}),
        cc("user", "u1", None, ws, user("fix the parser")),
        cc(
            "assistant",
            "a1",
            Some("u1"),
            ws,
            assistant("m1", json!([{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Looking."}])),
        ),
        cc(
            "assistant",
            "a2",
            Some("a1"),
            ws,
            assistant("m1", json!([{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "p.rs"}}])),
        ),
        cc(
            "assistant",
            "a3",
            Some("a2"),
            ws,
            assistant("m1", json!([{"type": "tool_use", "id": "t2", "name": "grep", "input": {"pattern": "fn"}}])),
        ),
        json!({"type": "progress", "uuid": "p1", "parentUuid": "a2", "sessionId": "s1"}),
        cc("user", "r1", Some("a2"), ws, result("t1", "fn parse() {}")),
        cc("user", "r2", Some("a3"), ws, result("t2", "p.rs:1:fn parse")),
        cc("assistant", "a4", Some("r2"), ws, assistant("m2", json!([{"type": "text", "text": "Wrong idea."}]))),
    ];
    // The user rewinds to a4's parent and asks something else: a4 is abandoned.
    l.push(cc("user", "u2", Some("r2"), ws, user("no, rename it instead")));
    l.push(cc(
        "assistant",
        "a5",
        Some("u2"),
        ws,
        assistant("m3", json!([{"type": "text", "text": "Renamed."}, {"type": "mystery_block"}])),
    ));
    let mut side =
        cc("assistant", "sc1", Some("a5"), ws, assistant("m9", json!([{"type": "text", "text": "subagent chatter"}])));
    side["isSidechain"] = json!(true);
    l.push(side);
    let mut meta = cc("user", "u3m", Some("a5"), ws, user("<local-command-stdout>ok</local-command-stdout>"));
    meta["isMeta"] = json!(true);
    l.push(meta);
    l.push(json!({"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": null, "logicalParentUuid": "a5", "sessionId": "s1"}));
    let mut summary =
        cc("user", "s1u", Some("cb"), ws, user("This session is being continued: the parser was renamed."));
    summary["isCompactSummary"] = json!(true);
    l.push(summary);
    l.push(cc(
        "user",
        "u4",
        Some("s1u"),
        ws,
        json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>be nice</system-reminder>and now the docs"},
        {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]}),
    ));
    l.push(cc(
        "assistant",
        "a6",
        Some("u4"),
        ws,
        assistant(
            "m4",
            json!([{"type": "tool_use", "id": "t3", "name": "run_command", "input": {"command": "make doc"}}]),
        ),
    ));
    l.push(json!({"type": "brand-new-record", "uuid": "z"}));
    l.push(json!({"type": "custom-title", "customTitle": "Parser rename", "sessionId": "s1"}));
    let mut text = jsonl(&l);
    text.push_str(r#"{"type":"user","uuid":"cut","parentUuid":"a6","mess"#);
    text
}

fn write(path: &Path, text: &str) -> PathBuf {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn claude_home(home: &Path, ws: &Path) -> PathBuf {
    let folder = import::claude_code::folder_name(&ws.canonicalize().unwrap());
    home.join("projects").join(folder).join("s1.jsonl")
}

/// Every call answered exactly once, right after it; no orphan result.
fn assert_valid(h: &[Message]) {
    let mut i = 0;
    while i < h.len() {
        assert!(h[i].tool_result.is_none(), "orphan result at {i}: {h:#?}");
        let ids: Vec<&str> = h[i].tool_calls.iter().map(|c| c.id.as_str()).collect();
        for (k, id) in ids.iter().enumerate() {
            let r = h.get(i + 1 + k).and_then(|m| m.tool_result.as_ref());
            assert_eq!(r.map(|r| r.tool_call_id.as_str()), Some(*id), "call {id} not answered right after it: {h:#?}");
        }
        i += 1 + ids.len();
    }
}

#[test]
fn a_claude_code_transcript_imports_its_main_thread_and_restores_from_the_compaction() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = write(&claude_home(home.path(), ws.path()), &claude_transcript(&ws.path().canonicalize().unwrap()));
    let (source, c) = import::read_any(&path).unwrap();
    assert_eq!(source.as_str(), "claude-code");
    assert_eq!(c.segments.len(), 2, "{:#?}", c.segments);
    let before: Vec<String> = c.segments[0].iter().map(|m| format!("{}:{}", m.role, m.content)).collect();
    // one assistant message for response m1 with both calls, each followed by its result; a4 abandoned
    assert_eq!(
        before,
        [
            "user:fix the parser",
            "assistant:Looking.",
            "user:",
            "user:",
            "user:no, rename it instead",
            "assistant:Renamed."
        ]
    );
    let calls: Vec<&str> = c.segments[0][1].tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(calls, ["t1", "t2"]);
    assert_eq!(c.segments[0][2].tool_result.as_ref().unwrap().content, "fn parse() {}");
    assert!(c.notes.iter().any(|n| n.contains("cut short")), "{:?}", c.notes);
    assert!(c.notes.iter().any(|n| n.contains("brand-new-record")), "{:?}", c.notes);
    assert!(c.notes.iter().any(|n| n.contains("mystery_block")), "{:?}", c.notes);

    let before_bytes = fs::read(&path).unwrap();
    let before_mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let done = import::import(ws.path(), &path).unwrap();
    assert!(!done.existing);
    let loaded = session::load(&Context::open(ws.path(), &done.id).unwrap()).unwrap();
    let restored: Vec<String> = loaded.messages.iter().map(|m| format!("{}:{}", m.role, m.content)).collect();
    // from the summary the tool resumed from; the reminder cut out, the image a note; the last call had no
    // result, so it is left out as the loader leaves a dangling call
    assert_eq!(restored.len(), 2, "{restored:?}");
    assert_eq!(restored[0], "user:This session is being continued: the parser was renamed.");
    assert!(restored[1].starts_with("user:and now the docs\n\n[an image"), "{restored:?}");
    assert_valid(&loaded.messages);
    assert_eq!(loaded.model, "claude-sonnet-4-5");
    assert_eq!(done.messages, 2);
    // the log keeps what came before the compaction, says where it came from, and is named
    let log = fs::read_to_string(Context::open(ws.path(), &done.id).unwrap().jsonl_path).unwrap();
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "replace");
    assert_eq!(first["reason"], "import");
    assert_eq!(first["imported_from"]["source"], "claude-code");
    assert_eq!(first["imported_from"]["id"], "s1");
    assert_eq!(first["imported_from"]["path"], path.canonicalize().unwrap().to_str().unwrap());
    assert!(log.contains("Renamed.") && log.contains("\"reason\":\"compact\""));
    let list = session::list(ws.path(), &Default::default()).unwrap();
    assert_eq!(list[0].title, "Parser rename");
    // the source is as it was
    assert_eq!(fs::read(&path).unwrap(), before_bytes);
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), before_mtime);
    assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "nothing was made beside it");
}

#[test]
fn importing_an_unchanged_transcript_again_gives_the_same_session_and_a_changed_one_a_new_one() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let wsc = ws.path().canonicalize().unwrap();
    let path = claude_home(home.path(), ws.path());
    let lines = [
        cc("user", "u1", None, &wsc, user("hello")),
        cc("assistant", "a1", Some("u1"), &wsc, assistant("m1", json!([{"type": "text", "text": "Hi."}]))),
    ];
    write(&path, &jsonl(&lines));
    let first = import::import(ws.path(), &path).unwrap();
    let again = import::import(ws.path(), &path).unwrap();
    assert!(again.existing);
    assert_eq!(again.id, first.id);
    let mut more = lines.to_vec();
    more.push(cc("user", "u2", Some("a1"), &wsc, user("more")));
    write(&path, &jsonl(&more));
    let changed = import::import(ws.path(), &path).unwrap();
    assert!(!changed.existing);
    assert_ne!(changed.id, first.id);
    assert_eq!(changed.messages, 3);
}

/// Killed part way through an import (the first line, the start of the conversation, on disk; the compaction after
/// it not): that session holds fewer lines than the import writes, so importing the file again makes a whole one
/// instead of offering the cut one. (A whole import continued here since is still offered: tests/e2e/test_import.py.)
#[test]
fn an_import_killed_part_way_is_not_offered_again() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = write(&claude_home(home.path(), ws.path()), &claude_transcript(&ws.path().canonicalize().unwrap()));
    let first = import::import(ws.path(), &path).unwrap();
    let log = Context::open(ws.path(), &first.id).unwrap().jsonl_path;
    let text = fs::read_to_string(&log).unwrap();
    fs::write(&log, &text[..=text.find('\n').unwrap()]).unwrap();
    let again = import::import(ws.path(), &path).unwrap();
    assert!(!again.existing, "the cut session is not the import of this file");
    assert_ne!(again.id, first.id);
    assert_eq!(again.messages, first.messages);
    let third = import::import(ws.path(), &path).unwrap();
    assert!(third.existing && third.id == again.id, "the whole one is offered from now on");
}

fn codex_line(kind: &str, payload: Value) -> Value {
    json!({"timestamp": "2026-11-29T08:00:00.000Z", "type": kind, "payload": payload})
}

fn codex_msg(role: &str, part: &str, text: &str) -> Value {
    codex_line("response_item", json!({"type": "message", "role": role, "content": [{"type": part, "text": text}]}))
}

fn codex_rollout(cwd: &Path) -> String {
    jsonl(&[
        codex_line(
            "session_meta",
            json!({"id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "cwd": cwd, "git": {"branch": "feature"}, "cli_version": "0.50.0", "base_instructions": {"text": "You are Codex"}}),
        ),
        codex_line("turn_context", json!({"model": "gpt-5-codex", "cwd": cwd})),
        codex_msg("developer", "input_text", "<permissions instructions>"),
        codex_msg("user", "input_text", "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"),
        codex_msg("user", "input_text", "# AGENTS.md instructions for /x\n\nbe terse"),
        codex_msg("user", "input_text", "list the files"),
        codex_line("event_msg", json!({"type": "user_message", "message": "list the files"})),
        codex_line("response_item", json!({"type": "reasoning", "summary": []})),
        codex_msg("assistant", "output_text", "Listing."),
        codex_line(
            "response_item",
            json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"}),
        ),
        codex_line(
            "response_item",
            json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"pwd\"]}", "call_id": "call_2"}),
        ),
        codex_line(
            "response_item",
            json!({"type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"a.txt\\n\",\"metadata\":{\"exit_code\":0}}"}),
        ),
        codex_line("response_item", json!({"type": "function_call_output", "call_id": "call_2", "output": "/x"})),
        codex_line("event_msg", json!({"type": "agent_message", "message": "Two files."})),
        codex_msg("assistant", "output_text", "Two files."),
        codex_line("event_msg", json!({"type": "token_count", "info": null})),
        // a turn only an event_msg holds (Codex Desktop)
        codex_line("event_msg", json!({"type": "user_message", "message": "now patch a.txt"})),
        codex_line(
            "response_item",
            json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch", "call_id": "call_3"}),
        ),
        codex_line("response_item", json!({"type": "custom_tool_call_output", "call_id": "call_3", "output": "Done!"})),
        codex_line("response_item", json!({"type": "function_call_output", "call_id": "call_orphan", "output": "?"})),
        codex_msg("assistant", "output_text", "Patched."),
    ])
}

fn codex_path(home: &Path) -> PathBuf {
    home.join("sessions/2026/11/29/rollout-2026-11-29T08-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl")
}

#[test]
fn a_codex_rollout_imports_each_turn_once_without_injected_context() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = write(&codex_path(home.path()), &codex_rollout(&ws.path().canonicalize().unwrap()));
    write(
        &home.path().join("session_index.jsonl"),
        &jsonl(&[
            json!({"id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "thread_name": "old name"}),
            json!({"id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "thread_name": "File listing"}),
        ]),
    );
    let done = import::import(ws.path(), &path).unwrap();
    let loaded = session::load(&Context::open(ws.path(), &done.id).unwrap()).unwrap();
    let h: Vec<String> = loaded.messages.iter().map(|m| format!("{}:{}", m.role, m.content)).collect();
    assert_eq!(
        h,
        [
            "user:list the files",
            "assistant:Listing.",
            "user:",
            "user:",
            "assistant:Two files.",
            "user:now patch a.txt",
            "assistant:",
            "user:",
            "assistant:Patched."
        ]
    );
    assert_valid(&loaded.messages);
    assert_eq!(loaded.messages[1].tool_calls[0].arguments, json!({"command": ["ls"]}));
    assert_eq!(loaded.messages[2].tool_result.as_ref().unwrap().content, "a.txt\n");
    assert_eq!(loaded.messages[6].tool_calls[0].name, "apply_patch");
    assert_eq!(loaded.model, "gpt-5-codex");
    let items = import::list(ws.path(), &Homes { codex: Some(home.path().to_path_buf()), ..Homes::default() });
    assert_eq!(items.len(), 1);
    assert_eq!((items[0].source.as_str(), items[0].title.as_str(), items[0].messages), ("codex", "File listing", 9));
    assert_eq!(items[0].branch.as_deref(), Some("feature"));
}

#[test]
fn a_codex_compaction_restores_from_its_replacement_history() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cwd = ws.path().canonicalize().unwrap();
    let mut text = codex_rollout(&cwd);
    text.push_str(&jsonl(&[
        codex_line("compacted", json!({"message": "summary", "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Summary: files listed, a.txt patched."}]}]})),
        codex_msg("user", "input_text", "what next?"),
    ]));
    let path = write(&codex_path(home.path()), &text);
    let done = import::import(ws.path(), &path).unwrap();
    let loaded = session::load(&Context::open(ws.path(), &done.id).unwrap()).unwrap();
    let h: Vec<&str> = loaded.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(h, ["Summary: files listed, a.txt patched.", "what next?"]);
}

#[test]
fn other_workspaces_transcripts_and_bad_files_are_not_imported_silently() {
    let (ws, other, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(&codex_path(home.path()), &codex_rollout(&other.path().canonicalize().unwrap()));
    let zst = write(
        &home
            .path()
            .join("sessions/2026/11/28/rollout-2026-11-28T08-00-00-0199a1b2-0000-7e5f-8a9b-0c1d2e3f4a5b.jsonl.zst"),
        "\u{28}\u{b5}",
    );
    let items = import::list(ws.path(), &Homes { codex: Some(home.path().to_path_buf()), ..Homes::default() });
    // the other workspace's rollout is not listed; the compressed one is, marked
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(items[0].unsupported.as_deref().unwrap().contains("zstd"));
    let e = import::import(ws.path(), &zst).unwrap_err().to_string();
    assert!(e.contains("zstd-compressed"), "{e}");
    let junk = write(&ws.path().join("junk.jsonl"), "{\"hello\": 1}\nnot json\n");
    let e = import::import(ws.path(), &junk).unwrap_err().to_string();
    assert!(e.contains("is not a session file of Claude Code, Codex"), "{e}");
    let empty = write(
        &ws.path().join("empty.jsonl"),
        &jsonl(&[json!({"type": "summary", "summary": "x", "sessionId": "s", "parentUuid": null})]),
    );
    let e = import::import(ws.path(), &empty).unwrap_err().to_string();
    assert!(e.contains("holds no conversation"), "{e}");
    let e = import::import(ws.path(), Path::new("/nonexistent/x.jsonl")).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/x.jsonl"), "{e}");
    // a transcript without any cwd belongs to no workspace
    let nocwd = claude_home(home.path(), ws.path());
    write(
        &nocwd,
        &jsonl(&[json!({"type": "user", "uuid": "u", "parentUuid": null, "sessionId": "s", "message": user("hi")})]),
    );
    let items = import::list(ws.path(), &Homes { claude: Some(home.path().to_path_buf()), ..Homes::default() });
    assert!(items.is_empty(), "{items:?}");
    assert_eq!(session::list(ws.path(), &Default::default()).unwrap().len(), 0, "no empty session left behind");
}

#[test]
fn a_large_imported_tool_result_is_spilled_as_ours_are() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let wsc = ws.path().canonicalize().unwrap();
    let big = "x".repeat(200_000);
    let lines = [
        cc("user", "u1", None, &wsc, user("read it")),
        cc(
            "assistant",
            "a1",
            Some("u1"),
            &wsc,
            assistant("m1", json!([{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "big"}}])),
        ),
        cc("user", "r1", Some("a1"), &wsc, result("t1", &big)),
    ];
    let path = write(&claude_home(home.path(), ws.path()), &jsonl(&lines));
    let done = import::import(ws.path(), &path).unwrap();
    let ctx = Context::open(ws.path(), &done.id).unwrap();
    assert!(fs::read_dir(&ctx.spill_dir).unwrap().count() == 1);
    assert!(fs::metadata(&ctx.jsonl_path).unwrap().len() < 50_000);
    let loaded = session::load(&ctx).unwrap();
    let r = loaded.messages[2].tool_result.as_ref().unwrap();
    assert_eq!(session::spill::read(&ctx, r.spill.as_ref().unwrap()).unwrap(), big);
}

async fn continue_against(kind: Kind, name: &str, path_of: fn(&Path, &Path) -> PathBuf) {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = path_of(ws.path(), home.path());
    let done = import::import(ws.path(), &path).unwrap();
    let server = FakeServer::start(kind);
    let sse = match kind {
        Kind::Anthropic => anthropic_sse,
        Kind::OpenAi => openai_sse,
    };
    server.push(Reply::sse(sse("Carrying on.", &[])));
    let cfg = ProviderConfig {
        name: name.into(),
        model: "fake-model".into(),
        base_url: server.base_url(),
        api_key_env: format!("PC_IMPORT_{}", name.to_uppercase()),
        retry_base_ms: 5,
        ..Default::default()
    };
    let provider: Arc<dyn provider::Provider> = Arc::from(provider::from_config(&cfg).unwrap());
    let (agent, _) = Agent::resume(AgentConfig::new(ws.path()), provider, Arc::new(Never), &done.id).unwrap();
    let events = turn(&agent, "go on").await;
    assert!(!events.iter().any(|e| matches!(e, Event::Error { .. })), "{events:?}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].rejected.is_none(), "{:?}", reqs[0].rejected);
    assert!(reqs[0].body.to_string().contains("go on"));
    // the source is untouched by the resume and the turn
    assert!(
        fs::read_to_string(&path).unwrap().contains("\"payload\"")
            || fs::read_to_string(&path).unwrap().contains("parentUuid")
    );
}

fn claude_fixture(ws: &Path, home: &Path) -> PathBuf {
    // without the compaction, so the calls are in the restored history
    let text: String =
        claude_transcript(&ws.canonicalize().unwrap()).lines().take(11).map(|l| format!("{l}\n")).collect();
    write(&claude_home(home, ws), &text)
}

fn codex_fixture(ws: &Path, home: &Path) -> PathBuf {
    write(&codex_path(home), &codex_rollout(&ws.canonicalize().unwrap()))
}

#[tokio::test]
async fn an_imported_claude_code_session_continues_against_both_providers() {
    continue_against(Kind::Anthropic, "anthropic", claude_fixture).await;
    continue_against(Kind::OpenAi, "openai", claude_fixture).await;
}

#[tokio::test]
async fn an_imported_codex_session_continues_against_both_providers() {
    continue_against(Kind::Anthropic, "anthropic", codex_fixture).await;
    continue_against(Kind::OpenAi, "openai", codex_fixture).await;
}

#[test]
fn the_cli_lists_and_imports_external_sessions() {
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let path = codex_fixture(ws.path(), home.path());
    let bin = env!("CARGO_BIN_EXE_pseudoclaude");
    let run = |args: &[&str]| {
        Command::new(bin)
            .args(["-C", ws.path().to_str().unwrap()])
            .args(args)
            .env("CODEX_HOME", home.path())
            .env("CLAUDE_CONFIG_DIR", home.path().join("none"))
            .output()
            .unwrap()
    };
    let out = run(&["sessions", "list", "--external"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("codex  codex:0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b  9 msgs  gpt-5-codex  list the files"),
        "{stdout}"
    );
    let out = run(&["sessions", "import", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(session::is_valid_id(&id), "{id}");
    let out = run(&["sessions", "import", path.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("already imported"));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), id);
    let out = run(&["sessions", "import", "/nonexistent.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.jsonl"));
}

/// A transcript of `turns` prompt/answer pairs, each answer `pad` bytes long, named at its end.
fn long_claude_transcript(ws: &Path, turns: usize, pad: usize) -> String {
    let mut l = Vec::new();
    let mut parent: Option<String> = None;
    for i in 0..turns {
        let (u, a) = (format!("u{i}"), format!("a{i}"));
        l.push(cc("user", &u, parent.as_deref(), ws, user(&format!("question {i}"))));
        let text = format!("answer {i} {}", "x".repeat(pad));
        l.push(cc("assistant", &a, Some(&u), ws, assistant(&format!("m{i}"), json!([{"type": "text", "text": text}]))));
        parent = Some(a);
    }
    let mut last = cc("user", "late", parent.as_deref(), ws, user("the last question"));
    last["gitBranch"] = json!("topic");
    last["timestamp"] = json!("2026-12-01T09:00:00.000Z");
    l.push(last);
    l.push(json!({"type": "custom-title", "customTitle": "Long one", "sessionId": "s1"}));
    jsonl(&l)
}

#[test]
fn a_quick_list_reads_head_and_tail_and_the_exact_count_is_cached_by_size_and_mtime() {
    use pseudoclaude::import::list::{HEAD_BYTES, ListOptions, list_with};
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let wsc = ws.path().canonicalize().unwrap();
    let path = write(&claude_home(home.path(), ws.path()), &long_claude_transcript(&wsc, 200, 2000));
    assert!(fs::metadata(&path).unwrap().len() > 3 * HEAD_BYTES);
    // a session of ours makes .PseudoClaude/sessions/, where the cache goes
    let ours = Context::new(ws.path()).unwrap();
    let homes = Homes { claude: Some(home.path().to_path_buf()), ..Homes::default() };
    let quick = list_with(ws.path(), &homes, &ListOptions { limit: Some(5), quick: true, ..Default::default() });
    assert_eq!(quick.len(), 1, "{quick:?}");
    let q = &quick[0];
    assert!(q.partial);
    assert_eq!(
        (q.title.as_str(), q.model.as_str(), q.branch.as_deref()),
        ("Long one", "claude-sonnet-4-5", Some("topic"))
    );
    assert_eq!(q.modified, chrono::DateTime::parse_from_rfc3339("2026-12-01T09:00:00Z").unwrap().timestamp());
    // the exact list counts what an import restores
    let exact = import::list(ws.path(), &homes);
    assert!(!exact[0].partial);
    assert_eq!(exact[0].messages, 401);
    let cache = ours.dir.parent().unwrap().join(import::list::CACHE_FILE_NAME);
    assert!(cache.is_file(), "the exact item is cached on disk");
    // The same size and modification time: the cached count, without reading (proved by a change it does not
    // see), in this process and in a new one (the disk copy).
    let text = fs::read_to_string(&path).unwrap().replace("question 7\"", "question X\"");
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let shorter = text.replace("\"late\"", "\"lat\"").replace("the last question", "the last questionX");
    assert_eq!(shorter.len(), text.len());
    fs::write(&path, shorter.replace("Long one", "Long two")).unwrap();
    fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    assert_eq!(import::list(ws.path(), &homes)[0].title, "Long one", "served from the cache");
    import::list::forget_cache();
    assert_eq!(import::list(ws.path(), &homes)[0].title, "Long one", "served from the disk cache");
    // a new modification time: read again
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime + std::time::Duration::from_secs(1))
        .unwrap();
    let again = import::list(ws.path(), &homes);
    assert_eq!((again[0].title.as_str(), again[0].messages), ("Long two", 401));
    let done = import::import(ws.path(), &path).unwrap();
    assert_eq!(done.messages, again[0].messages);
}

/// A workspace copied elsewhere (its `.PseudoClaude/` with it) must not list the transcripts of the folder it was
/// copied from: whether a transcript belongs is a verdict about a workspace, and the cache file names whose it is.
#[test]
fn a_copied_workspace_does_not_believe_the_cache_of_the_folder_it_was_copied_from() {
    let (root, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = root.path().join("first");
    fs::create_dir(&first).unwrap();
    write(&codex_path(home.path()), &codex_rollout(&first.canonicalize().unwrap()));
    Context::new(&first).unwrap(); // a session of ours: the cache file may be written
    let homes = Homes { codex: Some(home.path().to_path_buf()), ..Homes::default() };
    assert_eq!(import::list(&first, &homes).len(), 1, "the rollout belongs to the first workspace");
    let cache = first.join(".PseudoClaude/sessions").join(import::list::CACHE_FILE_NAME);
    assert!(cache.is_file());

    let copy = root.path().join("copy");
    let status = Command::new("cp").arg("-a").arg(&first).arg(&copy).status().unwrap();
    assert!(status.success());
    import::list::forget_cache(); // a new editor, in the copy
    assert_eq!(import::list(&copy, &homes), vec![], "the copy is another workspace: the rollout is not its");
    import::list::forget_cache();
    assert_eq!(import::list(&first, &homes).len(), 1, "the first keeps its own");
}

// --- The other agents' stores, as the real agents wrote them (issue 46) ----------------------------------------------

/// The sessions the real `agent` made (text, tools, two_turns): `tests/e2e/agent_sets.py` (agent_stores.py), which runs the
/// real agent offline against a fake model server once per version and keeps the stores in `.deps/agents/stores/`
/// Shared and read-only: a test copies `home` before changing anything, and never writes in `workspace`. Held while
/// the test reads it (see [`RealSet`]).
fn real_sessions(agent: &str) -> RealSet {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/agent_sets.py");
    for _ in 0..5 {
        let out = Command::new("python3").arg(&script).arg(agent).output().expect("python3");
        assert!(out.status.success(), "agent_sets.py {agent}: {}", String::from_utf8_lossy(&out.stderr));
        let set: Value = serde_json::from_slice(&out.stdout).expect("the set as JSON");
        let base = Path::new(set["text"]["home"].as_str().unwrap()).parent().unwrap().to_path_buf();
        // held, then checked to be still the set named (not removed, or made again, since agent_sets.py let go)
        let Ok(readers) = fs::File::open(base.join(".readers")) else { continue };
        readers.lock_shared().unwrap();
        let now = fs::read(base.join("sessions.json")).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        if now.as_ref() == Some(&set) {
            return RealSet { set, _held: readers };
        }
    }
    panic!("{agent}: its set of sessions was made again five times while this test asked for it")
}

/// A set of [`real_sessions`], held while it lives: a shared lock on the set's `.readers` file, the lock
/// agent_stores.py's `cached_set` takes alone before it removes a set or makes it again (a parallel test that finds
/// the set not whole makes a new one beside it instead).
struct RealSet {
    set: Value,
    _held: fs::File,
}

impl std::ops::Deref for RealSet {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.set
    }
}

/// A copy of a set's HOME (so a test may damage it) and the homes the agents would read under it.
fn copied_home(set: &Value) -> (tempfile::TempDir, Homes) {
    let copy = tempfile::tempdir().unwrap();
    let from = set["text"]["home"].as_str().unwrap();
    let status = Command::new("cp").arg("-a").arg(format!("{from}/.")).arg(copy.path()).status().unwrap();
    assert!(status.success());
    let home = copy.path().to_path_buf();
    let homes = Homes::from_vars(|v| match v {
        "HOME" => Some(home.clone()),
        "XDG_DATA_HOME" => Some(home.join(".local/share")),
        _ => None,
    });
    (copy, homes)
}

fn workspace_of(set: &Value) -> PathBuf {
    PathBuf::from(set["text"]["workspace"].as_str().unwrap())
}

fn row<'a>(items: &'a [import::ExternalItem], session_id: &str) -> &'a import::ExternalItem {
    items.iter().find(|i| i.session_id == session_id).unwrap_or_else(|| panic!("{session_id} not listed: {items:#?}"))
}

/// What a history says, message by message (role, text, calls, result), to compare two readings of it.
fn shape(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| {
            let calls: Vec<String> = m.tool_calls.iter().map(|c| format!("{}:{}", c.id, c.name)).collect();
            let result =
                m.tool_result.as_ref().map(|r| format!("{}={}", r.tool_call_id, r.content)).unwrap_or_default();
            format!("{:?}|{}|{}|{}", m.role, m.content.trim(), calls.join(","), result)
        })
        .collect()
}

const AGENTS: [(&str, &str); 5] = [
    ("claude", "claude-code"),
    ("gemini", "gemini-cli"),
    ("qwen", "qwen-code"),
    ("opencode", "opencode"),
    ("pi", "pi"),
];

#[test]
fn every_agents_real_sessions_are_listed_read_as_resumed_and_imported() {
    for (agent, source) in AGENTS {
        let set = real_sessions(agent);
        let (_copy, homes) = copied_home(&set);
        let ws = workspace_of(&set);
        let items = import::list(&ws, &homes);
        // every session of the set is a row (a set may hold more than these three)
        assert_eq!(items.len(), set.as_object().unwrap().len(), "{agent}: {items:#?}");
        for (name, expected) in [("text", 2), ("tools", 4), ("two_turns", 4)] {
            let info = &set[name];
            let sid = info["session_id"].as_str().unwrap();
            let item = row(&items, sid);
            let what = format!("{agent} {name}: {item:#?}");
            assert_eq!((item.agent.as_str(), item.source.as_str()), (agent, source), "{what}");
            assert_eq!(item.id, format!("{agent}:{sid}"), "{what}");
            assert!(item.unsupported.is_none() && item.notes.is_empty() && !item.partial, "{what}");
            assert_eq!(item.messages, expected, "{what}");
            let first = info["words"][0].as_str().unwrap();
            assert!(item.title.contains(first), "{what}");
            // the history a resume restores: the prompts and the answers naming their words, each call answered
            let c = import::read_item(item).unwrap();
            let h = c.restored();
            assert_eq!(h.len(), item.messages, "{what}: {h:#?}");
            assert!(h[0].is_user_text() && h[0].content.contains(first), "{what}: {h:#?}");
            for w in info["words"].as_array().unwrap() {
                let w = w.as_str().unwrap();
                assert!(
                    h.iter().any(|m| m.role == pseudoclaude::message::Role::Assistant && m.content.contains(w)),
                    "{what}: no answer names {w}: {h:#?}"
                );
            }
            if name == "tools" {
                let at = h.iter().position(|m| !m.tool_calls.is_empty()).unwrap_or_else(|| panic!("{what}: {h:#?}"));
                let call = &h[at].tool_calls[0];
                assert!(call.arguments.to_string().contains("FIGTREE"), "{what}: {call:?}");
                let result = h[at + 1].tool_result.as_ref().unwrap_or_else(|| panic!("{what}: {h:#?}"));
                assert_eq!(result.tool_call_id, call.id, "{what}");
                assert!(!result.is_error, "{what}");
            }
            // found by its id; imported into a workspace of ours as that very history, once
            assert_eq!(&import::find(&ws, &homes, &item.id).unwrap(), item, "{what}");
            let ours = tempfile::tempdir().unwrap();
            let done = import::import_item(ours.path(), item).unwrap();
            let loaded = session::load(&Context::open(ours.path(), &done.id).unwrap()).unwrap();
            assert_eq!(shape(&loaded.messages), shape(&h), "{what}");
            let again = import::import_item(ours.path(), item).unwrap();
            assert!(again.existing && again.id == done.id, "{what}: {again:?}");
        }
        // ids that are not a row's are refused, never read as paths
        for bad in [format!("{agent}:../../etc/passwd"), format!("{agent}:"), "nope:1".into(), format!("{agent}:.x")] {
            let e = import::find(&ws, &homes, &bad).unwrap_err().to_string();
            assert!(e.contains("not another agent's session id"), "{bad}: {e}");
        }
        let e = import::find(&ws, &homes, &format!("{agent}:0000")).unwrap_err().to_string();
        assert!(e.contains("no ") && e.contains("deleted"), "{e}");
    }
}

/// The file of a set's session `name`, in the copied home.
fn copied_store(set: &Value, name: &str, copy: &Path) -> PathBuf {
    let home = set["text"]["home"].as_str().unwrap();
    let store = set[name]["store"].as_str().unwrap();
    copy.join(Path::new(store).strip_prefix(home).unwrap())
}

/// A history read after damage holds only what the undamaged one holds, in its order: its texts a part of the
/// whole's, each call and result one of the whole's (a call whose line was lost goes with its result, never
/// invented). Never a wrong conversation.
fn is_part_of(damaged: &[String], whole: &[String]) -> bool {
    let text = |s: &String| s.splitn(3, '|').take(2).collect::<Vec<_>>().join("|");
    let mut it = whole.iter();
    let texts_in_order = damaged.iter().all(|d| it.any(|w| text(w) == text(d)));
    let exchanges = |h: &[String]| -> Vec<String> {
        h.iter().flat_map(|s| s.splitn(3, '|').nth(2).map(str::to_string)).filter(|x| x != "|").collect()
    };
    let all = exchanges(whole);
    texts_in_order
        && exchanges(damaged)
            .iter()
            .all(|x| x.split('|').all(|part| part.is_empty() || all.iter().any(|w| w.contains(part))))
}

#[test]
fn a_damaged_session_of_a_real_agent_is_listed_saying_what_is_wrong_and_never_misread() {
    for (agent, _) in AGENTS.iter().filter(|(a, _)| *a != "opencode") {
        let set = real_sessions(agent);
        let ws = workspace_of(&set);
        let sid = set["tools"]["session_id"].as_str().unwrap();
        let whole = {
            let (_copy, homes) = copied_home(&set);
            shape(&import::read_item(row(&import::list(&ws, &homes), sid)).unwrap().restored())
        };
        // a last line cut short (the agent was writing it), then a line garbled in the middle
        let (copy, homes) = copied_home(&set);
        let file = copied_store(&set, "tools", copy.path());
        let text = fs::read_to_string(&file).unwrap();
        let last = text.trim_end().rfind('\n').unwrap() + 1;
        fs::write(&file, &text[..last + (text.len() - last) / 2]).unwrap();
        let items = import::list(&ws, &homes);
        let item = row(&items, sid);
        assert!(item.notes.iter().any(|n| n.contains("cut short")), "{agent}: {item:#?}");
        let cut = shape(&import::read_item(item).unwrap().restored());
        assert!(is_part_of(&cut, &whole), "{agent}: {cut:#?} is not part of {whole:#?}");
        let lines: Vec<&str> = text.lines().collect();
        let middle = lines.len() / 2;
        let garbled: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| if i == middle { "{\"garbled".to_string() } else { l.to_string() })
            .collect();
        fs::write(&file, garbled.join("\n") + "\n").unwrap();
        let items = import::list(&ws, &homes);
        let item = row(&items, sid);
        assert!(item.notes.iter().any(|n| n.contains("not JSON")), "{agent}: {item:#?}");
        let read = shape(&import::read_item(item).unwrap().restored());
        assert!(is_part_of(&read, &whole), "{agent}: {read:#?} is not part of {whole:#?}");
    }
}

#[test]
fn a_format_version_not_read_is_listed_as_unsupported_and_not_imported() {
    // Pi's header version, Gemini's kind: bumped in a copy of the real file
    for (agent, from, to, says) in [
        ("pi", "\"version\":3", "\"version\":4", "version 4"),
        ("gemini", "\"kind\":\"main\"", "\"kind\":\"future\"", "\"future\""),
    ] {
        let set = real_sessions(agent);
        let ws = workspace_of(&set);
        let (copy, homes) = copied_home(&set);
        let file = copied_store(&set, "text", copy.path());
        let text = fs::read_to_string(&file).unwrap();
        assert!(text.contains(from), "{agent}: {text}");
        fs::write(&file, text.replacen(from, to, 1)).unwrap();
        let items = import::list(&ws, &homes);
        let item = row(&items, set["text"]["session_id"].as_str().unwrap());
        let why = item.unsupported.as_deref().unwrap_or_else(|| panic!("{agent}: {item:#?}"));
        assert!(why.contains(says), "{agent}: {why}");
        assert_eq!(item.messages, 0);
        let ours = tempfile::tempdir().unwrap();
        let e = import::import_item(ours.path(), item).unwrap_err().to_string();
        assert!(e.contains(says), "{agent}: {e}");
        let e = import::import(ours.path(), &file).unwrap_err().to_string();
        assert!(e.contains(says), "{agent}: {e}");
        assert!(session::list(ours.path(), &Default::default()).unwrap().is_empty(), "nothing left behind");
    }
}

#[test]
fn opencodes_database_is_read_while_a_writer_holds_it_and_a_schema_not_read_says_so() {
    let set = real_sessions("opencode");
    let ws = workspace_of(&set);
    let (copy, homes) = copied_home(&set);
    let db = copy.path().join(".local/share/opencode/opencode.db");
    let sid = set["text"]["session_id"].as_str().unwrap();
    let before = import::list(&ws, &homes);
    let messages = row(&before, sid).messages;
    // A writer in the middle of a transaction (as opencode is while it streams a turn): the list neither waits for
    // it nor sees what it has not committed.
    let writer = rusqlite::Connection::open(&db).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    writer
        .execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES ('msg_zzz', ?1, 1, 1, ?2)",
            rusqlite::params![sid, r#"{"role":"user","time":{"created":1}}"#],
        )
        .unwrap();
    writer.execute("UPDATE session SET time_updated = time_updated + 1 WHERE id = ?1", [sid]).unwrap();
    let started = std::time::Instant::now();
    let during = import::list(&ws, &homes);
    let read = import::read_item(row(&during, sid)).unwrap().restored();
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "the reads waited for the writer");
    assert_eq!((row(&during, sid).messages, read.len()), (messages, messages), "nothing uncommitted is read");
    writer.execute_batch("COMMIT").unwrap();
    // A session that moved is read again, the others come from the cache.
    let after = import::list(&ws, &homes);
    assert_eq!(row(&after, sid).messages, messages, "an empty user message restores nothing");
    // a part whose data is not JSON: said, and left out
    writer
        .execute("UPDATE part SET data = '{oops' WHERE session_id = ?1 AND data LIKE '%step-finish%'", [sid])
        .unwrap();
    writer.execute("UPDATE session SET time_updated = time_updated + 1 WHERE id = ?1", [sid]).unwrap();
    let item = row(&import::list(&ws, &homes), sid).clone();
    assert!(item.notes.iter().any(|n| n.contains("not JSON")), "{item:#?}");
    assert_eq!(item.messages, messages);
    // opencode's tables changed under us: one row says so, naming the database
    writer.execute_batch("ALTER TABLE session RENAME COLUMN directory TO dir").unwrap();
    drop(writer);
    let items = import::list(&ws, &homes);
    assert_eq!(items.len(), 1, "{items:#?}");
    let why = items[0].unsupported.as_deref().unwrap();
    assert!(why.contains("opencode.db") && why.contains("directory"), "{why}");
    // the database was only read: opened read-only, it was never written by us (the writer above is the test's)
}

#[test]
fn a_parent_chain_that_lost_a_parent_or_loops_keeps_what_it_reaches_and_says_so() {
    // Qwen Code and Pi walk their parent links back from the last record (one helper): a parent missing from the file
    // (a damaged line lost it) ends the chain there, and so does a loop; each says so, and nothing is misread
    let texts = |c: &import::Conversation| c.restored().iter().map(|m| m.content.clone()).collect::<Vec<_>>();
    let qwen = |uuid: &str, parent: Option<&str>, text: &str| {
        json!({"uuid": uuid, "parentUuid": parent, "sessionId": "q1", "timestamp": "2026-11-30T10:00:00.000Z",
               "type": "user", "cwd": "/w", "message": {"role": "user", "parts": [{"text": text}]}})
    };
    let lost = jsonl(&[qwen("u1", None, "ALPHA"), qwen("u3", Some("u2"), "CHARLIE"), qwen("u4", Some("u3"), "DELTA")]);
    let c = import::qwen::parse(&lost, Path::new("q1.jsonl"));
    assert_eq!(texts(&c), ["CHARLIE", "DELTA"]);
    assert!(c.notes.iter().any(|n| n.starts_with("a record's parent (u2) is missing from the file")), "{:?}", c.notes);

    let pi = |id: &str, parent: &str, text: &str| {
        json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-30T10:00:00.000Z",
               "message": {"role": "user", "content": text}})
    };
    let header =
        json!({"type": "session", "version": 3, "id": "p1", "cwd": "/w", "timestamp": "2026-11-30T10:00:00.000Z"});
    let looped = jsonl(&[header, pi("e1", "e2", "ALPHA"), pi("e2", "e1", "BRAVO")]);
    let c = import::pi::parse(&looped, Path::new("p1.jsonl"));
    assert_eq!(texts(&c), ["ALPHA", "BRAVO"]);
    assert!(c.notes.iter().any(|n| n.starts_with("the entries' parent links loop")), "{:?}", c.notes);
}

/// The other agents' list cache and words index (issue 46 item 6), through the CLI, a new process each time as a
/// user runs it: a transcript appended to after both were made is found by the default search (which looks at every
/// file); `--no-refresh` serves both as they are until then; a damaged or foreign-version file is rebuilt with a
/// note, never believed.
#[test]
fn an_appended_transcript_is_found_by_the_default_search_and_a_damaged_cache_is_rebuilt_with_a_note() {
    use std::io::Write;
    let (ws, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let wsc = ws.path().canonicalize().unwrap();
    Context::new(ws.path()).unwrap(); // a session of ours: the caches are written in .PseudoClaude/sessions/
    let claude = home.path().join(".claude");
    let path = write(
        &claude_home(&claude, ws.path()),
        &jsonl(&[
            cc("user", "u1", None, &wsc, user("port the lexer")),
            cc("assistant", "a1", Some("u1"), &wsc, assistant("m1", json!([{"type": "text", "text": "Done."}]))),
        ]),
    );
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_pseudoclaude"))
            .args(["-C", ws.path().to_str().unwrap(), "sessions"])
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, out, err) = run(&["search", "--external", "lexer"]);
    assert_eq!((code, out.as_str()), (Some(0), "claude:s1:1:user: port the lexer\n"), "{err}");
    let cache = wsc.join(".PseudoClaude/sessions").join(import::list::CACHE_FILE_NAME);
    let words = wsc.join(".PseudoClaude/sessions").join(import::words::FILE_NAME);
    assert!(cache.is_file() && words.is_file());

    // Claude Code appends the next turn: the folder's modification time does not change, the file's does
    let dir_mtime = fs::metadata(path.parent().unwrap()).unwrap().modified().unwrap();
    let more = jsonl(&[
        cc("user", "u2", Some("a1"), &wsc, user("now the FIGTREE parser")),
        cc("assistant", "a2", Some("u2"), &wsc, assistant("m2", json!([{"type": "text", "text": "Ported."}]))),
    ]);
    fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(more.as_bytes()).unwrap();
    assert_eq!(fs::metadata(path.parent().unwrap()).unwrap().modified().unwrap(), dir_mtime);
    // --no-refresh serves the index and the list as the last run left them
    let (code, _, _) = run(&["search", "--external", "--no-refresh", "FIGTREE"]);
    assert_eq!(code, Some(1), "served as it was");
    let (_, out, _) = run(&["list", "--external", "--no-refresh"]);
    assert!(out.starts_with("claude  claude:s1  2 msgs  claude-sonnet-4-5  port the lexer"), "{out}");
    // the default search looks at every file: the appended turn is found, and both caches are brought up to date
    let (code, out, err) = run(&["search", "--external", "FIGTREE"]);
    assert_eq!((code, out.as_str()), (Some(0), "claude:s1:3:user: now the FIGTREE parser\n"), "{err}");
    assert_eq!(run(&["search", "--external", "--no-refresh", "FIGTREE"]).1, out);
    let (_, listed, _) = run(&["list", "--external", "--no-refresh"]);
    assert!(listed.starts_with("claude  claude:s1  4 msgs"), "{listed}");

    // a byte changed in each: neither believed, each rebuilt with a note, the same hits
    for file in [&cache, &words] {
        let mut bytes = fs::read(file).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x01;
        fs::write(file, bytes).unwrap();
    }
    let (code, again, err) = run(&["search", "--external", "FIGTREE"]);
    assert_eq!((code, again.as_str()), (Some(0), out.as_str()), "{err}");
    for what in ["the cache of the other agents' sessions", "the words index of the other agents' sessions"] {
        assert!(
            err.contains(&format!("note: {what} "))
                && err.contains("was damaged (cut short or changed): not used, rebuilt"),
            "{what}: {err}"
        );
    }
    let (_, _, err) = run(&["search", "--external", "--no-refresh", "FIGTREE"]);
    assert!(!err.contains("note:"), "rebuilt: {err}");
    // another version's (or another program's) file: the same
    fs::write(&cache, [b"PCEXTRN\n".as_slice(), &99u32.to_le_bytes(), b"whatever"].concat()).unwrap();
    fs::write(&words, "{\"not\": \"ours\"}").unwrap();
    let (_, listed_again, err) = run(&["list", "--external", "--no-refresh"]);
    assert_eq!(listed_again, listed, "no cache believed: listed as usual");
    assert!(err.contains("was written by another version (format 99): not used, rebuilt"), "{err}");
    let (code, again, err) = run(&["search", "--external", "--no-refresh", "FIGTREE"]);
    assert_eq!((code, again.as_str()), (Some(0), out.as_str()), "{err}");
    assert!(err.contains("was not a file this plugin wrote: not used, rebuilt"), "{err}");
}
