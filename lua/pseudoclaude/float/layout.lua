--- Window layout of the session picker: a pure function from the editor's size to the configurations of its three
--- floating windows (for `nvim_open_win`), testable without opening any.
---
--- Wide editors (the picker at least 100 columns) get the prompt above the results on the left and the preview on
--- the right; narrow ones get prompt, results and preview stacked; when even that leaves no room, no preview.

local M = {}
local H = {}

---@class pseudoclaude.float.LayoutOpts
---@field cmdheight integer? Lines of the command line (`'cmdheight'`), left free below the picker. Default 1.
---@field border string|string[]? Border of each window (`:help nvim_open_win()`). Default "rounded".
---@field title string? Title of the prompt window.
---@field titles {prompt: string, results: string, preview: string}? The windows' titles (default: `M.titles()`).

---@class pseudoclaude.float.Layout
---@field orientation "horizontal"|"vertical"
---@field prompt vim.api.keyset.win_config
---@field results vim.api.keyset.win_config
---@field preview vim.api.keyset.win_config? nil when there is no room for it

--- Share of the editor the picker covers.
M.WIDTH_RATIO = 0.85
M.HEIGHT_RATIO = 0.8
--- Picker widths from which the preview goes beside the results.
M.HORIZONTAL_MIN_WIDTH = 100
--- Share of the picker's width that the results take when the preview is beside them.
M.RESULTS_SHARE = 0.55
--- Least height of the preview's text area worth showing.
M.PREVIEW_MIN_HEIGHT = 3

--- The characters of Neovim's named borders (`:help nvim_open_win()`), given to it one by one with our group: a
--- window's 'winhighlight' costs every redraw of the screen (Neovim switches to the window's highlight namespace and
--- back, and recomputes every window's highlights: ~0.15 ms of a picker keystroke, picker_bench), the border's own
--- highlight nothing.
local BORDERS = {
  rounded = { "╭", "─", "╮", "│", "╯", "─", "╰", "│" },
  single = { "┌", "─", "┐", "│", "┘", "─", "└", "│" },
  double = { "╔", "═", "╗", "║", "╝", "═", "╚", "║" },
  bold = { "┏", "━", "┓", "┃", "┛", "━", "┗", "┃" },
  solid = { " ", " ", " ", " ", " ", " ", " ", " " },
}

--- Window configurations for an editor of `columns` x `lines` cells.
---@param columns integer `'columns'`
---@param lines integer `'lines'`
---@param opts pseudoclaude.float.LayoutOpts?
---@return pseudoclaude.float.Layout
function M.compute(columns, lines, opts)
  opts = opts or {}
  local border = opts.border or "rounded"
  local b = border == "none" and 0 or 1
  local avail_h = math.max(lines - (opts.cmdheight or 1) - 1, 1 + 2 * b)
  columns = math.max(columns, 1 + 2 * b)

  local width = H.clamp(math.floor(columns * M.WIDTH_RATIO), math.min(columns, 40), columns)
  local height = H.clamp(math.floor(avail_h * M.HEIGHT_RATIO), math.min(avail_h, 12), avail_h)
  local row = math.floor((avail_h - height) / 2)
  local col = math.floor((columns - width) / 2)

  local prompt_h = 1 + 2 * b -- outer height of the prompt window
  local out = {} ---@type pseudoclaude.float.Layout

  if width >= M.HORIZONTAL_MIN_WIDTH and height >= prompt_h + 1 + 2 * b then
    out.orientation = "horizontal"
    local left = math.floor(width * M.RESULTS_SHARE)
    out.prompt = H.win(row, col, left - 2 * b, 1)
    out.results = H.win(row + prompt_h, col, left - 2 * b, height - prompt_h - 2 * b)
    out.preview = H.win(row, col + left, width - left - 2 * b, height - 2 * b)
  else
    out.orientation = "vertical"
    local inner_w = math.max(width - 2 * b, 1)
    local rest = height - prompt_h -- outer height left for results and preview
    local results_h = math.max(math.floor(rest * 0.45), 1 + 2 * b)
    local preview_h = rest - results_h
    if preview_h - 2 * b < M.PREVIEW_MIN_HEIGHT then
      results_h, preview_h = rest, 0
    end
    out.prompt = H.win(row, col, inner_w, 1)
    out.results = H.win(row + prompt_h, col, inner_w, math.max(results_h - 2 * b, 1))
    if preview_h > 0 then
      out.preview = H.win(row + prompt_h + results_h, col, inner_w, preview_h - 2 * b)
    end
  end

  local given = opts.titles or M.titles(false, false)
  local titles = { prompt = opts.title or given.prompt, results = given.results, preview = given.preview }
  local chars = M.border(border)
  for name, cfg in pairs(out) do
    if type(cfg) == "table" then
      cfg.border = chars
      if b > 0 then
        cfg.title = M.title(titles[name])
        cfg.title_pos = "center"
      end
      -- only the prompt takes the cursor; the others cannot be entered with the mouse or <C-w>w
      cfg.focusable = name == "prompt"
    end
  end
  return out
end

--- `border` (a name or a list of characters, `:help nvim_open_win()`) with each character drawn in
--- PseudoClaudePickerBorder (a character given with its own group keeps it); a name Neovim knows and we do not (a
--- newer style, "shadow") is returned as it is, drawn in FloatBorder.
---@param border string|table
---@return string|table
function M.border(border)
  local chars = type(border) == "string" and BORDERS[border] or border
  if type(chars) ~= "table" then
    return border
  end
  local out = {}
  for i, c in ipairs(chars) do
    out[i] = type(c) == "string" and { c, "PseudoClaudePickerBorder" } or c
  end
  return out
end

--- The windows' titles in a mode (the list or the search inside messages), saying whether the other agents'
--- sessions are in (`<C-o>`).
---@param search boolean
---@param external boolean
---@return {prompt: string, results: string, preview: string}
function M.titles(search, external)
  if search then
    local prompt = external and " Search messages (other agents too) " or " Search messages "
    return { prompt = prompt, results = " Hits ", preview = " Preview " }
  end
  local results = external and " Sessions + other agents " or " Sessions "
  return { prompt = " Resume session ", results = results, preview = " Preview " }
end

--- A window title drawn in PseudoClaudePickerTitle.
---@param text string
---@return [string, string][]
function M.title(text)
  return { { text, "PseudoClaudePickerTitle" } }
end

---@param row integer
---@param col integer
---@param width integer
---@param height integer
---@return vim.api.keyset.win_config
function H.win(row, col, width, height)
  return {
    relative = "editor",
    row = row,
    col = col,
    width = math.max(width, 1),
    height = math.max(height, 1),
    style = "minimal",
    zindex = 50,
  }
end

---@param v number
---@param lo number
---@param hi number
---@return number
function H.clamp(v, lo, hi)
  return math.max(lo, math.min(v, hi))
end

return M
