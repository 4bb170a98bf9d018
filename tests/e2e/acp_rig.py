"""The real ACP agent for the tests, offline: `@zed-industries/claude-agent-acp` (installed by scripts/ensure-acp),
which runs the real Claude Code it bundles, pointed at the fake Anthropic server (fake_llm.FakeAnthropic) on
127.0.0.1.

    agent = claude_agent_command()                     # [".../.deps/acp/node_modules/.bin/claude-agent-acp"]
    env = claude_env(fake.base_url, home)              # the whole environment the agent needs, nothing else

`home` is the agent's HOME: Claude Code keeps its sessions under `home/.claude/projects/<cwd with / as ->/<id>.jsonl`
(what `session/load` reads) and its settings in `home/.claude.json`; one per test keeps tests apart.

What Claude Code asks of the fake in one turn (answered by FakeAnthropic): `HEAD /` (is the base URL up?) then
`POST /v1/messages?beta=true`, streamed, model `claude-sonnet-4-6`, `thinking: {"type": "adaptive"}`, its 20 or
so tools (`Write`, `Edit`, `Read`, `Bash`, ...), once per model call of the turn (a tool loop: one more per round).
No count_tokens, title or quota request with the variables below. The one request that leaves the machine is a
DNS lookup of raw.githubusercontent.com (the plugins' security list, fetched unconditionally in its headless mode;
offline it fails at once and nothing of ours is sent).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from fake_llm import FakeAnthropic

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-ant-fake-key"

# What keeps Claude Code off the network and quiet, beside ANTHROPIC_BASE_URL.
OFFLINE = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",  # Sentry
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # model checks, MCP registry, release notes, surveys
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",  # the plugin marketplace's git clone
}


def ensure_acp() -> Path:
    """`.deps/acp` after scripts/ensure-acp made sure the pinned agent is installed there."""
    out = subprocess.run([str(ROOT / "scripts" / "ensure-acp")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"scripts/ensure-acp failed: {out.stderr}"
    return Path(out.stdout.strip())


def claude_agent_command() -> list[str]:
    """The agent's command line (the adapter is a node script with its shebang)."""
    return [str(ensure_acp() / "node_modules" / ".bin" / "claude-agent-acp")]


def claude_env(base_url: str, home: Path | str) -> dict[str, str]:
    """The agent's environment: PATH and the locale from ours, HOME, the fake's URL and key, IS_SANDBOX=1 (as root,
    Claude Code refuses its bypass mode without it) and the variables of `OFFLINE`. Nothing else is inherited, so no
    real key or setting of the machine's user reaches it."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")}
    env.update(OFFLINE)
    env.update({"HOME": str(home), "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": API_KEY, "IS_SANDBOX": "1"})
    return env


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A fake Anthropic server; after the test, nothing it got may have been refused."""
    f = FakeAnthropic()
    try:
        yield f
    finally:
        f.close()
    assert f.errors == [], f"the fake Anthropic server refused or failed: {f.errors}"
