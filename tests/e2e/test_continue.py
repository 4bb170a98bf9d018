"""Another agent's session continued with the agent that had it (issue 46 item 3), end to end, with the real agents:
a Claude Code session made in a terminal by the real Claude Code CLI (`cli.js -p` of the Claude Agent SDK that
claude-agent-acp bundles, installed by scripts/ensure-acp), against the fake Anthropic server on 127.0.0.1; then, in
the editor, the picker's `<C-o>` and `<CR>` on its row (or `resume(id)` with its id) hand it to claude-agent-acp,
which `session/load`s it and goes on in its own transcript. Fallbacks: the transcript gone (the agent is told our
copy of the conversation), the agent not installed. Then each other agent (Gemini CLI, Qwen Code, opencode, Pi, Codex):
a session its real CLI made in a terminal, continued by its real ACP server (`gemini --acp`, `qwen --acp`, `opencode
acp`, pi-acp, codex-acp), which the editor starts inside a network namespace where only the agent's fake model server
answers (agent_stores.Offline)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import pytest

from acp_rig import claude_agent_command, claude_env, ensure_acp, fake_anthropic  # noqa: F401 - a fixture
from agent_stores import (NOTES, Offline, acp_command, agent_env, answer, gemini_view, git_workspace, make_session,
                          openai_view, opencode_db, responses_view, store_files)
from conftest import Neovim, wait_for
from fake_llm import FakeAnthropic, FakeGemini, FakeOpenAI, FakeResponses
from session_files import chat, session_id, write_session
from test_acp import agent_pids, chat_text, log_lines, send, setup, wait_turns
from test_chat import setup as chat_setup
from test_import import AGENT_HOMES

STATE = """
local picker = require("pseudoclaude.float")
local s = picker.get_state()
if not s then return vim.NIL end
return { full = s.full, external = s.external, selected = (picker.selected() or {}).id,
  rows = vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false) }
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Claude Code's HOME, the terminal's and the agent's: one store of sessions (`.claude/projects`)."""
    h = tmp_path / "agent-home"
    h.mkdir()
    return h


def terminal_session(fake: FakeAnthropic, home: Path, workspace: Path, prompt: str, answer: str) -> Path:
    """A session made in a terminal by the real Claude Code (`cli.js -p PROMPT` in the workspace): its transcript."""
    fake.push_text(answer)
    cli = ensure_acp() / "node_modules" / "@anthropic-ai" / "claude-agent-sdk" / "cli.js"
    out = subprocess.run(["node", str(cli), "-p", prompt], cwd=workspace, env=claude_env(fake.base_url, home),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and answer in out.stdout, (out.stdout, out.stderr)
    (transcript,) = (home / ".claude" / "projects").glob("*/*.jsonl")
    wait_for(lambda: answer in transcript.read_text(), what="the answer in Claude Code's transcript")
    return transcript


def continue_in_picker(n: Neovim, agent_id: str) -> dict[str, Any]:
    """`:PseudoResume`, `<C-o>`, the highlight moved to Claude Code's row of session `agent_id`, `<CR>`; the resume's
    report. (A session of ours is there, older, so that the picker opens without `picker.external`.)"""
    n.api.command("set columns=160 lines=48")
    n.api.command("PseudoResume")
    wait_for(lambda: (n.lua(STATE) or {}).get("full"), what="the picker's full list")
    n.api.input("<C-o>")
    wait_for(lambda: (lambda s: s if s and s["full"] and s["external"] and any("[claude]" in r for r in s["rows"])
                      else None)(n.lua(STATE)), what="Claude Code's row")
    for _ in range(5):
        if n.lua(STATE)["selected"] == "claude:" + agent_id:
            break
        n.api.input("<C-p>")
        wait_for(lambda: n.lua(STATE)["selected"] is not None, what="a row highlighted")
    assert n.lua(STATE)["selected"] == "claude:" + agent_id, n.lua(STATE)
    n.api.input("<CR>")
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), timeout=60, what="the resume")
    assert report["ok"] is True, report
    return report


def claude_editor(n: Neovim, fake: FakeAnthropic, home: Path, **extra: Any) -> Neovim:
    """The editor `n` set up with claude pointed at `fake` (`extra`: more of setup()), listing Claude Code's store in
    `home`."""
    n.lua("vim.env.CLAUDE_CONFIG_DIR = ...", str(home / ".claude"))
    setup(n, fake, home, **extra)
    return n


def quit_editor(n: Neovim, home: Path) -> None:
    try:
        n.api.command("qa!")
    except Exception:
        pass
    n.proc.wait(timeout=20)
    wait_for(lambda: not agent_pids(home), timeout=10, what="the agent gone")


def test_enter_on_a_terminal_claude_session_has_claude_load_it_and_go_on_in_its_own_transcript(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    write_session(workspace, session_id(1), chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    transcript = terminal_session(fake, home, workspace, "remember the word PLUMTREE", "I will remember PLUMTREE.")
    agent_id = transcript.stem
    size = transcript.stat().st_size
    claude_editor(nvim, fake, home)

    report = continue_in_picker(nvim, agent_id)
    wait_for(lambda: "session/load" in chat_text(nvim), timeout=90, what="the agent's load")
    text = chat_text(nvim)
    assert "continued by claude, which loads the session itself" in text, text
    assert text.count("I will remember PLUMTREE.") == 1, text
    assert [c["agent"] for c in nvim.lua("return require('pseudoclaude').chats()")] == ["claude"]

    fake.push_text("You asked me to remember PLUMTREE.")
    nvim.api.command("PseudoChat")
    send(nvim, "which word?")
    wait_turns(nvim, 1)
    wait_for(lambda: "You asked me to remember PLUMTREE." in chat_text(nvim), what="the answer streamed")
    # the agent went on with its own context: the earlier exchange reached the model from its own session
    last = json.dumps(fake.requests[-1])
    assert "remember the word PLUMTREE" in last and "which word?" in last
    assert "[The conversation so far" not in last, "a load sends no transcript of ours"
    # in its own transcript, which grew with the new exchange
    wait_for(lambda: "You asked me to remember PLUMTREE." in transcript.read_text(), what="the transcript grown")
    assert transcript.stat().st_size > size
    assert list((home / ".claude" / "projects").glob("*/*.jsonl")) == [transcript]

    # our log: the earlier messages imported (the import's replace, naming where they came from), the agent's
    # session, then the new messages
    lines = log_lines(Path(nvim.lua("return require('pseudoclaude').current()")["jsonl"]))
    first = lines[0]
    assert first["type"] == "replace" and first["reason"] == "import", first
    assert first["imported_from"]["source"] == "claude-code" and first["imported_from"]["id"] == agent_id
    assert [m["content"] for m in first["messages"]] == ["remember the word PLUMTREE", "I will remember PLUMTREE."]
    assert any(e.get("agent", {}).get("session_id") == agent_id for e in lines if e["type"] == "meta")
    msgs = nvim.lua("return require('pseudoclaude').messages()")
    assert [m["content"] for m in msgs] == ["remember the word PLUMTREE", "I will remember PLUMTREE.", "which word?",
                                            "You asked me to remember PLUMTREE."]

    # one row for the conversation: ours; Claude Code's own is not listed again
    rows = nvim.lua("return require('pseudoclaude').sessions.list({ external = true, include_current = true })")
    assert [r["id"] for r in rows if r.get("source")] == [], rows
    assert sorted(r["id"] for r in rows) == sorted([report["id"], session_id(1)]), rows
    # the preview of our row shows both places: our copy and the agent's own file, and the agent session it goes on in
    nvim.lua("vim.g.pc_preview = vim.NIL require('pseudoclaude').sessions.preview_async(..., function(err, p) "
             "vim.g.pc_preview = p or err end)", report["id"])
    p = wait_for(lambda: nvim.lua("return vim.g.pc_preview"), what="the preview")
    assert p["imported_from"]["path"] == str(transcript.resolve()) and p["original_exists"] is True, p
    assert p["agent"] == {"name": "claude", "session_id": agent_id} or p["agent"]["session_id"] == agent_id, p
    # and its id names that same session
    nvim.lua("require('pseudoclaude').chat.start_over() vim.g.pc_resumed = vim.NIL")
    nvim.lua("require('pseudoclaude').resume(...)", "claude:" + agent_id)
    again = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), timeout=60, what="the resume by its id")
    assert again["ok"] is True and again["id"] == report["id"], again


def test_a_continued_session_whose_transcript_was_deleted_tells_claude_our_copy(
    start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    write_session(workspace, session_id(1), chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    transcript = terminal_session(fake, home, workspace, "the password is swordfish", "Noted: swordfish.")
    first = claude_editor(start_nvim(), fake, home)
    report = continue_in_picker(first, transcript.stem)
    wait_for(lambda: "session/load" in chat_text(first), timeout=90, what="the agent's load")
    quit_editor(first, home)
    # Claude Code's clean-up (or the user) deletes the transcript; the conversation is in our log
    transcript.unlink()

    second = claude_editor(start_nvim(), fake, home)
    second.lua("require('pseudoclaude').resume(...)", "claude:" + transcript.stem)
    resumed = wait_for(lambda: second.lua("return vim.g.pc_resumed"), timeout=60, what="the resume by its id")
    assert resumed["ok"] is True and resumed["id"] == report["id"], resumed
    wait_for(lambda: "session/new" in chat_text(second), timeout=90, what="the agent's new session")
    assert "no longer has this session" in chat_text(second)
    fake.push_text("It was swordfish.")
    second.api.command("PseudoChat")
    send(second, "what was the password?")
    wait_turns(second, 1)
    last = json.dumps(fake.requests[-1])
    assert "[The conversation so far" in last and "the password is swordfish" in last, "our copy reached the model"
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["content"] for m in msgs] == ["the password is swordfish", "Noted: swordfish.", "what was the password?",
                                            "It was swordfish."]


def test_an_agent_not_installed_is_said_and_the_session_is_its_own_once_it_is(
    start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    write_session(workspace, session_id(1), chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    transcript = terminal_session(fake, home, workspace, "remember the word QUINCE", "QUINCE, noted.")
    n = claude_editor(start_nvim(), fake, home, agents={"claude": {"command": "no-such-claude-acp"}})
    report = continue_in_picker(n, transcript.stem)
    wait_for(lambda: "not installed" in chat_text(n), what="the line saying so")
    text = chat_text(n)
    assert '"no-such-claude-acp" is not installed' in text and "QUINCE, noted." in text, text
    # the chat is claude's: its log says whose session it goes on with
    assert [c["agent"] for c in n.lua("return require('pseudoclaude').chats()")] == ["claude"]
    lines = log_lines(Path(n.lua("return require('pseudoclaude').current()")["jsonl"]))
    assert lines[0]["imported_from"]["id"] == transcript.stem
    assert any(e.get("agent", {}).get("session_id") == transcript.stem for e in lines if e["type"] == "meta")
    # installed (its command set), the next message starts it: it loads its own session and goes on
    spec = {"command": claude_agent_command()[0], "env": claude_env(fake.base_url, home)}
    n.lua("require('pseudoclaude').setup(...)", {"provider": {"name": "demo"}, "agents": {"claude": spec}})
    n.lua("require('pseudoclaude').chat.start_over() vim.g.pc_turns = 0 vim.g.pc_resumed = vim.NIL")
    n.lua("require('pseudoclaude').resume(...)", report["id"])
    assert wait_for(lambda: n.lua("return vim.g.pc_resumed"), timeout=60, what="the resume")["ok"] is True
    wait_for(lambda: "session/load" in chat_text(n), timeout=90, what="the agent's load")
    fake.push_text("QUINCE.")
    n.api.command("PseudoChat")
    send(n, "which word?")
    wait_turns(n, 1)
    assert "remember the word QUINCE" in json.dumps(fake.requests[-1])
    wait_for(lambda: "QUINCE." in transcript.read_text().split("which word?")[-1], what="its own transcript grown")


def test_a_kept_copy_resumed_by_its_row_goes_on_with_claude_which_loads_the_original(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    # `external.keep` made the conversation's one row a copy of ours; resuming that row hands it to Claude Code,
    # which loads its own transcript (the original), not a transcript of ours
    fake = fake_anthropic
    write_session(workspace, session_id(1), chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    transcript = terminal_session(fake, home, workspace, "remember the word MEDLAR", "MEDLAR, noted.")
    claude_editor(nvim, fake, home)
    nvim.lua("require('pseudoclaude.keep').now(function(err, report) vim.g.pc_kept = report or err end)")
    assert wait_for(lambda: nvim.lua("return vim.g.pc_kept"), what=":PseudoKeep's sync")["copied"] == 1
    rows = nvim.lua("return require('pseudoclaude').sessions.list({ external = true })")
    (kept,) = [r for r in rows if r["id"] != session_id(1)]
    assert "source" not in kept, rows  # ours: the original is not a row
    log = workspace / ".PseudoClaude" / "sessions" / kept["id"] / "conversation.jsonl"
    assert log_lines(log)[0]["imported_from"]["kept"] is True
    # its preview shows both places: the copy here, and the original while it exists
    nvim.lua("vim.g.pc_preview = vim.NIL require('pseudoclaude').sessions.preview_async(..., function(err, p) "
             "vim.g.pc_preview = p or err end)", kept["id"])
    p = wait_for(lambda: nvim.lua("return vim.g.pc_preview"), what="the preview")
    assert p["imported_from"]["kept"] is True and p["original_exists"] is True, p
    assert p["imported_from"]["path"] == str(transcript.resolve()), p

    nvim.lua("require('pseudoclaude').resume(...)", kept["id"])
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), timeout=60, what="the resume")
    assert report["ok"] is True and report["id"] == kept["id"], report
    text = wait_for(lambda: (lambda t: t if "claude: session/" in t else None)(chat_text(nvim)), timeout=90,
                    what="the agent's own line")
    assert "continued by claude, which loads the session itself (its earlier messages are our kept copy's)" in text, text
    assert "session/load: the agent restored its own session" in text, text
    fake.push_text("MEDLAR it was.")
    nvim.api.command("PseudoChat")
    send(nvim, "which word?")
    wait_turns(nvim, 1)
    last = json.dumps(fake.requests[-1])
    assert "remember the word MEDLAR" in last and "[The conversation so far" not in last
    wait_for(lambda: "MEDLAR it was." in transcript.read_text(), what="Claude Code's own transcript grown")
    msgs = [m["content"] for m in nvim.lua("return require('pseudoclaude').messages()")]
    assert msgs == ["remember the word MEDLAR", "MEDLAR, noted.", "which word?", "MEDLAR it was."], msgs
    # still one row, and the keeper leaves it alone now: no second copy
    nvim.lua("vim.g.pc_kept = vim.NIL require('pseudoclaude.keep').now(function(err, r) vim.g.pc_kept = r or err end)")
    again = wait_for(lambda: nvim.lua("return vim.g.pc_kept"), what="the next sync")
    assert again["copied"] == 0, again
    rows = nvim.lua("return require('pseudoclaude').sessions.list({ external = true, include_current = true })")
    assert sorted(r["id"] for r in rows) == sorted([kept["id"], session_id(1)]), rows


# -- the other agents: their own terminal session continued by their ACP agent (issue 46 item 3) --------------------

# Where each agent keeps its sessions under a home, for the editor's list (test_import's, and Codex's).
HOMES = {**AGENT_HOMES, "codex": lambda h: {"CODEX_HOME": str(h / ".codex")}}
FAKES = {"gemini": (FakeGemini, gemini_view), "codex": (FakeResponses, responses_view),
         "qwen": (partial(FakeOpenAI, unstreamed=True), openai_view),
         "opencode": (partial(FakeOpenAI, unstreamed=True), openai_view),
         "pi": (partial(FakeOpenAI, unstreamed=True), openai_view)}
# How each one's ACP agent takes a session its terminal made (shared/AGENT_STORES.md): its own line in the chat.
RESTORED = {"gemini": "session/load: the agent restored its own session",
            "qwen": "session/load: the agent restored its own session",
            "opencode": "session/load: the agent restored its own session",
            "pi": "session/load: the agent restored its own session",
            "codex": "session/load: the agent restored its own session"}


def store_text(agent: str, home: Path) -> str:
    """Everything the agent's own store holds, as text (opencode: its database's message parts)."""
    if agent == "opencode":
        con = sqlite3.connect(f"file:{opencode_db(home)}?mode=ro", uri=True)
        try:
            return "\n".join(r[0] for r in con.execute("SELECT data FROM part"))
        finally:
            con.close()
    return "\n".join(p.read_text(errors="replace") for p in store_files(agent, home))


# A terminal session of each kind: its prompt, and the answer that ends it (a tool session: after its write tool's call).
SESSIONS = {"text": ("Remember the word PLUMTREE.", "Noted: PLUMTREE."),
            "tools": (f"Write the word FIGTREE into {NOTES}.", f"Done: {NOTES} holds FIGTREE.")}


# Gemini CLI 0.61 loads a terminal session with a tool call, but the history it then sends answers the call twice (the
# call's result, then the record that sent it), which the API refuses (the fake says it as the real API does). Read
# from its file at the hand-over: the session is not loaded, Gemini goes on in a new session told our transcript.
TOLD = {("gemini", "tools")}


def agent_editor(start_nvim: Any, agent: str, home: Path, ns: Offline, fake: Any, listed: bool = True,
                 **extra: Any) -> Neovim:
    """An editor whose entry `agent` is the real ACP agent in `ns` (its HOME `home`, its model `fake`); `listed`: the
    editor lists that agent's sessions under `home` too; `extra`: more of setup()."""
    n = start_nvim()
    for var, value in (HOMES[agent](home) if listed else {}).items():
        n.lua("vim.env[select(1, ...)] = select(2, ...)", var, value)
    command = ns.wrap(acp_command(agent))
    spec = {"command": command[0], "args": command[1:], "env": agent_env(agent, home, fake.base_url)}
    chat_setup(n, None, agents={agent: spec}, **extra)
    return n


def ask_quince(n: Neovim, fake: Any, drawn: str | None = "Noted: QUINCE.") -> str:
    """Sends "And the word QUINCE?" in `n`'s chat and waits for the turn (and for `drawn` in the chat); the model's
    request that carried it, as JSON (what the agent told the model of the conversation)."""
    n.api.command("PseudoChat")
    send(n, "And the word QUINCE?")
    wait_turns(n, 1, timeout=180)
    if drawn:
        wait_for(lambda: drawn in chat_text(n), what="the answer drawn: " + chat_text(n))
    return json.dumps([r for r in fake.requests if "QUINCE" in json.dumps(r)][-1])


class Rig:
    """A real agent's world for a test: `start(agent)` makes its fake model server inside a network namespace where
    only that server answers (agent_stores.Offline), answering as `answer` does: the words of `prompt`, else of the
    message the user typed (after our transcript, when the agent is told it), its write tool's call with `tools`;
    `editor(**extra)` starts an editor whose entry is the real agent there (`agent_editor`). The `rig` fixture quits
    the editors, closes the server and the namespace, and asserts the server saw no error."""

    def __init__(self, start_nvim: Any, workspace: Path, home: Path) -> None:
        self.start_nvim, self.workspace, self.home = start_nvim, workspace, home
        self.agent, self.ns, self.fake = "", None, None
        self.editors: list[Neovim] = []

    def start(self, agent: str, prompt: str | None = None, tools: bool = False) -> Any:
        make_fake, view = FAKES[agent]

        def respond(body: dict[str, Any]) -> dict[str, Any]:
            last, offered = view(body)
            last = last.rpartition("The new message follows.]")[2]
            return answer(agent, prompt or last, self.workspace, tools, last, offered)

        self.agent, self.ns = agent, Offline()
        self.fake = self.ns.make(make_fake, responder=respond)
        return self.fake

    def editor(self, **extra: Any) -> Neovim:
        n = agent_editor(self.start_nvim, self.agent, self.home, self.ns, self.fake, **extra)
        self.editors.append(n)
        return n

    def close(self) -> None:
        for n in self.editors:
            if n.proc.poll() is None:
                quit_editor(n, self.home)
        if self.fake is not None:
            self.fake.close()
        if self.ns is not None:
            self.ns.close()


@pytest.fixture
def rig(start_nvim: Any, workspace: Path, tmp_path: Path) -> Iterator[Rig]:
    r = Rig(start_nvim, workspace, tmp_path / "agent-home")
    try:
        yield r
    finally:
        r.close()
    assert r.fake is None or r.fake.errors == [], r.fake.errors


@pytest.mark.parametrize("agent,kind", [(a, k) for a in RESTORED for k in SESSIONS])
def test_another_agents_terminal_session_is_continued_by_its_own_acp_agent(
    rig: Rig, workspace: Path, agent: str, kind: str
) -> None:
    # A session the real agent made in a terminal (headless, offline against its fake model server; a text one, or
    # one where it called its write tool), then, in the editor, `resume(id)` with its row's id: the agent's ACP server,
    # started by the editor inside a network namespace where only its fake answers, takes it over (loads it, or where
    # its load would fail, TOLD, goes on in a new session of its own told our transcript).
    told = (agent, kind) in TOLD
    home = rig.home
    git_workspace(workspace)
    prompt, said = SESSIONS[kind]
    made = make_session(agent, home, workspace, prompt, tools=kind == "tools")
    sid = made["session_id"]
    original = Path(made["store"])
    before = original.read_bytes() if agent == "gemini" else b""
    fake = rig.start(agent)
    n = rig.editor()
    rows = n.lua("return require('pseudoclaude').sessions.list({ external = true })")
    assert [r["id"] for r in rows] == [f"{agent}:{sid}"], rows

    n.lua("require('pseudoclaude').resume(...)", f"{agent}:{sid}")
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), timeout=90, what="the hand-over")
    assert report["ok"] is True and report["handover"]["way"] == "agent", report
    text = wait_for(lambda: (lambda t: t if f"{agent}: session/" in t else None)(chat_text(n)), timeout=180,
                    what=f"{agent}'s own line saying how it took the session")
    if told:
        assert f"continued by {agent} in a new session of its own, told the conversation so far" in text, text
        assert "which the API refuses" in text and "write_file" in text, text
        assert f"{agent}: session/new: a new session of the agent, told the conversation so far" in text, text
    else:
        assert f"continued by {agent}, which loads the session itself" in text, text
        assert RESTORED[agent] in text, text
    assert text.count(said) == 1, text
    assert [c["agent"] for c in n.lua("return require('pseudoclaude').chats()")] == [agent]

    # the agent went on with its own context: the earlier exchange reached the model from its own session (TOLD:
    # from our transcript, in the message the user typed)
    last = ask_quince(n, fake)
    assert prompt in last and said in last, last
    assert ("[The conversation so far" in last) == told, "a load sends no transcript of ours"
    # in its own store, which holds the new exchange
    wait_for(lambda: "QUINCE" in store_text(agent, home), timeout=30, what=f"{agent}'s store holding the new turn")

    lines = log_lines(Path(n.lua("return require('pseudoclaude').current()")["jsonl"]))
    assert lines[0]["type"] == "replace" and lines[0]["imported_from"]["id"] == sid, lines[0]
    metas = [e["agent"]["session_id"] for e in lines if e["type"] == "meta" and e.get("agent", {}).get("session_id")]
    msgs = [m.get("content", "") for m in n.lua("return require('pseudoclaude').messages()")]
    # (the answer as the agent streamed it: Codex puts its own warning about the fake model before it)
    assert msgs[0] == prompt and said in msgs[-3] and msgs[-2] == "And the word QUINCE?", msgs
    assert msgs[-1].strip().endswith("Noted: QUINCE.") and len(msgs) == (4 if kind == "text" else 6), msgs
    if kind == "tools":
        calls = [m for m in n.lua("return require('pseudoclaude').messages()") if m.get("tool_calls")]
        assert len(calls) == 1 and "FIGTREE" in json.dumps(calls[0]["tool_calls"]), calls
    if agent == "gemini":
        # Gemini was handed a copy under a new id (its load costs what it loads); the original is as it was
        assert metas[-1] != sid and original.read_bytes() == before, metas
        assert ("handed a copy of its file" in text) != told, text
        assert any(metas[-1] in p.read_text() and "QUINCE" in p.read_text() for p in store_files(agent, home))
    else:
        assert metas[-1] == sid, metas
    # one row for the conversation: ours
    rows = n.lua("return require('pseudoclaude').sessions.list({ external = true, include_current = true })")
    assert [r["id"] for r in rows] == [report["id"]], rows


def test_resume_last_with_no_session_of_ours_continues_the_newest_of_theirs_with_its_agent(
    rig: Rig, workspace: Path
) -> None:
    # `:PseudoResume last` where the workspace's conversations are all Qwen Code's, made in a terminal: the newest is
    # continued by the real `qwen --acp`, as <CR> on its row does, and the message says whose; none of either: one
    # message. Once a session of ours exists, `last` is the newest of ours, though one of theirs is newer.
    agent = "qwen"
    home = rig.home
    git_workspace(workspace)
    fake = rig.start(agent)
    n = rig.editor()
    n.lua("_G.notes = {} vim.notify = function(msg, level) table.insert(_G.notes, { msg = msg, level = level }) end")
    n.api.command("PseudoResume last")
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="the resume's end")
    assert report["ok"] is False, report
    notes = [x["msg"] for x in n.lua("return _G.notes")]
    assert notes == ["pseudoclaude: cannot resume the last session: there is no session to resume in "
                     f"{workspace.resolve()}, ours or another agent's"], notes

    older = make_session(agent, home, workspace, "Remember the word PLUMTREE.")
    newer = make_session(agent, home, workspace, "Remember the word CHERRY.")
    assert older["session_id"] != newer["session_id"]
    n.lua("vim.g.pc_resumed = vim.NIL _G.notes = {}")
    n.api.command("PseudoResume last")
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), timeout=90, what="the hand-over")
    assert report["ok"] is True and report["handover"]["way"] == "agent", report
    notes = [x["msg"] for x in n.lua("return _G.notes")]
    assert len(notes) == 1 and "no session of ours in" in notes[0], notes
    assert "Qwen Code's \"Remember the word CHERRY.\", with qwen" in notes[0], notes
    text = wait_for(lambda: (lambda t: t if f"{agent}: session/" in t else None)(chat_text(n)), timeout=180,
                    what="qwen's own line saying how it took the session")
    assert f"continued by {agent}, which loads the session itself" in text and RESTORED[agent] in text, text
    assert "Noted: CHERRY." in text and "PLUMTREE" not in text, text

    # qwen went on in its own session: the newer one's exchange reached the model from it, the older's did not
    last = ask_quince(n, fake)
    assert "Remember the word CHERRY." in last and "PLUMTREE" not in last, last
    assert "[The conversation so far" not in last, "a load sends no transcript of ours"
    lines = log_lines(Path(n.lua("return require('pseudoclaude').current()")["jsonl"]))
    metas = [e["agent"]["session_id"] for e in lines if e["type"] == "meta" and e.get("agent", {}).get("session_id")]
    assert metas[-1] == newer["session_id"], metas

    # a session of ours now exists (that one); a newer one of theirs does not make `last` theirs
    newest = make_session(agent, home, workspace, "Remember the word DAMSON.")
    n.lua("require('pseudoclaude').chat.start_over() vim.g.pc_resumed = vim.NIL _G.notes = {}")
    rows = n.lua("return require('pseudoclaude').sessions.list({ external = true })")
    assert [r["id"] for r in rows][:2] == [f"{agent}:{newest['session_id']}", report["id"]], rows
    n.api.command("PseudoResume last")
    again = wait_for(lambda: n.lua("return vim.g.pc_resumed"), timeout=90, what="the resume of ours")
    assert again["ok"] is True and again["id"] == report["id"] and "handover" not in again, again
    assert not any("other agents" in x["msg"] for x in n.lua("return _G.notes"))


def gemini_editor(start_nvim: Any, editors: list[Neovim], ns: Offline, home: Path, fake: FakeGemini,
                  listed: bool = True, **extra: Any) -> Neovim:
    """`agent_editor` for `gemini --acp`, kept in `editors` (closed by `close_all`)."""
    n = agent_editor(start_nvim, "gemini", home, ns, fake, listed, **extra)
    editors.append(n)
    return n


def close_all(editors: list[Neovim], home: Path, fake: FakeGemini, ns: Offline) -> None:
    for n in editors:
        if n.proc.poll() is None:
            quit_editor(n, home)
    fake.close()
    ns.close()


def test_a_gemini_copy_its_next_start_deleted_goes_on_told_our_transcript_and_the_original_stays(
    start_nvim: Any, workspace: Path, tmp_path: Path
) -> None:
    # Gemini's load leaves a file of the loaded id that makes its next start delete that session: the copy handed to
    # it, never the original. The conversation then goes on in a new Gemini session told our transcript.
    home = tmp_path / "agent-home"
    git_workspace(workspace)
    made = make_session("gemini", home, workspace, "Remember the word PLUMTREE.")
    original = Path(made["store"])
    before = original.read_bytes()
    ns = Offline()
    fake = ns.make(FakeGemini, responder=lambda body: answer("gemini", gemini_view(body)[0], workspace, False,
                                                              *gemini_view(body)))
    editors: list[Neovim] = []
    try:
        first = gemini_editor(start_nvim, editors, ns, home, fake)
        first.lua("require('pseudoclaude').resume(...)", f"gemini:{made['session_id']}")
        report = wait_for(lambda: first.lua("return vim.g.pc_resumed"), timeout=90, what="the hand-over")
        copy = Path(report["handover"]["agent_copy"])
        wait_for(lambda: "gemini: session/load: the agent restored its own session" in chat_text(first), timeout=180,
                 what="Gemini's load of the copy")
        quit_editor(first, home)
        # Gemini's next start (a terminal session of its own) cleans its store up: the copy goes, the original stays
        # (as the terminal left it; that start may append a summary of it, Gemini's own)
        make_session("gemini", home, workspace, "Remember the word RAISIN.")
        names = sorted(p.name for p in original.parent.iterdir())
        assert not copy.exists() and original.read_bytes().startswith(before), names

        second = gemini_editor(start_nvim, editors, ns, home, fake)
        second.lua("require('pseudoclaude').resume(...)", report["id"])
        assert wait_for(lambda: second.lua("return vim.g.pc_resumed"), timeout=90, what="the resume")["ok"] is True
        text = wait_for(lambda: (lambda t: t if "gemini: session/" in t else None)(chat_text(second)), timeout=180,
                        what="Gemini's own line")
        assert "gemini: session/new: the agent no longer has this session" in text, text
        # (the fake names every word of the message it is given: ours tells it the conversation so far too)
        last = ask_quince(second, fake, drawn=None)
        assert "[The conversation so far" in last and "Remember the word PLUMTREE." in last, last
        msgs = [m["content"] for m in second.lua("return require('pseudoclaude').messages()")]
        assert msgs[:3] == ["Remember the word PLUMTREE.", "Noted: PLUMTREE.", "And the word QUINCE?"], msgs
    finally:
        close_all(editors, home, fake, ns)
    assert fake.errors == [], fake.errors


def test_a_gemini_chat_of_ours_that_ran_a_tool_resumed_later_goes_on_and_is_answered(
    start_nvim: Any, workspace: Path, tmp_path: Path
) -> None:
    # A chat of ours with `gemini --acp` in which Gemini ran its write tool; the editor quits; a new one resumes the
    # chat (`:PseudoResume`). Gemini CLI 0.61's load of that session answers the call twice (the API refuses the next
    # message; in this chat its load even failed, said as "the agent no longer has this session", and left Gemini's
    # file reset to an empty chat): read from Gemini's own file first, the session is not loaded, the chat goes on in a
    # new Gemini session told our transcript, and its line says why.
    home = tmp_path / "agent-home"
    git_workspace(workspace)
    # (no such file yet: Gemini's write reads the file first, and a missing one must read as a new file: the client
    # does not offer Gemini `fs/read_text_file`, whose refusal it cannot read, src/acp/client.rs `reads_through_us`)
    assert not (workspace / NOTES).exists()
    prompt = f"Write the word FIGTREE into {NOTES}."
    ns = Offline()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        last, offered = gemini_view(body)
        last = last.rpartition("The new message follows.]")[2]
        return answer("gemini", prompt, workspace, True, last, offered)

    fake = ns.make(FakeGemini, responder=respond)
    editors: list[Neovim] = []

    def editor() -> Neovim:
        # (the agent's own HOME only: Gemini's file is found under the HOME its entry sets)
        return gemini_editor(start_nvim, editors, ns, home, fake, listed=False, approve={"agents": {"gemini": True}})

    try:
        first = editor()
        first.api.command("PseudoChat gemini")
        send(first, prompt)
        wait_turns(first, 1, timeout=180)
        wait_for(lambda: "holds FIGTREE" in chat_text(first), what="the answer after the call: " + chat_text(first))
        assert (workspace / NOTES).exists(), chat_text(first)
        assert (workspace / NOTES).read_text().strip() == "FIGTREE"
        cur = first.lua("return require('pseudoclaude').current()")
        quit_editor(first, home)

        second = editor()
        second.api.command(f"PseudoResume {cur['id']}")
        assert wait_for(lambda: second.lua("return vim.g.pc_resumed"), timeout=90, what="the resume")["ok"] is True
        last = ask_quince(second, fake)
        text = chat_text(second)
        assert "gemini: session/new: a new session of the agent, told the conversation so far" in text, text
        assert "which the API refuses" in text and "write_file" in text, text
        assert "no longer has this session" not in text, text
        assert "[The conversation so far" in last and prompt in last, last
        msgs = [m.get("content", "") for m in second.lua("return require('pseudoclaude').messages()")]
        assert msgs[0] == prompt and msgs[-2] == "And the word QUINCE?" and msgs[-1].strip() == "Noted: QUINCE.", msgs
    finally:
        close_all(editors, home, fake, ns)
    assert fake.errors == [], fake.errors


def test_qwen_continued_in_the_editor_writes_a_file_that_did_not_exist(
    rig: Rig, workspace: Path
) -> None:
    # Qwen Code's write tool reads the file through the editor first (`fs/read_text_file`) and takes a missing one for
    # a new file only when the answer is ACP's "Resource not found" (-32002; any other error fails the write)
    agent = "qwen"
    home = rig.home
    git_workspace(workspace)
    prompt, said = SESSIONS["text"]
    sid = make_session(agent, home, workspace, prompt, tools=False)["session_id"]
    ask = f"Write the word FIGTREE into {NOTES}."
    fake = rig.start(agent, prompt=ask, tools=True)
    n = rig.editor(approve={"agents": {agent: True}})
    n.lua("require('pseudoclaude').resume(...)", f"{agent}:{sid}")
    wait_for(lambda: n.lua("return vim.g.pc_resumed"), timeout=90, what="the hand-over")
    wait_for(lambda: f"{agent}: session/" in chat_text(n), timeout=180, what="qwen's own line")
    n.api.command("PseudoChat")
    assert not (workspace / NOTES).exists()
    send(n, ask)
    wait_turns(n, 1, timeout=180)
    wait_for(lambda: "holds FIGTREE" in chat_text(n), what="the answer after the call: " + chat_text(n))
    assert (workspace / NOTES).read_text().strip() == "FIGTREE", chat_text(n)
    assert "(created)" in chat_text(n), chat_text(n)


