--- Errors as the user reads them: one plain sentence (what happened, what to do), never a Lua position or the
--- name of a native function. The full text goes to `stdpath("log")/pseudoclaude.log` for a bug report.

local M = {}

--- The plain sentence of `err`: without "…/file.lua:96: " positions, "pseudoclaude: " and
--- "pseudoclaude_core.<fn>: " prefixes, or "pseudoclaude.sessions.<fn>: " ones.
---@param err any
---@return string
function M.plain(err)
  local s = tostring(err)
  local before
  repeat
    before = s
    s = s:gsub("^%s*[^%s:]+%.lua:%d+: ", "")
    s = s:gsub("^pseudoclaude: ", "")
    s = s:gsub("^pseudoclaude_core%.[%w_]+: ", "")
    s = s:gsub("^pseudoclaude%.[%w_.]+: ", "")
  until s == before
  s = s:gsub("\nstack traceback:.*$", "")
  return s
end

--- Where the details of reported errors are written.
---@return string
function M.log_path()
  return vim.fn.stdpath("log") .. "/pseudoclaude.log"
end

--- Shows `err` as one plain sentence (`vim.notify`, prefixed "pseudoclaude: ") and writes its full text to the log.
---@param err any
---@param level integer? default ERROR
function M.report(err, level)
  local full = tostring(err)
  pcall(function()
    vim.fn.mkdir(vim.fn.stdpath("log"), "p")
    local f = io.open(M.log_path(), "a")
    if f then
      f:write(os.date("%Y-%m-%dT%H:%M:%S "), full, "\n", debug.traceback("", 2), "\n")
      f:close()
    end
  end)
  vim.notify("pseudoclaude: " .. M.plain(full), level or vim.log.levels.ERROR)
end

return M
