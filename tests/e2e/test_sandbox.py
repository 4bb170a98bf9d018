"""The command sandbox end to end: the model's run_command through the fake OpenAI server, approved (or not) through
the real prompt, the command confined by the real kernel (Landlock, namespaces), the result the model reads back,
the log, :checkhealth. The tests run as root: Landlock confines root too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Neovim, transcript, type_message
from fake_llm import FakeOpenAI
from test_chat import log_lines, openai, setup, wait, wait_turns
from test_health import health_report, section


def answer_approvals(n: Neovim, *answers: str) -> None:
    """Like test_chat's: answers in turn ("No" once they run out); `vim.g.pc_prompts` keeps every prompt and
    `vim.g.pc_choices` every list of choices offered."""
    n.lua(
        "local answers = { ... } vim.g.pc_asked = 0 vim.g.pc_prompts = {} vim.g.pc_choices = {} "
        "vim.ui.select = function(items, opts, cb) vim.g.pc_asked = vim.g.pc_asked + 1 "
        "local p = vim.g.pc_prompts table.insert(p, opts.prompt) vim.g.pc_prompts = p "
        "local c = vim.g.pc_choices table.insert(c, items) vim.g.pc_choices = c "
        "local a = answers[vim.g.pc_asked] or 'No' vim.schedule(function() cb(a) end) end",
        *answers,
    )


def tool_results(fake: FakeOpenAI) -> list[str]:
    return [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]


def logged_results(n: Neovim) -> list[dict[str, Any]]:
    entries = log_lines(n.lua("return require('pseudoclaude').current().jsonl"))
    return [e["tool_result"] for e in entries if e.get("tool_result")]


def run_turn(n: Neovim, fake: FakeOpenAI, args: dict[str, Any], turns: int = 1) -> str:
    """One turn in which the model runs one command; returns what the model was told of it."""
    fake.push_tools("", [(f"call_{turns}", "run_command", args)])
    fake.push_text("Noted.")
    type_message(n, "go")
    wait_turns(n, turns)
    assert fake.errors == [], fake.errors
    return tool_results(fake)[-1]


@pytest.mark.parametrize("auto", [True, False])
def test_a_write_outside_the_workspace_is_refused_and_the_model_is_told(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, tmp_path: Path, auto: bool
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    setup(nvim, openai(fake), approve={"run_command": auto})
    answer_approvals(nvim, "Yes")
    told = run_turn(nvim, fake, {"command": f"touch {outside}/x; echo done > inside.txt"})
    assert not (outside / "x").exists()
    assert (workspace / "inside.txt").read_text() == "done\n"
    assert f"blocked by the sandbox: write to {outside}/x" in told, told
    assert nvim.lua("return vim.g.pc_asked") == (0 if auto else 1)
    if not auto:
        # an ordinary command may be approved for the session
        assert nvim.lua("return vim.g.pc_choices[1]") == ["Yes", "No", "Always (this session)"]
    rec = logged_results(nvim)[-1]["sandbox"]
    assert rec == {"sandboxed": True, "mechanism": "namespaces+landlock", "network": False}, rec


def test_rm_rf_leaves_the_session_store_and_the_repository_whole_and_resumable(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI
) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "a.txt").write_text("a\n")
    n = start_nvim()
    setup(n, openai(fake), approve={"run_command": True})
    answer_approvals(n)
    told = run_turn(n, fake, {"command": "rm -rf .PseudoClaude .git; git status --short; echo after"})
    assert "after" in told and "?? a.txt" in told, told  # git reads still work
    assert f"blocked by the sandbox: write to {workspace}/.git" in told or \
        f"blocked by the sandbox: write to {workspace}/.PseudoClaude" in told, told
    assert (workspace / ".git" / "HEAD").exists()
    sid = n.lua("return require('pseudoclaude').current().id")
    n.close()
    second = start_nvim()
    setup(second, openai(fake))
    second.lua("vim.g.pc_resumed = vim.NIL")
    second.api.command(f"PseudoResume {sid}")
    report = wait(second, "vim.g.pc_resumed")
    assert report["ok"] is True and report["messages"] >= 4, report
    assert any("rm -rf .PseudoClaude .git" in l for l in transcript(second))


def test_a_tcp_connection_needs_the_network_which_the_user_allows_once_or_in_setup(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    connect = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\""

    def accepted() -> bool:
        try:
            server.accept()[0].close()
            return True
        except (TimeoutError, socket.timeout):
            return False

    setup(nvim, openai(fake), approve={"run_command": True})
    answer_approvals(nvim, "Yes")
    told = run_turn(nvim, fake, {"command": connect})
    assert "connected" not in told and "blocked by the sandbox: network" in told, told
    assert not accepted()
    assert nvim.lua("return vim.g.pc_asked") == 0
    # The model asks for the network: asked despite auto-approve, without "Always"; yes connects.
    told = run_turn(nvim, fake, {"command": connect, "network": True}, turns=2)
    assert "[stdout]\nconnected" in told, told
    assert accepted()
    assert nvim.lua("return vim.g.pc_asked") == 1
    assert nvim.lua("return vim.g.pc_choices[1]") == ["Yes", "No"]
    prompt = nvim.lua("return vim.g.pc_prompts[1]")
    assert prompt.startswith("Allow run_command python3") and "WITHOUT the network ban" in prompt, prompt
    rec = logged_results(nvim)[-1]["sandbox"]
    assert rec["sandboxed"] is True and rec["network"] is True and rec["allowed"] == ["network"], rec
    # network = true in setup(): nothing asked.
    nvim.lua("require('pseudoclaude').setup(...)",
             {"provider": openai(fake), "approve": {"run_command": True}, "sandbox": {"network": True}})
    nvim.api.command("PseudoNew")
    answer_approvals(nvim)
    told = run_turn(nvim, fake, {"command": connect}, turns=3)
    assert "connected" in told, told
    assert accepted() and nvim.lua("return vim.g.pc_asked") == 0
    server.close()


@pytest.mark.parametrize("auto", [True, False])
def test_sandbox_false_always_asks_and_no_runs_nothing(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, tmp_path: Path, auto: bool
) -> None:
    marker = tmp_path / "ran"
    args = {"command": f"touch {marker}", "sandbox": False, "reason": "it must write outside the workspace"}
    setup(nvim, openai(fake), approve={"run_command": auto})
    answer_approvals(nvim, "No", "Yes")
    told = run_turn(nvim, fake, args)
    assert not marker.exists(), "No ran the command"
    assert "declined" in told, told
    prompt = nvim.lua("return vim.g.pc_prompts[1]")
    assert "WITHOUT the sandbox (the model's reason: it must write outside the workspace)?" in prompt, prompt
    assert nvim.lua("return vim.g.pc_choices[1]") == ["Yes", "No"]
    # Yes runs it outside the sandbox, and the log says the user allowed it.
    told = run_turn(nvim, fake, args, turns=2)
    assert marker.exists(), told
    rec = logged_results(nvim)[-1]["sandbox"]
    assert rec["sandboxed"] is False and rec["allowed"] == ["no_sandbox"], rec
    assert rec["reason"] == "it must write outside the workspace"
    assert nvim.lua("return vim.g.pc_asked") == 2


def test_a_build_in_tmpdir_works_and_goes_with_the_session(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    setup(nvim, openai(fake), approve={"run_command": True})
    answer_approvals(nvim)
    build = ("cd \"$TMPDIR\" && printf 'int main(void){return 0;}\\n' > m.c && cc -o m m.c && ./m && "
             "echo \"built in $TMPDIR\"")
    told = run_turn(nvim, fake, {"command": build})
    cur = nvim.lua("return require('pseudoclaude').current()")
    tmp = Path(cur["jsonl"]).parent / "tmp"
    assert f"built in {tmp}" in told, told
    assert (tmp / "m").exists()
    nvim.api.command("PseudoNew")
    nvim.lua("require('pseudoclaude').sessions.delete(...)", cur["id"])
    assert not tmp.exists() and not tmp.parent.exists()


@pytest.mark.parametrize("auto", [True, False])
def test_without_a_sandbox_every_command_asks(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, auto: bool
) -> None:
    monkeypatch.setenv("PSEUDOCLAUDE_SANDBOX_SIMULATE", "none")
    n = start_nvim()
    setup(n, openai(fake), approve={"run_command": auto})
    answer_approvals(n, "Yes", "No")
    run_turn(n, fake, {"command": "touch one"})
    told = run_turn(n, fake, {"command": "touch two"}, turns=2)
    assert (workspace / "one").exists() and not (workspace / "two").exists()
    assert "declined" in told
    assert n.lua("return vim.g.pc_asked") == 2
    for prompt in n.lua("return vim.g.pc_prompts"):
        assert "[no sandbox on this system (simulated by $PSEUDOCLAUDE_SANDBOX_SIMULATE)" in prompt, prompt
    assert n.lua("return vim.g.pc_choices") == [["Yes", "No"], ["Yes", "No"]]
    report = section(health_report(n), "pseudoclaude: command sandbox")
    assert "ERROR no sandbox on this system (no Landlock): simulated by $PSEUDOCLAUDE_SANDBOX_SIMULATE" in report, report
    assert "Every command asks before it runs" in report, report


def test_checkhealth_reports_the_sandbox(start_nvim: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = start_nvim()
    report = section(health_report(n), "pseudoclaude: command sandbox")
    assert "OK commands run in the sandbox: user, mount and network namespaces, then Landlock (Landlock ABI 7)" in report, report
    assert ".git/ and .PseudoClaude/ are read-only" in report, report
    assert "OK network off" in report, report
    n.lua("require('pseudoclaude').setup({ sandbox = { network = true, writable = { '/nonexistent-pc' } } })")
    report = section(health_report(n), "pseudoclaude: command sandbox")
    assert "WARNING network on for every command" in report, report
    assert "WARNING sandbox.writable: /nonexistent-pc is not a folder" in report, report
    n.lua("require('pseudoclaude').setup({ sandbox = { enabled = false } })")
    report = section(health_report(n), "pseudoclaude: command sandbox")
    assert "WARNING the sandbox is off" in report, report
    monkeypatch.setenv("PSEUDOCLAUDE_SANDBOX_SIMULATE", "landlock")
    weak = start_nvim()
    report = section(health_report(weak), "pseudoclaude: command sandbox")
    assert "OK commands run in the sandbox: Landlock and seccomp" in report, report
    assert "cannot keep commands from changing .git/ and .PseudoClaude/" in report, report


def test_sandbox_options_are_checked(nvim: Neovim) -> None:
    for opts, expect in (
        ({"enable": False}, "sandbox.enable: unknown option (known: enabled, network, writable)"),
        ({"network": "yes"}, "sandbox.network"),
        ({"writable": "/tmp"}, "sandbox.writable"),
        ({"writable": [1]}, "sandbox.writable"),
    ):
        ok, msg = nvim.lua("return { pcall(require('pseudoclaude').setup, { sandbox = ... }) }", opts)
        assert ok is False and expect in msg, (opts, msg)


def test_the_demo_shows_the_sandbox_at_work(nvim: Neovim, workspace: Path) -> None:
    setup(nvim, None, approve={"run_command": True})
    type_message(nvim, "run something")
    wait_turns(nvim, 1)
    text = "\n".join(transcript(nvim))
    assert "blocked by the sandbox: write to" in text and "TMPDIR=" in text, text
    assert "refused the write in your home folder" in text, text
    assert not list(Path(os.environ.get("HOME", "/root")).glob(".pseudoclaude-demo-*"))
