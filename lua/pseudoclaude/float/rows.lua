--- The picker's results window: the visible rows (text from float/render.lua), the highlight, the characters the
--- query matched and the counter in the prompt; the search mode's hit rows go through its `scroll` and `put` too. Only what is visible is drawn, so a keystroke costs one screenful.

local M = {}
local H = {}

local api = vim.api
local ns = api.nvim_create_namespace("pseudoclaude.picker")
--- The counter's extmark in the prompt (float.lua owns the prompt's other mark).
local COUNTER_MARK = 1

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
  local lines, rows = render.rows(visible, width, s.now)
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
--- line k), the selection on the 0-based line `selected` (nil: none), and `counter` at the right of the prompt.
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
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  api.nvim_set_option_value("modifiable", false, opt)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for k, row in ipairs(hls) do
    for _, h in ipairs(row) do
      api.nvim_buf_set_extmark(buf, ns, k - 1, h[1], { end_col = h[2], hl_group = h[3], priority = h[4] or 100 })
    end
  end
  if selected then
    api.nvim_buf_set_extmark(buf, ns, selected, 0, { line_hl_group = "PseudoClaudePickerSelection", priority = 50 })
    api.nvim_win_set_cursor(win, { selected + 1, 0 })
  end
  api.nvim_buf_set_extmark(s.bufs.prompt, ns, 0, 0, {
    id = COUNTER_MARK,
    virt_text = { { counter, "PseudoClaudePickerCounter" } },
    virt_text_pos = "right_align",
  })
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
      ns,
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
