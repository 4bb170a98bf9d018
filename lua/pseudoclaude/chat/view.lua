--- The agent buffer's windows and lines: the buffers, their keys, appending and drawing what `transcript.lua`
--- renders, the per-message marks and folds, the cursor's jump to a message.
---
--- Architecture invariant: the transcript buffer is changed only here, and only with the renderer's lines.

local M = {}
local H = {}
local S = require("pseudoclaude.chat.state")
local T = require("pseudoclaude.transcript")

---@class pseudoclaude.chat.KeyActions What the keys do, handed in by the controller (`chat.lua` requires this
--- module, so this one never requires it).
---@field send fun(text: string, attachments: table[])
---@field cancel fun()

function M.valid_buf(b)
  return b ~= nil and vim.api.nvim_buf_is_valid(b)
end

function M.valid_win(w)
  return w ~= nil and vim.api.nvim_win_is_valid(w)
end

function M.define_highlights()
  require("pseudoclaude.highlights").setup()
end

--- Whether the active chat is in sight: its transcript window open in this tab page.
---@return boolean
function M.visible()
  return M.valid_win(S.win) and vim.api.nvim_win_get_tabpage(S.win) == vim.api.nvim_get_current_tabpage()
end

function M.redraw_winbar()
  if M.valid_win(S.win) then
    vim.api.nvim__redraw({ win = S.win, winbar = true })
  end
end

function M.make_buf(name, ft)
  local existing = vim.fn.bufnr(name)
  local b = existing ~= -1 and existing or vim.api.nvim_create_buf(false, true)
  if existing == -1 then
    vim.api.nvim_buf_set_name(b, name)
  end
  vim.bo[b].buftype = "nofile"
  vim.bo[b].bufhidden = "hide"
  vim.bo[b].swapfile = false
  -- The filetype in a main-loop step of its own: its FileType autocommands search 'runtimepath' for ftplugin,
  -- indent and syntax files, about 1 ms each time, and opening the chat is already one step's worth of work.
  vim.schedule(function()
    if vim.api.nvim_buf_is_valid(b) and vim.bo[b].filetype ~= ft then
      vim.bo[b].filetype = ft
    end
  end)
  return b
end

function M.set_win_options(w)
  vim.wo[w].wrap = true
  vim.wo[w].linebreak = true
  vim.wo[w].number = false
  vim.wo[w].relativenumber = false
  vim.wo[w].foldmethod = "manual"
  vim.wo[w].foldenable = true
  vim.wo[w].foldlevel = 0
end

--- Maps `lhs` (a configured key, or false for none) in buffer `b`.
function M.map(b, modes, lhs, rhs, desc)
  if lhs then
    vim.keymap.set(modes, lhs, rhs, { buffer = b, silent = true, desc = "pseudoclaude: " .. desc })
  end
end

---@param b integer
---@param on pseudoclaude.chat.KeyActions
function M.map_input(b, on)
  local keys = require("pseudoclaude.config").get().keys
  local function submit()
    M.submit(on.send)
  end
  M.map(b, "n", keys.send, submit, "send")
  M.map(b, "i", keys.send_insert, submit, "send")
  M.map(b, { "n", "i" }, keys.cancel, on.cancel, "cancel the turn")
  -- workspace paths after `@`, for <C-x><C-o>, <C-x><C-u> and the completion plugins' omni sources
  vim.bo[b].omnifunc = "v:lua.require'pseudoclaude.context'.complete"
  vim.bo[b].completefunc = "v:lua.require'pseudoclaude.context'.complete"
  -- an ACP agent's slash commands: `/` that starts the message opens their menu, in a chat whose agent offers some
  -- (the chat's agent can change: a resume of another agent's session, `:PseudoNew`), else it is only a `/`
  vim.keymap.set("i", "/", function()
    local row, col = unpack(vim.api.nvim_win_get_cursor(0))
    return (row == 1 and col == 0 and H.offers_commands()) and "/<C-x><C-o>" or "/"
  end, { buffer = b, expr = true, silent = true, desc = "pseudoclaude: the agent's slash commands" })
  if keys.mention then
    -- the menu opens as the user types on: nothing is inserted or selected until they pick an entry
    vim.bo[b].completeopt = "menuone,noinsert,noselect"
    vim.keymap.set("i", keys.mention, keys.mention .. "<C-x><C-o>", {
      buffer = b,
      silent = true,
      desc = "pseudoclaude: mention a workspace file (completes its path)",
    })
  end
end

---@param b integer
---@param on pseudoclaude.chat.KeyActions
function M.map_transcript(b, on)
  local keys = require("pseudoclaude.config").get().keys
  M.map(b, "n", keys.cancel, on.cancel, "cancel the turn")
  M.map(b, "n", keys.toggle_fold, M.toggle_fold, "expand/fold a tool result")
  if keys.open_file then
    vim.keymap.set("n", keys.open_file, function()
      if not M.open_file_under_cursor() then
        -- not on a file line: the key does what it does elsewhere
        vim.api.nvim_feedkeys(vim.keycode(keys.open_file), "n", false)
      end
    end, { buffer = b, silent = true, desc = "pseudoclaude: open the file under the cursor" })
  end
end

--- Opens or closes the output under a result line (or the fold the cursor is in).
function M.toggle_fold()
  local l = vim.fn.line(".")
  if vim.fn.foldlevel(l) == 0 and vim.fn.foldlevel(l + 1) > 0 then
    -- on the result line itself: its output is the fold just below
    local closed = vim.fn.foldclosed(l + 1) ~= -1
    vim.cmd(("%d%s"):format(l + 1, closed and "foldopen" or "foldclose"))
    vim.api.nvim_win_set_cursor(0, { l, 0 })
  elseif vim.fn.foldlevel(l) > 0 then
    vim.cmd("normal! za")
  end
end

--- Sends the input window's text with what it attaches (`send`: the controller's), then empties it.
---@param send fun(text: string, attachments: table[])
function M.submit(send)
  local lines = vim.api.nvim_buf_get_lines(S.input_buf, 0, -1, false)
  local text = vim.trim(table.concat(lines, "\n"))
  if text == "" then
    return
  end
  local context = require("pseudoclaude.context")
  local ok, err = pcall(function()
    send(text, context.collect(text))
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
    return
  end
  context.clear()
  vim.api.nvim_buf_set_lines(S.input_buf, 0, -1, false, {})
end

--- Opens the file of the list line under the cursor in the window the user was in before the chat.
function M.open_file_under_cursor()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local marks = vim.api.nvim_buf_get_extmarks(S.buf, S.files_ns, { row, 0 }, { row, -1 }, {})
  local path = marks[1] and S.file_marks[marks[1][1]]
  if not path then
    return false
  end
  local target
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if w ~= S.win and w ~= S.input_win and vim.api.nvim_win_get_config(w).relative == "" then
      target = target or w
    end
  end
  if target then
    vim.api.nvim_set_current_win(target)
  else
    vim.cmd("topleft vsplit")
  end
  vim.cmd.edit(vim.fn.fnameescape(path))
  return true
end

--- Appends lines at the end of the transcript; returns the 0-based index of the first one.
function M.append(lines, group)
  if not M.valid_buf(S.buf) then
    return
  end
  local b = S.buf
  vim.bo[b].modifiable = true
  local n = vim.api.nvim_buf_line_count(b)
  local empty = n == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ""
  local start = empty and 0 or n
  vim.api.nvim_buf_set_lines(b, start, empty and 1 or n, false, lines)
  vim.bo[b].modifiable = false
  if group then
    for i = 0, #lines - 1 do
      vim.api.nvim_buf_set_extmark(b, S.ns, start + i, 0, { line_hl_group = group })
    end
  end
  M.scroll_to_end()
  return start
end

--- Replaces 0-based line `row` with `line` (nil: removes it) and, under it, `folded` lines folded (the thinking).
---@param row integer
---@param line string?
---@param folded string[]?
function M.set_line(row, line, folded)
  local b = S.buf
  if not M.valid_buf(b) then
    return
  end
  local lines = line and { line } or {}
  vim.list_extend(lines, folded or {})
  vim.bo[b].modifiable = true
  vim.api.nvim_buf_set_lines(b, row, row + 1, false, lines)
  vim.bo[b].modifiable = false
  if folded and #folded > 0 and M.valid_win(S.win) then
    vim.api.nvim_win_call(S.win, function()
      pcall(vim.cmd, ("%d,%dfold"):format(row + 2, row + 1 + #folded))
    end)
    M.scroll_to_end()
  end
end

--- Removes the last line when it is empty (an answer's text row that got no text).
function M.drop_empty_last_line()
  local b = S.buf
  if not M.valid_buf(b) then
    return
  end
  local n = vim.api.nvim_buf_line_count(b)
  if n > 1 and vim.api.nvim_buf_get_lines(b, n - 1, n, false)[1] == "" then
    vim.bo[b].modifiable = true
    vim.api.nvim_buf_set_lines(b, n - 1, n, false, {})
    vim.bo[b].modifiable = false
  end
end

--- Adds streamed text to the last line.
function M.append_text(text)
  local b = S.buf
  if not M.valid_buf(b) then
    return
  end
  vim.bo[b].modifiable = true
  local n = vim.api.nvim_buf_line_count(b)
  local last = vim.api.nvim_buf_get_lines(b, n - 1, n, false)[1] or ""
  local pieces = vim.split(last .. text, "\n", { plain = true })
  vim.api.nvim_buf_set_lines(b, n - 1, n, false, pieces)
  vim.bo[b].modifiable = false
  M.scroll_to_end()
end

function M.scroll_to_end()
  if M.valid_win(S.win) and M.valid_buf(S.buf) then
    vim.api.nvim_win_set_cursor(S.win, { vim.api.nvim_buf_line_count(S.buf), 0 })
  end
end

--- Draws rendered lines at the end of the transcript (or, with `at_top`, above everything): lines, their marks and
--- their folds.
---@param lines string[]
---@param marks {line: integer, kind: pseudoclaude.TranscriptKind}[]
---@param folds {[1]: integer, [2]: integer}[]
---@param at_top boolean?
---@param starts integer[]? where each message starts (a mark each, in `S.msg_ns`)
---@return integer? start 0-based line where the lines went
function M.draw(lines, marks, folds, at_top, starts)
  local b = S.buf
  if not M.valid_buf(b) or #lines == 0 then
    return
  end
  vim.bo[b].modifiable = true
  local n = vim.api.nvim_buf_line_count(b)
  local empty = n == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ""
  local start = (empty or at_top) and 0 or n
  vim.api.nvim_buf_set_lines(b, start, empty and 1 or start, false, lines)
  vim.bo[b].modifiable = false
  local groups = require("pseudoclaude.highlights").TRANSCRIPT
  for _, mark in ipairs(marks) do
    vim.api.nvim_buf_set_extmark(b, S.ns, start + mark.line, 0, { line_hl_group = groups[mark.kind] })
  end
  for _, first in ipairs(starts or {}) do
    M.mark_message(start + math.min(first, #lines - 1))
  end
  if #folds > 0 and M.valid_win(S.win) then
    vim.api.nvim_win_call(S.win, function()
      for _, f in ipairs(folds) do
        pcall(vim.cmd, ("%d,%dfold"):format(start + f[1] + 1, start + f[2] + 1))
      end
    end)
  end
  if not at_top then
    M.scroll_to_end()
  end
  return start
end

---@class pseudoclaude.chat.Block Lines drawn for a while and redrawn in place (an ACP agent's call as it runs).
---@field mark integer? Its first line's mark, in `S.live_ns` (nil until drawn).
---@field count integer Its number of lines.
---@field hl integer[] Its highlights' marks, in `S.ns`.

--- Draws `block` as `lines` (highlighted with `group`): in place of its lines when it is drawn, else at the end.
---@param block pseudoclaude.chat.Block
---@param lines string[]
---@param group string
function M.put_block(block, lines, group)
  local b = S.buf
  if not M.valid_buf(b) then
    return
  end
  vim.bo[b].modifiable = true
  local start
  if block.mark then
    start = M.block_row(block)
    vim.api.nvim_buf_set_lines(b, start, start + block.count, false, lines)
  else
    local n = vim.api.nvim_buf_line_count(b)
    local empty = n == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ""
    start = empty and 0 or n
    vim.api.nvim_buf_set_lines(b, start, empty and 1 or n, false, lines)
    block.mark = vim.api.nvim_buf_set_extmark(b, S.live_ns, start, 0, { right_gravity = false })
  end
  vim.bo[b].modifiable = false
  H.unhighlight(block)
  block.count = #lines
  for i = 1, #lines do
    block.hl[i] = vim.api.nvim_buf_set_extmark(b, S.ns, start + i - 1, 0, { line_hl_group = group })
  end
  M.scroll_to_end()
end

--- Removes `block`'s lines and marks.
---@param block pseudoclaude.chat.Block
function M.drop_block(block)
  local b = S.buf
  if not M.valid_buf(b) or not block.mark then
    return
  end
  local start = M.block_row(block)
  vim.bo[b].modifiable = true
  vim.api.nvim_buf_set_lines(b, start, start + block.count, false, {})
  vim.bo[b].modifiable = false
  H.unhighlight(block)
  pcall(vim.api.nvim_buf_del_extmark, b, S.live_ns, block.mark)
  block.mark, block.count = nil, 0
end

--- `block`'s first line (0-based).
---@param block pseudoclaude.chat.Block
---@return integer
function M.block_row(block)
  local pos = block.mark and vim.api.nvim_buf_get_extmark_by_id(S.buf, S.live_ns, block.mark, {}) or {}
  return pos[1] or 0
end

--- Marks line `row` (0-based) as where a message of the history starts.
---@param row integer
---@return integer mark
function M.mark_message(row)
  return vim.api.nvim_buf_set_extmark(S.buf, S.msg_ns, math.max(row, 0), 0, {})
end

--- Renders message `m` after what is drawn (the live chat), exactly as a restore would; unless `unmarked`, marks its
--- start as a message of the history (one that drew no line is marked on the last line).
---@param m table
---@param unmarked boolean?
---@return integer? row 0-based line where it starts, nil when it drew nothing
function M.draw_message(m, unmarked)
  local out = { lines = {}, marks = {}, folds = {}, starts = {} }
  T.add_message(out, m, S.prev, S.names, { first = M.is_empty() })
  local start = M.draw(out.lines, out.marks, out.folds)
  S.prev = m
  local row = start and start + (out.starts[1] or 0)
  if not unmarked and M.valid_buf(S.buf) then
    M.mark_message(row or vim.api.nvim_buf_line_count(S.buf) - 1)
  end
  return row
end

---@return boolean
function M.is_empty()
  local b = S.buf
  return not M.valid_buf(b)
    or (vim.api.nvim_buf_line_count(b) == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == "")
end

--- Empties the transcript: lines, marks and the window's folds (nothing of the previous chat stays).
function M.clear()
  local b = S.buf
  if not M.valid_buf(b) then
    return
  end
  vim.bo[b].modifiable = true
  vim.api.nvim_buf_clear_namespace(b, S.ns, 0, -1)
  vim.api.nvim_buf_clear_namespace(b, S.msg_ns, 0, -1)
  vim.api.nvim_buf_clear_namespace(b, S.files_ns, 0, -1)
  vim.api.nvim_buf_clear_namespace(b, S.live_ns, 0, -1)
  S.file_marks, S.live = {}, {}
  S.marks_stale, S.open_block = false, nil
  vim.api.nvim_buf_set_lines(b, 0, -1, false, {})
  vim.bo[b].modifiable = false
  for _, w in ipairs(vim.fn.win_findbuf(b)) do
    vim.api.nvim_win_call(w, function()
      pcall(vim.cmd, "normal! zE")
    end)
  end
  S.prev, S.names, S.streaming, S.thinking = nil, {}, false, nil
end

--- Puts the cursor on 0-based line `row` of the transcript, in its window, and keeps track of it.
---@param row integer
function M.place_jump(row)
  if not M.valid_buf(S.buf) then
    return
  end
  S.jump = { mark = vim.api.nvim_buf_set_extmark(S.buf, S.jump_ns, row, 0, {}), row = -1 }
  if M.valid_win(S.win) then
    vim.api.nvim_set_current_win(S.win)
  end
  M.follow_jump(true)
end

--- Moves the cursor along with the jump's line (older lines were drawn above it), unless the user moved it.
---@param force boolean?
function M.follow_jump(force)
  local j = S.jump
  if not j or not M.valid_buf(S.buf) or not M.valid_win(S.win) then
    return
  end
  local row = vim.api.nvim_buf_get_extmark_by_id(S.buf, S.jump_ns, j.mark, {})[1]
  local cur = vim.api.nvim_win_get_cursor(S.win)[1] - 1
  if row and (force or cur == j.row or cur == row) then
    vim.api.nvim_win_set_cursor(S.win, { row + 1, 0 })
    vim.api.nvim_win_call(S.win, function()
      vim.cmd("normal! zz")
    end)
    j.row = row
  end
end

-- Helpers ==============================================================================================================

---@param block pseudoclaude.chat.Block
function H.unhighlight(block)
  for _, id in ipairs(block.hl) do
    pcall(vim.api.nvim_buf_del_extmark, S.buf, S.ns, id)
  end
  block.hl = {}
end

--- Whether the current buffer's chat runs an agent that offers slash commands (as it last listed them).
---@return boolean
function H.offers_commands()
  local chat = vim.b.pseudoclaude_chat
  local ok, offers = pcall(require("pseudoclaude.core").call, "agent_offers", chat)
  return chat ~= nil and ok and type(offers) == "table" and #(offers.commands or {}) > 0
end

return M
