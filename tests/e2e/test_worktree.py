"""Worktree chats (issue 47) through the real editor and real git: `:PseudoChat -w NAME` opens a chat whose agent (ours,
against the fake OpenAI server) writes a file and runs a command in its own worktree while the checkout stays
untouched; the session stays the workspace's and names the worktree; `:PseudoWorktree` shows its change in the
review's diff; two worktree chats changing the same file merged one after the other (the second a conflict leaving
the checkout clean); `.worktreeinclude`; closing a chat (nothing changed: removed; changes: keep / remove asked);
a resume with the worktree present, removed (made again from its branch) and with its branch deleted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import Neovim, main_loop_watch, wait_for
from fake_llm import FakeOpenAI
from acp_rig import fake_anthropic  # noqa: F401 - a fixture


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@t", *args], cwd=cwd, capture_output=True, text=True
    )
    assert out.returncode == 0, f"git {args}: {out.stderr}"
    return out.stdout.strip()


def make_repo(ws: Path) -> None:
    git(ws, "init", "-q", "-b", "main")
    git(ws, "config", "user.name", "T")
    git(ws, "config", "user.email", "t@t")
    (ws / "shared.txt").write_text("one\ntwo\nthree\n")
    (ws / ".gitignore").write_text(".env\n")
    (ws / ".worktreeinclude").write_text(".env\n")
    (ws / "AGENTS.md").write_text("Checkout's instructions.\n")
    git(ws, "add", ".")
    git(ws, "commit", "-qm", "first")
    (ws / ".env").write_text("SECRET=1\n")


def setup(n: Neovim, fake: FakeOpenAI) -> None:
    provider = {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"}
    n.lua(
        """
        require("pseudoclaude").setup(...)
        vim.g.pc_done = {}
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function(ev)
          local done = vim.g.pc_done
          done[tostring(ev.data.chat)] = (done[tostring(ev.data.chat)] or 0) + 1
          vim.g.pc_done = done
        end })
        """,
        {"provider": provider, "approve": {"write_file": True, "edit_file": True, "run_command": True}},
    )


def send(n: Neovim, text: str) -> None:
    n.api.input("<Esc>i" + text + "<C-s>")


def done(n: Neovim, chat: int) -> int:
    return (n.lua("return vim.g.pc_done") or {}).get(str(chat), 0)


def chats(n: Neovim) -> list[dict[str, Any]]:
    return n.lua("return require('pseudoclaude').chats()")


def open_worktree_chat(n: Neovim, command: str) -> dict[str, Any]:
    before = [c["chat"] for c in chats(n)]
    n.api.command(command)
    wait_for(lambda: any(c.get("worktree") and c["chat"] not in before for c in chats(n)), what="the worktree chat")
    return [c for c in chats(n) if c["chat"] not in before and c.get("worktree")][0]


def worktrees(n: Neovim) -> list[dict[str, Any]]:
    return n.lua("return require('pseudoclaude').worktree.list()")


def merge(n: Neovim, name: str, squash: bool = True) -> dict[str, Any]:
    n.lua(
        "vim.g.pc_merged = vim.NIL require('pseudoclaude').worktree.merge(..., { squash = select(2, ...), "
        "on_done = function(r) vim.g.pc_merged = r end })",
        name,
        squash,
    )
    return wait_for(lambda: n.lua("return vim.g.pc_merged"), what=f"the merge of {name}")


def diff_texts(n: Neovim) -> list[str]:
    """The texts of the current tab page's windows, left to right."""
    return n.lua(
        "local out = {} for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do "
        "out[#out + 1] = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false), '\\n') "
        "end return out"
    )


def log_entries(ws: Path, session: str) -> list[dict[str, Any]]:
    text = (ws / ".PseudoClaude" / "sessions" / session / "conversation.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_our_agent_writes_and_runs_a_command_in_its_worktree_while_the_checkout_stays_untouched(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    make_repo(workspace)
    fake.push_tools(
        "",
        [
            ("w1", "write_file", {"path": "shared.txt", "content": "one\nTWO\nthree\n"}),
            ("c1", "run_command", {"command": "echo ran > ran.txt; pwd > where.txt; cat .env > env-seen.txt"}),
        ],
    )
    fake.push_text("done")
    setup(nvim, fake)
    with main_loop_watch(nvim, "a worktree chat opened, a turn, its review", bound_ms=250.0):
        row = open_worktree_chat(nvim, "PseudoChat -w fix")
        wt = workspace.resolve() / ".PseudoClaude" / "worktrees" / "fix"
        assert Path(row["worktree"]) == wt
        send(nvim, "change it")
        wait_for(lambda: done(nvim, row["chat"]) == 1, what="the turn")
    # the agent worked in the worktree, the sandboxed command's cwd included
    assert (wt / "shared.txt").read_text() == "one\nTWO\nthree\n"
    assert (wt / "ran.txt").read_text() == "ran\n"
    assert Path((wt / "where.txt").read_text().strip()).resolve() == wt
    assert (wt / "env-seen.txt").read_text() == "SECRET=1\n", ".worktreeinclude copied .env"
    # the checkout is untouched, and git status shows nothing of the worktree
    assert (workspace / "shared.txt").read_text() == "one\ntwo\nthree\n"
    assert not (workspace / "ran.txt").exists()
    assert git(workspace, "status", "--porcelain") == ""
    # the model was told the worktree's instructions and folder
    system = fake.requests[0]["messages"][0]["content"]
    assert str(wt) in system, system[:400]
    # the session is the workspace's, and its log names the worktree and its branch
    cur = nvim.lua("local c = require('pseudoclaude').current() return c and { id = c.id, worktree = c.worktree }")
    assert Path(cur["worktree"]) == wt
    entries = log_entries(workspace, cur["id"])
    metas = [e for e in entries if e.get("type") == "meta"]
    assert {"name": "fix", "branch": "pseudoclaude/fix", "path": str(wt)} in [m.get("worktree") for m in metas]
    assert any((m.get("git") or {}).get("branch") == "pseudoclaude/fix" for m in metas), metas
    listed = worktrees(nvim)
    assert [(w["id"], w["changed"]) for w in listed] == [("fix", 4)], listed

    # :PseudoWorktree: the change file by file in the review's diff
    nvim.api.command("PseudoWorktree")
    wait_for(lambda: nvim.lua("return #vim.api.nvim_list_tabpages()") == 2, what="the review tab")
    texts = diff_texts(nvim)
    assert texts == ["", "SECRET=1"], texts  # env-seen.txt, added
    nvim.api.input("]f")
    wait_for(lambda: "ran.txt" in nvim.lua("return vim.wo.winbar"),
             what="the next file")
    nvim.api.input("]f")
    wait_for(lambda: "shared.txt" in nvim.lua("return vim.wo.winbar"),
             what="shared.txt")
    texts = diff_texts(nvim)
    assert texts == ["one\ntwo\nthree", "one\nTWO\nthree"], texts
    nvim.api.input("q")
    wait_for(lambda: nvim.lua("return #vim.api.nvim_list_tabpages()") == 1, what="the review closed")

    # merged: the checkout gets the change as one commit
    report = merge(nvim, "fix")
    assert report["ok"], report
    assert (workspace / "shared.txt").read_text() == "one\nTWO\nthree\n"
    assert (workspace / "ran.txt").read_text() == "ran\n"
    assert git(workspace, "status", "--porcelain") == ""
    assert cur["id"] in git(workspace, "log", "-1", "--format=%s")


def test_two_worktree_chats_changing_one_file_merge_then_conflict_leaving_the_checkout_clean(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    make_repo(workspace)
    fake.push_tools("", [("a", "write_file", {"path": "shared.txt", "content": "one\nFIRST\nthree\n"})])
    fake.push_text("first done")
    fake.push_tools("", [("b", "write_file", {"path": "shared.txt", "content": "one\nSECOND\nthree\n"})])
    fake.push_text("second done")
    setup(nvim, fake)
    one = open_worktree_chat(nvim, "PseudoChat -w one")
    send(nvim, "first")
    wait_for(lambda: done(nvim, one["chat"]) == 1, what="the first chat's turn")
    two = open_worktree_chat(nvim, "PseudoChat -w two")
    send(nvim, "second")
    wait_for(lambda: done(nvim, two["chat"]) == 1, what="the second chat's turn")
    assert merge(nvim, "one")["ok"]
    head = git(workspace, "rev-parse", "HEAD")
    report = merge(nvim, "two")
    assert report["ok"] is False and report["conflicts"] == ["shared.txt"], report
    assert git(workspace, "rev-parse", "HEAD") == head
    assert git(workspace, "status", "--porcelain") == ""
    assert (workspace / "shared.txt").read_text() == "one\nFIRST\nthree\n"
    assert not (workspace / ".git" / "MERGE_HEAD").exists()


def test_closing_a_worktree_chat_removes_an_unchanged_worktree_and_asks_about_a_changed_one(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    make_repo(workspace)
    fake.push_tools("", [("a", "write_file", {"path": "new.txt", "content": "x\n"})])
    fake.push_text("done")
    setup(nvim, fake)
    nvim.lua(
        """
        vim.g.pc_asked = vim.NIL
        vim.ui.select = function(items, opts, on_choice)
          vim.g.pc_asked = { items = items, prompt = opts.prompt }
          on_choice(vim.g.pc_answer)
        end
        """
    )
    idle = open_worktree_chat(nvim, "PseudoChat -w idle")
    nvim.lua("require('pseudoclaude').chat.close(...)", idle["chat"])
    wait_for(lambda: git(workspace, "branch", "--list", "pseudoclaude/*") == "", what="the unchanged one removed")
    assert not (workspace / ".PseudoClaude" / "worktrees" / "idle").exists()
    assert nvim.lua("return vim.g.pc_asked") is None, "nothing asked"

    for answer, stays in [("keep", True), ("remove", False)]:
        name = f"w-{answer}"
        if answer == "remove":
            fake.push_tools("", [("a", "write_file", {"path": "new.txt", "content": "x\n"})])
            fake.push_text("done")
        row = open_worktree_chat(nvim, f"PseudoChat -w {name}")
        send(nvim, "write")
        wait_for(lambda: done(nvim, row["chat"]) == 1, what="the turn")
        nvim.lua("vim.g.pc_asked = vim.NIL vim.g.pc_answer = ...", answer)
        nvim.lua("require('pseudoclaude').chat.close(...)", row["chat"])
        asked = wait_for(lambda: nvim.lua("return vim.g.pc_asked"), what="the question")
        assert asked["items"] == ["keep", "merge", "remove"], asked
        folder = workspace / ".PseudoClaude" / "worktrees" / name
        if stays:
            assert (folder / "new.txt").exists()
        else:
            wait_for(lambda: not folder.exists(), what="the removal")
    assert git(workspace, "status", "--porcelain") == ""


def test_bad_cases_say_what_is_wrong(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    setup(nvim, fake)
    nvim.lua(
        "vim.g.pc_err = vim.NIL require('pseudoclaude').chat.new({ worktree = true, "
        "on_done = function(err) vim.g.pc_err = err end })"
    )
    err = wait_for(lambda: nvim.lua("return vim.g.pc_err"), what="the refusal")
    assert "not in a git repository" in err, err
    assert len(chats(nvim)) == 1
    assert not (workspace / ".PseudoClaude").exists()
    make_repo(workspace)
    git(workspace, "branch", "pseudoclaude/taken")
    nvim.lua(
        "vim.g.pc_err = vim.NIL require('pseudoclaude').chat.new({ worktree = 'taken', "
        "on_done = function(err) vim.g.pc_err = err end })"
    )
    err = wait_for(lambda: nvim.lua("return vim.g.pc_err"), what="the refusal")
    assert "taken" in err and "pseudoclaude/taken exists" in err, err


def test_a_resume_goes_back_into_the_worktree_makes_it_again_or_goes_on_in_the_workspace(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    make_repo(workspace)
    wt = workspace.resolve() / ".PseudoClaude" / "worktrees" / "back"
    fake.push_tools("", [("a", "write_file", {"path": "one.txt", "content": "1\n"})])
    fake.push_text("ok")
    n = start_nvim()
    setup(n, fake)
    row = open_worktree_chat(n, "PseudoChat -w back")
    send(n, "one")
    wait_for(lambda: done(n, row["chat"]) == 1, what="the first turn")
    session = chats(n)[-1]["session"]
    git(wt, "add", "-A")
    git(wt, "commit", "-qm", "the agent's work")
    n.close()
    assert (wt / "one.txt").exists(), ":qa leaves the worktree as it is"

    for case in ["present", "recreated", "gone"]:
        if case == "recreated":
            subprocess.run(["rm", "-rf", str(wt)], check=True)
        if case == "gone":
            subprocess.run(["rm", "-rf", str(wt)], check=True)
            git(workspace, "worktree", "prune")
            git(workspace, "branch", "-D", "pseudoclaude/back")
        n = start_nvim()
        setup(n, fake)
        fake.push_tools("", [("b", "write_file", {"path": f"{case}.txt", "content": "x\n"})])
        fake.push_text("ok")
        n.lua(
            "vim.g.pc_resumed = vim.NIL require('pseudoclaude').resume(..., "
            "{ on_done = function(r) vim.g.pc_resumed = r end })",
            session,
        )
        report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what=f"the resume ({case})")
        assert report["ok"], report
        n.api.command("PseudoChat")
        send(n, "again")
        wait_for(lambda: done(n, 1) == 1, what=f"the turn after the resume ({case})")
        if case == "gone":
            assert (workspace / "gone.txt").exists()
            assert "worktree" in report.get("notice", "") and "workspace" in report.get("notice", ""), report
            assert not chats(n)[0].get("worktree")
        else:
            assert (wt / f"{case}.txt").exists() and (wt / "one.txt").exists(), case
            assert not (workspace / f"{case}.txt").exists()
            assert Path(chats(n)[0]["worktree"]) == wt
            if case == "recreated":
                assert "made again" in report.get("notice", ""), report
        n.close()
    assert git(workspace, "status", "--porcelain") == "?? gone.txt"


def test_the_real_claude_code_writes_and_runs_a_command_in_its_worktree_while_the_checkout_stays_untouched(
    nvim: Neovim, workspace: Path, fake_anthropic: Any, tmp_path: Path
) -> None:
    """An ACP agent in a worktree chat (claude-agent-acp and the Claude Code it bundles, against the fake Anthropic
    server): its `cwd` is the worktree, so its own Write and Bash land there, and its own store keeps the session
    under the worktree's folder; the session is the workspace's and names the worktree."""
    from acp_rig import claude_agent_command, claude_env
    from test_acp import chat_text, wait_turns
    from test_chat import setup as chat_setup

    make_repo(workspace)
    home = tmp_path / "agent-home"
    home.mkdir()
    wt = workspace.resolve() / ".PseudoClaude" / "worktrees" / "cc"
    fake_anthropic.push_tools("", [("toolu_w1", "Write", {"file_path": str(wt / "new.txt"),
                                                          "content": "from claude\n"})])
    fake_anthropic.push_tools("", [("toolu_b1", "Bash", {"command": "echo ran > ran.txt; pwd > where.txt",
                                                         "description": "write two files"})])
    fake_anthropic.push_text("Both done.")
    spec = {"command": claude_agent_command()[0], "env": claude_env(fake_anthropic.base_url, home)}
    chat_setup(nvim, None, agents={"claude": spec}, approve={"agents": {"claude": True}})
    with main_loop_watch(nvim, "an ACP worktree chat opened and a turn", bound_ms=250.0):
        row = open_worktree_chat(nvim, "PseudoChat -w cc claude")
        assert Path(row["worktree"]) == wt and row["agent"] == "claude", row
        nvim.api.input("<Esc>iedit it and run the shell<C-s>")
        wait_turns(nvim, 1)
    assert "Both done." in chat_text(nvim), chat_text(nvim)
    # the agent's own tools worked in the worktree; the checkout is untouched and git status shows nothing
    assert (wt / "new.txt").read_text() == "from claude\n", chat_text(nvim)
    assert (wt / "ran.txt").read_text() == "ran\n"
    assert Path((wt / "where.txt").read_text().strip()).resolve() == wt
    assert (workspace / "shared.txt").read_text() == "one\ntwo\nthree\n"
    assert not (workspace / "ran.txt").exists() and not (workspace / "new.txt").exists()
    assert git(workspace, "status", "--porcelain") == ""
    # the agent keeps the session by its cwd: the worktree's folder
    stores = [p.parent.name for p in (home / ".claude" / "projects").glob("*/*.jsonl")]
    assert stores and all(s.endswith("worktrees-cc") for s in stores), stores
    # our log: the workspace's session, naming the agent and the worktree
    cur = nvim.lua("local c = require('pseudoclaude').current() return { id = c.id, worktree = c.worktree }")
    assert Path(cur["worktree"]) == wt, cur
    metas = [e for e in log_entries(workspace, cur["id"]) if e.get("type") == "meta"]
    assert {"name": "cc", "branch": "pseudoclaude/cc", "path": str(wt)} in [m.get("worktree") for m in metas]
    assert any((m.get("agent") or {}).get("name") == "claude" for m in metas), metas
    assert [(w["id"], w["changed"]) for w in worktrees(nvim)] == [("cc", 3)], worktrees(nvim)
    # merged back: the checkout gets the agent's change
    report = merge(nvim, "cc")
    assert report["ok"], report
    assert (workspace / "new.txt").read_text() == "from claude\n"
    assert git(workspace, "status", "--porcelain") == ""
