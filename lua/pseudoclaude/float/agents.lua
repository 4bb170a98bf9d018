--- The picker's `agent:` filter: `agent:NAME` in the prompt keeps the rows of that agent's sessions, `agent:A,B` of
--- either, `-agent:NAME` leaves that agent's out (as fast-resume's filters), in the list and in the search mode; the
--- rest of the prompt is what is matched (or searched). NAME is the agent a row continues with: `claude`, `codex`,
--- `gemini`, `qwen`, `opencode`, `pi` for the other agents' sessions (`<C-o>`), an ACP agent's name for a session of
--- ours it ran, `pseudoclaude` for our own agent's; a NAME matches every agent it starts (`agent:c` keeps Claude Code's
--- and Codex's). See `:help pseudoclaude-picker-agent`.

local M = {}
local H = {}

--- The name of our own agent in a filter.
M.OURS = "pseudoclaude"

---@class pseudoclaude.float.AgentFilter
---@field keep string[]? Kept: the agents that start with one of these (none: every agent).
---@field drop string[] Left out.

--- The text to match and the filter of `query` (nil without an `agent:` term). A term with no name (`agent:` being
--- typed) filters nothing.
---@param query string
---@return string text
---@return pseudoclaude.float.AgentFilter? filter
function M.parse(query)
  if not query:find("agent:", 1, true) then
    return query, nil
  end
  local keep, drop, found = nil, {}, false
  local text = query:gsub("%f[^%s%z](%-?)agent:(%S*)", function(minus, names)
    found = true
    for name in names:gmatch("[^,]+") do
      name = name:lower()
      if minus == "-" then
        drop[#drop + 1] = name
      else
        keep = keep or {}
        keep[#keep + 1] = name
      end
    end
    return ""
  end)
  if not found then
    return query, nil
  end
  text = vim.trim((text:gsub("%s+", " ")))
  if not keep and #drop == 0 then
    return text, nil
  end
  return text, { keep = keep, drop = drop }
end

--- Whether a row of `agent` (nil: our own agent) passes `filter`.
---@param filter pseudoclaude.float.AgentFilter
---@param agent string?
---@return boolean
function M.passes(filter, agent)
  agent = agent or M.OURS
  for _, name in ipairs(filter.drop) do
    if vim.startswith(agent, name) then
      return false
    end
  end
  if not filter.keep then
    return true
  end
  for _, name in ipairs(filter.keep) do
    if vim.startswith(agent, name) then
      return true
    end
  end
  return false
end

--- `matches` (indices into `s.items`) whose rows pass `filter`, in order; at most `max` of them.
---@param s pseudoclaude.float.State
---@param filter pseudoclaude.float.AgentFilter
---@param matches integer[]
---@param max integer?
---@return integer[]
function M.keep_rows(s, filter, matches, max)
  local out = {}
  for _, i in ipairs(matches) do
    if M.passes(filter, H.agent(s, i)) then
      out[#out + 1] = i
      if max and #out >= max then
        break
      end
    end
  end
  return out
end

--- The hits whose sessions pass `filter`: another agent's by its `agent`, one of ours by the agent that ran it
--- (`ran`: by id, as the list knows it, `M.ran`).
---@param filter pseudoclaude.float.AgentFilter
---@param hits pseudoclaude.SearchHit[]
---@param ran table<string, string>
---@return pseudoclaude.SearchHit[]
function M.keep_hits(filter, hits, ran)
  local out = {}
  for _, hit in ipairs(hits) do
    if M.passes(filter, hit.agent or ran[hit.id]) then
      out[#out + 1] = hit
    end
  end
  return out
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- The agent of item `i` of the picker, building no row of ours from a packed list.
---@param s pseudoclaude.float.State
---@param i integer
---@return string?
function H.agent(s, i)
  if s.packed then
    local agent, external = require("pseudoclaude.session_rows").agent(s.packed, i)
    if not external then
      return agent
    end
  end
  local item = s.items[i]
  return item and item.agent
end

--- Our sessions of the picker's list that an ACP agent ran, by id: their agent (kept per list).
---@param s pseudoclaude.float.State
---@return table<string, string>
function M.ran(s)
  local cache = s.agents_ran
  if cache and cache.items == s.items then
    return cache.by_id
  end
  local by_id = {}
  for i = 1, s.count or #s.items do
    local agent = H.agent(s, i)
    if agent then
      local item = s.items[i]
      if item and not item.source then
        by_id[item.id] = agent
      end
    end
  end
  s.agents_ran = { items = s.items, by_id = by_id }
  return by_id
end

return M
