--- Loads the native Rust core (`target/release/libpseudoclaude.so`, built by `cargo build --release` in the
--- plugin directory) lazily, on first use, and calls its functions.
---
--- Every native function returns `ok, value_or_message` (it never raises: a Rust error or panic raised into Lua
--- would abort Neovim, see src/bridge/mod.rs); `M.call` turns a `false, message` into a Lua `error()`.
---
--- Architecture invariant: a native function never raises into Lua; `call()` turns its `false, message` into a
--- Lua error, and nothing loads the library before a command or API call needs it.

local M = {}
local H = {}

--- Version of the Lua side. Must equal `version` in Cargo.toml; a native library reporting another version is
--- stale and must be rebuilt.
M.VERSION = "0.1.0"

--- Name of the C entry point exported by the library (`#[nvim_oxi::plugin] fn pseudoclaude_core`).
M.ENTRY_POINT = "luaopen_pseudoclaude_core"

---@type table<string, function>?
local lib = nil

---@return string
local function library_filename()
  if jit and jit.os == "OSX" then
    return "libpseudoclaude.dylib"
  elseif jit and jit.os == "Windows" then
    return "pseudoclaude.dll"
  end
  return "libpseudoclaude.so"
end

---@param path string
---@return string
local function dirname(path)
  return (path:gsub("[/\\][^/\\]*$", ""))
end

---@type string?
local root_cache = nil

--- The plugin's root directory (the one holding `lua/`, `plugin/` and `Cargo.toml`).
---@return string
function M.plugin_root()
  if root_cache then
    return root_cache
  end
  local source = debug.getinfo(1, "S").source
  local file ---@type string?
  if source:sub(1, 1) == "@" then
    file = source:sub(2)
    file = vim.uv.fs_realpath(file) or file
  else
    file = vim.api.nvim_get_runtime_file("lua/pseudoclaude/core.lua", false)[1]
  end
  if not file then
    error("pseudoclaude: cannot locate the plugin directory (lua/pseudoclaude/core.lua is not on 'runtimepath')", 0)
  end
  -- <root>/lua/pseudoclaude/core.lua -> <root>
  root_cache = dirname(dirname(dirname(file)))
  return root_cache
end

--- Absolute path of the native library that `load()` uses.
---@return string
function M.library_path()
  return M.plugin_root() .. "/target/release/" .. library_filename()
end

--- The commands that put the library in place, for messages.
---@return string
function M.build_hint()
  return ("run :PseudoInstall (or `cargo build --release` in %s), then restart Neovim"):format(M.plugin_root())
end

--- Whether the library has been loaded in this Neovim.
---@return boolean
function M.is_loaded()
  return lib ~= nil
end

--- Loads the library if needed. Returns the table of native functions, or nil and a message saying what is wrong
--- and how to fix it. Never raises.
---@return table<string, function>? lib
---@return string? err
function M.try_load()
  if lib then
    return lib
  end
  if vim.fn.has("nvim-0.11") == 0 then
    -- the library is built against the 0.11 API: loading it into an older Neovim would crash it
    local v = vim.version()
    return nil,
      ("pseudoclaude: Neovim %d.%d.%d is too old: pseudoclaude needs Neovim 0.11 or newer"):format(
        v.major,
        v.minor,
        v.patch
      )
  end
  local co, main = coroutine.running()
  if co and not main then
    return H.load_on_main_thread()
  end
  local path = M.library_path()
  if not vim.uv.fs_stat(path) then
    local last = require("pseudoclaude.install.state").failure(M.plugin_root())
    return nil,
      ("pseudoclaude: native library not found at %s; to install it, %s%s"):format(
        path,
        M.build_hint(),
        last and (" (" .. last .. ")") or ""
      )
  end
  local loader, load_err = package.loadlib(path, M.ENTRY_POINT)
  if not loader then
    return nil,
      ("pseudoclaude: cannot load native library %s: %s; to rebuild it, %s"):format(
        path,
        tostring(load_err),
        M.build_hint()
      )
  end
  local ok, loaded = pcall(loader)
  if not ok or type(loaded) ~= "table" then
    return nil,
      ("pseudoclaude: native library %s failed to initialise: %s; to rebuild it, %s"):format(
        path,
        tostring(loaded),
        M.build_hint()
      )
  end
  if type(loaded._init_error) == "string" then
    return nil, ("pseudoclaude: native library %s failed to initialise: %s"):format(path, loaded._init_error)
  end
  local lib_version ---@type any
  if type(loaded.version) == "function" then
    -- convention of every native function: returns `true, value` (or `false, message`)
    local called, answered, v = pcall(loaded.version)
    if called and answered == true then
      lib_version = v
    end
  end
  if lib_version ~= M.VERSION then
    return nil,
      ("pseudoclaude: native library %s is stale (library version %s, plugin version %s); to rebuild it, %s"):format(
        path,
        tostring(lib_version or "unknown"),
        M.VERSION,
        M.build_hint()
      )
  end
  lib = loaded
  H.finish_writes_at_exit()
  return lib
end

--- The library keeps the Lua state it is opened with and runs every later callback on it: opened from a
--- coroutine (a picker's finder, a user's async code), that state is the coroutine's, and once the coroutine is
--- collected the next callback crashes Neovim. `luaeval()` runs its expression on Neovim's main Lua thread, so the
--- library is opened there even when the first call comes from a coroutine.
---@return table<string, function>? lib
---@return string? err
function H.load_on_main_thread()
  local ok, err = pcall(vim.fn.luaeval, "require('pseudoclaude.core')._load_error()")
  if not ok then
    return nil, ("pseudoclaude: cannot load the native library from here: %s"):format(tostring(err))
  end
  if type(err) == "string" then
    return nil, err
  end
  return lib
end

--- For `load_on_main_thread` (run there through `luaeval`): loads the library, returns nil or why it could not.
---@return string?
function M._load_error()
  local _, err = M.try_load()
  return err
end

--- How long Neovim's exit may wait for the writes accepted before it (a name, a pin, a fork, an import, an
--- export): each is a few milliseconds, a fork of a large session a second or two.
M.EXIT_WAIT_MS = 10000

--- Work accepted by an asynchronous call finishes before Neovim exits: at `VimLeavePre` the writes queued on the
--- core's threads complete (the main thread runs those not started; the reads are dropped), within
--- `EXIT_WAIT_MS`. Given up on, a write is named in the log file and on the screen; none is half written. Set up
--- with the library: no write can be queued before it is loaded. (Before `chat.lua`'s own `VimLeavePre`, which
--- closes the agent: a name for the current session goes through the agent's writer.)
function H.finish_writes_at_exit()
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup("pseudoclaude_writes", { clear = true }),
    callback = function()
      local ok, given_up = H.call("jobs_finish_writes", M.EXIT_WAIT_MS)
      if not ok then
        given_up = { tostring(given_up) }
      end
      if type(given_up) == "table" and #given_up > 0 then
        require("pseudoclaude.errors").report(
          "Neovim exited before these writes were done: " .. table.concat(given_up, "; "),
          vim.log.levels.WARN
        )
      end
    end,
    desc = "pseudoclaude: finish the writes queued on the core's threads",
  })
end

--- Loads the library if needed; raises a clear error when it is missing, stale or broken.
---@return table<string, function>
function M.load()
  local loaded, err = M.try_load()
  if not loaded then
    error(err, 0)
  end
  return loaded
end

--- Calls native function `name` with the given arguments and returns its value; raises a Lua error with the
--- native error message when it fails (including when it panicked: Neovim is not affected).
---@param name string
---@param ... any
---@return any
function M.call(name, ...)
  local ok, value = H.call(name, ...)
  if not ok then
    error(("pseudoclaude: %s"):format(value), 2)
  end
  return value
end

--- `call()` for an API function `who` ("pseudoclaude.sessions.list"): a failure is raised as `<who>: <message>`,
--- without the native function's name, at level 0 (the message says all; a Lua position would only add noise).
---@param who string
---@param name string
---@param ... any
---@return any
function M.call_as(who, name, ...)
  local ok, value = H.call(name, ...)
  if not ok then
    error(("%s: %s"):format(who, M.plain(value)), 0)
  end
  return value
end

--- Bulk data from the core (the full list's chunks, a preview, a history slice, search hits) arrives as JSON text:
--- decoded here, JSON null as nil. Raises on text that is not JSON (callers that must not raise use pcall).
--- See "How values cross" in src/bridge/mod.rs.
---@param text string
---@return any
function M.decode(text)
  return vim.json.decode(text, { luanil = { object = true, array = true } })
end

--- A worker thread's callback `(ok, json)` for a bulk result (JSON text, `bridge::bulk`): `on_done(nil, value)`
--- decoded, or `on_done(message)` when the job failed or its text does not decode (`what` names it).
---@param what string
---@param on_done fun(err: string?, value: any)
---@return fun(ok: boolean, value: any)
function M.decoded(what, on_done)
  return function(ok, value)
    if not ok then
      return on_done(M.plain(value), nil)
    end
    local decoded, v = pcall(M.decode, value)
    if not decoded then
      return on_done(("cannot decode the %s: %s"):format(what, tostring(v)), nil)
    end
    on_done(nil, v)
  end
end

--- A long result of an `on_done` form, held by the core in JSON arrays (`bridge::parts`: `{id, count}`), taken
--- and decoded one per main-loop step and joined: `on_done(nil, items)`, or `on_done(message)` when one does not
--- decode (the parts left are dropped). A part is copied into Lua only in the step that decodes it.
---@param held {id: integer, count: integer}
---@param on_done fun(err: string?, items: table[]?)
function M.decode_parts(held, on_done)
  local out, k = {}, 0
  local function step()
    k = k + 1
    if k > held.count then
      return on_done(nil, out)
    end
    local ok, part = pcall(function()
      return M.decode(M.call("bulk_take", held.id))
    end)
    if not ok then
      repeat
        local more, data = pcall(M.call, "bulk_take", held.id)
      until not more or data == nil
      return on_done("cannot decode the result: " .. tostring(part))
    end
    for _, item in ipairs(part) do
      out[#out + 1] = item
    end
    vim.schedule(step)
  end
  step()
end

--- A native error message without the native function's name in front ("pseudoclaude_core.sessions_load: ").
---@param msg any
---@return string
function M.plain(msg)
  return (tostring(msg):gsub("^pseudoclaude_core%.[%w_]+: ", ""))
end

---@param name string
---@param ... any
---@return boolean ok
---@return any value the value, or the error message
function H.call(name, ...)
  local fn = M.load()[name]
  if type(fn) ~= "function" then
    return false, ("the native library has no function %q (stale library? %s)"):format(name, M.build_hint())
  end
  local ok, value = fn(...)
  if ok ~= true then
    return false, tostring(value)
  end
  return true, value
end

return M
