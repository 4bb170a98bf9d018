"""Several chats at once (`:PseudoChat!`, `chat.new(opts)`, `chats()`, `:PseudoChats`): turns side by side, each
chat logging only its own messages, its state in sight, a hidden chat's question waiting for it, the resume of a live
session showing its chat, `:qa` with chats streaming, a rewind after another chat changed files, and eight chats
streaming under the main-loop watch. Against the fake OpenAI server on 127.0.0.1."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import Neovim, main_loop_watch, screen_lines, wait_for
from fake_llm import FakeOpenAI


def setup(n: Neovim, fake: FakeOpenAI, **extra: Any) -> None:
    provider = {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"}
    n.lua(
        """
        require("pseudoclaude").setup(...)
        vim.g.pc_done = {}
        vim.g.pc_resumed = vim.NIL
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function(ev)
          local done = vim.g.pc_done
          done[tostring(ev.data.chat)] = (done[tostring(ev.data.chat)] or 0) + 1
          done["id" .. ev.data.chat] = ev.data.id
          vim.g.pc_done = done
        end })
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumed", callback = function(ev)
          vim.g.pc_resumed = ev.data
        end })
        """,
        {"provider": provider, **extra},
    )


def send(n: Neovim, text: str) -> None:
    """Types `text` into the current window (a chat's input window) and sends it with <C-s>, as a user does."""
    n.api.input("<Esc>i" + text.replace("<", "<lt>") + "<C-s>")


def press_cancel(n: Neovim, index: int) -> None:
    """<C-c> in the current chat's input window, then waits for chat `index` (0-based) to be idle. Vim takes a CTRL-C
    that reaches it while it is busy for an interrupt of what it is doing (os/input.c `process_ctrl_c`), and no
    mapping sees it: a user presses it again, and so does this, once, if the first went that way (CI lost one in
    ~20 runs under load, never reproduced here)."""
    n.api.input("<C-c>")
    try:
        wait_for(lambda: chats(n)[index]["state"] == "idle", timeout=5, what="the chat cancelled")
    except AssertionError:
        n.api.input("<C-c>")
        wait_for(lambda: chats(n)[index]["state"] == "idle", what="the chat cancelled (<C-c> pressed twice)")


def new_chat_without_server(n: Neovim, model: str) -> None:
    """Opens another chat with a provider of its own (`model`) whose server is not there: its turns fail."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    n.lua(
        "local url, model = ... require('pseudoclaude').chat.new({ provider = { name = 'openai', base_url = url, "
        "model = model, api_key_env = 'PC_TEST_NO_KEY' } })",
        dead,
        model,
    )


def chats(n: Neovim) -> list[dict[str, Any]]:
    return n.lua("return require('pseudoclaude').chats()")


def done(n: Neovim, chat: int) -> int:
    return (n.lua("return vim.g.pc_done") or {}).get(str(chat), 0)


def buffer_text(n: Neovim, chat: int) -> str:
    name = "pseudoclaude://chat" if chat == 1 else f"pseudoclaude://chat/{chat}"
    return n.lua(
        "local b = vim.fn.bufnr(...) if b == -1 then return '' end "
        "return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n')",
        name,
    )


def log_of(workspace: Path, session: str) -> str:
    return (workspace / ".PseudoClaude" / "sessions" / session / "conversation.jsonl").read_text()


def user_texts(workspace: Path, session: str) -> list[str]:
    out = []
    for line in log_of(workspace, session).splitlines():
        e = json.loads(line)
        if e.get("type") == "message" and e.get("role") == "user" and not e.get("tool_result"):
            out.append(e.get("content", ""))
    return out


def two_chats_streaming(n: Neovim, fake: FakeOpenAI) -> list[str]:
    """Opens two chats whose answers stream and never finish ("alpha beta gamma", "delta epsilon zeta"); returns
    their sessions."""
    fake.push_hang("alpha beta gamma")
    fake.push_hang("delta epsilon zeta")
    setup(n, fake)
    n.api.command("PseudoChat")
    send(n, "first")
    wait_for(lambda: "gamma" in buffer_text(n, 1), what="the first chat's text")
    n.api.command("PseudoChat!")
    send(n, "second")
    wait_for(lambda: "zeta" in buffer_text(n, 2), what="the second chat's text")
    assert [r["state"] for r in chats(n)] == ["running", "running"]
    return [r["session"] for r in chats(n)]


def quit_editor(n: Neovim) -> None:
    """`:qa!`, then waits for the process to end."""
    try:
        n.api.command("qa!")
    except Exception:
        pass  # the connection closes as Neovim exits
    n.proc.wait(timeout=20)


def test_two_chats_overlap_and_each_log_holds_only_its_own_messages(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.push_text(" ".join(["slowly"] * 30), delay=0.15)  # the first chat's model: 4.5 s
    fake.push_text("the quick answer")
    setup(nvim, fake)
    nvim.api.command("PseudoChat")
    send(nvim, "the first question")
    wait_for(lambda: len(fake.requests) == 1, what="the first chat's request")
    nvim.api.command("PseudoChat!")
    assert nvim.lua("return vim.b.pseudoclaude_chat") == 2, "PseudoChat! shows another chat"
    send(nvim, "the second question")
    wait_for(lambda: done(nvim, 2) == 1, what="the second chat's turn")
    rows = chats(nvim)
    # the second finished while the first still waits for its model
    assert [r["state"] for r in rows] == ["running", "idle"], rows
    assert done(nvim, 1) == 0
    wait_for(lambda: done(nvim, 1) == 1, what="the first chat's turn")
    rows = chats(nvim)
    assert [r["state"] for r in rows] == ["idle", "idle"], rows
    first, second = rows[0]["session"], rows[1]["session"]
    assert first and second and first != second
    assert rows[0]["id"] == first and rows[1]["title"] == "the second question", rows
    assert user_texts(workspace, first) == ["the first question"]
    assert user_texts(workspace, second) == ["the second question"]
    assert "slowly" in log_of(workspace, first) and "slowly" not in log_of(workspace, second)
    assert "quick answer" in buffer_text(nvim, 2) and "slowly" not in buffer_text(nvim, 2)
    assert "slowly" in buffer_text(nvim, 1) and "quick answer" not in buffer_text(nvim, 1)
    # the winbar of each shows its state
    assert "[idle]" in nvim.lua("return require('pseudoclaude.chat').winbar(1)")


def test_the_winbar_shows_the_chats_state_once_as_the_core_decides_it(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    """Issue 48 item 2: the state `chats()` lists (the core's) is the one the winbar draws, read from the screen, and
    named once there (it once read `[idle] … │ idle │`)."""
    import re

    def winbar(name: str = "pseudoclaude://chat") -> str:
        win = nvim.lua("return vim.fn.bufwinid(...)", name)
        return screen_lines(nvim, win)[0]

    def states(bar: str) -> list[str]:
        return re.findall(r"\b(idle|running|waiting|failed)\b", bar)

    fake.push_text(" ".join(["slowly"] * 20), delay=0.15)
    setup(nvim, fake)
    nvim.lua("vim.o.columns = 240")  # the whole winbar in sight: a narrow window cuts its start
    nvim.api.command("PseudoChat")
    assert states(winbar()) == ["idle"], winbar()
    send(nvim, "the question")
    wait_for(lambda: "slowly" in buffer_text(nvim, 1), what="the answer streaming")
    assert chats(nvim)[0]["state"] == "running"
    assert states(winbar()) == ["running"] and winbar().lstrip().startswith("[running]"), winbar()
    wait_for(lambda: done(nvim, 1) == 1, what="the turn")
    assert chats(nvim)[0]["state"] == "idle"
    wait_for(lambda: states(winbar()) == ["idle"], what="the winbar's idle, once")
    # a chat whose provider is not there: the core says failed, and so does its winbar, once
    new_chat_without_server(nvim, "gone")
    send(nvim, "again")
    wait_for(lambda: done(nvim, 2) == 1, what="the failed turn")
    assert [r["state"] for r in chats(nvim)] == ["idle", "failed"]
    wait_for(lambda: states(winbar("pseudoclaude://chat/2")) == ["failed"], what="the winbar's failed, once")


def test_a_hidden_chat_waits_for_its_approval_says_so_once_and_asks_when_shown(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    # the first chat talks a while, then wants to write a file: by then it is out of sight
    fake.push_tools(
        "I will write the file now as you asked",
        [("call_1", "write_file", {"path": "a.txt", "content": "from the first chat\n"})],
        delay=0.25,
    )
    fake.push_text("the second chat answers")
    fake.push_text("written")
    setup(nvim, fake)
    nvim.lua(
        """
        vim.g.pc_asked, vim.g.pc_waits = 0, 0
        local notify = vim.notify
        vim.notify = function(msg, ...)
          if msg:find("waits for your answer") then vim.g.pc_waits = vim.g.pc_waits + 1 end
          return notify(msg, ...)
        end
        vim.ui.select = function(items, opts, cb)
          if opts.kind == "pseudoclaude.chat" then
            for _, r in ipairs(items) do if r.chat == 1 then return vim.schedule(function() cb(r) end) end end
          end
          vim.g.pc_asked = vim.g.pc_asked + 1
          vim.schedule(function() cb("Yes") end)
        end
        """
    )
    nvim.api.command("PseudoChat")
    send(nvim, "write a.txt")
    wait_for(lambda: len(fake.requests) == 1, what="the first chat's request")
    nvim.api.command("tabnew")
    nvim.api.command("PseudoChat!")
    wait_for(lambda: chats(nvim)[0]["state"] == "waiting", what="the first chat waiting")
    send(nvim, "and you?")
    wait_for(lambda: done(nvim, 2) == 1, what="the second chat's turn")
    rows = chats(nvim)
    assert [r["state"] for r in rows] == ["waiting", "idle"], rows
    # told once, asked nothing, the focus still in the second chat's input
    assert nvim.lua("return vim.g.pc_waits") == 1
    assert nvim.lua("return vim.g.pc_asked") == 0
    assert nvim.lua("return vim.b.pseudoclaude_chat") == 2
    assert not (workspace / "a.txt").exists()
    nvim.api.command("PseudoChats")
    wait_for(lambda: done(nvim, 1) == 1, what="the first chat's turn after its answer")
    assert nvim.lua("return vim.g.pc_asked") == 1
    assert (workspace / "a.txt").read_text() == "from the first chat\n"
    assert [r["state"] for r in chats(nvim)] == ["idle", "idle"]


def test_resuming_a_live_session_shows_its_chat_and_a_second_editor_is_refused(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.push_text("one")
    fake.push_text("two")
    n = start_nvim()
    setup(n, fake)
    n.api.command("PseudoChat")
    send(n, "first")
    wait_for(lambda: done(n, 1) == 1, what="the first chat's turn")
    n.api.command("PseudoChat!")
    send(n, "second")
    wait_for(lambda: done(n, 2) == 1, what="the second chat's turn")
    first = chats(n)[0]["session"]
    # the picker's row marks it live, with its state
    rows = n.lua("return require('pseudoclaude.float.render').live()")
    assert rows[first] == {"chat": 1, "state": "idle"}, rows
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.api.command(f"PseudoResume {first}")
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="the resume's report")
    assert report["ok"] and report["chat"] == 1, report
    assert n.lua("return vim.b.pseudoclaude_chat") == 1
    assert [r["session"] for r in chats(n)] == [first, chats(n)[1]["session"]] and len(chats(n)) == 2
    # the same with resume(id) from the second chat: not opened twice
    n.lua("require('pseudoclaude').chat.show(2)")
    n.lua("require('pseudoclaude').resume(...)", first)
    assert n.lua("return vim.b.pseudoclaude_chat") == 1 and len(chats(n)) == 2
    # the picker draws the other chat's live session with the marker and its state (the current one is not listed)
    n.api.command("PseudoResume")
    float_text = (
        "local out = {} for _, w in ipairs(vim.api.nvim_list_wins()) do "
        "if vim.api.nvim_win_get_config(w).relative ~= '' then "
        "vim.list_extend(out, vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)) end end "
        "return table.concat(out, '\\n')"
    )
    text = wait_for(lambda: "[idle] second" in (t := n.lua(float_text)) and t, what="the picker's live rows")
    assert any(line.startswith("● [idle] second") for line in text.split("\n")), text
    other = start_nvim()
    setup(other, fake)
    other.lua("vim.g.pc_resumed = vim.NIL")
    other.lua("require('pseudoclaude').resume(...)", first)
    report = wait_for(lambda: other.lua("return vim.g.pc_resumed"), what="the second editor's report")
    assert not report["ok"] and "another editor" in report["error"], report


def test_qa_with_two_chats_streaming_keeps_what_each_streamed_and_both_resume(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    n = start_nvim()
    sessions = two_chats_streaming(n, fake)
    quit_editor(n)
    assert "alpha beta gamma" in log_of(workspace, sessions[0])
    assert "delta epsilon zeta" in log_of(workspace, sessions[1])
    again = start_nvim()
    setup(again, fake)
    for session, text in zip(sessions, ["alpha beta gamma", "delta epsilon zeta"]):
        again.lua("vim.g.pc_resumed = vim.NIL")
        again.api.command(f"PseudoResume {session}")
        report = wait_for(lambda: again.lua("return vim.g.pc_resumed"), what="the resume")
        assert report["ok"], report
        wait_for(lambda: text in buffer_text(again, 1), what=f"{text!r} restored")


def test_qa_with_a_command_running_in_each_of_two_chats_ends_both_commands(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    import subprocess

    def running(marker: str) -> bool:
        return subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True).returncode == 0

    fake.push_tools("", [("c1", "run_command", {"command": "sleep 3071"})])
    fake.push_tools("", [("c2", "run_command", {"command": "sleep 3072"})])
    n = start_nvim()
    setup(n, fake, approve={"run_command": True})
    n.api.command("PseudoChat")
    send(n, "one")
    wait_for(lambda: running("3071"), what="the first chat's command running")
    n.api.command("PseudoChat!")
    send(n, "two")
    wait_for(lambda: running("3072"), what="the second chat's command running")
    assert [r["state"] for r in chats(n)] == ["running", "running"]
    quit_editor(n)
    wait_for(lambda: not running("3071") and not running("3072"), timeout=10, what="no command left after :qa")


def test_a_rewind_never_takes_back_what_another_chat_changed_meanwhile(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    (workspace / "shared.txt").write_text("as it was\n")
    # the first chat runs a command that lasts while the second chat writes two files
    fake.push_tools("", [("c1", "run_command", {"command": "sleep 2; echo first > mine.txt"})])
    fake.push_tools("", [("c2", "write_file", {"path": "theirs.txt", "content": "second\n"}),
                         ("c3", "write_file", {"path": "shared.txt", "content": "changed by the second\n"})])
    fake.push_text("second done")
    fake.push_text("first done")
    setup(nvim, fake, approve={"write_file": True, "run_command": True}, sandbox={"enabled": False})
    nvim.api.command("PseudoChat")
    send(nvim, "run it")
    wait_for(lambda: len(fake.requests) == 1, what="the first chat's request")
    time.sleep(0.3)  # its command is running
    nvim.api.command("PseudoChat!")
    send(nvim, "write them")
    wait_for(lambda: done(nvim, 2) == 1 and done(nvim, 1) == 1, what="both turns")
    assert (workspace / "mine.txt").exists() and (workspace / "theirs.txt").exists()
    nvim.lua("require('pseudoclaude').chat.show(1)")
    nvim.lua(
        "vim.g.pc_rewound = vim.NIL require('pseudoclaude').rewind(1, { conversation = false, "
        "on_done = function(r) vim.g.pc_rewound = r end })"
    )
    report = wait_for(lambda: nvim.lua("return vim.g.pc_rewound"), what="the rewind's report")
    assert report["ok"], report
    assert report["chat"] == 1 and report["id"] == chats(nvim)[0]["session"], report
    # the first chat's own file is taken back; the second chat's are left as they are
    assert not (workspace / "mine.txt").exists(), report
    assert (workspace / "theirs.txt").read_text() == "second\n"
    assert (workspace / "shared.txt").read_text() == "changed by the second\n"
    assert "theirs.txt" not in report.get("removed", []) and "shared.txt" not in report.get("restored", []), report
    # they ran at the same time: the first chat's checkpoint after its command marked the second's files as its
    marked = {
        c["path"]: c.get("by")
        for line in log_of(workspace, chats(nvim)[0]["session"]).splitlines()
        if (e := json.loads(line)).get("type") == "files" and e["files"].get("by") == "agent"
        for c in e["files"].get("changes", [])
    }
    assert marked == {"mine.txt": None, "theirs.txt": "chat", "shared.txt": "chat"}, marked


def test_cancel_stops_only_its_chat_and_a_chat_with_its_own_provider_fails_alone(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    sessions = two_chats_streaming(nvim, fake)
    # <C-c> in the second chat's input window, as a user presses it
    assert nvim.lua("return vim.b.pseudoclaude_chat") == 2
    nvim.api.input("<C-c>")
    wait_for(lambda: [r["state"] for r in chats(nvim)] == ["running", "idle"], what="only the second chat cancelled")
    # a third chat with a provider of its own, whose server is not there: it fails, alone
    new_chat_without_server(nvim, "elsewhere")
    assert nvim.lua("return vim.b.pseudoclaude_chat") == 3
    send(nvim, "third")
    wait_for(lambda: chats(nvim)[2]["state"] == "failed", what="the third chat failed")
    assert [r["state"] for r in chats(nvim)] == ["running", "idle", "failed"]
    assert "[failed]" in nvim.lua("return require('pseudoclaude.chat').winbar(3)")
    assert "[running]" in nvim.lua("return require('pseudoclaude.chat').winbar(1)")
    # the failed chat never reached the shared fake: two requests, each chat's own model
    assert len(fake.requests) == 2
    # the first chat still streams into its own log; the second kept what it had streamed
    sessions.append(chats(nvim)[2]["session"])
    assert "delta epsilon zeta" in log_of(workspace, sessions[1])
    assert user_texts(workspace, sessions[1]) == ["second"]
    assert user_texts(workspace, sessions[2]) == ["third"]
    nvim.lua("require('pseudoclaude').chat.show(1)")
    assert nvim.lua("return vim.b.pseudoclaude_chat") == 1
    press_cancel(nvim, 0)
    assert "alpha beta gamma" in log_of(workspace, sessions[0])


def test_eight_chats_streaming_keep_the_main_loop_moving(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    for k in range(8):
        fake.push_text(" ".join([f"w{k}"] * 100), delay=0.002)
    setup(nvim, fake)
    with main_loop_watch(nvim, "eight chats streaming", bound_ms=250.0):
        nvim.api.command("PseudoChat")
        send(nvim, "go 1")
        for k in range(2, 9):
            # the typed keys are consumed before the next chat opens
            wait_for(lambda k=k: len(fake.requests) >= k - 1, what=f"chat {k - 1}'s request")
            nvim.api.command("PseudoChat!")
            send(nvim, f"go {k}")
        wait_for(lambda: all(done(nvim, k) == 1 for k in range(1, 9)), timeout=120, what="eight turns")
    rows = chats(nvim)
    assert len(rows) == 8 and all(r["state"] == "idle" for r in rows), rows
    assert len({r["session"] for r in rows}) == 8


def test_one_wake_ups_text_deltas_of_a_chat_are_drawn_as_one_in_their_order(nvim: Neovim) -> None:
    # an agent's burst arrives as thousands of deltas in one wake-up: drawn one by one, each rewrote the growing last
    # line (acp_bench.py: a 1.5 s stall for 10,000); merged per chat, in order, never across another event or chat
    msgs = [
        {"type": "text_delta", "chat": 1, "text": "a"},
        {"type": "text_delta", "chat": 1, "text": "b"},
        {"type": "text_delta", "chat": 2, "text": "x"},
        {"type": "tool_call", "chat": 1, "name": "t"},
        {"type": "text_delta", "chat": 1, "text": "c"},
        {"type": "text_delta", "chat": 1, "text": "d"},
        {"type": "text_delta", "chat": 1, "text": "e"},
    ]
    out = nvim.lua("return require('pseudoclaude.chat.events').merge_deltas(...)", msgs)
    assert [(m["type"], m["chat"], m.get("text")) for m in out] == [
        ("text_delta", 1, "ab"),
        ("text_delta", 2, "x"),
        ("tool_call", 1, None),
        ("text_delta", 1, "cde"),
    ], out
