"""require("pseudoclaude").sessions: list, info, load, cleanup, delete, over sessions written to disk as JSONL."""

import time

import pytest

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
