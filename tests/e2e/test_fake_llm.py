"""The instrument itself: the fake OpenAI server (fake_llm.py) speaks the wire format the real API does (role chunk,
usage chunk, keep-alive comments, events cut at varying points) and refuses a broken request with a 400 and the
real error body, recorded apart from the accepted ones. No Neovim here: raw HTTP from Python."""

from __future__ import annotations

import http.client
import json
from typing import Any

from fake_llm import FakeOpenAI


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
