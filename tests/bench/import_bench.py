#!/usr/bin/env python3
"""Other agents' sessions in the picker: do 1,000 Claude Code and Codex transcripts slow its first rows?

A workspace with 100 sessions of ours, and the tools' homes ($CLAUDE_CONFIG_DIR, $CODEX_HOME, set in Neovim's
environment between rounds) holding either nothing or 1,000 transcripts: 600 Claude Code transcripts of the
workspace and 400 Codex rollouts (300 of it, 100 of another workspace, interleaved in time), 8 to 400 KiB each
(about 110 MiB in all). In one headless Neovim, alternating within each round, it measures `:PseudoResume` until
the first rows are drawn (`vim.uv.hrtime()` inside Neovim; medians):

  none          `picker.external = true`, no transcript at all
  off           the 1,000 transcripts present, `picker.external = false` (the default): what every user pays
  cold          `picker.external = true`, transcripts never listed before (a fresh copy of the homes each round:
                nothing cached in memory or on disk); the first rows are ours, theirs come with the full list
                (only `<C-o>` or a workspace without a session of ours reads their heads and tails for the first rows)
  warm          `picker.external = true`, the same transcripts after a full list cached them

and, apart, the full list with the 1,000 transcripts (read in the background after the first rows) cold and warm.

Usage: tests/bench/import_bench.py [--rounds 5] [--write]
  --write   also replace the "## Other agents' sessions" section of doc/benchmarks.md with the results
Needs the release library (cargo build --release) and Neovim (scripts/ensure-nvim provides one).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bench"))
# picker_bench puts tests/e2e and .deps/python on the path and finds Neovim
from picker_bench import NVIM, Neovim, machine, med, para, wait_for, write_doc  # noqa: E402
from session_files import chat, session_id, write_session  # noqa: E402

OPEN = """
local external = ...
require("pseudoclaude").setup({ provider = { name = "demo" }, picker = { external = external } })
_G.bench_open_t0 = vim.uv.hrtime()
vim.cmd("PseudoResume")
"""
ROWS_AT = """
local s = require("pseudoclaude.float").get_state()
if not (s and s.stats.rows_at) then return vim.NIL end
return { rows = (s.stats.rows_at - _G.bench_open_t0) / 1e6, n = s.count }
"""
FULL_AT = """
local s = require("pseudoclaude.float").get_state()
if not (s and s.full) then return vim.NIL end
return { full = (s.stats.full_at - _G.bench_open_t0) / 1e6, n = s.count }
"""
SET_HOMES = """
local claude, codex = ...
vim.env.CLAUDE_CONFIG_DIR = claude
vim.env.CODEX_HOME = codex
"""


def claude_folder(ws: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", str(ws.resolve()))


def make_homes(home: Path, ws: Path, seed: int = 7) -> None:
    """600 Claude Code transcripts of `ws`, 400 Codex rollouts (a quarter of another workspace)."""
    rnd = random.Random(seed)
    now = time.time()
    cdir = home / "claude" / "projects" / claude_folder(ws)
    cdir.mkdir(parents=True)
    for i in range(600):
        size = rnd.randint(8, 400) * 1024
        sid = f"{i:08x}-0000-4000-8000-000000000000"
        lines, n, parent = [], 0, None
        while sum(len(x) for x in lines) < size:
            n += 1
            u = f"{sid}-{n}"
            kind = "user" if n % 2 else "assistant"
            msg = ({"role": "user", "content": f"task {i} step {n} " + "x" * 300} if kind == "user" else
                   {"id": f"m{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "y" * rnd.randint(200, 4000)}]})
            lines.append(json.dumps({"type": kind, "uuid": u, "parentUuid": parent, "sessionId": sid,
                                     "cwd": str(ws), "gitBranch": "main", "isSidechain": False,
                                     "timestamp": "2026-11-30T10:00:00.000Z", "message": msg}) + "\n")
            parent = u
        p = cdir / f"{sid}.jsonl"
        p.write_text("".join(lines))
        t = now - 3600 - i * 97
        os.utime(p, (t, t))
    xdir = home / "codex" / "sessions" / "2026" / "11" / "29"
    xdir.mkdir(parents=True)
    for i in range(400):
        size = rnd.randint(8, 400) * 1024
        cid = f"0199a1b2-{i:04x}-7e5f-8a9b-0c1d2e3f4a5b"
        cwd = str(ws) if i % 4 else "/somewhere/else"
        lines = [json.dumps({"timestamp": "2026-11-29T08:00:00Z", "type": "session_meta",
                             "payload": {"id": cid, "cwd": cwd, "git": {"branch": "feature"}}}) + "\n",
                 json.dumps({"timestamp": "2026-11-29T08:00:00Z", "type": "turn_context",
                             "payload": {"model": "gpt-5-codex", "cwd": cwd}}) + "\n"]
        n = 0
        while sum(len(x) for x in lines) < size:
            n += 1
            role, part = ("user", "input_text") if n % 2 else ("assistant", "output_text")
            text = f"task {i} step {n} " + "z" * rnd.randint(200, 4000)
            lines.append(json.dumps({"timestamp": "2026-11-29T08:00:00Z", "type": "response_item", "payload": {
                "type": "message", "role": role, "content": [{"type": part, "text": text}]}}) + "\n")
        p = xdir / f"rollout-2026-11-29T08-00-00-{cid}.jsonl"
        p.write_text("".join(lines))
        t = now - 3600 - i * 131
        os.utime(p, (t, t))


def copy_homes(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, copy_function=shutil.copy2)  # copy2 keeps the modification times


def open_rows(nv: Neovim, external: bool) -> float:
    nv.lua(OPEN, external)
    r = wait_for(lambda: nv.lua(ROWS_AT))
    return r["rows"]


def close(nv: Neovim) -> dict:
    full = wait_for(lambda: nv.lua(FULL_AT), timeout=300)
    nv.api.input("<Esc>")
    wait_for(lambda: nv.lua("return require('pseudoclaude.float').get_state() == nil"))
    return full


def bench(rounds: int, tmp: Path) -> dict:
    ws = tmp / "ws"
    ws.mkdir()
    now = time.time()
    for i in range(100):
        write_session(ws, session_id(i), chat(f"our task {i}", ts=int(now) - 86400 * 30 - i * 60),
                      mtime=now - 86400 * 30 - i * 60)
    empty = tmp / "empty"
    (empty / "claude").mkdir(parents=True)
    (empty / "codex").mkdir(parents=True)
    master = tmp / "master"
    t = time.monotonic()
    make_homes(master, ws)
    print(f"  1,000 transcripts written in {time.monotonic() - t:.1f} s", file=sys.stderr)
    copies = []
    for r in range(rounds):
        c = tmp / f"copy{r}"
        copy_homes(master, c)
        copies.append(c)
    nv = Neovim(ws)
    res: dict[str, list[float]] = {k: [] for k in ("none", "off", "cold", "warm", "full_cold", "full_warm")}
    counts: dict[str, int] = {}
    try:
        nv.api.command("set columns=200 lines=50")
        nv.lua("package.loaded['pseudoclaude.chat'] = { resume = function() end, current = function() return nil end }")
        # warm-up: modules, the library, our sessions' summary caches
        nv.lua(SET_HOMES, str(empty / "claude"), str(empty / "codex"))
        open_rows(nv, True)
        close(nv)
        for r in range(rounds):
            nv.lua(SET_HOMES, str(empty / "claude"), str(empty / "codex"))
            res["none"].append(open_rows(nv, True))
            counts["none"] = close(nv)["n"]
            home = copies[r]
            nv.lua(SET_HOMES, str(home / "claude"), str(home / "codex"))
            res["off"].append(open_rows(nv, False))
            counts["off"] = close(nv)["n"]
            res["cold"].append(open_rows(nv, True))
            full = close(nv)
            res["full_cold"].append(full["full"])
            counts["external"] = full["n"]
            res["warm"].append(open_rows(nv, True))
            res["full_warm"].append(close(nv)["full"])
    finally:
        nv.close()
    out = {k: med(v) for k, v in res.items()}
    out["counts"] = counts
    return out


def section(r: dict, rounds: int, total: float) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    nvim_version = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    none = r["none"]

    def row(name: str, key: str) -> str:
        return f"| {name} | {r[key]:.1f} ms | {r[key] / none:.2f}x |"

    c = r["counts"]
    return "\n".join([
        "## Other agents' sessions",
        "",
        para(f"""Produced by `tests/bench/import_bench.py --write` ({rounds} rounds, medians; {total:.0f} s in all) on
        {time.strftime('%Y-%m-%d %H:%M %z')}, HEAD {head.strip()} plus the working tree, {nvim_version}; {machine()}.
        A workspace with 100 sessions of ours; 1,000 transcripts of the other agents in `$CLAUDE_CONFIG_DIR` and
        `$CODEX_HOME`: 600 Claude Code transcripts of the workspace and 400 Codex rollouts (100 of another workspace),
        8 to 400 KiB each. Every row is `:PseudoResume` until its first rows are drawn, measured in the same Neovim,
        the cases alternating within each round; the ratio is against the first row. Never a pass or a fail."""),
        "",
        "| first rows of `:PseudoResume` | median | vs no transcript |",
        "|---|---|---|",
        row(f"`picker.external = true`, no transcript ({c.get('none')} rows in the full list)", "none"),
        row("1,000 transcripts present, `picker.external = false` (the default)", "off"),
        row("1,000 transcripts, `picker.external = true`, never listed before (theirs follow with the full list)",
            "cold"),
        row("1,000 transcripts, `picker.external = true`, listed before (cached by path, size, mtime)", "warm"),
        "",
        para(f"""The full list ({c.get('external')} rows: ours and the workspace's 900 transcripts), read in the
        background after the first rows: {r['full_cold']:.0f} ms when the transcripts are new (each read whole once
        to count the messages an import restores), {r['full_warm']:.0f} ms once cached."""),
        "",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="pc-import-bench-"))
    try:
        r = bench(args.rounds, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = section(r, args.rounds, time.monotonic() - started)
    print(text)
    if args.write:
        write_doc(text, "## Other agents' sessions")
        print("wrote doc/benchmarks.md", file=sys.stderr)


if __name__ == "__main__":
    main()
