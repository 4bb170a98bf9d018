--- A resumed history put in the agent buffer: the first screenful at once, the rest in slices of one short main-loop
--- step each, older slices above, so typing is never held up by a long session.

local M = {}
local S = require("pseudoclaude.chat.state")
local V = require("pseudoclaude.chat.view")
local T = require("pseudoclaude.transcript")

--- Draws the current history from scratch, from its end backwards, one slice per main-loop step (the first
--- screenful at once): `on_first(all_drawn)` runs once the end is drawn, `on_done()` when all of it is. With `at`,
--- the cursor goes to that message (1-based) when its slice is drawn, and stays on it while older ones are.
---@param on_first fun(all_drawn: boolean)?
---@param on_done fun()?
---@param at integer? Put the cursor on this message (1-based) once its slice is drawn.
---@param at_once boolean? Draw the end in this step (a chat being opened), not the next one.
function M.restore(on_first, on_done, at, at_once)
  if not V.valid_buf(S.buf) then
    if on_first then
      on_first(true)
    end
    return on_done and on_done()
  end
  S.restore_gen = S.restore_gen + 1
  local gen = S.restore_gen
  V.clear()
  S.jump = nil
  vim.api.nvim_buf_clear_namespace(S.buf, S.jump_ns, 0, -1)
  local core = require("pseudoclaude.core")
  local first = true
  -- each slice is drawn with this chat active, whichever the user works in by then
  local step
  step = S.bind(function(to)
    if gen ~= S.restore_gen or not V.valid_buf(S.buf) then
      return
    end
    local t0 = vim.uv.hrtime()
    local ok, slice = pcall(core.call, "agent_history_slice", to, S.SLICE_MESSAGES, S.SLICE_BYTES, S.chat)
    if ok then
      ok, slice = pcall(core.decode, slice)
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
      S.prev = msgs[#msgs] or slice.prev or S.prev
      for k, v in pairs(slice.names or {}) do
        S.names[k] = v
      end
    end
    for _, m in ipairs(msgs) do
      for _, c in ipairs(m.tool_calls or {}) do
        S.names[c.id] = c.name
      end
    end
    local lines, marks, folds, starts = T.render(msgs, { prev = slice.prev, names = slice.names })
    V.draw(lines, marks, folds, not first, starts)
    local stats = S.restore_stats
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
      V.scroll_to_end()
      S.refresh_status()
      V.redraw_winbar()
    end
    first = false
    if at then
      local k = at - slice.from
      if S.jump then
        V.follow_jump()
      elseif k >= 1 and k <= #msgs then
        -- each slice is drawn above the ones before it: its own lines start at the top; the cursor goes below the
        -- message's header, on its first own line
        local row = starts[k]
        if lines[row + 1] == (T.header_for(msgs[k])) and not msgs[k].tool_result then
          row = row + 1
        end
        V.place_jump(row)
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
      if at and not S.jump then
        vim.notify(
          ("pseudoclaude: this session has no message %d (it has %d); showing its end"):format(at, slice.total or 0),
          vim.log.levels.WARN
        )
      end
      if not S.jump and V.valid_win(S.win) and vim.api.nvim_get_current_win() ~= S.win then
        V.scroll_to_end()
      end
      S.restore_stats = nil
      if on_done then
        on_done()
      end
    end
  end)
  -- `to` past the end (the largest integer that crosses to Rust as one): the whole history, in this step when the
  -- caller needs it now (a chat being opened).
  if at_once then
    return step(2147483647)
  end
  -- Otherwise a step of its own (opening the windows and clearing the buffer were this one's work), drawing the
  -- history as it is now: a message added before that step runs (a turn sent at once) is drawn by its own event, so
  -- it must not be drawn here too.
  local counted, now = pcall(core.call, "agent_history_slice", 0, 0, 0, S.chat)
  local upto = counted and (core.decode(now).total or 2147483647) or 2147483647
  vim.schedule(function()
    step(upto)
  end)
end

--- Tells the caller and the `User PseudoClaudeResumed` autocmd how a resume ended; a failure is also shown.
---@param id string
---@param opts pseudoclaude.ResumeOpts
---@param report pseudoclaude.ResumeReport
function M.resume_finished(id, opts, report)
  report.chat = report.chat or S.chat
  if not report.ok then
    local what = id == "last" and "the last session" or ("session " .. id)
    require("pseudoclaude.errors").report(("cannot resume %s: %s"):format(what, report.error))
  end
  V.redraw_winbar()
  if opts.on_done then
    local ok, err = pcall(opts.on_done, report)
    if not ok then
      require("pseudoclaude.errors").report(err)
    end
  end
  vim.api.nvim_exec_autocmds("User", { pattern = "PseudoClaudeResumed", modeline = false, data = report })
end

return M
