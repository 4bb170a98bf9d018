"""Full-text search over other agents' sessions (issue 46 item 2): `pseudoclaude sessions search --external TEXT`
over stores the real agents wrote offline (agent_stores.py), each hit naming the message of the history a resume
restores and the agent that had it; a damaged transcript searched for what it still holds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_stores import agent_sessions  # noqa: F401  (the fixture)

CLI = Path(__file__).resolve().parents[2] / "target" / "release" / "pseudoclaude"

# the agents whose stores the core reads; each one's sessions are searched the same way
SEARCHED = ["claude", "codex", "gemini", "qwen", "opencode", "pi"]


def cli(home: Path | str, workspace: Path | str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "CODEX_", "XDG_"))}
    env["HOME"] = str(home)
    return subprocess.run([str(CLI), "-C", str(workspace), "sessions", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def rows(home: Path | str, workspace: Path | str) -> list[dict]:
    r = cli(home, workspace, "list", "--external", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def row_of(all_rows: list[dict], session_id: str) -> dict:
    """The list's row of the agent's session `session_id` (its own id is in the row's `id`)."""
    found = [r for r in all_rows if session_id in r["id"]]
    assert len(found) == 1, (session_id, all_rows)
    return found[0]


@pytest.mark.parametrize("agent", SEARCHED)
def test_a_word_of_each_turn_is_found_in_the_message_that_holds_it(agent, agent_sessions):
    made = agent_sessions(agent)
    two = made["two_turns"]
    home, ws = two["home"], two["workspace"]
    listed = rows(home, ws)
    first, second = two["words"][0], two["words"][1]  # CHERRY in the first prompt, DAMSON in the second
    row = row_of(listed, two["session_id"])

    r = cli(home, ws, "search", "--external", second, "--json")
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    # the second prompt is the history's third message (prompt, answer, prompt), and the fake's answer names it too
    assert [(h["id"], h["index"], h["role"]) for h in hits] == [(row["id"], 3, "user"), (row["id"], 4, "assistant")]
    assert all(h["agent"] == agent and second in h["snippet"] for h in hits), hits

    # the plain output is ours: ID:INDEX:ROLE: snippet, newest session first
    r = cli(home, ws, "search", "--external", first)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"{row['id']}:1:user: Remember the word {first}.", r.stdout

    # our own sessions are not searched for it, and a word no one wrote is no hit (exit 1, said)
    assert cli(home, ws, "search", first).returncode == 1
    r = cli(home, ws, "search", "--external", "NOSUCHWORDANYWHERE")
    assert r.returncode == 1 and "no message holds" in r.stderr, r


@pytest.mark.parametrize("agent", SEARCHED)
def test_a_tool_calls_arguments_are_searched(agent, agent_sessions):
    tools = agent_sessions(agent)["tools"]
    word = tools["words"][0]  # FIGTREE, which the agent's write tool wrote into notes.txt
    r = cli(tools["home"], tools["workspace"], "search", "--external", word, "--json")
    assert r.returncode == 0, r.stderr
    kinds = {h["kind"] for h in json.loads(r.stdout) if tools["session_id"] in h["id"]}
    assert "tool_call" in kinds, r.stdout


# opencode keeps its sessions in SQLite, not in lines a crash can cut: its damage is the list's (a database busy or
# of another schema, tests/it/import.rs)
@pytest.mark.parametrize("agent", [a for a in SEARCHED if a != "opencode"])
def test_a_damaged_transcript_is_searched_for_what_it_still_holds(agent, agent_sessions, tmp_path):
    two = agent_sessions(agent)["two_turns"]
    home = tmp_path / "home"
    shutil.copytree(two["home"], home, symlinks=True)
    store = home / Path(two["store"]).relative_to(two["home"])
    lines = store.read_bytes().split(b"\n")
    # a line that is no JSON in the middle and a last line cut short, as a crash of the agent leaves it
    lines.insert(1, b'{"type": "user", "message": {"rol')
    store.write_bytes(b"\n".join(lines).rstrip(b"\n")[:-7])
    r = cli(home, two["workspace"], "search", "--external", two["words"][0], "--json")
    assert r.returncode == 0, r.stderr
    assert any(h["role"] == "user" and h["index"] == 1 for h in json.loads(r.stdout)), r.stdout
