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
