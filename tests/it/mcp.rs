//! The MCP client against real servers nobody here wrote (installed by scripts/ensure-mcp into .deps/mcp):
//! `@modelcontextprotocol/server-everything` and `mcp-server-time`; and against commands that are no server
//! at all (one that exits at once, one that never answers).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use pseudoclaude::mcp::{McpConfig, ServerConfig, Servers, State};
use serde_json::json;

/// Installed once per run: the tests run on parallel threads, and two installs into one folder would race.
fn deps() -> PathBuf {
    static DEPS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DEPS.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let out = std::process::Command::new(root.join("scripts/ensure-mcp")).output().expect("run scripts/ensure-mcp");
        assert!(out.status.success(), "scripts/ensure-mcp failed: {}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
    .clone()
}

fn everything(deps: &std::path::Path) -> ServerConfig {
    ServerConfig::stdio(deps.join("npm/node_modules/.bin/mcp-server-everything").display().to_string(), vec![])
}

fn time_server(deps: &std::path::Path) -> ServerConfig {
    ServerConfig {
        command: "python3".into(),
        args: vec!["-m".into(), "mcp_server_time".into(), "--local-timezone".into(), "UTC".into()],
        env: BTreeMap::from([("PYTHONPATH".to_string(), deps.join("python").display().to_string())]),
        ..ServerConfig::default()
    }
}

fn sh(script: &str) -> ServerConfig {
    ServerConfig::stdio("sh", vec!["-c".into(), script.into()])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn servers(rt: &tokio::runtime::Runtime, list: Vec<(&str, ServerConfig)>, timeout: f64) -> Servers {
    let config = McpConfig {
        servers: list.into_iter().map(|(n, c)| (n.to_string(), c)).collect(),
        timeout,
        ..McpConfig::default()
    };
    let ws = std::env::temp_dir();
    Servers::new(&config, BTreeMap::new(), &ws, rt.handle().clone())
}

#[test]
fn the_real_servers_list_their_tools_and_answer_calls() {
    let deps = deps();
    let rt = runtime();
    let s = servers(&rt, vec![("everything", everything(&deps)), ("time", time_server(&deps))], 60.0);
    s.start();
    rt.block_on(s.settled());
    let status = s.status();
    assert!(status.iter().all(|x| x.state == State::Running), "{status:?}");
    let names: Vec<String> = s.specs().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"mcp__everything__echo".to_string()), "{names:?}");
    assert!(names.contains(&"mcp__time__get_current_time".to_string()), "{names:?}");
    let echo = s.specs().into_iter().find(|t| t.name == "mcp__everything__echo").unwrap();
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string", "{}", echo.input_schema);

    assert_eq!(s.resolve("mcp__everything__echo"), Some(("everything".into(), "echo".into())));
    let out = rt.block_on(s.call("everything", "echo", json!({"message": "hello from the test"})));
    assert!(!out.is_error, "{out:?}");
    assert!(out.content.contains("hello from the test"), "{out:?}");

    let image = rt.block_on(s.call("everything", "get-tiny-image", json!({})));
    assert!(!image.is_error, "{image:?}");
    assert_eq!(image.blobs.len(), 1, "{image:?}");
    assert_eq!(image.blobs[0].mime, "image/png");
    assert!(image.blobs[0].bytes.starts_with(b"\x89PNG"), "not a PNG");
    assert!(image.content.contains("{{blob:0}}"), "{}", image.content);

    let structured = rt.block_on(s.call("everything", "get-structured-content", json!({"location": "New York"})));
    assert!(structured.content.contains("[structured content]"), "{}", structured.content);

    let now = rt.block_on(s.call("time", "get_current_time", json!({"timezone": "UTC"})));
    assert!(!now.is_error, "{now:?}");
    assert!(now.content.contains("UTC"), "{}", now.content);

    let bad = rt.block_on(s.call("everything", "no-such-tool", json!({})));
    assert!(bad.is_error && bad.content.contains("no tool"), "{bad:?}");
}

#[test]
fn a_server_that_exits_at_once_is_failed_with_its_stderr_and_restarted_at_most_three_times() {
    let rt = runtime();
    let marker = tempfile::tempdir().unwrap();
    let count = marker.path().join("starts");
    let script = format!("echo started >> {}; echo 'no such database' >&2; exit 3", count.display());
    let s = servers(&rt, vec![("broken", sh(&script))], 10.0);
    s.start();
    rt.block_on(s.settled());
    let st = &s.status()[0];
    assert_eq!(st.state, State::Failed, "{st:?}");
    assert!(st.error.as_deref().unwrap_or("").contains("no such database"), "{st:?}");
    assert!(s.specs().is_empty());
    for _ in 0..5 {
        let out = rt.block_on(s.call("broken", "anything", json!({})));
        assert!(out.is_error, "{out:?}");
        assert!(out.content.contains("broken"), "{}", out.content);
    }
    let starts = std::fs::read_to_string(&count).unwrap().lines().count();
    assert_eq!(starts, 4, "one start and three restarts");
    let last = rt.block_on(s.call("broken", "anything", json!({})));
    assert!(last.content.contains("restarted 3 times"), "{}", last.content);
}

#[test]
fn a_server_that_never_answers_fails_its_start_within_the_timeout() {
    let rt = runtime();
    let s = servers(&rt, vec![("mute", sh("exec sleep 600"))], 1.0);
    let t = std::time::Instant::now();
    s.start();
    rt.block_on(s.settled());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let st = &s.status()[0];
    assert_eq!(st.state, State::Failed);
    assert!(st.error.as_deref().unwrap_or("").contains("within 1 s"), "{st:?}");
}

#[test]
fn a_call_longer_than_the_timeout_is_cancelled_and_the_server_stays_up() {
    let deps = deps();
    let rt = runtime();
    let s = servers(&rt, vec![("everything", everything(&deps))], 2.0);
    s.start();
    rt.block_on(s.settled());
    let t = std::time::Instant::now();
    let out = rt.block_on(s.call("everything", "trigger-long-running-operation", json!({"duration": 30, "steps": 3})));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(out.is_error && out.content.contains("did not answer"), "{out:?}");
    let echo = rt.block_on(s.call("everything", "echo", json!({"message": "still here"})));
    assert!(echo.content.contains("still here"), "{echo:?}");
}

/// `server-everything` in its streamable-HTTP mode on 127.0.0.1, killed with its process when dropped.
struct HttpEverything {
    child: std::process::Child,
    port: u16,
}

impl HttpEverything {
    /// Started on `port` (0: a free one); returns once it listens.
    fn start(deps: &std::path::Path, port: u16) -> HttpEverything {
        use std::io::BufRead;
        let port = if port == 0 {
            std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
        } else {
            port
        };
        let mut child = std::process::Command::new("node")
            .arg(deps.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start server-everything");
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if line.contains("listening on port") {
                break;
            }
            assert!(!line.contains("Failed to start"), "{line}");
        }
        // Keep draining its stderr so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        HttpEverything { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_streamable_http_server_lists_its_tools_answers_calls_and_errors() {
    let deps = deps();
    let server = HttpEverything::start(&deps, 0);
    let rt = runtime();
    let mut cfg = ServerConfig::http(server.url());
    cfg.headers.insert("X-Test-Header".into(), "${PSEUDOCLAUDE_NO_SUCH_VAR:-from-default}".into());
    cfg.transport = Some("http".into());
    let s = servers(&rt, vec![("web", cfg)], 30.0);
    s.start();
    rt.block_on(s.settled());
    let st = &s.status()[0];
    assert_eq!(st.state, State::Running, "{st:?}");
    let names: Vec<String> = s.specs().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"mcp__web__echo".to_string()), "{names:?}");
    assert!(names.contains(&"mcp__web__get-sum".to_string()), "{names:?}");

    let out = rt.block_on(s.call("web", "echo", json!({"message": "over HTTP"})));
    assert!(!out.is_error, "{out:?}");
    assert!(out.content.contains("over HTTP"), "{out:?}");
    let sum = rt.block_on(s.call("web", "get-sum", json!({"a": 2, "b": 40})));
    assert!(sum.content.contains("42"), "{sum:?}");

    // Arguments the tool's schema refuses: the server's error reaches the model, the server stays up.
    let bad = rt.block_on(s.call("web", "get-sum", json!({"a": "two"})));
    assert!(bad.is_error, "{bad:?}");
    let again = rt.block_on(s.call("web", "echo", json!({"message": "still up"})));
    assert!(!again.is_error && again.content.contains("still up"), "{again:?}");
}

#[test]
fn a_streamable_http_server_that_goes_away_is_one_error_and_is_reached_again_at_the_next_call() {
    let deps = deps();
    let server = HttpEverything::start(&deps, 0);
    let port = server.port;
    let rt = runtime();
    let s = servers(&rt, vec![("web", ServerConfig::http(server.url()))], 10.0);
    s.start();
    rt.block_on(s.settled());
    assert_eq!(s.status()[0].state, State::Running, "{:?}", s.status());
    drop(server);

    let gone = rt.block_on(s.call("web", "echo", json!({"message": "anyone?"})));
    assert!(gone.is_error, "{gone:?}");
    assert!(gone.content.contains("\"web\""), "{}", gone.content);
    eprintln!("gone: {}", gone.content);
    assert!(!gone.content.contains('\n') || gone.content.lines().count() < 4, "{}", gone.content);

    // Back on its port (a new process: our session is unknown to it): the next call connects again.
    let _server = HttpEverything::start(&deps, port);
    let back = rt.block_on(s.call("web", "echo", json!({"message": "welcome back"})));
    assert!(!back.is_error && back.content.contains("welcome back"), "{back:?}");
    assert_eq!(s.status()[0].state, State::Running, "{:?}", s.status());
}

#[test]
fn an_http_server_that_is_not_there_fails_with_its_url_and_a_bad_definition_names_the_problem() {
    let rt = runtime();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut sse = ServerConfig::http("http://127.0.0.1:1/sse");
    sse.transport = Some("sse".into());
    let mut both = ServerConfig::stdio("sh", vec![]);
    both.url = Some("http://127.0.0.1:1/mcp".into());
    let mut unset = ServerConfig::http("http://127.0.0.1:1/mcp");
    unset.headers.insert("Authorization".into(), "Bearer ${PSEUDOCLAUDE_NO_SUCH_TOKEN}".into());
    let s = servers(
        &rt,
        vec![
            ("absent", ServerConfig::http(format!("http://127.0.0.1:{port}/mcp"))),
            ("sse", sse),
            ("both", both),
            ("unset", unset),
            ("ftp", ServerConfig::http("ftp://example.com/mcp")),
        ],
        10.0,
    );
    s.start();
    rt.block_on(s.settled());
    let status = s.status();
    let error = |name: &str| status.iter().find(|x| x.name == name).unwrap().error.clone().unwrap_or_default();
    assert!(status.iter().all(|x| x.state == State::Failed), "{status:?}");
    eprintln!("{status:?}");
    assert!(error("absent").contains(&format!("127.0.0.1:{port}")), "{}", error("absent"));
    assert!(error("sse").contains("SSE transport"), "{}", error("sse"));
    assert!(error("both").contains("not both"), "{}", error("both"));
    assert!(error("unset").contains("PSEUDOCLAUDE_NO_SUCH_TOKEN"), "{}", error("unset"));
    assert!(error("ftp").contains("http://"), "{}", error("ftp"));
}

fn changing_server() -> ServerConfig {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/mcp_changing_server.py");
    ServerConfig::stdio("python3", vec![script.display().to_string()])
}

#[test]
fn tool_names_the_providers_refuse_are_mapped_to_valid_stable_unique_names_and_back() {
    let rt = runtime();
    let s = servers(&rt, vec![("my-server", changing_server())], 30.0);
    s.start();
    rt.block_on(s.settled());
    assert_eq!(s.status()[0].state, State::Running, "{:?}", s.status());
    let names: Vec<String> = s.specs().into_iter().map(|t| t.name).collect();
    let valid = regex::Regex::new("^[a-zA-Z0-9_-]{1,64}$").unwrap();
    for n in &names {
        assert!(valid.is_match(n), "{n:?} in {names:?}");
    }
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    // A valid name stays as Claude Code writes it; `files.read` and `files/read` both clean to it: hashed.
    assert!(names.contains(&"mcp__my-server__files_read".to_string()), "{names:?}");
    assert!(names.contains(&"mcp__my-server__add_tool".to_string()), "{names:?}");
    let hashed: Vec<&String> = names.iter().filter(|n| n.starts_with("mcp__my-server__files_read_")).collect();
    assert_eq!(hashed.len(), 2, "{names:?}");
    let long = names.iter().find(|n| n.contains("create_or_update")).unwrap();
    assert_eq!(long.len(), 64, "{long}");

    // Each maps back to the server's own name, and the call reaches it under that name.
    let mut back = std::collections::BTreeSet::new();
    for n in &names {
        let (server, tool) = s.resolve(n).unwrap_or_else(|| panic!("{n} does not resolve"));
        assert_eq!(server, "my-server");
        let out = rt.block_on(s.call(&server, &tool, json!({"x": "1"})));
        assert!(!out.is_error && out.content.contains(&format!("called {tool} with")), "{n}: {out:?}");
        back.insert(tool);
    }
    let expected: std::collections::BTreeSet<String> = [
        "files.read",
        "files_read",
        "files/read",
        "create_or_update_a_repository_file_with_a_very_long_descriptive_name_x",
        "add_tool",
        "added_tool",
    ]
    .into_iter()
    .map(String::from)
    .filter(|t| back.contains(t) || t != "added_tool")
    .collect();
    assert_eq!(back, expected);

    // Stable: the same names from another start of the same server.
    let again = servers(&rt, vec![("my-server", changing_server())], 30.0);
    again.start();
    rt.block_on(again.settled());
    let names_again: Vec<String> = again.specs().into_iter().map(|t| t.name).collect();
    assert_eq!(names_again[..5], names[..5]);
}

#[test]
fn model_names_keep_valid_names_and_clean_hash_the_rest() {
    use pseudoclaude::mcp::model_names;
    let long_tool = "t".repeat(80);
    let names = model_names(&[("s", "ok"), ("s", "a.b"), ("s", "a_b"), ("s", "é"), ("s.x", "y"), ("s", &long_tool)]);
    assert_eq!(names[0], "mcp__s__ok");
    assert_eq!(names[2], "mcp__s__a_b", "the valid one keeps its name");
    assert!(names[1].starts_with("mcp__s__a_b_") && names[1].len() == "mcp__s__a_b_".len() + 8, "{}", names[1]);
    assert_eq!(names[3], "mcp__s___", "{names:?}");
    assert_eq!(names[4], "mcp__s_x__y");
    assert_eq!(names[5].len(), 64);
    assert_eq!(model_names(&[("s", &long_tool)]), vec![names[5].clone()], "stable");
    assert_ne!(model_names(&[("s", &"t".repeat(81))])[0], names[5], "unique past the cut");
}

#[test]
fn a_tool_list_change_is_fetched_before_the_call_that_caused_it_answers() {
    let rt = runtime();
    let trace = tempfile::tempdir().unwrap();
    let trace_file = trace.path().join("requests.jsonl");
    let mut cfg = changing_server();
    cfg.env.insert("MCP_TRACE".into(), trace_file.display().to_string());
    let s = servers(&rt, vec![("changing", cfg)], 30.0);
    s.start();
    rt.block_on(s.settled());
    let names = || s.specs().into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert!(!names().contains(&"mcp__changing__added_tool".to_string()), "{:?}", names());
    let out = rt.block_on(s.call("changing", "add_tool", json!({})));
    assert!(!out.is_error, "{out:?}");
    // No wait: the list the next request offers is the new one as soon as the call returns.
    assert!(names().contains(&"mcp__changing__added_tool".to_string()), "{:?}", names());
    assert!(s.status()[0].tools.contains(&"added_tool".to_string()));
    let added = rt.block_on(s.call("changing", "added_tool", json!({"x": "new"})));
    assert!(!added.is_error && added.content.contains("called added_tool"), "{added:?}");
    let lists = std::fs::read_to_string(&trace_file).unwrap().matches("\"tools/list\"").count();
    assert_eq!(lists, 2, "listed at the start and once after the change");
}

/// Servers of the workspace's `.mcp.json` as the host makes them: answers keyed with `key`, questions collected.
fn workspace_servers(
    rt: &tokio::runtime::Runtime,
    ws: &std::path::Path,
    key: &std::path::Path,
) -> (Servers, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let config = McpConfig { consent_key: Some(key.to_path_buf()), ..McpConfig::default() };
    let s = Servers::new(&config, BTreeMap::new(), ws, rt.handle().clone());
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let a = asked.clone();
    s.on_consent(move |ask| a.lock().unwrap().push(ask.name));
    (s, asked)
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_workspace_server_starts_only_after_yes_for_its_exact_definition() {
    let deps = deps();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let key = dir.path().join("state/mcp-consent.key");
    let marker = dir.path().join("started");
    let everything = everything(&deps).command;
    let write = |extra: &str| {
        let script = format!("echo x >> {}; {extra} exec {everything}", marker.display());
        let def = json!({"mcpServers": {"repo": {"type": "stdio", "command": "sh", "args": ["-c", script]}}});
        std::fs::write(ws.join(".mcp.json"), def.to_string()).unwrap();
    };
    let starts = || std::fs::read_to_string(&marker).map(|t| t.lines().count()).unwrap_or(0);
    write("");

    let (s, asked) = workspace_servers(&rt, &ws, &key);
    s.start();
    wait_until("the question", || asked.lock().unwrap().len() == 1);
    assert_eq!(s.status()[0].state, State::AwaitingConsent);
    // a first chat waits for the answer
    assert!(rt.block_on(async { tokio::time::timeout(Duration::from_millis(300), s.settled()).await }).is_err());
    assert_eq!(starts(), 0, "started before the user agreed");
    s.answer("repo", "yes").unwrap();
    rt.block_on(s.settled());
    assert_eq!(s.status()[0].state, State::Running, "{:?}", s.status());
    assert_eq!(starts(), 1);
    assert!(s.specs().iter().any(|t| t.name == "mcp__repo__echo"));
    drop(s);

    // The same definition: started without a question.
    let (s, asked) = workspace_servers(&rt, &ws, &key);
    s.start();
    rt.block_on(s.settled());
    assert!(asked.lock().unwrap().is_empty());
    assert_eq!(s.status()[0].state, State::Running);
    assert_eq!(starts(), 2);
    drop(s);

    // Changed: asked again; "no" is remembered and never starts it.
    write("true;");
    let (s, asked) = workspace_servers(&rt, &ws, &key);
    s.start();
    wait_until("the question about the changed definition", || asked.lock().unwrap().len() == 1);
    s.answer("repo", "no").unwrap();
    rt.block_on(s.settled());
    assert_eq!(s.status()[0].state, State::Stopped);
    drop(s);
    let (s, asked) = workspace_servers(&rt, &ws, &key);
    s.start();
    rt.block_on(s.settled());
    assert!(asked.lock().unwrap().is_empty());
    let st = &s.status()[0];
    assert!(st.state == State::Stopped && st.error.as_deref().unwrap_or("").contains("declined"), "{st:?}");
    assert_eq!(starts(), 2);
    // ... until asked again.
    assert_eq!(s.ask_again(None).unwrap(), 1);
    s.answer("repo", "yes").unwrap();
    rt.block_on(s.settled());
    assert_eq!(s.status()[0].state, State::Running);
    assert_eq!(starts(), 3);
    drop(s);

    // Another key (another user, or a repository shipping its own answers file) is no answer.
    let (s, asked) = workspace_servers(&rt, &ws, &dir.path().join("other.key"));
    s.start();
    wait_until("the question under another key", || asked.lock().unwrap().len() == 1);
    assert_eq!(starts(), 3);
}

#[test]
fn a_damaged_mcp_json_is_one_failed_row_naming_the_problem() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".mcp.json"), "{ not json").unwrap();
    let (s, _) = workspace_servers(&rt, dir.path(), &dir.path().join("k"));
    s.load();
    let st = s.status();
    assert_eq!(st.len(), 1);
    assert!(st[0].state == State::Failed && st[0].error.as_deref().unwrap().contains("not valid JSON"), "{st:?}");
    std::fs::write(dir.path().join(".mcp.json"), r#"{"mcpServers": {"a.b": {"command": "x"}, "ok": {"url": 3}}}"#)
        .unwrap();
    let (s, _) = workspace_servers(&rt, dir.path(), &dir.path().join("k"));
    s.load();
    let st = s.status();
    assert!(st.iter().all(|r| r.state == State::Failed), "{st:?}");
    assert!(st[0].error.as_deref().unwrap().contains("letters, digits"), "{st:?}");
}

#[test]
fn a_servers_resources_are_listed_at_its_start_and_read_by_uri() {
    let deps = deps();
    let rt = runtime();
    let s = servers(&rt, vec![("everything", everything(&deps)), ("time", time_server(&deps))], 60.0);
    s.start();
    rt.block_on(s.settled());
    let listed = s.resources();
    let doc = "demo://resource/static/document/architecture.md";
    let found = listed.iter().find(|r| r.resource.uri == doc).unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(found.server, "everything");
    assert_eq!(found.resource.name, "architecture.md");
    assert!(listed.iter().all(|r| r.server == "everything"), "mcp-server-time has no resources: {listed:?}");

    let contents = rt.block_on(s.read_resource("everything", doc)).unwrap();
    let (text, mime) = pseudoclaude::mcp::resource_text(&contents);
    let on_disk = std::fs::read_to_string(
        deps.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/docs/architecture.md"),
    )
    .unwrap();
    assert_eq!(text, on_disk);
    assert_eq!(mime.as_deref(), Some("text/markdown"));

    // A URI of its templates (not listed) reads too; a binary one is a line with its type and size.
    let blob = rt.block_on(s.read_resource("everything", "demo://resource/dynamic/blob/1")).unwrap();
    let (text, _) = pseudoclaude::mcp::resource_text(&blob);
    assert!(text.starts_with("[binary ") && text.contains(" bytes: demo://resource/dynamic/blob/1]"), "{text}");

    let missing = rt.block_on(s.read_resource("everything", "demo://no/such/thing")).unwrap_err();
    assert!(missing.contains("\"everything\"") && missing.contains("demo://no/such/thing"), "{missing}");
    let no_server = rt.block_on(s.read_resource("nobody", doc)).unwrap_err();
    assert!(no_server.contains("no MCP server \"nobody\""), "{no_server}");
}
