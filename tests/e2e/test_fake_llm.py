"""The instrument itself: the fake OpenAI server (fake_llm.py) speaks the wire format the real API does (role chunk,
usage chunk, keep-alive comments, events cut at varying points) and refuses a broken request with a 400 and the
real error body, recorded apart from the accepted ones; the fake Anthropic server answers what Claude Code sends
(`?beta=true`, `HEAD /`, adaptive thinking, count_tokens), streams a burst of 10,000 chunks, and runs in a process of
its own scripted over HTTP. No Neovim here: raw HTTP from Python."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fake_llm import FakeAnthropic, FakeGemini, FakeOpenAI, FakeResponses


def post(fake: FakeOpenAI, body: Any, path: str = "/v1/chat/completions") -> tuple[int, bytes, list[bytes]]:
    """POSTs `body` (JSON, or raw bytes) and returns the status, the whole body and the HTTP chunks as they came."""
    port = fake.server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, data, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    pieces: list[bytes] = []
    if resp.getheader("Transfer-Encoding") == "chunked":
        raw = resp.fp  # read the chunk framing by hand: where the cuts fall is what is tested
        while True:
            size = int(raw.readline().strip(), 16)
            if size == 0:
                raw.readline()
                break
            pieces.append(raw.read(size))
            raw.readline()
        resp.fp = None
        whole = b"".join(pieces)
    else:
        whole = resp.read()
    conn.close()
    return resp.status, whole, pieces


def request(messages: list[dict[str, Any]], usage: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "fake-model", "stream": True, "messages": messages}
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body


def events(whole: bytes) -> tuple[list[Any], list[str]]:
    """The `data:` payloads (JSON decoded, or the string `[DONE]`) and the comment lines of an SSE body."""
    data, comments = [], []
    for block in whole.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith(":"):
                comments.append(line)
            elif line.startswith("data: "):
                payload = line[len("data: ") :]
                data.append(payload if payload == "[DONE]" else json.loads(payload))
    return data, comments


def test_a_streamed_answer_has_the_role_chunk_usage_keep_alives_and_cuts_at_varying_points(fake: FakeOpenAI) -> None:
    fake.push_tools("one two three four five six", [("call_1", "read_file", {"path": "some/long/path/name.txt"})])
    status, whole, pieces = post(fake, request([{"role": "user", "content": "hi"}]))
    assert status == 200
    data, comments = events(whole)
    assert comments and all(c == ": keep-alive" for c in comments)
    assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(d["usage"] is None for d in data[:-2]), "every chunk but the usage chunk says usage: null"
    assert data[-2]["choices"] == [] and data[-2]["usage"]["prompt_tokens"] > 0
    assert data[-1] == "[DONE]" and data[-3]["choices"][0]["finish_reason"] == "tool_calls"
    text = "".join(d["choices"][0]["delta"].get("content") or "" for d in data[:-2])
    assert text == "one two three four five six "
    frags = [f for d in data[:-2] for f in d["choices"][0]["delta"].get("tool_calls", [])]
    assert frags[0] == {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
    assert json.loads("".join(f["function"]["arguments"] for f in frags)) == {"path": "some/long/path/name.txt"}
    # cut anywhere: not every piece is a whole event, not every event is cut in half, and some pieces hold two
    assert not all(p.endswith(b"\n\n") for p in pieces)
    cut_at = {p.find(b"\n\n") for p in pieces}
    assert len(cut_at) > 3, cut_at
    assert any(p.count(b"data: ") >= 2 or (p.count(b"data: ") == 1 and not p.startswith(b"data: ")) for p in pieces)
    assert fake.requests == [request([{"role": "user", "content": "hi"}])]


def test_without_include_usage_there_is_no_usage_at_all(fake: FakeOpenAI) -> None:
    fake.push_text("hello", usage={"prompt_tokens": 3, "completion_tokens": 1})
    status, whole, _ = post(fake, request([{"role": "user", "content": "hi"}], usage=False))
    data, _ = events(whole)
    assert status == 200 and data[-1] == "[DONE]"
    assert not any("usage" in d for d in data[:-1])


def test_a_tool_call_without_an_id_is_refused_with_the_real_error_body(fake: FakeOpenAI) -> None:
    fake.push_text("never sent")
    fake.expect_errors("Missing required parameter: 'messages[1].tool_calls[0].id'.")
    msgs = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "x"},
    ]
    status, whole, _ = post(fake, request(msgs))
    assert status == 400
    assert json.loads(whole) == {"error": {
        "message": "Missing required parameter: 'messages[1].tool_calls[0].id'.",
        "type": "invalid_request_error", "param": "messages[1].tool_calls[0].id", "code": "missing_required_parameter"}}
    assert fake.requests == [] and [b["messages"] for b, _ in fake.rejected] == [msgs]
    assert len(fake.script) == 1, "a refused request takes no scripted answer"


def test_broken_requests_are_answered_400_never_a_server_exception(fake: FakeOpenAI) -> None:
    cases = [
        (b"{not json", "could not parse the JSON body"),
        (json.dumps([1, 2]).encode(), "could not parse the JSON body"),
        (request([{"role": "tool", "tool_call_id": "x", "content": "y"}]), "must be a response to a preceeding"),
        (request([{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
            {"role": "tool", "tool_call_id": "c", "content": "y"}]), "arguments must be a JSON string"),
        (request([{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]), "did not have response"),
        (request([{"role": "assistant", "content": "", "tool_calls": ["nonsense"]}]), "expected an object"),
        (request([{"content": "no role"}]), "role"),
        ({"model": "m", "stream": False, "messages": [{"role": "user", "content": "x"}]}, "stream must be true"),
    ]
    fake.expect_errors(*(why for _, why in cases))
    for body, why in cases:
        status, whole, _ = post(fake, body)
        assert status == 400 and why in json.loads(whole)["error"]["message"], (body, whole)
    status, _, _ = post(fake, request([{"role": "user", "content": "x"}]), path="/v1/completions")
    fake.expect_errors("Invalid URL")
    assert status == 404
    assert fake.requests == [] and len(fake.rejected) == len(cases) + 1
    assert not any("exception" in e for e in fake.errors), fake.errors


# -- the fake Anthropic server as Claude Code (tests/e2e/acp_rig.py) and out-of-process tests use it ----------------


def anthropic_post(fake: FakeAnthropic, path: str, body: Any) -> tuple[int, Any, list[dict[str, Any]]]:
    """POSTs to the fake Anthropic server; returns the status, the JSON body (or None) and the SSE events' data."""
    conn = http.client.HTTPConnection("127.0.0.1", fake.server.server_address[1], timeout=30)
    conn.request("POST", path, json.dumps(body).encode(),
                 {"Content-Type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "k"})
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    if resp.getheader("Content-Type") == "text/event-stream":
        data = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
        return resp.status, None, data
    return resp.status, json.loads(raw) if raw else None, []


CLAUDE_CODE_BODY = {"model": "claude-sonnet-4-6", "max_tokens": 32000, "stream": True,
                    "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"},
                    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}


def test_the_anthropic_fake_answers_claude_codes_requests() -> None:
    fake = FakeAnthropic()
    try:
        port = fake.server.server_address[1]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("HEAD", "/")
        assert conn.getresponse().status == 200  # Claude Code's check that the base URL answers
        conn.close()
        fake.push_text("one two three", pieces=["one", " two", " three"], delay=0)
        status, _, data = anthropic_post(fake, "/v1/messages?beta=true", CLAUDE_CODE_BODY)
        assert status == 200
        deltas = [d["delta"]["text"] for d in data if d["type"] == "content_block_delta"]
        assert deltas == ["one", " two", " three"]
        assert fake.paths == ["/v1/messages?beta=true"]
        status, counted, _ = anthropic_post(fake, "/v1/messages/count_tokens", {"model": "m", "messages": []})
        assert status == 200 and counted["input_tokens"] >= 1
        # adaptive thinking takes no budget, as the API says
        status, error, _ = anthropic_post(fake, "/v1/messages", {**CLAUDE_CODE_BODY,
                                                                 "thinking": {"type": "adaptive", "budget_tokens": 2048}})
        assert status == 400 and "budget_tokens" in error["error"]["message"]
        assert fake.errors == ["thinking.adaptive.budget_tokens: Extra inputs are not permitted"]
    finally:
        fake.close()


def test_a_burst_streams_each_chunk_as_its_own_event() -> None:
    fake = FakeAnthropic()
    try:
        text = fake.push_burst(10_000)
        status, _, data = anthropic_post(fake, "/v1/messages", CLAUDE_CODE_BODY)
        deltas = [d["delta"]["text"] for d in data if d["type"] == "content_block_delta"]
        assert status == 200 and len(deltas) == 10_000 and "".join(deltas) == text
    finally:
        fake.close()


def test_the_anthropic_fake_runs_in_its_own_process_scripted_over_http() -> None:
    """`python3 tests/e2e/fake_llm.py anthropic`: for tests in another language (Rust) driving the real agent."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fake_llm.py")), "anthropic"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        hello = json.loads(proc.stdout.readline())
        port = hello["port"]
        assert hello["base_url"] == f"http://127.0.0.1:{port}"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/_fake/push", json.dumps([{"text": "from afar"}, {"text": "", "tools": [
            ["toolu_1", "Bash", {"command": "true"}]]}]).encode())
        assert json.loads(conn.getresponse().read()) == {"queued": 2}
        conn.request("POST", "/_fake/push", json.dumps({"txet": "typo"}).encode())
        bad = conn.getresponse()
        assert bad.status == 400 and "txet" in json.loads(bad.read())["error"]
        conn.close()
        sent = {**CLAUDE_CODE_BODY, "messages": [{"role": "user", "content": "hello"}]}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/v1/messages?beta=true", json.dumps(sent).encode(),
                     {"anthropic-version": "2023-06-01", "Content-Type": "application/json"})
        raw = conn.getresponse().read().decode()
        assert '"text": "from"' in raw and '"text": " afar"' in raw
        conn.request("GET", "/_fake/requests")
        assert json.loads(conn.getresponse().read()) == [sent]
        conn.request("GET", "/_fake/errors")
        assert json.loads(conn.getresponse().read()) == []
        conn.close()
        assert proc.stdin is not None
        proc.stdin.close()  # the test's end: the fake exits with its parent's pipe
        assert proc.wait(10) == 0
    finally:
        proc.kill()


# -- what the real agents of agent_stores.py need: unstreamed requests, answers by rule, the Gemini API ------------


def test_an_unstreamed_request_gets_one_completion_and_a_responder_answers_past_the_script() -> None:
    """An agent's side request that does not stream gets one completion; side requests are answered by rule."""
    asked: list[Any] = []

    def rule(body: dict[str, Any]) -> dict[str, Any]:
        asked.append(body["messages"][-1])
        return {"text": "", "tools": [("call_9", "write", {"filePath": "/w/a"})]}

    fake = FakeOpenAI(unstreamed=True, responder=rule)
    try:
        fake.push_text("from the script")
        status, whole, _ = post(fake, {"model": "m", "messages": [{"role": "user", "content": "title?"}]})
        reply = json.loads(whole)
        assert status == 200 and reply["object"] == "chat.completion"
        assert reply["choices"][0]["message"] == {"role": "assistant", "content": "from the script"}
        assert reply["choices"][0]["finish_reason"] == "stop" and reply["usage"]["total_tokens"] > 0
        assert asked == [], "the script comes first"
        status, whole, _ = post(fake, request([{"role": "user", "content": "write"}]))
        data, _ = events(whole)
        frags = [f for d in data[:-2] for f in d["choices"][0]["delta"].get("tool_calls", [])]
        assert status == 200 and frags[0]["id"] == "call_9" and frags[0]["function"]["name"] == "write"
        assert asked == [{"role": "user", "content": "write"}]
        # a tool's result as an array of text parts, as Qwen Code sends it, is valid
        tool_turn = [{"role": "user", "content": "write"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "call_9", "type": "function", "function": {"name": "write", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "call_9", "content": [{"type": "text", "text": "ok"}]}]
        status, _, _ = post(fake, request(tool_turn))
        assert status == 200 and fake.errors == [] and len(fake.requests) == 3
        assert fake.paths == ["/v1/chat/completions"] * 3
    finally:
        fake.close()
    strict = FakeOpenAI()  # our own client must stream: the default still refuses
    try:
        strict.push_text("never")
        status, whole, _ = post(strict, {"model": "m", "messages": [{"role": "user", "content": "x"}]})
        assert status == 400 and "stream must be true" in json.loads(whole)["error"]["message"]
    finally:
        strict.close()


def gemini_post(fake: FakeGemini, path: str, body: Any, key: bool = True) -> tuple[int, Any, list[Any]]:
    """POSTs to the fake Gemini API; returns the status, the JSON body (None for SSE) and the SSE events' data."""
    conn = http.client.HTTPConnection("127.0.0.1", fake.server.server_address[1], timeout=30)
    headers = {"Content-Type": "application/json", **({"x-goog-api-key": "k"} if key else {})}
    conn.request("POST", path, json.dumps(body).encode(), headers)
    resp = conn.getresponse()
    raw = resp.read().decode()
    conn.close()
    if resp.getheader("Content-Type") == "text/event-stream":
        assert raw.endswith("\r\n\r\n") and all(b.startswith("data: ") for b in raw.split("\r\n\r\n") if b)
        return resp.status, None, [json.loads(b[6:]) for b in raw.split("\r\n\r\n") if b]
    return resp.status, json.loads(raw), []


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def test_the_gemini_fake_streams_text_and_function_calls_as_the_gemini_cli_reads_them() -> None:
    fake = FakeGemini()
    try:
        fake.push_tools("Writing it now.", [("c1", "write_file", {"file_path": "/w/notes.txt", "content": "FIG"})])
        fake.push_text("Done.")
        stream = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        status, _, data = gemini_post(fake, stream, {"contents": [user("write FIG")]})
        assert status == 200
        parts = [p for d in data for p in d["candidates"][0]["content"]["parts"]]
        assert "".join(p.get("text", "") for p in parts) == "Writing it now."
        assert parts[-1] == {"functionCall": {"id": "c1", "name": "write_file",
                                              "args": {"file_path": "/w/notes.txt", "content": "FIG"}}}
        assert all(d["candidates"][0]["content"]["role"] == "model" for d in data)
        assert [d["candidates"][0].get("finishReason") for d in data][-1] == "STOP"
        assert "finishReason" not in data[0]["candidates"][0] and "usageMetadata" in data[-1]
        assert data[-1]["modelVersion"] == "gemini-2.5-pro"
        turn = [user("write FIG"), {"role": "model", "parts": [{"text": "Writing it now."}, parts[-1]]},
                {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "write_file",
                                                                 "response": {"output": "ok"}}}]}]
        status, _, data = gemini_post(fake, stream, {"contents": turn})
        assert status == 200 and "".join(p["text"] for d in data for p in d["candidates"][0]["content"]["parts"]) \
            == "Done."
        assert fake.errors == [] and len(fake.requests) == 2
    finally:
        fake.close()


def test_the_gemini_routing_call_is_answered_from_its_schema_without_taking_a_scripted_answer() -> None:
    fake = FakeGemini()
    try:
        fake.push_text("for the turn")
        schema = {"type": "object", "properties": {
            "reasoning": {"type": "string"}, "complexity_score": {"type": "integer", "minimum": 1, "maximum": 100},
            "next_speaker": {"type": "string", "enum": ["user", "model"]}}, "required": ["complexity_score"]}
        body = {"contents": [user("hi")], "generationConfig": {"responseMimeType": "application/json",
                                                               "responseJsonSchema": schema}}
        status, reply, _ = gemini_post(fake, "/v1beta/models/gemini-2.5-flash-lite:generateContent", body)
        assert status == 200 and reply["candidates"][0]["finishReason"] == "STOP"
        value = json.loads(reply["candidates"][0]["content"]["parts"][0]["text"])
        assert value == {"reasoning": "fake", "complexity_score": 1, "next_speaker": "user"}
        assert fake.script and fake.side_requests == [body] and fake.requests == []
        status, counted, _ = gemini_post(fake, "/v1beta/models/m:countTokens", {"contents": [user("hi")]})
        assert status == 200 and counted["totalTokens"] >= 1
    finally:
        fake.close()


def test_the_gemini_fake_refuses_what_the_api_refuses_with_its_error_body() -> None:
    fake = FakeGemini(responder=lambda body: {"text": "by rule"})
    try:
        stream = "/v1beta/models/m:streamGenerateContent?alt=sse"
        call = {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]}
        cases = [
            ({"contents": [user("hi")]}, False, "unregistered callers"),
            ({"contents": []}, True, "contents is not specified"),
            ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, True, "valid role"),
            ({"contents": [{"role": "user", "parts": []}]}, True, "must not be empty"),
            ({"contents": [user("hi"), call, user("no answer")]}, True, "number of function response parts"),
            ({"contents": [user("hi"), {"role": "model", "parts": [{"text": "x"}]}]}, True, "ending with the user"),
        ]
        for body, key, why in cases:
            status, reply, _ = gemini_post(fake, stream, body, key)
            assert status == 400, (body, reply)
            assert reply["error"]["status"] == "INVALID_ARGUMENT" and why in reply["error"]["message"], reply
        status, reply, _ = gemini_post(fake, "/v1/chat/completions", {})
        assert status == 404 and reply["error"]["status"] == "NOT_FOUND"
        assert len(fake.errors) == len(cases) + 1 and fake.requests == []
        status, _, data = gemini_post(fake, stream, {"contents": [user("hi")]})
        assert status == 200 and data[0]["candidates"][0]["content"]["parts"] == [{"text": "by "}]
    finally:
        fake.close()


def test_the_anthropic_fake_answers_by_rule_once_its_script_is_empty() -> None:
    fake = FakeAnthropic(responder=lambda body: {"text": "", "tools": [("toolu_1", "Write", {"file_path": "/a"})]})
    try:
        status, _, data = anthropic_post(fake, "/v1/messages?beta=true", CLAUDE_CODE_BODY)
        starts = [d["content_block"] for d in data if d["type"] == "content_block_start"]
        assert status == 200 and starts == [{"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}}]
        assert fake.errors == []
    finally:
        fake.close()


def responses_post(fake: FakeResponses, body: Any) -> tuple[int, Any, list[tuple[str, Any]]]:
    """POSTs to the fake Responses API; returns the status, the JSON body (None for SSE) and the (event, data) pairs."""
    conn = http.client.HTTPConnection("127.0.0.1", fake.server.server_address[1], timeout=30)
    conn.request("POST", "/v1/responses", json.dumps(body).encode(), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read().decode()
    conn.close()
    if resp.getheader("Content-Type") != "text/event-stream":
        return resp.status, json.loads(raw), []
    pairs = []
    for block in raw.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines:
            assert json.loads(lines["data"])["type"] == lines["event"]
            pairs.append((lines["event"], json.loads(lines["data"])))
    return resp.status, None, pairs


def test_the_responses_fake_streams_items_as_codex_reads_them_and_refuses_an_unanswered_call() -> None:
    fake = FakeResponses(responder=lambda body: {"text": "by rule"})
    try:
        fake.push_tools("Running it.", [("call_1", "exec_command", {"cmd": "true"})])
        user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run"}]}
        status, _, events_ = responses_post(fake, {"model": "m", "stream": True, "input": [user]})
        kinds = [k for k, _ in events_]
        assert status == 200 and kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert "".join(d["delta"] for k, d in events_ if k == "response.output_text.delta") == "Running it."
        done = [d["item"] for k, d in events_ if k == "response.output_item.done"]
        assert done[0]["content"] == [{"type": "output_text", "text": "Running it.", "annotations": []}]
        assert {k: done[1][k] for k in ("type", "call_id", "name", "arguments")} == {
            "type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd": "true"}'}
        assert events_[-1][1]["response"]["usage"]["total_tokens"] > 0
        call = {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"}
        status, error, _ = responses_post(fake, {"model": "m", "stream": True, "input": [user, call]})
        assert status == 400 and "No tool output found" in error["error"]["message"]
        answered = [user, call, {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]
        status, _, events_ = responses_post(fake, {"model": "m", "stream": True, "input": answered})
        assert status == 200 and any(d.get("delta") == "by " for _, d in events_)
        assert fake.errors == ["No tool output found for function call call_1."] and len(fake.requests) == 2
    finally:
        fake.close()
