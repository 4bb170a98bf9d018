"""A fake OpenAI Chat Completions server on 127.0.0.1 for the end-to-end tests.

It speaks the real wire format as the Rust fakes do (tests/it/support): `POST /v1/chat/completions` with
`stream: true`, answered by `data:` SSE chunks: first the role chunk (`delta: {role: "assistant", content: ""}`),
then `delta.content`, `delta.tool_calls` in fragments by index (the first with id, type and name, the arguments
after it in pieces), `finish_reason`, the usage chunk (empty `choices` and a `usage` object, every other chunk
carrying `usage: null`) when the request asks for it with `stream_options.include_usage`, and `data: [DONE]`.
Keep-alive comment lines (`: keep-alive`) come before the first chunk and now and then between chunks, and the
bytes are cut into HTTP chunks at varying points (inside `data:`, between the two newlines, two events in one
write), from a seeded random generator so a run can be replayed.

Each request is validated before it is accepted, against the protocol's rules: every assistant tool call has an
`id`, a `type` and a function with a name and arguments that are a JSON string, and is answered by `role: tool`
messages right after it; no orphan tool messages. A broken request is answered 400 with the real API's error body
(`{"error": {"message", "type": "invalid_request_error", "param", "code"}}`) and recorded in `rejected` and
`errors`; only accepted requests are in `requests`. A server-side exception is an error too (never a silent 500).
The `fake` fixture (conftest.py) asserts `errors == []` after every test; a test that provokes an error says so
with `expect_errors("fragment", ...)`.

Answers are scripted in order with `push_text`, `push_tools`, `push_hang`; `delay` is the pause after each streamed
word (a slow model: `push_text(text, delay=0.1)`). `usage` (e.g. `{"prompt_tokens": 1200, "completion_tokens": 50,
"prompt_tokens_details": {"cached_tokens": 1000}}`) is the answer's usage chunk; without it the chunk carries
counts estimated from the sizes, as a real server always sends one when asked.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def serve(outer: Any, get: Callable[[BaseHTTPRequestHandler], None],
          post: Callable[[BaseHTTPRequestHandler, bytes], None]) -> ThreadingHTTPServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 (a free port) handing each GET to `get` and each POST (with its body)
    to `post`, the path noted in `outer.paths` first. A client that went away (a cancel, a closed editor) is nobody's
    fault; any other exception is a bug of the fake or of the test: recorded in `outer.errors`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def run(self, fn: Callable[..., None], *args: Any) -> None:
            outer.paths.append(self.path)
            try:
                fn(self, *args)
            except (BrokenPipeError, ConnectionResetError):
                pass
            except Exception as e:  # noqa: BLE001
                outer.errors.append(f"exception in the fake server: {e!r}")
                raise

        def do_GET(self) -> None:  # noqa: N802
            self.run(get)

        def do_POST(self) -> None:  # noqa: N802
            self.run(post, self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Rejected(Exception):
    """A request the real API would refuse: answered 400 with `message` (and `param`, `code` when known)."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.code = message, param, code


class FakeOpenAI:
    def __init__(self, seed: int = 14, unstreamed: bool = False,
                 responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        """`unstreamed`: accept a request without `stream: true` (our own client always streams, so by default it is
        refused; agent_stores.py allows it for an agent's side requests, though the pinned agents all stream) and
        answer it with one `chat.completion` object. `responder`: called with a request's body when the script is empty, it returns the
        answer (`{"text": ..., "tools": [(id, name, args), ...]}`): the real agents' side requests (titles, memory,
        routing) come in an order no test should have to script."""
        self.unstreamed, self.responder = unstreamed, responder
        self.paths: list[str] = []  # the path of every request, accepted or not
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []  # accepted (valid, answered from the script)
        self.rejected: list[tuple[Any, str]] = []  # (body, why) of every request answered 400
        self.errors: list[str] = []  # why of every rejection, and any exception inside the server
        self.expected_errors: list[str] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.rng = random.Random(seed)
        self.server = serve(self, self.not_found, self.post)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def not_found(self, h: BaseHTTPRequestHandler) -> None:
        self.refuse(h, None, Rejected(f"Invalid URL (GET {h.path})", code="unknown_url"), 404)

    def post(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        if h.path.partition("?")[0].rstrip("/").endswith("/chat/completions"):
            self.handle(h, raw)
        else:
            self.refuse(h, raw, Rejected(f"Invalid URL (POST {h.path})", code="unknown_url"), 404)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    # -- errors -------------------------------------------------------------------------------------------

    def expect_errors(self, *fragments: str) -> None:
        """Declares that the test provokes errors: each fragment must be in some error, every error must hold one."""
        self.expected_errors.extend(fragments)

    def check(self) -> None:
        """Raises unless the errors are exactly the expected ones (none, unless `expect_errors` said otherwise)."""
        unexpected = [e for e in self.errors if not any(f in e for f in self.expected_errors)]
        missing = [f for f in self.expected_errors if not any(f in e for e in self.errors)]
        assert not unexpected, f"the fake server refused or failed: {unexpected}"
        assert not missing, f"expected errors that never came: {missing} (errors: {self.errors})"

    # -- script -------------------------------------------------------------------------------------------

    def push_text(
        self, text: str, delay: float = 0.005, usage: dict[str, Any] | None = None, reasoning: str = "",
        reasoning_field: str = "reasoning_content",
    ) -> None:
        """`reasoning`: streamed word by word in `delta.reasoning_content` (or `reasoning_field`) before the text,
        as DeepSeek, vLLM and Ollama stream a reasoning model's thinking."""
        self.script.append({"text": text, "tools": [], "delay": delay, "usage": usage, "reasoning": reasoning,
                            "reasoning_field": reasoning_field})

    def push_tools(
        self,
        text: str,
        calls: list[tuple[str, str, dict[str, Any]]],
        delay: float = 0.005,
        usage: dict[str, Any] | None = None,
        reasoning: str = "",
    ) -> None:
        self.script.append({"text": text, "tools": calls, "delay": delay, "usage": usage, "reasoning": reasoning})

    def push_hang(self, text: str, delay: float = 0.005) -> None:
        """Streams `text`, then keeps the connection open without finishing (until close())."""
        self.script.append({"text": text, "tools": [], "hang": True, "delay": delay})

    # -- protocol -----------------------------------------------------------------------------------------

    @staticmethod
    def validate(body: Any, unstreamed: bool = False) -> None:
        """Raises `Rejected` where the real API answers 400 (or, unless `unstreamed`, where the request does not
        stream). Never raises anything else, whatever the body."""
        if not isinstance(body, dict):
            raise Rejected("We could not parse the JSON body of your request.")
        if not body.get("model"):
            raise Rejected("you must provide a model parameter", param="model", code="missing_required_parameter")
        if body.get("stream") is not True and not (unstreamed and body.get("stream") in (None, False)):
            raise Rejected("stream must be true", param="stream")
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise Rejected("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
        i = 0
        while i < len(msgs):
            m = msgs[i]
            at = f"messages[{i}]"
            if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
                raise Rejected(f"Invalid value for '{at}.role'.", f"{at}.role", "invalid_value")
            if "reasoning_content" in m or "reasoning" in m:
                # DeepSeek's rule: the reasoning is output only
                raise Rejected(f"{at}: reasoning_content is not allowed in input messages", at)
            if m["role"] == "tool":
                raise Rejected(
                    f"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                    f"'tool_calls'. ({at})",
                    at,
                )
            i += 1
            calls = m.get("tool_calls") or []
            if calls and m["role"] != "assistant":
                raise Rejected(f"Unrecognized request argument supplied: {at}.tool_calls", f"{at}.tool_calls")
            open_ids = []
            for j, c in enumerate(calls):
                cat = f"{at}.tool_calls[{j}]"
                if not isinstance(c, dict):
                    raise Rejected(f"Invalid type for '{cat}': expected an object.", cat, "invalid_type")
                for field in ("id", "type", "function"):
                    if not c.get(field):
                        raise Rejected(f"Missing required parameter: '{cat}.{field}'.", f"{cat}.{field}",
                                       "missing_required_parameter")
                fn = c["function"]
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                    raise Rejected(f"Missing required parameter: '{cat}.function.name'.", f"{cat}.function.name",
                                   "missing_required_parameter")
                args = fn.get("arguments")
                try:
                    if not isinstance(args, str):
                        raise TypeError
                    json.loads(args)
                except (TypeError, ValueError):
                    raise Rejected(f"{cat}.function.arguments: tool call arguments must be a JSON string",
                                   f"{cat}.function.arguments") from None
                open_ids.append(c["id"])
            while open_ids:
                if i >= len(msgs) or not isinstance(msgs[i], dict) or msgs[i].get("role") != "tool":
                    raise Rejected(
                        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                        f"'tool_call_id'. The following tool_call_ids did not have response messages: {open_ids}",
                        f"messages.[{i}].role",
                    )
                tid = msgs[i].get("tool_call_id")
                if tid not in open_ids:
                    raise Rejected(f"messages[{i}]: tool_call_id {tid} answers no open call", f"messages[{i}]")
                content = msgs[i].get("content")
                parts_ok = isinstance(content, list) and all(
                    isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str) for c in content)
                if not isinstance(content, str) and not parts_ok:  # a string, or an array of text parts
                    raise Rejected(f"Invalid type for 'messages[{i}].content'.", f"messages[{i}].content",
                                   "invalid_type")
                open_ids.remove(tid)
                i += 1

    def refuse(self, h: BaseHTTPRequestHandler, body: Any, why: Rejected, status: int = 400) -> None:
        with self.lock:
            self.rejected.append((body, why.message))
            self.errors.append(why.message)
        error = {"message": why.message, "type": "invalid_request_error", "param": why.param, "code": why.code}
        payload = json.dumps({"error": error}).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()

    def handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            self.refuse(h, raw, Rejected("We could not parse the JSON body of your request."))
            return
        try:
            self.validate(body, self.unstreamed)
            with self.lock:
                if self.script:
                    answer = self.script.pop(0)
                elif self.responder:
                    answer = {"text": "", "tools": [], "delay": 0, "reasoning": "", **self.responder(body)}
                else:
                    raise Rejected("the fake server has no scripted answer left")
                self.requests.append(body)
        except Rejected as why:
            self.refuse(h, body, why)
            return
        if body.get("stream") is not True:
            self.reply_whole(h, body, answer)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        Stream(h, random.Random(self.rng.random())).answer(body, answer, self.release)


    @staticmethod
    def reply_whole(h: BaseHTTPRequestHandler, body: dict[str, Any], answer: dict[str, Any]) -> None:
        """An answer to a request that does not stream: one `chat.completion` object."""
        calls = [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                 for cid, name, args in answer["tools"]]
        message: dict[str, Any] = {"role": "assistant", "content": answer["text"] or None}
        if calls:
            message["tool_calls"] = calls
        prompt = len(json.dumps(body["messages"])) // 4
        completion = max(len(answer["text"]) // 4, 1)
        value = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                 "model": body["model"], "system_fingerprint": "fp_fake",
                 "choices": [{"index": 0, "message": message, "logprobs": None,
                              "finish_reason": "tool_calls" if calls else "stop"}],
                 "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}}
        data = json.dumps(value).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()


class Stream:
    """One streamed answer: SSE events written as HTTP chunks cut at points drawn from `rng`."""

    def __init__(self, h: BaseHTTPRequestHandler, rng: random.Random) -> None:
        self.h, self.rng = h, rng
        self.pending = b""  # bytes held back to go out with the next event's (two events in one write)

    def write(self, data: bytes) -> None:
        if data:  # an empty HTTP chunk would end the body
            self.h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.h.wfile.flush()

    def send(self, raw: bytes, hold: bool = True) -> None:
        """Writes `pending + raw` in one to three pieces, cut anywhere; may keep the last piece for the next event."""
        raw = self.pending + raw
        self.pending = b""
        cuts = sorted(self.rng.sample(range(1, len(raw)), min(len(raw) - 1, self.rng.choice((0, 1, 1, 2)))))
        pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])]
        if hold and len(pieces) > 1 and self.rng.random() < 0.3:
            self.pending = pieces.pop()
        for p in pieces:
            self.write(p)

    def flush(self) -> None:
        self.write(self.pending)
        self.pending = b""

    def event(self, data: dict[str, Any] | str, hold: bool = True) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        self.send(f"data: {text}\n\n".encode(), hold)
        if self.rng.random() < 0.15:
            self.send(b": keep-alive\n\n", hold)

    def answer(self, body: dict[str, Any], answer: dict[str, Any], release: threading.Event) -> None:
        wants_usage = (body.get("stream_options") or {}).get("include_usage") is True
        base: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": "fp_fake",
        }

        def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            out = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            return {**out, "usage": None} if wants_usage else out

        delay = answer.get("delay", 0.005)
        self.send(b": keep-alive\n\n")
        self.event(choice({"role": "assistant", "content": ""}))
        field = answer.get("reasoning_field", "reasoning_content")
        for word in answer["reasoning"].split(" ") if answer.get("reasoning") else []:
            self.event(choice({field: word + " ", "content": None}))
            time.sleep(delay)
        words = answer["text"].split(" ") if answer["text"] else []
        for word in words:
            # flushed whole before each pause: a word on screen is a word that was sent
            self.event(choice({"content": word + " "}), hold=delay <= 0.005)
            time.sleep(delay)
        if answer.get("hang"):
            self.flush()
            release.wait(60)
            return
        for idx, (cid, name, args) in enumerate(answer["tools"]):
            first = {"index": idx, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
            self.event(choice({"tool_calls": [first]}))
            arg_text = json.dumps(args)
            cuts = sorted(self.rng.sample(range(1, len(arg_text)), min(len(arg_text) - 1, self.rng.randint(0, 3))))
            for a, b in zip([0, *cuts], [*cuts, len(arg_text)]):
                self.event(choice({"tool_calls": [{"index": idx, "function": {"arguments": arg_text[a:b]}}]}))
        self.event(choice({}, "tool_calls" if answer["tools"] else "stop"))
        if wants_usage:
            usage = answer.get("usage")
            if usage is None:
                prompt = len(json.dumps(body["messages"])) // 4
                completion = len(words) + sum(len(json.dumps(c[2])) // 4 + 1 for c in answer["tools"])
                usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
            self.event({**base, "choices": [], "usage": usage})
        self.event("[DONE]", hold=False)
        self.flush()
        self.h.wfile.write(b"0\r\n\r\n")
        self.h.wfile.flush()


class FakeAnthropic:
    """A fake Anthropic Messages API server on 127.0.0.1, for the end-to-end tests.

    `POST /v1/messages` with `stream: true` and an `anthropic-version` header, answered by the real event stream:
    `message_start` (with the input side of `usage`), `ping`, a `text` content block in several `text_delta`s, one
    `tool_use` block per call whose input arrives as `input_json_delta` pieces, `content_block_stop` after each block,
    `message_delta` (`stop_reason` `end_turn` or `tool_use`, the output tokens) and `message_stop`; the text word
    by word `delay` seconds apart (`push_burst`: 10,000 pieces with no pause). Each request is
    checked against the API's rules (see `validate`, the same as tests/it/support/mod.rs's `validate_anthropic`,
    which does not know `adaptive` thinking) and
    answered 400 with the API's error body when it breaks one, as the real API does. Answers are scripted in order
    with `push_text` and `push_tools`; `usage` holds the counts as the API names them (`input_tokens`,
    `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`).

    Extended thinking: an answer scripted with `thinking` streams a `thinking` block first (`thinking_delta`s, then
    a `signature_delta`), and with `redacted` a `redacted_thinking` block; signatures are the FNV-1a hash of the text
    (`signature`, as tests/it/support/mod.rs makes them), so a block sent back changed is refused ("Invalid
    `signature`"), and with `thinking` enabled a request that continues a tool loop must start its last assistant
    message with its thinking blocks, as the real API requires (not with `adaptive` thinking, Claude Code's, where
    the model may not think at all).

    For the real Claude Code (tests/e2e/acp_rig.py): the query of `/v1/messages?beta=true` is accepted (and kept in
    `paths`), `HEAD /` answers 200, `POST /v1/messages/count_tokens` an estimate; a scripted `status` (and `error`
    type) answers that HTTP error instead. In a process of its own (`python3 tests/e2e/fake_llm.py anthropic`, see
    `main`) it is scripted with `POST /_fake/push` and read with `GET /_fake/requests`, `/_fake/paths`,
    `/_fake/errors`.
    """

    def __init__(self, cache: bool = False, port: int = 0,
                 responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        """`cache`: imitate prompt caching: each `cache_control` block caches the prompt up to it (tools, system,
        messages, in that order); a later request whose prefix up to one of its own breakpoints was cached before is
        billed that much as `cache_read_input_tokens` (a token: four bytes of the prefix's JSON), the rest of its
        longest prefix as `cache_creation_input_tokens`. `port`: 0 for any free one. `responder`: called with a
        valid request's body when the script is empty, it returns the answer (as `push` takes it)."""
        self.cache, self.responder = cache, responder
        self.paths: list[str] = []  # the path of every POST to the Messages API, query included (`?beta=true`)
        # time.monotonic() (CLOCK_MONOTONIC, the clock of vim.uv.hrtime() too) as each answer's first text_delta is
        # about to be written: where a client's time to the first word starts, apart from the agent's work before it
        self.first_text_at: list[float] = []
        self.count_requests: list[dict[str, Any]] = []  # bodies of `POST /v1/messages/count_tokens`
        self.cached: dict[str, int] = {}  # prefix (as JSON) -> tokens
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # each event goes out as written (TCP_NODELAY), as a real server's do: without it the second half of an
            # event waits for the client's delayed ACK, up to 40 ms, which would hide a client's own latency
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    outer.handle(self, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a cancel, a killed agent): not the server's fault

            def do_HEAD(self) -> None:  # noqa: N802
                outer.probe(self)

            def do_GET(self) -> None:  # noqa: N802
                outer.probe(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    # -- script -------------------------------------------------------------------------------------------

    def push_text(
        self, text: str, usage: dict[str, int] | None = None, thinking: str = "", redacted: str | None = None,
        hang: bool = False, delay: float = 0.005, pieces: list[str] | None = None,
    ) -> None:
        """`thinking`: streamed first as a `thinking` block (its signature after it); `redacted`: a `redacted_thinking`
        block made of this secret; `hang`: after the text, the stream stays open (until close()). The text streams
        word by word (or as the given `pieces`, which must join to it), `delay` seconds after each piece (0: as one
        burst)."""
        self.push({"text": text, "tools": [], "usage": usage, "thinking": thinking, "redacted": redacted,
                   "hang": hang, "delay": delay, "pieces": pieces})

    def push_tools(
        self, text: str, calls: list[tuple[str, str, dict[str, Any]]], usage: dict[str, int] | None = None,
        thinking: str = "", redacted: str | None = None, delay: float = 0.005,
    ) -> None:
        self.push({"text": text, "tools": calls, "usage": usage, "thinking": thinking, "redacted": redacted,
                   "delay": delay})

    def push_burst(self, chunks: int = 10_000, word: str = "word") -> str:
        """A text answer of `chunks` `text_delta` events sent with no pause between them (`word` and a space each);
        returns the whole text."""
        pieces = [f"{word} "] * chunks
        self.push_text("".join(pieces), delay=0, pieces=pieces)
        return "".join(pieces)

    def push(self, answer: dict[str, Any]) -> None:
        """Appends one answer as `push_text`/`push_tools` make them (the form `POST /_fake/push` takes as JSON, with
        `tools` as `[[id, name, input], ...]`), checked so that a mistake in a test's script is named at once."""
        answer = self.complete(answer)
        with self.lock:
            self.script.append(answer)

    @staticmethod
    def complete(answer: dict[str, Any]) -> dict[str, Any]:
        """`answer` with every field (the defaults where it has none), checked."""
        known = {"text", "tools", "usage", "thinking", "redacted", "hang", "delay", "pieces", "status", "error"}
        unknown = set(answer) - known
        if unknown:
            raise ValueError(f"unknown fields in a scripted answer: {sorted(unknown)} (known: {sorted(known)})")
        answer = {"text": "", "tools": [], "usage": None, "thinking": "", "redacted": None, "hang": False,
                  "delay": 0.005, "pieces": None, **answer}
        answer["tools"] = [tuple(c) for c in answer["tools"]]
        if answer["pieces"] is not None and "".join(answer["pieces"]) != answer["text"]:
            raise ValueError("the pieces of a scripted answer must join to its text")
        return answer

    # -- thinking -----------------------------------------------------------------------------------------

    @staticmethod
    def fnv64(data: bytes) -> int:
        h = 0xCBF29CE484222325
        for b in data:
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return h

    @staticmethod
    def signature(thinking: str) -> str:
        """The fake's signature of a thinking block (tests/it/support/mod.rs `fake_signature`: the same bytes)."""
        return f"EqSig{FakeAnthropic.fnv64(thinking.encode()):016x}"

    @staticmethod
    def redacted_data(secret: str) -> str:
        return f"EmRed{FakeAnthropic.fnv64(secret.encode()):016x}{secret}"

    @staticmethod
    def _thinking_problem(b: dict[str, Any]) -> str | None:
        if b.get("type") == "thinking":
            text, sig = b.get("thinking"), b.get("signature")
            if not isinstance(text, str) or not isinstance(sig, str):
                return "a `thinking` block needs `thinking` and `signature`"
            return None if sig == FakeAnthropic.signature(text) else "Invalid `signature` in `thinking` block"
        data = b.get("data")
        ok = isinstance(data, str) and data.startswith("EmRed") and len(data) >= 21 and \
            data[5:21] == f"{FakeAnthropic.fnv64(data[21:].encode()):016x}"
        return None if ok else "Invalid `data` in `redacted_thinking` block"

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
        thinking = body.get("thinking")
        thinking_on = isinstance(thinking, dict) and thinking.get("type") != "disabled"
        if thinking is not None and thinking_on:
            budget = thinking.get("budget_tokens")
            if thinking.get("type") not in ("enabled", "adaptive"):
                return "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'"
            if thinking["type"] == "adaptive":  # the model decides how much it thinks, if at all (Claude Code's)
                if budget is not None:
                    return "thinking.adaptive.budget_tokens: Extra inputs are not permitted"
            elif not isinstance(budget, int) or budget < 1024:
                return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            elif budget >= body["max_tokens"]:
                return "`max_tokens` must be greater than `thinking.budget_tokens`"
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
                elif kind in ("thinking", "redacted_thinking"):
                    if role != "assistant":
                        return f"{at}: {kind} blocks are only allowed in assistant messages"
                    problem = FakeAnthropic._thinking_problem(b)
                    if problem:
                        return f"{at}: {problem}"
                    seen_other = True
                elif kind is None:
                    return f"{at}.type: Field required"
                else:
                    seen_other = True  # images, documents...
            if role == "user":
                missing = [t for t in asked if t not in answered]
                if missing:
                    return FakeAnthropic._unanswered(f"messages.{i}", missing)
            asked = used
        if asked:
            return FakeAnthropic._unanswered("messages", asked)
        if thinking_on and thinking.get("type") == "enabled":  # adaptive thinking may skip a turn's thinking
            return FakeAnthropic._final_turn_problem(msgs)
        return None

    @staticmethod
    def _final_turn_problem(msgs: list[Any]) -> str | None:
        """With thinking on, a request continuing a tool loop (it ends with tool results) must give the last assistant
        message back starting with its thinking blocks, in the API's words."""
        last = msgs[-1].get("content")
        if not (isinstance(last, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)):
            return None
        i = max(j for j, m in enumerate(msgs) if m.get("role") == "assistant")
        content = msgs[i]["content"]
        first = content[0].get("type") if isinstance(content, list) else "text"
        if first in ("thinking", "redacted_thinking"):
            return None
        return (f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When "
                "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
                "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
                "previous turns. To avoid this requirement, disable `thinking`.")

    def cache_usage(self, body: dict[str, Any]) -> dict[str, int]:
        """The input side of `usage` as prompt caching bills `body` (see `__init__`), and what it caches."""
        blocks: list[Any] = [("tool", t) for t in body.get("tools") or []]
        system = body.get("system")
        blocks += [("system", b) for b in (system if isinstance(system, list) else [system] if system else [])]
        for m in body["messages"]:
            content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            blocks += [(m["role"], b) for b in content]

        def strip(b: Any) -> Any:
            return {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b

        total = len(json.dumps([(r, strip(b)) for r, b in blocks])) // 4
        prefixes = []
        for i, (_, b) in enumerate(blocks):
            if isinstance(b, dict) and "cache_control" in b:
                key = json.dumps([(r, strip(x)) for r, x in blocks[: i + 1]])
                prefixes.append((key, len(key) // 4))
        with self.lock:
            read = max((n for k, n in prefixes if k in self.cached), default=0)
            longest = max((n for _, n in prefixes), default=0)
            for k, n in prefixes:
                self.cached[k] = n
        write = max(longest - read, 0)
        return {"input_tokens": max(total - read - write, 1), "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write}

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

    # -- other endpoints ----------------------------------------------------------------------------------

    def reply_json(self, h: BaseHTTPRequestHandler, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
        h.wfile.flush()

    def probe(self, h: BaseHTTPRequestHandler) -> None:
        """`HEAD /` (Claude Code's check that the base URL answers) and any other GET: 200 with an empty object;
        `GET /_fake/requests` and `/_fake/errors`: what the fake recorded (for a test in another process)."""
        path = h.path.partition("?")[0]
        with self.lock:
            recorded = {"/_fake/requests": self.requests, "/_fake/errors": self.errors,
                        "/_fake/paths": self.paths, "/_fake/script": self.script}.get(path)
            value = json.loads(json.dumps(recorded)) if recorded is not None else {}
        self.reply_json(h, 200, value)

    def control(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        """`POST /_fake/push`: one scripted answer (an object as `push` takes) or a list of them, for a test that runs
        the fake in another process (`python3 tests/e2e/fake_llm.py anthropic`)."""
        try:
            value = json.loads(raw)
            for answer in value if isinstance(value, list) else [value]:
                self.push(answer)
        except (ValueError, TypeError, AttributeError) as e:
            self.reply_json(h, 400, {"error": f"bad script: {e}"})
            return
        self.reply_json(h, 200, {"queued": len(self.script)})

    def count_tokens(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        """`POST /v1/messages/count_tokens`: `{"input_tokens": N}`, N a quarter of the body's bytes."""
        try:
            body = json.loads(raw)
        except ValueError as e:
            body, problem = None, f"the body is not JSON: {e}"
        else:
            problem = None if isinstance(body, dict) and body.get("model") and isinstance(body.get("messages"), list) \
                else "model and messages are required"
        with self.lock:
            self.count_requests.append(body)
            if problem:
                self.errors.append(f"count_tokens: {problem}")
        if problem:
            self.reply_json(h, 400, {"type": "error", "error": {"type": "invalid_request_error", "message": problem}})
        else:
            self.reply_json(h, 200, {"input_tokens": max(len(raw) // 4, 1)})

    # -- the Messages API -----------------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        problem = None
        body: Any = None
        path = h.path.partition("?")[0]  # Claude Code asks for `/v1/messages?beta=true`
        if path == "/_fake/push":
            self.control(h, raw)
            return
        if path == "/v1/messages/count_tokens" and h.headers.get("anthropic-version"):
            self.count_tokens(h, raw)
            return
        if path != "/v1/messages":
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
            self.paths.append(h.path)
            if body is not None:
                self.requests.append(body)
            problem = problem or self.validate(body)
            answer = None
            if not problem:
                answer = self.script.pop(0) if self.script else self.responder and self.complete(self.responder(body))
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
        if answer.get("status"):
            error = {"type": answer.get("error") or "api_error", "message": f"scripted {answer['status']}"}
            self.reply_json(h, answer["status"], {"type": "error", "error": error})
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

        delay = answer.get("delay", 0.005)
        usage = {"input_tokens": 25, "output_tokens": 7, **(self.cache_usage(body) if self.cache else {}),
                 **(answer.get("usage") or {})}
        start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
        event("message_start", {"type": "message_start", "message": {
            "id": "msg_fake01", "type": "message", "role": "assistant", "model": body["model"], "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {**start_usage, "output_tokens": 1}}})
        event("ping", {"type": "ping"})
        index = 0
        if answer.get("thinking"):
            thought = answer["thinking"]
            event("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            for piece in re.findall(r"\s*\S+\s*$|\s*\S+", thought) or [thought]:
                event("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "thinking_delta", "thinking": piece}})
                if delay:
                    time.sleep(delay)
            event("content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "signature_delta", "signature": self.signature(thought)}})
            event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        if answer.get("redacted") is not None:
            event("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "redacted_thinking", "data": self.redacted_data(answer["redacted"])}})
            event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        if answer["text"]:
            event("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}})
            # word by word (or as scripted), the text exactly as scripted once joined
            pieces = answer.get("pieces") or re.findall(r"\s*\S+\s*$|\s*\S+", answer["text"]) or [answer["text"]]
            for n, piece in enumerate(pieces):
                if n == 0:
                    self.first_text_at.append(time.monotonic())
                event("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": piece}})
                if delay:
                    time.sleep(delay)
            event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        if answer.get("hang"):
            self.release.wait(60)
            return
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


class FakeGemini:
    """A fake Gemini API server (`generativelanguage`'s `v1beta`) on 127.0.0.1, for the real Gemini CLI
    (tests/e2e/agent_stores.py; `GOOGLE_GEMINI_BASE_URL` = `base_url`).

    `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, a turn's model call, is answered by SSE events
    `data: {"candidates": [{"content": {"role": "model", "parts": [...]}, "index": 0}], "modelVersion": ...}`: the
    text in word-sized `text` parts, then one `functionCall` part per call (`{name, args, id}`), the last event with
    `finishReason: "STOP"` and `usageMetadata`. `POST /v1beta/models/<model>:generateContent` answers the same in one
    JSON object; when its `generationConfig` asks for JSON (`responseJsonSchema` or `responseSchema`: the CLI's
    routing call asking for a `complexity_score`, its next-speaker and loop checks) the text is a value made from the
    schema (`schema_value`) and takes nothing from the script (such calls are in `side_requests`).
    `:countTokens` answers an estimate. Answers are scripted in order with `push_text`/`push_tools` or, once the
    script is empty, come from `responder(body)` (an answer's `delay`: seconds after each event).

    Each request is checked as the API does and refused with its error body (`{"error": {"code": 400, "message",
    "status": "INVALID_ARGUMENT"}}`): the `x-goog-api-key` header, `contents` a non-empty list of `{role: user|model,
    parts}` with known parts, every `functionCall` of a model turn answered by as many `functionResponse` parts of the
    same names in the user turn right after it, the last turn the user's. Refusals are in `errors` (a test asserts it
    empty) and `rejected`.
    """

    PARTS = {"text", "functionCall", "functionResponse", "inlineData", "fileData", "executableCode",
             "codeExecutionResult"}

    def __init__(self, responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.responder = responder
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []  # turns' bodies (streamed or not) answered from the script
        self.side_requests: list[dict[str, Any]] = []  # JSON-schema calls (routing, checks) and countTokens
        self.paths: list[str] = []
        self.rejected: list[tuple[Any, str]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.server = serve(self, lambda h: self.refuse(h, None, f"GET {h.path}: not found", 404, "NOT_FOUND"),
                            self.handle)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def push_text(self, text: str) -> None:
        self.script.append({"text": text, "tools": []})

    def push_tools(self, text: str, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
        """`calls`: `(id, name, args)`, sent as `functionCall` parts after the text."""
        self.script.append({"text": text, "tools": calls})

    # -- protocol -----------------------------------------------------------------------------------------

    @classmethod
    def validate(cls, h: BaseHTTPRequestHandler, body: Any) -> str | None:
        if not h.headers.get("x-goog-api-key") and "key=" not in h.path:
            return "Method doesn't allow unregistered callers (callers without established identity). Please use " \
                   "API Key or other form of API consumer identity to call this API."
        if not isinstance(body, dict):
            return "Invalid JSON payload received."
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            return "* GenerateContentRequest.contents: contents is not specified"
        asked: list[str] = []
        for i, c in enumerate(contents):
            at = f"GenerateContentRequest.contents[{i}]"
            if not isinstance(c, dict) or c.get("role") not in ("user", "model"):
                return f"* {at}.role: Please use a valid role: user, model."
            parts = c.get("parts")
            if not isinstance(parts, list) or not parts:
                return f"* {at}.parts: contents.parts must not be empty."
            names = []
            for j, p in enumerate(parts):
                kinds = set(p) & cls.PARTS if isinstance(p, dict) else set()
                if len(kinds) != 1:
                    return f"* {at}.parts[{j}].data: required oneof field 'data' must have one initialized field"
                (kind,) = kinds
                if kind in ("functionCall", "functionResponse") and not (p[kind] or {}).get("name"):
                    return f"* {at}.parts[{j}].{kind}.name: Name cannot be empty."
                if kind == "functionCall" and c["role"] == "model":
                    names.append(p[kind]["name"])
                elif kind == "functionResponse":
                    names.append(p[kind]["name"])
            if asked:
                if c["role"] != "user" or sorted(names) != sorted(asked):
                    return ("Please ensure that the number of function response parts is equal to the number of "
                            f"function call parts of the function call turn (contents[{i}]).")
                asked = []
            elif c["role"] == "model":
                asked = names
            elif names:
                return f"* {at}: a function response answers no function call"
        if asked or contents[-1]["role"] != "user":
            return "Please ensure that multiturn requests alternate between user and model, ending with the user."
        return None

    def refuse(self, h: BaseHTTPRequestHandler, body: Any, why: str, status: int = 400,
               kind: str = "INVALID_ARGUMENT") -> None:
        with self.lock:
            self.rejected.append((body, why))
            self.errors.append(why)
        self.reply_json(h, status, {"error": {"code": status, "message": why, "status": kind}})

    @staticmethod
    def reply_json(h: BaseHTTPRequestHandler, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=UTF-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    @classmethod
    def schema_value(cls, schema: Any) -> Any:
        """A small value the JSON schema accepts: an enum's first value, a number's minimum (else 1), every
        property of an object (the required ones at least)."""
        if not isinstance(schema, dict):
            return None
        if schema.get("enum"):
            return schema["enum"][0]
        kind = str(schema.get("type", "object")).lower()
        if kind == "object":
            props = schema.get("properties") or {}
            return {k: cls.schema_value(v) for k, v in props.items()}
        if kind == "array":
            return [cls.schema_value(schema.get("items"))] if schema.get("minItems") else []
        if kind in ("integer", "number"):
            return schema.get("minimum", 1)
        if kind == "boolean":
            return False
        return "fake"

    def handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        m = re.fullmatch(r"/v1beta/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)",
                         h.path.partition("?")[0])
        if not m:
            self.refuse(h, raw.decode(errors="replace"), f"POST {h.path}: not found", 404, "NOT_FOUND")
            return
        model, method = m.groups()
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        if method == "countTokens":
            with self.lock:
                self.side_requests.append(body)
            self.reply_json(h, 200, {"totalTokens": max(len(raw) // 4, 1)})
            return
        problem = self.validate(h, body)
        if problem:
            self.refuse(h, body, problem)
            return
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        with self.lock:
            if schema is not None and method == "generateContent":
                self.side_requests.append(body)
                answer = {"text": json.dumps(self.schema_value(schema)), "tools": []}
            elif self.script or self.responder:
                answer = self.script.pop(0) if self.script else {"text": "", "tools": [], **self.responder(body)}
                self.requests.append(body)
            else:
                answer = None
        if answer is None:
            self.refuse(h, body, "the fake server has no scripted answer left")
            return
        usage = {"promptTokenCount": max(len(raw) // 4, 1), "candidatesTokenCount": max(len(answer["text"]) // 4, 1)}
        usage["totalTokenCount"] = usage["promptTokenCount"] + usage["candidatesTokenCount"]
        text_parts = [{"text": w} for w in re.findall(r"\S+\s*|\s+", answer["text"])]
        call_parts = [{"functionCall": {"id": cid, "name": name, "args": args}} for cid, name, args in answer["tools"]]

        def chunk(parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
            cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
            out: dict[str, Any] = {"candidates": [cand], "modelVersion": model, "responseId": "fake-response"}
            if last:
                cand["finishReason"] = "STOP"
                out["usageMetadata"] = usage
            return out

        if method == "generateContent":
            whole = [{"text": answer["text"]}] if answer["text"] else []
            self.reply_json(h, 200, chunk(whole + call_parts or [{"text": ""}], True))
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        events = [[p] for p in text_parts] + ([call_parts] if call_parts else [])
        events = events or [[{"text": ""}]]
        for n, parts in enumerate(events):
            data = f"data: {json.dumps(chunk(parts, n == len(events) - 1))}\r\n\r\n".encode()
            h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            h.wfile.flush()
            time.sleep(answer.get("delay", 0))
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


class FakeResponses:
    """A fake OpenAI Responses API server on 127.0.0.1, for the real Codex CLI (tests/e2e/agent_stores.py; Codex speaks
    only this API). `POST /v1/responses` with `stream: true` is answered by the API's named SSE events:
    `response.created`, then for the text `response.output_item.added` (an assistant `message`), word-sized
    `response.output_text.delta`s and `response.output_item.done` with the whole `output_text`, then one
    `response.output_item.done` per call (a `function_call` item: `call_id`, `name`, `arguments` as a JSON string),
    and `response.completed` with `usage`. Answers come from the script (`push_text`, `push_tools`), then from
    `responder(body)`.

    Each request is checked as the API does and refused with its error body (`{"error": {"message", "type":
    "invalid_request_error", "param", "code"}}`): `model`, `stream: true`, `input` a list of known items, every
    `function_call` answered by a `function_call_output` of its `call_id` after it, no output answering nothing.
    Refusals are in `errors` (a test asserts it empty) and `rejected`.
    """

    ITEMS = {"message", "function_call", "function_call_output", "reasoning", "custom_tool_call",
             "custom_tool_call_output", "local_shell_call", "local_shell_call_output", "web_search_call",
             "compaction", "compaction_summary"}

    def __init__(self, responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.responder = responder
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.rejected: list[tuple[Any, str]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.server = serve(self, lambda h: self.refuse(h, None, f"Invalid URL (GET {h.path})", 404), self.handle)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def push_text(self, text: str) -> None:
        self.script.append({"text": text, "tools": []})

    def push_tools(self, text: str, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
        """`calls`: `(call_id, name, args)`, each a `function_call` item after the text."""
        self.script.append({"text": text, "tools": calls})

    @classmethod
    def validate(cls, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "We could not parse the JSON body of your request."
        if not body.get("model"):
            return "Missing required parameter: 'model'."
        if body.get("stream") is not True:
            return "stream must be true"
        items = body.get("input")
        if not isinstance(items, list):
            return "Invalid type for 'input': expected a list."
        open_calls: list[str] = []
        for i, item in enumerate(items):
            kind = item.get("type", "message") if isinstance(item, dict) else None
            if kind not in cls.ITEMS:
                return f"Invalid value: '{kind}'. Supported values are: {', '.join(sorted(cls.ITEMS))}. (input[{i}])"
            if kind in ("function_call", "custom_tool_call"):
                if not item.get("call_id") or not item.get("name"):
                    return f"Missing required parameter: 'input[{i}].call_id'."
                if kind == "function_call":
                    try:
                        json.loads(item.get("arguments"))
                    except (TypeError, ValueError):
                        return f"input[{i}].arguments: must be a JSON string"
                open_calls.append(item["call_id"])
            elif kind in ("function_call_output", "custom_tool_call_output"):
                if item.get("call_id") not in open_calls:
                    return f"No tool call found for function call output with call_id {item.get('call_id')}."
                open_calls.remove(item["call_id"])
        if open_calls:
            return f"No tool output found for function call {open_calls[0]}."
        return None

    def refuse(self, h: BaseHTTPRequestHandler, body: Any, why: str, status: int = 400) -> None:
        with self.lock:
            self.rejected.append((body, why))
            self.errors.append(why)
        FakeGemini.reply_json(h, status, {"error": {"message": why, "type": "invalid_request_error", "param": None,
                                                    "code": None}})

    def handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        if h.path.partition("?")[0].rstrip("/") != "/v1/responses":
            self.refuse(h, raw.decode(errors="replace"), f"Invalid URL (POST {h.path})", 404)
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        problem = self.validate(body)
        if problem:
            self.refuse(h, body, problem)
            return
        with self.lock:
            if self.script or self.responder:
                answer = self.script.pop(0) if self.script else {"text": "", "tools": [], **self.responder(body)}
                self.requests.append(body)
            else:
                answer = None
        if answer is None:
            self.refuse(h, body, "the fake server has no scripted answer left")
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        seq = iter(range(1_000_000))

        def event(kind: str, data: dict[str, Any]) -> None:
            payload = json.dumps({"type": kind, "sequence_number": next(seq), **data})
            chunk = f"event: {kind}\ndata: {payload}\n\n".encode()
            h.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            h.wfile.flush()
            time.sleep(answer.get("delay", 0))

        response = {"id": "resp_fake", "object": "response", "created_at": int(time.time()), "status": "in_progress",
                    "model": body["model"], "output": []}
        event("response.created", {"response": response})
        output: list[dict[str, Any]] = []
        if answer["text"]:
            msg_id = "msg_fake"
            event("response.output_item.added", {"output_index": 0, "item": {
                "id": msg_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}})
            for piece in re.findall(r"\S+\s*|\s+", answer["text"]):
                event("response.output_text.delta", {"item_id": msg_id, "output_index": 0, "content_index": 0,
                                                     "delta": piece})
            item = {"id": msg_id, "type": "message", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": answer["text"], "annotations": []}]}
            event("response.output_item.done", {"output_index": 0, "item": item})
            output.append(item)
        for call_id, name, args in answer["tools"]:
            item = {"id": f"fc_{call_id}", "type": "function_call", "status": "completed", "call_id": call_id,
                    "name": name, "arguments": json.dumps(args)}
            event("response.output_item.added", {"output_index": len(output), "item": {**item, "arguments": ""}})
            event("response.output_item.done", {"output_index": len(output), "item": item})
            output.append(item)
        tokens_in = max(len(raw) // 4, 1)
        tokens_out = max(len(answer["text"]) // 4, 1)
        event("response.completed", {"response": {**response, "status": "completed", "output": output, "usage": {
            "input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tokens_out,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens_in + tokens_out}}})
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


def main() -> None:
    """`python3 tests/e2e/fake_llm.py anthropic [--port N]`: the fake Anthropic server in a process of its own, for
    tests outside Python (Rust). Prints `{"port": N, "base_url": URL}` on one line once it listens, then serves until
    killed or its stdin closes. Script it with `POST /_fake/push` (an answer as `FakeAnthropic.push` takes it, or a
    list), read what it got with `GET /_fake/requests`, `/_fake/paths` and `/_fake/errors` (refused requests: a test
    asserts it is empty)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("api", choices=["anthropic"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    fake = FakeAnthropic(port=args.port)
    print(json.dumps({"port": fake.server.server_address[1], "base_url": fake.base_url}), flush=True)
    try:
        sys.stdin.read()  # the parent closing our stdin (or dying) ends us
    except KeyboardInterrupt:
        pass
    fake.close()


if __name__ == "__main__":
    main()
