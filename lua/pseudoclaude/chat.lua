--- The agent buffer: a transcript window and an input window below it.
---
--- The conversation runs in the native core, on its own threads. This module only renders what the
--- core reports (drained from its queue whenever it wakes the main loop) and sends what the user
--- types. Nothing here waits for the disk, the network or the model.
---
--- Architecture invariant: the agent buffer is drawn only by `transcript.lua`'s renderer (live, restored and
--- previewed histories read alike), and the Nth message mark in `H.msg_ns` is message N of the history.

local M = {}
local H = {}
local T = require("pseudoclaude.transcript")

-- Public API ===========================================================================================================

--- Opens (or focuses) the agent buffer. Returns the transcript buffer.
---@return integer bufnr
function M.open()
  H.ensure_host()
  -- what `#buffer` means from the input window: the file buffer the user opened the chat from
  require("pseudoclaude.context").track(vim.api.nvim_get_current_buf())
  if not H.valid_buf(H.buf) then
    H.buf = H.make_buf("pseudoclaude://chat", "pseudoclaude")
    vim.bo[H.buf].modifiable = false
    -- at once: a message sent right after opening must find the history drawn, or both would draw it
    H.restore(nil, nil, nil, true)
  end
  if not H.valid_buf(H.input_buf) then
    H.input_buf = H.make_buf("pseudoclaude://input", "pseudoclaude-input")
    H.map_input(H.input_buf)
  end
  if not H.valid_win(H.win) then
    vim.cmd("botright vsplit")
    H.win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(H.win, H.buf)
    vim.api.nvim_win_set_width(H.win, math.max(60, math.floor(vim.o.columns * 0.4)))
    H.set_win_options(H.win)
    vim.wo[H.win].winbar = "%{%v:lua.require'pseudoclaude.chat'.winbar()%}"
    H.map_transcript(H.buf)
  end
  if not H.valid_win(H.input_win) then
    vim.api.nvim_set_current_win(H.win)
    vim.cmd("belowright split")
    H.input_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(H.input_win, H.input_buf)
    vim.api.nvim_win_set_height(H.input_win, 5)
    vim.wo[H.input_win].winfixheight = true
    vim.wo[H.input_win].winbar = "%{%v:lua.require'pseudoclaude.chat'.input_winbar()%}"
  end
  vim.api.nvim_set_current_win(H.input_win)
  H.scroll_to_end()
  return H.buf
end

--- The input window's winbar: its keys, and what is attached to the next message.
---@return string
function M.input_winbar()
  local keys = require("pseudoclaude").get_config().keys
  local bar = (" Message · %s send (normal) · %s send (insert) · %s cancel"):format(
    keys.send or "-",
    keys.send_insert or "-",
    keys.cancel or "-"
  )
  local pending = require("pseudoclaude.context").pending()
  if #pending > 0 then
    local names = vim.tbl_map(function(a)
      return a.lines and ("%s:%d-%d"):format(a.path, a.lines[1], a.lines[2]) or a.path
    end, pending)
    bar = bar .. " · 📎 " .. table.concat(names, ", ")
  end
  return (bar:gsub("%%", "%%%%"))
end

--- Sends `text` as the user's message, with `attachments` (context from the editor, see `pseudoclaude.context`);
--- opens the chat and starts a session when needed.
---@param text string
---@param attachments pseudoclaude.Attachment[]?
function M.send(text, attachments)
  if type(text) ~= "string" then
    error("pseudoclaude.chat.send: text must be a string, got " .. type(text), 2)
  end
  H.ensure_host()
  -- opened (and its history drawn) before the message exists, so the message is drawn once, by its event
  M.open()
  require("pseudoclaude.core").call("agent_configure", H.config_json())
  local json = (attachments and #attachments > 0) and vim.json.encode(attachments) or nil
  require("pseudoclaude.core").call("agent_send", text, json)
  H.state.busy = true
  H.state.phase = "answering"
  H.redraw_winbar()
end

--- Cancels the running turn. Returns whether one was running.
---@return boolean
function M.cancel()
  if not H.host_ready then
    return false
  end
  local running = require("pseudoclaude.core").call("agent_cancel")
  return running
end

---@class pseudoclaude.ResumeOpts
---@field on_done fun(report: pseudoclaude.ResumeReport)? Called when the history is in place (the session is current
--- and its end drawn), or the resume failed.
---@field on_drawn fun(report: pseudoclaude.ResumeReport)? Called when every older message is drawn too.
---@field at integer? Put the cursor on this message (1-based, as in `sessions.load(id).messages`), in the transcript
--- window, once it is drawn (older messages are drawn last: the cursor follows it while they are).

---@class pseudoclaude.ResumeReport
---@field ok boolean Whether the session is now the current one.
---@field id string
---@field messages integer?
---@field stale_hours integer?
---@field stale_seconds integer?
---@field notice string? What was repaired, one sentence ("" when nothing was).
---@field error string? Why the resume failed (the current session is as it was).
---@field drawn boolean? Whether all of the history was drawn when the report was made (else older slices follow).
---@field at integer? The message the cursor was asked to go to (`opts.at`).

--- Restores session `id` ("last" or nil: the most recent other session) into the agent buffer. Returns at once: the
--- session is read on the core's threads and drawn from its end in slices, so the editor never waits. When the
--- history is in place (or the resume failed, leaving the current session as it was) `opts.on_done(report)` is
--- called and the `User PseudoClaudeResumed` autocmd fires with the report as its data.
---@param id string?
---@param opts pseudoclaude.ResumeOpts?
function M.resume(id, opts)
  opts = opts or {}
  local at = opts.at
  if at ~= nil and (type(at) ~= "number" or at < 1 or at ~= math.floor(at)) then
    error(
      ("pseudoclaude.resume: opts.at: expected a message index (an integer >= 1), got %s"):format(vim.inspect(at)),
      0
    )
  end
  H.ensure_host()
  if id == nil or id == "last" then
    local list = require("pseudoclaude").sessions.list({ limit = 1, check_locks = false, max_read = 0 }) -- the id only: reads no log
    if #list == 0 then
      error("pseudoclaude: there is no other session to resume in " .. H.workspace(), 0)
    end
    id = list[1].id
  end
  local ok, ticket = pcall(require("pseudoclaude.core").call, "agent_resume_async", id)
  if not ok then
    H.resume_finished(id, opts, { ok = false, id = id, error = require("pseudoclaude.errors").plain(ticket) })
    return
  end
  H.resumes[ticket] = { id = id, opts = opts, started = vim.uv.hrtime() }
  H.last_stats = { id = id, asked_at = H.resumes[ticket].started, slices = 0 }
  H.state.phase = "restoring " .. id
  H.redraw_winbar()
end

---@class pseudoclaude.ResumeStats Timestamps are `vim.uv.hrtime()` values (ns), for benchmarks.
---@field id string
---@field asked_at integer `resume()` called
---@field read_at integer? the core has read the session (the switch-over is done)
---@field first_at integer? the first screenful (the end of the history) drawn
---@field in_place_at integer? the report given (`on_done`, `PseudoClaudeResumed`)
---@field done_at integer? all of the history drawn
---@field slices integer main-loop steps that drew it

--- Timings of the last resume (nil before the first).
---@return pseudoclaude.ResumeStats?
function M.last_resume_stats()
  return H.last_stats
end

--- Starts a new, empty chat (the current session stays on disk).
function M.new_chat()
  H.ensure_host()
  require("pseudoclaude.core").call("agent_new_chat")
  H.state.saved, H.state.save_error = true, nil
  H.state.usage, H.state.cost = nil, nil
  if H.valid_buf(H.buf) then
    H.restore()
  end
end

--- The current session, or nil before the first message.
---@return {id: string, dir: string, jsonl: string}?
function M.current()
  if not H.host_ready then
    return nil
  end
  local cur = require("pseudoclaude.core").call("agent_current")
  if cur == nil or cur == vim.NIL then
    return nil
  end
  return cur
end

--- The history the model sees next, in the log's own shape.
---@return table[]
function M.messages()
  if not H.host_ready then
    return {}
  end
  return require("pseudoclaude.core").call("agent_messages")
end

--- Moves the chat to `workspace`: the sessions listed, started and resumed from now on are that directory's, and the
--- tools run there (the editor's current directory is left as it is). Returns the workspace it was in. The current
--- session is untouched; the next resume or new chat uses the new workspace.
---@param workspace string
---@return string before
function M.set_workspace(workspace)
  local before = H.workspace()
  require("pseudoclaude").get_config().workspace = workspace
  if H.host_ready then
    require("pseudoclaude.core").call("agent_configure", H.config_json())
  end
  return before
end

--- The message of the history (1-based, as in `messages()`) drawn at line `row` (1-based) of the agent buffer: the
--- last one starting at or above it. Raises when the buffer is out of step with the history (after a compaction),
--- after redrawing it from the history, so that asking again gives the right answer.
---@param row integer
---@return integer index 0 above the first message
---@return integer total messages in the history
function M.message_at(row)
  if not H.valid_buf(H.buf) then
    error("pseudoclaude: the agent buffer is not open", 0)
  end
  local drawn = #vim.api.nvim_buf_get_extmarks(H.buf, H.msg_ns, 0, -1, {})
  local ok, slice = pcall(require("pseudoclaude.core").call, "agent_history_slice", 0, 0, 0)
  local total = ok and vim.json.decode(slice).total or drawn
  if H.marks_stale or drawn ~= total or H.open_block then
    if not H.open_block then
      H.restore()
    end
    error(
      "pseudoclaude: the agent buffer is out of step with the history (a turn is running or older messages were "
        .. "summarised); wait for it to be redrawn, then try again",
      0
    )
  end
  return #vim.api.nvim_buf_get_extmarks(H.buf, H.msg_ns, 0, { row - 1, 0 }, {}), total
end

--- The winbar of the transcript window: session, model, turn state, the session's tokens and cost (when the
--- provider reported any), whether the log is saved.
---@return string
function M.winbar()
  local s = H.state
  local parts = {
    -- Narrow side windows are common: no prefix, and the model alone when the provider says the same.
    "%#PseudoClaudeWinbar# " .. (s.session or "new session"),
    (s.model and s.model ~= "" and s.model ~= s.provider) and s.model or (s.provider or "?"),
    s.phase,
  }
  local usage = require("pseudoclaude.usage").summary(s.usage, s.cost)
  if usage ~= "" then
    parts[#parts + 1] = usage
  end
  local saved = s.saved and "%#PseudoClaudeSaved#saved" or "%#PseudoClaudeUnsaved#NOT SAVED: " .. (s.save_error or "")
  return table.concat(parts, " │ ") .. " │ " .. saved .. "%*"
end

-- Helpers ==============================================================================================================

H.state = { busy = false, phase = "idle", saved = true, save_error = nil, session = nil, provider = nil, model = nil }
H.host_ready = false
--- An answer is streaming into the last line.
H.streaming = false
--- The last message drawn (the log's shape), for the renderer's header rule; nil at the top of the buffer.
H.prev = nil
--- Resumes started and not yet finished, by ticket.
---@type table<integer, {id: string, opts: pseudoclaude.ResumeOpts, started: integer}>
H.resumes = {}
--- Bumped by each restore: slices of an older one stop drawing.
H.restore_gen = 0
--- Messages per slice of a restore and bytes of text per slice: one slice is one short main-loop step.
H.SLICE_MESSAGES = 150
H.SLICE_BYTES = 32 * 1024

H.ns = vim.api.nvim_create_namespace("pseudoclaude_chat")
--- One mark at the start of each message of the history, in order: the Nth mark is message N (`M.message_at`).
H.msg_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_messages")
--- The history was replaced (compaction): the marks no longer number it.
H.marks_stale = false
--- The answer streaming now has its mark already (placed when it began): `{mark, has_text}`.
---@type {mark: integer?, has_text: boolean}?
H.open_block = nil

--- Highlight group of each kind of transcript line.
H.groups = {
  you = "PseudoClaudeHeader",
  agent = "PseudoClaudeHeader",
  reminder = "PseudoClaudeNotice",
  call = "PseudoClaudeTool",
  result = "PseudoClaudeTool",
  error = "PseudoClaudeError",
  more = "PseudoClaudeTool",
}

function H.valid_buf(b)
  return b ~= nil and vim.api.nvim_buf_is_valid(b)
end

function H.valid_win(w)
  return w ~= nil and vim.api.nvim_win_is_valid(w)
end

function H.workspace()
  return require("pseudoclaude").workspace()
end

function H.config_json()
  local cfg = require("pseudoclaude").get_config()
  local p = cfg.provider or {}
  return vim.json.encode({
    workspace = H.workspace(),
    provider = {
      name = p.name or "",
      model = p.model or "",
      base_url = p.base_url or "",
      api_key_env = p.api_key_env or "",
      connect_timeout_secs = p.connect_timeout,
      idle_timeout_secs = p.idle_timeout,
      max_retries = p.max_retries,
    },
    stale_after_hours = cfg.stale_after_hours,
    spill_threshold = cfg.spill_threshold,
    retention_days = cfg.retention_days,
    -- (an empty table would encode as a list)
    pricing = next(cfg.pricing or {}) and cfg.pricing or vim.empty_dict(),
    workspaces_file = require("pseudoclaude.sessions").workspaces_file(),
    approve = {
      write_file = cfg.approve.write_file == true,
      edit_file = cfg.approve.edit_file == true,
      run_command = cfg.approve.run_command == true,
    },
  })
end

function H.ensure_host()
  H.define_highlights()
  if H.host_ready then
    return
  end
  require("pseudoclaude.core").call("agent_setup", H.on_wake, H.config_json())
  H.host_ready = true
  H.refresh_status()
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup("pseudoclaude_chat", { clear = true }),
    callback = function()
      pcall(require("pseudoclaude.core").call, "agent_close")
    end,
  })
end

function H.define_highlights()
  require("pseudoclaude.highlights").setup()
end

function H.refresh_status()
  local ok, st = pcall(require("pseudoclaude.core").call, "agent_status")
  if ok then
    H.state.provider, H.state.model = st.provider, st.model
    H.state.session = T.nonnil(st.session)
    H.state.usage, H.state.cost = T.nonnil(st.usage), T.nonnil(st.cost)
    if st.unsaved then
      H.state.saved = false
    end
  end
end

function H.redraw_winbar()
  if H.valid_win(H.win) then
    vim.api.nvim__redraw({ win = H.win, winbar = true })
  end
end

function H.make_buf(name, ft)
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

function H.set_win_options(w)
  vim.wo[w].wrap = true
  vim.wo[w].linebreak = true
  vim.wo[w].number = false
  vim.wo[w].relativenumber = false
  vim.wo[w].foldmethod = "manual"
  vim.wo[w].foldenable = true
  vim.wo[w].foldlevel = 0
end

--- Maps `lhs` (a configured key, or false for none) in buffer `b`.
function H.map(b, modes, lhs, rhs, desc)
  if lhs then
    vim.keymap.set(modes, lhs, rhs, { buffer = b, silent = true, desc = "pseudoclaude: " .. desc })
  end
end

function H.map_input(b)
  local keys = require("pseudoclaude").get_config().keys
  H.map(b, "n", keys.send, H.submit, "send")
  H.map(b, "i", keys.send_insert, H.submit, "send")
  H.map(b, { "n", "i" }, keys.cancel, M.cancel, "cancel the turn")
  -- workspace paths after `@`, for <C-x><C-o>, <C-x><C-u> and the completion plugins' omni sources
  vim.bo[b].omnifunc = "v:lua.require'pseudoclaude.context'.complete"
  vim.bo[b].completefunc = "v:lua.require'pseudoclaude.context'.complete"
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

function H.map_transcript(b)
  local keys = require("pseudoclaude").get_config().keys
  H.map(b, "n", keys.cancel, M.cancel, "cancel the turn")
  H.map(b, "n", keys.toggle_fold, H.toggle_fold, "expand/fold a tool result")
  if keys.open_file then
    vim.keymap.set("n", keys.open_file, function()
      if not H.open_file_under_cursor() then
        -- not on a file line: the key does what it does elsewhere
        vim.api.nvim_feedkeys(vim.keycode(keys.open_file), "n", false)
      end
    end, { buffer = b, silent = true, desc = "pseudoclaude: open the file under the cursor" })
  end
end

--- Opens or closes the output under a result line (or the fold the cursor is in).
function H.toggle_fold()
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

function H.submit()
  local lines = vim.api.nvim_buf_get_lines(H.input_buf, 0, -1, false)
  local text = vim.trim(table.concat(lines, "\n"))
  if text == "" then
    return
  end
  local context = require("pseudoclaude.context")
  local ok, err = pcall(function()
    M.send(text, context.collect(text))
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
    return
  end
  context.clear()
  vim.api.nvim_buf_set_lines(H.input_buf, 0, -1, false, {})
end

--- Appends lines at the end of the transcript; returns the 0-based index of the first one.
function H.append(lines, group)
  if not H.valid_buf(H.buf) then
    return
  end
  local b = H.buf
  vim.bo[b].modifiable = true
  local n = vim.api.nvim_buf_line_count(b)
  local empty = n == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ""
  local start = empty and 0 or n
  vim.api.nvim_buf_set_lines(b, start, empty and 1 or n, false, lines)
  vim.bo[b].modifiable = false
  if group then
    for i = 0, #lines - 1 do
      vim.api.nvim_buf_set_extmark(b, H.ns, start + i, 0, { line_hl_group = group })
    end
  end
  H.scroll_to_end()
  return start
end

--- Adds streamed text to the last line.
function H.append_text(text)
  local b = H.buf
  if not H.valid_buf(b) then
    return
  end
  vim.bo[b].modifiable = true
  local n = vim.api.nvim_buf_line_count(b)
  local last = vim.api.nvim_buf_get_lines(b, n - 1, n, false)[1] or ""
  local pieces = vim.split(last .. text, "\n", { plain = true })
  vim.api.nvim_buf_set_lines(b, n - 1, n, false, pieces)
  vim.bo[b].modifiable = false
  H.scroll_to_end()
end

function H.scroll_to_end()
  if H.valid_win(H.win) and H.valid_buf(H.buf) then
    vim.api.nvim_win_set_cursor(H.win, { vim.api.nvim_buf_line_count(H.buf), 0 })
  end
end

--- Draws rendered lines at the end of the transcript (or, with `at_top`, above everything): lines, their marks and
--- their folds.
---@param lines string[]
---@param marks {line: integer, kind: pseudoclaude.TranscriptKind}[]
---@param folds {[1]: integer, [2]: integer}[]
---@param at_top boolean?
---@param starts integer[]? where each message starts (a mark each, in `H.msg_ns`)
---@return integer? start 0-based line where the lines went
function H.draw(lines, marks, folds, at_top, starts)
  local b = H.buf
  if not H.valid_buf(b) or #lines == 0 then
    return
  end
  vim.bo[b].modifiable = true
  local n = vim.api.nvim_buf_line_count(b)
  local empty = n == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ""
  local start = (empty or at_top) and 0 or n
  vim.api.nvim_buf_set_lines(b, start, empty and 1 or start, false, lines)
  vim.bo[b].modifiable = false
  for _, mark in ipairs(marks) do
    vim.api.nvim_buf_set_extmark(b, H.ns, start + mark.line, 0, { line_hl_group = H.groups[mark.kind] })
  end
  for _, first in ipairs(starts or {}) do
    H.mark_message(start + math.min(first, #lines - 1))
  end
  if #folds > 0 and H.valid_win(H.win) then
    vim.api.nvim_win_call(H.win, function()
      for _, f in ipairs(folds) do
        pcall(vim.cmd, ("%d,%dfold"):format(start + f[1] + 1, start + f[2] + 1))
      end
    end)
  end
  if not at_top then
    H.scroll_to_end()
  end
  return start
end

--- Marks line `row` (0-based) as where a message of the history starts.
---@param row integer
---@return integer mark
function H.mark_message(row)
  return vim.api.nvim_buf_set_extmark(H.buf, H.msg_ns, math.max(row, 0), 0, {})
end

--- Renders message `m` after what is drawn (the live chat), exactly as a restore would; unless `unmarked`, marks its
--- start as a message of the history (one that drew no line is marked on the last line).
---@param m table
---@param unmarked boolean?
---@return integer? row 0-based line where it starts, nil when it drew nothing
function H.draw_message(m, unmarked)
  local out = { lines = {}, marks = {}, folds = {}, starts = {} }
  T.add_message(out, m, H.prev, H.names, { first = H.is_empty() })
  local start = H.draw(out.lines, out.marks, out.folds)
  H.prev = m
  local row = start and start + (out.starts[1] or 0)
  if not unmarked and H.valid_buf(H.buf) then
    H.mark_message(row or vim.api.nvim_buf_line_count(H.buf) - 1)
  end
  return row
end

---@return boolean
function H.is_empty()
  local b = H.buf
  return not H.valid_buf(b)
    or (vim.api.nvim_buf_line_count(b) == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == "")
end

--- Empties the transcript: lines, marks and the window's folds (nothing of the previous chat stays).
function H.clear()
  local b = H.buf
  if not H.valid_buf(b) then
    return
  end
  vim.bo[b].modifiable = true
  vim.api.nvim_buf_clear_namespace(b, H.ns, 0, -1)
  vim.api.nvim_buf_clear_namespace(b, H.msg_ns, 0, -1)
  vim.api.nvim_buf_clear_namespace(b, H.files_ns, 0, -1)
  H.file_marks = {}
  H.marks_stale, H.open_block = false, nil
  vim.api.nvim_buf_set_lines(b, 0, -1, false, {})
  vim.bo[b].modifiable = false
  for _, w in ipairs(vim.fn.win_findbuf(b)) do
    vim.api.nvim_win_call(w, function()
      pcall(vim.cmd, "normal! zE")
    end)
  end
  H.prev, H.names, H.streaming = nil, {}, false
end

--- Draws the current history from scratch, from its end backwards, one slice per main-loop step (the first
--- screenful at once): `on_first(all_drawn)` runs once the end is drawn, `on_done()` when all of it is. With `at`,
--- the cursor goes to that message (1-based) when its slice is drawn, and stays on it while older ones are.
---@param on_first fun(all_drawn: boolean)?
---@param on_done fun()?
---@param at integer? Put the cursor on this message (1-based) once its slice is drawn.
---@param at_once boolean? Draw the end in this step (a chat being opened), not the next one.
function H.restore(on_first, on_done, at, at_once)
  if not H.valid_buf(H.buf) then
    if on_first then
      on_first(true)
    end
    return on_done and on_done()
  end
  H.restore_gen = H.restore_gen + 1
  local gen = H.restore_gen
  H.clear()
  H.jump = nil
  vim.api.nvim_buf_clear_namespace(H.buf, H.jump_ns, 0, -1)
  local core = require("pseudoclaude.core")
  local first = true
  local function step(to)
    if gen ~= H.restore_gen or not H.valid_buf(H.buf) then
      return
    end
    local t0 = vim.uv.hrtime()
    local ok, slice = pcall(core.call, "agent_history_slice", to, H.SLICE_MESSAGES, H.SLICE_BYTES)
    if ok then
      ok, slice = pcall(vim.json.decode, slice, { luanil = { object = true, array = true } })
    end
    local t1 = vim.uv.hrtime()
    if not ok then
      require("pseudoclaude.errors").report(slice)
      if first and on_first then
        on_first(true)
      end
      return on_done and on_done()
    end
    local msgs = slice.messages or {}
    if first then
      -- The live chat goes on after the last message.
      H.prev = msgs[#msgs] or T.nonnil(slice.prev) or H.prev
      for k, v in pairs(slice.names or {}) do
        H.names[k] = v
      end
    end
    for _, m in ipairs(msgs) do
      for _, c in ipairs(T.nonnil(m.tool_calls) or {}) do
        H.names[c.id] = c.name
      end
    end
    local lines, marks, folds, starts = T.render(msgs, { prev = T.nonnil(slice.prev), names = slice.names })
    H.draw(lines, marks, folds, not first, starts)
    local stats = H.restore_stats
    if stats then
      stats.slices = (stats.slices or 0) + 1
      local t2 = vim.uv.hrtime()
      stats.max_slice_ms = math.max(stats.max_slice_ms or 0, (t1 - t0) / 1e6)
      stats.max_draw_ms = math.max(stats.max_draw_ms or 0, (t2 - t1) / 1e6)
    end
    local was_first = first
    if first then
      if stats then
        stats.first_at = vim.uv.hrtime()
      end
      H.scroll_to_end()
      H.refresh_status()
      H.redraw_winbar()
    end
    first = false
    if at then
      local k = at - slice.from
      if H.jump then
        H.follow_jump()
      elseif k >= 1 and k <= #msgs then
        -- each slice is drawn above the ones before it: its own lines start at the top; the cursor goes below the
        -- message's header, on its first own line
        local row = starts[k]
        if lines[row + 1] == (T.header_for(msgs[k])) and not T.nonnil(msgs[k].tool_result) then
          row = row + 1
        end
        H.place_jump(row)
      end
    end
    if was_first and on_first then
      on_first(slice.from == 0)
    end
    if slice.from > 0 then
      vim.schedule(function()
        step(slice.from)
      end)
    else
      if at and not H.jump then
        vim.notify(
          ("pseudoclaude: this session has no message %d (it has %d); showing its end"):format(at, slice.total or 0),
          vim.log.levels.WARN
        )
      end
      if not H.jump and H.valid_win(H.win) and vim.api.nvim_get_current_win() ~= H.win then
        H.scroll_to_end()
      end
      H.restore_stats = nil
      if on_done then
        on_done()
      end
    end
  end
  -- `to` past the end (the largest integer that crosses to Rust as one): the whole history, in this step when the
  -- caller needs it now (a chat being opened).
  if at_once then
    return step(2147483647)
  end
  -- Otherwise a step of its own (opening the windows and clearing the buffer were this one's work), drawing the
  -- history as it is now: a message added before that step runs (a turn sent at once) is drawn by its own event, so
  -- it must not be drawn here too.
  local counted, now = pcall(core.call, "agent_history_slice", 0, 0, 0)
  local upto = counted and (vim.json.decode(now).total or 2147483647) or 2147483647
  vim.schedule(function()
    step(upto)
  end)
end

H.names = {}

--- Where a resume with `at` put the cursor: an extmark on the message's first line (it moves down as older slices
--- are drawn above it) and the row the cursor was last put on.
---@type {mark: integer, row: integer}?
H.jump = nil
H.jump_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_jump")

--- Puts the cursor on 0-based line `row` of the transcript, in its window, and keeps track of it.
---@param row integer
function H.place_jump(row)
  if not H.valid_buf(H.buf) then
    return
  end
  H.jump = { mark = vim.api.nvim_buf_set_extmark(H.buf, H.jump_ns, row, 0, {}), row = -1 }
  if H.valid_win(H.win) then
    vim.api.nvim_set_current_win(H.win)
  end
  H.follow_jump(true)
end

--- Moves the cursor along with the jump's line (older lines were drawn above it), unless the user moved it.
---@param force boolean?
function H.follow_jump(force)
  local j = H.jump
  if not j or not H.valid_buf(H.buf) or not H.valid_win(H.win) then
    return
  end
  local row = vim.api.nvim_buf_get_extmark_by_id(H.buf, H.jump_ns, j.mark, {})[1]
  local cur = vim.api.nvim_win_get_cursor(H.win)[1] - 1
  if row and (force or cur == j.row or cur == row) then
    vim.api.nvim_win_set_cursor(H.win, { row + 1, 0 })
    vim.api.nvim_win_call(H.win, function()
      vim.cmd("normal! zz")
    end)
    j.row = row
  end
end

-- Events from the core ----------------------------------------------------------------------------------------------

function H.on_wake()
  local ok, msgs = pcall(require("pseudoclaude.core").call, "agent_drain")
  if not ok then
    require("pseudoclaude.errors").report(msgs)
    return
  end
  for _, m in ipairs(msgs) do
    local handler = H.handlers[m.type]
    if handler then
      local hok, herr = pcall(handler, m)
      if not hok then
        require("pseudoclaude.errors").report(herr)
      end
    end
  end
  H.redraw_winbar()
end

--- The answer starts streaming: its header (when the renderer would draw one), then the line the text flows into.
function H.begin_agent_block()
  if H.streaming then
    return
  end
  local m = { role = "assistant" }
  local row = H.draw_message(m, true)
  local text_row = H.append({ "" })
  -- the answer's mark goes on now, where it starts; it becomes a message when recorded (or kept on an interruption)
  if H.valid_buf(H.buf) then
    H.open_block = { mark = H.mark_message(row or text_row or 0), has_text = false }
  end
  H.streaming = true
end

--- A turn stopped while an answer streamed: the core kept its text as a message when there was any; otherwise the
--- mark placed for it numbers nothing.
function H.close_block()
  local block = H.open_block
  H.open_block = nil
  if block and not block.has_text and block.mark and H.valid_buf(H.buf) then
    pcall(vim.api.nvim_buf_del_extmark, H.buf, H.msg_ns, block.mark)
  end
end

--- One handler per event the core queues (see lua/pseudoclaude/types.lua for their shapes).
---@type table<pseudoclaude.EventType, fun(m: pseudoclaude.Event)>
H.handlers = {
  user_recorded = function(m)
    H.streaming = false
    H.draw_message({ role = "user", content = m.text })
    H.refresh_status()
  end,
  text_delta = function(m)
    H.begin_agent_block()
    if H.open_block and m.text:find("%S") then
      H.open_block.has_text = true
    end
    H.append_text(m.text)
  end,
  tool_call_started = function(m)
    H.names[m.id] = m.name
  end,
  assistant_recorded = function(m)
    local calls = T.nonnil(m.tool_calls) or {}
    -- streamed: its mark is in place already
    local marked = H.open_block ~= nil
    H.open_block = nil
    if #calls > 0 then
      -- the calls, drawn as the renderer draws them after the text (under a header when nothing streamed)
      H.draw_message({ role = "assistant", tool_calls = calls }, marked)
      H.state.phase = "running tools"
    elseif not marked and H.valid_buf(H.buf) then
      H.mark_message(vim.api.nvim_buf_line_count(H.buf) - 1) -- an empty answer: a message all the same
    end
    H.prev = { role = "assistant" }
    H.streaming = false
  end,
  tool_result = function(m)
    H.names[m.id] = m.name or H.names[m.id]
    if m.name == "run_command" then
      -- the command may have changed files that buffers show: reload them, or warn, as Neovim does
      require("pseudoclaude.editor").checktime()
    end
    H.draw_message({
      role = "user",
      tool_result = { tool_call_id = m.id, content = m.content or "", is_error = m.is_error },
    })
    -- The answer after the tools is a block of its own, never glued to a (folded) result.
    H.streaming = false
    H.state.phase = "answering"
  end,
  retrying = function(m)
    H.append(
      { ("… retrying (attempt %d) in %.1fs: %s"):format(m.attempt, m.wait_ms / 1000, m.reason) },
      "PseudoClaudeNotice"
    )
  end,
  usage = function()
    -- the totals are read back from the status, not taken from the event: the status prices them with the
    -- configuration in effect now, which a setup() during the session may have changed
    H.refresh_status()
  end,
  compacted = function()
    H.append({ "", "[older history was summarised to fit the model's context]" }, "PseudoClaudeNotice")
    H.streaming = false
    H.marks_stale = true
  end,
  saved = function(m)
    H.state.saved = m.ok
    H.state.save_error = T.nonnil(m.error)
    if not m.ok then
      vim.notify(
        "pseudoclaude: the session log could not be written: " .. tostring(H.state.save_error),
        vim.log.levels.ERROR
      )
    end
  end,
  error = function(m)
    H.close_block()
    H.append({ "", "✗ " .. m.message }, "PseudoClaudeError")
    H.streaming = false
    vim.notify("pseudoclaude: " .. m.message, vim.log.levels.ERROR)
  end,
  cancelled = function()
    H.close_block()
    H.append({ "", "[cancelled]" }, "PseudoClaudeNotice")
    H.streaming = false
  end,
  turn_done = function(m)
    H.list_turn_files()
    H.state.busy = false
    H.state.phase = "idle"
    H.streaming = false
    H.refresh_status()
    vim.api.nvim_exec_autocmds("User", {
      pattern = "PseudoClaudeTurnDone",
      modeline = false,
      data = { stop_reason = m.stop_reason, session = H.state.session },
    })
  end,
  approval = function(m)
    H.state.phase = "waiting for approval"
    H.ask_approval(m)
  end,
  buffer_check = function(m)
    require("pseudoclaude.editor").on_buffer_check(m)
  end,
  file_written = function(m)
    require("pseudoclaude.editor").on_written(m)
    if m.outcome ~= "failed" then
      H.turn_files[#H.turn_files + 1] = { rel = m.rel, path = m.path, outcome = m.outcome }
    end
  end,
  resumed = function(m)
    local pending = H.resumes[m.ticket]
    H.resumes[m.ticket] = nil
    if not pending then
      return
    end
    if not m.ok then
      H.state.phase = H.state.busy and H.state.phase or "idle"
      return H.resume_finished(pending.id, pending.opts, {
        ok = false,
        id = pending.id,
        error = require("pseudoclaude.errors").plain(T.nonnil(m.error) or "the session could not be restored"),
      })
    end
    local report = m.report
    report.ok = true
    local stats = H.last_stats and H.last_stats.id == pending.id and H.last_stats or {}
    stats.read_at = vim.uv.hrtime()
    H.state.saved, H.state.save_error, H.state.busy = true, nil, false
    H.state.phase = "idle"
    M.open()
    H.restore_stats = stats
    report.at = pending.opts.at
    H.restore(function(all_drawn)
      -- The session is current and its end is on screen: the history is in place.
      stats.in_place_at = vim.uv.hrtime()
      report.drawn = all_drawn
      if report.notice ~= "" then
        H.append({ "", "⚠ Restored with repairs: " .. report.notice }, "PseudoClaudeNotice")
        vim.notify(
          ("pseudoclaude: session %s restored with repairs: %s"):format(report.id, report.notice),
          vim.log.levels.WARN
        )
      end
      H.resume_finished(report.id, pending.opts, report)
    end, function()
      stats.done_at = vim.uv.hrtime()
      if pending.opts.on_drawn then
        pcall(pending.opts.on_drawn, report)
      end
      vim.api.nvim_exec_autocmds("User", { pattern = "PseudoClaudeResumeDrawn", modeline = false, data = report })
    end, pending.opts.at)
  end,
}

--- Files the agent created or changed in the running turn, in order.
---@type {rel: string, path: string, outcome: string}[]
H.turn_files = {}
H.files_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_files")
--- The file of each line of a turn's file list, by extmark id.
---@type table<integer, string>
H.file_marks = {}

--- Under the turn's last answer: the files it created or changed, one line each (`keys.open_file` opens it).
function H.list_turn_files()
  local files = H.turn_files
  H.turn_files = {}
  if #files == 0 or not H.valid_buf(H.buf) then
    return
  end
  local seen, lines, paths = {}, { "", "Files changed in this turn:" }, {}
  for _, f in ipairs(files) do
    if not seen[f.path] then
      seen[f.path] = true
      lines[#lines + 1] = ("  ✎ %s (%s)"):format(f.rel, f.outcome)
      paths[#paths + 1] = f.path
    end
  end
  local start = H.append(lines, "PseudoClaudeNotice")
  for i, path in ipairs(paths) do
    local id = vim.api.nvim_buf_set_extmark(H.buf, H.files_ns, start + 1 + i, 0, {})
    H.file_marks[id] = path
  end
end

--- Opens the file of the list line under the cursor in the window the user was in before the chat.
function H.open_file_under_cursor()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local marks = vim.api.nvim_buf_get_extmarks(H.buf, H.files_ns, { row, 0 }, { row, -1 }, {})
  local path = marks[1] and H.file_marks[marks[1][1]]
  if not path then
    return false
  end
  local target
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if w ~= H.win and w ~= H.input_win and vim.api.nvim_win_get_config(w).relative == "" then
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

--- Tells the caller and the `User PseudoClaudeResumed` autocmd how a resume ended; a failure is also shown.
---@param id string
---@param opts pseudoclaude.ResumeOpts
---@param report pseudoclaude.ResumeReport
function H.resume_finished(id, opts, report)
  if not report.ok then
    require("pseudoclaude.errors").report(("cannot resume session %s: %s"):format(id, report.error))
  end
  H.redraw_winbar()
  if opts.on_done then
    local ok, err = pcall(opts.on_done, report)
    if not ok then
      require("pseudoclaude.errors").report(err)
    end
  end
  vim.api.nvim_exec_autocmds("User", { pattern = "PseudoClaudeResumed", modeline = false, data = report })
end

--- Shows what a tool wants to do and asks yes / no / always. A write or an edit of a text file opens its diff review
--- first (`pseudoclaude.review`), which stays visible while the question is asked; "Review hunk by hunk" lets the user
--- accept or reject each change block with the review's keys.
function H.ask_approval(m)
  local change = T.nonnil(m.change)
  if change and (#change.hunks == 0) then
    change = nil
  end
  local float, review
  if change then
    review = require("pseudoclaude.review").open(change, m.summary)
  else
    float = H.detail_float(m)
  end
  -- the stock vim.ui.select (inputlist) blocks before the screen is redrawn: draw the diff first, so it is what the
  -- user sees while the question waits
  vim.cmd("redraw")
  local choices = { "Yes", "No", "Always (this session)" }
  local by_hunk = "Review hunk by hunk"
  if change and #change.hunks > 1 then
    choices[#choices + 1] = by_hunk
  end
  local answers = { Yes = "yes", No = "no", ["Always (this session)"] = "always" }
  local function answer(call, ...)
    local ok, err = pcall(require("pseudoclaude.core").call, call, m.id, ...)
    if not ok then
      require("pseudoclaude.errors").report(err, vim.log.levels.WARN)
    end
    H.state.phase = "running tools"
    H.redraw_winbar()
  end
  vim.ui.select(choices, { prompt = ("Allow %s %s?"):format(m.tool, m.summary) }, function(choice)
    if float and vim.api.nvim_win_is_valid(float) then
      vim.api.nvim_win_close(float, true)
    end
    if choice == by_hunk and review then
      H.state.phase = "reviewing"
      H.redraw_winbar()
      return require("pseudoclaude.review").start(review, function(accepted)
        if #accepted == #change.hunks then
          answer("agent_approve", "yes")
        elseif #accepted == 0 then
          answer("agent_approve", "no")
        else
          answer("agent_approve_hunks", accepted)
        end
      end)
    end
    if review then
      require("pseudoclaude.review").close(review)
    end
    answer("agent_approve", answers[choice] or "no")
  end)
end

--- The floating window showing a command (or a diff that cannot be reviewed) while its approval is asked.
---@return integer? win
function H.detail_float(m)
  local detail = vim.split(m.detail or "", "\n", { plain = true })
  if #detail == 0 or detail[1] == "" then
    return nil
  end
  local b = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(b, 0, -1, false, detail)
  vim.bo[b].filetype = m.tool == "run_command" and "sh" or "diff"
  local width = math.min(vim.o.columns - 4, 100)
  local height = math.min(#detail, math.max(3, vim.o.lines - 10))
  return vim.api.nvim_open_win(b, false, {
    relative = "editor",
    row = 1,
    col = math.floor((vim.o.columns - width) / 2),
    width = width,
    height = height,
    border = "rounded",
    title = (" %s: %s "):format(m.tool, m.summary),
    style = "minimal",
  })
end

M._H = H

return M
