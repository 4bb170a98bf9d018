"""Thinking models end to end: Anthropic's extended thinking (signatures, a redacted block) against the fake Anthropic
server, which refuses a tool loop whose last assistant turn does not start with its thinking blocks as given; a
`kill -9` right after a tool result, then a resume that goes on without a 400; the OpenAI-compatible
`reasoning_content`; the folded thinking line, live and restored."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import TRACK, Neovim, transcript, type_message, wait_for
from fake_llm import FakeAnthropic

THOUGHT = "The user asks about a.txt.\nI should read it before answering.\nThen say what it holds."


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    f = FakeAnthropic()
    yield f
    f.close()


def anthropic(f: FakeAnthropic, thinking: bool = True) -> dict[str, Any]:
    p = {"name": "anthropic", "base_url": f.base_url, "model": "fake-claude", "api_key_env": "PC_TEST_NO_KEY"}
    if thinking:
        p["thinking"] = {"budget_tokens": 2048}
    return p


def setup(n: Neovim, provider: dict[str, Any]) -> None:
    n.lua("require('pseudoclaude').setup(...)", {"provider": provider})
    n.lua(TRACK)


def resume(n: Neovim, command: str) -> dict[str, Any]:
    n.lua("vim.g.pc_resumed = vim.NIL")
    n.api.command(command)
    report = wait_for(lambda: n.lua("return vim.g.pc_resumed"), what="the resume")
    assert report["ok"] is True, report
    return report


def log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_session_killed_after_a_tool_result_resumes_with_its_thinking_and_gets_no_400(
    start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic
) -> None:
    (workspace / "a.txt").write_text("hello from a.txt\n")
    fake_anthropic.push_tools("Reading a.txt.", [("toolu_1", "read_file", {"path": "a.txt"})],
                              thinking=THOUGHT, redacted="opaque-1")
    fake_anthropic.push_text("", hang=True)  # the request after the tool result: never answered
    first = start_nvim()
    setup(first, anthropic(fake_anthropic))
    type_message(first, "what is in a.txt?")
    wait_for(lambda: len(fake_anthropic.requests) == 2, what="the request after the tool result")
    jsonl = Path(first.lua("return require('pseudoclaude').current().jsonl"))
    entries = log(jsonl)
    assert entries[-1].get("tool_result", {}).get("tool_call_id") == "toolu_1", entries[-1]
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait()
    assert fake_anthropic.errors == [], fake_anthropic.errors

    answer = next(e for e in entries if e.get("role") == "assistant")
    assert answer["thinking"] == [
        {"type": "thinking", "thinking": THOUGHT, "signature": FakeAnthropic.signature(THOUGHT)},
        {"type": "redacted_thinking", "data": FakeAnthropic.redacted_data("opaque-1")},
    ]
    assert answer["thinking_ms"] >= 1
    assert all("thinking" not in e for e in entries if e is not answer), "only the answer carries thinking"

    second = start_nvim()
    setup(second, anthropic(fake_anthropic))
    resume(second, "PseudoResume last")
    fake_anthropic.push_text("a.txt says hello.")
    type_message(second, "go on")
    wait_for(lambda: second.lua("return vim.g.pc_turns") >= 1, what="the turn after the resume")
    assert fake_anthropic.errors == [], fake_anthropic.errors
    sent = fake_anthropic.requests[-1]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    shape = [(m["role"], [b["type"] for b in m["content"]]) for m in sent["messages"]]
    assert shape == [
        ("user", ["text"]),
        ("assistant", ["thinking", "redacted_thinking", "text", "tool_use"]),
        ("user", ["tool_result", "text"]),
    ], shape
    assert sent["messages"][1]["content"][:2] == answer["thinking"]
    assert "a.txt says hello." in transcript(second)


def test_the_fake_refuses_a_tool_loop_without_its_thinking_or_with_it_changed() -> None:
    """What makes the test above mean something: the fake's rule, in the API's words."""
    sig = FakeAnthropic.signature(THOUGHT)
    block = {"type": "thinking", "thinking": THOUGHT, "signature": sig}
    use = {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}

    def body(assistant: list[dict[str, Any]]) -> dict[str, Any]:
        return {"model": "m", "max_tokens": 4096, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 2048},
                "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": assistant}, result]}

    assert FakeAnthropic.validate(body([block, use])) is None
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in FakeAnthropic.validate(body([use]))
    changed = {**block, "thinking": THOUGHT + " "}
    assert "Invalid `signature` in `thinking` block" in FakeAnthropic.validate(body([changed, use]))
    bad = {"type": "redacted_thinking", "data": FakeAnthropic.redacted_data("x") + "y"}
    assert "Invalid `data` in `redacted_thinking` block" in FakeAnthropic.validate(body([bad, use]))
    off = {**body([use]), "thinking": None}
    del off["thinking"]
    assert FakeAnthropic.validate(off) is None
    low = {**body([block, use]), "thinking": {"type": "enabled", "budget_tokens": 512}}
    assert "greater than or equal to 1024" in FakeAnthropic.validate(low)


def folds(n: Neovim) -> list[tuple[int, int]]:
    """The closed folds of the agent buffer's window, as 1-based (first, last) lines."""
    return [tuple(f) for f in n.lua(
        "local w = vim.fn.bufwinid('pseudoclaude://chat') local out = {} "
        "vim.api.nvim_win_call(w, function() local l = 1 while l <= vim.fn.line('$') do "
        "local e = vim.fn.foldclosedend(l) if e ~= -1 then out[#out + 1] = { l, e } l = e + 1 else l = l + 1 end "
        "end end) return out")]


def test_thinking_is_one_folded_line_live_and_restored_the_same_and_tab_opens_it(
    start_nvim: Any, workspace: Path, fake_anthropic: FakeAnthropic
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    fake_anthropic.push_tools("", [("toolu_1", "read_file", {"path": "a.txt"})], thinking=THOUGHT)
    fake_anthropic.push_text("It says hello.", thinking="Easy.\nIt says hello.")
    first = start_nvim()
    setup(first, anthropic(fake_anthropic))
    type_message(first, "what is in a.txt?")
    wait_for(lambda: first.lua("return vim.g.pc_turns") >= 1, what="the turn")
    assert fake_anthropic.errors == [], fake_anthropic.errors
    live = transcript(first)
    thinking = [l for l in live if l.startswith("💭 ")]
    assert len(thinking) == 2, live
    assert thinking[0].startswith("💭 thought for ") and thinking[0].endswith(" s, 3 lines"), thinking
    assert thinking[1].endswith(" s, 2 lines"), thinking
    at = live.index(thinking[0])
    assert live[at + 1:at + 4] == ["    " + l for l in THOUGHT.split("\n")], live
    assert live[at + 4].startswith("▸ read_file"), live  # no empty text row between the thinking and the call
    live_folds = folds(first)
    assert (at + 2, at + 4) in live_folds, (live_folds, live)
    # <Tab> on the thinking line opens it, and again folds it
    first.api.input("<Esc>")
    first.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid('pseudoclaude://chat'))")
    first.lua("vim.api.nvim_win_set_cursor(0, { ..., 0 })", at + 1)
    first.api.input("<Esc><Tab>")
    wait_for(lambda: (at + 2, at + 4) not in folds(first), what="the thinking opened")
    first.api.input("<Tab>")
    wait_for(lambda: (at + 2, at + 4) in folds(first), what="the thinking folded again")
    sid = first.lua("return require('pseudoclaude').current().id")
    first.close()

    second = start_nvim()
    setup(second, anthropic(fake_anthropic))
    resume(second, f"PseudoResume {sid}")
    wait_for(lambda: transcript(second)[-len(live):] == live or None, what="the restored transcript")
    restored = transcript(second)
    assert restored[:len(live)] == live, (restored, live)
    assert folds(second)[:len(live_folds)] == live_folds


def test_reasoning_content_of_an_openai_compatible_server_is_shown_as_thinking_and_logged_not_sent_back(
    nvim: Neovim, fake: Any
) -> None:
    fake.push_text("Four.", reasoning="two plus two is four")
    fake.push_text("Six.")
    setup(nvim, {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY",
                 "reasoning_effort": "low"})
    type_message(nvim, "2+2?")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="the turn")
    lines = transcript(nvim)
    line = next(l for l in lines if l.startswith("💭 "))
    assert line.endswith(" s, 1 line") and lines[lines.index(line) + 1] == "    two plus two is four", lines
    assert fake.requests[0]["reasoning_effort"] == "low"
    jsonl = Path(nvim.lua("return require('pseudoclaude').current().jsonl"))
    answer = next(e for e in log(jsonl) if e.get("role") == "assistant")
    assert answer["thinking"] == [{"type": "reasoning", "thinking": "two plus two is four "}], answer
    type_message(nvim, "3+3?")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 2, what="the second turn")
    sent = fake.requests[1]["messages"]
    assert sent[2] == {"role": "assistant", "content": "Four. "}, sent
    assert "two plus two" not in json.dumps(sent)
