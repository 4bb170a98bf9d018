"""Other agents' sessions kept in our store (issue 46, "Kept"), with sessions made by the real Claude Code CLI
(`cli.js -p` of the Claude Agent SDK that claude-agent-acp bundles, installed by scripts/ensure-acp) against the fake
Anthropic server: `setup({ external = { keep = true } })` copies them within 5 s of the editor's start, a new turn by
the CLI is in the copy within 2 s, a compaction or a truncated original never shrinks the copy, and with the originals
deleted the copies are still listed, previewed, searched, exported, forked and resumed. `:PseudoKeep` does it once;
`:checkhealth` names Claude Code's `cleanupPeriodDays`; the main loop keeps turning while hundreds are copied."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from acp_rig import ROOT, claude_env, ensure_acp, fake_anthropic  # noqa: F401 - a fixture
from conftest import TRACK, Neovim, main_loop_watch, type_message, wait_for
from fake_llm import FakeAnthropic

SETUP_KEEP = "lua require('pseudoclaude').setup({ external = { keep = true } })"


def cli_js() -> Path:
    return ensure_acp() / "node_modules" / "@anthropic-ai" / "claude-agent-sdk" / "cli.js"


class Claude:
    """The real Claude Code CLI in print mode, in `workspace`, its HOME (and so its store) at `home`."""

    def __init__(self, fake: FakeAnthropic, home: Path, workspace: Path) -> None:
        self.fake, self.home, self.workspace = fake, home, workspace
        self.env = claude_env(fake.base_url, home)

    def run(self, prompt: str, answer: str, resume: str | None = None) -> str:
        """One turn (`--resume ID` goes on in that session's transcript); returns the session id."""
        self.fake.push_text(answer)
        argv = ["node", str(cli_js()), "-p", prompt, "--output-format", "json"]
        if resume:
            argv[3:3] = ["--resume", resume]
        out = subprocess.run(argv, cwd=self.workspace, env=self.env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout)["session_id"]

    @property
    def store(self) -> Path:
        return self.home / ".claude" / "projects"

    def transcript(self, sid: str) -> Path:
        (path,) = self.store.glob(f"*/{sid}.jsonl")
        return path


@pytest.fixture
def claude(fake_anthropic: FakeAnthropic, tmp_path: Path, workspace: Path,  # noqa: F811 - the fixture
           monkeypatch: pytest.MonkeyPatch) -> Claude:
    """The CLI, and Neovim's environment pointing at its store (set before Neovim starts)."""
    home = tmp_path / "claude-home"
    home.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex"))
    return Claude(fake_anthropic, home, workspace)


def copies(workspace: Path) -> dict[str, tuple[str, list[str]]]:
    """The kept copies on disk: the original's id -> (our session id, the texts of its log's message lines)."""
    out: dict[str, tuple[str, list[str]]] = {}
    sessions = workspace / ".PseudoClaude" / "sessions"
    if not sessions.is_dir():
        return out
    for log in sessions.glob("*/conversation.jsonl"):
        lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        if not lines or not (lines[0].get("imported_from") or {}).get("kept"):
            continue
        texts = [m.get("content", "") for m in lines[0].get("messages", [])]
        texts += [e.get("content", "") for e in lines[1:] if e.get("type", "message") == "message"]
        for e in lines[1:]:
            if e.get("type") == "replace":
                texts = [m.get("content", "") for m in e.get("messages", [])]
        out[lines[0]["imported_from"]["id"]] = (log.parent.name, texts)
    return out


def loaded(n: Neovim, sid: str) -> list[str]:
    return [m.get("content", "") for m in n.lua("return require('pseudoclaude').sessions.load(...)", sid)["messages"]]


def test_kept_copies_follow_the_real_claude_code_and_outlive_its_transcripts(
    claude: Claude, start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic  # noqa: F811
) -> None:
    first = claude.run("remember PLUMTREE", "PLUMTREE noted.")
    second = claude.run("remember QUINCE", "QUINCE noted.")
    started = time.monotonic()
    n = start_nvim(extra_args=["-c", SETUP_KEEP])
    wait_for(lambda: len(copies(workspace)) == 2, timeout=15, what="both sessions copied")
    took = time.monotonic() - started
    assert took <= 5, f"copied {took:.1f} s after the editor started"
    ours = {i["id"] for i in n.lua("return require('pseudoclaude').sessions.list()")}
    kept = copies(workspace)
    assert ours == {kept[first][0], kept[second][0]}
    assert kept[first][1] == ["remember PLUMTREE", "PLUMTREE noted."]

    # a new turn by the CLI: in the copy within 2 s of the CLI's exit (its transcript is written by then)
    claude.run("and APRICOT", "APRICOT noted.", resume=first)
    ended = time.monotonic()
    wait_for(lambda: "APRICOT noted." in copies(workspace)[first][1], timeout=10, what="the new turn copied")
    took = time.monotonic() - ended
    assert took <= 2, f"the new turn reached the copy {took:.1f} s after the CLI wrote it"
    sid = kept[first][0]
    assert loaded(n, sid) == ["remember PLUMTREE", "PLUMTREE noted.", "and APRICOT", "APRICOT noted."]

    # Claude Code's own compaction: the copy keeps everything before the summary
    claude.run("/compact", "<summary>PLUMTREE and APRICOT were noted.</summary>", resume=first)
    wait_for(lambda: any("continued from a previous conversation" in t for t in copies(workspace)[first][1]),
             timeout=10, what="the compaction copied")
    after = loaded(n, sid)
    assert after[:4] == ["remember PLUMTREE", "PLUMTREE noted.", "and APRICOT", "APRICOT noted."], after

    # a truncated original (a cut file, a rewritten one): the copy does not shrink
    path = claude.transcript(first)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:4]))
    claude.run("one more: MEDLAR", "MEDLAR noted.", resume=second)  # a change the keeper sees for sure
    wait_for(lambda: "MEDLAR noted." in copies(workspace)[second][1], timeout=10, what="the other session's turn")
    assert loaded(n, sid)[:len(after)] == after

    # the originals gone (Claude Code's clean-up): the copies are whole, and ours in every way
    shutil.rmtree(claude.store)
    time.sleep(0.5)
    assert loaded(n, sid)[:len(after)] == after
    rows = n.lua("return require('pseudoclaude').sessions.list()")
    assert sid in {r["id"] for r in rows}
    preview = wait_for(lambda: n.lua("""
        if vim.g.pc_preview == nil then
          vim.g.pc_preview = false
          require('pseudoclaude').sessions.preview_async(..., function(err, p) vim.g.pc_preview = p or err end)
        end
        return vim.g.pc_preview or nil""", sid), what="the preview")
    assert "APRICOT" in json.dumps(preview)
    hits = n.lua("""local hits = require('pseudoclaude').sessions.search('apricot')
        return vim.tbl_map(function(h) return h.id end, hits)""")
    assert sid in hits, hits
    markdown = n.lua("return require('pseudoclaude').sessions.export(...)", sid)
    assert "PLUMTREE noted." in markdown and "APRICOT noted." in markdown
    forked = n.lua("return require('pseudoclaude').sessions.fork(...)", sid)
    assert loaded(n, forked)[:4] == after[:4]

    # resumed with our own agent, against the fake: the model reads the kept history
    n.lua("require('pseudoclaude').setup(...)", {"external": {"keep": True}, "provider": {
        "name": "anthropic", "base_url": fake_anthropic.base_url, "model": "fake-claude",
        "api_key_env": "PC_TEST_NO_KEY"}})
    n.lua(TRACK)
    before = len(fake_anthropic.requests)
    fake_anthropic.push_text("Still here.")
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.lua("require('pseudoclaude').resume(...)", sid)
    wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="PseudoClaudeResumed")
    type_message(n, "what did I ask you to remember?")
    wait_for(lambda: len(fake_anthropic.requests) > before, what="the request")
    sent = json.dumps(fake_anthropic.requests[-1]["messages"])
    assert "PLUMTREE" in sent and "APRICOT" in sent


def health(n: Neovim) -> str:
    """`:checkhealth pseudoclaude`'s section on other agents' sessions."""
    n.api.command("checkhealth pseudoclaude")
    report = "\n".join(n.api.current.buffer[:])
    return report[report.index("other agents' sessions"):].split("sessions held by other editors")[0]


def test_pseudokeep_copies_once_and_checkhealth_names_the_cleanup_period(
    claude: Claude, nvim: Neovim, workspace: Path
) -> None:
    sid = claude.run("remember FIG", "FIG noted.")
    (claude.home / ".claude" / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 7}))
    nvim.lua("require('pseudoclaude').setup({})")
    section = health(nvim)
    assert "claude: 1 session(s) of this workspace" in section, section
    assert "cleanupPeriodDays = 7" in section, section
    assert "WARNING" in section, section
    assert "external.keep is off" in section, section
    time.sleep(1)
    assert copies(workspace) == {}  # keep is off: nothing copied

    nvim.lua("vim.g.pc_notes = {}; vim.notify = function(m) local x = vim.g.pc_notes; "
             "table.insert(x, m); vim.g.pc_notes = x end")
    nvim.api.command("PseudoKeep")
    note = wait_for(lambda: next((m for m in nvim.lua("return vim.g.pc_notes") if "kept" in m), None),
                    what=":PseudoKeep's report")
    assert "1 copied" in note, note
    assert copies(workspace)[sid][1] == ["remember FIG", "FIG noted."]
    nvim.api.command("PseudoKeep")
    wait_for(lambda: any("1 up to date" in m for m in nvim.lua("return vim.g.pc_notes")), what="the second report")
    assert len(copies(workspace)) == 1

    nvim.lua("require('pseudoclaude').setup({ external = { keep = true } })")
    nvim.api.command("bwipeout!")
    section = health(nvim)
    assert "external.keep is on" in section and "kept here" in section, section
    assert "WARNING" not in section, section


def test_copying_hundreds_of_sessions_never_stalls_the_main_loop(
    claude: Claude, start_nvim: Any, workspace: Path
) -> None:
    sid = claude.run("remember PEAR", "PEAR noted.")
    original = claude.transcript(sid)
    text = original.read_text()
    # 300 more sessions: the real transcript under new session ids (Claude Code's format, written by it)
    for i in range(300):
        new = str(uuid.uuid4())
        (original.parent / f"{new}.jsonl").write_text(text.replace(sid, new).replace("PEAR", f"PEAR{i}"))
    n = start_nvim()
    n.lua("require('pseudoclaude').setup({})")
    with main_loop_watch(n, "copying 301 sessions"):
        n.lua("require('pseudoclaude.keep').start()")
        wait_for(lambda: len(copies(workspace)) == 301, timeout=120, what="every session copied")
    status = n.lua("return require('pseudoclaude.keep').status()")
    assert status["running"] and status["syncs"] >= 1
