"""Sessions made by the real agents, offline, for the tests of other agents' stores (issue 46).

    info = make_session("gemini", home, workspace, "Remember the word PLUMTREE.")
    info = make_session("qwen", home, workspace, "Write the word FIG into notes.txt.", tools=True)
    info = make_session("pi", home, workspace, "And the word DATE?", resume=True)   # the same session goes on

runs the real agent once, headless (`gemini -p`, `qwen -p`, `opencode run`, `pi -p`, `codex exec`, Claude Code's
`cli.js -p`; installed by scripts/ensure-agents and scripts/ensure-acp), in `workspace`, with HOME and the XDG
folders at `home`, against a fake model server of fake_llm.py on 127.0.0.1 that answers by rule (`answer`): a text
naming the prompt's upper-case words, or, with `tools=True`, one call of the agent's own file-writing tool (Codex:
its shell; the words into `notes.txt`) and then a text. The agent and its fake run together in a network namespace of their own (`unshare -n`:
only loopback, so no telemetry, update check or real API is reached) whenever the machine allows one, which it
does as root: this module runs itself as the launcher inside it (`python3 agent_stores.py --child`, the request on
stdin, the result on stdout). `info` says where the session landed:

    {"agent", "version", "home", "workspace", "session_id", "store" (its file, or opencode's database),
     "seconds" (the agent's run), "isolated" (ran in a namespace), "requests" (model calls answered)}

A run that fails (the agent's exit code, a request the fake refused, no session in the store) raises
`AgentRunError` with the agent's output.

The `agent_sessions` fixture makes one set per agent once (`SETS`: a text session, a tool-call session, a
two-turn session; Gemini's also a rewound one) in `.deps/agents/stores/<agent>-<version>-<SETS_VERSION>/`, kept
across runs until the agent's version or `SETS_VERSION` changes, so the suite pays each agent's start-up once. The set is shared: tests
read it, and copy `home` (never the workspace, whose path the stores hold) before changing anything. A process that
reads a set holds it (a shared lock on its `.readers` file, `hold`) so that no other removes it meanwhile.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
AGENTS = ("claude", "codex", "gemini", "qwen", "opencode", "pi")
MODEL = "fake-model"
API_KEY = "sk-fake-key"
NOTES = "notes.txt"  # the file a tool-call session writes, in the workspace
TIMEOUT = 300  # seconds for one run of an agent (node starts slowly on a loaded machine)


class AgentRunError(AssertionError):
    pass


# -- the agents: commands, homes, tools --------------------------------------------------------------------------


def ensure_agents() -> Path:
    """`.deps/agents` after scripts/ensure-agents made sure the pinned agents are there."""
    out = subprocess.run([str(ROOT / "scripts" / "ensure-agents")], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise AgentRunError(f"scripts/ensure-agents failed: {out.stderr}")
    return Path(out.stdout.strip())


def claude_cli() -> Path:
    """Claude Code's `cli.js`, as the Claude Agent SDK that claude-agent-acp bundles has it (scripts/ensure-acp)."""
    out = subprocess.run([str(ROOT / "scripts" / "ensure-acp")], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise AgentRunError(f"scripts/ensure-acp failed: {out.stderr}")
    return Path(out.stdout.strip()) / "node_modules" / "@anthropic-ai" / "claude-agent-sdk" / "cli.js"


def version(agent: str) -> str:
    """The installed version of `agent` (from its package.json: no start-up paid)."""
    if agent == "claude":
        return json.loads((claude_cli().parent / "package.json").read_text())["claudeCodeVersion"]
    deps = ensure_agents()
    package = {"codex": "codex/node_modules/@openai/codex",
               "gemini": "gemini/node_modules/@google/gemini-cli", "qwen": "qwen/node_modules/@qwen-code/qwen-code",
               "opencode": "opencode/node_modules/opencode-ai",
               "pi": "pi/node_modules/@earendil-works/pi-coding-agent"}[agent]
    return json.loads((deps / package / "package.json").read_text())["version"]


# The tool each agent writes a file with, and its arguments for `path` and `text`.
WRITE_TOOL = {
    "claude": ("Write", lambda p, t: {"file_path": p, "content": t}),
    "gemini": ("write_file", lambda p, t: {"file_path": p, "content": t}),
    "qwen": ("write_file", lambda p, t: {"file_path": p, "content": t}),
    "opencode": ("write", lambda p, t: {"filePath": p, "content": t}),
    "pi": ("write", lambda p, t: {"path": p, "content": t}),
    # Codex writes files with its shell (or apply_patch); its shell tool is `exec_command` here
    "codex": ("exec_command", lambda p, t: {"cmd": f"printf '%s' '{t}' > '{p}'"}),
}


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))


def base_env(home: Path) -> dict[str, str]:
    """PATH, the locale, HOME and XDG folders under `home`; nothing else of ours (no real key reaches an agent)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
                "XDG_STATE_HOME": str(home / ".local/state"), "XDG_CACHE_HOME": str(home / ".cache"),
                "NO_COLOR": "1", "CI": "1"})
    return env


def agent_env(agent: str, home: Path, base_url: str) -> dict[str, str]:
    """The environment that runs `agent` offline against the fake model server at `base_url` (FakeAnthropic's for
    Claude Code, FakeGemini's for Gemini, FakeOpenAI's for the others), after writing the agent's settings under
    `home`: its HOME and XDG folders, the fake's URL and key, and what keeps it off the network and quiet. The same
    for a headless run (`run_command`) and for its ACP server (`acp_command`, started by a test's editor)."""
    env = base_env(home)
    if agent == "claude":
        env.update({"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1", "IS_SANDBOX": "1",
                    "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": API_KEY})
    elif agent == "gemini":
        write_json(home / ".gemini" / "settings.json", {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True}, "ide": {"enabled": False}})
        env.update({"GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_CLI_NO_RELAUNCH": "true",
                    "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    elif agent == "qwen":
        write_json(home / ".qwen" / "settings.json", {
            "security": {"auth": {"selectedType": "openai"}},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True}, "ide": {"enabled": False}})
        env.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": API_KEY, "OPENAI_MODEL": MODEL})
    elif agent == "opencode":
        write_json(home / ".config" / "opencode" / "opencode.json", {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                  "options": {"baseURL": base_url, "apiKey": API_KEY},
                                  "models": {MODEL: {"name": "Fake model", "tool_call": True}}}},
            "model": f"fake/{MODEL}", "small_model": f"fake/{MODEL}", "autoupdate": False, "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"}})
        env.update({"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
                    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
                    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1"})
    elif agent == "pi":
        write_json(home / ".pi" / "agent" / "models.json", {"providers": {"fake": {
            "baseUrl": base_url, "api": "openai-completions", "apiKey": API_KEY,
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": MODEL}]}}})
        # the default model, for the `pi` that pi-acp starts (a headless run names it on its command line)
        write_json(home / ".pi" / "agent" / "settings.json", {"defaultProvider": "fake", "defaultModel": MODEL})
        bin_dir = ensure_agents() / "bin"
        env.update({"PATH": f"{bin_dir}:{env.get('PATH', '')}", "PI_ACP_PI_COMMAND": str(bin_dir / "pi"),
                    "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"})
    elif agent == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(f"""model = "{MODEL}"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake"
base_url = "{base_url}"
env_key = "FAKE_OPENAI_API_KEY"
wire_api = "responses"

[analytics]
enabled = false
""")
        env.update({"CODEX_HOME": str(codex_home), "FAKE_OPENAI_API_KEY": API_KEY})
    else:
        raise ValueError(f"unknown agent {agent!r} (known: {', '.join(AGENTS)})")
    return env


def run_command(agent: str, prompt: str, tools: bool = False, resume: bool = False) -> list[str]:
    """The headless command line of one turn: `tools` lets the agent's tools run unasked, `resume` goes on with the
    workspace's last session."""
    if agent == "claude":
        return ["node", str(claude_cli()), "-p", prompt, "--dangerously-skip-permissions"] + \
            (["--continue"] if resume else [])
    bin_dir = ensure_agents() / "bin"
    if agent == "gemini":
        return [str(bin_dir / "gemini"), "-p", prompt] + (["--yolo"] if tools else []) + \
            (["--resume", "latest"] if resume else [])
    if agent == "qwen":
        return [str(bin_dir / "qwen"), "-p", prompt] + (["--yolo"] if tools else []) + \
            (["--continue"] if resume else [])
    if agent == "opencode":
        return [str(bin_dir / "opencode"), "run"] + (["--continue"] if resume else []) + prompt.split()
    if agent == "pi":
        return [str(bin_dir / "pi"), "--provider", "fake", "--model", MODEL, "-p", prompt] + \
            (["--continue"] if resume else [])
    if agent == "codex":
        return [str(bin_dir / "codex"), "exec"] + (["resume", "--last"] if resume else []) + \
            ["--skip-git-repo-check", prompt]
    raise ValueError(f"unknown agent {agent!r} (known: {', '.join(AGENTS)})")


def acp_command(agent: str) -> list[str]:
    """The agent's ACP server (stdio), to run with `agent_env`: what the built-in `agents.NAME` entries start."""
    if agent == "claude":
        return [str(claude_cli().parents[2] / ".bin" / "claude-agent-acp")]
    bin_dir = ensure_agents() / "bin"
    return {"gemini": [str(bin_dir / "gemini"), "--acp"], "qwen": [str(bin_dir / "qwen"), "--acp"],
            "opencode": [str(bin_dir / "opencode"), "acp"], "pi": [str(bin_dir / "pi-acp")],
            "codex": [str(bin_dir / "codex-acp")]}[agent]


# -- the answers: by rule, whatever side requests (titles, routing, memory) come first --------------------------------


def words(text: str) -> list[str]:
    """The prompt's words in capitals (the ones a test looks for in the store)."""
    return re.findall(r"\b[A-Z][A-Z0-9]{3,}\b", text)


def answer(agent: str, prompt: str, workspace: Path, tools: bool, last: str, offered: list[str]) -> dict[str, Any]:
    """What the model says to a request whose last message is `last` (`"tool"` after a tool's result, else the user's
    text) and which offers the tools `offered`: the write call when the request is the turn of `prompt` with
    `tools`, a text naming the words otherwise (side requests too: a title is the words)."""
    # the prompt's words when the request carries it, else the last message's (a terminal driven by `keys`)
    said = " ".join(words(prompt if (prompt and prompt in last) or last == "tool" else last))
    if last == "tool":
        return {"text": f"Done: {NOTES} holds {said}."}
    name, args = WRITE_TOOL[agent]
    if tools and prompt in last and name in offered:
        return {"text": "Writing it.", "tools": [("call_fake_1", name, args(str(workspace / NOTES), said + "\n"))]}
    return {"text": f"Noted: {said}." if said else "Noted."}


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    return ""


def openai_view(body: dict[str, Any]) -> tuple[str, list[str]]:
    last = body["messages"][-1]
    offered = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
    return ("tool" if last.get("role") == "tool" else text_of(last.get("content"))), offered


def gemini_view(body: dict[str, Any]) -> tuple[str, list[str]]:
    parts = body["contents"][-1]["parts"]
    offered = [f.get("name", "") for t in body.get("tools") or [] for f in t.get("functionDeclarations") or []]
    if any("functionResponse" in p for p in parts):
        return "tool", offered
    return "\n".join(p.get("text", "") for p in parts), offered


def responses_view(body: dict[str, Any]) -> tuple[str, list[str]]:
    last = body["input"][-1] if body["input"] else {}
    offered = [t.get("name", "") for t in body.get("tools") or []]
    if last.get("type") in ("function_call_output", "custom_tool_call_output"):
        return "tool", offered
    return text_of(last.get("content")), offered


def anthropic_view(body: dict[str, Any]) -> tuple[str, list[str]]:
    content = body["messages"][-1]["content"]
    offered = [t.get("name", "") for t in body.get("tools") or []]
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return "tool", offered
    return text_of(content), offered


# -- where the session landed -------------------------------------------------------------------------------------


def store_files(agent: str, home: Path) -> list[Path]:
    pattern = {"claude": ".claude/projects/*/*.jsonl", "codex": ".codex/sessions/*/*/*/rollout-*.jsonl", "gemini": ".gemini/tmp/*/chats/*.jsonl",
               "qwen": ".qwen/projects/*/chats/*.jsonl", "pi": ".pi/agent/sessions/*/*.jsonl"}[agent]
    return sorted(home.glob(pattern), key=lambda p: p.stat().st_mtime)


def gemini_messages(path: Path) -> int:
    """How many message records a Gemini session file holds (lines with an `id` and a `type`: neither a header nor
    a `$set`)."""
    count = 0
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        count += isinstance(r, dict) and "id" in r and "type" in r
    return count


def opencode_db(home: Path) -> Path:
    return home / ".local" / "share" / "opencode" / "opencode.db"


def landed(agent: str, home: Path, workspace: Path) -> tuple[Path, str]:
    """The store and id of the session last written for `workspace`."""
    if agent == "opencode":
        db = opencode_db(home)
        if not db.exists():
            raise AgentRunError(f"opencode wrote no database at {db}")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT id FROM session WHERE directory = ? ORDER BY time_updated DESC LIMIT 1",
                              (str(workspace),)).fetchone()
        finally:
            con.close()
        if not row:
            raise AgentRunError(f"no opencode session of {workspace} in {db}")
        return db, row[0]
    files = store_files(agent, home)
    if agent == "gemini":
        # an interactive `--resume` leaves a file of its own start (a header and the session context, no message)
        # beside the one it went on in, with the same id: the session is the newest file holding a message
        files = [f for f in files if gemini_messages(f)]
    if not files:
        raise AgentRunError(f"{agent} wrote no session file under {home}")
    path = files[-1]
    if agent in ("claude", "qwen"):
        return path, path.stem
    first = json.loads(path.read_text().splitlines()[0])
    if agent == "codex":  # a `session_meta` record
        return path, first["payload"]["id"]
    return path, first.get("sessionId") or first.get("id")


# -- the run --------------------------------------------------------------------------------------------------------


def loopback_up() -> None:
    """Brings `lo` up in a new network namespace (it starts down), without needing `ip`."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifreq = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 0x1, b""))  # SIOCSIFFLAGS: IFF_UP
    finally:
        s.close()


def run_here(spec: dict[str, Any]) -> dict[str, Any]:
    """One run of the agent with its fake, in this process's network (the launcher's namespace, or none)."""
    sys.path.insert(0, str(HERE))
    from fake_llm import FakeAnthropic, FakeGemini, FakeOpenAI, FakeResponses

    agent, prompt, tools = spec["agent"], spec["prompt"], spec["tools"]
    home, workspace = Path(spec["home"]), Path(spec["workspace"])

    def rule(view: Any) -> Any:
        def respond(body: dict[str, Any]) -> dict[str, Any]:
            said = answer(agent, prompt, workspace, tools, *view(body))
            if spec.get("slow"):
                said = {**said, "text": said["text"] + " and" * 60, "delay": spec["slow"]}
            return said
        return respond

    if agent == "claude":
        fake: Any = FakeAnthropic(responder=rule(anthropic_view))
    elif agent == "gemini":
        fake = FakeGemini(responder=rule(gemini_view))
    elif agent == "codex":
        fake = FakeResponses(responder=rule(responses_view))
    else:
        fake = FakeOpenAI(unstreamed=True, responder=rule(openai_view))
    try:
        env = agent_env(agent, home, fake.base_url)
        cmd = run_command(agent, prompt, tools, spec["resume"])
        start = time.monotonic()
        if spec.get("keys") is not None:
            cmd = [c for c in cmd if c not in ("-p", prompt)]  # interactive: the terminal is driven instead
            code, stdout, stderr = drive(cmd, workspace, env, spec["keys"])
        else:
            try:
                out = subprocess.run(cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                                     stdin=subprocess.DEVNULL, check=False)
                code, stdout, stderr = out.returncode, out.stdout, out.stderr
            except subprocess.TimeoutExpired as e:
                code, stdout, stderr = "timeout", str(e.stdout or ""), str(e.stderr or "")
        seconds = time.monotonic() - start
    finally:
        fake.close()
    if spec.get("dump"):  # what the agent asked, for a person finding out why a run went wrong
        Path(spec["dump"]).write_text(json.dumps({"requests": fake.requests, "paths": fake.paths}, indent=1))
    return {"code": code, "stdout": stdout[-4000:], "stderr": stderr[-4000:], "seconds": round(seconds, 2),
            "errors": fake.errors, "paths": fake.paths, "requests": len(fake.requests),
            "side_requests": len(getattr(fake, "side_requests", [])),
            "unstreamed": sum(1 for r in fake.requests if r.get("stream") is not True)}


def drive(cmd: list[str], workspace: Path, env: dict[str, str], keys: list[list[str]]) -> tuple[Any, str, str]:
    """Runs `cmd` in a terminal (a tmux server of its own, 200x50) and plays `keys`: `["wait", TEXT]` waits until
    the screen shows TEXT (60 s at most), `["until", TEXT, KEY...]` too, typing the keys every 4 s until then (keys
    a loaded machine's agent may have missed; `-l TEXT`: the input line emptied first, then TEXT typed again),
    `["send", KEY...]` types tmux keys (`Enter`, `Escape`, `Up`, `C-c`; a
    literal text with `-l` first), `["sleep", SECONDS]`. Returns ("ok" or the step that timed out, the last screen,
    "")."""
    sock_dir = Path(tempfile.mkdtemp(prefix="agent-stores-tmux-"))  # its socket, removed with it
    tmux = ["tmux", "-S", str(sock_dir / "socket"), "-f", "/dev/null"]
    shell_cmd = " ".join(f"'{c}'" for c in cmd)
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", "-c", str(workspace),
                    f"env -i {' '.join(f'{k}={v!r}' for k, v in env.items())} {shell_cmd}; sleep 2"], check=True)
    screen = ""
    code: Any = 0
    try:
        for step in keys:
            if step[0] in ("wait", "until"):
                deadline = time.monotonic() + 60
                pressed = time.monotonic()
                while step[1] not in screen:
                    if time.monotonic() > deadline:
                        return f"timed out waiting for {step[1]!r}", screen, ""
                    if step[0] == "until" and time.monotonic() >= pressed:
                        if step[2] == "-l":  # text: typed again into an emptied input line
                            subprocess.run([*tmux, "send-keys", "-t", "0", "C-a", "C-k"], check=True)
                        subprocess.run([*tmux, "send-keys", "-t", "0", *step[2:]], check=True)
                        pressed = time.monotonic() + 4
                    time.sleep(0.2)
                    screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", "0"], capture_output=True,
                                            text=True, check=False).stdout
            elif step[0] == "send":
                subprocess.run([*tmux, "send-keys", "-t", "0", *step[1:]], check=True)
                screen = ""
            elif step[0] == "sleep":
                time.sleep(float(step[1]))
        screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", "0"], capture_output=True, text=True,
                                check=False).stdout
        return code, screen, ""
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
        shutil.rmtree(sock_dir, ignore_errors=True)


def can_isolate() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False).returncode == 0


class Offline:
    """A network namespace with only loopback, for an agent that is not started here but by the editor under test
    (its ACP server): `ns.make(FakeGemini, responder=...)` makes a fake model server that listens inside it (its
    socket made on a thread that entered the namespace), and `ns.wrap(command)` is the agent's command run inside it
    (`nsenter --net`), so the agent reaches the fake and nothing else. Where the machine allows no namespace
    (`can_isolate()`), both are the plain ones. Held by a sleeping process of its own; `close()` ends it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["unshare", "-n", "sleep", "infinity"]) if can_isolate() else None
        self.path = f"/proc/{self.proc.pid}/ns/net" if self.proc else ""
        if self.proc:
            mine = os.stat("/proc/self/ns/net").st_ino
            deadline = time.monotonic() + 10
            while os.stat(self.path).st_ino == mine:  # unshare has not entered its namespace yet
                if time.monotonic() > deadline:
                    raise AgentRunError("unshare -n made no network namespace")
                time.sleep(0.02)
            self.inside(loopback_up)

    def inside(self, make: Any, *args: Any, **kwargs: Any) -> Any:
        """`make(*args, **kwargs)` on a thread that entered the namespace (a network namespace is a thread's own: the
        sockets and threads it makes stay in it)."""
        if not self.proc:
            return make(*args, **kwargs)
        import ctypes
        import threading

        out: dict[str, Any] = {}

        def run() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(self.path, os.O_RDONLY)
            try:
                if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                    raise OSError(ctypes.get_errno(), "setns")
                out["value"] = make(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
                out["error"] = e
            finally:
                os.close(fd)

        t = threading.Thread(target=run)
        t.start()
        t.join()
        if "error" in out:
            raise out["error"]
        return out["value"]

    make = inside

    def wrap(self, command: list[str]) -> list[str]:
        return ["nsenter", f"--net={self.path}", "--", *command] if self.proc else command

    def close(self) -> None:
        if self.proc:
            self.proc.kill()
            self.proc.wait()


class Running:
    """An agent's run under way (`start_session`); `wait()` returns its info as `make_session` does, or raises."""

    def __init__(self, agent: str, home: Path, workspace: Path, prompt: str, spec: dict[str, Any]) -> None:
        self.agent, self.home, self.workspace, self.prompt = agent, home, workspace, prompt
        self.version = version(agent)  # installs first: the registry is out of the namespace's reach
        self.isolated = can_isolate()
        launcher = [sys.executable, str(Path(__file__).resolve()), "--child"]
        self.proc = subprocess.Popen((["unshare", "-n"] if self.isolated else []) + launcher, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(spec))
        self.proc.stdin.close()
        self.proc.stdin = None  # written: communicate() has nothing more to send

    def wait(self) -> dict[str, Any]:
        try:
            stdout, stderr = self.proc.communicate(timeout=TIMEOUT + 60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            stdout, stderr = self.proc.communicate()
        try:
            result = json.loads(stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            raise AgentRunError(f"the launcher of {self.agent} failed: {stderr[-4000:]}") from None
        if result["code"] != 0 or result["errors"]:
            raise AgentRunError(
                f"{self.agent} {self.version} ({' '.join(words(self.prompt))}): exit {result['code']}, fake errors "
                f"{result['errors']}, paths {result['paths']}\nstdout: {result['stdout']}\nstderr: {result['stderr']}")
        store, session_id = landed(self.agent, self.home, self.workspace)
        return {"agent": self.agent, "version": self.version, "home": str(self.home),
                "workspace": str(self.workspace), "session_id": session_id, "store": str(store),
                "seconds": result["seconds"], "isolated": self.isolated, "requests": result["requests"],
                "side_requests": result["side_requests"], "unstreamed": result["unstreamed"],
                "stdout": result["stdout"]}


def start_session(agent: str, home: Path | str, workspace: Path | str, prompt: str, tools: bool = False,
                  resume: bool = False, keys: list[list[str]] | None = None, slow: float = 0.0) -> Running:
    """`make_session` without waiting for its end: for a test that reads the store while the agent writes it.
    `slow`: each answer is 60 words longer, streamed `slow` seconds apart."""
    home, workspace = Path(home).resolve(), Path(workspace).resolve()
    home.mkdir(parents=True, exist_ok=True)
    workspace.mkdir(parents=True, exist_ok=True)
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r} (known: {', '.join(AGENTS)})")
    spec = {"agent": agent, "home": str(home), "workspace": str(workspace), "prompt": prompt, "tools": tools,
            "resume": resume, "keys": keys, "slow": slow, "dump": os.environ.get("AGENT_STORES_DUMP")}
    return Running(agent, home, workspace, prompt, spec)


def make_session(agent: str, home: Path | str, workspace: Path | str, prompt: str, tools: bool = False,
                 resume: bool = False, keys: list[list[str]] | None = None) -> dict[str, Any]:
    """Runs the real `agent` once on `prompt` (see the module's doc); `resume`: goes on with the workspace's last
    session (`--resume latest`, `--continue`) instead of starting one; `keys`: runs it in a terminal instead of
    headless, played as `drive` says (`rewind_keys`)."""
    return start_session(agent, home, workspace, prompt, tools, resume, keys).wait()


# The sessions of a set, each a list of turns (prompt, tools, resume): a text session, a tool-call session and a
# two-turn one (the second turn goes on in the same session). The words in capitals are what tests look for.
SETS: dict[str, list[tuple[str, bool, bool]]] = {
    "text": [("Remember the word PLUMTREE.", False, False)],
    "tools": [(f"Write the word FIGTREE into {NOTES}.", True, False)],
    "two_turns": [("Remember the word CHERRY.", False, False), ("Now also remember the word DAMSON.", False, True)],
}


def rewind_keys(prompt: str) -> list[list[str]]:
    """The keys of an interactive Gemini CLI (`make_session("gemini", ..., resume=True, keys=rewind_keys(p))`) that
    `/rewind` the session to just before its last user message (the file gains `{"$rewindTo": id}`) and send
    `prompt` instead, then `/quit`. Gemini leaves a second file with the session's 8-character id (the interactive
    start's own, without messages): its next start deletes it and every file sharing that id, the rewound session
    included (`general.sessionRetention`'s clean-up)."""
    return [["wait", "Type your message"], ["sleep", "2"], ["until", "Jump back to a specific message", "-l", "/rewind"],
            ["until", "Stay at current position", "Enter"],
            ["sleep", "1"], ["send", "Up"], ["sleep", "1"], ["until", "Rewind conversation", "Enter"],
            ["sleep", "1"], ["send", "Enter"], ["sleep", "2"],
            ["until", prompt, "-l", prompt], ["sleep", "1"],
            ["until", f"Noted: {' '.join(words(prompt))}", "Enter"], ["sleep", "2"],
            ["send", "-l", "/quit"], ["sleep", "1"], ["send", "Enter"], ["sleep", "3"]]


def make_set(agent: str, home: Path, workspace: Path) -> dict[str, dict[str, Any]]:
    """The sessions of `SETS` made by `agent` in `workspace` (a git repository, made if missing), one after the
    other; each name's info is its last turn's, with `turns` the seconds of each."""
    git_workspace(workspace)
    made: dict[str, dict[str, Any]] = {}
    for name, turns in SETS.items():
        infos = [make_session(agent, home, workspace, prompt, tools, resume) for prompt, tools, resume in turns]
        if len({i["session_id"] for i in infos}) != 1:
            raise AgentRunError(f"{agent}: the turns of {name} landed in different sessions: {infos}")
        made[name] = {**infos[-1], "words": [w for p, _, _ in turns for w in words(p)],
                      "turns": [i["seconds"] for i in infos]}
    if agent == "gemini":  # last: its stray file makes Gemini's next start in this home delete the session
        first = make_session(agent, home, workspace, "Remember the word ALPHA.")
        second = make_session(agent, home, workspace, "Remember the word BRAVO.", resume=True)
        minute = time.strftime("%M")
        while time.strftime("%M") == minute:  # a start in another minute names a file of its own: the stray one
            time.sleep(0.5)
        third = make_session(agent, home, workspace, "", resume=True, keys=rewind_keys("Remember the word CHARLIE."))
        if len({first["session_id"], second["session_id"], third["session_id"]}) != 1:
            raise AgentRunError(f"gemini: the rewound session's turns landed apart: {[first, second, third]}")
        made["rewound"] = {**third, "words": ["ALPHA", "BRAVO", "CHARLIE"],
                           "turns": [first["seconds"], second["seconds"], third["seconds"]]}
    return made


def git_workspace(workspace: Path) -> None:
    """A git repository with one commit (opencode names its project after the root commit)."""
    workspace.mkdir(parents=True, exist_ok=True)
    if (workspace / ".git").exists():
        return
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    (workspace / "README.md").write_text("a workspace for agent sessions\n")
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=workspace, env=env, check=True, capture_output=True)


# What a cached set depends on beside the agent's version: bump it when a change here or in fake_llm.py changes the
# sessions made (their prompts, answers, the agents' settings), so that every machine makes its sets again.
SETS_VERSION = 1


# The sets this process reads (`cached_set`), each held by a shared lock on its READERS file until the process ends:
# a set is removed or made again only by a process that can lock it alone, so never under a reader's feet.
READERS = ".readers"
_held: dict[Path, Any] = {}


def cached_set(agent: str) -> dict[str, dict[str, Any]]:
    """`make_set(agent)`'s sessions, made once in `.deps/agents/stores/<agent>-<version>-<SETS_VERSION>/` (HOME in
    `home/`, the workspace in `work/`) and read back while that folder is whole and where it was made (the stores
    hold the workspace's absolute path, the real one: a `.deps/agents` reached through a symlink is one place).
    Shared by every process that reads it: this one holds the set (`hold`) until it ends. A set no longer right is
    replaced beside it (`<name>.2`, …) while a process holds it, and removed, with the agent's older sets, by the
    first `cached_set` no process holds it against. All under the folder's lock: two runs at once make a set once."""
    root = (ensure_agents() / "stores").resolve()
    root.mkdir(parents=True, exist_ok=True)
    name = f"{agent}-{version(agent)}-{SETS_VERSION}"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        chosen, made = None, None
        for base in sorted((p for p in root.glob(f"{name}*") if p.name == name or p.name.startswith(name + ".")),
                           key=lambda p: (len(p.name), p.name)):
            made = whole_set(base)
            if made is not None:
                chosen = base
                break
        for old in root.glob(f"{agent}-*"):
            if old != chosen and old.is_dir() and not held_elsewhere(old):
                shutil.rmtree(old)
        if chosen is None:
            chosen = next(b for b in (root / name, *(root / f"{name}.{n}" for n in range(2, 1000))) if not b.exists())
            made = make_set(agent, chosen / "home", chosen / "work")
            (chosen / READERS).touch()
            (chosen / "sessions.json").write_text(json.dumps(made, indent=2))
        hold(chosen)
        return made


def whole_set(base: Path) -> dict[str, dict[str, Any]] | None:
    """The set in `base` when it is whole and where it was made, else None."""
    try:
        made = json.loads((base / "sessions.json").read_text())
        if all(Path(i["store"]).exists() and i["workspace"] == str(base / "work") for i in made.values()):
            return made
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def hold(base: Path) -> None:
    """This process reads the set in `base`: a shared lock on its READERS file, kept until the process ends."""
    if base not in _held:
        readers = open(base / READERS, "a")  # not inherited by the agents this process starts (PEP 446)
        fcntl.flock(readers, fcntl.LOCK_SH)
        _held[base] = readers


def held_elsewhere(base: Path) -> bool:
    """Whether a process (this one included) holds the set in `base`: a shared lock on its READERS file. A set made
    before these locks has none, and is held by nobody."""
    try:
        with open(base / READERS, "r") as readers:
            fcntl.flock(readers, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:
        return False
    except BlockingIOError:
        return True
    return False


def agent_sessions_fixture() -> Iterator[Any]:
    sets: dict[str, dict[str, dict[str, Any]]] = {}

    def get(agent: str) -> dict[str, dict[str, Any]]:
        if agent not in sets:
            sets[agent] = cached_set(agent)
        return sets[agent]

    yield get


try:
    import pytest

    agent_sessions = pytest.fixture(scope="session", name="agent_sessions")(agent_sessions_fixture)
    agent_sessions.__doc__ = """`agent_sessions(agent)`: that agent's set of sessions (`SETS`: name -> info, see the
    module's doc), made on first use in the run or read from the cache of an earlier one. Shared and read-only:
    copy `home` before changing it."""
except ImportError:  # the launcher inside the namespace needs no pytest
    pass


def moved(made: dict[str, dict[str, Any]], home: Path | str, workspace: Path | str) -> dict[str, dict[str, Any]]:
    """A copy of a set (`cached_set`) whose sessions are of another workspace, for a test that writes in the
    workspace or the stores (our `.PseudoClaude/` there, an agent's new turn, a deleted original): the set's home and
    workspace copied to `home` and `workspace` (which may exist, empty), and every place the stores name the old
    workspace or home (file contents, folder and file names, opencode's rows; the workspace as it is, with every
    character but letters and digits as `-` (Claude Code, Qwen), with `/` as `-` (Pi), its SHA-256 (Gemini's
    `projectHash`)) naming the new one. Times are kept (`--continue` picks the newest). The agents' own bytes
    otherwise: nothing is made up. Returns the set with its paths moved."""
    one = next(iter(made.values()))
    old_home, old_ws = Path(one["home"]), Path(one["workspace"])
    home, ws = Path(home).resolve(), Path(workspace).resolve()
    shutil.copytree(old_home, home, symlinks=True)
    shutil.copytree(old_ws, ws, symlinks=True, dirs_exist_ok=True)
    pairs: list[tuple[str, str]] = [(str(old_home), str(home))]
    for form in (str, lambda p: re.sub(r"[^A-Za-z0-9]", "-", p), lambda p: p.replace("/", "-"),
                 lambda p: hashlib.sha256(p.encode()).hexdigest()):
        pair = (form(str(old_ws)), form(str(ws)))
        if pair[0] != pair[1] and pair not in pairs:
            pairs.append(pair)

    def swap(text: str) -> str:
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    for path in sorted(home.rglob("*"), key=lambda p: len(p.parts), reverse=True):  # the deepest first
        if swap(path.name) != path.name:
            path.rename(path.with_name(swap(path.name)))
    for path in home.rglob("*"):
        if not path.is_file() or path.is_symlink() or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        st = path.stat()
        data = path.read_bytes()
        if data.startswith(b"SQLite format 3\0"):
            con = sqlite3.connect(path)
            try:
                tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    for col in [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]:
                        for old, new in pairs:
                            con.execute(f'UPDATE "{table}" SET "{col}" = replace("{col}", ?, ?) '
                                        f'WHERE typeof("{col}") = \'text\' AND instr("{col}", ?) > 0', (old, new, old))
                con.commit()
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                con.close()
        else:
            try:
                text = data.decode()
            except UnicodeDecodeError:
                continue
            if swap(text) == text:
                continue
            path.write_text(swap(text))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return {name: {**info, "home": str(home), "workspace": str(ws), "store": swap(info["store"])}
            for name, info in made.items()}


def samples(where: Path, agents: list[str]) -> None:
    """`python3 tests/e2e/agent_stores.py --samples DIR [AGENT...]`: a set of each agent's sessions made in
    `DIR/<agent>/home` (HOME) with the workspace `DIR/<agent>/work`, and a README saying so."""
    for agent in agents or AGENTS:
        base = (where / agent).resolve()
        made = make_set(agent, base / "home", base / "work")
        lines = [f"# {agent} {made['text']['version']}: sessions made by the real agent",
                 "",
                 f"Made by `python3 tests/e2e/agent_stores.py --samples {where} {agent}` (pseudoclaude.nvim), offline "
                 "against the fake model server of tests/e2e/fake_llm.py on 127.0.0.1, in a network namespace of its "
                 "own.",
                 f"HOME (and XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME, XDG_CACHE_HOME under it) = `{base}/home`; "
                 f"the workspace (the agent's cwd, a git repository with one commit) = `{base}/work`.",
                 ""]
        for name, info in made.items():
            prompts = " / ".join(p for p, _, _ in SETS[name]) if name in SETS else \
                "Remember the word ALPHA. / (--resume) Remember the word BRAVO. / (interactive --resume) /rewind " \
                "to before BRAVO, then Remember the word CHARLIE. (a `$rewindTo` line; a stray file of the same id)"
            lines.append(f"- {name}: session `{info['session_id']}` in `{info['store']}`; prompts: {prompts}; "
                         f"seconds per turn: {info['turns']}")
        (base / "README.md").write_text("\n".join(lines) + "\n")
        (base / "sessions.json").write_text(json.dumps(made, indent=2))
        print(f"{agent}: {[(n, i['session_id'], i['turns']) for n, i in made.items()]}", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--samples"]:
    samples(Path(sys.argv[2]), sys.argv[3:])

if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    the_spec = json.loads(sys.stdin.read())
    try:
        loopback_up()
    except OSError:
        pass  # not in a namespace of our own: loopback is up already
    print(json.dumps(run_here(the_spec)))
