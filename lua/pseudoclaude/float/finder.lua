--- The picker's finder: where its items come from. The first rows (`max_items` newest, pinned first) and then the
--- full list, both read on the core's threads; the full list comes packed with the core's matcher over it, and its
--- rows are built when drawn (`M.lazy`).

--- It is handed the picker's state and asks the controller through its methods (`s:refresh()`…): it never requires
--- float.lua.

local M = {}

--- Bytes of an uncached log the first rows may read (on a worker thread, about 1 ms, so they come quickly); the full
--- list reads the rest.
M.FIRST_ROWS_MAX_READ = 256 * 1024

--- Haystacks (and their lower-cased forms) built per main-loop step: 10,000 at once is more than a frame.
M.HAY_STEP = 250

--- The first rows, `max_items` newest sessions (pinned ones first), listed on the core's threads: a session whose
--- summary is not cached is listed from what a quick read gives (the full list reads the rest). The other agents'
--- sessions (`s.external`) come with the full list, so that a thousand transcripts never delay the first rows; only
--- `<C-o>` (the user asked for them) and a workspace with no session of ours list them in the first rows too (the head
--- and tail of each transcript not cached yet). When the rows arrive: the rows, then in a main-loop step of its own
--- the preview and the request for the full list. `opts.reload`: the list is read again (`<C-o>`), and an empty one is
--- shown as such instead of closing the picker.
---@param s pseudoclaude.float.State
---@param opts pseudoclaude.float.Opts|{reload: boolean?, with_external: boolean?}
function M.read_first_rows(s, opts)
  local sessions = require("pseudoclaude.sessions")
  local asked = vim.uv.hrtime()
  s.list_gen = (s.list_gen or 0) + 1
  local gen = s.list_gen
  local function fail(msg, level)
    s:close()
    s:notify(msg, level)
  end
  local ok, err = pcall(sessions.list_async, {
    limit = s.max_items,
    max_read = M.FIRST_ROWS_MAX_READ,
    include_pinned = true,
    all = opts.all,
    external = s.external and (opts.reload or opts.with_external) or false,
  }, function(lerr, top)
    if not s:is_current() or s.list_gen ~= gen then
      return
    end
    s.stats.list_ms = (vim.uv.hrtime() - asked) / 1e6
    if lerr then
      return fail(lerr, vim.log.levels.ERROR)
    end
    if #top == 0 and not (opts.reload or opts.with_external) then
      -- none of ours: the other agents' sessions of the workspace are what there is to resume, "other agents" on
      -- (as if `<C-o>` was typed: it hides them again), whatever `picker.external` says
      M.others_on(s)
      return M.read_first_rows(s, vim.tbl_extend("force", opts, { with_external = true }))
    end
    if #top == 0 and not opts.reload then
      local what = opts.search and "search" or "resume"
      local where = opts.all and "any workspace" or sessions.workspace()
      return fail(
        ("pseudoclaude: no session to %s in %s, ours or another agent's"):format(what, where),
        vim.log.levels.INFO
      )
    end
    s.listing = false
    s.top_items = top
    if not s.full then
      s:set_items(M.with_marks(s, top))
      s.sel_id = s.sel_id or (top[1] and top[1].id)
      s:match(s.query)
      s:reselect()
      s:draw_rows()
    end
    s.stats.rows_at = vim.uv.hrtime()
    -- the preview and the full list in a step of their own, once the rows are on the screen: a timer's callback
    -- comes after Neovim's next redraw, where a scheduled one would run in the same round of events, before it
    vim.defer_fn(function()
      if not s:is_current() or s.list_gen ~= gen then
        return
      end
      s:draw_preview()
      s.stats.preview_at = vim.uv.hrtime()
      M.read_full_list(s)
    end, 0)
  end)
  if not ok then
    fail(err, vim.log.levels.ERROR)
  end
end

--- `items` with the sessions renamed or pinned here as written, each moved to the top of its group (pinned or not):
--- the write made it the most recent, as the next list will show it.
---@param s pseudoclaude.float.State
---@param items pseudoclaude.SessionInfo[]
---@return pseudoclaude.SessionInfo[]
function M.with_marks(s, items)
  if not next(s.marked) then
    return items
  end
  local moved, pinned, rest = {}, {}, {}
  for _, item in ipairs(items) do
    local info = s.marked[item.id]
    if info then
      moved[#moved + 1] = info
    elseif item.pinned then
      pinned[#pinned + 1] = item
    else
      rest[#rest + 1] = item
    end
  end
  local out = {}
  for _, group in ipairs({ true, false }) do
    for _, info in ipairs(moved) do
      if (info.pinned == true) == group then
        out[#out + 1] = info
      end
    end
    for _, item in ipairs(group and pinned or rest) do
      out[#out + 1] = item
    end
  end
  return out
end

--- Starts reading the full list in the background; when it arrives, it replaces the first rows as what the query
--- searches. It comes packed, with the core's fuzzy matcher over it built on the same worker thread: putting it in
--- place is one main-loop step whatever its size, and a row is built only when it is drawn or acted on (`M.lazy`).
--- (Read right after the first draw instead when no thread can be started.)
---@param s pseudoclaude.float.State
function M.read_full_list(s)
  local sessions = require("pseudoclaude.sessions")
  local matcher = require("pseudoclaude.float.matcher")
  local gen = s.list_gen
  local opts = { all = s.all, external = s.external, matcher = matcher.DEFAULT_ENGINE == "rust" }
  local ok = pcall(sessions.list_packed, opts, function(err, list, handle)
    if not s:is_current() or s.full or s.list_gen ~= gen then
      if handle then
        matcher.free(handle)
      end
      return
    end
    if err then
      s:notify(err, vim.log.levels.ERROR)
      return M.use_full_list(s, s.items)
    end
    if list.recs and handle and not next(s.marked) and not next(s.deleted) then
      return M.install_packed(s, list, handle)
    end
    -- renamed, pinned or deleted here meanwhile (or no FFI, or Lua's matcher): the rows themselves, adjusted
    if handle then
      matcher.free(handle)
    end
    M.use_full_list(s, list.recs and require("pseudoclaude.session_rows").fill(list, 1, list.count, {}) or list)
  end)
  if not ok then
    vim.schedule(function()
      if s:is_current() and not s.full and s.list_gen == gen then
        local read, items = pcall(sessions.list, { all = s.all, external = s.external })
        M.use_full_list(s, read and items or s.items)
      end
    end)
  end
end

--- The rows of a packed list as a table that builds each one when it is first read (and keeps it): `items[i]` is a
--- plain row; `#items` and `ipairs()` do not see them (LuaJIT), so the picker counts with `s.count` and walks the
--- list with `M.plain`.
---@param list pseudoclaude.PackedList
---@return table
function M.lazy(list)
  local rows = require("pseudoclaude.session_rows")
  local count = list.count
  return setmetatable({}, {
    __index = function(t, i)
      if type(i) ~= "number" or i < 1 or i > count then
        return nil
      end
      local row = rows.row(list, i)
      rawset(t, i, row)
      return row
    end,
  })
end

--- The full list, packed, with the core's matcher over it: in place now (one step, whatever its size).
---@param s pseudoclaude.float.State
---@param list pseudoclaude.PackedList
---@param handle integer
function M.install_packed(s, list, handle)
  local t = vim.uv.hrtime()
  local items = M.lazy(list)
  -- the texts stay in the core; Lua's copy of one is made when its row's match is highlighted
  local hay = setmetatable({}, {
    __index = function(h, i)
      local item = items[i]
      local text = item and M.haystack(item)
      rawset(h, i, text)
      return text
    end,
  })
  s.items, s.count, s.packed = items, list.count, list
  s.matcher = require("pseudoclaude.float.matcher").new(hay, "rust", nil, handle, list.count)
  s.full = true
  s:refresh()
  s.stats.full_at = vim.uv.hrtime()
  s.stats.full_apply_ms = (s.stats.full_at - t) / 1e6
  s.stats.full_count = list.count
end

--- Every item of the picker, in order, as a plain list (a packed list's rows are built: for the rare changes of the
--- whole list, a delete, a name, a pin).
---@param s pseudoclaude.float.State
---@return pseudoclaude.SessionInfo[]
function M.plain(s)
  if not s.packed then
    return s.items
  end
  local out = {}
  for i = 1, s.count do
    out[i] = s.items[i]
  end
  return out
end

--- The position of session `id` in the picker's items, or nil (a packed list is searched without building rows).
---@param s pseudoclaude.float.State
---@param id string
---@return integer?
function M.index_of(s, id)
  if s.packed then
    return require("pseudoclaude.session_rows").find(s.packed, id)
  end
  for i = 1, s.count or #s.items do
    if s.items[i].id == id then
      return i
    end
  end
  return nil
end

--- The full list is here: build what the matcher searches in steps, then search it from now on and apply the
--- current query to it.
---@param s pseudoclaude.float.State
---@param items pseudoclaude.SessionInfo[]
function M.use_full_list(s, items)
  items = M.with_marks(s, items)
  local matcher = require("pseudoclaude.float.matcher")
  local rust = matcher.DEFAULT_ENGINE == "rust"
  local hay, lower, done = {}, {}, 0
  local handle = nil ---@type integer?
  local gen = s.list_gen
  local function step()
    if not s:is_current() or s.full or s.list_gen ~= gen then
      if handle then
        matcher.free(handle)
      end
      return
    end
    local to = math.min(done + M.HAY_STEP, #items)
    for i = done + 1, to do
      hay[i] = M.haystack(items[i])
      if not rust then
        lower[i] = hay[i]:lower()
      end
    end
    if rust and (handle or done == 0) then
      -- the core's matcher takes them step by step too; refused (a NUL byte in a text): Lua's, built at the end
      local added = matcher.add(handle, hay, done + 1, to)
      if not added and handle then
        matcher.free(handle)
      end
      handle = added
    end
    done = to
    if done < #items then
      return vim.schedule(step)
    end
    M.install_full_list(s, items, hay, not rust and lower or nil, handle)
  end
  step()
end

---@param item pseudoclaude.SessionInfo
---@return string
function M.haystack(item)
  -- the branch last, so that the title's and the model's offsets stay where float/rows.lua's `with_matches` looks
  local branch = type(item.branch) == "string" and item.branch or ""
  local hay = (item.title or "") .. " " .. (item.model or "") .. " " .. item.id .. " " .. branch
  if item.source then
    hay = hay .. " " .. item.source -- "codex" finds the Codex rows
  end
  return type(item.workspace) == "string" and (hay .. " " .. item.workspace) or hay
end

--- Reads the list again with the other agents' sessions in or out (`<C-o>`); the rows shown stay until it arrives.
---@param s pseudoclaude.float.State
function M.toggle_external(s)
  s.external = not s.external
  s.full = false
  s:external_changed()
  M.read_first_rows(s, { all = s.all, reload = true })
end

--- "Other agents" on, as `<C-o>` would turn it (a workspace with no session of ours).
---@param s pseudoclaude.float.State
function M.others_on(s)
  if not s.external then
    s.external = true
    s:external_changed()
  end
end

---@param s pseudoclaude.float.State
---@param items pseudoclaude.SessionInfo[]
---@param hay string[]
---@param lower string[]? The haystacks lower-cased ("lua" engine).
---@param handle integer? The core's matcher holding `hay` ("rust" engine).
function M.install_full_list(s, items, hay, lower, handle)
  local matcher = require("pseudoclaude.float.matcher")
  if next(s.deleted) then
    local kept, kept_hay, kept_lower = {}, {}, lower and {} or nil
    for i, item in ipairs(items) do
      if not s.deleted[item.id] then
        kept[#kept + 1], kept_hay[#kept + 1] = item, hay[i]
        if kept_lower then
          kept_lower[#kept] = lower[i]
        end
      end
    end
    items, hay, lower = kept, kept_hay, kept_lower
    if handle then
      matcher.free(handle) -- it holds the deleted ones too
      handle = nil
    end
  end
  local t = vim.uv.hrtime()
  s.items, s.count, s.packed = items, #items, nil
  s.matcher = matcher.new(hay, handle and "rust" or (lower and "lua" or nil), lower, handle)
  s.full = true
  s:refresh()
  s.stats.full_at = vim.uv.hrtime()
  s.stats.full_apply_ms = (s.stats.full_at - t) / 1e6
  s.stats.full_count = #items
end

return M
