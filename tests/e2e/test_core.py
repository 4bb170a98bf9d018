"""The native library is found, loaded lazily through pseudoclaude.core, and version-checked."""

import shutil

from conftest import CARGO_VERSION, LIB_NAME, LIB_PATH, ROOT, library_build_id, source_build_id, stale_library


def test_lua_version_constant_matches_cargo_toml(nvim):
    assert nvim.lua("return require('pseudoclaude.core').VERSION") == CARGO_VERSION
    assert nvim.lua("return require('pseudoclaude').version()") == CARGO_VERSION


def test_library_loads_and_reports_the_crate_version(nvim):
    assert nvim.lua("return require('pseudoclaude.core').library_path()") == str(LIB_PATH)
    assert nvim.lua("return require('pseudoclaude.core').is_loaded()") is False
    assert nvim.lua("return require('pseudoclaude.core').call('version')") == CARGO_VERSION
    assert nvim.lua("return require('pseudoclaude.core').is_loaded()") is True
    assert nvim.library_mapped()


def test_the_library_carries_the_build_id_of_the_sources_it_was_built_from(nvim, tmp_path):
    here = source_build_id()
    assert library_build_id() == here and stale_library() is None
    assert nvim.lua("return require('pseudoclaude.core').call('build_id')") == here
    # one byte changed in one source, in a copy of the checkout: another id, so the tests would refuse the library
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "src", copy / "src")
    for name in ("Cargo.toml", "Cargo.lock"):
        shutil.copy(ROOT / name, copy / name)
    assert source_build_id(copy) == here
    lib_rs = copy / "src" / "lib.rs"
    lib_rs.write_text(lib_rs.read_text() + "\n")
    assert source_build_id(copy) != here


def test_ping_and_raw_ok_value_convention(nvim):
    assert nvim.lua("return require('pseudoclaude.core').call('ping')") == "pong"
    # the raw functions return `ok, value`
    assert nvim.lua("return { require('pseudoclaude.core').load().ping() }") == [True, "pong"]


def test_arguments_round_trip(nvim):
    got = nvim.lua("return require('pseudoclaude.core').call('_test_echo', 1, 'two', { a = { 3.5, true } })")
    assert got == [1, "two", {"a": [3.5, True]}]


def test_unknown_function_is_a_clear_error(nvim):
    ok, msg = nvim.lua("return { pcall(require('pseudoclaude.core').call, 'no_such_function') }")
    assert ok is False
    assert "no function \"no_such_function\"" in msg
    assert "cargo build --release" in msg


def test_plugin_root_is_found_from_the_module_file(nvim):
    assert nvim.lua("return require('pseudoclaude.core').plugin_root()") == str(ROOT)


def test_missing_library_names_the_build_command(start_nvim, fake_plugin):
    n = start_nvim(plugin_root=fake_plugin)
    ok, msg = n.lua("return { pcall(require('pseudoclaude.core').call, 'ping') }")
    assert ok is False
    assert "native library not found" in msg
    assert f"cargo build --release` in {fake_plugin}" in msg
    assert n.alive()


def test_stale_library_is_refused_with_the_build_command(start_nvim, fake_plugin):
    (fake_plugin / "target" / "release").mkdir(parents=True)
    shutil.copy2(LIB_PATH, fake_plugin / "target" / "release" / LIB_NAME)
    core = fake_plugin / "lua" / "pseudoclaude" / "core.lua"
    text = core.read_text()
    assert f'M.VERSION = "{CARGO_VERSION}"' in text
    core.write_text(text.replace(f'M.VERSION = "{CARGO_VERSION}"', 'M.VERSION = "99.0.0"'))
    n = start_nvim(plugin_root=fake_plugin)
    ok, msg = n.lua("return { pcall(require('pseudoclaude.core').call, 'ping') }")
    assert ok is False
    assert "stale" in msg
    assert f"library version {CARGO_VERSION}, plugin version 99.0.0" in msg
    assert "cargo build --release" in msg
    assert n.lua("return require('pseudoclaude.core').is_loaded()") is False


def test_lua_functions_handed_to_the_core_are_freed_unless_it_keeps_them(nvim):
    """nvim-oxi puts every Lua function an export is handed in Lua's registry and never takes it out (bridge/mod.rs
    `LuaFn`): a callback whose job is refused, one given where no function is expected or inside a table, and the
    agent's event handler once replaced, are freed (collected), not kept with all they hold for the rest of the
    session; the handler in place stays."""
    got = nvim.lua(
        """
        local core = require("pseudoclaude.core")
        _G.weak = setmetatable({}, { __mode = "v" })
        local function fn(name)
          local f = function() end
          _G.weak[name] = f
          return f
        end
        local refused = {
          -- the callback taken, then the call refused: no agent is set up yet
          pcall(core.call, "agent_messages_async", fn("refused job")),
          -- refused before its callback is taken: an empty workspace
          pcall(core.call, "sessions_preview_async", "", "x", {}, fn("refused early")),
          pcall(core.call, "ping", fn("not expected")),
          pcall(core.call, "ping", { fn("in a table") }),
          pcall(core.call, "agent_setup", fn("first handler")),
          pcall(core.call, "agent_setup", fn("second handler")),
        }
        collectgarbage("collect")
        local alive = {}
        for name in pairs(_G.weak) do
          alive[#alive + 1] = name
        end
        return { refused = refused, alive = alive }
        """
    )
    assert got["refused"] == [False, False, False, False, True, True]  # each pcall's first value
    assert got["alive"] == ["second handler"]
