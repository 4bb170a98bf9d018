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
    assert "provider: auto → demo (no API key is set)" in provider
    assert "OK the demo provider needs no API key" in provider
    held = section(report, "pseudoclaude: sessions held by other editors")
    assert "OK no session of this workspace is open in another editor" in held, held
    assert nvim.alive()


def test_checkhealth_reports_missing_library_and_api_key(start_nvim, fake_plugin):
    n = start_nvim(plugin_root=fake_plugin)
    n.lua("require('pseudoclaude').setup({ provider = { name = 'anthropic', api_key_env = 'PSEUDOCLAUDE_TEST_UNSET_KEY' } })")
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


def test_checkhealth_names_sessions_held_by_another_editor(nvim, workspace):
    import fcntl
    import json as _json
    import os as _os
    import time as _time

    d = workspace / ".PseudoClaude" / "sessions" / "20261201-120000-beef"
    d.mkdir(parents=True)
    (d / "conversation.jsonl").write_text(
        _json.dumps({"type": "message", "role": "user", "content": "held one", "ts": int(_time.time())}) + "\n"
    )
    lock = open(d / "lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock.write(_json.dumps({"pid": _os.getpid(), "host": "testhost", "since": int(_time.time())}))
    lock.flush()
    try:
        held = section(health_report(nvim), "pseudoclaude: sessions held by other editors")
        assert "20261201-120000-beef (held one) is open in another editor" in held and f"pid {_os.getpid()}" in held, held
    finally:
        lock.close()


def test_an_unknown_provider_name_is_refused(nvim):
    ok, msg = nvim.lua("return { pcall(require('pseudoclaude').setup, { provider = { name = 'gpt' } }) }")
    assert ok is False and "provider.name" in msg and '"auto"' in msg, msg


def test_checkhealth_names_the_options_setup_did_not_know(nvim):
    nvim.lua("vim.notify = function() end")  # setup() warns too; this test reads the report
    report = section(health_report(nvim), "pseudoclaude: configuration")
    assert "OK every option given to setup() is known" in report, report
    nvim.lua("require('pseudoclaude').setup({ stale_after_hour = 1, picker = { max_item = 3 } })")
    report = section(health_report(nvim), "pseudoclaude: configuration")
    assert "WARNING setup() was given option(s) it does not know, and ignored them: picker.max_item, stale_after_hour" in report, report
