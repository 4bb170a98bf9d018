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
