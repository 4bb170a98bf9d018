--- The user's MCP servers as the editor shows them: `status()` and `:PseudoMcp`. See `:help pseudoclaude-mcp`.

---@class pseudoclaude.McpStatus
---@field name string The server's name in `mcp.servers`.
---@field state "running"|"starting"|"failed"|"stopped"|"awaiting consent"
---@field tools string[] Its tools' names as it listed them (the model reads them as `mcp__NAME__TOOL`).
---@field error string? Why it failed or stopped last.

local M = {}

--- Each configured server, sorted by name. The servers start at the first chat; before it each is "stopped".
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
    return { "No MCP servers configured (setup({ mcp = { servers = { NAME = { command = ... } } } }))." }
  end
  local out = {}
  for _, r in ipairs(rows) do
    table.insert(out, ("%s: %s, %d tool%s"):format(r.name, r.state, #r.tools, #r.tools == 1 and "" or "s"))
    if #r.tools > 0 then
      table.insert(out, "  tools: " .. table.concat(r.tools, ", "))
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

return M
