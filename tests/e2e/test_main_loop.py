"""The editor's main loop never waits on a disk sync, a network read, a model or a whole session (README,
ARCHITECTURE): a 1 ms timer inside Neovim (conftest.main_loop_watch) must keep ticking, with no gap of 250 ms or
more, through a streamed turn against a slow server, a resume of a 160 MiB session, the picker opening on it and a
search through it. The bound is generous: this is not about speed (the benches are), it catches the blocking
call that a thread should have made."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import Neovim, main_loop_watch, transcript, type_message, wait_for
from fake_llm import FakeOpenAI
from session_files import chat, entry, session_dir, session_id, write_session

TRACK = """
vim.g.pc_turns = 0
vim.g.pc_resumed = vim.NIL
vim.g.pc_drawn = vim.NIL
vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function()
  vim.g.pc_turns = vim.g.pc_turns + 1
end })
vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumed", callback = function(ev)
  vim.g.pc_resumed = ev.data
end })
vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumeDrawn", callback = function(ev)
  vim.g.pc_drawn = ev.data
end })
"""

PICKER = """
local p = require("pseudoclaude.float")
local s = p.get_state()
if not s then return vim.NIL end
local out = { full = s.full, selected = (p.selected() or {}).id, preview_id = s.preview_id or vim.NIL,
  preview = vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false) }
if s.search then
  out.query, out.running, out.hits, out.preview_key = s.search.query, s.search.running, #s.search.hits,
    s.search.preview_key or vim.NIL
end
return out
"""

# Large enough that reading it whole on the main loop (sessions.load) takes well over the bound on this kind of
# machine (about 0.4 s for 160 MiB, measured), so a resume, a preview or a search that did would fail here.
MIB = 160


def setup(n: Neovim, provider: dict[str, Any] | None = None) -> None:
    n.lua("require('pseudoclaude').setup(...)", {"provider": provider or {"name": "demo"}})
    n.lua(TRACK)
    n.api.command("set columns=160 lines=48")


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log of a 160 MiB session (1 MiB assistant messages, "quokka" in the last one), written once."""
    now = int(time.time())
    blob = "y " * (512 * 1024)
    path = tmp_path_factory.mktemp("big") / "conversation.jsonl"
    with path.open("w") as f:
        f.write(json.dumps(entry("user", "the big one", ts=now - 1000, model="big-model")) + "\n")
        for k in range(MIB):
            tail = " quokka" if k == MIB - 1 else ""
            f.write(json.dumps(entry("assistant", f"part {k} {blob}{tail}", ts=now - 999 + k)) + "\n")
            f.write(json.dumps(entry("user", f"more {k}", ts=now - 999 + k)) + "\n")
    assert path.stat().st_size > MIB * 1024 * 1024
    return path


@pytest.fixture
def big(workspace: Path, big_log: Path) -> str:
    """The big session (a hard link to the one log: nothing here writes to it), the newest of 200 small ones."""
    now = int(time.time())
    for i in range(200):
        write_session(workspace, session_id(i), chat(f"task {i}", ts=now - 9000 + i), mtime=now - 9000 + i)
    sid = session_id(500)
    d = session_dir(workspace, sid)
    (d / "tool-results").mkdir(parents=True)
    (d / "conversation.jsonl").hardlink_to(big_log)
    os.utime(d / "conversation.jsonl")
    return sid


def test_a_streamed_turn_against_a_slow_server_never_stalls_the_main_loop(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    (workspace / "a.txt").write_text("alpha\n" * 1000)
    fake.push_tools("Let me read it.", [("call_1", "read_file", {"path": "a.txt"}), ("call_2", "list_files", {})],
                    delay=0.05)
    fake.push_text(" ".join(f"word{i}" for i in range(40)), delay=0.05)  # about 2 s of a slow model
    setup(nvim, {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"})
    with main_loop_watch(nvim, "a streamed turn with two tool calls") as watch:
        type_message(nvim, "read a.txt slowly")
        wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="the turn")
    assert any("word39" in line for line in transcript(nvim))
    assert watch["ticks"] > 100, watch  # it watched the whole turn, not an instant


def test_resuming_a_160_mib_session_never_stalls_the_main_loop(nvim: Neovim, big: str) -> None:
    setup(nvim)
    with main_loop_watch(nvim, f":PseudoResume of a {MIB} MiB session"):
        nvim.api.command(f"PseudoResume {big}")
        report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
        wait_for(lambda: nvim.lua("return vim.g.pc_drawn"), what="all of it drawn")
    assert report["ok"] is True and report["messages"] == 2 * MIB + 1
    assert transcript(nvim)[-1] == f"more {MIB - 1}"


def test_the_picker_opening_on_a_160_mib_session_never_stalls_the_main_loop(nvim: Neovim, big: str) -> None:
    setup(nvim)
    with main_loop_watch(nvim, f"the picker opening on a {MIB} MiB session and previewing it"):
        nvim.api.input(":PseudoResume<CR>")
        s = wait_for(
            lambda: (x := nvim.lua(PICKER)) and x["full"] and x["preview_id"] == x["selected"] and x,
            what="the full list and the preview",
        )
    assert s["selected"] == big and "the big one" in "\n".join(s["preview"])


def test_a_search_through_a_160_mib_session_never_stalls_the_main_loop(nvim: Neovim, big: str) -> None:
    setup(nvim)
    with main_loop_watch(nvim, f"a search through a {MIB} MiB session and the preview of its hit"):
        nvim.api.command("PseudoSearch quokka")
        s = wait_for(
            lambda: (x := nvim.lua(PICKER)) and x.get("query") == "quokka" and not x["running"]
            and x["preview_key"] == f"{big}:{2 * MIB}" and x,
            what="the search and the hit's preview",
        )
    assert s["hits"] == 1
