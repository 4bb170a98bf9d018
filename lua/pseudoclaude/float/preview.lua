--- The picker's previewer: the highlighted session's history, read on the core's threads (a "loading" line until
--- it arrives), cached per session, drawn only while its session is highlighted; and the one function that puts a
--- preview in the preview window (`show`), which the search mode's previews go through too. It is handed the
--- picker's state and asks the controller through its methods (`s:selected()`…): it never requires float.lua.

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("pseudoclaude.picker")

--- Draws the preview soon (once the keys typed so far are handled).
---@param s pseudoclaude.float.State
function M.request_preview(s)
  if s.preview_pending then
    return
  end
  s.preview_pending = true
  vim.schedule(function()
    s.preview_pending = false
    if s:is_current() then
      s:draw_preview() -- the controller's: this module's or the search mode's
    end
  end)
end

--- Shows the selected session's history in the preview window. A session not read yet shows a "loading" line at
--- once and is read in the background; what arrives for a session the highlight has left is kept for later but not
--- drawn.
---@param s pseudoclaude.float.State
function M.draw_preview(s)
  local win = s.wins.preview
  if not win or not api.nvim_win_is_valid(win) then
    return
  end
  local item = s:selected()
  if (item and item.id) == s.preview_id then
    return
  end
  local t = vim.uv.hrtime()
  local render = require("pseudoclaude.float.render")
  local p = { lines = {}, hls = {}, folds = {} } ---@type pseudoclaude.float.Preview
  if item and item.source and item.unsupported then
    M.show_preview(s, render.external(item, s.now), item.id)
    return
  end
  if item then
    p = s.previews[item.id]
    if not p then
      -- another agent's session: its header at once (from the row), its history once read from its store
      M.show_preview(s, item.source and render.external(item, s.now) or render.loading(item, s.now), nil)
      M.load_preview(s, item)
      return
    end
  end
  M.show_preview(s, p, item and item.id)
  local stats = s.stats.previews
  stats[#stats + 1] = { id = item and item.id or "", ms = (vim.uv.hrtime() - t) / 1e6 }
end

--- Reads the preview of `item` in the background, once at a time per session.
---@param s pseudoclaude.float.State
---@param item pseudoclaude.SessionInfo
function M.load_preview(s, item)
  if s.loading == item.id then
    return
  end
  s.loading = item.id
  local asked = vim.uv.hrtime()
  local render = require("pseudoclaude.float.render")
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.preview_async(item.id, function(perr, preview)
      if s.loading == item.id then
        s.loading = nil
      end
      if not s:is_current() or perr == "superseded" then
        return
      end
      -- the render in a main-loop step of its own (this one decoded the preview)
      vim.schedule(function()
        M.preview_arrived(s, item, perr, preview, asked)
      end)
    end)
  end)
  if not ok then
    s.loading = nil
    s.previews[item.id] = render.failed(item, err)
    M.show_preview(s, s.previews[item.id], item.id)
  end
end

--- A preview read in the background is here: keep it, and draw it if its session is still highlighted.
---@param s pseudoclaude.float.State
---@param item pseudoclaude.SessionInfo
---@param perr string?
---@param preview pseudoclaude.SessionPreview?
---@param asked integer
function M.preview_arrived(s, item, perr, preview, asked)
  local render = require("pseudoclaude.float.render")
  if not s:is_current() then
    return
  end
  local win = s.wins.preview
  if not win or not api.nvim_win_is_valid(win) then
    return
  end
  local t = vim.uv.hrtime()
  local p
  if perr then
    p = render.failed(item, perr)
  elseif item.source then
    p = render.external(item, s.now, preview, api.nvim_win_get_width(win))
  else
    p = render.preview(preview, item, s.now, api.nvim_win_get_width(win))
  end
  s.previews[item.id] = p
  if s.search then
    return -- read for the list; the search mode draws its own previews
  end
  local current = s:selected()
  if current and current.id == item.id then
    M.show_preview(s, p, item.id)
    local stats = s.stats.previews
    stats[#stats + 1] = { id = item.id, ms = (vim.uv.hrtime() - t) / 1e6, wait_ms = (t - asked) / 1e6 }
  elseif current and not s.previews[current.id] then
    M.load_preview(s, current)
  end
end

--- Puts preview `p` in the preview window (`id`: the session it shows; nil while it is loading).
---@param s pseudoclaude.float.State
---@param p pseudoclaude.float.Preview
---@param id string?
function M.show_preview(s, p, id)
  M.show(s, p)
  s.preview_id = id
end

--- Puts preview `p` in the preview window: its lines, highlights and folds; the cursor on `p.cursor` (a search hit's
--- preview, the folds around it open) or on the first line.
---@param s pseudoclaude.float.State
---@param p pseudoclaude.float.Preview
function M.show(s, p)
  local win, buf = s.wins.preview, s.bufs.preview
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, p.lines)
  vim.bo[buf].modifiable = false
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, h in ipairs(p.hls) do
    local line = p.lines[h[1] + 1] or ""
    api.nvim_buf_set_extmark(buf, ns, h[1], h[2], {
      end_col = h[3] < 0 and #line or h[3],
      hl_group = h[4],
    })
  end
  local folds = p.folds or {}
  -- a keystroke mostly shows a "loading" line: no fold to drop, none to make, no Ex command to parse
  if s.preview_folded or #folds > 0 then
    api.nvim_win_call(win, function()
      pcall(vim.cmd, "normal! zE")
      for _, f in ipairs(folds) do
        pcall(vim.cmd, ("%d,%dfold"):format(f[1] + 1, f[2] + 1))
      end
    end)
  end
  s.preview_folded = #folds > 0
  if p.cursor then
    api.nvim_win_call(win, function()
      api.nvim_win_set_cursor(win, { math.min(p.cursor + 1, math.max(#p.lines, 1)), 0 })
      pcall(vim.cmd, "normal! zvzz")
    end)
  else
    api.nvim_win_set_cursor(win, { 1, 0 })
  end
end

return M
