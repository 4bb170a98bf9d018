--- A resume started: which session it takes (`resume("last")`: the newest of ours; with none of ours, the newest of the
--- other agents', continued by the agent that had it, as `<CR>` on its row in the picker does: a workspace whose
--- history is all in a terminal agent's store has still a "last" conversation), another agent's session handed back to
--- that agent first, then the read asked of the core; chat/events.lua draws it when read (chat/restore.lua).

local M = {}
local H = {}
local S = require("pseudoclaude.chat.state")
local V = require("pseudoclaude.chat.view")

--- What this module calls of chat.lua, handed in by it (the parts never require chat.lua: no import circle).
---@type {show: fun(n: integer), configure: fun()}
M.chat = {
  show = function() end,
  configure = function() end,
}

---@class pseudoclaude.ResumeOpts
---@field on_done fun(report: pseudoclaude.ResumeReport)? Called when the history is in place (the session is current
--- and its end drawn), or the resume failed.
---@field on_drawn fun(report: pseudoclaude.ResumeReport)? Called when every older message is drawn too.
---@field at integer? Put the cursor on this message (1-based, as in `sessions.load(id).messages`), in the transcript
--- window, once it is drawn (older messages are drawn last: the cursor follows it while they are).
---@field notice string? A line the chat shows under the history once it is in place (how a hand-over goes on).

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
---@field handover table? Another agent's session handed to that agent (`resume(id)` with its id): `{id, agent, way,
--- message, messages, existing, notes, agent_copy}` (src/acp/handover.rs).
---@field handed_over string? A kept copy of another agent's session handed to that agent by this resume: how it goes on.

--- Restores session `id` ("last" or nil: the most recent other session of ours; with none, the newest of the other
--- agents', handed to its agent) into the agent buffer. Returns at once: the
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
  -- the host knows the agents as configured now: a session of an ACP agent is resumed with that agent's entry
  M.chat.configure()
  if id == nil or id == "last" then
    -- none of ours: the newest of the other agents' is looked for on a worker, then resumed
    id = H.last(opts)
    if not id then
      return
    end
  end
  if require("pseudoclaude.sessions").is_external_id(id) then
    -- another agent's session (`gemini:…`): continued with that agent (`:help pseudoclaude-continue`)
    return H.hand_over(id, opts)
  end
  local live = require("pseudoclaude.core").call("agent_chat_live", id)
  if live and S.chats[live] then
    -- live in this editor: its chat is shown, not opened twice
    M.chat.show(live)
    return require("pseudoclaude.chat.restore").resume_finished(id, opts, { ok = true, id = id, live = true })
  end
  local ok, ticket = pcall(require("pseudoclaude.core").call, "agent_resume_async", id, S.chat)
  if not ok then
    require("pseudoclaude.chat.restore").resume_finished(
      id,
      opts,
      { ok = false, id = id, error = require("pseudoclaude.errors").plain(ticket) }
    )
    return
  end
  S.resumes[ticket] = { id = id, opts = opts, started = vim.uv.hrtime(), chat = S.chat }
  S.last_stats = { id = id, asked_at = S.resumes[ticket].started, slices = 0 }
  S.state.phase = "restoring " .. id
  V.redraw_winbar()
end

---@class pseudoclaude.ResumeStats Timestamps are `vim.uv.hrtime()` values (ns), for benchmarks.
---@field id string
---@field asked_at integer `resume()` called
---@field read_at integer? the core has read the session (the switch-over is done)
---@field first_at integer? the first screenful (the end of the history) drawn
---@field in_place_at integer? the report given (`on_done`, `PseudoClaudeResumed`)
---@field done_at integer? all of the history drawn
---@field slices integer main-loop steps that drew it

--- Hands another agent's session (`id`: that agent's id of it, as a `sessions.list({ external = true })` row gives it)
--- back to its agent on a worker thread (imported, or our copy of it taken, and recorded as that agent's ACP session:
--- src/acp/handover.rs), then resumes it; the chat shows how it goes on once the history is in place, and the
--- report carries `handover`.
---@param id string
---@param opts pseudoclaude.ResumeOpts
function H.hand_over(id, opts)
  local restore = require("pseudoclaude.chat.restore")
  local ws = require("pseudoclaude.sessions").workspace()
  require("pseudoclaude.core").call_as(
    "pseudoclaude.resume",
    "sessions_hand_over_async",
    ws,
    { id = id },
    function(ok, handed)
      if not ok then
        local err = require("pseudoclaude.errors").plain(handed)
        return restore.resume_finished(id, opts, { ok = false, id = id, error = err })
      end
      local on_done = opts.on_done
      M.resume(
        handed.id,
        vim.tbl_extend("force", opts, {
          notice = handed.message,
          on_done = function(report)
            report.handover = handed
            if on_done then
              on_done(report)
            end
          end,
        })
      )
    end
  )
end

--- The session `resume("last")` takes. Returns the id of the newest session of ours (read from the folder names, at
--- once); with none, returns nil and looks for the newest of the other agents' on a worker thread, then calls
--- `resume(its id, opts)` (the hand-over to its agent) after saying whose it is, or ends the resume with the reason
--- there is nothing to resume (`resume_finished`).
---@param opts pseudoclaude.ResumeOpts
---@return string?
function H.last(opts)
  local sessions = require("pseudoclaude.sessions")
  local newest = sessions.newest()
  if newest then
    return newest.id
  end
  local ws = sessions.workspace()
  local function fail(why)
    require("pseudoclaude.chat.restore").resume_finished("last", opts, { ok = false, id = "last", error = why })
  end
  -- the stores' heads only (`max_read`), the newest first: one row is read, however many the agents keep
  sessions.list_async({ external = true, limit = 1, check_locks = false, max_read = 0 }, function(err, rows)
    if err then
      return fail(err)
    end
    local row = rows and rows[1]
    if not row then
      return fail(("there is no session to resume in %s, ours or another agent's"):format(ws))
    end
    if not row.source then
      return M.resume(row.id, opts) -- one of ours, written meanwhile
    end
    local render = require("pseudoclaude.float.render")
    if row.unsupported then
      return fail(
        ("%s's newest session (%s) cannot be imported: %s"):format(render.tool_name(row), row.id, row.unsupported)
      )
    end
    vim.notify(
      ("pseudoclaude: no session of ours in %s; continuing the newest of the other agents': %s's %q, with %s"):format(
        ws,
        render.tool_name(row),
        render.title(row),
        render.source_name(row)
      ),
      vim.log.levels.INFO
    )
    M.resume(row.id, opts)
  end)
  return nil
end

return M
