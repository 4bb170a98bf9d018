#!/usr/bin/env python3
"""The release library's size and what loading it adds to Neovim's start (issue 38: under 15 MB stripped; at most
5 ms more than a start without the plugin, in the same run).

The library is the release asset scripts/package makes (stripped, glibc 2.28), installed into a plugin folder of its
own. Each round starts, in rotating order, three headless Neovims with `--startuptime`:
  none     no plugin (the baseline)
  plugin   the plugin on 'runtimepath' (plugin/ sourced; the library not loaded: it loads at the first use)
  loaded   the same, and the library loaded during the start (`--cmd`: package.loadlib, its init, the version check)
and reads each one's "NVIM STARTED" time; the loaded one also times `core.load()` from inside. Printed: the medians, and loaded - none (the goal: <= 5 ms) and loaded / none.

Usage: tests/bench/install_bench.py [--rounds 30] [--write]
  --write  also replace the "## Release library: size and start-up" section of doc/benchmarks.md
Needs Neovim (scripts/ensure-nvim); builds the asset with scripts/package when target/package/assets has none.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from harness import nvim_bin, write_section  # noqa: E402

TITLE = "Release library: size and start-up"


def asset() -> Path:
    found = [p for p in (ROOT / "target" / "package" / "assets").glob("pseudoclaude-*") if not p.name.endswith(".sha256")]
    if found:
        return max(found, key=lambda p: p.stat().st_mtime)
    out = subprocess.run([str(ROOT / "scripts" / "package"), str(ROOT / "target" / "package" / "assets")], check=True,
                         capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def started_ms(nvim: str, args: list[str], tmp: Path) -> float:
    log = tmp / "startup.log"
    log.unlink(missing_ok=True)
    subprocess.run([nvim, "--headless", "--clean", "--startuptime", str(log), *args, "+qa!"], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp, timeout=60)
    m = re.findall(r"^([0-9.]+)\s+[0-9.]+:\s+--- NVIM STARTED ---$", log.read_text(), re.M)
    assert m, log.read_text()
    return float(m[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--write", action="store_true")
    opts = ap.parse_args()
    nvim = nvim_bin()
    lib = asset()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pc-install-bench-") as t:
        tmp = Path(t)
        plugin = tmp / "plugin-root"
        for part in ("lua", "plugin"):
            shutil.copytree(ROOT / part, plugin / part)
        (plugin / "target" / "release").mkdir(parents=True)
        shutil.copy2(lib, plugin / "target" / "release" / ("libpseudoclaude." + lib.suffix.lstrip(".")))
        rtp = ["--cmd", f"set rtp^={plugin}"]
        kinds = {
            "none": [],
            "plugin": rtp,
            "loaded": [*rtp, "--cmd", "lua local t = vim.uv.hrtime() require('pseudoclaude.core').load() "
                       f"local f = io.open('{tmp}/load.ms', 'a') f:write((vim.uv.hrtime() - t) / 1e6, '\\n') f:close()"],
        }
        times: dict[str, list[float]] = {k: [] for k in kinds}
        names = list(kinds)
        for _ in range(2):  # warm the page cache
            for k in names:
                started_ms(nvim, kinds[k], tmp)
        for r in range(opts.rounds):
            order = names[r % 3:] + names[: r % 3]
            for k in order:
                times[k].append(started_ms(nvim, kinds[k], tmp))
        inside = [float(x) for x in (tmp / "load.ms").read_text().split()]
    med = {k: statistics.median(v) for k, v in times.items()}
    added = med["loaded"] - med["none"]
    size = lib.stat().st_size
    rows = [
        "| Measure | Figure | Against the baseline of the same run |",
        "|---|---|---|",
        f"| Release asset `{lib.name}` (stripped) | {size / 1024 / 1024:.1f} MiB | goal < 15 MiB |",
        f"| Start-up, without the plugin | {med['none']:.2f} ms | - |",
        f"| Start-up, the plugin on 'runtimepath' (library not loaded) | {med['plugin']:.2f} ms | "
        f"{med['plugin'] - med['none']:+.2f} ms ({med['plugin'] / med['none']:.3f}x) |",
        f"| Start-up, the library loaded during it | {med['loaded']:.2f} ms | "
        f"**{added:+.2f} ms** ({med['loaded'] / med['none']:.3f}x); goal <= +5 ms |",
        f"| The load itself, timed inside Neovim (`core.load()`: dlopen, init, version check) | "
        f"{statistics.median(inside):.2f} ms (min {min(inside):.2f}) | - |",
    ]
    body = (
        f"Produced by `tests/bench/install_bench.py --write` ({time.strftime('%Y-%m-%d %H:%M')}, nproc {os.cpu_count()}, "
        f"medians of {opts.rounds} rounds of three starts in rotating order, load average at start "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}). The library is the asset `scripts/package` makes, as "
        ":PseudoInstall puts it in place; \"NVIM STARTED\" of `--startuptime`. The plugin never loads the library "
        "at start (it loads at the first command that needs it); the last row loads it during the start on purpose, "
        "to measure what that first use costs. On a machine loaded beyond its cores the start-up rows move by tens of "
        "milliseconds between runs, in both directions (the baseline too); the load timed inside Neovim is the steadier "
        "figure.\n\n" + "\n".join(rows)
    )
    print(body)
    if opts.write:
        write_section(TITLE, body)


if __name__ == "__main__":
    sys.exit(main())
