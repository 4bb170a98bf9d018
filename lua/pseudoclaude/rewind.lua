--- Rewind (`:PseudoRewind`, `require("pseudoclaude").rewind()`): the current session back to just before one of your
--- messages, its code, its conversation or both, and the undo of the last rewind. The core plans and writes on its
--- worker threads; here the editor's side: which buffers hold unsaved changes (never written), the reload of the
--- others, the history redrawn, the rewound message back in the input window. See `:help pseudoclaude-rewind`.

local M = {}
local H = {}

---@class pseudoclaude.RewindOpts
---@field code boolean? Put the files back (default true).
---@field conversation boolean? Cut the history (default true).
---@field force string[]? Paths to put back although you changed them after the agent.
---@field dry_run boolean? Only say what would happen (nothing is written but a checkpoint).
---@field on_done fun(report: pseudoclaude.RewindReport)?

---@class pseudoclaude.RewindConflict
---@field path string
---@field why string

---@class pseudoclaude.RewindReport
---@field ok boolean
---@field restored string[] Paths written back.
---@field removed string[] Paths the agent had created, removed.
---@field conflicts pseudoclaude.RewindConflict[] Paths left as they are, each with why.
---@field error string?
---@field text string The rewound message's text (put back in the input window).
---@field id string The session rewound (its chat's "chat:N" before it has one).
---@field chat integer The number of the chat it was done in (see `chats()`).

--- Rewinds to just before user message `index` (1-based, as in `messages()`).
---@param index integer
---@param opts pseudoclaude.RewindOpts?
function M.rewind(index, opts)
  opts = opts or {}
  if type(index) ~= "number" or index < 1 or index ~= math.floor(index) then
    error(
      ("pseudoclaude.rewind: index: expected a message index (an integer >= 1), got %s"):format(vim.inspect(index)),
      0
    )
  end
  local args = {
    code = opts.code ~= false,
    conversation = opts.conversation ~= false,
    force = opts.force or {},
    dry_run = opts.dry_run or false,
    modified = require("pseudoclaude.editor").modified_paths(),
  }
  H.run("agent_rewind_async", index, args, args.conversation and not args.dry_run, opts.on_done, args.dry_run)
end

--- Undoes the last rewind (possible until the next message).
---@param opts {on_done: fun(report: pseudoclaude.RewindReport)?}?
function M.undo(opts)
  opts = opts or {}
  H.run(
    "agent_undo_rewind_async",
    nil,
    { modified = require("pseudoclaude.editor").modified_paths() },
    true,
    opts.on_done
  )
end

--- `:PseudoRewind`: your messages of the current session, newest first, each with the files its turn changed; the
--- chosen one asks what to rewind, then does it.
function M.pick()
  local core = require("pseudoclaude.core")
  local ok, points = pcall(function()
    return core.decode(core.call("agent_rewind_points"))
  end)
  if not ok then
    return require("pseudoclaude.errors").report(points)
  end
  -- the history the model sees next (none before the chat is loaded)
  local chat = package.loaded["pseudoclaude.chat"]
  local messages = chat and chat.messages() or {}
  local by_index = {}
  for _, t in ipairs(points.turns or {}) do
    by_index[t.index] = t
  end
  local items = {}
  if points.undo then
    table.insert(
      items,
      { undo = true, label = ("↶ before the rewind at %s"):format(os.date("%H:%M", points.undo.at)) }
    )
  end
  for i = #messages, 1, -1 do
    local m = messages[i]
    if m.role == "user" and (m.tool_result == nil or m.tool_result == vim.NIL) and m.turn then
      table.insert(items, { index = i, label = H.label(i, m, by_index[i]) })
    end
  end
  if #items == 0 then
    return vim.notify("pseudoclaude: nothing to rewind: this session has no message with a checkpoint yet")
  end
  vim.ui.select(items, {
    prompt = "Rewind to before",
    format_item = function(item)
      return item.label
    end,
  }, function(item)
    if not item then
      return
    end
    if item.undo then
      return M.undo({ on_done = H.summary })
    end
    H.ask_mode(item.index)
  end)
end

--- `12. fix the parser (14:02)  src/a.rs +12 −3, notes.txt +1 −0`
---@param i integer
---@param m table
---@param turn table?
---@return string
function H.label(i, m, turn)
  local first = (m.content or ""):match("^[^\n]*") or ""
  if #first > 60 then
    first = first:sub(1, 57) .. "…"
  end
  local files = {}
  for _, f in ipairs(turn and turn.files or {}) do
    table.insert(files, ("%s +%d −%d"):format(f.path, f.added, f.removed))
  end
  local when = (m.ts and m.ts > 0) and os.date(" (%H:%M)", m.ts) or ""
  local changed = #files > 0 and ("  " .. table.concat(files, ", ")) or "  (no files changed)"
  return ("%d. %s%s%s"):format(i, first, when, changed)
end

---@param index integer
function H.ask_mode(index)
  local modes = {
    { label = "Code and conversation", code = true, conversation = true },
    { label = "Conversation only", code = false, conversation = true },
    { label = "Code only", code = true, conversation = false },
  }
  vim.ui.select(modes, {
    prompt = "Rewind what",
    format_item = function(m)
      return m.label
    end,
  }, function(mode)
    if not mode then
      return
    end
    if not mode.code then
      return M.rewind(index, { code = false, conversation = true, on_done = H.summary })
    end
    -- First the plan: the files you changed after the agent are asked about one by one.
    M.rewind(index, {
      dry_run = true,
      conversation = mode.conversation,
      on_done = function(plan)
        if not plan.ok then
          return H.summary(plan)
        end
        local asked = {}
        for _, c in ipairs(plan.conflicts) do
          if c.why == "changed by you after the agent" then
            table.insert(asked, c.path)
          end
        end
        H.ask_force(asked, 1, {}, function(force)
          M.rewind(index, { code = true, conversation = mode.conversation, force = force, on_done = H.summary })
        end)
      end,
    })
  end)
end

---@param paths string[]
---@param i integer
---@param force string[]
---@param done fun(force: string[])
function H.ask_force(paths, i, force, done)
  if i > #paths then
    return done(force)
  end
  vim.ui.select({ "Keep my version", "Put back the version from before the message" }, {
    prompt = ("You changed %s after the agent did"):format(paths[i]),
  }, function(_, choice)
    if choice == 2 then
      table.insert(force, paths[i])
    end
    H.ask_force(paths, i + 1, force, done)
  end)
end

---@param report pseudoclaude.RewindReport
function H.summary(report)
  if not report.ok then
    return require("pseudoclaude.errors").report("pseudoclaude: rewind: " .. (report.error or "failed"))
  end
  local parts = {}
  if #report.restored > 0 then
    table.insert(parts, ("restored %s"):format(table.concat(report.restored, ", ")))
  end
  if #report.removed > 0 then
    table.insert(parts, ("removed %s"):format(table.concat(report.removed, ", ")))
  end
  for _, c in ipairs(report.conflicts) do
    table.insert(parts, ("left %s as it is (%s)"):format(c.path, c.why))
  end
  vim.notify("pseudoclaude: rewound" .. (#parts > 0 and (": " .. table.concat(parts, "; ")) or ""))
end

--- Calls the core on its worker threads, then puts the editor in step with what it did.
---@param fn string
---@param index integer?
---@param args table The options, as the core reads them.
---@param redraw boolean The history may have changed: draw it again.
---@param on_done fun(report: pseudoclaude.RewindReport)?
---@param dry_run boolean? Only a plan: nothing to reload, no `User PseudoClaudeRewound`.
function H.run(fn, index, args, redraw, on_done, dry_run)
  local core = require("pseudoclaude.core")
  -- The chat it acts on is the current one now: the user may show another before the report comes.
  local S = require("pseudoclaude.chat.state")
  local chat, id = S.chat, S.state.session or ("chat:" .. S.chat)
  local function finish(ok, report)
    if not ok then
      report = { ok = false, error = core.plain(report), restored = {}, removed = {}, conflicts = {}, text = "" }
    end
    report.id, report.chat = id, chat
    if report.error == vim.NIL then
      report.error = nil
    end
    if not dry_run then
      H.sync_buffers(report)
      if report.ok and redraw then
        require("pseudoclaude.chat").after_rewind(report.text)
      end
      vim.api.nvim_exec_autocmds("User", { pattern = "PseudoClaudeRewound", data = report })
    end
    if on_done then
      on_done(report)
    else
      H.summary(report)
    end
  end
  local ok, err
  if index then
    ok, err = pcall(core.call, fn, index, args, finish)
  else
    ok, err = pcall(core.call, fn, args, finish)
  end
  if not ok then
    finish(false, err)
  end
end

--- Reloads the unmodified buffers of the files a rewind wrote or removed (a modified one was never written).
---@param report pseudoclaude.RewindReport
function H.sync_buffers(report)
  if not report.ok then
    return
  end
  local ws = require("pseudoclaude.config").workspace()
  local editor = require("pseudoclaude.editor")
  for _, rel in ipairs(report.restored or {}) do
    local path = vim.uv.fs_realpath(ws .. "/" .. rel) or (ws .. "/" .. rel)
    local b = editor.find_buf(path)
    if b and not vim.bo[b].modified then
      editor.reload(b, path)
    end
  end
  if #(report.removed or {}) > 0 then
    editor.checktime()
  end
end

return M
