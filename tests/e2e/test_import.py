"""Other agents' sessions end to end (issue 11): Claude Code transcripts and Codex rollouts written here in their
formats, in a fake $CLAUDE_CONFIG_DIR and $CODEX_HOME given to Neovim's environment; listed
(`sessions.list({ external = true })`, the picker's <C-o> and `picker.external`), imported through the Lua API and
through the picker, then resumed and continued against the fake Anthropic and OpenAI servers, which refuse a request
that breaks their protocol. The source files are byte-identical after everything."""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

from agent_stores import git_workspace, make_session
from conftest import TRACK, Neovim, transcript, type_message, wait_for
from fake_llm import FakeAnthropic, FakeOpenAI
from session_files import chat, write_session, session_id

STATE = """
local picker = require("pseudoclaude.float")
local s = picker.get_state()
if not s then return vim.NIL end
local title = vim.api.nvim_win_get_config(s.wins.results).title
return { full = s.full, external = s.external, selected = (picker.selected() or {}).id,
  title = type(title) == "table" and title[1][1] or title,
  rows = vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false),
  preview = vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false) }
"""

IMPORT_ASYNC = """
vim.g.pc_done = vim.NIL
require("pseudoclaude").sessions.import(..., { on_done = function(err, value)
  vim.g.pc_done = { err = err or false, value = value or false }
end })
"""

CLAUDE_TIME = int(datetime(2026, 11, 30, 10, tzinfo=timezone.utc).timestamp())
CLAUDE_ID = "5b0c7a1e-3f2d-4c1b-9a8e-7d6c5b4a3f21"
CODEX_ID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


# -- fixture writers: the tools' formats -------------------------------------------------------------------------

def jsonl(lines: list[Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def cc(kind: str, uuid: str, parent: str | None, cwd: Path | None, message: Any, **extra: Any) -> dict[str, Any]:
    """A Claude Code record of session CLAUDE_ID (cwd None: a record that names no folder)."""
    r = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": CLAUDE_ID, "gitBranch": "main",
         "version": "2.0.0", "isSidechain": False, "timestamp": "2026-11-30T10:00:00.000Z", "message": message}
    if cwd is not None:
        r["cwd"] = str(cwd)
    r.update(extra)
    return r


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(mid: str, blocks: list[Any]) -> dict[str, Any]:
    return {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "content": blocks}


def result(tid: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": text}]}


def claude_transcript(ws: Path, compact: bool = True) -> str:
    """Every hard case of the format: one response over several lines sharing `message.id` with two parallel calls,
    progress records hanging off a call, results in another order, a rewound branch, thinking, a sidechain, a meta
    line, an injected reminder, an image, a compaction (when `compact`), unknown record and block types, a title."""
    lines = [
        {"type": "file-history-snapshot", "messageId": "x"},
        cc("user", "u1", None, ws, user("fix the parser")),
        cc("assistant", "a1", "u1", ws, assistant("m1", [{"type": "thinking", "thinking": "hmm"},
                                                        {"type": "text", "text": "Looking."}])),
        cc("assistant", "a2", "a1", ws, assistant("m1", [{"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                                         "input": {"path": "p.rs"}}])),
        cc("assistant", "a3", "a2", ws, assistant("m1", [{"type": "tool_use", "id": "toolu_2", "name": "grep",
                                                         "input": {"pattern": "fn"}}])),
        {"type": "progress", "uuid": "p1", "parentUuid": "a2", "sessionId": CLAUDE_ID},
        cc("user", "r2", "a3", ws, result("toolu_2", "p.rs:1:fn parse")),
        cc("user", "r1", "a2", ws, result("toolu_1", "fn parse() {}")),
        cc("assistant", "a4", "r1", ws, assistant("m2", [{"type": "text", "text": "Wrong idea."}])),
        # the user rewinds to a4's parent and asks something else: a4 is abandoned
        cc("user", "u2", "r1", ws, user("no, rename it instead")),
        cc("assistant", "a5", "u2", ws, assistant("m3", [{"type": "text", "text": "Renamed."},
                                                        {"type": "mystery_block"}])),
        cc("assistant", "sc1", "a5", ws, assistant("m9", [{"type": "text", "text": "subagent chatter"}]),
           isSidechain=True),
        cc("user", "u3m", "a5", ws, user("<local-command-stdout>ok</local-command-stdout>"), isMeta=True),
        {"type": "brand-new-record", "uuid": "z"},
    ]
    parent = "a5"
    if compact:
        lines += [
            {"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": None,
             "logicalParentUuid": "a5", "sessionId": CLAUDE_ID},
            cc("user", "s1u", "cb", ws, user("This session is being continued: the parser was renamed."),
               isCompactSummary=True),
        ]
        parent = "s1u"
    lines += [
        cc("user", "u4", parent, ws, user([
            {"type": "text", "text": "<system-reminder>be nice</system-reminder>and now the docs"},
            {"type": "image", "source": {"type": "base64", "data": "AAAA"}}])),
        cc("assistant", "a6", "u4", ws, assistant("m4", [{"type": "text", "text": "Docs done."}])),
        {"type": "custom-title", "customTitle": "Parser rename", "sessionId": CLAUDE_ID},
    ]
    return jsonl(lines)


def codex_line(kind: str, payload: Any) -> dict[str, Any]:
    return {"timestamp": "2026-11-29T08:00:00.000Z", "type": kind, "payload": payload}


def codex_msg(role: str, part: str, text: str) -> dict[str, Any]:
    return codex_line("response_item", {"type": "message", "role": role, "content": [{"type": part, "text": text}]})


def codex_rollout(cwd: Path) -> str:
    """Injected context (environment_context, AGENTS.md, developer), each turn twice (response_item and event_msg),
    two parallel function calls, a turn only an event_msg holds, a custom tool call, an orphan output."""
    return jsonl([
        codex_line("session_meta", {"id": CODEX_ID, "cwd": str(cwd), "git": {"branch": "feature"},
                                    "cli_version": "0.50.0", "base_instructions": {"text": "You are Codex"}}),
        codex_line("turn_context", {"model": "gpt-5-codex", "cwd": str(cwd)}),
        codex_msg("developer", "input_text", "<permissions instructions>"),
        codex_msg("user", "input_text", "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"),
        codex_msg("user", "input_text", "# AGENTS.md instructions for /x\n\nbe terse"),
        codex_msg("user", "input_text", "list the files"),
        codex_line("event_msg", {"type": "user_message", "message": "list the files"}),
        codex_line("response_item", {"type": "reasoning", "summary": []}),
        codex_msg("assistant", "output_text", "Listing."),
        codex_line("response_item", {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}",
                                     "call_id": "call_1"}),
        codex_line("response_item", {"type": "function_call", "name": "shell",
                                     "arguments": "{\"command\":[\"pwd\"]}", "call_id": "call_2"}),
        codex_line("response_item", {"type": "function_call_output", "call_id": "call_1",
                                     "output": "{\"output\":\"a.txt\\n\",\"metadata\":{\"exit_code\":0}}"}),
        codex_line("response_item", {"type": "function_call_output", "call_id": "call_2", "output": "/x"}),
        codex_line("event_msg", {"type": "agent_message", "message": "Two files."}),
        codex_msg("assistant", "output_text", "Two files."),
        codex_line("event_msg", {"type": "token_count", "info": None}),
        codex_line("event_msg", {"type": "user_message", "message": "now patch a.txt"}),
        codex_line("response_item", {"type": "custom_tool_call", "name": "apply_patch",
                                     "input": "*** Begin Patch\n*** End Patch", "call_id": "call_3"}),
        codex_line("response_item", {"type": "custom_tool_call_output", "call_id": "call_3", "output": "Done!"}),
        codex_line("response_item", {"type": "function_call_output", "call_id": "call_orphan", "output": "?"}),
        codex_msg("assistant", "output_text", "Patched."),
    ])


def claude_dir(home: Path, ws: Path) -> Path:
    folder = re.sub(r"[^A-Za-z0-9]", "-", str(ws.resolve()))
    return home / "claude" / "projects" / folder


def codex_dir(home: Path) -> Path:
    return home / "codex" / "sessions" / "2026" / "11" / "29"


def write(path: Path, text: str, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def digest(paths: list[Path]) -> dict[str, str]:
    """Bytes and modification time of each file: what "left exactly as it was" means."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() + f" {p.stat().st_mtime_ns}" for p in paths}


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tools' homes, named in the environment Neovim is started with."""
    home = tmp_path / "homes"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / "codex"))
    return home


@pytest.fixture
def sources(homes: Path, workspace: Path) -> dict[str, Path]:
    """A Claude Code transcript and a Codex rollout of this workspace, one of another workspace, a subagent's file."""
    ws = workspace.resolve()
    claude = write(claude_dir(homes, ws) / f"{CLAUDE_ID}.jsonl", claude_transcript(ws), mtime=1_764_496_800)
    write(claude_dir(homes, ws) / "agent-1234.jsonl", claude_transcript(ws))
    codex = write(codex_dir(homes) / f"rollout-2026-11-29T08-00-00-{CODEX_ID}.jsonl", codex_rollout(ws),
                  mtime=1_764_403_200)
    other = write(codex_dir(homes) / "rollout-2026-11-29T09-00-00-0199a1b2-0000-7e5f-8a9b-0c1d2e3f4a5b.jsonl",
                  codex_rollout(Path("/somewhere/else")))
    write(homes / "codex" / "session_index.jsonl", jsonl([{"id": CODEX_ID, "thread_name": "old name"},
                                                          {"id": CODEX_ID, "thread_name": "File listing"}]))
    return {"claude": claude, "codex": codex, "other": other}


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    f = FakeAnthropic()
    yield f
    f.close()
    assert f.errors == [], f.errors


def setup(n: Neovim, provider: dict[str, Any], **extra: Any) -> None:
    n.lua("require('pseudoclaude').setup(...)", {"provider": provider, **extra})
    n.lua(TRACK)
    n.api.command("set columns=160 lines=48")


def openai(fake: FakeOpenAI) -> dict[str, Any]:
    return {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"}


def wait_resumed(n: Neovim) -> dict[str, Any]:
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="PseudoClaudeResumed")
    assert report["ok"] is True, report
    return report


def turn(n: Neovim, text: str) -> None:
    before = n.lua("return vim.g.pc_turns")
    type_message(n, text)
    wait_for(lambda: n.lua("return vim.g.pc_turns") > before, what="the turn")


def import_async(n: Neovim, path: Path | str) -> dict[str, Any]:
    n.lua(IMPORT_ASYNC, str(path))
    return wait_for(lambda: n.lua("return vim.g.pc_done"), what="sessions.import's on_done")


# -- the tests -------------------------------------------------------------------------------------------------

def test_the_list_adds_both_tools_sessions_and_an_import_continues_against_anthropic(
    start_nvim, workspace: Path, sources: dict[str, Path], fake_anthropic: FakeAnthropic
) -> None:
    before = digest(list(sources.values()))
    ours = session_id(1)
    write_session(workspace, ours, chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    n = start_nvim()
    setup(n, {"name": "anthropic", "base_url": fake_anthropic.base_url, "model": "fake-claude",
              "api_key_env": "PC_TEST_NO_KEY"})
    assert [i.get("source") for i in n.lua("return require('pseudoclaude').sessions.list()")] == [None]
    items = n.lua("return require('pseudoclaude').sessions.list({ external = true })")
    # newest first: the Claude Code transcript, the Codex rollout, ours; the other workspace's and the subagent's not
    assert [i.get("source") for i in items] == ["claude-code", "codex", None], items
    claude, codex, own = items
    assert own["id"] == ours and "path" not in own
    assert claude["path"] == str(sources["claude"].resolve())
    assert (claude["title"], claude["model"], claude["branch"]) == ("Parser rename", "claude-sonnet-4-5", "main")
    assert claude["modified"] == CLAUDE_TIME  # its last record's time
    assert (codex["title"], codex["model"], codex["branch"], codex["id"], codex["session_id"], codex["agent"]) == (
        "File listing", "gpt-5-codex", "feature", "codex:" + CODEX_ID, CODEX_ID, "codex")
    assert codex["path"] == str(sources["codex"].resolve())

    sid, imported = n.lua("return { require('pseudoclaude').sessions.import(...) }", str(sources["claude"]))
    assert imported["id"] == sid and imported["existing"] is False
    assert any("cut short" in x or "brand-new-record" in x for x in imported["notes"]), imported
    loaded = n.lua("return require('pseudoclaude').sessions.load(...)", sid)
    # the list's count is what the import restores: from the summary the tool resumed from
    assert claude["messages"] == len(loaded["messages"]) == imported["messages"] == 3
    assert [m.get("content", "") for m in loaded["messages"]][:2] == [
        "This session is being continued: the parser was renamed.",
        "and now the docs\n\n[an image was attached here in the original session; it was not imported]",
    ]
    assert loaded["title"] == "Parser rename"
    # the same, unchanged file again: the same session
    assert n.lua("return require('pseudoclaude').sessions.import(...)", str(sources["claude"])) == sid

    fake_anthropic.push_text("Carrying on.")
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.lua("require('pseudoclaude').resume(...)", sid)
    wait_resumed(n)
    turn(n, "go on")
    assert fake_anthropic.errors == []
    (req,) = fake_anthropic.requests
    shape = [(m["role"], [b["type"] for b in m["content"]]) for m in req["messages"]]
    assert shape[0][0] == "user" and shape[-1][0] == "user" and ("assistant", ["text"]) in shape, shape
    texts = json.dumps(req["messages"])
    assert "the parser was renamed" in texts and "Docs done." in texts and "go on" in texts
    assert "be nice" not in texts and "subagent chatter" not in texts and "hmm" not in texts
    wait_for(lambda: any("Carrying on." in line for line in transcript(n)), what="the answer drawn")
    assert digest(list(sources.values())) == before


def test_ctrl_o_lists_other_agents_and_enter_hands_one_to_its_agent_or_says_it_is_not_installed(
    start_nvim, workspace: Path, sources: dict[str, Path], fake: FakeOpenAI
) -> None:
    before = digest(list(sources.values()))
    write_session(workspace, session_id(1), chat("a session of ours", ts=1_764_300_000), mtime=1_764_300_000)
    n = start_nvim()
    setup(n, openai(fake))
    n.api.command("PseudoResume")
    wait_for(lambda: (n.lua(STATE) or {}).get("full"), what="the full list")
    st = n.lua(STATE)
    assert st["external"] is False and len([r for r in st["rows"] if r.strip()]) == 1, st
    n.api.input("<C-o>")
    st = wait_for(lambda: (lambda s: s if s and s["full"] and len(s["rows"]) == 3 else None)(n.lua(STATE)),
                  what="the rows with the other agents' sessions")
    assert st["external"] is True
    assert "[claude] Parser rename" in st["rows"][0] and "[codex] File listing" in st["rows"][1], st["rows"]
    # the highlight stayed on the session it was on (ours, now last); the Codex row above it: its preview says what it
    # is, from the list alone
    assert st["selected"] == session_id(1)
    n.api.input("<C-p>")
    st = wait_for(lambda: (lambda s: s if s and s["selected"] == "codex:" + CODEX_ID and "Codex" in " ".join(s["preview"])
                           else None)(n.lua(STATE)), what="the Codex row's preview")
    preview = "\n".join(st["preview"])
    assert "File listing" in preview and "9 messages" in preview and "gpt-5-codex" in preview
    assert "rollout-2026-11-29T08-00-00" in preview and "branch feature" in preview
    # <C-x> on it changes nothing: it is only read
    n.api.input("<C-x>")
    wait_for(lambda: any("cannot delete a Codex session" in x["msg"] for x in n.lua("return _G.notes")),
             what="the refusal")
    # <CR> hands it to the agent that had it (issue 46 item 3): Codex's (codex-acp), not installed here: the chat says
    # so and how to install it, and the session is that agent's (its next start loads it, or is told this copy)
    n.lua("vim.env.PATH = table.concat(vim.tbl_filter(function(d) return vim.fn.executable(d .. '/codex-acp') == 0 "
          "end, vim.split(vim.env.PATH, ':')), ':')")
    n.api.input("<CR>")
    report = wait_resumed(n)
    sid = report["id"]
    loaded = n.lua("return require('pseudoclaude').sessions.load(...)", sid)
    assert len(loaded["messages"]) == 9
    assert [c["id"] for c in loaded["messages"][1]["tool_calls"]] == ["call_1", "call_2"]
    wait_for(lambda: "is not installed" in "\n".join(transcript(n)), what="the line saying how it goes on")
    said = "\n".join(transcript(n))
    assert '"codex-acp" is not installed' in said and "npm install -g @zed-industries/codex-acp" in said, said
    assert [c["agent"] for c in n.lua("return require('pseudoclaude').chats()")] == ["codex"]

    # One row per conversation: the Codex row is ours now; its id resumes that same session.
    rows = n.lua("return require('pseudoclaude').sessions.list({ external = true, include_current = true })")
    assert "codex:" + CODEX_ID not in [r["id"] for r in rows if r.get("source")] and sid in [r["id"] for r in rows], rows
    n.lua("require('pseudoclaude').chat.start_over()")
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.lua("require('pseudoclaude').resume(...)", "codex:" + CODEX_ID)
    assert wait_resumed(n)["id"] == sid
    assert len([i for i in n.lua("return require('pseudoclaude').sessions.list({ include_current = true })")]) == 2

    # Changed since: a new import, which our own agent continues against OpenAI (`sessions.import` and `resume`).
    with open(sources["codex"], "a") as f:
        f.write(json.dumps(codex_msg("user", "input_text", "one more")) + "\n")
    copy = n.lua("return require('pseudoclaude').sessions.import(...)", str(sources["codex"]))
    assert copy != sid
    n.lua("require('pseudoclaude').chat.start_over()")
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.lua("require('pseudoclaude').resume(...)", copy)
    wait_resumed(n)
    fake.push_text("Both files are listed.")
    turn(n, "what now?")
    (req,) = fake.requests
    assert req["messages"][-1]["role"] == "user" and "what now?" in json.dumps(req["messages"][-1])
    calls = [m for m in req["messages"] if m.get("tool_calls")]
    assert [c["id"] for c in calls[0]["tool_calls"]] == ["call_1", "call_2"]
    assert "environment_context" not in json.dumps(req["messages"])
    wait_for(lambda: any("Both files are listed." in line for line in transcript(n)), what="the answer drawn")
    del before[str(sources["codex"])]
    assert digest([sources["claude"], sources["other"]]) == before


def test_picker_external_in_the_config_lists_them_without_ctrl_o_and_is_validated(
    start_nvim, workspace: Path, sources: dict[str, Path]
) -> None:
    n = start_nvim()
    err = n.lua("return select(2, pcall(require('pseudoclaude').setup, { picker = { external = 'yes' } }))")
    assert "picker.external" in err and "boolean" in err
    setup(n, {"name": "demo"}, picker={"external": True})
    # no session of ours at all: the picker still opens on the other agents'
    n.api.command("PseudoResume")
    st = wait_for(lambda: (lambda s: s if s and s["full"] and len(s["rows"]) == 2 else None)(n.lua(STATE)),
                  what="the rows")
    assert st["external"] is True and "[claude]" in st["rows"][0] and "[codex]" in st["rows"][1], st
    assert st["title"] == " Sessions + other agents ", st
    n.api.input("<C-o>")
    st = wait_for(lambda: (lambda s: s if s and s["full"] and not s["external"] else None)(n.lua(STATE)),
                  what="the rows without them")
    assert st["rows"] == ["  no sessions"] and st["title"] == " Sessions ", st


def test_with_no_session_of_ours_the_search_mode_searches_theirs(
    start_nvim, workspace: Path, sources: dict[str, Path]
) -> None:
    n = start_nvim()
    setup(n, {"name": "demo"})
    n.api.command("PseudoSearch parser")
    st = wait_for(lambda: (lambda s: s if s and s["external"] and not s["running"] and s["agents"] else None)(
        n.lua("""
    local s = require("pseudoclaude.float").get_state()
    if not (s and s.search) then return vim.NIL end
    local agents = vim.tbl_map(function(h) return h.agent or "ours" end, s.search.hits)
    return { external = s.external, running = s.search.running, agents = agents,
      title = vim.api.nvim_win_get_config(s.wins.prompt).title[1][1] }
    """)), what="Claude Code's hits")
    assert set(st["agents"]) == {"claude"} and st["title"] == " Search messages (other agents too) ", st


def test_bad_input_is_reported_never_a_crash_nor_a_silent_empty_session(
    start_nvim, workspace: Path, homes: Path
) -> None:
    ws = workspace.resolve()
    d = claude_dir(homes, ws)
    ok_lines = claude_transcript(ws, compact=False)
    truncated = write(d / "truncated.jsonl", ok_lines + '{"type":"user","uuid":"cut","parentUuid":"a6","mess')
    unknown = write(d / "unknown.jsonl", ok_lines + jsonl([{"type": "hologram", "uuid": "h"},
                                                           cc("user", "u9", "a6", ws, user([{"type": "smell"}]))]))
    nocwd = write(d / "nocwd.jsonl", jsonl([cc("user", "u", None, None, user("hi")),
                                            cc("assistant", "a", "u", None, assistant("m", [{"type": "text",
                                                                                              "text": "Hello."}]))]))
    zst = write(codex_dir(homes) / f"rollout-2026-11-29T10-00-00-{CODEX_ID}.jsonl.zst", "\x28\xb5\x2f\xfd")
    empty = write(d / "empty.jsonl", jsonl([{"type": "summary", "summary": "x", "sessionId": "s", "parentUuid": None}]))
    files = [truncated, unknown, nocwd, zst, empty]
    before = digest(files)
    n = start_nvim()
    setup(n, {"name": "demo"})

    done = import_async(n, truncated)
    assert done["err"] is False and any("cut short" in x for x in done["value"]["notes"]), done
    assert n.lua("return #require('pseudoclaude').sessions.load(...).messages", done["value"]["id"]) == 8

    done = import_async(n, unknown)
    notes = " ".join(done["value"]["notes"])
    assert done["err"] is False and "hologram" in notes and "smell" in notes, done

    done = import_async(n, nocwd)
    assert done["err"] is False and "no record names its folder" in " ".join(done["value"]["notes"]), done
    assert done["value"]["messages"] == 2

    done = import_async(n, zst)
    assert done["value"] is False and "zstd" in done["err"], done
    err = n.lua("return select(2, pcall(require('pseudoclaude').sessions.import, ...))", str(zst))
    assert "pseudoclaude.sessions.import" in err and "zstd -d" in err
    done = import_async(n, empty)
    assert "holds no conversation" in done["err"], done
    done = import_async(n, workspace / "missing.jsonl")
    assert "missing.jsonl" in done["err"], done

    # listed: the compressed rollout marked, the transcript without a folder not (it belongs to no workspace)
    items = n.lua("return require('pseudoclaude').sessions.list({ external = true, include_current = true })")
    external = [i for i in items if i.get("source")]
    assert any(i.get("unsupported") and "zstd" in i["unsupported"] for i in external), external
    assert not any(i["path"].endswith("nocwd.jsonl") for i in external)
    # three imports made three sessions, nothing else was left behind
    assert len([i for i in items if not i.get("source")]) == 3
    assert n.alive()
    assert digest(files) == before


@pytest.mark.parametrize("external", [True, False], ids=["picker.external", "none-of-ours"])
def test_the_select_backend_marks_them_and_imports_the_one_chosen(
    start_nvim, workspace: Path, sources: dict[str, Path], external: bool
) -> None:
    # picker.external, or without it a workspace with no session of ours: the other agents' sessions are listed
    before = digest(list(sources.values()))
    n = start_nvim()
    setup(n, {"name": "demo"}, picker={"backend": "select", "external": external})
    n.lua("""
    vim.g.pc_lines = vim.NIL
    vim.ui.select = function(items, opts, on_choice)
      local lines = {}
      for _, item in ipairs(items) do lines[#lines + 1] = opts.format_item(item) end
      vim.g.pc_lines = lines
      for _, item in ipairs(items) do
        if item.source == "codex" then return on_choice(item) end
      end
    end
    """)
    n.api.command("PseudoResume")
    lines = wait_for(lambda: n.lua("return vim.g.pc_lines"), what="vim.ui.select")
    assert lines[0].startswith("claude · Parser rename") and lines[1].startswith("codex · File listing"), lines
    sid = wait_resumed(n)["id"]
    assert len(n.lua("return require('pseudoclaude').sessions.load(...).messages", sid)) == 9
    assert digest(list(sources.values())) == before


# -- the real agents' stores (issue 46) ---------------------------------------------------------------------------

# Where each agent keeps its sessions under a home, as the variable the agent itself honours says (doc/import.md).
AGENT_HOMES = {
    "claude": lambda h: {"CLAUDE_CONFIG_DIR": str(h / ".claude")},
    "gemini": lambda h: {"GEMINI_CLI_HOME": str(h)},
    "qwen": lambda h: {"QWEN_HOME": str(h / ".qwen")},
    "opencode": lambda h: {"XDG_DATA_HOME": str(h / ".local" / "share")},
    "pi": lambda h: {"PI_CODING_AGENT_DIR": str(h / ".pi" / "agent")},
}
TOOLS = {"claude-code": "Claude Code", "gemini-cli": "Gemini CLI", "qwen-code": "Qwen Code", "opencode": "opencode",
         "pi": "Pi"}


def store_digest(info: dict[str, Any]) -> dict[str, str]:
    """The store's bytes and time (opencode: the database and its WAL; its `-shm` is the readers' shared memory, where
    any reader, ours too, marks what it reads)."""
    store = Path(info["store"])
    files = [store] + ([Path(str(store) + "-wal")] if store.suffix == ".db" else [])
    return digest([f for f in files if f.exists()])


@pytest.mark.parametrize("agent", list(AGENT_HOMES))
def test_a_real_agents_sessions_are_listed_previewed_and_resumed(
    start_nvim, workspace: Path, tmp_path: Path, agent: str
) -> None:
    # Two sessions the real agent writes in this workspace, offline against a fake model server: a text one and one
    # with a tool call (its write tool, FIGTREE into notes.txt).
    home = tmp_path / "agent-home"
    git_workspace(workspace)
    text = make_session(agent, home, workspace, "Remember the word PLUMTREE.")
    tools = make_session(agent, home, workspace, "Write the word FIGTREE into notes.txt.", tools=True)
    before = {**store_digest(text), **store_digest(tools)}
    n = start_nvim()
    for var, value in AGENT_HOMES[agent](home).items():
        n.lua("vim.env[select(1, ...)] = select(2, ...)", var, value)
    setup(n, {"name": "demo"})
    items = n.lua("return require('pseudoclaude').sessions.list({ external = true })")
    rows = {i["session_id"]: i for i in items if i.get("source")}
    assert set(rows) == {text["session_id"], tools["session_id"]}, items
    for info, count in ((text, 2), (tools, 4)):
        row = rows[info["session_id"]]
        assert row["agent"] == agent and row["id"] == f"{agent}:{info['session_id']}", row
        assert row["messages"] == count and "notes" not in row and "unsupported" not in row, row
    tool = TOOLS[rows[tools["session_id"]]["source"]]

    # No session of ours: :PseudoResume opens the picker on the other agents' (as if <C-o> was typed), the rows marked
    # with the agent, the results' title saying so; <C-o> hides them (the picker stays, empty) and shows them again.
    # The tool session's preview is its history as a resume restores it (the prompt, the call of the agent's write
    # tool, the answer), read from the agent's store.
    def theirs(s: dict[str, Any] | None) -> dict[str, Any] | None:
        return s if s and s["full"] and s["external"] and sum(f"[{agent}]" in r for r in s["rows"]) == 2 else None

    n.api.command("PseudoResume")
    st = wait_for(lambda: theirs(n.lua(STATE)), what="the agent's rows")
    assert st["title"] == " Sessions + other agents ", st
    n.api.input("<C-o>")
    st = wait_for(lambda: (lambda s: s if s and s["full"] and not s["external"] else None)(n.lua(STATE)),
                  what="the rows without theirs")
    assert st["rows"] == ["  no sessions"] and st["title"] == " Sessions ", st
    n.api.input("<C-o>")
    st = wait_for(lambda: theirs(n.lua(STATE)), what="the agent's rows again")
    wanted = rows[tools["session_id"]]["id"]
    for _ in range(len(st["rows"])):
        if n.lua(STATE)["selected"] == wanted:
            break
        n.api.input("<C-n>")
    st = wait_for(lambda: (lambda s: s if s["selected"] == wanted and "Done" in "\n".join(s["preview"]) else None)(
        n.lua(STATE)), what="the tool session's history in the preview")
    preview = "\n".join(st["preview"])
    assert f"{tool} session" in preview and "4 messages" in preview, preview
    assert "Write the word FIGTREE into notes.txt." in preview and "FIGTREE" in preview.split("notes.txt.", 1)[1], preview

    # <CR>: imported and resumed (today's path: our agent goes on with the history).
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.api.input("<CR>")
    sid = wait_resumed(n)["id"]
    loaded = n.lua("return require('pseudoclaude').sessions.load(...)", sid)
    assert len(loaded["messages"]) == 4 and loaded["messages"][0]["content"].startswith("Write the word FIGTREE")
    call = next(m for m in loaded["messages"] if m.get("tool_calls"))["tool_calls"][0]
    assert "FIGTREE" in json.dumps(call["arguments"]), call
    wait_for(lambda: any("Done" in line for line in transcript(n)), what="the restored answer drawn")

    # resume(id) with the text session's row id does the same.
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.lua("require('pseudoclaude').resume(...)", rows[text["session_id"]]["id"])
    other = wait_resumed(n)["id"]
    assert other != sid
    texts = [m.get("content", "") for m in n.lua("return require('pseudoclaude').sessions.load(...)", other)["messages"]]
    assert texts[0] == "Remember the word PLUMTREE." and "PLUMTREE" in texts[1], texts
    # a malformed id is refused, naming it
    err = n.lua("return select(2, pcall(require('pseudoclaude').sessions.import, ...))", f"{agent}:../../etc")
    assert "not another agent's session id" in err, err
    assert {**store_digest(text), **store_digest(tools)} == before
