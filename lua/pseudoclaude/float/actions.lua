--- What the picker's keys do to the highlighted session (resume, delete, rename, pin, fork, the move to another
--- workspace), `:PseudoResume`'s completion and its resume of an id, and the `vim.ui.select()` backend. Loaded on the first
--- such key or command, not when the picker opens.

local M = {}

--- Each key's function is handed the picker's state (`s`, nil when it is closed) and asks the controller through its
--- methods (`s:selected()`, `s:close()`…): this module never requires float.lua.

---@param msg any
---@param level integer?
local function notify(msg, level)
  vim.notify(tostring(msg), level or vim.log.levels.ERROR)
end

--- Resumes the highlighted session: closes the picker, then calls `require("pseudoclaude.chat").resume(id)` (which
--- returns at once and reads the session in the background). A session open in another editor is refused with an
--- error message and the picker stays open.
---@param s pseudoclaude.float.State?
function M.resume_selected(s)
  if s and s.search then
    return require("pseudoclaude.float.search").resume_selected(s)
  end
  local item = s and s:selected()
  if not s or not item then
    return
  end
  if item.source then
    return M.import_and_resume(item, s)
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, holder = pcall(sessions.within, item.workspace, function()
    return sessions.holder(item.id)
  end)
  if not ok then
    return require("pseudoclaude.errors").report(holder)
  end
  holder = M.held_elsewhere(item.id, holder)
  if holder then
    if not item.held_by then
      item.held_by = holder
      s.previews[item.id], s.preview_id = nil, nil
      s:draw_rows()
      s:request_preview()
    end
    return notify(M.held_message(item, holder), vim.log.levels.ERROR)
  end
  local elsewhere = M.elsewhere(item)
  if elsewhere and not M.switch_ok(s, item, elsewhere) then
    return
  end
  s:close()
  vim.schedule(function()
    local done, err = pcall(M.resume_in, item.id, elsewhere)
    if not done then
      require("pseudoclaude.errors").report(err)
    end
  end)
end

--- Continues another agent's session (a row with `source`) with the agent that had it: closes the picker, then hands
--- it over on a worker thread (imported, or our copy of it taken, and recorded as that agent's ACP session) and resumes
--- it (`chat.resume()` with the agent's id of it). A compressed rollout is refused with its reason and the picker stays open.
---@param item pseudoclaude.ExternalSession
---@param s pseudoclaude.float.State? The picker, closed first (nil: the `vim.ui.select()` backend).
function M.import_and_resume(item, s)
  if item.unsupported then
    return notify(("pseudoclaude: %s cannot be imported: %s"):format(item.path or item.id, item.unsupported))
  end
  if s then
    s:close()
  end
  local ok, err = pcall(require("pseudoclaude.chat").resume, item.id)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

--- The highlighted session, for a key that changes it (`what`: "delete", "rename"…); nil when there is none, or when
--- it is another agent's (refused with a message: see `not_ours`).
---@param s pseudoclaude.float.State?
---@param what string
---@return pseudoclaude.SessionInfo?
function M.ours_selected(s, what)
  local item = s and s:selected()
  if item and item.source then
    M.not_ours(item, what)
    return nil
  end
  return item
end

--- Refuses a key that changes a session (`what`: "delete", "rename"…) on another agent's row: it is not ours until
--- imported, and its file is never written.
---@param item pseudoclaude.ExternalSession
---@param what string
function M.not_ours(item, what)
  local tool = ("a %s session"):format(require("pseudoclaude.float.render").tool_name(item))
  notify(
    ("pseudoclaude: cannot %s %s: it is only read (<CR> continues it with its agent)"):format(what, tool),
    vim.log.levels.WARN
  )
end

--- The `vim.ui.select()` backend's resume of a session of another workspace: asks first (`vim.ui.select` again, so a
--- replaced `vim.ui.select` asks it too).
---@param item pseudoclaude.SessionInfo
function M.resume_elsewhere(item)
  local ws = assert(M.elsewhere(item))
  local question = ("Session %q is in %s. Switch the chat's workspace there?"):format(
    require("pseudoclaude.float.render").title(item),
    vim.fn.fnamemodify(ws, ":~")
  )
  vim.ui.select({ "Yes", "No" }, { prompt = question, kind = "pseudoclaude.switch_workspace" }, function(choice)
    if choice == "Yes" then
      local ok, err = pcall(M.resume_in, item.id, ws)
      if not ok then
        require("pseudoclaude.errors").report(err)
      end
    end
  end)
end

--- The workspace of a `:PseudoResume all` row when it is not the chat's own, else nil.
---@param item pseudoclaude.SessionInfo
---@return string?
function M.elsewhere(item)
  local ws = type(item.workspace) == "string" and item.workspace or nil
  if not ws then
    return nil
  end
  local here = require("pseudoclaude.config").workspace()
  return (vim.uv.fs_realpath(here) or here) ~= ws and ws or nil
end

--- Asks whether the chat may move to `workspace`, the one of `item` (a `:PseudoResume all` row).
---@param s pseudoclaude.float.State
---@param item pseudoclaude.SessionInfo
---@param workspace string
---@return boolean
function M.switch_ok(s, item, workspace)
  local question = ("Session %q is in %s. Switch the chat's workspace there?"):format(
    require("pseudoclaude.float.render").title(item),
    vim.fn.fnamemodify(workspace, ":~")
  )
  return M.confirm(question, s) and s:is_current()
end

--- Resumes session `id`, first switching the chat to `workspace` when one is given; a failed resume switches back.
---@param id string
---@param workspace string?
function M.resume_in(id, workspace)
  if not workspace then
    return require("pseudoclaude.chat").resume(id)
  end
  local chat = require("pseudoclaude.chat")
  local before = chat.set_workspace(workspace)
  require("pseudoclaude.chat").resume(id, {
    on_done = function(report)
      if not report.ok then
        chat.set_workspace(before)
      end
    end,
  })
end

--- Deletes the highlighted session after asking (y/N on the command line); the picker stays open on the next one.
---@param s pseudoclaude.float.State?
function M.delete_selected(s)
  local item = M.ours_selected(s, "delete")
  if not s or not item then
    return
  end
  local question = ("Delete session %q (%s)?"):format(require("pseudoclaude.float.render").title(item), item.id)
  if not M.confirm(question, s) or not s:is_current() then
    return
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.delete(item.id)
  end)
  if not ok then
    return notify(err, vim.log.levels.ERROR)
  end
  s:remove(item.id)
end

--- Renames the highlighted session: asks for the name on the command line, prefilled with its title (an empty name
--- gives it back its automatic title; <Esc> changes nothing).
---@param s pseudoclaude.float.State?
function M.rename_selected(s)
  local item = M.ours_selected(s, "rename")
  if not s or not item then
    return
  end
  local title = M.ask("Rename session: ", item.title or "")
  if not title or not s:is_current() then
    return
  end
  M.mark(s, "rename", item, title)
end

--- Pins the highlighted session, or unpins it: pinned sessions come first.
---@param s pseudoclaude.float.State?
function M.toggle_pin_selected(s)
  local item = M.ours_selected(s, "pin")
  if s and item then
    M.mark(s, "pin", item, not item.pinned)
  end
end

--- Forks the highlighted session at its end ("resume as new") and resumes the fork; the session itself is untouched.
---@param s pseudoclaude.float.State?
function M.fork_selected(s)
  local item = M.ours_selected(s, "fork")
  if not s or not item then
    return
  end
  local elsewhere = M.elsewhere(item)
  if elsewhere and not M.switch_ok(s, item, elsewhere) then
    return
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.fork(item.id, nil, {
      on_done = function(ferr, forked)
        if ferr then
          return notify(ferr, vim.log.levels.ERROR)
        end
        s:close()
        vim.schedule(function()
          local done, rerr = pcall(M.resume_in, forked.id, elsewhere)
          if not done then
            require("pseudoclaude.errors").report(rerr)
          end
        end)
      end,
    })
  end)
  if not ok then
    notify(err, vim.log.levels.ERROR)
  end
end

--- Completion of `:PseudoResume`: "last", "all" and the session ids, most recently active first, that start with
--- `arglead`. Reads folder names only (no log), so it stays instant at 10,000 sessions.
---@param arglead string
---@return string[]
function M.complete(arglead)
  local out = {}
  for _, word in ipairs({ "last", "all" }) do
    if vim.startswith(word, arglead) then
      out[#out + 1] = word
    end
  end
  local ok, ids = pcall(require("pseudoclaude.sessions").ids)
  if ok then
    local current = require("pseudoclaude.sessions").current_id()
    for _, id in ipairs(ids) do
      if id ~= current and vim.startswith(id, arglead) then
        out[#out + 1] = id
      end
    end
  end
  return out
end

--- Asks a yes/no question on the command line; only "y" or "Y" is yes. (Not `vim.fn.confirm()`, which answers
--- its default without asking when no UI is attached.)
---@param question string
---@param s pseudoclaude.float.State? The picker asking, if any.
---@return boolean
function M.confirm(question, s)
  vim.cmd.redraw()
  vim.api.nvim_echo({ { question .. " [y/N] ", "Question" } }, false, {})
  if s then
    s.asking = question -- for whoever drives the picker (tests, a plugin): it waits for this key
  end
  local ok, key = pcall(vim.fn.getcharstr)
  if s then
    s.asking = nil
  end
  vim.api.nvim_echo({ { "" } }, false, {})
  return ok and (key == "y" or key == "Y")
end

--- Asks for a line on the command line, prefilled with `default`; nil when cancelled. (Not `vim.ui.input()`: a
--- floating input would leave the prompt window, which closes the picker.)
---@param prompt string
---@param default string
---@return string?
function M.ask(prompt, default)
  local cancelled = "\1cancelled"
  local ok, answer = pcall(vim.fn.input, { prompt = prompt, default = default, cancelreturn = cancelled })
  if not ok or answer == cancelled then
    return nil
  end
  return answer
end

--- Writes a name (`what` = "rename") or a pin ("pin") for session `item` in the background; the row follows when the
--- line is on disk.
---@param s pseudoclaude.float.State
---@param what "rename"|"pin"
---@param item pseudoclaude.SessionInfo
---@param value string|boolean
function M.mark(s, what, item, value)
  local id = item.id
  local sessions = require("pseudoclaude.sessions")
  local function done(merr, info)
    if merr then
      return notify(merr, vim.log.levels.ERROR)
    end
    if s:is_current() and info then
      info.workspace = item.workspace
      s.marked[id] = info
      local finder = require("pseudoclaude.float.finder")
      s:set_items(finder.with_marks(s, finder.plain(s)))
      for _, hit in ipairs(s.search and s.search.hits or {}) do
        if hit.id == id then
          hit.title = info.title
        end
      end
      s.previews[id], s.preview_id = nil, nil
      s:refresh()
    end
  end
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions[what](id, value, done)
  end)
  if not ok then
    notify(err, vim.log.levels.ERROR)
  end
end

--- `holder` (who holds session `id`'s lock), unless it is a chat of this editor: resuming that shows the chat.
---@param id string
---@param holder string?
---@return string?
function M.held_elsewhere(id, holder)
  if holder and require("pseudoclaude.float.render").live()[id] then
    return nil
  end
  return holder
end

---@param item pseudoclaude.SessionInfo
---@param holder string
---@return string
function M.held_message(item, holder)
  return ("pseudoclaude: session %s (%s) is open in another editor (%s); close it there first"):format(
    require("pseudoclaude.float.render").title(item),
    item.id,
    holder
  )
end

--- Resumes session `id` unless another editor holds it; raises otherwise. Reads no log: the resume itself runs in
--- the background.
---@param id string
function M.resume(id)
  local holder = M.held_elsewhere(id, require("pseudoclaude.sessions").holder(id))
  if holder then
    error(M.held_message({ id = id }, holder), 0)
  end
  require("pseudoclaude.chat").resume(id)
end

--- The `vim.ui.select()` backend: every session, newest first, one line each (read in the background); with
--- `external`, the other agents' sessions too, marked by their tool (and theirs when there is none of ours).
---@param all boolean?
---@param external boolean?
function M.select(all, external)
  require("pseudoclaude.sessions").list_async({ all = all, external = external }, function(err, items)
    if err then
      return require("pseudoclaude.errors").report(err)
    end
    if #(items or {}) == 0 and not external then
      -- none of ours: the other agents' sessions are what there is to resume (as the float picker does)
      return M.select(all, true)
    end
    if #(items or {}) == 0 then
      local where = all and "any workspace" or require("pseudoclaude.sessions").workspace()
      return notify(
        ("pseudoclaude: no session to resume in %s, ours or another agent's"):format(where),
        vim.log.levels.INFO
      )
    end
    M.select_from(items)
  end)
end

---@param items pseudoclaude.SessionInfo[]
function M.select_from(items)
  local render = require("pseudoclaude.float.render")
  local now = os.time()
  vim.ui.select(items, {
    prompt = "Resume session",
    kind = "pseudoclaude.session",
    format_item = function(item)
      local parts = { render.title(item), render.age(now - render.activity(item)), render.count(item.messages) }
      if item.source then
        table.insert(parts, 1, render.source_name(item))
      end
      if (item.model or "") ~= "" then
        parts[#parts + 1] = item.model
      end
      if type(item.branch) == "string" then
        parts[#parts + 1] = item.branch
      end
      if type(item.cost) == "number" then
        parts[#parts + 1] = require("pseudoclaude.usage").cost(item.cost)
      end
      local chat = render.live()[item.id]
      if chat then
        parts[#parts + 1] = "live: " .. chat.state
      elseif item.held_by then
        parts[#parts + 1] = "open in another editor"
      end
      if type(item.workspace) == "string" then
        parts[#parts + 1] = vim.fn.fnamemodify(item.workspace, ":~")
      end
      return table.concat(parts, " · ")
    end,
  }, function(item)
    if item then
      M.resume_item(item)
    end
  end)
end

--- Resumes a list item picked outside the float (`vim.ui.select()`, the native pickers): another agent's session is
--- imported first, a session of another workspace asks before the chat moves there, one open in another editor is
--- refused with a message. Errors are reported, never raised.
---@param item pseudoclaude.SessionInfo|pseudoclaude.ExternalSession
function M.resume_item(item)
  if item.source then
    return M.import_and_resume(item)
  end
  local ok, err = pcall(function()
    if M.elsewhere(item) then
      return M.resume_elsewhere(item)
    end
    M.resume(item.id)
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

return M
