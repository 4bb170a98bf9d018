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
    assert "OK no Unix socket (seccomp)" in report, report
    assert "OK secret-looking variables (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH)" in report, report
    assert "OK ~/.ssh, ~/.aws, ~/.gnupg and the other secret stores read as empty (an empty read-only folder" in report
    assert "OK nothing outlives its command: each runs as the first process of its own PID namespace" in report, report
    n.lua("require('pseudoclaude').setup({ sandbox = { unix_sockets = true } })")
    report = section(health_report(n), "pseudoclaude: command sandbox")
    assert "WARNING Unix sockets open (sandbox.unix_sockets = true): commands can connect to the editor's own server" \
        " and drive the editor itself" in report, report
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
    assert "the folders above them (~, /) cannot be listed inside the sandbox" in report, report
    assert "OK nothing outlives its command: its Landlock domain is ended with it" in report, report


def test_sandbox_options_are_checked(nvim: Neovim) -> None:
    for opts, expect in (
        ({"enable": False}, "sandbox.enable: unknown option (known: enabled, network, writable, unix_sockets, env, deny_read)"),
        ({"network": "yes"}, "sandbox.network"),
        ({"network": {"allow": "crates.io"}}, "sandbox.network"),
        ({"network": {"hosts": ["crates.io"]}}, "sandbox.network"),
        ({"unix_sockets": "yes"}, "sandbox.unix_sockets"),
        ({"env": {"keep": "GITHUB_TOKEN"}}, "sandbox.env"),
        ({"env": {"set": {"A": 1}}}, "sandbox.env"),
        ({"env": {"drop": []}}, "sandbox.env"),
        ({"deny_read": "~/.ssh"}, "sandbox.deny_read"),
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


MSGPACK_RPC = """
import socket, sys
def s(b):
    b = b.encode()
    return (bytes([0xa0 | len(b)]) if len(b) < 32 else bytes([0xd9, len(b)])) + b
c = socket.socket(socket.AF_UNIX)
c.connect(sys.argv[1])
# [0, msgid, "nvim_command", [cmd]]: a request, as any msgpack-RPC client sends it
c.sendall(bytes([0x94, 0x00, 0x01]) + s("nvim_command") + bytes([0x91]) + s(sys.argv[2]))
print("drove the editor:", c.recv(64))
"""


def test_a_command_cannot_drive_the_editor_through_its_own_socket(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, tmp_path: Path
) -> None:
    from conftest import NVIM

    (workspace / "rpc.py").write_text(MSGPACK_RPC)
    server = nvim.api.eval("v:servername")
    assert not server.startswith(str(workspace))
    rpc_marker, remote_marker = tmp_path / "rpc", tmp_path / "remote"
    cmd = (f"python3 rpc.py {server} \"call writefile([], '{rpc_marker}')\"; "
           f"{NVIM} --server {server} --remote-expr \"writefile([], '{remote_marker}')\"; echo tried")
    setup(nvim, openai(fake), approve={"run_command": True})
    answer_approvals(nvim)
    told = run_turn(nvim, fake, {"command": cmd})
    assert "tried" in told and "drove the editor" not in told, told
    assert not rpc_marker.exists() and not remote_marker.exists()
    assert "blocked by the sandbox: Unix sockets" in told, told
    # sandbox.unix_sockets = true lifts it, and the approval says what that means.
    nvim.lua("require('pseudoclaude').setup(...)",
             {"provider": openai(fake), "sandbox": {"unix_sockets": True}})
    nvim.api.command("PseudoNew")
    answer_approvals(nvim, "Yes")
    told = run_turn(nvim, fake, {"command": cmd}, turns=2)
    assert "drove the editor" in told and rpc_marker.exists() and remote_marker.exists(), told
    prompt = nvim.lua("return vim.g.pc_prompts[1]")
    assert "sandbox.unix_sockets = true" in prompt and "drive the editor itself" in prompt, prompt


def test_secrets_stay_out_of_the_environment_the_stores_and_the_log(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY----- pc-secret-key\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = pc-secret-aws\n")
    (home / "notes.txt").write_text("ordinary file\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GITHUB_TOKEN", "pc-secret-gh")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "pc-secret-aws-env")
    monkeypatch.setenv("NPM_TOKEN", "pc-kept-npm")
    monkeypatch.setenv("ORDINARY_VAR", "plain")
    n = start_nvim()
    setup(n, openai(fake), approve={"run_command": True},
          sandbox={"env": {"keep": ["NPM_TOKEN"], "set": {"CI": "1"}}})
    answer_approvals(n)
    told = run_turn(n, fake, {"command": "cat ~/.ssh/id_ed25519 ~/.aws/credentials; cat ~/notes.txt; env | sort"})
    assert "pc-secret" not in told, told
    assert "ordinary file" in told and "ORDINARY_VAR=plain" in told and "NPM_TOKEN=pc-kept-npm" in told, told
    assert "\nCI=1\n" in told, told
    assert f"these read as empty (secret stores, sandbox.deny_read): {home}/.ssh, {home}/.aws" in told, told
    log = Path(n.lua("return require('pseudoclaude').current().jsonl")).read_text()
    assert "pc-secret" not in log


def test_nothing_a_command_started_outlives_it(nvim: Neovim, workspace: Path, fake: FakeOpenAI) -> None:
    marker = f"1000.{os.getpid()}"
    setup(nvim, openai(fake), approve={"run_command": True})
    answer_approvals(nvim)
    told = run_turn(nvim, fake, {"command": f"setsid sleep {marker}1 >/dev/null 2>&1 & "
                                            f"nohup sleep {marker}2 >/dev/null 2>&1 & "
                                            f"sh -c 'sleep {marker}3 >/dev/null 2>&1 &'; echo started"})
    assert "started" in told, told

    def running() -> list[str]:
        found = []
        for p in Path("/proc").iterdir():
            try:
                line = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError, ValueError):
                continue
            if marker in line and state not in ("Z", "X"):
                found.append(line)
        return found

    assert running() == []


def test_the_network_allowlist_lets_through_only_its_hosts_https_included(
    nvim: Neovim, workspace: Path, fake: FakeOpenAI, tmp_path: Path
) -> None:
    import http.server
    import ssl
    import threading

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = f"hello from {self.server.server_port}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem")], check=True, capture_output=True)
    tls = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    for s in (tls, other):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tp, op = tls.server_port, other.server_port
    setup(nvim, openai(fake), approve={"run_command": True}, sandbox={"network": {"allow": [f"127.0.0.1:{tp}"]}})
    answer_approvals(nvim)
    told = run_turn(nvim, fake, {"command": f"curl -sSk https://127.0.0.1:{tp}/; echo; curl -sS http://127.0.0.1:{op}/; "
                                            f"curl -sS --noproxy '*' http://127.0.0.1:{tp}/ || echo direct-failed"})
    tls.shutdown()
    other.shutdown()
    assert f"hello from {tp}" in told, told
    assert f"hello from {op}" not in told, told
    assert f"blocked by the sandbox: 127.0.0.1:{op} is not in sandbox.network's allow list" in told, told
    assert "direct-failed" in told, told
    assert nvim.lua("return vim.g.pc_asked") == 0
    rec = logged_results(nvim)[-1]["sandbox"]
    assert rec["hosts"] == [f"127.0.0.1:{tp}"] and rec["refused_hosts"] == [f"127.0.0.1:{op}"], rec
    report = section(health_report(nvim), "pseudoclaude: command sandbox")
    assert f"OK network only to 127.0.0.1:{tp}, through the plugin's proxy" in report, report


# Run in the sandbox by the next test: the proxy's port (from $HTTP_PROXY) written to port.txt, then, once the test
# says go, a direct TCP connection to another host of the loopback (127.0.0.2) on that port and on another one, and a
# TCP Fast Open send.
DIRECT_PROBE = """
import os, socket, sys, time, urllib.parse
port = urllib.parse.urlsplit(os.environ["HTTP_PROXY"]).port
open("port.txt", "w").write(str(port))
for _ in range(600):
    if os.path.exists("go.txt"):
        break
    time.sleep(0.05)
for p in (port, int(sys.argv[1])):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(("127.0.0.2", p))
        print(f"direct 127.0.0.2:{p} connected: {s.recv(64).decode()}")
    except OSError as e:
        print(f"direct 127.0.0.2:{p} refused: {e}")
# TCP Fast Open connects inside the send, where Landlock's connect rule may not look (landlock-lsm/linux#41)
s = socket.socket()
s.settimeout(5)
try:
    s.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.2", int(sys.argv[1])))
    print("fast open connected")
except OSError as e:
    print(f"fast open refused: {e}")
"""


def test_the_fallbacks_allowlist_refuses_a_direct_connection_to_another_host_on_the_proxys_port(
    start_nvim: Any, workspace: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Landlock alone (no user namespace: forced here) matches ports, not addresses: it opens the allowlist proxy's
    port on every host. The core checks each connect (src/sandbox/guard.rs): a listener on 127.0.0.2 at the proxy's
    port is not reached, the proxy is, and a TCP Fast Open send is refused by the seccomp filter."""
    import http.server
    import threading

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = b"hello through the proxy"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    allowed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=allowed.serve_forever, daemon=True).start()
    tp = allowed.server_port
    elsewhere = socket.create_server(("127.0.0.2", 0))  # another host, another port: Landlock refuses it
    other_port = elsewhere.getsockname()[1]
    listeners: list[socket.socket] = [elsewhere]

    def serve_the_proxys_port() -> None:
        """Once the command said the proxy's port: another host of the loopback listens on it, and answers."""
        for _ in range(1200):
            if (workspace / "port.txt").exists() and (workspace / "port.txt").read_text():
                break
            threading.Event().wait(0.05)
        port = int((workspace / "port.txt").read_text())
        lsn = socket.create_server(("127.0.0.2", port))
        listeners.append(lsn)
        (workspace / "go.txt").write_text("go")
        lsn.settimeout(5)
        try:
            conn, _ = lsn.accept()
            conn.sendall(b"not the proxy")
            conn.close()
        except OSError:
            pass

    monkeypatch.setenv("PSEUDOCLAUDE_SANDBOX_SIMULATE", "landlock")
    n = start_nvim()
    (workspace / "probe.py").write_text(DIRECT_PROBE)
    setup(n, openai(fake), sandbox={"network": {"allow": [f"127.0.0.1:{tp}"]}})
    answer_approvals(n, "Yes")
    helper = threading.Thread(target=serve_the_proxys_port, daemon=True)
    helper.start()
    try:
        told = run_turn(n, fake, {"command": f"curl -sS http://127.0.0.1:{tp}/; echo; python3 probe.py {other_port}"})
    finally:
        helper.join(timeout=20)
        allowed.shutdown()
        for s in listeners:
            s.close()
    port = int((workspace / "port.txt").read_text())
    assert "hello through the proxy" in told, told  # the allowlist itself works, through the guard
    assert f"direct 127.0.0.2:{other_port} refused: [Errno 13] Permission denied" in told, told  # Landlock's refusal
    # the proxy's port on another host: refused by the guard, as Landlock refuses (before, it was reached)
    assert f"direct 127.0.0.2:{port} refused: [Errno 13] Permission denied" in told, told
    assert "not the proxy" not in told, told
    # and a Fast Open send, refused by the seccomp filter (EPERM) before Landlock is asked (EACCES, where it looks)
    assert "fast open refused: [Errno 1] Operation not permitted" in told, told
    assert n.lua("return vim.g.pc_asked") == 1  # asked as any command is (approve.run_command is off)
    report = section(health_report(n), "pseudoclaude: command sandbox")
    assert f"OK network only to 127.0.0.1:{tp}, through the plugin's proxy (sandbox.network.allow): without a " \
           "network namespace Landlock opens the proxy's port on every host" in report, report
