"""Resume you can trust: the highlighted session is the one resumed, nothing that reads a session runs on the main
loop, a restored chat reads as it was lived, ages and the stale reminder are honest, and `:help` works under
`make run`. Through the real keys, the real chat and files on disk."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, TRACK, Neovim, question_asked, transcript, wait_for, watch_questions
from fake_llm import FakeOpenAI
from session_files import chat, entry, session_dir, session_id, write_session

STATE = """
local picker = require("pseudoclaude.float")
local s = picker.get_state()
if not s then return vim.NIL end
local rows = vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false)
return { full = s.full, query = s.query, selected = (picker.selected() or {}).id, row = rows[s.sel - s.top + 1],
  preview_id = s.preview_id, preview = vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false) }
"""


def state(n: Neovim) -> dict[str, Any] | None:
    return n.lua(STATE)



def closed_folds(n: Neovim) -> list[list[int]]:
    """Closed folds of the transcript window: [first, last] line pairs (1-based)."""
    return n.lua(
        """
        local b = vim.fn.bufnr('pseudoclaude://chat')
        local w = vim.fn.win_findbuf(b)[1]
        if not w then return {} end
        return vim.api.nvim_win_call(w, function()
          local out, l, last = {}, 1, vim.fn.line('$')
          while l <= last do
            local e = vim.fn.foldclosedend(l)
            if e > 0 then table.insert(out, { l, e }) l = e + 1 else l = l + 1 end
          end
          return out
        end)
        """
    )


def big_session(ws: Path, sid: str, title: str, mib: int, ts: int) -> Path:
    """A session of about `mib` MiB (a few huge assistant messages), not in the activity hint."""
    d = session_dir(ws, sid)
    (d / "tool-results").mkdir(parents=True)
    blob = "y " * (512 * 1024)  # 1 MiB a message
    lines = [entry("user", title, ts=ts, model="big-model")]
    for k in range(mib):
        lines.append(entry("assistant", f"part {k} {blob}", ts=ts + 1 + k))
        lines.append(entry("user", f"more {k}", ts=ts + 1 + k))
    p = d / "conversation.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in lines))
    return p


@pytest.fixture
def crowded(workspace: Path) -> dict[str, Any]:
    """3,000 sessions in the activity hint, plus a newer copied one and a 40 MiB one that the hint does not name,
    so the first rows and the full list (which takes a moment) disagree on row numbers."""
    now = time.time()
    root = workspace / ".PseudoClaude" / "sessions"
    root.mkdir(parents=True)
    hint = []
    ids = []
    for i in range(3000):
        sid = session_id(i)
        t = now - 7200 - (3000 - i) * 60
        write_session(workspace, sid, chat(f"task {i}", ts=int(t) - 10), mtime=t)
        hint.append(f"{sid} {int(t)}")
        ids.append(sid)
    (root / "activity").write_text("\n".join(hint) + "\n")
    big = session_id(5000)
    big_session(workspace, big, "big log nobody asked for", 40, int(now) - 1800)
    copied = session_id(5001)
    write_session(workspace, copied, chat("copied from a laptop", ts=int(now) - 70), mtime=now - 60)
    return {"ids": list(reversed(ids)), "big": big, "copied": copied}


def real_chat(n: Neovim) -> None:
    n.lua('require("pseudoclaude").setup({ provider = { name = "demo" } })')
    n.lua(TRACK)
    n.api.command("set columns=160 lines=48")


def test_the_highlighted_session_is_the_one_resumed_when_the_full_list_arrives(nvim: Neovim, crowded) -> None:
    real_chat(nvim)
    nvim.api.input(":PseudoResume<CR>")
    wait_for(lambda: (x := state(nvim)) and x.get("selected"), what="the picker's first rows")
    nvim.api.input("<C-n>")
    s = wait_for(lambda: (x := state(nvim)) and x["selected"] == crowded["ids"][1] and x, what="the second row")
    assert not s["full"], "the full list must still be on its way for this test to mean anything"
    picked, title = s["selected"], s["row"].split("  ")[1]
    s = wait_for(lambda: (x := state(nvim)) and x["full"] and x, what="the full list")
    # the list changed under the highlight (two newer sessions came in above), the highlight did not move
    assert s["selected"] == picked and s["row"].split("  ")[1] == title == "task 2998"
    nvim.api.input("<CR>")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] and report["id"] == picked
    assert nvim.lua("return require('pseudoclaude').current().id") == picked
    assert "task 2998" in transcript(nvim)  # the title of the second newest in the hint


def test_with_a_query_enter_resumes_the_row_shown(nvim: Neovim, crowded) -> None:
    real_chat(nvim)
    nvim.api.input(":PseudoResume<CR>")
    wait_for(lambda: (x := state(nvim)) and x.get("selected"), what="the picker's first rows")
    nvim.api.input("task 299")
    s = wait_for(lambda: (x := state(nvim)) and x["query"] == "task 299" and x, what="the query")
    nvim.api.input("<C-n>")
    s = wait_for(lambda: (x := state(nvim)) and x["selected"] != s["selected"] and x, what="the next match")
    picked = s["selected"]
    assert "task 299" in s["row"]
    s = wait_for(lambda: (x := state(nvim)) and x["full"] and x, what="the full list")
    assert s["selected"] == picked and "task 299" in s["row"]
    nvim.api.input("<CR>")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["id"] == picked != crowded["big"]


def test_a_deleted_row_hands_the_highlight_to_the_next_and_a_narrowing_query_keeps_it(nvim: Neovim, crowded) -> None:
    real_chat(nvim)
    nvim.api.input(":PseudoResume<CR>")
    s = wait_for(lambda: (x := state(nvim)) and x["full"] and x, what="the full list")
    assert s["selected"] == crowded["ids"][0]  # two newer sessions came in above it: still highlighted
    nvim.api.input("<C-n>")
    wait_for(lambda: (x := state(nvim)) and x["selected"] == crowded["ids"][1], what="the next row")
    nvim.api.input("task 2998")  # still matches the highlighted session: it stays highlighted
    s = wait_for(lambda: (x := state(nvim)) and x["query"] == "task 2998" and x, what="the query")
    assert s["selected"] == crowded["ids"][1]
    nvim.api.input("<C-w><C-w>")  # widening: still there
    s = wait_for(lambda: (x := state(nvim)) and x["query"] == "" and x, what="the empty query")
    assert s["selected"] == crowded["ids"][1]
    watch_questions(nvim)
    nvim.api.input("<C-x>")
    question_asked(nvim)
    nvim.api.input("y")
    s = wait_for(lambda: (x := state(nvim)) and x["selected"] != crowded["ids"][1] and x, what="the deletion")
    assert s["selected"] == crowded["ids"][2]  # the row that took its place
    assert not session_dir(Path(nvim.workspace), crowded["ids"][1]).exists()


def test_looking_reads_nothing_on_the_main_loop(nvim: Neovim, crowded) -> None:
    """The preview of a 40 MiB session (the first row of the full list) and a resume of it come from the core's
    threads: the picker opens on it with the preview saying "loading…" (drawn in the step after the rows), the
    resume returns with the chat still the old one; the history arrives later."""
    real_chat(nvim)
    with open(nvim.workspace / ".PseudoClaude" / "sessions" / "activity", "a") as f:
        f.write(f"{crowded['big']} {int(time.time())}\n")  # the big one is the first row at once
    nvim.lua('require("pseudoclaude.float").open()')
    out = wait_for(
        lambda: (x := nvim.lua('local s = require("pseudoclaude.float").get_state() '
                               'return vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false)')) and x[-1] and x,
        what="the preview's first text",
    )
    assert out[-1] == "loading…", out
    s = wait_for(lambda: (x := state(nvim)) and x["full"] and x["preview_id"] == x["selected"] and x, what="preview")
    assert s["selected"] == crowded["big"] and "big log nobody asked for" in s["preview"]
    nvim.api.input("<Esc>")
    same_step = nvim.lua(
        """
        require("pseudoclaude").resume(...)
        return { current = require("pseudoclaude").current() or false, resumed = vim.g.pc_resumed or false }
        """,
        crowded["big"],
    )
    assert same_step["current"] is False and same_step["resumed"] is None  # returned at once, nothing in place yet
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] and report["id"] == crowded["big"] and report["messages"] == 81
    # in place: the end is drawn at once, the older slices follow, one per main-loop step
    assert report["drawn"] is False
    assert transcript(nvim)[-1] == "more 39"
    wait_for(lambda: nvim.lua("return vim.g.pc_drawn"), what="all of it drawn")
    lines = transcript(nvim)
    assert lines[0] == "## You" and lines[1] == "big log nobody asked for"
    assert any("more bytes not shown" in l for l in lines)  # 1 MiB texts are cut for the screen, not for the model
    assert len(nvim.lua("return require('pseudoclaude').messages()")[1]["content"]) > 1024 * 1024



def test_a_restored_chat_reads_as_it_was_lived(start_nvim, workspace: Path, fake: FakeOpenAI) -> None:
    (workspace / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    fake.push_tools("Let me look.", [("call_1", "read_file", {"path": "a.txt"})])
    fake.push_text("It has four lines.")
    provider = {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"}
    live = start_nvim()
    live.lua("require('pseudoclaude').setup({ provider = ... })", provider)
    live.lua(TRACK)
    live.api.command("PseudoChat")
    live.api.input("<Esc>iwhat is in a.txt?<C-s>")
    wait_for(lambda: any("four lines" in l for l in transcript(live)), what="the answer")
    wait_for(lambda: live.lua("return require('pseudoclaude.chat').winbar()").find("idle") >= 0, what="idle")
    sid = live.lua("return require('pseudoclaude').current().id")
    lived, lived_folds = transcript(live), closed_folds(live)
    assert lived_folds, "the tool output is folded in the live chat"
    result = next(l for l in lived if "✓ read_file" in l)
    first, last = lived_folds[0]
    assert "(%d lines)" % (last - first + 1) in result  # the count on the line is the fold's size

    # a second editor with a chat of its own (and its folds) resumes the session
    fake.push_tools("", [("call_9", "read_file", {"path": "a.txt"})])
    fake.push_text("Read it again.")
    other = start_nvim()
    other.lua("require('pseudoclaude').setup({ provider = ... })", provider)
    other.lua(TRACK)
    live.close()
    other.api.command("PseudoChat")
    other.api.input("<Esc>iagain<C-s>")
    wait_for(lambda: any("Read it again" in l for l in transcript(other)), what="the other chat")
    wait_for(lambda: other.lua("return require('pseudoclaude.chat').winbar()").find("idle") >= 0, what="idle")
    other.api.command(f"PseudoResume {sid}")
    assert wait_for(lambda: other.lua("return vim.g.pc_resumed"), what="the resume")["ok"] is True
    restored = transcript(other)
    assert restored == lived
    assert closed_folds(other) == lived_folds  # nothing of the previous chat's folds, the same folds as live
    # <Tab> opens a restored result as it does live (no E490)
    win = other.lua("return vim.fn.win_findbuf(vim.fn.bufnr('pseudoclaude://chat'))[1]")
    other.api.command(f"call win_gotoid({win})")
    other.api.current.window.cursor = (first - 1, 0)  # on the result line, as a user would
    other.api.input("<Esc><Tab>")
    wait_for(lambda: closed_folds(other) == [], what="the fold to open: " + repr((first, closed_folds(other), other.api.current.window.cursor, other.api.call("maparg", "<Tab>", "n"), other.api.vvars["errmsg"])))
    assert other.api.vvars["errmsg"] == ""


def test_ages_are_the_last_message_and_a_resume_left_alone_changes_nothing(nvim: Neovim, workspace: Path) -> None:
    now = time.time()
    old = int(now) - 7 * 3600 - 120
    sid = session_id(1)
    # copied: the log's mtime is now, its messages are 7 hours old
    p = write_session(workspace, sid, chat("seven hours ago", ts=old), mtime=now) / "conversation.jsonl"
    other = session_id(2)
    write_session(workspace, other, chat("newer by mtime only", ts=int(now) - 3600), mtime=now - 30)
    real_chat(nvim)
    nvim.api.input(":PseudoResume<CR>")
    s = wait_for(lambda: (x := state(nvim)) and x["full"] and x, what="the picker")
    rows = nvim.lua("local s = require('pseudoclaude.float').get_state() "
                    "return vim.api.nvim_buf_get_lines(s.bufs.results, 0, -1, false)")
    assert "seven hours ago" in rows[0] and "7h ago" in rows[0], rows
    nvim.api.input("<Esc>")
    before, order = p.read_bytes(), [i["id"] for i in nvim.lua("return require('pseudoclaude').sessions.list()")]
    nvim.api.command(f"PseudoResume {sid}")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["stale_hours"] == 7
    assert "## Reminder to the model" in transcript(nvim)
    nvim.api.command("PseudoNew")  # and leave without a word
    assert p.read_bytes() == before
    assert [i["id"] for i in nvim.lua("return require('pseudoclaude').sessions.list()")] == order


def test_the_reminder_speaks_in_minutes_under_an_hour(nvim: Neovim, workspace: Path) -> None:
    sid = session_id(3)
    write_session(workspace, sid, chat("forty minutes ago", ts=int(time.time()) - 40 * 60 - 5))
    nvim.lua('require("pseudoclaude").setup({ provider = { name = "demo" }, stale_after_hours = 0.5 })')
    nvim.lua(TRACK)
    nvim.api.command(f"PseudoResume {sid}")
    wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    text = "\n".join(transcript(nvim))
    assert "resumed 40 minutes after" in text and "0 hours" not in text


def test_completion_reads_no_log(nvim: Neovim, workspace: Path) -> None:
    sid = session_id(4)
    write_session(workspace, sid, chat("x", ts=int(time.time())))
    (session_dir(workspace, sid) / "conversation.jsonl").chmod(0)  # reading it would fail; listing ids does not
    try:
        assert nvim.api.call("getcompletion", "PseudoResume 2", "cmdline") == [sid]
    finally:
        (session_dir(workspace, sid) / "conversation.jsonl").chmod(0o600)


def test_help_works_under_make_run(tmp_path: Path, workspace: Path) -> None:
    """`make run` opens Neovim with scripts/dev-init.lua: `:help pseudoclaude` must work although doc/tags is
    generated and git-ignored (a fresh clone has none)."""
    root = tmp_path / "clone"
    for part in ("lua", "plugin", "doc", "scripts"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("tags"))
    assert not (root / "doc" / "tags").exists()
    n = Neovim(workspace, plugin_root=root, extra_args=["-u", str(root / "scripts" / "dev-init.lua")])
    try:
        n.api.command("help pseudoclaude")
        assert n.api.current.buffer.name == str(root / "doc" / "pseudoclaude.txt")
    finally:
        n.close()


def test_a_very_long_line_is_drawn_cut_with_a_note_and_the_model_reads_all_of_it(nvim: Neovim, workspace: Path) -> None:
    """Neovim measures a wrapped line character by character whenever the view moves: a message's line over 4 KiB is
    drawn cut (the rest named in a note), in the live view, a restored one and the preview alike."""
    sid = session_id(77)
    long_line = "x" * 4095 + "é" + "x" * 6000  # a character of two bytes across the 4 KiB mark: never split
    write_session(workspace, sid, [entry("user", "show me the minified file", ts=1_780_000_000, model="m"),
                                   entry("assistant", long_line + "\nshort tail", ts=1_780_000_001)])
    real_chat(nvim)
    nvim.api.command(f"PseudoResume {sid}")
    wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    lines = transcript(nvim)
    i = next(k for k, l in enumerate(lines) if l.startswith("xxxx"))
    assert len(lines[i].encode()) == 4095 and lines[i] == long_line.encode()[:4095].decode(), len(lines[i].encode())
    assert lines[i + 1] == f"… {len(long_line.encode()) - 4095} more bytes on this line not shown"
    assert lines[i + 2] == "short tail"
    assert nvim.lua("return require('pseudoclaude').messages()")[1]["content"] == long_line + "\nshort tail"


def test_messages_on_done_gives_the_history_off_the_main_loop_in_steps(nvim: Neovim, workspace: Path) -> None:
    """`messages({ on_done })` returns at once; the history, written out on a worker thread in chunks of about
    64 KiB and decoded one per main-loop step, is `messages()`'s, message for message."""
    sid = session_id(78)
    big = "y" * 300_000  # one message larger than a chunk: a chunk of its own
    entries = [entry("user", "start", ts=1_780_000_000, model="m")]
    for k in range(3000):
        entries.append(entry("assistant" if k % 2 == 0 else "user", f"message {k} " + ("é" * (k % 40)),
                             ts=1_780_000_001 + k))
    entries.insert(1500, entry("assistant", big, ts=1_780_000_000))
    write_session(workspace, sid, entries)
    real_chat(nvim)
    nvim.api.command(f"PseudoResume {sid}")
    wait_for(lambda: nvim.lua("return vim.g.pc_resumed"), what="the resume")
    got = nvim.lua(
        """
        _G.got, _G.steps = nil, 0
        local ret = require('pseudoclaude').messages({ on_done = function(err, m) _G.got = { err or vim.NIL, m } end })
        local function count() if not _G.got then _G.steps = _G.steps + 1 vim.schedule(count) end end
        vim.schedule(count)
        return { ret = ret == nil, at_once = _G.got == nil }
        """
    )
    assert got == {"ret": True, "at_once": True}
    err, msgs = wait_for(lambda: nvim.lua("return _G.got"), what="on_done")
    assert err is None and msgs == nvim.lua("return require('pseudoclaude').messages()")
    assert len(msgs) >= 3002 and msgs[1500]["content"] == big  # (and the stale session's reminder after them)
    assert nvim.lua("return _G.steps") >= 2  # decoded over several steps
    # bad options are an error that names them
    msg = nvim.lua("return select(2, pcall(require('pseudoclaude').messages, { on_done = 1 }))")
    assert "pseudoclaude.messages: opts" in msg
