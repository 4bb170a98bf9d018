"""What the benches share: the Neovim they start (headless, `--clean`, the repository on 'runtimepath', listening on a
socket of its own, driven over RPC), the wait for a condition inside it, the main loop's longest gap, and the section
of doc/benchmarks.md a bench writes its figures into. The e2e tests' conftest has its own Neovim: a bench measures a
plain one, without the tests' fixtures.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / ".deps" / "python"))

import pynvim  # noqa: E402


def nvim_bin() -> str:
    """The Neovim the tests use (scripts/ensure-nvim installs it when missing)."""
    return subprocess.run([str(ROOT / "scripts" / "ensure-nvim")], check=True, capture_output=True, text=True).stdout.strip()


@contextmanager
def started(nvim: str, ws: Path, env: dict[str, str] | None = None) -> Iterator[pynvim.Nvim]:
    """A fresh headless Neovim in `ws` with the plugin on 'runtimepath' (as a plugin manager puts it), attached over
    its socket; quit and waited for at the end. `env`: its environment (default: this process's)."""
    home = Path(tempfile.mkdtemp(prefix="pc-bench-"))
    sock = home / "s"
    proc = subprocess.Popen(
        [nvim, "--headless", "--clean", "--listen", str(sock), "--cmd", f"set rtp^={ROOT}"],
        cwd=ws, env=env if env is not None else dict(os.environ),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    # The socket file appears at bind(), before listen(): a connect in between is refused (as in conftest).
    deadline = time.monotonic() + 20
    while True:
        try:
            n = pynvim.attach("socket", path=str(sock))
            break
        except (ConnectionRefusedError, FileNotFoundError):
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.01)
    try:
        yield n
    finally:
        try:
            n.command("qall!")
        except Exception:
            pass
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


def until(n: pynvim.Nvim, cond: str, timeout: float = 120.0) -> None:
    """Waits until the Lua expression `cond` is true inside Neovim."""
    deadline = time.monotonic() + timeout
    while not n.exec_lua("return " + cond):
        if time.monotonic() > deadline:
            raise RuntimeError("timed out: " + cond)
        time.sleep(0.005)


# The main loop's longest gap: a 1 ms timer inside Neovim notes the longest time between two of its ticks (as the
# e2e tests' `main_loop_watch`); `gap()` stops it and reads it.
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


def gap(n: pynvim.Nvim) -> float:
    """The longest main-loop gap since `TIMER` started, in ms (the timer stopped)."""
    return n.exec_lua("_G.pc_timer:stop() return _G.pc_gaps.max")


def write_section(title: str, body: str) -> None:
    """Puts `## title` with `body` into doc/benchmarks.md, in place of the section of that title (or at the end)."""
    doc = ROOT / "doc" / "benchmarks.md"
    text = doc.read_text()
    section = f"## {title}\n\n{body}\n"
    if f"## {title}\n" in text:
        text = re.sub(rf"## {re.escape(title)}\n.*?(?=\n## |\Z)", lambda _: section, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + section
    doc.write_text(text)
