""":PseudoResume: the floating session picker, driven by typed keys, over sessions written to disk as JSONL."""

from __future__ import annotations

import time
from typing import Any

import pytest

from conftest import (
    distinct_highlights,
    question_answered,
    question_asked,
    screen_highlights,
    wait_for,
    watch_questions,
)
from session_files import chat, entry, hold_lock, session_dir, session_id, snapshot, write_session

# The real chat module comes later: a stub records what the picker asks it to resume.
STUB_CHAT = """
package.loaded["pseudoclaude.chat"] = {
  resume = function(id) vim.g.resumed = id end,
  current = function() return nil end,
}
_G.notes = {}
vim.notify = function(msg, level) table.insert(_G.notes, { msg = msg, level = level }) end
"""

STATE = """
local picker = require("pseudoclaude.float")
local s = picker.get_state()
if not s then return vim.NIL end
local out = { full = s.full, query = s.query, count = #s.matches, items = s.count, top_items = #s.top_items }
out.selected = (picker.selected() or {}).id
out.preview_id = s.preview_id
for name, win in pairs(s.wins) do
  local buf = vim.api.nvim_win_get_buf(win)
  out[name] = { win = win, buf = buf, lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false) }
end
return out
"""


def state(nvim) -> dict[str, Any] | None:
    return nvim.lua(STATE)


def open_picker(nvim, full: bool = True) -> dict[str, Any]:
    """Opens the picker; with `full`, waits for the full list (read in the background) to be in place and the
    highlighted session's preview (read in the background too) to be drawn."""
    nvim.api.input(":PseudoResume<CR>")
    return wait_for(
        lambda: (s := state(nvim)) and s["top_items"] > 0
        and (not full or (s["full"] and s.get("preview_id") is not None and s["preview_id"] == s.get("selected")))
        and s,
        what="the picker to open with its first rows",
    )


def preview_ready(nvim) -> dict[str, Any]:
    """Waits until the preview shows the highlighted session (it is read in the background)."""
    return wait_for(lambda: (s := state(nvim)) and s["preview_id"] == s["selected"] and s, what="the preview")


def type_keys(nvim, keys: str, query: str) -> dict[str, Any]:
    nvim.api.input(keys)
    return wait_for(lambda: (s := state(nvim)) and s["query"] == query and s, what=f"query {query!r}")


def floats(nvim) -> list[int]:
    return [w.handle for w in nvim.api.windows if nvim.api.api.win_get_config(w)["relative"] != ""]


def notes(nvim) -> list[dict[str, Any]]:
    return nvim.lua("return _G.notes")


def titles(lines: list[str]) -> list[str]:
    """The title column of result rows (the marker is 2 cells, the age column follows 2 spaces)."""
    return [line[2:].split("  ")[0].rstrip() for line in lines]


def match_marks(nvim, win: int) -> list[tuple[int, int, int]]:
    """The characters the screen shows highlighted as matched in the results window `win`, one (line, start, end)
    each (`distinct_highlights` first)."""
    buf = nvim.lua("return vim.api.nvim_win_get_buf(...)", win)
    lines = [l.encode() for l in nvim.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf)]
    out = []
    for line, col, end, group in screen_highlights(nvim, win):
        if group != "PseudoClaudePickerMatch":
            continue
        while col < end:
            lead = lines[line][col]
            size = 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1
            out.append((line, col, col + size))
            col += size
    return sorted(out)


@pytest.fixture
def ws12(workspace):
    """Twelve sessions an hour apart, "task 11" the newest; ids newest first."""
    now = time.time()
    ids = []
    for i in range(12):
        sid = session_id(i)
        model = "gpt-5" if i % 3 == 0 else "claude-x"
        title = "zebra parser overhaul" if i == 0 else f"task {i}"
        write_session(workspace, sid, title=title, model=model, mtime=now - 3600 * (12 - i) - 60)
        ids.append(sid)
    return list(reversed(ids))


@pytest.fixture
def nv(nvim, ws12):
    nvim.api.command("set columns=160 lines=48")
    nvim.lua(STUB_CHAT)
    # The tests here count nine first rows; by default the rows fill the window (see the test of that).
    nvim.lua("require('pseudoclaude').setup({ picker = { max_items = 9 } })")
    return nvim


def test_opens_three_floats_listing_the_nine_newest(nv, ws12):
    s = open_picker(nv)
    assert sorted(floats(nv)) == sorted([s["prompt"]["win"], s["results"]["win"], s["preview"]["win"]])
    assert nv.api.current.window.handle == s["prompt"]["win"]
    wait_for(lambda: nv.api.api.get_mode()["mode"] == "i", what="insert mode")
    lines = s["results"]["lines"]
    assert titles(lines) == [f"task {i}" for i in range(11, 2, -1)]
    assert "1h ago" in lines[0] and "2 msgs" in lines[0] and lines[0].rstrip().endswith("claude-x")
    assert "9h ago" in lines[8] and lines[8].rstrip().endswith("gpt-5")
    assert s["selected"] == ws12[0]
    assert s["top_items"] == 9  # the first rows came from list({ limit = 9 })
    # the full list is read right after the first draw, for filtering
    s = wait_for(lambda: (x := state(nv)) and x["full"] and x, what="the full list")
    assert s["items"] == 12 and s["results"]["lines"] == lines


def test_without_max_items_the_rows_fill_the_results_window(nv, ws12):
    nv.lua("require('pseudoclaude').setup({})")  # max_items left unset, as by default
    # 22 lines: the results window holds 11 rows, one fewer than the sessions
    nv.api.command("set lines=22")
    s = open_picker(nv)
    height = nv.api.api.win_get_height(s["results"]["win"])
    assert height == 11
    assert titles(s["results"]["lines"]) == [f"task {i}" for i in range(11, 0, -1)]
    assert s["top_items"] == 11  # the first rows came from list({ limit = 11 })
    nv.api.input("<Esc>")
    wait_for(lambda: state(nv) is None, what="the picker to close")
    # taller: every session, the window still filled from the top
    nv.api.command("set lines=40")
    s = open_picker(nv)
    assert len(titles(s["results"]["lines"])) == 12


def test_max_items_comes_from_the_config(nv, ws12):
    nv.lua("require('pseudoclaude').setup({ picker = { max_items = 3 } })")
    s = open_picker(nv)
    assert titles(s["results"]["lines"]) == ["task 11", "task 10", "task 9"]


def test_typing_filters_across_all_sessions_and_highlights_matches(nv, ws12):
    distinct_highlights(nv)
    open_picker(nv)
    s = type_keys(nv, "zebra", "zebra")
    assert titles(s["results"]["lines"]) == ["zebra parser overhaul"]  # the oldest session, not among the first 9
    assert s["selected"] == ws12[-1]
    assert match_marks(nv, s["results"]["win"]) == [(0, c, c + 1) for c in range(2, 7)]
    # fuzzy: z, b, then the p of "parser"
    s = type_keys(nv, "<C-w>zbp", "zbp")
    assert titles(s["results"]["lines"]) == ["zebra parser overhaul"]
    assert match_marks(nv, s["results"]["win"]) == [(0, 2, 3), (0, 4, 5), (0, 8, 9)]
    # the model is searched too, and highlighted where shown
    s = type_keys(nv, "<C-w>gpt", "gpt")
    rows = s["results"]["lines"]
    assert titles(rows) == ["task 9", "task 6", "task 3", "zebra parser overhaul"]  # ties: newest first
    col = rows[0].index("gpt-5")
    assert match_marks(nv, s["results"]["win"])[:3] == [(0, col, col + 1), (0, col + 1, col + 2), (0, col + 2, col + 3)]
    # nothing matches
    s = type_keys(nv, "<C-w>qqqq", "qqqq")
    assert s["results"]["lines"] == ["  no match"] and s.get("selected") is None
    # an empty query shows the newest again
    s = type_keys(nv, "<C-w>", "")
    assert titles(s["results"]["lines"]) == [f"task {i}" for i in range(11, 2, -1)]


RESULTS = """
local s = require("pseudoclaude.float").get_state()
local buf = s.bufs.results
return { lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), win = s.wins.results,
         marks = #vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, {}) }
"""


def drawn(nv) -> dict[str, Any]:
    """The results window: its lines, the highlights the screen shows in it, how many extmarks its buffer holds."""
    got = nv.lua(RESULTS)
    got["screen"] = screen_highlights(nv, got["win"])
    return got


def test_rows_drawn_line_by_line_are_the_rows_drawn_whole(nv, ws12):
    """A keystroke replaces only the result lines that changed (float/rows.lua keeps the others) and reuses each
    item's row (render.lua's cache); the rows' highlights and matched characters are drawn on the screen as Neovim
    redraws a line, from what the line was given: after typing, narrowing, widening, moving the highlight and a query
    that matches fewer rows than before, the window's lines and every highlight on the screen (those of lines
    Neovim did not redraw included) are those of a redraw from scratch, and the buffer keeps no mark but the
    selection's."""
    distinct_highlights(nv)
    open_picker(nv)
    steps = [("t", "t"), ("a", "ta"), ("<C-n>", "ta"), ("<C-n>", "ta"), ("s", "tas"), ("k", "task"), (" 1", "task 1"),
             ("<BS><BS><BS>", "tas"), ("<C-n>", "tas"), ("<C-p>", "tas"), ("zz", "taszz"), ("<BS><BS><BS><BS><BS>", "")]
    for keys, query in steps:
        if keys in ("<C-n>", "<C-p>"):
            before = state(nv)["selected"]
            nv.api.input(keys)
            wait_for(lambda: state(nv)["selected"] != before, what=f"the highlight moved by {keys}")
        else:
            type_keys(nv, keys, query)
        got = drawn(nv)
        nv.lua("local s = require('pseudoclaude.float').get_state() s.drawn, s.row_cache = nil, nil s:draw_rows()")
        assert got == drawn(nv), f"after {keys!r}"
        matched = got["lines"] != ["  no match"]
        groups = [h[3] for h in got["screen"]]
        assert groups.count("PseudoClaudePickerAge") == (len(got["lines"]) if matched else 0), got
        assert groups.count("PseudoClaudePickerSelection") == (1 if matched else 0), got
        assert ("PseudoClaudePickerMatch" in groups) == (matched and query != ""), got
        assert got["marks"] == (1 if matched else 0), got  # the selection's: the rows' highlights are only drawn


def test_rows_are_made_ahead_in_idle_time_so_a_keystroke_makes_none(nv, ws12):
    """Once the full list is in place, the rows of its first sessions are made in idle time (float/rows.lua
    `H.ahead`), in the layout of the rows on the screen: typing a query that brings sessions not shown before into
    view ("task 1") makes no row, and the rows drawn are those of a redraw from scratch. Without it (`M.AHEAD = 0`)
    the same keys make rows."""
    nv.api.command("set lines=16")  # fewer rows shown than sessions
    distinct_highlights(nv)
    made = "return require('pseudoclaude.float').get_state().stats.rows_made"
    for ahead in (2000, 0):
        nv.lua(f"require('pseudoclaude.float.rows').AHEAD = {ahead}")
        s = open_picker(nv)
        assert len(s["results"]["lines"]) < 12
        wait_for(lambda: nv.lua("return require('pseudoclaude.float').get_state().stats.ahead_done") == min(12, ahead),
                 what="the rows made ahead")
        before = nv.lua(made)
        got = type_keys(nv, "task 1", "task 1")
        assert titles(got["results"]["lines"]) == ["task 11", "task 10", "task 1"]
        if ahead:
            assert nv.lua(made) == before
            shown = drawn(nv)
            nv.lua("local s = require('pseudoclaude.float').get_state() s.drawn, s.row_cache = nil, nil s:draw_rows()")
            assert shown == drawn(nv)
        else:
            assert nv.lua(made) > before
        nv.api.input("<Esc>")
        wait_for(lambda: state(nv) is None, what="the picker to close")


def test_a_closed_picker_is_garbage(nv, ws12):
    """The Lua callbacks of the picker's background reads (first rows, full list, previews) are released from Lua's
    registry once called (bridge/jobs.rs `Waiting::release`), and LuaJIT's compiled code is dropped at the close
    (float.lua `H.drop_traces`): a closed picker, with its list, its rows and its matcher, is collected, not kept for
    the rest of the session."""
    open_picker(nv)
    type_keys(nv, "task", "task")
    nv.lua("_G.picker_weak = setmetatable({ s = require('pseudoclaude.float').get_state() }, { __mode = 'v' })")
    nv.api.input("<Esc>")
    wait_for(lambda: state(nv) is None, what="the picker to close")
    collected = "collectgarbage('collect') return _G.picker_weak.s == nil"
    wait_for(lambda: nv.lua(collected), what="the closed picker collected")


def test_a_closed_picker_is_garbage_whatever_luajit_compiled(nv, ws12):
    """A LuaJIT trace keeps as constants the closures it was recorded through (the picker's steps and callbacks,
    `vim.defer_fn`'s wrappers around them) and so the picker's state, referenced from nowhere in Lua, until the trace
    cache is flushed: under load (more steps run hot) the test above saw a closed picker never collected. With every
    loop and call hot at once (`hotloop=1`) nearly every round kept its picker so; float.lua flushes the traces at the
    close, and at the next open for a callback of a closed picker that runs (and may be compiled) after the close:
    pickers closed at once, while their reads are under way, must be collected by then (such a trace is not certain
    here: 3 rounds of 40 in a probe without that flush)."""
    nv.lua("jit.opt.start('hotloop=1', 'hotexit=1') _G.pickers = setmetatable({}, { __mode = 'v' })")
    keep = "_G.pickers[#_G.pickers + 1] = require('pseudoclaude.float').get_state() return #_G.pickers"
    keep_open = "local s = require('pseudoclaude.float').get_state() if s then " + keep + " end return false"
    alive = "collectgarbage('collect') local n = 0 for _ in pairs(_G.pickers) do n = n + 1 end return n"
    for _ in range(3):
        open_picker(nv)
        first = type_keys(nv, "task", "task")["selected"]
        nv.api.input("<Down>")  # a preview read too
        wait_for(lambda: (x := state(nv)) and first != x["selected"] == x.get("preview_id"), what="the next preview")
        nv.lua(keep)
        nv.api.input("<Esc>")
        wait_for(lambda: state(nv) is None, what="the picker to close")
        wait_for(lambda: nv.lua(alive) == 0, what="the closed pickers collected")
    # closed at once: what was under way (the first rows, the full list, the preview) arrives after the close
    for _ in range(5):
        nv.api.input(":PseudoResume<CR>")
        wait_for(lambda: nv.lua(keep_open), what="the picker to open")
        nv.api.input("<Esc>")
        wait_for(lambda: state(nv) is None, what="the picker to close")
    open_picker(nv)
    nv.api.input("<Esc>")
    wait_for(lambda: state(nv) is None, what="the picker to close")
    wait_for(lambda: nv.lua(alive) == 0, what="the closed pickers collected")


def test_the_collector_runs_again_after_each_keystroke_even_one_that_fails(nv, ws12):
    """A keystroke is handled with Lua's collector paused (float.lua `between_collections`): it must run again after
    it, a failing one included."""
    open_picker(nv)
    type_keys(nv, "task", "task")
    assert nv.lua("return collectgarbage('isrunning')") is True
    nv.lua("local s = require('pseudoclaude.float').get_state() s.matcher.filter = function() error('boom') end")
    nv.api.input(" ")
    wait_for(lambda: "boom" in nv.command_output("messages"), what="the handler's error")
    assert nv.lua("return collectgarbage('isrunning')") is True


def test_the_prompt_runs_no_textchanged_handler_and_its_rows_follow_every_change(nv, ws12):
    """The prompt filters from its own watch of its text (float.lua `H.watch_prompt`): TextChanged(I) are ignored in
    its window, so no plugin's handler (a user's here; matchparen's in a real set-up) runs at each key there, and the
    rows still follow every change: typed keys, <BS>, <C-w>, a paste, an undo in Normal mode."""
    nv.lua(
        """
        _G.text_changed = 0
        vim.api.nvim_create_autocmd({ "TextChangedI", "TextChanged" }, {
          callback = function() _G.text_changed = _G.text_changed + 1 end,
        })
        """
    )
    open_picker(nv)
    s = type_keys(nv, "task 1", "task 1")
    assert titles(s["results"]["lines"]) == ["task 11", "task 10", "task 1"]
    s = type_keys(nv, "<BS>", "task ")
    assert len(s["results"]["lines"]) == 11 and titles(s["results"]["lines"])[0] == "task 11"
    s = type_keys(nv, "<C-w>", "")
    assert titles(s["results"]["lines"])[0] == "task 11"
    nv.lua("vim.api.nvim_paste('zebra', true, -1)")  # what a terminal UI sends for a paste
    s = wait_for(lambda: (x := state(nv)) and x["query"] == "zebra" and x, what="the pasted query")
    assert titles(s["results"]["lines"]) == ["zebra parser overhaul"]
    nv.api.input("<C-\\><C-n>u")
    s = wait_for(lambda: (x := state(nv)) and x["query"] != "zebra" and x, what="the undone paste")
    # the paste is an undo step of its own: "task " again (<C-w> took it)
    assert s["query"] == "task " and len(s["results"]["lines"]) == 11, s["query"]
    assert nv.lua("return _G.text_changed") == 0
    # elsewhere they run, as they should
    nv.api.input("q")
    wait_for(lambda: state(nv) is None, what="the picker to close")
    nv.api.input("ix<Esc>")
    wait_for(lambda: nv.lua("return _G.text_changed") > 0, what="TextChangedI outside the picker")


def test_typing_before_the_full_list_arrives_filters_the_first_rows_then_all(nv, ws12):
    # hold the full list (the one without a limit) back until the test releases it
    nv.lua(
        """
        local sessions = require("pseudoclaude.sessions")
        local real = sessions.list_packed
        sessions.list_packed = function(opts, on_done)
          if opts.limit then
            return real(opts, on_done)
          end
          _G.release_list = function() real(opts, on_done) end
        end
        """
    )
    s = open_picker(nv, full=False)
    assert s["full"] is False and s["top_items"] == 9
    s = type_keys(nv, "task", "task")
    assert titles(s["results"]["lines"]) == [f"task {i}" for i in range(11, 2, -1)]  # the first rows only
    s = type_keys(nv, " 1", "task 1")
    assert titles(s["results"]["lines"]) == ["task 11", "task 10"]
    nv.lua("local release = _G.release_list _G.release_list = nil release()")
    s = wait_for(lambda: (x := state(nv)) and x["full"] and x, what="the full list")
    assert titles(s["results"]["lines"]) == ["task 11", "task 10", "task 1"]
    assert s["items"] == 12


def test_the_full_list_is_lent_by_the_core_and_released_when_collected(nv, ws12):
    # the packed full list is read in the core's memory (sessions_list_keep), not copied into Lua; the core forgets it
    # once the picker that read it is closed and Lua collected it (at the next list read)
    kept = 'return require("pseudoclaude.core").call("sessions_list_kept")'
    s = open_picker(nv)
    assert s["full"] and s["items"] == 12
    assert nv.lua(kept) == 1
    s = type_keys(nv, "task 1", "task 1")
    assert titles(s["results"]["lines"])[:2] == ["task 11", "task 10"]
    nv.api.input("<Esc>")
    wait_for(lambda: state(nv) is None, what="the picker to close")
    nv.lua('collectgarbage("collect") collectgarbage("collect")')
    assert nv.lua(kept) == 1  # collected, not released yet: a finalizer never calls the core
    s = open_picker(nv)
    assert s["full"] and s["items"] == 12
    assert nv.lua(kept) == 1  # the first picker's list released, this one's kept


def test_ranking_prefers_the_better_match_then_the_newer(nv, workspace):
    now = time.time()
    write_session(workspace, session_id(100), title="please audit running services report", mtime=now - 10)
    write_session(workspace, session_id(101), title="fix the parser", mtime=now - 20000)
    open_picker(nv)
    s = type_keys(nv, "parser", "parser")
    got = titles(s["results"]["lines"])
    # the two with "parser" as such first, then the newest, a scattered match
    assert sorted(got[:2]) == ["fix the parser", "zebra parser overhaul"]
    assert got[2] == "please audit running services report"


def test_moving_changes_the_selection_and_the_preview(nv, ws12):
    s = open_picker(nv)
    assert s["preview"]["lines"][0] == "task 11"

    def moved(keys: str, index: int) -> dict[str, Any]:
        nv.api.input(keys)
        return wait_for(
            lambda: (x := state(nv)) and x["selected"] == ws12[index] and x["preview"]["lines"][0] == f"task {11 - index}" and x,
            what=f"selection {index}",
        )

    s = moved("<C-n>", 1)
    assert nv.api.api.win_get_cursor(s["results"]["win"]) == [2, 0]
    s = moved("<Down>", 2)
    assert nv.api.api.win_get_cursor(s["results"]["win"]) == [3, 0]
    assert s["preview"]["lines"][1] == ws12[2] + " · gpt-5 · 2 messages · 3h ago"
    moved("<Up>", 1)
    moved("<C-p>", 0)
    moved("<C-p>", 0)  # stays on the first
    for _ in range(12):
        nv.api.input("<C-n>")
    moved("", 8)  # the last of the nine


@pytest.mark.parametrize("key", ["<Esc>", "<C-c>"])
def test_closing_keys_close_everything_and_change_nothing(nv, workspace, key):
    nv.lua("require('pseudoclaude').sessions.list()")  # summary caches written once, before the snapshot
    before = snapshot(workspace)
    bufs = [b.handle for b in nv.api.buffers]
    wins = [w.handle for w in nv.api.windows]
    all_bufs = nv.lua("return vim.api.nvim_list_bufs()")
    open_picker(nv)
    type_keys(nv, "task", "task")
    nv.api.input("<C-n>")
    nv.api.input(key)
    wait_for(lambda: state(nv) is None, what="the picker to close")
    assert [w.handle for w in nv.api.windows] == wins
    assert [b.handle for b in nv.api.buffers] == bufs
    assert nv.lua("return vim.api.nvim_list_bufs()") == all_bufs  # no hidden scratch buffer either
    assert nv.api.api.get_mode()["mode"] == "n"
    assert nv.lua("return vim.g.resumed") is None
    assert notes(nv) == []
    assert snapshot(workspace) == before


def test_enter_resumes_the_selected_session(nv, ws12):
    open_picker(nv)
    nv.api.input("<C-n>")
    wait_for(lambda: state(nv)["selected"] == ws12[1], what="selection")
    nv.api.input("<CR>")
    wait_for(lambda: nv.lua("return vim.g.resumed") == ws12[1], what="resume")
    assert state(nv) is None and floats(nv) == []
    assert notes(nv) == []


@pytest.mark.parametrize("answer, deleted", [("y", True), ("n", False), ("<Esc>", False)])
def test_ctrl_x_deletes_after_confirmation(nv, workspace, ws12, answer, deleted):
    open_picker(nv)
    nv.api.input("<C-n>")
    wait_for(lambda: state(nv)["selected"] == ws12[1], what="selection")
    watch_questions(nv)
    nv.api.input("<C-x>")
    question_asked(nv)
    assert session_dir(workspace, ws12[1]).exists()  # nothing before the answer
    nv.api.input(answer)
    if deleted:
        wait_for(lambda: not session_dir(workspace, ws12[1]).exists(), what="deletion")
        s = wait_for(lambda: (x := state(nv)) and "task 10" not in titles(x["results"]["lines"]) and x, what="redraw")
        assert titles(s["results"]["lines"]) == ["task 11"] + [f"task {i}" for i in range(9, 1, -1)]
        assert s["selected"] == ws12[2]
    else:
        # the answer is read and acted on in one step (a delete is synchronous): once it is over, it did not happen
        question_answered(nv)
        s = state(nv)
        assert s is not None and session_dir(workspace, ws12[1]).exists()
        assert "task 10" in titles(s["results"]["lines"]) and s["query"] == ""
    assert nv.lua("return vim.g.resumed") is None


def test_a_session_held_by_another_editor_is_marked_and_not_resumed(nv, workspace, ws12):
    with hold_lock(session_dir(workspace, ws12[1]), pid=4242, host="elsewhere"):
        s = open_picker(nv)
        rows = s["results"]["lines"]
        assert rows[1].startswith("! task 10") and rows[0].startswith("  task 11")
        nv.api.input("<C-n>")
        s = wait_for(lambda: (x := state(nv)) and x["preview"]["lines"][0] == "task 10" and x, what="preview")
        assert any("open in another editor (pid 4242 on elsewhere" in line for line in s["preview"]["lines"])
        nv.api.input("<CR>")
        wait_for(lambda: notes(nv), what="an error")
        note = notes(nv)[0]
        assert "is open in another editor (pid 4242 on elsewhere" in note["msg"] and note["level"] == 4
        assert nv.lua("return vim.g.resumed") is None
        assert state(nv) is not None  # still open: pick another one
        nv.api.input("<C-p><CR>")
        wait_for(lambda: nv.lua("return vim.g.resumed") == ws12[0], what="resume")


def test_a_list_refused_at_once_leaves_no_window_and_says_why(nv, ws12):
    """The first rows are asked for before the windows are made (read while they are): a request refused on the
    spot closes the picker before any window or buffer of it exists, and says why."""
    bufs = len(nv.api.buffers)
    nv.lua("require('pseudoclaude.sessions').list_async = function() error('the list is refused', 0) end")
    nv.api.command("PseudoResume")
    wait_for(lambda: notes(nv), what="the error")
    assert notes(nv)[0]["msg"] == "the list is refused"
    assert state(nv) is None and floats(nv) == [] and len(nv.api.buffers) == bufs
    assert nv.lua("return vim.api.nvim_get_mode().mode") == "n"


def test_a_session_taken_after_the_list_is_refused_too(nv, workspace, ws12):
    open_picker(nv)
    with hold_lock(session_dir(workspace, ws12[0])):
        nv.api.input("<CR>")
        wait_for(lambda: notes(nv), what="an error")
        assert "open in another editor" in notes(nv)[0]["msg"]
        s = wait_for(lambda: (x := state(nv)) and x["results"]["lines"][0].startswith("! ") and x, what="marker")
        assert nv.lua("return vim.g.resumed") is None and s["selected"] == ws12[0]


def test_deleting_a_held_session_is_refused(nv, workspace, ws12):
    with hold_lock(session_dir(workspace, ws12[0]), pid=4242, host="elsewhere"):
        open_picker(nv)
        watch_questions(nv)
        nv.api.input("<C-x>")
        question_asked(nv)
        nv.api.input("y")
        wait_for(lambda: notes(nv), what="an error")
        assert "is open in another editor (pid 4242 on elsewhere" in notes(nv)[0]["msg"]
        assert (session_dir(workspace, ws12[0]) / "conversation.jsonl").exists()
        assert titles(state(nv)["results"]["lines"])[0] == "task 11"


def test_the_layout_follows_a_resize(nv):
    s = open_picker(nv)
    before = nv.api.api.win_get_config(s["preview"]["win"])
    nv.api.command("set columns=90 lines=40")
    wait_for(
        lambda: nv.api.api.win_get_config(s["preview"]["win"])["row"] > before["row"], what="the preview moved below"
    )
    assert nv.api.api.win_get_width(s["results"]["win"]) <= 90
    s = state(nv)
    width = nv.api.api.win_get_width(s["results"]["win"])
    assert len(s["results"]["lines"]) == 9
    assert all(nv.api.call("strdisplaywidth", line) <= width for line in s["results"]["lines"])
    assert s["preview"]["lines"][0] == "task 11"


def test_select_backend_goes_through_vim_ui_select(nv, workspace, ws12):
    with hold_lock(session_dir(workspace, ws12[2])):
        nv.lua(
            """
            require("pseudoclaude").setup({ picker = { backend = "select" } })
            vim.ui.select = function(items, opts, on_choice)
              vim.g.select_prompt = opts.prompt
              vim.g.select_ids = vim.tbl_map(function(i) return i.id end, items)
              vim.g.select_labels = vim.tbl_map(opts.format_item, items)
              on_choice(items[2])
            end
            """
        )
        nv.api.command("PseudoResume")
        # every session, newest first (not only the first rows), read in the background
        wait_for(lambda: nv.lua("return vim.g.select_ids"), what="vim.ui.select")
        assert floats(nv) == []
        assert nv.lua("return vim.g.select_prompt") == "Resume session"
        assert nv.lua("return vim.g.select_ids") == ws12
        labels = nv.lua("return vim.g.select_labels")
        assert labels[0] == "task 11 · 1h ago · 2 msgs · claude-x"
        assert labels[2] == "task 9 · 3h ago · 2 msgs · gpt-5 · open in another editor"
        assert nv.lua("return vim.g.resumed") == ws12[1]
        # a held one is refused with an error
        nv.lua("vim.ui.select = function(items, opts, on_choice) on_choice(items[3]) end")
        nv.api.command("PseudoResume")
        wait_for(lambda: notes(nv) and "open in another editor" in notes(nv)[-1]["msg"], what="the refusal")
        assert nv.lua("return vim.g.resumed") == ws12[1]
        # cancelled: nothing happens
        nv.lua("vim.ui.select = function(items, opts, on_choice) on_choice(nil) end")
        nv.api.command("PseudoResume")
        assert nv.lua("return vim.g.resumed") == ws12[1] and len(notes(nv)) == 1


def test_resume_last_and_by_id(nv, ws12):
    nv.api.command("PseudoResume last")
    assert nv.lua("return vim.g.resumed") == ws12[0]
    nv.api.command(f"PseudoResume {ws12[5]}")
    assert nv.lua("return vim.g.resumed") == ws12[5]
    nv.api.command("PseudoResume ../../etc")
    assert 'invalid session id "../../etc"' in notes(nv)[-1]["msg"]
    nv.api.command("PseudoResume 20200101-000000-abcd")
    assert "no session 20200101-000000-abcd" in notes(nv)[-1]["msg"]
    assert nv.lua("return vim.g.resumed") == ws12[5]
    assert floats(nv) == []


def test_command_completion_lists_last_all_and_the_ids_newest_first(nv, ws12):
    assert nv.api.call("getcompletion", "PseudoResume ", "cmdline") == ["last", "all"] + ws12
    prefix = ws12[0][:15]
    assert nv.api.call("getcompletion", f"PseudoResume {prefix}", "cmdline") == [i for i in ws12 if i.startswith(prefix)]
    assert nv.api.call("getcompletion", "PseudoResume al", "cmdline") == ["all"]
    assert nv.api.call("getcompletion", "PseudoResume la", "cmdline") == ["last"]


def test_tab_completes_an_id_on_the_command_line(nv, ws12):
    nv.api.command("set wildmode=full")
    nv.lua("vim.keymap.set('c', '<F2>', function() vim.g.typed = vim.fn.getcmdline() return '' end, { expr = true })")
    nv.api.input(f":PseudoResume {ws12[3][:-2]}<Tab><F2><Esc>")
    wait_for(lambda: nv.lua("return vim.g.typed"), what="the command line")
    assert nv.lua("return vim.g.typed") == f"PseudoResume {ws12[3]}"


def test_preview_folds_tool_calls_and_shows_damage(nv, workspace):
    ts = int(time.time()) - 30
    sid = session_id(200)
    write_session(
        workspace,
        sid,
        [
            entry("user", "why does it crash?\nsecond line", ts=ts, model="m1"),
            entry(
                "assistant",
                "Let me look.",
                ts=ts + 1,
                tool_calls=[
                    {"id": "c1", "name": "read_file", "arguments": {"path": "a.rs"}},
                    {"id": "c2", "name": "run_command", "arguments": {"command": "cargo test"}},
                ],
            ),
            entry("user", ts=ts + 2, tool_result={"tool_call_id": "c1", "content": "\nfn main() {\n}\n", "is_error": False}),
            entry("user", ts=ts + 3, tool_result={"tool_call_id": "c2", "content": "permission denied", "is_error": True}),
            entry("assistant", "Fixed.", ts=ts + 4),
        ],
        mtime=time.time(),
        tail="garbage line\n",
    )
    s = open_picker(nv)
    assert s["selected"] == sid
    assert s["preview"]["lines"] == [
        "why does it crash?",
        f"{sid} · m1 · 5 messages · now",
        "⚠ repaired on load: skipped 1 unreadable line(s) (6)",
        "",
        "## You",
        "why does it crash?",
        "second line",
        "",
        "## Agent",
        "Let me look.",
        '▸ read_file {"path":"a.rs"}',
        '▸ run_command {"command":"cargo test"}',
        "  ✓ read_file: fn main() { (3 lines)",
        "    ",
        "    fn main() {",
        "    }",
        "  ✗ run_command: permission denied",
        "",
        "## Agent",
        "Fixed.",
    ]
    # the output is folded under its result line, as in the agent buffer (3 lines, as the result line says)
    win = s["preview"]["win"]
    assert nv.lua("return vim.api.nvim_win_call(..., function() return { vim.fn.foldclosed(14), vim.fn.foldclosedend(14) } end)", win) == [14, 16]
    # Exactly as the agent buffer renders the same history.
    body = nv.lua("return (require('pseudoclaude.transcript').render(require('pseudoclaude').sessions.load(...).messages))", sid)
    assert s["preview"]["lines"][4:] == body
    marks = nv.lua(
        "return vim.api.nvim_buf_get_extmarks(..., -1, 0, -1, { details = true })", s["preview"]["buf"]
    )
    groups = {m[1]: m[3]["hl_group"] for m in marks}
    assert groups[2] == "PseudoClaudePickerDamage"
    assert groups[4] == "PseudoClaudePickerPreviewUser" and groups[8] == "PseudoClaudePickerPreviewAgent"
    assert groups[10] == "PseudoClaudePickerPreviewTool" and groups[16] == "PseudoClaudePickerPreviewError"
    assert groups[12] == "PseudoClaudePickerPreviewResult" and groups[18] == "PseudoClaudePickerPreviewAgent"


def test_ctrl_d_and_ctrl_u_scroll_the_preview(nv, workspace):
    ts = int(time.time()) - 30
    lines = [entry("user", "long one", ts=ts)]
    for k in range(60):
        lines.append(entry("assistant" if k % 2 == 0 else "user", f"message {k}\nline two", ts=ts + k))
    write_session(workspace, session_id(300), lines, mtime=time.time())
    s = open_picker(nv)
    win = s["preview"]["win"]

    def topline() -> int:
        return nv.api.call("getwininfo", win)[0]["topline"]

    assert topline() == 1
    nv.api.input("<C-d>")
    wait_for(lambda: topline() > 1, what="scrolling down")
    down = topline()
    nv.api.input("<C-d>")
    wait_for(lambda: topline() > down, what="scrolling further")
    nv.api.input("<C-u><C-u>")
    wait_for(lambda: topline() == 1, what="scrolling back")
    assert state(nv)["query"] == ""  # the keys did not reach the prompt


@pytest.mark.parametrize("how", ["close preview", "close results", "leave prompt"])
def test_closing_or_leaving_any_window_closes_all(nv, how):
    bufs = nv.lua("return vim.api.nvim_list_bufs()")
    s = open_picker(nv)
    if how == "close preview":
        nv.api.api.win_close(s["preview"]["win"], True)
    elif how == "close results":
        nv.api.api.win_close(s["results"]["win"], True)
    else:
        nv.api.input("<Cmd>wincmd p<CR>")  # <C-o> is the picker's "other agents" key
    wait_for(lambda: state(nv) is None and floats(nv) == [], what="everything closed")
    assert nv.lua("return vim.api.nvim_list_bufs()") == bufs
    assert nv.lua("return vim.g.resumed") is None


@pytest.mark.parametrize("backend", ["float", "select"])
def test_no_session_is_a_notice_not_a_window(nvim, backend):
    nvim.lua(STUB_CHAT)
    nvim.lua("require('pseudoclaude').setup({ picker = { backend = ... } })", backend)
    nvim.lua("vim.ui.select = function() vim.g.selected = true end")
    nvim.api.command("PseudoResume")
    # the sessions are listed on the core's threads: the notice comes when the (empty) list does
    note = wait_for(lambda: notes(nvim), what="the notice")[0]["msg"]
    assert "no session to resume" in note
    assert floats(nvim) == [] and nvim.lua("return vim.g.selected") is None


def test_highlight_groups_are_default_links(nv):
    nv.api.command("highlight PseudoClaudePickerMatch guifg=#ff0000")
    open_picker(nv)
    assert nv.lua("return vim.api.nvim_get_hl(0, { name = 'PseudoClaudePickerSelection' }).link") == "Visual"
    assert nv.lua("return vim.api.nvim_get_hl(0, { name = 'PseudoClaudePickerMatch' }).fg") == 0xFF0000
    names = nv.lua("return vim.tbl_keys(require('pseudoclaude.highlights').links)")
    assert all(n.startswith("PseudoClaude") for n in names)
    # the agent buffer's groups are in the same registry, so they come back after :colorscheme too
    assert "PseudoClaudeHeader" in names
    nv.api.command("colorscheme default")  # clears the links; they come back
    assert nv.lua("return vim.api.nvim_get_hl(0, { name = 'PseudoClaudePickerSelection' }).link") == "Visual"


# The picker's windows as the screen draws them: each grid whose top-left cell is a border corner, with the groups
# of its corner, of the first cell of its title and of a cell inside it (the group names the screen reports).
PICKER_CELLS = """
vim.cmd("redraw")
local api = vim.api
local out = {}
for g = 2, 100 do
  local ok, corner = pcall(api.nvim__inspect_cell, g, 0, 0)
  if ok and corner[1] == "╭" then
    local function names(cell)
      local t = {}
      for _, h in ipairs(cell[3] or {}) do t[#t + 1] = h.hi_name end
      return t
    end
    local title
    for col = 1, 200 do
      local okc, cell = pcall(api.nvim__inspect_cell, g, 0, col)
      if not okc then break end
      if cell[1] ~= "─" and cell[1] ~= " " and cell[1] ~= "╮" then
        title = { text = cell[1], names = names(cell) }
        break
      end
    end
    local inner -- the first cell inside not drawn as the selection
    for row = 1, 5 do
      local okc, cell = pcall(api.nvim__inspect_cell, g, row, 1)
      if okc and not vim.tbl_contains(names(cell), "Visual") then
        inner = cell
        break
      end
    end
    out[#out + 1] = { corner = names(corner), title = title, inner_bg = inner[2].background or vim.NIL }
  end
end
local s = require("pseudoclaude.float").get_state()
local wh = {}
for name, win in pairs(s.wins) do wh[name] = vim.wo[win].winhighlight end
return { windows = out, winhighlight = wh }
"""


def test_borders_and_titles_carry_their_groups_and_winhighlight_is_set_only_for_a_changed_normal(nv):
    """A window's 'winhighlight' costs every redraw of the screen (a keystroke: ~0.15 ms, picker_bench), so the
    picker's borders and titles carry PseudoClaudePickerBorder/Title themselves and 'winhighlight' maps NormalFloat to
    PseudoClaudePickerNormal only when the user changed that group from its default link."""
    nv.lua(
        "vim.api.nvim_set_hl(0, 'PseudoClaudePickerBorder', { fg = 0x100001 })"
        " vim.api.nvim_set_hl(0, 'PseudoClaudePickerTitle', { fg = 0x100002 })"
        " vim.api.nvim_set_hl(0, 'NormalFloat', { bg = 0x203040 })"
        " vim.api.nvim__inspect_cell(1, 0, 0) vim.cmd('redraw!')"  # see conftest DISTINCT_HIGHLIGHTS
    )
    open_picker(nv)
    got = nv.lua(PICKER_CELLS)
    assert got["winhighlight"] == {"prompt": "", "results": "", "preview": ""}
    assert len(got["windows"]) == 3, got
    for w in got["windows"]:
        assert w["corner"] == ["PseudoClaudePickerBorder"], w
        assert w["title"]["names"] == ["PseudoClaudePickerTitle"], w
        assert w["inner_bg"] == 0x203040, w  # NormalFloat, which PseudoClaudePickerNormal links to
    nv.api.input("<Esc>")
    wait_for(lambda: state(nv) is None, what="the picker to close")

    nv.api.command("highlight PseudoClaudePickerNormal guibg=#102030")
    open_picker(nv)
    got = nv.lua(PICKER_CELLS)
    assert set(got["winhighlight"].values()) == {"NormalFloat:PseudoClaudePickerNormal"}
    assert [w["inner_bg"] for w in got["windows"]] == [0x102030] * 3, got
    assert all(w["corner"] == ["PseudoClaudePickerBorder"] for w in got["windows"]), got


def test_the_picker_is_loaded_lazily(nvim, ws12):
    nv = nvim  # without the `nv` fixture's setup(), which loads the plugin
    nv.api.command("set columns=160 lines=48")
    nv.lua(STUB_CHAT)
    assert nv.loaded_modules() == ["pseudoclaude.chat"]  # the stub only
    assert nv.api.call("exists", ":PseudoResume") == 2
    open_picker(nv)
    assert {"pseudoclaude.float", "pseudoclaude.sessions", "pseudoclaude.highlights"} <= set(nv.loaded_modules())


# -- pure parts: layout, matcher, rendering ----------------------------------------------------------------------


@pytest.mark.parametrize("columns, lines", [(200, 60), (120, 40), (99, 40), (80, 24), (40, 12), (20, 8), (10, 5)])
def test_layout_fits_the_editor_without_overlaps(nvim, columns, lines):
    lay = nvim.lua("return require('pseudoclaude.float.layout').compute(...)", columns, lines, {"cmdheight": 1})
    wins = {k: v for k, v in lay.items() if isinstance(v, dict)}
    assert set(wins) >= {"prompt", "results"}
    boxes = []
    for name, c in wins.items():
        assert c["relative"] == "editor" and c["style"] == "minimal" and c["width"] >= 1 and c["height"] >= 1
        top, left = c["row"], c["col"]
        bottom, right = top + c["height"] + 2, left + c["width"] + 2  # rounded borders
        if columns >= 20 and lines >= 8:
            assert 0 <= top and bottom <= lines - 1 and 0 <= left and right <= columns, (name, c)
        boxes.append((name, top, left, bottom, right))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            overlap = a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
            assert not overlap, (a, b)
    assert wins["prompt"]["height"] == 1 and wins["prompt"]["focusable"] is True
    assert wins["results"]["focusable"] is False
    if columns >= 120:
        assert lay["orientation"] == "horizontal" and wins["preview"]["col"] > wins["results"]["col"]
    elif lines >= 24:
        assert lay["orientation"] == "vertical" and wins["preview"]["row"] > wins["results"]["row"]
    if lines <= 8:
        assert "preview" not in wins


@pytest.mark.parametrize("engine", ["rust", "lua", "vim"])
def test_matcher_engines_rank_and_locate_matches(nvim, engine):
    got = nvim.lua(
        """
        local m = require("pseudoclaude.float.matcher").new({
          "please audit running services report m 1",
          "fix the parser m 2",
          "Parser rewrite m 3",
          "unrelated m 4",
          "fix the parser m 5",
        }, ...)
        return {
          m:filter("parser"),
          m:filter("fxp"),
          m:filter("zzz"),
          m:filter(""),
          m:filter("parser", { 5, 4, 2 }),
          m:positions(2, "fxp"),
          m:positions(4, "fxp") or vim.NIL,
        }
        """,
        engine,
    )
    parser, fxp, none, everything, narrowed, positions, no_positions = got
    assert sorted(parser[:3]) == [2, 3, 5]  # the substring matches first...
    assert parser.index(2) < parser.index(5)  # ...equal ones newest (first in the list) first
    assert parser[-1] == 1  # the scattered match last
    assert 2 in fxp and 5 in fxp and 4 not in fxp
    assert none == [] and everything == [1, 2, 3, 4, 5]
    assert narrowed == [2, 5]
    assert positions[0] == 0 and positions[1] == 2 and no_positions is None


@pytest.mark.parametrize("engine", ["rust", "lua"])
def test_lua_matcher_is_smart_case_and_handles_utf8(nvim, engine):
    got = nvim.lua(
        """
        local m = require("pseudoclaude.float.matcher").new({ "Parser one", "parser two", "café résumé" }, ...)
        return { m:filter("parser"), m:filter("Parser"), m:filter("résumé"), m:positions(3, "cr") }
        """,
        engine,
    )
    assert sorted(got[0]) == [1, 2] and got[1] == [1] and got[2] == [3]
    assert got[3] == [0, len("café ".encode())]  # byte offsets


def test_the_pickers_matcher_in_the_core_ranks_exactly_as_the_lua_one(nvim):
    """The "rust" engine (src/fuzzy.rs, the picker's) against the "lua" one on 2,000 generated texts: the same
    matches in the same order for every query, typed forward (narrowing) or given candidates, and the same matched
    characters to highlight; a text the core cannot take (a NUL byte) makes a Lua matcher."""
    got = nvim.lua(
        """
        local matcher = require("pseudoclaude.float.matcher")
        local words = { "fix", "the", "parser", "Parse", "café", "résumé", "a-b_c", "x/y", "claude-sonnet-4",
          "20260101-000000-abcd", "tool.call", "(paren)", " ", "pppp", "éé", "PARSE", "sparse" }
        local seed = 7
        local function rnd(n)
          seed = (seed * 1103515245 + 12345) % 2147483648
          return seed % n + 1
        end
        local hay = {}
        for i = 1, 2000 do
          local parts = {}
          for k = 1, rnd(6) do parts[k] = words[rnd(#words)] end
          hay[i] = table.concat(parts, ({ " ", "", "-" })[rnd(3)])
        end
        local lua, rust = matcher.new(hay, "lua"), matcher.new(hay, "rust")
        local diffs, counts = {}, {}
        for _, q in ipairs({ "p", "pa", "par", "parse", "P", "Pa", "PARSE", "é", "ér", "fxp", "a-b", "x/", "zzz",
                             "cs4", "ppp", " ", "ccc", "sparse" }) do
          local a, b = lua:filter(q), rust:filter(q)
          counts[#counts + 1] = #b
          if not vim.deep_equal(a, b) then diffs[#diffs + 1] = q end
          -- the matched characters' spans (highlighted in the rows) of some matches and of texts that do not match
          local some = vim.list_extend(#a > 1 and { a[1], a[2], a[#a] } or {}, { 1, 2, 3, 1000, 2000 })
          if not vim.deep_equal(lua:spans(some, q), rust:spans(some, q)) then diffs[#diffs + 1] = "spans " .. q end
        end
        local pa, pb
        for k = 1, #"parser" do
          local q = ("parser"):sub(1, k)
          pa, pb = lua:filter(q, pa), rust:filter(q, pb)
          if not vim.deep_equal(pa, pb) then diffs[#diffs + 1] = "narrowing " .. q end
        end
        local within = { 5, 3, 1999, 7, 12 }
        if not vim.deep_equal(lua:filter("e", within), rust:filter("e", within)) then diffs[#diffs + 1] = "within" end
        if #rust:filter("e", {}) ~= 0 then diffs[#diffs + 1] = "within nothing" end
        local nul = matcher.new({ "a\0b", "ab" }, "rust")
        -- the spans above came from the core (spans falls back to Lua's when the call fails)
        local first = lua:filter("par")[1]
        local packed = require("pseudoclaude.core").call("fuzzy_positions", rust.handle, "par", { first })
        local offsets = {}
        for k = 1, #packed / 4 do offsets[k] = packed:byte(4 * k - 3) end
        return { diffs = table.concat(diffs, ","), counts = counts, engine = rust.engine, nul = nul.engine,
                 nul_matches = nul:filter("ab"), core = offsets, lua_positions = lua:positions(first, "par") }
        """
    )
    assert got["diffs"] == ""
    assert got["engine"] == "rust" and min(got["counts"][:4]) > 100 and 0 in got["counts"]
    assert got["nul"] == "lua" and got["nul_matches"] == [2, 1]
    assert got["core"] == [3, *got["lua_positions"]]  # how many, then the offsets (all below 256 here)


def test_render_ages_counts_and_fitting(nvim):
    got = nvim.lua(
        """
        local r = require("pseudoclaude.float.render")
        local ages = vim.tbl_map(r.age, { 0, 59, 60, 3 * 3600 + 5, 2 * 86400, 40 * 86400, 400 * 86400 })
        local lines = r.rows({
          { id = "x", title = "a very long title that cannot fit in the window at all", model = "claude-x",
            messages = 1, modified = 100, last_message = 0 },
          { id = "y", title = "", model = "", messages = 12, modified = 0, last_message = 100, held_by = "pid 1" },
        }, 50, 100 + 7200)
        return { ages, lines, r.count(1), r.count(3) }
        """
    )
    ages, lines, one, three = got
    assert ages == ["now", "now", "1m ago", "3h ago", "2d ago", "1mo ago", "1y ago"]
    assert one == "1 msg" and three == "3 msgs"
    assert all(nvim.api.call("strdisplaywidth", line) <= 50 for line in lines)
    assert lines[0].startswith("  a very long") and "…" in lines[0] and "2h ago" in lines[0] and " 1 msg" in lines[0]
    assert lines[1].startswith("! (untitled)") and "12 msgs" in lines[1]


def test_help_tags_for_the_picker_and_the_sessions_api(nvim, tmp_path):
    import shutil

    from conftest import ROOT

    doc = tmp_path / "doc-root" / "doc"
    shutil.copytree(ROOT / "doc", doc)
    nvim.api.command(f"helptags {doc}")
    nvim.api.command(f"set rtp^={doc.parent}")
    for tag in [
        ":PseudoResume",
        "pseudoclaude-picker",
        "pseudoclaude-sessions-api",
        "pseudoclaude.sessions.list()",
        "pseudoclaude.sessions.load()",
        "pseudoclaude.sessions.delete()",
        "pseudoclaude.sessions.cleanup()",
        "pseudoclaude-highlights",
    ]:
        nvim.api.command(f"help {tag}")
        assert nvim.api.current.buffer.name == str(doc / "pseudoclaude.txt")
    text = (doc / "pseudoclaude.txt").read_text()
    links = nvim.lua("return require('pseudoclaude.highlights').links")
    for group, link in links.items():
        assert f"    {group} " in text and f" {link} " in text, group


# -- on a real terminal -------------------------------------------------------------------------------------------


def test_smoke_in_a_real_terminal_with_tmux(workspace, ws12, terminal):
    """The picker as a person sees it: Neovim's TUI in tmux, keys sent with send-keys, the screen read back."""
    from conftest import NVIM, ROOT

    t = terminal(workspace, f"{NVIM} --clean --cmd 'set rtp^={ROOT}' -c 'set noshowmode'")
    t.wait_screen(lambda s: "~" in s, "Neovim to start")
    with hold_lock(session_dir(workspace, ws12[1])):
        t.keys(":PseudoResume", "Enter")
        s = t.wait_screen(lambda s: "Resume session" in s and "task 11" in s, "the picker")
    assert "Sessions" in s and "Preview" in s and "╭" in s
    rows = [line for line in s.splitlines() if "msgs" in line]
    assert len(rows) == 12 and "task 11" in rows[0]  # the window fills: all twelve fit; and "1h ago" in rows[0] and "2 msgs" in rows[0]
    assert "! task 10" in rows[1]  # held by "another editor" (this test) when listed
    s = t.wait_screen(lambda s: "answer 1 to task 11" in s, "the preview (read in the background)")
    assert "## You" in s
    t.keys("zebra")
    s = t.wait_screen(lambda s: "zebra parser overhaul" in s and "task 11" not in s, "the filter")
    assert "> zebra" in s and "1/12" in s
    t.keys("Escape")
    s = t.wait_screen(lambda s: "Resume session" not in s, "the picker to close")
    assert "zebra" not in s
    t.keys(":echo 'mode:' . mode() . ' wins:' . winnr('$')", "Enter")
    t.wait_screen(lambda s: "mode:n wins:1" in s, "Normal mode, one window")
