--- `:checkhealth pseudoclaude`

local M = {}

local health = vim.health

---@param path string
---@return string
local function parent(path)
  local p = vim.fs.dirname(path)
  return p or path
end

--- Whether `dir` is (or can be created as) a writable directory: returns ok, and a description.
---@param dir string
---@return boolean ok
---@return string detail
local function writable_dir(dir)
  local stat = vim.uv.fs_stat(dir)
  if stat then
    if stat.type ~= "directory" then
      return false, dir .. " exists but is not a directory"
    end
    if vim.uv.fs_access(dir, "W") then
      return true, dir .. " is writable"
    end
    return false, dir .. " is not writable"
  end
  -- does not exist yet: the nearest existing ancestor must be a writable directory
  local ancestor = dir
  repeat
    local up = parent(ancestor)
    if up == ancestor then
      return false, "no existing ancestor of " .. dir
    end
    ancestor = up
    stat = vim.uv.fs_stat(ancestor)
  until stat
  if stat.type ~= "directory" then
    return false, ("%s cannot be created: %s is not a directory"):format(dir, ancestor)
  end
  if vim.uv.fs_access(ancestor, "W") then
    return true,
      ("%s does not exist yet; it will be created on the first session (%s is writable)"):format(dir, ancestor)
  end
  return false, ("%s cannot be created: %s is not writable"):format(dir, ancestor)
end

function M.check()
  local pc = require("pseudoclaude")
  local core = require("pseudoclaude.core")

  health.start("pseudoclaude: Neovim")
  local v = vim.version()
  local vs = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. vs .. " (>= 0.10)")
  else
    health.error("Neovim " .. vs .. " is too old", { "pseudoclaude needs Neovim 0.10 or later" })
  end

  health.start("pseudoclaude: native library")
  local lib, err = core.try_load()
  if lib then
    local ok, lib_version = lib.version()
    health.ok(
      ("native library loaded: %s, version %s (plugin %s)"):format(
        core.library_path(),
        ok and lib_version or "?",
        core.VERSION
      )
    )
    local got, log = lib.panic_log_path()
    if got and log then
      health.info("internal errors are logged to " .. log)
    end
  else
    health.error(err or "native library unavailable", {
      ("Build it: cd %s && cargo build --release"):format(core.plugin_root()),
      "Then restart Neovim (a library already loaded cannot be reloaded).",
    })
  end

  health.start("pseudoclaude: sessions directory")
  local sessions = pc.workspace() .. "/.PseudoClaude/sessions"
  local ok, detail = writable_dir(sessions)
  if ok then
    health.ok(detail)
  else
    health.error(detail, { "Run Neovim in a writable workspace, or set `workspace` in setup()" })
  end

  health.start("pseudoclaude: provider")
  local provider = pc.get_config().provider
  health.info(("provider: %s%s"):format(provider.name, provider.model and (", model " .. provider.model) or ""))
  if provider.api_key_env then
    local key = os.getenv(provider.api_key_env)
    if key and key ~= "" then
      health.ok(("API key variable $%s is set"):format(provider.api_key_env))
    else
      health.warn(("API key variable $%s is not set"):format(provider.api_key_env), {
        ("export %s=... before starting Neovim"):format(provider.api_key_env),
      })
    end
  elseif provider.name == "demo" then
    health.ok("the demo provider needs no API key")
  else
    health.warn(("no `provider.api_key_env` configured for provider %s"):format(provider.name), {
      "Set provider.api_key_env in setup() to the name of the environment variable holding the key",
    })
  end
end

return M
