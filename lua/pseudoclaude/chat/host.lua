--- The configuration the core's host is given (`HostConfig`, src/agent/config.rs), made from `setup()`'s options: each
--- table as the core reads it (empty lists and maps left out, paths made absolute), so that chat.lua only hands it
--- over.

local M = {}
local H = {}
local S = require("pseudoclaude.chat.state")

--- The user's own instructions file, read before the workspace's `AGENTS.md`, `CLAUDE.md` and `PSEUDOCLAUDE.md`.
---@return string
function M.user_instructions()
  return vim.fs.joinpath(vim.fn.stdpath("config"), "pseudoclaude", "AGENTS.md")
end

--- The configuration the core's host is given (`HostConfig`, src/agent/config.rs), a table like every argument;
--- with a chat's own options (`chat.new(opts)`) over the configured provider.
---@param own pseudoclaude.ChatOpts?
function M.config(own)
  local cfg = require("pseudoclaude.config").get()
  local p = cfg.provider or {}
  if own then
    p = vim.tbl_extend("force", p, own.provider or {}, { model = own.model })
  end
  return {
    workspace = S.workspace(),
    provider = {
      name = p.name or "",
      model = p.model or "",
      base_url = p.base_url or "",
      api_key_env = p.api_key_env or "",
      connect_timeout_secs = p.connect_timeout,
      idle_timeout_secs = p.idle_timeout,
      max_retries = p.max_retries,
      thinking = type(p.thinking) == "table" and { budget_tokens = p.thinking.budget_tokens } or nil,
      reasoning_effort = p.reasoning_effort,
    },
    stale_after_hours = cfg.stale_after_hours,
    spill_threshold = cfg.spill_threshold,
    retention_days = cfg.retention_days,
    -- left out when empty: a Lua table cannot tell an empty map from an empty list (the core's default is empty)
    pricing = next(cfg.pricing or {}) and cfg.pricing or nil,
    workspaces_file = require("pseudoclaude.sessions").workspaces_file(),
    user_instructions = M.user_instructions(),
    sandbox = H.sandbox_config(cfg.sandbox),
    rewind = { enabled = cfg.rewind.enabled, max_file_bytes = cfg.rewind.max_file_bytes },
    approve = {
      write_file = cfg.approve.write_file == true,
      edit_file = cfg.approve.edit_file == true,
      run_command = cfg.approve.run_command == true,
      mcp = H.approve_mcp(cfg.approve.mcp),
      agents = H.nonempty(cfg.approve.agents),
    },
    mcp = H.mcp_config(cfg.mcp),
    agents = H.agents_config(cfg.agents),
    agent = cfg.agent,
  }
end

--- `agents` as the core reads it: empty lists and maps left out (a Lua table cannot tell them apart).
---@param agents table<string, pseudoclaude.AgentSpec>?
---@return table?
function H.agents_config(agents)
  local out = {}
  for name, a in pairs(agents or {}) do
    local args, env = H.nonempty(a.args), H.nonempty(a.env)
    out[name] = { command = a.command or "", args = args, env = env, sandbox = a.sandbox, fs_reads = a.fs_reads }
  end
  return H.nonempty(out)
end

--- Paths as the core takes them: `~` expanded, relative ones beneath the workspace, normalized.
---@param paths string[]?
---@return string[]
function H.absolute_paths(paths)
  return vim.tbl_map(function(p)
    p = vim.fn.expand(p)
    if p:sub(1, 1) ~= "/" then
      p = S.workspace() .. "/" .. p
    end
    return vim.fs.normalize(p)
  end, paths or {})
end

--- The core's `sandbox` settings (`sandbox::Settings`). The plugin's own state folder (its registry of
--- workspaces) is hidden from commands like the secret stores are.
---@param sb pseudoclaude.SandboxConfig
---@return table
function H.sandbox_config(sb)
  local network = sb.network == true
  if type(sb.network) == "table" and #sb.network.allow > 0 then
    network = { allow = sb.network.allow }
  end
  local deny_read = H.absolute_paths(sb.deny_read)
  table.insert(deny_read, vim.fs.joinpath(vim.fn.stdpath("state"), "pseudoclaude"))
  local env = sb.env or {}
  return {
    enabled = sb.enabled ~= false,
    network = network,
    unix_sockets = sb.unix_sockets == true,
    -- left out when empty, like pricing (the core's default is empty)
    writable = H.nonempty(H.absolute_paths(sb.writable)),
    deny_read = deny_read,
    env = { keep = H.nonempty(env.keep), set = H.nonempty(env.set) },
  }
end

--- A table, or nil when empty: an empty Lua table cannot tell a map from a list (the core's default is empty).
---@param t table?
---@return table?
function H.nonempty(t)
  return t and next(t) ~= nil and t or nil
end

--- `approve.mcp` as the core reads it: an empty list of tools is `false`; nil when empty.
---@param approve table<string, boolean|string[]>?
---@return table?
function H.approve_mcp(approve)
  local out = {}
  for name, v in pairs(approve or {}) do
    out[name] = (type(v) == "table" and next(v) == nil) and false or v
  end
  return H.nonempty(out)
end

--- The `mcp` table as the core reads it (always: the workspace's `.mcp.json` may name servers). Servers' standard
--- error goes to the plugin's log file; the answers about `.mcp.json`'s servers are keyed with a secret of the user's.
---@param mcp pseudoclaude.McpConfig?
---@return table
function H.mcp_config(mcp)
  mcp = mcp or {}
  local servers = {}
  for name, s in pairs(mcp.servers or {}) do
    servers[name] = {
      command = s.command,
      args = H.nonempty(s.args),
      env = H.nonempty(s.env),
      cwd = s.cwd,
      url = s.url,
      headers = H.nonempty(s.headers),
      type = s.type,
    }
  end
  return {
    servers = H.nonempty(servers),
    timeout = mcp.timeout,
    log_file = require("pseudoclaude.errors").log_path(),
    consent_key = vim.fs.joinpath(vim.fn.stdpath("state"), "pseudoclaude", "mcp-consent.key"),
  }
end

return M
