"""The agent and the editor (issue 12): writes that go through the user's buffers, context from the editor attached
to a message, and the hunk-by-hunk diff review. Driven through the real commands and keys in a headless Neovim, the
model played by the fake OpenAI server; every case that involves an approval runs with `approve` on and off."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import Neovim, transcript, type_message
from fake_llm import FakeOpenAI
from test_chat import answer_approvals, openai, setup, wait, wait_turns


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    f = FakeOpenAI()
    yield f
    f.close()


APPROVE = {"on": {"write_file": True, "edit_file": True, "run_command": True}, "off": {}}


def start(n: Neovim, fake: FakeOpenAI, approve: str, **extra: Any) -> None:
    setup(n, openai(fake), approve=APPROVE[approve], **extra)
    answer_approvals(n, "Yes", "Yes", "Yes")


def open_file(n: Neovim, path: Path) -> int:
    """Edits `path` in the current window, as the user would; returns its buffer."""
    n.api.command(f"edit {path}")
    return n.lua("return vim.api.nvim_get_current_buf()")


def buf_lines(n: Neovim, b: int) -> list[str]:
    return n.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", b)


def tool_results(fake: FakeOpenAI) -> list[str]:
    return [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]


def asked(n: Neovim) -> int:
    return n.lua("return vim.g.pc_asked")


# -- §2: edits go through the editor ------------------------------------------------------------------------------


@pytest.mark.parametrize("approve", ["off", "on"])
def test_a_buffer_with_unsaved_changes_refuses_the_agents_write(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, approve: str
) -> None:
    f = workspace / "notes.txt"
    f.write_text("one\ntwo\n")
    start(nvim, fake, approve)
    b = open_file(nvim, f)
    nvim.lua("vim.api.nvim_buf_set_lines(..., 1, 2, false, { 'my unsaved two' })", b)
    fake.push_tools("", [("c1", "write_file", {"path": "notes.txt", "content": "agent\n"})])
    fake.push_text("I see, you are editing it.")
    type_message(nvim, "rewrite notes.txt")
    wait_turns(nvim, 1)
    assert f.read_text() == "one\ntwo\n"
    assert buf_lines(nvim, b) == ["one", "my unsaved two"]
    assert nvim.lua("return vim.bo[...].modified", b) is True
    assert nvim.lua("return vim.bo[...].modifiable", b) is True
    assert asked(nvim) == 0, "no question about a write that cannot happen"
    assert fake.errors == [], fake.errors
    (result,) = tool_results(fake)
    assert "notes.txt is open in the editor with unsaved changes" in result, result


@pytest.mark.parametrize("approve", ["off", "on"])
def test_an_unmodified_open_buffer_shows_the_agents_edit_at_once_and_undo_restores_it(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, approve: str
) -> None:
    f = workspace / "code.py"
    f.write_text("a = 1\nb = 2\nc = 3\nd = 4\n")
    start(nvim, fake, approve)
    b = open_file(nvim, f)
    nvim.lua("vim.api.nvim_buf_set_mark(..., 'x', 4, 0, {})", b)
    fake.push_tools("", [("c1", "edit_file", {"path": "code.py", "old": "b = 2\n", "new": "b = 20\nb2 = 21\n"})])
    fake.push_text("Done.")
    type_message(nvim, "change b")
    wait_turns(nvim, 1)
    assert f.read_text() == "a = 1\nb = 20\nb2 = 21\nc = 3\nd = 4\n"
    assert buf_lines(nvim, b) == ["a = 1", "b = 20", "b2 = 21", "c = 3", "d = 4"]
    assert nvim.lua("return vim.bo[...].modified", b) is False
    assert nvim.lua("return vim.bo[...].modifiable", b) is True
    # A mark below the change moved with its line.
    assert nvim.lua("return vim.api.nvim_buf_get_mark(..., 'x')", b) == [5, 0]
    # Neovim knows the file's new time: a :checktime finds nothing to do.
    nvim.lua(
        "vim.g.pc_fcs = 0 vim.api.nvim_create_autocmd('FileChangedShell', { callback = function() "
        "vim.g.pc_fcs = vim.g.pc_fcs + 1 vim.v.fcs_choice = '' end }) vim.cmd('checktime')"
    )
    assert nvim.lua("return vim.g.pc_fcs") == 0
    # One undo step brings the old text back.
    nvim.lua("vim.api.nvim_buf_call(..., function() vim.cmd('undo') end)", b)
    assert buf_lines(nvim, b) == ["a = 1", "b = 2", "c = 3", "d = 4"]
    assert asked(nvim) == (0 if approve == "on" else 1)
    assert "Files changed in this turn:" in transcript(nvim)
    assert "  ✎ code.py (changed)" in transcript(nvim)


def test_typing_into_the_buffer_while_the_approval_waits_refuses_the_edit(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    f = workspace / "code.py"
    f.write_text("x = 1\n")
    setup(nvim, openai(fake))
    b = open_file(nvim, f)
    # The user types into the file while the question is open, then says yes.
    nvim.lua(
        "local b = ... vim.g.pc_asked = 0 vim.ui.select = function(items, opts, cb) vim.g.pc_asked = vim.g.pc_asked + 1 "
        "vim.api.nvim_buf_set_lines(b, 0, 1, false, { 'x = 99  # mine' }) vim.schedule(function() cb('Yes') end) end",
        b,
    )
    fake.push_tools("", [("c1", "edit_file", {"path": "code.py", "old": "x = 1", "new": "x = 2"})])
    fake.push_text("Understood.")
    type_message(nvim, "set x to 2")
    wait_turns(nvim, 1)
    assert asked(nvim) == 1
    assert f.read_text() == "x = 1\n"
    assert buf_lines(nvim, b) == ["x = 99  # mine"]
    (result,) = tool_results(fake)
    assert "the user changed code.py in the editor while this edit_file call waited" in result, result


@pytest.mark.parametrize("approve", ["off", "on"])
def test_a_command_that_changes_an_open_file_reloads_its_buffer(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, approve: str
) -> None:
    f = workspace / "data.txt"
    f.write_text("before\n")
    start(nvim, fake, approve)
    b = open_file(nvim, f)
    time.sleep(1.1)  # a file time Neovim can tell from the one it read
    fake.push_tools("", [("c1", "run_command", {"command": "printf 'after\\n' > data.txt"})])
    fake.push_text("Ran it.")
    type_message(nvim, "update data.txt")
    wait_turns(nvim, 1)
    wait(nvim, f"vim.api.nvim_buf_get_lines({b}, 0, -1, false)[1] == 'after'")


def test_the_turns_changed_files_are_listed_and_open_from_the_list(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    (workspace / "old.txt").write_text("1\n")
    start(nvim, fake, "on")
    fake.push_tools(
        "",
        [
            ("c1", "write_file", {"path": "sub/new.txt", "content": "fresh\n"}),
            ("c2", "edit_file", {"path": "old.txt", "old": "1", "new": "2"}),
        ],
    )
    fake.push_text("Both done.")
    type_message(nvim, "make the files")
    wait_turns(nvim, 1)
    lines = transcript(nvim)
    at = lines.index("Files changed in this turn:")
    assert lines[at + 1 : at + 3] == ["  ✎ sub/new.txt (created)", "  ✎ old.txt (changed)"], lines
    nvim.lua(
        "local row = ... vim.cmd('stopinsert') local w = vim.fn.bufwinid('pseudoclaude://chat') "
        "vim.api.nvim_set_current_win(w) "
        "vim.api.nvim_win_set_cursor(w, { row, 0 })",
        at + 3,
    )
    nvim.api.input("<CR>")
    wait(nvim, "vim.fn.expand('%:t') == 'old.txt'")
    assert nvim.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["2"]
