"""The other agents' sessions found in the editor (issue 46 item 2): `sessions.search(query, { external = true })`,
`:PseudoSearch!`, the picker's <C-g> with <C-o> on, and `agent:NAME` in the picker's prompt, over stores the real
agents wrote offline (agent_stores.py): each agent's cached set, read only, and a Claude Code session made here by the
real CLI next to one of ours, which <CR> on its hit imports and resumes on the message found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_stores import agent_sessions, git_workspace, make_session  # noqa: F401  (agent_sessions: the fixture)
from conftest import TRACK, Neovim, main_loop_watch, wait_for
from session_files import chat, session_id, write_session

AGENTS = ["claude", "codex", "gemini", "qwen", "opencode", "pi"]
TOOLS = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI", "qwen": "Qwen Code", "opencode": "opencode",
         "pi": "Pi"}


def agent_env(agent: str, home: Path) -> dict[str, str]:
    """Where `agent` keeps its sessions under `home`, as the environment tells the core (Neovim's XDG folders are the
    test's own)."""
    env = {"HOME": str(home)}
    env.update({
        "claude": {"CLAUDE_CONFIG_DIR": str(home / ".claude")},
        "codex": {"CODEX_HOME": str(home / ".codex")},
        "gemini": {"GEMINI_CLI_HOME": str(home)},
        "qwen": {"QWEN_HOME": str(home / ".qwen")},
        "opencode": {"XDG_DATA_HOME": str(home / ".local" / "share")},
        "pi": {"PI_CODING_AGENT_DIR": str(home / ".pi" / "agent")},
    }[agent])
    return env


def start(workspace: Path, env: dict[str, str]) -> Neovim:
    n = Neovim(workspace)
    for var, value in env.items():
        n.lua("vim.env[select(1, ...)] = select(2, ...)", var, value)
    n.lua("require('pseudoclaude').setup(...)", {"provider": {"name": "demo"}})
    n.lua(TRACK)
    n.api.command("set columns=180 lines=48")
    return n


SEARCH = """
local query, external = ...
vim.g.pc_hits, vim.g.pc_search = {}, vim.NIL
require("pseudoclaude").sessions.search(query, { external = external,
  on_hits = function(hits)
    local all = vim.g.pc_hits
    vim.list_extend(all, hits)
    vim.g.pc_hits = all
  end,
  on_done = function(err, summary) vim.g.pc_search = { err = err or false, summary = summary or false } end })
"""

STATE = """
local picker = require("pseudoclaude.float")
local s = picker.get_state()
if not s then return vim.NIL end
local st = s.search
return { full = s.full, external = s.external, search = st ~= nil, running = st and st.running or false,
  hits = st and st.hits or vim.NIL, selected = (picker.selected() or {}).id,
  rows = vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false),
  preview = s.bufs.preview and vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false) or {},
  prompt_title = vim.api.nvim_win_get_config(s.wins.prompt).title }
"""


def search(n: Neovim, query: str, external: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`sessions.search` in its streaming form, off the main loop: the hits as they came, and the summary."""
    n.lua(SEARCH, query, external)
    done = wait_for(lambda: n.lua("return vim.g.pc_search"), what=f"the search for {query!r}")
    assert done["err"] is False, done
    return n.lua("return vim.g.pc_hits"), done["summary"]


def state(n: Neovim) -> dict[str, Any]:
    return n.lua(STATE)


def searched(n: Neovim, pred: Any, what: str) -> dict[str, Any]:
    """The picker once its search is done and `pred(state)` holds."""
    return wait_for(lambda: (lambda s: s if s and s["search"] and not s["running"] and pred(s) else None)(state(n)),
                    what=what)


PROMPT = """
local s = require("pseudoclaude.float").get_state()
return vim.api.nvim_buf_get_lines(s.bufs.prompt, 0, 1, false)[1] or ""
"""


def set_prompt(n: Neovim, text: str) -> None:
    """Replaces the picker's prompt with `text` as a user does: <BS> over what is there, then the keys."""
    n.api.input("<End>" + "<BS>" * len(n.lua(PROMPT)) + text.replace("<", "<lt>"))
    wait_for(lambda: n.lua(PROMPT) == text, what=f"the prompt {text!r}")


@pytest.mark.parametrize("agent", AGENTS)
def test_each_agents_sessions_are_searched_from_the_editor_and_the_picker(agent: str, agent_sessions) -> None:
    made = agent_sessions(agent)
    two = made["two_turns"]
    home, ws = Path(two["home"]), Path(two["workspace"])
    first, second = two["words"]  # CHERRY in the first prompt, DAMSON in the second
    had_ours = (ws / ".PseudoClaude" / "sessions").exists()
    n = start(ws, agent_env(agent, home))
    try:
        rows = {r["session_id"]: r for r in n.lua("return require('pseudoclaude').sessions.list({ external = true })")
                if r.get("source")}
        row = rows[two["session_id"]]

        # sessions.search, streaming, under the main-loop watch: the history's messages that hold the word, each hit
        # naming its agent and the row's id (what resume() takes)
        with main_loop_watch(n, f"the external search of {agent}'s sessions"):
            hits, summary = search(n, second)
        assert [(h["id"], h["index"], h["role"], h["agent"]) for h in hits] == \
            [(row["id"], 3, "user", agent), (row["id"], 4, "assistant", agent)], hits
        assert summary["hits"] == 2 and summary["matched"] == 1 and summary["sessions"] >= 3, summary
        # without `external`, our own sessions only: none holds it
        assert search(n, second, False)[0] == []
        # the blocking form says the same
        blocking = n.lua("return require('pseudoclaude').sessions.search(..., { external = true })", first)
        assert [h["index"] for h in blocking if h["id"] == row["id"]] == [1, 2], blocking
        err = n.lua("return select(2, pcall(require('pseudoclaude').sessions.search, 'x', { external = 'yes' }))")
        assert "opts.external: expected a boolean" in err, err

        # :PseudoSearch! finds it in the picker: the rows marked with the agent, the preview the history around it
        n.api.command(f"PseudoSearch! {second}")
        st = searched(n, lambda s: len(s["hits"]) == 2, "the picker's external hits")
        assert st["external"] and "other agents" in json.dumps(st["prompt_title"]), st
        assert all(f"[{agent}]" in r for r in st["rows"][:2]) and second in st["rows"][0], st["rows"]
        st = wait_for(lambda: (lambda s: s if any(second in line for line in s["preview"]) else None)(state(n)),
                      what="the hit's preview")
        assert any(first in line for line in st["preview"]), st["preview"]  # the messages before the hit too
        assert any(f"{TOOLS[agent]} session" in line for line in st["preview"]), st["preview"]
        # `agent:` keeps its hits or leaves them out
        set_prompt(n, f"{second} agent:{agent}")
        searched(n, lambda s: len(s["hits"]) == 2, "the hits kept by agent:")
        set_prompt(n, f"{second} -agent:{agent}")
        st = searched(n, lambda s: s["hits"] == [], "the hits left out by -agent:")
        assert any("no message holds" in r for r in st["rows"]), st["rows"]
        n.api.input("<Esc>")
    finally:
        n.close()
    # the agent's set is shared: nothing of ours was written into its workspace
    assert (ws / ".PseudoClaude" / "sessions").exists() == had_ours


def test_ctrl_g_with_ctrl_o_finds_claude_codes_session_and_enter_resumes_it_at_the_hit(
    workspace: Path, tmp_path: Path
) -> None:
    # A Claude Code session made by the real CLI in this workspace (offline, against a fake server), and one of ours
    # holding the same word.
    home = tmp_path / "agent-home"
    git_workspace(workspace)
    theirs = make_session("claude", home, workspace, "Remember the word PLUMTREE.")
    ours = session_id(1)
    write_session(workspace, ours, chat("our PLUMTREE notes", ts=1_780_000_000))
    n = start(workspace, agent_env("claude", home))
    try:
        row_id = f"claude:{theirs['session_id']}"
        # the streaming API with external: ours first, then theirs
        hits, _ = search(n, "PLUMTREE")
        assert [(h["id"], h.get("agent")) for h in hits] == [(ours, None)] * 2 + [(row_id, "claude")] * 2, hits

        n.api.command("PseudoResume")
        wait_for(lambda: (lambda s: s and s["full"] and not s["external"])(state(n)), what="the list of ours")
        # the list mode: agent: keeps one agent's rows (claude's appear with <C-o>)
        n.api.input("<C-o>")
        wait_for(lambda: (lambda s: s and s["full"] and s["external"] and any("[claude]" in r for r in s["rows"]))(
            state(n)), what="the rows with claude's")
        set_prompt(n, "agent:claude")
        st = wait_for(lambda: (lambda s: s if s.get("selected") == row_id else None)(state(n)), what="agent:claude")
        assert sum("[claude]" in r for r in st["rows"]) == 1 and not any("our PLUMTREE" in r for r in st["rows"]), st
        set_prompt(n, "-agent:claude")
        st = wait_for(lambda: (lambda s: s if s.get("selected") == ours else None)(state(n)), what="-agent:claude")
        assert not any("[claude]" in r for r in st["rows"]) and any("our PLUMTREE" in r for r in st["rows"]), st
        set_prompt(n, "agent:pseudoclaude,claude")
        wait_for(lambda: (lambda s: s if any("[claude]" in r for r in s["rows"]) and
                          any("our PLUMTREE" in r for r in s["rows"]) else None)(state(n)), what="both agents' rows")
        set_prompt(n, "agent:codex")
        st = wait_for(lambda: (lambda s: s if s.get("selected") is None else None)(state(n)), what="no codex row")

        # <C-g>: the search covers both (<C-o> is on); <C-o> in search mode turns theirs off and on again
        set_prompt(n, "")
        n.api.input("<C-g>")
        with main_loop_watch(n, "the picker's search over our sessions and Claude Code's"):
            set_prompt(n, "PLUMTREE")
            st = searched(n, lambda s: {h["id"] for h in s["hits"]} == {ours, row_id}, "both sessions' hits")
        assert any("[claude]" in r for r in st["rows"]), st["rows"]
        n.api.input("<C-o>")
        st = searched(n, lambda s: not s["external"] and {h["id"] for h in s["hits"]} == {ours}, "ours only")
        n.api.input("<C-o>")
        searched(n, lambda s: s["external"] and {h["id"] for h in s["hits"]} == {ours, row_id}, "theirs again")
        set_prompt(n, "PLUMTREE agent:claude")
        st = searched(n, lambda s: {h["id"] for h in s["hits"]} == {row_id}, "claude's hits only")

        # <CR> on Claude Code's hit: imported and resumed as <CR> on its row does, the cursor on the message found
        assert st["hits"][0]["role"] == "user" and st["hits"][0]["index"] == 1, st["hits"]
        n.api.input("<CR>")
        report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="the resume")
        assert report["ok"] is True, report
        loaded = n.lua("return require('pseudoclaude').sessions.load(...)", report["id"])
        assert report["id"] != ours and loaded["messages"][0]["content"] == "Remember the word PLUMTREE.", loaded
        assert n.lua("return require('pseudoclaude.float').get_state()") is None
    finally:
        n.close()
