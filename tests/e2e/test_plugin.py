"""plugin/pseudoclaude.lua: defines the commands, loads nothing until one is used."""

from conftest import CARGO_VERSION, LIB_PATH


def test_startup_loads_no_module_and_no_library(nvim):
    assert nvim.api.vars["loaded_pseudoclaude"] is True
    assert nvim.api.call("exists", ":PseudoClaudeVersion") == 2
    assert nvim.loaded_modules() == []
    assert not nvim.library_mapped()


def test_plugin_file_is_guarded_against_double_sourcing(nvim):
    # A user's own :PseudoChat, defined after startup, survives the plugin file being sourced again (as
    # `:runtime! plugin/**/*.lua` does): the second sourcing defines nothing.
    nvim.api.command("command! PseudoChat let g:mine = 1")
    nvim.api.command("delcommand PseudoNew")
    nvim.api.command("runtime! plugin/pseudoclaude.lua")
    assert nvim.api.call("exists", ":PseudoClaudeVersion") == 2
    assert nvim.api.api.get_commands({})["PseudoChat"]["definition"] == "let g:mine = 1"
    assert nvim.api.call("exists", ":PseudoNew") == 0
    assert nvim.loaded_modules() == []


def test_a_user_can_turn_the_plugin_off_before_it_loads(start_nvim):
    n = start_nvim(extra_args=["--cmd", "let g:loaded_pseudoclaude = 1"])
    assert n.api.call("exists", ":PseudoChat") == 0 and n.api.call("exists", ":PseudoResume") == 0
    assert n.loaded_modules() == []


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


def test_an_older_neovim_is_refused_with_a_sentence_and_the_library_is_not_loaded(nvim):
    # Neovim 0.10 as this plugin sees it: has("nvim-0.11") is 0
    nvim.lua("local has = vim.fn.has vim.fn.has = function(f) if f == 'nvim-0.11' then return 0 end return has(f) end")
    ok, err = nvim.lua("return { require('pseudoclaude.core').try_load() == nil, select(2, require('pseudoclaude.core').try_load()) }")
    assert ok is True
    assert "is too old: pseudoclaude needs Neovim 0.11 or newer" in err, err
    assert not nvim.library_mapped()
    assert nvim.alive()
