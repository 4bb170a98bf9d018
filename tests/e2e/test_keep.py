"""Other agents' sessions kept in our store (issue 46, "Kept"), with sessions made by the real Claude Code CLI
(`cli.js -p` of the Claude Agent SDK that claude-agent-acp bundles, installed by scripts/ensure-acp) against the fake
Anthropic server: `setup({ external = { keep = true } })` copies them within 5 s of the editor's start, a new turn by
the CLI is in the copy within 2 s, a compaction or a truncated original never shrinks the copy, and with the originals
deleted the copies are still listed, previewed, searched, exported, forked and resumed. `:PseudoKeep` does it once;
`:checkhealth` names Claude Code's `cleanupPeriodDays`; the main loop keeps turning while hundreds are copied.
Then each agent's sessions as the real agent wrote them (agent_stores.py's sets, moved to the test's workspace): copied,
followed while the real agent adds a turn, and whole after the store is gone; a real Gemini `$rewindTo` and Gemini's
own clean-up after the copy; `:checkhealth` with Gemini's `general.sessionRetention`."""

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
from agent_stores import AGENTS, SETS, agent_sessions, make_session, moved  # noqa: F401 - a fixture
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


def loaded_messages(n: Neovim, sid: str) -> list[dict[str, Any]]:
    return n.lua("return require('pseudoclaude').sessions.load(...)", sid)["messages"]


def loaded(n: Neovim, sid: str) -> list[str]:
    return [m.get("content", "") for m in loaded_messages(n, sid)]


def preview_of(n: Neovim, sid: str) -> str:
    """The session's preview as the picker gets it (`sessions.preview_async`), shown by `vim.inspect`."""
    n.lua("""_G.pc_preview = nil
        require('pseudoclaude').sessions.preview_async(..., function(err, p)
          _G.pc_preview = vim.inspect(p or { error = err })
        end)""", sid)
    return wait_for(lambda: n.lua("return _G.pc_preview"), what="the preview")


def resumed_and_asked(n: Neovim, fake: FakeAnthropic, sid: str) -> str:
    """The session resumed by our own agent against `fake` (keep stays on), and a question asked: the messages the
    model got, as JSON."""
    n.lua("require('pseudoclaude').setup(...)", {"external": {"keep": True}, "provider": {
        "name": "anthropic", "base_url": fake.base_url, "model": "fake-claude", "api_key_env": "PC_TEST_NO_KEY"}})
    n.lua(TRACK)
    before = len(fake.requests)
    fake.push_text("Still here.")
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.lua("require('pseudoclaude').resume(...)", sid)
    wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="PseudoClaudeResumed")
    type_message(n, "what did I ask you to remember?")
    wait_for(lambda: len(fake.requests) > before, what="the request")
    return json.dumps(fake.requests[-1]["messages"])



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
    preview = preview_of(n, sid)
    assert "APRICOT" in preview, preview
    hits = n.lua("""local hits = require('pseudoclaude').sessions.search('apricot')
        return vim.tbl_map(function(h) return h.id end, hits)""")
    assert sid in hits, hits
    markdown = n.lua("return require('pseudoclaude').sessions.export(...)", sid)
    assert "PLUMTREE noted." in markdown and "APRICOT noted." in markdown
    forked = n.lua("return require('pseudoclaude').sessions.fork(...)", sid)
    assert loaded(n, forked)[:4] == after[:4]

    # resumed with our own agent, against the fake: the model reads the kept history
    sent = resumed_and_asked(n, fake_anthropic, sid)
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


# -- every agent's sessions, as the real agents wrote them (agent_stores.py's sets, moved to a workspace of the test) --

# Where Neovim's core looks for each agent's store: all of them under the test's home (none of the machine's).
def store_vars(home: Path) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(home / ".claude"), "CODEX_HOME": str(home / ".codex"),
            "GEMINI_CLI_HOME": str(home), "QWEN_HOME": str(home / ".qwen"),
            "XDG_DATA_HOME": str(home / ".local" / "share"), "PI_CODING_AGENT_DIR": str(home / ".pi" / "agent")}


# Each agent's whole store: what its own clean-up deletes (here all at once).
STORES = {"claude": ".claude/projects", "codex": ".codex/sessions", "gemini": ".gemini/tmp", "qwen": ".qwen/projects",
          "opencode": ".local/share/opencode", "pi": ".pi/agent/sessions"}


def keeping(n: Neovim, home: Path, extra: dict[str, Any] | None = None) -> float:
    """The stores pointed at `home`, then `setup({ external = { keep = true } })`; returns when setup was called."""
    n.lua("for k, v in pairs(...) do vim.env[k] = v end vim.env.QWEN_RUNTIME_DIR = nil "
          "vim.env.PI_CODING_AGENT_SESSION_DIR = nil", store_vars(home))
    started = time.monotonic()
    n.lua("require('pseudoclaude').setup(...)", {"external": {"keep": True}, **(extra or {})})
    return started


def gone(store: Path) -> None:
    """The store deleted, as an agent's clean-up would. A reader of opencode's database (the keeper's sync) may put a
    `-shm` file back while the folder is removed: removed again."""
    for _ in range(20):
        try:
            shutil.rmtree(store)
            return
        except OSError:
            time.sleep(0.1)
    shutil.rmtree(store)


def has_all(texts: list[str], words: list[str]) -> bool:
    joined = "\n".join(texts)
    return all(w in joined for w in words)


@pytest.mark.parametrize("agent", AGENTS)
def test_each_agents_sessions_are_kept_followed_and_outlive_their_originals(
    agent: str, agent_sessions: Any, start_nvim: Any, workspace: Path, tmp_path: Path,  # noqa: F811
    fake_anthropic: FakeAnthropic  # noqa: F811
) -> None:
    made = moved(agent_sessions(agent), tmp_path / "agent-home", workspace)
    home = tmp_path / "agent-home"
    wanted = {i["session_id"]: i for name, i in made.items() if name in SETS}
    n = start_nvim()
    with main_loop_watch(n, f"keeping {agent}'s sessions"):
        started = keeping(n, home)
        wait_for(lambda: set(wanted) <= set(copies(workspace)), timeout=30, what=f"{agent}'s sessions copied")
        took = time.monotonic() - started
    print(f"{agent}: {len(wanted)} sessions copied {took:.2f} s after setup")
    assert took <= 5, f"{agent}'s sessions copied {took:.1f} s after setup"
    kept = copies(workspace)
    for sid, info in wanted.items():
        assert has_all(kept[sid][1], info["words"]), (info["words"], kept[sid][1])
    tools = loaded_messages(n, kept[made["tools"]["session_id"]][0])
    assert any("FIGTREE" in json.dumps(m.get("tool_calls", [])) for m in tools), tools

    # the terminal agent goes on with its last session while the editor runs: the turn is in our copy within 2 s
    with main_loop_watch(n, f"following {agent}'s new turn"):
        turn = make_session(agent, home, workspace, "Now also remember the word ELDER.", resume=True)
        ended = time.monotonic()
        wait_for(lambda: "ELDER" in "\n".join(copies(workspace).get(turn["session_id"], ("", []))[1]), timeout=30,
                 what=f"{agent}'s new turn copied")
        took = time.monotonic() - ended
    print(f"{agent}: the new turn copied {took:.2f} s after the agent's exit")
    assert took <= 2, f"{agent}'s new turn reached the copy {took:.1f} s after the agent wrote it"
    kept = copies(workspace)
    if turn["session_id"] in wanted:  # the same session went on: the copy holds both
        assert has_all(kept[turn["session_id"]][1], wanted[turn["session_id"]]["words"] + ["ELDER"])

    # the agent's clean-up: every original gone; each copy is whole, listed, previewed, searched and resumed
    before = {sid: loaded(n, kept[sid][0]) for sid in kept}
    gone(home / STORES[agent])
    time.sleep(1)  # a sync may run on the deletion: it must take nothing
    assert {sid: loaded(n, kept[sid][0]) for sid in kept} == before
    ours = {r["id"] for r in n.lua("return require('pseudoclaude').sessions.list()")}
    assert {c for c, _ in kept.values()} <= ours
    rows = n.lua("return require('pseudoclaude').sessions.list({ external = true })")
    assert not [r for r in rows if r.get("source")], rows  # no original left to list
    text = made["text"]
    sid = kept[text["session_id"]][0]
    preview = preview_of(n, sid)
    assert "PLUMTREE" in preview, preview
    hits = n.lua("return vim.tbl_map(function(h) return h.id end, require('pseudoclaude').sessions.search('plumtree'))")
    assert sid in hits, hits

    assert "PLUMTREE" in resumed_and_asked(n, fake_anthropic, sid)


def test_a_gemini_rewind_after_the_copy_and_geminis_own_cleanup_take_nothing_from_it(
    agent_sessions: Any, start_nvim: Any, workspace: Path, tmp_path: Path
) -> None:
    # The rewound session as Gemini wrote it: ALPHA, BRAVO, then (an interactive --resume) `/rewind` to before BRAVO
    # (a `{"$rewindTo": id}` line, the kept messages `$set`) and CHARLIE. Its file is append-only: the lines before
    # the `$rewindTo` are the file as it stood before the rewind.
    home = tmp_path / "agent-home"
    made = moved(agent_sessions("gemini"), home, workspace)
    info = made["rewound"]
    path = Path(info["store"])
    whole = path.read_bytes()
    at = whole.index(b'{"$rewindTo"')
    path.write_bytes(whole[:at])
    n = start_nvim()
    keeping(n, home)
    sid = info["session_id"]
    wait_for(lambda: has_all(copies(workspace).get(sid, ("", []))[1], ["ALPHA", "BRAVO"]), timeout=30,
             what="the session copied as it stood before the rewind")
    copy = copies(workspace)[sid][0]
    before = loaded(n, copy)

    # the rewind written (the rest of Gemini's own bytes): BRAVO rewound away in the original, never in the copy
    with path.open("ab") as f:
        f.write(whole[at:])
    wait_for(lambda: "CHARLIE" in "\n".join(copies(workspace)[sid][1]), timeout=10, what="the rewind synced")
    after = loaded(n, copy)
    assert after[:len(before)] == before, (before, after)
    assert has_all(after, ["ALPHA", "BRAVO", "CHARLIE"]), after

    # Gemini's next start deletes the rewound session (its stray same-id file, `general.sessionRetention`): the copy
    # keeps all of it, and the new session is copied too
    chats = path.parent
    turn = make_session("gemini", home, workspace, "Remember the word DELTA.")
    ended = time.monotonic()
    assert not list(chats.glob(f"*-{sid[:8]}.jsonl")), "Gemini kept the rewound session this time"
    wait_for(lambda: "DELTA" in "\n".join(copies(workspace).get(turn["session_id"], ("", []))[1]), timeout=30,
             what="the new session copied")
    print(f"gemini: the new session copied {time.monotonic() - ended:.2f} s after the agent's exit")
    assert loaded(n, copy) == after


def test_checkhealth_reads_geminis_session_retention(agent_sessions: Any, nvim: Neovim, workspace: Path,
                                                     tmp_path: Path) -> None:
    home = tmp_path / "agent-home"
    moved(agent_sessions("gemini"), home, workspace)
    settings_file = home / ".gemini" / "settings.json"
    settings = json.loads(settings_file.read_text())
    nvim.lua("for k, v in pairs(...) do vim.env[k] = v end", store_vars(home))
    nvim.lua("require('pseudoclaude').setup({})")
    section = health(nvim)
    line = next(x for x in section.splitlines() if "gemini:" in x)
    assert "4 session(s) of this workspace" in line and "general.sessionRetention unset" in line, section
    assert "WARNING" in line and "older than 30 days" in line, section

    settings["general"]["sessionRetention"] = {"enabled": True, "maxAge": "2w"}
    settings_file.write_text(json.dumps(settings))
    line = next(x for x in health(nvim).splitlines() if "gemini:" in x)
    assert "maxAge = 2w" in line and "older than 14 days" in line and "WARNING" in line, line

    settings["general"]["sessionRetention"] = {"enabled": False}
    settings_file.write_text(json.dumps(settings))
    line = next(x for x in health(nvim).splitlines() if "gemini:" in x)
    assert "enabled = false" in line and "WARNING" not in line, line
