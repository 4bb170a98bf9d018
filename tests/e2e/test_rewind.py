"""Rewind end to end, against the fake OpenAI server: a command that creates, changes and deletes files (nested
folders included) and a write, then `:PseudoRewind` through its two questions puts the tree back byte for byte and the
message in the input window, the log only appended to; the user's edits between turns survive and a file both changed
is a conflict; conversation only, code only and the undo through the Lua API; a `kill -9` in the middle of a rewind
finished at the next start; the reminder naming the files changed since; a fork that takes the files too."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from conftest import Neovim, main_loop_watch, transcript, type_message, wait_for
from fake_llm import FakeOpenAI


def setup(n: Neovim, fake: FakeOpenAI) -> None:
    n.lua(
        """
        require("pseudoclaude").setup({
          provider = { name = "openai", base_url = ..., model = "fake-model", api_key_env = "PC_TEST_NO_KEY" },
          approve = { write_file = true, edit_file = true, run_command = true },
        })
        vim.g.pc_turns = 0
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function()
          vim.g.pc_turns = vim.g.pc_turns + 1
        end })
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeRewound", callback = function(ev)
          vim.g.pc_rewound = ev.data
        end })
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeResumed", callback = function(ev)
          vim.g.pc_resumed = ev.data
        end })
        """,
        fake.base_url,
    )


def wait_turns(n: Neovim, count: int) -> None:
    try:
        wait_for(lambda: n.lua("return vim.g.pc_turns") >= count, what=f"{count} turn(s)")
    except AssertionError as e:
        raise AssertionError(f"{e}; transcript:\n" + "\n".join(transcript(n))) from None


def rewound(n: Neovim) -> dict[str, Any]:
    return wait_for(lambda: n.lua("return vim.g.pc_rewound"), what="User PseudoClaudeRewound")


def rewind(n: Neovim, index: int, **opts: Any) -> dict[str, Any]:
    n.lua("vim.g.pc_rewound = nil require('pseudoclaude').rewind(...)", index, opts)
    return rewound(n)


def tree(ws: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for p in sorted(ws.rglob("*")):
        rel = p.relative_to(ws).as_posix()
        if rel.split("/")[0] == ".PseudoClaude":
            continue
        out[rel] = None if p.is_dir() else p.read_bytes()
    return out


def seed(ws: Path) -> None:
    (ws / "src" / "deep").mkdir(parents=True)
    (ws / "src" / "a.rs").write_text("fn a() {}\n")
    (ws / "src" / "deep" / "b.rs").write_text("one\ntwo\n")
    (ws / "notes.txt").write_text("keep me\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ws / "run.sh").chmod(0o755)


COMMAND = (
    "mkdir -p new/deeper && echo hi > new/deeper/x.txt && rm -r src/deep && printf 'fn a() { 1 }\\n' > src/a.rs "
    "&& chmod -x run.sh"
)


def log_of(n: Neovim) -> Path:
    return Path(n.lua("return require('pseudoclaude').current().jsonl"))


def test_pseudorewind_puts_back_files_a_command_and_a_write_changed_and_the_message_to_edit(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    seed(workspace)
    fake.push_text("Hello.")
    fake.push_tools("Working.", [("call_1", "run_command", {"command": COMMAND}), ("call_2", "write_file", {"path": "notes.txt", "content": "rewritten\n"})])
    fake.push_text("Done.")
    setup(nvim, fake)
    type_message(nvim, "hello")
    wait_turns(nvim, 1)
    before = tree(workspace)
    type_message(nvim, "change the files")
    wait_turns(nvim, 2)
    assert tree(workspace) != before
    log = log_of(nvim)
    log_before = log.read_bytes()

    # The list: newest first, with the files the turn changed.
    nvim.lua(
        "vim.g.pc_lists = {} vim.ui.select = function(items, opts, cb) "
        "local shown = {} for _, it in ipairs(items) do table.insert(shown, opts.format_item and opts.format_item(it) or it) end "
        "local lists = vim.g.pc_lists table.insert(lists, { prompt = opts.prompt, items = shown }) vim.g.pc_lists = lists "
        "vim.schedule(function() cb(items[1], 1) end) end"
    )
    nvim.lua("vim.g.pc_rewound = nil")
    nvim.api.command("PseudoRewind")
    report = rewound(nvim)
    lists = nvim.lua("return vim.g.pc_lists")
    assert lists[0]["prompt"] == "Rewind to before"
    first = lists[0]["items"][0]
    assert first.startswith("3. change the files"), lists[0]
    for shown in ("new/deeper/x.txt +1 −0", "src/a.rs +1 −1", "src/deep/b.rs +0 −2", "notes.txt +1 −1", "run.sh +0 −0"):
        assert shown in first, first
    assert lists[0]["items"][1].startswith("1. hello") and "(no files changed)" in lists[0]["items"][1]
    assert lists[1]["items"] == ["Code and conversation", "Conversation only", "Code only"]

    assert report["ok"] is True, report
    assert sorted(report["removed"]) == ["new/deeper/x.txt"]
    assert sorted(report["restored"]) == ["notes.txt", "run.sh", "src/a.rs", "src/deep/b.rs"]
    assert tree(workspace) == before
    assert os.stat(workspace / "run.sh").st_mode & 0o111, "the executable bit is back"
    assert log.read_bytes()[: len(log_before)] == log_before, "the log is only appended to"
    assert nvim.lua("return #require('pseudoclaude').messages()") == 2
    input_text = nvim.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('pseudoclaude://input'), 0, -1, false)")
    assert input_text == ["change the files"]
    wait_for(lambda: not any("change the files" in l for l in transcript(nvim)), what="the history redrawn without the message")
    kinds = [json.loads(l).get("type") for l in log.read_text().splitlines()]
    assert "files" in kinds and kinds.count("rewind") == 2 and "replace" in kinds

    # The undo is offered first until the next message, and puts everything back as the agent left it.
    nvim.lua("vim.g.pc_lists = {} vim.g.pc_rewound = nil")
    nvim.api.command("PseudoRewind")
    undo = rewound(nvim)
    assert nvim.lua("return vim.g.pc_lists")[0]["items"][0].startswith("↶ before the rewind at ")
    assert undo["ok"] is True, undo
    assert (workspace / "new" / "deeper" / "x.txt").read_text() == "hi\n"
    assert (workspace / "notes.txt").read_text() == "rewritten\n"
    assert nvim.lua("return #require('pseudoclaude').messages()") == 7
    assert fake.errors == []


def test_hand_edits_survive_and_a_file_both_changed_is_a_conflict_then_conversation_only_and_code_only(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    seed(workspace)
    fake.push_tools("Editing.", [("call_1", "write_file", {"path": "src/a.rs", "content": "agent\n"}), ("call_2", "write_file", {"path": "notes.txt", "content": "agent notes\n"})])
    fake.push_text("Done.")
    fake.push_text("Thanks noted.")
    setup(nvim, fake)
    type_message(nvim, "edit two files")
    wait_turns(nvim, 1)
    (workspace / "src" / "deep" / "b.rs").write_text("mine\n")
    (workspace / "notes.txt").write_text("my notes\n")
    type_message(nvim, "thanks")
    wait_turns(nvim, 2)

    report = rewind(nvim, 1, code=True, conversation=False)
    assert report["ok"] is True, report
    assert report["restored"] == ["src/a.rs"]
    assert [c["path"] for c in report["conflicts"]] == ["notes.txt"]
    assert report["conflicts"][0]["why"] == "changed by you after the agent"
    assert (workspace / "src" / "a.rs").read_text() == "fn a() {}\n"
    assert (workspace / "notes.txt").read_text() == "my notes\n"
    assert (workspace / "src" / "deep" / "b.rs").read_text() == "mine\n"
    assert nvim.lua("return #require('pseudoclaude').messages()") == 7, "code only keeps the conversation"

    report = rewind(nvim, 6, code=False, conversation=True)
    assert report["ok"] is True and report["restored"] == [] and report["text"] == "thanks"
    assert nvim.lua("return #require('pseudoclaude').messages()") == 5

    # A file open with unsaved changes is never written; an open unmodified one shows the rewound text.
    fake.push_tools("Again.", [("call_3", "write_file", {"path": "src/deep/b.rs", "content": "agent b\n"})])
    fake.push_text("Ok.")
    type_message(nvim, "once more")
    wait_turns(nvim, 3)
    b = str(workspace / "src" / "deep" / "b.rs")
    nvim.api.command(f"tabnew {b}")
    lines = "return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)"
    assert nvim.lua(lines, b) == ["agent b"]
    nvim.api.command("normal! Ainput ")
    report = rewind(nvim, 6, code=True, conversation=False)
    assert report["restored"] == [] and report["conflicts"] == [{"path": "src/deep/b.rs", "why": "open with unsaved changes"}], report
    assert (workspace / "src" / "deep" / "b.rs").read_text() == "agent b\n"
    nvim.api.command("edit!")
    report = rewind(nvim, 6, code=True, conversation=True)
    assert report["restored"] == ["src/deep/b.rs"], report
    assert nvim.lua(lines, b) == ["mine"], "the open, unmodified buffer shows the file as it was"
    assert fake.errors == []


def test_a_rewind_killed_part_way_is_finished_at_the_next_start(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, monkeypatch: Any, tmp_path: Path
) -> None:
    seed(workspace)
    fake.push_tools("Working.", [("call_1", "run_command", {"command": COMMAND})])
    fake.push_text("Done.")
    first = start_nvim()
    setup(first, fake)
    type_message(first, "change the files")
    wait_turns(first, 1)
    sid = first.lua("return require('pseudoclaude').current().id")
    log = log_of(first)
    first.close()

    marker = tmp_path / "stalled"
    monkeypatch.setenv("PSEUDOCLAUDE_TEST_REWIND_STALL", str(marker))
    second = start_nvim()
    setup(second, fake)
    second.lua("vim.g.pc_resumed = nil")
    second.api.command(f"PseudoResume {sid}")
    wait_for(lambda: second.lua("return vim.g.pc_resumed"), what="resumed")
    second.lua("require('pseudoclaude').rewind(1, {})")
    wait_for(lambda: marker.exists(), what="the rewind's first file written")
    os.kill(second.proc.pid, signal.SIGKILL)
    second.proc.wait()
    # Killed part way: the plan goes path by path, so the agent's new file is gone while src/a.rs is still its.
    assert not (workspace / "new" / "deeper" / "x.txt").exists()
    assert (workspace / "src" / "a.rs").read_text() == "fn a() { 1 }\n", "killed before the rewind finished"

    monkeypatch.delenv("PSEUDOCLAUDE_TEST_REWIND_STALL")
    third = start_nvim()
    setup(third, fake)
    third.lua("vim.g.pc_resumed = nil")
    third.api.command(f"PseudoResume {sid}")
    report = wait_for(lambda: third.lua("return vim.g.pc_resumed"), what="resumed")
    assert report["ok"] is True
    assert (workspace / "src" / "a.rs").read_text() == "fn a() {}\n"
    assert (workspace / "src" / "deep" / "b.rs").read_text() == "one\ntwo\n"
    assert not (workspace / "new").exists()
    assert third.lua("return #require('pseudoclaude').messages()") == 0
    entries = [json.loads(l) for l in log.read_text().splitlines()]
    done = [e for e in entries if e.get("type") == "rewind" and e["rewind"]["state"] == "done"]
    assert len(done) == 1 and done[0]["rewind"]["recovered"] is True
    assert fake.errors == []


def test_a_resume_tells_the_model_which_files_changed_since_and_a_fork_takes_the_files(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    seed(workspace)
    fake.push_tools("Editing.", [("call_1", "write_file", {"path": "src/a.rs", "content": "first\n"})])
    fake.push_text("One.")
    fake.push_tools("Editing.", [("call_2", "write_file", {"path": "src/a.rs", "content": "second\n"})])
    fake.push_text("Two.")
    first = start_nvim()
    setup(first, fake)
    type_message(first, "one")
    wait_turns(first, 1)
    type_message(first, "two")
    wait_turns(first, 2)
    sid = first.lua("return require('pseudoclaude').current().id")
    first.close()
    (workspace / "notes.txt").unlink()
    (workspace / "extra.txt").write_text("new\n")

    second = start_nvim()
    setup(second, fake)
    second.lua("vim.g.pc_resumed = nil")
    second.api.command(f"PseudoResume {sid}")
    wait_for(lambda: second.lua("return vim.g.pc_resumed"), what="resumed")
    fake.push_text("Noted.")
    type_message(second, "go on")
    wait_turns(second, 1)
    sent = fake.requests[-1]["messages"]
    reminder = [m["content"] for m in sent if m["role"] == "user" and "Since this session's last message" in m["content"]]
    assert reminder and "extra.txt created, notes.txt deleted" in reminder[0], sent

    # The picker's preview of the session shows what each turn changed.
    second.api.command("PseudoNew")
    second.api.command("set columns=160 lines=48")
    second.api.input("<Esc>:PseudoResume<CR>")
    preview = wait_for(
        lambda: second.lua(
            "local p = require('pseudoclaude.float') local s = p.get_state() "
            "if not (s and s.preview_id and s.preview_id == (p.selected() or {}).id) then return false end "
            "return vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false)"
        ),
        what="the preview",
    )
    assert "message 1 changed: src/a.rs +1 −1" in preview and "message 5 changed: src/a.rs +1 −1" in preview, preview
    second.api.input("<Esc>")

    changes = second.lua("return require('pseudoclaude').sessions.changes(...)", sid)
    assert [(t["index"], [f["path"] for f in t["files"]]) for t in changes][:2] == [(1, ["src/a.rs"]), (5, ["src/a.rs"])]
    # the on_done form (read on a worker thread, decoded in steps): the same turns
    second.lua(
        "_G.pc_changes = nil require('pseudoclaude').sessions.changes(..., function(err, t) _G.pc_changes = err or t end)",
        sid,
    )
    assert wait_for(lambda: second.lua("return _G.pc_changes"), what="changes, on_done") == changes
    # A fork at the first answer takes the file as the first turn left it.
    second.lua(
        "vim.g.pc_forked = nil require('pseudoclaude').sessions.fork(..., 4, { files = true, on_done = function(err, f) "
        "vim.g.pc_forked = err or f end })",
        sid,
    )
    forked = wait_for(lambda: second.lua("return vim.g.pc_forked"), what="forked")
    assert forked["files"]["restored"] == ["src/a.rs"], forked
    assert (workspace / "src" / "a.rs").read_text() == "first\n"
    assert fake.errors == []


def test_checkpoints_and_a_rewind_of_a_10000_file_workspace_never_hold_up_the_main_loop(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    for d in range(100):
        folder = workspace / f"d{d:02}"
        folder.mkdir()
        for i in range(100):
            (folder / f"f{i}.txt").write_text(f"file {d} {i}\n" * 200)
    fake.push_tools("Working.", [("call_1", "run_command", {"command": "echo changed >> d07/f7.txt && rm d08/f8.txt"}), ("call_2", "write_file", {"path": "d09/new.txt", "content": "new\n"})])
    fake.push_text("Done.")
    setup(nvim, fake)
    with main_loop_watch(nvim, "a turn with checkpoints of 10,000 files, then its rewind"):
        type_message(nvim, "change three files")
        wait_turns(nvim, 1)
        report = rewind(nvim, 1)
    assert report["ok"] is True, report
    assert sorted(report["restored"]) == ["d07/f7.txt", "d08/f8.txt"] and report["removed"] == ["d09/new.txt"]
    assert (workspace / "d07" / "f7.txt").read_text() == "file 7 7\n" * 200
    assert fake.errors == []
