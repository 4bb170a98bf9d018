--- Worktree chats (issue 47): a chat in a git worktree of its own (`chat.new({ worktree = true | "NAME" })`,
--- `:PseudoChat! -w [NAME]`), its change reviewed file by file (`:PseudoWorktree`) and brought into the checkout
--- (`merge`), or removed. Every call runs git on the core's workers: the main loop never waits on it.

local M = {}
local H = {}

---@class pseudoclaude.Worktree
---@field id string Its name: `NAME` of the branch `pseudoclaude/NAME` and of its folder.
---@field path string Its folder, `<workspace>/.PseudoClaude/worktrees/NAME`.
---@field root string Where its chat works (the folder, or the workspace's place in it).
---@field branch string `pseudoclaude/NAME`.
---@field base string The commit its unmerged work starts from (the branch point, then each merge's).
---@field changed integer Files that differ from `base`, committed or not (0: nothing to merge).
---@field session string? The session whose chat made it.
---@field missing boolean? Its folder was deleted; its branch remains (a resume makes it again).

---@class pseudoclaude.MergeReport
---@field ok boolean Merged (or nothing to merge).
---@field conflicts string[]? The files both sides changed, when it stopped (nothing of the checkout changed).
---@field commit string? The checkout's new commit.
---@field files string[]? The files of the checkout it changed.
---@field error string? Why it was refused (the checkout's own uncommitted changes overlap, a worktree gone…).

--- The worktree chats of the workspace's repository. With `opts.on_done`, `on_done(err, list)` from a worker;
--- without, it waits for the answer (a script's form: the editor's own UI never does).
---@param opts {on_done: fun(err: string?, list: pseudoclaude.Worktree[]?)}?
---@return pseudoclaude.Worktree[]?
function M.list(opts)
  if opts and opts.on_done then
    H.async("list", "worktree_list_async", opts.on_done, H.ws())
    return nil
  end
  local err, list = H.wait(function(done)
    H.async("list", "worktree_list_async", done, H.ws())
  end)
  if err then
    error(err, 0)
  end
  return list
end

--- Makes a worktree (branch `pseudoclaude/NAME` from HEAD, a generated name when `name` is nil):
--- `on_done(err, worktree)`.
---@param name string?
---@param session string?
---@param on_done fun(err: string?, wt: pseudoclaude.Worktree?)
function M.create(name, session, on_done)
  H.async("create", "worktree_create_async", on_done, H.ws(), name, session)
end

---@class pseudoclaude.MergeOpts
---@field squash boolean? One commit on the checkout's branch (default), or a merge keeping the branch's commits.
---@field session string? The session the commit messages name (default: the one that made the worktree).
---@field on_done fun(report: pseudoclaude.MergeReport)?

--- Brings worktree `id`'s whole change into the checkout's current branch (its uncommitted changes committed first,
--- naming the session). A conflict stops it with nothing of the checkout changed: `{ ok = false, conflicts }`.
---@param id string
---@param opts pseudoclaude.MergeOpts?
function M.merge(id, opts)
  vim.validate("id", id, "string")
  opts = opts or {}
  local squash = opts.squash ~= false
  local on_done = opts.on_done or H.report_merge(id)
  H.session_of(id, opts.session, function(session)
    H.async("merge", "worktree_merge_async", function(err, report)
      on_done(err and { ok = false, error = err } or report)
    end, H.ws(), id, squash, session)
  end)
end

---@class pseudoclaude.RemoveOpts
---@field force boolean? Also when it holds work not merged (lost).
---@field on_done fun(report: {ok: boolean, error: string?})?

--- Removes worktree `id` (its folder and its branch). Refused while it holds work not merged, unless `force`;
--- the refusal says what would be lost.
---@param id string
---@param opts pseudoclaude.RemoveOpts?
function M.remove(id, opts)
  vim.validate("id", id, "string")
  opts = opts or {}
  local on_done = opts.on_done
    or function(r)
      if r.ok then
        vim.notify(("pseudoclaude: worktree %s removed"):format(id))
      else
        vim.notify("pseudoclaude: " .. r.error, vim.log.levels.WARN)
      end
    end
  H.async("remove", "worktree_remove_async", function(err)
    on_done({ ok = err == nil, error = err })
  end, H.ws(), id, opts.force == true)
end

--- The change of worktree `id` against its base, file by file: `on_done(err, files)`, each
--- `{ path, status = "added"|"modified"|"deleted", before?, after?, binary? }`.
---@param id string
---@param on_done fun(err: string?, files: table[]?)
function M.change(id, on_done)
  local core = require("pseudoclaude.core")
  core.call("worktree_change_async", H.ws(), id, function(ok, held)
    if not ok then
      return on_done("pseudoclaude.worktree.change: " .. core.plain(held))
    end
    core.decode_parts(held, on_done) -- a part per main-loop step
  end)
end

--- `:PseudoWorktree [NAME]`: the worktree's whole change, a file at a time, in the review's side-by-side diff
--- (`]f`/`[f` the next and previous file, `q` closes). Without a name: the current chat's worktree, else the only
--- one, else a choice.
---@param id string?
function M.review(id)
  H.pick(id, "Review which worktree?", function(wt)
    M.change(wt.id, function(err, files)
      if err then
        return vim.notify(err, vim.log.levels.ERROR)
      end
      if #files == 0 then
        return vim.notify(("pseudoclaude: worktree %s changes nothing against %s"):format(wt.id, wt.base:sub(1, 7)))
      end
      H.show(wt, files, 1)
    end)
  end)
end

--- `:PseudoWorktree merge [NAME]`, `:PseudoWorktree remove[!] [NAME]`, `:PseudoWorktree list`, else a review.
---@param args string[]
---@param bang boolean
function M.command(args, bang)
  local verb = args[1]
  if verb == "merge" then
    return H.pick(args[2], "Merge which worktree?", function(wt)
      M.merge(wt.id, { squash = not bang })
    end)
  elseif verb == "remove" then
    return H.pick(args[2], "Remove which worktree?", function(wt)
      M.remove(wt.id, { force = bang })
    end)
  elseif verb == "list" then
    return M.list({
      on_done = function(err, list)
        if err then
          return vim.notify(err, vim.log.levels.ERROR)
        end
        local lines = {}
        for _, w in ipairs(list) do
          lines[#lines + 1] = ("%s  %s  %d changed%s"):format(
            w.id,
            w.branch,
            w.changed,
            w.missing and "  (missing)" or ""
          )
        end
        vim.notify(#lines > 0 and table.concat(lines, "\n") or "pseudoclaude: no worktree chat")
      end,
    })
  end
  M.review(verb)
end

--- A worktree chat was closed: a worktree that holds nothing to merge is removed; one with changes asks keep /
--- merge / remove (keep: nothing happens; it stays for `:PseudoWorktree` and a resume).
---@param id string
---@param session string?
function M.closed(id, session)
  M.list({
    on_done = function(err, list)
      if err then
        return vim.notify(err, vim.log.levels.WARN)
      end
      for _, w in ipairs(list or {}) do
        if w.id == id and not w.missing then
          if w.changed == 0 then
            return M.remove(id, { on_done = function() end })
          end
          local choices = { "keep", "merge", "remove" }
          return vim.ui.select(choices, {
            prompt = ("Worktree %s changed %d file(s): keep, merge or remove?"):format(id, w.changed),
            kind = "pseudoclaude.worktree_close",
          }, function(choice)
            if choice == "merge" then
              M.merge(id, { session = session })
            elseif choice == "remove" then
              M.remove(id, { force = true })
            end
          end)
        end
      end
    end,
  })
end

-- Helpers ==============================================================================================================

function H.ws()
  return require("pseudoclaude.config").workspace()
end

--- Native `name` on a worker with `...` and a callback; `on_done(err, value)`, a failure named
--- `pseudoclaude.worktree.<fn>: `.
function H.async(fn, name, on_done, ...)
  local core = require("pseudoclaude.core")
  local args = { n = select("#", ...), ... }
  args[args.n + 1] = function(ok, value)
    if not ok then
      return on_done(("pseudoclaude.worktree.%s: %s"):format(fn, core.plain(value)))
    end
    on_done(nil, value)
  end
  local ok, err = pcall(core.call, name, unpack(args, 1, args.n + 1))
  if not ok then
    on_done(("pseudoclaude.worktree.%s: %s"):format(fn, core.plain(err)))
  end
end

--- Waits (events still processed) for `start(done)` to call `done(err, value)`.
function H.wait(start)
  local finished, e, v = false, nil, nil
  start(function(err, value)
    finished, e, v = true, err, value
  end)
  vim.wait(60000, function()
    return finished
  end, 5)
  if not finished then
    return "pseudoclaude.worktree: git did not answer within 60 s"
  end
  return e, v
end

--- The session of worktree `id`, for the merge's message: given, else the live chat's working in it, else the one
--- recorded at its creation.
function H.session_of(id, given, k)
  if given then
    return k(given)
  end
  M.list({
    on_done = function(_, list)
      for _, w in ipairs(list or {}) do
        if w.id == id then
          return k(H.live_session and H.live_session(w.root) or w.session)
        end
      end
      k(nil)
    end,
  })
end

function H.report_merge(id)
  return function(r)
    if r.ok then
      vim.notify(("pseudoclaude: worktree %s merged%s"):format(id, r.commit and (" as " .. r.commit:sub(1, 7)) or ""))
      vim.cmd("checktime")
    elseif r.conflicts then
      vim.notify(
        ("pseudoclaude: worktree %s conflicts with the checkout in %s; nothing was changed"):format(
          id,
          table.concat(r.conflicts, ", ")
        ),
        vim.log.levels.WARN
      )
    else
      vim.notify("pseudoclaude: " .. tostring(r.error), vim.log.levels.ERROR)
    end
  end
end

--- The worktree `id` names, or the current chat's, or the only one, or the user's choice: `k(worktree)`.
function H.pick(id, prompt, k)
  M.list({
    on_done = function(err, list)
      if err then
        return vim.notify(err, vim.log.levels.ERROR)
      end
      list = list or {}
      if id and id ~= "" then
        for _, w in ipairs(list) do
          if w.id == id then
            return k(w)
          end
        end
        return vim.notify(("pseudoclaude: no worktree chat named %q"):format(id), vim.log.levels.ERROR)
      end
      local mine = H.current_worktree and H.current_worktree()
      for _, w in ipairs(list) do
        if mine and w.root == mine then
          return k(w)
        end
      end
      if #list == 0 then
        return vim.notify("pseudoclaude: no worktree chat (`:PseudoChat! -w` opens one)")
      elseif #list == 1 then
        return k(list[1])
      end
      vim.ui.select(list, {
        prompt = prompt,
        kind = "pseudoclaude.worktree",
        format_item = function(w)
          return ("%s  (%s, %d changed)"):format(w.id, w.branch, w.changed)
        end,
      }, function(w)
        if w then
          k(w)
        end
      end)
    end,
  })
end

--- Which worktree the current chat works in, and the session of the live chat working in a folder: handed in by
--- chat.lua (which requires this module, never the reverse).
---@type (fun(): string?)?
H.current_worktree = nil
---@type (fun(root: string): string?)?
H.live_session = nil

---@param current fun(): string?
---@param live_session fun(root: string): string?
function M._set_current(current, live_session)
  H.current_worktree, H.live_session = current, live_session
end

--- File `k` of `files` in the review's diff tab, with keys to the next and previous file.
function H.show(wt, files, k)
  local f = files[k]
  local review = require("pseudoclaude.review")
  local title = ("%s (%d/%d) %s [%s]"):format(wt.branch, k, #files, f.path, f.status)
  local r = review.open({
    path = f.path,
    old = f.before or (f.binary and "(binary or too large)" or ""),
    new = f.after or (f.binary and "(binary or too large)" or ""),
    hunks = {},
  }, title)
  vim.wo[r.old_win].winbar = (" base %s: %s"):format(wt.base:sub(1, 7), f.path):gsub("%%", "%%%%")
  vim.wo[r.new_win].winbar = (" %s (%d/%d): %s [%s] · ]f next · [f previous · q close")
    :format(wt.branch, k, #files, f.path, f.status)
    :gsub("%%", "%%%%")
  for _, b in ipairs({ r.old_buf, r.new_buf }) do
    local function map(lhs, fn, desc)
      vim.keymap.set(
        "n",
        lhs,
        fn,
        { buffer = b, nowait = true, silent = true, desc = "pseudoclaude worktree: " .. desc }
      )
    end
    map("]f", function()
      H.show(wt, files, k % #files + 1)
    end, "the next file")
    map("[f", function()
      H.show(wt, files, (k - 2) % #files + 1)
    end, "the previous file")
    map("q", function()
      review.close(r)
    end, "close")
  end
end

return M
