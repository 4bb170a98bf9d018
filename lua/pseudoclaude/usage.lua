--- How tokens and dollars read, the same in the agent buffer's winbar and in the picker's rows.

local M = {}

---@class pseudoclaude.Usage Tokens the providers reported; the four counts are disjoint.
---@field input_tokens integer Prompt tokens billed at the full rate.
---@field output_tokens integer
---@field cache_read_tokens integer Prompt tokens read from the provider's prompt cache.
---@field cache_write_tokens integer Prompt tokens written to it.

--- "950", "12.3k", "4.1M".
---@param n number
---@return string
function M.tokens(n)
  if n < 1000 then
    return ("%d"):format(n)
  elseif n < 1e6 then
    return ("%.1fk"):format(n / 1e3)
  end
  return ("%.1fM"):format(n / 1e6)
end

--- "$0.0042", "$1.27", "$240".
---@param dollars number
---@return string
function M.cost(dollars)
  if dollars < 0.01 then
    return ("$%.4f"):format(dollars)
  elseif dollars < 100 then
    return ("$%.2f"):format(dollars)
  end
  return ("$%.0f"):format(dollars)
end

--- Whether `u` holds any token.
---@param u pseudoclaude.Usage?
---@return boolean
function M.any(u)
  if type(u) ~= "table" then
    return false
  end
  return (u.input_tokens or 0) + (u.output_tokens or 0) + (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0) > 0
end

--- "12.3k in (80% cached) · 1.2k out · $0.04": the whole prompt (full-rate, cached and cache-written tokens), its
--- share read from the cache when there is one, the output, the cost when known. "" when nothing was reported.
---@param u pseudoclaude.Usage?
---@param cost number?
---@return string
function M.summary(u, cost)
  if not M.any(u) then
    return ""
  end
  ---@cast u pseudoclaude.Usage
  local read = u.cache_read_tokens or 0
  local prompt = (u.input_tokens or 0) + read + (u.cache_write_tokens or 0)
  local input = M.tokens(prompt) .. " in"
  if read > 0 then
    input = ("%s (%d%% cached)"):format(input, math.floor(read * 100 / prompt + 0.5))
  end
  local parts = { input, M.tokens(u.output_tokens or 0) .. " out" }
  if type(cost) == "number" then
    parts[#parts + 1] = M.cost(cost)
  end
  return table.concat(parts, " · ")
end

return M
