--- `:checkhealth pseudoclaude`

local M = {}
local H = {}

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
  local config = require("pseudoclaude.config")
  local core = require("pseudoclaude.core")

  health.start("pseudoclaude: Neovim")
  local v = vim.version()
  local vs = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.11") == 1 then
    health.ok("Neovim " .. vs .. " (>= 0.11)")
  else
    health.error(
      "Neovim " .. vs .. " is too old",
      { "pseudoclaude needs Neovim 0.11 or later (the library is built for its API)" }
    )
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
      "Install it: :PseudoInstall (this release's library for your platform, checked; else a build with cargo)",
      ("or build it: cd %s && cargo build --release"):format(core.plugin_root()),
      "Then restart Neovim (a library already loaded cannot be reloaded).",
    })
  end
  M.check_origin(core, lib)

  health.start("pseudoclaude: sessions directory")
  local sessions = config.workspace() .. "/.PseudoClaude/sessions"
  local ok, detail = writable_dir(sessions)
  if ok then
    health.ok(detail)
  else
    health.error(detail, { "Run Neovim in a writable workspace, or set `workspace` in setup()" })
  end

  health.start("pseudoclaude: configuration")
  local unknown = config.unknown()
  if #unknown > 0 then
    health.warn(
      ("setup() was given option(s) it does not know, and ignored them: %s"):format(table.concat(unknown, ", ")),
      { "Check their spelling against `:help pseudoclaude-config`" }
    )
  else
    health.ok("every option given to setup() is known")
  end

  health.start("pseudoclaude: instructions")
  local iok, found =
    pcall(core.call, "instructions", config.workspace(), require("pseudoclaude.chat").user_instructions())
  if not iok then
    health.warn("cannot read the instruction files: " .. tostring(found))
  elseif #found.files == 0 then
    health.info(
      "no instruction files: AGENTS.md, CLAUDE.md or PSEUDOCLAUDE.md in the workspace, or "
        .. require("pseudoclaude.chat").user_instructions()
    )
  else
    for _, f in ipairs(found.files) do
      health.ok("in the system prompt: " .. f)
    end
  end
  for _, p in ipairs(iok and found.problems or {}) do
    health.warn("not imported: " .. p)
  end

  health.start("pseudoclaude: provider")
  local provider = config.get().provider
  local name, why = M.resolve_provider(provider)
  health.info(
    ("provider: %s%s%s"):format(
      provider.name,
      name ~= provider.name and (" → " .. name .. " (" .. why .. ")") or "",
      provider.model and (", model " .. provider.model) or ""
    )
  )
  if name == "demo" then
    health.ok(
      "the demo provider needs no API key (it answers offline; set $ANTHROPIC_API_KEY or $OPENAI_API_KEY for a real model)"
    )
  else
    local var = provider.api_key_env or (name == "anthropic" and "ANTHROPIC_API_KEY" or "OPENAI_API_KEY")
    local key = os.getenv(var)
    if key and key ~= "" then
      health.ok(("API key variable $%s is set"):format(var))
    elseif name == "openai" and provider.base_url then
      health.info(("API key variable $%s is not set (fine for a local server at %s)"):format(var, provider.base_url))
    else
      health.warn(("API key variable $%s is not set"):format(var), {
        ("export %s=... before starting Neovim"):format(var),
      })
    end
  end

  M.check_sandbox(config.get().sandbox, core.try_load())

  health.start("pseudoclaude: MCP servers")
  M.check_mcp()

  health.start("pseudoclaude: ACP agents")
  M.check_agents()

  health.start("pseudoclaude: other agents' sessions")
  require("pseudoclaude.keep").check()

  health.start("pseudoclaude: sessions held by other editors")
  lib = require("pseudoclaude.core").try_load()
  if not lib then
    health.info("skipped: the native library is not available")
    return
  end
  local listed, list = pcall(require("pseudoclaude.sessions").list, { include_current = false })
  if not listed then
    health.warn("cannot list sessions: " .. tostring(list))
    return
  end
  local held = 0
  for _, s in ipairs(list) do
    if s.held_by then
      held = held + 1
      health.info(("%s (%s) is open in another editor: %s"):format(s.id, s.title, s.held_by))
    end
  end
  if held == 0 then
    health.ok(("no session of this workspace is open in another editor (%d sessions)"):format(#list))
  end
end

--- Where the library came from (the install stamp), whether it matches the Lua side, and what the last install
--- left undone.
---@param core table pseudoclaude.core
---@param lib table? the loaded library
function M.check_origin(core, lib)
  local state = require("pseudoclaude.install.state")
  local root = core.plugin_root()
  local stamp = state.stamp(root)
  local minor = state.nvim_minor()
  if stamp and stamp.from == "release" then
    health.ok(
      ("installed from the release asset %s (sha256 %s, checked), %s"):format(
        tostring(stamp.asset),
        tostring(stamp.sha256),
        tostring(stamp.installed_at)
      )
    )
  elseif stamp then
    health.ok(
      ("installed from a local build of commit %s (cargo build --release), %s"):format(
        stamp.commit or "unknown (not a git checkout)",
        tostring(stamp.installed_at)
      )
    )
  elseif lib then
    health.info("built by `cargo build --release` here (not installed by :PseudoInstall: no install stamp)")
  end
  if stamp then
    local st = vim.uv.fs_stat(core.library_path())
    if st and (st.size ~= stamp.size or st.mtime.sec ~= stamp.mtime) then
      health.warn("the library was replaced since that install (its size or time changed): a build of your own?")
    end
    if stamp.version ~= core.VERSION then
      health.error(
        ("the library was installed for version %s; the Lua side is %s"):format(tostring(stamp.version), core.VERSION),
        { "Run :PseudoInstall, then restart Neovim" }
      )
    end
    local head = stamp.from == "source" and stamp.commit and state.head_commit(root)
    if head and head ~= stamp.commit then
      health.warn(
        ("built from commit %s, but the checkout is now at %s: the Lua side may not match it"):format(
          stamp.commit:sub(1, 12),
          head:sub(1, 12)
        ),
        { "Run :PseudoInstall, then restart Neovim" }
      )
    end
  end
  if lib then
    local api = stamp and stamp.nvim
    if type(lib.nvim_api) == "function" then
      local got, a = lib.nvim_api()
      api = got and a or api
    end
    local _, v = lib.version()
    if v == core.VERSION and (api == nil or api == minor) then
      health.ok(("matches the Lua side: version %s, Neovim %s API"):format(v, api or minor))
    elseif api and api ~= minor then
      health.warn(
        ("the library is built for the Neovim %s API; this Neovim is %s"):format(api, minor),
        { "Run :PseudoInstall, then restart Neovim" }
      )
    end
  end
  local failure = state.failure(root)
  if failure then
    health.error(failure, { "Run :PseudoInstall (`:messages` shows each step's error)" })
  end
end

--- The command sandbox: the mechanism, Landlock's ABI, the network, what is protected.
---@param cfg pseudoclaude.SandboxConfig
---@param lib table? the native library
function M.check_sandbox(cfg, lib)
  health.start("pseudoclaude: command sandbox")
  if not cfg.enabled then
    health.warn("the sandbox is off (sandbox.enabled = false): approved commands run with all your rights")
    return
  end
  if not lib then
    health.info("skipped: the native library is not available")
    return
  end
  local ok, s = lib.sandbox_support()
  if not ok then
    health.error("cannot probe the sandbox: " .. tostring(s))
    return
  end
  local abi = s.landlock_abi > 0 and ("Landlock ABI " .. s.landlock_abi) or "no Landlock"
  if s.mechanism == "unavailable" then
    health.error(("no sandbox on this system (%s): %s"):format(abi, s.why), {
      "Every command asks before it runs, whatever approve.run_command says, and runs with all your rights.",
      "Landlock needs Linux 5.13 or later with it enabled (lsm=landlock).",
    })
    return
  end
  health.ok(
    ("commands run in the sandbox: %s (%s)"):format(
      s.mechanism == "namespaces" and "user, mount and network namespaces, then Landlock" or "Landlock and seccomp",
      abi
    )
  )
  local places = ("writes only in the workspace, the session's $TMPDIR and %d more folder(s) (sandbox.writable)"):format(
    #cfg.writable
  )
  if s.mechanism == "namespaces" then
    health.ok(places .. "; .git/ and .PseudoClaude/ are read-only")
  else
    health.warn(
      places
        .. "; "
        .. "this system allows no user namespace, so the sandbox cannot keep commands from "
        .. "changing .git/ and .PseudoClaude/ (the rest of it holds)",
      { s.why }
    )
  end
  for _, dir in ipairs(cfg.writable) do
    if vim.fn.isdirectory(vim.fn.expand(dir)) == 0 then
      health.warn(("sandbox.writable: %s is not a folder; commands get no access to it"):format(dir))
    end
  end
  H.check_protections(cfg, s)
end

--- Each protection beyond writes, and whether this system provides it (`s`: the core's probe).
---@param cfg pseudoclaude.SandboxConfig
---@param s {mechanism: string, landlock_abi: integer}
function H.check_protections(cfg, s)
  local ns = s.mechanism == "namespaces"
  if cfg.network == true then
    health.warn("network on for every command (sandbox.network = true)")
  elseif type(cfg.network) == "table" and #cfg.network.allow > 0 and not ns then
    health.ok(
      ("network only to %s, through the plugin's proxy (sandbox.network.allow): "):format(
        table.concat(cfg.network.allow, ", ")
      )
        .. "without a network namespace Landlock opens the proxy's port on every host (it matches ports, not "
        .. "addresses), so the plugin checks each connection a command opens (a seccomp notification) and lets "
        .. "through only the proxy's; TCP Fast Open sends, which Landlock may not see, are refused"
    )
  elseif type(cfg.network) == "table" and #cfg.network.allow > 0 then
    health.ok(
      ("network only to %s, through the plugin's proxy (sandbox.network.allow); nothing else is reachable"):format(
        table.concat(cfg.network.allow, ", ")
      )
    )
  elseif ns then
    health.ok("network off: no TCP or UDP connection and no bind, unless you allow it for one command")
  else
    health.ok(
      ("network off (Landlock's TCP rules%s and seccomp): no connection and no bind, unless you allow it for one command"):format(
        s.landlock_abi >= 4 and "" or ", missing below ABI 4:"
      )
    )
  end
  if cfg.unix_sockets then
    health.warn(
      "Unix sockets open (sandbox.unix_sockets = true): commands can connect to the editor's own server and drive "
        .. "the editor itself, and to an ssh agent, the Docker daemon, D-Bus"
    )
  else
    health.ok("no Unix socket (seccomp): the editor's server, ssh agents, the Docker daemon are out of reach")
  end
  local keep = cfg.env and cfg.env.keep or {}
  health.ok(
    (
      "secret-looking variables (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH) and the provider's key are "
      .. "removed from every command's environment%s"
    ):format(#keep > 0 and (" (kept: " .. table.concat(keep, ", ") .. ")") or "")
  )
  local stores = ("~/.ssh, ~/.aws, ~/.gnupg and the other secret stores%s read as empty"):format(
    #(cfg.deny_read or {}) > 0 and (", and sandbox.deny_read (" .. #cfg.deny_read .. " paths),") or ""
  )
  if ns then
    health.ok(stores .. " (an empty read-only folder mounted over each)")
  else
    health.warn(
      stores .. " (Landlock's read rights), but the folders above them (~, /) cannot be listed inside the sandbox"
    )
  end
  if ns then
    health.ok("nothing outlives its command: each runs as the first process of its own PID namespace")
  elseif s.landlock_abi >= 6 then
    health.ok("nothing outlives its command: its Landlock domain is ended with it (Landlock's signal scope)")
  else
    health.warn(
      "processes a command moved out of its process group (setsid) can outlive it: Landlock below ABI 6 has no "
        .. "signal scope and this system no PID namespace"
    )
  end
end

--- Each MCP server's state, tools and last error (they start at the first chat: "stopped" before it), `setup()`'s and
--- the workspace's `.mcp.json`'s.
--- Each ACP agent (the built-in ones and `setup({ agents })`'s): its command line, whether the command is found, and
--- the version its `initialize` reported when it ran in this editor (nothing is started to ask).
function M.check_agents()
  local ok, rows = pcall(require("pseudoclaude.chat").acp_agents)
  if not ok then
    health.warn("cannot ask the native library: " .. tostring(rows))
    return
  end
  local default = require("pseudoclaude.config").get().agent
  health.info(
    default and ("new chats run the agent " .. default .. " (setup({ agent }))")
      or "new chats run our own provider (no setup({ agent }); `:PseudoChat NAME` opens a chat with an agent)"
  )
  for _, r in ipairs(rows) do
    local line = ("%s: `%s`%s"):format(r.name, r.command, r.sandboxed and " (in the sandbox)" or "")
    if r.error then
      health.error(("%s: %s"):format(r.name, r.error))
    elseif r.found then
      local version = r.version ~= "" and (", version " .. r.version)
        or (", its version is known once it runs (`:PseudoChat " .. r.name .. "`)")
      health.ok(("%s found at %s%s"):format(line, r.found, version))
    elseif r.configured or r.default then
      health.error(line .. " not found on PATH", r.install and { r.install } or nil)
    else
      health.info(line .. " not installed" .. (r.install and (" (" .. r.install .. ")") or ""))
    end
  end
end

function M.check_mcp()
  local config = require("pseudoclaude.config")
  if next(config.get().mcp.servers) == nil and not vim.uv.fs_stat(vim.fs.joinpath(config.workspace(), ".mcp.json")) then
    health.info("none configured (|pseudoclaude-config-mcp|, or the workspace's .mcp.json)")
    return
  end
  local ok, rows = pcall(require("pseudoclaude.mcp").status)
  if not ok then
    health.warn("cannot ask the native library: " .. tostring(rows))
    return
  end
  if #rows == 0 then
    health.info("none configured (|pseudoclaude-config-mcp|, or the workspace's .mcp.json)")
    return
  end
  for _, r in ipairs(rows) do
    local line = ("%s%s: %s, %d tools%s"):format(
      r.name,
      r.source == "workspace" and " (.mcp.json)" or "",
      r.state,
      #r.tools,
      #r.tools > 0 and (" (" .. table.concat(r.tools, ", ") .. ")") or ""
    )
    if r.state == "failed" then
      health.error(line .. ": " .. (r.error or "no error given"))
    elseif r.state == "awaiting consent" then
      health.warn(line .. ": not started before you agree", { ":PseudoMcp consent " .. r.name })
    elseif r.state == "stopped" and r.error then
      health.warn(line .. ": " .. r.error)
    elseif r.state == "stopped" then
      health.info(line .. " (servers start at the first chat)")
    else
      health.ok(line)
    end
  end
end

--- The provider "auto" stands for, and why.
---@param provider pseudoclaude.ProviderConfig
---@return string name
---@return string why
function M.resolve_provider(provider)
  if provider.name ~= "auto" then
    return provider.name, ""
  end
  local function set(v)
    local k = os.getenv(v)
    return k ~= nil and k ~= ""
  end
  if set("ANTHROPIC_API_KEY") then
    return "anthropic", "$ANTHROPIC_API_KEY is set"
  elseif set("OPENAI_API_KEY") then
    return "openai", "$OPENAI_API_KEY is set"
  end
  return "demo", "no API key is set"
end

return M
