"""MCP tools end to end: a real Neovim, the fake OpenAI server asking for a real MCP server's tool
(`@modelcontextprotocol/server-everything`, installed by scripts/ensure-mcp), the answer in the log, the
transcript and the next request; servers that are no servers (one that exits at once, one that never answers)
leave the chat going; `:PseudoMcp` and `mcp.status()`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import ROOT, Neovim, main_loop_watch, transcript, type_message, wait_for
from fake_llm import FakeOpenAI
from test_chat import answer_approvals, log_lines, openai, resume_cmd, setup, wait_turns
from test_health import health_report as checkhealth


@pytest.fixture(scope="module")
def mcp_deps() -> Path:
    out = subprocess.run([str(ROOT / "scripts" / "ensure-mcp")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"scripts/ensure-mcp failed: {out.stderr}"
    return Path(out.stdout.strip())


def everything(deps: Path) -> dict[str, Any]:
    return {"command": str(deps / "npm" / "node_modules" / ".bin" / "mcp-server-everything")}


@pytest.fixture
def http_everything(mcp_deps: Path) -> Iterator[str]:
    """server-everything in its streamable-HTTP mode on a free port of 127.0.0.1; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    index = mcp_deps / "npm" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    proc = subprocess.Popen(
        ["node", str(index), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on port" in line:
            break
    else:
        raise AssertionError(f"server-everything did not start (exit {proc.wait()})")
    proc.stderr.close()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def statuses(n: Neovim) -> list[dict[str, Any]]:
    return n.lua("return require('pseudoclaude').mcp.status()")


def test_the_model_calls_a_real_mcp_servers_tool_after_approval(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    fake.push_tools("", [("call_1", "mcp__everything__echo", {"message": "hello through MCP"})])
    fake.push_text("The server echoed it.")
    setup(nvim, openai(fake), mcp={"servers": {"everything": everything(mcp_deps)}})
    assert statuses(nvim) == [{"name": "everything", "state": "stopped", "tools": [], "source": "setup"}], "not started before a chat"
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


def test_the_model_calls_a_streamable_http_servers_tool(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, http_everything: str
) -> None:
    fake.push_tools("", [("call_1", "mcp__web__get-sum", {"a": 20, "b": 22})])
    fake.push_text("The sum is 42.")
    server = {"type": "http", "url": http_everything, "headers": {"X-Client": "pseudoclaude"}}
    setup(nvim, openai(fake), mcp={"servers": {"web": server}}, approve={"mcp": {"web": ["get-sum"]}})
    type_message(nvim, "add 20 and 22")
    wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors
    offered = [t["function"]["name"] for t in fake.requests[0]["tools"]]
    assert "mcp__web__get-sum" in offered and "mcp__web__echo" in offered, offered
    tool_msg = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "42" in tool_msg["content"], tool_msg
    st = statuses(nvim)
    assert st[0]["state"] == "running" and "get-sum" in st[0]["tools"], st


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
    said = [line for line in transcript(nvim) if "MCP server" in line]
    assert len(said) == 1 and '"broken" failed' in said[0] and why in said[0], transcript(nvim)
    if "database" in why:
        log = Path(nvim.lua("return require('pseudoclaude.errors').log_path()")).read_text()
        assert "mcp broken: cannot open the database" in log, log


def test_a_bad_mcp_config_is_refused_with_its_name(nvim: Neovim) -> None:
    err = nvim.lua(
        "local ok, e = pcall(require('pseudoclaude').setup, { mcp = { servers = { git = { command = 'x', argz = {} } } } }) "
        "return e"
    )
    assert 'mcp.servers["git"].argz: unknown key' in err, err
    err = nvim.lua("local ok, e = pcall(require('pseudoclaude').setup, { mcp = { timeout = -1 } }) return e")
    assert "mcp.timeout" in err, err
    for server, why in [
        ("{ url = 'ftp://x' }", '.url: expected an http:// or https:// URL'),
        ("{ command = 'x', url = 'http://127.0.0.1:1/mcp' }", "not both"),
        ("{ type = 'sse', url = 'http://127.0.0.1:1/sse' }", '.type: expected "stdio" or "http"'),
        ("{ url = 'http://127.0.0.1:1/mcp', headers = { Authorization = 1 } }", ".headers: expected a table of strings"),
    ]:
        err = nvim.lua(f"local ok, e = pcall(require('pseudoclaude').setup, {{ mcp = {{ servers = {{ web = {server} }} }} }}) return e")
        assert why in err, (server, err)


# -- the workspace's .mcp.json: never started before the user agrees ------------------------------------------------

_HOLD_QUESTIONS = """
vim.g.pc_consent_asked = 0
vim.ui.select = function(items, opts, cb)
  vim.g.pc_consent_asked = vim.g.pc_consent_asked + 1
  vim.g.pc_consent_prompt = opts.prompt
  _G.pc_consent_answer = cb
end
"""


def hold_questions(n: Neovim) -> None:
    """vim.ui.select keeps its question open (as a user who has not answered yet); `answer(n, choice)` answers it."""
    n.lua(_HOLD_QUESTIONS)


def answer(n: Neovim, choice: str) -> None:
    n.lua("local cb = _G.pc_consent_answer _G.pc_consent_answer = nil cb(...)", choice)


def write_mcp_json(ws: Path, script: str) -> None:
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo": {"command": "sh", "args": ["-c", script]}}}))


def started(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def consent_key(n: Neovim) -> Path:
    return n.state_home / "nvim" / "pseudoclaude" / "mcp-consent.key"


def test_a_workspace_server_runs_only_after_yes_and_a_changed_definition_asks_again(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    marker = workspace.parent / "repo-server-started"
    server = everything(mcp_deps)["command"]
    write_mcp_json(workspace, f"echo started >> {marker}; exec {server}")

    # First chat: asked; nothing runs, and the turn waits, until "Yes".
    n1 = start_nvim()
    hold_questions(n1)
    setup(n1, openai(fake))
    assert statuses(n1) == [{"name": "repo", "state": "awaiting consent", "tools": [], "source": "workspace"}]
    assert "awaiting consent" in n1.command_output("PseudoMcp")
    fake.push_text("Hello with the repo's tools.")
    type_message(n1, "hello")
    wait_for(lambda: n1.lua("return vim.g.pc_consent_asked") == 1, what="the consent question")
    prompt = n1.lua("return vim.g.pc_consent_prompt")
    assert "repo" in prompt and server in prompt and ".PseudoClaude/mcp-consent.json" in prompt, prompt
    assert started(marker) == 0, "started before the user agreed"
    assert fake.requests == [], "the first request waits for the answer (it offers the tools it brings)"
    # the chat's state follows the question (the core notes it waits as it settles the servers): a moment under load
    chat_states = lambda: [c["state"] for c in n1.lua("return require('pseudoclaude').chats()")]  # noqa: E731
    wait_for(lambda: chat_states() == ["waiting"], timeout=10, what="the chat waiting for the user's answer")
    answer(n1, "Yes")
    wait_turns(n1, 1)
    states = [c["state"] for c in n1.lua("return require('pseudoclaude').chats()")]
    assert states == ["idle"], states
    assert fake.errors == [], fake.errors
    assert started(marker) == 1
    offered = [t["function"]["name"] for t in fake.requests[0]["tools"]]
    assert "mcp__repo__echo" in offered, offered
    assert statuses(n1)[0]["state"] == "running"
    stored = json.loads((workspace / ".PseudoClaude" / "mcp-consent.json").read_text())
    assert stored["servers"]["repo"]["answer"] == "yes", stored
    key = consent_key(n1).read_bytes()
    assert len(key) >= 32 and (consent_key(n1).stat().st_mode & 0o077) == 0

    def again(hold: bool = False) -> Neovim:
        """The same user (the same key) in a new editor of the workspace."""
        n = start_nvim()
        consent_key(n).parent.mkdir(parents=True, exist_ok=True)
        consent_key(n).write_bytes(key)
        hold_questions(n)
        setup(n, openai(fake))
        return n

    # The same definition: not asked again, started at the first chat.
    n2 = again()
    fake.push_text("Again.")
    type_message(n2, "hello again")
    wait_turns(n2, 1)
    assert n2.lua("return vim.g.pc_consent_asked") == 0
    assert started(marker) == 2
    assert "mcp__repo__echo" in [t["function"]["name"] for t in fake.requests[-1]["tools"]], "its tools in the first request"

    # A changed definition asks again; "No" never starts it, and is remembered.
    write_mcp_json(workspace, f"echo started >> {marker}; echo changed >/dev/null; exec {server}")
    n3 = again()
    fake.push_text("Without it.")
    type_message(n3, "hello changed")
    wait_for(lambda: n3.lua("return vim.g.pc_consent_asked") == 1, what="the question about the changed definition")
    answer(n3, "No")
    wait_turns(n3, 1)
    assert started(marker) == 2
    offered = [t["function"]["name"] for t in fake.requests[-1]["tools"]]
    assert not any(o.startswith("mcp__repo") for o in offered), offered
    st = statuses(n3)[0]
    assert st["state"] == "stopped" and "declined" in st["error"], st

    n4 = again()
    fake.push_text("Still without it.")
    type_message(n4, "hello declined")
    wait_turns(n4, 1)
    assert n4.lua("return vim.g.pc_consent_asked") == 0 and started(marker) == 2
    assert "declined" in n4.command_output("PseudoMcp")
    # ... until the user reconsiders.
    n4.api.command("PseudoMcp consent repo")
    wait_for(lambda: n4.lua("return vim.g.pc_consent_asked") == 1, what="the question asked again")
    answer(n4, "Yes")
    wait_for(lambda: statuses(n4)[0]["state"] == "running", what="the server started after the new yes")
    assert started(marker) == 3

    # Another user's key (or a repository that ships its own .PseudoClaude/mcp-consent.json) is no answer.
    n5 = start_nvim()
    hold_questions(n5)
    setup(n5, openai(fake))
    assert statuses(n5)[0]["state"] == "awaiting consent"


def test_a_workspace_server_awaiting_consent_is_in_checkhealth(nvim: Neovim, workspace: Path) -> None:
    write_mcp_json(workspace, "exit 0")
    setup(nvim)
    health = checkhealth(nvim)
    assert "repo (.mcp.json): awaiting consent" in health and ":PseudoMcp consent repo" in health, health


# -- lifecycle: stderr in the log, a garbage server, nothing left at exit ---------------------------------------------


def process_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_no_server_process_survives_quitting(start_nvim: Any, workspace: Path, fake: FakeOpenAI, mcp_deps: Path) -> None:
    pids = workspace.parent / "pids"
    server = everything(mcp_deps)["command"]
    # The server starts a helper of its own that would outlive it: the whole process group must go.
    script = f"echo $$ >> {pids}; sleep 600 & echo $! >> {pids}; exec {server}"
    n = start_nvim()
    fake.push_text("Up.")
    setup(n, openai(fake), mcp={"servers": {"group": {"command": "sh", "args": ["-c", script]}}})
    type_message(n, "hello")
    wait_turns(n, 1)
    assert statuses(n)[0]["state"] == "running"
    listed = [int(p) for p in pids.read_text().split()]
    assert len(listed) == 2 and all(process_alive(p) for p in listed), listed
    try:
        n.api.command("qa!")
    except Exception:
        pass  # the connection closes as Neovim exits
    n.proc.wait(timeout=20)
    wait_for(lambda: not any(process_alive(p) for p in listed), timeout=5, what="the server's processes gone")


def test_a_server_that_answers_garbage_is_one_line_in_the_chat_and_in_checkhealth(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI
) -> None:
    fake.push_text("Answered without it.")
    script = "echo 'garbage stderr line' >&2; echo 'this is not JSON-RPC'; echo '{\"jsonrpc\": 7}'; exec sleep 600"
    setup(nvim, openai(fake), mcp={"servers": {"noise": {"command": "sh", "args": ["-c", script]}}, "timeout": 10})
    type_message(nvim, "hello")
    wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors
    lines = [line for line in transcript(nvim) if "MCP server" in line]
    assert len(lines) == 1 and '"noise" failed' in lines[0], transcript(nvim)
    st = statuses(nvim)[0]
    assert st["state"] == "failed", st
    health = checkhealth(nvim)
    assert "noise: failed" in health, health
    log = Path(nvim.lua("return require('pseudoclaude.errors').log_path()")).read_text()
    assert "mcp noise: garbage stderr line" in log, log


# -- resumes: a kill -9 mid-call, a server gone since ---------------------------------------------------------------


def test_neovim_killed_mid_mcp_call_resumes_and_goes_on(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    servers = {"servers": {"everything": everything(mcp_deps)}}
    slow = ("call_1", "mcp__everything__trigger-long-running-operation", {"duration": 120, "steps": 2})
    fake.push_tools("", [slow])
    first = start_nvim()
    setup(first, openai(fake), mcp=servers, approve={"mcp": {"everything": True}})
    type_message(first, "run the long operation")
    jsonl = Path(wait_for(lambda: (first.lua("return require('pseudoclaude').current()") or {}).get("jsonl"),
                          what="the session"))
    wait_for(lambda: any(e.get("tool_calls") for e in log_lines(str(jsonl))), what="the call logged")
    assert statuses(first)[0]["state"] == "running"
    assert first.lua("return vim.g.pc_turns") == 0, "the call is still under way"
    sid = first.lua("return require('pseudoclaude').current().id")
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait()

    second = start_nvim()
    setup(second, openai(fake), mcp=servers, approve={"mcp": {"everything": True}})
    report = resume_cmd(second, "PseudoResume last")
    assert report["ok"] is True and second.lua("return require('pseudoclaude').current().id") == sid
    # the call never answered is cut, as one of our own tools' would be
    assert "unanswered tool call" in report["notice"], report
    msgs = second.lua("return require('pseudoclaude').messages()")
    assert [m["role"] for m in msgs] == ["user"], msgs
    fake.push_tools("", [("call_2", "mcp__everything__echo", {"message": "after the crash"})])
    fake.push_text("Done.")
    type_message(second, "go on")
    wait_turns(second, 1)
    assert fake.errors == [], fake.errors
    tool_msg = [m for m in fake.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert "after the crash" in tool_msg["content"], tool_msg


def test_a_resumed_session_whose_server_is_gone_offers_only_the_tools_that_exist_now(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    fake.push_tools("", [("call_1", "mcp__old__echo", {"message": "from the old server"})])
    fake.push_text("Echoed.")
    first = start_nvim()
    setup(first, openai(fake), mcp={"servers": {"old": everything(mcp_deps)}}, approve={"mcp": {"old": True}})
    type_message(first, "echo")
    wait_turns(first, 1)
    sid = first.lua("return require('pseudoclaude').current().id")
    first.close()

    # The server "old" is no more; another one is configured.
    second = start_nvim()
    setup(second, openai(fake), mcp={"servers": {"new": everything(mcp_deps)}})
    assert resume_cmd(second, f"PseudoResume {sid}")["ok"] is True
    fake.push_text("Still here.")
    type_message(second, "go on")
    wait_turns(second, 1)
    assert fake.errors == [], fake.errors
    request = fake.requests[-1]  # the body as the fake parsed it from the request's bytes
    offered = [t["function"]["name"] for t in request["tools"]]
    assert "mcp__new__echo" in offered and not any(o.startswith("mcp__old__") for o in offered), offered
    # its old call and result are history, sent as they were
    calls = [c["function"]["name"] for m in request["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert calls == ["mcp__old__echo"], calls
    tool_msg = [m for m in request["messages"] if m["role"] == "tool"][0]
    assert "from the old server" in tool_msg["content"], tool_msg


def test_the_main_loop_never_waits_for_servers_starting_at_the_first_chat(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    time_env = {"PYTHONPATH": str(mcp_deps / "python")}
    servers = {
        "everything": everything(mcp_deps),
        "time": {"command": "python3", "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"], "env": time_env},
        "slow": {"command": "sh", "args": ["-c", f"sleep 1; exec {everything(mcp_deps)['command']}"]},
    }
    fake.push_text("With three servers.")
    setup(nvim, openai(fake), mcp={"servers": servers})
    with main_loop_watch(nvim, "a first chat starting three MCP servers"):
        type_message(nvim, "hello")
        wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors
    assert [s["state"] for s in statuses(nvim)] == ["running", "running", "running"], statuses(nvim)


def test_a_workspace_http_server_is_asked_about_with_its_url_and_connected_after_yes(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, http_everything: str
) -> None:
    server = {"type": "http", "url": http_everything, "headers": {"X-Token": "${PSEUDOCLAUDE_TEST_TOKEN:-none}"}}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"web": server}}))
    hold_questions(nvim)
    setup(nvim, openai(fake))
    fake.push_text("Hello with the web tools.")
    type_message(nvim, "hello")
    wait_for(lambda: nvim.lua("return vim.g.pc_consent_asked") == 1, what="the consent question")
    prompt = nvim.lua("return vim.g.pc_consent_prompt")
    assert http_everything in prompt and "X-Token" in prompt and "none" not in prompt, prompt
    assert fake.requests == []
    answer(nvim, "Yes")
    wait_turns(nvim, 1)
    assert fake.errors == [], fake.errors
    offered = [t["function"]["name"] for t in fake.requests[0]["tools"]]
    assert "mcp__web__echo" in offered, offered
    assert statuses(nvim)[0]["state"] == "running", statuses(nvim)


def test_an_mcp_resource_is_completed_and_attached_by_server_and_uri(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, mcp_deps: Path
) -> None:
    fake.push_text("Started.")
    fake.push_text("Read it.")
    setup(nvim, openai(fake), mcp={"servers": {"everything": everything(mcp_deps)}})
    complete = "return require('pseudoclaude.context').complete(0, ...)"
    assert not any(":" in i["word"] for i in nvim.lua(complete, "everything:")), "nothing listed before the servers run"
    type_message(nvim, "hello")
    wait_turns(nvim, 1)
    doc = "demo://resource/static/document/architecture.md"
    items = nvim.lua(complete, "everything:demo://resource/static/document/arch")
    assert [i["word"] for i in items] == [f"everything:{doc}"], items
    assert items[0]["menu"] == "everything", items
    assert any(i["word"] == f"everything:{doc}" for i in nvim.lua(complete, "ev")), "listed beside the files"

    type_message(nvim, f"summarize @everything:{doc}, and @everything:demo://no/such/thing.")
    wait_turns(nvim, 2)
    assert fake.errors == [], fake.errors
    sent = [m for m in fake.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
    text = (mcp_deps / "npm/node_modules/@modelcontextprotocol/server-everything/dist/docs/architecture.md").read_text()
    opening = f'<attachment kind="resource" path="everything:{doc}" mime="text/markdown">'
    assert opening in sent, sent[:2000]
    assert text.strip().splitlines()[0] in sent
    assert 'path="everything:demo://no/such/thing" error="the MCP server' in sent, sent[-600:]
