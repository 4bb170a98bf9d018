--- The session picker of `:PseudoResume`: a prompt, a results list and a preview, in floating windows.
---
--- The first rows come from `sessions.list({ limit = max_items })`, which summarises only the newest sessions; the
--- full list, searched by the fuzzy filter, is read right after the first draw on a background thread
--- (`sessions.list_async`) and kept for the picker's life. Until it arrives, typing filters the first rows; then the
--- query is applied to every session. Rows and previews are drawn only for what is visible, so a keystroke costs
--- the filter plus one screenful. See `:help pseudoclaude-picker`.

local M = {}
local H = {}

---@class pseudoclaude.picker.Opts
---@field max_items integer? Sessions listed before typing (default: config `picker.max_items`).
---@field backend "float"|"select"? Default: config `picker.backend`.
---@field search string? Open in "search inside messages" mode with this query (`:PseudoSearch`).
---@field all boolean? The sessions of every workspace this editor has used (`:PseudoResume all`), each row marked with
--- its workspace.

---@class pseudoclaude.picker.Stats Timestamps are `vim.uv.hrtime()` values (ns).
---@field opened_at integer `open()` called
---@field list_ms number time of the first list (`limit = max_items`), ms
---@field rows_at integer? first rows drawn
---@field preview_at integer? first preview drawn
---@field full_at integer? the full list in place (read in the background)
---@field full_apply_ms number? main-thread time to put the full list in place (matcher, query, rows)
---@field full_count integer? sessions in the full list
---@field filters {query: string, ms: number, matches: integer}[] one per query change: filter + draw of the rows
---@field previews {id: string, ms: number}[] one per preview drawn: load + render + draw

---@class pseudoclaude.picker.State
---@field top_items pseudoclaude.SessionInfo[] The first list (`limit = max_items`).
---@field items pseudoclaude.SessionInfo[] What the filter searches: `top_items`, then the full list.
---@field full boolean Whether `items` is the full list.
---@field deleted table<string, true> Sessions deleted while the full list was being read.
---@field marked table<string, pseudoclaude.SessionInfo> Sessions renamed or pinned here: what the full list, when it
--- arrives, must show of them (it may have been read before the write).
---@field matcher pseudoclaude.picker.Matcher Over `items`.
---@field query string
---@field matches integer[] Indices into `items`, in display order.
---@field sel integer Selected position in `matches` (1-based).
---@field sel_id string? The highlighted session: kept highlighted while the list changes under it.
---@field top integer First visible position in `matches`.
---@field wins {prompt: integer, results: integer, preview: integer?}
---@field bufs {prompt: integer, results: integer, preview: integer?}
---@field origin_win integer
---@field augroup integer
---@field previews table<string, pseudoclaude.picker.Preview>
---@field preview_id string? Session shown in the preview.
---@field preview_pending boolean
---@field loading string? Session whose preview is being read in the background.
---@field preview_folded boolean? Whether the preview window holds folds.
---@field max_items integer
---@field now integer Unix seconds at open, for ages.
---@field stats pseudoclaude.picker.Stats
---@field search pseudoclaude.picker.SearchState? Set in "search inside messages" mode (picker/search.lua).
---@field all boolean? Sessions of every workspace (`:PseudoResume all`).
---@field listing boolean Whether the first rows are still being listed (the rows say so).
---@field asking string? The y/N question on the command line, while it waits for the key.

---@type pseudoclaude.picker.State?
local state = nil

local api = vim.api
local ns = api.nvim_create_namespace("pseudoclaude.picker")
--- Bytes of an uncached log the first rows may read on the main loop (about 1 ms); the full list reads the rest.
M.FIRST_ROWS_MAX_READ = 256 * 1024
local COUNTER_MARK = 1
local PREFIX_MARK = 2

--- Opens the picker (or, with `backend = "select"`, `vim.ui.select()`) over the workspace's sessions, the current
--- one left out. The windows open at once, with the prompt ready for keys; the first rows are listed on the core's
--- threads and drawn when they arrive (about a millisecond later), then the preview and the full list follow. When
--- there is no session, or the sessions cannot be listed, the picker closes again with a message.
---@param opts pseudoclaude.picker.Opts?
function M.open(opts)
  opts = opts or {}
  local cfg = require("pseudoclaude").get_config().picker
  local max_items = opts.max_items or cfg.max_items
  local backend = opts.backend or cfg.backend
  local opened_at = vim.uv.hrtime()
  M.close()
  if backend == "select" and not opts.search then
    return H.select(opts.all)
  end
  require("pseudoclaude.highlights").setup()

  local s = { ---@type pseudoclaude.picker.State
    top_items = {},
    items = {},
    listing = true,
    full = false,
    deleted = {},
    marked = {},
    query = "",
    matches = {},
    sel = 1,
    top = 1,
    wins = {},
    bufs = {},
    origin_win = api.nvim_get_current_win(),
    augroup = api.nvim_create_augroup("PseudoClaudePicker", { clear = true }),
    previews = {},
    preview_pending = false,
    max_items = max_items,
    now = os.time(),
    stats = { opened_at = opened_at, filters = {}, previews = {} },
    all = opts.all == true,
  }
  state = s
  H.open_windows(s)
  -- no matcher and no row renderer yet: this step is the windows and the keys, the rows come with the list
  vim.bo[s.bufs.results].modifiable = true
  api.nvim_buf_set_lines(s.bufs.results, 0, -1, false, { "  reading the sessions…" })
  vim.bo[s.bufs.results].modifiable = false
  H.attach(s)
  if opts.search then
    require("pseudoclaude.picker.search").enter(s, opts.search)
  end
  vim.cmd.startinsert({ bang = opts.search ~= nil })
  H.read_first_rows(s, opts)
end

--- The first rows, `max_items` newest sessions (pinned ones first), listed on the core's threads: a session whose
--- summary is not cached is listed from what a quick read gives (the full list reads the rest). When they arrive:
--- the rows, then in a main-loop step of its own the preview and the request for the full list.
---@param s pseudoclaude.picker.State
---@param opts pseudoclaude.picker.Opts
function H.read_first_rows(s, opts)
  local sessions = require("pseudoclaude.sessions")
  local asked = vim.uv.hrtime()
  local function fail(msg, level)
    if state == s then
      M.close()
    end
    H.notify(msg, level)
  end
  local ok, err = pcall(sessions.list_async, {
    limit = s.max_items,
    max_read = M.FIRST_ROWS_MAX_READ,
    include_pinned = true,
    all = opts.all,
  }, function(lerr, top)
    if state ~= s then
      return
    end
    s.stats.list_ms = (vim.uv.hrtime() - asked) / 1e6
    if lerr then
      return fail(lerr, vim.log.levels.ERROR)
    end
    if #top == 0 then
      local what = opts.search and "search" or "resume"
      local where = opts.all and "any workspace" or sessions.workspace()
      return fail(("pseudoclaude: no session to %s in %s"):format(what, where), vim.log.levels.INFO)
    end
    s.listing = false
    s.top_items = top
    if not s.full then
      H.set_items(s, H.with_marks(s, top))
      s.sel_id = s.sel_id or top[1].id
      if s.query == "" then
        H.default_matches(s)
      else
        s.matches = s.matcher:filter(s.query)
      end
      H.reselect(s)
      H.draw_rows(s)
    end
    s.stats.rows_at = vim.uv.hrtime()
    -- the preview and the full list in a step of their own: the rows were this one's work
    vim.schedule(function()
      if state ~= s then
        return
      end
      H.draw_preview(s)
      s.stats.preview_at = vim.uv.hrtime()
      H.read_full_list(s)
    end)
  end)
  if not ok then
    fail(err, vim.log.levels.ERROR)
  end
end

--- Closes the picker's windows and wipes its buffers; does nothing when it is not open.
function M.close()
  local s = state
  if not s then
    return
  end
  state = nil
  if s.search and s.search.handle then
    s.search.handle:cancel()
  end
  pcall(api.nvim_del_augroup_by_id, s.augroup)
  local in_prompt = api.nvim_get_current_win() == s.wins.prompt
  if in_prompt and api.nvim_win_is_valid(s.origin_win) then
    pcall(api.nvim_set_current_win, s.origin_win)
  end
  for _, win in pairs(s.wins) do
    if api.nvim_win_is_valid(win) then
      pcall(api.nvim_win_close, win, true)
    end
  end
  for _, buf in pairs(s.bufs) do
    if api.nvim_buf_is_valid(buf) then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
  if in_prompt then
    vim.cmd.stopinsert()
  end
end

--- Whether the picker is open.
---@return boolean
function M.is_open()
  return state ~= nil
end

--- The picker's state, for tests and benchmarks (read-only; nil when closed).
---@return pseudoclaude.picker.State?
function M.get_state()
  return state
end

--- The highlighted session, or nil.
---@return pseudoclaude.SessionInfo?
function M.selected()
  return state and H.selected(state) or nil
end

--- Moves the highlight by `delta` rows (clamped to the list).
---@param delta integer
function M.move(delta)
  local s = state
  if s and s.search then
    return require("pseudoclaude.picker.search").move(s, delta)
  end
  if not s or #s.matches == 0 then
    return
  end
  local sel = math.max(1, math.min(s.sel + delta, #s.matches))
  if sel ~= s.sel then
    s.sel = sel
    s.sel_id = s.items[s.matches[sel]].id
    H.draw_rows(s)
    H.request_preview(s)
  end
end

--- Scrolls the preview half a page down (`dir` > 0) or up.
---@param dir integer
function M.scroll_preview(dir)
  local win = state and state.wins.preview
  if not win or not api.nvim_win_is_valid(win) then
    return
  end
  local key = api.nvim_replace_termcodes(dir > 0 and "<C-d>" or "<C-u>", true, false, true)
  api.nvim_win_call(win, function()
    pcall(vim.cmd.normal, { key, bang = true })
  end)
end

--- Resumes the highlighted session: closes the picker, then calls `require("pseudoclaude").resume(id)` (which
--- returns at once and reads the session in the background). A session open in another editor is refused with an
--- error message and the picker stays open.
function M.resume_selected()
  local s = state
  if s and s.search then
    return require("pseudoclaude.picker.search").resume_selected(s)
  end
  local item = s and H.selected(s)
  if not s or not item then
    return
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, holder = pcall(sessions.within, item.workspace, function()
    return sessions.holder(item.id)
  end)
  if not ok then
    return require("pseudoclaude.errors").report(holder)
  end
  if holder then
    if not item.held_by then
      item.held_by = holder
      s.previews[item.id], s.preview_id = nil, nil
      H.draw_rows(s)
      H.request_preview(s)
    end
    return H.notify(H.held_message(item, holder), vim.log.levels.ERROR)
  end
  local elsewhere = H.elsewhere(item)
  if elsewhere and not H.switch_ok(s, item, elsewhere) then
    return
  end
  M.close()
  vim.schedule(function()
    local done, err = pcall(H.resume_in, item.id, elsewhere)
    if not done then
      require("pseudoclaude.errors").report(err)
    end
  end)
end

--- The `vim.ui.select()` backend's resume of a session of another workspace: asks first (`vim.ui.select` again, so a
--- replaced `vim.ui.select` asks it too).
---@param item pseudoclaude.SessionInfo
function H.resume_elsewhere(item)
  local ws = assert(H.elsewhere(item))
  local question = ("Session %q is in %s. Switch the chat's workspace there?"):format(
    require("pseudoclaude.picker.render").title(item),
    vim.fn.fnamemodify(ws, ":~")
  )
  vim.ui.select({ "Yes", "No" }, { prompt = question, kind = "pseudoclaude.switch_workspace" }, function(choice)
    if choice == "Yes" then
      local ok, err = pcall(H.resume_in, item.id, ws)
      if not ok then
        require("pseudoclaude.errors").report(err)
      end
    end
  end)
end

--- The workspace of a `:PseudoResume all` row when it is not the chat's own, else nil.
---@param item pseudoclaude.SessionInfo
---@return string?
function H.elsewhere(item)
  local ws = type(item.workspace) == "string" and item.workspace or nil
  if not ws then
    return nil
  end
  local here = require("pseudoclaude").workspace()
  return (vim.uv.fs_realpath(here) or here) ~= ws and ws or nil
end

--- Asks whether the chat may move to `workspace`, the one of `item` (a `:PseudoResume all` row).
---@param s pseudoclaude.picker.State
---@param item pseudoclaude.SessionInfo
---@param workspace string
---@return boolean
function H.switch_ok(s, item, workspace)
  local question = ("Session %q is in %s. Switch the chat's workspace there?"):format(
    require("pseudoclaude.picker.render").title(item),
    vim.fn.fnamemodify(workspace, ":~")
  )
  return H.confirm(question) and state == s
end

--- Resumes session `id`, first switching the chat to `workspace` when one is given; a failed resume switches back.
---@param id string
---@param workspace string?
function H.resume_in(id, workspace)
  if not workspace then
    return require("pseudoclaude").resume(id)
  end
  local chat = require("pseudoclaude.chat")
  local before = chat.set_workspace(workspace)
  require("pseudoclaude").resume(id, {
    on_done = function(report)
      if not report.ok then
        chat.set_workspace(before)
      end
    end,
  })
end

--- Deletes the highlighted session after asking (y/N on the command line); the picker stays open on the next one.
function M.delete_selected()
  local s = state
  local item = s and H.selected(s)
  if not s or not item then
    return
  end
  local question = ("Delete session %q (%s)?"):format(require("pseudoclaude.picker.render").title(item), item.id)
  if not H.confirm(question) or state ~= s then
    return
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.delete(item.id)
  end)
  if not ok then
    return H.notify(err, vim.log.levels.ERROR)
  end
  H.remove(s, item.id)
end

--- Renames the highlighted session: asks for the name on the command line, prefilled with its title (an empty name
--- gives it back its automatic title; <Esc> changes nothing).
function M.rename_selected()
  local s = state
  local item = s and H.selected(s)
  if not s or not item then
    return
  end
  local title = H.ask("Rename session: ", item.title or "")
  if not title or state ~= s then
    return
  end
  H.mark(s, "rename", item, title)
end

--- Pins the highlighted session, or unpins it: pinned sessions come first.
function M.toggle_pin_selected()
  local s = state
  local item = s and H.selected(s)
  if s and item then
    H.mark(s, "pin", item, not item.pinned)
  end
end

--- Forks the highlighted session at its end ("resume as new") and resumes the fork; the session itself is untouched.
function M.fork_selected()
  local s = state
  local item = s and H.selected(s)
  if not s or not item then
    return
  end
  local elsewhere = H.elsewhere(item)
  if elsewhere and not H.switch_ok(s, item, elsewhere) then
    return
  end
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.fork(item.id, nil, {
      on_done = function(ferr, forked)
        if ferr then
          return H.notify(ferr, vim.log.levels.ERROR)
        end
        if state == s then
          M.close()
        end
        vim.schedule(function()
          local done, rerr = pcall(H.resume_in, forked.id, elsewhere)
          if not done then
            require("pseudoclaude.errors").report(rerr)
          end
        end)
      end,
    })
  end)
  if not ok then
    H.notify(err, vim.log.levels.ERROR)
  end
end

--- `:PseudoResume [last|all|{id}]`: no argument opens the picker; `last` resumes the most recent session; `all` opens
--- the picker over the sessions of every workspace this editor has used; an id resumes that session. Errors are reported with `vim.notify`.
---@param args string?
function M.command(args)
  args = vim.trim(args or "")
  local ok, err = pcall(function()
    if args == "" then
      return M.open()
    end
    if args == "all" then
      return M.open({ all = true })
    end
    local id = args
    if args == "last" then
      local sessions = require("pseudoclaude.sessions")
      local newest = sessions.list({ limit = 1, check_locks = false, max_read = 0 }) -- the id only: reads no log
      if #newest == 0 then
        error(("pseudoclaude: no session to resume in %s"):format(sessions.workspace()), 0)
      end
      id = newest[1].id
    end
    H.resume(id)
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
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

-- Helpers ------------------------------------------------------------------------------------------------------

---@param msg any
---@param level integer?
function H.notify(msg, level)
  vim.notify(tostring(msg), level or vim.log.levels.ERROR)
end

--- Asks a yes/no question on the command line; only "y" or "Y" is yes. (Not `vim.fn.confirm()`, which answers
--- its default without asking when no UI is attached.)
---@param question string
---@return boolean
function H.confirm(question)
  vim.cmd.redraw()
  api.nvim_echo({ { question .. " [y/N] ", "Question" } }, false, {})
  local s = state
  if s then
    s.asking = question -- for whoever drives the picker (tests, a plugin): it waits for this key
  end
  local ok, key = pcall(vim.fn.getcharstr)
  if s then
    s.asking = nil
  end
  api.nvim_echo({ { "" } }, false, {})
  return ok and (key == "y" or key == "Y")
end

--- Asks for a line on the command line, prefilled with `default`; nil when cancelled. (Not `vim.ui.input()`: a
--- floating input would leave the prompt window, which closes the picker.)
---@param prompt string
---@param default string
---@return string?
function H.ask(prompt, default)
  local cancelled = "\1cancelled"
  local ok, answer = pcall(vim.fn.input, { prompt = prompt, default = default, cancelreturn = cancelled })
  if not ok or answer == cancelled then
    return nil
  end
  return answer
end

--- Writes a name (`what` = "rename") or a pin ("pin") for session `item` in the background; the row follows when the
--- line is on disk.
---@param s pseudoclaude.picker.State
---@param what "rename"|"pin"
---@param item pseudoclaude.SessionInfo
---@param value string|boolean
function H.mark(s, what, item, value)
  local id = item.id
  local sessions = require("pseudoclaude.sessions")
  local function done(merr, info)
    if merr then
      return H.notify(merr, vim.log.levels.ERROR)
    end
    if state == s and info then
      info.workspace = item.workspace
      s.marked[id] = info
      H.set_items(s, H.with_marks(s, s.items))
      for _, hit in ipairs(s.search and s.search.hits or {}) do
        if hit.id == id then
          hit.title = info.title
        end
      end
      s.previews[id], s.preview_id = nil, nil
      H.refresh(s)
    end
  end
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions[what](id, value, done)
  end)
  if not ok then
    H.notify(err, vim.log.levels.ERROR)
  end
end

--- `items` with the sessions renamed or pinned here as written, each moved to the top of its group (pinned or not):
--- the write made it the most recent, as the next list will show it.
---@param s pseudoclaude.picker.State
---@param items pseudoclaude.SessionInfo[]
---@return pseudoclaude.SessionInfo[]
function H.with_marks(s, items)
  if not next(s.marked) then
    return items
  end
  local moved, pinned, rest = {}, {}, {}
  for _, item in ipairs(items) do
    local info = s.marked[item.id]
    if info then
      moved[#moved + 1] = info
    elseif item.pinned then
      pinned[#pinned + 1] = item
    else
      rest[#rest + 1] = item
    end
  end
  local out = {}
  for _, group in ipairs({ true, false }) do
    for _, info in ipairs(moved) do
      if (info.pinned == true) == group then
        out[#out + 1] = info
      end
    end
    for _, item in ipairs(group and pinned or rest) do
      out[#out + 1] = item
    end
  end
  return out
end

---@param item pseudoclaude.SessionInfo
---@param holder string
---@return string
function H.held_message(item, holder)
  return ("pseudoclaude: session %s (%s) is open in another editor (%s); close it there first"):format(
    require("pseudoclaude.picker.render").title(item),
    item.id,
    holder
  )
end

--- Resumes session `id` unless another editor holds it; raises otherwise. Reads no log: the resume itself runs in
--- the background.
---@param id string
function H.resume(id)
  local holder = require("pseudoclaude.sessions").holder(id)
  if holder then
    error(H.held_message({ id = id }, holder), 0)
  end
  require("pseudoclaude").resume(id)
end

--- The `vim.ui.select()` backend: every session, newest first, one line each (read in the background).
---@param all boolean?
function H.select(all)
  require("pseudoclaude.sessions").list_async({ all = all }, function(err, items)
    if err then
      return require("pseudoclaude.errors").report(err)
    end
    if #(items or {}) == 0 then
      local where = all and "any workspace" or require("pseudoclaude.sessions").workspace()
      return H.notify(("pseudoclaude: no session to resume in %s"):format(where), vim.log.levels.INFO)
    end
    H.select_from(items)
  end)
end

---@param items pseudoclaude.SessionInfo[]
function H.select_from(items)
  local render = require("pseudoclaude.picker.render")
  local now = os.time()
  vim.ui.select(items, {
    prompt = "Resume session",
    kind = "pseudoclaude.session",
    format_item = function(item)
      local parts = { render.title(item), render.age(now - render.activity(item)), render.count(item.messages) }
      if (item.model or "") ~= "" then
        parts[#parts + 1] = item.model
      end
      if type(item.branch) == "string" then
        parts[#parts + 1] = item.branch
      end
      if type(item.cost) == "number" then
        parts[#parts + 1] = require("pseudoclaude.usage").cost(item.cost)
      end
      if item.held_by then
        parts[#parts + 1] = "open in another editor"
      end
      if type(item.workspace) == "string" then
        parts[#parts + 1] = vim.fn.fnamemodify(item.workspace, ":~")
      end
      return table.concat(parts, " · ")
    end,
  }, function(item)
    if item and H.elsewhere(item) then
      local ok, err = pcall(H.resume_elsewhere, item)
      if not ok then
        require("pseudoclaude.errors").report(err)
      end
    elseif item then
      local ok, err = pcall(H.resume, item.id)
      if not ok then
        require("pseudoclaude.errors").report(err)
      end
    end
  end)
end

---@param s pseudoclaude.picker.State
---@return pseudoclaude.SessionInfo?
function H.selected(s)
  if s.search then
    return require("pseudoclaude.picker.search").selected_item(s)
  end
  local i = s.matches[s.sel]
  return i and s.items[i] or nil
end

--- Creates the buffers and windows.
---@param s pseudoclaude.picker.State
function H.open_windows(s)
  local layout = H.layout()
  for _, name in ipairs({ "results", "preview", "prompt" }) do
    local cfg = layout[name]
    if cfg then
      local buf = api.nvim_create_buf(false, true)
      vim.bo[buf].bufhidden = "wipe"
      vim.bo[buf].swapfile = false
      s.bufs[name] = buf
      local win = api.nvim_open_win(buf, name == "prompt", cfg)
      s.wins[name] = win
      local wo = vim.wo[win]
      wo.winhighlight =
        "NormalFloat:PseudoClaudePickerNormal,FloatBorder:PseudoClaudePickerBorder,FloatTitle:PseudoClaudePickerTitle"
      wo.wrap = name == "preview"
      wo.linebreak = name == "preview"
      wo.breakindent = name == "preview"
      wo.cursorline = false
      if name == "preview" then
        wo.foldmethod = "manual"
        wo.foldenable = true
        wo.foldlevel = 0
      end
      if name ~= "prompt" then
        vim.bo[buf].modifiable = false
      end
    end
  end
  local prompt = s.bufs.prompt
  -- a filetype to recognise the prompt by, without FileType autocommands (a search of 'runtimepath': 1 ms)
  api.nvim_buf_call(prompt, function()
    vim.cmd("noautocmd setlocal filetype=pseudoclaude_picker")
  end)
  vim.b[prompt].completion = false -- blink.cmp and friends: no completion menu in the prompt
  api.nvim_buf_set_extmark(prompt, ns, 0, 0, {
    id = PREFIX_MARK,
    virt_text = { { "> ", "PseudoClaudePickerPrompt" } },
    virt_text_pos = "inline",
    right_gravity = false,
  })
end

---@return pseudoclaude.picker.Layout
function H.layout()
  return require("pseudoclaude.picker.layout").compute(vim.o.columns, vim.o.lines, { cmdheight = vim.o.cmdheight })
end

--- Mappings and autocommands.
---@param s pseudoclaude.picker.State
function H.attach(s)
  local buf = s.bufs.prompt
  local function map(modes, lhs, fn, desc)
    vim.keymap.set(
      modes,
      lhs,
      fn,
      { buffer = buf, nowait = true, silent = true, desc = "pseudoclaude picker: " .. desc }
    )
  end
  local function down()
    M.move(1)
  end
  local function up()
    M.move(-1)
  end
  map("i", "<C-n>", down, "next session")
  map("i", "<Down>", down, "next session")
  map("i", "<C-p>", up, "previous session")
  map("i", "<Up>", up, "previous session")
  map({ "i", "n" }, "<CR>", M.resume_selected, "resume")
  map({ "i", "n" }, "<Esc>", M.close, "close")
  map({ "i", "n" }, "<C-c>", M.close, "close")
  map("n", "q", M.close, "close")
  map({ "i", "n" }, "<C-d>", function()
    M.scroll_preview(1)
  end, "scroll the preview down")
  map({ "i", "n" }, "<C-u>", function()
    M.scroll_preview(-1)
  end, "scroll the preview up")
  map({ "i", "n" }, "<C-x>", M.delete_selected, "delete the session")
  map({ "i", "n" }, "<C-g>", function()
    require("pseudoclaude.picker.search").toggle(state)
  end, "search inside messages (on/off)")
  map({ "i", "n" }, "<C-r>", M.rename_selected, "rename the session")
  map({ "i", "n" }, "<C-t>", M.toggle_pin_selected, "pin or unpin the session")
  map({ "i", "n" }, "<C-f>", M.fork_selected, "fork the session (resume as new)")
  map("n", "j", down, "next session")
  map("n", "k", up, "previous session")

  local group = s.augroup
  api.nvim_create_autocmd({ "TextChangedI", "TextChanged" }, {
    group = group,
    buffer = buf,
    callback = function()
      H.on_change(s)
    end,
  })
  -- leaving the prompt, or closing any of the windows, closes the picker
  api.nvim_create_autocmd("WinLeave", {
    group = group,
    buffer = buf,
    callback = function()
      vim.schedule(function()
        if state == s and api.nvim_get_current_win() ~= s.wins.prompt then
          M.close()
        end
      end)
    end,
  })
  api.nvim_create_autocmd("WinClosed", {
    group = group,
    callback = function(ev)
      local closed = tonumber(ev.match)
      for _, win in pairs(s.wins) do
        if win == closed then
          vim.schedule(function()
            if state == s then
              M.close()
            end
          end)
          return
        end
      end
    end,
  })
  api.nvim_create_autocmd("VimResized", {
    group = group,
    callback = function()
      H.relayout(s)
    end,
  })
end

---@param s pseudoclaude.picker.State
function H.relayout(s)
  local layout = H.layout()
  for name, win in pairs(s.wins) do
    if layout[name] and api.nvim_win_is_valid(win) then
      api.nvim_win_set_config(win, layout[name])
    end
  end
  H.draw_rows(s)
  s.preview_id = nil
  s.previews = {}
  H.request_preview(s)
end

--- Starts reading the full list in the background; when it arrives, it replaces the first rows as what the query
--- searches. (Read right after the first draw instead when no thread can be started.)
---@param s pseudoclaude.picker.State
function H.read_full_list(s)
  local sessions = require("pseudoclaude.sessions")
  local ok = pcall(sessions.list_async, { all = s.all }, function(err, items)
    if state ~= s or s.full then
      return
    end
    if err then
      H.notify(err, vim.log.levels.ERROR)
    end
    H.use_full_list(s, items or s.items)
  end)
  if not ok then
    vim.schedule(function()
      if state == s and not s.full then
        local read, items = pcall(sessions.list, { all = s.all })
        H.use_full_list(s, read and items or s.items)
      end
    end)
  end
end

--- Haystacks (and their lower-cased forms) built per main-loop step: 10,000 at once is more than a frame.
H.HAY_STEP = 500

--- The full list is here: build what the matcher searches in steps, then search it from now on and apply the
--- current query to it.
---@param s pseudoclaude.picker.State
---@param items pseudoclaude.SessionInfo[]
function H.use_full_list(s, items)
  items = H.with_marks(s, items)
  local hay, lower, done = {}, {}, 0
  local function step()
    if state ~= s or s.full then
      return
    end
    for i = done + 1, math.min(done + H.HAY_STEP, #items) do
      hay[i] = H.haystack(items[i])
      lower[i] = hay[i]:lower()
    end
    done = math.min(done + H.HAY_STEP, #items)
    if done < #items then
      return vim.schedule(step)
    end
    H.install_full_list(s, items, hay, lower)
  end
  step()
end

---@param item pseudoclaude.SessionInfo
---@return string
function H.haystack(item)
  -- the branch last, so that the title's and the model's offsets stay where `draw_match_highlights` looks
  local branch = type(item.branch) == "string" and item.branch or ""
  local hay = (item.title or "") .. " " .. (item.model or "") .. " " .. item.id .. " " .. branch
  return type(item.workspace) == "string" and (hay .. " " .. item.workspace) or hay
end

---@param s pseudoclaude.picker.State
---@param items pseudoclaude.SessionInfo[]
---@param hay string[]
---@param lower string[]
function H.install_full_list(s, items, hay, lower)
  if next(s.deleted) then
    local kept, kept_hay, kept_lower = {}, {}, {}
    for i, item in ipairs(items) do
      if not s.deleted[item.id] then
        kept[#kept + 1], kept_hay[#kept + 1], kept_lower[#kept + 1] = item, hay[i], lower[i]
      end
    end
    items, hay, lower = kept, kept_hay, kept_lower
  end
  local t = vim.uv.hrtime()
  s.items = items
  local matcher = require("pseudoclaude.picker.matcher")
  s.matcher = matcher.new(hay, nil, matcher.DEFAULT_ENGINE == "lua" and lower or nil)
  s.full = true
  H.refresh(s)
  s.stats.full_at = vim.uv.hrtime()
  s.stats.full_apply_ms = (s.stats.full_at - t) / 1e6
  s.stats.full_count = #items
end

--- Replaces the searched items and rebuilds the matcher.
---@param s pseudoclaude.picker.State
---@param items pseudoclaude.SessionInfo[]
function H.set_items(s, items)
  local hay = {}
  for i, item in ipairs(items) do
    hay[i] = H.haystack(item)
  end
  s.items = items
  s.matcher = require("pseudoclaude.picker.matcher").new(hay)
end

--- Without a query: the `max_items` newest.
---@param s pseudoclaude.picker.State
function H.default_matches(s)
  local m = {}
  for i = 1, math.min(s.max_items, #s.items) do
    m[i] = i
  end
  s.matches = m
end

--- The prompt's text changed: filter and redraw.
---@param s pseudoclaude.picker.State
function H.on_change(s)
  if state ~= s then
    return
  end
  local t = vim.uv.hrtime()
  local query = api.nvim_buf_get_lines(s.bufs.prompt, 0, 1, false)[1] or ""
  if s.search then
    return require("pseudoclaude.picker.search").on_query(s, query)
  end
  if query == s.query then
    return
  end
  local previous = s.query
  s.query = query
  if s.listing then
    return -- the first rows, when they come, are filtered with it
  end
  if query == "" then
    H.default_matches(s)
  else
    -- typing forward narrows: only the previous matches can still match
    local narrowing = previous ~= "" and vim.startswith(query, previous)
    s.matches = s.matcher:filter(query, narrowing and s.matches or nil)
  end
  H.reselect(s)
  H.draw_rows(s)
  local stats = s.stats.filters
  stats[#stats + 1] = { query = query, ms = (vim.uv.hrtime() - t) / 1e6, matches = #s.matches }
  H.request_preview(s)
end

--- Puts the highlight back on `s.sel_id` when it is still among the matches, else on the first match (or, with
--- `fallback`, on that position: the row after a deleted session).
---@param s pseudoclaude.picker.State
---@param fallback integer?
function H.reselect(s, fallback)
  local sel = nil
  if s.sel_id then
    for k, i in ipairs(s.matches) do
      if s.items[i].id == s.sel_id then
        sel = k
        break
      end
    end
  end
  s.sel = math.max(1, math.min(sel or fallback or 1, #s.matches))
  if not sel then
    s.top = 1
  end
  local item = H.selected(s)
  s.sel_id = item and item.id or nil
end

--- Recomputes the matches for the current query (after the items changed), keeping the highlighted session.
---@param s pseudoclaude.picker.State
---@param fallback integer? Position to highlight when the highlighted session is gone.
function H.refresh(s, fallback)
  if s.listing then
    return -- nothing to filter yet: the first rows, when they come, are
  end
  if s.query == "" then
    H.default_matches(s)
  else
    s.matches = s.matcher:filter(s.query)
  end
  H.reselect(s, fallback)
  H.draw_rows(s)
  H.request_preview(s)
end

--- Drops a deleted session from the lists and redraws; the highlight moves to the row that took its place.
---@param s pseudoclaude.picker.State
---@param id string
function H.remove(s, id)
  s.deleted[id] = true
  local kept = {}
  for _, item in ipairs(s.items) do
    if item.id ~= id then
      kept[#kept + 1] = item
    end
  end
  local sel = s.sel
  H.set_items(s, kept)
  if s.search then
    require("pseudoclaude.picker.search").forget(s, id)
  end
  s.previews[id] = nil
  s.preview_id = nil
  s.sel_id = nil
  H.refresh(s, sel)
end

--- Draws the visible rows, the selection, the match highlights and the counter.
---@param s pseudoclaude.picker.State
function H.draw_rows(s)
  if s.search then
    return require("pseudoclaude.picker.search").draw_rows(s)
  end
  local win, buf = s.wins.results, s.bufs.results
  if not api.nvim_win_is_valid(win) then
    return
  end
  local height, width = api.nvim_win_get_height(win), api.nvim_win_get_width(win)
  local n = #s.matches
  s.sel = math.max(1, math.min(s.sel, n))
  if s.sel < s.top then
    s.top = s.sel
  elseif s.sel >= s.top + height then
    s.top = s.sel - height + 1
  end
  s.top = math.max(1, math.min(s.top, n - height + 1))

  local visible = {}
  for k = 0, height - 1 do
    local i = s.matches[s.top + k]
    if not i then
      break
    end
    visible[#visible + 1] = s.items[i]
  end
  local render = require("pseudoclaude.picker.render")
  local lines, rows = render.rows(visible, width, s.now)
  if n == 0 then
    lines = { #s.items == 0 and "  no sessions" or "  no match" }
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  if n == 0 then
    api.nvim_buf_set_extmark(buf, ns, 0, 0, { end_row = 0, end_col = #lines[1], hl_group = "PseudoClaudePickerEmpty" })
  end
  for k, row in ipairs(rows) do
    for _, h in ipairs(row.hls) do
      api.nvim_buf_set_extmark(buf, ns, k - 1, h[1], { end_col = h[2], hl_group = h[3], priority = 100 })
    end
  end
  if s.query ~= "" and s.matcher then
    H.draw_match_highlights(s, buf, rows)
  end
  if n > 0 then
    local line = s.sel - s.top
    api.nvim_buf_set_extmark(buf, ns, line, 0, { line_hl_group = "PseudoClaudePickerSelection", priority = 50 })
    api.nvim_win_set_cursor(win, { line + 1, 0 })
  end
  local total = #s.items .. (s.full and "" or "+")
  api.nvim_buf_set_extmark(s.bufs.prompt, ns, 0, 0, {
    id = COUNTER_MARK,
    virt_text = { { ("%d/%s"):format(n, total), "PseudoClaudePickerCounter" } },
    virt_text_pos = "right_align",
  })
end

--- Highlights the characters the query matched, in the title and model columns of the visible rows.
---@param s pseudoclaude.picker.State
---@param buf integer
---@param rows pseudoclaude.picker.Row[]
function H.draw_match_highlights(s, buf, rows)
  for k, row in ipairs(rows) do
    local i = s.matches[s.top + k - 1]
    local positions = s.matcher:positions(i, s.query)
    local hay = s.matcher.haystacks[i]
    local item = s.items[i]
    local title_len = #(item.title or "")
    local branch_at = title_len + #(item.model or "") + #item.id + 3
    for _, p in ipairs(positions or {}) do
      local col ---@type integer?
      if p < row.title_bytes then
        col = row.title_col + p
      elseif row.model_col and p > title_len and p - title_len - 1 < row.model_bytes then
        col = row.model_col + p - title_len - 1
      elseif row.branch_col and p >= branch_at and p - branch_at < row.branch_bytes then
        col = row.branch_col + p - branch_at
      end
      if col then
        local len = H.char_len(hay, p + 1)
        api.nvim_buf_set_extmark(buf, ns, k - 1, col, {
          end_col = col + len,
          hl_group = "PseudoClaudePickerMatch",
          priority = 200,
        })
      end
    end
  end
end

--- Bytes of the UTF-8 character starting at byte `i` of `s`.
---@param s string
---@param i integer
---@return integer
function H.char_len(s, i)
  local b = s:byte(i) or 0
  return b >= 0xF0 and 4 or b >= 0xE0 and 3 or b >= 0xC0 and 2 or 1
end

--- Draws the preview soon (once the keys typed so far are handled).
---@param s pseudoclaude.picker.State
function H.request_preview(s)
  if s.preview_pending then
    return
  end
  s.preview_pending = true
  vim.schedule(function()
    s.preview_pending = false
    if state == s then
      H.draw_preview(s)
    end
  end)
end

--- Shows the selected session's history in the preview window. A session not read yet shows a "loading" line at
--- once and is read in the background; what arrives for a session the highlight has left is kept for later but not
--- drawn.
---@param s pseudoclaude.picker.State
function H.draw_preview(s)
  if s.search then
    return require("pseudoclaude.picker.search").draw_preview(s)
  end
  local win = s.wins.preview
  if not win or not api.nvim_win_is_valid(win) then
    return
  end
  local item = H.selected(s)
  if (item and item.id) == s.preview_id then
    return
  end
  local t = vim.uv.hrtime()
  local render = require("pseudoclaude.picker.render")
  local p = { lines = {}, hls = {}, folds = {} } ---@type pseudoclaude.picker.Preview
  if item then
    p = s.previews[item.id]
    if not p then
      H.show_preview(s, render.loading(item, s.now), nil)
      H.load_preview(s, item)
      return
    end
  end
  H.show_preview(s, p, item and item.id)
  local stats = s.stats.previews
  stats[#stats + 1] = { id = item and item.id or "", ms = (vim.uv.hrtime() - t) / 1e6 }
end

--- Reads the preview of `item` in the background, once at a time per session.
---@param s pseudoclaude.picker.State
---@param item pseudoclaude.SessionInfo
function H.load_preview(s, item)
  if s.loading == item.id then
    return
  end
  s.loading = item.id
  local asked = vim.uv.hrtime()
  local render = require("pseudoclaude.picker.render")
  local sessions = require("pseudoclaude.sessions")
  local ok, err = pcall(sessions.within, item.workspace, function()
    return sessions.preview_async(item.id, function(perr, preview)
      if s.loading == item.id then
        s.loading = nil
      end
      if state ~= s or perr == "superseded" then
        return
      end
      -- the render in a main-loop step of its own (this one decoded the preview)
      vim.schedule(function()
        H.preview_arrived(s, item, perr, preview, asked)
      end)
    end)
  end)
  if not ok then
    s.loading = nil
    s.previews[item.id] = render.failed(item, err)
    H.show_preview(s, s.previews[item.id], item.id)
  end
end

--- A preview read in the background is here: keep it, and draw it if its session is still highlighted.
---@param s pseudoclaude.picker.State
---@param item pseudoclaude.SessionInfo
---@param perr string?
---@param preview pseudoclaude.SessionPreview?
---@param asked integer
function H.preview_arrived(s, item, perr, preview, asked)
  local render = require("pseudoclaude.picker.render")
  if state ~= s then
    return
  end
  local win = s.wins.preview
  if not win or not api.nvim_win_is_valid(win) then
    return
  end
  local t = vim.uv.hrtime()
  local p
  if perr then
    p = render.failed(item, perr)
  else
    p = render.preview(preview, item, s.now, api.nvim_win_get_width(win))
  end
  s.previews[item.id] = p
  if s.search then
    return -- read for the list; the search mode draws its own previews
  end
  local current = H.selected(s)
  if current and current.id == item.id then
    H.show_preview(s, p, item.id)
    local stats = s.stats.previews
    stats[#stats + 1] = { id = item.id, ms = (vim.uv.hrtime() - t) / 1e6, wait_ms = (t - asked) / 1e6 }
  elseif current and not s.previews[current.id] then
    H.load_preview(s, current)
  end
end

--- Puts preview `p` in the preview window (`id`: the session it shows; nil while it is loading).
---@param s pseudoclaude.picker.State
---@param p pseudoclaude.picker.Preview
---@param id string?
function H.show_preview(s, p, id)
  local win, buf = s.wins.preview, s.bufs.preview
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, p.lines)
  vim.bo[buf].modifiable = false
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, h in ipairs(p.hls) do
    local line = p.lines[h[1] + 1]
    api.nvim_buf_set_extmark(buf, ns, h[1], h[2], {
      end_col = h[3] < 0 and #line or h[3],
      hl_group = h[4],
    })
  end
  local folds = p.folds or {}
  -- a keystroke mostly shows a "loading" line: no fold to drop, none to make, no Ex command to parse
  if s.preview_folded or #folds > 0 then
    api.nvim_win_call(win, function()
      pcall(vim.cmd, "normal! zE")
      for _, f in ipairs(folds) do
        pcall(vim.cmd, ("%d,%dfold"):format(f[1] + 1, f[2] + 1))
      end
    end)
  end
  s.preview_folded = #folds > 0
  api.nvim_win_set_cursor(win, { 1, 0 })
  s.preview_id = id
end

M._H = H

return M
