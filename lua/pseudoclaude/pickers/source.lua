--- What the native pickers (telescope, fzf-lua, snacks.picker, mini.pick: `pickers/*.lua`) share, so that each of them
--- only translates to its picker: the items (the session list and the search's hits, read on the core's threads and
--- handed over when they arrive), their row text (the float's renderer, `float/render.lua`), the preview drawn into a
--- buffer and window the picker owns (the float's renderer and previewer, `render.preview` + `preview.show`) and
--- what the actions do to a session (`float/actions.lua`'s resume, ask and confirm). Nothing here reads a session on
--- the main loop. This module never requires float.lua nor a picker plugin.

local M = {}
local H = {}

local api = vim.api

---@class pseudoclaude.pickers.Opts
---@field all boolean? The sessions of every workspace this editor has used (`:PseudoResume all`).
---@field external boolean? The other agents' sessions too, in the list and the search (default: config
--- `picker.external`).
---@field query string? The prompt's text at open (a mode switch keeps what was typed).
---@field search string? Open the search mode with this query (`:PseudoSearch`).

--- `opts` with its defaults from the configuration.
---@param opts pseudoclaude.pickers.Opts?
---@return pseudoclaude.pickers.Opts
function M.opts(opts)
  opts = vim.deepcopy(opts or {})
  if opts.external == nil then
    opts.external = require("pseudoclaude.config").get().picker.external == true
  end
  return opts
end

--- Lists the sessions in the background (`sessions.list_async`) and calls `on_items(items)` on the main loop; an
--- error is reported and gives `on_items({})`, an empty list a notice.
---@param opts pseudoclaude.pickers.Opts
---@param on_items fun(items: pseudoclaude.SessionInfo[])
function M.list(opts, on_items)
  if H.in_coroutine() then
    return vim.schedule(function()
      M.list(opts, on_items)
    end)
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.list_async, { all = opts.all, external = opts.external }, function(lerr, items)
    if lerr then
      require("pseudoclaude.errors").report(lerr)
      return on_items({})
    end
    if #items == 0 then
      local where = opts.all and "any workspace" or sessions.workspace()
      local whose = opts.external and ", ours or another agent's" or ""
      vim.notify(("pseudoclaude: no session to resume in %s%s"):format(where, whose), vim.log.levels.INFO)
    end
    on_items(items)
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
    on_items({})
  end
end

--- The prompt's `agent:` terms (`agent:claude,gemini`, `-agent:pi`), read by the float picker's rule
--- (float/agents.lua): the text left for the picker's own matcher, and the filter (nil without a term).
---@param prompt string?
---@return string text
---@return pseudoclaude.float.AgentFilter? filter
function M.agent_terms(prompt)
  return require("pseudoclaude.float.agents").parse(prompt or "")
end

--- Whether session `item` passes `filter` (nil: no filter): another agent's by its `agent`, one of ours by the ACP
--- agent that ran it (`pseudoclaude`: our own agent).
---@param filter pseudoclaude.float.AgentFilter?
---@param item pseudoclaude.SessionInfo|pseudoclaude.ExternalSession
---@return boolean
function M.passes(filter, item)
  return filter == nil or require("pseudoclaude.float.agents").passes(filter, item.agent)
end

--- The text a picker matches a session against: title, model, id, branch (as the float's filter).
---@param item pseudoclaude.SessionInfo
---@return string
function M.haystack(item)
  return require("pseudoclaude.float.finder").haystack(item)
end

--- The widths of the rows' columns over `items`, so that rows drawn one at a time align.
---@param items pseudoclaude.SessionInfo[]
---@return pseudoclaude.float.Columns
function M.columns(items)
  return require("pseudoclaude.float.render").columns(items)
end

--- The row of a session, `width` cells wide: the float's text, and its highlights `{start_col, end_col, group}`.
---@param item pseudoclaude.SessionInfo
---@param width integer
---@param columns pseudoclaude.float.Columns?
---@param now integer unix seconds
---@return string line
---@return pseudoclaude.float.Highlight[] hls
function M.row(item, width, columns, now)
  local lines, rows = require("pseudoclaude.float.render").rows({ item }, math.max(width, 20), now, columns)
  return lines[1], rows[1].hls
end

--- The rows of several sessions at once, aligned over them (the float's text).
---@param items pseudoclaude.SessionInfo[]
---@param width integer
---@param now integer
---@return string[] lines
---@return pseudoclaude.float.Highlight[][] hls
function M.rows(items, width, now)
  local lines, rows = require("pseudoclaude.float.render").rows(items, math.max(width, 20), now)
  local hls = {}
  for k, row in ipairs(rows) do
    hls[k] = row.hls
  end
  return lines, hls
end

--- The row of a search hit (title, age, where, snippet), as the float's search mode draws it.
---@param hit pseudoclaude.SearchHit
---@param width integer
---@param now integer
---@return string line
---@return table[] hls `{start_col, end_col, group, priority?}`
function M.hit_row(hit, width, now)
  local lines, hls = require("pseudoclaude.float.search").rows({ hit }, math.max(width, 20), now)
  return lines[1], hls[1]
end

--- Searches every message for `query` (`sessions.search`, on the core's threads, as the float's search mode):
--- `on_hits(hits)` per batch as they come, newest sessions first, then `on_done()`. With `external`, the other
--- agents' sessions too: their hits after ours, each naming its `agent` (as the float's search with `<C-o>` on).
--- Returns the handle (`:cancel()`), nil for an empty query (then `on_done` is called at once).
---@param query string
---@param external boolean?
---@param on_hits fun(hits: pseudoclaude.SearchHit[])
---@param on_done fun(err: string?)
---@return pseudoclaude.SearchHandle|{cancel: fun()}?
function M.search(query, external, on_hits, on_done)
  -- the query's `agent:` terms choose the hits, the rest is searched (as the float's search mode)
  local filter
  query, filter = M.agent_terms(query)
  if filter then
    return H.filtered(filter, function(hits_to, done_to)
      return M.search(query, external, hits_to, done_to)
    end, on_hits, on_done)
  end
  if query == "" then
    on_done(nil)
    return nil
  end
  if H.in_coroutine() then
    -- started on the main loop (see `in_coroutine`); the handle given now cancels the one started then
    local proxy = { cancelled = false } ---@type table
    proxy.cancel = function()
      proxy.cancelled = true
      if proxy.real then
        proxy.real:cancel()
      end
    end
    vim.schedule(function()
      if not proxy.cancelled then
        proxy.real = M.search(query, external, on_hits, on_done)
      end
    end)
    return proxy
  end
  local mode = require("pseudoclaude.float.search")
  local ok, handle = pcall(require("pseudoclaude.sessions").search, query, {
    per_session = mode.PER_SESSION,
    limit = mode.LIMIT,
    external = external == true,
    on_hits = on_hits,
    on_done = function(err)
      if err and err ~= "cancelled" then
        require("pseudoclaude.errors").report(err)
      end
      on_done(err)
    end,
  })
  if not ok then
    require("pseudoclaude.errors").report(handle)
    on_done(handle)
    return nil
  end
  return handle
end

--- A search whose hits pass `filter` (an `agent:` term): one of ours is kept by the ACP agent that ran it, which
--- only the workspace's list knows. That list is read on the core's threads (`list_async`; 10,000 sessions are
--- milliseconds the main loop must not wait) while `start` searches; hits that come first wait for it, `on_done`
--- too. Listed again at most every few seconds: a search's batches and the next keystrokes' searches share one list.
---@param filter pseudoclaude.float.AgentFilter
---@param start fun(on_hits: fun(hits: pseudoclaude.SearchHit[]), on_done: fun(err: string?)): {cancel: fun()}?
---@param on_hits fun(hits: pseudoclaude.SearchHit[])
---@param on_done fun(err: string?)
---@return {cancel: fun()}
function H.filtered(filter, start, on_hits, on_done)
  local agents = require("pseudoclaude.float.agents")
  local sessions = require("pseudoclaude.sessions")
  local ws, cache = sessions.workspace(), H.ran_cache
  local ran = cache and cache.workspace == ws and vim.uv.now() - cache.at < 3000 and cache.by_id or nil
  local queued, ended, over, cancelled = {}, nil, false, false
  local function give(hits)
    hits = agents.keep_hits(filter, hits, ran)
    if #hits > 0 then
      on_hits(hits)
    end
  end
  local function finish(err)
    if not over then
      over = true
      on_done(err)
    end
  end
  if not ran then
    local ok = pcall(sessions.list_async, { check_locks = false }, function(err, items)
      local by_id = {}
      for _, item in ipairs(not err and items or {}) do
        if item.agent then
          by_id[item.id] = item.agent
        end
      end
      H.ran_cache = { workspace = ws, at = vim.uv.now(), by_id = by_id }
      ran = by_id
      if over then
        return
      end
      for _, hits in ipairs(queued) do
        give(hits)
      end
      queued = {}
      if ended then
        finish(ended.err)
      end
    end)
    ran = not ok and {} or ran -- no list: ours pass by no agent, as with none that ran one
  end
  local handle = start(function(hits)
    if over or cancelled then
      return
    elseif ran then
      give(hits)
    else
      queued[#queued + 1] = hits
    end
  end, function(err)
    if ran or err == "cancelled" then
      finish(err)
    else
      ended = { err = err }
    end
  end)
  return {
    cancel = function()
      -- the hits waiting for the list are dropped; `on_done` comes from the search, as without a filter
      cancelled, queued = true, {}
      if handle then
        handle:cancel()
      end
    end,
  }
end

-- Previews -----------------------------------------------------------------------------------------------------

---@class pseudoclaude.pickers.Previewer Draws previews into a picker's preview buffer; one per opened picker.
---@field now integer
---@field cache table<string, pseudoclaude.float.Preview> By session id (or `id:index` for a hit).
---@field showing table<integer, string> What each buffer is meant to show (a late preview for another is dropped).
---@field query string? The search's query (its matches are highlighted in a hit's preview).
local Previewer = {}
Previewer.__index = Previewer

---@return pseudoclaude.pickers.Previewer
function M.previewer()
  return setmetatable({ now = os.time(), cache = {}, showing = {} }, Previewer)
end

--- Draws the preview of session `item` into `buf` (shown in `win`): at once when it was read before, else a
--- "loading" text now and the preview when the core has read it (if `buf` still shows that session).
---@param buf integer
---@param win integer?
---@param item pseudoclaude.SessionInfo
function Previewer:show(buf, win, item)
  if H.in_coroutine() then
    return vim.schedule(function()
      self:show(buf, win, item)
    end)
  end
  local render = require("pseudoclaude.float.render")
  self.showing[buf] = item.id
  if item.source then
    return H.put(buf, win, render.external(item, self.now))
  end
  local p = self.cache[item.id]
  if p then
    return H.put(buf, win, p)
  end
  H.put(buf, win, render.loading(item, self.now))
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.preview_async(item.id, function(perr, preview)
      if perr == "superseded" then
        return
      end
      vim.schedule(function()
        local w = win and api.nvim_win_is_valid(win) and api.nvim_win_get_width(win) or 80
        self.cache[item.id] = perr and render.failed(item, perr) or render.preview(preview, item, self.now, w)
        if self.showing[buf] == item.id and api.nvim_buf_is_valid(buf) then
          H.put(buf, H.showing_win(buf, win), self.cache[item.id])
        end
      end)
    end)
  end)
  if not ok then
    self.cache[item.id] = render.failed(item, err)
    H.put(buf, win, self.cache[item.id])
  end
end

--- Draws the preview of a search hit into `buf`: its session around its message, the cursor on the match.
---@param buf integer
---@param win integer?
---@param hit pseudoclaude.SearchHit
function Previewer:show_hit(buf, win, hit)
  if H.in_coroutine() then
    return vim.schedule(function()
      self:show_hit(buf, win, hit)
    end)
  end
  local render = require("pseudoclaude.float.render")
  local key = hit.id .. ":" .. hit.index
  local item = M.hit_item(hit)
  self.showing[buf] = key
  local p = self.cache[key]
  if p then
    return H.put(buf, win, p)
  end
  H.put(buf, win, render.loading(item, self.now))
  local query = self.query or ""
  local ok, err = pcall(require("pseudoclaude.search").preview_at_async, hit.id, hit.index, function(perr, preview)
    if perr == "superseded" then
      return
    end
    vim.schedule(function()
      local w = win and api.nvim_win_is_valid(win) and api.nvim_win_get_width(win) or 80
      self.cache[key] = perr and render.failed(item, perr)
        or render.preview(preview, item, self.now, w, { query = query })
      if self.showing[buf] == key and api.nvim_buf_is_valid(buf) then
        H.put(buf, H.showing_win(buf, win), self.cache[key])
      end
    end)
  end)
  if not ok then
    self.cache[key] = render.failed(item, err)
    H.put(buf, win, self.cache[key])
  end
end

--- Forgets what was read of session `id` (it was renamed, pinned or deleted).
---@param id string
function Previewer:forget(id)
  self.cache[id] = nil
end

--- The session a hit belongs to, as much as the hit tells of it (for the preview's header and the actions: another
--- agent's is only read).
---@param hit pseudoclaude.SearchHit
---@return pseudoclaude.SessionInfo
function M.hit_item(hit)
  return require("pseudoclaude.float.search").hit_item(hit)
end

-- Actions ------------------------------------------------------------------------------------------------------

--- Resumes a session (importing another agent's first); see `actions.resume_item`. Call it once the picker is
--- closed: the chat opens in the window the user came from.
---@param item pseudoclaude.SessionInfo
function M.resume(item)
  require("pseudoclaude.float.actions").resume_item(item)
end

--- Resumes a search hit's session with the cursor on its message; refused with a message when another editor holds
--- the session. Another agent's hit goes through the hand-over (`chat.resume` with its `AGENT:ID`).
---@param hit pseudoclaude.SearchHit
function M.resume_hit(hit)
  local ok, err = pcall(function()
    -- another agent's session is no log of ours to be held: imported or handed over to its agent, then resumed on
    -- that message (as the float's `<CR>` on its hit)
    local holder = not hit.agent and require("pseudoclaude.sessions").holder(hit.id)
    if holder then
      error(require("pseudoclaude.float.actions").held_message(M.hit_item(hit), holder), 0)
    end
    require("pseudoclaude.chat").resume(hit.id, { at = hit.index })
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

--- Whether `item` is a session of ours that `what` ("delete", "rename"…) may change; another agent's row is refused
--- with a message (it is only read).
---@param item pseudoclaude.SessionInfo?
---@param what string
---@return boolean
function M.ours(item, what)
  if not item then
    return false
  end
  if item.source then
    require("pseudoclaude.float.actions").not_ours(item, what)
    return false
  end
  return true
end

--- Deletes session `item` after asking (y/N on the command line, as the float). Returns whether it was deleted.
---@param item pseudoclaude.SessionInfo?
---@return boolean
function M.delete(item)
  if not item or not M.ours(item, "delete") then
    return false
  end
  local actions = require("pseudoclaude.float.actions")
  local title = require("pseudoclaude.float.render").title(item)
  if not actions.confirm(("Delete session %q (%s)?"):format(title, item.id)) then
    return false
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.delete(item.id)
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
    return false
  end
  return true
end

--- Renames session `item` (asks for the name on the command line, prefilled with its title; an empty name gives back
--- the automatic title, <Esc> changes nothing); `on_done(info)` once the name is on disk.
---@param item pseudoclaude.SessionInfo?
---@param on_done fun(info: pseudoclaude.SessionInfo)
function M.rename(item, on_done)
  if not item or not M.ours(item, "rename") then
    return
  end
  local title = require("pseudoclaude.float.actions").ask("Rename session: ", item.title or "")
  if title then
    H.mark("rename", item, title, on_done)
  end
end

--- Pins session `item`, or unpins it (pinned sessions come first); `on_done(info)` once it is on disk.
---@param item pseudoclaude.SessionInfo?
---@param on_done fun(info: pseudoclaude.SessionInfo)
function M.toggle_pin(item, on_done)
  if item and M.ours(item, "pin") then
    H.mark("pin", item, not item.pinned, on_done)
  end
end

--- Forks session `item` at its end ("resume as new") and resumes the fork; `before_resume()` (the picker's close) is
--- called once the fork is on disk.
---@param item pseudoclaude.SessionInfo?
---@param before_resume fun()
function M.fork(item, before_resume)
  if not item or not M.ours(item, "fork") then
    return
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.fork(item.id, nil, {
      on_done = function(ferr, forked)
        if ferr then
          return require("pseudoclaude.errors").report(ferr)
        end
        before_resume()
        vim.schedule(function()
          M.resume({ id = forked.id, workspace = item.workspace } --[[@as pseudoclaude.SessionInfo]])
        end)
      end,
    })
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- Whether this runs inside a coroutine (telescope's finders, fzf-lua's contents and actions, snacks' and mini.pick's
--- matchers run in theirs). The native library is never called from one: a call into it from a coroutine aborted
--- Neovim ("lua_call: thread called in wrong state" when its callback came back), so the calls that start a
--- background read are moved to the main loop's next step instead.
---@return boolean
function H.in_coroutine()
  local co, main = coroutine.running()
  return co ~= nil and not main
end

---@param what "rename"|"pin"
---@param item pseudoclaude.SessionInfo
---@param value string|boolean
---@param on_done fun(info: pseudoclaude.SessionInfo)
function H.mark(what, item, value, on_done)
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions[what](item.id, value, function(merr, info)
      if merr then
        return require("pseudoclaude.errors").report(merr)
      end
      on_done(info)
    end)
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

--- The window showing `buf` now (a picker may have moved it), else `win`.
---@param buf integer
---@param win integer?
---@return integer?
function H.showing_win(buf, win)
  if win and api.nvim_win_is_valid(win) and api.nvim_win_get_buf(win) == buf then
    return win
  end
  local wins = vim.fn.win_findbuf(buf)
  return wins[1]
end

--- Puts preview `p` in `buf` through the float's previewer (`preview.show`): lines, highlights, folds and the
--- cursor, in `win` when it shows `buf`.
---@param buf integer
---@param win integer?
---@param p pseudoclaude.float.Preview
---@param retried boolean?
function H.put(buf, win, p, retried)
  if not api.nvim_buf_is_valid(buf) then
    return
  end
  win = H.showing_win(buf, win)
  if not win then
    -- not shown yet (telescope puts a new preview buffer in its window in the next step): the text now, the whole
    -- preview (folds and the cursor need a window) once it is shown
    vim.bo[buf].modifiable = true
    api.nvim_buf_set_lines(buf, 0, -1, false, p.lines)
    vim.bo[buf].modifiable = false
    if not retried then
      vim.schedule(function()
        if api.nvim_buf_is_valid(buf) and H.showing_win(buf, nil) then
          H.put(buf, nil, p, true)
        end
      end)
    end
    return
  end
  local wo = vim.wo[win]
  wo.wrap, wo.linebreak = true, true
  wo.foldmethod, wo.foldenable, wo.foldlevel = "manual", true, 0
  require("pseudoclaude.highlights").setup()
  require("pseudoclaude.float.preview").show(
    { wins = { preview = win }, bufs = { preview = buf }, preview_folded = true },
    p
  )
end

return M
