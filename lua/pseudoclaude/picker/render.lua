--- Text of the session picker: result rows and the preview of a session's history. Pure functions of their
--- arguments (no window, no buffer), so they can be tested and measured alone.

local M = {}
local H = {}

--- At most this many preview lines; a longer history shows its header and its end.
M.PREVIEW_MAX_LINES = 2000
--- At most this many lines of one message in the preview.
M.MESSAGE_MAX_LINES = 200
--- Width of the age column ("12mo ago").
M.AGE_WIDTH = 8
--- Widest model column.
M.MODEL_MAX_WIDTH = 16
--- Marker of a session open in another editor (first two cells of its row).
M.HELD_MARKER = "! "

---@alias pseudoclaude.picker.Highlight [integer, integer, string] start column, end column (bytes, 0-based, end exclusive), group

---@class pseudoclaude.picker.Row
---@field hls pseudoclaude.picker.Highlight[]
---@field title_col integer Byte column where the title starts.
---@field title_bytes integer Bytes of the title shown (a truncated title shows fewer than it has).
---@field model_col integer? Byte column where the model starts (nil when the column is not shown).
---@field model_bytes integer

--- Seconds as a short relative age: "now", "5m ago", "3h ago", "2d ago", "3mo ago", "1y ago".
---@param seconds number
---@return string
function M.age(seconds)
  seconds = math.max(seconds, 0)
  if seconds < 60 then
    return "now"
  elseif seconds < 3600 then
    return ("%dm ago"):format(seconds / 60)
  elseif seconds < 86400 then
    return ("%dh ago"):format(seconds / 3600)
  elseif seconds < 86400 * 30 then
    return ("%dd ago"):format(seconds / 86400)
  elseif seconds < 86400 * 365 then
    return ("%dmo ago"):format(seconds / (86400 * 30))
  end
  return ("%dy ago"):format(seconds / (86400 * 365))
end

--- Last activity of a session, unix seconds: the newer of its log's modification and its newest message.
---@param item pseudoclaude.SessionInfo
---@return integer
function M.activity(item)
  return math.max(item.modified or 0, item.last_message or 0)
end

--- "1 msg", "12 msgs".
---@param n integer
---@return string
function M.count(n)
  return n == 1 and "1 msg" or (n .. " msgs")
end

--- The title shown for a session.
---@param item {title: string?}
---@return string
function M.title(item)
  local t = item.title
  return (t and t ~= "") and t or "(untitled)"
end

--- One line per item, fitting `width` cells: marker, title, age, message count, model. The columns are aligned
--- over the items given (the visible ones).
---@param items pseudoclaude.SessionInfo[]
---@param width integer
---@param now integer unix seconds
---@return string[] lines
---@return pseudoclaude.picker.Row[] rows
function M.rows(items, width, now)
  local model_w, count_w = 0, 0
  local counts = {}
  for k, item in ipairs(items) do
    counts[k] = M.count(item.messages or 0)
    count_w = math.max(count_w, #counts[k])
    model_w = math.max(model_w, H.width(item.model or ""))
  end
  model_w = math.min(model_w, M.MODEL_MAX_WIDTH, math.floor(width / 4))
  local marker_w = #M.HELD_MARKER
  -- marker, title, 2 spaces, age, 2 spaces, count, 2 spaces, model
  local title_w = width - marker_w - 2 - M.AGE_WIDTH - 2 - count_w - (model_w > 0 and 2 + model_w or 0)
  if title_w < 12 then
    model_w = 0
    title_w = width - marker_w - 2 - M.AGE_WIDTH - 2 - count_w
  end
  local show_count = title_w >= 8
  if not show_count then
    title_w = width - marker_w - 2 - M.AGE_WIDTH
  end
  title_w = math.max(title_w, 1)

  local lines, rows = {}, {}
  for k, item in ipairs(items) do
    local marker = item.held_by and M.HELD_MARKER or "  "
    local title, title_bytes = H.fit(M.title(item), title_w)
    local age = M.age(now - M.activity(item))
    local parts = { marker, title, "  ", (" "):rep(M.AGE_WIDTH - #age), age }
    local col = #marker + #title + 2
    local row = { title_col = #marker, title_bytes = item.title ~= "" and title_bytes or 0, model_bytes = 0 }
    local hls = {}
    if item.held_by then
      hls[#hls + 1] = { 0, #marker, "PseudoClaudePickerHeld" }
    end
    hls[#hls + 1] = { col, col + M.AGE_WIDTH, "PseudoClaudePickerAge" }
    col = col + M.AGE_WIDTH
    if show_count then
      local c = counts[k]
      parts[#parts + 1] = "  " .. (" "):rep(count_w - #c) .. c
      hls[#hls + 1] = { col + 2, col + 2 + count_w, "PseudoClaudePickerCount" }
      col = col + 2 + count_w
    end
    if model_w > 0 and (item.model or "") ~= "" then
      local model, model_bytes = H.fit(item.model, model_w, true)
      parts[#parts + 1] = "  " .. model
      row.model_col, row.model_bytes = col + 2, model_bytes
      hls[#hls + 1] = { col + 2, col + 2 + #model, "PseudoClaudePickerModel" }
    end
    row.hls = hls
    lines[k] = table.concat(parts)
    rows[k] = row
  end
  return lines, rows
end

---@class pseudoclaude.picker.Preview
---@field lines string[]
---@field hls [integer, integer, integer, string][] line (0-based), start column, end column (-1: end of line), group

--- The history a resume restores, readable: a header (title; id, model, count, age; a notice when the session is
--- open elsewhere or its log needed repairs), then the history exactly as the agent buffer renders it
--- (`pseudoclaude.transcript`): speakers' headers, tool calls and results on one line each.
---@param loaded pseudoclaude.LoadedSession
---@param item pseudoclaude.SessionInfo
---@param now integer unix seconds
---@param width integer? columns available (one-line summaries are cut to fit)
---@return pseudoclaude.picker.Preview
function M.preview(loaded, item, now, width)
  width = math.max((width or 80) - 4, 20)
  local lines, hls = {}, {}
  local function add(line, group, col_start, col_end)
    lines[#lines + 1] = line
    if group then
      hls[#hls + 1] = { #lines - 1, col_start or 0, col_end or -1, group }
    end
  end

  add(M.title(loaded), "PseudoClaudePickerPreviewTitle")
  local meta = { loaded.id or item.id }
  if (loaded.model or "") ~= "" then
    meta[#meta + 1] = loaded.model
  end
  local n = #(loaded.messages or {})
  meta[#meta + 1] = n == 1 and "1 message" or (n .. " messages")
  meta[#meta + 1] = M.age(now - M.activity(item))
  add(table.concat(meta, " · "), "PseudoClaudePickerPreviewMeta")
  if item.held_by then
    add(("! open in another editor (%s): it cannot be resumed here"):format(item.held_by), "PseudoClaudePickerHeld")
  end
  if (loaded.damage_report or "") ~= "" then
    add("⚠ repaired on load: " .. loaded.damage_report, "PseudoClaudePickerDamage")
  end
  local header = #lines

  -- The history exactly as the agent buffer will show it.
  local body, marks = require("pseudoclaude.transcript").render(loaded.messages or {}, {
    width = width,
    max_text_lines = M.MESSAGE_MAX_LINES,
  })
  local mark_at = {}
  for _, mark in ipairs(marks) do
    mark_at[mark.line + 1] = H.PREVIEW_GROUPS[mark.kind]
  end
  if #body > 0 then
    add("")
  end
  for i, line in ipairs(body) do
    add(line, mark_at[i])
  end
  if n == 0 then
    add("")
    add("(no messages)", "PseudoClaudePickerPreviewMeta")
  end

  if #lines > M.PREVIEW_MAX_LINES then
    local keep = M.PREVIEW_MAX_LINES - header - 1
    local cut = #lines - header - keep
    local out = {}
    for i = 1, header do
      out[i] = lines[i]
    end
    out[header + 1] = ("… %d earlier lines not shown"):format(cut)
    for i = #lines - keep + 1, #lines do
      out[#out + 1] = lines[i]
    end
    local out_hls = {}
    for _, h in ipairs(hls) do
      if h[1] < header then
        out_hls[#out_hls + 1] = h
      elseif h[1] >= header + cut then
        out_hls[#out_hls + 1] = { h[1] - cut + 1, h[2], h[3], h[4] }
      end
    end
    out_hls[#out_hls + 1] = { header, 0, -1, "PseudoClaudePickerPreviewMeta" }
    lines, hls = out, out_hls
  end
  return { lines = lines, hls = hls }
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- Preview highlight group of each kind of transcript line.
H.PREVIEW_GROUPS = {
  you = "PseudoClaudePickerPreviewUser",
  agent = "PseudoClaudePickerPreviewAgent",
  reminder = "PseudoClaudePickerDamage",
  call = "PseudoClaudePickerPreviewTool",
  result = "PseudoClaudePickerPreviewResult",
  error = "PseudoClaudePickerPreviewError",
  more = "PseudoClaudePickerPreviewMeta",
}

--- Display width of `s`.
---@param s string
---@return integer
function H.width(s)
  if not s:find("[\128-\255]") then
    return #s
  end
  return vim.api.nvim_strwidth(s)
end

--- `s` fitted to exactly `w` cells: padded with spaces, or cut with "…". Also returns how many bytes of `s` are
--- shown. `no_pad` leaves a short string as is.
---@param s string
---@param w integer
---@param no_pad boolean?
---@return string fitted
---@return integer shown_bytes
function H.fit(s, w, no_pad)
  local sw = H.width(s)
  if sw <= w then
    return no_pad and s or (s .. (" "):rep(w - sw)), #s
  end
  -- cut to w - 1 cells, then "…"
  local out, used, bytes = {}, 0, 0
  for ch in s:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    local cw = #ch == 1 and 1 or vim.api.nvim_strwidth(ch)
    if used + cw > w - 1 then
      break
    end
    out[#out + 1] = ch
    used = used + cw
    bytes = bytes + #ch
  end
  return table.concat(out) .. "…" .. (" "):rep(w - 1 - used), bytes
end

M._H = H

return M
