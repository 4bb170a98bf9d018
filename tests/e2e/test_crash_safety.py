"""An error or a panic in the native core comes back to Lua as a value and never takes Neovim down.

(nvim-oxi 0.6 aborts Neovim on an `Err` or a panic raised into Lua, even under pcall: src/bridge.rs turns them
into `false, message`.)
"""

import pytest
from conftest import wait_for


def test_error_is_returned_as_a_value(nvim):
    assert nvim.lua("return { require('pseudoclaude.core').load()._test_err() }") == [
        False,
        "pseudoclaude_core._test_err: _test_err: deliberate error",
    ]
    assert nvim.alive()


def test_core_call_turns_the_error_into_a_lua_error(nvim):
    ok, msg = nvim.lua("return { pcall(require('pseudoclaude.core').call, '_test_err') }")
    assert ok is False
    assert "pseudoclaude: pseudoclaude_core._test_err: _test_err: deliberate error" in msg
    assert nvim.alive()


def test_panic_does_not_kill_neovim_and_is_logged(nvim):
    for _ in range(3):  # repeatedly: the hook and the unwinding must keep working
        ok, msg = nvim.lua("return { pcall(require('pseudoclaude.core').call, '_test_panic') }")
        assert ok is False
        assert "pseudoclaude_core._test_panic: internal error (panic): _test_panic: deliberate panic" in msg
        assert "src/bridge/mod.rs" in msg
        assert nvim.alive()
    # the library still works afterwards
    assert nvim.lua("return require('pseudoclaude.core').call('ping')") == "pong"
    # logged under stdpath("log"), printed nowhere
    log_path = nvim.lua("return require('pseudoclaude.core').call('panic_log_path')")
    assert log_path == nvim.lua("return vim.fn.stdpath('log')") + "/pseudoclaude-panic.log"
    assert log_path.startswith(str(nvim.state_home))
    with open(log_path) as f:
        log = f.read()
    assert log.count("_test_panic: deliberate panic") == 3
    assert "panicked" not in nvim.stderr()
    assert "deliberate" not in nvim.stderr()


def test_panic_outside_pcall_is_an_ordinary_lua_error(nvim):
    with pytest.raises(Exception, match="deliberate panic"):
        nvim.lua("require('pseudoclaude.core').call('_test_panic')")
    assert nvim.alive()


@pytest.mark.parametrize(
    "arg_lua",
    ["vim.NIL", "coroutine.create(function() end)", "{ ok = vim.NIL }", "io.stdout"],
)
def test_unconvertible_arguments_are_an_error_value(nvim, arg_lua):
    ok, msg = nvim.lua(f"return {{ require('pseudoclaude.core').load()._test_echo(1, {arg_lua}) }}")
    assert ok is False
    assert msg.startswith("pseudoclaude_core._test_echo: bad argument #2")
    assert nvim.alive()


def test_wrongly_typed_argument_is_an_error_value(nvim):
    assert nvim.lua("return { require('pseudoclaude.core').load().ping('you') }") == [True, "pong you"]
    ok, msg = nvim.lua("return { require('pseudoclaude.core').load().ping({ 1, 2 }) }")
    assert ok is False
    assert msg.startswith("pseudoclaude_core.ping: bad argument #1:"), msg
    assert nvim.alive()


def test_first_loaded_from_a_coroutine_the_library_survives_the_coroutine(nvim):
    # The library keeps the Lua state it was opened with for its callbacks: opened from a coroutine (a telescope
    # finder, a user's async code) that was since collected, the next callback used to crash Neovim.
    assert nvim.lua("return require('pseudoclaude.core').is_loaded()") is False
    nvim.lua(
        """
        _G.co_res = {}
        coroutine.wrap(function()
          require('pseudoclaude.sessions').list_async({}, function(err, items)
            _G.co_res = { done = true, err = err, n = #items }
          end)
        end)()
        collectgarbage()
        collectgarbage()
        """
    )
    assert nvim.lua("return require('pseudoclaude.core').is_loaded()") is True
    wait_for(lambda: nvim.lua("return _G.co_res.done"), what="the list's callback")
    assert nvim.lua("return _G.co_res") == {"done": True, "n": 0}
    # later callbacks too, and calls from the main thread
    nvim.lua(
        "collectgarbage(); require('pseudoclaude.sessions').list_async({}, function() _G.co_res.again = true end)"
    )
    wait_for(lambda: nvim.lua("return _G.co_res.again"), what="a later callback")
    assert nvim.lua("return require('pseudoclaude.core').call('ping')") == "pong"
    assert nvim.alive()
