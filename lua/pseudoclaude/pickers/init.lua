--- The native pickers: `picker.backend` resolved to a picker plugin ("auto": the first installed of telescope,
--- fzf-lua, snacks.picker, mini.pick), the opening of its sessions or search picker, and the registration of our
--- sources where a picker keeps a registry (snacks.picker's `sources`, mini.pick's `MiniPick.registry`). None of those
--- plugins is a dependency: each is required only when the user picked it or it is already loaded. See
--- `:help pseudoclaude-pickers`.
---
--- Registration, whichever of pseudoclaude and the picker is set up first: `setup()` registers at once into a picker
--- already loaded, and for one not loaded yet puts a hook in `package.preload` for the module that holds the registry
--- (`snacks.picker.config.sources`, `mini.pick`); the first `require` of it, by whatever loads it (a plugin manager,
--- the user's config, a key), loads the real module through the other loaders and registers into it before anyone
--- sees it. Nothing is loaded ahead of its use, and no event of a particular plugin manager is relied on. (The
--- telescope extension is a file telescope finds by its name.)

local M = {}
local H = {}

--- The backends "auto" tries, in order, and the module that tells whether each is installed.
M.AUTO = { "telescope", "fzf-lua", "snacks", "mini" }

--- The module of each backend (in lua/pseudoclaude/pickers/).
local MODULES = { telescope = "telescope", ["fzf-lua"] = "fzf_lua", snacks = "snacks", mini = "mini" }

--- What each backend needs loaded, and the name its users know it by.
local PLUGINS = {
  telescope = { module = "telescope", name = "telescope.nvim" },
  ["fzf-lua"] = { module = "fzf-lua", name = "fzf-lua" },
  snacks = { module = "snacks", name = "snacks.nvim (with its picker)" },
  mini = { module = "mini.pick", name = "mini.pick (mini.nvim)" },
}

--- Whether the picker of `backend` is installed (its module can be required; snacks' picker enabled).
---@param backend string
---@return boolean
function M.installed(backend)
  local plugin = PLUGINS[backend]
  if not plugin then
    return false
  end
  local ok, mod = pcall(require, plugin.module)
  if not ok then
    return false
  end
  if backend == "snacks" then
    return type(mod) == "table" and H.snacks_picker_enabled(mod)
  end
  return true
end

--- The backend to open for `backend` (the config's `picker.backend`): "auto" gives the first installed of `AUTO`,
--- else "float"; a named picker that is not installed gives "float" and the reason (for a warning).
---@param backend string
---@return string backend
---@return string? why
function M.resolve(backend)
  if backend == "float" or backend == "select" then
    return backend
  end
  if backend == "auto" then
    for _, name in ipairs(M.AUTO) do
      if M.installed(name) then
        return name
      end
    end
    return "float"
  end
  if not M.installed(backend) then
    return "float",
      ("pseudoclaude: picker.backend = %q but %s is not installed (or not set up): using the float picker"):format(
        backend,
        PLUGINS[backend] and PLUGINS[backend].name or backend
      )
  end
  return backend
end

--- Opens `backend`'s sessions picker, or its search with `opts.search`.
---@param backend "telescope"|"fzf-lua"|"snacks"|"mini"
---@param opts pseudoclaude.pickers.Opts
function M.open(backend, opts)
  local picker = require("pseudoclaude.pickers." .. MODULES[backend])
  if opts.search then
    return picker.search(opts)
  end
  picker.sessions(opts)
end

--- Registers our sources into snacks.picker and mini.pick: now if loaded, else when they are first required.
function M.register()
  H.when_loaded("snacks.picker.config.sources", function(sources)
    require("pseudoclaude.pickers.snacks").register(sources)
  end)
  H.when_loaded("mini.pick", function(pick)
    require("pseudoclaude.pickers.mini").register(pick)
  end)
end

-- Helpers ------------------------------------------------------------------------------------------------------

---@param snacks table
---@return boolean
function H.snacks_picker_enabled(snacks)
  local cfg = type(snacks.config) == "table" and snacks.config.picker or nil
  return type(cfg) == "table" and cfg.enabled == true
end

--- Calls `fn(module)` now when module `name` is loaded, else right after its first `require` (a `package.preload`
--- entry that loads it through the other loaders, then hands it to `fn` before returning it).
---@param name string
---@param fn fun(mod: table)
function H.when_loaded(name, fn)
  local loaded = package.loaded[name]
  if type(loaded) == "table" then
    local ok, err = pcall(fn, loaded)
    if not ok then
      vim.notify(("pseudoclaude: registering the %s source failed: %s"):format(name, err), vim.log.levels.WARN)
    end
    return
  end
  if H.hooked[name] then
    return
  end
  H.hooked[name] = true
  local previous = package.preload[name]
  package.preload[name] = function(...)
    package.preload[name] = previous
    H.hooked[name] = nil
    local mod
    if previous then
      mod = previous(...)
    else
      mod = H.load_past_preload(name)
    end
    if type(mod) == "table" then
      pcall(fn, mod)
    end
    return mod
  end
end

---@type table<string, true>
H.hooked = {}

--- Loads module `name` through the loaders after `package.preload`'s (Neovim's runtimepath loader, a plugin
--- manager's), as `require` would have without the hook.
---@param name string
---@return any
function H.load_past_preload(name)
  local loaders = package.loaders or package.searchers
  local why = {}
  for i = 1, #loaders do
    local loader = loaders[i](name)
    if type(loader) == "function" then
      local mod = loader(name)
      if mod == nil then
        mod = package.loaded[name]
      end
      return mod == nil and true or mod
    elseif type(loader) == "string" then
      why[#why + 1] = loader
    end
  end
  error(("module '%s' not found:%s"):format(name, table.concat(why)), 0)
end

return M
