"""doc/pseudoclaude.txt: helptags accepts it and the documented tags exist."""

import shutil

import pytest

from conftest import ROOT

REQUIRED_TAGS = [
    "pseudoclaude.txt",
    "pseudoclaude-install",
    "pseudoclaude-config",
    "pseudoclaude-health",
    ":PseudoClaudeVersion",
    "pseudoclaude-troubleshooting",
]


@pytest.fixture
def doc_copy(tmp_path):
    root = tmp_path / "doc-root"
    shutil.copytree(ROOT / "doc", root / "doc")
    return root


def test_helptags_and_help(nvim, doc_copy):
    nvim.api.command(f"helptags {doc_copy / 'doc'}")  # raises on E154 (duplicate tag) and the like
    assert nvim.api.vvars["errmsg"] == ""
    tags = {line.split("\t")[0] for line in (doc_copy / "doc" / "tags").read_text().splitlines()}
    missing = [t for t in REQUIRED_TAGS if t not in tags]
    assert not missing
    nvim.api.command(f"set rtp^={doc_copy}")
    for tag in REQUIRED_TAGS:
        nvim.api.command(f"help {tag}")
        assert nvim.api.current.buffer.name == str(doc_copy / "doc" / "pseudoclaude.txt")


def test_every_config_key_is_documented(nvim):
    text = (ROOT / "doc" / "pseudoclaude.txt").read_text()
    keys = nvim.lua(
        "local out = {} for k, v in pairs(require('pseudoclaude.config').defaults) do "
        "if type(v) == 'table' then for sub in pairs(v) do table.insert(out, k .. '.' .. sub) end "
        "else table.insert(out, k) end end return out"
    )
    # nil-valued defaults (provider.model, workspace, ...) are not in the table: check them by name too
    keys += ["provider.model", "provider.base_url", "provider.api_key_env", "workspace"]
    undocumented = [k for k in keys if f"\n{k} " not in text]
    assert not undocumented
