--- pseudoclaude.nvim: an AI coding-agent chat whose conversations are never lost. See `:help pseudoclaude`.
---
--- Requiring this module is cheap: the native core is loaded only when a feature needs it.

local M = {}

--- The options the last `setup()` did not know (misspelled ones, most likely), for `:checkhealth`.
---@return string[]
function M.unknown_options()
  return require("pseudoclaude.config").unknown()
end

--- Configures the plugin; `opts` is merged over the defaults (`:help pseudoclaude-config`). Raises a clear error
--- naming the option when one has the wrong type or value; warns about unknown options.
---@param opts pseudoclaude.UserConfig?
function M.setup(opts)
  local config = require("pseudoclaude.config")
  local cfg, unknown = config.resolve(opts)
  config.set(cfg, unknown)
  -- our sources in snacks.picker and mini.pick: now if loaded, else when first required (pickers/init.lua)
  require("pseudoclaude.pickers").register()
  if cfg.external.keep then
    -- after start-up's own work: loading the library and starting the keeper's thread take a millisecond or two
    vim.schedule(function()
      local ok, err = pcall(require("pseudoclaude.keep").start)
      if not ok then
        require("pseudoclaude.errors").report(err)
      end
    end)
  end
  if #unknown > 0 then
    vim.notify(
      ("pseudoclaude.setup: unknown option(s) ignored: %s"):format(table.concat(unknown, ", ")),
      vim.log.levels.WARN
    )
  end
end

--- The configuration in effect: the one given to `setup()`, or the defaults.
---@return pseudoclaude.Config
function M.get_config()
  return require("pseudoclaude.config").get()
end

--- The workspace directory: `workspace` from the configuration, or the current directory.
---@return string
function M.workspace()
  return require("pseudoclaude.config").workspace()
end

--- The plugin version (of the Lua side; the native library must report the same one).
---@return string
function M.version()
  return require("pseudoclaude.core").VERSION
end

---@class pseudoclaude.VersionInfo
---@field plugin string Version of the Lua side.
---@field core string? Version reported by the native library, nil when it cannot be loaded.
---@field library string Path of the native library.
---@field error string? Why the native library cannot be used.

--- Versions of the Lua side and of the native library (loads the library).
---@return pseudoclaude.VersionInfo
function M.version_info()
  local core = require("pseudoclaude.core")
  local info = { plugin = core.VERSION, library = core.library_path() }
  local lib, err = core.try_load()
  if lib then
    local ok, v = lib.version()
    info.core = ok and v or nil
  else
    info.error = err
  end
  return info
end

--- Puts the native library in place: the release asset for this platform and Neovim (checked against its sha256),
--- else a build with cargo (`:help pseudoclaude-install`). Returns at once; `opts.on_done(report)` gets
--- `{ ok, from = "release"|"source", version, error }`. The same as `:PseudoInstall`.
---@param opts pseudoclaude.InstallOpts?
function M.install(opts)
  require("pseudoclaude.install").install(opts)
end

--- `:PseudoClaudeVersion`
function M.print_version()
  local info = M.version_info()
  if info.core then
    vim.notify(("pseudoclaude %s (native core %s, %s)"):format(info.plugin, info.core, info.library))
  else
    vim.notify(("pseudoclaude %s (native core unavailable)\n%s"):format(info.plugin, info.error), vim.log.levels.WARN)
  end
end

--- The agent buffers: `chat.open()`, `chat.send(text)`, `chat.cancel()`, `chat.start_over()` (the current chat
--- started over), `chat.new(opts)` (another chat), `chat.show(n)`, `chat.close(n)` (`:help pseudoclaude-api`).
M.chat = setmetatable({}, {
  __index = function(_, key)
    return require("pseudoclaude.chat")[key]
  end,
})

--- Every live chat of this editor: `{ id, chat, title, agent, state, buf, session, current }`, `state` one of
--- "idle", "running", "waiting" (for the user's answer), "failed" (`:help pseudoclaude.chats()`).
---@return pseudoclaude.ChatRow[]
function M.chats()
  if not package.loaded["pseudoclaude.chat"] then
    return {}
  end
  return require("pseudoclaude.chat").chats()
end

--- Worktree chats: `worktree.list()`, `worktree.merge(id, { squash, on_done })`, `worktree.remove(id, { force,
--- on_done })`, `worktree.review(id)` (`:help pseudoclaude-worktree`).
M.worktree = setmetatable({}, {
  __index = function(_, key)
    return require("pseudoclaude.worktree")[key]
  end,
})

--- The MCP servers: `mcp.status()`, `mcp.show()` (`:help pseudoclaude-mcp`).
M.mcp = setmetatable({}, {
  __index = function(_, key)
    return require("pseudoclaude.mcp")[key]
  end,
})
--- Rewinds the current session to just before user message `index` (1-based, as in `messages()`): its files
--- (`opts.code`, default true) and its history (`opts.conversation`, default true). Returns at once;
--- `opts.on_done(report)` gets `{ok, restored, removed, conflicts, error, text}` (`:help pseudoclaude-rewind`).
---@param index integer
---@param opts pseudoclaude.RewindOpts?
function M.rewind(index, opts)
  require("pseudoclaude.rewind").rewind(index, opts)
end

--- Undoes the last rewind (until the next message), with the same rule for your edits.
---@param opts {on_done: fun(report: pseudoclaude.RewindReport)?}?
function M.undo_rewind(opts)
  require("pseudoclaude.rewind").undo(opts)
end

--- The history the model sees next, in the log's own shape (`role`, `content`, `tool_calls`, `tool_result`, `ts`).
--- Blocking for a long history (10,000 messages: tens of ms); with `opts.on_done` it returns at once and calls
--- `on_done(nil, messages)` later, the history read off the main loop (`:help pseudoclaude.messages()`).
---@param opts {on_done: fun(err: string?, messages: table[]?)}?
---@return table[]?
function M.messages(opts)
  if opts ~= nil and (type(opts) ~= "table" or (opts.on_done ~= nil and type(opts.on_done) ~= "function")) then
    error("pseudoclaude.messages: opts: expected a table with an on_done function, got " .. vim.inspect(opts), 0)
  end
  if not package.loaded["pseudoclaude.chat"] then
    if opts and opts.on_done then
      return vim.schedule(function()
        opts.on_done(nil, {})
      end)
    end
    return {}
  end
  return require("pseudoclaude.chat").messages(opts)
end

--- Sessions of the workspace on disk: `list(opts)`, `load(id)`, `search(query, opts)`, `cleanup()`, `delete(id)`
--- (`:help pseudoclaude-sessions-api`).
M.sessions = setmetatable({}, {
  __index = function(_, key)
    return require("pseudoclaude.sessions")[key]
  end,
})

--- Restores a session into the agent buffer: an id, "last" or nil (the most recent other session of ours; with none,
--- the newest of the other agents', continued by its agent). Returns at once;
--- `opts.on_done(report)` and the `User PseudoClaudeResumed` autocmd tell when the history is in place (or why not);
--- `opts.at` puts the cursor on that message (an index of `sessions.load(id).messages`, as search hits give).
---@param id string?
---@param opts pseudoclaude.ResumeOpts?
function M.resume(id, opts)
  return require("pseudoclaude.chat").resume(id, opts)
end

--- The current session `{id, dir, jsonl}`, or nil before the first message.
---@return {id: string, dir: string, jsonl: string}?
function M.current()
  if not package.loaded["pseudoclaude.chat"] then
    return nil
  end
  return require("pseudoclaude.chat").current()
end

return M
