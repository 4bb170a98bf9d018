//! The HTTP provider against fake APIs speaking the real wire formats (Anthropic's Messages, OpenAI's
//! Chat Completions), which refuse (400) any request breaking the API's rules.
//!
//! The shared scenarios below run once per format (`<scenario>::anthropic`, `<scenario>::openai`):
//! each is an `async fn(Format)`, and [`wire::Format`] is the table of what differs (how to build the
//! provider, the scripted bytes of each answer, where the key goes). What only one format has (the
//! bodies sent, prompt caching, usage details, the fakes' own rules) is in `anthropic.rs` and `openai.rs`.

mod anthropic;
mod openai;
mod wire;

use std::time::{Duration, Instant};

use crate::support::client::{ask, assert_all_valid, deltas, retries, run, set_key};
use crate::support::{FakeServer, Reply, SSE_INPUT_TOKENS, SSE_OUTPUT_TOKENS, crlf, refused_base_url, split_awkwardly};
use pseudoclaude::message::{Message, ToolCall};
use pseudoclaude::provider::{ProviderConfig, ProviderError, StreamEvent};
use serde_json::json;
use wire::Format;

/// For each scenario `name`, a module `name` with one test per format.
macro_rules! for_both_formats {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn anthropic() {
                super::$name(super::Format::Anthropic).await
            }
            #[tokio::test]
            async fn openai() {
                super::$name(super::Format::OpenAi).await
            }
        }
    )*};
}

for_both_formats!(
    text_streams_as_deltas_and_comes_back_whole,
    two_parallel_tool_calls_come_back_with_their_arguments,
    calls_and_their_results_sent_back_pass_the_api_rules,
    a_tool_without_arguments_has_empty_arguments,
    crlf_line_endings_parse_the_same,
    the_key_travels_in_its_header,
    an_unset_key_is_sent_without_header_and_reported_as_not_set,
    base_url_with_or_without_a_trailing_slash,
    unauthorized_names_the_env_var_hides_the_key_and_is_not_retried,
    forbidden_is_an_auth_error_too,
    rate_limit_waits_as_long_as_retry_after_says,
    server_errors_are_retried_with_backoff_then_unavailable,
    connection_refused_is_retried_then_names_the_url,
    a_bad_request_is_rejected_with_the_servers_message,
    a_stream_cut_mid_answer_is_stream_cut_and_not_retried,
    a_stream_closing_before_its_end_is_stream_cut,
    a_cut_before_anything_streamed_is_retried,
    data_that_is_not_json_is_a_protocol_error,
    malformed_event_streams_are_protocol_errors,
    tool_arguments_that_are_not_json_name_the_tool,
    silence_before_the_answer_is_a_timeout,
    silence_in_the_middle_of_the_stream_is_a_timeout,
    an_error_event_mid_answer_is_stream_cut_with_its_message,
    an_error_event_before_any_content_is_retried,
);

async fn text_streams_as_deltas_and_comes_back_whole(f: Format) {
    let (server, p) = f.setup();
    let text = "Hello, wörld — ✓ done 😀 and more text";
    server.push(Reply::sse(f.sse(text, &[])));

    let (result, events) = run(&*p, &ask("hi")).await;
    let response = result.unwrap();
    assert_eq!(response.text, text);
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, f.stop_reasons().0);
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (SSE_INPUT_TOKENS, SSE_OUTPUT_TOKENS));
    let d = deltas(&events);
    assert!(d.len() >= 3, "several deltas, not one: {d:?}");
    assert_eq!(d.concat(), text);
    assert_eq!(server.requests().len(), 1);
    assert_all_valid(&server);
}

async fn two_parallel_tool_calls_come_back_with_their_arguments(f: Format) {
    let (server, p) = f.setup();
    let a = json!({"path": "src/main.rs", "range": [1, 20], "note": "naïve \"quotes\" \\ ✓"});
    let b = json!({"dir": "src/ü", "deep": {"glob": "*.rs", "max": 3}});
    let (id_a, id_b) = (f.id("01A"), f.id("01B"));
    server
        .push(Reply::sse(f.sse("Let me look.", &[(&id_a, "read_file", a.clone()), (&id_b, "list_files", b.clone())])));

    let (result, events) = run(&*p, &ask("look")).await;
    let response = result.unwrap();
    assert_eq!(response.text, "Let me look.");
    assert_eq!(response.stop_reason, f.stop_reasons().1);
    assert_eq!(response.tool_calls, vec![ToolCall::new(&id_a, "read_file", a), ToolCall::new(&id_b, "list_files", b)]);
    let started: Vec<&StreamEvent> =
        events.iter().filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. })).collect();
    assert_eq!(
        started,
        [
            &StreamEvent::ToolCallStarted { id: id_a.clone(), name: "read_file".into() },
            &StreamEvent::ToolCallStarted { id: id_b.clone(), name: "list_files".into() },
        ]
    );
    assert!(matches!(events[0], StreamEvent::TextDelta(_)), "text streams before the calls: {events:?}");
}

async fn calls_and_their_results_sent_back_pass_the_api_rules(f: Format) {
    let (server, p) = f.setup();
    let (args_a, args_b) = (json!({"path": "a.rs"}), json!({"dir": "src"}));
    let (id_a, id_b) = (f.id("A"), f.id("B"));
    let calls = [(id_a.as_str(), "read_file", args_a.clone()), (id_b.as_str(), "list_files", args_b.clone())];
    server.push(Reply::sse(f.sse(f.exchange_text(), &calls)));
    server.push(Reply::sse(f.sse("Both read.", &[])));

    let mut req = ask("read a.rs and list src");
    let first = run(&*p, &req).await.0.unwrap();
    // The runner's shape: the assistant's calls, one user message per result (here not in the calls'
    // order), then a user remark.
    req.messages.push(Message::assistant_tool_calls(first.text.clone(), first.tool_calls.clone()));
    req.messages.push(Message::tool_result(&id_b, "a.rs b.rs", false));
    req.messages.push(Message::tool_result(&id_a, "permission denied", true));
    req.messages.push(Message::user("and be quick"));
    let second = run(&*p, &req).await.0.unwrap();
    assert_eq!(second.text, "Both read.");
    assert_all_valid(&server);

    let body = &server.requests()[1].body;
    assert_eq!(body["model"], f.model());
    assert_eq!(body["max_tokens"], 1000, "a compatible server gets max_tokens too");
    assert_eq!(body["stream"], true);
    for (at, want) in f.exchange_sent(&args_a, &args_b) {
        assert_eq!(body.pointer(at), Some(&want), "{at}");
    }
}

async fn a_tool_without_arguments_has_empty_arguments(f: Format) {
    let (server, p) = f.setup();
    server.push(Reply::sse(f.sse("", &[(&f.id("E"), "list_files", json!({}))])));
    let response = run(&*p, &ask("list")).await.0.unwrap();
    assert_eq!(response.tool_calls, [ToolCall::new(f.id("E"), "list_files", json!({}))]);
}

async fn crlf_line_endings_parse_the_same(f: Format) {
    let (server, p) = f.setup();
    let args = json!({"path": "é.rs"});
    server.push(Reply::sse(crlf(&f.sse("línea\r\nuno", &[(&f.id("C"), "read_file", args.clone())]))));
    let response = run(&*p, &ask("hi")).await.0.unwrap();
    assert_eq!(response.text, "línea\r\nuno");
    assert_eq!(response.tool_calls, [ToolCall::new(f.id("C"), "read_file", args)]);
}

async fn the_key_travels_in_its_header(f: Format) {
    let var = f.var("KEY_HEADERS");
    let key = "sk-test-headers-123";
    set_key(&var, key);
    let server = FakeServer::start(f.kind());
    server.require_api_key(key);
    server.push(Reply::sse(f.sse("ok", &[])));
    let p = f.provider(ProviderConfig { api_key_env: var, ..f.config(server.base_url()) });

    run(&*p, &ask("hi")).await.0.unwrap();
    let r = &server.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", f.path()));
    let (name, value) = f.key_header(key);
    assert_eq!(r.header(name), Some(value.as_str()));
    assert_eq!(r.header("content-type"), Some("application/json"));
    for (name, value) in f.other_headers() {
        assert_eq!(r.header(name), *value, "{name}");
    }
}

async fn an_unset_key_is_sent_without_header_and_reported_as_not_set(f: Format) {
    let (server, p) = f.setup();
    server.require_api_key("whatever");

    let err = run(&*p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::Auth { env_var, message, .. } = &err else { panic!("{err:?}") };
    assert_eq!(env_var, &f.unset());
    assert!(message.contains("is not set"), "{message}");
    assert_eq!(server.requests()[0].header(f.key_header("").0), None);
}

async fn base_url_with_or_without_a_trailing_slash(f: Format) {
    let server = FakeServer::start(f.kind());
    let bases = f.base_urls(&server.base_url());
    for base in &bases {
        server.push(Reply::sse(f.sse("ok", &[])));
        let p = f.provider(f.config(base.clone()));
        assert_eq!(run(&*p, &ask("hi")).await.0.unwrap().text, "ok", "{base}");
    }
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec![f.path(); bases.len()]);
}

async fn unauthorized_names_the_env_var_hides_the_key_and_is_not_retried(f: Format) {
    let var = f.var("KEY_401");
    let secret = "sk-very-secret-401";
    set_key(&var, secret);
    let server = FakeServer::start(f.kind());
    // A server echoing the key it refused: it must not reach the error.
    let (refusal, fragment) = f.key_refused(secret);
    server.push(Reply::error(f.kind(), 401, &refusal));
    let p = f.provider(ProviderConfig { api_key_env: var.clone(), ..f.config(server.base_url()) });

    let (result, events) = run(&*p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Auth { status: 401, env_var, message } = &err else { panic!("{err:?}") };
    assert_eq!(env_var, &var);
    assert!(message.contains(fragment), "{message}");
    assert!(err.to_string().contains(&var), "{err}");
    for shown in [err.to_string(), format!("{err:?}"), format!("{p:?}")] {
        assert!(!shown.contains(secret), "the key leaked: {shown}");
    }
    assert_eq!(server.requests().len(), 1);
    assert!(retries(&events).is_empty());
}

async fn forbidden_is_an_auth_error_too(f: Format) {
    let (server, p) = f.setup();
    server.push(Reply::error(f.kind(), 403, &format!("Project does not have access to model {}", f.model())));
    let err = run(&*p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Auth { status: 403, env_var, .. } if *env_var == f.unset()), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

async fn rate_limit_waits_as_long_as_retry_after_says(f: Format) {
    let (server, p) = f.setup();
    let (message, fragment) = f.rate_limited();
    server.push(Reply::error_retry_after(f.kind(), 429, message, 1));
    server.push(Reply::sse(f.sse("finally", &[])));

    let started = Instant::now();
    let (result, events) = run(&*p, &ask("hi")).await;
    let elapsed = started.elapsed();
    assert_eq!(result.unwrap().text, "finally");
    // the wait is the behaviour: at least what Retry-After said (no upper bound: a slow machine is not a bug)
    assert!(elapsed >= Duration::from_millis(950), "{elapsed:?}");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].0, r[0].1), (1, Duration::from_secs(1)));
    assert!(r[0].2.contains("429") && r[0].2.contains(fragment), "{}", r[0].2);
    assert_eq!(server.requests().len(), 2);
}

async fn server_errors_are_retried_with_backoff_then_unavailable(f: Format) {
    let (server, p) = f.setup();
    for status in [500, 502, 503] {
        server.push(Reply::error(f.kind(), status, "The server had an error"));
    }

    let (result, events) = run(&*p, &ask("hi")).await;
    let err = result.unwrap_err();
    // The last status is the one reported.
    let ProviderError::Unavailable { status: 503, attempts: 3, message } = &err else { panic!("{err:?}") };
    assert!(message.contains("The server had an error"), "{message}");
    assert_eq!(server.requests().len(), 3);
    let waits: Vec<(u32, Duration)> = retries(&events).into_iter().map(|(a, w, _)| (a, w)).collect();
    assert_eq!(waits, [(1, Duration::from_millis(10)), (2, Duration::from_millis(20))]);
}

async fn connection_refused_is_retried_then_names_the_url(f: Format) {
    let root = refused_base_url();
    let base = f.base_at(&root);
    let p = f.provider(f.config(base.clone()));

    let (result, events) = run(&*p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::Connect { url, .. } = &err else { panic!("{err:?}") };
    assert_eq!(url, &format!("{root}{}", f.path()));
    assert!(err.to_string().contains(&base), "{err}");
    assert_eq!(retries(&events).len(), 2);
}

async fn a_bad_request_is_rejected_with_the_servers_message(f: Format) {
    let (server, p) = f.setup();
    server.push(Reply::error(f.kind(), 400, "prompt is too long: 250000 tokens > 200000 maximum"));
    server.push(Reply::error(f.kind(), 404, &format!("The model `{}` does not exist", f.model())));

    for (status, fragment) in [(400, "prompt is too long"), (404, "does not exist")] {
        let (result, events) = run(&*p, &ask("hi")).await;
        let err = result.unwrap_err();
        let ProviderError::Rejected { status: got, message } = &err else { panic!("{err:?}") };
        assert_eq!(*got, status);
        assert!(message.contains(fragment), "{message}");
        assert!(events.is_empty());
    }
    assert_eq!(server.requests().len(), 2, "neither is retried");
}

async fn a_stream_cut_mid_answer_is_stream_cut_and_not_retried(f: Format) {
    let (server, p) = f.setup();
    let full = f.sse("A long answer that will not finish", &[]);
    server.push(Reply::CutAfter(f.cut_mid_answer(&full)));
    server.push(Reply::sse(full)); // must not be used

    let (result, events) = run(&*p, &ask("hi")).await;
    assert!(matches!(result, Err(ProviderError::StreamCut { .. })), "{result:?}");
    assert_eq!(deltas(&events).concat(), "A long answer that will not finish");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.unused_replies(), 1);
    assert!(retries(&events).is_empty());
}

async fn a_stream_closing_before_its_end_is_stream_cut(f: Format) {
    let (server, p) = f.setup();
    let (bytes, end) = f.closed_before_the_end();
    server.push(Reply::sse(bytes));

    let err = run(&*p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::StreamCut { message } = &err else { panic!("{err:?}") };
    assert!(message.contains(end), "{message}");
    assert_eq!(server.requests().len(), 1);
}

async fn a_cut_before_anything_streamed_is_retried(f: Format) {
    let (server, p) = f.setup();
    let full = f.sse("second time lucky", &[]);
    server.push(Reply::CutAfter(f.cut_before_anything(&full)));
    server.push(Reply::sse(full));

    let (result, events) = run(&*p, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "second time lucky");
    assert_eq!(retries(&events).len(), 1);
    assert_eq!(server.requests().len(), 2);
}

async fn data_that_is_not_json_is_a_protocol_error(f: Format) {
    let (server, p) = f.setup();
    let (bytes, names) = f.not_json();
    server.push(Reply::sse(bytes));

    let err = run(&*p, &ask("hi")).await.0.unwrap_err();
    let ProviderError::Protocol { message } = &err else { panic!("{err:?}") };
    assert!(message.contains(names) && message.contains("not JSON"), "{message}");
}

async fn malformed_event_streams_are_protocol_errors(f: Format) {
    let (server, p) = f.setup();
    server.push(Reply::Stream(vec![f.not_utf8()]));
    // Not an event stream at all.
    server.push(Reply::Status(200, vec![("content-type".into(), "text/html".into())], "<html>portal</html>".into()));

    let err = run(&*p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Protocol { message } if message.contains("UTF-8")), "{err:?}");
    let err = run(&*p, &ask("hi")).await.0.unwrap_err();
    assert!(matches!(&err, ProviderError::Protocol { message } if message.contains("text/html")), "{err:?}");
}

async fn tool_arguments_that_are_not_json_name_the_tool(f: Format) {
    let (server, p) = f.setup();
    server.push(Reply::sse(f.bad_tool_arguments()));

    let (result, events) = run(&*p, &ask("edit")).await;
    let err = result.unwrap_err();
    let ProviderError::Protocol { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("edit_file"), "{message}");
    assert!(events.contains(&StreamEvent::ToolCallStarted { id: f.id("X"), name: "edit_file".into() }));
    assert_eq!(server.requests().len(), 1);
}

async fn silence_before_the_answer_is_a_timeout(f: Format) {
    let server = FakeServer::start(f.kind());
    server.push(Reply::Hang);
    let p = f.provider(ProviderConfig { idle_timeout_secs: 1, connect_timeout_secs: 1, ..f.config(server.base_url()) });

    let started = Instant::now();
    let (result, _) = run(&*p, &ask("hi")).await;
    assert!(matches!(result, Err(ProviderError::Timeout { .. })), "{result:?}");
    // the wait is the behaviour: not before the idle timeout (no upper bound: client::run has a safety net)
    assert!(started.elapsed() >= Duration::from_millis(950), "{:?}", started.elapsed());
    assert_eq!(server.requests().len(), 1, "a timeout is not retried");
}

async fn silence_in_the_middle_of_the_stream_is_a_timeout(f: Format) {
    let server = FakeServer::start(f.kind());
    server.push(Reply::StallAfter(split_awkwardly(&f.text_only(&f.sse("half an answer", &[])))));
    let p = f.provider(ProviderConfig { idle_timeout_secs: 1, ..f.config(server.base_url()) });

    let started = Instant::now();
    let (result, events) = run(&*p, &ask("hi")).await;
    assert_eq!(result, Err(ProviderError::Timeout { after: Duration::from_secs(1) }));
    assert!(started.elapsed() >= Duration::from_millis(950), "{:?}", started.elapsed());
    assert_eq!(deltas(&events).concat(), "half an answer");
}

async fn an_error_event_mid_answer_is_stream_cut_with_its_message(f: Format) {
    let (server, p) = f.setup();
    let (bytes, fragment) = f.error_mid_answer();
    server.push(Reply::sse(bytes));

    let (result, events) = run(&*p, &ask("hi")).await;
    let err = result.unwrap_err();
    let ProviderError::StreamCut { message } = &err else { panic!("{err:?}") };
    assert!(message.contains(fragment), "{message}");
    assert_eq!(server.requests().len(), 1, "never retried once text streamed");
    assert!(retries(&events).is_empty());
}

async fn an_error_event_before_any_content_is_retried(f: Format) {
    let (server, p) = f.setup();
    server.push(Reply::sse(f.error_before_content(f.transient_error_type(), "try again")));
    server.push(Reply::sse(f.sse("recovered", &[])));

    let (result, events) = run(&*p, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "recovered");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert!(r[0].2.contains(f.transient_error_type()), "{}", r[0].2);
    assert_eq!(server.requests().len(), 2);
}
