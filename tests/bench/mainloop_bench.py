#!/usr/bin/env python3
"""Main-loop and start-up benchmark: what the plugin costs the editor.

1. Longest main-loop stall during a fast streamed turn with tool calls, against the same measure while idle, in
   one Neovim. A 1 ms libuv timer records the gap between its runs (`vim.uv.hrtime()`); the longest gap is the
   longest time the main loop could not run. The turn goes to a fake OpenAI server on 127.0.0.1 streaming 400
   deltas with no pause and two tool calls (read_file, grep), then a 400-delta answer: every delta is drained
   and rendered on the main loop, every tool runs on the core's threads.
2. What `plugin/` adds to start-up: `nvim --headless --startuptime` with and without the plugin on
   'runtimepath', alternated, medians of the "NVIM STARTED" time.

Usage: tests/bench/mainloop_bench.py [--rounds 5] [--write]
  --write  also replace the "## Main loop and start-up" section of doc/benchmarks.md
Needs the release library (cargo build --release) and Neovim (scripts/ensure-nvim provides one).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / ".deps" / "python"))

from fake_llm import FakeOpenAI  # noqa: E402

import pynvim  # noqa: E402


def nvim_bin() -> str:
    return subprocess.run([str(ROOT / "scripts" / "ensure-nvim")], check=True, capture_output=True, text=True).stdout.strip()


TIMER = """
_G.pc_gaps = { max = 0, n = 0 }
local last = vim.uv.hrtime()
_G.pc_timer = vim.uv.new_timer()
_G.pc_timer:start(1, 1, function()
  local now = vim.uv.hrtime()
  local gap = (now - last) / 1e6
  last = now
  _G.pc_gaps.n = _G.pc_gaps.n + 1
  if gap > _G.pc_gaps.max then _G.pc_gaps.max = gap end
end)
"""


def stall_round(nvim: str, ws: Path) -> tuple[float, float, float]:
    fake = FakeOpenAI()
    words = " ".join(f"w{i}" for i in range(400))
    fake.push_tools(words, [("c1", "read_file", {"path": "a.txt"}), ("c2", "grep", {"pattern": "alpha"})])
    fake.push_text(words)
    sock = Path(tempfile.mkdtemp(prefix="pc-bench-")) / "s"
    proc = subprocess.Popen(
        [nvim, "--headless", "--clean", "--listen", str(sock), "--cmd", f"set rtp^={ROOT}"],
        cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    while not sock.exists():
        time.sleep(0.01)
    n = pynvim.attach("socket", path=str(sock))
    try:
        n.exec_lua(
            "require('pseudoclaude').setup({ provider = { name = 'openai', base_url = ..., model = 'fake', "
            "api_key_env = 'PC_BENCH_NONE' } }) vim.g.turns = 0 "
            "vim.api.nvim_create_autocmd('User', { pattern = 'PseudoClaudeTurnDone', callback = function() "
            "vim.g.turns = vim.g.turns + 1 end }) require('pseudoclaude.chat').open()",
            fake.base_url,
        )
        # Idle: the same timer, the same length of time, nothing running.
        n.exec_lua(TIMER)
        t0 = time.monotonic()
        time.sleep(1.0)
        idle = n.exec_lua("_G.pc_timer:stop() return _G.pc_gaps.max")
        n.exec_lua(TIMER)
        t0 = time.monotonic()
        n.exec_lua("require('pseudoclaude').chat.send('go')")
        while n.exec_lua("return vim.g.turns") < 1:
            time.sleep(0.005)
        turn_s = time.monotonic() - t0
        busy = n.exec_lua("_G.pc_timer:stop() return _G.pc_gaps.max")
        assert not fake.errors, fake.errors
        return idle, busy, turn_s
    finally:
        try:
            n.command("qall!")
        except Exception:
            pass
        proc.wait(timeout=10)
        fake.close()


def startup_ms(nvim: str, with_plugin: bool, ws: Path) -> float:
    log = Path(tempfile.mkstemp(prefix="pc-startup-")[1])
    args = [nvim, "--headless", "--clean", "--startuptime", str(log)]
    if with_plugin:
        args += ["--cmd", f"set rtp^={ROOT}"]
    subprocess.run(args + ["-c", "qall!"], cwd=ws, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    text = log.read_text()
    log.unlink()
    m = re.findall(r"^(\d+\.\d+)\s+\d+\.\d+: --- NVIM STARTED ---", text, re.M)
    plugin = re.findall(r"^\d+\.\d+\s+(\d+\.\d+)\s+\d+\.\d+: sourcing .*pseudoclaude\.lua", text, re.M)
    return float(m[-1]), (float(plugin[0]) if plugin else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    nvim = nvim_bin()
    ws = Path(tempfile.mkdtemp(prefix="pc-bench-ws-"))
    (ws / "a.txt").write_text("alpha\n" * 2000)

    stalls = [stall_round(nvim, ws) for _ in range(a.rounds)]
    idle = statistics.median(s[0] for s in stalls)
    busy = statistics.median(s[1] for s in stalls)
    turn = statistics.median(s[2] for s in stalls)

    with_p, without_p, sourcing = [], [], []
    for _ in range(20):
        t, _ = startup_ms(nvim, False, ws)
        without_p.append(t)
        t, s = startup_ms(nvim, True, ws)
        with_p.append(t)
        sourcing.append(s)
    w, wo, src = statistics.median(with_p), statistics.median(without_p), statistics.median(sourcing)

    rows = [
        ("Longest main-loop stall, idle (1 s, 1 ms timer)", f"{idle:.1f} ms", "-"),
        ("Longest main-loop stall, streamed turn (800 deltas, 2 tool calls)", f"{busy:.1f} ms", f"{busy / idle:.2f}x idle"),
        ("That turn, end to end", f"{turn * 1000:.0f} ms", "-"),
        ("Start-up, without the plugin", f"{wo:.2f} ms", "-"),
        ("Start-up, with the plugin on 'runtimepath'", f"{w:.2f} ms", f"{w - wo:+.2f} ms ({w / wo:.3f}x)"),
        ("Sourcing plugin/pseudoclaude.lua (its own line in --startuptime)", f"{src:.3f} ms", "-"),
    ]
    table = "| Measure | Figure | Against the baseline of the same run |\n|---|---|---|\n" + "\n".join(
        f"| {r[0]} | {r[1]} | {r[2]} |" for r in rows
    )
    print(table)
    if a.write:
        doc = ROOT / "doc" / "benchmarks.md"
        text = doc.read_text()
        section = (
            "## Main loop and start-up\n\n"
            f"Produced by `tests/bench/mainloop_bench.py --write` ({time.strftime('%Y-%m-%d %H:%M')}, nproc {os.cpu_count()}, "
            f"medians of {a.rounds} rounds for the stall, 20 alternated start-ups).\n\n{table}\n"
        )
        text = re.sub(r"## Main loop and start-up\n.*?(?=\n## |\Z)", lambda _: section, text, flags=re.S) if (
            "## Main loop and start-up" in text
        ) else text.rstrip() + "\n\n" + section
        doc.write_text(text)


if __name__ == "__main__":
    main()
