--- The question before a server of the workspace's `.mcp.json` first runs (`mcp_consent` events): "Yes" / "No" /
--- "Not now", one question at a time. See `:help pseudoclaude-mcp-consent`.

local M = {}
local H = {}

--- The question about a server of `.mcp.json`, asked with `vim.ui.select` one at a time (several may come at once).
--- "Yes" and "No" are remembered in `.PseudoClaude/mcp-consent.json` for this definition; dismissed, it is "Not now".
---@param m pseudoclaude.McpConsentAsk
function M.ask(m)
  table.insert(H.queue, m)
  if not H.asking then
    H.next()
  end
end

-- Helpers ------------------------------------------------------------------------------------------------------------

---@type pseudoclaude.McpConsentAsk[]
H.queue = {}
H.asking = false

function H.next()
  local m = table.remove(H.queue, 1)
  H.asking = m ~= nil
  if not m then
    return
  end
  local answers = { Yes = "yes", No = "no", ["Not now"] = "later" }
  vim.ui.select({ "Yes", "No", "Not now" }, { prompt = H.prompt(m) }, function(choice)
    local ok, err = pcall(require("pseudoclaude.core").call, "agent_mcp_consent", m.name, answers[choice] or "later")
    if not ok then
      require("pseudoclaude.errors").report(err, vim.log.levels.WARN)
    end
    H.next()
  end)
end

--- What the question shows: the command as it would run, the variables it sets (by name), where it is defined.
---@param m pseudoclaude.McpConsentAsk
---@return string
function H.prompt(m)
  if m.url and m.url ~= vim.NIL then
    local lines = {
      ("The workspace's .mcp.json asks to connect to the MCP server %q:"):format(m.name),
      "  " .. m.url,
    }
    if m.headers and #m.headers > 0 then
      lines[#lines + 1] = "  sending the headers " .. table.concat(m.headers, ", ")
    end
    lines[#lines + 1] = "Connect? (the answer is remembered for this definition in .PseudoClaude/mcp-consent.json)"
    return table.concat(lines, "\n")
  end
  local cmd = vim.tbl_map(function(a)
    return a:find("[%s'\"]") and vim.fn.shellescape(a) or a
  end, vim.list_extend({ m.command }, m.args or {}))
  local lines = {
    ("The workspace's .mcp.json asks to start the MCP server %q:"):format(m.name),
    "  " .. table.concat(cmd, " "),
  }
  if m.env and #m.env > 0 then
    lines[#lines + 1] = "  with " .. table.concat(m.env, ", ") .. " set"
  end
  if m.cwd and m.cwd ~= vim.NIL then
    lines[#lines + 1] = "  in " .. m.cwd
  end
  lines[#lines + 1] = "Start it? (the answer is remembered for this definition in .PseudoClaude/mcp-consent.json)"
  return table.concat(lines, "\n")
end

return M
