"""require("pseudoclaude").sessions: list, info, load, cleanup, delete, over sessions written to disk as JSONL."""

import json
import os
import subprocess
import time

import pytest

from conftest import ROOT, wait_for
from session_files import SESSIONS, chat, entry, hold_lock, session_dir, session_id, write_session

STUB_CHAT = """
package.loaded["pseudoclaude.chat"] = {
  resume = function(id) vim.g.resumed = id end,
  current = function() return vim.g.current_id and { id = vim.g.current_id } or nil end,
}
"""


def lua_error(nvim, code, *args):
    """Runs `code` under pcall; returns the error message (fails the test if it did not raise)."""
    ok, msg = nvim.lua(f"return {{ pcall(function(...) {code} end, ...) }}", *args)
    assert ok is False, f"expected an error from {code!r}"
    return msg


@pytest.fixture
def three(workspace):
    """Three sessions, one hour apart; returns their ids newest first."""
    now = time.time()
    ids = [session_id(i) for i in range(3)]
    for i, sid in enumerate(ids):
        write_session(workspace, sid, title=f"task {i}", model=f"model-{i}", mtime=now - 3600 * (3 - i))
    return list(reversed(ids))


def test_list_is_newest_first_with_every_field(nvim, three):
    got = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert [s["id"] for s in got] == three
    first = got[0]
    assert first["title"] == "task 2"
    assert first["model"] == "model-2"
    assert first["messages"] == 2 and first["entries"] == 2
    assert first["bytes"] > 0 and first["modified"] > 0 and first["last_message"] > 0
    assert first["bad_lines"] == 0
    assert "held_by" not in first  # nil: nobody holds it
    assert set(first) >= {"id", "title", "model", "messages", "entries", "bytes", "modified", "last_message"}


def test_list_limit_and_bad_limit(nvim, three):
    got = nvim.lua("return require('pseudoclaude').sessions.list({ limit = 2 })")
    assert [s["id"] for s in got] == three[:2]
    msg = lua_error(nvim, "return require('pseudoclaude').sessions.list({ limit = 'x' })")
    assert "opts.limit: expected an integer" in msg


def test_list_leaves_out_empty_sessions(nvim, workspace, three):
    session_dir(workspace, session_id(10)).mkdir(parents=True)  # no log yet
    write_session(workspace, session_id(11), entries=[])  # an empty log
    got = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert [s["id"] for s in got] == three


def test_list_leaves_out_the_current_session_unless_asked(nvim, three):
    nvim.lua(STUB_CHAT)
    nvim.api.vars["current_id"] = three[0]
    got = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert [s["id"] for s in got] == three[1:]
    got = nvim.lua("return require('pseudoclaude').sessions.list({ include_current = true })")
    assert [s["id"] for s in got] == three


def test_list_reports_a_session_held_by_another_editor(nvim, workspace, three):
    with hold_lock(session_dir(workspace, three[1]), pid=4242, host="elsewhere"):
        got = nvim.lua("return require('pseudoclaude').sessions.list()")
        held = {s["id"]: s.get("held_by") for s in got}
        assert held[three[0]] is None and held[three[2]] is None
        assert "pid 4242 on elsewhere" in held[three[1]]
        info = nvim.lua("return require('pseudoclaude').sessions.info(...)", three[1])
        assert "pid 4242 on elsewhere" in info["held_by"]
    assert "held_by" not in nvim.lua("return require('pseudoclaude').sessions.info(...)", three[1])


def test_workspace_comes_from_the_config(nvim, tmp_path):
    other = tmp_path / "other"
    write_session(other, session_id(1), title="elsewhere")
    assert nvim.lua("return require('pseudoclaude').sessions.list()") == []
    nvim.lua("require('pseudoclaude').setup({ workspace = ... })", str(other))
    assert [s["title"] for s in nvim.lua("return require('pseudoclaude').sessions.list()")] == ["elsewhere"]


def test_load_returns_the_messages_in_the_log_shape(nvim, workspace):
    sid = session_id(1)
    ts = int(time.time()) - 100
    write_session(
        workspace,
        sid,
        [
            entry("user", "fix the parser", ts=ts, model="m1"),
            entry(
                "assistant",
                "reading",
                ts=ts + 1,
                tool_calls=[{"id": "c1", "name": "read_file", "arguments": {"path": "a.rs"}}],
            ),
            entry("user", ts=ts + 2, tool_result={"tool_call_id": "c1", "content": "fn main() {}", "is_error": False}),
            entry("assistant", "done", ts=ts + 3),
        ],
    )
    got = nvim.lua("return require('pseudoclaude').sessions.load(...)", sid)
    assert got["id"] == sid and got["title"] == "fix the parser" and got["model"] == "m1"
    assert got["bad_lines"] == [] and got["trimmed"] is False and got["dropped"] == 0
    assert got["torn_tail_bytes"] == 0 and got["spill_problems"] == [] and got["damage_report"] == ""
    assert got["entries"] == 4 and got["last_message"] == ts + 3
    msgs = got["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[0] == {"role": "user", "content": "fix the parser", "ts": ts}
    assert msgs[1]["tool_calls"] == [{"id": "c1", "name": "read_file", "arguments": {"path": "a.rs"}}]
    assert msgs[2]["tool_result"] == {"tool_call_id": "c1", "content": "fn main() {}", "is_error": False}
    assert "content" not in msgs[2]


def test_load_reports_damage(nvim, workspace):
    sid = session_id(1)
    write_session(workspace, sid, chat("hello", ts=100), tail='{"torn')
    (session_dir(workspace, sid) / "conversation.jsonl").write_text(
        "not json\n" + (session_dir(workspace, sid) / "conversation.jsonl").read_text()
    )
    got = nvim.lua("return require('pseudoclaude').sessions.load(...)", sid)
    assert got["bad_lines"] == [1]
    assert got["torn_tail_bytes"] == len('{"torn')
    assert "skipped 1 unreadable line(s) (1)" in got["damage_report"]
    assert "torn last line" in got["damage_report"]


@pytest.mark.parametrize("fn", ["load", "info", "delete"])
def test_hostile_and_missing_ids_are_clear_errors(nvim, workspace, three, fn):
    msg = lua_error(nvim, f"return require('pseudoclaude').sessions.{fn}('../../etc')")
    assert msg.startswith(f"pseudoclaude.sessions.{fn}: invalid session id \"../../etc\"")
    msg = lua_error(nvim, f"return require('pseudoclaude').sessions.{fn}('20200101-000000-abcd')")
    assert msg.startswith(f"pseudoclaude.sessions.{fn}: no session 20200101-000000-abcd")
    msg = lua_error(nvim, f"return require('pseudoclaude').sessions.{fn}(nil)")
    assert msg == f"pseudoclaude.sessions.{fn}: id: expected string, got nil"
    assert (workspace / SESSIONS).is_dir() and len(list((workspace / SESSIONS).iterdir())) == 3
    assert nvim.alive()


def test_delete_removes_the_session_directory(nvim, workspace, three):
    nvim.lua("require('pseudoclaude').sessions.delete(...)", three[1])
    assert not session_dir(workspace, three[1]).exists()
    assert [s["id"] for s in nvim.lua("return require('pseudoclaude').sessions.list()")] == [three[0], three[2]]


def test_delete_is_refused_while_another_editor_holds_the_session(nvim, workspace, three):
    with hold_lock(session_dir(workspace, three[0]), pid=4242, host="elsewhere"):
        msg = lua_error(nvim, "return require('pseudoclaude').sessions.delete(...)", three[0])
        assert "is open in another editor (pid 4242 on elsewhere" in msg
        assert (session_dir(workspace, three[0]) / "conversation.jsonl").exists()


def test_delete_refuses_the_current_session(nvim, workspace, three):
    nvim.lua(STUB_CHAT)
    nvim.api.vars["current_id"] = three[0]
    msg = lua_error(nvim, "return require('pseudoclaude').sessions.delete(...)", three[0])
    assert msg == f"pseudoclaude.sessions.delete: session {three[0]} is the current session"
    assert session_dir(workspace, three[0]).exists()


def test_cleanup_follows_retention_days_and_spares_the_current_session(nvim, workspace):
    now = time.time()
    old, older, fresh = session_id(1), session_id(2), session_id(3)
    write_session(workspace, old, chat("old", ts=int(now - 5 * 86400)), mtime=now - 5 * 86400)
    write_session(workspace, older, chat("older", ts=int(now - 9 * 86400)), mtime=now - 9 * 86400)
    write_session(workspace, fresh, chat("fresh", ts=int(now - 3600)), mtime=now - 3600)
    nvim.lua(STUB_CHAT)
    nvim.api.vars["current_id"] = old
    nvim.lua("require('pseudoclaude').setup({ retention_days = 2 })")
    assert nvim.lua("return require('pseudoclaude').sessions.cleanup()") == [older]
    assert session_dir(workspace, old).exists() and session_dir(workspace, fresh).exists()
    assert not session_dir(workspace, older).exists()
    nvim.lua("vim.g.current_id = nil")
    assert nvim.lua("return require('pseudoclaude').sessions.cleanup()") == [old]
    nvim.lua("require('pseudoclaude').setup({ retention_days = 0 })")
    assert nvim.lua("return require('pseudoclaude').sessions.cleanup()") == []
    assert session_dir(workspace, fresh).exists()


def test_sessions_module_is_lazy(nvim):
    nvim.lua("require('pseudoclaude')")
    assert "pseudoclaude.sessions" not in nvim.loaded_modules()
    assert nvim.lua("return type(require('pseudoclaude').sessions.list)") == "function"
    assert "pseudoclaude.sessions" in nvim.loaded_modules()


def test_list_async_calls_back_with_the_same_list(nvim, workspace, three):
    with hold_lock(session_dir(workspace, three[2]), pid=4242, host="elsewhere"):
        nvim.lua(
            """
            _G.got = nil
            require('pseudoclaude').sessions.list_async({ limit = 3 }, function(err, list) _G.got = { err or vim.NIL, list } end)
            """
        )
        err, listed = wait_until(nvim, "return _G.got")
        assert err is None
        assert listed == nvim.lua("return require('pseudoclaude').sessions.list()")
    assert [s["id"] for s in listed] == three and "pid 4242 on elsewhere" in listed[2]["held_by"]
    assert "held_by" not in listed[0]  # nil, not vim.NIL


def test_list_async_reports_errors_to_the_callback(nvim, workspace):
    (workspace / ".PseudoClaude").mkdir()
    (workspace / ".PseudoClaude" / "sessions").write_text("not a directory")
    nvim.lua(
        "_G.got = nil require('pseudoclaude').sessions.list_async({}, function(err, list) _G.got = { err, list or vim.NIL } end)"
    )
    err, listed = wait_until(nvim, "return _G.got")
    assert err.startswith("pseudoclaude.sessions.list_async: cannot read sessions directory") and listed is None
    assert nvim.alive()


def wait_until(nvim, code, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = nvim.lua(code)
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {code}"
        time.sleep(0.02)


def test_fractional_retention_days_reach_the_agent_too(nvim, workspace):
    """`retention_days` may be fractional (the docs and `sessions.cleanup()` allow it): the chat's host takes it."""
    nvim.lua("require('pseudoclaude').setup({ retention_days = 0.5, provider = { name = 'demo' } })")
    nvim.lua("require('pseudoclaude').chat.send('hello')")
    deadline = time.monotonic() + 20
    while not nvim.lua("return require('pseudoclaude').current() ~= nil"):
        assert time.monotonic() < deadline, "the chat never started"
        time.sleep(0.02)


CLI = ROOT / "target" / "release" / "pseudoclaude"


def varied_sessions(ws, n: int) -> None:
    """`n` sessions whose rows use every field of a list entry: names, pins, forks, git branches (and a detached
    HEAD), token usage (priced and not), damage, an empty model, text beyond ASCII."""
    now = int(time.time())
    activity = []
    for i in range(n):
        sid = session_id(i)
        ts = now - (n - i) * 60
        lines = [entry("user", f"task {i} — ünïcode {i % 7}" if i % 5 else f"task {i}", ts=ts,
                       model="" if i % 11 == 0 else f"model-{i % 3}")]
        if i % 3 == 0:
            lines.insert(0, {"type": "meta", "ts": ts, "git": {"branch": f"b{i % 4}", "commit": f"{i:07x}"}})
        if i % 13 == 0:
            lines.append({"type": "meta", "ts": ts, "git": {"commit": "abcdef0"}})  # detached
        if i % 2 == 0:
            lines.append({"type": "usage", "ts": ts, "model": f"model-{i % 3}",
                          "usage": {"input_tokens": i, "output_tokens": 2 * i, "cache_read_tokens": 3 * i,
                                    "cache_write_tokens": i % 5}})
        lines.append(entry("assistant", f"answer {i}", ts=ts + 1))
        if i % 17 == 0:
            lines.append({"type": "title", "ts": ts + 2, "title": f"named {i}"})
        if i % 19 == 0:
            lines.append({"type": "pin", "ts": ts + 2, "pinned": True})
        if i % 23 == 0:
            lines = [{"type": "replace", "reason": "fork", "messages": [{"role": "user", "content": f"fork {i}",
                      "ts": ts}], "count": 1, "forked_from": {"id": session_id(i - 1 if i else 1), "index": 1},
                      "ts": ts, "model": "model-1"}] + lines[1:]
        tail = "{not json\n" if i % 29 == 0 else ""
        write_session(ws, sid, lines, mtime=ts + 2, tail=tail)
        (session_dir(ws, sid) / "lock").touch()
        activity.append(f"{sid} {ts + 2}\n")
    (ws / SESSIONS / "activity").write_text("".join(activity))


def test_list_of_10000_sessions_gives_the_rows_of_the_cli_and_of_the_json_crossing_field_by_field(
    nvim, workspace, tmp_path
):
    """`sessions.list()` builds its rows from the list the core packs (src/bridge/rows.rs, session_rows.lua): every
    row, every field, as the CLI's `sessions list --json` (another process, serde_json) and the JSON crossing the
    list used before (`sessions_list_json`, `vim.json.decode`) give them; nil where they say null."""
    n = 10_000
    varied_sessions(workspace, n)
    held = hold_lock(session_dir(workspace, session_id(42)))
    prices = {"model-0": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}, "model-1": {"input": 1, "output": 2}}
    (tmp_path / "prices.json").write_text(json.dumps(prices))
    try:
        nvim.lua("require('pseudoclaude').setup({ pricing = ... })", prices)
        rows = nvim.lua("return require('pseudoclaude').sessions.list()")
        again = nvim.lua("return require('pseudoclaude').sessions.list()")  # the kept list, when it was kept
        nvim.lua("_G.got = nil require('pseudoclaude').sessions.list({ on_done = function(e, l) _G.got = { e or vim.NIL, l } end })")
        err, stepped = wait_for(lambda: nvim.lua("return _G.got"), what="on_done")  # in parts of LIST_STEP rows
        oracle = nvim.lua(
            "local s, core = require('pseudoclaude.sessions'), require('pseudoclaude.core')"
            " return core.decode(core.call('sessions_list_json', s.workspace(), { check_locks = true, pricing = ... }))",
            prices,
        )
        out = subprocess.run(
            [str(CLI), "-C", str(workspace), "sessions", "list", "--json", "--pricing", str(tmp_path / "prices.json")],
            capture_output=True, text=True, check=True,
        ).stdout
    finally:
        held.release()
    cli = [{k: v for k, v in r.items() if v is not None} for r in json.loads(out)]
    assert len(rows) == len(cli) == len(oracle) == n
    assert err is None and again == rows and stepped == rows
    assert nvim.lua("return require('pseudoclaude.sessions').LIST_STEP") < n
    for k, (row, want, decoded) in enumerate(zip(rows, cli, oracle)):
        assert row == want, f"row {k}: {row} != the CLI's {want}"
        assert row == decoded, f"row {k}: {row} != the JSON crossing's {decoded}"
    # every kind of field was there to compare
    for field in ("held_by", "branch", "commit", "cost", "forked_from"):
        assert any(field in r for r in rows), field
    assert any(r["pinned"] for r in rows) and any(r["damaged"] for r in rows) and any(r["model"] == "" for r in rows)
    assert any(r["usage"]["cache_write_tokens"] for r in rows) and any("é" in r["title"] or "ü" in r["title"] for r in rows)


LIST_JSON = (
    "local s, core = require('pseudoclaude.sessions'), require('pseudoclaude.core')"
    " return core.decode(core.call('sessions_list_json', s.workspace(), { check_locks = true }))"
)


def test_the_kept_list_follows_written_added_and_locked_sessions(nvim, workspace, three):
    """The core keeps the last full list (src/bridge/full_list.rs) and hands it out again while the workspace's stamp
    holds: a message written through the API's writer, a lock taken and released, a session added are each in the
    next `list()`, as the JSON crossing (read anew each time) gives them; `on_done` gets the same rows."""
    sessions = workspace / SESSIONS
    settled = time.time() - 60
    os.utime(sessions, (settled, settled))  # not just changed: the list read now is kept
    first = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert first == nvim.lua(LIST_JSON) and [r["id"] for r in first] == three
    assert nvim.lua("return require('pseudoclaude').sessions.list()") == first
    # a name written through the writer (the activity file grows): read anew
    nvim.lua("_G.named = nil require('pseudoclaude').sessions.rename(..., 'renamed', function(e) _G.named = e or true end)",
             three[2])
    assert wait_for(lambda: nvim.lua("return _G.named"), what="the name written") is True
    got = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert got == nvim.lua(LIST_JSON) and got[0]["id"] == three[2] and got[0]["title"] == "renamed"
    # a lock taken, then released
    with hold_lock(session_dir(workspace, three[1]), pid=4242, host="elsewhere"):
        got = nvim.lua("return require('pseudoclaude').sessions.list()")
        assert got == nvim.lua(LIST_JSON) and "pid 4242 on elsewhere" in got[2]["held_by"]
    got = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert got == nvim.lua(LIST_JSON) and all("held_by" not in r for r in got)
    # a session added (the folder changes)
    write_session(workspace, session_id(7), title="added")
    got = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert got == nvim.lua(LIST_JSON) and got[0]["title"] == "added" and len(got) == 4
    nvim.lua("_G.got = nil require('pseudoclaude').sessions.list({ on_done = function(e, l) _G.got = { e or vim.NIL, l } end })")
    err, listed = wait_for(lambda: nvim.lua("return _G.got"), what="on_done")
    assert err is None and listed == got


def test_list_rows_are_plain_tables(nvim, three):
    """pairs(), vim.inspect, #, ipairs, table.sort and vim.deepcopy see the rows as they would any table."""
    got = nvim.lua(
        """
        local list = require('pseudoclaude').sessions.list()
        local keys = 0
        for _ in pairs(list[1]) do keys = keys + 1 end
        table.sort(list, function(a, b) return a.title < b.title end)
        local n = 0
        for _, r in ipairs(list) do n = n + 1 end
        return { len = #list, n = n, keys = keys, meta = getmetatable(list[1]) == nil and getmetatable(list) == nil,
                 first = list[1].title, inspect = vim.inspect(list[1]):find('title = "task 0"', 1, true) ~= nil,
                 copy = vim.deep_equal(vim.deepcopy(list), list) }
        """
    )
    assert got == {"len": 3, "n": 3, "keys": got["keys"], "meta": True, "first": "task 0", "inspect": True,
                   "copy": True}
    assert got["keys"] == 14  # id, title, model, the 8 counts and times, damaged, usage, pinned


def test_list_on_done_returns_at_once_with_the_same_rows(nvim, three):
    nvim.lua(
        """
        _G.got = nil
        _G.ret = require('pseudoclaude').sessions.list({ on_done = function(err, list) _G.got = { err or vim.NIL, list } end })
        _G.sync_before = _G.got == nil
        """
    )
    assert nvim.lua("return _G.sync_before and _G.ret == nil")
    err, listed = wait_for(lambda: nvim.lua("return _G.got"), what="on_done")
    assert err is None and listed == nvim.lua("return require('pseudoclaude').sessions.list()")
