"""Full-text search inside every message (issue 10, section 2): `:PseudoSearch`, the picker's `<C-g>` mode,
`sessions.search()` and `resume(id, { at = index })`. Through the real keys, the real core and logs on disk."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    TRACK,
    Neovim,
    distinct_highlights,
    question_asked,
    screen_highlights,
    transcript,
    wait_for,
    watch_questions,
)
from session_files import entry, session_dir, session_id, write_session

STATE = """
local picker = require("pseudoclaude.float")
local s = picker.get_state()
if not s then return vim.NIL end
local st = s.search
local function lines(name)
  return vim.api.nvim_buf_get_lines(s.bufs[name], 0, -1, false)
end
local out = { searching = st ~= nil, rows = lines("results"), prompt = lines("prompt")[1], preview = lines("preview") }
if st then
  out.query, out.running, out.hits, out.sel = st.query, st.running, st.hits, st.sel
  out.preview_key = st.preview_key or vim.NIL
  local pw = s.wins.preview
  out.preview_line = vim.api.nvim_buf_get_lines(s.bufs.preview, vim.api.nvim_win_get_cursor(pw)[1] - 1,
    vim.api.nvim_win_get_cursor(pw)[1], false)[1]
end
return out
"""


CURSOR_LINE = """
local b = vim.fn.bufnr('pseudoclaude://chat')
local w = vim.fn.win_findbuf(b)[1]
local row = vim.api.nvim_win_get_cursor(w)[1]
return { row = row, line = vim.api.nvim_buf_get_lines(b, row - 1, row, false)[1], current = vim.api.nvim_get_current_win() == w,
  count = vim.api.nvim_buf_line_count(b) }
"""


def state(n: Neovim) -> dict[str, Any] | None:
    return n.lua(STATE)


def search_done(n: Neovim, query: str) -> dict[str, Any]:
    return wait_for(
        lambda: (s := state(n)) and s["searching"] and s["query"] == query and not s["running"] and s,
        what=f"the search for {query!r}",
    )


def spilled(ws: Path, sid: str, output: str, ts: int) -> list[dict[str, Any]]:
    """Entries of a tool exchange whose output was spilled, its file written as the writer would."""
    data = output.encode()
    sha = hashlib.sha256(data).hexdigest()
    d = session_dir(ws, sid)
    (d / "tool-results").mkdir(parents=True, exist_ok=True)
    (d / "tool-results" / f"{sha}.txt").write_bytes(data)
    preview = output[:2048] + f"\n[... output truncated: {len(data)} bytes in total, the full output is in tool-results/{sha}.txt]"
    return [
        entry("assistant", ts=ts, tool_calls=[{"id": "c1", "name": "run_command", "arguments": {"command": "make"}}]),
        entry("user", ts=ts, tool_result={"tool_call_id": "c1", "content": preview, "is_error": False,
                                          "spill": {"path": f"tool-results/{sha}.txt", "bytes": len(data),
                                                    "sha256": sha}}),
    ]


@pytest.fixture
def library(workspace: Path) -> dict[str, Any]:
    """A long session (400 messages, "quetzal" in message 7 and 391), a session whose spilled tool output holds
    "axolotl", a damaged one, and forty more holding "quetzal" once or the noise word "ocelot"."""
    now = int(time.time())
    ids: dict[str, Any] = {}
    long_id = session_id(900)
    msgs = []
    for i in range(1, 401):
        role = "user" if i % 2 else "assistant"
        text = f"msg-{i} the " + ("quetzal nests high" if i in (7, 391) else "weather is fine")
        msgs.append(entry(role, text, ts=now - 4000 + i, model="m" if i == 1 else ""))
    write_session(workspace, long_id, msgs, mtime=now - 10)
    ids["long"] = long_id

    spill_id = session_id(901)
    output = "build line\n" * 5000 + "error: the axolotl overflowed\n"
    entries = [entry("user", "why does make fail", ts=now - 3000, model="m"), *spilled(workspace, spill_id, output, now - 2999),
               entry("assistant", "it overflowed", ts=now - 2998)]
    write_session(workspace, spill_id, entries, mtime=now - 20)
    ids["spill"] = spill_id

    damaged_id = session_id(902)
    write_session(workspace, damaged_id, [entry("user", "damaged quetzal question", ts=now - 2000, model="m")],
                  mtime=now - 30, tail="garbage quetzal line\n")
    ids["damaged"] = damaged_id

    others = []
    for k in range(40):
        sid = session_id(1000 + k)
        word = "quetzal" if k % 4 == 0 else "ocelot"
        write_session(workspace, sid, [entry("user", f"session {k} about the {word}", ts=now - 5000 - k, model="m"),
                                       entry("assistant", f"the {word} answer {k}", ts=now - 5000 - k)],
                      mtime=now - 100 - k)
        others.append(sid)
    ids["others"] = others
    return ids


@pytest.fixture
def nv(nvim: Neovim, library) -> Neovim:
    nvim.lua('require("pseudoclaude").setup({ provider = { name = "demo" } })')
    nvim.lua(TRACK)
    nvim.api.command("set columns=180 lines=50")
    distinct_highlights(nvim)
    return nvim


def test_pseudosearch_opens_the_picker_on_hit_rows_with_the_match_highlighted(nv: Neovim, library) -> None:
    nv.api.command("PseudoSearch quetzal")
    s = search_done(nv, "quetzal")
    assert s["prompt"] == "quetzal"
    hits = s["hits"]
    # newest sessions first, each in message order; the damaged log's garbage line is not a hit
    assert [(h["id"], h["index"]) for h in hits[:3]] == [(library["long"], 7), (library["long"], 391),
                                                         (library["damaged"], 1)]
    assert len(hits) == 3 + 10 * 2
    first = s["rows"][0]
    assert first.startswith("  msg-1 the weather is") and "you" in first and "msg-7 the quetzal nests high" in first
    win = nv.lua("return require('pseudoclaude.float').get_state().wins.results")
    marks = [(m[0], m[1], m[2]) for m in screen_highlights(nv, win) if m[3] == "PseudoClaudePickerMatch"]
    assert marks, "the matches are highlighted"
    for row, start, end in marks:
        assert s["rows"][row].encode()[start:end].decode().lower() == "quetzal"
    assert {m[0] for m in marks} == set(range(min(len(s["rows"]), len(hits))))
    # the preview shows that session scrolled to the hit
    s = wait_for(lambda: (x := state(nv)) and x["preview_key"] == f"{library['long']}:7" and x, what="the preview")
    assert "msg-7 the quetzal nests high" in s["preview_line"]
    assert "msg-1 the weather is fine" in s["preview"][0]


def test_ctrl_g_toggles_search_mode_in_an_open_picker(nv: Neovim, library) -> None:
    nv.api.input(":PseudoResume<CR>")
    wait_for(lambda: (x := state(nv)) and not x["searching"] and x, what="the picker")
    nv.api.input("ocelot")
    s = wait_for(lambda: (x := state(nv)) and x["prompt"] == "ocelot" and x, what="the query")
    assert not s["searching"]
    nv.api.input("<C-g>")
    s = search_done(nv, "ocelot")
    assert len(s["hits"]) == 30 * 2 and all("ocelot" in h["snippet"] for h in s["hits"])
    assert all("ocelot" in row for row in s["rows"])
    nv.api.input("<C-g>")
    s = wait_for(lambda: (x := state(nv)) and not x["searching"] and x, what="the list again")
    # the list, filtered by the same text (no title holds "ocelot" but those of its sessions)
    assert s["prompt"] == "ocelot"
    assert all("about the ocelot" in row for row in s["rows"] if row.strip()), s["rows"]


def test_typing_changes_the_query_and_stale_hits_are_never_drawn(nv: Neovim, library, workspace: Path) -> None:
    # Many sessions holding both words, so that each search is still running when the next key comes.
    now = int(time.time())
    for k in range(300):
        write_session(workspace, session_id(3000 + k),
                      [entry("user", f"filler {k} " + "quetzal ocelot " * 20000, ts=now - 9000 - k, model="m")],
                      mtime=now - 9000 - k)
    nv.lua(
        """
        local S = require("pseudoclaude.float.search")
        local draw, on_query = S.draw_rows, S.on_query
        _G.draws, _G.changes = {}, {}
        S.draw_rows = function(s)
          draw(s)
          local st = s.search
          local stale = 0
          for _, h in ipairs(st.hits) do
            if not h.snippet:lower():find(st.query:lower(), 1, true) then stale = stale + 1 end
          end
          table.insert(_G.draws, { query = st.query, hits = #st.hits, stale = stale })
        end
        S.on_query = function(s, query)
          local st = s.search
          if st and query ~= st.query then
            table.insert(_G.changes, { from = st.query or "", to = query, running = st.running, hits = #st.hits })
          end
          return on_query(s, query)
        end
        """
    )
    nv.api.command("PseudoSearch quetzal")
    wait_for(lambda: (x := state(nv)) and len(x["hits"]) > 0 and x, what="the first hits")
    for keys, prompt in [("<C-w>", ""), ("o", "o"), ("c", "oc"), ("elot", "ocelot")]:
        nv.api.input(keys)
        wait_for(lambda: state(nv)["prompt"] == prompt, what=f"the prompt {prompt!r}")
    s = search_done(nv, "ocelot")
    assert s["hits"] and all("ocelot" in h["snippet"].lower() for h in s["hits"])
    assert all("quetzal" not in row for row in s["rows"])
    draws, changes = nv.lua("return _G.draws"), nv.lua("return _G.changes")
    assert [c["to"] for c in changes][-1] == "ocelot" and any(c["from"] == "quetzal" for c in changes), changes
    # the first search was still running, with hits on screen, when the query changed: it was cancelled
    assert any(c["from"] == "quetzal" and c["running"] and c["hits"] > 0 for c in changes), changes
    assert all(d["stale"] == 0 for d in draws), [d for d in draws if d["stale"]]


def test_enter_on_a_hit_resumes_with_the_cursor_on_that_message(nv: Neovim, library) -> None:
    nv.api.command("PseudoSearch quetzal nests")
    s = search_done(nv, "quetzal nests")
    assert [(h["id"], h["index"]) for h in s["hits"]] == [(library["long"], 7), (library["long"], 391)]
    nv.api.input("<CR>")
    report = wait_for(lambda: nv.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] and report["id"] == library["long"] and report["at"] == 7
    # message 7 of 400 is in the last slice drawn (from the end backwards): the cursor follows it there
    assert not report["drawn"]
    wait_for(lambda: nv.lua("return vim.g.pc_drawn"), what="the whole history drawn")
    c = nv.lua(CURSOR_LINE)
    assert c["current"], "the transcript window has the cursor"
    assert c["line"] == "msg-7 the quetzal nests high", c
    assert not state(nv), "the picker closed"


def test_a_hit_inside_a_spilled_tool_result_is_found(nv: Neovim, library, workspace: Path) -> None:
    log = (session_dir(workspace, library["spill"]) / "conversation.jsonl").read_text()
    assert "axolotl" not in log, "only the spill file holds it"
    nv.api.command("PseudoSearch axolotl")
    s = search_done(nv, "axolotl")
    assert [(h["id"], h["index"], h["kind"]) for h in s["hits"]] == [(library["spill"], 3, "tool_result")]
    assert "output" in s["rows"][0] and "error: the axolotl overflowed" in s["rows"][0]
    s = wait_for(lambda: (x := state(nv)) and x["preview_key"] == f"{library['spill']}:3" and x, what="the preview")
    nv.api.input("<CR>")
    wait_for(lambda: nv.lua("return vim.g.pc_drawn"), what="the resume")
    c = nv.lua(CURSOR_LINE)
    assert c["line"].startswith("  ✓ run_command: build line"), c


def test_resume_at_an_index_through_the_api(nv: Neovim, library) -> None:
    nv.lua("require('pseudoclaude').resume(..., { at = 300 })", library["long"])
    wait_for(lambda: nv.lua("return vim.g.pc_drawn"), what="the resume")
    assert nv.lua(CURSOR_LINE)["line"] == "msg-300 the weather is fine"
    err = nv.lua("local ok, e = pcall(require('pseudoclaude').resume, ..., { at = 0 }) return e", library["spill"])
    assert "opts.at: expected a message index (an integer >= 1), got 0" in err
    # past the end: said, and the end shown
    nv.lua("vim.g.pc_drawn = vim.NIL require('pseudoclaude').resume(..., { at = 99 })", library["spill"])
    wait_for(lambda: nv.lua("return vim.g.pc_drawn"), what="the resume")
    notes = nv.lua("return _G.notes")
    assert any("has no message 99 (it has 4)" in n["msg"] for n in notes), notes
    c = nv.lua(CURSOR_LINE)
    assert c["row"] == c["count"]


def test_the_search_api_streams_cancels_and_answers_bad_input(nv: Neovim, library, workspace: Path) -> None:
    out = nv.lua(
        """
        _G.batches, _G.done = {}, nil
        local h = require("pseudoclaude").sessions.search("quetzal", {
          on_hits = function(hits) table.insert(_G.batches, hits) end,
          on_done = function(err, summary) _G.done = { err = err or vim.NIL, summary = summary } end,
        })
        return { has_cancel = type(h.cancel) == "function" }
        """
    )
    assert out["has_cancel"]
    done = wait_for(lambda: nv.lua("return _G.done"), what="on_done")
    assert done["err"] is None and done["summary"]["hits"] == 23 and done["summary"]["sessions"] == 43
    # Only the sessions whose bytes may hold the text were replayed.
    assert done["summary"]["matched"] <= done["summary"]["replayed"] < 43, done["summary"]
    hits = [h for b in nv.lua("return _G.batches") for h in b]
    assert (hits[0]["id"], hits[0]["index"], hits[0]["role"]) == (library["long"], 7, "user")
    assert set(hits[0]) >= {"id", "index", "role", "snippet", "ranges", "title", "kind"}
    # The index is the message's in sessions.load().
    loaded = nv.lua("return require('pseudoclaude').sessions.load(...).messages[391].content", library["long"])
    assert loaded == "msg-391 the quetzal nests high"
    # Cancelled: neither callback runs again.
    nv.lua(
        """
        _G.after = 0
        _G.raw_end = false
        -- the native callback under the handle: its last call (`false, "cancelled"`) says the job is over
        local lib = require("pseudoclaude.core").load()
        local real = lib.sessions_search_async
        lib.sessions_search_async = function(ws, query, args, cb)
          return real(ws, query, args, function(ok, value, more)
            if not more then _G.raw_end = { ok = ok, value = value } end
            return cb(ok, value, more)
          end)
        end
        local h = require("pseudoclaude").sessions.search("ocelot", {
          on_hits = function() _G.after = _G.after + 1 end, on_done = function() _G.after = _G.after + 1 end })
        lib.sessions_search_async = real
        h:cancel()
        """
    )
    end = wait_for(lambda: nv.lua("return _G.raw_end"), what="the cancelled job's end")
    assert end == {"ok": False, "value": "cancelled"}
    assert nv.lua("return _G.after") == 0
    # In a coroutine the plain form waits without blocking; outside one it blocks (for scripts).
    # Checked in the same main-loop step that started it: the search's answer can only come in a later one, so a
    # coroutine that has not yielded would already have set co_hits here.
    waiting = nv.lua(
        """
        _G.co_hits = nil
        coroutine.wrap(function()
          local hits, summary = require("pseudoclaude").sessions.search("axolotl")
          _G.co_hits = { n = #hits, kind = hits[1].kind, sessions = summary.sessions }
        end)()
        return _G.co_hits == nil
        """
    )
    assert waiting, "the coroutine waits for the background search"
    co = wait_for(lambda: nv.lua("return _G.co_hits"), what="the coroutine")
    assert co == {"n": 1, "kind": "tool_result", "sessions": 43}
    sync = nv.lua("local hits = require('pseudoclaude').sessions.search('OCELOT') return #hits")
    assert sync == 0, "smart case: upper case is exact"
    for bad, msg in [("''", "the query is empty"), ("42", "query: expected string, got number"),
                     ("'x', { limit = -1 }", "opts.limit: expected an integer >= 0")]:
        err = nv.lua(f"local ok, e = pcall(require('pseudoclaude').sessions.search, {bad}) return e")
        assert err.startswith("pseudoclaude.sessions.search: ") and msg in err, err
    assert nv.alive()


def test_a_workspace_without_sessions_searches_nothing_and_says_so(nvim: Neovim) -> None:
    nvim.lua(TRACK)
    n = nvim.lua("local hits, s = require('pseudoclaude').sessions.search('x') return { #hits, s.sessions }")
    assert n == [0, 0]
    nvim.api.command("PseudoSearch x")
    notes = wait_for(lambda: nvim.lua("return _G.notes"), what="the notice")
    assert any("no session to search in" in x["msg"] for x in notes), notes


def test_ctrl_x_on_a_hit_deletes_its_session_and_its_hits_go(nv: Neovim, library, workspace: Path) -> None:
    nv.api.command("PseudoSearch quetzal")
    s = search_done(nv, "quetzal")
    assert s["hits"][0]["id"] == library["long"] and len(s["hits"]) == 23
    watch_questions(nv)
    nv.api.input("<C-x>")
    question_asked(nv)
    nv.api.input("y")
    s = wait_for(lambda: (x := state(nv)) and len(x["hits"]) == 21 and x, what="the hits of the deleted session gone")
    assert not session_dir(workspace, library["long"]).exists()
    assert s["hits"][0]["id"] == library["damaged"] and s["searching"]
