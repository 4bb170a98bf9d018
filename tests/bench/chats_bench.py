#!/usr/bin/env python3
"""Several chats at once (issue 37's goals): the main loop while eight chats stream, and what an idle chat costs.

1. Longest main-loop stall (a 1 ms libuv timer's longest gap, as mainloop_bench.py) in one Neovim: idle for 1 s (the
   baseline), while one chat streams a 1,600-delta answer from the fake OpenAI server on 127.0.0.1 with no pause,
   and while eight chats each stream the same answer at once (eight sessions, eight logs, eight renderers). Goal:
   every stall with eight chats under 16 ms.
2. An idle chat's memory: the editor's resident set (VmRSS of the Neovim process, after a full Lua collection) with
   one chat that has answered once, then after 16 more chats that have each answered once (a short exchange);
   the growth per chat, beside the bytes of text each chat's buffer holds. Goal: at most 2 MB beyond its text.

Usage: tests/bench/chats_bench.py [--rounds 3] [--write]
  --write  also replace the "## Several chats at once" section of doc/benchmarks.md
Needs the release library (cargo build --release) and Neovim (scripts/ensure-nvim provides one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / ".deps" / "python"))

from fake_llm import FakeOpenAI  # noqa: E402

from harness import TIMER, gap, nvim_bin, started, until, write_section  # noqa: E402

SETUP = """
require('pseudoclaude').setup({ provider = { name = 'openai', base_url = ..., model = 'fake',
  api_key_env = 'PC_BENCH_NONE' } })
vim.g.turns = 0
vim.api.nvim_create_autocmd('User', { pattern = 'PseudoClaudeTurnDone', callback = function()
  vim.g.turns = vim.g.turns + 1 end })
"""

# A chat opened beside the others (its own session and buffer), sent `text` at once.
OPEN_AND_SEND = """
local first, text = ...
local chat = require('pseudoclaude').chat
if first then chat.open() else chat.new({}) end
chat.send(text)
"""

WORDS = " ".join(f"w{i}" for i in range(1600))


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("PSEUDOCLAUDE_CHECKPOINT_MS", None)
    return e


def stall_round(nvim: str, ws: Path) -> tuple[float, float, float]:
    """Idle, one chat streaming, eight chats streaming: the longest main-loop gap of each, in one Neovim."""
    fake = FakeOpenAI()
    try:
        with started(nvim, ws, env()) as n:
            n.exec_lua(SETUP, fake.base_url)
            n.exec_lua(TIMER)
            time.sleep(1.0)
            idle = gap(n)

            fake.push_text(WORDS)
            n.exec_lua(TIMER)
            n.exec_lua(OPEN_AND_SEND, True, "go")
            until(n, "vim.g.turns >= 1")
            one = gap(n)

            for _ in range(8):
                fake.push_text(WORDS)
            n.exec_lua(TIMER)
            for k in range(8):
                n.exec_lua(OPEN_AND_SEND, False, f"go {k}")
            until(n, "vim.g.turns >= 9")
            eight = gap(n)
            assert not fake.errors, fake.errors
            assert n.exec_lua("return #require('pseudoclaude').chats()") == 9
            return idle, one, eight
    finally:
        fake.close()


RSS = """
collectgarbage('collect') collectgarbage('collect')
for line in io.lines('/proc/self/status') do
  local kb = line:match('^VmRSS:%s+(%d+)') if kb then return tonumber(kb) * 1024 end
end
"""

TEXT_BYTES = """
local total = 0
for _, c in ipairs(require('pseudoclaude').chats()) do
  for _, l in ipairs(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false)) do total = total + #l + 1 end
end
return total
"""


def memory_round(nvim: str, ws: Path, more: int = 16) -> tuple[float, float]:
    """Bytes of resident memory per idle chat (after one short exchange each), and bytes of buffer text per chat."""
    fake = FakeOpenAI()
    answer = "an answer of a few words, as a short exchange has"
    try:
        with started(nvim, ws, env()) as n:
            n.exec_lua(SETUP, fake.base_url)
            fake.push_text(answer)
            n.exec_lua(OPEN_AND_SEND, True, "hello")
            until(n, "vim.g.turns >= 1")
            time.sleep(0.5)
            before, text_before = n.exec_lua(RSS), n.exec_lua(TEXT_BYTES)
            for k in range(more):
                fake.push_text(answer)
                n.exec_lua(OPEN_AND_SEND, False, f"hello {k}")
                until(n, f"vim.g.turns >= {k + 2}")
            time.sleep(0.5)
            after, text_after = n.exec_lua(RSS), n.exec_lua(TEXT_BYTES)
            assert not fake.errors, fake.errors
            return (after - before) / more, (text_after - text_before) / more
    finally:
        fake.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    nvim = nvim_bin()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    ws = Path(tempfile.mkdtemp(prefix="pc-bench-chats-"))
    stalls = [stall_round(nvim, ws) for _ in range(a.rounds)]
    mems = [memory_round(nvim, ws) for _ in range(a.rounds)]
    idle = statistics.median(s[0] for s in stalls)
    one = statistics.median(s[1] for s in stalls)
    eight = statistics.median(s[2] for s in stalls)
    worst = max(s[2] for s in stalls)
    per_chat = statistics.median(m[0] for m in mems)
    text = statistics.median(m[1] for m in mems)
    rows = [
        ("Longest main-loop stall, idle (1 s)", f"{idle:.1f} ms", "-", "-"),
        ("Longest stall, one chat streaming 1,600 deltas", f"{one:.1f} ms", f"{one / idle:.2f}x idle", "-"),
        (
            "Longest stall, eight chats streaming 1,600 deltas each at once",
            f"{eight:.1f} ms (worst round {worst:.1f} ms)",
            f"{eight / one:.2f}x one chat",
            "under 16 ms" + (" (met)" if worst < 16 else " (NOT met)"),
        ),
        (
            "Resident memory per idle chat (16 chats, one short exchange each)",
            f"{per_chat / 1e6:.2f} MB",
            f"its buffer text: {text / 1e3:.1f} kB",
            "at most 2 MB" + (" (met)" if per_chat - text <= 2e6 else " (NOT met)"),
        ),
    ]
    table = "| Measure | Value | Against | Goal |\n|---|---|---|---|\n" + "\n".join(
        f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows
    )
    print(table)
    if a.write:
        write_section(
            "Several chats at once",
            f"Produced by `tests/bench/chats_bench.py --write` ({time.strftime('%Y-%m-%d %H:%M')}, nproc "
            f"{os.cpu_count()}, load average {load} at the start, medians of {a.rounds} rounds, each in a fresh "
            "Neovim against the fake OpenAI server on 127.0.0.1).\n\n" + table,
        )


if __name__ == "__main__":
    main()
