--- The picker's results window: the visible rows (text from float/render.lua), the highlight, the characters the
--- query matched and the counter in the prompt; the search mode's hit rows go through its `scroll` and `put` too. Only what is visible is drawn, so a keystroke costs one screenful.

local M = {}
local H = {}

local api = vim.api
local ns = api.nvim_create_namespace("pseudoclaude.picker")
--- The characters the query matched (all redrawn at each keystroke) and the selection (one mark, moved): apart from
--- the rows' own highlights, which stay on the lines a keystroke leaves as they were.
local match_ns = api.nvim_create_namespace("pseudoclaude.picker.match")
local sel_ns = api.nvim_create_namespace("pseudoclaude.picker.selection")
--- The counter's extmark in the prompt (float.lua owns the prompt's other mark).
local COUNTER_MARK = 1
local SELECTION_MARK = 1

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
  local lines, rows = render.rows(visible, width, s.now, nil, s.row_cache)
  local hls = {}
  for k, row in ipairs(rows) do
    hls[k] = row.hls
  end
  if n == 0 then
    lines = { s.count == 0 and "  no sessions" or "  no match" }
    hls = { { { 0, #lines[1], "PseudoClaudePickerEmpty" } } }
  end
  local total = s.count .. (s.full and "" or "+")
  M.put(s, lines, hls, n > 0 and s.sel - s.top or nil, ("%d/%s"):format(n, total))
  if s.query ~= "" and s.matcher then
    H.draw_match_highlights(s, s.bufs.results, rows)
  end
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
--- line k), the selection on the 0-based line `selected` (nil: none), and `counter` at the right of the prompt. A
--- line that is the one drawn there last, with the same highlights, is left as it is (its marks too): a keystroke
--- that keeps most visible rows redraws only the others (`s.drawn`; anything else that changed the buffer since, by
--- its changedtick, redraws it all).
---@param s pseudoclaude.float.State
---@param lines string[]
---@param hls table[][]
---@param selected integer?
---@param counter string
function M.put(s, lines, hls, selected, counter)
  local win, buf = s.wins.results, s.bufs.results
  -- the API rather than `vim.bo`, whose metatable costs more than the call (this runs on every keystroke)
  local opt = { buf = buf }
  api.nvim_set_option_value("modifiable", true, opt)
  api.nvim_buf_clear_namespace(buf, match_ns, 0, -1)
  local drawn = s.drawn
  if drawn and drawn.buf == buf and drawn.tick == api.nvim_buf_get_changedtick(buf) then
    H.update(buf, drawn, lines, hls)
  else
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    H.marks(buf, hls, 1, #lines)
  end
  api.nvim_set_option_value("modifiable", false, opt)
  s.drawn = { buf = buf, lines = lines, hls = hls, tick = api.nvim_buf_get_changedtick(buf) }
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

--- Replaces the lines of `drawn` that differ from `lines` (with their highlights), run by run; drops the lines after.
---@param buf integer
---@param drawn {lines: string[], hls: table[][]}
---@param lines string[]
---@param hls table[][]
function H.update(buf, drawn, lines, hls)
  local old, old_hls = drawn.lines, drawn.hls
  local n, k = #lines, 1
  while k <= n do
    if lines[k] == old[k] and H.same(hls[k], old_hls[k]) then
      k = k + 1
    else
      local from = k
      repeat
        k = k + 1
      until k > n or (lines[k] == old[k] and H.same(hls[k], old_hls[k]))
      local to = math.min(k - 1, #old) -- the old lines replaced (past its end: added)
      api.nvim_buf_clear_namespace(buf, ns, from - 1, to)
      api.nvim_buf_set_lines(buf, from - 1, to, false, { unpack(lines, from, k - 1) })
      H.marks(buf, hls, from, k - 1)
    end
  end
  if #old > n then
    api.nvim_buf_clear_namespace(buf, ns, n, -1)
    api.nvim_buf_set_lines(buf, n, -1, false, {})
  end
end

--- The highlights of lines `from`..`to` (1-based).
---@param buf integer
---@param hls table[][]
---@param from integer
---@param to integer
function H.marks(buf, hls, from, to)
  for k = from, to do
    for _, h in ipairs(hls[k] or {}) do
      api.nvim_buf_set_extmark(buf, ns, k - 1, h[1], { end_col = h[2], hl_group = h[3], priority = h[4] or 100 })
    end
  end
end

--- Whether two lines' highlights are the same.
---@param a table[]?
---@param b table[]?
---@return boolean
function H.same(a, b)
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

--- Highlights the characters the query matched, in the title and model columns of the visible rows.
---@param s pseudoclaude.float.State
---@param buf integer
---@param rows pseudoclaude.float.Row[]
function H.draw_match_highlights(s, buf, rows)
  for k, row in ipairs(rows) do
    local i = s.matches[s.top + k - 1]
    local positions = s.matcher:positions(i, s.query)
    local hay = s.matcher.haystacks[i]
    local item = s.items[i]
    local title_len = #(item.title or "")
    local branch_at = title_len + #(item.model or "") + #item.id + 3
    -- one mark per run of adjacent matched characters (a typed word is mostly one run): the keystroke's cost
    local from, to = nil, nil ---@type integer?, integer?
    for _, p in ipairs(positions or {}) do
      local col ---@type integer?
      if p < row.title_bytes then
        col = row.title_col + p
      elseif row.model_col and p > title_len and p - title_len - 1 < row.model_bytes then
        col = row.model_col + p - title_len - 1
      elseif row.branch_col and p >= branch_at and p - branch_at < row.branch_bytes then
        col = row.branch_col + p - branch_at
      end
      if col then
        local len = H.char_len(hay, p + 1)
        if col ~= to then
          H.match_mark(buf, k - 1, from, to)
          from = col
        end
        to = col + len
      end
    end
    H.match_mark(buf, k - 1, from, to)
  end
end

--- Highlights columns `from`..`to` (end excluded) of 0-based line `line` as matched; nothing when `from` is nil.
---@param buf integer
---@param line integer
---@param from integer?
---@param to integer?
function H.match_mark(buf, line, from, to)
  if from then
    api.nvim_buf_set_extmark(
      buf,
      match_ns,
      line,
      from,
      { end_col = to, hl_group = "PseudoClaudePickerMatch", priority = 200 }
    )
  end
end

--- Bytes of the UTF-8 character starting at byte `i` of `s`.
---@param s string
---@param i integer
---@return integer
function H.char_len(s, i)
  local b = s:byte(i) or 0
  return b >= 0xF0 and 4 or b >= 0xE0 and 3 or b >= 0xC0 and 2 or 1
end

return M
