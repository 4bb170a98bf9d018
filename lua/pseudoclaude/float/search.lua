--- The picker's "search inside messages" mode (`<C-g>` in `:PseudoResume`, `:PseudoSearch {text}`): the prompt's
--- text is searched for in every message of every session (`sessions.search`, on the core's threads), the rows are
--- the hits (session title, age, where, the snippet with the match highlighted), the preview shows the session
--- around the highlighted hit, and `<CR>` resumes it with the cursor on that message.
---
--- Each change of the query cancels the search running and starts another; its hits stream in, newest sessions
--- first, and a hit of an older query is never drawn (each search has a generation). The picker (float.lua) hands
--- its rows, moves, preview and `<CR>` to this module while `state.search` is set; this module asks the controller
--- through the state's methods (`s:on_change()`, `s:close()`…) and never requires float.lua. Its previews are drawn
--- by the picker's one renderer (`render.preview` with the hit) and shown by the previewer (`preview.show`).
---
--- With the other agents' sessions on (`<C-o>`, `picker.external`, `:PseudoSearch!`), their hits come after ours, each
--- row marked with its agent; `<CR>` on one resumes it as `<CR>` on their row does. `agent:NAME` in the prompt keeps
--- one agent's hits (float/agents.lua), the rest of the prompt being the text searched.

local M = {}
local H = {}

local api = vim.api
--- Hits per session shown, and in all: a word in every message must not make ten thousand rows.
M.PER_SESSION = 50
M.LIMIT = 2000
--- Columns of the "where" label.
M.LABEL_WIDTH = 6

---@class pseudoclaude.float.SearchStats Timestamps are `vim.uv.hrtime()` values (ns).
---@field query_at integer? The query set (the search started).
---@field first_row_at integer? The first hit row drawn.
---@field done_at integer? The search done, its last rows drawn.
---@field hits integer

---@class pseudoclaude.float.SearchState
---@field query string
---@field gen integer Bumped by each new query: hits of an older one are dropped.
---@field handle pseudoclaude.SearchHandle?
---@field hits pseudoclaude.SearchHit[]
---@field running boolean
---@field error string?
---@field summary pseudoclaude.SearchSummary?
---@field sel integer
---@field top integer
---@field previews table<string, table>
---@field preview_key string? The hit shown in the preview (`id:index`).
---@field loading string?
---@field stats pseudoclaude.float.SearchStats
---@field external boolean Whether the running search covers the other agents' sessions.
---@field filter pseudoclaude.float.AgentFilter? The prompt's `agent:` terms.

--- Enters search mode in picker state `s`; with `query`, the prompt is set to it first.
---@param s pseudoclaude.float.State
---@param query string?
function M.enter(s, query)
  if s.search then
    return
  end
  s.search = {
    query = "",
    gen = 0,
    hits = {},
    running = false,
    sel = 1,
    top = 1,
    previews = {},
    stats = { hits = 0 },
  }
  s.preview_id = nil
  s:retitle()
  if query then
    api.nvim_buf_set_lines(s.bufs.prompt, 0, -1, false, { query })
    if api.nvim_get_current_win() == s.wins.prompt then
      api.nvim_win_set_cursor(s.wins.prompt, { 1, #query })
    end
  end
  local text = api.nvim_buf_get_lines(s.bufs.prompt, 0, 1, false)[1] or ""
  s.search.query = nil -- so that the same text still starts a search
  M.on_query(s, text)
end

--- Back to the list of sessions, filtered by the prompt's text.
---@param s pseudoclaude.float.State
function M.leave(s)
  local st = s.search
  if not st then
    return
  end
  if st.handle then
    st.handle:cancel()
  end
  s.search = nil
  s:retitle()
  s.preview_id = nil
  s.query = "\0" -- refilter whatever the prompt holds
  s:on_change()
end

--- `<C-g>`: search mode on or off.
---@param s pseudoclaude.float.State?
function M.toggle(s)
  if not s then
    return
  end
  if s.search then
    M.leave(s)
  else
    M.enter(s)
  end
end

--- The prompt's text changed in search mode: a new search (the running one is cancelled).
---@param s pseudoclaude.float.State
---@param query string
function M.on_query(s, query)
  local st = s.search
  if not st or query == st.query then
    return
  end
  if st.handle then
    st.handle:cancel()
    st.handle = nil
  end
  st.query = query
  st.gen = st.gen + 1
  st.hits, st.sel, st.top, st.error, st.summary = {}, 1, 1, nil, nil
  st.stats = { query_at = vim.uv.hrtime(), hits = 0 }
  local text, filter = require("pseudoclaude.float.agents").parse(query)
  st.filter, st.external = filter, s.external == true
  st.running = text ~= ""
  if text ~= "" then
    local gen = st.gen
    local ok, handle = pcall(require("pseudoclaude.sessions").search, text, {
      per_session = M.PER_SESSION,
      limit = M.LIMIT,
      external = st.external,
      on_hits = function(hits)
        H.arrived(s, gen, hits)
      end,
      on_done = function(err, summary)
        H.finished(s, gen, err, summary)
      end,
    })
    if ok then
      st.handle = handle
    else
      st.running, st.error = false, require("pseudoclaude.errors").plain(handle)
    end
  end
  M.draw_rows(s)
  H.request_preview(s)
end

--- The highlighted hit, or nil.
---@param s pseudoclaude.float.State
---@return pseudoclaude.SearchHit?
function M.selected_hit(s)
  return s.search and s.search.hits[s.search.sel] or nil
end

--- The session of the highlighted hit, as the list knows it (for the keys that act on a session).
---@param s pseudoclaude.float.State
---@return pseudoclaude.SessionInfo?
function M.selected_item(s)
  local hit = M.selected_hit(s)
  if not hit then
    return nil
  end
  if not hit.agent then
    local at = require("pseudoclaude.float.finder").index_of(s, hit.id)
    if at then
      return s.items[at]
    end
  end
  return M.hit_item(hit)
end

--- The session of a hit as much as the hit tells of it (the native pickers' too). Another agent's is enough of its
--- row for the keys that act on one (its row is not looked for: the list finds another agent's row by decoding each
--- of theirs); its `source` makes the keys that change a session refuse it.
---@param hit pseudoclaude.SearchHit
---@return pseudoclaude.SessionInfo
function M.hit_item(hit)
  if hit.agent then
    local source = M.SOURCES[hit.agent] or hit.agent
    return { id = hit.id, title = hit.title, modified = hit.last_message, agent = hit.agent, source = source }
  end
  return { id = hit.id, title = hit.title, last_message = hit.last_message, model = "", messages = 0 }
end

--- The `source` of another agent's row, by its `agent`.
M.SOURCES = { claude = "claude-code", gemini = "gemini-cli", qwen = "qwen-code" }

--- `<C-o>` in search mode: the other agents' sessions in the search (and the list under it) or no more.
---@param s pseudoclaude.float.State
function M.toggle_external(s)
  local st = s.search
  if not st then
    return
  end
  require("pseudoclaude.float.finder").toggle_external(s)
end

--- "Other agents" turned on or off (`<C-o>`, or a workspace with no session of ours): the titles say so, and the same
--- text is searched again with it.
---@param s pseudoclaude.float.State
function M.external_changed(s)
  local st = s.search
  if not st then
    return
  end
  s:retitle()
  st.query = nil
  M.on_query(s, api.nvim_buf_get_lines(s.bufs.prompt, 0, 1, false)[1] or "")
end

---@param s pseudoclaude.float.State
---@param delta integer
function M.move(s, delta)
  local st = s.search
  if not st or #st.hits == 0 then
    return
  end
  local sel = math.max(1, math.min(st.sel + delta, #st.hits))
  if sel ~= st.sel then
    st.sel = sel
    M.draw_rows(s)
    H.request_preview(s)
  end
end

--- A session was deleted: its hits go.
---@param s pseudoclaude.float.State
---@param id string
function M.forget(s, id)
  local st = s.search
  if not st then
    return
  end
  local kept = {}
  for _, h in ipairs(st.hits) do
    if h.id ~= id then
      kept[#kept + 1] = h
    end
  end
  st.hits = kept
  st.sel = math.max(1, math.min(st.sel, #kept))
  M.draw_rows(s)
  H.request_preview(s)
end

--- `<CR>` on a hit: closes the picker and resumes its session with the cursor on the message. A session open in
--- another editor is refused and the picker stays open.
---@param s pseudoclaude.float.State
function M.resume_selected(s)
  local hit = M.selected_hit(s)
  if not hit then
    return
  end
  -- another agent's session is no log of ours to be held: imported (or continued by its agent), then resumed on
  -- that message, as `<CR>` on its row would
  if not hit.agent then
    local ok, holder = pcall(require("pseudoclaude.sessions").holder, hit.id)
    if not ok then
      return require("pseudoclaude.errors").report(holder)
    end
    -- a chat of this editor holds it: resuming shows that chat
    if holder and require("pseudoclaude.float.render").live()[hit.id] then
      holder = nil
    end
    if holder then
      return vim.notify(
        ("pseudoclaude: session %s (%s) is open in another editor (%s); close it there first"):format(
          hit.title ~= "" and hit.title or "(untitled)",
          hit.id,
          holder
        ),
        vim.log.levels.ERROR
      )
    end
  end
  s:close()
  vim.schedule(function()
    local done, err = pcall(require("pseudoclaude.chat").resume, hit.id, { at = hit.index })
    if not done then
      require("pseudoclaude.errors").report(err)
    end
  end)
end

--- Draws the visible hit rows, their match highlights, the selection and the counter (float/rows.lua).
---@param s pseudoclaude.float.State
function M.draw_rows(s)
  local st = s.search
  local win = s.wins.results
  if not st or not api.nvim_win_is_valid(win) then
    return
  end
  local rows = require("pseudoclaude.float.rows")
  local n = #st.hits
  local height, width
  st.sel, st.top, height, width = rows.scroll(win, n, st.sel, st.top)
  local visible = {}
  for k = 0, height - 1 do
    visible[#visible + 1] = st.hits[st.top + k]
  end
  local lines, hls = M.rows(visible, width, s.now)
  if n == 0 then
    lines = { "  " .. H.empty_text(st) }
    hls = { { { 0, #lines[1], "PseudoClaudePickerEmpty" } } }
  end
  -- "+": the search stopped at `LIMIT` hits; "…": it is still running
  local more = st.summary and st.summary.truncated and "+" or ""
  local counter = ("%d%s hit%s%s"):format(n, more, n == 1 and "" or "s", st.running and " …" or "")
  rows.put(s, lines, hls, n > 0 and st.sel - st.top or nil, counter)
end

--- One line per hit, fitting `width` cells: title, age, where ("you", "agent", "call", "output"), the snippet; and
--- per line its highlights `{start_col, end_col, group, priority?}` (the matches in the snippet among them).
---@param hits pseudoclaude.SearchHit[]
---@param width integer
---@param now integer unix seconds
---@return string[] lines
---@return table[][] hls
function M.rows(hits, width, now)
  local render = require("pseudoclaude.float.render")
  local fit = render.fit
  local title_w = math.max(8, math.min(40, math.floor(width * 0.28)))
  local lines, hls = {}, {}
  for k, hit in ipairs(hits) do
    local title = hit.title ~= "" and hit.title or "(untitled)"
    if hit.agent then
      title = "[" .. hit.agent .. "] " .. title
    end
    title = fit(title, title_w)
    local age = render.age(now - (hit.last_message or 0))
    local label = H.label(hit)
    local head = "  "
      .. title
      .. "  "
      .. (" "):rep(render.AGE_WIDTH - #age)
      .. age
      .. "  "
      .. label
      .. (" "):rep(M.LABEL_WIDTH - #label + 1)
    local age_col = 2 + #title + 2
    local snippet_col = #head
    local room = width - vim.api.nvim_strwidth(head)
    local snippet, shown = "", 0
    if room > 1 then
      snippet, shown = fit(hit.snippet or "", room, true)
    end
    lines[k] = head .. snippet
    local row = {
      { age_col, age_col + render.AGE_WIDTH, "PseudoClaudePickerAge" },
      { snippet_col - M.LABEL_WIDTH - 1, snippet_col - 1, "PseudoClaudePickerModel" },
    }
    for _, r in ipairs(hit.ranges or {}) do
      local s, e = r[1], math.min(r[2], shown)
      if s < e then
        row[#row + 1] = { snippet_col + s, snippet_col + e, "PseudoClaudePickerMatch", 200 }
      end
    end
    hls[k] = row
  end
  return lines, hls
end

--- Shows the highlighted hit's session around its message in the preview (read in the background).
---@param s pseudoclaude.float.State
function M.draw_preview(s)
  local st = s.search
  local win = s.wins.preview
  if not st or not win or not api.nvim_win_is_valid(win) then
    return
  end
  local hit = M.selected_hit(s)
  local key = hit and (hit.id .. ":" .. hit.index) or nil
  if key == st.preview_key and key ~= nil then
    return
  end
  if not hit then
    st.preview_key = nil
    return H.show(s, { lines = {}, hls = {}, folds = {} }, nil)
  end
  local p = st.previews[key]
  if p then
    return H.show(s, p, key)
  end
  local item = M.selected_item(s) --[[@as pseudoclaude.SessionInfo]]
  H.show(s, require("pseudoclaude.float.render").loading(item, s.now), nil)
  if st.loading == key then
    return
  end
  st.loading = key
  local ok, err = pcall(require("pseudoclaude.search").preview_at_async, hit.id, hit.index, function(perr, preview)
    if st.loading == key then
      st.loading = nil
    end
    if s.search ~= st or perr == "superseded" then
      return
    end
    vim.schedule(function()
      if s.search ~= st or not api.nvim_win_is_valid(win) then
        return
      end
      local render = require("pseudoclaude.float.render")
      st.previews[key] = perr and render.failed(item, perr)
        or render.preview(preview, item, s.now, api.nvim_win_get_width(win), { query = st.query })
      local current = M.selected_hit(s)
      if current and current.id .. ":" .. current.index == key then
        H.show(s, st.previews[key], key)
      else
        H.request_preview(s)
      end
    end)
  end)
  if not ok then
    st.loading = nil
    st.previews[key] = require("pseudoclaude.float.render").failed(item, err)
    H.show(s, st.previews[key], key)
  end
end

-- Helpers ------------------------------------------------------------------------------------------------------

---@param s pseudoclaude.float.State
---@param gen integer
---@param hits pseudoclaude.SearchHit[]
function H.arrived(s, gen, hits)
  local st = s.search
  if not s:is_current() or not st or st.gen ~= gen then
    return
  end
  local before = #st.hits
  if st.filter then
    local agents = require("pseudoclaude.float.agents")
    hits = agents.keep_hits(st.filter, hits, agents.ran(s))
  end
  vim.list_extend(st.hits, hits)
  st.stats.hits = #st.hits
  M.draw_rows(s)
  if before == 0 and #st.hits > 0 then
    st.stats.first_row_at = vim.uv.hrtime()
    H.request_preview(s)
  end
end

function H.finished(s, gen, err, summary)
  local st = s.search
  if not s:is_current() or not st or st.gen ~= gen then
    return
  end
  st.running, st.summary = false, summary
  if err and err ~= "cancelled" then
    st.error = require("pseudoclaude.errors").plain(err)
  end
  M.draw_rows(s)
  st.stats.done_at = vim.uv.hrtime()
end

---@param st pseudoclaude.float.SearchState
---@return string
function H.empty_text(st)
  if st.error then
    return st.error
  elseif not st.running and require("pseudoclaude.float.agents").parse(st.query) == "" then
    return st.external and "type to search inside every message, the other agents' too"
      or "type to search inside every message"
  elseif st.running then
    return "searching…"
  end
  return ("no message holds %q"):format(st.query)
end

---@param hit pseudoclaude.SearchHit
---@return string
function H.label(hit)
  if hit.kind == "tool_call" then
    return "call"
  elseif hit.kind == "tool_result" then
    return "output"
  end
  return hit.role == "user" and "you" or "agent"
end

---@param s pseudoclaude.float.State
function H.request_preview(s)
  s:request_preview()
end

--- Puts preview `p` in the preview window, the cursor on its hit (`p.cursor`) with the folds around it open.
---@param s pseudoclaude.float.State
---@param p pseudoclaude.float.Preview
---@param key string?
function H.show(s, p, key)
  require("pseudoclaude.float.preview").show(s, p)
  if s.search then
    s.search.preview_key = key
  end
end

return M
