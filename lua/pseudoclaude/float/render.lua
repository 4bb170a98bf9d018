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
--- Widest git branch column.
M.BRANCH_MAX_WIDTH = 20
--- Marker of a session open in another editor (first two cells of its row).
M.HELD_MARKER = "! "
--- Marker of a session whose log needed repairs to load (unreadable, repaired or torn lines); the preview says
--- what. A session open elsewhere shows `HELD_MARKER` instead.
M.DAMAGED_MARKER = "? "
--- A session live in a chat of this editor (its title begins with the chat's state).
M.LIVE_MARKER = "● "
--- Marker of a pinned session (`<C-t>`); a held or damaged one shows its own marker instead.
M.PINNED_MARKER = "* "
--- Widest workspace name in front of a title (`:PseudoResume all`).
M.WORKSPACE_MAX_WIDTH = 16
--- Title of a damaged session with nothing to restore (a log of garbage).
M.UNREADABLE_TITLE = "(unreadable session)"

---@alias pseudoclaude.float.Highlight [integer, integer, string] start column, end column (bytes, 0-based, end exclusive), group

---@class pseudoclaude.float.Row
---@field hls pseudoclaude.float.Highlight[]
---@field title_col integer Byte column where the title starts.
---@field title_bytes integer Bytes of the title shown (a truncated title shows fewer than it has).
---@field model_col integer? Byte column where the model starts (nil when the column is not shown).
---@field model_bytes integer
---@field branch_col integer? Byte column where the git branch starts (nil when none is shown).
---@field branch_bytes integer

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

--- When a session last spoke, unix seconds: its newest message's time; the log's modification time only when no
--- message has one (a copied folder gets new modification times, its messages keep theirs).
---@param item {last_message: integer?, modified: integer?}
---@return integer
function M.activity(item)
  local last = item.last_message or 0
  if last > 0 then
    return last
  end
  return item.modified or 0
end

--- "1 msg", "12 msgs".
---@param n integer
---@return string
function M.count(n)
  return n == 1 and "1 msg" or (n .. " msgs")
end

--- The title shown for a session.
---@param item {title: string?, damaged: boolean?, messages: integer?, partial: boolean?, unsupported: string?}
---@return string
function M.title(item)
  local t = item.title
  if t and t ~= "" then
    return t
  end
  if item.partial then
    return "(reading…)"
  end
  if item.unsupported then
    return "(not importable)"
  end
  return (item.damaged and (item.messages or 0) == 0) and M.UNREADABLE_TITLE or "(untitled)"
end

--- The count column of a row: "12 msgs", and for a damaged log its unreadable lines ("12 msgs, 3 bad").
---@param item pseudoclaude.SessionInfo
---@return string
function H.row_count(item)
  local c = M.count(item.messages or 0)
  local bad = item.bad_lines or 0
  return bad > 0 and ("%s, %d bad"):format(c, bad) or c
end

--- The sessions live in a chat of this editor, by id: `{chat, state}` (none while no chat was opened: the chats'
--- module is not loaded for this).
---@return table<string, {chat: integer, state: string}>
function M.live()
  local chat = package.loaded["pseudoclaude.chat"]
  return chat and type(chat.live) == "function" and chat.live() or {}
end

--- One line per item, fitting `width` cells: marker (`HELD_MARKER`, `DAMAGED_MARKER`), title, age, message count
--- (with the unreadable lines of a damaged log), cost (when known), git branch, model. The columns are aligned
--- over the items given (the visible ones); on a narrow window the model goes first, then the branch, then the cost.
--- `columns` (from `columns()` over a longer list) widens the columns to those widths, so that rows drawn one at a
--- time (a native picker's rows) align with each other.
--- `cache` (a table with weak keys that the caller keeps: the float's results) keeps each item's texts and its row
--- for the layout it was made in, so a keystroke that shows the same items in the same layout, in any order, makes
--- none again; the rows it returns are then shared: not to be changed.
---@param items pseudoclaude.SessionInfo[]
---@param width integer
---@param now integer unix seconds
---@param columns pseudoclaude.float.Columns?
---@param cache table<table, table>?
---@return string[] lines
---@return pseudoclaude.float.Row[] rows
---@return integer made How many rows were made (not found in `cache`).
function M.rows(items, width, now, columns, cache)
  local live = M.live()
  local counts, costs = {}, {}
  local widths = H.columns(items, counts, costs, cache)
  if columns then
    for k, w in pairs(columns) do
      widths[k] = math.max(widths[k], w)
    end
  end
  local model_w, count_w, cost_w, branch_w = widths.model, widths.count, widths.cost, widths.branch
  model_w = math.min(model_w, M.MODEL_MAX_WIDTH, math.floor(width / 4))
  branch_w = math.min(branch_w, M.BRANCH_MAX_WIDTH, math.floor(width / 5))
  local marker_w = #M.HELD_MARKER
  local function extra(w)
    return w > 0 and 2 + w or 0
  end
  -- marker, title, 2 spaces, age, 2 spaces, count, then each optional column after 2 spaces
  local function title_width()
    return width - marker_w - 2 - M.AGE_WIDTH - 2 - count_w - extra(cost_w) - extra(branch_w) - extra(model_w)
  end
  local title_w = title_width()
  if title_w < 12 then
    model_w = 0
    title_w = title_width()
  end
  if title_w < 12 then
    branch_w = 0
    title_w = title_width()
  end
  if title_w < 12 then
    cost_w = 0
    title_w = title_width()
  end
  local show_count = title_w >= 8
  if not show_count then
    cost_w, branch_w = 0, 0
    title_w = width - marker_w - 2 - M.AGE_WIDTH
  end
  title_w = math.max(title_w, 1)

  local lines, rows = {}, {}
  local layout = cache
    and table.concat({ width, now, title_w, model_w, count_w, cost_w, branch_w, tostring(show_count) }, ",")
  -- a keystroke renders the rows it brings into view: each is built with as few tables and strings as it takes
  -- (the collector's work at a keystroke grows with what it allocates), its highlights shared between rows
  local hl = H.highlighter(cache)
  local made = 0
  for k, item in ipairs(items) do
    local chat = live[item.id]
    local kept = cache and cache[item]
    if kept and kept.layout == layout and kept.held == (item.held_by or false) and not chat then
      lines[k], rows[k] = kept.line, kept.row
      goto next
    end
    made = made + 1
    local marker = chat and M.LIVE_MARKER
      or item.held_by and M.HELD_MARKER
      or (item.damaged or item.source and (item.unsupported or item.notes)) and M.DAMAGED_MARKER
      or item.pinned and M.PINNED_MARKER
      or "  "
    local place = M.workspace_name(item)
    if place ~= "" then
      place = M.fit(place, math.min(H.width(place), M.WORKSPACE_MAX_WIDTH, math.floor(title_w / 3)), true) .. ": "
    elseif item.source then
      place = "[" .. M.source_name(item) .. "] "
    end
    local shown = chat and ("[%s] %s"):format(chat.state, M.title(item)) or M.title(item)
    local title, title_bytes = M.fit(shown, math.max(title_w - H.width(place), 1))
    local age = M.age(now - M.activity(item))
    local title_col = #marker + #place
    local col = title_col + #title + 2
    local hls = {}
    if chat then
      hls[#hls + 1] = hl(0, #marker, "PseudoClaudePickerLive")
    elseif item.held_by then
      hls[#hls + 1] = hl(0, #marker, "PseudoClaudePickerHeld")
    elseif item.damaged or item.source and (item.unsupported or item.notes) then
      hls[#hls + 1] = hl(0, #marker, "PseudoClaudePickerDamage")
    elseif item.pinned then
      hls[#hls + 1] = hl(0, #marker, "PseudoClaudePickerPinned")
    end
    if item.source then
      hls[#hls + 1] = hl(#marker, title_col - 1, "PseudoClaudePickerSource")
    elseif place ~= "" then
      hls[#hls + 1] = hl(#marker, title_col - 2, "PseudoClaudePickerWorkspace")
    end
    hls[#hls + 1] = hl(col, col + M.AGE_WIDTH, "PseudoClaudePickerAge")
    col = col + M.AGE_WIDTH
    local count_part, cost_part, branch_part, model_part = "", "", "", ""
    local branch_col, branch_bytes, model_col, model_bytes = nil, 0, nil, 0 ---@type integer?, integer, integer?, integer
    if show_count then
      local c = counts[k]
      count_part = "  " .. (" "):rep(count_w - #c) .. c
      hls[#hls + 1] = hl(col + 2, col + 2 + count_w, "PseudoClaudePickerCount")
      col = col + 2 + count_w
    end
    if cost_w > 0 then
      local c = costs[k]
      cost_part = "  " .. (" "):rep(cost_w - #c) .. c
      if c ~= "" then
        hls[#hls + 1] = hl(col + 2 + cost_w - #c, col + 2 + cost_w, "PseudoClaudePickerCost")
      end
      col = col + 2 + cost_w
    end
    if branch_w > 0 then
      local branch, shown_bytes = M.fit(H.branch(item), branch_w)
      branch_part = "  " .. branch
      if item.branch then
        branch_col, branch_bytes = col + 2, shown_bytes
        hls[#hls + 1] = hl(col + 2, col + 2 + shown_bytes, "PseudoClaudePickerBranch")
      end
      col = col + 2 + #branch
    end
    if model_w > 0 and (item.model or "") ~= "" then
      local model, shown_bytes = M.fit(item.model, model_w, true)
      model_part = "  " .. model
      model_col, model_bytes = col + 2, shown_bytes
      hls[#hls + 1] = hl(col + 2, col + 2 + #model, "PseudoClaudePickerModel")
    end
    lines[k] = marker
      .. place
      .. title
      .. "  "
      .. (" "):rep(M.AGE_WIDTH - #age)
      .. age
      .. count_part
      .. cost_part
      .. branch_part
      .. model_part
    rows[k] = {
      hls = hls,
      title_col = title_col,
      title_bytes = item.title ~= "" and title_bytes or 0,
      model_col = model_col,
      model_bytes = model_bytes,
      branch_col = branch_col,
      branch_bytes = branch_bytes,
    }
    if kept and not chat then
      kept.layout, kept.held, kept.line, kept.row = layout, item.held_by or false, lines[k], rows[k]
    end
    ::next::
  end
  return lines, rows, made
end

--- A function making a highlight `{start_col, end_col, group}`: with `cache`, the same table for the same three
--- values (kept in `cache`, shared by every row made with it: rows are never changed), else a new one.
---@param cache table?
---@return fun(from: integer, to: integer, group: string): pseudoclaude.float.Highlight
function H.highlighter(cache)
  if not cache then
    return function(from, to, group)
      return { from, to, group }
    end
  end
  local memo = cache[H.MEMO]
  if not memo then
    memo = {}
    cache[H.MEMO] = memo
  end
  return function(from, to, group)
    local by_group = memo[group]
    if not by_group then
      by_group = {}
      memo[group] = by_group
    end
    local key = from * 65536 + to
    local h = by_group[key]
    if not h then
      h = { from, to, group }
      by_group[key] = h
    end
    return h
  end
end

--- The key of the shared highlights in a row cache (a table: the cache's keys are weak, this one lives with the module).
H.MEMO = {}

---@class pseudoclaude.float.Columns Widths (cells) of a row's optional columns over some items.
---@field model integer
---@field count integer
---@field cost integer
---@field branch integer

--- The widths `rows()` gives its columns over `items` (for rows of a longer list drawn a few at a time).
---@param items pseudoclaude.SessionInfo[]
---@return pseudoclaude.float.Columns
function M.columns(items)
  return H.columns(items, {}, {})
end

--- The columns' widths over `items`; fills `counts` and `costs` with each item's text of those columns (kept in
--- `cache[item]`, made there when missing).
---@param items pseudoclaude.SessionInfo[]
---@param counts string[]
---@param costs string[]
---@param cache table<table, table>?
---@return pseudoclaude.float.Columns
function H.columns(items, counts, costs, cache)
  local w = { model = 0, count = 0, cost = 0, branch = 0 }
  for k, item in ipairs(items) do
    local c = cache and cache[item] or H.texts(item)
    if cache and not cache[item] then
      cache[item] = c
    end
    counts[k], costs[k] = c.count, c.cost
    w.count = math.max(w.count, #c.count)
    w.model = math.max(w.model, c.model_w)
    w.cost = math.max(w.cost, #c.cost)
    w.branch = math.max(w.branch, c.branch_w)
  end
  return w
end

--- An item's texts of the count and cost columns and the widths of its model and branch.
---@param item pseudoclaude.SessionInfo
---@return {count: string, cost: string, model_w: integer, branch_w: integer}
function H.texts(item)
  return {
    count = item.partial and "… msgs" or H.row_count(item),
    cost = type(item.cost) == "number" and require("pseudoclaude.usage").cost(item.cost) or "",
    model_w = H.width(item.model or ""),
    branch_w = H.width(H.branch(item)),
    -- the row made last (`rows()`), in its layout and for its `held_by` (false: none); named here to size the table
    layout = false,
    held = false,
    line = false,
    row = false,
  }
end

--- The name of a `:PseudoResume all` row's workspace: the last part of its path ("" for a row of this workspace's
--- own list, which has no `workspace`).
---@param item pseudoclaude.SessionInfo
---@return string
function M.workspace_name(item)
  local ws = item.workspace
  return type(ws) == "string" and vim.fs.basename(ws) or ""
end

--- The short name of the agent another agent's row comes from: its `agent` ("claude", "codex", "gemini", "qwen",
--- "opencode", "pi").
---@param item {source: string?, agent: string?}
---@return string
function M.source_name(item)
  return item.agent or (item.source == "claude-code" and "claude" or (item.source or ""))
end

local TOOLS = {
  ["claude-code"] = "Claude Code",
  codex = "Codex",
  ["gemini-cli"] = "Gemini CLI",
  ["qwen-code"] = "Qwen Code",
  opencode = "opencode",
  pi = "Pi",
}

--- The name of the tool another agent's row comes from ("Gemini CLI").
---@param item {source: string?}
---@return string
function M.tool_name(item)
  return TOOLS[item.source] or item.source or "another agent's"
end

--- The preview of another agent's session: its header (title, tool, model, message count, age, branch, file, what
--- the reader left out, what <CR> does or why it cannot), then, once read (`p`, the core's preview of the history an
--- import restores), that history as ours is shown; `loading` while it is read.
---@param item pseudoclaude.ExternalSession
---@param now integer
---@param p pseudoclaude.SessionPreview? The history, read.
---@param width integer?
---@return pseudoclaude.float.Preview
function M.external(item, now, p, width)
  local lines, hls = {}, {}
  local add = H.adder(lines, hls)
  add(M.title(p and p.title ~= "" and p or item), "PseudoClaudePickerPreviewTitle")
  local meta = { M.tool_name(item) .. " session" }
  local model = p and p.model ~= "" and p.model or item.model
  if (model or "") ~= "" then
    meta[#meta + 1] = model
  end
  if p then
    meta[#meta + 1] = p.messages == 1 and "1 message" or (p.messages .. " messages")
  elseif item.partial then
    meta[#meta + 1] = "messages not counted yet"
  elseif not item.unsupported then
    local n = item.messages or 0
    meta[#meta + 1] = n == 1 and "1 message" or (n .. " messages")
  end
  meta[#meta + 1] = M.age(now - (item.modified or 0))
  add(table.concat(meta, " · "), "PseudoClaudePickerPreviewMeta")
  if type(item.branch) == "string" then
    add("branch " .. item.branch, "PseudoClaudePickerPreviewMeta")
  end
  add(("id %s · file: %s"):format(item.id, vim.fn.fnamemodify(item.path, ":~")), "PseudoClaudePickerPreviewMeta")
  for _, note in ipairs(item.notes or {}) do
    add("⚠ " .. note, "PseudoClaudePickerDamage")
  end
  if item.unsupported then
    add("cannot be imported: " .. item.unsupported, "PseudoClaudePickerPreviewError")
    return { lines = lines, hls = hls, folds = {} }
  end
  add(
    ("<CR> continues it with %s, which loads its own session; its messages are imported here first."):format(
      M.source_name(item)
    )
  )
  if not p then
    add("")
    add("loading…", "PseudoClaudePickerPreviewMeta")
    return { lines = lines, hls = hls, folds = {} }
  end
  return M.preview(p, item, now, width, nil, { lines, hls })
end

--- The branch shown for a session: its git branch, or "" (not a repository, a detached HEAD).
---@param item pseudoclaude.SessionInfo
---@return string
function H.branch(item)
  local b = item.branch
  return (type(b) == "string") and b or ""
end

---@class pseudoclaude.float.Preview
---@field lines string[]
---@field hls [integer, integer, integer, string][] line (0-based), start column, end column (-1: end of line), group
---@field folds {[1]: integer, [2]: integer}[]? 0-based inclusive line ranges folded (tool outputs)
---@field cursor integer? 0-based line the cursor goes to (a search hit's preview); nil: the first

--- The preview's header: title; id, model, count, age; a notice when the session is open elsewhere or its log
--- needed repairs.
--- A function appending a line to `lines`, highlighted whole with `group` when one is given.
---@param lines string[]
---@param hls [integer, integer, integer, string][]
---@return fun(line: string, group: string?)
function H.adder(lines, hls)
  return function(line, group)
    lines[#lines + 1] = line
    if group then
      hls[#hls + 1] = { #lines - 1, 0, -1, group }
    end
  end
end

---@param p {id: string?, title: string?, model: string?, messages: integer?, damage_report: string?}
---@param item pseudoclaude.SessionInfo
---@param now integer
---@return string[] lines
---@return [integer, integer, integer, string][] hls
function H.header(p, item, now)
  local lines, hls = {}, {}
  local add = H.adder(lines, hls)
  add(M.title(p.title and p or item), "PseudoClaudePickerPreviewTitle")
  local meta = { p.id or item.id }
  local model = (p.model or "") ~= "" and p.model or item.model
  if item.source then
    -- another agent's session (a search hit of theirs): whose, then its model
    meta[#meta + 1] = M.tool_name(item) .. " session"
    if (model or "") ~= "" then
      meta[#meta + 1] = model
    end
  elseif item.agent then
    -- an ACP agent's session: its log names the agent as the model
    meta[#meta + 1] = item.agent .. " (ACP agent)"
  elseif (model or "") ~= "" then
    meta[#meta + 1] = model
  end
  local n = p.messages or item.messages or 0
  meta[#meta + 1] = n == 1 and "1 message" or (n .. " messages")
  meta[#meta + 1] =
    M.age(now - M.activity({ last_message = p.last_message or item.last_message, modified = item.modified }))
  add(table.concat(meta, " · "), "PseudoClaudePickerPreviewMeta")
  local chat = M.live()[item.id]
  if chat then
    add(
      ("● live in chat %d of this editor (%s): resuming shows it"):format(chat.chat, chat.state),
      "PseudoClaudePickerLive"
    )
  elseif item.held_by then
    add(("! open in another editor (%s): it cannot be resumed here"):format(item.held_by), "PseudoClaudePickerHeld")
  end
  if (p.damage_report or "") ~= "" then
    add("⚠ repaired on load: " .. p.damage_report, "PseudoClaudePickerDamage")
  end
  H.library_header(add, p, item)
  return lines, hls
end

--- What the preview shows while the session is read in the background.
---@param item pseudoclaude.SessionInfo
---@param now integer
---@return pseudoclaude.float.Preview
function M.loading(item, now)
  local lines, hls = H.header({}, item, now)
  lines[#lines + 1] = ""
  lines[#lines + 1] = "loading…"
  hls[#hls + 1] = { #lines - 1, 0, -1, "PseudoClaudePickerPreviewMeta" }
  return { lines = lines, hls = hls, folds = {} }
end

--- A preview that could not be read: what went wrong.
---@param item pseudoclaude.SessionInfo
---@param err any
---@return pseudoclaude.float.Preview
function M.failed(item, err)
  local lines = { M.title(item), require("pseudoclaude.errors").plain(err) }
  return {
    lines = lines,
    hls = { { 0, 0, -1, "PseudoClaudePickerPreviewTitle" }, { 1, 0, -1, "PseudoClaudePickerPreviewError" } },
  }
end

--- The history of a session as a preview shows it, the one renderer of the picker's previews and the search's: the
--- header, then the history exactly as the agent buffer renders it (`pseudoclaude.transcript`: the same lines and
--- folds).
--- - The picker's preview (`sessions_preview_async`, no `hit`): the end of the history, read from its own first
---   header as if the history began there, each message cut to `MESSAGE_MAX_LINES`, at most `PREVIEW_MAX_LINES`.
--- - A search hit's (`sessions_preview_at_async`, `hit` given): from a few messages before the hit's (`p.at`), which
---   continues the message before it (`tail.prev`), whole; the cursor (`cursor`) on the first line of the hit's
---   message holding `hit.query` (or on its first line), the matches highlighted there.
---@param p pseudoclaude.SessionPreview|{at: integer?}
---@param item pseudoclaude.SessionInfo
---@param now integer unix seconds
---@param width integer? columns available (one-line summaries are cut to fit)
---@param hit {query: string}? A search hit's preview.
---@param header [string[], table[]]? The lines and highlights above the history (another agent's session: `external`).
---@return pseudoclaude.float.Preview
function M.preview(p, item, now, width, hit, header)
  width = math.max((width or 80) - 4, 20)
  local lines, hls
  if header then
    lines, hls = header[1], header[2]
  else
    lines, hls = H.header(p, item, now)
  end
  local add = H.adder(lines, hls)
  local tail = p.tail or { from = 0, messages = {} }
  local msgs = tail.messages or {}
  local T = require("pseudoclaude.transcript")
  local body, marks, folds, starts = T.render(msgs, {
    width = width,
    max_text_lines = not hit and M.MESSAGE_MAX_LINES or nil,
    prev = hit and tail.prev or nil,
    names = tail.names,
  })
  add("")
  if (tail.from or 0) > 0 then
    add(("… %d earlier messages not shown"):format(tail.from), "PseudoClaudePickerPreviewMeta")
  end
  if #msgs == 0 then
    add("(no messages)", "PseudoClaudePickerPreviewMeta")
  end
  -- Keep the end when the history is longer than the preview shows (a hit's preview starts near the hit: all of it).
  local skip = hit and 0 or math.max(#body - (M.PREVIEW_MAX_LINES - #lines - 1), 0)
  if skip > 0 then
    add(("… %d earlier lines not shown"):format(skip), "PseudoClaudePickerPreviewMeta")
  end
  local offset = #lines - skip
  local groups = require("pseudoclaude.highlights").PREVIEW
  local mark_at = {}
  for _, mark in ipairs(marks) do
    mark_at[mark.line + 1] = groups[mark.kind]
  end
  for i = skip + 1, #body do
    add(body[i], mark_at[i])
  end
  local out_folds = {}
  for _, f in ipairs(folds) do
    if f[1] >= skip then
      out_folds[#out_folds + 1] = { f[1] + offset, f[2] + offset }
    end
  end
  local out = { lines = lines, hls = hls, folds = out_folds } ---@type pseudoclaude.float.Preview
  if hit then
    local k = (p.at or 1) - (tail.from or 0)
    local first = offset + (starts[k] or 0)
    local last = offset + ((starts[k + 1] or #body) - 1)
    local cursor, found = first, false
    for line = first, math.max(first, last) do
      for _, r in ipairs(M.find_all(lines[line + 1] or "", hit.query)) do
        hls[#hls + 1] = { line, r[1], r[2], "PseudoClaudePickerMatch" }
        if not found then
          cursor, found = line, true
        end
      end
    end
    out.cursor = cursor
  end
  return out
end

--- Byte ranges `{start, end}` (0-based, end exclusive) of `query` in `line`: case-insensitive unless the query has
--- an upper-case letter (ASCII folding: it only places highlights).
---@param line string
---@param query string
---@return integer[][]
function M.find_all(line, query)
  local out = {}
  if query == "" then
    return out
  end
  local hay, needle = line, query
  if not query:find("%u") then
    hay, needle = line:lower(), query:lower()
  end
  local from = 1
  while true do
    local s, e = hay:find(needle, from, true)
    if not s then
      return out
    end
    out[#out + 1] = { s - 1, e }
    from = e + 1
  end
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- The preview header's lines of the session library: pinned, the parent of a fork, the git branch and commit, the
--- tokens and their cost, the files the agent changed. The preview's own values once it is read (it is newer than
--- the list's), the list item's while it loads.
---@param add fun(line: string, group: string?)
---@param p {id: string?, pinned: boolean?, forked_from: table?, files_touched: string[]?, changes: pseudoclaude.TurnChanges[]?, branch: string?, commit: string?, git_start: table?, usage: pseudoclaude.Usage?, cost: number?}
---@param item pseudoclaude.SessionInfo
function H.library_header(add, p, item)
  -- a field the preview has false or not at all: the list item's (nil is nil: the core leaves null fields out)
  local function value(v)
    return v or nil
  end
  local pinned = value(p.pinned)
  if pinned == nil then
    pinned = item.pinned
  end
  if pinned then
    add("* pinned", "PseudoClaudePickerPinned")
  end
  local from = value(p.forked_from) or value(item.forked_from)
  if from then
    add(("forked from %s at message %d"):format(from.id, from.index), "PseudoClaudePickerPreviewMeta")
  end
  -- a copy of another agent's session: both places (ours, and the original while it exists), and the agent's own
  -- session it goes on in when it was continued with that agent
  local copied = value(p.imported_from)
  if copied then
    local name = M.source_name({ source = copied.source })
    add(
      ("%s of %s's session %s, here: .PseudoClaude/sessions/%s"):format(
        copied.kept and "a kept copy" or "a copy",
        name,
        copied.id,
        p.id or item.id
      ),
      "PseudoClaudePickerPreviewMeta"
    )
    local where = vim.fn.fnamemodify(copied.path, ":~")
    add(
      p.original_exists and ("original: " .. where) or ("original: gone (was " .. where .. ")"),
      "PseudoClaudePickerPreviewMeta"
    )
  end
  local agent = value(p.agent)
  if agent then
    add(("goes on in %s's own session %s"):format(agent.name, agent.session_id), "PseudoClaudePickerPreviewMeta")
  end
  local src = p.id ~= nil and p or item
  local branch = value(src.branch)
  local git = H.git_text(branch, value(src.commit))
  if git then
    git = (branch and "branch " or "") .. git
    local start = value(src.git_start)
    local started = start and H.git_text(value(start.branch), value(start.commit))
    add(started and ("%s, started on %s"):format(git, started) or git, "PseudoClaudePickerPreviewMeta")
  end
  -- A hit's preview is read without prices: the list's cost then.
  local tokens = require("pseudoclaude.usage").summary(value(src.usage), value(p.cost) or value(item.cost))
  if tokens ~= "" then
    add("tokens: " .. tokens, "PseudoClaudePickerPreviewMeta")
  end
  local files = value(p.files_touched)
  if files and #files > 0 then
    add("files touched: " .. table.concat(files, ", "), "PseudoClaudePickerPreviewMeta")
  end
  -- The files each turn changed (commands included), the last few turns: what a rewind would put back.
  local turns = value(p.changes) or {}
  for i = math.max(1, #turns - 4), #turns do
    local t = turns[i]
    local parts = {}
    for _, f in ipairs(t.files) do
      table.insert(parts, ("%s +%d −%d"):format(f.path, f.added, f.removed))
    end
    add(("message %d changed: %s"):format(t.index, table.concat(parts, ", ")), "PseudoClaudePickerPreviewMeta")
  end
end

--- "topic at 1a2b3c4", "detached at 1a2b3c4", "topic"; nil when neither is known.
---@param branch string?
---@param commit string?
---@return string?
function H.git_text(branch, commit)
  if branch and commit then
    return ("%s at %s"):format(branch, commit)
  elseif commit then
    return "detached at " .. commit
  end
  return branch
end

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
function M.fit(s, w, no_pad)
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

return M
