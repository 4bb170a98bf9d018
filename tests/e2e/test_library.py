"""The session library end to end: names that stick (:PseudoRename, <C-r>, sessions.rename), forks (sessions.fork,
<C-f>, :PseudoFork) whose history a provider accepts, exports (:PseudoExport, sessions.export) with tools and spilled
results, pins (<C-t>) and the files a session touched in the picker's preview. Sessions are written to disk by hand
(session_files.py) or by real turns against the fake OpenAI server."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import TRACK, Neovim, transcript, type_message, wait_for
from fake_llm import FakeAnthropic, FakeOpenAI
from session_files import chat, entry, session_dir, session_id, write_session


# Calls an asynchronous sessions function with a callback that stores its result in vim.g.pc_done.
ASYNC = """
local fn, args = ...
vim.g.pc_done = vim.NIL
local function done(err, value)
  vim.g.pc_done = { err = err or false, value = value or false }
end
local sessions = require("pseudoclaude").sessions
if fn == "fork" or fn == "export" then
  args[#args].on_done = done
  sessions[fn](unpack(args))
else
  table.insert(args, done)
  sessions[fn](unpack(args))
end
"""



def openai(fake: FakeOpenAI) -> dict[str, Any]:
    return {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"}


def setup(n: Neovim, provider: dict[str, Any] | None = None, **extra: Any) -> None:
    n.lua("require('pseudoclaude').setup(...)", {"provider": provider or {"name": "demo"}, **extra})
    n.lua(TRACK)


def call_async(n: Neovim, fn: str, *args: Any) -> dict[str, Any]:
    """Runs `sessions.<fn>(*args, callback)` and waits for the callback; returns {err, value}."""
    n.lua(ASYNC, fn, list(args))
    return wait_for(lambda: n.lua("return vim.g.pc_done"), what=f"sessions.{fn}'s callback")


def lua_error(n: Neovim, code: str, *args: Any) -> str:
    ok, err = n.lua(f"return {{ pcall(function(...) {code} end, ...) }}", *args)
    assert ok is False, f"expected an error from {code}"
    return err


def resume(n: Neovim, sid: str) -> dict[str, Any]:
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.api.command(f"PseudoResume {sid}")
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True, report
    return report


def log_entries(ws: Path, sid: str) -> list[dict[str, Any]]:
    return [json.loads(l) for l in (session_dir(ws, sid) / "conversation.jsonl").read_text().splitlines()]


def listed(n: Neovim, sid: str) -> dict[str, Any]:
    items = n.lua("return require('pseudoclaude').sessions.list({ include_current = true })")
    return next(i for i in items if i["id"] == sid)


def idle(n: Neovim) -> None:
    wait_for(lambda: "idle" in n.lua("return require('pseudoclaude.chat').winbar()"), what="idle")


def tool_session(ws: Path, sid: str, *, mtime: float) -> Path:
    """A session with a read_file exchange, a write_file and an edit_file that succeeded, and an edit that failed."""
    ts = int(mtime) - 100
    call = lambda cid, name, args: {"id": cid, "name": name, "arguments": args}  # noqa: E731
    entries = [
        entry("user", "tidy the repo", ts=ts, model="m1"),  # 1
        entry("assistant", "Looking.", ts=ts + 1, tool_calls=[call("c1", "read_file", {"path": "a.txt"})]),  # 2
        entry("user", ts=ts + 2, tool_result={"tool_call_id": "c1", "content": "old text\n", "is_error": False}),  # 3
        entry(
            "assistant",
            "Changing two files.",
            ts=ts + 3,
            tool_calls=[
                call("c2", "write_file", {"path": "notes/new.md", "content": "x"}),
                call("c3", "edit_file", {"path": "a.txt", "old": "old", "new": "new"}),
                call("c4", "edit_file", {"path": "never.txt", "old": "a", "new": "b"}),
            ],
        ),  # 4
        entry("user", ts=ts + 4, tool_result={"tool_call_id": "c2", "content": "wrote", "is_error": False}),  # 5
        entry("user", ts=ts + 5, tool_result={"tool_call_id": "c3", "content": "edited", "is_error": False}),  # 6
        entry("user", ts=ts + 6, tool_result={"tool_call_id": "c4", "content": "declined", "is_error": True}),  # 7
        entry("assistant", "Done: a.txt says new now.", ts=ts + 7),  # 8
    ]
    return write_session(ws, sid, entries, mtime=mtime)


# -- names --------------------------------------------------------------------------------------------------------


def test_a_name_survives_a_restart_and_the_loss_of_the_cache(start_nvim, workspace: Path) -> None:
    sid = session_id(1)
    write_session(workspace, sid, title="fix the lexer")
    n = start_nvim()
    setup(n)
    done = call_async(n, "rename", sid, "Lexer  rewrite")
    assert done["err"] is False and done["value"]["title"] == "Lexer rewrite", done
    assert listed(n, sid)["title"] == "Lexer rewrite"  # at once, from the summary cache and the line after it
    assert log_entries(workspace, sid)[-1]["type"] == "title"
    n.close()
    (session_dir(workspace, sid) / "summary.json").unlink()
    n = start_nvim()
    setup(n)
    assert listed(n, sid)["title"] == "Lexer rewrite"
    assert n.lua("return require('pseudoclaude').sessions.load(...).title", sid) == "Lexer rewrite"
    assert len(n.lua("return require('pseudoclaude').sessions.load(...).messages", sid)) == 2  # not a message


def test_pseudo_rename_names_the_current_session_through_its_own_writer(start_nvim, workspace: Path) -> None:
    sid = session_id(2)
    write_session(workspace, sid, title="fix the lexer")
    n = start_nvim()
    setup(n)
    resume(n, sid)  # this editor holds the session's lock now
    n.api.command("PseudoRename Parser and lexer")
    wait_for(lambda: listed(n, sid)["title"] == "Parser and lexer", what="the name")
    assert [e["type"] for e in log_entries(workspace, sid)][-1] == "title"
    assert not [x for x in n.lua("return _G.notes") if x.get("level") == 4], n.lua("return _G.notes")
    # no title: back to the automatic one, and it stays so without the cache, in another editor
    n.api.command("PseudoRename")
    wait_for(lambda: listed(n, sid)["title"] == "fix the lexer", what="the automatic title")
    n.close()
    (session_dir(workspace, sid) / "summary.json").unlink()
    n = start_nvim()
    setup(n)
    assert listed(n, sid)["title"] == "fix the lexer"


def test_picker_ctrl_r_renames_the_highlighted_row_and_the_filter_finds_the_name(start_nvim, workspace: Path) -> None:
    now = time.time()
    ids = [session_id(10 + i) for i in range(3)]
    for i, sid in enumerate(ids):
        write_session(workspace, sid, title=f"task {i}", mtime=now - 3600 * (3 - i))
    n = start_nvim()
    setup(n)
    n.api.command("set columns=160 lines=48")
    state = "local p = require('pseudoclaude.float') local s = p.get_state() if not s then return vim.NIL end " \
        "return { full = s.full, sel = (p.selected() or {}).id, rows = vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false), " \
        "query = s.query }"
    n.api.input(":PseudoResume<CR>")
    wait_for(lambda: (s := n.lua("return " + f"(function() {state} end)()")) and s["full"], what="the picker")
    n.api.input("<C-n>")
    wait_for(lambda: n.lua(f"return (function() {state} end)()")["sel"] == ids[1], what="the second row")
    n.api.input("<C-r>")
    wait_for(lambda: n.api.api.get_mode()["mode"] == "c", what="the prompt")
    assert n.api.call("getcmdline") == "task 1"  # prefilled with the current title
    n.api.input("<C-u>Release checklist<CR>")
    s = wait_for(
        lambda: (x := n.lua(f"return (function() {state} end)()")) and x["rows"][0].startswith("  Release checklist") and x,
        what="the renamed row (moved up: the write made it the newest)",
    )
    assert s["sel"] == ids[1]
    assert listed(n, ids[1])["title"] == "Release checklist"
    n.api.input("checkl")
    s = wait_for(lambda: (x := n.lua(f"return (function() {state} end)()")) and x["query"] == "checkl" and x, what="filter")
    assert len([r for r in s["rows"] if r.strip()]) == 1 and "Release checklist" in s["rows"][0]
    # an empty name gives the automatic title back; <Esc> at the prompt changes nothing
    n.api.input("<C-r>")
    wait_for(lambda: n.api.api.get_mode()["mode"] == "c", what="the prompt")
    n.api.input("<C-u><CR>")
    wait_for(lambda: listed(n, ids[1])["title"] == "task 1", what="the automatic title")
    before = (session_dir(workspace, ids[1]) / "conversation.jsonl").read_bytes()
    n.api.input("<C-w>")  # the query goes, so the row is shown again
    wait_for(lambda: (x := n.lua(f"return (function() {state} end)()")) and x["query"] == "" and x["sel"], what="rows")
    n.api.input("<C-r>")
    wait_for(lambda: n.api.api.get_mode()["mode"] == "c", what="the prompt")
    # every write of a name goes through the native sessions_mark_async, called in the step that reads the answer
    n.lua("local lib = require('pseudoclaude.core').load() local real = lib.sessions_mark_async _G.marks = 0 "
          "lib.sessions_mark_async = function(...) _G.marks = _G.marks + 1 return real(...) end")
    n.api.input("<Esc>")
    wait_for(lambda: n.api.api.get_mode()["mode"] != "c", what="the prompt to close")  # that step is over
    assert n.lua("return _G.marks") == 0, "<Esc> at the prompt asked for a write"
    assert (session_dir(workspace, ids[1]) / "conversation.jsonl").read_bytes() == before


def test_bad_input_gets_clear_errors_and_changes_nothing(nvim: Neovim, workspace: Path) -> None:
    sid = session_id(3)
    write_session(workspace, sid, title="only one")
    setup(nvim)
    before = (session_dir(workspace, sid) / "conversation.jsonl").read_bytes()
    s = "require('pseudoclaude').sessions"
    assert "invalid session id \"../../etc\"" in lua_error(nvim, f"{s}.rename('../../etc', 'x')")
    assert "no session 20260101-000000-abcd" in lua_error(nvim, f"{s}.rename('20260101-000000-abcd', 'x')")
    assert "invalid session id" in lua_error(nvim, f"{s}.fork('../../etc', 1)")
    assert "no session 20260101-000000-abcd" in lua_error(nvim, f"{s}.fork('20260101-000000-abcd', 1)")
    assert "message 3 is out of range" in lua_error(nvim, f"{s}.fork(..., 3)", sid)
    assert "index: expected an integer >= 1" in lua_error(nvim, f"{s}.fork(..., 0)", sid)
    assert "invalid session id" in lua_error(nvim, f"{s}.export('../../etc')")
    assert "opts.format" in lua_error(nvim, f"{s}.export(..., {{ format = 'pdf' }})", sid)
    assert "title is too long" in lua_error(nvim, f"{s}.rename(..., string.rep('x', 300))", sid)
    done = call_async(nvim, "fork", sid, 5, {})
    assert "message 5 is out of range" in done["err"], done
    assert (session_dir(workspace, sid) / "conversation.jsonl").read_bytes() == before
    assert len(list((workspace / ".PseudoClaude" / "sessions").iterdir())) == 1  # no half-made fork
    # commands without a current session
    nvim.api.command("PseudoRename x")
    nvim.api.command("PseudoExport")
    nvim.api.command("PseudoFork")
    msgs = [x["msg"] for x in nvim.lua("return _G.notes")]
    assert sum("there is no current session" in m for m in msgs) == 2, msgs
    assert any("run :PseudoFork in the agent buffer" in m for m in msgs), msgs


# -- forks --------------------------------------------------------------------------------------------------------


def test_a_fork_is_a_valid_history_for_the_provider_and_the_source_is_byte_identical(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    src = session_id(4)
    tool_session(workspace, src, mtime=time.time() - 60)
    source_log = session_dir(workspace, src) / "conversation.jsonl"
    before = source_log.read_bytes()
    setup(nvim, openai(fake))
    # at message 4 (three tool calls): the fork takes their three results too
    new = nvim.lua("return require('pseudoclaude').sessions.fork(...)", src, 4)
    assert new != src and source_log.read_bytes() == before
    loaded = nvim.lua("return require('pseudoclaude').sessions.load(...)", new)
    assert len(loaded["messages"]) == 7 and loaded["damage_report"] == ""
    assert loaded["forked_from"] == {"id": src, "index": 7}
    item = listed(nvim, new)
    assert item["forked_from"] == {"id": src, "index": 7} and item["messages"] == 7 and item["model"] == "m1"
    first = log_entries(workspace, new)
    assert len(first) == 1 and first[0]["type"] == "replace" and first[0]["reason"] == "fork"
    # a turn from the fork: the server gets the fork's history, every call answered once
    fake.push_text("Continuing from the fork.")
    resume(nvim, new)
    type_message(nvim, "go on")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="the turn")
    assert fake.errors == []
    sent = fake.requests[-1]["messages"]
    roles = [m["role"] for m in sent if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "tool", "tool", "user"], roles
    assert sent[-1]["content"] == "go on"
    assert [c["id"] for c in next(m for m in sent if m.get("tool_calls") and len(m["tool_calls"]) == 3)["tool_calls"]] \
        == ["c2", "c3", "c4"]
    assert source_log.read_bytes() == before
    assert [e for e in log_entries(workspace, new) if e.get("role") == "user"][-1]["content"] == "go on"


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    f = FakeAnthropic()
    yield f
    f.close()


def test_the_anthropic_fake_refuses_what_the_api_refuses() -> None:
    """The fake's rules are what make the fork test below mean something: each broken history is refused."""
    use = lambda *ids: {"role": "assistant", "content": [  # noqa: E731
        {"type": "tool_use", "id": i, "name": "read_file", "input": {}} for i in ids]}
    result = lambda i: {"type": "tool_result", "tool_use_id": i, "content": "x"}  # noqa: E731
    text = lambda t: {"type": "text", "text": t}  # noqa: E731
    cases = [
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "roles must alternate"),
        ([{"role": "assistant", "content": "a"}], "the first message must use the \"user\" role"),
        ([{"role": "user", "content": "a"}, use("t1"), {"role": "user", "content": "go on"}], "without `tool_result`"),
        ([{"role": "user", "content": "a"}, use("t1", "t2"), {"role": "user", "content": [result("t1")]}], "t2"),
        ([{"role": "user", "content": "a"}, use("t1")], "without `tool_result`"),
        ([{"role": "user", "content": [result("t9")]}], "unexpected `tool_use_id`"),
        ([{"role": "user", "content": "a"}, use("t1"), {"role": "user", "content": [text("b"), result("t1")]}],
         "tool_result blocks must come before any other content"),
        ([{"role": "user", "content": "a"}, use("t1"), {"role": "user", "content": [result("t1"), result("t1")]}],
         "duplicate tool_result"),
        ([{"role": "user", "content": [text("  ")]}], "must contain non-whitespace text"),
        ([{"role": "user", "content": []}], "non-empty content"),
    ]
    for messages, why in cases:
        problem = FakeAnthropic.validate({"model": "m", "max_tokens": 8, "stream": True, "messages": messages})
        assert problem is not None and why in problem, (messages, problem)
    cached = [{"type": "text", "text": f"t{i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    problem = FakeAnthropic.validate({"model": "m", "max_tokens": 8, "stream": True,
                                      "messages": [{"role": "user", "content": cached}]})
    assert problem == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    ok = [{"role": "user", "content": "a"}, use("t1", "t2"),
          {"role": "user", "content": [result("t2"), result("t1"), text("and go on")]}]
    assert FakeAnthropic.validate({"model": "m", "max_tokens": 8, "stream": True, "messages": ok}) is None


def test_a_fork_is_a_valid_history_for_the_anthropic_api_too(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic
) -> None:
    (workspace / "a.txt").write_text("new text\n")
    src = session_id(9)
    # Idle for 30 hours: resuming the fork adds the stale reminder, a second user text after the tool results.
    tool_session(workspace, src, mtime=time.time() - 30 * 3600)
    source_log = session_dir(workspace, src) / "conversation.jsonl"
    before = source_log.read_bytes()
    setup(nvim, {"name": "anthropic", "base_url": fake_anthropic.base_url, "model": "fake-claude",
                 "api_key_env": "PC_TEST_NO_KEY"})
    # at message 4 (three tool calls): the fork ends on their three results
    new = nvim.lua("return require('pseudoclaude').sessions.fork(...)", src, 4)
    assert nvim.lua("return require('pseudoclaude').sessions.load(...).forked_from", new) == {"id": src, "index": 7}
    fake_anthropic.push_tools("Checking a.txt.", [("toolu_9", "read_file", {"path": "a.txt"})])
    fake_anthropic.push_text("a.txt says new text.")
    resume(nvim, new)
    type_message(nvim, "go on")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="the turn")
    assert fake_anthropic.errors == []
    assert len(fake_anthropic.requests) == 2  # the tool call's result went back in a second request
    first, second = fake_anthropic.requests
    shape = [(m["role"], [b["type"] for b in m["content"]]) for m in first["messages"]]
    assert shape == [
        ("user", ["text"]),
        ("assistant", ["text", "tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text", "tool_use", "tool_use", "tool_use"]),
        ("user", ["tool_result", "tool_result", "tool_result", "text", "text"]),
    ], shape
    last = first["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in last[:3]] == ["c2", "c3", "c4"]
    assert last[2]["is_error"] is True  # the declined edit stays an error
    assert last[3]["text"].startswith("[Session resumed]") and last[4]["text"] == "go on"
    assert [m["role"] for m in second["messages"]][-2:] == ["assistant", "user"]
    answer = second["messages"][-1]["content"][0]
    assert answer["type"] == "tool_result" and answer["tool_use_id"] == "toolu_9" and "new text" in answer["content"]
    assert all(h.get("anthropic-version") == "2023-06-01" for h in fake_anthropic.headers)
    wait_for(lambda: any("a.txt says new text." in l for l in transcript(nvim)), what="the answer drawn")
    assert source_log.read_bytes() == before
    # the fork's log goes on, its parent still recorded; a reload gives the provider the same valid history
    loaded = nvim.lua("return require('pseudoclaude').sessions.load(...)", new)
    assert loaded["forked_from"] == {"id": src, "index": 7} and loaded["damage_report"] == ""
    assert [m.get("content") for m in loaded["messages"]][-1] == "a.txt says new text."


def test_ctrl_f_in_the_picker_forks_at_the_end_and_resumes_the_fork(nvim: Neovim, workspace: Path) -> None:
    now = time.time()
    src, other = session_id(5), session_id(6)
    write_session(workspace, src, chat("fork me", ts=int(now) - 500, replies=2), mtime=now - 100)
    write_session(workspace, other, title="other", mtime=now - 5000)
    before = (session_dir(workspace, src) / "conversation.jsonl").read_bytes()
    setup(nvim)
    nvim.api.input(":PseudoResume<CR>")
    wait_for(lambda: nvim.lua("local s = require('pseudoclaude.float').get_state() return s and s.full"), what="picker")
    nvim.api.input("<C-f>")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the fork resumed")
    assert report["ok"] is True and report["id"] not in (src, other)
    assert nvim.lua("return require('pseudoclaude.float').is_open()") is False
    assert nvim.lua("return require('pseudoclaude').current().id") == report["id"]
    item = listed(nvim, report["id"])
    assert item["forked_from"] == {"id": src, "index": 4} and item["messages"] == 4
    assert (session_dir(workspace, src) / "conversation.jsonl").read_bytes() == before
    # the picker shows the parent in the fork's preview
    nvim.api.command("PseudoNew")
    nvim.api.input(":PseudoResume<CR>")
    lines = wait_for(
        lambda: nvim.lua(
            "local p = require('pseudoclaude.float') local s = p.get_state() "
            "if not (s and s.preview_id and s.preview_id == (p.selected() or {}).id) then return false end "
            "return vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false)"
        ),
        what="the preview",
    )
    assert f"forked from {src} at message 4" in lines, lines


def test_pseudofork_forks_at_the_message_under_the_cursor(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    fake.push_tools("Let me look.", [("call_1", "read_file", {"path": "a.txt"})])
    fake.push_text("It has two lines.")
    fake.push_text("You are welcome.")
    setup(nvim, openai(fake))
    type_message(nvim, "what is in a.txt?")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="turn 1")
    type_message(nvim, "thanks")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 2, what="turn 2")
    idle(nvim)
    src = nvim.lua("return require('pseudoclaude').current().id")
    before = (session_dir(workspace, src) / "conversation.jsonl").read_bytes()
    lines = transcript(nvim)
    # history: 1 you, 2 agent + call, 3 result, 4 agent, 5 you, 6 agent
    row = next(i for i, l in enumerate(lines) if l.startswith("▸ read_file")) + 1  # the call's line (message 2)
    win = nvim.lua("return vim.fn.win_findbuf(vim.fn.bufnr('pseudoclaude://chat'))[1]")
    nvim.api.command(f"call win_gotoid({win})")
    nvim.api.current.window.cursor = (row, 0)
    assert nvim.lua("return require('pseudoclaude.chat').message_at(...)", row) == 2
    nvim.lua("vim.g.pc_resumed = vim.NIL")
    nvim.api.command("PseudoFork")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the switch to the fork")
    assert report["ok"] is True and report["id"] != src
    fork1 = report["id"]
    assert nvim.lua("return require('pseudoclaude').current().id") == fork1
    item = listed(nvim, fork1)
    assert item["forked_from"] == {"id": src, "index": 3} and item["messages"] == 3  # the call kept its result
    assert (session_dir(workspace, src) / "conversation.jsonl").read_bytes() == before
    assert any("forked session" in x["msg"] for x in nvim.lua("return _G.notes"))
    # in the fork (a restored buffer now), on the first "## You": a fork of one message
    wait_for(lambda: any(l.startswith("  ✓ read_file") for l in transcript(nvim)), what="the fork drawn")
    lines = transcript(nvim)
    assert "thanks" not in lines
    nvim.api.command(f"call win_gotoid({win})")
    nvim.api.current.window.cursor = (lines.index("what is in a.txt?") + 1, 0)
    nvim.lua("vim.g.pc_resumed = vim.NIL")
    nvim.api.command("PseudoFork")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the second fork")
    item = listed(nvim, report["id"])
    assert item["forked_from"] == {"id": fork1, "index": 1} and item["messages"] == 1


# -- export -------------------------------------------------------------------------------------------------------


def test_markdown_export_of_a_session_with_tools_and_a_spilled_result(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, tmp_path: Path
) -> None:
    big = "".join(f"line {i:03d} of the big file\n" for i in range(200))  # ~5.4 KB, spilled above 1 KiB
    (workspace / "big.txt").write_text(big)
    fake.push_tools("Reading ```it```.", [("call_1", "read_file", {"path": "big.txt"})])
    fake.push_text("It has 200 lines.")
    setup(nvim, openai(fake), spill_threshold=1024)
    type_message(nvim, "how long is big.txt?")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="the turn")
    idle(nvim)
    sid = nvim.lua("return require('pseudoclaude').current().id")
    spills = list((session_dir(workspace, sid) / "tool-results").glob("*.txt"))
    assert len(spills) == 1, "the result was spilled"
    nvim.api.command("PseudoExport")
    wait_for(lambda: nvim.api.current.buffer.name.endswith(f"pseudoclaude://export/{sid}.md"), what="the export buffer")
    assert nvim.api.current.buffer.options["filetype"] == "markdown"
    md = "\n".join(nvim.api.current.buffer[:])
    assert md.startswith("# how long is big.txt?\n") and f"- Session: `{sid}`" in md and "- Model: `fake-model`" in md
    assert "- Branch:" not in md  # not recorded: not shown
    assert "## 1. You\n\nhow long is big.txt?" in md and "## 2. Agent\n\nReading ```it```." in md
    assert '**Tool call** `read_file` (`call_1`)\n\n```json\n{\n  "path": "big.txt"\n}\n```' in md
    assert "## 3. Tool result: `read_file` (`call_1`)\n\n<details>\n<summary>read_file: 200 lines" in md
    assert "line 000 of the big file" in md and "line 199 of the big file\n```\n\n</details>" in md  # whole, from the spill
    assert "output truncated" not in md
    assert "## 4. Agent\n\nIt has 200 lines." in md
    # to a file; JSON by its extension and through the API
    out = tmp_path / "out.md"
    nvim.api.command(f"PseudoExport {out}")
    wait_for(lambda: out.exists() and out.read_text() == md + "\n", what="the file")
    nvim.api.command(f"PseudoExport {tmp_path / 'out.json'}")
    js = json.loads(wait_for(lambda: (tmp_path / "out.json").exists() and (tmp_path / "out.json").read_text(), what="json"))
    assert js["id"] == sid and [m["role"] for m in js["messages"]] == ["user", "assistant", "user", "assistant"]
    assert js["messages"][2]["tool_result"]["spill"]["path"].startswith("tool-results/")
    text = nvim.lua("return require('pseudoclaude').sessions.export(..., { format = 'json' })", sid)
    assert json.loads(text) == js


def test_export_marks_interrupted_answers_and_the_stale_reminder(nvim: Neovim, workspace: Path) -> None:
    sid = session_id(7)
    ts = int(time.time()) - 30 * 3600
    entries = [
        entry("user", "explain the parser", ts=ts, model="m1"),
        {"type": "checkpoint", "content": "It reads tok", "ts": ts + 1, "answer": "a1", "at": 0},
        entry("user", "[Session resumed] This conversation was resumed 9 hours after its last message.", ts=ts + 9),
        entry("user", "go on", ts=ts + 10),
        entry("assistant", "Tokens first.", ts=ts + 11),
    ]
    write_session(workspace, sid, entries)
    setup(nvim)
    md = nvim.lua("return require('pseudoclaude').sessions.export(...)", sid)
    assert "## 2. Agent (interrupted)\n\nIt reads tok\n\n*[interrupted: the answer stopped here]*" in md, md
    assert "## 3. Reminder to the model\n\n*Added by pseudoclaude when the session was resumed" in md
    assert "> [Session resumed] This conversation" in md
    done = call_async(nvim, "export", sid, {"format": "markdown"})
    assert done["err"] is False and done["value"]["text"] == md


# -- pins and the preview header ----------------------------------------------------------------------------------

PICKER_ROWS = (
    "local p = require('pseudoclaude.float') local s = p.get_state() if not (s and s.full) then return false end "
    "return { sel = (p.selected() or {}).id, rows = vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false) }"
)


def test_ctrl_t_pins_a_session_first_and_it_stays_first_after_a_restart(start_nvim, workspace: Path) -> None:
    now = time.time()
    ids = [session_id(20 + i) for i in range(4)]
    for i, sid in enumerate(ids):
        write_session(workspace, sid, title=f"job {i}", mtime=now - 3600 * (4 - i))
    n = start_nvim()
    setup(n)
    n.api.command("set columns=160 lines=48")
    n.api.input(":PseudoResume<CR>")
    s = wait_for(lambda: n.lua(PICKER_ROWS), what="the picker")
    assert [r[2:7] for r in s["rows"][:4]] == ["job 3", "job 2", "job 1", "job 0"]
    n.api.input("<C-n><C-n><C-n>")
    wait_for(lambda: n.lua(PICKER_ROWS)["sel"] == ids[0], what="the last row")
    n.api.input("<C-t>")
    s = wait_for(lambda: (x := n.lua(PICKER_ROWS)) and x["rows"][0].startswith("* job 0") and x, what="pinned first")
    assert s["sel"] == ids[0] and listed(n, ids[0])["pinned"] is True
    last = log_entries(workspace, ids[0])[-1]
    assert (last["type"], last["pinned"]) == ("pin", True)
    n.close()
    # newer sessions since: the pinned one still comes first, without its cache
    write_session(workspace, session_id(30), title="newest", mtime=time.time())
    (session_dir(workspace, ids[0]) / "summary.json").unlink()
    write_session(workspace, session_id(31), title="newer still", mtime=time.time())
    n = start_nvim()
    setup(n, picker={"max_items": 2})  # the first rows: only the two newest, and the pinned one all the same
    n.api.command("set columns=160 lines=48")
    assert n.lua("return require('pseudoclaude').sessions.list()")[0]["id"] == ids[0]
    n.api.input(":PseudoResume<CR>")
    first = wait_for(
        lambda: n.lua("local s = require('pseudoclaude.float').get_state() "
                      "return s and vim.tbl_map(function(i) return i.id end, s.top_items)"),
        what="the first rows",
    )
    assert first == [ids[0], session_id(31)], first
    s = wait_for(lambda: n.lua(PICKER_ROWS), what="the picker")
    assert s["rows"][0].startswith("* job 0") and s["rows"][1].startswith("  newer still"), s["rows"]
    preview = wait_for(
        lambda: n.lua(
            "local p = require('pseudoclaude.float') local s = p.get_state() "
            "if s.preview_id ~= (p.selected() or {}).id then return false end "
            "return vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false)"
        ),
        what="the preview",
    )
    assert "* pinned" in preview
    n.api.input("<C-t>")  # unpin
    s = wait_for(lambda: (x := n.lua(PICKER_ROWS)) and not x["rows"][0].startswith("* ") and x, what="unpinned")
    assert listed(n, ids[0])["pinned"] is False


def test_the_preview_header_lists_the_files_the_agent_touched(nvim: Neovim, workspace: Path) -> None:
    sid = session_id(8)
    tool_session(workspace, sid, mtime=time.time() - 60)
    setup(nvim)
    nvim.api.command("set columns=160 lines=48")
    nvim.api.input(":PseudoResume<CR>")
    preview = wait_for(
        lambda: nvim.lua(
            "local p = require('pseudoclaude.float') local s = p.get_state() "
            "if not (s and s.preview_id and s.preview_id == (p.selected() or {}).id) then return false end "
            "return vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false)"
        ),
        what="the preview",
    )
    header = preview[: preview.index("")]
    assert "files touched: notes/new.md, a.txt" in header, header  # not never.txt: that edit was declined
    assert not any("read_file" in l for l in header)


def test_help_tags_for_the_library(nvim: Neovim, tmp_path: Path) -> None:
    import shutil

    from conftest import ROOT

    doc = tmp_path / "doc-root" / "doc"
    shutil.copytree(ROOT / "doc", doc)
    nvim.api.command(f"helptags {doc}")
    nvim.api.command(f"set rtp^={doc.parent}")
    for tag in [
        "pseudoclaude-library",
        ":PseudoRename",
        ":PseudoFork",
        ":PseudoExport",
        "pseudoclaude.sessions.rename()",
        "pseudoclaude.sessions.pin()",
        "pseudoclaude.sessions.fork()",
        "pseudoclaude.sessions.export()",
        "pseudoclaude-cli",
    ]:
        nvim.api.command(f"help {tag}")
        assert nvim.api.current.buffer.name == str(doc / "pseudoclaude.txt")


# Issue 29: work an asynchronous call accepted finishes before Neovim exits. Both worker threads are kept busy listing
# a large session (a loaded machine), so the write waits in their queue; then the write and `:qa!` in one main-loop
# step, sent without waiting for an answer (the process is gone before it could come).
QUIT_RIGHT_AFTER = """
local sid, wait_ms = ...
local sessions = require("pseudoclaude").sessions
if type(wait_ms) == "number" then
  require("pseudoclaude.core").EXIT_WAIT_MS = wait_ms
end
for _ = 1, 2 do
  sessions.list_async({}, function() end)
end
sessions.rename(sid, "kept across the exit")
vim.cmd("qa!")
"""


def busy_workspace(workspace: Path) -> str:
    """A small session to rename, and a large one (about 40 MiB) whose listing keeps a worker busy."""
    sid = session_id(10)
    write_session(workspace, sid, title="before the exit")
    big = [entry("user", f"question {k} " + "x" * 40_000, ts=1_780_000_000 + k) for k in range(1000)]
    write_session(workspace, session_id(11), big)
    return sid


def quit_right_after_a_rename(nvim: Neovim, sid: str, wait_ms: int | None = None) -> None:
    setup(nvim)
    nvim.lua("require('pseudoclaude.core').load()")
    nvim.api.exec_lua(QUIT_RIGHT_AFTER, sid, wait_ms, async_=True)
    assert nvim.proc.wait(timeout=60) == 0


def titles(workspace: Path, sid: str) -> list[str]:
    log = (session_dir(workspace, sid) / "conversation.jsonl").read_text()
    return [json.loads(line).get("title") for line in log.splitlines() if json.loads(line).get("type") == "title"]


def test_a_rename_right_before_quitting_is_kept(nvim: Neovim, workspace: Path) -> None:
    sid = busy_workspace(workspace)
    errors_log = Path(nvim.lua("return require('pseudoclaude.errors').log_path()"))
    quit_right_after_a_rename(nvim, sid)
    assert not errors_log.exists(), errors_log.read_text()
    assert titles(workspace, sid) == ["kept across the exit"]


def test_a_write_the_exit_gives_up_on_is_named_and_not_half_written(nvim: Neovim, workspace: Path) -> None:
    sid = busy_workspace(workspace)
    log = session_dir(workspace, sid) / "conversation.jsonl"
    before = log.read_bytes()
    errors_log = Path(nvim.lua("return require('pseudoclaude.errors').log_path()"))
    quit_right_after_a_rename(nvim, sid, wait_ms=0)  # no time at all: the rename, not started, is given up
    assert log.read_bytes() == before
    said = errors_log.read_text()
    assert f"Neovim exited before these writes were done: the name of session {sid} (not started: nothing written)" in said
