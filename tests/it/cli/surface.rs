//! The command line's surface (issue 31), through the built binary: help and errors, a closed pipe,
//! every `--json` against its table in doc/cli.md, completion in a real `bash -i`, and `open`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pseudoclaude::message::{Message, Thinking};
use pseudoclaude::session::entry::WorktreeMeta;
use pseudoclaude::session::files::{FileChange, FilesRecord};
use pseudoclaude::session::{Context, Entry, Writer, WriterOptions};
use serde_json::Value;

use super::{cli, session, session_with_tools, session_with_usage};

const BIN: &str = env!("CARGO_BIN_EXE_pseudoclaude");

fn doc() -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("doc/cli.md")).unwrap()
}

/// `n` sessions written straight to disk (a writer would fsync each), titles long enough that the
/// list is far bigger than a pipe's buffer.
fn many_sessions(ws: &Path, n: usize) {
    let dir = ws.join(".PseudoClaude/sessions");
    for i in 0..n {
        let d = dir.join(format!("20261201-{:06}-abcd", 100000 + i));
        fs::create_dir_all(&d).unwrap();
        let line =
            serde_json::json!({"role": "user", "content": format!("needle {i} {}", "x".repeat(200)), "model": "m"});
        fs::write(d.join("conversation.jsonl"), format!("{line}\n")).unwrap();
    }
}

/// Runs the binary with `args`, reads one line of its output and closes the pipe, as `| head -1`
/// does; returns the line, the exit status and standard error.
fn head_1(ws: &Path, args: &[&str]) -> (String, Option<i32>, String) {
    let mut child =
        Command::new(BIN).arg("-C").arg(ws).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    // The reader is dropped here: the program's next write meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    (line, out.status.code(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn a_closed_pipe_ends_every_output_quietly_with_status_0() {
    let ws = tempfile::tempdir().unwrap();
    many_sessions(ws.path(), 3000);
    for args in [
        &["sessions", "list"][..],
        &["sessions", "list", "--json"],
        &["sessions", "list", "--all", "--limit", "2500"],
        &["sessions", "search", "needle"],
        &["sessions", "search", "needle", "--json"],
    ] {
        // The premise: the whole output is far more than a pipe holds, so the writer meets the close.
        let (code, whole, _) = cli(ws.path(), args);
        assert!(code == 0 && whole.len() > 256 * 1024, "{args:?}: {} bytes", whole.len());
        let (line, code, err) = head_1(ws.path(), args);
        assert!(!line.is_empty() && whole.starts_with(&line), "{args:?}: {line}");
        assert_eq!((code, err.as_str()), (Some(0), ""), "{args:?}: no panic, no trace, no message");
    }
}

#[test]
fn an_output_error_other_than_a_closed_pipe_is_one_plain_line() {
    let ws = tempfile::tempdir().unwrap();
    session(ws.path(), "t");
    let full = fs::File::options().write(true).open("/dev/full").unwrap();
    let out = Command::new(BIN).arg("-C").arg(ws.path()).args(["sessions", "list"]).stdout(full).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "pseudoclaude: cannot write to standard output: No space left on device (os error 28)\n"
    );
}

const VERBS: [&str; 13] = [
    "list", "show", "check", "search", "open", "rename", "pin", "fork", "changes", "rewind", "export", "import",
    "cleanup",
];

#[test]
fn every_verb_has_a_help_with_its_options_and_an_example_and_there_is_a_version() {
    let ws = tempfile::tempdir().unwrap();
    for verb in VERBS {
        let (code, out, err) = cli(ws.path(), &["sessions", verb, "--help"]);
        assert_eq!((code, err.as_str()), (0, ""), "{verb}");
        assert!(out.contains(&format!("Usage: pseudoclaude sessions {verb} ")), "{verb}: {out}");
        assert!(out.contains("Example") && out.contains(&format!("  pseudoclaude sessions {verb}")), "{verb}: {out}");
        assert!(out.contains("-C, --workspace <DIR>"), "{verb}: {out}");
        // `help VERB` is the same page.
        assert_eq!(cli(ws.path(), &["sessions", "help", verb]).1, out, "{verb}");
    }
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--help"]);
    for option in ["--json", "--all", "--limit <N>", "--pricing <FILE>", "--external"] {
        assert!(out.contains(option), "{option}: {out}");
    }
    let (_, out, _) = cli(ws.path(), &["sessions", "search", "-h"]);
    assert!(out.contains("--json") && out.contains("--limit <N>") && out.contains("<TEXT>..."), "{out}");
    let (code, out, _) = cli(ws.path(), &["completions", "--help"]);
    assert!(code == 0 && out.contains("[possible values: bash, zsh, fish]"), "{out}");
    let (code, out, _) = cli(ws.path(), &["--version"]);
    assert_eq!((code, out), (0, format!("pseudoclaude {}\n", env!("CARGO_PKG_VERSION"))));
    // No verb: the help, on standard error, status 2.
    let (code, out, err) = cli(ws.path(), &["sessions"]);
    assert!(code == 2 && out.is_empty() && err.contains("Commands:\n  list"), "{err}");
}

#[test]
fn the_help_in_doc_cli_md_is_the_binarys() {
    let doc = doc();
    for args in [&["--help"][..], &["sessions", "--help"]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        let block = format!("$ pseudoclaude {}\n{}```", args.join(" "), String::from_utf8_lossy(&out.stdout));
        assert!(doc.contains(&block), "doc/cli.md should show, verbatim:\n{block}");
    }
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let help = String::from_utf8(Command::new(BIN).args(["sessions", "--help"]).output().unwrap().stdout).unwrap();
    let commands = &help[help.find("Commands:").unwrap()..help.find("\nOptions:").unwrap()];
    assert!(readme.contains(commands), "README.md should show, verbatim:\n{commands}");
}

#[test]
fn a_typo_gets_a_suggestion_on_standard_error_and_status_2() {
    let ws = tempfile::tempdir().unwrap();
    for (args, said) in [
        (&["sessions", "lsit"][..], "a similar subcommand exists: 'list'"),
        (&["sesions", "list"], "a similar subcommand exists: 'sessions'"),
        (&["sessions", "list", "--jsno"], "a similar argument exists: '--json'"),
        (&["sessions", "serach", "x"], "a similar subcommand exists: 'search'"),
    ] {
        let (code, out, err) = cli(ws.path(), args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert!(err.starts_with("error: ") && err.contains(said) && err.contains("Usage: pseudoclaude"), "{err}");
    }
    // An option of another verb is named as such.
    let (code, _, err) = cli(ws.path(), &["sessions", "check", "x", "--external"]);
    assert!(code == 2 && err.contains("--external is an option of `sessions list` and `sessions search`"), "{err}");
    let (code, _, err) = cli(ws.path(), &["sessions", "list", "--external", "--limit", "3"]);
    assert!(code == 2 && err.contains("'--external' cannot be used with '--limit <N>'"), "{err}");
}

// --- JSON shapes --------------------------------------------------------------------------------

/// One row of a table in doc/cli.md: the JSON types allowed, and whether the field may be absent.
#[derive(Debug)]
struct Field {
    types: Vec<String>,
    optional: bool,
}

/// The table under the heading naming `verb` (e.g. "sessions show ID --json"): path -> field.
fn documented(verb: &str) -> BTreeMap<String, Field> {
    let doc = doc();
    let heading = format!("### `{verb}`\n");
    let start = doc.find(&heading).unwrap_or_else(|| panic!("doc/cli.md has no {heading:?}"));
    let section = &doc[start + heading.len()..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let mut fields = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let path = cells[0].trim_start_matches("| `").trim_end_matches('`').to_string();
        let (types, optional) = match cells[1].strip_suffix(", optional") {
            Some(t) => (t, true),
            None => (cells[1], false),
        };
        fields.insert(path, Field { types: types.split(" or ").map(str::to_string).collect(), optional });
    }
    assert!(!fields.is_empty(), "no fields under {heading:?}");
    fields
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The documented path `path` matches: a key of an object documented with `*` matches any key.
fn lookup<'a>(fields: &'a BTreeMap<String, Field>, path: &str) -> Option<(&'a String, &'a Field)> {
    fields.iter().find(|(p, _)| {
        let (p, path) = (p.replace("[]", ".[]"), path.replace("[]", ".[]"));
        let (a, b): (Vec<&str>, Vec<&str>) = (p.split('.').collect(), path.split('.').collect());
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x == y || (*x == "*" && *y != "[]"))
    })
}

/// Checks `v` (at `path`) and everything in it against `fields`; records the documented paths seen.
fn check_shape(fields: &BTreeMap<String, Field>, path: &str, v: &Value, seen: &mut Vec<String>) {
    // An array's elements are objects whose fields are documented (`[].id`): the path is implied.
    let implied = fields.keys().any(|p| p.starts_with(&format!("{path}.")));
    let mut doc_path = path.to_string();
    if !path.is_empty() {
        match lookup(fields, path) {
            Some((p, field)) => {
                let t = type_of(v);
                let ok = field.types.iter().any(|d| d == "any" || d == t || (d == "number" && t == "integer"));
                assert!(ok, "{path}: a {t}, documented as {:?}: {v}", field.types);
                seen.push(p.clone());
                doc_path = p.clone();
            }
            None => assert!(implied && v.is_object(), "{path} is not documented: {v}"),
        }
    }
    match v {
        Value::Array(items) => items.iter().for_each(|i| check_shape(fields, &format!("{path}[]"), i, seen)),
        Value::Object(map) if lookup(fields, path).is_none_or(|(_, f)| f.types != ["any"]) => {
            let prefix = if path.is_empty() { String::new() } else { format!("{path}.") };
            // Every required field of this object is there.
            let doc_prefix = if doc_path.is_empty() { String::new() } else { format!("{doc_path}.") };
            for (p, f) in fields {
                if let Some(key) = p.strip_prefix(&doc_prefix)
                    && !key.contains(['.', '[', '*'])
                    && !f.optional
                {
                    assert!(map.contains_key(key), "{prefix}{key} is missing: {v}");
                }
            }
            for (k, item) in map {
                check_shape(fields, &format!("{prefix}{k}"), item, seen);
            }
        }
        _ => {}
    }
}

/// Parses `out` and checks it against the table of `verb`; returns the value and the paths seen.
fn parse_checked(verb: &str, out: &str, seen: &mut Vec<String>) -> Value {
    let v: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{verb}: {e}: {out}"));
    assert!(out.ends_with("}\n") || out.ends_with("]\n"), "{verb}: one value and a newline");
    check_shape(&documented(verb), "", &v, seen);
    v
}

/// Every field of `verb`'s table but the `except` ones was in the outputs checked.
fn all_seen(verb: &str, seen: &[String], except: &[&str]) {
    for path in documented(verb).keys() {
        assert!(seen.contains(path) || except.contains(&path.as_str()), "{verb}: {path} was never shown by the test");
    }
}

#[test]
fn every_json_output_has_the_shape_doc_cli_md_gives_it() {
    let ws = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let tools = session_with_tools(ws.path());
    let usage = session_with_usage(ws.path());
    let (_, forked, _) = cli(ws.path(), &["sessions", "fork", &tools.id, "4"]);
    cli(ws.path(), &["sessions", "pin", &usage.id]);
    // A damaged log: a bad line, a repaired line, an interrupted answer, a torn tail.
    let damaged = Context::new(ws.path()).unwrap();
    let w = Writer::open(&damaged, WriterOptions { model: "m1".into(), ..Default::default() }).unwrap();
    w.append(&Message::user("why?")).unwrap();
    w.checkpoint("a1", 0, "Because").unwrap();
    drop(w);
    let mut log = fs::read(&damaged.jsonl_path).unwrap();
    log.splice(0..0, b"garbage\n{\"role\":\"user\",\"content\":\"caf\xe9\"}\n".iter().copied());
    log.extend_from_slice(b"{\"role\":\"us");
    fs::write(&damaged.jsonl_path, log).unwrap();
    // An answer after thinking: an Anthropic block with its signature, a redacted one.
    let thinker = session(ws.path(), "think first");
    let w = Writer::open(&thinker, WriterOptions::default()).unwrap();
    let mut answer = Message::assistant("thought it through");
    let block = |kind: &str, thinking: &str, signature: &str, data: &str| Thinking {
        kind: kind.into(),
        thinking: thinking.into(),
        signature: signature.into(),
        data: data.into(),
    };
    answer.thinking = vec![block("thinking", "hmm", "sig", ""), block("redacted_thinking", "", "", "enc")];
    answer.thinking_ms = 1200;
    w.append(&Message { turn: 1, ..Message::user("and then?") }).unwrap();
    // What the agent did to the files in that turn (the `files` entries a checkpoint writes).
    let change = |path: &str, before: Option<&str>, after: Option<&str>| FileChange {
        path: path.into(),
        before: before.map(str::to_string),
        after: after.map(str::to_string),
        added: 2,
        removed: 1,
        by: None,
    };
    let record = |seq: u64, by: &str, changes: Vec<FileChange>| FilesRecord {
        seq,
        turn: 1,
        by: by.into(),
        changes,
        ..Default::default()
    };
    w.append_entry(Entry::files(record(1, "user", vec![]), 1)).unwrap();
    let big = format!("big:{}:1", 20 << 20);
    w.append_entry(Entry::files(
        record(
            2,
            "agent",
            vec![change("a.rs", Some(&"a".repeat(64)), Some(&"b".repeat(64))), change("big.bin", Some(&big), None)],
        ),
        2,
    ))
    .unwrap();
    w.append(&answer).unwrap();
    // A worktree chat's session (issue 47): the `meta` entry naming its worktree.
    let tree = WorktreeMeta { name: "t".into(), branch: "pseudoclaude/t".into(), path: ws.path().join("t") };
    w.append_entry(Entry::meta_worktree(tree, 3)).unwrap();
    drop(w);
    let prices = files.path().join("prices.json");
    fs::write(&prices, r#"{"fake-model": {"input": 2, "output": 8}, "m1": {"input": 1, "output": 1}}"#).unwrap();

    let list = "sessions list --json";
    let mut list_seen = Vec::new();
    let (code, out, _) = cli(ws.path(), &["sessions", "list", "--json", "--pricing", prices.to_str().unwrap()]);
    assert_eq!(code, 0);
    let v = parse_checked(list, &out, &mut list_seen);
    assert_eq!(v.as_array().map(Vec::len), Some(5), "{v}");
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--json", "--all", "--limit", "2"]);
    parse_checked(list, &out, &mut list_seen);

    let verb = "sessions show ID --json";
    let mut seen = Vec::new();
    for id in [&tools.id, &usage.id, &damaged.id, forked.trim(), &thinker.id] {
        let (_, out, _) = cli(ws.path(), &["sessions", "show", id, "--json"]);
        let v = parse_checked(verb, &out, &mut seen);
        assert_eq!(v["id"], *id);
    }
    // Nothing sets git_start's branch alone, nor a spill problem's text, in these sessions.
    all_seen(verb, &seen, &["spill_problems[]"]);

    let verb = "sessions changes ID --json";
    let mut seen = Vec::new();
    let (code, out, _) = cli(ws.path(), &["sessions", "changes", &thinker.id, "--json"]);
    assert_eq!(code, 0);
    let v = parse_checked(verb, &out, &mut seen);
    assert_eq!(v[0]["files"].as_array().map(Vec::len), Some(2), "{v}");
    all_seen(verb, &seen, &[]);
    let (_, text, _) = cli(ws.path(), &["sessions", "changes", &thinker.id]);
    assert_eq!(text, "3 modified a.rs +2 -1\n3 deleted big.bin +2 -1 [not restorable]\n");

    let verb = "sessions check ID --json";
    let mut seen = Vec::new();
    let guard = pseudoclaude::session::lock::acquire(&tools).unwrap();
    for id in [&tools.id, &damaged.id] {
        let (_, out, _) = cli(ws.path(), &["sessions", "check", id, "--json"]);
        parse_checked(verb, &out, &mut seen);
    }
    drop(guard);
    all_seen(verb, &seen, &["spill_problems[]"]);

    let search = "sessions search TEXT --json";
    let mut search_seen = Vec::new();
    for text in ["big", "read_file", "row 7"] {
        let (code, out, _) = cli(ws.path(), &["sessions", "search", text, "--json"]);
        assert_eq!(code, 0, "{text}");
        parse_checked(search, &out, &mut search_seen);
    }

    let verb = "sessions list --external --json";
    let mut seen = Vec::new();
    let home = files.path().join("claude");
    let folder = pseudoclaude::import::claude_code::folder_name(&ws.path().canonicalize().unwrap());
    let transcript = home.join("projects").join(folder).join("s1.jsonl");
    fs::create_dir_all(transcript.parent().unwrap()).unwrap();
    let record = |kind: &str, uuid: &str, parent: Option<&str>, message: Value| {
        serde_json::json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
            "cwd": ws.path().canonicalize().unwrap(), "gitBranch": "main", "isSidechain": false,
            "timestamp": "2026-11-30T10:00:00.000Z", "message": message})
    };
    let lines = [
        record("user", "u1", None, serde_json::json!({"role": "user", "content": "port the lexer"})),
        record(
            "assistant",
            "a1",
            Some("u1"),
            serde_json::json!({"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Done."}]}),
        ),
    ];
    fs::write(&transcript, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let out = Command::new(BIN)
        .arg("-C")
        .arg(ws.path())
        .args(["sessions", "list", "--external", "--json"])
        .env("CLAUDE_CONFIG_DIR", &home)
        .env("CODEX_HOME", files.path().join("no-codex"))
        .output()
        .unwrap();
    let v = parse_checked(verb, &String::from_utf8_lossy(&out.stdout), &mut seen);
    assert_eq!((v[0]["source"].as_str(), v[0]["messages"].as_u64()), (Some("claude-code"), Some(2)), "{v}");
    all_seen(verb, &seen, &["[].unsupported", "[].notes", "[].partial"]);

    // The same transcript found by an external search: its hit names the agent.
    let out = Command::new(BIN)
        .arg("-C")
        .arg(ws.path())
        .args(["sessions", "search", "--external", "lexer", "--json"])
        .env("CLAUDE_CONFIG_DIR", &home)
        .env("CODEX_HOME", files.path().join("no-codex"))
        .output()
        .unwrap();
    let v = parse_checked(search, &String::from_utf8_lossy(&out.stdout), &mut search_seen);
    assert_eq!(v[0]["agent"], "claude", "{v}");
    all_seen(search, &search_seen, &[]);

    // Imported, it is one of ours that names where it came from (`imported_from`).
    let out = Command::new(BIN)
        .arg("-C")
        .arg(ws.path())
        .args(["sessions", "import", "claude:s1"])
        .env("CLAUDE_CONFIG_DIR", &home)
        .env("CODEX_HOME", files.path().join("no-codex"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, out, _) = cli(ws.path(), &["sessions", "list", "--json"]);
    let v = parse_checked(list, &out, &mut list_seen);
    assert!(v.as_array().unwrap().iter().any(|r| r["imported_from"]["id"] == "s1"), "{v}");
    // A kept copy (`external.keep`) is made by the editor, never by the CLI.
    all_seen(list, &list_seen, &["[].partial", "[].imported_from.kept"]);
}

// --- Completion ---------------------------------------------------------------------------------

/// Runs `script` in an interactive bash (`bash -i`: programmable completion on, as in a terminal)
/// with the binary's folder first on `PATH`, in `cwd`; returns standard output.
fn interactive_bash(home: &Path, cwd: &Path, script: &str) -> String {
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-i", "-c", script])
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into()
}

/// What bash offers for the line `line` (the cursor at its end), through the function the loaded
/// script registered for `pseudoclaude`, called as readline calls it.
fn bash_completions(home: &Path, cwd: &Path, line: &str) -> Vec<String> {
    let script = format!(
        r#"source <(pseudoclaude completions bash) || exit 1
spec=$(complete -p pseudoclaude) || exit 1
fn=${{spec##*-F }}; fn=${{fn%% *}}
COMP_LINE={line:?}; COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_TYPE=9
"$fn" pseudoclaude "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#
    );
    interactive_bash(home, cwd, &script).lines().map(str::to_string).collect()
}

#[test]
fn the_bash_script_completes_session_ids_newest_first_verbs_and_options() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("project");
    fs::create_dir(&ws).unwrap();
    let older = session(&ws, "older");
    let newer = session(&ws, "newer");
    let newest = session(&ws, "newest");
    let ids = vec![newest.id.clone(), newer.id.clone(), older.id.clone()];
    // The ids first, then the verb's options.
    let ids_then_options = |offered: Vec<String>| {
        assert!(offered.len() > 3 && offered[3..].iter().all(|o| o.starts_with('-')), "{offered:?}");
        offered[..3].to_vec()
    };
    // Ids from the current directory's workspace, the most recently active first.
    assert_eq!(ids_then_options(bash_completions(home.path(), &ws, "pseudoclaude sessions show ")), ids);
    // From the line's -C, wherever the shell is; `~/` as typed.
    let line = "pseudoclaude -C project sessions check ";
    assert_eq!(ids_then_options(bash_completions(home.path(), home.path(), line)), ids);
    let line = format!("pseudoclaude sessions fork -C {} ", ws.display());
    assert_eq!(ids_then_options(bash_completions(home.path(), Path::new("/"), &line)), ids);
    let line = "pseudoclaude --workspace ~/project sessions pin ";
    assert_eq!(ids_then_options(bash_completions(home.path(), Path::new("/"), line)), ids);
    // A prefix completes to the one id it starts.
    let unique = &older.id[..older.id.len() - 1];
    let matching: Vec<&String> = ids.iter().filter(|i| i.starts_with(unique)).collect();
    assert_eq!(
        bash_completions(home.path(), &ws, &format!("pseudoclaude sessions export {unique}"))
            .iter()
            .collect::<Vec<_>>(),
        matching
    );
    // `open` offers `last` first.
    let open = bash_completions(home.path(), &ws, "pseudoclaude sessions open ");
    assert_eq!(&open[..4], &["last".to_string(), ids[0].clone(), ids[1].clone(), ids[2].clone()], "{open:?}");
    // Verbs and options.
    assert_eq!(bash_completions(home.path(), &ws, "pseudoclaude sessions se"), ["search"]);
    assert!(bash_completions(home.path(), &ws, "pseudoclaude sessions list --").contains(&"--pricing".to_string()));
    assert_eq!(bash_completions(home.path(), &ws, "pseudoclaude sessions pin x ")[..2], ["on", "off"]);
    assert_eq!(bash_completions(home.path(), &ws, "pseudoclaude completions ")[..3], ["bash", "zsh", "fish"]);
}

/// Types `typed` and <Tab> in `shell` (its argv) running in a terminal (tmux) in `dir`, with `env`;
/// returns the screen once it shows `expect` (or fails, showing it, after 20 s).
fn tab_in_terminal(dir: &Path, shell: &[&str], env: &[(&str, &Path)], typed: &str, expect: &str) -> String {
    let socket = dir.join(format!("tmux-{}.sock", shell[0])); // one server a shell: a killed one may linger
    let tmux = |args: &[&str]| Command::new("tmux").arg("-S").arg(&socket).args(args).output().unwrap();
    let mut start = vec!["new-session", "-d", "-x", "200", "-y", "20", "-c", dir.to_str().unwrap()];
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={}", v.display())).collect();
    for e in &env {
        start.extend(["-e", e.as_str()]);
    }
    start.extend(shell);
    let started = tmux(&start);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let screen = || String::from_utf8_lossy(&tmux(&["capture-pane", "-p"]).stdout).to_string();
    let wait_for = |what: &dyn Fn(&str) -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let s = screen();
            if what(&s) {
                return s;
            }
            if std::time::Instant::now() > deadline {
                tmux(&["kill-server"]);
                panic!("timed out; the screen:\n{s}");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    // The shell is ready (its startup file read) when it runs a command.
    tmux(&["send-keys", "-l", "echo READY"]);
    tmux(&["send-keys", "Enter"]);
    wait_for(&|s| s.lines().any(|l| l.trim() == "READY"));
    tmux(&["send-keys", "-l", typed]);
    tmux(&["send-keys", "Tab"]);
    let s = wait_for(&|s| s.contains(expect));
    tmux(&["kill-server"]);
    s
}

/// The keys a user types: `pseudoclaude sessions show <unique prefix><Tab>` in bash and in zsh in a
/// terminal, each with the script `completions` printed for it loaded by its startup file; the line
/// becomes the whole id.
#[test]
fn tab_in_a_real_terminal_completes_a_session_id_in_bash_and_zsh() {
    let ws = tempfile::tempdir().unwrap();
    let a = session(ws.path(), "a");
    let b = session(ws.path(), "b");
    let typed = format!("pseudoclaude sessions show {}", unique_prefix(&a.id, &b.id));
    let expect = format!("pseudoclaude sessions show {}", a.id);
    let path = format!("{}:{}", Path::new(BIN).parent().unwrap().display(), std::env::var("PATH").unwrap());
    let rc = ws.path().join("bashrc");
    fs::write(&rc, format!("PS1='$ '\nexport PATH={path}\nsource <(pseudoclaude completions bash)\n")).unwrap();
    let bash = ["bash", "--noprofile", "--rcfile", rc.to_str().unwrap(), "-i"];
    assert!(tab_in_terminal(ws.path(), &bash, &[], &typed, &expect).contains(&a.id));
    let zdotdir = ws.path().join("zsh");
    fs::create_dir(&zdotdir).unwrap();
    fs::write(
        zdotdir.join(".zshrc"),
        format!("export PATH={path}\nautoload -U compinit && compinit -u\nsource <(pseudoclaude completions zsh)\n"),
    )
    .unwrap();
    let zsh = ["zsh", "-i"];
    assert!(tab_in_terminal(ws.path(), &zsh, &[("ZDOTDIR", &zdotdir)], &typed, &expect).contains(&a.id));
}

/// fish answers `complete -C LINE` without a terminal: the ids in order, `last` first for `open`.
#[test]
fn the_fish_script_completes_session_ids_newest_first() {
    let ws = tempfile::tempdir().unwrap();
    let older = session(ws.path(), "older");
    let newer = session(ws.path(), "newer");
    let path = format!("{}:{}", Path::new(BIN).parent().unwrap().display(), std::env::var("PATH").unwrap());
    let out = Command::new("fish")
        .args(["--no-config", "-c"])
        .arg(
            "pseudoclaude completions fish | source; complete -C 'pseudoclaude sessions show '; echo ---; \
             complete -C 'pseudoclaude sessions open '",
        )
        .current_dir(ws.path())
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    let (show, open) = out.split_once("---\n").unwrap();
    let show: Vec<&str> = show.lines().collect();
    assert_eq!(show[..2], [newer.id.as_str(), older.id.as_str()], "{out}");
    assert!(show[2..].iter().all(|l| l.starts_with('-')), "then the options: {out}");
    let open: Vec<&str> = open.lines().take(3).collect();
    assert_eq!(open, ["last\tthe newest session", newer.id.as_str(), older.id.as_str()], "{out}");
}

fn unique_prefix(id: &str, other: &str) -> String {
    let common = id.chars().zip(other.chars()).take_while(|(x, y)| x == y).count();
    id[..common + 1].to_string()
}

// --- open ---------------------------------------------------------------------------------------

/// A stand-in for Neovim that records its working directory and arguments, a line each.
fn fake_nvim(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let record = dir.join(format!("{name}.args"));
    let script = dir.join(name);
    fs::write(
        &script,
        format!("#!/bin/sh\npwd > '{}'\nprintf '%s\\n' \"$@\" >> '{}'\n", record.display(), record.display()),
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    (script, record)
}

fn open(ws: &Path, nvim: Option<&Path>, path: Option<&Path>, args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("-C").arg(ws).args(["sessions", "open"]).args(args).env_remove("PSEUDOCLAUDE_NVIM");
    if let Some(nvim) = nvim {
        cmd.env("PSEUDOCLAUDE_NVIM", nvim);
    }
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn open_starts_neovim_in_the_workspace_with_the_session_resumed() {
    let ws = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let (nvim, record) = fake_nvim(bin.path(), "fake-nvim");
    let read = || {
        let text = fs::read_to_string(&record).unwrap();
        fs::remove_file(&record).unwrap();
        text
    };
    let wsc = ws.path().canonicalize().unwrap();
    let (code, err) = open(ws.path(), Some(&nvim), None, &["last"]);
    assert!(code == 2 && err.contains("no session to resume in"), "{err}");
    assert!(!record.exists(), "Neovim is not started for nothing");
    let old = session(ws.path(), "old");
    let new = session(ws.path(), "new");
    let (code, err) = open(ws.path(), Some(&nvim), None, &[&old.id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read(), format!("{}\n-c\nPseudoResume {}\n", wsc.display(), old.id));
    let (code, _) = open(ws.path(), Some(&nvim), None, &["last"]);
    assert_eq!((code, read()), (0, format!("{}\n-c\nPseudoResume {}\n", wsc.display(), new.id)));
    let (code, _) = open(ws.path(), Some(&nvim), None, &[]);
    assert_eq!((code, read()), (0, format!("{}\n-c\nPseudoResume\n", wsc.display())), "no id: the picker");
    // Without $PSEUDOCLAUDE_NVIM: `nvim` on PATH.
    let (_, nvim_record) = fake_nvim(bin.path(), "nvim");
    let (code, err) = open(ws.path(), None, Some(bin.path()), &[&new.id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fs::read_to_string(&nvim_record).unwrap(), format!("{}\n-c\nPseudoResume {}\n", wsc.display(), new.id));
    // An unknown id or a missing program: an error in the shell.
    let (code, err) = open(ws.path(), Some(&nvim), None, &["20260101-000000-abcd"]);
    assert!(code == 2 && err.contains("no session 20260101-000000-abcd"), "{err}");
    let (code, err) = open(ws.path(), Some(&nvim), None, &["../../etc"]);
    assert!(code == 2 && err.contains("invalid session id"), "{err}");
    assert!(!record.exists());
    let missing = bin.path().join("no-such-nvim");
    let (code, err) = open(ws.path(), Some(&missing), None, &[&new.id]);
    assert!(
        code == 2 && err.contains(&format!("cannot start {} ($PSEUDOCLAUDE_NVIM): No such file", missing.display())),
        "{err}"
    );
}
