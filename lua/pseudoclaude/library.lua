--- The commands of the session library: `:PseudoRename`, `:PseudoFork`, `:PseudoExport`. See `:help pseudoclaude-library`.
--- Each one's disk work runs on the core's worker threads; errors are reported with `vim.notify`.

local M = {}
local H = {}

--- `:PseudoRename {title}`: names the current session; no title gives it back its automatic one.
---@param title string
function M.rename(title)
  H.guard(function()
    local id = H.current_id()
    title = vim.trim(title or "")
    require("pseudoclaude.sessions").rename(id, title, function(err, info)
      if err then
        return require("pseudoclaude.errors").report(err)
      end
      local shown = info and info.title or title
      vim.notify(
        title == "" and ("pseudoclaude: session %s is titled %q again (automatic)"):format(id, shown)
          or ("pseudoclaude: session %s renamed %q"):format(id, shown)
      )
    end)
  end)
end

--- `:PseudoFork`: in the agent buffer, forks the current session at the message under the cursor and switches to the
--- fork. `opts.on_done(report)` is the resume's report (for tests and scripts). With `opts.files` (`:PseudoFork files`)
--- the workspace's files also return to their state at that message (rewind's rule: your later edits are kept and
--- named); the report's `files` says what was restored.
---@param opts {on_done: fun(report: table)?, files: boolean?}?
function M.fork(opts)
  opts = opts or {}
  H.guard(function()
    local chat = require("pseudoclaude.chat")
    -- any chat's transcript (each chat has its own: `pseudoclaude://chat`, `pseudoclaude://chat/2`…)
    local n = vim.b.pseudoclaude_chat
    if n == nil or vim.bo.filetype ~= "pseudoclaude" then
      error("pseudoclaude: run :PseudoFork in the agent buffer, with the cursor on the message to fork at", 0)
    end
    local row = vim.api.nvim_win_get_cursor(0)[1]
    if n ~= require("pseudoclaude.chat.state").current then
      chat.show(n) -- the fork replaces this chat's session: it becomes the current chat
    end
    local source = H.current_id()
    local core = require("pseudoclaude.core")
    if core.call("agent_status").busy then
      error("pseudoclaude: cannot fork while the agent is answering: wait, or cancel the turn (<C-c>)", 0)
    end
    local index = chat.message_at(row)
    if index == 0 then
      index = 1 -- above the first message: the fork starts with it
    end
    local modified = opts.files and require("pseudoclaude.editor").modified_paths()
    core.call("agent_fork_async", index, function(ok, forked)
      if not ok then
        return require("pseudoclaude.errors").report(forked)
      end
      if opts.files then
        local ws = require("pseudoclaude.config").workspace()
        return core.call(
          "sessions_fork_files_async",
          ws,
          source,
          forked.forked_from.index,
          modified,
          function(fok, files)
            H.resume_fork(source, forked, opts, fok and files or { ok = false, error = core.plain(files) })
          end
        )
      end
      H.resume_fork(source, forked, opts, nil)
    end)
  end)
end

--- Switches to the fork just made; `files` is what the fork did to the files, when asked.
---@param source string
---@param forked table
---@param opts {on_done: fun(report: table)?}
---@param files pseudoclaude.RewindReport?
function H.resume_fork(source, forked, opts, files)
  require("pseudoclaude.chat").resume(forked.id, {
    on_done = function(report)
      if report.ok then
        vim.notify(
          ("pseudoclaude: forked session %s at message %d: now in %s (the original is unchanged)"):format(
            source,
            forked.forked_from.index,
            forked.id
          )
        )
      end
      if files then
        report.files = files
        if files.ok == false or (files.conflicts and #files.conflicts > 0) then
          vim.notify(
            ("pseudoclaude: the fork's files: %s"):format(
              files.error or (#files.conflicts .. " file(s) left as they are (changed since)")
            ),
            vim.log.levels.WARN
          )
        end
      end
      if opts.on_done then
        opts.on_done(report)
      end
    end,
  })
end

--- `:PseudoExport [path]`: the current session as Markdown (JSON when `path` ends in `.json`), written to `path`, or
--- opened in a new tab's buffer when no path is given.
---@param path string?
function M.export(path)
  H.guard(function()
    local id = H.current_id()
    path = vim.trim(path or "")
    local file = path ~= "" and vim.fn.fnamemodify(vim.fn.expand(path), ":p") or nil
    local format = file and file:match("%.json$") and "json" or "markdown"
    require("pseudoclaude.sessions").export(id, {
      format = format,
      path = file,
      on_done = function(err, done)
        if err then
          return require("pseudoclaude.errors").report(err)
        end
        if file then
          return vim.notify(("pseudoclaude: exported session %s to %s (%d bytes)"):format(id, file, done.bytes))
        end
        H.show(id, done.text or "")
      end,
    })
  end)
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- Runs `fn`, reporting what it raises.
---@param fn fun()
function H.guard(fn)
  local ok, err = pcall(fn)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

---@return string
function H.current_id()
  local id = require("pseudoclaude.sessions").current_id()
  if not id then
    error("pseudoclaude: there is no current session: send a message or resume one first", 0)
  end
  return id
end

--- Opens `text` in a new tab, in a scratch buffer named after the session.
---@param id string
---@param text string
function H.show(id, text)
  local name = ("pseudoclaude://export/%s.md"):format(id)
  local old = vim.fn.bufnr(name)
  if old ~= -1 then
    vim.api.nvim_buf_delete(old, { force = true })
  end
  local buf = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split((text:gsub("\n$", "")), "\n", { plain = true }))
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].modified = false
  vim.cmd("tab sbuffer " .. buf)
end

return M
