"""Nothing the user saw is lost, and nothing outside the workspace is touched, through the real editor: a log line
with a raw 0xE9 byte, a log of garbage, a symlinked session folder and a symlinked log, a panic in a callback that
Neovim runs, and a disk that fills up (`prlimit --fsize`) in the middle of a session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import Neovim, transcript, type_message
from session_files import chat, session_dir, session_id, write_session

SESSIONS = Path(".PseudoClaude") / "sessions"


def setup(n: Neovim, **opts: Any) -> None:
    n.lua(
        """
        require("pseudoclaude").setup(vim.tbl_extend("force", { provider = { name = "demo" } }, ...))
        vim.g.pc_turns = 0
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function(ev)
          vim.g.pc_turns = vim.g.pc_turns + 1
        end })
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumed", callback = function(ev)
          vim.g.pc_resumed = ev.data
        end })
        _G.pc_notes = {}
        vim.notify = function(m, l) table.insert(_G.pc_notes, { msg = tostring(m), level = l }) end
        """,
        opts,
    )


def wait(n: Neovim, cond: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = n.lua("return " + cond)
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {cond}; notes: {notes(n)}")


def notes(n: Neovim) -> list[str]:
    return [x["msg"] for x in n.lua("return _G.pc_notes or {}")]




def sessions_list(n: Neovim, **opts: Any) -> list[dict[str, Any]]:
    return n.lua("return require('pseudoclaude').sessions.list(...)", opts)


def full_list(n: Neovim) -> list[dict[str, Any]]:
    """The list the picker reads in the background (`list_async`), waited for."""
    n.lua(
        "vim.g.pc_full = vim.NIL require('pseudoclaude').sessions.list_async({}, function(err, list) "
        "vim.g.pc_full = { err = err or '', list = list or {} } end)"
    )
    got = wait(n, "vim.g.pc_full")
    assert got["err"] == "", got
    return got["list"]


def picker_rows(n: Neovim, close: bool = True) -> list[str]:
    """Opens `:PseudoResume`, waits for its full list, returns the result rows (and closes it)."""
    n.api.command("set columns=160 lines=48")
    n.api.input(":PseudoResume<CR>")
    rows = wait(
        n,
        "(function() local s = require('pseudoclaude.float').get_state() "
        "if not (s and s.full) then return nil end "
        "return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(s.wins.results), 0, -1, false) end)()",
    )
    if close:
        n.lua("require('pseudoclaude.float').close()")
    return rows


# --- one bad byte ---------------------------------------------------------------------------------------------


def test_a_line_with_a_raw_e9_byte_is_restored_with_its_title_and_model(nvim: Neovim, workspace: Path) -> None:
    sid = session_id(1)
    now = int(time.time())
    d = write_session(workspace, sid, chat("placeholder", ts=now - 100, model="model-one", replies=3))
    log = d / "conversation.jsonl"
    lines = log.read_bytes().split(b"\n")
    first = json.loads(lines[0])
    assert first["model"] == "model-one"
    lines[0] = lines[0].replace(b'"placeholder"', b'"caf\xe9 first question"')
    log.write_bytes(b"\n".join(lines))
    before = log.read_bytes()
    setup(nvim)

    listed = {s["id"]: s for s in sessions_list(nvim)}[sid]
    assert listed["title"] == "caf\ufffd first question"
    assert listed["model"] == "model-one"
    assert (listed["messages"], listed["repaired"], listed["bad_lines"], listed["damaged"]) == (6, 1, 0, True)
    loaded = nvim.lua("return require('pseudoclaude').sessions.load(...)", sid)
    assert loaded["repaired"] == [1] and loaded["bad_lines"] == []
    assert "repaired 1 line(s)" in loaded["damage_report"], loaded["damage_report"]

    nvim.api.command(f"PseudoResume {sid}")
    report = wait(nvim, "vim.g.pc_resumed")
    assert report["messages"] == 6
    assert "repaired 1 line(s)" in report["notice"] and "(1)" in report["notice"], report
    shown = transcript(nvim)
    assert "caf\ufffd first question" in shown and "answer 1 to placeholder" in shown, shown
    assert any("restored with repairs: repaired 1 line(s)" in m for m in notes(nvim)), notes(nvim)
    assert log.read_bytes() == before, "a load or a resume never rewrites the log"


# --- a log of garbage -----------------------------------------------------------------------------------------


def test_a_garbage_only_log_is_listed_with_a_mark_and_resumes_saying_what_was_skipped(
    nvim: Neovim, workspace: Path
) -> None:
    now = time.time()
    good = session_id(1)
    write_session(workspace, good, title="a good session", mtime=now - 3600)
    bad = session_id(2)
    write_session(workspace, bad, entries=[], tail="garbage\n\x01\x02 not json\n{\"half\":\n", mtime=now - 60)
    (workspace / SESSIONS / session_id(3)).mkdir(parents=True)  # an empty folder stays out
    setup(nvim)

    for listed in (sessions_list(nvim), full_list(nvim), sessions_list(nvim, limit=9)):
        by_id = {s["id"]: s for s in listed}
        assert set(by_id) == {good, bad}, listed
        assert (by_id[bad]["damaged"], by_id[bad]["bad_lines"], by_id[bad]["messages"]) == (True, 3, 0)
        assert by_id[good]["damaged"] is False

    rows = picker_rows(nvim, close=False)
    assert rows[0].startswith("? (unreadable session)") and "0 msgs, 3 bad" in rows[0], rows
    assert rows[1].startswith("  a good session"), rows
    # The preview of the highlighted (damaged) row says what `sessions check` would.
    preview = wait(
        nvim,
        "(function() local s = require('pseudoclaude.float').get_state() "
        "local lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(s.wins.preview), 0, -1, false) "
        "for _, l in ipairs(lines) do if l:find('skipped 3 unreadable line') then return l end end end)()",
    )
    assert "repaired on load: skipped 3 unreadable line(s) (1, 2, 3)" in preview, preview
    nvim.lua("require('pseudoclaude.float').close()")

    nvim.api.command(f"PseudoResume {bad}")
    report = wait(nvim, "vim.g.pc_resumed")
    assert report["messages"] == 0
    assert "skipped 3 unreadable line(s) (1, 2, 3)" in report["notice"], report
    assert "garbage" in (session_dir(workspace, bad) / "conversation.jsonl").read_text(errors="replace")


# --- links out of the workspace -------------------------------------------------------------------------------


def outside_folder(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    now = int(time.time())
    text = "".join(json.dumps(e) + "\n" for e in chat("outside secret", ts=now - 50, replies=2))
    (out / "conversation.jsonl").write_text(text)
    (out / "tool-results").mkdir()
    return out


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("link", ["folder", "log"])
def test_a_symlinked_session_is_refused_everywhere_and_nothing_outside_changes(
    nvim: Neovim, workspace: Path, tmp_path: Path, link: str
) -> None:
    out = outside_folder(tmp_path)
    good = session_id(1)
    write_session(workspace, good, title="a good session", mtime=time.time() - 3600)
    sid = session_id(2)
    linked = workspace / SESSIONS / sid
    if link == "folder":
        linked.symlink_to(out, target_is_directory=True)
        refused_path = linked
    else:
        (linked / "tool-results").mkdir(parents=True)
        (linked / "conversation.jsonl").symlink_to(out / "conversation.jsonl")
        refused_path = linked / "conversation.jsonl"
    # The activity hint puts it first, as when it was the last session written.
    (workspace / SESSIONS / "activity").write_text(f"{good} {int(time.time()) - 3600}\n{sid} {int(time.time())}\n")
    before = tree(out)
    setup(nvim)

    assert [s["id"] for s in sessions_list(nvim, limit=1)] == [good], "first rows"
    assert [s["id"] for s in sessions_list(nvim, limit=9)] == [good]
    assert [s["id"] for s in full_list(nvim)] == [good], "full list"
    assert [r[2:].split("  ")[0].rstrip() for r in picker_rows(nvim)] == ["a good session"]

    nvim.api.command(f"PseudoResume {sid}")
    msg = wait(nvim, "(function() for _, n in ipairs(_G.pc_notes) do if n.msg:find('refusing') then return n.msg end end end)()")
    assert str(refused_path) in msg and "symbolic link" in msg, msg
    assert nvim.lua("return require('pseudoclaude').current()") is None
    ok, err = nvim.lua("return { pcall(require('pseudoclaude').sessions.load, ...) }", sid)
    assert ok is False and "refusing" in err and str(refused_path) in err, err
    ok, err = nvim.lua("return { pcall(require('pseudoclaude').sessions.info, ...) }", sid)
    assert ok is False and "refusing" in err, err
    ok, err = nvim.lua("return { pcall(require('pseudoclaude').sessions.delete, ...) }", sid)
    assert ok is False and "refusing" in err, err
    # 0.0001 days: the good session (an hour old) goes; the linked one is never reached.
    removed = nvim.lua("return require('pseudoclaude.core').call('sessions_cleanup', vim.fn.getcwd(), 0.0001)")
    assert removed == [good]

    # A new chat still works, next to the link.
    type_message(nvim, "hello")
    wait(nvim, "vim.g.pc_turns >= 1")
    cur = nvim.lua("return require('pseudoclaude').current()")
    assert cur["id"] != sid and Path(cur["jsonl"]).is_file()

    assert tree(out) == before, "nothing created, appended or removed outside the workspace"
    assert not (out / "lock").exists() and not (out / "summary.json").exists()
    assert linked.is_symlink() or (linked / "conversation.jsonl").is_symlink(), "the link itself is left alone"


# --- a panic in a callback Neovim runs ------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["wakeup", "scheduled"])
def test_a_panic_in_a_libuv_callback_is_caught_logged_and_reported(
    nvim: Neovim, workspace: Path, point: str
) -> None:
    write_session(workspace, session_id(1), title="one")
    setup(nvim)
    ok = nvim.lua("return (require('pseudoclaude.core').load()._test_panic_in_callback(...))", point)
    assert ok is True
    nvim.lua(
        "vim.g.pc_lists = 0 require('pseudoclaude').sessions.list_async({}, function() "
        "vim.g.pc_lists = vim.g.pc_lists + 1 end)"
    )
    msg = wait(
        nvim,
        "(function() for _, n in ipairs(_G.pc_notes) do if n.msg:find('internal error %(panic%)') then "
        "return n.msg end end end)()",
    )
    assert "_test_panic_in_callback: deliberate panic" in msg, msg
    assert nvim.alive()
    log = Path(nvim.lua("return { require('pseudoclaude.core').load().panic_log_path() }")[1])
    assert "_test_panic_in_callback: deliberate panic" in log.read_text()
    # The next wake-up delivers both lists: nothing was lost with the panic.
    nvim.lua("require('pseudoclaude').sessions.list_async({}, function() vim.g.pc_lists = vim.g.pc_lists + 1 end)")
    wait(nvim, "vim.g.pc_lists == 2")
    # The agent's callbacks are guarded the same way.
    nvim.lua("require('pseudoclaude.core').load()._test_panic_in_callback(...)", point)
    type_message(nvim, "hello")
    wait(nvim, "vim.g.pc_turns >= 1")
    assert nvim.alive()
    assert log.read_text().count("_test_panic_in_callback: deliberate panic") == 2


# --- the disk fills up ----------------------------------------------------------------------------------------


def test_a_full_disk_stops_the_turn_loses_nothing_and_the_next_send_after_it_saves_all(
    nvim: Neovim, workspace: Path
) -> None:
    assert shutil.which("prlimit"), "this test needs prlimit, which is not installed (Debian: apt-get install util-linux)"
    setup(nvim)
    type_message(nvim, "first message")
    wait(nvim, "vim.g.pc_turns >= 1")
    cur = nvim.lua("return require('pseudoclaude').current()")
    log = Path(cur["jsonl"])
    acknowledged = log.read_bytes()
    pid = nvim.api.call("getpid")
    # The soft limit only, so that it can be raised again without privileges.
    subprocess.run(["prlimit", f"--pid={pid}", f"--fsize={len(acknowledged)}:"], check=True)
    try:
        type_message(nvim, "second message")
        wait(nvim, "vim.g.pc_turns >= 2")
        assert nvim.alive(), nvim.stderr()
        winbar = nvim.lua("return require('pseudoclaude.chat').winbar()")
        assert "NOT SAVED" in winbar and "File too large" in winbar, winbar
        assert any("could not be written" in m and "File too large" in m for m in notes(nvim)), notes(nvim)
        assert nvim.lua("return require('pseudoclaude.core').call('agent_status').busy") is False
        assert log.read_bytes() == acknowledged, "cut back to the last committed line"
    finally:
        subprocess.run(["prlimit", f"--pid={pid}", "--fsize=unlimited:"], check=True)
    type_message(nvim, "third message")
    wait(nvim, "vim.g.pc_turns >= 3")
    winbar = nvim.lua("return require('pseudoclaude.chat').winbar()")
    assert "NOT SAVED" not in winbar and "saved" in winbar, winbar
    assert log.read_bytes().startswith(acknowledged)
    loaded = nvim.lua("return require('pseudoclaude').sessions.load(...)", cur["id"])
    assert loaded["damage_report"] == "", loaded["damage_report"]
    users = [m.get("content") for m in loaded["messages"] if m["role"] == "user" and not m.get("tool_result")]
    assert users[:3] == ["first message", "second message", "third message"], users
