#!/usr/bin/env python3
"""ACP: the first streamed word (issue 36's speed goal: our client adds at most 5 ms to the first streamed word
compared with a bare client reading the same agent).

The agent is the real one (`claude-agent-acp` and the Claude Code it bundles, scripts/ensure-acp), offline against
the fake Anthropic server (tests/e2e/acp_rig.py). Each contender starts its own agent process (its own HOME and
fake server), initializes it, opens a session and runs one warm-up turn; then every round runs one turn per
contender, in rotating order, each answered by the fake with `firstword` followed by more words, and notes, on
CLOCK_MONOTONIC (Python's `time.monotonic()`, Neovim's `vim.uv.hrtime()`):
  sent    the contender sent `session/prompt` (for ours: the message was sent, `chat.send`)
  model   the fake wrote the answer's first `text_delta` (FakeAnthropic.first_text_at)
  seen    the contender had the first word (bare: its reader thread parsed the `agent_message_chunk`; ours: the word
          reached the chat buffer)
and prints, per contender, the medians of sent -> seen (the whole first word, Claude Code's own work included) and
model -> seen (the relay: the agent's streaming and the client's reading, where a client's overhead shows with the
least noise; also its lower quartile), each against the bare client of the same run.

Contenders: `bare`, the Python client of tests/e2e/acp_client.py reading the agent's stdout on a thread; `bare
again`, the same once more (the difference between the two is the bench's resolution). Our client is one more
`Contender` subclass in `CONTENDERS` (to come with issue 36's client: the acp engineer adds it).

Usage: tests/bench/acp_bench.py [--rounds 20] [--write]
  --write  also replace the "## ACP: the first streamed word" section of doc/benchmarks.md
Needs node and npm (scripts/ensure-acp installs the agent into .deps/acp).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / ".deps" / "python"))

from acp_client import AcpClient  # noqa: E402
from acp_rig import claude_agent_command, claude_env  # noqa: E402
from fake_llm import FakeAnthropic  # noqa: E402
from harness import write_section  # noqa: E402

WORD = "firstword"
ANSWER = WORD + " " + " ".join(f"and{i}" for i in range(30))


class Contender:
    """One ACP client under test, on its own agent process, fake server and HOME (`self.fake`, `self.home`)."""

    name = "?"

    def __init__(self, agent: list[str]) -> None:
        self.agent = agent
        self.fake = FakeAnthropic()
        self.home = Path(tempfile.mkdtemp(prefix="pc-acp-bench-"))
        self.workspace = self.home / "workspace"
        self.workspace.mkdir()
        self.env = claude_env(self.fake.base_url, self.home / "home")

    def start(self) -> None:
        """Starts the agent and opens a session, ready for `turn`."""
        raise NotImplementedError

    def turn(self, prompt: str) -> tuple[float, float]:
        """One turn whose answer begins with WORD; returns (sent, seen) on CLOCK_MONOTONIC, in seconds, once the turn
        is over (so the next one starts from a quiet agent)."""
        raise NotImplementedError

    def close(self) -> None:
        self.fake.close()
        shutil.rmtree(self.home, ignore_errors=True)


class Bare(Contender):
    """The bare client: session/prompt written to the agent's stdin, the first chunk holding WORD timed on the
    reader thread as its line is parsed."""

    name = "bare"

    def start(self) -> None:
        self.seen: float | None = None
        self.got = threading.Event()

        def on_message(t: float, msg: dict) -> None:
            if self.seen is None and msg.get("method") == "session/update":
                update = msg["params"]["update"]
                if update.get("sessionUpdate") == "agent_message_chunk" and WORD in update["content"].get("text", ""):
                    self.seen = t
                    self.got.set()

        self.client = AcpClient(self.agent, env=self.env, cwd=str(self.workspace), on_message=on_message)
        self.client.initialize()
        self.session = self.client.new_session(str(self.workspace))

    def turn(self, prompt: str) -> tuple[float, float]:
        self.seen = None
        self.got.clear()
        sent = time.monotonic()
        stop = self.client.prompt(self.session, prompt)
        assert stop == "end_turn", stop
        assert self.got.is_set(), "the answer's first word never came"
        assert self.seen is not None
        return sent, self.seen

    def close(self) -> None:
        self.client.close()
        super().close()


class BareAgain(Bare):
    """A second bare client, the same code on its own agent: how far two identical clients' medians fall apart in one
    run is the bench's resolution, against which a difference of a few ms can be read."""

    name = "bare again"


CONTENDERS: list[type[Contender]] = [Bare, BareAgain]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    agent = claude_agent_command()
    contenders = [cls(agent) for cls in CONTENDERS]
    whole: dict[str, list[float]] = {c.name: [] for c in contenders}
    relay: dict[str, list[float]] = {c.name: [] for c in contenders}
    try:
        for c in contenders:
            c.start()
            c.fake.push_text(ANSWER, delay=0.001)
            c.turn("warm up")
        for r in range(args.rounds):
            order = contenders[r % len(contenders):] + contenders[: r % len(contenders)]
            for c in order:
                c.fake.push_text(ANSWER, delay=0.001)
                sent, seen = c.turn(f"round {r}")
                model = c.fake.first_text_at[-1]
                assert sent < model < seen, (sent, model, seen)
                whole[c.name].append((seen - sent) * 1000)
                relay[c.name].append((seen - model) * 1000)
            print(f"round {r + 1}: " + ", ".join(
                f"{c.name} {whole[c.name][-1]:.1f} ms (relay {relay[c.name][-1]:.2f} ms)" for c in contenders),
                flush=True)
        for c in contenders:
            assert c.fake.errors == [], c.fake.errors
    finally:
        for c in contenders:
            c.close()
    def p25(xs: list[float]) -> float:
        return statistics.quantiles(xs, n=4)[0]

    base_whole, base_relay = statistics.median(whole["bare"]), statistics.median(relay["bare"])
    base_relay25 = p25(relay["bare"])
    rows = [
        "| client | sent -> first word (median) | vs bare | model's first delta -> first word (median) | vs bare "
        "| relay, lower quartile | vs bare |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in contenders:
        w, rl, r25 = statistics.median(whole[c.name]), statistics.median(relay[c.name]), p25(relay[c.name])
        rows.append(f"| {c.name} | {w:.1f} ms | {w - base_whole:+.1f} ms ({w / base_whole:.2f}x) | {rl:.2f} ms "
                    f"| {rl - base_relay:+.2f} ms ({rl / base_relay:.2f}x) | {r25:.2f} ms | {r25 - base_relay25:+.2f} ms |")
    spread = (f"Bare client's spread over the rounds: sent -> first word {min(whole['bare']):.1f} to "
              f"{max(whole['bare']):.1f} ms, relay {min(relay['bare']):.2f} to {max(relay['bare']):.2f} ms.")
    print("\n".join(rows))
    print(spread)
    if args.write:
        body = (
            f"Produced by `tests/bench/acp_bench.py --write` ({time.strftime('%Y-%m-%d %H:%M')}, nproc "
            f"{os.cpu_count()}, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}). The real agent "
            "(`claude-agent-acp`, the Claude Code it bundles) against the fake Anthropic server, one warm session per "
            "client, one turn per client and round in rotating order. `sent -> first word`: from `session/prompt` "
            "sent to the answer's first word in the client's hands (Claude Code's own work before it calls the model "
            "included); `model's first delta -> first word`: from the fake server writing the first `text_delta` to "
            "the same moment, the relay where a client's cost shows (its lower quartile: the least disturbed turns, "
            "steadier than the median on a loaded machine). `bare again` is the bare client once more: its "
            "difference to `bare` is the bench's resolution in this run. Goal (issue 36): our client at most 5 ms "
            "over the bare client.\n\n" + "\n".join(rows) + "\n\n" + spread
        )
        write_section("ACP: the first streamed word", body)


if __name__ == "__main__":
    main()
