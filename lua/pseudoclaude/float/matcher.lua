--- Fuzzy matching for the session picker: which haystacks contain the query's characters in order, ranked by
--- match quality, then by position in the list (the list is newest first, so ties go to the newest).
---
--- Three engines with one interface:
--- - "rust": the same ranking in the core (src/fuzzy.rs), which keeps the texts; a keystroke sends the query and gets
---   the matches back as one string of packed integers (100,000 texts: a few milliseconds, where Lua takes tens),
---   and the matched characters of the visible rows in one more call (`Matcher:spans`); the picker's engine. It falls
---   back to "lua" when the core refuses the texts (one holds a NUL byte);
--- - "lua": a subsequence matcher in plain Lua over haystacks lower-cased once, allocating nothing per haystack
---   (scores are packed with the index into one number, so the ranking is one `table.sort` of numbers);
--- - "vim": `vim.fn.matchfuzzy()`, Neovim's C matcher.
--- `tests/bench/picker_bench.py` measures them; the picker uses `M.DEFAULT_ENGINE`.
---
--- Typing forward narrows: `filter(query, previous_matches)` only looks at the previous matches.

local M = {}
local H = {}

---@alias pseudoclaude.float.MatchEngine "rust"|"lua"|"vim"

--- The engine the picker uses (see doc/benchmarks.md, "Picker").
---@type pseudoclaude.float.MatchEngine
M.DEFAULT_ENGINE = "rust"

---@class pseudoclaude.float.Matcher
---@field haystacks string[] The texts matched against, in list order (for a matcher the core built, computed when read).
---@field count integer How many.
---@field engine pseudoclaude.float.MatchEngine
---@field lower string[]? Lower-cased haystacks ("lua" engine).
---@field index table<string, integer>? Haystack -> index ("vim" engine).
---@field handle integer? The core's matcher ("rust" engine), freed with this object.
---@field last integer[]? The last result ("rust" engine): a narrowing filter of it searches the core's copy.
---@field finaliser userdata? Frees `handle` when this matcher is collected.
---@field units_of string? The query `units` (its characters, lower-cased unless smart-case) were cut from.
---@field units string[]?
---@field units_n integer?
---@field lens_of string? The query `lens` (its characters' bytes) were computed for.
---@field lens integer[]?
local Matcher = {}
Matcher.__index = Matcher

--- A matcher over `haystacks` (kept by reference; do not modify it afterwards).
---@param haystacks string[]
---@param engine pseudoclaude.float.MatchEngine?
---@param lower string[]? The haystacks already lower-cased ("lua" engine), when the caller made them in steps.
---@param handle integer? The core's matcher holding `haystacks` already ("rust" engine, see `M.add`).
---@param count integer? How many haystacks (default `#haystacks`; given for a table that computes them when read).
---@return pseudoclaude.float.Matcher
function M.new(haystacks, engine, lower, handle, count)
  engine = engine or M.DEFAULT_ENGINE
  local self = setmetatable({ haystacks = haystacks, engine = engine, count = count or #haystacks }, Matcher)
  if engine == "rust" then
    handle = handle or M.add(nil, haystacks, 1, #haystacks)
    if not handle then
      return M.new(haystacks, "lua", lower)
    end
    self.handle = handle
    H.free_with(self, handle)
  elseif engine == "lua" then
    if not lower then
      lower = {}
      for i = 1, #haystacks do
        lower[i] = haystacks[i]:lower()
      end
    end
    self.lower = lower
  elseif engine == "vim" then
    local index = {}
    for i = 1, #haystacks do
      index[haystacks[i]] = i
    end
    self.index = index
  else
    error(("pseudoclaude.float.matcher: unknown engine %q"):format(tostring(engine)), 2)
  end
  return self
end

--- Hands `haystacks[from..to]` to the core's matcher `handle` (a new one when nil), for a "rust" matcher built in
--- steps; returns the handle, or nil when the core refused them (it then holds none of them: free it).
---@param handle integer?
---@param haystacks string[]
---@param from integer
---@param to integer
---@return integer?
function M.add(handle, haystacks, from, to)
  local core = require("pseudoclaude.core")
  local joined = table.concat(haystacks, "\0", from, to)
  local count = math.max(0, to - from + 1)
  if not handle then
    local ok, new = pcall(core.call, "fuzzy_new", joined, count)
    return ok and new or nil
  end
  return pcall(core.call, "fuzzy_add", handle, joined, count) and handle or nil
end

--- Frees the core's matcher `handle` (one never wrapped in a matcher).
---@param handle integer
function M.free(handle)
  pcall(require("pseudoclaude.core").call, "fuzzy_free", handle)
end

--- Indices of the haystacks matching `query`, best first (ties: lower index first). `candidates` (indices, any
--- order) restricts the search, e.g. to the matches of a prefix of `query`. An empty query matches everything, in
--- list order.
---@param query string
---@param candidates integer[]?
---@return integer[]
function Matcher:filter(query, candidates)
  if query == "" then
    if candidates then
      local out = H.copy(candidates)
      table.sort(out)
      return out
    end
    local out = {}
    for i = 1, self.count do
      out[i] = i
    end
    return out
  end
  if self.engine == "vim" then
    return H.filter_vim(self, query, candidates)
  elseif self.engine == "rust" then
    return H.filter_rust(self, query, candidates)
  end
  return H.filter_lua(self, query, candidates)
end

--- 0-based byte offsets, in `self.haystacks[i]`, of the characters that `query` matched (for highlighting), or
--- nil when it does not match.
---@param i integer
---@param query string
---@return integer[]?
function Matcher:positions(i, query)
  local hay = self.haystacks[i]
  if self.engine == "vim" then
    return H.positions_vim(hay, query)
  end
  local smart = query:find("%u") ~= nil
  if self.units_of ~= query then -- once per keystroke, not once per visible row
    self.units_of, self.units, self.units_n = query, H.units(smart and query or query:lower())
  end
  local units, n = self.units, self.units_n
  local out = {}
  local lower = self.lower and self.lower[i] or (not smart and hay:lower()) or nil
  if not H.score(smart and hay or lower, units, n, out) then
    return nil
  end
  return out
end

--- The byte spans, in their haystacks, of the characters `query` matched in the haystacks `indices` (the rows on the
--- screen): `spans[k]` is flat, `{start, end, start, end, …}` (0-based, end exclusive), one span per matched character
--- in order, or false when haystack `indices[k]` does not match. The "rust" engine computes them in the core from its
--- own copy of the texts, in one call: Lua builds no haystack to highlight a row.
---@param indices integer[]
---@param query string
---@return (integer[]|false)[]
function Matcher:spans(indices, query)
  local out = {}
  if self.engine == "rust" and #indices > 0 then
    local ok, packed = pcall(require("pseudoclaude.core").call, "fuzzy_positions", self.handle, query, indices)
    if ok then
      local lens = H.unit_lengths(self, query)
      local at = H.unpack(packed)
      local j = 1
      for k = 1, #indices do
        local n = at[j]
        local spans = false ---@type integer[]|false
        if n > 0 then
          spans = {}
          for m = 1, n do
            local p = at[j + m]
            spans[2 * m - 1], spans[2 * m] = p, p + (lens[m] or 1)
          end
        end
        out[k] = spans
        j = j + n + 1
      end
      return out
    end
  end
  for k, i in ipairs(indices) do
    local positions = self:positions(i, query)
    local spans = false ---@type integer[]|false
    if positions then
      local hay = self.haystacks[i]
      spans = {}
      for m, p in ipairs(positions) do
        spans[2 * m - 1], spans[2 * m] = p, p + H.char_len(hay, p + 1)
      end
    end
    out[k] = spans
  end
  return out
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- Bytes of each character of `query` (those of the matched characters: matching changes only ASCII letters' case).
---@param self pseudoclaude.float.Matcher
---@param query string
---@return integer[]
function H.unit_lengths(self, query)
  if self.lens_of ~= query then
    local units, n = H.units(query)
    local lens = {}
    for m = 1, n do
      lens[m] = #units[m]
    end
    self.lens_of, self.lens = query, lens
  end
  return self.lens
end

--- Bytes of the UTF-8 character starting at byte `i` of `s`.
---@param s string
---@param i integer
---@return integer
function H.char_len(s, i)
  local b = s:byte(i) or 0
  return b >= 0xF0 and 4 or b >= 0xE0 and 3 or b >= 0xC0 and 2 or 1
end

local find, byte = string.find, string.byte

--- Scores are packed as `(OFFSET - score) * SHIFT + index`, so sorting the numbers ascending sorts by score
--- descending, then index ascending. Exact in a double: |score| < 2^19, index < 2^24.
local SHIFT = 16777216 -- 2^24
local OFFSET = 524288 -- 2^19

local BONUS_START = 12 -- match at the haystack's first byte
local BONUS_BOUNDARY = 8 -- match right after a separator
local BONUS_CONSECUTIVE = 6 -- match right after the previous match
local BONUS_SUBSTRING = 10 -- the query appears as is
local MATCH = 16 -- per matched character

--- Bytes after which a match starts a word.
local SEPARATORS = {}
for _, c in ipairs({ " ", "-", "_", ".", "/", ":", ",", "(", "[", "{", "'", '"', "\t" }) do
  SEPARATORS[byte(c)] = true
end

---@param list integer[]
---@return integer[]
function H.copy(list)
  local out = {}
  for j = 1, #list do
    out[j] = list[j]
  end
  return out
end

--- The query's characters (UTF-8 sequences); allocated once per query, not per haystack.
---@param q string
---@return string[] units
---@return integer n
function H.units(q)
  local units, n = {}, 0
  for ch in q:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    n = n + 1
    units[n] = ch
  end
  return units, n
end

--- Score of `s` for the query `units[1..n]`, or nil when it does not match. When `out` is given, the 0-based
--- byte offsets of the matched characters are stored in it.
---
--- The query as a plain substring scores best (its leftmost occurrence); otherwise the leftmost subsequence
--- match is found, then tightened from its end backwards (the latest start that still matches), which favours
--- compact matches; word starts and runs of consecutive characters earn bonuses, gaps cost.
---@param s string
---@param units string[]
---@param n integer
---@param out integer[]?
---@return integer?
function H.score(s, units, n, out)
  -- forward: does it match at all, and where does the leftmost match end?
  local pos = 1
  for k = 1, n do
    local _, b = find(s, units[k], pos, true)
    if not b then
      return nil
    end
    pos = b + 1
  end
  local score = 0
  local q = n == 1 and units[1] or table.concat(units, "", 1, n)
  local a = find(s, q, 1, true)
  if a then
    -- contiguous
    score = BONUS_SUBSTRING + MATCH * n + BONUS_CONSECUTIVE * (n - 1)
    if a == 1 then
      score = score + BONUS_START
    elseif SEPARATORS[byte(s, a - 1)] then
      score = score + BONUS_BOUNDARY
    end
    if out then
      local p = a
      for k = 1, n do
        out[k] = p - 1
        p = p + #units[k]
      end
    end
    return score - H.lead_penalty(a)
  end
  -- backward from the end of the leftmost match: the latest start that still matches
  local p = pos - 1 -- last byte of the last matched unit
  local next_start = nil ---@type integer?
  for k = n, 1, -1 do
    local u = units[k]
    local len = #u
    local first = byte(u, 1)
    local at = p - len + 1
    while at >= 1 do
      if byte(s, at) == first and (len == 1 or find(s, u, at, true) == at) then
        break
      end
      at = at - 1
    end
    -- (the forward pass guarantees a match exists)
    score = score + MATCH
    if at == 1 then
      score = score + BONUS_START
    elseif SEPARATORS[byte(s, at - 1)] then
      score = score + BONUS_BOUNDARY
    end
    if next_start then
      local gap = next_start - (at + len)
      if gap == 0 then
        score = score + BONUS_CONSECUTIVE
      else
        score = score - (gap < 24 and gap or 24)
      end
    end
    if out then
      out[k] = at - 1
    end
    next_start = at
    p = at - 1
  end
  return score - H.lead_penalty(next_start)
end

--- A small cost for starting late in the haystack.
---@param start integer 1-based byte where the match starts
---@return integer
function H.lead_penalty(start)
  local lead = (start - 1) / 8
  return lead < 8 and math.floor(lead) or 8
end

---@param self pseudoclaude.float.Matcher
---@param query string
---@param candidates integer[]?
---@return integer[]
function H.filter_lua(self, query, candidates)
  local smart = query:find("%u") ~= nil
  local hays = smart and self.haystacks or self.lower
  local units, n = H.units(smart and query or query:lower())
  local score = H.score
  local keys, nk = {}, 0
  if candidates then
    for j = 1, #candidates do
      local i = candidates[j]
      local s = score(hays[i], units, n)
      if s then
        nk = nk + 1
        keys[nk] = (OFFSET - s) * SHIFT + i
      end
    end
  else
    for i = 1, #hays do
      local s = score(hays[i], units, n)
      if s then
        nk = nk + 1
        keys[nk] = (OFFSET - s) * SHIFT + i
      end
    end
  end
  table.sort(keys)
  for j = 1, nk do
    keys[j] = keys[j] % SHIFT
  end
  return keys
end

local ffi_ok, ffi = pcall(require, "ffi")
local new_table_ok, new_table = pcall(require, "table.new")

--- Frees the core's matcher when `self` is collected (a userdata's finaliser: LuaJIT's tables have none).
---@param self pseudoclaude.float.Matcher
---@param handle integer
function H.free_with(self, handle)
  if newproxy then
    self.finaliser = newproxy(true)
    getmetatable(self.finaliser).__gc = function()
      M.free(handle)
    end
  end
end

---@param self pseudoclaude.float.Matcher
---@param query string
---@param candidates integer[]?
---@return integer[]
function H.filter_rust(self, query, candidates)
  -- typing forward: the candidates are the last result, which the core still has
  local narrow = candidates ~= nil and candidates == self.last
  if not narrow and candidates and #candidates == 0 then
    self.last = nil -- the core's last result is another one now
    return {}
  end
  local within = not narrow and candidates or nil
  local out = H.unpack(require("pseudoclaude.core").call("fuzzy_filter", self.handle, query, narrow, within))
  self.last = out
  return out
end

--- The integers packed in `s` (little-endian uint32 each), as a list.
---@param s string
---@return integer[]
function H.unpack(s)
  local n = #s / 4
  local out = new_table_ok and new_table(n, 0) or {}
  if ffi_ok then
    local p = ffi.cast("const uint32_t *", s)
    for k = 1, n do
      out[k] = p[k - 1]
    end
  else
    for k = 1, n do
      local a, b, c, d = byte(s, 4 * k - 3, 4 * k)
      out[k] = a + b * 256 + c * 65536 + d * 16777216
    end
  end
  return out
end

---@param self pseudoclaude.float.Matcher
---@param query string
---@param candidates integer[]?
---@return integer[]
function H.filter_vim(self, query, candidates)
  local list = self.haystacks
  if candidates then
    -- matchfuzzy breaks ties by list order: keep the list's order
    local sorted = H.copy(candidates)
    table.sort(sorted)
    list = {}
    for j = 1, #sorted do
      list[j] = self.haystacks[sorted[j]]
    end
  end
  local matched = vim.fn.matchfuzzy(list, query)
  local index, out = self.index, {}
  for j = 1, #matched do
    out[j] = index[matched[j]]
  end
  return out
end

---@param hay string
---@param query string
---@return integer[]?
function H.positions_vim(hay, query)
  local res = vim.fn.matchfuzzypos({ hay }, query)
  local chars = res[2][1]
  if not chars then
    return nil
  end
  local ascii = not hay:find("[\128-\255]")
  local out = {}
  for k, c in ipairs(chars) do
    out[k] = ascii and c or vim.fn.byteidx(hay, c)
  end
  return out
end

return M
