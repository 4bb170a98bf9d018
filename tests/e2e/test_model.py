"""`:PseudoModel [name]`: the model switched mid-session (completion from the configured models), each answer's
model in the log, the session's model (what the picker's row shows) the last one, and the cost priced per model."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import TRACK, Neovim, type_message, wait_for
from fake_llm import FakeOpenAI


def test_pseudomodel_switches_the_next_turn_and_each_turn_is_priced_with_its_own_model(
    nvim: Neovim, fake: FakeOpenAI
) -> None:
    nvim.lua("require('pseudoclaude').setup(...)", {
        "provider": {"name": "openai", "base_url": fake.base_url, "model": "m-small", "api_key_env": "PC_TEST_NO_KEY",
                     "models": ["m-small", "m-big"]},
        "pricing": {"m-small": {"input": 1, "output": 1}, "m-big": {"input": 100, "output": 100},
                    "m-other": {"input": 5, "output": 5}},
    })
    nvim.lua(TRACK)
    assert nvim.api.call("getcompletion", "PseudoModel m-", "cmdline") == ["m-big", "m-other", "m-small"]
    assert nvim.api.call("getcompletion", "PseudoModel m-b", "cmdline") == ["m-big"]
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    fake.push_text("Small answer.", usage=usage)
    fake.push_text("Big answer.", usage=usage)
    type_message(nvim, "first")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 1, what="the first turn")
    nvim.api.command("PseudoModel m-big")
    assert nvim.lua("return require('pseudoclaude.chat').winbar()").find("m-big") >= 0
    type_message(nvim, "second")
    wait_for(lambda: nvim.lua("return vim.g.pc_turns") >= 2, what="the second turn")
    assert [r["model"] for r in fake.requests] == ["m-small", "m-big"]

    jsonl = Path(nvim.lua("return require('pseudoclaude').current().jsonl"))
    entries = [json.loads(l) for l in jsonl.read_text().splitlines()]
    answers = [e for e in entries if e.get("role") == "assistant"]
    assert [(a["content"].strip(), a["model"]) for a in answers] == [("Small answer.", "m-small"),
                                                                     ("Big answer.", "m-big")]
    assert [e["model"] for e in entries if e.get("type") == "usage"] == ["m-small", "m-big"]
    sid = nvim.lua("return require('pseudoclaude').current().id")
    items = nvim.lua("return require('pseudoclaude').sessions.list({ include_current = true })")
    item = next(i for i in items if i["id"] == sid)
    assert item["model"] == "m-big", item  # the row shows the last model
    assert abs(item["cost"] - (1100 * 1 + 1100 * 100) / 1e6) < 1e-9, item
    # the messages as restored carry their model too
    msgs = nvim.lua("return require('pseudoclaude').sessions.load(...).messages", sid)
    assert [m.get("model") for m in msgs if m["role"] == "assistant"] == ["m-small", "m-big"]


def test_pseudomodel_without_a_name_offers_the_configured_models(nvim: Neovim, fake: FakeOpenAI) -> None:
    nvim.lua("require('pseudoclaude').setup(...)", {
        "provider": {"name": "openai", "base_url": fake.base_url, "model": "m-small", "api_key_env": "PC_TEST_NO_KEY",
                     "models": ["m-small", "m-big"]}})
    nvim.lua("vim.ui.select = function(items, opts, cb) vim.g.pc_items = items vim.g.pc_prompt = opts.prompt "
             "vim.schedule(function() cb('m-big') end) end")
    nvim.api.command("PseudoModel")
    wait_for(lambda: nvim.lua("return require('pseudoclaude.chat').winbar()").find("m-big") >= 0, what="m-big")
    assert nvim.lua("return vim.g.pc_items") == ["m-big", "m-small"]
    assert "now m-small" in nvim.lua("return vim.g.pc_prompt")
