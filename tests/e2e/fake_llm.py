"""A fake OpenAI Chat Completions server on 127.0.0.1 for the end-to-end tests.

It speaks the real wire format (`POST /v1/chat/completions` with `stream: true`, answered by `data:` SSE chunks,
`delta.content`, `delta.tool_calls` in fragments by index, `finish_reason`, `data: [DONE]`), validates each
request against the protocol's rules (every assistant tool call answered by `role: tool` messages right after
it, no orphan tool messages, arguments that are JSON strings) and answers 400 when they are broken, as the real
API does. Answers are scripted in order with `push_text`, `push_tools`, `push_hang`; `delay` is the pause after
each streamed word (a slow model: `push_text(text, delay=0.1)`). An answer given `usage` (the final chunk's
`usage` object, e.g. `{"prompt_tokens": 1200, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens":
1000}}`) ends, when the request asks for it with `stream_options.include_usage`, with the usage chunk OpenAI sends:
empty `choices` and that `usage`, before `[DONE]`. Answers without `usage` stream as they always did.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.handle(self, json.loads(body))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    # -- script -------------------------------------------------------------------------------------------

    def push_text(self, text: str, delay: float = 0.005, usage: dict[str, Any] | None = None) -> None:
        self.script.append({"text": text, "tools": [], "delay": delay, "usage": usage})

    def push_tools(
        self,
        text: str,
        calls: list[tuple[str, str, dict[str, Any]]],
        delay: float = 0.005,
        usage: dict[str, Any] | None = None,
    ) -> None:
        self.script.append({"text": text, "tools": calls, "delay": delay, "usage": usage})

    def push_hang(self, text: str, delay: float = 0.005) -> None:
        """Streams `text`, then keeps the connection open without finishing (until close())."""
        self.script.append({"text": text, "tools": [], "hang": True, "delay": delay})

    # -- protocol -----------------------------------------------------------------------------------------

    @staticmethod
    def validate(body: dict[str, Any]) -> str | None:
        if not body.get("model"):
            return "model is required"
        if body.get("stream") is not True:
            return "stream must be true"
        msgs = body.get("messages", [])
        i = 0
        while i < len(msgs):
            m = msgs[i]
            if m.get("role") == "tool":
                return f"messages[{i}]: a tool message must follow an assistant message with tool_calls"
            i += 1
            calls = m.get("tool_calls") or []
            open_ids = []
            for c in calls:
                try:
                    json.loads(c["function"]["arguments"])
                except Exception:
                    return f"messages[{i - 1}]: tool call arguments must be a JSON string"
                open_ids.append(c["id"])
            while open_ids:
                if i >= len(msgs) or msgs[i].get("role") != "tool":
                    return f"tool_call_ids did not have response messages: {open_ids}"
                tid = msgs[i].get("tool_call_id")
                if tid not in open_ids:
                    return f"messages[{i}]: tool_call_id {tid} answers no open call"
                open_ids.remove(tid)
                i += 1
        return None

    def handle(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(body)
            problem = self.validate(body)
            answer = self.script.pop(0) if (self.script and not problem) else None
        if problem or answer is None:
            problem = problem or "the fake server has no scripted answer left"
            self.errors.append(problem)
            payload = json.dumps({"error": {"message": problem, "type": "invalid_request_error"}}).encode()
            h.send_response(400)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def chunk(data: dict[str, Any] | str) -> None:
            text = data if isinstance(data, str) else json.dumps(data)
            raw = f"data: {text}\n\n".encode()
            # Split each event in two writes, so events arrive cut mid-way.
            for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                h.wfile.flush()

        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": body["model"]}
        for word in answer["text"].split(" ") if answer["text"] else []:
            chunk({**base, "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]})
            time.sleep(answer.get("delay", 0.005))
        if answer.get("hang"):
            self.release.wait(60)
            return
        for idx, (cid, name, args) in enumerate(answer["tools"]):
            arg_text = json.dumps(args)
            half = len(arg_text) // 2
            first = {"index": idx, "id": cid, "type": "function", "function": {"name": name, "arguments": arg_text[:half]}}
            chunk({**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]})
            rest = {"index": idx, "function": {"arguments": arg_text[half:]}}
            chunk({**base, "choices": [{"index": 0, "delta": {"tool_calls": [rest]}, "finish_reason": None}]})
        finish = "tool_calls" if answer["tools"] else "stop"
        chunk({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        wants_usage = (body.get("stream_options") or {}).get("include_usage") is True
        if answer.get("usage") is not None and wants_usage:
            chunk({**base, "choices": [], "usage": answer["usage"]})
        chunk("[DONE]")
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


class FakeAnthropic:
    """A fake Anthropic Messages API server on 127.0.0.1, for the end-to-end tests.

    `POST /v1/messages` with `stream: true` and an `anthropic-version` header, answered by the real event stream:
    `message_start` (with the input side of `usage`), `ping`, a `text` content block in several `text_delta`s, one
    `tool_use` block per call whose input arrives as `input_json_delta` pieces, `content_block_stop` after each block,
    `message_delta` (`stop_reason` `end_turn` or `tool_use`, the output tokens) and `message_stop`. Each request is
    checked against the API's rules (see `validate`, the same as tests/support/mod.rs's `validate_anthropic`) and
    answered 400 with the API's error body when it breaks one, as the real API does. Answers are scripted in order
    with `push_text` and `push_tools`; `usage` holds the counts as the API names them (`input_tokens`,
    `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`).
    """

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- script -------------------------------------------------------------------------------------------

    def push_text(self, text: str, usage: dict[str, int] | None = None) -> None:
        self.script.append({"text": text, "tools": [], "usage": usage})

    def push_tools(
        self, text: str, calls: list[tuple[str, str, dict[str, Any]]], usage: dict[str, int] | None = None
    ) -> None:
        self.script.append({"text": text, "tools": calls, "usage": usage})

    # -- protocol -----------------------------------------------------------------------------------------

    @staticmethod
    def validate(body: Any) -> str | None:
        """The Messages API's rules that matter to an agent, in the API's words where it has them: roles alternate,
        starting with `user`; content is non-empty, text blocks hold non-blank text; `tool_use` only from the
        assistant (unique ids of `[a-zA-Z0-9_-]`, an object input), `tool_result` only from the user and before any
        other block; every `tool_use` is answered exactly once in the very next user message, and no `tool_result`
        answers anything else; at most four `cache_control` blocks, each `{"type": "ephemeral"}`."""
        if not isinstance(body, dict):
            return "body: must be an object"
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "model: a non-empty string is required"
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            return "max_tokens: an integer >= 1 is required"
        if body.get("stream") is not True:
            return 'stream: this fake server only streams; send "stream": true'
        system = body.get("system")
        if system is not None and not isinstance(system, str):
            if not isinstance(system, list) or any(
                not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str) for b in system
            ):
                return "system: must be a string or an array of text blocks"
        names: list[str] = []
        for i, t in enumerate(body.get("tools") or []):
            name = t.get("name") if isinstance(t, dict) else None
            if not isinstance(name, str) or not FakeAnthropic._id_ok(name) or len(name) > 64:
                return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            if name in names:
                return f"tools: Tool names must be unique ({name})"
            names.append(name)
            if not isinstance(t.get("input_schema"), dict):
                return f"tools.{i}.input_schema: must be an object"
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return "messages: at least one message is required"
        try:
            breakpoints = FakeAnthropic._breakpoints(body)
        except ValueError as e:
            return str(e)
        if breakpoints > 4:
            return f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        previous = ""
        asked: list[str] = []  # tool_use ids of the previous assistant message
        for i, m in enumerate(msgs):
            role = m.get("role") if isinstance(m, dict) else None
            if role not in ("user", "assistant"):
                return f"messages.{i}.role: Input should be 'user' or 'assistant'"
            if i == 0 and role != "user":
                return 'messages: the first message must use the "user" role'
            if role == previous:
                return (f'messages: roles must alternate between "user" and "assistant" '
                        f"(messages {i - 1} and {i} are both {role})")
            previous = role
            content = m.get("content")
            if isinstance(content, str) and content.strip():
                blocks: list[Any] = [{"type": "text", "text": content}]
            elif isinstance(content, list) and content:
                blocks = content
            else:
                return f"messages.{i}: all messages must have non-empty content"
            used: list[str] = []
            answered: list[str] = []
            seen_other = False
            for j, b in enumerate(blocks):
                at = f"messages.{i}.content.{j}"
                kind = b.get("type") if isinstance(b, dict) else None
                if kind == "text":
                    if not isinstance(b.get("text"), str):
                        return f"{at}.text: Field required"
                    if not b["text"].strip():
                        return f"{at}: text content blocks must contain non-whitespace text"
                    seen_other = True
                elif kind == "tool_use":
                    if role != "assistant":
                        return f"{at}: tool_use blocks are only allowed in assistant messages"
                    tid = b.get("id")
                    if not isinstance(tid, str) or not FakeAnthropic._id_ok(tid):
                        return f"{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                    if tid in used:
                        return f"{at}: `tool_use` ids must be unique ({tid})"
                    used.append(tid)
                    if not isinstance(b.get("name"), str) or not b["name"]:
                        return f"{at}.name: a non-empty string is required"
                    if not isinstance(b.get("input"), dict):
                        return f"{at}.input: must be an object"
                elif kind == "tool_result":
                    if role != "user":
                        return f"{at}: tool_result blocks are only allowed in user messages"
                    if seen_other:
                        return f"{at}: tool_result blocks must come before any other content"
                    tid = b.get("tool_use_id")
                    if tid not in asked:
                        return (f"{at}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. Each "
                                "`tool_result` block must have a corresponding `tool_use` block in the previous message.")
                    if tid in answered:
                        return f"{at}: duplicate tool_result for tool_use_id {tid}"
                    answered.append(tid)
                    if b.get("content") is not None and not isinstance(b["content"], (str, list)):
                        return f"{at}.content: must be a string or an array of blocks"
                    if b.get("is_error") is not None and not isinstance(b["is_error"], bool):
                        return f"{at}.is_error: must be a boolean"
                elif kind is None:
                    return f"{at}.type: Field required"
                else:
                    seen_other = True  # images, documents, thinking...
            if role == "user":
                missing = [t for t in asked if t not in answered]
                if missing:
                    return FakeAnthropic._unanswered(f"messages.{i}", missing)
            asked = used
        if asked:
            return FakeAnthropic._unanswered("messages", asked)
        return None

    @staticmethod
    def _id_ok(s: str) -> bool:
        return bool(s) and all(c.isascii() and (c.isalnum() or c in "_-") for c in s)

    @staticmethod
    def _unanswered(at: str, ids: list[str]) -> str:
        return (f"{at}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(ids)}. "
                "Each `tool_use` block must have a corresponding `tool_result` block in the next message.")

    @staticmethod
    def _breakpoints(v: Any) -> int:
        if isinstance(v, dict):
            n = 0
            c = v.get("cache_control")
            if c is not None:
                ok = (isinstance(c, dict) and c.get("type") == "ephemeral" and set(c) <= {"type", "ttl"}
                      and c.get("ttl", "5m") in ("5m", "1h"))
                if not ok:
                    raise ValueError(f"cache_control: Input tag does not match the expected tag 'ephemeral': {c}")
                n += 1
            return n + sum(FakeAnthropic._breakpoints(x) for x in v.values())
        if isinstance(v, list):
            return sum(FakeAnthropic._breakpoints(x) for x in v)
        return 0

    def handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        problem = None
        body: Any = None
        if h.path != "/v1/messages":
            problem = f"not found: {h.path} (the Messages API is POST /v1/messages)"
        elif not h.headers.get("anthropic-version"):
            problem = "anthropic-version: header is required"
        else:
            try:
                body = json.loads(raw)
            except ValueError as e:
                problem = f"the body is not JSON: {e}"
        with self.lock:
            self.headers.append(dict(h.headers.items()))
            if body is not None:
                self.requests.append(body)
            problem = problem or self.validate(body)
            answer = self.script.pop(0) if (self.script and not problem) else None
        if problem or answer is None:
            problem = problem or "the fake server has no scripted answer left"
            self.errors.append(problem)
            payload = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": problem}})
            data = payload.encode()
            h.send_response(400)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def event(name: str, data: dict[str, Any]) -> None:
            raw_event = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            # In two writes, so events arrive cut mid-way.
            for part in (raw_event[: len(raw_event) // 2], raw_event[len(raw_event) // 2 :]):
                h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                h.wfile.flush()

        usage = {"input_tokens": 25, "output_tokens": 7, **(answer.get("usage") or {})}
        start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
        event("message_start", {"type": "message_start", "message": {
            "id": "msg_fake01", "type": "message", "role": "assistant", "model": body["model"], "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {**start_usage, "output_tokens": 1}}})
        event("ping", {"type": "ping"})
        index = 0
        if answer["text"]:
            event("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}})
            # word by word, the text exactly as scripted once joined
            import re  # (here: this class is an addition to a module shared with other work)

            for piece in re.findall(r"\s*\S+\s*$|\s*\S+", answer["text"]) or [answer["text"]]:
                event("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": piece}})
                time.sleep(0.005)
            event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        for cid, name, args in answer["tools"]:
            event("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "tool_use", "id": cid, "name": name, "input": {}}})
            text = json.dumps(args)
            for piece in ("", text[: len(text) // 2], text[len(text) // 2 :]):
                event("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "input_json_delta", "partial_json": piece}})
            event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        stop = "tool_use" if answer["tools"] else "end_turn"
        event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": usage["output_tokens"]}})
        event("message_stop", {"type": "message_stop"})
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
