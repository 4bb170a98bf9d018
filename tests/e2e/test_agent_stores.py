"""The rig of issue 46's tests: each real agent (agent_stores.py: Claude Code, Gemini CLI, Qwen Code, opencode, Pi),
run offline against the fake model servers, writes its own store where /work/shared/AGENT_STORES.md says, in its
own format, holding what the session said: the prompt's word and the fake's answer, the write tool's call and
result (and the file it wrote in the workspace), both turns of a continued session. Each store is read here from
the documented place, computed from HOME and the workspace, never from what agent_stores.py found. No Neovim."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from agent_stores import AGENTS, NOTES, SETS, WRITE_TOOL, agent_sessions, gemini_messages  # noqa: F401 - a fixture


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def texts(value: Any) -> str:
    """Every string inside `value`, joined: where a word is, whatever the format nests it in."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return " ".join(texts(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(texts(v) for v in value)
    return ""


def documented_store(agent: str, home: Path, workspace: Path, session_id: str) -> Path:
    """Where AGENT_STORES.md puts the session `session_id` of `workspace`."""
    ws = str(workspace)
    if agent == "claude":
        return home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", ws) / f"{session_id}.jsonl"
    if agent == "gemini":
        slug = json.loads((home / ".gemini" / "projects.json").read_text())["projects"][ws]
        same_id = (home / ".gemini" / "tmp" / slug / "chats").glob(f"session-*-{session_id[:8]}.jsonl")
        # the one holding messages (a resume in a later minute leaves one without, test_gemini_rewinds_...)
        (path,) = [p for p in same_id if gemini_messages(p)]
        assert re.fullmatch(r"session-\d{4}-\d\d-\d\dT\d\d-\d\d-[0-9a-f]{8}\.jsonl", path.name), path.name
        return path
    if agent == "qwen":
        # every character but ASCII letters and digits as `-` (as Claude Code does), not only `/`
        return home / ".qwen" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", ws) / "chats" / f"{session_id}.jsonl"
    if agent == "opencode":
        return home / ".local" / "share" / "opencode" / "opencode.db"
    if agent == "codex":  # $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl
        (path,) = (home / ".codex" / "sessions").glob(f"*/*/*/rollout-*-{session_id}.jsonl")
        assert re.fullmatch(r"\d{4}/\d\d/\d\d", "/".join(path.parts[-4:-1])), path
        return path
    if agent == "pi":
        folder = home / ".pi" / "agent" / "sessions" / f"--{ws[1:].replace('/', '-')}--"
        (path,) = folder.glob(f"*_{session_id}.jsonl")
        return path
    raise AssertionError(agent)


def conversation(agent: str, store: Path, session_id: str, workspace: Path) -> list[tuple[str, str]]:
    """The session as (role, text) in order, role "user", "assistant", "call:<tool name>" or "result", read in the
    agent's own format (as the documented fields say), checking its header."""
    out: list[tuple[str, str]] = []
    if agent == "opencode":
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            directory, project = con.execute("SELECT directory, project_id FROM session WHERE id = ?",
                                              (session_id,)).fetchone()
            assert directory == str(workspace)
            # the project is the repository's root commit, and opencode notes it in the workspace's .git
            assert project == (workspace / ".git" / "opencode").read_text().strip()
            assert con.execute("SELECT worktree FROM project WHERE id = ?", (project,)).fetchone() == (str(workspace),)
            for mid, data in con.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY id", (session_id,)):
                role = json.loads(data)["role"]
                for (pdata,) in con.execute("SELECT data FROM part WHERE message_id = ? ORDER BY id", (mid,)):
                    part = json.loads(pdata)
                    if part["type"] == "text":
                        out.append((role, part["text"]))
                    elif part["type"] == "tool":
                        out.append((f"call:{part['tool']}", texts(part["state"]["input"])))
                        out.append(("result", part["state"]["status"] + " " + texts(part["state"].get("output"))))
        finally:
            con.close()
        return out
    records = jsonl(store)
    if agent == "claude":
        for r in records:
            if r.get("type") not in ("user", "assistant") or r.get("sessionId") != session_id:
                continue
            content = r["message"]["content"]
            for b in content if isinstance(content, list) else [{"type": "text", "text": content}]:
                if b["type"] == "text":
                    out.append((r["type"], b["text"]))
                elif b["type"] == "tool_use":
                    out.append((f"call:{b['name']}", texts(b["input"])))
                elif b["type"] == "tool_result":
                    out.append(("result", texts(b["content"])))
    elif agent == "codex":
        meta = records[0]
        assert meta["type"] == "session_meta" and meta["payload"]["id"] == session_id
        assert meta["payload"]["cwd"] == str(workspace)
        for r in records:
            p = r["payload"]
            if r["type"] != "response_item":
                continue
            if p["type"] == "message" and p["role"] in ("user", "assistant"):
                out.append((p["role"], texts([c.get("text", "") for c in p["content"]])))
            elif p["type"] == "function_call":
                out.append((f"call:{p['name']}", p["arguments"]))
            elif p["type"] == "function_call_output":
                out.append(("result", texts(p["output"])))
    elif agent == "gemini":
        header = records[0]
        assert header["sessionId"] == session_id and header["kind"] == "main"
        assert header["projectHash"] == hashlib.sha256(str(workspace).encode()).hexdigest()
        messages: dict[str, dict[str, Any]] = {}  # by id: a record written again later replaces the first
        for r in records[1:]:
            if "$set" in r:
                if "messages" in r["$set"]:  # the whole list, replaced
                    messages = {m["id"]: m for m in r["$set"]["messages"]}
            elif "$rewindTo" in r:  # that message and all after it are gone
                ids = list(messages)
                messages = {i: messages[i] for i in ids[: ids.index(r["$rewindTo"])]}
            elif "projectHash" in r:  # a resumed session starts again with a header of the same id
                assert r["sessionId"] == session_id, r
            else:
                messages[r["id"]] = r
        for m in messages.values():
            parts = m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]
            if any("functionResponse" in p for p in parts):
                out.append(("result", texts(parts)))
                continue
            out.append(({"gemini": "assistant"}.get(m["type"], m["type"]), texts(parts)))
            for call in m.get("toolCalls") or []:
                out.append((f"call:{call['name']}", texts(call["args"])))
    elif agent == "qwen":
        for r in records:
            assert r["sessionId"] == session_id and r["cwd"] == str(workspace)
            if r["type"] not in ("user", "assistant", "tool_result"):
                continue
            for p in r["message"]["parts"]:
                if "functionCall" in p:
                    out.append((f"call:{p['functionCall']['name']}", texts(p["functionCall"]["args"])))
                elif "functionResponse" in p:
                    out.append(("result", texts(p["functionResponse"])))
                elif "text" in p and not p.get("thought"):
                    out.append((r["type"], p["text"]))
    elif agent == "pi":
        header = records[0]
        assert header == {**header, "type": "session", "version": 3, "id": session_id, "cwd": str(workspace)}
        for r in records[1:]:
            assert r.get("id") and "parentId" in r and r.get("timestamp"), r
            if r["type"] != "message":
                continue
            msg = r["message"]
            if msg["role"] == "toolResult":
                out.append(("result", texts(msg["content"])))
                continue
            for b in msg["content"] if isinstance(msg["content"], list) else []:
                if b["type"] == "text":
                    out.append((msg["role"], b["text"]))
                elif b["type"] == "toolCall":
                    out.append((f"call:{b['name']}", texts(b["arguments"])))
    return out


def said(conv: list[tuple[str, str]], role: str, word: str) -> bool:
    return any(r == role and word in t for r, t in conv)


@pytest.mark.parametrize("agent", AGENTS)
def test_each_agent_writes_its_text_session_where_agent_stores_md_says(agent: str, agent_sessions: Any) -> None:
    info = agent_sessions(agent)["text"]
    home, workspace = Path(info["home"]), Path(info["workspace"])
    store = documented_store(agent, home, workspace, info["session_id"])
    assert store.is_file() and str(store) == info["store"]
    conv = conversation(agent, store, info["session_id"], workspace)
    assert said(conv, "user", "Remember the word PLUMTREE."), conv
    assert said(conv, "assistant", "Noted: PLUMTREE."), conv  # the fake's answer: the agent ran against it
    assert not any(r.startswith("call:") for r, _ in conv), conv
    assert info["isolated"], "the machine (root) allows a network namespace: the agents ran in one"


@pytest.mark.parametrize("agent", AGENTS)
def test_each_agent_writes_a_file_with_its_own_tool_and_stores_the_call(agent: str, agent_sessions: Any) -> None:
    info = agent_sessions(agent)["tools"]
    workspace = Path(info["workspace"])
    store = documented_store(agent, Path(info["home"]), workspace, info["session_id"])
    conv = conversation(agent, store, info["session_id"], workspace)
    tool = WRITE_TOOL[agent][0]
    calls = [t for r, t in conv if r == f"call:{tool}"]
    assert len(calls) == 1 and str(workspace / NOTES) in calls[0] and "FIGTREE" in calls[0], conv
    roles = [r for r, _ in conv]
    assert roles.index(f"call:{tool}") < roles.index("result") < len(roles) - 1, conv
    assert conv[-1] == ("assistant", conv[-1][1]) and "Done: notes.txt holds FIGTREE." in conv[-1][1], conv
    assert (workspace / NOTES).read_text() == "FIGTREE\n", "the agent's tool really wrote the file"


@pytest.mark.parametrize("agent", AGENTS)
def test_each_agent_continues_its_session_in_the_same_store(agent: str, agent_sessions: Any) -> None:
    sets = agent_sessions(agent)
    info = sets["two_turns"]
    workspace = Path(info["workspace"])
    store = documented_store(agent, Path(info["home"]), workspace, info["session_id"])
    conv = conversation(agent, store, info["session_id"], workspace)
    users = [t for r, t in conv if r == "user" and re.search(r"CHERRY|DAMSON", t)]
    assert users == ["Remember the word CHERRY.", "Now also remember the word DAMSON."], conv
    assert said(conv, "assistant", "Noted: CHERRY.") and said(conv, "assistant", "Noted: DAMSON."), conv
    assert len({sets[name]["session_id"] for name in SETS}) == 3, "three sessions, the continued one once"


def test_gemini_rewinds_a_session_in_its_file_and_leaves_a_stray_file_of_the_same_id(agent_sessions: Any) -> None:
    """The interactive `/rewind` (agent_stores.rewind_keys): the file keeps the rewound turn's records and gains
    `{"$rewindTo": id}`; the conversation read goes ALPHA then CHARLIE. The interactive `--resume`, started in
    another minute than the file's, also wrote a file of its own with the same 8-character id and no message: what
    makes Gemini's next start delete the session (AGENT_STORES.md)."""
    info = agent_sessions("gemini")["rewound"]
    home, workspace, sid = Path(info["home"]), Path(info["workspace"]), info["session_id"]
    store = documented_store("gemini", home, workspace, sid)
    assert str(store) == info["store"]
    records = jsonl(store)
    rewinds = [r["$rewindTo"] for r in records if "$rewindTo" in r]
    bravo = [r["id"] for r in records if r.get("type") == "user" and "BRAVO" in texts(r.get("content"))]
    assert len(rewinds) == 1 and bravo == rewinds, (rewinds, bravo)
    conv = conversation("gemini", store, sid, workspace)
    users = [t for r, t in conv if r == "user" and "<session_context>" not in t]
    assert users == ["Remember the word ALPHA.", "Remember the word CHARLIE."], conv
    assert said(conv, "assistant", "Noted: CHARLIE.") and not said(conv, "assistant", "BRAVO"), conv
    same_id = sorted(store.parent.glob(f"session-*-{sid[:8]}.jsonl"))
    assert len(same_id) == 2 and store in same_id, same_id
    (stray,) = [p for p in same_id if p != store]
    assert jsonl(stray)[0]["sessionId"] == sid and gemini_messages(stray) == 0


def test_opencode_writes_its_database_while_the_rig_waits_for_its_end(tmp_path: Path) -> None:
    """`start_session(..., slow=)`: the run goes on while a test reads the store (issue 46: opencode's SQLite read
    while opencode writes it). The session's row and its streamed text are in the database before the agent ends."""
    from agent_stores import git_workspace, start_session

    git_workspace(tmp_path / "work")
    run = start_session("opencode", tmp_path / "home", tmp_path / "work", "Remember the word QUINCE.", slow=0.15)
    db = tmp_path / "home" / ".local" / "share" / "opencode" / "opencode.db"
    seen_running = ""
    deadline = time.monotonic() + 120
    while run.proc.poll() is None and time.monotonic() < deadline:
        if db.exists():
            try:
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                rows = con.execute("SELECT data FROM part").fetchall()
                con.close()
            except sqlite3.Error:
                rows = []
            text = " ".join(json.loads(d).get("text", "") for (d,) in rows)
            if "QUINCE" in text and run.proc.poll() is None:
                seen_running = text
        time.sleep(0.2)
    info = run.wait()
    assert "Noted: QUINCE. and and" in seen_running, "the answer was in the database while opencode still ran"
    conv = conversation("opencode", Path(info["store"]), info["session_id"], tmp_path / "work")
    assert said(conv, "assistant", "Noted: QUINCE." + " and" * 60), conv
