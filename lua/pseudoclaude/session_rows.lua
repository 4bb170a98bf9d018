--- The session list as the core packs it (src/bridge/rows.rs): fixed binary records and their texts in one string,
--- read through LuaJIT's FFI. `rows()` builds plain tables (`sessions.list()`, the collector paused meanwhile);
--- `open()` + `row(i)` builds one row when it is needed (the picker reads only the rows it draws). Without the FFI (a
--- Neovim built on PUC Lua), the callers ask the core for JSON instead (`available` is false).
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
    -- src/bridge/rows.rs: NUMBERS, flags, STRINGS (offset, length) x 9
    ffi.cdef([[
      typedef struct {
        double messages, entries, bytes, modified, last_message, bad_lines, repaired, torn_tail_bytes,
               input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, forked_index;
        uint32_t flags, pad;
        uint32_t s[18];
      } pseudoclaude_list_row;
      int memcmp(const void *a, const void *b, size_t n);
    ]])
  end
end

---@class pseudoclaude.PackedList A packed list opened for reading (it keeps `data` alive: the pointers are into it).
---@field data string? The Lua string it was opened from (none for a list lent by the core, `lent()`)
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
  local list = H.open(ffi.cast("const uint8_t *", data), #data)
  list.data = data
  return list
end

--- The list of `len` bytes at `base`.
---@param base ffi.cdata* `const uint8_t *`
---@param len integer
---@return pseudoclaude.PackedList
function H.open(base, len)
  local head = ffi.cast("const uint32_t *", base)
  local count, size = tonumber(head[1]), tonumber(head[2])
  if size ~= ffi.sizeof("pseudoclaude_list_row") or len < HEADER + count * size then
    error(
      ("a packed session list of another layout (record of %d bytes, this reader's %d)"):format(
        size,
        ffi.sizeof("pseudoclaude_list_row")
      ),
      0
    )
  end
  return {
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
  -- the fields every row has in one constructor (16 slots with a branch and a commit), the others only when set:
  -- a constructor naming absent fields sizes every row for all of them (half again the time)
  local row = {
    id = ffi.string(texts + s[0], s[1]),
    title = ffi.string(texts + s[2], s[3]),
    model = ffi.string(texts + s[4], s[5]),
    messages = r.messages,
    entries = r.entries,
    bytes = r.bytes,
    modified = r.modified,
    last_message = r.last_message,
    bad_lines = r.bad_lines,
    repaired = r.repaired,
    torn_tail_bytes = r.torn_tail_bytes,
    damaged = band(flags, DAMAGED) ~= 0,
    usage = {
      input_tokens = r.input_tokens,
      output_tokens = r.output_tokens,
      cache_read_tokens = r.cache_read_tokens,
      cache_write_tokens = r.cache_write_tokens,
    },
    pinned = band(flags, PINNED) ~= 0,
  }
  if s[8] ~= NONE then
    row.branch = ffi.string(texts + s[8], s[9])
  end
  if s[10] ~= NONE then
    row.commit = ffi.string(texts + s[10], s[11])
  end
  if s[6] ~= NONE then
    row.held_by = ffi.string(texts + s[6], s[7])
  end
  local cost = r.cost
  if cost == cost then -- NaN: none
    row.cost = cost
  end
  if band(flags, PARTIAL) ~= 0 then
    row.partial = true
  end
  if s[12] ~= NONE then
    row.forked_from = { id = ffi.string(texts + s[12], s[13]), index = r.forked_index }
  end
  if s[14] ~= NONE then
    row.workspace = ffi.string(texts + s[14], s[15])
  end
  if s[16] ~= NONE then
    row.agent = ffi.string(texts + s[16], s[17])
  end
  return row
end

--- Rows `from`..`to` of `list` into `out[shift + from..shift + to]` (`shift` 0 by default).
---@param list pseudoclaude.PackedList
---@param from integer
---@param to integer
---@param out table
---@param shift integer?
---@return table out
function M.fill(list, from, to, out, shift)
  return H.paused(H.fill, list, from, to, out, shift or 0)
end

---@param list pseudoclaude.PackedList
---@param from integer
---@param to integer
---@param out table
---@param shift integer
---@return table out
function H.fill(list, from, to, out, shift)
  local row = M.row
  for i = from, to do
    out[shift + i] = row(list, i)
  end
  return out
end

--- `fn(...)` with the garbage collector paused (unless it was already): building rows with it running costs several
--- times the rows themselves (100,000 rows: 600 ms against 64), as each collection started while the list grows
--- walks every row built so far. Paused, it takes up its work after, in its usual small steps.
---@param fn function
---@param ... any
---@return any
function H.paused(fn, ...)
  local running = collectgarbage("isrunning")
  if running then
    collectgarbage("stop")
  end
  local ok, out = pcall(fn, ...)
  if running then
    collectgarbage("restart")
  end
  if not ok then
    error(out, 0)
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

--- Every row of the list the core lent (`sessions_list_lend`: `{addr, len, holders}`, the packed list in the core's
--- memory, valid until the next lend): no copy of the list into a Lua string (100,000 rows: 24 MB, twice). Read
--- before anything else can ask the core for a list; `held_by` set from `holders` (0-based rows).
---@param lent {addr: number, len: integer, holders: {[1]: integer, [2]: string}[]?}
---@return (pseudoclaude.SessionInfo|pseudoclaude.ExternalSession)[]
function M.lent(lent)
  local base = ffi.cast("const uint8_t *", lent.addr)
  if lent.len < HEADER or ffi.string(base, 4) ~= MAGIC then
    error("not a packed session list", 0)
  end
  local list = H.open(base, lent.len)
  local out = M.fill(list, 1, list.count, H.new_list(list.count))
  for _, held in ipairs(lent.holders or {}) do
    out[held[1] + 1].held_by = held[2]
  end
  return out
end

--- The ids of kept lists Lua collected, for `release_collected()`: a finalizer only notes the id, it never calls into
--- the core (finalizers also run as Lua closes, when the core's library may be gone).
---@type integer[]
H.collected = {}

--- The packed list the core keeps for Lua (`sessions_list_keep`: `{addr, len}`, in the core's memory until
--- `sessions_list_release(id)`), read in place: no copy into a Lua string (the picker's 10,000 other agents' sessions:
--- 4.4 MB, ~9 ms of a main-loop step). The core keeps it while the list is reachable; once Lua collected it, the
--- next `release_collected()` (before each list read so) lets the core forget it.
---@param kept {addr: number, len: integer}
---@param id integer the list's id, to release it by
---@return pseudoclaude.PackedList
function M.kept(kept, id)
  local base = ffi.cast("const uint8_t *", kept.addr)
  local ok, list = pcall(function()
    if kept.len < HEADER or ffi.string(base, 4) ~= MAGIC then
      error("not a packed session list", 0)
    end
    return H.open(base, kept.len)
  end)
  if not ok then
    pcall(require("pseudoclaude.core").call, "sessions_list_release", id)
    error(list, 0)
  end
  list.data = ffi.gc(ffi.new("uint8_t[1]"), function()
    H.collected[#H.collected + 1] = id
  end)
  return list
end

--- Lets the core forget the kept lists Lua collected (`kept()`).
function M.release_collected()
  local ids = H.collected
  H.collected = {}
  local core = require("pseudoclaude.core")
  for _, id in ipairs(ids) do
    pcall(core.call, "sessions_list_release", id)
  end
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

--- The `agent` of row `i` of ours without building the row (nil: our own agent's session); `external` true for
--- another agent's row, whose agent is in its row (`row(list, i).agent`).
---@param list pseudoclaude.PackedList
---@param i integer
---@return string? agent
---@return boolean external
function M.agent(list, i)
  local r = list.recs[i - 1]
  if band(r.flags, EXTERNAL) ~= 0 then
    return nil, true
  end
  local s = r.s
  return s[16] ~= NONE and ffi.string(list.texts + s[16], s[17]) or nil, false
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
