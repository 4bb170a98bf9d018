--- The user's MCP servers as the editor shows them: `status()` and `:PseudoMcp` (the question before a server of the
--- workspace's `.mcp.json` first runs is `chat/consent.lua`'s). See `:help pseudoclaude-mcp`.

---@class pseudoclaude.McpStatus
---@field name string The server's name in `mcp.servers` or in the workspace's `.mcp.json`.
---@field state "running"|"starting"|"failed"|"stopped"|"awaiting consent"
---@field tools string[] Its tools' names as it listed them (the model reads them as `mcp__NAME__TOOL`).
---@field error string? Why it failed or stopped last.
---@field source "setup"|"workspace" From `setup()`, or from the workspace's `.mcp.json`.

local M = {}

--- Each configured server, sorted by name (`setup()`'s first, then `.mcp.json`'s). The servers start at the first
--- chat; before it each is "stopped", and a server of `.mcp.json` not agreed to is "awaiting consent".
---@return pseudoclaude.McpStatus[]
function M.status()
  local rows = require("pseudoclaude.chat").mcp_status()
  for _, r in ipairs(rows) do
    -- the core's snake_case; the one state of two words reads as the user reads it
    if r.state == "awaiting_consent" then
      r.state = "awaiting consent"
    end
    r.tools = r.tools or {}
  end
  return rows
end

--- The lines `:PseudoMcp` shows.
---@param rows pseudoclaude.McpStatus[]
---@return string[]
function M.lines(rows)
  if #rows == 0 then
    return {
      "No MCP servers configured (setup({ mcp = { servers = { NAME = { command = ... } } } }), or the workspace's .mcp.json).",
    }
  end
  local out = {}
  for _, r in ipairs(rows) do
    local from = r.source == "workspace" and " (.mcp.json)" or ""
    table.insert(out, ("%s%s: %s, %d tool%s"):format(r.name, from, r.state, #r.tools, #r.tools == 1 and "" or "s"))
    if #r.tools > 0 then
      table.insert(out, "  tools: " .. table.concat(r.tools, ", "))
    end
    if r.state == "awaiting consent" then
      table.insert(out, "  not started before you agree: :PseudoMcp consent " .. r.name)
    end
    if r.error then
      for i, l in ipairs(vim.split(r.error, "\n", { trimempty = true })) do
        table.insert(out, (i == 1 and "  error: " or "    ") .. l)
      end
    end
  end
  return out
end

--- `:PseudoMcp`: each server's state, tools and last error, as a message.
function M.show()
  local lines = M.lines(M.status())
  vim.api.nvim_echo({ { table.concat(lines, "\n") } }, true, {})
end

--- Asks again about a server of the workspace's `.mcp.json`, or about each one declined or not answered yet: the
--- question of the first chat, with the answer remembered again.
---@param name string?
function M.consent(name)
  local ok, err = pcall(require("pseudoclaude.chat").mcp_ask_again, name)
  if not ok then
    require("pseudoclaude.errors").report(err, vim.log.levels.WARN)
  end
end

--- `:PseudoMcp [consent [NAME]]`.
---@param args string[]
function M.command(args)
  if #args == 0 then
    return M.show()
  end
  if args[1] == "consent" and #args <= 2 then
    return M.consent(args[2])
  end
  require("pseudoclaude.errors").report(
    ("unknown :PseudoMcp arguments %q: use :PseudoMcp, or :PseudoMcp consent [NAME]"):format(table.concat(args, " ")),
    vim.log.levels.WARN
  )
end

--- Completion of `:PseudoMcp`: "consent", then the names of `.mcp.json`'s servers.
---@param arglead string
---@param line string
---@return string[]
function M.complete(arglead, line)
  local words = vim.split(line, "%s+", { trimempty = true })
  local n = #words + (line:match("%s$") and 1 or 0)
  local items = {}
  if n == 2 then
    items = { "consent" }
  elseif n == 3 and words[2] == "consent" then
    local ok, rows = pcall(M.status)
    for _, r in ipairs(ok and rows or {}) do
      if r.source == "workspace" and r.name ~= ".mcp.json" then
        items[#items + 1] = r.name
      end
    end
  end
  return vim.tbl_filter(function(i)
    return vim.startswith(i, arglead)
  end, items)
end

return M
