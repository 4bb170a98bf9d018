"""The client side of ACP that the editor serves, end to end: an agent's `fs/read_text_file` and `terminal/*` requests
answered by a real Neovim through the real chat (`:PseudoChat NAME`, the input window). The real claude-agent-acp
never makes these requests (its own tools read, write and run its shell), so the agent here is the scripted one of
the Rust tests (tests/it/support/acp_fs_agent.py): each message is a JSON list of requests it makes of the client,
and its answer is their results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from conftest import ROOT, Neovim, main_loop_watch, wait_for
from test_acp import chat_text, log_lines, send, wait_turns
from test_chat import setup as chat_setup

SCRIPT = ROOT / "tests/it/support/acp_fs_agent.py"


def setup(n: Neovim, env: dict[str, str] | None = None, fs_reads: bool | None = None, **extra: Any) -> None:
    """setup() with the scripted agent `fs` (its environment `env`, its `fs_reads` when given), and `:PseudoChat fs`
    opened."""
    agents: dict[str, Any] = {"fs": {"command": "python3", "args": [str(SCRIPT)], "env": env or {}}}
    if fs_reads is not None:
        agents["fs"]["fs_reads"] = fs_reads
    chat_setup(n, None, agents=agents, **extra)
    n.api.command("PseudoChat fs")


def ask(n: Neovim, ws: Path, requests: list[dict[str, Any]], turns: int) -> dict[str, Any]:
    """Sends the agent the requests to make, waits for the turn, and returns its answer (`caps`, `results`) as the
    session's log recorded it."""
    send(n, json.dumps(requests))
    wait_turns(n, turns, timeout=60)
    logs = list((ws / ".PseudoClaude/sessions").glob("*/conversation.jsonl"))
    assert len(logs) == 1, logs
    answers = [e for e in log_lines(logs[0]) if e.get("type") == "message" and e.get("role") == "assistant"]
    assert answers, chat_text(n)
    return json.loads(answers[-1]["content"])


def test_fs_read_text_file_takes_an_open_buffers_unsaved_text_and_a_closed_files_disk(
    nvim: Neovim, workspace: Path
) -> None:
    (workspace / "open.txt").write_text("saved line\n")
    (workspace / "closed.txt").write_text("on disk 1\non disk 2\n")
    (workspace / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    nvim.api.command("edit open.txt")
    nvim.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'unsaved 1', 'unsaved 2', 'unsaved 3' })")
    assert nvim.lua("return vim.bo.modified")
    nvim.api.command("edit dos.txt")
    nvim.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, { 'TWO' })")
    setup(nvim)
    read = "fs/read_text_file"
    answer = ask(nvim, workspace, [
        {"method": read, "params": {"path": str(workspace / "open.txt")}},
        {"method": read, "params": {"path": str(workspace / "open.txt"), "line": 2, "limit": 1}},
        {"method": read, "params": {"path": str(workspace / "closed.txt")}},
        {"method": read, "params": {"path": str(workspace / "dos.txt")}},
    ], 1)
    r = answer["results"]
    assert r[0] == {"content": "unsaved 1\nunsaved 2\nunsaved 3\n"}, r
    assert r[1] == {"content": "unsaved 2\n"}, r
    assert r[2] == {"content": "on disk 1\non disk 2\n"}, r
    assert r[3] == {"content": "one\r\nTWO\r\n"}, r
    assert (workspace / "open.txt").read_text() == "saved line\n", "a read writes nothing"
    # the buffer closed: the disk again
    nvim.api.command("bwipeout! open.txt")
    answer = ask(nvim, workspace, [{"method": read, "params": {"path": str(workspace / "open.txt")}}], 2)
    assert answer["results"] == [{"content": "saved line\n"}], answer


def test_fs_reads_false_in_setup_takes_fs_read_text_file_from_what_the_agent_is_offered(
    nvim: Neovim, workspace: Path
) -> None:
    setup(nvim, fs_reads=False)
    assert ask(nvim, workspace, [], 1)["caps"]["fs"] == {"readTextFile": False, "writeTextFile": True}


def test_a_terminal_runs_in_the_sandbox_cannot_reach_the_editors_socket_and_its_output_is_logged(
    nvim: Neovim, workspace: Path
) -> None:
    server = nvim.lua("return vim.v.servername")
    probe = ("import socket, sys\n"
             "try:\n    socket.socket(socket.AF_UNIX).connect(sys.argv[1])\n    print('CONNECTED')\n"
             "except OSError as e:\n    print('REFUSED', e)\n")
    (workspace / "probe.py").write_text(probe)
    # the probe can fail: outside the sandbox it reaches the editor
    direct = subprocess.run(["python3", "probe.py", server], cwd=workspace, capture_output=True, text=True)
    assert direct.stdout.startswith("CONNECTED"), direct
    setup(nvim)
    create = {"method": "terminal/create", "params": {"command": "python3", "args": ["probe.py", server]}}
    answer = ask(nvim, workspace, [
        create,
        {"method": "terminal/wait_for_exit", "params": {"terminalId": "$0"}},
        {"method": "terminal/output", "params": {"terminalId": "$0"}},
        {"method": "show_terminal", "params": {"terminalId": "$0", "title": "probe the editor's socket"}},
        {"method": "terminal/release", "params": {"terminalId": "$0"}},
    ], 1)
    assert answer["caps"]["terminal"] is True, answer
    r = answer["results"]
    assert r[1] == {"exitCode": 0}, r
    assert r[2]["output"].startswith("REFUSED"), r
    # the tool call that showed the terminal: its command, output and exit as its result, in the log and the chat
    log = next((workspace / ".PseudoClaude/sessions").glob("*/conversation.jsonl"))
    results = [e for e in log_lines(log) if e.get("type") == "message" and e.get("tool_result")]
    assert len(results) == 1, results
    content = results[0]["tool_result"]["content"]
    assert content.startswith(f"$ python3 probe.py {server}\nREFUSED") and content.endswith("[exit code: 0]"), content
    assert "REFUSED" in chat_text(nvim)


def test_a_replaced_agent_and_one_at_qa_are_stopped_gracefully_and_write_their_own_record_first(
    nvim: Neovim, workspace: Path, tmp_path: Path
) -> None:
    # the scripted agent ends as Claude Code does: it ignores the end of its input, and writes its own record of the
    # session (Claude Code's transcript, flushed on a timer) 200 ms after a SIGTERM; a SIGKILL leaves none
    record = tmp_path / "agent-record.json"
    setup(nvim, env={"ACP_FS_AGENT_END": str(record)})
    ask(nvim, workspace, [], 1)
    # :PseudoNew replaces the chat's agent (as a resume or a fork in its place, or chat.close(), do)
    nvim.api.command("PseudoNew")
    written = wait_for(lambda: record.exists() and json.loads(record.read_text()), timeout=10,
                       what="the replaced agent's own record")
    assert written["how"] == "SIGTERM" and written["input_closed"] is True, written
    assert json.loads(written["last_answer"])["results"] == [], written
    record.unlink()
    # the new chat starts the agent again; the editor's exit stops it the same way, and waits for it
    send(nvim, "[]")
    wait_turns(nvim, 2, timeout=60)
    try:
        nvim.api.command("qa!")
    except Exception:
        pass
    nvim.proc.wait(timeout=20)
    assert record.exists(), "the exit waited for the agent to write its own record"
    assert json.loads(record.read_text())["how"] == "SIGTERM"


def test_a_terminals_output_is_drawn_as_it_is_written_and_a_chatty_one_never_stalls_the_editor(
    nvim: Neovim, workspace: Path
) -> None:
    setup(nvim)
    show = {"terminalId": "$0", "title": "print, sleep, print", "id": "call-t"}
    send(nvim, json.dumps([
        {"method": "terminal/create", "params": {"command": "sleep 1; echo first-line; sleep 4; echo second-line"}},
        {"method": "show_terminal", "params": {**show, "status": "in_progress"}},
        {"method": "terminal/wait_for_exit", "params": {"terminalId": "$0"}},
        {"method": "show_terminal", "params": show},
        {"method": "terminal/release", "params": {"terminalId": "$0"}},
    ]))
    # the first line is in the chat while the command sleeps: drawn as it was written (a second after the call was
    # shown, with nothing from the agent since), not at the call's next update
    wait_for(lambda: "    first-line" in chat_text(nvim).split("\n"), timeout=30,
             what="the terminal's first line drawn; the chat:\n" + chat_text(nvim))
    running = chat_text(nvim)
    assert "    second-line" not in running.split("\n"), running
    assert "▸ print, sleep, print\n  ⋯ execute: running" in running, running  # the agent's title, then its state
    assert nvim.lua("return vim.g.pc_turns") == 0, "the turn still runs"
    wait_turns(nvim, 1, timeout=60)
    done = chat_text(nvim)
    assert "⋯" not in done and "    second-line" in done.split("\n"), done
    restored = nvim.lua("return require('pseudoclaude.transcript').render(require('pseudoclaude').messages())")
    assert done.split("\n") == restored, (done, restored)
    # a command that writes 200,000 lines as fast as it can: redrawn at most every so often, the editor never waits
    chatty = {"terminalId": "$0", "title": "chatty", "id": "call-c", "status": "in_progress"}
    with main_loop_watch(nvim, "a chatty terminal drawn live", bound_ms=100):
        send(nvim, json.dumps([
            {"method": "terminal/create", "params": {"command": "seq 1 200000; sleep 1; echo chatty-done"}},
            {"method": "show_terminal", "params": chatty},
            {"method": "terminal/wait_for_exit", "params": {"terminalId": "$0"}},
            {"method": "show_terminal", "params": {**chatty, "status": "completed"}},
            {"method": "terminal/release", "params": {"terminalId": "$0"}},
        ]))
        wait_for(lambda: "    200000" in chat_text(nvim).split("\n"), timeout=30, what="the chatty command's end")
        wait_turns(nvim, 2, timeout=60)
    assert "chatty-done" in chat_text(nvim)


def test_a_message_to_a_running_agent_is_synced_while_it_answers_and_nothing_of_the_answer_comes_first(
    start_nvim: Any, workspace: Path, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.txt"
    first = start_nvim()
    setup(first, env={"ACP_FS_AGENT_ANSWERS": str(answers)}, approve={"agents": {"fs": True}})
    ask(first, workspace, [], 1)  # the agent starts; the message was logged before it did
    log = next((workspace / ".PseudoClaude/sessions").glob("*/conversation.jsonl"))
    logged = log.read_bytes()
    # the next message's write is held (a test seam): the agent, running, has the prompt and answers meanwhile
    stall = tmp_path / "stall"
    first.lua("vim.env.PSEUDOCLAUDE_TEST_MESSAGE_STALL = ...", str(stall))
    send(first, "[ ]")
    wait_for(lambda: stall.exists(), what="the message's write held")
    wait_for(lambda: answers.read_text().count("\n") == 2, what="the agent's answer sent while the message is synced")
    time.sleep(0.3)  # whatever of the answer could go wrong has had time to
    assert log.read_bytes() == logged, "nothing of the turn is logged before its message"
    assert "[ ]" not in chat_text(first).split("\n"), "the message shows once it is on disk"
    assert chat_text(first).count('"results"') == 1, "nor is the answer shown"
    stall.unlink()
    wait_turns(first, 2)
    entries = log_lines(log)[len(logged.splitlines()):]
    assert entries[0].get("role") == "user" and entries[0]["content"] == "[ ]", entries
    assert [e["role"] for e in entries if e.get("type", "message") == "message"] == ["user", "assistant"], entries
    assert chat_text(first).split("\n").index("[ ]") < chat_text(first).rindex('"results"'), chat_text(first)
    # a permission the agent asks meanwhile (answered by approve.agents, logged with its answer) waits for it too
    logged = log.read_bytes()
    ask_permission = {"method": "session/request_permission", "params": {
        "toolCall": {"toolCallId": "p1", "title": "may I"},
        "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}]}}
    send(first, json.dumps([ask_permission]))
    wait_for(lambda: stall.exists(), what="the message's write held")
    time.sleep(0.5)
    assert log.read_bytes() == logged, "the permission is not logged before the message"
    stall.unlink()
    wait_turns(first, 3)
    entries = log_lines(log)[len(logged.splitlines()):]
    kinds = ["permission" if "permission" in e.get("acp", {}) else e.get("role") for e in entries]
    assert kinds.index("user") < kinds.index("permission"), entries
    # a crash while the message is synced (the agent answered): the log is as it was, or holds the message alone
    logged = log.read_bytes()
    send(first, "[  ]")
    wait_for(lambda: stall.exists(), what="the message's write held again")
    wait_for(lambda: answers.read_text().count("\n") == 4, what="the agent's answer sent")
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(timeout=10)
    stall.unlink()
    assert log.read_bytes() == logged
    second = start_nvim()
    setup(second)
    session = log.parent.name
    second.lua("require('pseudoclaude').resume(...)", session)
    report = wait_for(lambda: second.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True and report["notice"] == "", report
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["content"] for m in msgs if m["role"] == "user"] == ["[]", "[ ]", json.dumps([ask_permission])], msgs


def test_an_agent_offering_resume_not_load_resumes_its_session_and_a_stale_one_gets_the_reminder(
    start_nvim: Any, workspace: Path, tmp_path: Path
) -> None:
    calls, answers = tmp_path / "calls.txt", tmp_path / "answers.txt"
    env = {"ACP_FS_AGENT_RESUME": str(calls), "ACP_FS_AGENT_ANSWERS": str(answers)}
    first = start_nvim()
    setup(first, env=env, stale_after_hours=0.0003)  # about a second
    ask(first, workspace, [], 1)
    session = first.lua("return require('pseudoclaude').current()")["id"]
    try:
        first.api.command("qa!")
    except Exception:
        pass
    first.proc.wait(timeout=20)
    assert calls.read_text().split() == ["initialize", "session/new", "session/prompt"]
    time.sleep(2.5)  # a log's times are whole seconds: well past the 1.08 s the setting allows
    second = start_nvim()
    agents = {"fs": {"command": "python3", "args": [str(SCRIPT)], "env": env}}
    chat_setup(second, None, agents=agents, stale_after_hours=0.0003)
    second.lua("require('pseudoclaude').resume(...)", session)
    report = wait_for(lambda: second.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True and report["stale_seconds"] > 1, report
    second.api.command("PseudoChat")
    send(second, "[]")
    wait_turns(second, 1, timeout=60)
    # neither session/load (not offered) nor a new session: the agent resumed its own
    assert calls.read_text().split()[3:] == ["initialize", "session/resume", "session/prompt"], calls.read_text()
    assert "session/resume: the agent resumed its own session" in chat_text(second), chat_text(second)
    # the stale reminder went with the message, before it, as ours does
    last = answers.read_text().splitlines()[-1]
    assert "This conversation was resumed" in last and last.endswith("[]"), last
