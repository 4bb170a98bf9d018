--- An ACP agent's tool calls under way (`tool_call_live`), drawn where the transcript ends when the agent announces
--- them and redrawn in place at each of its updates (status, output, diffs), until the call's result is recorded:
--- then its block goes and the renderer draws the call and its result as a restore shows them (the log holds a
--- call only with its result). A call the turn left unfinished becomes one notice line.

local M = {}
local S = require("pseudoclaude.chat.state")
local V = require("pseudoclaude.chat.view")
local T = require("pseudoclaude.transcript")

--- Lines of a running call's output shown under it (its last ones); its result shows all of it.
M.TAIL_LINES = 10

--- Draws call `m` (a `tool_call_live` event) as it stands: in place when drawn already, else at the end.
---@param m pseudoclaude.Event
function M.show(m)
  local block = S.live[m.id] or { count = 0, hl = {} }
  S.live[m.id] = block
  local title = type(m.arguments) == "table" and m.arguments.title
  block.title = type(title) == "string" and title ~= "" and title or m.name
  local lines = T.running_call_lines(m.name, m.arguments, m.status, m.output or "", M.TAIL_LINES)
  V.put_block(block, lines, require("pseudoclaude.highlights").TRANSCRIPT.call)
end

--- Removes call `id`'s block, if drawn (its result is recorded: the renderer draws it now).
---@param id string
function M.drop(id)
  local block = S.live[id]
  S.live[id] = nil
  if block then
    V.drop_block(block)
  end
end

--- The turn is over: the calls still drawn never completed (the log does not hold them); each becomes one line.
function M.end_turn()
  local left = {}
  for id, block in pairs(S.live) do
    left[#left + 1] = { id = id, row = V.valid_buf(S.buf) and V.block_row(block) or 0, title = block.title }
  end
  table.sort(left, function(a, b)
    return a.row < b.row
  end)
  for _, c in ipairs(left) do
    M.drop(c.id)
    V.append({ ("⚠ %s: did not complete (not in the log)"):format(c.title) }, "PseudoClaudeNotice")
  end
end

--- Whether the transcript's last line is a running call's: text that streams now starts a line of its own.
---@return boolean
function M.at_end()
  if not V.valid_buf(S.buf) then
    return false
  end
  local last = vim.api.nvim_buf_line_count(S.buf) - 1
  for _, block in pairs(S.live) do
    local start = V.block_row(block)
    if block.mark and last >= start and last < start + block.count then
      return true
    end
  end
  return false
end

return M
