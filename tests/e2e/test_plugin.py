"""plugin/pseudoclaude.lua: defines the commands, loads nothing until one is used."""

from conftest import CARGO_VERSION, LIB_PATH


def test_startup_loads_no_module_and_no_library(nvim):
    assert nvim.api.vars["loaded_pseudoclaude"] is True
    assert nvim.api.call("exists", ":PseudoClaudeVersion") == 2
    assert nvim.loaded_modules() == []
    assert not nvim.library_mapped()


def test_plugin_file_is_guarded_against_double_sourcing(nvim):
    nvim.api.command("runtime plugin/pseudoclaude.lua")
    assert nvim.api.call("exists", ":PseudoClaudeVersion") == 2
    assert nvim.loaded_modules() == []


def test_version_command_prints_both_versions_and_loads_lazily(nvim):
    out = nvim.command_output("PseudoClaudeVersion")
    assert f"pseudoclaude {CARGO_VERSION} (native core {CARGO_VERSION}, {LIB_PATH})" in out
    assert "pseudoclaude.core" in nvim.loaded_modules()
    assert nvim.library_mapped()
    assert nvim.alive()


def test_version_command_without_library_warns_instead_of_failing(start_nvim, fake_plugin):
    n = start_nvim(plugin_root=fake_plugin)
    out = n.command_output("PseudoClaudeVersion")
    assert f"pseudoclaude {CARGO_VERSION} (native core unavailable)" in out
    assert "cargo build --release" in out
    assert n.alive()
