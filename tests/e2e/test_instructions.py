"""Layered instructions end to end: the user's file (stdpath("config")/pseudoclaude/AGENTS.md), then the workspace's
AGENTS.md, CLAUDE.md and PSEUDOCLAUDE.md with `@path` imports (a cycle cut, a missing file named); the system prompt
byte-identical from request to request and across a resume, so the fake Anthropic server's prompt cache reports
reads; a changed file applies from the next message and the model is told once; `:checkhealth` lists the files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import TRACK, Neovim, type_message, wait_for
from fake_llm import FakeAnthropic


@pytest.fixture
def cached_anthropic() -> Iterator[FakeAnthropic]:
    f = FakeAnthropic(cache=True)
    yield f
    f.close()


def setup(n: Neovim, f: FakeAnthropic) -> None:
    n.lua("require('pseudoclaude').setup(...)", {"provider": {
        "name": "anthropic", "base_url": f.base_url, "model": "fake-claude", "api_key_env": "PC_TEST_NO_KEY"}})
    n.lua(TRACK)


def turn(n: Neovim, text: str, count: int) -> None:
    type_message(n, text)
    wait_for(lambda: n.lua("return vim.g.pc_turns") >= count, what=f"turn {count}")


def system(body: dict[str, Any]) -> str:
    return body["system"][0]["text"]


def test_layered_instructions_make_one_stable_system_prompt_the_cache_reads_across_turns_and_a_resume(
    start_nvim: Any, workspace: Path, cached_anthropic: FakeAnthropic
) -> None:
    f = cached_anthropic
    (workspace / "AGENTS.md").write_text("Agents: use tabs.\n@docs/style.md\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "style.md").write_text("Style: short answers.\n@../AGENTS.md\n@missing.md\n")
    (workspace / "CLAUDE.md").write_text("Claude: run the tests.\n")
    (workspace / "PSEUDOCLAUDE.md").write_text("Ours: be kind.\n")
    (workspace / "a.txt").write_text("hello\n")
    first = start_nvim()
    user_file = Path(first.lua("return require('pseudoclaude.chat').user_instructions()"))
    assert user_file == first.home / "config" / "nvim" / "pseudoclaude" / "AGENTS.md"
    user_file.parent.mkdir(parents=True)
    user_file.write_text("User: I like Rust.\n")
    setup(first, f)

    f.push_tools("Reading.", [("toolu_1", "read_file", {"path": "a.txt"})])
    f.push_text("It says hello.")
    f.push_text("Yes.")
    turn(first, "what is in a.txt?", 1)
    turn(first, "sure?", 2)
    assert f.errors == [], f.errors
    prompt = system(f.requests[0])
    order = ["User: I like Rust.", "Agents: use tabs.", "Style: short answers.", "Claude: run the tests.",
             "Ours: be kind."]
    at = [prompt.find(s) for s in order]
    assert all(i >= 0 for i in at) and at == sorted(at), prompt
    assert "<!-- @../AGENTS.md: already being included (an import cycle): cut -->" in prompt, prompt
    assert "<!-- @missing.md: not found -->" in prompt, prompt
    assert prompt.count("Agents: use tabs.") == 1
    assert [system(r) for r in f.requests] == [prompt] * 3, "the same bytes on every request"
    # the cache: the first request writes, the next ones read the system prompt and tools at least
    jsonl = Path(first.lua("return require('pseudoclaude').current().jsonl"))
    usage = [json.loads(l)["usage"] for l in jsonl.read_text().splitlines() if '"type":"usage"' in l]
    assert len(usage) == 3 and usage[0]["cache_read_tokens"] == 0 and usage[0]["cache_write_tokens"] > 0, usage
    system_tokens = len(prompt) // 4
    assert all(u["cache_read_tokens"] > system_tokens for u in usage[1:]), usage

    first.api.command("checkhealth pseudoclaude")
    health = "\n".join(first.api.current.buffer[:])
    for path in (user_file, workspace / "AGENTS.md", workspace / "docs" / "style.md", workspace / "CLAUDE.md",
                 workspace / "PSEUDOCLAUDE.md"):
        assert f"in the system prompt: {path.resolve()}" in health, health
    assert "not imported: @missing.md (in docs/style.md): not found" in health, health
    sid = first.lua("return require('pseudoclaude').current().id")
    first.close()

    # a resume, in another Neovim with the same user file: the same bytes, read from the cache
    second = start_nvim()
    user2 = Path(second.lua("return require('pseudoclaude.chat').user_instructions()"))
    user2.parent.mkdir(parents=True)
    user2.write_text("User: I like Rust.\n")
    setup(second, f)
    second.lua("vim.g.pc_resumed = vim.NIL")
    second.api.command(f"PseudoResume {sid}")
    wait_for(lambda: second.lua("return vim.g.pc_resumed"), what="the resume")
    f.push_text("Resumed.")
    turn(second, "still there?", 1)
    assert system(f.requests[3]) == prompt
    usage = [json.loads(l)["usage"] for l in jsonl.read_text().splitlines() if '"type":"usage"' in l]
    assert usage[3]["cache_read_tokens"] > system_tokens, usage

    # a file changes: the next message carries the new text and the note, once
    (workspace / "PSEUDOCLAUDE.md").write_text("Ours: be very kind.\n")
    f.push_text("Noted.")
    f.push_text("Again.")
    turn(second, "next", 2)
    turn(second, "and next", 3)
    assert f.errors == [], f.errors
    changed = system(f.requests[4])
    assert "Ours: be very kind." in changed and "Ours: be kind." not in changed
    assert system(f.requests[5]) == changed

    def last_user_text(body: dict[str, Any]) -> str:
        blocks = body["messages"][-1]["content"]
        return blocks if isinstance(blocks, str) else blocks[-1]["text"]

    note = last_user_text(f.requests[4])
    assert note.startswith("next\n\n[Instructions changed]") and "PSEUDOCLAUDE.md" in note, note
    assert last_user_text(f.requests[5]) == "and next"
    assert "[Instructions changed]" not in last_user_text(f.requests[3])
