""":checkhealth pseudoclaude"""

import re


def health_report(n) -> str:
    n.api.command("checkhealth pseudoclaude")
    return "\n".join(n.api.current.buffer[:])


def section(report: str, title: str) -> str:
    m = re.search(rf"{re.escape(title)}.*?(?=\npseudoclaude: |\Z)", report, re.S)
    assert m, f"no section {title!r} in:\n{report}"
    return m.group(0)


def test_checkhealth_reports_ok(nvim, workspace):
    report = health_report(nvim)
    assert "ERROR" not in report, report
    lib = section(report, "pseudoclaude: native library")
    assert re.search(r"OK native library loaded: .*libpseudoclaude\.\w+, version 0\.1\.0", lib), lib
    neovim = section(report, "pseudoclaude: Neovim")
    assert "OK Neovim 0." in neovim
    sessions = section(report, "pseudoclaude: sessions directory")
    assert f"OK {workspace}/.PseudoClaude/sessions does not exist yet" in sessions
    provider = section(report, "pseudoclaude: provider")
    assert "provider: demo" in provider
    assert "OK the demo provider needs no API key" in provider
    assert nvim.alive()


def test_checkhealth_reports_missing_library_and_api_key(start_nvim, fake_plugin):
    n = start_nvim(plugin_root=fake_plugin)
    n.lua("require('pseudoclaude').setup({ provider = { name = 'x', api_key_env = 'PSEUDOCLAUDE_TEST_UNSET_KEY' } })")
    report = health_report(n)
    lib = section(report, "pseudoclaude: native library")
    assert "ERROR pseudoclaude: native library not found" in lib
    assert "cargo build --release" in lib
    provider = section(report, "pseudoclaude: provider")
    assert "WARNING API key variable $PSEUDOCLAUDE_TEST_UNSET_KEY is not set" in provider


def test_checkhealth_reports_unwritable_sessions_dir(nvim, workspace):
    (workspace / ".PseudoClaude").write_text("not a directory")
    report = health_report(nvim)
    sessions = section(report, "pseudoclaude: sessions directory")
    assert "ERROR" in sessions and "is not a directory" in sessions, sessions
