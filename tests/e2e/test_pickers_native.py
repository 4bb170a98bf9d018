"""The native pickers: our sessions and search as telescope.nvim, fzf-lua, snacks.picker and mini.pick pickers, driven by
typed keys in a real headless Neovim with the real plugins at their pinned revisions, read at run time from
`/work/shared/peers/` (put on 'runtimepath' by each test, never copied into the project). Each: open, filter, the
preview drawn by our renderer, resume into the real chat (the highlighted session is the one resumed), delete, and
the search mode's jump to the message; a workspace of 3,000 sessions with a copied folder; `picker.backend = "auto"`; the
search with the other agents' sessions over a session the real Claude Code CLI made, `<CR>` handing it over to
claude-agent-acp."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import TRACK, main_loop_watch, question_asked, transcript, wait_for, watch_questions
from session_files import chat, entry, session_dir, session_id, write_session
from acp_rig import fake_anthropic  # noqa: F401 (a fixture)
from test_acp import chat_text
from test_continue import claude_editor, quit_editor, terminal_session
from test_import import CODEX_ID, homes, sources  # noqa: F401 (fixtures: the tools' homes and their files)

PEERS = Path(os.environ.get("PSEUDOCLAUDE_PEERS", Path(__file__).resolve().parents[3] / "shared" / "peers"))
PLUGINS = {
    "telescope": ["plenary.nvim", "telescope.nvim"],
    "fzf-lua": ["fzf-lua"],
    "snacks": ["snacks.nvim"],
    "mini": ["mini.nvim"],
}
SETUP = {
    "telescope": "",
    "fzf-lua": "require('fzf-lua').setup({})",
    "snacks": "require('snacks').setup({ picker = { enabled = true } })",
    "mini": "require('mini.pick').setup()",
}


def add_peers(n, backend: str) -> None:
    """Puts the real plugin(s) of `backend` on 'runtimepath', as a plugin manager would, and sources their plugin/
    files."""
    for name in PLUGINS[backend]:
        root = PEERS / name
        assert root.is_dir(), f"the pinned copy of {name} is missing at {root} (see /work/shared/peers/README.md)"
        n.api.command(f"set rtp+={root}")
        for f in sorted((root / "plugin").glob("*.lua")) + sorted((root / "plugin").glob("*.vim")):
            n.api.command(f"source {f}")


def start(nvim, backend: str, setup_first: bool = True) -> Any:
    nvim.api.command("set columns=160 lines=48")
    add_peers(nvim, backend)
    if setup_first and SETUP[backend]:
        nvim.lua(SETUP[backend])
    nvim.lua(f'require("pseudoclaude").setup({{ provider = {{ name = "demo" }}, picker = {{ backend = "{backend}" }} }})')
    nvim.lua(TRACK)
    return nvim


@pytest.fixture
def ws6(workspace: Path) -> list[str]:
    """Six sessions an hour apart, "task 5" the newest ("zebra parser" the oldest); ids newest first. Session 2 has a
    message with "needle in the haystack" as its third message."""
    now = int(time.time())
    ids = []
    for i in range(6):
        sid = session_id(i)
        t = now - 3600 * (6 - i)
        title = "zebra parser overhaul" if i == 0 else f"task {i}"
        entries = chat(title, ts=t - 10, replies=2)
        if i == 2:
            entries += [entry("user", "where is the needle in the haystack", ts=t - 3),
                        entry("assistant", "the needle is found", ts=t - 2)]
        write_session(workspace, sid, entries, mtime=t)
        ids.append(sid)
    return list(reversed(ids))


def by_title(ws6: list[str]) -> dict[str, str]:
    """The sessions of `ws6` by title."""
    return {("zebra parser overhaul" if k == 5 else f"task {5 - k}"): sid for k, sid in enumerate(ws6)}


def resumed(n) -> dict[str, Any]:
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"], report
    return report


def buffers_text(n) -> str:
    """The text of every window's buffer (the pickers' prompt, list and preview)."""
    return n.lua(
        "local out = {} for _, w in ipairs(vim.api.nvim_list_wins()) do "
        "local b = vim.api.nvim_win_get_buf(w) "
        "table.insert(out, table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n')) end "
        "return table.concat(out, '\\n----\\n')"
    )


def float_lines(n) -> list[list[str]]:
    return n.lua(
        "local out = {} for _, w in ipairs(vim.api.nvim_list_wins()) do "
        "if vim.api.nvim_win_get_config(w).relative ~= '' then "
        "table.insert(out, vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)) end end return out"
    )


# -- telescope --------------------------------------------------------------------------------------------------

TELESCOPE_STATE = """
local ok, st = pcall(require, "telescope.actions.state")
if not ok then return vim.NIL end
local buf = vim.api.nvim_get_current_buf()
if vim.bo[buf].filetype ~= "TelescopePrompt" then return vim.NIL end
local picker = st.get_current_picker(buf)
local entry = st.get_selected_entry()
local out = { prompt = st.get_current_line(), selected = entry and (entry.value.id or vim.NIL) or vim.NIL }
out.results = vim.api.nvim_buf_get_lines(picker.results_bufnr, 0, -1, false)
local pw = picker.preview_win
out.preview = pw and vim.api.nvim_win_is_valid(pw) and vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(pw), 0, -1, false) or {}
out.count = picker.manager and picker.manager:num_results() or 0
return out
"""


def telescope_state(n) -> dict[str, Any] | None:
    return n.lua(TELESCOPE_STATE)


def test_telescope_lists_filters_previews_and_resumes_the_highlighted_session(nvim, ws6):
    n = start(nvim, "telescope")
    n.api.input(":PseudoResume<CR>")
    s = wait_for(lambda: (x := telescope_state(n)) and x["count"] == 6 and x["selected"] == ws6[0] and x,
                 what="telescope with six sessions, the newest highlighted")
    rows = [r for r in s["results"] if r.strip()]
    assert any(r.lstrip("> ").startswith("task 5") for r in rows), rows
    # our row text: the float's renderer (title, age, count)
    assert any("3 msgs" in r or "4 msgs" in r for r in rows), rows
    s = wait_for(lambda: (x := telescope_state(n)) and "task 5" in x["preview"] and "answer 1 to task 5" in x["preview"]
                 and x, what="our preview of the newest session")
    assert s["preview"][0] == "task 5"
    n.api.input("zebra")
    wait_for(lambda: (x := telescope_state(n)) and x["prompt"] == "zebra" and x["count"] == 1
             and x["selected"] == ws6[5], what="the filter")
    wait_for(lambda: "answer 1 to zebra parser overhaul" in telescope_state(n)["preview"], what="its preview")
    n.api.input("<C-w>task")
    s = wait_for(lambda: (x := telescope_state(n)) and x["prompt"] == "task" and x["count"] == 5
                 and x["selected"] in ws6[:5] and x, what="task")
    first = s["selected"]
    n.api.input("<Down>")
    s = wait_for(lambda: (x := telescope_state(n)) and x["selected"] != first and x, what="the second match highlighted")
    picked = s["selected"]
    n.api.input("<CR>")
    report = resumed(n)
    assert report["id"] == picked
    assert n.lua("return require('pseudoclaude').current().id") == picked
    assert telescope_state(n) is None


# -- fzf-lua ----------------------------------------------------------------------------------------------------

FZF_STATE = """
local out = { term = {}, preview = {} }
for _, w in ipairs(vim.api.nvim_list_wins()) do
  local b = vim.api.nvim_win_get_buf(w)
  if vim.api.nvim_win_get_config(w).relative ~= "" then
    local lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    if vim.bo[b].buftype == "terminal" then out.term = lines else out.preview = lines end
  end
end
return out
"""


def fzf_state(n) -> dict[str, Any]:
    return n.lua(FZF_STATE)


def fzf_pointed(s: dict[str, Any]) -> str | None:
    """The row fzf's pointer is on (its title column), or None."""
    for line in s["term"]:
        if line.startswith((">", "▌")):
            row = line[1:].strip()
            if row and not row.startswith(("Sessions", "Search")):
                return row
    return None


def test_fzf_lua_lists_filters_previews_and_resumes_the_highlighted_session(nvim, ws6):
    assert shutil.which("fzf"), "fzf-lua needs the fzf binary: install it (Debian: apt-get install fzf; scripts/ensure-debs)"
    n = start(nvim, "fzf-lua")
    n.api.input(":PseudoResume<CR>")
    s = wait_for(lambda: (x := fzf_state(n)) and any("task 5" in l for l in x["term"]) and
                 any("6/6" in l for l in x["term"]) and x, what="fzf with six sessions")
    s = wait_for(lambda: (x := fzf_state(n)) and "answer 1 to task 5" in x["preview"] and x, what="our preview")
    assert s["preview"][0] == "task 5"
    n.api.input("task")
    s = wait_for(lambda: (x := fzf_state(n)) and any("5/6" in l for l in x["term"]) and x, what="the filter")
    n.api.input("<C-n>")
    s = wait_for(lambda: (x := fzf_state(n)) and (p := fzf_pointed(x)) and not p.startswith("task 5") and x,
                 what="the second row pointed")
    title = fzf_pointed(s).split("  ")[0]
    wait_for(lambda: f"answer 1 to {title}" in fzf_state(n)["preview"], what="the pointed session's preview")
    n.api.input("<CR>")
    report = resumed(n)
    assert title in transcript(n)
    assert report["id"] == ws6[5 - int(title.split()[-1])]  # "task k" is the (5 - k)th newest


# -- snacks.picker ----------------------------------------------------------------------------------------------

SNACKS_STATE = """
local ok, snacks = pcall(require, "snacks")
if not ok then return vim.NIL end
local picker = snacks.picker.get()[1]
if not picker or picker.closed then return vim.NIL end
local cur = picker:current()
local out = { count = picker.list:count(), total = picker:count(), pattern = picker.input.filter.pattern, search = picker.input.filter.search }
out.selected = cur and (cur.session and cur.session.id or cur.hit and (cur.hit.id .. ":" .. cur.hit.index)) or vim.NIL
out.list = vim.api.nvim_buf_get_lines(picker.list.win.buf, 0, -1, false)
out.preview = picker.preview.win:valid() and vim.api.nvim_buf_get_lines(picker.preview.win.buf, 0, -1, false) or {}
return out
"""


def snacks_state(n) -> dict[str, Any] | None:
    return n.lua(SNACKS_STATE)


def test_snacks_lists_filters_previews_and_resumes_the_highlighted_session(nvim, ws6):
    n = start(nvim, "snacks")
    n.api.input(":PseudoResume<CR>")
    s = wait_for(lambda: (x := snacks_state(n)) and x["count"] == 6 and x, what="snacks with six sessions")
    assert s["selected"] == ws6[0]
    assert any("task 5" in l for l in s["list"]), s["list"]
    s = wait_for(lambda: (x := snacks_state(n)) and "answer 1 to task 5" in x["preview"] and x, what="our preview")
    assert s["preview"][0] == "task 5"
    n.api.input("task")
    s = wait_for(lambda: (x := snacks_state(n)) and x["pattern"] == "task" and x["count"] == 5 and x, what="the filter")
    n.api.input("<C-n>")
    s = wait_for(lambda: (x := snacks_state(n)) and x["selected"] != ws6[0] and x, what="the second row")
    picked = s["selected"]
    n.api.input("<CR>")
    report = resumed(n)
    assert report["id"] == picked


# -- mini.pick --------------------------------------------------------------------------------------------------

MINI_STATE = """
if not (MiniPick and MiniPick.is_picker_active()) then return vim.NIL end
local m = MiniPick.get_picker_matches() or {}
local st = MiniPick.get_picker_state()
local cur = m.current
local out = { count = #(m.all or {}), query = table.concat(MiniPick.get_picker_query() or {}) }
out.selected = cur and (cur.item and cur.item.id or cur.hit and (cur.hit.id .. ":" .. cur.hit.index)) or vim.NIL
out.view = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(st.windows.main), 0, -1, false)
return out
"""


def mini_state(n) -> dict[str, Any] | None:
    return n.lua(MINI_STATE)


def test_mini_pick_lists_filters_previews_and_resumes_the_highlighted_session(nvim, ws6):
    n = start(nvim, "mini")
    n.api.input(":PseudoResume<CR>")
    s = wait_for(lambda: (x := mini_state(n)) and x["count"] == 6 and any("task 5" in l for l in x["view"]) and x,
                 what="mini.pick with six sessions")
    assert s["selected"] == ws6[0]
    assert any("4 msgs" in l for l in s["view"])  # our row text
    n.api.input("<Tab>")  # mini.pick's preview
    s = wait_for(lambda: (x := mini_state(n)) and "answer 1 to task 5" in x["view"] and x, what="our preview")
    assert s["view"][0] == "task 5"
    n.api.input("<Tab>task")
    s = wait_for(lambda: (x := mini_state(n)) and x["query"] == "task" and x["count"] == 5 and x, what="the filter")
    n.api.input("<C-n>")
    s = wait_for(lambda: (x := mini_state(n)) and x["selected"] != ws6[0] and x, what="the second row")
    picked = s["selected"]
    n.api.input("<CR>")
    report = resumed(n)
    assert report["id"] == picked
    assert mini_state(n) is None


# -- every picker: delete, the search's jump, 3,000 sessions ------------------------------------------------------

# What each test reads of a picker: `count` (rows matching), `title` (the highlighted row's session title), `snippet`
# (a highlighted hit's), `preview` (the lines of the preview window), `rows` (the list's text).
READ = {
    "telescope": """
local ok, st = pcall(require, "telescope.actions.state")
if not ok then return vim.NIL end
local buf = vim.api.nvim_get_current_buf()
if vim.bo[buf].filetype ~= "TelescopePrompt" then return vim.NIL end
local picker = st.get_current_picker(buf)
local e = st.get_selected_entry()
local v = e and e.value or {}
local pw = picker.preview_win
return { count = picker.manager and picker.manager:num_results() or 0, title = v.title or vim.NIL,
  snippet = v.snippet or vim.NIL, agent = v.agent or vim.NIL, prompt_title = picker.prompt_title,
  rows = vim.api.nvim_buf_get_lines(picker.results_bufnr, 0, -1, false),
  preview = pw and vim.api.nvim_win_is_valid(pw) and vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(pw), 0, -1, false) or {} }
""",
    "snacks": """
local ok, snacks = pcall(require, "snacks")
if not ok then return vim.NIL end
local picker = snacks.picker.get()[1]
if not picker or picker.closed then return vim.NIL end
local cur = picker:current() or {}
local v = cur.session or cur.hit or {}
return { count = picker.list:count(), title = v.title or vim.NIL, snippet = v.snippet or vim.NIL, busy = picker:is_active(),
  agent = v.agent or vim.NIL, prompt_title = picker.title,
  rows = vim.api.nvim_buf_get_lines(picker.list.win.buf, 0, -1, false),
  preview = picker.preview.win:valid() and vim.api.nvim_buf_get_lines(picker.preview.win.buf, 0, -1, false) or {} }
""",
    "mini": """
if not (MiniPick and MiniPick.is_picker_active()) then return vim.NIL end
local m = MiniPick.get_picker_matches() or {}
local cur = m.current or {}
local v = cur.item or cur.hit or {}
local st = MiniPick.get_picker_state()
local view = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(st.windows.main), 0, -1, false)
return { count = #(m.all or {}), title = v.title or vim.NIL, snippet = v.snippet or vim.NIL, rows = view, preview = view,
  agent = v.agent or vim.NIL, prompt_title = MiniPick.get_picker_opts().source.name }
""",
    "fzf-lua": FZF_STATE,
}
NEXT = {"telescope": "<C-n>", "fzf-lua": "<C-n>", "snacks": "<C-n>", "mini": "<C-n>"}
DELETE = {"telescope": "<M-d>", "fzf-lua": "<C-x>", "snacks": "<C-x>", "mini": "<M-d>"}
BACKENDS = list(READ)


def read(n, backend: str) -> dict[str, Any] | None:
    s = n.lua(READ[backend])
    if backend != "fzf-lua" or not s:
        return s
    if not s["term"]:
        return None  # fzf not open
    # fzf's screen: the counter ("5/6"), the row under its pointer
    counts = [l.strip().split("/")[0] for l in s["term"] if "/" in l and l.strip().split("/")[0].isdigit()]
    pointed = fzf_pointed(s)
    agent = pointed[1:].split("]")[0] if pointed and pointed.startswith("[") else None
    prompt = [l for l in s["term"] if l.lstrip("> ").startswith(("Sessions", "Search"))]
    return {"count": int(counts[0]) if counts else 0, "title": pointed.split("  ")[0] if pointed else None,
            "snippet": pointed, "rows": s["term"], "preview": s["preview"], "agent": agent,
            "prompt_title": prompt[0] if prompt else None}


def opened(n, backend: str, count: int) -> dict[str, Any]:
    return wait_for(lambda: (x := read(n, backend)) and x["count"] == count and x["title"] and not x.get("busy") and x,
                    what=f"{backend} with {count} rows")


@pytest.mark.parametrize("backend", BACKENDS)
def test_delete_asks_then_removes_the_highlighted_session(nvim, workspace, ws6, backend):
    n = start(nvim, backend)
    n.api.input(":PseudoResume<CR>")
    first = opened(n, backend, 6)["title"]
    n.api.input(NEXT[backend])
    s = wait_for(lambda: (x := read(n, backend)) and x["title"] != first and x, what="the second row")
    title = s["title"]
    sid = by_title(ws6)[title]
    watch_questions(n)
    n.api.input(DELETE[backend])
    question_asked(n)
    assert session_dir(workspace, sid).exists()  # nothing before the answer
    n.api.input("y")
    wait_for(lambda: not session_dir(workspace, sid).exists(), what="the deletion")
    # the count changes before a picker redraws its rows (telescope draws on a later step): wait for both
    gone = lambda x: not any(title + " " in r for r in x["rows"])  # noqa: E731
    wait_for(lambda: (x := read(n, backend)) and x["count"] == 5 and gone(x) and x, what="the list without it")
    assert sum(session_dir(workspace, i).exists() for i in ws6) == 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_search_mode_shows_hits_and_jumps_to_the_message(nvim, ws6, backend):
    n = start(nvim, backend)
    n.api.command("set columns=240")  # fzf-lua's list is 40% of 80%: room for the snippets
    n.api.input(":PseudoSearch needle<CR>")
    s = wait_for(lambda: (x := read(n, backend)) and x["count"] == 2 and x["snippet"] and x, what="two hits")
    assert "where is the needle" in (s["snippet"] or ""), s
    if backend == "mini":
        n.api.input("<Tab>")  # mini.pick shows the preview in place of the list
    wait_for(lambda: "where is the needle in the haystack" in read(n, backend)["preview"], what="the hit's preview")
    n.api.input(NEXT[backend])
    s = wait_for(lambda: (x := read(n, backend)) and "the needle is found" in (x["snippet"] or "") and x,
                 what="the second hit")
    wait_for(lambda: (p := read(n, backend)["preview"]) and any(l == "the needle is found" for l in p),
             what="its preview")
    n.api.input("<CR>")
    report = resumed(n)
    assert report["id"] == ws6[3] and report["at"] == 6
    cursor = """
    local w = vim.fn.win_findbuf(vim.fn.bufnr('pseudoclaude://chat'))[1]
    if not w then return vim.NIL end
    local row = vim.api.nvim_win_get_cursor(w)[1]
    return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), row - 1, row, false)[1]
    """
    wait_for(lambda: n.lua(cursor) == "the needle is found", what="the cursor on the message")


@pytest.fixture(scope="module")
def generated_3000(tmp_path_factory) -> Path:
    """3,000 sessions a minute apart ("task 2999" the newest), in the activity hint: generated once per module, each
    test copies the folder."""
    ws = tmp_path_factory.mktemp("generated") / "ws"
    now = time.time()
    hint = []
    for i in range(3000):
        sid = session_id(i)
        t = now - 7200 - (3000 - i) * 60
        write_session(ws, sid, chat(f"task {i}", ts=int(t) - 10), mtime=t)
        hint.append(f"{sid} {int(t)}")
    (ws / ".PseudoClaude" / "sessions" / "activity").write_text("\n".join(hint) + "\n")
    return ws


@pytest.fixture
def ws3000(workspace: Path, generated_3000: Path) -> dict[str, str]:
    """The 3,000 sessions copied into the test's workspace, plus a newer session copied from elsewhere (a folder the
    activity hint does not name). The sessions by title."""
    shutil.copytree(generated_3000 / ".PseudoClaude", workspace / ".PseudoClaude", copy_function=shutil.copy2)
    copied = session_id(5001)
    now = time.time()
    write_session(workspace, copied, chat("copied from a laptop", ts=int(now) - 70), mtime=now - 60)
    titles = {f"task {i}": session_id(i) for i in range(3000)}
    titles["copied from a laptop"] = copied
    return titles


@pytest.mark.parametrize("backend", BACKENDS)
def test_3000_sessions_the_highlighted_one_is_resumed(nvim, ws3000, backend):
    n = start(nvim, backend)
    with main_loop_watch(n, f"{backend} opening over 3,001 sessions"):
        n.api.input(":PseudoResume<CR>")
        s = opened(n, backend, 3001)
    assert s["title"] == "copied from a laptop"  # the newest, though no hint names it
    n.api.input("task 299")
    s = wait_for(lambda: (x := read(n, backend)) and 10 < x["count"] < 3001 and (x["title"] or "").startswith("task 299")
                 and not x.get("busy") and x, what="the query's matches (snacks: its matcher done)")
    first = s["title"]
    n.api.input(NEXT[backend])
    s = wait_for(lambda: (x := read(n, backend)) and x["title"] not in (None, first) and x, what="the next match")
    picked = s["title"]
    if backend == "mini":
        n.api.input("<Tab>")  # mini.pick shows the preview in place of the list
    wait_for(lambda: (p := read(n, backend)["preview"]) and picked in p, what="its preview")
    n.api.input("<CR>")
    report = resumed(n)
    assert report["id"] == ws3000[picked]
    assert picked in transcript(n)


# -- auto, and the sources registered whichever is set up first ---------------------------------------------------


def test_auto_opens_the_first_installed_picker_else_the_float(start_nvim, ws6):
    # snacks (picker enabled) and mini.pick installed: snacks comes first in auto's order
    n = start_nvim()
    add_peers(n, "mini")
    add_peers(n, "snacks")
    n.lua(SETUP["snacks"])
    n.lua('require("pseudoclaude").setup({ provider = { name = "demo" }, picker = { backend = "auto" } })')
    n.api.input(":PseudoResume<CR>")
    opened(n, "snacks", 6)
    assert n.lua("return require('pseudoclaude.float').is_open()") is False
    # none installed: the float
    m = start_nvim()
    m.lua('require("pseudoclaude").setup({ provider = { name = "demo" }, picker = { backend = "auto" } })')
    m.lua(TRACK)
    m.api.input(":PseudoResume<CR>")
    wait_for(lambda: m.lua("local s = require('pseudoclaude.float').get_state() return s and s.count or 0") == 6,
             what="the float picker")
    assert m.lua("return _G.notes") == []


def test_a_picker_named_but_not_installed_warns_and_opens_the_float(nvim, ws6):
    nvim.lua('require("pseudoclaude").setup({ provider = { name = "demo" }, picker = { backend = "telescope" } })')
    nvim.lua(TRACK)
    nvim.api.input(":PseudoResume<CR>")
    wait_for(lambda: nvim.lua("return require('pseudoclaude.float').is_open()"), what="the float picker")
    notes = nvim.lua("return _G.notes")
    assert len(notes) == 1 and "telescope.nvim is not installed" in notes[0]["msg"], notes


@pytest.mark.parametrize("order", ["pseudoclaude first", "picker first"])
def test_snacks_and_mini_sources_appear_whichever_is_set_up_first(start_nvim, ws6, order):
    n = start_nvim()
    add_peers(n, "snacks")
    add_peers(n, "mini")
    setup = 'require("pseudoclaude").setup({ provider = { name = "demo" } })'
    if order == "pseudoclaude first":
        n.lua(setup)
        assert n.lua("return package.loaded['mini.pick'] == nil and package.loaded['snacks.picker.config.sources'] == nil")
        n.lua(SETUP["snacks"])
        n.lua(SETUP["mini"])
    else:
        n.lua(SETUP["snacks"])
        n.lua(SETUP["mini"])
        n.lua("local _ = Snacks.picker.sources")  # snacks' sources loaded before our setup()
        n.lua(setup)
    assert n.lua("return type(MiniPick.registry.pseudoclaude)") == "function"
    assert n.lua("return Snacks.picker.sources.pseudoclaude_sessions ~= nil and Snacks.picker.sources.pseudoclaude_search ~= nil")
    n.lua(TRACK)
    n.lua("Snacks.picker.pseudoclaude_sessions()")
    opened(n, "snacks", 6)
    n.lua("Snacks.picker.get()[1]:close()")
    wait_for(lambda: n.lua("return #Snacks.picker.get()") == 0, what="snacks closed")
    n.api.input(":Pick pseudoclaude<CR>")
    opened(n, "mini", 6)


def test_telescope_extension_loads_and_its_search_opens(nvim, ws6):
    n = start(nvim, "telescope")
    exports = n.lua("local ext = require('telescope').load_extension('pseudoclaude') "
                    "local out = {} for k in pairs(ext) do out[#out + 1] = k end table.sort(out) return out")
    assert exports == ["pseudoclaude", "search", "sessions"]
    n.api.input(":Telescope pseudoclaude search default_text=needle<CR>")
    s = wait_for(lambda: (x := read(n, "telescope")) and x["count"] == 2 and x["snippet"] and x, what="the hits")
    assert "needle" in s["snippet"]


RENAME = {"telescope": "<M-r>", "fzf-lua": "<M-r>", "snacks": "<M-r>", "mini": "<M-r>"}
PIN = {"telescope": "<M-p>", "fzf-lua": "<M-p>", "snacks": "<M-t>", "mini": "<M-p>"}
INFO = "local i = require('pseudoclaude').sessions.info(...) return { title = i.title, pinned = i.pinned or false }"


@pytest.mark.parametrize("backend", BACKENDS)
def test_rename_and_pin_write_the_session_and_redraw_its_row(nvim, ws6, backend):
    n = start(nvim, backend)
    n.api.input(":PseudoResume<CR>")
    first = opened(n, backend, 6)["title"]
    n.api.input(NEXT[backend])
    title = wait_for(lambda: (x := read(n, backend)) and x["title"] != first and x, what="the second row")["title"]
    sid = by_title(ws6)[title]
    n.api.input(RENAME[backend])
    wait_for(lambda: n.api.api.get_mode()["mode"] == "c", what="the name asked for")  # fzf-lua: once fzf is closed
    n.api.input("<C-u>renamed by the picker<CR>")
    wait_for(lambda: n.lua(INFO, sid)["title"] == "renamed by the picker", what="the name on disk")
    s = wait_for(lambda: (x := read(n, backend)) and any("renamed by the picker" in r for r in x["rows"]) and x,
                 what="the row redrawn")
    assert not any(r.strip().startswith(title + " ") for r in s["rows"])
    # pin the highlighted one (in fzf-lua, reopened on the same query: the newest again)
    target = by_title(ws6).get(read(n, backend)["title"]) or sid
    n.api.input(PIN[backend])
    wait_for(lambda: n.lua(INFO, target)["pinned"] is True, what="the pin on disk")


FORK = {"telescope": "<M-f>", "fzf-lua": "<M-f>", "snacks": "<M-f>", "mini": "<M-f>"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_fork_resumes_a_copy_and_leaves_the_session(nvim, workspace, ws6, backend):
    n = start(nvim, backend)
    n.api.input(":PseudoResume<CR>")
    title = opened(n, backend, 6)["title"]
    sid = by_title(ws6)[title]
    before = (session_dir(workspace, sid) / "conversation.jsonl").read_bytes()
    n.api.input(FORK[backend])
    report = resumed(n)
    assert report["id"] not in ws6
    assert f"answer 1 to {title}" in transcript(n)
    assert (session_dir(workspace, sid) / "conversation.jsonl").read_bytes() == before
    assert read(n, backend) is None  # the picker closed


OTHER = {"telescope": "<M-o>", "fzf-lua": "<M-o>", "snacks": "<M-o>", "mini": "<M-o>"}
MODE = {"telescope": "<M-s>", "fzf-lua": "<M-s>", "snacks": "<C-g>", "mini": "<M-s>"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_agents_sessions_are_listed_and_imported_on_enter(start_nvim, workspace, sources, backend):
    write_session(workspace, session_id(1), chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    n = start(start_nvim(), backend)  # after `sources` set the tools' homes in the environment
    n.api.command("set columns=240")  # room for the titles in every picker's list
    n.api.input(":PseudoResume<CR>")
    opened(n, backend, 1)
    n.api.input(OTHER[backend])
    s = wait_for(lambda: (x := read(n, backend)) and x["count"] == 3 and x["title"] and x, what="the other agents' rows")
    assert any("[claude] Parser" in r for r in s["rows"]) and any("[codex] File" in r for r in s["rows"]), s["rows"]
    first = s["title"]
    while "File listing" not in (read(n, backend)["title"] or ""):
        n.api.input(NEXT[backend])
        wait_for(lambda: (x := read(n, backend)) and x["title"] != first and x, what="the next row")
        first = read(n, backend)["title"]
    n.api.input("<CR>")
    report = resumed(n)
    assert report["id"] != CODEX_ID
    loaded = n.lua("return require('pseudoclaude').sessions.load(...)", report["id"])
    assert len(loaded["messages"]) == 9


# fzf matches in its own process, on the query as typed: `agent:` terms are not read there (doc: pickers)
AGENT_TERMS = ["telescope", "snacks", "mini"]


@pytest.mark.parametrize("backend", AGENT_TERMS)
def test_agent_terms_keep_and_drop_rows_as_in_the_float_picker(start_nvim, workspace, sources, backend):
    # the float picker's rule (float/agents.lua): `agent:A,B` keeps those agents' rows, `-agent:A` leaves them out, a
    # NAME matches the agents it starts, `pseudoclaude` is our own agent; the rest of the prompt is the picker's match
    write_session(workspace, session_id(1), chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    n = start(start_nvim(), backend)
    n.api.command("set columns=240")
    n.api.input(":PseudoResume<CR>")
    opened(n, backend, 1)
    n.api.input(OTHER[backend])
    wait_for(lambda: (x := read(n, backend)) and x["count"] == 3 and x["title"] and x, what="the other agents' rows")
    typed = ""

    def query(text: str, wanted: list[str]) -> None:
        # the rows drawn are those `wanted` names, one each (a picker may count its matches before it draws them)
        nonlocal typed
        n.api.input("<BS>" * len(typed) + text)
        typed = text
        shown = lambda x: sorted(w for r in x["rows"] for w in wanted if w in r)  # noqa: E731
        wait_for(lambda: (x := read(n, backend)) and x["count"] == len(wanted) and not x.get("busy") and
                 shown(x) == sorted(wanted) and x, what=f"the rows of {text!r}: {wanted}")

    ours, claude, codex = "a session of ours", "[claude] Parser", "[codex] File"
    query("agent:claude", [claude])
    query("agent:claude,codex", [claude, codex])
    query("-agent:claude", [ours, codex])
    query("agent:pseudoclaude", [ours])
    query("agent:c listing", [codex])  # Claude Code's and Codex's kept, "listing" matched: Codex's
    query("agent:", [ours, claude, codex])  # a term being typed filters nothing
    n.api.input("<BS>" * len(typed) + "agent:codex")
    wait_for(lambda: (x := read(n, backend)) and x["count"] == 1 and x["agent"] == "codex" and x, what="Codex's row")
    n.api.input("<CR>")
    report = resumed(n)
    assert len(n.lua("return require('pseudoclaude').sessions.load(...)", report["id"])["messages"]) == 9


@pytest.mark.parametrize("backend", BACKENDS)
def test_agent_terms_choose_the_search_hits(start_nvim, workspace, sources, backend):
    # the search modes (fzf-lua's too: our search feeds it): the terms choose the hits, the rest is searched
    write_session(workspace, session_id(1), chat("our parser notes", ts=1_764_300_000), mtime=1_764_300_000)
    n = start(start_nvim(), backend)
    n.api.command("set columns=240")
    typed = "parser"
    n.api.input(f":PseudoSearch! {typed}<CR>")
    ours = lambda x: any("our parser notes" in r for r in x["rows"])  # noqa: E731
    claude = lambda x: any("[claude]" in r for r in x["rows"])  # noqa: E731
    wait_for(lambda: (x := read(n, backend)) and x["count"] > 1 and ours(x) and claude(x) and not x.get("busy") and x,
             what="the hits of ours and of Claude Code's session")
    for query, want_ours, want_claude in (("agent:claude parser", False, True), ("-agent:claude parser", True, False),
                                          ("agent:pseudoclaude,codex parser", True, False)):
        n.api.input("<BS>" * len(typed) + query)
        typed = query
        wait_for(lambda: (x := read(n, backend)) and x["count"] > 0 and not x.get("busy") and ours(x) == want_ours and
                 claude(x) == want_claude and x, what=f"the hits of {query!r}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_with_no_session_of_ours_the_picker_opens_on_the_other_agents(start_nvim, workspace, sources, backend):
    n = start(start_nvim(), backend)
    n.api.command("set columns=240")
    n.api.input(":PseudoResume<CR>")
    s = opened(n, backend, 2)
    assert any("[claude] Parser" in r for r in s["rows"]) and any("[codex] File" in r for r in s["rows"]), s["rows"]


# -- other agents' sessions in the search ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_search_with_other_agents_finds_claude_codes_session_and_enter_hands_it_over(
    nvim, workspace, tmp_path, fake_anthropic, backend
):
    # A Claude Code session made in a terminal by the real Claude Code CLI in this workspace, and one of ours
    # holding the same word.
    fake, home = fake_anthropic, tmp_path / "agent-home"
    home.mkdir()
    ours = session_id(1)
    write_session(workspace, ours, chat("our PLUMTREE notes", ts=1_764_300_000), mtime=1_764_300_000)
    theirs = terminal_session(fake, home, workspace, "remember the word PLUMTREE", "I will remember PLUMTREE.")
    row_id = "claude:" + theirs.stem
    n = nvim
    n.api.command("set columns=240 lines=48")  # fzf-lua's list is 40% of 80%: room for the snippets
    add_peers(n, backend)
    if SETUP[backend]:
        n.lua(SETUP[backend])
    claude_editor(n, fake, home, picker={"backend": backend})
    other = lambda x: "other agents" in (x.get("prompt_title") or "")  # noqa: E731
    # the rows as drawn: a picker may count its items before it draws them (snacks: its list on a timer of its own)
    claude_rows = lambda x: sum("[claude]" in r for r in x["rows"])  # noqa: E731
    drawn = lambda x: any(r.strip() for r in x["rows"])  # noqa: E731

    # :PseudoSearch! searches theirs after ours: their hits marked with the agent, the title saying so
    with main_loop_watch(n, f"{backend}'s search over our sessions and Claude Code's"):
        n.api.input(":PseudoSearch! PLUMTREE<CR>")
        s = wait_for(lambda: (x := read(n, backend)) and x["count"] == 4 and other(x) and not x.get("busy") and
                     claude_rows(x) == 2 and x, what="our two hits and Claude Code's two")
    # <M-o>: ours only, on the same query; kept through the list mode and back; then theirs again
    n.api.input(OTHER[backend])
    wait_for(lambda: (x := read(n, backend)) and x["count"] == 2 and not other(x) and drawn(x) and not claude_rows(x)
             and x, what="our hits only")
    n.api.input(MODE[backend])
    wait_for(lambda: (x := read(n, backend)) and x["count"] == 1 and drawn(x) and not claude_rows(x) and x,
             what="the list filtered by the query")
    n.api.input(MODE[backend])
    wait_for(lambda: (x := read(n, backend)) and x["count"] == 2 and not other(x) and x, what="our hits again")
    n.api.input(OTHER[backend])
    wait_for(lambda: (x := read(n, backend)) and x["count"] == 4 and other(x) and x, what="Claude Code's hits again")

    # the highlight on Claude Code's hit of the prompt: its preview is Claude Code's session around the message
    for _ in range(4):
        s = read(n, backend)
        if s["agent"] == "claude" and "remember the word PLUMTREE" in (s["snippet"] or ""):
            break
        n.api.input(NEXT[backend])
        wait_for(lambda: (x := read(n, backend)) and x["snippet"] != s["snippet"] and x, what="the next hit")
    assert s["agent"] == "claude" and "remember the word PLUMTREE" in s["snippet"], s
    if backend == "mini":
        n.api.input("<Tab>")  # mini.pick shows the preview in place of the list
    p = wait_for(lambda: (x := read(n, backend)["preview"]) and any("Claude Code session" in line for line in x) and x,
                 what="Claude Code's session in the preview")
    assert any("remember the word PLUMTREE" in line for line in p), p

    # <CR>: handed over to claude-agent-acp, which loads that very session (as <CR> on its hit in the float)
    n.api.input("<CR>")
    report = resumed(n)
    assert report["ok"] is True and report["id"] != ours, report
    wait_for(lambda: "session/load" in chat_text(n), timeout=90, what="the agent's load")
    text = chat_text(n)
    assert "continued by claude, which loads the session itself" in text, text
    assert text.count("I will remember PLUMTREE.") == 1, text
    assert [c["agent"] for c in n.lua("return require('pseudoclaude').chats()")] == ["claude"]
    loaded = n.lua("return require('pseudoclaude').sessions.load(...)", report["id"])
    assert [m["content"] for m in loaded["messages"]] == ["remember the word PLUMTREE", "I will remember PLUMTREE."]
    assert read(n, backend) is None  # the picker closed
    quit_editor(n, home)
