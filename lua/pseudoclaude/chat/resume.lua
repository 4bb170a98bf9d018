--- Which session a resume takes when none is named (`resume("last")`, `:PseudoResume last`): the newest of ours;
--- with none of ours, the newest of the other agents', continued by the agent that had it, as `<CR>` on its row in the
--- picker does (a workspace whose history is all in a terminal agent's store has still a "last" conversation).

local M = {}

--- The session `resume("last")` takes. Returns the id of the newest session of ours (read from the folder names, at
--- once); with none, returns nil and looks for the newest of the other agents' on a worker thread, then calls
--- `resume(its id, opts)` (the hand-over to its agent) after saying whose it is, or ends the resume with the reason
--- there is nothing to resume (`resume_finished`).
---@param opts pseudoclaude.ResumeOpts
---@param resume fun(id: string, opts: pseudoclaude.ResumeOpts) `chat.resume` (handed in: the parts never require chat.lua)
---@return string?
function M.last(opts, resume)
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
      return resume(row.id, opts) -- one of ours, written meanwhile
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
    resume(row.id, opts)
  end)
  return nil
end

return M
