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


# -- §1: context from the editor ---------------------------------------------------------------------------------


def user_content(fake: FakeOpenAI) -> str:
    return [m for m in fake.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]


def folded_line(n: Neovim, text: str) -> int:
    """The 1-based transcript line holding `text`, checked to be a closed fold's first line."""
    lines = transcript(n)
    row = next(i for i, l in enumerate(lines) if text in l) + 1
    first = n.lua(
        "local row = ... local w = vim.fn.bufwinid('pseudoclaude://chat') "
        "return vim.api.nvim_win_call(w, function() return vim.fn.foldclosed(row) end)",
        row,
    )
    assert first == row, f"line {row} ({lines[row - 1]!r}) is not the start of a closed fold"
    return row


@pytest.mark.parametrize("approve", ["off", "on"])
def test_a_range_of_pseudochat_sends_those_lines_with_the_path_and_resumes_as_sent(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, approve: str
) -> None:
    (workspace / "src").mkdir()
    f = workspace / "src" / "calc.py"
    f.write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    n = start_nvim()
    start(n, fake, approve)
    open_file(n, f)
    n.api.command("2,4PseudoChat")
    assert "📎 src/calc.py:2-4" in n.lua("return require('pseudoclaude.chat').input_winbar()")
    fake.push_text("It adds.")
    type_message(n, "what does this do?")
    wait_turns(n, 1)
    sent = user_content(fake)
    assert sent == (
        'what does this do?\n\n<attachment kind="selection" path="src/calc.py" lines="2-4" filetype="python">\n'
        "    return a + b\n\n\n</attachment>"
    ), sent
    folded_line(n, "📎 selection src/calc.py:2-4 (3 lines)")
    assert "📎" not in n.lua("return require('pseudoclaude.chat').input_winbar()"), "sent once, then forgotten"
    # Logged as sent; a resume restores it and draws it the same way.
    sid = n.lua("return require('pseudoclaude').current().id")
    n.close()
    again = start_nvim()
    start(again, fake, approve)
    again.lua("vim.g.pc_resumed = vim.NIL")
    again.api.command(f"PseudoResume {sid}")
    wait(again, "vim.g.pc_resumed")
    assert again.lua("return require('pseudoclaude').messages()[1].content") == sent
    folded_line(again, "📎 selection src/calc.py:2-4 (3 lines)")


def test_the_selection_mapping_attaches_the_selected_lines(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    f = workspace / "a.txt"
    f.write_text("one\ntwo\nthree\nfour\n")
    setup(nvim, openai(fake))
    open_file(nvim, f)
    nvim.lua("vim.keymap.set('x', '<Space>a', '<Plug>(PseudoChatSelection)')")
    nvim.api.input("2GVj<Space>a")
    wait(nvim, "vim.fn.bufname() == 'pseudoclaude://input'")
    fake.push_text("ok")
    type_message(nvim, "these")
    wait_turns(nvim, 1)
    assert '<attachment kind="selection" path="a.txt" lines="2-3"' in user_content(fake)
    assert user_content(fake).endswith(">\ntwo\nthree\n</attachment>")


@pytest.mark.parametrize("approve", ["off", "on"])
def test_hash_buffer_sends_the_unsaved_text_and_hash_diagnostics_the_buffers_diagnostics(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, approve: str
) -> None:
    f = workspace / "m.lua"
    f.write_text("local x = 1\n")
    start(nvim, fake, approve)
    b = open_file(nvim, f)
    nvim.lua("vim.api.nvim_buf_set_lines(..., 0, -1, false, { 'local x = 2 -- not saved', 'print(y)' })", b)
    nvim.lua(
        "local b = ... local ns = vim.api.nvim_create_namespace('t') vim.diagnostic.set(ns, b, { "
        "{ lnum = 1, col = 6, severity = vim.diagnostic.severity.WARN, source = 'lint', message = 'undefined y' } })",
        b,
    )
    fake.push_text("I see both.")
    type_message(nvim, "check #buffer and #diagnostics please")
    wait_turns(nvim, 1)
    sent = user_content(fake)
    assert sent.startswith("check #buffer and #diagnostics please\n\n")
    assert (
        '<attachment kind="buffer" path="m.lua" filetype="lua" modified="true">\nlocal x = 2 -- not saved\nprint(y)\n'
        "</attachment>" in sent
    ), sent
    assert '<attachment kind="diagnostics" path="m.lua" filetype="lua">\n2:7 WARN [lint]: undefined y\n</attachment>' in sent
    assert f.read_text() == "local x = 1\n"
    folded_line(nvim, "📎 buffer m.lua (2 lines, unsaved)")
    folded_line(nvim, "📎 diagnostics m.lua (1 line)")


def test_at_path_attaches_a_workspace_file_and_completes_its_path(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text("# Guide\nread me\n")
    (workspace / "docs" / "other.md").write_text("x\n")
    setup(nvim, openai(fake))
    nvim.api.command("PseudoChat")
    # The completion function, as nvim-cmp or blink.cmp's omni source calls it.
    nvim.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'see @docs/gu' }) vim.api.nvim_win_set_cursor(0, { 1, 12 })")
    assert nvim.lua("return vim.bo.omnifunc") == "v:lua.require'pseudoclaude.context'.complete"
    assert nvim.lua("return require('pseudoclaude.context').complete(1, '')") == 5
    items = nvim.lua("return require('pseudoclaude.context').complete(0, 'docs/gu')")
    assert [i["word"] for i in items] == ["docs/guide.md"]
    assert [i["word"] for i in nvim.lua("return require('pseudoclaude.context').complete(0, '')")] == ["docs/"]
    # The built-in trigger: typing @ starts the omni completion of the path.
    nvim.api.command("stopinsert")
    nvim.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { '' })")
    nvim.api.input("i@")
    wait(nvim, "vim.fn.complete_info({ 'mode' }).mode == 'omni'")
    assert nvim.lua("return vim.fn.complete_info({ 'items' }).items[1].word") == "docs/"
    nvim.api.input("<C-e><Esc>")
    nvim.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {})")
    fake.push_text("Read it.")
    type_message(nvim, "summarise @docs/guide.md, thanks")
    wait_turns(nvim, 1)
    assert user_content(fake).endswith(
        '\n\n<attachment kind="file" path="docs/guide.md">\n# Guide\nread me\n</attachment>'
    ), user_content(fake)
    folded_line(nvim, "📎 file docs/guide.md (2 lines)")


def test_a_large_attachment_is_spilled_like_a_large_tool_result(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    f = workspace / "big.txt"
    f.write_text("".join(f"line {i}\n" for i in range(3000)))
    setup(nvim, openai(fake), spill_threshold=4096)
    open_file(nvim, f)
    nvim.api.command("%PseudoChat")
    fake.push_text("Big.")
    type_message(nvim, "look")
    wait_turns(nvim, 1)
    sent = user_content(fake)
    assert len(sent) < 4096, len(sent)
    at = sent.split('spill="')[1].split('"')[0]
    assert (workspace / at).read_text() == f.read_text()
    assert f'read the whole text with read_file at {at}' in sent


# -- §3: the diff review -----------------------------------------------------------------------------------------


TWO_HUNKS_OLD = "".join(f"line {i}\n" for i in range(1, 13))
TWO_HUNKS_NEW = TWO_HUNKS_OLD.replace("line 2\n", "line two\n").replace("line 11\n", "line eleven\n")


READY = "(require('pseudoclaude.review').current or {}).done ~= nil and vim.fn.bufname():find('proposed') ~= nil"
"""The review waits for its keys, in its proposed window."""


def review_state(n: Neovim) -> dict[str, Any]:
    """What the screen shows now: tabs, and whether the current tab is a side-by-side diff."""
    return n.lua(
        "local wins = vim.api.nvim_tabpage_list_wins(0) local diff = 0 local names = {} "
        "for _, w in ipairs(wins) do if vim.wo[w].diff then diff = diff + 1 end "
        "table.insert(names, vim.fn.bufname(vim.api.nvim_win_get_buf(w))) end "
        "return { tabs = #vim.api.nvim_list_tabpages(), diff_windows = diff, names = names }"
    )


def test_a_two_hunk_edit_with_one_hunk_rejected_writes_only_the_other_and_says_so(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    f = workspace / "list.txt"
    f.write_text(TWO_HUNKS_OLD)
    setup(nvim, openai(fake))
    b = open_file(nvim, f)
    # A replaced vim.ui.select (as telescope, fzf-lua or snacks install) that picks the hunk-by-hunk review, and notes
    # what was on screen while it asked.
    nvim.lua(
        "vim.g.pc_asked = 0 vim.ui.select = function(items, opts, cb) vim.g.pc_asked = vim.g.pc_asked + 1 "
        "vim.g.pc_items = items vim.g.pc_seen = { tabs = #vim.api.nvim_list_tabpages(), "
        "diff = vim.wo.diff, name = vim.fn.bufname() } vim.schedule(function() cb('Review hunk by hunk') end) end"
    )
    fake.push_tools("", [("c1", "write_file", {"path": "list.txt", "content": TWO_HUNKS_NEW})])
    fake.push_text("Noted.")
    type_message(nvim, "rename two lines")
    wait(nvim, "vim.g.pc_asked == 1 and require('pseudoclaude.review').current ~= nil")
    assert nvim.lua("return vim.g.pc_items")[-1] == "Review hunk by hunk"
    seen = nvim.lua("return vim.g.pc_seen")
    assert seen["tabs"] == 2 and seen["diff"] is True and "proposed" in seen["name"], seen
    state = review_state(nvim)
    assert state["diff_windows"] == 2, state
    # The real keys: ]c / [c move between the changes, `r` rejects the one under the cursor, `a` accepts.
    wait(nvim, "vim.fn.bufname():find('proposed') ~= nil")
    wait(nvim, READY)
    nvim.api.input("gg]c")
    wait(nvim, "vim.api.nvim_win_get_cursor(0)[1] == 2")
    nvim.api.input("]c")
    wait(nvim, "vim.api.nvim_win_get_cursor(0)[1] == 11")
    nvim.api.input("r")
    # rejected, and the cursor is on the change still undecided
    wait(nvim, "vim.api.nvim_win_get_cursor(0)[1] == 2")
    nvim.api.input("a")
    wait_turns(nvim, 1)
    assert f.read_text() == TWO_HUNKS_OLD.replace("line 2\n", "line two\n")
    assert review_state(nvim)["tabs"] == 1, "the review's tab is closed"
    assert buf_lines(nvim, b)[1] == "line two" and buf_lines(nvim, b)[10] == "line 11"
    (result,) = tool_results(fake)
    assert "the user accepted 1 of the 2 changes and rejected change: 2." in result, result
    assert "-line 11\n+line eleven\n" in result, result


@pytest.mark.parametrize("choice", ["Yes", "No"])
def test_the_stock_question_answers_the_whole_change_and_closes_the_review(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, choice: str
) -> None:
    f = workspace / "list.txt"
    f.write_text(TWO_HUNKS_OLD)
    setup(nvim, openai(fake))
    answer_approvals(nvim, choice)
    fake.push_tools("", [("c1", "write_file", {"path": "list.txt", "content": TWO_HUNKS_NEW})])
    fake.push_text("Noted.")
    type_message(nvim, "rename two lines")
    wait_turns(nvim, 1)
    assert f.read_text() == (TWO_HUNKS_NEW if choice == "Yes" else TWO_HUNKS_OLD)
    assert review_state(nvim)["tabs"] == 1


def test_accept_all_and_reject_all_keys(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    f = workspace / "list.txt"
    f.write_text(TWO_HUNKS_OLD)
    setup(nvim, openai(fake))
    answer_approvals(nvim, "Review hunk by hunk", "Review hunk by hunk")
    fake.push_tools("", [("c1", "write_file", {"path": "list.txt", "content": TWO_HUNKS_NEW})])
    fake.push_text("Noted.")
    type_message(nvim, "rename two lines")
    wait(nvim, READY)
    nvim.api.input("R")
    wait_turns(nvim, 1)
    assert f.read_text() == TWO_HUNKS_OLD
    assert "declined" in tool_results(fake)[0]
    fake.push_tools("", [("c2", "write_file", {"path": "list.txt", "content": TWO_HUNKS_NEW})])
    fake.push_text("Noted.")
    type_message(nvim, "again")
    wait(nvim, READY)
    nvim.api.input("A")
    wait_turns(nvim, 2)
    assert f.read_text() == TWO_HUNKS_NEW


@pytest.mark.parametrize("approve", ["off", "on"])
def test_the_demo_providers_edit_goes_through_the_diff_review(nvim: Neovim, workspace: Path, approve: str) -> None:
    setup(nvim, None, approve=APPROVE[approve])
    nvim.lua(
        "vim.g.pc_asked = 0 vim.ui.select = function(items, opts, cb) vim.g.pc_asked = vim.g.pc_asked + 1 "
        "vim.g.pc_seen = { tabs = #vim.api.nvim_list_tabpages(), diff = vim.wo.diff, items = items } "
        "vim.schedule(function() cb(vim.g.pc_asked == 1 and 'Yes' or 'Review hunk by hunk') end) end"
    )
    demo = workspace / "pseudoclaude-demo.txt"
    type_message(nvim, "please edit something")
    wait_turns(nvim, 1)
    assert "Edit number 1." in demo.read_text()
    assert "  ✎ pseudoclaude-demo.txt (created)" in transcript(nvim)
    type_message(nvim, "write it again")
    if approve == "off":
        wait(nvim, "vim.g.pc_asked == 2 and require('pseudoclaude.review').current ~= nil")
        seen = nvim.lua("return vim.g.pc_seen")
        assert seen["tabs"] == 2 and seen["diff"] is True and "Review hunk by hunk" in seen["items"], seen
        wait(nvim, READY)
        nvim.api.input("gg]cr")  # keep the first change as it was, accept the other
        nvim.api.input("a")
        wait_turns(nvim, 2)
        text = demo.read_text()
        assert "Edit number 1." in text and "Last edited by edit number 2." in text, text
    else:
        wait_turns(nvim, 2)
        assert nvim.lua("return vim.g.pc_asked") == 0
        assert "Edit number 2." in demo.read_text()


def test_the_diff_is_on_screen_while_the_stock_question_waits(workspace: Path, terminal: Any) -> None:
    """The stock vim.ui.select is Neovim's inputlist, which blocks before a redraw: seen in a real terminal, the
    review's diff must be what is on screen above the question, not the chat the user typed in."""
    from conftest import NVIM, ROOT

    t = terminal(workspace, f"{NVIM} --clean -u {ROOT}/scripts/dev-init.lua", height=45)
    t.wait_screen(lambda s: "~" in s, "Neovim to start")
    t.keys(":PseudoChat", "Enter")
    t.wait_screen(lambda s: "pseudoclaude://input" in s, "the chat")
    t.keys("iplease edit something", "C-s")
    s = t.wait_screen(lambda s: "Allow write_file pseudoclaude-demo.txt?" in s, "the question")
    assert " proposed: pseudoclaude-demo.txt" in s and "Edit number 1." in s, s
    assert "## You" not in s, "the chat is drawn where the diff should be"
    t.keys("1", "Enter")
    s = t.wait_screen(lambda s: "Files changed in this turn:" in s, "the turn to end")
    assert "proposed:" not in s
    assert "Edit number 1." in (workspace / "pseudoclaude-demo.txt").read_text()
