"""setup(): defaults, merging, validation errors."""

import pytest


def setup_error(nvim, opts_lua: str) -> str:
    ok, msg = nvim.lua(f"return {{ pcall(require('pseudoclaude').setup, {opts_lua}) }}")
    assert ok is False, f"setup({opts_lua}) should fail"
    return msg


def test_defaults(nvim):
    cfg = nvim.lua("require('pseudoclaude').setup() return require('pseudoclaude').get_config()")
    assert cfg["provider"] == {"name": "auto"}  # model, base_url, api_key_env are nil
    assert cfg["stale_after_hours"] == 6
    # max_items unset: the picker shows as many sessions as its results window holds
    assert cfg["picker"] == {"backend": "float", "external": False}
    assert cfg["retention_days"] == 30
    assert cfg["spill_threshold"] == 65536
    # an empty Lua table crosses RPC as a list
    assert cfg["approve"] == {"write_file": False, "edit_file": False, "run_command": False, "mcp": [], "agents": []}
    assert cfg["mcp"] == {"servers": [], "timeout": 60}
    assert "workspace" not in cfg


def test_options_are_merged_over_defaults(nvim):
    cfg = nvim.lua(
        "require('pseudoclaude').setup({ provider = { model = 'm1' }, picker = { max_items = 3 }, "
        "approve = { edit_file = true } }) return require('pseudoclaude').get_config()"
    )
    assert cfg["provider"] == {"name": "auto", "model": "m1"}
    assert cfg["picker"] == {"max_items": 3, "backend": "float", "external": False}
    assert cfg["approve"] == {"write_file": False, "edit_file": True, "run_command": False, "mcp": [], "agents": []}


def test_setup_does_not_load_the_library(nvim):
    nvim.lua("require('pseudoclaude').setup({})")
    assert not nvim.library_mapped()


def test_wrong_type_is_a_clear_error(nvim):
    msg = setup_error(nvim, "{ stale_after_hours = 'x' }")
    assert msg.startswith("pseudoclaude.setup: stale_after_hours: expected number, got string"), msg


@pytest.mark.parametrize(
    "opts, expected",
    [
        ("'nope'", "pseudoclaude.setup: opts: expected table, got string"),
        ("{ provider = 'openai' }", "provider: expected table, got string"),
        ("{ provider = { name = 42 } }", "provider.name: expected one of \"auto\", \"anthropic\", \"openai\", \"demo\", got 42"),
        ("{ stale_after_hours = -1 }", "stale_after_hours: expected a positive number of hours"),
        ("{ picker = { max_items = 2.5 } }", "picker.max_items: expected an integer >= 1"),
        ("{ picker = { backend = 'fzf' } }", 'picker.backend: expected "float", "select", "telescope", "fzf-lua", "snacks", "mini" or "auto"'),
        ("{ retention_days = 'forever' }", "retention_days: expected a number of days >= 0"),
        ("{ spill_threshold = 0 }", "spill_threshold: expected an integer number of bytes >= 1"),
        ("{ approve = { run_command = 'yes' } }", "approve.run_command: expected boolean, got string"),
        ("{ workspace = 1 }", "workspace: expected string, got number"),
        ("{ mcp = { timeout = 0 } }", "mcp.timeout: expected a positive number of seconds, got 0"),
        ("{ mcp = { servers = { ['a b'] = { command = 'x' } } } }", 'mcp.servers["a b"]: a server\'s name is letters'),
        ("{ mcp = { servers = { git = { args = {} } } } }", 'mcp.servers["git"].command: expected the program to run'),
        ("{ mcp = { servers = { git = { command = 'g', args = { 1 } } } } }", 'mcp.servers["git"].args: expected a list of strings'),
        ("{ mcp = { servers = { git = { command = 'g', env = { A = 1 } } } } }", 'mcp.servers["git"].env: expected a table of strings'),
        ("{ approve = { mcp = { git = 'yes' } } }", 'approve.mcp["git"]: expected true, false or a list of tool names'),
    ],
)
def test_invalid_options(nvim, opts, expected):
    msg = setup_error(nvim, opts)
    assert msg.startswith("pseudoclaude.setup: ")
    assert expected in msg


def test_failed_setup_keeps_previous_config(nvim):
    nvim.lua("require('pseudoclaude').setup({ retention_days = 7 })")
    setup_error(nvim, "{ retention_days = -1 }")
    assert nvim.lua("return require('pseudoclaude').get_config().retention_days") == 7


def test_unknown_options_warn(nvim):
    nvim.lua("require('pseudoclaude').setup({ stale_after_hour = 1, picker = { max_item = 2 } })")
    messages = nvim.command_output("messages")
    assert "unknown option(s) ignored: picker.max_item, stale_after_hour" in messages


def test_workspace_defaults_to_cwd(nvim, workspace, tmp_path):
    assert nvim.lua("return require('pseudoclaude').workspace()") == str(workspace)
    other = tmp_path / "other"
    other.mkdir()
    nvim.lua("require('pseudoclaude').setup({ workspace = ... })", str(other))
    assert nvim.lua("return require('pseudoclaude').workspace()") == str(other)
