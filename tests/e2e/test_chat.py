"""The agent buffer end to end: typing a message, the turn streaming in, the log on disk, resuming it in another
Neovim, crashes, locks, stale sessions, approvals and cancellation. Providers are the offline demo or a fake
OpenAI server on 127.0.0.1 speaking the real streaming format."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import Neovim, transcript, type_message
from fake_llm import FakeOpenAI



def setup(n: Neovim, provider: dict[str, Any] | None = None, **extra: Any) -> None:
    opts = {"provider": provider or {"name": "demo"}, **extra}
    n.lua(
        """
        require("pseudoclaude").setup(...)
        vim.g.pc_turns = 0
        vim.g.pc_resumed = vim.NIL
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function(ev)
          vim.g.pc_turns = vim.g.pc_turns + 1
          vim.g.pc_last_stop = ev.data.stop_reason
        end })
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumed", callback = function(ev)
          vim.g.pc_resumed = ev.data
        end })
        """,
        opts,
    )


def openai(fake: FakeOpenAI) -> dict[str, Any]:
    return {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"}


def wait(n: Neovim, cond: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = n.lua("return " + cond)
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {cond}; transcript:\n" + "\n".join(transcript(n)))


def resume_cmd(n: Neovim, command: str, timeout: float = 20.0) -> dict[str, Any]:
    """Runs a resume command (it returns at once) and waits for `User PseudoClaudeResumed`; returns its report."""
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.api.command(command)
    return wait(n, "vim.g.pc_resumed", timeout)


def wait_turns(n: Neovim, count: int) -> None:
    wait(n, f"vim.g.pc_turns >= {count}")




def answer_approvals(n: Neovim, *answers: str) -> None:
    """Answers the approval questions in turn with `answers` ("No" once they run out), as a user picking from
    vim.ui.select would; `vim.g.pc_asked` counts the questions, `vim.g.pc_prompt` keeps the last one."""
    n.lua(
        "local answers = { ... } vim.g.pc_asked = 0 "
        "vim.ui.select = function(items, opts, cb) vim.g.pc_asked = vim.g.pc_asked + 1 vim.g.pc_prompt = opts.prompt "
        "local a = answers[vim.g.pc_asked] or 'No' vim.schedule(function() cb(a) end) end",
        *answers,
    )


def log_lines(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def sessions_dir(ws: Path) -> Path:
    return ws / ".PseudoClaude" / "sessions"


def test_opening_and_closing_an_empty_chat_leaves_nothing(nvim: Neovim, workspace: Path) -> None:
    setup(nvim)
    nvim.api.command("PseudoChat")
    wins = nvim.lua("return vim.tbl_map(function(w) return vim.fn.bufname(vim.api.nvim_win_get_buf(w)) end, vim.api.nvim_list_wins())")
    assert "pseudoclaude://chat" in wins and "pseudoclaude://input" in wins
    assert nvim.lua("return vim.api.nvim_get_current_buf() == vim.fn.bufnr('pseudoclaude://input')")
    assert nvim.lua("return require('pseudoclaude').current()") is None
    nvim.close()
    assert not (workspace / ".PseudoClaude").exists()


def test_a_demo_turn_streams_runs_a_tool_and_is_logged(nvim: Neovim, workspace: Path) -> None:
    for name in ("hello.txt", "notes.md", "zeta.txt"):  # three lines of output: folded under the result line
        (workspace / name).write_text("hi\n")
    setup(nvim)
    type_message(nvim, "hello there")
    wait_turns(nvim, 1)
    lines = transcript(nvim)
    text = "\n".join(lines)
    assert "## You" in lines and "hello there" in lines and "## Agent" in lines
    assert "offline demo provider" in text
    assert any(l.startswith("▸ list_files") for l in lines)
    assert any(l.startswith("  ✓ list_files:") for l in lines), lines
    # The answer after the tool stands in a block of its own, outside the result's fold.
    result_at = next(i for i, l in enumerate(lines) if l.startswith("  ✓ list_files:"))
    answer_at = next(i for i, l in enumerate(lines) if "That was the whole loop" in l)
    assert answer_at > result_at and "## Agent" in lines[result_at:answer_at], lines
    assert not lines[answer_at].startswith("    ")
    folded = nvim.lua(
        "local a, b, c = ... local w = vim.fn.bufwinid('pseudoclaude://chat') return vim.api.nvim_win_call(w, function() "
        "return { vim.fn.foldclosed(a), vim.fn.foldclosed(b), vim.fn.foldclosedend(b), vim.fn.foldclosed(c) } end)",
        result_at + 1,
        result_at + 2,
        answer_at + 1,
    )
    # The output is one closed fold right under its result line (1-based result_at + 2), as long as the line says.
    assert folded[0] == -1, "the result line itself stays visible"
    assert folded[1] == result_at + 2, (folded, lines[result_at - 1 :])
    size = folded[2] - folded[1] + 1
    assert f"({size} line" in lines[result_at] and all(l.startswith("    ") for l in lines[result_at + 1 : result_at + 1 + size])
    assert folded[3] == -1, "the answer is not folded away"
    cur = nvim.lua("return require('pseudoclaude').current()")
    assert cur["id"] and Path(cur["jsonl"]).exists()
    # Checkpoints of the streamed text may sit between them (a slow machine), superseded by each answer; the
    # demo's usage entries too.
    entries = [e for e in log_lines(cur["jsonl"]) if e.get("type", "message") == "message"]
    assert [e["role"] for e in entries] == ["user", "assistant", "user", "assistant"]
    assert entries[0]["content"] == "hello there" and entries[0]["model"] == "demo"
    assert entries[2]["tool_result"]["content"].find("hello.txt") >= 0
    assert len(nvim.lua("return require('pseudoclaude').messages()")) == 4
    winbar = nvim.lua("return require('pseudoclaude.chat').winbar()")
    assert cur["id"] in winbar and "saved" in winbar and "NOT SAVED" not in winbar
    assert nvim.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('pseudoclaude://input'), 0, -1, false)") == [""]


def test_an_openai_chat_with_two_tool_calls_is_logged_and_resumed_in_a_second_neovim(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    fake.push_tools("Let me look.", [("call_1", "read_file", {"path": "a.txt"}), ("call_2", "list_files", {})])
    fake.push_text("a.txt holds alpha and beta.")
    first = start_nvim()
    setup(first, openai(fake))
    type_message(first, "what is in a.txt?")
    wait_turns(first, 1)
    assert fake.errors == []
    sent = fake.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert "1\talpha" in sent[3]["content"] or "alpha" in sent[3]["content"]
    assert any("a.txt holds alpha" in l for l in transcript(first))
    sid = first.lua("return require('pseudoclaude').current().id")
    first.close()

    second = start_nvim()
    setup(second, openai(fake))
    assert resume_cmd(second, f"PseudoResume {sid}")["ok"] is True
    assert second.lua("return require('pseudoclaude').current().id") == sid
    lines = transcript(second)
    assert "what is in a.txt?" in lines and any(l.startswith("▸ read_file") for l in lines)
    assert second.lua("return vim.g.pc_resumed.id") == sid
    fake.push_text("Still here.")
    type_message(second, "and now?")
    wait_turns(second, 1)
    assert fake.errors == [], fake.errors
    again = fake.requests[-1]["messages"]
    assert [m["role"] for m in again] == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]


def test_neovim_killed_mid_turn_resumes_cleanly_in_the_next_one(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.push_tools("", [("call_1", "list_files", {})])
    fake.push_hang("I am in the middle of")
    first = start_nvim()
    setup(first, openai(fake))
    type_message(first, "list and explain")
    wait(first, "vim.fn.join(vim.api.nvim_buf_get_lines(vim.fn.bufnr('pseudoclaude://chat'), 0, -1, false), '\\n'):find('middle of') ~= nil")
    sid = first.lua("return require('pseudoclaude').current().id")
    jsonl = Path(first.lua("return require('pseudoclaude').current().jsonl"))
    # The streamed text is checkpointed within a second; kill once it is, so what follows is certain.
    deadline = time.monotonic() + 20
    while not any(e.get("type") == "checkpoint" for e in log_lines(str(jsonl))):
        assert time.monotonic() < deadline, "no checkpoint of the streamed text"
        time.sleep(0.02)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait()

    second = start_nvim()
    setup(second, openai(fake))
    assert resume_cmd(second, "PseudoResume last")["ok"] is True
    assert second.lua("return require('pseudoclaude').current().id") == sid
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[3]["content"].startswith("I am in the middle of") and msgs[3]["interrupted"] is True
    fake.push_text("Recovered.")
    type_message(second, "go on")
    wait_turns(second, 1)
    assert fake.errors == []


def test_text_streamed_before_a_sigkill_is_restored_marked_interrupted(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    from conftest import ROOT

    cli = ROOT / "target" / "release" / "pseudoclaude"
    if not cli.exists():
        pytest.fail(f"{cli} is missing: run `cargo build --release` in {ROOT} first")
    words = [f"word{i:03d}" for i in range(80)]
    fake.push_text(" ".join(words), delay=0.1)  # 8 s: a slow model
    first = start_nvim()
    setup(first, openai(fake))
    type_message(first, "explain slowly")

    def shown() -> list[str]:
        return [w for w in words if any(w in l for l in transcript(first))]

    deadline = time.monotonic() + 20
    while len(shown()) < 10:
        assert time.monotonic() < deadline, "the answer never streamed:\n" + "\n".join(transcript(first))
        time.sleep(0.02)
    seen_at, seen = time.monotonic(), shown()
    sid = first.lua("return require('pseudoclaude').current().id")
    time.sleep(1.3)  # what was on screen then was streamed more than a second before the kill
    still_streaming = len(shown()) < len(words)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait()
    assert still_streaming and time.monotonic() - seen_at > 1.0

    second = start_nvim()
    setup(second, openai(fake))
    report = resume_cmd(second, "PseudoResume last")
    assert report["ok"] is True and "interrupted" in report["notice"], report
    assert second.lua("return require('pseudoclaude').current().id") == sid
    lines = transcript(second)
    text = "\n".join(lines)
    assert "## You" in lines and "explain slowly" in lines and "## Agent" in lines, text
    assert " ".join(seen) in text, text  # every word shown a second before the kill, in order
    assert "[interrupted: the answer stopped here]" in lines, text
    assert "interrupted" in text.split("Restored with repairs:")[1], text
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["role"] for m in msgs] == ["user", "assistant"] and msgs[1]["interrupted"] is True

    out = subprocess.run([str(cli), "-C", str(workspace), "sessions", "check", sid], capture_output=True, text=True)
    assert out.returncode == 1 and ": ok" not in out.stdout and "interrupted" in out.stdout, out

    # The model hears of it in the next request, which the protocol checks accept.
    fake.push_text("Continuing.")
    type_message(second, "go on")
    wait_turns(second, 1)
    assert fake.errors == [], fake.errors
    sent = fake.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert " ".join(seen) in sent[2]["content"] and "[This answer was interrupted here" in sent[2]["content"]


def test_two_neovims_on_one_session(start_nvim: Any, workspace: Path) -> None:
    first = start_nvim()
    setup(first)
    type_message(first, "mine")
    wait_turns(first, 1)
    sid = first.lua("return require('pseudoclaude').current().id")
    second = start_nvim()
    setup(second)
    second.lua("_G.pc_notes = {} vim.notify = function(m) table.insert(_G.pc_notes, m) end")
    report = resume_cmd(second, f"lua require('pseudoclaude').resume('{sid}')")
    assert report["ok"] is False
    err = report["error"]
    assert "open in another editor" in err and f"pid {first.proc.pid}" in err, err
    # one plain sentence for the user: no Lua position, no native function name
    notes = second.lua("return _G.pc_notes")
    assert notes and all(".lua:" not in m and "pseudoclaude_core" not in m for m in notes), notes
    assert second.lua("return require('pseudoclaude').current()") is None
    first.close()
    assert resume_cmd(second, f"lua require('pseudoclaude').resume('{sid}')")["ok"] is True
    assert second.lua("return require('pseudoclaude').current().id") == sid


def write_session(ws: Path, sid: str, lines: list[dict[str, Any]], tail: bytes = b"") -> Path:
    d = sessions_dir(ws) / sid
    (d / "tool-results").mkdir(parents=True)
    p = d / "conversation.jsonl"
    p.write_bytes(b"".join(json.dumps(l).encode() + b"\n" for l in lines) + tail)
    return p


def test_a_stale_session_shows_and_sends_the_reminder(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    old = int(time.time()) - 8 * 3600
    write_session(
        workspace,
        "20261201-090000-0a0b",
        [
            {"type": "message", "role": "user", "content": "refactor the loader", "ts": old - 10, "model": "m"},
            {"type": "message", "role": "assistant", "content": "Done.", "ts": old},
        ],
    )
    setup(nvim, openai(fake))
    log = sessions_dir(workspace) / "20261201-090000-0a0b" / "conversation.jsonl"
    before = log.read_bytes()
    resume_cmd(nvim, "PseudoResume 20261201-090000-0a0b")
    lines = transcript(nvim)
    assert "## Reminder to the model" in lines
    assert any("8 hours" in l for l in lines)
    assert nvim.lua("return vim.g.pc_resumed.stale_hours") == 8
    # shown at once (buffer and messages()), but the log is untouched until the user sends
    assert "8 hours" in nvim.lua("return require('pseudoclaude').messages()")[-1]["content"]
    assert log.read_bytes() == before
    fake.push_text("I will re-check the files.")
    type_message(nvim, "continue")
    wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors  # the server accepted what it recorded
    sent = fake.requests[-1]["messages"]
    user_text = " ".join(m["content"] for m in sent if m["role"] == "user")
    assert "8 hours" in user_text and "re-read files" in user_text and "continue" in user_text


def test_torn_and_corrupt_sessions_resume_with_a_notice(nvim: Neovim, workspace: Path) -> None:
    now = int(time.time())
    p = write_session(
        workspace,
        "20261201-100000-0c0d",
        [
            {"type": "message", "role": "user", "content": "first", "ts": now},
            {"type": "message", "role": "assistant", "content": "answer", "ts": now},
        ],
        tail=b"not json\n" + b'{"type":"message","role":"user","content":"tor',
    )
    setup(nvim)
    nvim.lua("_G.pc_notes = {} vim.notify = function(m, l) table.insert(_G.pc_notes, m) end")
    resume_cmd(nvim, "PseudoResume 20261201-100000-0c0d")
    notes = nvim.lua("return _G.pc_notes")
    assert any("restored with repairs" in m and "unreadable line" in m for m in notes), notes
    assert any("Restored with repairs" in l for l in transcript(nvim))
    assert p.read_bytes().endswith(b"\n"), "the torn tail was moved aside"
    assert (p.parent / "conversation.jsonl.broken").exists()
    type_message(nvim, "still works")
    wait_turns(nvim, 1)
    last = json.loads(p.read_text().splitlines()[-1])
    assert last["role"] == "assistant"
    assert "not json" in p.read_text(), "the bad line stays in the file for audit"


def test_a_declined_write_is_reported_to_the_model(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    fake.push_tools("", [("call_w", "write_file", {"path": "new.txt", "content": "x"})])
    fake.push_text("Understood, I did not write it.")
    setup(nvim, openai(fake))
    answer_approvals(nvim, "No")
    type_message(nvim, "write new.txt")
    wait_turns(nvim, 1)
    assert "write_file" in nvim.lua("return vim.g.pc_prompt")
    assert not (workspace / "new.txt").exists()
    assert fake.errors == [], fake.errors
    tool_msg = [m for m in fake.requests[-1]["messages"] if m["role"] == "tool"][0]
    assert "declined" in tool_msg["content"]


def test_ctrl_c_cancels_a_streaming_turn_and_keeps_what_was_seen(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    fake.push_hang("Thinking about it slowly")
    setup(nvim, openai(fake))
    type_message(nvim, "take your time")
    wait(nvim, "vim.fn.join(vim.api.nvim_buf_get_lines(vim.fn.bufnr('pseudoclaude://chat'), 0, -1, false), '\\n'):find('slowly') ~= nil")
    nvim.api.input("<C-c>")
    wait_turns(nvim, 1)
    assert nvim.lua("return vim.g.pc_last_stop") == "cancelled"
    assert "[cancelled]" in transcript(nvim)
    entries = log_lines(nvim.lua("return require('pseudoclaude').current().jsonl"))
    assert entries[-1]["role"] == "assistant" and "interrupted by the user" in entries[-1]["content"]


def test_pseudocancel_cancels_a_streaming_turn_from_any_window(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    fake.push_hang("Working on it")
    setup(nvim, openai(fake))
    type_message(nvim, "go")
    wait(nvim, "vim.fn.join(vim.api.nvim_buf_get_lines(vim.fn.bufnr('pseudoclaude://chat'), 0, -1, false), '\\n'):find('Working on it') ~= nil")
    nvim.api.command("stopinsert | wincmd p | enew")  # away from the chat: the command works from anywhere
    nvim.api.command("PseudoCancel")
    wait_turns(nvim, 1)
    assert nvim.lua("return vim.g.pc_last_stop") == "cancelled"
    entries = log_lines(nvim.lua("return require('pseudoclaude').current().jsonl"))
    assert entries[-1]["role"] == "assistant" and entries[-1]["content"].startswith("Working on it")


# The ways to start the current chat over: the command, its Lua name, and `chat.new()` without a table, deprecated.
START_OVER = {
    "command": "vim.cmd('PseudoNew')",
    "start_over": "require('pseudoclaude').chat.start_over()",
    "new_deprecated": "require('pseudoclaude').chat.new()",
}


@pytest.mark.parametrize("way", list(START_OVER))
def test_pseudonew_starts_a_new_session_and_leaves_the_old_one_as_it_was(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, way: str
) -> None:
    fake.push_text("First answer.")
    fake.push_text("Second answer.")
    setup(nvim, openai(fake))
    type_message(nvim, "first question")
    wait_turns(nvim, 1)
    first = nvim.lua("return require('pseudoclaude').current()")
    before = Path(first["jsonl"]).read_bytes()
    nvim.lua("_G.pc_notes = {} vim.notify = function(m, l) table.insert(_G.pc_notes, { m, l }) end")
    nvim.lua(START_OVER[way])
    warnings = [m for m, level in nvim.lua("return _G.pc_notes") if level == nvim.lua("return vim.log.levels.WARN")]
    if way == "new_deprecated":
        # one call, one meaning: the old spelling still works, and says which name to use now (with where it was
        # called from, a traceback)
        assert warnings and warnings[0].startswith(
            "chat.new() without {opts} is deprecated, use chat.start_over() instead."
        ), warnings
        assert "Feature will be removed in pseudoclaude 0.2.0" in warnings[0], warnings
    else:
        assert warnings == [], warnings
    # the same chat, not another one
    assert [c["chat"] for c in nvim.lua("return require('pseudoclaude').chats()")] == [1]
    # a clean chat: no session yet (nothing is created before the first message), no history, no old lines
    assert nvim.lua("return require('pseudoclaude').current()") is None
    assert nvim.lua("return #require('pseudoclaude').messages()") == 0
    assert not any("first question" in l or "First answer" in l for l in transcript(nvim)), transcript(nvim)
    type_message(nvim, "second question")
    wait_turns(nvim, 2)
    second = nvim.lua("return require('pseudoclaude').current()")
    assert second["id"] != first["id"]
    messages = [e["content"].strip() for e in log_lines(second["jsonl"]) if e.get("type") == "message"]
    assert messages == ["second question", "Second answer."]
    # the model was not sent the first chat
    assert [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "user"] == ["second question"]
    assert Path(first["jsonl"]).read_bytes() == before
    # the list (which leaves the current session out) offers the first chat to resume
    assert [i["id"] for i in nvim.lua("return require('pseudoclaude').sessions.list()")] == [first["id"]]


def test_a_silent_provider_times_out_with_a_clear_error(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    fake.push_hang("")
    setup(nvim, {**openai(fake), "idle_timeout": 1, "connect_timeout": 2, "max_retries": 0})
    nvim.lua("_G.pc_notes = {} vim.notify = function(m, l) table.insert(_G.pc_notes, m) end")
    type_message(nvim, "hello?")
    wait_turns(nvim, 1)
    assert nvim.lua("return vim.g.pc_last_stop") == "error"
    assert any("no answer from the provider" in l for l in transcript(nvim)), transcript(nvim)
    assert any("no answer from the provider" in m for m in nvim.lua("return _G.pc_notes"))
    # What the user typed is safe in the log; nothing half-made follows it (the files' checkpoint taken before the
    # message is no part of the answer).
    entries = log_lines(nvim.lua("return require('pseudoclaude').current().jsonl"))
    assert [e["content"] for e in entries if e.get("type") != "files"] == ["hello?"]
    assert [e["type"] for e in entries] == ["message", "files"]


def test_a_refused_request_shows_the_servers_reason(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    fake.expect_errors("no scripted answer left")
    setup(nvim, openai(fake))  # nothing scripted: the fake answers 400 with its reason
    type_message(nvim, "anyone?")
    wait_turns(nvim, 1)
    text = "\n".join(transcript(nvim))
    assert "refused the request (HTTP 400)" in text and "no scripted answer" in text, text


def test_the_chat_keys_are_configurable(nvim: Neovim, workspace: Path) -> None:
    setup(nvim, None, keys={"send": False, "send_insert": "<C-g>", "cancel": "<C-x>"})
    nvim.api.command("PseudoChat")
    maps = nvim.lua(
        "local b = vim.fn.bufnr('pseudoclaude://input') local out = {} "
        "for _, mode in ipairs({ 'n', 'i' }) do for _, m in ipairs(vim.api.nvim_buf_get_keymap(b, mode)) do "
        "table.insert(out, mode .. ' ' .. m.lhs) end end table.sort(out) return out"
    )
    # `@`: keys.mention; `/`: an ACP agent's slash commands (a `/` elsewhere than the message's start is typed as is)
    assert maps == ["i /", "i <C-G>", "i <C-X>", "i @", "n <C-X>"], maps
    nvim.api.input("ivia C-g<C-g>")
    wait_turns(nvim, 1)
    assert "via C-g" in transcript(nvim)
    ok, msg = nvim.lua("return { pcall(require('pseudoclaude').setup, { keys = { send = 1 } }) }")
    assert ok is False and "keys.send" in msg, msg


def test_a_write_failure_shows_in_the_winbar_and_is_resolved_by_the_next_write(nvim: Neovim, workspace: Path) -> None:
    setup(nvim)
    nvim.lua("_G.pc_notes = {} vim.notify = function(m, l) table.insert(_G.pc_notes, m) end")
    (workspace / ".PseudoClaude").write_text("in the way")  # the sessions folder cannot be created
    type_message(nvim, "first")
    wait_turns(nvim, 1)
    assert "NOT SAVED" in nvim.lua("return require('pseudoclaude.chat').winbar()")
    assert any("could not be written" in m for m in nvim.lua("return _G.pc_notes"))
    (workspace / ".PseudoClaude").unlink()
    type_message(nvim, "second")
    wait_turns(nvim, 2)
    winbar = nvim.lua("return require('pseudoclaude.chat').winbar()")
    assert "NOT SAVED" not in winbar and "saved" in winbar, winbar
    cur = nvim.lua("return require('pseudoclaude').current()")
    entries = log_lines(cur["jsonl"])
    assert entries[0]["reason"] == "resync" and [m["content"] for m in entries[0]["messages"]][:2] == ["first", "second"]


def test_pseudocleanup_removes_idle_sessions_and_says_which(nvim: Neovim, workspace: Path) -> None:
    old = int(time.time()) - 40 * 86400
    p = write_session(workspace, "20261001-080000-0e0f", [{"role": "user", "content": "ancient", "ts": old}])
    os.utime(p, (old, old))
    write_session(workspace, "20261201-080000-0a0a", [{"role": "user", "content": "recent", "ts": int(time.time())}])
    setup(nvim)
    nvim.lua("_G.pc_notes = {} vim.notify = function(m, l) table.insert(_G.pc_notes, m) end")
    nvim.api.command("PseudoCleanup")
    assert nvim.lua("return _G.pc_notes") == ["pseudoclaude: removed 1 idle session(s): 20261001-080000-0e0f"]
    assert not p.parent.exists()
    assert (sessions_dir(workspace) / "20261201-080000-0a0a").exists()


def test_approving_a_write_writes_it_and_always_stops_asking(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    """"Yes" writes the file the model asked for; "Always (this session)" writes and is not asked again."""
    fake.push_tools("", [("call_1", "write_file", {"path": "yes.txt", "content": "yes\n"})])
    fake.push_text("Wrote yes.txt.")
    fake.push_tools("", [("call_2", "write_file", {"path": "always.txt", "content": "always\n"})])
    fake.push_text("Wrote always.txt.")
    fake.push_tools("", [("call_3", "write_file", {"path": "again.txt", "content": "again\n"})])
    fake.push_text("Wrote again.txt.")
    setup(nvim, openai(fake))
    answer_approvals(nvim, "Yes", "Always (this session)")
    type_message(nvim, "write yes.txt")
    wait_turns(nvim, 1)
    assert (workspace / "yes.txt").read_text() == "yes\n"
    type_message(nvim, "write always.txt")
    wait_turns(nvim, 2)
    assert (workspace / "always.txt").read_text() == "always\n"
    type_message(nvim, "write again.txt")
    wait_turns(nvim, 3)
    assert (workspace / "again.txt").read_text() == "again\n"
    assert nvim.lua("return vim.g.pc_asked") == 2  # the third write was not asked about
    assert fake.errors == [], fake.errors
    results = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 3 and not any("declined" in r for r in results), results


def test_approve_write_file_from_setup_writes_without_asking(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    fake.push_tools("", [("call_1", "write_file", {"path": "auto.txt", "content": "auto\n"})])
    fake.push_text("Done.")
    setup(nvim, openai(fake), approve={"write_file": True})
    answer_approvals(nvim)
    type_message(nvim, "write auto.txt")
    wait_turns(nvim, 1)
    assert (workspace / "auto.txt").read_text() == "auto\n"
    assert nvim.lua("return vim.g.pc_asked") == 0
    assert fake.errors == [], fake.errors
