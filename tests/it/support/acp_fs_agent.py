#!/usr/bin/env python3
"""A scripted ACP agent for the protocol-level tests of the client's `fs/*` and `terminal/*` methods
(claude-agent-acp, the real agent, never calls them: it reads, writes and runs its shell itself).

JSON-RPC 2.0, one message a line on stdin/stdout. `initialize` answers with no capabilities and remembers the
client's; `session/new` gives `s1`; each `session/prompt`'s text is a JSON list of requests to make of the client in
order (`{"method": "fs/read_text_file", "params": {...}}`; `sessionId` is filled in; a param `"$N"` stands for the
`terminalId` the Nth request's result gave; `{"method": "sleep", "params": {"seconds": S}}` only waits; `{"method": "show_terminal", "params": {"terminalId":
..., "title": ..., "id": ..., "status": ...}}` sends an `execute` tool call (its id, by default `call-N`; its status,
by default `completed`) whose content is that terminal, a `tool_call_update` when that id was shown before). The answer (one `agent_message_chunk`) is the JSON of `{"caps": <the
client's capabilities>, "results": [<result or {"error": message}> ...]}`, then `end_turn`.

With `ACP_FS_AGENT_END` set to a path, the agent ends as Claude Code does: it keeps running when its input closes,
and on `SIGTERM` it writes its own record of the session a moment later (as Claude Code's timer-flushed transcript
writer does), then exits: `ACP_FS_AGENT_END` then holds `{"how": "SIGTERM", "input_closed": <its input had closed
before>, "last_answer": <the last answer it gave>}`. A `SIGKILL` leaves the file unwritten. With `ACP_FS_AGENT_ANSWERS`
set to a path, each prompt's text is appended to that file as a line when its answer has been sent.

With `ACP_FS_AGENT_RESUME` set to a path, the agent offers `session/resume` (not `session/load`) and appends each
method it is called with to that file, a line each. A prompt whose text is not JSON as a whole (a reminder or a
transcript before the message) is read from its last line.
"""

import json
import os
import signal
import sys
import time

END = os.environ.get("ACP_FS_AGENT_END")
RESUME = os.environ.get("ACP_FS_AGENT_RESUME")
last_answer = ""
input_closed = False


def end(how: str) -> None:
    """Writes the record (after the flush's delay) and exits."""
    time.sleep(0.2)
    if END:
        with open(END, "w") as f:
            f.write(json.dumps({"how": how, "input_closed": input_closed, "last_answer": last_answer}))
    os._exit(0)


if END:
    signal.signal(signal.SIGTERM, lambda *_: end("SIGTERM"))

caps = {}
next_id = 0


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def read() -> dict:
    line = sys.stdin.readline()
    if not line:
        if END:
            # Claude Code's agent does not exit when its input closes: it waits for a signal
            global input_closed
            input_closed = True
            while True:
                time.sleep(1)
        sys.exit(0)
    return json.loads(line)


def call(method: str, params: dict) -> dict:
    """A request to the client, waited for (nothing else arrives meanwhile in these tests)."""
    global next_id
    next_id += 1
    rid = f"a{next_id}"
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    while True:
        msg = read()
        if msg.get("id") == rid and "method" not in msg:
            if "error" in msg:
                return {"error": msg["error"].get("message", ""), "code": msg["error"].get("code")}
            return msg.get("result", {})


def terminal_of(results: list[dict], value: object) -> object:
    """`"$N"`: the terminal the Nth request created; any other value as it is."""
    if isinstance(value, str) and value[:1] == "$" and value[1:].isdigit():
        return results[int(value[1:])].get("terminalId", value)
    return value


def main() -> None:
    global caps, last_answer
    while True:
        msg = read()
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if RESUME and method:
            with open(RESUME, "a") as f:
                f.write(method + "\n")
        if method == "initialize":
            caps = params.get("clientCapabilities", {})
            agent_caps = {"sessionCapabilities": {"resume": {}}} if RESUME else {}
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": 1, "agentCapabilities": agent_caps,
                "agentInfo": {"name": "fs-agent", "version": "1.0"},
            }})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "s1"}})
        elif method == "session/resume" and RESUME:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "session/prompt":
            text = "".join(b.get("text", "") for b in params.get("prompt", []))
            results: list[dict] = []
            shown: set[str] = set()
            try:
                requests = json.loads(text)
            except json.JSONDecodeError:
                requests = json.loads(text.rsplit("\n", 1)[-1])
            for r in requests:
                params = {k: terminal_of(results, v) for k, v in r["params"].items()}
                if r["method"] == "sleep":  # not a request: time for a command to start
                    time.sleep(params["seconds"])
                    results.append({})
                    continue
                if r["method"] == "show_terminal":  # not a request: a tool call showing the terminal
                    call_id = params.get("id", f"call-{len(results)}")
                    kind = "tool_call_update" if call_id in shown else "tool_call"
                    shown.add(call_id)
                    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
                        "sessionUpdate": kind, "toolCallId": call_id, "title": params["title"],
                        "kind": "execute", "status": params.get("status", "completed"),
                        "content": [{"type": "terminal", "terminalId": params["terminalId"]}],
                    }}})
                    results.append({})
                    continue
                results.append(call(r["method"], {"sessionId": "s1", **params}))
            answer = json.dumps({"caps": caps, "results": results})
            last_answer = answer
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": answer},
            }}})
            send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
            if os.environ.get("ACP_FS_AGENT_ANSWERS"):  # each prompt answered, a line each (for the tests' timing)
                with open(os.environ["ACP_FS_AGENT_ANSWERS"], "a") as f:
                    f.write(text.replace("\n", " ") + "\n")
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"{method} not supported"}})


main()
