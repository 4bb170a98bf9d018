"""The ACP test rig itself (no Neovim): the real agent (`claude-agent-acp` and the Claude Code it bundles, installed by
scripts/ensure-acp) against the fake Anthropic server, driven by the bare client of acp_client.py. It proves what the
plugin's ACP tests rely on: a turn streams text and thinking, writes a file with Claude Code's own Write tool and runs
its own Bash after asking `session/request_permission` (an Edit too, after a Read); a refused permission runs
nothing; `session/cancel` mid-stream ends the turn `cancelled`; another agent process
replays the session with `session/load`; without the agent's store (`$HOME/.claude/projects`) the load fails; the
fake can stream a burst of 10,000 chunks."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_client import AcpClient, AcpError
from acp_rig import ROOT, claude_agent_command, claude_env, fake_anthropic  # noqa: F401 - a fixture
from conftest import wait_for
from fake_llm import FakeAnthropic

THOUGHT = "The user wants a file and a command."


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def script_write_and_bash(fake: FakeAnthropic, workspace: Path) -> None:
    """One turn: thinking and text, then Write + Bash in one answer, then the closing text."""
    fake.push_tools("I will write the file and run the command.", [
        ("toolu_write1", "Write", {"file_path": str(workspace / "notes" / "hello.txt"), "content": "hello from acp\n"}),
        ("toolu_bash1", "Bash", {"command": "echo ran > ran.txt && ls notes", "description": "Write ran.txt"}),
    ], thinking=THOUGHT)
    fake.push_text("Both done: the file is written and the command ran.")


def tool_calls(c: AcpClient) -> dict[str, dict[str, Any]]:
    """Each tool call's updates merged in order (what a client shows as one call)."""
    calls: dict[str, dict[str, Any]] = {}
    for u in c.updates:
        if u.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            calls.setdefault(u["toolCallId"], {}).update({k: v for k, v in u.items() if v is not None})
    return calls


def test_a_turn_writes_a_file_and_runs_a_command_after_asking_and_another_process_loads_it(
    fake_anthropic: FakeAnthropic, workspace: Path, home: Path
) -> None:
    fake = fake_anthropic
    (workspace / "notes").mkdir()
    script_write_and_bash(fake, workspace)
    env = claude_env(fake.base_url, home)
    with AcpClient(claude_agent_command(), env=env, cwd=str(workspace), permission="allow_once") as c:
        init = c.initialize()
        assert init["protocolVersion"] == 1
        assert init["agentCapabilities"]["loadSession"] is True
        sid = c.new_session(str(workspace))
        assert c.prompt(sid, "Write notes/hello.txt, then run the command.") == "end_turn"
        updates = list(c.updates)
        permissions = list(c.permissions)
        calls = tool_calls(c)
        answer = c.text()
        thought = c.text("agent_thought_chunk")

    # what Claude Code did, on disk: its own tools, not the client's (no fs/* or terminal/* request came)
    assert (workspace / "notes" / "hello.txt").read_text() == "hello from acp\n"
    assert (workspace / "ran.txt").read_text() == "ran\n"
    assert [r["method"] for r in c.requests] == ["session/request_permission"] * 2

    # streamed: thinking, then the text in many chunks
    assert thought == THOUGHT
    assert answer == "I will write the file and run the command.Both done: the file is written and the command ran."
    assert len([u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]) >= 10

    # each tool asked first, with the options the client answers
    assert [p["toolCall"]["toolCallId"] for p in permissions] == ["toolu_write1", "toolu_bash1"]
    assert {o["kind"] for o in permissions[0]["options"]} == {"allow_always", "allow_once", "reject_once"}
    assert permissions[1]["toolCall"]["rawInput"]["command"] == "echo ran > ran.txt && ls notes"
    assert calls["toolu_write1"]["kind"] == "edit" and calls["toolu_write1"]["status"] == "completed"
    assert calls["toolu_bash1"]["kind"] == "execute" and calls["toolu_bash1"]["status"] == "completed"
    assert "hello.txt" in json.dumps(calls["toolu_bash1"]["content"])  # the command's output

    # what reached the model: the tool results, in a valid tool loop (the fake refused nothing)
    assert len(fake.requests) == 2
    assert all(p.startswith("/v1/messages") for p in fake.paths)
    results = [b for b in fake.requests[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_write1", "toolu_bash1"]
    assert "hello.txt" in json.dumps(results[1]["content"])

    # the agent's own store (Claude Code writes it on a timer, a moment after the answer), then a second process
    # replaying the session from it
    stored = wait_for(lambda: list((home / ".claude" / "projects").glob(f"*/{sid}.jsonl")), timeout=30,
                      what="Claude Code's transcript of the session")
    assert len(stored) == 1, list((home / ".claude").rglob("*.jsonl"))
    with AcpClient(claude_agent_command(), env=env, cwd=str(workspace)) as c2:
        c2.initialize()
        c2.load_session(sid, str(workspace))
        users = [u["content"]["text"] for u in c2.of_kind("user_message_chunk")]
        replay = c2.text(), {u["toolCallId"] for u in c2.of_kind("tool_call")}
        assert c2.permissions == [] and len(fake.requests) == 2, "a load asks nothing and calls no model"
    # Claude Code's store also holds the `/model` it ran at session/new as user turns: they are replayed too
    assert users[-1] == "Write notes/hello.txt, then run the command.", users
    assert replay[0] == answer
    assert replay[1] == {"toolu_write1", "toolu_bash1"}

    # the store gone: session/load fails (the plugin then falls back to session/new with our transcript)
    shutil.rmtree(home / ".claude" / "projects")
    with AcpClient(claude_agent_command(), env=env, cwd=str(workspace)) as c3:
        c3.initialize()
        with pytest.raises(AcpError) as failed:
            c3.load_session(sid, str(workspace))
        assert c3.of_kind("agent_message_chunk") == []
    assert sid in str(failed.value) or "not found" in str(failed.value).lower(), failed.value


def test_a_refused_permission_runs_nothing_and_the_model_is_told(
    fake_anthropic: FakeAnthropic, workspace: Path, home: Path
) -> None:
    fake = fake_anthropic
    fake.push_tools("", [("toolu_bash1", "Bash", {"command": "touch touched.txt", "description": "Touch a file"})])
    fake.push_text("Understood, I will not run it.")
    with AcpClient(claude_agent_command(), env=claude_env(fake.base_url, home), cwd=str(workspace),
                   permission="reject_once") as c:
        c.initialize()
        sid = c.new_session(str(workspace))
        assert c.prompt(sid, "Touch a file.") == "end_turn"
        assert len(c.permissions) == 1
    assert not (workspace / "touched.txt").exists()
    result = fake.requests[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_bash1" and result["is_error"] is True


def test_the_fake_streams_a_burst_of_ten_thousand_chunks_through_the_agent(
    fake_anthropic: FakeAnthropic, workspace: Path, home: Path
) -> None:
    text = fake_anthropic.push_burst(10_000)
    with AcpClient(claude_agent_command(), env=claude_env(fake_anthropic.base_url, home), cwd=str(workspace)) as c:
        c.initialize()
        sid = c.new_session(str(workspace))
        assert c.prompt(sid, "Say a lot.") == "end_turn"
        chunks = [u for u in c.of_kind("agent_message_chunk") if u["content"]["text"]]
    assert "".join(u["content"]["text"] for u in chunks) == text
    # the agent relays the stream as it comes, one session/update per text_delta: the client gets 10,000 updates
    assert len(chunks) == 10_000, len(chunks)


def test_the_client_script_prints_the_stream_and_load_fails_with_status_3(
    fake_anthropic: FakeAnthropic, workspace: Path, home: Path
) -> None:
    """acp_client.py as a command, the way a shell or another language's test can drive the agent."""
    fake_anthropic.push_text("Hello from the fake.")
    env = claude_env(fake_anthropic.base_url, home)
    script = [sys.executable, str(ROOT / "tests" / "e2e" / "acp_client.py"), "--cwd", str(workspace)]
    out = subprocess.run([*script, "--prompt", "hi", "--", *claude_agent_command()], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    sid = next(line["session"] for line in lines if "session" in line)
    chunks = [line["in"]["params"]["update"]["content"]["text"] for line in lines
              if line.get("in", {}).get("method") == "session/update"
              and line["in"]["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(chunks) == "Hello from the fake."
    assert lines[-1]["result"] == {"stopReason": "end_turn"}

    shutil.rmtree(home / ".claude" / "projects")
    out = subprocess.run([*script, "--load", sid, "--", *claude_agent_command()], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "error" in json.loads(out.stdout.splitlines()[-1])


def test_an_edit_after_a_read_asks_and_changes_the_file(
    fake_anthropic: FakeAnthropic, workspace: Path, home: Path
) -> None:
    """Claude Code's Edit refuses a file it has not read in the session: a script reads first."""
    target = workspace / "main.py"
    target.write_text("print('old')\n")
    fake_anthropic.push_tools("", [("toolu_read1", "Read", {"file_path": str(target)})])
    fake_anthropic.push_tools("", [("toolu_edit1", "Edit", {"file_path": str(target), "old_string": "old",
                                                             "new_string": "new"})])
    fake_anthropic.push_text("Edited.")
    with AcpClient(claude_agent_command(), env=claude_env(fake_anthropic.base_url, home), cwd=str(workspace)) as c:
        c.initialize()
        sid = c.new_session(str(workspace))
        assert c.prompt(sid, "Change old to new.") == "end_turn"
        calls = tool_calls(c)
        asked = [p["toolCall"]["toolCallId"] for p in c.permissions]
    assert target.read_text() == "print('new')\n"
    assert asked == ["toolu_edit1"], "reading asks nothing in the default mode, editing does"
    assert calls["toolu_edit1"]["status"] == "completed"
    assert calls["toolu_edit1"]["kind"] == "edit"
    read_result = fake_anthropic.requests[1]["messages"][-1]["content"][0]
    assert read_result["tool_use_id"] == "toolu_read1" and "print('old')" in json.dumps(read_result["content"])


def test_session_cancel_mid_stream_ends_the_turn_cancelled(
    fake_anthropic: FakeAnthropic, workspace: Path, home: Path
) -> None:
    words = [f"w{i} " for i in range(400)]
    fake_anthropic.push_text("".join(words), delay=0.05, pieces=words)  # a long answer: 20 s
    with AcpClient(claude_agent_command(), env=claude_env(fake_anthropic.base_url, home), cwd=str(workspace)) as c:
        c.initialize()
        sid = c.new_session(str(workspace))
        got_one = threading.Event()
        c.on_message = lambda t, m: got_one.set() if "w0" in json.dumps(m) else None
        stop: list[str] = []
        turn = threading.Thread(target=lambda: stop.append(c.prompt(sid, "Talk.")))
        turn.start()
        assert got_one.wait(60), "no word streamed"
        c.cancel(sid)
        turn.join(60)
        assert stop == ["cancelled"]
        assert 0 < len(c.text().split()) < 400
