--- What the core reports, drawn as it comes: the queue drained on every wake-up of the main loop, one handler per
--- event kind (`pseudoclaude.Event`, see `types.lua`), and the list of the files a turn changed.
---
--- Architecture invariant: the core's queue is drained whole on each wake-up (the libuv handle merges wake-ups).

local M = {}
local S = require("pseudoclaude.chat.state")
local V = require("pseudoclaude.chat.view")
local T = require("pseudoclaude.transcript")

--- Opens (or focuses) the agent buffer: the controller's `chat.open`, set by chat.lua, which requires this module
--- (so this one never requires it).
---@type fun(): integer
M.open_chat = function()
  error("pseudoclaude.chat.events: open_chat is set by chat.lua", 0)
end

-- Events from the core ----------------------------------------------------------------------------------------------

function M.on_wake()
  local ok, msgs = pcall(require("pseudoclaude.core").call, "agent_drain")
  if not ok then
    require("pseudoclaude.errors").report(msgs)
    return
  end
  -- each message is drawn in its chat's buffer, with that chat active (`state.lua`); one about no chat (an MCP
  -- server's consent) with the current one
  local touched = {}
  for _, m in ipairs(M.merge_deltas(msgs)) do
    local handler = M.handlers[m.type]
    local n = m.chat or S.current
    -- a chat closed meanwhile: what its cancelled turn still reports has nowhere to go
    if handler and S.chats[n] then
      local hok, herr = pcall(S.with, n, handler, m)
      if not hok then
        require("pseudoclaude.errors").report(herr)
      end
      touched[n] = true
    end
  end
  for n in pairs(touched) do
    S.with(n, V.redraw_winbar)
  end
end

--- A wake-up's consecutive `text_delta`s of one chat as one: each draw rewrites the transcript's last line, so an
--- agent's burst (10,000 chunks in one wake-up) drawn piece by piece would copy that line 10,000 times.
---@param msgs pseudoclaude.Event[]
---@return pseudoclaude.Event[]
function M.merge_deltas(msgs)
  local out, pieces = {}, nil
  for _, m in ipairs(msgs) do
    local prev = out[#out]
    if pieces and m.type == "text_delta" and prev.chat == m.chat then
      pieces[#pieces + 1] = m.text
    else
      if pieces and #pieces > 1 then
        prev.text = table.concat(pieces)
      end
      pieces = m.type == "text_delta" and { m.text } or nil
      out[#out + 1] = m
    end
  end
  if pieces and #pieces > 1 then
    out[#out].text = table.concat(pieces)
  end
  return out
end

--- What the User events say of the chat they are about: `id` (its session, or "chat:N" before one), `chat` (N).
---@param data table
---@return table data
function M.about_chat(data)
  data.id = data.id or S.state.session or ("chat:" .. S.chat)
  data.chat = S.chat
  return data
end

--- The answer starts streaming: its header (when the renderer would draw one), then the line the text flows into.
function M.begin_agent_block()
  if S.streaming then
    return
  end
  local m = { role = "assistant" }
  local row = V.draw_message(m, true)
  local text_row = V.append({ "" })
  -- the answer's mark goes on now, where it starts; it becomes a message when recorded (or kept on an interruption)
  if V.valid_buf(S.buf) then
    S.open_block = { mark = V.mark_message(row or text_row or 0), has_text = false }
  end
  S.streaming = true
end

--- A turn stopped while an answer streamed: the core kept its text as a message when there was any; otherwise the
--- mark placed for it numbers nothing.
function M.close_block()
  local block = S.open_block
  S.open_block = nil
  if block and not block.has_text and block.mark and V.valid_buf(S.buf) then
    pcall(vim.api.nvim_buf_del_extmark, S.buf, S.msg_ns, block.mark)
  end
end

--- The tools whose result may mean files changed under the buffers: our `run_command`, and an ACP agent's own kinds
--- of tool (its shell and its edits bypass the editor).
local CHANGES_FILES = { run_command = true, execute = true, edit = true, delete = true, move = true }

--- One handler per event the core queues (see lua/pseudoclaude/types.lua for their shapes).
---@type table<pseudoclaude.EventType, fun(m: pseudoclaude.Event)>
---@type table<pseudoclaude.EventType, fun(m: pseudoclaude.Event)>
M.handlers = {
  user_recorded = function(m)
    S.streaming = false
    V.draw_message({ role = "user", content = m.text })
    S.refresh_status()
  end,
  text_delta = function(m)
    M.begin_agent_block()
    if S.open_block and m.text:find("%S") then
      S.open_block.has_text = true
    end
    if next(S.live) and require("pseudoclaude.chat.calls").at_end() then
      V.append({ "" }) -- never glued to a running call's lines
    end
    V.append_text(m.text)
  end,
  thinking_delta = function(m)
    M.begin_agent_block()
    local th = S.thinking
    if not th and V.valid_buf(S.buf) then
      -- the thinking takes the row the text would have started on; the text gets a row of its own under it
      th = { row = vim.api.nvim_buf_line_count(S.buf) - 1, text = "" }
      S.thinking = th
      V.append({ "" })
      vim.api.nvim_buf_set_extmark(
        S.buf,
        S.ns,
        th.row,
        0,
        { line_hl_group = require("pseudoclaude.highlights").TRANSCRIPT.thinking }
      )
    end
    if not th then
      return
    end
    th.text = th.text .. m.text
    -- one line while it streams, as it will stay folded: the count moves, nothing scrolls
    V.set_line(th.row, T.thinking_line(T.count_lines(th.text), false))
  end,
  thinking_done = function(m)
    local th = S.thinking
    S.thinking = nil
    local text = th and T.thinking_text({ { thinking = th.text } }) or ""
    if not th or not V.valid_buf(S.buf) then
      return
    end
    if text == "" then
      V.set_line(th.row, nil)
      return
    end
    -- drawn as the renderer draws it, so that a restore shows the same lines
    local line, body = T.thinking_lines(text, m.ms)
    V.set_line(th.row, line, body)
    if S.open_block then
      S.open_block.thought = true
    end
  end,
  tool_call_started = function(m)
    S.names[m.id] = m.name
  end,
  tool_call_live = function(m)
    S.names[m.id] = m.name
    S.state.phase = "running tools"
    require("pseudoclaude.chat.calls").show(m)
  end,
  assistant_recorded = function(m)
    local calls = m.tool_calls or {}
    -- a call drawn while it ran gives its place to the renderer's lines, as a restore draws them
    for _, c in ipairs(next(S.live) and calls or {}) do
      require("pseudoclaude.chat.calls").drop(c.id)
    end
    -- streamed: its mark is in place already
    local marked = S.open_block ~= nil
    if S.open_block and S.open_block.thought and not S.open_block.has_text then
      V.drop_empty_last_line() -- thought, then no text: the calls come right under the thinking, as restored
    end
    S.open_block = nil
    if #calls > 0 then
      -- the calls, drawn as the renderer draws them after the text (under a header when nothing streamed)
      V.draw_message({ role = "assistant", tool_calls = calls }, marked)
      S.state.phase = "running tools"
    elseif not marked and V.valid_buf(S.buf) then
      V.mark_message(vim.api.nvim_buf_line_count(S.buf) - 1) -- an empty answer: a message all the same
    end
    S.prev = { role = "assistant" }
    S.streaming = false
  end,
  tool_result = function(m)
    S.names[m.id] = m.name or S.names[m.id]
    if CHANGES_FILES[m.name] then
      -- the command may have changed files that buffers show: reload them, or warn, as Neovim does
      require("pseudoclaude.editor").checktime()
    end
    -- a large output comes cut by the core, with its whole line count (`src/display.rs`), as a restore has it
    V.draw_message({
      role = "user",
      tool_result = { tool_call_id = m.id, content = m.content or "", is_error = m.is_error },
      cut_bytes = m.cut_bytes,
      lines = m.lines,
    })
    -- The answer after the tools is a block of its own, never glued to a (folded) result.
    S.streaming = false
    S.state.phase = "answering"
  end,
  retrying = function(m)
    V.append(
      { ("… retrying (attempt %d) in %.1fs: %s"):format(m.attempt, m.wait_ms / 1000, m.reason) },
      "PseudoClaudeNotice"
    )
  end,
  usage = function()
    -- the totals are read back from the status, not taken from the event: the status prices them with the
    -- configuration in effect now, which a setup() during the session may have changed
    S.refresh_status()
  end,
  compacted = function()
    V.append({ "", "[older history was summarised to fit the model's context]" }, "PseudoClaudeNotice")
    S.streaming = false
    S.marks_stale = true
  end,
  saved = function(m)
    S.state.saved = m.ok
    S.state.save_error = m.error
    if not m.ok then
      vim.notify(
        "pseudoclaude: the session log could not be written: " .. tostring(S.state.save_error),
        vim.log.levels.ERROR
      )
    end
  end,
  error = function(m)
    M.close_block()
    V.append({ "", "✗ " .. m.message }, "PseudoClaudeError")
    S.streaming = false
    vim.notify("pseudoclaude: " .. m.message, vim.log.levels.ERROR)
  end,
  notice = function(m)
    V.append({ "⚠ " .. m.text }, "PseudoClaudeNotice")
  end,
  -- what the chat is doing, as the core decides it: sent after the rest of each wake-up's messages about the chat
  state = function(m)
    S.state.state = m.state
  end,
  plan = function(m)
    V.append({ m.text }, "PseudoClaudeNotice")
  end,
  mcp_consent = function(m)
    require("pseudoclaude.chat.consent").ask(m)
  end,
  cancelled = function()
    M.close_block()
    V.append({ "", "[cancelled]" }, "PseudoClaudeNotice")
    S.streaming = false
  end,
  turn_done = function(m)
    if next(S.live) then
      require("pseudoclaude.chat.calls").end_turn()
    end
    M.list_turn_files()
    S.state.busy = false
    S.state.phase = "idle"
    S.streaming = false
    S.asks, S.notified = {}, false
    S.refresh_status()
    vim.api.nvim_exec_autocmds("User", {
      pattern = "PseudoClaudeTurnDone",
      modeline = false,
      data = M.about_chat({ stop_reason = m.stop_reason, session = S.state.session }),
    })
  end,
  approval = function(m)
    S.state.phase = "waiting for approval"
    require("pseudoclaude.chat.approval").ask_approval(m)
  end,
  buffer_check = function(m)
    require("pseudoclaude.editor").on_buffer_check(m)
  end,
  buffer_read = function(m)
    require("pseudoclaude.editor").on_buffer_read(m)
  end,
  file_written = function(m)
    require("pseudoclaude.editor").on_written(m)
    if m.outcome ~= "failed" then
      S.turn_files[#S.turn_files + 1] = { rel = m.rel, path = m.path, outcome = m.outcome }
    end
  end,
  resumed = function(m)
    local pending = S.resumes[m.ticket]
    S.resumes[m.ticket] = nil
    if not pending then
      return
    end
    if not m.ok then
      S.state.phase = S.state.busy and S.state.phase or "idle"
      return require("pseudoclaude.chat.restore").resume_finished(pending.id, pending.opts, {
        ok = false,
        id = pending.id,
        error = require("pseudoclaude.errors").plain(m.error or "the session could not be restored"),
      })
    end
    local report = m.report
    report.ok = true
    local stats = S.last_stats and S.last_stats.id == pending.id and S.last_stats or {}
    stats.read_at = vim.uv.hrtime()
    S.state.saved, S.state.save_error, S.state.busy = true, nil, false
    S.state.phase = "idle"
    M.open_chat()
    S.restore_stats = stats
    report.at = pending.opts.at
    require("pseudoclaude.chat.restore").restore(function(all_drawn)
      -- The session is current and its end is on screen: the history is in place.
      stats.in_place_at = vim.uv.hrtime()
      report.drawn = all_drawn
      if report.notice ~= "" then
        V.append({ "", "⚠ Restored with repairs: " .. report.notice }, "PseudoClaudeNotice")
        vim.notify(
          ("pseudoclaude: session %s restored with repairs: %s"):format(report.id, report.notice),
          vim.log.levels.WARN
        )
      end
      -- how another agent's session goes on: handed over by id (`opts.notice`) or, a kept copy, by this resume
      local handed = pending.opts.notice or report.handed_over
      if handed then
        V.append({ "", "⚠ " .. handed }, "PseudoClaudeNotice")
      end
      require("pseudoclaude.chat.restore").resume_finished(report.id, pending.opts, report)
    end, function()
      stats.done_at = vim.uv.hrtime()
      if pending.opts.on_drawn then
        pcall(pending.opts.on_drawn, report)
      end
      vim.api.nvim_exec_autocmds(
        "User",
        { pattern = "PseudoClaudeResumeDrawn", modeline = false, data = M.about_chat(report) }
      )
    end, pending.opts.at)
  end,
}

--- Under the turn's last answer: the files it created or changed, one line each (`keys.open_file` opens it).
function M.list_turn_files()
  local files = S.turn_files
  S.turn_files = {}
  if #files == 0 or not V.valid_buf(S.buf) then
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
  local start = V.append(lines, "PseudoClaudeNotice")
  for i, path in ipairs(paths) do
    local id = vim.api.nvim_buf_set_extmark(S.buf, S.files_ns, start + 1 + i, 0, {})
    S.file_marks[id] = path
  end
end

return M
