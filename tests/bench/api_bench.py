#!/usr/bin/env python3
"""Lua API benchmark: the main-loop time of every public call that can return many items (issue 39).

For each size (default 10,000 and 100,000) it writes that many sessions (as tests/bench/picker_bench.py does), a
session of that many messages (one user message per turn, each turn changing one file: `changes()` has a turn per
two messages), warms the list's caches, then in a headless Neovim measures, over several rounds (medians):

  sync      the call's wall time: a call that returns the items blocks the main loop that long
  on_done   the same call with `on_done`: the longest main-loop step from the call to the callback (a 1 ms
            `vim.uv` timer's worst gap, less the idle loop's own, measured just before), and the time to the callback

`sessions.list()` is measured twice: the workspace unchanged since the last list (the core hands out the list it
kept, src/bridge/full_list.rs), and right after a message was appended to a session's log as a writer appends it
(the line, then the activity file's line: the core makes that session's row again and moves it in the kept list).
Up to 10,000 sessions it is measured a third time, in a workspace of as many sessions none of which has a lock file
(the seed's layout, folders copied in: who holds their locks is asked of /proc/locks, src/session/list.rs
`lock_holders`, not of each folder).
The sessions folder is left unchanged for more than `full_list::FRESH_SECS` before the rounds (a list read just
after the folder changed is not kept).

Calls: `sessions.list()`, `sessions.list({ limit = 9 })`, `sessions.search(query)`, `sessions.changes(id)`,
`require("pseudoclaude").messages()` of a resumed session, and `require("pseudoclaude").chats()` when this build
has it. Baselines from the same run: the core's own list (`sessions_list`: read, pack and hand over, no Lua rows)
and the list as it crossed before (JSON text decoded by `vim.json.decode`, `sessions_list_json`).

Usage: tests/bench/api_bench.py [--sizes 10000,100000] [--rounds 5] [--write]
  --write  replace the "## Lua API" section of doc/benchmarks.md with the results
Run it with `nice` on a shared machine; the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import picker_bench  # noqa: E402  (sets up the paths and the Neovim binary)
from picker_bench import ROOT, fmt, make_sessions, machine, med, para, wait_for, write_doc  # noqa: E402
from conftest import NVIM, Neovim  # noqa: E402
from session_files import session_dir, session_id, write_session  # noqa: E402

QUERY = "parser"

HARNESS = """
_G.B = {}
-- the main loop's worst gap while `fn(done)` runs, through a 1 ms timer (as conftest's main_loop_watch)
function B.watch()
  local w = { max = 0, last = vim.uv.hrtime() }
  w.timer = vim.uv.new_timer()
  w.timer:start(1, 1, function()
    local now = vim.uv.hrtime()
    w.max = math.max(w.max, (now - w.last) / 1e6)
    w.last = now
  end)
  return w
end
function B.async(name, fn)
  B.result = nil
  local w = B.watch()
  local t = vim.uv.hrtime()
  fn(function(err, items)
    local total = (vim.uv.hrtime() - t) / 1e6
    -- one more turn of the loop, so that the gap of this very step is counted
    vim.defer_fn(function()
      w.timer:stop() w.timer:close()
      B.result = { name = name, total = total, gap = w.max, err = err or vim.NIL,
                   count = type(items) == "table" and #items or -1 }
    end, 5)
  end)
end
-- the idle loop's own worst gap over `ms`
function B.idle(ms)
  B.result = nil
  local w = B.watch()
  vim.defer_fn(function() w.timer:stop() w.timer:close() B.result = { gap = w.max } end, ms)
end
function B.sync(fn)
  local t = vim.uv.hrtime()
  local out = fn()
  return { ms = (vim.uv.hrtime() - t) / 1e6, count = type(out) == "table" and #out or -1 }
end
"""

SYNC = {
    "list": "return B.sync(function() return require('pseudoclaude').sessions.list() end)",
    "list_nolocks": "return B.sync(function() return require('pseudoclaude').sessions.list({ check_locks = false }) end)",
    "list9": "return B.sync(function() return require('pseudoclaude').sessions.list({ limit = 9 }) end)",
    # the core's own list: read, packed and handed over, no Lua row built
    "core": """return B.sync(function()
        local s = require('pseudoclaude.sessions')
        local data = require('pseudoclaude.core').call('sessions_list', s.workspace(), { check_locks = true })
        return { n = #data }
      end)""",
    # the list as it crossed before issue 39: JSON text, decoded by vim.json.decode
    "json": """return B.sync(function()
        local s = require('pseudoclaude.sessions')
        local core = require('pseudoclaude.core')
        return core.decode(core.call('sessions_list_json', s.workspace(), { check_locks = true }))
      end)""",
    "search": "local q = ... return B.sync(function() return require('pseudoclaude').sessions.search(q) end)",
}

ASYNC = {
    "list": "B.async('list', function(done) require('pseudoclaude').sessions.list({ on_done = done }) end)",
    "search": """local q = ...
      B.async('search', function(done)
        local hits = {}
        require('pseudoclaude').sessions.search(q, { on_hits = function(h) vim.list_extend(hits, h) end,
          on_done = function(err) done(err, hits) end })
      end)""",
}

MESSAGES = """
local id = ...
_G.B.resumed = nil
require('pseudoclaude').resume(id, { on_done = function(report) _G.B.resumed = report end })
"""


def write_long_session(ws: Path, sid: str, n: int) -> None:
    """A session of `n` messages: turns of a user message (naming its checkpoint) and an answer, each turn changing
    one file (a `files` checkpoint by the agent), as the writer leaves them."""
    now = int(time.time()) - 86400
    lines = []
    seq = 0
    for k in range(n // 2):
        seq += 1
        lines.append({"type": "files", "ts": now + k, "files": {"seq": seq, "turn": seq, "by": "user", "changes": []}})
        lines.append({"type": "message", "role": "user", "ts": now + k, "turn": seq, "content": f"change file {k}"})
        seq += 1
        change = {"path": f"src/f{k % 500}.rs", "before": None, "after": f"{k:064x}", "added": 3, "removed": 0}
        lines.append({"type": "files", "ts": now + k, "files": {"seq": seq, "turn": seq - 1, "by": "agent",
                                                              "call": f"c{k}", "changes": [change]}})
        lines.append({"type": "message", "role": "assistant", "ts": now + k, "content": f"changed src/f{k % 500}.rs"})
    write_session(ws, sid, lines, mtime=now + n)


def append_message(ws: Path, sid: str, k: int) -> None:
    """A message appended to session `sid` as the writer appends it: the log's line, then the activity file's."""
    now = int(time.time())
    line = {"type": "message", "role": "user", "ts": now, "content": f"one more message {k}"}
    with open(session_dir(ws, sid) / "conversation.jsonl", "a") as f:
        f.write(json.dumps(line, separators=(",", ":")) + "\n")
    with open(ws / ".PseudoClaude" / "sessions" / "activity", "a") as f:
        f.write(f"{sid} {now}\n")


def bench_size(n: int, rounds: int, tmp: Path) -> dict:
    ws = tmp / f"ws{n}"
    ws.mkdir()
    t = time.monotonic()
    make_sessions(ws, n)
    long_id = session_id(n + 7)
    write_long_session(ws, long_id, n)
    print(f"  {n} sessions and a {n}-message session written in {time.monotonic() - t:.1f} s", file=sys.stderr)
    nv = Neovim(ws)
    out: dict = {"n": n}
    try:
        nv.lua(HARNESS)
        nv.lua("require('pseudoclaude').sessions.list()")  # summary caches and the index written
        time.sleep(2.5)  # the sessions folder settled (full_list::FRESH_SECS): the next full list is kept
        nv.lua("require('pseudoclaude').sessions.list()")
        res: dict[str, list[float]] = {}

        def add(k: str, v: float) -> None:
            res.setdefault(k, []).append(v)

        def run_async(name: str, *args) -> dict:
            nv.lua(ASYNC[name], *args)
            return wait_for(lambda: nv.lua("return B.result"), timeout=600)

        for _ in range(rounds):
            nv.lua("B.idle(200)")
            add("idle_gap", wait_for(lambda: nv.lua("return B.result"))["gap"])
            for k in ("core", "list", "list_nolocks", "list9", "json"):
                r = nv.lua(SYNC[k])
                add(k, r["ms"])
                if k == "list":
                    out["list_count"] = r["count"]
            # a message written since the last list: the core brings the kept list up to date (that session's row)
            append_message(ws, session_id(n - 1), len(res["core"]))
            add("core_written", nv.lua(SYNC["core"])["ms"])
            append_message(ws, session_id(n - 2), len(res["core"]))
            add("list_written", nv.lua(SYNC["list"])["ms"])
            r = run_async("list")
            add("list_async_gap", r["gap"])
            add("list_async_total", r["total"])
            assert r["count"] == out["list_count"], r
            r = nv.lua(SYNC["search"], QUERY)
            add("search", r["ms"])
            out["search_hits"] = r["count"]
            r = run_async("search", QUERY)
            add("search_async_gap", r["gap"])
            add("search_async_total", r["total"])
        # changes() and messages() of the long session
        for _ in range(rounds):
            r = nv.lua(f"return B.sync(function() return require('pseudoclaude').sessions.changes('{long_id}') end)")
            add("changes", r["ms"])
            out["changes_count"] = r["count"]
            nv.lua(f"B.async('changes', function(done) require('pseudoclaude').sessions.changes('{long_id}', done) end)")
            r = wait_for(lambda: nv.lua("return B.result"), timeout=600)
            add("changes_async_gap", r["gap"])
            add("changes_async_total", r["total"])
        nv.lua(MESSAGES, long_id)
        wait_for(lambda: nv.lua("return B.resumed"), timeout=600)
        for _ in range(rounds):
            r = nv.lua("return B.sync(function() return require('pseudoclaude').messages() end)")
            add("messages", r["ms"])
            out["messages_count"] = r["count"]
            has_async = nv.lua("return debug.getinfo(require('pseudoclaude').messages, 'u').nparams > 0")
            if has_async:
                nv.lua("B.async('messages', function(done) require('pseudoclaude').messages({ on_done = done }) end)")
                r = wait_for(lambda: nv.lua("return B.result"), timeout=600)
                add("messages_async_gap", r["gap"])
                add("messages_async_total", r["total"])
        out["chats"] = nv.lua("return type(require('pseudoclaude').chats) == 'function'")
        if out["chats"]:
            for _ in range(rounds):
                r = nv.lua("return B.sync(function() return require('pseudoclaude').chats() end)")
                add("chats", r["ms"])
                out["chats_count"] = r["count"]
    finally:
        nv.close()
    if n <= 10_000:
        res["list_lockless"] = lockless_list(n, rounds, tmp)
    out.update({k: med(v) for k, v in res.items()})
    return out


def lockless_list(n: int, rounds: int, tmp: Path) -> list[float]:
    """`sessions.list()` in a workspace of `n` sessions without lock files, unchanged since the last list: each
    round's time."""
    ws = tmp / f"ws{n}-lockless"
    ws.mkdir()
    make_sessions(ws, n, lock_files=False)
    nv = Neovim(ws)
    try:
        nv.lua(HARNESS)
        nv.lua("require('pseudoclaude').sessions.list()")  # summary caches and the index written
        time.sleep(2.5)  # settled, as above: the next full list is kept
        nv.lua("require('pseudoclaude').sessions.list()")
        times = []
        for _ in range(rounds):
            r = nv.lua(SYNC["list"])
            assert r["count"] == n, r
            times.append(r["ms"])
        return times
    finally:
        nv.close()


ROWS = [
    # label, sync key, async gap key, async total key
    ("`sessions.list()`", "list", "list_async_gap", "list_async_total"),
    ("`sessions.list()` right after a message was written", "list_written", None, None),
    ("`sessions.list()`, no session with a lock file (the seed's layout)", "list_lockless", None, None),
    ("`sessions.list({ check_locks = false })`", "list_nolocks", None, None),
    ("`sessions.list({ limit = 9 })`", "list9", None, None),
    (f"`sessions.search({QUERY!r})` (every message of every session)", "search", "search_async_gap",
     "search_async_total"),
    ("`sessions.changes(id)` (the long session: a turn per two messages)", "changes", "changes_async_gap",
     "changes_async_total"),
    ("`messages()` (the long session, resumed)", "messages", "messages_async_gap", "messages_async_total"),
    ("`chats()`", "chats", None, None),
]


def table(results: list[dict]) -> str:
    head = "| Call | Items | Blocking call: main loop | `on_done` form: longest main-loop step | `on_done`: until the callback |"
    lines = [head, "|---|---|---|---|---|"]
    for label, k, gap, total in ROWS:
        for r in results:
            if k not in r or (k == "chats" and not r.get("chats")):
                continue
            items = {"list": "list_count", "list_nolocks": "list_count", "list_written": "list_count",
                     "list_lockless": "n", "search": "search_hits",
                     "changes": "changes_count", "messages": "messages_count", "chats": "chats_count"}.get(k)
            count = f"{int(r[items]):,}" if items and items in r else ("9" if k == "list9" else "-")
            g = fmt(max(r[gap] - r["idle_gap"], 0)) if gap and gap in r else "-"
            t = fmt(r[total]) if total and total in r else "-"
            lines.append(f"| {label} | {count} | {fmt(r[k])} | {g} | {t} |")
    return "\n".join(lines)


def baselines(results: list[dict]) -> str:
    lines = ["| Sessions | the core's own list: kept / read anew (pack, hand over, no Lua row) | `sessions.list()`: "
             "kept / read anew | ratio, `list()` / the core's (anew) | the list as JSON, `vim.json.decode` (before) | "
             "ratio, `list()` / JSON (anew) |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {int(r['n']):,} | {fmt(r['core'])} / {fmt(r['core_written'])} | {fmt(r['list'])} / "
                     f"{fmt(r['list_written'])} | {r['list_written'] / r['core_written']:.2f}x | {fmt(r['json'])} | "
                     f"{r['list_written'] / r['json']:.2f}x |")
    return "\n".join(lines)


def goals(results: list[dict]) -> str:
    """Issue 39's goals against this run: `sessions.list()` within 15 ms at 10,000 and 150 ms at 100,000 sessions, its
    `on_done` form never a long step (16 ms, a frame)."""
    goal = {10_000: 15.0, 100_000: 150.0}
    out = []
    for r in results:
        n = int(r["n"])
        if n in goal:
            verdict = lambda ms: "met" if ms <= goal[n] else "NOT met"  # noqa: E731
            out.append(f"at {n:,} sessions (goal {goal[n]:.0f} ms) `list()` of an unchanged workspace "
                       f"{fmt(r['list'])}: {verdict(r['list'])}; right after a write {fmt(r['list_written'])}: "
                       f"{verdict(r['list_written'])}; "
                       + (f"no session with a lock file {fmt(r['list_lockless'])}: {verdict(r['list_lockless'])}; "
                          if "list_lockless" in r else "")
                       + f"the `on_done` form's longest step "
                       f"{fmt(r['list_async_gap'])} against the idle loop's own {fmt(r['idle_gap'])}")
    return para("Goals (issue 39), in this run: " + "; ".join(out) + ".") if out else ""


def section(results: list[dict], rounds: int, total: float, load_start: str, load_end: str) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    nvim_version = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    idle = "; ".join(f"{int(r['n']):,}: {fmt(r['idle_gap'])}" for r in results)
    chats = "" if any(r.get("chats") for r in results) else (
        " `chats()` is not in this build (the `chats` engineer adds it): its row is missing until then.")
    return f"""## Lua API

Produced by `nice tests/bench/api_bench.py --write`; rerun it to refresh this section.

- Date: {time.strftime("%Y-%m-%d %H:%M %z")}
- Code: HEAD {head.strip()} plus the working tree at that time; {nvim_version}, headless
- Machine: {machine().split(", load average")[0]}; load average at the start of the run {load_start}, at its end {load_end}
- Rounds: {rounds} per size (medians); total run time {total:.0f} s

The sessions are real directories on disk, written by the script (as `picker_bench.py` writes them, caches warm); the
long session has as many messages as there are sessions, a turn per two messages, each turn changing one file.

{baselines(results)}

{table(results)}

{goals(results)}

{para(f'''What is measured, inside Neovim with `vim.uv.hrtime()`: a blocking call's wall time (the main loop waits that
long); for an `on_done` form, the longest main-loop step between the call and the callback, taken as the worst gap of
a 1 ms `vim.uv` timer less the idle loop's own worst gap measured just before ({idle}), and the time until the
callback. `sessions.list()` builds its rows from the list the core packs (src/bridge/rows.rs,
lua/pseudoclaude/session_rows.lua), the garbage collector paused meanwhile; the core hands out the list it kept while
the workspace's stamp holds (src/bridge/full_list.rs: "kept"), and brings it up to date after a message was written
("read anew" in the first table, "right after a message was written" in the second: a message appended to a log
and the activity file just before the call; that session's row is made again and moved to its place in the packed
list). `sessions.list()` reads the list where the core keeps it (`sessions_list_lend`), the core's own list is copied
into a Lua string (`sessions_list`). Its `on_done` form takes the list in parts of 2,000 rows, one part handed over
and built per main-loop step; `changes` and `messages` take their JSON a part per step too (src/bridge/parts.rs). `search`, `changes` and `messages` read
the disk or the whole history and are documented as blocking: use their `on_done` forms.{chats}''')}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    started = time.monotonic()
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    tmp = Path(tempfile.mkdtemp(prefix="pc-apibench-"))
    results = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            print(f"api bench: {n}", file=sys.stderr)
            results.append(bench_size(n, args.rounds, tmp))
            print(json.dumps(results[-1]), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average: start {load_start}, end {load_end}")
    print(baselines(results))
    print()
    print(table(results))
    if args.write:
        write_doc(section(results, args.rounds, time.monotonic() - started, load_start, load_end), "## Lua API")
        print("wrote doc/benchmarks.md", file=sys.stderr)


if __name__ == "__main__":
    main()
