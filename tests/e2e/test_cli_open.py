"""`pseudoclaude sessions open ID|last` (issue 31) into a real Neovim: the binary replaces itself with the program
`$PSEUDOCLAUDE_NVIM` names, here a wrapper that starts the real headless Neovim with the plugin on 'runtimepath' and
records the `User PseudoClaudeResumed` report; the session must be the one resumed, its messages restored."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from conftest import NVIM, ROOT
from session_files import session_id, write_session

CLI = ROOT / "target" / "release" / "pseudoclaude"


def open_in_neovim(ws: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    home = Path(tempfile.mkdtemp(prefix="pc-open-"))
    report = home / "report.json"
    on_resumed = (
        "lua vim.api.nvim_create_autocmd('User', {pattern = 'PseudoClaudeResumed', callback = function(a) "
        f"vim.fn.writefile({{vim.json.encode(a.data)}}, {json.dumps(str(report))}); vim.cmd('qa!') end}})"
    )
    wrapper = home / "nvim"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec {json.dumps(str(NVIM))} --headless --clean --cmd {json.dumps(f"set rtp^={ROOT}")} '
        f"--cmd {json.dumps(on_resumed)} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    env = dict(os.environ, PSEUDOCLAUDE_NVIM=str(wrapper))
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state")):
        env[var] = str(home / sub)
    env.pop("NVIM", None)
    out = subprocess.run(
        [str(CLI), "-C", str(ws), "sessions", "open", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out, (json.loads(report.read_text()) if report.exists() else None)


def test_open_resumes_the_session_in_neovim(tmp_path):
    old, new = session_id(1), session_id(2)
    write_session(tmp_path, old, title="the old task", mtime=1_780_000_000)
    write_session(tmp_path, new, title="the new task", mtime=1_780_000_100)
    out, report = open_in_neovim(tmp_path, old)
    assert out.returncode == 0, out.stderr
    # Its two messages and the reminder a resume after a long pause adds (these sessions are months old).
    assert report is not None and report["ok"] and report["id"] == old and report["messages"] == 3, report
    assert report["stale_hours"] > 6, report
    out, report = open_in_neovim(tmp_path, "last")
    assert out.returncode == 0, out.stderr
    assert report is not None and report["ok"] and report["id"] == new, report
