--- The picker's results window: the visible rows (text from float/render.lua), the highlight, the characters the
--- query matched and the counter in the prompt; the search mode's hit rows go through its `scroll` and `put` too.
--- Only what is visible is drawn, so a keystroke costs one screenful.
---
--- The rows' highlights (their columns, the matched characters) are not extmarks kept in the buffer: a decoration
--- provider draws them as ephemeral marks while Neovim redraws a line (`on_line`), from the highlights `put` was
--- given for it. A keystroke that reorders the ranking changes nearly every visible line; it then costs the lines'
--- text and nothing per highlight until the screen is drawn, and a line that stays as it was (text and highlights)
--- is not touched at all, so Neovim does not redraw it either.

local M = {}
local H = {}

local api = vim.api
local ns = api.nvim_create_namespace("pseudoclaude.picker")
--- The rows' highlights, drawn by the decoration provider (ephemeral marks only).
local rows_ns = api.nvim_create_namespace("pseudoclaude.picker.rows")
--- The selection (one mark, moved).
local sel_ns = api.nvim_create_namespace("pseudoclaude.picker.selection")
--- The counter's extmark in the prompt (float.lua owns the prompt's other mark).
local COUNTER_MARK = 1
local SELECTION_MARK = 1
--- No ranges (shared).
local NONE = {}

--- What `put` last drew in each results buffer open (`s.drawn`), read by the decoration provider; dropped when the
--- buffer is wiped.
---@type table<integer, pseudoclaude.float.Drawn>
local shown = {}

---@class pseudoclaude.float.Drawn The results as `put` left them.
---@field buf integer
---@field lines string[]
---@field hls table[][] Per line, its highlights `{start_col, end_col, group, priority?}` (shared: never changed).
---@field matched integer[][] Per line, the byte ranges the query matched, flat: `{start, end, start, end, …}`.
---@field tick integer The buffer's changedtick after it.

--- Draws the visible rows of the results window, the selection, the match highlights and the counter.
---@param s pseudoclaude.float.State
function M.draw(s)
  local win = s.wins.results
  if not api.nvim_win_is_valid(win) then
    return
  end
  local n = #s.matches
  local height, width
  s.sel, s.top, height, width = M.scroll(win, n, s.sel, s.top)
  local visible = {}
  for k = 0, height - 1 do
    local i = s.matches[s.top + k]
    if not i then
      break
    end
    visible[#visible + 1] = s.items[i]
  end
  local render = require("pseudoclaude.float.render")
  s.row_cache = s.row_cache or setmetatable({}, { __mode = "k" })
  local lines, rows, made = render.rows(visible, width, s.now, nil, s.row_cache)
  s.stats.rows_made = (s.stats.rows_made or 0) + made
  local hls, matched = {}, {}
  local spans = s.query ~= ""
    and s.matcher
    and s.matcher:spans({ unpack(s.matches, s.top, s.top + #rows - 1) }, s.query)
  for k, row in ipairs(rows) do
    hls[k] = row.hls
    matched[k] = spans and H.matched(s, row, s.matches[s.top + k - 1], spans[k]) or NONE
  end
  if n == 0 then
    lines = { s.count == 0 and "  no sessions" or "  no match" }
    hls = { { { 0, #lines[1], "PseudoClaudePickerEmpty" } } }
  end
  local total = s.count .. (s.full and "" or "+")
  M.put(s, lines, hls, n > 0 and s.sel - s.top or nil, ("%d/%s"):format(n, total), matched)
  if s.full and s.ahead ~= width and n > 0 then
    H.ahead(s, width, render.columns(visible))
  end
end

--- At most this many items (the first of the list) get their rows made ahead.
M.AHEAD = 2000
--- The longest main-loop step making rows ahead (ns).
local AHEAD_STEP = 0.5e6

--- Makes the rows of the list's first `M.AHEAD` items ahead, in the render cache (`s.row_cache`), a step of at most
--- half a millisecond per turn of the event loop, from the first draw of the full list on: a keystroke then finds
--- the rows of its matches made (a row takes about 4 us and 1.2 KB of the collector's work; at 1,000 sessions a
--- keystroke of picker_bench brought ~27 rows of 33 into view), and keys typed meanwhile come between two steps.
--- A row is made in the layout of the rows on the screen (`columns`, their widths) widened to its own: one that a
--- keystroke shows in another layout is made again then. Started again when the window's width changed; stops when
--- the picker closes (the cache's rows go with it).
---@param s pseudoclaude.float.State
---@param width integer
---@param columns pseudoclaude.float.Columns
function H.ahead(s, width, columns)
  s.ahead = width
  s.stats.ahead_done = nil
  local render = require("pseudoclaude.float.render")
  local cache = s.row_cache
  local i, last, one = 1, math.min(s.count, M.AHEAD), {}
  local function step()
    if s.ahead ~= width or s.row_cache ~= cache or not api.nvim_win_is_valid(s.wins.results) then
      return
    end
    local stop = vim.uv.hrtime() + AHEAD_STEP
    while i <= last and vim.uv.hrtime() < stop do
      local item = s.items[i]
      local kept = item and cache[item]
      if item and not (kept and kept.layout) then
        one[1] = item
        render.rows(one, width, s.now, columns, cache)
      end
      i = i + 1
    end
    if i <= last then
      vim.defer_fn(step, 0)
    else
      s.stats.ahead_done, s.stats.ahead_at = last, vim.uv.hrtime()
    end
  end
  vim.defer_fn(step, 0)
end

--- The scrolling both lists share (the sessions, the search's hits): `sel` clamped to the `n` rows, `top` moved so
--- that it is visible in `win`; also the window's height and width.
---@param win integer
---@param n integer
---@param sel integer
---@param top integer
---@return integer sel
---@return integer top
---@return integer height
---@return integer width
function M.scroll(win, n, sel, top)
  local height, width = api.nvim_win_get_height(win), api.nvim_win_get_width(win)
  sel = math.max(1, math.min(sel, n))
  if sel < top then
    top = sel
  elseif sel >= top + height then
    top = sel - height + 1
  end
  return sel, math.max(1, math.min(top, n - height + 1)), height, width
end

--- Puts `lines` in the results window with their highlights (`hls[k]`: `{start_col, end_col, group, priority?}` of
--- line k; `matched[k]`: the byte ranges the query matched, flat, `{start, end, start, end, …}`; both drawn by the
--- decoration provider), the selection on the 0-based line `selected` (nil: none), and `counter` at the right of the
--- prompt. A line that is the one drawn there last, with the same highlights, is left
--- as it is: a keystroke that keeps most visible rows replaces only the others, and a line whose highlights alone
--- changed is replaced by itself, so that Neovim redraws it (`s.drawn`; anything else that changed the buffer since,
--- by its changedtick, replaces it all).
---@param s pseudoclaude.float.State
---@param lines string[]
---@param hls table[][]
---@param selected integer?
---@param counter string
---@param matched integer[][]?
function M.put(s, lines, hls, selected, counter, matched)
  local win, buf = s.wins.results, s.bufs.results
  -- the API rather than `vim.bo`, whose metatable costs more than the call (this runs on every keystroke)
  local opt = { buf = buf }
  api.nvim_set_option_value("modifiable", true, opt)
  matched = matched or {}
  local drawn = s.drawn
  if drawn and drawn.buf == buf and drawn.tick == api.nvim_buf_get_changedtick(buf) then
    H.update(buf, drawn, lines, hls, matched)
  else
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  end
  api.nvim_set_option_value("modifiable", false, opt)
  s.drawn = { buf = buf, lines = lines, hls = hls, matched = matched, tick = api.nvim_buf_get_changedtick(buf) }
  H.show(buf, s.drawn)
  if selected then
    api.nvim_buf_set_extmark(
      buf,
      sel_ns,
      selected,
      0,
      { id = SELECTION_MARK, line_hl_group = "PseudoClaudePickerSelection", priority = 50 }
    )
    api.nvim_win_set_cursor(win, { selected + 1, 0 })
  else
    api.nvim_buf_del_extmark(buf, sel_ns, SELECTION_MARK)
  end
  api.nvim_buf_set_extmark(s.bufs.prompt, ns, 0, 0, {
    id = COUNTER_MARK,
    virt_text = { { counter, "PseudoClaudePickerCounter" } },
    virt_text_pos = "right_align",
  })
end

--- Replaces the lines of `drawn` that differ from `lines` (or whose highlights differ), run by run; drops the lines
--- after.
---@param buf integer
---@param drawn pseudoclaude.float.Drawn
---@param lines string[]
---@param hls table[][]
---@param matched integer[][]
function H.update(buf, drawn, lines, hls, matched)
  local old, old_hls, old_matched = drawn.lines, drawn.hls, drawn.matched
  local function same(k)
    return lines[k] == old[k] and H.same(hls[k], old_hls[k]) and H.same_ranges(matched[k], old_matched[k])
  end
  local n, k = #lines, 1
  while k <= n do
    if same(k) then
      k = k + 1
    else
      local from = k
      repeat
        k = k + 1
      until k > n or same(k)
      local to = math.min(k - 1, #old) -- the old lines replaced (past its end: added)
      api.nvim_buf_set_lines(buf, from - 1, to, false, { unpack(lines, from, k - 1) })
    end
  end
  if #old > n then
    api.nvim_buf_set_lines(buf, n, -1, false, {})
  end
end

--- Hands what `put` drew in `buf` to the decoration provider (set up with the first buffer shown).
---@param buf integer
---@param drawn pseudoclaude.float.Drawn
function H.show(buf, drawn)
  if not shown[buf] then
    api.nvim_create_autocmd("BufWipeout", {
      buffer = buf,
      once = true,
      callback = function()
        shown[buf] = nil
      end,
    })
  end
  shown[buf] = drawn
  if not H.provider then
    H.provider = true
    api.nvim_set_decoration_provider(rows_ns, { on_win = H.on_win, on_line = H.on_line })
  end
end

--- The provider's options of one mark, reused (Neovim copies them).
local mark = { ephemeral = true, end_col = 0, hl_group = 0, priority = 100, strict = false }
--- Highlight group name -> id: a mark given the id skips Neovim's lookup of the name (about 190 marks a redraw).
local hl_ids = setmetatable({}, {
  __index = function(t, name)
    local id = api.nvim_get_hl_id_by_name(name)
    rawset(t, name, id)
    return id
  end,
})

--- A window is drawn: the provider draws its lines (`on_line`) only when it shows a results buffer as `put` left
--- it (a line changed since by anyone else would get the highlights of another text).
function H.on_win(_, _, buf)
  local d = shown[buf]
  return d ~= nil and d.tick == api.nvim_buf_get_changedtick(buf)
end

--- A line of a results buffer is drawn: its highlights and matched characters, as ephemeral marks.
function H.on_line(_, _, buf, row)
  local d = shown[buf]
  if not d then
    return
  end
  local hl = d.hls[row + 1]
  for i = 1, hl and #hl or 0 do
    local h = hl[i]
    mark.end_col, mark.hl_group, mark.priority = h[2], hl_ids[h[3]], h[4] or 100
    api.nvim_buf_set_extmark(buf, rows_ns, row, h[1], mark)
  end
  local ranges = d.matched[row + 1]
  mark.hl_group, mark.priority = hl_ids.PseudoClaudePickerMatch, 200
  for i = 1, ranges and #ranges or 0, 2 do
    mark.end_col = ranges[i + 1]
    api.nvim_buf_set_extmark(buf, rows_ns, row, ranges[i], mark)
  end
end

--- Whether two lines' highlights are the same.
---@param a table[]?
---@param b table[]?
---@return boolean
function H.same(a, b)
  if a == b then
    return true
  end
  if not a or not b or #a ~= #b then
    return false
  end
  for i = 1, #a do
    local x, y = a[i], b[i]
    if x[1] ~= y[1] or x[2] ~= y[2] or x[3] ~= y[3] or x[4] ~= y[4] then
      return false
    end
  end
  return true
end

--- The byte ranges of a row that the query matched (in its title, model and branch columns), flat: `{start, end,
--- start, end, …}`, one range per run of adjacent matched characters (a typed word is mostly one run).
---@param s pseudoclaude.float.State
---@param row pseudoclaude.float.Row
---@param i integer The row's item (an index into `s.items`).
---@param spans integer[]|false The matched characters' byte spans in its haystack (`Matcher:spans`).
---@return integer[]
function H.matched(s, row, i, spans)
  if not spans or #spans == 0 then
    return NONE
  end
  local item = s.items[i]
  local title_len = #(item.title or "")
  local branch_at = title_len + #(item.model or "") + #item.id + 3
  local out = {}
  for m = 1, #spans, 2 do
    local p = spans[m]
    local col ---@type integer?
    if p < row.title_bytes then
      col = row.title_col + p
    elseif row.model_col and p > title_len and p - title_len - 1 < row.model_bytes then
      col = row.model_col + p - title_len - 1
    elseif row.branch_col and p >= branch_at and p - branch_at < row.branch_bytes then
      col = row.branch_col + p - branch_at
    end
    if col then
      local to = col + spans[m + 1] - p
      if col == out[#out] then
        out[#out] = to -- the run goes on
      else
        out[#out + 1], out[#out + 2] = col, to
      end
    end
  end
  return out
end

--- Whether two lists of ranges are the same.
---@param a integer[]?
---@param b integer[]?
---@return boolean
function H.same_ranges(a, b)
  a, b = a or NONE, b or NONE
  if a == b then
    return true
  end
  if #a ~= #b then
    return false
  end
  for i = 1, #a do
    if a[i] ~= b[i] then
      return false
    end
  end
  return true
end

return M
