--- The session list as the core packs it (src/bridge/rows.rs): fixed binary records and their texts in one string,
--- read through LuaJIT's FFI. `rows()` builds plain tables (`sessions.list()`); `open()` + `row(i)` builds one row
--- when it is needed (the picker reads only the rows it draws). Without the FFI (a Neovim built on PUC Lua), the
--- callers ask the core for JSON instead (`available` is false).
---
--- A row is a plain table, the same fields and values the JSON crossing gives (`core.decode()` of `bridge::bulk`):
--- an absent field is nil, never `vim.NIL`.

local M = {}
local H = {}

local ffi_ok, ffi = pcall(require, "ffi")
local bit_ok, bit = pcall(require, "bit")

--- Whether lists can be read packed here.
M.available = ffi_ok and bit_ok

local MAGIC = "PCL1"
local HEADER = 16
local NONE = 0xFFFFFFFF
local PARTIAL, DAMAGED, PINNED, EXTERNAL = 1, 2, 4, 8

if M.available then
  if not pcall(ffi.typeof, "pseudoclaude_list_row") then
    -- src/bridge/rows.rs: NUMBERS, flags, STRINGS (offset, length) x 8
    ffi.cdef([[
      typedef struct {
        double messages, entries, bytes, modified, last_message, bad_lines, repaired, torn_tail_bytes,
               input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, forked_index;
        uint32_t flags, pad;
        uint32_t s[16];
      } pseudoclaude_list_row;
      int memcmp(const void *a, const void *b, size_t n);
    ]])
  end
end

---@class pseudoclaude.PackedList A packed list opened for reading (it keeps `data` alive: the pointers are into it).
---@field data string
---@field count integer
---@field recs ffi.cdata* `const pseudoclaude_list_row *`
---@field texts ffi.cdata* `const char *`

--- The list in `data` (what `sessions_list`/`sessions_list_take` return), or raises on text that is not one.
---@param data string
---@return pseudoclaude.PackedList
function M.open(data)
  if type(data) ~= "string" or data:sub(1, 4) ~= MAGIC then
    error("not a packed session list", 0)
  end
  local base = ffi.cast("const uint8_t *", data)
  local head = ffi.cast("const uint32_t *", base)
  local count, size = tonumber(head[1]), tonumber(head[2])
  if size ~= ffi.sizeof("pseudoclaude_list_row") or #data < HEADER + count * size then
    error(
      ("a packed session list of another layout (record of %d bytes, this reader's %d)"):format(
        size,
        ffi.sizeof("pseudoclaude_list_row")
      ),
      0
    )
  end
  return {
    data = data,
    count = count,
    recs = ffi.cast("const pseudoclaude_list_row *", base + HEADER),
    texts = ffi.cast("const char *", base + HEADER + count * size),
  }
end

local band = bit and bit.band

--- Row `i` (1-based) of `list`, a new table.
---@param list pseudoclaude.PackedList
---@param i integer
---@return pseudoclaude.SessionInfo|pseudoclaude.ExternalSession
function M.row(list, i)
  local r, texts = list.recs[i - 1], list.texts
  local s = r.s
  local flags = r.flags
  if band(flags, EXTERNAL) ~= 0 then
    return require("pseudoclaude.core").decode(ffi.string(texts + s[0], s[1]))
  end
  local cost, forked = r.cost, nil
  if s[12] ~= NONE then
    forked = { id = ffi.string(texts + s[12], s[13]), index = r.forked_index }
  end
  return {
    id = ffi.string(texts + s[0], s[1]),
    title = ffi.string(texts + s[2], s[3]),
    model = ffi.string(texts + s[4], s[5]),
    messages = r.messages,
    entries = r.entries,
    bytes = r.bytes,
    modified = r.modified,
    last_message = r.last_message,
    bad_lines = r.bad_lines,
    partial = band(flags, PARTIAL) ~= 0 or nil,
    held_by = s[6] ~= NONE and ffi.string(texts + s[6], s[7]) or nil,
    repaired = r.repaired,
    torn_tail_bytes = r.torn_tail_bytes,
    damaged = band(flags, DAMAGED) ~= 0,
    branch = s[8] ~= NONE and ffi.string(texts + s[8], s[9]) or nil,
    commit = s[10] ~= NONE and ffi.string(texts + s[10], s[11]) or nil,
    usage = {
      input_tokens = r.input_tokens,
      output_tokens = r.output_tokens,
      cache_read_tokens = r.cache_read_tokens,
      cache_write_tokens = r.cache_write_tokens,
    },
    cost = cost == cost and cost or nil, -- NaN: none
    pinned = band(flags, PINNED) ~= 0,
    forked_from = forked,
    workspace = s[14] ~= NONE and ffi.string(texts + s[14], s[15]) or nil,
  }
end

--- Rows `from`..`to` of `list` into `out[from..to]` (a step of a list built over several main-loop steps).
---@param list pseudoclaude.PackedList
---@param from integer
---@param to integer
---@param out table
---@return table out
function M.fill(list, from, to, out)
  local row = M.row
  for i = from, to do
    out[i] = row(list, i)
  end
  return out
end

--- Every row of the packed `data`, as plain tables.
---@param data string
---@return (pseudoclaude.SessionInfo|pseudoclaude.ExternalSession)[]
function M.rows(data)
  local list = M.open(data)
  return M.fill(list, 1, list.count, H.new_list(list.count))
end

--- The id of row `i`, without building the row.
---@param list pseudoclaude.PackedList
---@param i integer
---@return string
function M.id(list, i)
  local r = list.recs[i - 1]
  if band(r.flags, EXTERNAL) ~= 0 then
    return M.row(list, i).id
  end
  return ffi.string(list.texts + r.s[0], r.s[1])
end

--- The index of the row whose id is `id` (the first one), or nil; compares bytes, builds no string.
---@param list pseudoclaude.PackedList
---@param id string
---@return integer?
function M.find(list, id)
  local len, recs, texts, C = #id, list.recs, list.texts, ffi.C
  for i = 0, list.count - 1 do
    local s = recs[i].s
    if s[1] == len and band(recs[i].flags, EXTERNAL) == 0 and C.memcmp(texts + s[0], id, len) == 0 then
      return i + 1
    end
  end
  for i = 1, list.count do -- another tool's session: its id is inside its JSON
    if band(recs[i - 1].flags, EXTERNAL) ~= 0 and M.id(list, i) == id then
      return i
    end
  end
  return nil
end

local new_table_ok, new_table = pcall(require, "table.new")

---@param n integer
---@return table
function H.new_list(n)
  return new_table_ok and new_table(n, 0) or {}
end

return M
