"""Chats with another agent over ACP, end to end, against the real agent: `claude-agent-acp` and the Claude Code it
bundles (installed by scripts/ensure-acp), pointed at the fake Anthropic server on 127.0.0.1 (acp_rig.py). Through
the real commands and keys: `:PseudoChat claude`, `setup({ agent })`, the input window, the approval prompt,
`<C-c>`, `:PseudoResume`, `:qa`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from acp_rig import claude_agent_command, claude_env, fake_anthropic  # noqa: F401 - a fixture
from conftest import Neovim, main_loop_watch, screen_lines, wait_for
from fake_llm import FakeAnthropic
from test_chat import setup as chat_setup

CLI = Path(__file__).resolve().parents[2] / "target" / "release" / "pseudoclaude"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The agent's HOME: its own store of sessions (`.claude/projects`), apart from every other test's."""
    h = tmp_path / "agent-home"
    h.mkdir()
    return h


def setup(n: Neovim, fake: FakeAnthropic, home: Path, **extra: Any) -> None:
    """setup() with the agent `claude` pointed at the fake; turns and resumes counted (as test_chat's setup)."""
    spec = {"command": claude_agent_command()[0], "env": claude_env(fake.base_url, home)}
    extra.setdefault("agents", {"claude": spec})
    chat_setup(n, None, **extra)


def claude_turn(n: Neovim, fake: FakeAnthropic, home: Path, message: str, answer: str | None = None,
                **extra: Any) -> None:
    """setup() (with `extra`), `:PseudoChat claude`, and one message sent and answered: `answer` pushed to the fake
    first, when given (else what the test pushed)."""
    if answer is not None:
        fake.push_text(answer)
    setup(n, fake, home, **extra)
    n.api.command("PseudoChat claude")
    send(n, message)
    wait_turns(n, 1)


def send(n: Neovim, text: str) -> None:
    """Types `text` into the current chat's input window and sends it with <C-s>, as a user does."""
    n.api.input("<Esc>i" + text.replace("<", "<lt>") + "<C-s>")


def chat_text(n: Neovim) -> str:
    """The current chat's transcript."""
    return n.lua(
        "local b = require('pseudoclaude.chat.state').buf "
        "if not b or not vim.api.nvim_buf_is_valid(b) then return '' end "
        "return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n')"
    )


def wait_turns(n: Neovim, count: int, timeout: float = 90.0) -> None:
    wait_for(lambda: n.lua("return vim.g.pc_turns") >= count, timeout=timeout,
             what=f"{count} turn(s) done; the chat:\n" + chat_text(n))


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def agent_pids(home: Path) -> list[int]:
    """The processes started with this test's agent HOME (the agent and whatever it runs)."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if f"HOME={home}".encode() in env.split(b"\0"):
            pids.append(int(p.name))
    return pids


def answer_permissions_with(n: Neovim, name: str) -> None:
    """vim.ui.select (what the approval prompt asks with) picks the option called `name`, and remembers each
    question's prompt and items."""
    n.lua(
        """
        local want = ...
        vim.g.pc_asked = {}
        vim.ui.select = function(items, opts, cb)
          local a = vim.g.pc_asked
          table.insert(a, { prompt = opts.prompt, items = items })
          vim.g.pc_asked = a
          vim.schedule(function() cb(vim.tbl_contains(items, want) and want or items[1]) end)
        end
        """,
        name,
    )


def test_a_chat_with_claude_writes_a_file_runs_a_shell_and_is_logged(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    fake.push_tools("I will write it.", [("toolu_w1", "Write", {"file_path": str(workspace / "hello.txt"),
                                                              "content": "hello from claude\n"})],
                    thinking="The user wants a file.")
    fake.push_tools("", [("toolu_b1", "Bash", {"command": "echo ran > ran.txt", "description": "write ran.txt"})])
    fake.push_text("Both done.")
    setup(nvim, fake, home)
    answer_permissions_with(nvim, "Allow")
    nvim.api.command("set lines=60 columns=120")
    nvim.api.command("PseudoChat claude")
    rows = nvim.lua("return require('pseudoclaude').chats()")
    assert [r["agent"] for r in rows] == ["pseudoclaude", "claude"] and rows[1]["current"], rows
    send(nvim, "write hello.txt and run the shell")
    wait_turns(nvim, 1)
    # the agent's calls read as the agent titles them, not as their raw input; the input is folded under the line
    win = nvim.lua("return require('pseudoclaude.chat.state').win")
    screen = screen_lines(nvim, win)
    at = screen.index("▸ Write hello.txt")
    assert screen[at + 1].startswith("+-"), screen  # a closed fold: the input
    assert "▸ echo ran > ran.txt" in screen, screen
    assert not any('"input"' in line or "file_path" in line for line in screen), screen
    row = chat_text(nvim).split("\n").index("▸ Write hello.txt") + 1
    nvim.lua("local w, pos = ... vim.api.nvim_set_current_win(w) vim.api.nvim_win_set_cursor(w, pos)", win, [row, 0])
    nvim.api.input("<Esc><Tab>")
    wait_for(lambda: "      hello from claude" in screen_lines(nvim, win),
             what="the input expanded; the screen:\n" + "\n".join(screen_lines(nvim, win)))
    opened = screen_lines(nvim, win)
    at = opened.index("▸ Write hello.txt")
    assert opened[at + 1:at + 3] == ["    content:", "      hello from claude"], opened
    assert opened[at + 3].startswith("    file_path: /"), opened  # the whole path: cut by the window's width
    text = chat_text(nvim)
    assert nvim.lua("return vim.g.pc_last_stop") == "end_turn", text
    assert (workspace / "hello.txt").read_text() == "hello from claude\n"
    assert (workspace / "ran.txt").read_text().strip() == "ran"
    # the permission questions came through our approval prompt, with the agent's own options
    asked = nvim.lua("return vim.g.pc_asked")
    assert len(asked) == 2, asked
    assert all("Allow" in a["items"] and "Yes" not in a["items"] for a in asked), asked
    assert "write hello.txt and run the shell" in text and "Both done." in text, text
    assert "I will write it." in text, text

    cur = nvim.lua("return require('pseudoclaude').current()")
    lines = log_lines(Path(cur["jsonl"]))
    msgs = [entry for entry in lines if entry.get("type", "message") == "message"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user", "assistant"], msgs
    assert [m["tool_calls"][0]["name"] for m in msgs if m.get("tool_calls")] == ["edit", "execute"], msgs
    # the log keeps the call's whole input
    write = msgs[1]["tool_calls"][0]["arguments"]
    assert write["title"] == "Write hello.txt" and write["input"]["content"] == "hello from claude\n", write
    meta = [entry["agent"] for entry in lines if entry.get("type") == "meta" and "agent" in entry]
    assert meta and meta[0]["name"] == "claude" and meta[0]["session_id"], lines
    permissions = [entry["acp"]["permission"] for entry in lines if "permission" in entry.get("acp", {})]
    assert len(permissions) == 2 and all(p["by"] == "user" for p in permissions), permissions
    assert nvim.lua("return require('pseudoclaude').chats()")[1]["state"] == "idle"
    # the list's rows name the agent (the packed rows and the JSON ones alike)
    rows = nvim.lua("return require('pseudoclaude').sessions.list({ include_current = true })")
    assert [r.get("agent") for r in rows if r["id"] == cur["id"]] == ["claude"], rows


def test_a_running_shell_command_is_drawn_before_it_ends_and_then_as_a_restore_draws_it(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    fake.push_tools("Sleeping first.", [("toolu_s1", "Bash", {"command": "sleep 6; echo woke-up | tr a-z A-Z",
                                                              "description": "sleep a while"})])
    fake.push_text("Awake.")
    setup(nvim, fake, home, approve={"agents": {"claude": True}})
    nvim.api.command("PseudoChat claude")
    send(nvim, "sleep then answer")
    # the call is on screen while the command still sleeps: its line, and a status line that says it runs
    wait_for(lambda: "sleep 6" in chat_text(nvim) and "⋯ execute:" in chat_text(nvim), timeout=90,
             what="the running call drawn; the chat:\n" + chat_text(nvim))
    running = chat_text(nvim)
    assert "WOKE-UP" not in running and "✓ execute" not in running, running
    assert nvim.lua("return vim.g.pc_turns") == 0, "the turn still runs"
    cur = nvim.lua("return require('pseudoclaude').current()")
    logged = [e for e in log_lines(Path(cur["jsonl"])) if e.get("tool_calls")]
    assert logged == [], "the log holds a call only with its result"
    wait_turns(nvim, 1)
    done = chat_text(nvim)
    assert "⋯" not in done and done.count("▸ sleep 6") == 1 and "✓ execute" in done and "WOKE-UP" in done, done
    # drawn live exactly as a restore draws the history (the one renderer's lines)
    restored = nvim.lua("return require('pseudoclaude.transcript').render(require('pseudoclaude').messages())")
    assert done.split("\n") == restored, (done, restored)


def test_claude_codes_own_transcript_of_a_session_we_ran_is_not_listed_a_second_time(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    claude_turn(nvim, fake_anthropic, home, "list me once", "Listed once.")
    cur = nvim.lua("return require('pseudoclaude').current()")
    agent_id = next(e["agent"]["session_id"] for e in log_lines(Path(cur["jsonl"])) if "agent" in e)
    # Claude Code keeps its own transcript of it, under the id our log's meta names (written a moment after the
    # answer: its own writer flushes on a timer)
    projects = home / ".claude" / "projects"

    def written() -> Path | None:  # the whole turn, answer included: the file is written in steps
        t = next((t for t in projects.glob("*/*.jsonl") if t.stem == agent_id), None)
        return t if t and "Listed once." in t.read_text() else None

    ours = wait_for(written, timeout=30, what="Claude Code's transcript")
    # another Claude Code session of the workspace, not ours: still listed
    other = ours.parent / "11111111-2222-3333-4444-555555555555.jsonl"
    other.write_text(ours.read_text().replace(agent_id, other.stem))
    nvim.lua("vim.env.CLAUDE_CONFIG_DIR = ...", str(home / ".claude"))
    for opts in ({"external": True}, {"external": True, "include_current": True}, {"external": True, "limit": 5}):
        rows = nvim.lua("return require('pseudoclaude').sessions.list(...)", opts)
        theirs = [r["session_id"] for r in rows if r.get("source")]  # the agent's own ids
        assert agent_id not in theirs and other.stem in theirs, (opts, rows)
    rows = nvim.lua("return require('pseudoclaude').sessions.list({ external = true, include_current = true })")
    assert [r["id"] for r in rows if not r.get("source")] == [cur["id"]], rows
    # the CLI's list of other agents' sessions leaves it out too
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(home / ".claude"), "HOME": str(home)}
    out = subprocess.run([str(CLI), "-C", str(workspace), "sessions", "list", "--external", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    listed = [r["session_id"] for r in json.loads(out.stdout) if r["source"] == "claude-code"]
    assert agent_id not in listed and other.stem in listed, listed


def fork_at(n: Neovim, text: str) -> dict[str, Any]:
    """:PseudoFork with the cursor on the current chat's transcript line `text`; the fork's resume report."""
    lines = chat_text(n).split("\n")
    win = n.lua("return vim.fn.win_findbuf(require('pseudoclaude.chat.state').buf)[1]")
    n.api.command(f"call win_gotoid({win})")
    n.api.current.window.cursor = (lines.index(text) + 1, 0)
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.api.command("PseudoFork")
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="the switch to the fork")
    assert report["ok"] is True, report
    return report


def test_a_fork_of_a_claude_chat_runs_claude_knowing_the_history_before_the_fork_and_not_after(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    fake.push_text("Noted: alpha.")
    fake.push_text("Noted: bravo.")
    setup(nvim, fake, home)
    # a second chat (`pseudoclaude://chat/2`) beside ours: the fork happens in its own buffer
    nvim.api.command("PseudoChat claude")
    send(nvim, "the first code word is alpha")
    wait_turns(nvim, 1)
    send(nvim, "the second code word is bravo")
    wait_turns(nvim, 2)
    src = nvim.lua("return require('pseudoclaude').current()")
    before = Path(src["jsonl"]).read_bytes()
    # at the first answer: a new agent session, told our transcript up to there
    report = fork_at(nvim, "Noted: alpha.")
    fork = report["id"]
    assert fork != src["id"] and Path(src["jsonl"]).read_bytes() == before
    rows = nvim.lua("return require('pseudoclaude').sessions.list({ include_current = true })")
    assert [(r.get("agent"), r["forked_from"]) for r in rows if r["id"] == fork] == [
        ("claude", {"id": src["id"], "index": 2})], rows
    wait_for(lambda: "claude: session/new" in chat_text(nvim), timeout=90, what="the fork's line")
    fake.push_text("It was alpha.")
    nvim.api.command("PseudoChat")
    send(nvim, "which code words do you know?")
    wait_turns(nvim, 3)
    asked = json.dumps(fake.requests[-1])
    assert "alpha" in asked and "bravo" not in asked, asked
    chats = nvim.lua("return require('pseudoclaude').chats()")
    assert [(c["agent"], c["current"]) for c in chats] == [("pseudoclaude", False), ("claude", True)], chats
    msgs = nvim.lua("return require('pseudoclaude').messages()")
    assert [m["content"] for m in msgs] == ["the first code word is alpha", "Noted: alpha.",
                                            "which code words do you know?", "It was alpha."], msgs
    # at its end, at once: the agent forks its own session, which has the whole history (no transcript sent). Claude
    # Code writes its transcript on a ~100 ms timer after the answer: the fork replaces the chat's agent, stopped
    # gracefully (input closed, SIGTERM: it writes first), and the forked agent starts once it has stopped
    report = fork_at(nvim, "It was alpha.")
    wait_for(lambda: "claude: session/fork" in chat_text(nvim), timeout=90, what="the session/fork line")
    fake.push_text("Still alpha.")
    nvim.api.command("PseudoChat")
    send(nvim, "and now?")
    wait_turns(nvim, 4)
    asked = json.dumps(fake.requests[-1])
    assert "which code words do you know?" in asked and "It was alpha." in asked, asked
    # our transcript went once, with the first fork's first message (in the history the agent forked), not again
    assert asked.count("The conversation so far") == 1 and "bravo" not in asked, asked
    cur = nvim.lua("return require('pseudoclaude').current()")
    metas = [e["agent"] for e in log_lines(Path(cur["jsonl"])) if "agent" in e]
    assert metas[0].get("fork_of") and not metas[0].get("session_id"), metas
    assert metas[-1]["session_id"] and metas[-1]["session_id"] != metas[0]["fork_of"], metas


def test_pseudorewind_in_a_claude_chat_puts_back_what_its_write_and_its_shell_changed(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    (workspace / "kept.txt").write_text("before\n")
    fake.push_text("Hello.")
    fake.push_tools("Writing.", [("toolu_w1", "Write", {"file_path": str(workspace / "new.txt"), "content": "new\n"})])
    fake.push_tools("", [("toolu_b1", "Bash", {"command": "echo changed > kept.txt", "description": "change it"})])
    fake.push_text("Done.")
    claude_turn(nvim, fake, home, "hello", approve={"agents": {"claude": True}})
    send(nvim, "change the files")
    wait_turns(nvim, 2)
    assert (workspace / "new.txt").read_text() == "new\n"
    assert (workspace / "kept.txt").read_text().strip() == "changed"
    # :PseudoRewind lists the agent's own changes (its Write and its shell's), newest first; the first item of each
    # question is taken: that turn, code and conversation
    nvim.lua(
        """
        vim.g.pc_lists = {}
        vim.g.pc_rewound = vim.NIL
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeRewound", callback = function(ev)
          vim.g.pc_rewound = ev.data
        end })
        vim.ui.select = function(items, opts, cb)
          local shown = {}
          for _, it in ipairs(items) do table.insert(shown, opts.format_item and opts.format_item(it) or it) end
          local lists = vim.g.pc_lists
          table.insert(lists, shown)
          vim.g.pc_lists = lists
          vim.schedule(function() cb(items[1], 1) end)
        end
        """
    )
    nvim.api.command("PseudoRewind")
    report = wait_for(lambda: nvim.lua("return vim.g.pc_rewound"), what="User PseudoClaudeRewound")
    first = nvim.lua("return vim.g.pc_lists")[0][0]
    assert "change the files" in first and "new.txt" in first and "kept.txt" in first, first
    assert report["ok"] is True, report
    assert not (workspace / "new.txt").exists()
    assert (workspace / "kept.txt").read_text() == "before\n"
    assert nvim.lua("return #require('pseudoclaude').messages()") == 2


def test_approve_agents_answers_allow_once_without_asking(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake_anthropic.push_tools("", [("toolu_1", "Write", {"file_path": str(workspace / "c.txt"), "content": "c\n"})])
    fake_anthropic.push_text("ok")
    # every new chat runs claude; its permissions are answered by the configuration
    setup(nvim, fake_anthropic, home, agent="claude", approve={"agents": {"claude": True}})
    answer_permissions_with(nvim, "Allow")
    nvim.api.command("PseudoChat")
    send(nvim, "write c.txt")
    wait_turns(nvim, 1)
    assert (workspace / "c.txt").read_text() == "c\n"
    assert nvim.lua("return vim.g.pc_asked") == [], "nothing is asked"
    cur = nvim.lua("return require('pseudoclaude').current()")
    permission = next(e["acp"]["permission"] for e in log_lines(Path(cur["jsonl"])) if "permission" in e.get("acp", {}))
    chosen = next(o for o in permission["options"] if o["id"] == permission["answer"])
    assert permission["by"] == "config" and chosen["kind"] == "allow_once", permission


def test_a_permission_asked_shows_the_chat_waiting_and_c_c_sends_session_cancel(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake_anthropic.push_tools("", [("toolu_1", "Bash", {"command": "echo no > no.txt", "description": "no"})])
    setup(nvim, fake_anthropic, home, agent="claude")
    # the question is left unanswered: the chat waits for the user
    nvim.lua("vim.g.pc_asked = 0 vim.ui.select = function() vim.g.pc_asked = vim.g.pc_asked + 1 end")
    nvim.api.command("PseudoChat")
    send(nvim, "run it")
    wait_for(lambda: nvim.lua("return vim.g.pc_asked") == 1, timeout=90, what="the permission asked")
    assert nvim.lua("return require('pseudoclaude').chats()")[0]["state"] == "waiting"
    nvim.api.input("<Esc><C-c>")
    wait_turns(nvim, 1)
    assert nvim.lua("return vim.g.pc_last_stop") == "cancelled", chat_text(nvim)
    assert not (workspace / "no.txt").exists()
    assert nvim.lua("return require('pseudoclaude').chats()")[0]["state"] == "idle"


def test_qa_leaves_no_agent_process(nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path) -> None:
    claude_turn(nvim, fake_anthropic, home, "hello", "Hello.")
    assert agent_pids(home), "the agent runs while its chat is open"
    try:
        nvim.api.command("qa!")
    except Exception:
        pass
    nvim.proc.wait(timeout=20)
    wait_for(lambda: not agent_pids(home), timeout=10, what="no agent process left after :qa")


def test_closing_its_chat_ends_the_agent_after_it_wrote_its_transcript(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake_anthropic.push_text("Hello there.")
    setup(nvim, fake_anthropic, home)
    nvim.api.command("PseudoChat claude")
    # the chat is closed the moment its turn is done: Claude Code writes its transcript on a ~100 ms timer after the
    # answer, and its agent is stopped gracefully (input closed, SIGTERM), never killed before it wrote
    nvim.lua("vim.api.nvim_create_autocmd('User', { pattern = 'PseudoClaudeTurnDone', once = true, "
             "callback = function() require('pseudoclaude').chat.close() end })")
    send(nvim, "hello")
    wait_turns(nvim, 1)
    wait_for(lambda: not agent_pids(home), timeout=10, what="no agent process left once its chat closed")
    transcripts = list((home / ".claude" / "projects").glob("*/*.jsonl"))
    assert len(transcripts) == 1 and "Hello there." in transcripts[0].read_text(), transcripts


def test_an_agent_killed_mid_turn_is_one_line_keeps_the_partial_answer_and_the_next_message_loads_it_again(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    fake.push_text(" ".join(f"w{i:03d}" for i in range(400)), delay=0.02)
    setup(nvim, fake, home, agent="claude")
    nvim.api.command("PseudoChat")
    send(nvim, "stream a long answer")
    wait_for(lambda: "w040" in chat_text(nvim), timeout=90, what="the answer streaming")
    for pid in agent_pids(home):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_turns(nvim, 1)
    text = chat_text(nvim)
    assert text.count("exited mid-turn") == 1, text
    msgs = nvim.lua("return require('pseudoclaude').messages()")
    assert [m["role"] for m in msgs] == ["user", "assistant"] and msgs[1].get("interrupted"), msgs
    assert msgs[1]["content"].startswith("w000 w001"), msgs
    fake.push_text("Back.")
    send(nvim, "are you there?")
    wait_turns(nvim, 2)
    text = chat_text(nvim)
    assert "session/load" in text and "Back." in text, text


def test_the_editor_killed_mid_answer_keeps_what_had_streamed_and_the_session_resumes_and_goes_on(
    start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    fake.push_text(" ".join(f"w{i:03d}" for i in range(400)), delay=0.02)
    first = start_nvim()
    setup(first, fake, home, agent="claude")
    first.api.command("PseudoChat")
    send(first, "stream a long answer")
    wait_for(lambda: "w060" in chat_text(first), timeout=90, what="the answer streaming")
    log = Path(first.lua("return require('pseudoclaude').current()")["jsonl"])
    # kill -9 of the editor: what had streamed (checkpointed as ours is) is in the log
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(timeout=10)
    # the agent notices its input closed; end it as a stale process would be ended, so it cannot answer later
    for pid in agent_pids(home):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    streamed = "".join(str(e.get("content", "")) for e in log_lines(log)
                       if e.get("type") == "checkpoint" or e.get("role") == "assistant")
    # checkpointed at least twice a second: under load the last one may be some words behind what was drawn
    assert streamed.startswith("w000 w001") and "w010" in streamed, log.read_text()[-2000:]
    second = start_nvim()
    setup(second, fake, home)
    second.lua("require('pseudoclaude').resume(...)", log.parent.name)
    report = wait_for(lambda: second.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True, report
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["role"] for m in msgs] == ["user", "assistant"], msgs
    assert msgs[1]["content"].startswith(streamed.strip()), (msgs, streamed)
    assert "w010" in chat_text(second)
    # the next message starts the agent again, which goes on in the same session of ours
    fake.push_text("Back again.")
    second.api.command("PseudoChat")
    send(second, "are you there?")
    wait_turns(second, 1)
    assert "Back again." in chat_text(second), chat_text(second)
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["content"] for m in msgs][-2:] == ["are you there?", "Back again."], msgs


def floats_text(n: Neovim) -> str:
    """The text of every floating window (the picker's)."""
    return n.lua(
        "local out = {} for _, w in ipairs(vim.api.nvim_list_wins()) do "
        "if vim.api.nvim_win_get_config(w).relative ~= '' then "
        "vim.list_extend(out, vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)) end end "
        "return table.concat(out, '\\n')"
    )


def first_session(n: Neovim, fake: FakeAnthropic, home: Path, text: str, answer: str) -> dict[str, Any]:
    """A first chat with claude, one exchange; the editor then quits (the agent with it)."""
    fake.push_text(answer)
    setup(n, fake, home, agent="claude")
    n.api.command("PseudoChat")
    send(n, text)
    wait_turns(n, 1)
    cur = n.lua("return require('pseudoclaude').current()")
    try:
        n.api.command("qa!")
    except Exception:
        pass
    n.proc.wait(timeout=20)
    wait_for(lambda: not agent_pids(home), timeout=10, what="the first agent gone")
    return cur


def test_a_resume_with_the_agents_store_intact_loads_its_session_and_logs_nothing_twice(
    start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    cur = first_session(start_nvim(), fake, home, "what is the answer?", "The answer is 42.")
    before = Path(cur["jsonl"]).read_bytes()

    second = start_nvim()
    setup(second, fake, home)
    # through the picker: its preview names the agent; <CR> resumes the session
    second.api.input(":PseudoResume<CR>")
    wait_for(lambda: "claude (ACP agent)" in floats_text(second), what="the picker's preview naming the agent")
    second.api.input("<CR>")
    report = wait_for(lambda: second.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True, report
    wait_for(lambda: "session/load" in chat_text(second), timeout=90, what="the load's line")
    text = chat_text(second)
    assert text.count("The answer is 42.") == 1, text
    assert Path(cur["jsonl"]).read_bytes() == before, "a load logs nothing"
    fake.push_text("Still 42.")
    second.api.command("PseudoChat")
    send(second, "and again?")
    wait_turns(second, 1)
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["content"] for m in msgs] == ["what is the answer?", "The answer is 42.", "and again?", "Still 42."]
    assert chat_text(second).count("The answer is 42.") == 1


def test_a_resume_after_the_agents_store_is_gone_sends_our_history_to_the_model(
    start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    cur = first_session(start_nvim(), fake, home, "remember the password", "The password is swordfish.")
    shutil.rmtree(home / ".claude" / "projects")

    second = start_nvim()
    setup(second, fake, home)
    second.lua("require('pseudoclaude').resume(...)", cur["id"])
    wait_for(lambda: "session/new" in chat_text(second), timeout=90, what="the new session's line")
    fake.push_text("It was swordfish.")
    second.api.command("PseudoChat")
    send(second, "what was the password?")
    wait_turns(second, 1)
    assert "The password is swordfish." in json.dumps(fake.requests[-1]), "the history reached the model"
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["content"] for m in msgs][2:] == ["what was the password?", "It was swordfish."], msgs
    # the chat goes on with the session's agent: a new chat in it starts claude again, not our provider
    second.api.command("PseudoNew")
    assert [c["agent"] for c in second.lua("return require('pseudoclaude').chats()")] == ["claude"]


def test_the_main_loop_never_stalls_during_a_long_streamed_answer(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake_anthropic.push_text(" ".join(f"word{i}" for i in range(2000)), delay=0.001)
    setup(nvim, fake_anthropic, home)
    nvim.api.command("PseudoChat claude")
    with main_loop_watch(nvim, "a long answer streamed by claude"):
        send(nvim, "a long answer please")
        wait_turns(nvim, 1)
    assert "word1999" in chat_text(nvim)


def test_a_missing_agent_command_is_one_error_naming_it(nvim: Neovim, workspace: Path) -> None:
    nvim.lua('require("pseudoclaude").setup({ provider = { name = "demo" }, '
             'agents = { ghost = { command = "no-such-acp-agent" } } })')
    nvim.lua("vim.g.pc_turns = 0 vim.api.nvim_create_autocmd('User', { pattern = 'PseudoClaudeTurnDone', "
             "callback = function() vim.g.pc_turns = vim.g.pc_turns + 1 end })")
    nvim.api.command("PseudoChat ghost")
    send(nvim, "hello")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="the turn's end")
    text = chat_text(nvim)
    assert '"no-such-acp-agent" was not found on PATH' in text, text
    assert text.count("was not found") == 1, text
    # an unknown name is refused before a chat opens
    ok, err = nvim.lua("return { pcall(vim.cmd, 'PseudoChat nobody') }")
    assert not ok and 'no agent named "nobody"' in err and "claude" in err, err
    assert len(nvim.lua("return require('pseudoclaude').chats()")) == 2


def test_checkhealth_slash_commands_and_modes_of_a_running_agent(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    claude_turn(nvim, fake_anthropic, home, "hello", "Hello.")
    # the agent's slash commands complete after a `/` that starts the message, typed as a user does
    nvim.api.input("<Esc>ggdGi/")
    items = wait_for(lambda: nvim.lua("return vim.fn.complete_info({ 'items' }).items"), what="the completion menu")
    words = [i["word"] for i in items]
    assert words and all(w.startswith("/") for w in words), words
    nvim.api.input("<C-e><Esc>")
    # its modes: `:PseudoMode` switches, a line says so, the log has it
    offers = nvim.lua("return require('pseudoclaude.chat').offers()")
    modes = [m["id"] for m in offers["modes"]["availableModes"]]
    assert "plan" in modes, offers
    assert "plan" in nvim.lua("return vim.fn.getcompletion('PseudoMode p', 'cmdline')")
    nvim.api.command("PseudoMode plan")
    wait_for(lambda: "claude: mode plan" in chat_text(nvim), timeout=30, what="the mode's line")
    cur = nvim.lua("return require('pseudoclaude').current()")
    assert any(e.get("acp", {}).get("currentModeId") == "plan" for e in log_lines(Path(cur["jsonl"])))
    # without a name: a picker of its modes, each shown by its id (and its name when it differs); the first one not
    # current is picked
    nvim.lua(
        """
        vim.ui.select = function(items, opts, cb)
          local shown = {}
          for _, it in ipairs(items) do table.insert(shown, opts.format_item(it)) end
          vim.g.pc_select = { prompt = opts.prompt, shown = shown }
          for _, it in ipairs(items) do
            if it.id ~= 'plan' then vim.g.pc_picked = it.id return vim.schedule(function() cb(it) end) end
          end
        end
        """
    )
    nvim.api.command("PseudoMode")
    picked = nvim.lua("return vim.g.pc_picked")
    wait_for(lambda: f"claude: mode {picked}" in chat_text(nvim), timeout=30, what="the picked mode's line")
    select = nvim.lua("return vim.g.pc_select")
    assert select["prompt"] == "Mode" and len(select["shown"]) == len(modes), select
    assert [s.split("  ")[0] for s in select["shown"]] == modes, select
    # :checkhealth lists the agents: found or not, and the version the running one reported
    health = "\n".join(nvim.lua("vim.cmd('checkhealth pseudoclaude') "
                                "return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    version = next(e["agent"]["version"] for e in log_lines(Path(cur["jsonl"])) if "agent" in e)
    assert f"claude-agent-acp` found at" in health and f"version {version}" in health, health
    assert "codex: `codex-acp` not installed" in health, health


def test_a_plan_is_one_plain_line_and_a_slash_in_our_own_chat_is_only_a_slash(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    # Claude Code's TodoWrite is the agent's `plan` update
    fake.push_tools("", [("toolu_t1", "TodoWrite", {"todos": [
        {"content": "read it", "status": "completed", "activeForm": "Reading it"},
        {"content": "write it", "status": "pending", "activeForm": "Writing it"}]})])
    fake.push_text("Planned.")
    claude_turn(nvim, fake, home, "plan it", approve={"agents": {"claude": True}})
    text = chat_text(nvim)
    assert "plan: [x] read it; [ ] write it" in text.split("\n"), text
    assert "⚠ plan" not in text, text
    # our own chat (the first one) offers no slash commands: `/` types a `/` and opens no menu
    (workspace / "notes.txt").write_text("x\n")
    first = nvim.lua("return require('pseudoclaude').chats()")[0]
    assert first["agent"] == "pseudoclaude", first
    nvim.lua("require('pseudoclaude').chat.show(...)", first["chat"])
    nvim.api.input("<Esc>ggdGi/")
    wait_for(lambda: nvim.lua("return vim.api.nvim_get_current_line()") == "/", what="the typed slash")
    assert nvim.lua("return vim.fn.pumvisible()") == 0
    assert nvim.lua("return vim.b.pseudoclaude_chat") == first["chat"]


def test_pseudomodel_in_a_claude_chat_lists_and_switches_the_agents_own_models(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path
) -> None:
    fake = fake_anthropic
    setup(nvim, fake, home, pricing={"our-own-model": {"input": 1, "output": 2}})
    nvim.lua("_G.errs = {} vim.notify = function(m, l) if l == vim.log.levels.ERROR then table.insert(_G.errs, m) end end")
    assert "our-own-model" in nvim.lua("return vim.fn.getcompletion('PseudoModel ', 'cmdline')")
    nvim.api.command("PseudoChat claude")
    # before the agent started, nothing to choose from: said plainly, and our provider's models not offered
    assert nvim.lua("return vim.fn.getcompletion('PseudoModel ', 'cmdline')") == []
    nvim.api.command("PseudoModel opus")
    assert any("claude has not started yet" in m for m in nvim.lua("return _G.errs")), nvim.lua("return _G.errs")
    assert nvim.lua("return require('pseudoclaude').chats()")[1]["agent"] == "claude"
    fake.push_text("Hello.")
    send(nvim, "hello")
    wait_turns(nvim, 1)
    models = nvim.lua("return require('pseudoclaude.chat').offers().models")
    ids = [m["id"] for m in models["available"]]
    assert len(ids) >= 2 and models["current"] in ids, models
    # another model, not the same one with a longer context (`sonnet[1m]`)
    other = next(i for i in ids if i != models["current"] and ("opus" in i or "haiku" in i))
    before = next(r["model"] for r in reversed(fake.requests) if "hello" in json.dumps(r["messages"]))
    # :PseudoModel completes the agent's models, not our provider's
    assert other in nvim.lua("return vim.fn.getcompletion('PseudoModel ', 'cmdline')")
    nvim.api.command(f"PseudoModel {other}")
    wait_for(lambda: f"claude: model {other}" in chat_text(nvim), timeout=30, what="the model's line")
    assert nvim.lua("return require('pseudoclaude.chat').offers().models.current") == other
    # without a name: a picker of the agent's models (left with <Esc>: nothing changes)
    nvim.lua("vim.ui.select = function(items, opts, cb) local shown = {} "
             "for _, it in ipairs(items) do table.insert(shown, opts.format_item(it)) end "
             "vim.g.pc_select = { prompt = opts.prompt, shown = shown } cb(nil) end")
    nvim.api.command("PseudoModel")
    select = nvim.lua("return vim.g.pc_select")
    assert select["prompt"] == f"Model of claude (now {other})", select
    assert [s.split("  ")[0] for s in select["shown"]] == ids, select
    assert nvim.lua("return require('pseudoclaude.chat').offers().models.current") == other
    cur = nvim.lua("return require('pseudoclaude').current()")
    changes = [e["acp"] for e in log_lines(Path(cur["jsonl"]))
               if e.get("acp", {}).get("sessionUpdate") == "config_option_update"]
    assert any(o.get("category") == "model" and o.get("currentValue") == other
               for c in changes for o in c["configOptions"]), changes
    fake.push_text("Switched.")
    send(nvim, "again")
    wait_turns(nvim, 2)
    # the next answer comes from the model switched to
    after = next(r["model"] for r in reversed(fake.requests) if "again" in json.dumps(r["messages"]))
    assert after != before and other.split("[")[0] in after, (before, after, ids)


def test_setup_refuses_a_bad_agents_table_naming_the_entry(nvim: Neovim) -> None:
    for opts, expected in [
        ({"agents": {"mine": {"args": ["--acp"]}}}, "agents[\"mine\"].command: missing"),
        ({"agents": {"mine": {"command": "x", "argv": []}}}, "agents[\"mine\"].argv: unknown option"),
        ({"agents": {"claude": {"env": {"A": 1}}}}, "agents[\"claude\"].env: expected a table of strings"),
        ({"agents": {"claude": {"sandbox": "yes"}}}, "agents[\"claude\"].sandbox: expected true, false or {"),
        ({"agents": {"claude": {"sandbox": {"write": []}}}}, "agents[\"claude\"].sandbox.write: unknown option"),
        ({"agents": {"claude": {"sandbox": {"keep": "X"}}}}, "agents[\"claude\"].sandbox.keep: expected a list"),
        ({"agents": {"gemini": {"fs_reads": "no"}}}, "agents[\"gemini\"].fs_reads: expected true or false, got \"no\""),
        ({"agent": "nobody"}, "agent: expected the name of an agent (claude, codex, gemini, goose, opencode, pi, qwen)"),
        ({"approve": {"agents": {"claude": "yes"}}}, "approve.agents[\"claude\"]: expected true or false"),
    ]:
        ok, err = nvim.lua("return { pcall(require('pseudoclaude').setup, ...) }", opts)
        assert not ok and expected in err, (opts, err)



def test_sandbox_true_in_setup_confines_the_agents_shell_and_checkhealth_says_so(
    nvim: Neovim, workspace: Path, fake_anthropic: FakeAnthropic, home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    escape = outside / "escaped.txt"
    fake = fake_anthropic
    command = f"echo in > inside.txt; echo out > {escape}; echo tried"
    fake.push_tools("", [("toolu_1", "Bash", {"command": command, "description": "write in and out"})])
    fake.push_text("Tried both.")
    spec = {"command": claude_agent_command()[0], "env": claude_env(fake.base_url, home), "sandbox": True}
    setup(nvim, fake, home, agents={"claude": spec, "plain": {"command": "true"}},
          sandbox={"network": {"allow": ["127.0.0.1"]}}, approve={"agents": {"claude": True}})
    nvim.api.command("PseudoChat claude")
    send(nvim, "write inside and outside the workspace")
    wait_turns(nvim, 1)
    assert "Tried both." in chat_text(nvim), chat_text(nvim)
    assert (workspace / "inside.txt").read_text() == "in\n"
    assert not escape.exists(), "the agent's own shell wrote outside the workspace"
    health = nvim.lua("vim.cmd('checkhealth pseudoclaude') return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    claude = next(line for line in health if "claude: `" in line)
    assert "(in the sandbox) found at" in claude, health
    plain = next(line for line in health if "plain: `" in line)
    assert "(in the sandbox)" not in plain and "found at" in plain, health
