"""A bare ACP client (Agent Client Protocol: JSON-RPC 2.0, one message a line, over the agent's stdio), used only
by the tests and benches: to prove the real agent and the fake Anthropic server work together, and as the baseline
our client is measured against (tests/bench/acp_bench.py).

As a library:

    with AcpClient([agent, ...], env=env, cwd=workspace) as c:
        c.initialize()
        sid = c.new_session(workspace)
        stop = c.prompt(sid, "write a file")        # blocks until the turn ends; returns its stopReason
        c.updates                                    # every session/update's `update`, in order
        c.permissions                                # every session/request_permission's params, in order

Permission requests are answered by `permission` (`allow_once`, `allow_always`, `reject_once`: the first option
of that kind; `cancel`: the `cancelled` outcome) or by a callable given the request's params and returning the
response's `outcome`. The client advertises no `fs` and no `terminal` capability unless asked: the agent then
reads, writes and runs commands itself, as Claude Code's adapter does in its default set-up.

As a script, one process per step, printing each message the agent sends as a JSON line (`{"t": seconds since
start, "in": message}`) and `{"t", "result": ...}` for each answer to our requests:

    acp_client.py --cwd DIR [--load SESSION_ID] [--prompt TEXT]... [--permission allow_once] -- AGENT [ARGS...]

`--load` does `session/load` instead of `session/new` (exit status 3 when the agent refuses it); the session id
is printed as `{"session": ID}` either way.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

PROTOCOL_VERSION = 1


class AcpError(Exception):
    """An error answer to one of our requests: `code`, `message`, `data` as the agent sent them."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method}: {error.get('message')} (code {error.get('code')}, data {error.get('data')!r})")
        self.method, self.code, self.data = method, error.get("code"), error.get("data")


class AcpClient:
    def __init__(
        self,
        command: list[str],
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        permission: str | Callable[[dict[str, Any]], dict[str, Any]] = "allow_once",
        on_message: Callable[[float, dict[str, Any]], None] | None = None,
        stderr: Any = None,
    ) -> None:
        """`on_message(t, message)`: called on the reader thread with each message from the agent (and `t`, seconds
        since `time.monotonic()`'s origin) as it arrives, before anything else is done with it."""
        self.command = command
        self.permission = permission
        self.on_message = on_message
        self.updates: list[dict[str, Any]] = []
        self.update_times: list[float] = []  # time.monotonic() at each update's arrival
        self.permissions: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []  # every request from the agent (method, params)
        self.agent_info: dict[str, Any] = {}
        self._next = 0
        self._pending: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: close() ends Claude Code's children too
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- lifecycle ----------------------------------------------------------------------------------------

    def __enter__(self) -> "AcpClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the agent's stdin and ends its whole process group: SIGTERM, SIGKILL after 5 s. (claude-agent-acp
        does not exit when its stdin closes: a client must end it.)"""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                self.proc.poll()
                try:
                    os.killpg(self.proc.pid, 0)  # anyone of the group left (Claude Code, its shells)?
                except ProcessLookupError:
                    return
                time.sleep(0.02)
        self.proc.wait(5)

    # -- protocol -----------------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float = 120.0) -> Any:
        """Sends a request and waits for its answer; raises `AcpError` on an error answer, `TimeoutError`, or
        `EOFError` when the agent exits first."""
        with self._lock:
            self._next += 1
            rid = self._next
            waiter: queue.Queue[dict[str, Any]] = queue.Queue()
            self._pending[rid] = waiter
        self._send({"id": rid, "method": method, "params": params})
        try:
            answer = waiter.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{method}: no answer within {timeout} s") from None
        finally:
            with self._lock:
                self._pending.pop(rid, None)
        if "eof" in answer:
            raise EOFError(f"{method}: the agent exited (status {self.proc.poll()}) before answering")
        if "error" in answer:
            raise AcpError(method, answer["error"])
        return answer.get("result")

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"method": method, "params": params})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.monotonic()
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"unparsed": line.decode(errors="replace")}
            if self.on_message:
                self.on_message(now, msg)
            if "method" in msg and "id" in msg:
                threading.Thread(target=self._serve, args=(msg,), daemon=True).start()
            elif "method" in msg:
                if msg["method"] == "session/update":
                    self.update_times.append(now)
                    self.updates.append(msg["params"]["update"])
            elif "id" in msg:
                with self._lock:
                    waiter = self._pending.get(msg["id"])
                if waiter is not None:
                    waiter.put(msg)
        with self._lock:
            for waiter in self._pending.values():
                waiter.put({"eof": True})

    def _serve(self, msg: dict[str, Any]) -> None:
        """Answers a request from the agent: permissions as told; anything else `Method not found`."""
        self.requests.append({"method": msg["method"], "params": msg.get("params")})
        if msg["method"] == "session/request_permission":
            params = msg["params"]
            self.permissions.append(params)
            self._send({"id": msg["id"], "result": {"outcome": self._choose(params)}})
        else:
            self._send({"id": msg["id"], "error": {"code": -32601, "message": f"Method not found: {msg['method']}"}})

    def _choose(self, params: dict[str, Any]) -> dict[str, Any]:
        if callable(self.permission):
            return self.permission(params)
        if self.permission == "cancel":
            return {"outcome": "cancelled"}
        for option in params["options"]:
            if option["kind"] == self.permission:
                return {"outcome": "selected", "optionId": option["optionId"]}
        raise AssertionError(f"no {self.permission} option among {params['options']}")

    # -- the methods --------------------------------------------------------------------------------------

    def initialize(self, fs: bool = False, terminal: bool = False) -> dict[str, Any]:
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": terminal},
            "clientInfo": {"name": "pseudoclaude-test-client", "version": "0"},
        })
        self.agent_info = result
        return result

    def new_session(self, cwd: str) -> str:
        return self.request("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]

    def load_session(self, session_id: str, cwd: str) -> Any:
        """`session/load`: the agent replays the session as `session/update`s before answering."""
        return self.request("session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []})

    def prompt(self, session_id: str, text: str, timeout: float = 120.0) -> str:
        """One turn; returns its `stopReason` (`end_turn`, `cancelled`, ...)."""
        result = self.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
                              timeout)
        return result["stopReason"]

    def cancel(self, session_id: str) -> None:
        self.notify("session/cancel", {"sessionId": session_id})

    # -- reading the updates ------------------------------------------------------------------------------

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("sessionUpdate") == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        """The text of every update of `kind` joined (the agent's answer, or `agent_thought_chunk`'s thinking)."""
        return "".join(u["content"].get("text", "") for u in self.of_kind(kind) if isinstance(u.get("content"), dict))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cwd", required=True, help="the session's working directory (absolute)")
    parser.add_argument("--load", metavar="SESSION_ID", help="session/load this session instead of session/new")
    parser.add_argument("--prompt", action="append", default=[], help="a user message (one turn each, in order)")
    parser.add_argument("--permission", default="allow_once",
                        help="how to answer permission requests: allow_once, allow_always, reject_once, cancel")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each answer")
    parser.add_argument("agent", nargs="+", help="the agent's command line (after --)")
    args = parser.parse_args()
    start = time.monotonic()
    out_lock = threading.Lock()

    def out(obj: dict[str, Any]) -> None:
        with out_lock:
            print(json.dumps({"t": round(time.monotonic() - start, 6), **obj}), flush=True)

    client = AcpClient(args.agent, cwd=args.cwd, permission=args.permission, stderr=sys.stderr,
                       on_message=lambda t, m: out({"in": m}))
    try:
        out({"result": client.initialize()})
        if args.load:
            try:
                out({"result": client.load_session(args.load, args.cwd)})
            except AcpError as e:
                out({"error": str(e)})
                return 3
            sid = args.load
        else:
            sid = client.new_session(args.cwd)
        out({"session": sid})
        for text in args.prompt:
            out({"result": {"stopReason": client.prompt(sid, text, args.timeout)}})
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
