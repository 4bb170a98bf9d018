"""Every workspace (`:PseudoResume all`, `sessions.list({ all = true })`): the registry of workspaces under
stdpath("state") that a session start writes, the rows of every workspace marked with theirs, previews and names of
another workspace's sessions, and the resume that asks before it moves the chat to another workspace."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import Neovim, transcript, type_message, wait_for
from session_files import session_dir, session_id, write_session

PICKER = (
    "local p = require('pseudoclaude.float') local s = p.get_state() if not (s and s.full) then return false end "
    "return { sel = (p.selected() or {}).id, rows = vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false), "
    "preview = s.preview_id == (p.selected() or {}).id and vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false) "
    "or false }"
)

TRACK = """
vim.g.pc_resumed = vim.NIL
vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumed", callback = function(ev)
  vim.g.pc_resumed = ev.data
end })
"""


def registry(n: Neovim) -> Path:
    return Path(n.lua("return require('pseudoclaude.sessions').workspaces_file()"))


def setup(n: Neovim) -> None:
    n.lua("require('pseudoclaude').setup({ provider = { name = 'demo' } })")
    n.lua(TRACK)
    n.api.command("set columns=160 lines=48")


def two_workspaces(tmp_path: Path, workspace: Path) -> tuple[Path, str, str]:
    """Another workspace with one session, and one session here; returns (other, its session, this one's)."""
    other = tmp_path / "billing-service"
    other.mkdir()
    theirs, ours = session_id(1), session_id(2)
    write_session(other, theirs, title="invoice rounding bug", mtime=time.time() - 60)
    write_session(workspace, ours, title="local refactor", mtime=time.time() - 3600)
    return other.resolve(), theirs, ours


def wait_question(n: Neovim) -> str:
    """The picker asks a y/N question and waits for the key."""
    return wait_for(lambda: n.lua("local s = require('pseudoclaude.float').get_state() return s and s.asking"),
                    what="the picker's question")


def test_a_session_start_records_its_workspace_in_the_registry(nvim: Neovim, workspace: Path) -> None:
    setup(nvim)
    file = registry(nvim)
    assert file.parent.parent == nvim.state_home / "nvim", file
    assert not file.exists()
    nvim.api.command("PseudoChat")
    type_message(nvim, "hello")
    wait_for(lambda: file.exists() and file.read_text().splitlines() == [str(workspace.resolve())], what="the registry")
    assert oct(file.stat().st_mode & 0o777) == "0o600"


def test_resume_all_lists_every_workspace_and_asks_before_switching(
    nvim: Neovim, workspace: Path, tmp_path: Path
) -> None:
    other, theirs, ours = two_workspaces(tmp_path, workspace)
    setup(nvim)
    file = registry(nvim)
    file.parent.mkdir(parents=True)
    gone = tmp_path / "removed-project"
    file.write_text(f"{gone}\n{other}\n")  # a workspace removed since is dropped quietly
    # The default stays this workspace.
    assert [i["id"] for i in nvim.lua("return require('pseudoclaude').sessions.list()")] == [ours]
    items = nvim.lua("return require('pseudoclaude').sessions.list({ all = true })")
    assert [(i["id"], i["workspace"]) for i in items] == [(theirs, str(other)), (ours, str(workspace.resolve()))]

    nvim.api.input(":PseudoResume all<CR>")
    s = wait_for(lambda: (x := nvim.lua(PICKER)) and x["preview"] and x, what="the picker and its preview")
    assert s["rows"][0].startswith("  billing-service: invoice rounding bug"), s["rows"]
    assert s["rows"][1].startswith("  workspace: local refactor"), s["rows"]
    assert s["sel"] == theirs and "answer 1 to invoice rounding bug" in "\n".join(s["preview"]), s["preview"]
    # the filter matches the workspace
    nvim.api.input("billing")
    wait_for(lambda: (x := nvim.lua(PICKER)) and len(x["rows"]) == 1 and x["sel"] == theirs, what="filtered")
    nvim.api.input("<C-u>")

    nvim.api.input("<CR>")
    assert "billing-service. Switch the chat's workspace there?" in wait_question(nvim)
    nvim.api.input("n")
    wait_for(lambda: nvim.lua("local s = require('pseudoclaude.float').get_state() return s and not s.asking"),
             what="the answer taken")
    assert nvim.lua("return require('pseudoclaude.float').is_open()"), "No keeps the picker open"
    assert nvim.lua("return vim.g.pc_resumed") is None
    assert nvim.lua("return require('pseudoclaude').workspace()") == str(workspace)

    nvim.api.input("<CR>")
    wait_question(nvim)
    nvim.api.input("y")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True and report["id"] == theirs, report
    assert nvim.lua("return require('pseudoclaude').workspace()") == str(other)
    assert nvim.lua("return require('pseudoclaude').sessions.current_id()") == theirs
    assert "invoice rounding bug" in "\n".join(transcript(nvim))
    # The chat goes on in that workspace: the next turn is written to its log, and its sessions are listed.
    before = (session_dir(other, theirs) / "conversation.jsonl").read_text().count("\n")
    type_message(nvim, "and the tax lines?")
    wait_for(
        lambda: (session_dir(other, theirs) / "conversation.jsonl").read_text().count("\n") >= before + 2,
        what="the turn in the other workspace's log",
    )
    assert not any(session_dir(workspace, ours).parent.glob(f"{theirs}*"))
    assert str(other) in file.read_text().splitlines()[-1:], "the resume noted the workspace"


def test_names_and_deletes_in_resume_all_act_on_the_rows_own_workspace(
    nvim: Neovim, workspace: Path, tmp_path: Path
) -> None:
    other, theirs, ours = two_workspaces(tmp_path, workspace)
    setup(nvim)
    file = registry(nvim)
    file.parent.mkdir(parents=True)
    file.write_text(f"{other}\n")
    nvim.api.input(":PseudoResume all<CR>")
    wait_for(lambda: (x := nvim.lua(PICKER)) and x["sel"] == theirs, what="the picker")
    nvim.api.input("<C-t>")
    wait_for(lambda: nvim.lua(PICKER)["rows"][0].startswith("* billing-service: "), what="pinned")
    last = json.loads((session_dir(other, theirs) / "conversation.jsonl").read_text().splitlines()[-1])
    assert (last["type"], last["pinned"]) == ("pin", True)
    nvim.api.input("<C-x>")
    assert "Delete session" in wait_question(nvim)
    nvim.api.input("y")
    wait_for(lambda: not session_dir(other, theirs).exists(), what="the other workspace's session deleted")
    assert session_dir(workspace, ours).exists()
    s = wait_for(lambda: (x := nvim.lua(PICKER)) and len(x["rows"]) == 1 and x, what="the row gone")
    assert s["rows"][0].startswith("  workspace: local refactor")


def test_resume_all_with_the_select_backend_asks_through_vim_ui_select(
    nvim: Neovim, workspace: Path, tmp_path: Path
) -> None:
    other, theirs, _ = two_workspaces(tmp_path, workspace)
    nvim.lua("require('pseudoclaude').setup({ provider = { name = 'demo' }, picker = { backend = 'select' } })")
    nvim.lua(TRACK)
    file = registry(nvim)
    file.parent.mkdir(parents=True)
    file.write_text(f"{other}\n")
    # A replaced vim.ui.select (as telescope or fzf-lua install): picks the first entry, then answers "Yes".
    nvim.lua("""
      _G.asked = {}
      vim.ui.select = function(items, opts, on_choice)
        table.insert(_G.asked, { prompt = opts.prompt, lines = vim.tbl_map(function(i)
          return opts.format_item and opts.format_item(i) or tostring(i) end, items) })
        vim.schedule(function() on_choice(items[1], 1) end)
      end
    """)
    nvim.api.command("PseudoResume all")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True and report["id"] == theirs
    asked: list[dict[str, Any]] = nvim.lua("return _G.asked")
    assert "~" in asked[0]["lines"][0] or str(other) in asked[0]["lines"][0], asked
    assert "billing-service" in asked[0]["lines"][0]
    assert "Switch the chat's workspace there?" in asked[1]["prompt"] and asked[1]["lines"] == ["Yes", "No"]
    assert nvim.lua("return require('pseudoclaude').workspace()") == str(other)
