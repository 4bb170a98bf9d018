"""End-to-end test harness: real Neovim processes driven over msgpack-RPC with pynvim.

Each test gets its own temporary workspace (the Neovim process's cwd) and its own XDG directories, so nothing
is read from or written to the user's Neovim config, state or data. Neovim is started as

    nvim --headless --clean --listen <socket> --cmd "set rtp^=<plugin root>"

so the plugin is on 'runtimepath' exactly as a plugin manager would put it, and plugin/pseudoclaude.lua is
sourced at startup by Neovim itself. Run with tests/e2e/run (which finds Neovim and the Python packages).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pynvim
import pytest

from fake_llm import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
LIB_NAME = "libpseudoclaude.dylib" if os.uname().sysname == "Darwin" else "libpseudoclaude.so"
LIB_PATH = ROOT / "target" / "release" / LIB_NAME
CARGO_VERSION = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]


# Lua run in a test's Neovim: `vim.g.pc_resumed` holds the last `User PseudoClaudeResumed` report, `vim.g.pc_drawn`
# PseudoClaudeResumeDrawn's, `vim.g.pc_turns` counts `User PseudoClaudeTurnDone`, `_G.notes` keeps what `vim.notify`
# was given ({msg, level}). One definition: a second one (282c29a) once replaced this one and lost `pc_turns`.
TRACK = """
vim.g.pc_resumed = vim.NIL
vim.g.pc_drawn = vim.NIL
vim.g.pc_turns = 0
vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumed", callback = function(ev)
  vim.g.pc_resumed = ev.data
end })
vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumeDrawn", callback = function(ev)
  vim.g.pc_drawn = ev.data
end })
vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function()
  vim.g.pc_turns = vim.g.pc_turns + 1
end })
_G.notes = {}
vim.notify = function(msg, level) table.insert(_G.notes, { msg = msg, level = level }) end
"""


def wait_for(fn: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    """Polls `fn()` until it returns something truthy (and returns that), or fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} (last value: {value!r})")
        time.sleep(0.02)


def transcript(n: "Neovim") -> list[str]:
    """The agent buffer's lines ([] before it exists)."""
    return n.lua(
        "local b = vim.fn.bufnr('pseudoclaude://chat') if b == -1 then return {} end "
        "return vim.api.nvim_buf_get_lines(b, 0, -1, false)"
    )


def type_message(n: "Neovim", text: str) -> None:
    """Types into the input window like a user: insert mode, the text, <C-s>."""
    n.api.command("PseudoChat")
    n.api.input("<Esc>i" + text.replace("<", "<lt>") + "<C-s>")


# A 1 ms libuv timer on Neovim's main loop: each tick notes the gap since the last one. A tick can only run between
# two steps of the loop, so the worst gap is the longest the loop was held by one piece of work (a sync disk read,
# a wait on the network), whatever the RPC client does meanwhile.
_WATCH_START = """
local uv = vim.uv
local w = { worst = 0, ticks = 0, last = uv.hrtime(), timer = uv.new_timer() }
_G.pc_main_loop_watch = w
w.timer:start(1, 1, function()
  local now = uv.hrtime()
  w.worst = math.max(w.worst, (now - w.last) / 1e6)
  w.ticks = w.ticks + 1
  w.last = now
end)
"""
_WATCH_STOP = """
local w = _G.pc_main_loop_watch
_G.pc_main_loop_watch = nil
w.timer:stop()
w.timer:close()
return { worst = math.max(w.worst, (vim.uv.hrtime() - w.last) / 1e6), ticks = w.ticks }
"""


@contextmanager
def main_loop_watch(n: "Neovim", what: str, bound_ms: float = 250.0) -> Iterator[dict[str, Any]]:
    """Asserts that Neovim's main loop never went `bound_ms` without a turn during the block (a 1 ms timer ticks
    throughout). Generous on purpose: it catches work that waits on a disk, the network or a whole session on the
    main loop, not slowness (speed is the benches'). The dict it yields gets `worst` (ms) and `ticks`."""
    n.lua(_WATCH_START)
    report: dict[str, Any] = {}
    try:
        yield report
    except BaseException:
        n.lua(_WATCH_STOP)
        raise
    report.update(n.lua(_WATCH_STOP))
    print(f"main loop during {what}: worst gap {report['worst']:.1f} ms over {report['ticks']} ticks")
    assert report["ticks"] > 0, f"the watch's timer never ran during {what}"
    assert report["worst"] < bound_ms, f"the main loop stalled {report['worst']:.0f} ms during {what} (bound {bound_ms:.0f})"


_WATCH_QUESTIONS = """
local real = vim.fn.getcharstr
vim.g.pc_asking, vim.g.pc_answered = false, 0
vim.fn.getcharstr = function(...)
  vim.g.pc_asking = true
  local ok, key = pcall(real, ...)
  vim.g.pc_asking, vim.g.pc_answered = false, vim.g.pc_answered + 1
  if not ok then error(key, 0) end
  return key
end
"""


# The highlights drawn on the screen in a window (ours are drawn as the screen is, by decoration providers, and kept
# in no buffer): read cell by cell from the window's own grid (a float always has one) after a redraw, as runs of
# bytes of each buffer line that a group covers. The grid is found by the text of its first row.
SCREEN_HIGHLIGHTS = """
local win = ...
assert(_G.distinct_highlights, "call distinct_highlights() before anything is drawn")
vim.cmd("redraw")
local api = vim.api
local buf = api.nvim_win_get_buf(win)
local height, width = api.nvim_win_get_height(win), api.nvim_win_get_width(win)
local lines = api.nvim_buf_get_lines(buf, 0, height, false)
local border = api.nvim_win_get_config(win).border
local off = (type(border) == "table" and (border[1] or "") ~= "") and 1 or 0
local function cells(grid, r)
  local out = {}
  for c = 0, width - 1 do
    local ok, cell = pcall(api.nvim__inspect_cell, grid, r + off, c + off)
    if not ok then
      return nil
    end
    out[#out + 1] = cell
  end
  return out
end
local function text(row)
  local t = {}
  for _, cell in ipairs(row) do
    t[#t + 1] = cell[1]
  end
  return (table.concat(t):gsub("%s+$", ""))
end
local grid
for g = 2, 1000 do
  local row = pcall(api.nvim__inspect_cell, g, 0, 0) and cells(g, 0)
  if row and text(row) == (lines[1] or ""):gsub("%s+$", "") then
    grid = g
    break
  end
end
assert(grid, "no grid shows the window's first line")
local out = {}
for r = 0, #lines - 1 do
  local line, at, open = lines[r + 1], 0, {}
  for _, cell in ipairs(cells(grid, r) or {}) do
    local t = cell[1]
    if at >= #line then
      break
    end
    if t ~= "" then
      for _, h in ipairs(cell[3] or {}) do
        if h.kind ~= "ui" then
          local run = open[h.hi_name]
          if run and run[3] == at then
            run[3] = at + #t
          else
            run = { r, at, at + #t, h.hi_name }
            open[h.hi_name] = run
            out[#out + 1] = run
          end
        end
      end
      at = at + #t
    end
  end
end
return out
"""

# Each highlight group of ours defined with a colour of its own, instead of its default link: the screen then says
# which group a cell shows (a link shows as the group it ends at).
DISTINCT_HIGHLIGHTS = """
local names = vim.tbl_keys(require("pseudoclaude.highlights").links)
table.sort(names)
for i, name in ipairs(names) do
  vim.api.nvim_set_hl(0, name, { fg = 0x100000 + i })
end
-- The first `nvim__inspect_cell` makes Neovim keep the groups of each attribute, renumbering them all: every cell
-- drawn before it would read as another group. So it is made here, before anything of ours is drawn.
vim.api.nvim__inspect_cell(1, 0, 0)
vim.cmd("redraw!")
_G.distinct_highlights = true
"""


def screen_highlights(n: "Neovim", win: int) -> list[tuple[int, int, int, str]]:
    """The highlights the screen shows in window `win`: (line, start byte, end byte, group), one per run of bytes a
    group covers (a redraw first). Groups defined as links show as the group they link to: see
    `distinct_highlights`."""
    return sorted(tuple(h) for h in n.lua(SCREEN_HIGHLIGHTS, win))


def screen_lines(n: "Neovim", win: int) -> list[str]:
    """The text the screen shows in window `win` (its winbar first, when it has one), row by row, trailing blanks cut,
    read cell by cell after a redraw: what the user sees, closed folds and cut lines included."""
    return n.lua(
        """
        local win = ...
        vim.cmd("redraw")
        local pos = vim.api.nvim_win_get_position(win)
        local rows = vim.api.nvim_win_get_height(win) + (vim.wo[win].winbar ~= "" and 1 or 0)
        local out = {}
        for r = pos[1] + 1, pos[1] + rows do
          local cells = {}
          for c = pos[2] + 1, pos[2] + vim.api.nvim_win_get_width(win) do
            cells[#cells + 1] = vim.fn.screenstring(r, c)
          end
          out[#out + 1] = (table.concat(cells):gsub("%s+$", ""))
        end
        return out
        """,
        win,
    )


def distinct_highlights(n: "Neovim") -> None:
    """Gives each of our highlight groups a colour of its own, so that `screen_highlights` names it (before the
    picker is opened: see DISTINCT_HIGHLIGHTS)."""
    n.lua(DISTINCT_HIGHLIGHTS)


def question_asked(n: "Neovim") -> None:
    """Waits until the plugin waits for the key that answers a question (its y/N prompts read it with
    vim.fn.getcharstr), so a key typed next is that answer, never a key that lands elsewhere."""
    if n.lua("return vim.g.pc_asking") is None:
        raise AssertionError("call watch_questions(n) before the key that asks")
    wait_for(lambda: n.lua("return vim.g.pc_asking"), what="the question")


def question_answered(n: "Neovim", count: int = 1) -> None:
    """Waits until `count` answers were read; what the answer did in its own step is done by then."""
    wait_for(lambda: not n.lua("return vim.g.pc_asking") and n.lua("return vim.g.pc_answered") >= count,
             what="the answer read")


def watch_questions(n: "Neovim") -> None:
    """Marks, inside Neovim, when the plugin waits for a key (see question_asked / question_answered)."""
    n.lua(_WATCH_QUESTIONS)


def nvim_binary() -> str:
    nvim = os.environ.get("PSEUDOCLAUDE_NVIM_BIN")
    if not nvim:
        nvim = subprocess.run(
            [str(ROOT / "scripts" / "ensure-nvim")], check=True, capture_output=True, text=True
        ).stdout.strip()
    return nvim


NVIM = nvim_binary()


class Neovim:
    """A headless Neovim process plus its RPC client (`self.api` is the pynvim `Nvim`)."""

    def __init__(self, workspace: Path, plugin_root: Path = ROOT, extra_args: list[str] | None = None):
        self.workspace = workspace
        self.plugin_root = plugin_root
        self.home = Path(tempfile.mkdtemp(prefix="pc-e2e-"))  # short: unix socket paths are limited to ~100 bytes
        self.socket = self.home / "nvim.sock"
        self.state_home = self.home / "state"
        self.stderr_path = self.home / "stderr.txt"
        env = dict(os.environ)
        for var, sub in (
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_DATA_HOME", "data"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_CACHE_HOME", "cache"),
        ):
            env[var] = str(self.home / sub)
        env.pop("NVIM", None)  # set inside :terminal; would make nvim talk to the parent
        env.pop("NVIM_APPNAME", None)
        argv = [
            NVIM,
            "--headless",
            "--clean",
            "--listen",
            str(self.socket),
            "--cmd",
            f"set rtp^={plugin_root}",
            *(extra_args or []),
        ]
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr
        )
        deadline = time.monotonic() + 20
        while not self.socket.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"nvim exited with {self.proc.returncode}: {self.stderr()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"nvim did not open {self.socket}: {self.stderr()}")
            time.sleep(0.02)
        # The socket file appears at bind(), a moment before listen(): on a loaded machine a connect can land
        # in between and be refused.
        while True:
            try:
                self.api = pynvim.attach("socket", path=str(self.socket))
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    # -- helpers -----------------------------------------------------------------------------------------

    def lua(self, code: str, *args: Any) -> Any:
        """Runs Lua `code` (a chunk; use `return`, and `...` for args) and returns its result."""
        return self.api.exec_lua(code, *args)

    def command_output(self, cmd: str) -> str:
        return self.api.api.exec2(cmd, {"output": True})["output"]

    def alive(self) -> bool:
        """True when the process is running and answers RPC."""
        if self.proc.poll() is not None:
            return False
        try:
            return self.api.eval("1 + 1") == 2
        except Exception:
            return False

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def loaded_modules(self, prefix: str = "pseudoclaude") -> list[str]:
        return self.lua(
            "local out = {} for name in pairs(package.loaded) do "
            "if name == ... or name:sub(1, #... + 1) == ... .. '.' then table.insert(out, name) end end "
            "table.sort(out) return out",
            prefix,
        )

    def library_mapped(self) -> bool:
        """Whether the native library is loaded in the process (Linux: from /proc/<pid>/maps)."""
        maps = Path(f"/proc/{self.proc.pid}/maps")
        if not maps.exists():
            pytest.skip("needs /proc/<pid>/maps")
        return LIB_NAME in maps.read_text()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.api.command("qall!")
                except Exception:
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            try:
                self.api.close()
            except Exception:
                pass
            self._stderr.close()
            shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh, empty workspace directory; Neovim runs with it as cwd."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


def source_build_id(root: Path = ROOT) -> str:
    """The build id of the checkout's sources, as build.rs computes it: SHA-256 over every file under src/,
    Cargo.toml and Cargo.lock, sorted by relative path, each as `path NUL bytes NUL`."""
    files = [p for p in root.joinpath("src").rglob("*") if p.is_file()]
    files += [p for p in (root / "Cargo.toml", root / "Cargo.lock") if p.is_file()]
    h = hashlib.sha256()
    for name, path in sorted((p.relative_to(root).as_posix(), p) for p in files):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def library_build_id(lib: Path = LIB_PATH) -> str | None:
    """The build id the library carries (bridge::BUILD_ID), read from the file without loading it."""
    m = re.search(rb"pseudoclaude-build-id:([0-9a-f]{64})", lib.read_bytes())
    return m.group(1).decode() if m else None


def stale_library() -> str | None:
    """Why the release library cannot be the code under test, or None: it is missing, or it was built from other
    sources than the checkout's (its build id differs)."""
    if not LIB_PATH.exists():
        return f"{LIB_PATH} is missing: run `cargo build --release` in {ROOT} first"
    built, here = library_build_id(), source_build_id()
    if built != here:
        return (f"{LIB_PATH} was built from other sources (build id {built or 'missing'}, the checkout's is {here}): "
                f"the tests would run a stale library; run `cargo build --release` in {ROOT} first")
    return None


@pytest.fixture(scope="session", autouse=True)
def fresh_library() -> None:
    """Every e2e test runs the library built from this checkout's sources, never an older one."""
    why = stale_library()
    if why:
        pytest.exit(why, returncode=2)


@pytest.fixture
def nvim(workspace: Path) -> Iterator[Neovim]:
    """Neovim with the plugin on 'runtimepath' (as installed by a plugin manager), setup() not called."""
    if not LIB_PATH.exists():
        pytest.fail(f"{LIB_PATH} is missing: run `cargo build --release` in {ROOT} first")
    n = Neovim(workspace)
    try:
        yield n
    finally:
        n.close()


@pytest.fixture
def start_nvim(workspace: Path) -> Iterator[Any]:
    """Factory for Neovim processes with another plugin root or arguments; all are closed after the test."""
    started: list[Neovim] = []

    def start(plugin_root: Path = ROOT, extra_args: list[str] | None = None) -> Neovim:
        n = Neovim(workspace, plugin_root=plugin_root, extra_args=extra_args)
        started.append(n)
        return n

    yield start
    for n in started:
        n.close()


@pytest.fixture
def fake_plugin(tmp_path: Path) -> Path:
    """A copy of the plugin's Lua files in a directory of its own, without a built library."""
    root = tmp_path / "fake-plugin"
    shutil.copytree(ROOT / "lua", root / "lua")
    shutil.copytree(ROOT / "plugin", root / "plugin")
    return root


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A fake OpenAI server (fake_llm.py). After the test, its errors must be exactly the ones the test declared
    with `fake.expect_errors(...)`, none by default: a test never passes on a request the server refused."""
    f = FakeOpenAI()
    try:
        yield f
    finally:
        f.close()
    f.check()


class Terminal:
    """Neovim's TUI in tmux, as a person sees it: keys sent with send-keys, the screen read back. Its own tmux
    server (socket in `tmp`) and XDG folders, so nothing of the user's setup or of another test leaks in."""

    def __init__(self, tmp: Path, cwd: Path, command: str, width: int = 160, height: int = 40) -> None:
        tmux = shutil.which("tmux")
        assert tmux, "this test drives Neovim's TUI in tmux, which is not installed: install it (Debian: apt-get install tmux)"
        self.tmux = tmux
        tmp.mkdir(parents=True, exist_ok=True)
        self.sock = tmp / "tmux.sock"
        home = tmp / "home"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "NVIM")) and not k.endswith("_API_KEY")}
        for var, sub in (("XDG_CONFIG_HOME", "c"), ("XDG_DATA_HOME", "d"), ("XDG_STATE_HOME", "s"), ("XDG_CACHE_HOME", "h")):
            self.env[var] = str(home / sub)
        self.env["TERM"] = "xterm-256color"
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "pc", "-x", str(width), "-y", str(height), "-c", str(cwd), command)

    def run(self, *args: str) -> str:
        return subprocess.run([self.tmux, "-S", str(self.sock), *args], env=self.env, check=True, capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "pc", *keys)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "pc")

    def wait_screen(self, pred: Any, what: str) -> str:
        def check() -> str | None:
            s = self.screen()
            return s if pred(s) else None

        return wait_for(check, what=what)

    def close(self) -> None:
        subprocess.run([self.tmux, "-S", str(self.sock), "kill-server"], env=self.env, capture_output=True)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Any]:
    """`terminal(cwd, command)` starts a `Terminal`; every one started is closed after the test."""
    started: list[Terminal] = []

    def start(cwd: Path, command: str, **size: int) -> Terminal:
        t = Terminal(tmp_path / f"term{len(started)}", cwd, command, **size)
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()
