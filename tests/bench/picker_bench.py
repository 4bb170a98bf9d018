#!/usr/bin/env python3
"""Session picker benchmark: how fast `:PseudoResume` shows rows, the preview, and filters as you type.

For each size (default 1,000 and 10,000 sessions) it writes real sessions to disk (small JSONL logs with valid ids
and varied titles, as the Rust writer leaves them), warms their `summary.json` caches with one full list, then in a
headless Neovim (200x50) measures, over several rounds:

  rows      `:PseudoResume` until the first rows are in the results buffer (the command and the windows, then
            `list_async{limit = 9}` on the core's threads, then the rows)
  preview   `:PseudoResume` until the first preview is drawn (the above plus loading and rendering one session)
  full list the full list, read on a background thread from the first draw on, in place for filtering; and the
            main thread's share of it (decoding it, preparing the matcher, applying the query)
  ahead     the rows of the list's first 2,000 sessions made in idle time after the full list (float/rows.lua);
            the keystrokes are typed once that is done, as a person starts typing well after the picker shows
  keystroke one typed character: filter the sessions, draw the visible rows and their match highlights
            (median of the 5 characters of "parse", and the first one, which searches the most sessions)
  +preview  the preview redrawn after a keystroke (loading the top match's session)

The time of the first `:PseudoResume` in a fresh Neovim (loading the modules and the native library) is shown
apart. Then the matcher alone, both engines, on the same texts: `lua` (plain Lua, the default) and `vim`
(`vim.fn.matchfuzzy`, C). All times are measured inside Neovim with `vim.uv.hrtime()`; medians.

Side by side, in the same Neovim and the same rounds (alternating with ours), mini.pick (mini.nvim):
`MiniPick.start({ source = { items = <strings> } })` over in-memory strings, the very texts our picker filters
(title, model, id of each session), measured the same way: start until its first rows are drawn, and each typed
character of "parse" until the rows of the new matches are drawn. Its start blocks in a `getcharstr()` loop, so it
is started from a scheduled callback and typed into with `nvim_input()`, as its own tests do; "drawn" is taken
from hooks outside it (see MINI_SETUP). mini.nvim is never part of this project: it is read at run time from a
git repository or a checkout given by --mini or $PSEUDOCLAUDE_BENCH_MINI (a git repository's lua/mini/pick.lua is
extracted into the git-ignored .deps/mini.nvim; a copy left there by an earlier run is used when neither is given).
To get it: `git clone https://github.com/echasnovski/mini.nvim` anywhere, then `--mini that/folder`. Without it
the mini.pick column is left out, with a note saying why.

Usage: tests/bench/picker_bench.py [--sizes 1000,10000] [--rounds 7] [--mini PATH | --no-mini] [--write]
  --write    also replace the "## Picker" section of doc/benchmarks.md with the results
  --mini     mini.nvim to compare with: a git repository (bare or not) or a checkout with lua/mini/pick.lua
  --no-mini  measure our picker only
Needs the release library (cargo build --release) and Neovim (scripts/ensure-nvim provides one).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / ".deps" / "python"))
if not os.environ.get("PSEUDOCLAUDE_NVIM_BIN"):
    os.environ["PSEUDOCLAUDE_NVIM_BIN"] = subprocess.run(
        [str(ROOT / "scripts" / "ensure-nvim")], check=True, capture_output=True, text=True
    ).stdout.strip()

from conftest import NVIM, Neovim  # noqa: E402
from session_files import chat, session_dir, session_id, write_session  # noqa: E402

QUERY = "parse"
AHEAD = 2000  # float/rows.lua M.AHEAD

VERBS = ["fix", "refactor", "explain", "add tests for", "speed up", "document", "review", "debug", "port", "clean up"]
THINGS = [
    "the parser",
    "session list",
    "lock handling",
    "the picker layout",
    "provider retries",
    "tool approval",
    "JSON encoding",
    "config validation",
    "the health check",
    "spill files",
    "error messages",
    "the CLI",
]
WHERE = ["in lua", "in rust", "on macOS", "for big logs", "after a crash", "", "", ""]
MODELS = ["claude-sonnet-4", "gpt-5", "claude-opus-4", "o4-mini", "demo"]


def make_sessions(ws: Path, n: int, lock_files: bool = True) -> None:
    """`n` sessions, each with the lock file its writer leaves (`lock_files`), or without (the seed's layout, folders
    copied from another machine or made by a script)."""
    rnd = random.Random(n)
    now = time.time()
    # The writer's activity hint (src/session/activity.rs): one line per entry written, oldest first.
    activity = []
    for i in range(n):
        title = f"{rnd.choice(VERBS)} {rnd.choice(THINGS)} {rnd.choice(WHERE)}".strip()
        mtime = now - (n - i) * 600
        write_session(
            ws,
            session_id(i),
            chat(title, ts=int(mtime) - 60, model=rnd.choice(MODELS), replies=rnd.randint(1, 4)),
            mtime=mtime,
        )
        if lock_files:
            (session_dir(ws, session_id(i)) / "lock").touch()  # as the writer leaves it
        activity.append(f"{session_id(i)} {int(mtime)}\n")
    (ws / ".PseudoClaude" / "sessions" / "activity").write_text("".join(activity))


OPEN = """
local picker = require("pseudoclaude.float")
local t0 = vim.uv.hrtime()
vim.cmd("PseudoResume")
_G.bench_open_t0 = t0
"""

# The first rows are listed on the core's threads and put in the buffer when they arrive, then drawn on the screen
# by the next redraw (its end: KEYS_SETUP); the preview in the main-loop step after them: nil until then.
ROWS_AT = """
local s = require("pseudoclaude.float").get_state()
local ks = _G.bench_keys
if not (s and ks.rows_state == s) then return vim.NIL end
return { rows = (ks.rows_end - _G.bench_open_t0) / 1e6, list = s.stats.list_ms }
"""
PREVIEW_AT = """
local s = require("pseudoclaude.float").get_state()
return s and s.stats.preview_at and (s.stats.preview_at - _G.bench_open_t0) / 1e6 or vim.NIL
"""

STATS = """
local s = require("pseudoclaude.float").get_state()
if not s then return vim.NIL end
return { full = s.full, full_ms = s.full and (s.stats.full_at - s.stats.opened_at) / 1e6 or vim.NIL,
         full_apply = s.stats.full_apply_ms or vim.NIL,
         ahead_ms = s.stats.ahead_at and (s.stats.ahead_at - s.stats.opened_at) / 1e6 or vim.NIL,
         filters = s.stats.filters, previews = s.stats.previews,
         query = s.query, count = #s.matches, items = s.count, preview_id = s.preview_id,
         selected = (require("pseudoclaude.float").selected() or {}).id }
"""

MATCHER = """
local engine, query, rounds = ...
local matcher = require("pseudoclaude.float.matcher")
local items = require("pseudoclaude").sessions.list({ check_locks = false })
local hay = {}
for i, item in ipairs(items) do hay[i] = item.title .. " " .. item.model .. " " .. item.id end
local t = vim.uv.hrtime()
local m = matcher.new(hay, engine)
local build = (vim.uv.hrtime() - t) / 1e6
local per_key, first_key, counts = {}, {}, {}
for r = 1, rounds do
  local prev = nil
  for k = 1, #query do
    local q = query:sub(1, k)
    local t0 = vim.uv.hrtime()
    prev = m:filter(q, prev)
    local ms = (vim.uv.hrtime() - t0) / 1e6
    table.insert(per_key, ms)
    if k == 1 then table.insert(first_key, ms) end
    counts[k] = #prev
  end
end
table.sort(per_key) table.sort(first_key)
return { build = build, key = per_key[math.ceil(#per_key / 2)], first = first_key[math.ceil(#first_key / 2)],
         counts = counts }
"""


LISTS = """
local sessions = require("pseudoclaude").sessions
local t = vim.uv.hrtime()
sessions.list({ limit = 9 })
local a = (vim.uv.hrtime() - t) / 1e6
t = vim.uv.hrtime()
sessions.list()
local b = (vim.uv.hrtime() - t) / 1e6
t = vim.uv.hrtime()
sessions.list({ check_locks = false })
return { a, b, (vim.uv.hrtime() - t) / 1e6 }
"""

ASYNC = """
_G.bench_async = nil
-- `sessions.list_async()`: the list arrives packed and its rows are built LIST_STEP per main-loop step: "decode" is
-- the slowest step (the picker itself builds none: it reads the rows it draws)
local sessions = require("pseudoclaude.sessions")
sessions.list_packed({ check_locks = true }, function(err, list)
  local rows, step, slowest = require("pseudoclaude.session_rows"), sessions.LIST_STEP, 0
  for from = 1, list.count, step do
    local t = vim.uv.hrtime()
    rows.fill(list, from, math.min(from + step - 1, list.count), {})
    slowest = math.max(slowest, (vim.uv.hrtime() - t) / 1e6)
  end
  _G.bench_async = { decode = slowest, n = list.count }
end)
"""

# mini.pick, side by side. Its items: the texts our picker filters (`H.set_items` in lua/pseudoclaude/float.lua),
# read once here, in memory from then on. 'ignorecase' + 'smartcase' make its matching case-insensitive for a
# lower-case query, as ours is (mini.pick follows those options; ours is smart-case on its own).
#
# When are its rows drawn? mini.pick draws synchronously and then runs `:redraw` itself (`H.picker_update`:
# matches, border text, `source.show` (buffer lines + match highlights), current line, `redraw`). So:
# - `nvim_buf_attach` on its results buffer (it sets 'filetype' minipick on it while opening) flags that its rows
#   changed, and whether the first row is non-empty;
# - the first redraw to begin after such a change (a decoration provider's `on_start`) draws them: its end
#   (`on_end`, every window drawn) is "rows drawn", for ours too (KEYS_SETUP): our rows' highlights are drawn during
#   the redraw itself (float/rows.lua's decoration provider), so an end point before it would leave them out;
# - `vim.on_key` (its `getcharstr()` has taken a typed key) starts a keystroke.
# A redraw without a change of rows is not counted: its first `show` (no items yet, empty), and the redraw after a
# keystroke whose matching has yielded (it matches in a coroutine, 10 ms slices) while the old rows stay.
MINI_SETUP = """
local dir, external = ...
vim.opt.rtp:prepend(dir)
vim.o.ignorecase, vim.o.smartcase = true, true
require("mini.pick").setup()
local mp = { on = false, keys = {} }
_G.bench_mp = mp
mp.items = {}
for i, item in ipairs(require("pseudoclaude").sessions.list({ check_locks = false, external = external == true })) do
  mp.items[i] = (item.title or "") .. " " .. (item.model or "") .. " " .. item.id
end
local ns = vim.api.nvim_create_namespace("pseudoclaude_bench_minipick")
vim.api.nvim_create_autocmd("FileType", { pattern = "minipick", callback = function(ev)
  vim.api.nvim_buf_attach(ev.buf, false, { on_lines = function(_, buf)
    if mp.on then
      mp.dirty = true
      mp.nonempty = (vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] or "") ~= ""
    end
  end })
end })
vim.on_key(function()
  if mp.on and mp.rows_ms then
    mp.key_at, mp.dirty = vim.uv.hrtime(), false
  end
end, ns)
vim.api.nvim_set_decoration_provider(ns, {
  on_start = function()
    if mp.on and mp.dirty then
      mp.dirty, mp.drawing = false, true
    end
  end,
  on_end = function()
    if not mp.drawing then return end
    local now = vim.uv.hrtime()
    mp.drawing = false
    if not mp.rows_ms then
      if mp.nonempty then mp.rows_ms = (now - mp.opened_at) / 1e6 end
    elseif mp.key_at then
      mp.keys[#mp.keys + 1] = (now - mp.key_at) / 1e6
      mp.key_at = nil
    end
  end,
})
return #mp.items
"""

MINI_OPEN = """
local mp = _G.bench_mp
mp.on, mp.rows_ms, mp.keys, mp.key_at, mp.dirty, mp.nonempty, mp.drawing = true, nil, {}, nil, false, false, false
vim.schedule(function()
  mp.opened_at = vim.uv.hrtime()
  MiniPick.start({ source = { items = mp.items, name = "Sessions" } })
end)
"""

# Ours, timed as mini.pick's, to the end of the first redraw after the rows are in the buffer: the first rows (from
# `:PseudoResume`), and each keystroke, from `vim.on_key` (the prompt's handler then filters and puts the rows in
# the buffer: a new entry in the picker's `stats.filters`).
KEYS_SETUP = """
local ks = { on = false, keys = {}, key_ats = {} }
_G.bench_keys = ks
local ns = vim.api.nvim_create_namespace("pseudoclaude_bench_keys")
local function filters()
  local s = require("pseudoclaude.float").get_state()
  return s and #s.stats.filters or -1
end
vim.on_key(function(_, typed)
  -- a key typed, not one fed by the picker itself (float.lua's <Plug> key that runs its prompt's handler)
  if ks.on and typed ~= "" then
    ks.key_at, ks.filters = vim.uv.hrtime(), filters()
    ks.key_ats[#ks.key_ats + 1] = ks.key_at
  end
end, ns)
vim.api.nvim_set_decoration_provider(ns, { on_end = function()
  local s = require("pseudoclaude.float").get_state()
  if s and s.stats.rows_at and ks.rows_state ~= s then
    ks.rows_state, ks.rows_end = s, vim.uv.hrtime() -- the first rows on the screen
  end
  if ks.key_at and filters() > ks.filters then
    ks.keys[#ks.keys + 1] = (vim.uv.hrtime() - ks.key_at) / 1e6
    ks.key_at = nil
  end
end })
"""

# polled while it runs: kept cheap, as it is served whenever mini.pick yields to the event loop
MINI_POLL = """
local mp = _G.bench_mp
return { rows = mp.rows_ms or vim.NIL, keys = #mp.keys, active = MiniPick.is_picker_active() }
"""

MINI_DONE = """
local mp = _G.bench_mp
return { keys = mp.keys, query = table.concat(MiniPick.get_picker_query() or {}),
         count = #((MiniPick.get_picker_matches() or {}).all_inds or {}) }
"""

# telescope's own sorter (its default `generic_sorter`, fzy) over the same texts, as its picker runs it on a keystroke:
# `Sorter:score` of every entry for the new prompt (entries it discarded for a prefix of the prompt are skipped).
# The sorter alone: its picker then also inserts each scored entry in its sorted results and draws them.
TELESCOPE = """
local telescope_dir, plenary_dir, query, rounds = ...
vim.opt.rtp:prepend(plenary_dir)
vim.opt.rtp:prepend(telescope_dir)
local entries = {}
for i, text in ipairs(_G.bench_mp.items) do entries[i] = { ordinal = text } end
local per_key, first_key, counts = {}, {}, {}
for r = 1, rounds do
  local sorter = require("telescope.sorters").get_fzy_sorter()
  sorter:_init()
  for k = 1, #query do
    local q = query:sub(1, k)
    local n = 0
    local add = function() n = n + 1 end
    local filter = function() end
    local t0 = vim.uv.hrtime()
    sorter:_start(q)
    for i = 1, #entries do sorter:score(q, entries[i], add, filter) end
    local ms = (vim.uv.hrtime() - t0) / 1e6
    per_key[#per_key + 1] = ms
    if k == 1 then first_key[#first_key + 1] = ms end
    counts[k] = n
  end
end
table.sort(per_key) table.sort(first_key)
return { key = per_key[math.ceil(#per_key / 2)], first = first_key[math.ceil(#first_key / 2)], counts = counts }
"""

# ../shared/peers ($PSEUDOCLAUDE_PEERS, as the e2e tests): read at run time, never part of the project
PEERS = Path(os.environ.get("PSEUDOCLAUDE_PEERS") or ROOT.parent / "shared" / "peers")
MINI_DEPS = ROOT / ".deps" / "mini.nvim"  # git-ignored


def git_out(*args: str) -> str | None:
    r = subprocess.run(["git", *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def obtain_mini(spec: str | None) -> tuple[Path | None, str]:
    """mini.nvim for the side-by-side run, at run time: (runtime dir, what it is) or (None, why not).

    `spec` (or $PSEUDOCLAUDE_BENCH_MINI) is a checkout with lua/mini/pick.lua, used in place, or a git repository,
    bare or not, whose HEAD's lua/mini/pick.lua (and LICENSE) is extracted into .deps/mini.nvim. Without either, a
    copy left in .deps/mini.nvim by an earlier run is used."""
    explicit = spec or os.environ.get("PSEUDOCLAUDE_BENCH_MINI")
    if not explicit and (PEERS / "mini.nvim" / "lua" / "mini" / "pick.lua").is_file():
        explicit = str(PEERS / "mini.nvim")
    if not explicit:
        if (MINI_DEPS / "lua" / "mini" / "pick.lua").is_file():
            rev = (MINI_DEPS / "REVISION").read_text().strip() if (MINI_DEPS / "REVISION").is_file() else "mini.nvim"
            return MINI_DEPS, f"{rev} (the copy left by an earlier run)"
        return None, ("no mini.nvim given: pass --mini PATH (a clone of https://github.com/echasnovski/mini.nvim) "
                      "or set $PSEUDOCLAUDE_BENCH_MINI")
    src = Path(explicit).expanduser()
    if (src / "lua" / "mini" / "pick.lua").is_file():
        top = git_out("-C", str(src), "rev-parse", "--show-toplevel")
        if top and Path(top).resolve() == src.resolve():
            rev = git_out("-C", str(src), "log", "-1", "--format=%h (%cs)")
            return src.resolve(), f"mini.nvim {rev}, a checkout read in place"
        if (src / "REVISION").is_file():  # a copy this script extracted
            return src.resolve(), (src / "REVISION").read_text().strip()
        return src.resolve(), "mini.nvim (revision unknown), a copy read in place"
    gitdir = src / ".git" if (src / ".git").exists() else src
    commit = git_out(f"--git-dir={gitdir}", "rev-parse", "--verify", "HEAD^{commit}") if src.exists() else None
    if commit:
        archive = None
        for paths in (["lua/mini/pick.lua", "LICENSE"], ["lua/mini/pick.lua"]):
            r = subprocess.run(["git", f"--git-dir={gitdir}", "archive", commit, *paths], capture_output=True)
            if r.returncode == 0:
                archive = r.stdout
                break
        if archive is None:
            return None, f"{src} has no lua/mini/pick.lua at HEAD"
        shutil.rmtree(MINI_DEPS, ignore_errors=True)
        MINI_DEPS.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(MINI_DEPS, filter="data")
            else:
                tar.extractall(MINI_DEPS)
        rev = git_out(f"--git-dir={gitdir}", "log", "-1", "--format=%h (%cs)", commit) or commit[:12]
        what = f"mini.nvim {rev}, extracted at run time from a local git repository into `.deps/mini.nvim`"
        (MINI_DEPS / "REVISION").write_text(what + "\n")
        return MINI_DEPS, what
    return None, f"no mini.nvim at {src} (neither a checkout with lua/mini/pick.lua nor a git repository)"


def wait_for(fn, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.005)


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def mini_round(nv: Neovim) -> dict:
    """One mini.pick round: start until the first rows are drawn, then "parse" typed one key at a time."""
    # RPC requests are served whenever mini.pick yields to the event loop (it sets its items on the next turn, and
    # matches in 10 ms slices), so the polling starts only once it has had time to draw
    nv.lua(MINI_OPEN)
    time.sleep(0.05)
    rows = wait_for(lambda: (x := nv.lua(MINI_POLL)) and x["rows"] is not None and x)["rows"]
    for k, ch in enumerate(QUERY, 1):
        nv.api.input(ch)
        time.sleep(0.02)
        wait_for(lambda k=k: nv.lua(MINI_POLL)["keys"] >= k)
    done = nv.lua(MINI_DONE)
    assert done["query"] == QUERY, done["query"]
    nv.api.input("<Esc>")
    wait_for(lambda: not nv.lua(MINI_POLL)["active"])
    nv.lua("_G.bench_mp.on = false")
    return {"rows": rows, "keys": done["keys"], "count": done["count"]}


def bench_size(n: int, rounds: int, tmp: Path, mini: Path | None, telescope: Path | None) -> dict[str, float]:
    ws = tmp / f"ws{n}"
    ws.mkdir()
    t = time.monotonic()
    make_sessions(ws, n)
    print(f"  {n} sessions written in {time.monotonic() - t:.1f} s", file=sys.stderr)
    nv = Neovim(ws)
    try:
        nv.api.command("set columns=200 lines=50")
        nv.lua("package.loaded['pseudoclaude.chat'] = { resume = function() end, current = function() return nil end }")
        # cold: modules and the native library load during this first open (the caches are not warm yet either,
        # so warm them first with a list that does not load the picker)
        nv.lua("require('pseudoclaude.core').call('sessions_list', vim.uv.cwd(), { limit = 1 })")
        nv.lua("require('pseudoclaude.core').call('sessions_list', vim.uv.cwd(), {})")  # writes summary.json
        nv.lua(KEYS_SETUP)
        nv.lua(OPEN)
        cold = wait_for(lambda: nv.lua(ROWS_AT))
        cold["preview"] = wait_for(lambda: nv.lua(PREVIEW_AT))
        wait_for(lambda: (s := nv.lua(STATS)) and s["full"], timeout=300)
        nv.api.input("<Esc>")
        wait_for(lambda: nv.lua(STATS) is None)
        if mini:
            assert nv.lua(MINI_SETUP, str(mini)) == n
            mini_round(nv)  # warm-up, not counted (ours had its cold open above)

        res: dict[str, list[float]] = {
            k: []
            for k in ("rows", "own", "preview", "full", "full_apply", "ahead", "key", "key1", "key_gc", "key_handler",
                      "key_cpu", "kpreview")
        }
        mres: dict[str, list[float]] = {"mini_rows": [], "mini_key": [], "mini_key1": []}
        mini_matches = None
        # each side starts its round on a collected heap: what the other left (ours keeps its rows made ahead until
        # it closes, then they are garbage) is not swept during its keystrokes
        # (the hooks drop their reference to our closed picker first); and with no code compiled by LuaJIT, as ours
        # starts (float.lua flushes LuaJIT's traces at each open and close, H.drop_traces): mini.pick's round, right
        # after our close, would otherwise start flushed and ours not, or the other way round
        collect = "_G.bench_keys.rows_state = nil collectgarbage('collect') if jit then jit.flush() end"
        for _ in range(rounds):
            nv.lua(collect)
            nv.lua(OPEN)
            o = wait_for(lambda: nv.lua(ROWS_AT))
            res["rows"].append(o["rows"])
            res["preview"].append(wait_for(lambda: nv.lua(PREVIEW_AT)))
            res["own"].append(o["rows"] - o["list"])
            s = wait_for(lambda: (x := nv.lua(STATS)) and x["full"] and x, timeout=300)
            res["full"].append(s["full_ms"])
            # a person starts typing well after the picker is on the screen: the rows it makes ahead, in idle time,
            # are made by then (float/rows.lua H.ahead); timed apart
            s = wait_for(lambda: (x := nv.lua(STATS)) and x.get("ahead_ms") and x, timeout=300)
            res["ahead"].append(s["ahead_ms"])
            res["full_apply"].append(s["full_apply"])
            nv.lua("_G.bench_keys.on, _G.bench_keys.keys, _G.bench_keys.key_ats = true, {}, {}")
            for k, ch in enumerate(QUERY, 1):
                nv.api.input(ch)
                s = wait_for(lambda k=k: (x := nv.lua(STATS)) and len(x["filters"]) >= k and x)
                wait_for(lambda k=k: len(nv.lua("return _G.bench_keys.keys")) >= k)
            keys = nv.lua("_G.bench_keys.on = false return _G.bench_keys.keys")
            # the collector's step each keystroke's handler deferred (float.lua `between_collections`), done
            s = wait_for(lambda: (x := nv.lua(STATS)) and all(f.get("collected_at") for f in x["filters"]) and x)
            key_ats = nv.lua("return _G.bench_keys.key_ats")
            assert s["query"] == QUERY, s["query"]
            assert len(key_ats) == len(s["filters"]) == len(QUERY), (len(key_ats), len(s["filters"]))
            res["key_gc"].extend((f["collected_at"] - at) / 1e6 for f, at in zip(s["filters"], key_ats))
            res["key"].extend(keys)
            res["key1"].append(keys[0])
            res["key_handler"].extend(f["ms"] for f in s["filters"])
            res["key_cpu"].extend(f["cpu_ms"] for f in s["filters"])
            # the preview follows the highlight; typing the query mostly keeps the same session highlighted (it
            # still matches), which then has nothing new to draw: so the keystroke timed here is <C-n>, to the
            # next match, whose preview is read in the background and drawn
            s = wait_for(lambda: (x := nv.lua(STATS)) and x.get("preview_id") == x.get("selected") and x)
            matches, before, previews_before = s["count"], s["selected"], len(s["previews"])
            nv.api.input("<C-n>")
            s = wait_for(lambda: (x := nv.lua(STATS)) and x["selected"] != before
                         and x.get("preview_id") == x.get("selected") and len(x["previews"]) > previews_before and x)
            res["kpreview"].extend(p["ms"] + p.get("wait_ms", 0) for p in s["previews"][previews_before:])
            nv.api.input("<Esc>")
            wait_for(lambda: nv.lua(STATS) is None)
            if mini:  # same round, right after ours
                nv.lua(collect)
                m = mini_round(nv)
                mres["mini_rows"].append(m["rows"])
                mres["mini_key"].extend(m["keys"])
                mres["mini_key1"].append(m["keys"][0])
                mini_matches = m["count"]
        engines = {e: nv.lua(MATCHER, e, QUERY, rounds) for e in ("rust", "lua", "vim")}
        tele = None
        if mini and telescope:  # the same texts as mini.pick's
            tele = nv.lua(TELESCOPE, str(telescope), str(telescope.parent / "plenary.nvim"), QUERY, rounds)
        timed = [nv.lua(LISTS) for _ in range(rounds)]
        limited = [med([t[k] for t in timed]) for k in range(3)]
        decode = []
        for _ in range(3):
            nv.lua(ASYNC)
            decode.append(wait_for(lambda: nv.lua("return _G.bench_async"))["decode"])
    finally:
        nv.close()
    out = {k: med(v) for k, v in res.items()}
    out["decode"] = med(decode)
    out.update(
        n=n,
        cold_rows=cold["rows"],
        cold_preview=cold["preview"],
        matches=matches,
        list9=limited[0],
        list_all=limited[1],
        list_all_nolocks=limited[2],
    )
    if mini:
        out.update({k: med(v) for k, v in mres.items()}, mini_matches=mini_matches)
    if tele:
        out.update(tele_key=tele["key"], tele_key1=tele["first"], tele_matches=tele["counts"][-1])
    for e, r in engines.items():
        out[f"{e}_key"], out[f"{e}_first"], out[f"{e}_build"] = r["key"], r["first"], r["build"]
        out["counts"] = r["counts"]
    return out


def fmt(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"


def table(results: list[dict[str, float]]) -> str:
    sizes = [f"{int(r['n']):,} sessions" for r in results]
    rows = [
        ("`:PseudoResume` → first rows drawn", "rows"),
        ("… of which after `list_async({ limit = 9 })` answered (the rows drawn; the windows are made while the "
         "core reads it)", "own"),
        ("`:PseudoResume` → first preview drawn", "preview"),
        ("full list in place for filtering, read in the background (from `:PseudoResume`)", "full"),
        (f"rows of the list's first {AHEAD:,} sessions made ahead, in idle time, steps of at most 0.5 ms (from "
         "`:PseudoResume`; the keystrokes below are typed after)", "ahead"),
        ("`sessions.list_async()` (not the picker's): rows built from the packed list, slowest main-loop step "
         "(2,000 a step)", "decode"),
        ("main thread's share: the packed list and the core's matcher taken, query applied, rows drawn (one step)",
         "full_apply"),
        (f"keystroke: key taken → its rows drawn on the screen (median of the 5 of {QUERY!r})", "key"),
        ("keystroke: the first one (searches every session)", "key1"),
        ("keystroke: key taken → rows on the screen and the collector's step the handler deferred done (median of "
         "the 5)", "key_gc"),
        ("keystroke: the prompt's handler alone (filter, rows put in the buffer; median of the 5)", "key_handler"),
        ("keystroke: CPU time of the editor process in it (`os.clock()`, median of the 5; the wall times above "
         "include waiting for a core on a loaded machine)", "key_cpu"),
        ("preview redrawn after a keystroke (`<C-n>` to the next match: read in the background, then drawn)",
         "kpreview"),
        ("first `:PseudoResume` in a fresh Neovim (Lua modules load) → first rows", "cold_rows"),
        ("`sessions.list({ limit = 9 })`", "list9"),
        ("`sessions.list()` (with lock checks)", "list_all"),
        ("`sessions.list({ check_locks = false })`", "list_all_nolocks"),
        ("matcher `rust` (the picker's): one keystroke of 'parse', narrowing (median)", "rust_key"),
        ("matcher `rust`: first keystroke 'p'", "rust_first"),
        ("matcher `lua`: one keystroke of 'parse', narrowing (median)", "lua_key"),
        ("matcher `lua`: first keystroke 'p'", "lua_first"),
        ("matcher `vim` (`matchfuzzy`): one keystroke, narrowing (median)", "vim_key"),
        ("matcher `vim` (`matchfuzzy`): first keystroke 'p'", "vim_first"),
        ("matcher `lua`: preparing the texts (lower-casing, once per picker)", "lua_build"),
        ("matcher `rust`: handing the texts to the core (once per picker)", "rust_build"),
    ]
    lines = ["| Measure | " + " | ".join(sizes) + " |"]
    lines.append("|---|" + "---|" * len(sizes))
    for label, key in rows:
        lines.append(f"| {label} | " + " | ".join(fmt(r[key]) if key in r else "-" for r in results) + " |")
    return "\n".join(lines)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x"


def side_by_side(results: list[dict[str, float]]) -> str:
    """Ours against mini.pick (and telescope's sorter, when measured), same run: one row per measure and size."""
    rows = [
        ("start → first rows drawn", "rows", "mini_rows", None),
        (f"keystroke: key taken → rows drawn on the screen (median of the 5 of {QUERY!r})", "key", "mini_key",
         "tele_key"),
        (f"keystroke: the first one, {QUERY[0]!r} (searches every item)", "key1", "mini_key1", "tele_key1"),
        ("keystroke, ours to the end of the collector's step its handler deferred past the redraw (mini.pick's "
         "collector runs within its keystroke: the same row as above)", "key_gc", "mini_key", None),
    ]
    tele = any("tele_key" in r for r in results)
    head = "| Measure | Items | pseudoclaude `:PseudoResume` (sessions read from disk) "
    head += "| mini.pick `MiniPick.start` (in-memory strings) | Ratio, ours / mini.pick |"
    if tele:
        head += " telescope's fzy sorter alone (same strings) | Ratio, ours / telescope's sorter |"
    lines = [head, "|---|---|---|---|---|" + ("---|---|" if tele else "")]
    for label, ours, theirs, tel in rows:
        for r in results:
            line = f"| {label} | {int(r['n']):,} | {fmt(r[ours])} | {fmt(r[theirs])} | {ratio(r[ours], r[theirs])} |"
            if tele:
                line += f" {fmt(r[tel])} | {ratio(r[ours], r[tel])} |" if tel and tel in r else " - | - |"
            lines.append(line)
    for r in results:
        line = f"| matches for {QUERY!r} (sanity) | {int(r['n']):,} | {r['matches']} | {r['mini_matches']} | - |"
        if tele:
            line += f" {r.get('tele_matches', '-')} | - |"
        lines.append(line)
    return "\n".join(lines)


def machine() -> str:
    try:
        cpu = next(
            (l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine()
        )
    except OSError:
        cpu = platform.machine()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"nproc {os.cpu_count()}, {cpu}, Linux {platform.release()}, load average at start {load}"


def wrap(text: str, indent: int = 0) -> str:
    """Fills `text` to the doc's width, never breaking inside `code`; `indent` = what precedes it on its line."""
    text = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), text)
    filled = textwrap.fill(
        text, 116, initial_indent=" " * indent, break_long_words=False, break_on_hyphens=False
    )
    return filled[indent:].replace("\0", " ")


def para(text: str) -> str:
    """A paragraph written over several source lines, refilled to the doc's width."""
    return wrap(" ".join(text.split()))


def section(results: list[dict[str, float]], rounds: int, total: float, mini: str, mini_ok: bool) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    nvim_version = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    big = results[-1]
    verdict = (
        f"With {int(big['n']):,} sessions the first rows take {fmt(big['rows'])}, of which "
        f"`sessions.list_async({{ limit = 9 }})` takes {fmt(big['rows'] - big['own'])} to answer (the windows are "
        f"made meanwhile): it finds the newest sessions from the writers' activity hint (`sessions/activity`, read "
        f"from its tail) instead of a `stat` per log, and summarises only those; the rows are on the screen "
        f"{fmt(big['own'])} after it answers. The full list arrives in the background, packed, with the core's matcher over it built on the same thread, and costs the main thread "
        f"{fmt(big['full_apply'])} (one step) when it does: a row is built when it is drawn."
    )
    if mini_ok:
        parts = [
            f"{int(r['n']):,} items: first rows in {ratio(r['rows'], r['mini_rows'])} of mini.pick's time, "
            f"a keystroke in {ratio(r['key'], r['mini_key'])} ({ratio(r['key_gc'], r['mini_key'])} to the end of the "
            f"collector's step it defers)"
            for r in results
        ]
        verdict = "; ".join(parts) + " (same run). " + verdict
        setup = para(
            f"""mini.pick: {mini}; the same Neovim, alternating with ours in every round (one warm-up round of it
            first, not counted). Default configuration (`setup()`), plus 'ignorecase' and 'smartcase' so that its
            matching is case-insensitive for a lower-case query, as ours is."""
        )
        work = para(
            """Not the same work: ours reads the sessions from disk (`sessions.list({ limit = 9 })` in the first
            rows; the full list on a background thread), draws three windows (results, prompt, preview) and formats
            each row (title, age, message count, model, aligned); mini.pick is handed the strings in memory (the very
            texts ours filters: title, model and id of each session) and shows them as they are, in one window. Both
            match fuzzily and sort by match quality; ours narrows (each typed character searches only the previous
            matches), as mini.pick does."""
        )
        drawn = para(
            """How "rows drawn" is detected for mini.pick, from outside it (it is not modified): it draws
            synchronously and then runs `:redraw` itself. `nvim_buf_attach` on its results buffer (found by its
            'filetype', `minipick`) flags that its rows changed; the next redraw to begin after such a change draws
            them, and its end (a decoration provider's `on_end`: every window drawn, lines, highlights and current
            line on the screen) is "drawn". Ours is measured to the same point: the end of the first redraw after its
            rows are in the buffer (our rows' highlights are drawn during that redraw, by a decoration provider).
            First rows: from just before `MiniPick.start()` (called from a scheduled
            callback, since it then waits for keys in a `getcharstr()` loop) to the end of the first such redraw with a
            non-empty first row; it sets its items on the next turn of the event loop. Keystroke: from `vim.on_key`
            (its `getcharstr()` took the key, sent with `nvim_input()`) to the end of the first redraw after its rows changed
            (it then draws the same rows once more before waiting for the next key: not counted); a redraw while it
            is still matching (in a coroutine, 10 ms slices) is not counted either. The bench polls it only once it
            has had time to draw (its RPC requests are served whenever mini.pick yields to the event loop). Each
            side's round starts on a collected heap (`collectgarbage('collect')`: what the other left is not swept
            during its keystrokes) and with none of LuaJIT's compiled code (`jit.flush()`, as our picker flushes it at
            each open and close); ours is typed into once the rows it makes ahead in idle time are made."""
        )
        tele = para(
            """telescope: its default `generic_sorter` (`sorters.get_fzy_sorter()`, telescope.nvim and plenary.nvim
            from `../shared/peers/`, read at run time), run as its picker runs it on a keystroke over mini.pick's
            strings: `Sorter:score` of every entry for the new prompt (those it discarded for a prefix of the prompt
            skipped), timed in Neovim. The sorter alone: telescope's picker then also inserts each scored entry into
            its sorted results and draws them, so its keystroke costs more than this column."""
        )
        mini_text = (
            f"### Against mini.pick and telescope's sorter, same run\n\n{setup}\n\n{side_by_side(results)}\n\n"
            f"{work}\n\n{drawn}\n\n{tele}\n"
        )
    else:
        verdict = (
            "mini.pick was not measured in this run; measured earlier on these machines it took ≈4 / ≈11 ms to its "
            "first rows and ≈2.3 / ≈7 ms per keystroke (1,000 / 10,000 in-memory items). " + verdict
        )
        skipped = para(
            f"""Not measured in this run: {mini}. Pass `--mini PATH` (a mini.nvim git repository or checkout) or
            set `PSEUDOCLAUDE_BENCH_MINI` to measure it side by side."""
        )
        mini_text = f"### Against mini.pick\n\n{skipped}\n"
    counts = "; ".join(f"{int(r['n']):,}: {' → '.join(str(c) for c in r['counts'])}" for r in results)
    return f"""## Picker

Produced by `tests/bench/picker_bench.py --write`; rerun it to refresh this section.

- Date: {time.strftime("%Y-%m-%d %H:%M %z")}
- Code: HEAD {head.strip()} plus the working tree at that time; {nvim_version}, headless, 200x50
- Machine: {machine()}
- Rounds: {rounds} per size (medians); total run time {total:.0f} s

{mini_text}
### Our picker in detail

{table(results)}

Sessions matching as "{QUERY}" is typed ({counts}).

What is measured, inside Neovim with `vim.uv.hrtime()`:

- **first rows / first preview**: from just before `vim.cmd("PseudoResume")` until the rows are on the screen (the
  end of the first redraw after the results buffer holds them; resp. until the preview buffer holds the selected
  session's history). This includes `sessions.list({{ limit = 9 }})`, which
  finds the 9 newest from the activity hint and summarises only them (from their warm `summary.json` caches),
  opening the three windows and drawing; the preview and the request for the full list come in the step after that
  redraw. The sessions are real directories on disk (ext4, page cache warm),
  written by the script.
- **full list**: from `:PseudoResume` until every session is searchable: the core reads them on a background thread
  (started right after the first draw), packs them (src/bridge/rows.rs) and builds the fuzzy matcher over them there;
  the main thread then takes the packed list and applies the query, in one step ("main thread's share"), and builds
  a row only when it draws it.
- **keystroke**: from `vim.on_key` (the key typed) to the end of the redraw that shows the new rows: Neovim inserts
  the character in the prompt and reports the change (`nvim_buf_attach`'s `on_lines`; TextChangedI is ignored in
  the prompt's window, so matchparen's handler does not run), the picker feeds itself a `<Plug>` key whose mapping
  filters (narrowing: each character searches only the previous matches) and puts the visible rows and the counter
  in their buffers (the "handler alone" row), then
  the redraw draws them with their highlights and matched characters (a decoration provider, for the visible lines
  only). Lua's collector is paused during the handler; the work it would have done for the memory the handler took
  runs in the main-loop step after that redraw (`collectgarbage("step")`): neither this row nor the CPU row counts
  it; the row "… and the collector's step the handler deferred done" does (from the same key to the end of that
  step): the collector's work moves past the redraw, not away. The preview follows in a scheduled callback (its own row).
- **matcher**: `matcher.new(texts, engine):filter(query, previous)` alone on the same texts, for each engine.
  `rust` is the picker's: the texts are held by the core (src/fuzzy.rs), handed over in steps as the full list
  arrives; a keystroke sends the query and gets every match back as one string of packed integers, read through
  LuaJIT's FFI; a narrowing keystroke searches the previous matches the core kept. The ranking is the `lua`
  engine's (which still computes the highlighted characters of the visible rows).

In short: {wrap(verdict, len("In short: "))}
"""


def write_doc(text: str, heading: str = "## Picker") -> None:
    """Replaces the section `heading` of doc/benchmarks.md with `text` (appends it when there is none)."""
    path = ROOT / "doc" / "benchmarks.md"
    doc = path.read_text()
    start = doc.find(f"\n{heading}\n")
    if start >= 0:
        end = doc.find("\n## ", start + 1)
        doc = doc[: start + 1] + text + (doc[end:] if end >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    path.write_text(doc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--mini", help="mini.nvim git repository or checkout (default: $PSEUDOCLAUDE_BENCH_MINI, else "
                    "the copy an earlier run left in .deps/mini.nvim)")
    ap.add_argument("--no-mini", action="store_true", help="measure our picker only")
    ap.add_argument("--telescope", default=str(PEERS / "telescope.nvim"),
                    help="telescope.nvim checkout (plenary.nvim beside it) whose sorter is measured on mini.pick's "
                    "strings (default: ../shared/peers/telescope.nvim; skipped when absent or with --no-mini)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    started = time.monotonic()
    if args.no_mini:
        mini, mini_note = None, "left out with `--no-mini`"
    else:
        mini, mini_note = obtain_mini(args.mini)
    print(f"picker bench: mini.pick: {mini_note}", file=sys.stderr)
    telescope = Path(args.telescope)
    if not (telescope / "lua" / "telescope" / "sorters.lua").is_file():
        print(f"picker bench: no telescope.nvim at {telescope}: its sorter is left out", file=sys.stderr)
        telescope = None
    tmp = Path(tempfile.mkdtemp(prefix="pc-bench-"))
    results = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            print(f"picker bench: {n} sessions", file=sys.stderr)
            results.append(bench_size(n, args.rounds, tmp, mini, telescope))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if mini:
        print(side_by_side(results))
        print()
    else:
        print(f"mini.pick not measured: {mini_note}\n")
    print(table(results))
    if args.write:
        write_doc(section(results, args.rounds, time.monotonic() - started, mini_note, mini is not None))
        print("wrote doc/benchmarks.md", file=sys.stderr)


if __name__ == "__main__":
    main()
