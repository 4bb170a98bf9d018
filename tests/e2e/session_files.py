"""Sessions written straight to disk, as the Rust writer would leave them, for the session and picker tests and the
picker benchmark: `<workspace>/.PseudoClaude/sessions/<id>/conversation.jsonl`, one JSON entry per line.

Also `hold_lock()`, which holds a session's writer lock the way another editor does (flock + who-holds-it JSON).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Iterable

SESSIONS = Path(".PseudoClaude") / "sessions"


def session_id(n: int, base: float = 1_780_000_000) -> str:
    """A valid id (`YYYYMMDD-HHMMSS-xxxx`), distinct and increasing with `n`."""
    t = time.gmtime(base + n)
    return time.strftime("%Y%m%d-%H%M%S", t) + f"-{n % 65536:04x}"


def session_dir(ws: Path, sid: str) -> Path:
    return ws / SESSIONS / sid


def entry(role: str, content: str = "", *, ts: int, model: str = "", **extra: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"type": "message", "role": role, "ts": ts}
    if content:
        e["content"] = content
    if model:
        e["model"] = model
    e.update(extra)
    return e


def chat(title: str, *, ts: int, model: str = "m", replies: int = 1) -> list[dict[str, Any]]:
    """A user message titled `title`, then `replies` assistant/user exchanges."""
    out = [entry("user", title, ts=ts, model=model)]
    for k in range(replies):
        out.append(entry("assistant", f"answer {k + 1} to {title}", ts=ts + 2 * k + 1))
        if k + 1 < replies:
            out.append(entry("user", f"follow-up {k + 1}", ts=ts + 2 * k + 2))
    return out


def write_session(
    ws: Path,
    sid: str,
    entries: Iterable[dict[str, Any]] | None = None,
    *,
    title: str = "a session",
    model: str = "m",
    mtime: float | None = None,
    tail: str = "",
) -> Path:
    """Writes session `sid` (default: `chat(title)`); `mtime` orders the list; `tail` is appended raw."""
    d = session_dir(ws, sid)
    (d / "tool-results").mkdir(parents=True, exist_ok=True)
    mtime = time.time() if mtime is None else mtime
    if entries is None:
        entries = chat(title, ts=int(mtime) - 10, model=model)
    text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries) + tail
    log = d / "conversation.jsonl"
    log.write_text(text)
    os.utime(log, (mtime, mtime))
    return d


class HeldLock:
    """Another editor holding a session: an exclusive flock on `<session>/lock`, with its pid/host/since inside."""

    def __init__(self, session: Path, pid: int = 424242, host: str = "otherhost"):
        self.path = session / "lock"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        body = json.dumps({"pid": pid, "host": host or socket.gethostname(), "since": int(time.time())})
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, body.encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "HeldLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def hold_lock(session: Path, **kw: Any) -> HeldLock:
    return HeldLock(session, **kw)


def snapshot(ws: Path) -> dict[str, tuple[int, float, bytes]]:
    """Every file under the workspace with its size, mtime and content, to prove nothing changed."""
    out = {}
    for p in sorted(ws.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(ws))] = (st.st_size, st.st_mtime, p.read_bytes())
    return out
