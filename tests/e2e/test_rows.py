"""Richer rows, end to end: the git branch a session ran on (a real `git init` workspace), shown in the picker's
rows and matched by its filter; the tokens a provider reported (a fake OpenAI server sending the usage chunk) in
`sessions.list()` and the agent buffer's winbar; the cost once `pricing` is configured."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Neovim, distinct_highlights, screen_highlights, wait_for
from fake_llm import FakeAnthropic, FakeOpenAI

STATE = """
local s = require("pseudoclaude.float").get_state()
if not s then return vim.NIL end
local buf = vim.api.nvim_win_get_buf(s.wins.results)
return { full = s.full, query = s.query, lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), win = s.wins.results }
"""


def state(n: Neovim) -> dict[str, Any] | None:
    """The picker's results, with the highlights the screen shows in them (`marks`: [line, start, end, group])."""
    s = n.lua(STATE)
    if s:
        s["marks"] = [list(h) for h in screen_highlights(n, s["win"])]
    return s


def git(ws: Path, *args: str) -> str:
    """git without the user's configuration; fails the test when git is missing."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(var, None)
    out = subprocess.run(
        ["git", "-C", str(ws), "-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return out.stdout.strip()


def setup(n: Neovim, **opts: Any) -> None:
    n.lua(
        """
        require("pseudoclaude").setup(...)
        vim.g.pc_turns = 0
        vim.api.nvim_create_autocmd("User", { pattern = "PseudoClaudeTurnDone", callback = function()
          vim.g.pc_turns = vim.g.pc_turns + 1
        end })
        """,
        opts,
    )


def send(n: Neovim, text: str) -> None:
    """Sends `text` through the agent buffer and waits for the turn to end."""
    turns = n.lua("return vim.g.pc_turns")
    n.lua("require('pseudoclaude').chat.send(...)", text)
    wait_for(lambda: n.lua("return vim.g.pc_turns") > turns, what=f"the turn for {text!r}")


def picker(n: Neovim) -> dict[str, Any]:
    distinct_highlights(n)
    n.api.input(":PseudoResume<CR>")
    return wait_for(lambda: (s := state(n)) and s["full"] and s, what="the picker with the full list")


def type_query(n: Neovim, keys: str, query: str) -> dict[str, Any]:
    n.api.input(keys)
    return wait_for(lambda: (s := state(n)) and s["query"] == query and s, what=f"query {query!r}")


def test_the_picker_shows_each_sessions_branch_and_filters_by_it(nvim: Neovim, workspace: Path) -> None:
    git(workspace, "-c", "init.defaultBranch=main", "init", "-q")
    (workspace / "a.txt").write_text("a\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-q", "-m", "one")
    git(workspace, "checkout", "-q", "-b", "feature/rowsx")
    first_commit = git(workspace, "rev-parse", "--short=7", "HEAD")
    nvim.api.command("set columns=160 lines=48")
    setup(nvim, provider={"name": "demo"})
    send(nvim, "alpha question")
    alpha = nvim.lua("return require('pseudoclaude').current().id")
    # Another branch and another commit for the next session.
    git(workspace, "checkout", "-q", "-b", "topic")
    (workspace / "b.txt").write_text("b\n")
    git(workspace, "add", "b.txt")
    git(workspace, "commit", "-q", "-m", "two")
    second_commit = git(workspace, "rev-parse", "--short=7", "HEAD")
    nvim.lua("require('pseudoclaude').chat.start_over()")
    send(nvim, "beta question")
    nvim.lua("require('pseudoclaude').chat.start_over()")

    items = {i["id"]: i for i in nvim.lua("return require('pseudoclaude').sessions.list()")}
    assert (items[alpha]["branch"], items[alpha]["commit"]) == ("feature/rowsx", first_commit)
    beta = next(i for i in items if i != alpha)
    assert (items[beta]["branch"], items[beta]["commit"]) == ("topic", second_commit)
    log = Path(nvim.lua("return require('pseudoclaude.sessions').workspace()")) / ".PseudoClaude" / "sessions"
    metas = [json.loads(l) for l in (log / alpha / "conversation.jsonl").read_text().splitlines()]
    metas = [e for e in metas if e.get("type") == "meta"]
    assert metas == [{"type": "meta", "ts": metas[0]["ts"], "git": {"branch": "feature/rowsx", "commit": first_commit}}]

    s = picker(nvim)
    rows = s["lines"]
    assert len(rows) == 2 and "beta question" in rows[0] and "alpha question" in rows[1], rows
    assert "  topic" in rows[0] and "  feature/rowsx" in rows[1], rows
    col = rows[1].index("feature/rowsx")
    assert [1, col, col + len("feature/rowsx"), "PseudoClaudePickerBranch"] in s["marks"]

    # The filter matches the branch (neither title, model nor id holds "rowsx"), highlighted in its column.
    s = type_query(nvim, "rowsx", "rowsx")
    assert len(s["lines"]) == 1 and "alpha question" in s["lines"][0], s["lines"]
    col = s["lines"][0].index("feature/rowsx") + len("feature/")
    hits = sorted((m[1], m[2]) for m in s["marks"] if m[3] == "PseudoClaudePickerMatch")
    assert hits == [(col, col + 5)], (hits, col)  # one mark for the run of matched characters
    s = type_query(nvim, "<C-w>topic", "topic")
    assert len(s["lines"]) == 1 and "beta question" in s["lines"][0], s["lines"]


def test_outside_a_repository_no_branch_is_recorded_or_shown(nvim: Neovim, workspace: Path) -> None:
    # (the fixture's folder must not sit inside a repository, or the test means nothing)
    assert subprocess.run(["git", "-C", str(workspace), "rev-parse"], capture_output=True).returncode != 0
    setup(nvim, provider={"name": "demo"})
    send(nvim, "no git here")
    item = nvim.lua("return require('pseudoclaude').sessions.list({ include_current = true })[1]")
    assert item.get("branch") is None and item.get("commit") is None
    text = Path(nvim.lua("return require('pseudoclaude').current().jsonl")).read_text()
    assert '"type":"meta"' not in text



def openai(fake: FakeOpenAI) -> dict[str, Any]:
    return {"name": "openai", "base_url": fake.base_url, "model": "fake-model", "api_key_env": "PC_TEST_NO_KEY"}


USAGE_1 = {"prompt_tokens": 1200, "completion_tokens": 50, "total_tokens": 1250,
           "prompt_tokens_details": {"cached_tokens": 1000}}
USAGE_2 = {"prompt_tokens": 2400, "completion_tokens": 150, "total_tokens": 2550,
           "prompt_tokens_details": {"cached_tokens": 2000}}


def winbar(n: Neovim) -> str:
    return n.lua("return require('pseudoclaude.chat').winbar()")


def test_usage_totals_from_the_server_in_the_list_and_the_winbar(nvim: Neovim, fake: FakeOpenAI) -> None:
    fake.push_text("First answer.", usage=USAGE_1)
    fake.push_text("Second answer.", usage=USAGE_2)
    setup(nvim, provider=openai(fake))
    send(nvim, "one")
    assert fake.requests[0]["stream_options"] == {"include_usage": True}
    wait_for(lambda: "1.2k in (83% cached) · 50 out" in winbar(nvim), what="the first turn's usage in the winbar")
    send(nvim, "two")
    assert fake.errors == []
    # 3.6k prompt tokens, 3,000 of them cached; no pricing: no cost.
    bar = wait_for(lambda: (b := winbar(nvim)) and "3.6k in (83% cached) · 200 out" in b and b, what="the totals")
    assert "$" not in bar
    item = nvim.lua("return require('pseudoclaude').sessions.list({ include_current = true })[1]")
    assert item["usage"] == {"input_tokens": 600, "output_tokens": 200, "cache_read_tokens": 3000,
                             "cache_write_tokens": 0}
    assert item.get("cost") is None
    entries = [json.loads(l) for l in Path(nvim.lua("return require('pseudoclaude').current().jsonl")).read_text().splitlines()]
    assert [e["usage"]["cache_read_tokens"] for e in entries if e.get("type") == "usage"] == [1000, 2000]


def test_the_cost_shows_in_the_winbar_list_and_picker_once_pricing_is_set(nvim: Neovim, fake: FakeOpenAI) -> None:
    fake.push_text("Priced answer.", usage=USAGE_1)
    nvim.api.command("set columns=160 lines=48")
    pricing = {"fake-model": {"input": 2, "output": 8, "cache_read": 0.5}}
    setup(nvim, provider=openai(fake), pricing=pricing)
    send(nvim, "what does it cost?")
    # (200 * 2 + 50 * 8 + 1000 * 0.5) / 1e6 dollars
    wait_for(lambda: winbar(nvim).find("1.2k in (83% cached) · 50 out · $0.0013") >= 0, what="the cost in the winbar")
    sid = nvim.lua("return require('pseudoclaude').current().id")
    item = nvim.lua("return require('pseudoclaude').sessions.info(...)", sid)
    assert item["cost"] == pytest.approx(0.0013)
    nvim.lua("require('pseudoclaude').chat.start_over()")
    listed = nvim.lua("return require('pseudoclaude').sessions.list()")
    assert [i["id"] for i in listed] == [sid] and listed[0]["cost"] == pytest.approx(0.0013)
    s = picker(nvim)
    assert "$0.0013" in s["lines"][0], s["lines"]
    col = s["lines"][0].index("$0.0013")
    assert [0, col, col + len("$0.0013"), "PseudoClaudePickerCost"] in s["marks"]
    # Without a price for the model, no cost anywhere.
    nvim.api.input("<Esc><Esc>")
    nvim.lua("require('pseudoclaude').setup({ pricing = { ['other-model'] = { input = 1, output = 1 } } })")
    assert nvim.lua("return require('pseudoclaude').sessions.list()")[0].get("cost") is None


def test_bad_pricing_is_refused_with_a_clear_error(nvim: Neovim) -> None:
    for pricing, why in [
        ("cheap", "pricing: expected a table of prices by model name, got string"),
        ({"m": {"input": 1}}, 'pricing["m"].output: missing'),
        ({"m": {"input": 1, "output": -2}}, 'pricing["m"].output: expected dollars per million tokens (a number >= 0), got -2'),
        ({"m": {"input": 1, "output": 2, "cache_reed": 1}}, 'pricing["m"].cache_reed: unknown price'),
    ]:
        ok, err = nvim.lua("return { pcall(require('pseudoclaude').setup, { pricing = ... }) }", pricing)
        assert not ok and why in err, err


def test_the_demo_provider_reports_a_small_usage_offline(nvim: Neovim) -> None:
    setup(nvim, provider={"name": "demo"})
    send(nvim, "hello")
    bar = wait_for(lambda: (b := winbar(nvim)) and " in · " in b and b, what="usage in the winbar")
    assert " out" in bar


def test_rows_fit_the_width_dropping_the_model_then_the_branch_then_the_cost(nvim: Neovim) -> None:
    widths = [120, 56, 48, 36]
    got = nvim.lua(
        """
        local r = require("pseudoclaude.float.render")
        local items = {
          { id = "x", title = "fix the parser", model = "claude-x", messages = 3, modified = 100,
            last_message = 100, branch = "topic/parse", cost = 0.42 },
          { id = "y", title = "no git, no price", model = "claude-x", messages = 1, modified = 100,
            last_message = 100 },
        }
        local out = {}
        for _, w in ipairs(...) do
          out[#out + 1] = (r.rows(items, w, 200))
        end
        return out
        """,
        widths,
    )
    wide, no_model, no_branch, no_cost = got
    assert wide[0].endswith(" 3 msgs  $0.42  topic/parse  claude-x"), wide
    # the columns stay aligned where a session has no cost or branch
    assert wide[1].endswith(" 1 msg" + " " * 7 + " " * 13 + "  claude-x"), wide
    assert "claude" not in no_model[0] and no_model[0].endswith("$0.42  topic/parse"), no_model
    assert "topic" not in no_branch[0] and no_branch[0].rstrip().endswith("3 msgs  $0.42"), no_branch
    assert "$" not in no_cost[0] and no_cost[0].rstrip().endswith("3 msgs"), no_cost
    assert "fix the parser" in no_cost[0]
    for lines, w in zip(got, widths):
        assert all(len(line) <= w for line in lines), (w, lines)


PREVIEW = """
local p = require("pseudoclaude.float")
local s = p.get_state()
if not (s and s.full and s.preview_id and s.preview_id == (p.selected() or {}).id) then return false end
return vim.api.nvim_buf_get_lines(s.bufs.preview, 0, -1, false)
"""


def preview_header(n: Neovim) -> list[str]:
    """The header of the highlighted session's preview (the lines before the first empty one), once it is read."""
    lines = wait_for(lambda: n.lua(PREVIEW), what="the preview")
    return lines[: lines.index("")]


def test_the_preview_header_shows_the_branch_and_commit_and_where_the_session_started(
    nvim: Neovim, workspace: Path
) -> None:
    git(workspace, "-c", "init.defaultBranch=main", "init", "-q")
    (workspace / "a.txt").write_text("a\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-q", "-m", "one")
    start = git(workspace, "rev-parse", "--short=7", "HEAD")
    nvim.api.command("set columns=160 lines=48")
    setup(nvim, provider={"name": "demo"})
    send(nvim, "started on main")
    git(workspace, "checkout", "-q", "-b", "topic")
    (workspace / "b.txt").write_text("b\n")
    git(workspace, "add", "b.txt")
    git(workspace, "commit", "-q", "-m", "two")
    latest = git(workspace, "rev-parse", "--short=7", "HEAD")
    send(nvim, "went on in topic")
    nvim.lua("require('pseudoclaude').chat.start_over()")
    picker(nvim)
    header = preview_header(nvim)
    assert f"branch topic at {latest}, started on main at {start}" in header, header
    # A new session on a detached HEAD: no branch, and one state recorded, so no start either.
    nvim.api.input("<Esc><Esc>")
    git(workspace, "checkout", "-q", "--detach")
    send(nvim, "detached now")
    nvim.lua("require('pseudoclaude').chat.start_over()")
    picker(nvim)
    header = preview_header(nvim)
    assert header[0] == "detached now" and f"detached at {latest}" in header, header


def test_the_preview_header_shows_the_tokens_the_cached_share_and_the_cost(nvim: Neovim, fake: FakeOpenAI) -> None:
    fake.push_text("First answer.", usage=USAGE_1)
    fake.push_text("Second answer.", usage=USAGE_2)
    nvim.api.command("set columns=160 lines=48")
    setup(nvim, provider=openai(fake), pricing={"fake-model": {"input": 2, "output": 8, "cache_read": 0.5}})
    send(nvim, "one")
    send(nvim, "two")
    assert fake.errors == []
    nvim.lua("require('pseudoclaude').chat.start_over()")
    picker(nvim)
    # 3.6k prompt tokens, 3,000 read from the cache; (600 * 2 + 200 * 8 + 3000 * 0.5) / 1e6 dollars
    header = preview_header(nvim)
    assert "tokens: 3.6k in (83% cached) · 200 out · $0.0043" in header, header
    assert not any(l.startswith("branch ") or l.startswith("detached") for l in header), "not a repository"
    # Without prices: the tokens and their cached share, no cost.
    nvim.api.input("<Esc><Esc>")
    nvim.lua("require('pseudoclaude').setup({ pricing = {} })")
    picker(nvim)
    header = preview_header(nvim)
    assert "tokens: 3.6k in (83% cached) · 200 out" in header and not any("$" in l for l in header), header


def test_anthropic_cache_reads_and_writes_reach_the_winbar_the_list_and_the_preview(nvim: Neovim) -> None:
    fake = FakeAnthropic()
    try:
        # the API's counts are disjoint: 100 at the full rate, 900 read from the cache, 200 written to it
        fake.push_text("Cached answer.", usage={"input_tokens": 100, "cache_read_input_tokens": 900,
                                                "cache_creation_input_tokens": 200, "output_tokens": 30})
        nvim.api.command("set columns=160 lines=48")
        pricing = {"fake-claude": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}
        setup(nvim, provider={"name": "anthropic", "base_url": fake.base_url, "model": "fake-claude",
                              "api_key_env": "PC_TEST_NO_KEY"}, pricing=pricing)
        send(nvim, "cache me")
        assert fake.errors == []
        body = fake.requests[0]
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        # (100 * 3 + 30 * 15 + 900 * 0.3 + 200 * 3.75) / 1e6 dollars
        wait_for(lambda: "1.2k in (75% cached) · 30 out · $0.0018" in winbar(nvim), what="the cached share in the winbar")
        item = nvim.lua("return require('pseudoclaude').sessions.list({ include_current = true })[1]")
        assert item["usage"] == {"input_tokens": 100, "output_tokens": 30, "cache_read_tokens": 900,
                                 "cache_write_tokens": 200}
        assert item["cost"] == pytest.approx(0.00177)
        nvim.lua("require('pseudoclaude').chat.start_over()")
        picker(nvim)
        assert "tokens: 1.2k in (75% cached) · 30 out · $0.0018" in preview_header(nvim)
    finally:
        fake.close()
