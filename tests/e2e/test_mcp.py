"""MCP tools end to end: a real Neovim, the fake OpenAI server asking for a real MCP server's tool
(`@modelcontextprotocol/server-everything`, installed by scripts/ensure-mcp), the answer in the log, the
transcript and the next request; servers that are no servers (one that exits at once, one that never answers)
leave the chat going; `:PseudoMcp` and `mcp.status()`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Neovim, transcript, type_message
from fake_llm import FakeOpenAI
from test_chat import answer_approvals, log_lines, openai, setup, wait_turns
from test_health import health_report as checkhealth


@pytest.fixture(scope="module")
def mcp_deps() -> Path:
    out = subprocess.run([str(ROOT / "scripts" / "ensure-mcp")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"scripts/ensure-mcp failed: {out.stderr}"
    return Path(out.stdout.strip())


def everything(deps: Path) -> dict[str, Any]:
    return {"command": str(deps / "npm" / "node_modules" / ".bin" / "mcp-server-everything")}


def statuses(n: Neovim) -> list[dict[str, Any]]:
    return n.lua("return require('pseudoclaude').mcp.status()")


def test_the_model_calls_a_real_mcp_servers_tool_after_approval(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    fake.push_tools("", [("call_1", "mcp__everything__echo", {"message": "hello through MCP"})])
    fake.push_text("The server echoed it.")
    setup(nvim, openai(fake), mcp={"servers": {"everything": everything(mcp_deps)}})
    assert statuses(nvim) == [{"name": "everything", "state": "stopped", "tools": []}], "not started before a chat"
    answer_approvals(nvim, "Yes")
    type_message(nvim, "echo something")
    wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors
    assert "mcp__everything__echo" in nvim.lua("return vim.g.pc_prompt")
    offered = {t["function"]["name"]: t["function"] for t in fake.requests[0]["tools"]}
    assert "read_file" in offered and "mcp__everything__echo" in offered, sorted(offered)
    assert offered["mcp__everything__echo"]["parameters"]["properties"]["message"]["type"] == "string"
    tool_msg = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "hello through MCP" in tool_msg["content"], tool_msg
    entries = log_lines(nvim.lua("return require('pseudoclaude').current().jsonl"))
    results = [e for e in entries if "tool_result" in e]
    assert results and "hello through MCP" in results[0]["tool_result"]["content"], results
    assert any(line.startswith("▸ mcp__everything__echo") for line in transcript(nvim)), transcript(nvim)
    st = statuses(nvim)
    assert st[0]["state"] == "running" and "echo" in st[0]["tools"], st
    assert "everything: running" in nvim.command_output("PseudoMcp")


def test_an_image_result_is_kept_as_a_spilled_file_named_by_a_line(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    fake.push_tools("", [("call_1", "mcp__everything__get-tiny-image", {})])
    fake.push_text("A tiny logo.")
    setup(nvim, openai(fake), mcp={"servers": {"everything": everything(mcp_deps)}}, approve={"mcp": {"everything": True}})
    type_message(nvim, "show me an image")
    wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors
    tool_msg = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "[image image/png," in tool_msg and "kept in tool-results/" in tool_msg, tool_msg
    rel = tool_msg.split("kept in ", 1)[1].split("]", 1)[0]
    session_dir = Path(nvim.lua("return require('pseudoclaude').current().dir"))
    assert (session_dir / rel).read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("script,timeout,why", [
    ("echo 'cannot open the database' >&2; exit 1", 60, "cannot open the database"),
    ("exec sleep 600", 1, "within 1 s"),
])
def test_a_server_that_exits_or_hangs_is_failed_and_the_chat_goes_on(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, script: str, timeout: float, why: str
) -> None:
    fake.push_text("Answered without it.")
    setup(nvim, openai(fake), mcp={"servers": {"broken": {"command": "sh", "args": ["-c", script]}}, "timeout": timeout})
    type_message(nvim, "hello")
    wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors
    assert any("Answered without it." in line for line in transcript(nvim))
    names = [t["function"]["name"] for t in fake.requests[0]["tools"]]
    assert not any(n.startswith("mcp__") for n in names), names
    st = statuses(nvim)
    assert st[0]["state"] == "failed" and why in st[0]["error"], st
    assert why in nvim.command_output("PseudoMcp")
    health = checkhealth(nvim)
    assert "pseudoclaude: MCP servers" in health and "broken: failed" in health and why in health, health


def test_a_bad_mcp_config_is_refused_with_its_name(nvim: Neovim) -> None:
    err = nvim.lua(
        "local ok, e = pcall(require('pseudoclaude').setup, { mcp = { servers = { git = { command = 'x', argz = {} } } } }) "
        "return e"
    )
    assert 'mcp.servers["git"].argz: unknown key' in err, err
    err = nvim.lua("local ok, e = pcall(require('pseudoclaude').setup, { mcp = { timeout = -1 } }) return e")
    assert "mcp.timeout" in err, err
