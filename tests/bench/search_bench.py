#!/usr/bin/env python3
"""Session search benchmark (issue 10, section 2): full-text search over 1,000 sessions of about 1 MiB each.

1. Throughput, warm (the logs in the page cache): `pseudoclaude sessions search QUERY --json` (the CLI: process
   start, the folder listing, the search and the JSON output of every hit) against `rg -F -i --count-matches QUERY`
   over the same 1,000 `conversation.jsonl` files, alternated, medians. ripgrep counts raw matches in the JSON
   text; ours decodes the lines that match, replays the sessions that hold one to find each message's index, and
   reports only what a resume would restore.
2. First hits on screen, in Neovim: the picker in its search mode (`:PseudoResume`, then `<C-g>`), the query set
   in its prompt; from that moment to the first hit row drawn (`stats` of lua/pseudoclaude/float/search.lua), and
   to the whole search done.

The workspace is generated once per run (seeded): chats of user prompts, answers, tool calls and tool outputs
(code with quotes, tabs, non-ASCII), some compacted (`replace`), a few with checkpoints; the query is an identifier
that appears in about 2% of the sessions, a few times each.

ripgrep comes from Debian's `ripgrep` package (installed with apt-get when missing, else `cargo install
ripgrep`); it is never a dependency of the project.

Usage: tests/bench/search_bench.py [--rounds 7] [--write] [--keep DIR]
  --write  also replace the "## Session search" section of doc/benchmarks.md
  --keep   generate into (or reuse) DIR instead of a temporary folder
Needs the release build (cargo build --release: the library and the CLI) and Neovim (scripts/ensure-nvim).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / ".deps" / "python"))

from harness import nvim_bin, started, write_section  # noqa: E402

SESSIONS = 1000
TARGET_BYTES = 1 << 20
QUERY = "retry_budget"
# A word of nearly every message: the worst case (every session replayed, most lines decoded), for information.
COMMON = "parser"
HIT_SHARE = 0.02
CLI = ROOT / "target" / "release" / "pseudoclaude"

WORDS = (
    "the parser config value buffer line token error result return self match file path read write session log "
    "entry replay index cache thread queue lock state message reply answer model tool call output stream chunk "
    "window picker prompt preview draw render slice offset length bytes width height column row cursor fold "
    "search query literal pattern escape quote json decode encode utf8 unicode handle event loop timer async"
).split()


def jline(obj: dict) -> str:
    # serde_json's shape: compact, non-ASCII as UTF-8
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def code_block(rng: random.Random, lines: int) -> str:
    out = []
    for i in range(lines):
        a, b, c = rng.choice(WORDS), rng.choice(WORDS), rng.choice(WORDS)
        kind = i % 5
        if kind == 0:
            out.append(f'    let {a}_{b} = "{c} {i}"; // {sentence(rng, 4)}')
        elif kind == 1:
            out.append(f"    if {a}.{b}() > {i} {{\n\treturn Err(\"{c} failed: café ✓\".into());\n    }}")
        elif kind == 2:
            out.append(f"fn {a}_{b}(&mut self, {c}: usize) -> Result<(), Error> {{")
        elif kind == 3:
            out.append(f"    self.{a}.push({b}_{c}(\"{a}\\n\"));")
        else:
            out.append(f"    // {sentence(rng, 8)}")
    return "\n".join(out)


def session_text(rng: random.Random, n: int, hit: bool, now: int) -> str:
    """About TARGET_BYTES of log; `hit`: the query appears in a few messages."""
    ts = now - 86400 * 30 + n * 60
    lines = []
    size = 0
    k = 0
    plant = set(rng.sample(range(3, 40), 3)) if hit else set()
    history = 0
    while size < TARGET_BYTES:
        k += 1
        extra = f" and keep the {QUERY} as it is" if k in plant else ""
        user = {"type": "message", "role": "user", "content": f"{sentence(rng, 12)}{extra}", "ts": ts + k}
        if k == 1:
            user["model"] = "claude-x"
        lines.append(jline(user))
        path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.rs"
        call = {"type": "message", "role": "assistant", "content": sentence(rng, 10), "ts": ts + k,
                "tool_calls": [{"id": f"c{k}", "name": rng.choice(["read_file", "grep", "run_command"]),
                                "arguments": {"path": path, "pattern": rng.choice(WORDS)}}]}
        lines.append(jline(call))
        body = code_block(rng, rng.randint(20, 300))
        if k in plant:
            body += f"\n    let {QUERY} = RetryBudget::new(3); // \"{QUERY}\" caps the retries"
        lines.append(jline({"type": "message", "role": "user", "ts": ts + k,
                            "tool_result": {"tool_call_id": f"c{k}", "content": body, "is_error": False}}))
        answer = " ".join(sentence(rng, 15) for _ in range(rng.randint(2, 12)))
        if n % 17 == 0 and k % 9 == 0:
            # streamed with checkpoints, then the final message (as the writer leaves it)
            half = len(answer) // 2
            lines.append(jline({"type": "checkpoint", "content": answer[:half], "ts": ts + k, "answer": f"a{k}", "at": 0}))
            lines.append(jline({"type": "checkpoint", "content": answer[half:], "ts": ts + k, "answer": f"a{k}",
                                "at": len(answer[:half].encode())}))
        lines.append(jline({"type": "message", "role": "assistant", "content": answer, "ts": ts + k}))
        history += 4
        size = sum(len(x) for x in lines)
        if n % 5 == 0 and k % 25 == 0:
            # a compaction: the history so far becomes a summary plus the last exchange
            summary = {"role": "user", "content": "Summary of the conversation so far: " + sentence(rng, 40), "ts": ts + k}
            lines.append(jline({"type": "replace", "reason": "compact", "ts": ts + k, "count": 1, "messages": [summary]}))
            size = sum(len(x) for x in lines)
    return "".join(lines)


def generate(ws: Path) -> dict:
    marker = ws / "bench-info.json"
    if marker.exists():
        return json.loads(marker.read_text())
    rng = random.Random(20261202)
    root = ws / ".PseudoClaude" / "sessions"
    root.mkdir(parents=True, exist_ok=True)
    now = int(time.time())
    hits = set(rng.sample(range(SESSIONS), int(SESSIONS * HIT_SHARE)))
    total = 0
    for n in range(SESSIONS):
        t = time.gmtime(1_780_000_000 + n * 600)
        sid = time.strftime("%Y%m%d-%H%M%S", t) + f"-{n % 65536:04x}"
        d = root / sid
        (d / "tool-results").mkdir(parents=True, exist_ok=True)
        text = session_text(rng, n, n in hits, now)
        (d / "conversation.jsonl").write_text(text)
        mtime = now - (SESSIONS - n) * 600
        os.utime(d / "conversation.jsonl", (mtime, mtime))
        total += len(text.encode())
    info = {"sessions": SESSIONS, "bytes": total, "planted": len(hits)}
    marker.write_text(json.dumps(info))
    return info


def ensure_rg() -> str:
    rg = shutil.which("rg")
    if rg:
        return rg
    if shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "ripgrep"], check=False, capture_output=True)
        rg = shutil.which("rg")
        if not rg:
            subprocess.run(["apt-get", "update"], check=False, capture_output=True)
            subprocess.run(["apt-get", "install", "-y", "ripgrep"], check=False, capture_output=True)
            rg = shutil.which("rg")
    if not rg and shutil.which("cargo"):
        subprocess.run(["cargo", "install", "ripgrep"], check=True)
        rg = shutil.which("rg") or str(Path.home() / ".cargo" / "bin" / "rg")
    if not rg or not Path(rg).exists():
        sys.exit("search_bench: ripgrep is needed (apt-get install ripgrep, or cargo install ripgrep)")
    return rg


def timed(argv: list[str], cwd: Path) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if out.returncode not in (0, 1):
        sys.exit(f"search_bench: {argv[0]} failed ({out.returncode}): {out.stderr}")
    return dt, out.stdout


PICKER_SEARCH = """
local query = ...
vim.cmd("PseudoResume")
local picker = require("pseudoclaude.float")
local search = require("pseudoclaude.float.search")
local s = picker.get_state()
search.toggle(s)
local prompt = s.bufs.prompt
vim.api.nvim_buf_set_lines(prompt, 0, -1, false, { query })
search.on_query(s, query)
"""


def picker_round(nvim: str, ws: Path) -> tuple[float, float, int]:
    """One fresh Neovim: the picker in search mode, the query set; (first hit row drawn, done) in ms after it."""
    with started(nvim, ws) as n:
        n.command("set columns=200 lines=50")
        n.exec_lua(PICKER_SEARCH, QUERY)
        get = "local s = require('pseudoclaude.float').get_state() return s and s.search and s.search.stats or vim.NIL"
        deadline = time.monotonic() + 60
        while True:
            st = n.exec_lua(get)
            if st and st.get("done_at"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the search did not finish: {st}")
            time.sleep(0.01)
        first = (st["first_row_at"] - st["query_at"]) / 1e6
        done = (st["done_at"] - st["query_at"]) / 1e6
        return first, done, st["hits"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--no-nvim", action="store_true", help="skip the picker measure")
    a = ap.parse_args()
    if not CLI.exists():
        sys.exit(f"search_bench: {CLI} is missing: run `cargo build --release` first")
    rg = ensure_rg()
    rg_version = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.monotonic()
    ws = a.keep or Path(tempfile.mkdtemp(prefix="pc-search-bench-"))
    ws.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    info = generate(ws)
    gen_s = time.monotonic() - t
    logs = sorted(str(p.relative_to(ws)) for p in (ws / ".PseudoClaude" / "sessions").glob("*/conversation.jsonl"))
    assert len(logs) == SESSIONS, len(logs)

    ours_argv = [str(CLI), "-C", str(ws), "sessions", "search", QUERY, "--json"]
    rg_argv = [rg, "-F", "-i", "--count-matches", QUERY, *logs]
    # warm-up: the page cache, and both binaries
    for _ in range(2):
        timed(ours_argv, ws)
        timed(rg_argv, ws)
    ours_t, rg_t = [], []
    for r in range(a.rounds):
        pair = [(ours_argv, ours_t), (rg_argv, rg_t)]
        for argv, sink in pair if r % 2 == 0 else pair[::-1]:
            dt, out = timed(argv, ws)
            sink.append((dt, out))
    common_ours, common_rg = [], []
    for r in range(max(3, a.rounds // 2)):
        argv_pair = [([str(CLI), "-C", str(ws), "sessions", "search", COMMON, "--json"], common_ours),
                     ([rg, "-F", "-i", "--count-matches", COMMON, *logs], common_rg)]
        for argv, sink in argv_pair if r % 2 == 0 else argv_pair[::-1]:
            dt, out = timed(argv, ws)
            sink.append((dt, out))
    common_hits = len(json.loads(common_ours[-1][1]))
    common_matches = sum(int(line.rsplit(":", 1)[1]) for line in common_rg[-1][1].splitlines())
    c_ours = statistics.median(x[0] for x in common_ours) * 1000
    c_rg = statistics.median(x[0] for x in common_rg) * 1000
    ours_hits = json.loads(ours_t[-1][1])
    rg_counts = {line.rsplit(":", 1)[0]: int(line.rsplit(":", 1)[1]) for line in rg_t[-1][1].splitlines()}
    ours_ms = statistics.median(x[0] for x in ours_t) * 1000
    rg_ms = statistics.median(x[0] for x in rg_t) * 1000
    sessions_hit = len({h["id"] for h in ours_hits})
    by_age = sorted(logs, key=lambda p: (ws / p).stat().st_mtime, reverse=True)
    first_at = next(i for i, p in enumerate(by_age) if ours_hits and ours_hits[0]["id"] in p) + 1
    gib = info["bytes"] / (1 << 30)

    rows = [
        (f"Search {SESSIONS:,} sessions ({gib:.2f} GiB), warm, query `{QUERY}`: time",
         f"{ours_ms:.0f} ms", f"{rg_ms:.0f} ms", f"{ours_ms / rg_ms:.2f}x", "<= 1.0x",
         "PASS" if ours_ms <= rg_ms else "FAIL"),
        ("Throughput", f"{info['bytes'] / 1e6 / (ours_ms / 1000):.0f} MB/s",
         f"{info['bytes'] / 1e6 / (rg_ms / 1000):.0f} MB/s", "-", "-", "info"),
        ("What was found (sanity)", f"{len(ours_hits)} hits (messages) in {sessions_hit} sessions",
         f"{sum(rg_counts.values())} matches in {len(rg_counts)} files", "-", "-", "info"),
        (f"Worst case, query `{COMMON}` (in nearly every message: every session replayed): time",
         f"{c_ours:.0f} ms ({common_hits:,} hits)", f"{c_rg:.0f} ms ({common_matches:,} matches)",
         f"{c_ours / c_rg:.2f}x", "-", "info"),
    ]
    first = done = None
    if not a.no_nvim:
        nvim = nvim_bin()
        runs = [picker_round(nvim, ws) for _ in range(max(3, a.rounds // 2))]
        first = statistics.median(x[0] for x in runs)
        done = statistics.median(x[1] for x in runs)
        rows.append(("Picker search mode: query set → first hit row drawn (Neovim)", f"{first:.1f} ms", "-", "-",
                     "<= 50 ms", "PASS" if first <= 50 else "FAIL"))
        rows.append(("Picker search mode: query set → search done, every hit row in", f"{done:.0f} ms", "-", "-", "-",
                     "info"))
    table = ("| Measure | pseudoclaude | ripgrep (same run) | Ratio | Goal | Result |\n|---|---|---|---|---|---|\n"
             + "\n".join("| " + " | ".join(r) + " |" for r in rows))
    print(table)
    total_s = time.monotonic() - started
    if a.write:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        body = (
            f"Produced by `tests/bench/search_bench.py --write`; rerun it to refresh this section.\n\n"
            f"- Date: {time.strftime('%Y-%m-%d %H:%M %z')}\n"
            f"- Code: HEAD {head} plus the working tree at that time; {rg_version} (Debian package)\n"
            f"- Machine: nproc {os.cpu_count()}, load average at start {load_at_start}; total run time {total_s:.0f} s "
            f"(generating the workspace: {gen_s:.0f} s)\n"
            f"- Rounds: {a.rounds}, ours and ripgrep alternated, medians; the picker measure in "
            f"{max(3, a.rounds // 2)} fresh Neovims\n\n"
            f"{table}\n\n"
            f"Ours is the CLI, `pseudoclaude sessions search {QUERY} --json` (a process, the folder listing, the "
            f"search on two threads, the JSON of every hit); ripgrep is `rg -F -i --count-matches {QUERY}` given the "
            f"same {SESSIONS:,} `conversation.jsonl` paths (it uses both cores too). The workspace: {SESSIONS:,} "
            f"generated sessions of about 1 MiB (user prompts, answers, tool calls, tool outputs of code with quotes, "
            f"tabs and non-ASCII text; every fifth compacted with `replace`, some with checkpoints); the query is in "
            f"{info['planted']} of them. ripgrep counts raw matches in the JSON text, including text "
            f"that a `replace` took out of the history ({len(rg_counts) - sessions_hit} of the {len(rg_counts)} sessions here); ours reports a message once, only when a resume restores it, "
            f"with its index. The first-hit figure is measured inside Neovim: `:PseudoResume`, `<C-g>`, the query set "
            f"in the prompt, until the first hit row is drawn (the search runs on threads of its own; rows arrive in "
            f"batches, newest sessions first). Without an index it depends on where the newest session holding the "
            f"text is: here the {first_at}th newest, so about {first_at} MiB are read and scanned first; the full list "
            f"of sessions and the first preview are read at the same time, on the same two cores.\n\n"
            f"The worst case is a word of nearly every message: every session is then replayed and most of its lines "
            f"decoded (about 1 GB/s of JSON parsing against ripgrep's raw scan), and the CLI prints every hit as JSON. "
            f"The picker stops such a search at 2,000 hits (50 a session), after a few sessions.\n"
        )
        write_section("Session search", body)
    if not a.keep:
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
