--- The session picker of `:PseudoResume`: a prompt, a results list and a preview, in floating windows: our own picker,
--- the default `picker.backend` (the adapters to telescope, fzf-lua, snacks and mini.pick are `pickers/`). This module
--- is the controller (state, windows, keys, the query); as in telescope, the parts are modules of their own, loaded
--- when first needed: `float/finder.lua` (where the items come from: the first rows, then the full list, both read on
--- the core's threads), `float/matcher.lua` (the fuzzy filter), `float/rows.lua` (the results window),
--- `float/preview.lua` (the previewer), `float/render.lua` (rows and previews as text), `float/layout.lua` (the
--- windows' geometry), `float/actions.lua` (what the keys do to a session, the resume of an id, the `vim.ui.select()`
--- backend) and `float/search.lua` (the "search inside messages" mode). Each part is handed the state and asks the
--- controller through its methods (`Picker` below); none requires this module. Rows and previews are drawn only for
--- what is visible, so a keystroke costs the filter plus one screenful. `<C-o>` ("other agents") lists the workspace's
--- sessions of the other agents too (Claude Code, Codex, Gemini CLI, Qwen Code, opencode, Pi); `<CR>` on one imports it,
--- then resumes the copy.
--- See `:help pseudoclaude-picker`.
---
--- Architecture invariant: no main-loop step of the picker reads a session: the first rows, the full list
--- and every preview are read on the core's threads; `<CR>` resumes the session the highlighted row shows
--- (tracked by id, whatever the list does under it).

local M = {}
local H = {}

---@class pseudoclaude.float.Opts
---@field max_items integer? Sessions listed before typing (default: config `picker.max_items`).
---@field backend "float"|"select"|"telescope"|"fzf-lua"|"snacks"|"mini"|"auto"? Default: config `picker.backend`.
---@field search string? Open in "search inside messages" mode with this query (`:PseudoSearch`).
---@field all boolean? The sessions of every workspace this editor has used (`:PseudoResume all`), each row marked with
--- its workspace.
---@field external boolean? This workspace's sessions of the other agents too (default: config `picker.external`;
--- `<C-o>` toggles them).

---@class pseudoclaude.float.Stats Timestamps are `vim.uv.hrtime()` values (ns).
---@field opened_at integer `open()` called
---@field list_ms number time of the first list (`limit = max_items`), ms
---@field rows_at integer? first rows drawn
---@field preview_at integer? first preview drawn
---@field full_at integer? the full list in place (read in the background)
---@field full_apply_ms number? main-thread time to put the full list in place (matcher, query, rows)
---@field full_count integer? sessions in the full list
---@field filters {query: string, ms: number, cpu_ms: number, matches: integer, collected_at: integer?}[] one per query
--- change: filter + draw of the rows; `collected_at`: the collector's step for its memory done (after the redraw)
---@field previews {id: string, ms: number}[] one per preview drawn: load + render + draw
---@field rows_made integer? rows the draws of the list made so far (not found made: float/rows.lua)
---@field ahead_done integer? items whose rows were made ahead, in idle time, once that is over (float/rows.lua)
---@field ahead_at integer? when that was over

---@class pseudoclaude.float.State
---@field top_items pseudoclaude.SessionInfo[] The first list (`limit = max_items`).
---@field items pseudoclaude.SessionInfo[] What the filter searches: `top_items`, then the full list (packed: its rows
--- built when first read, so count with `count` and walk it with `finder.plain()`).
---@field count integer How many `items`.
---@field packed pseudoclaude.PackedList? The full list as the core packed it, when `items` reads its rows from it.
---@field full boolean Whether `items` is the full list.
---@field deleted table<string, true> Sessions deleted while the full list was being read.
---@field marked table<string, pseudoclaude.SessionInfo> Sessions renamed or pinned here: what the full list, when it
--- arrives, must show of them (it may have been read before the write).
---@field matcher pseudoclaude.float.Matcher Over `items`.
---@field query string
---@field matches integer[] Indices into `items`, in display order.
---@field sel integer Selected position in `matches` (1-based).
---@field sel_id string? The highlighted session: kept highlighted while the list changes under it.
---@field sel_at integer? Its index in `items` when it was highlighted (checked against `sel_id` before use).
---@field top integer First visible position in `matches`.
---@field wins {prompt: integer, results: integer, preview: integer?}
---@field bufs {prompt: integer, results: integer, preview: integer?}
---@field row_cache table<table, table>? Each item's row as float/render.lua made it last (weak keys).
---@field ahead integer? The width the rows are being (or were) made ahead for (float/rows.lua).
---@field drawn {buf: integer, lines: string[], hls: table[][], tick: integer}? The results as float/rows.lua drew them.
---@field origin_win integer
---@field augroup integer
---@field previews table<string, pseudoclaude.float.Preview>
---@field preview_id string? Session shown in the preview.
---@field preview_pending boolean
---@field loading string? Session whose preview is being read in the background.
---@field preview_folded boolean? Whether the preview window holds folds.
---@field max_items integer
---@field now integer Unix seconds at open, for ages.
---@field stats pseudoclaude.float.Stats
---@field search pseudoclaude.float.SearchState? Set in "search inside messages" mode (float/search.lua).
---@field all boolean? Sessions of every workspace (`:PseudoResume all`).
---@field listing boolean Whether the first rows are still being listed (the rows say so).
---@field asking string? The y/N question on the command line, while it waits for the key.
---@field external boolean Whether the other agents' sessions are listed (`<C-o>`).
---@field list_gen integer Which reading of the list is the current one (`<C-o>` starts another; older answers are
--- dropped).
---@field change_pending boolean? The prompt's text changed and is not filtered yet (H.watch_prompt).

---@type pseudoclaude.float.State?
local state = nil

--- What the parts may ask of the controller: the methods of the state they are handed (`s:refresh()`), as telescope's
--- actions call their picker's. The parts never require this module (no import circle), and `H` stays private.
---@class pseudoclaude.float.State
local Picker = {}
Picker.__index = Picker

--- Whether this picker is still the open one (a callback of a closed picker does nothing).
---@return boolean
function Picker:is_current()
  return state == self
end

--- Closes this picker, if it is still the open one.
function Picker:close()
  if state == self then
    M.close()
  end
end

---@param msg any
---@param level integer?
function Picker:notify(msg, level)
  H.notify(msg, level)
end

--- The highlighted session (in search mode, the highlighted hit's), or nil.
---@return pseudoclaude.SessionInfo?
function Picker:selected()
  return H.selected(self)
end

---@param items pseudoclaude.SessionInfo[]
function Picker:set_items(items)
  H.set_items(self, items)
end

function Picker:default_matches()
  H.default_matches(self)
end

--- Sets `matches` to the rows `query` keeps (its `agent:` terms included).
---@param query string
function Picker:match(query)
  H.match(self, query)
end

---@param fallback integer?
function Picker:reselect(fallback)
  H.reselect(self, fallback)
end

---@param fallback integer?
function Picker:refresh(fallback)
  H.refresh(self, fallback)
end

---@param id string
function Picker:remove(id)
  H.remove(self, id)
end

function Picker:draw_rows()
  H.draw_rows(self)
end

--- Draws the preview now: the highlighted session's, or in search mode the highlighted hit's.
function Picker:draw_preview()
  if self.search then
    return require("pseudoclaude.float.search").draw_preview(self)
  end
  require("pseudoclaude.float.preview").draw_preview(self)
end

--- Draws the preview soon (once the keys typed so far are handled).
function Picker:request_preview()
  require("pseudoclaude.float.preview").request_preview(self)
end

--- The prompt's text changed (or must be filtered again).
function Picker:on_change()
  H.on_change(self)
end

--- The windows' titles for the mode and "other agents" as they are now.
function Picker:retitle()
  local layout, a = require("pseudoclaude.float.layout"), vim.api
  for name, title in pairs(layout.titles(self.search ~= nil, self.external)) do
    local win = self.wins[name]
    if win and a.nvim_win_is_valid(win) and a.nvim_win_get_config(win).border then
      pcall(a.nvim_win_set_config, win, { title = layout.title(title), title_pos = "center" })
    end
  end
end

--- "Other agents" (`s.external`) was turned on or off: the titles say so; in search mode the search runs again.
function Picker:external_changed()
  if self.search then
    return require("pseudoclaude.float.search").external_changed(self)
  end
  self:retitle()
end

local api = vim.api
local ns = api.nvim_create_namespace("pseudoclaude.picker")
--- The prompt's "> " extmark (float/rows.lua owns the counter's, id 1).
local PREFIX_MARK = 2
--- The prompt's mapping run after each change of its text (H.attach).
local CHANGED = "<Plug>(pseudoclaude-picker-changed)"

--- Opens the picker (or, with `backend = "select"`, `vim.ui.select()`; with a picker plugin's name or "auto", that
--- picker: pickers/init.lua) over the workspace's sessions, the current
--- one left out. The windows open at once, with the prompt ready for keys; the first rows are listed on the core's
--- threads and drawn when they arrive (about a millisecond later), then the preview and the full list follow. With no
--- session of ours, the other agents' are listed ("other agents" on: float/finder.lua); when there is none of theirs
--- either, or the sessions cannot be listed, the picker closes again with a message.
---@param opts pseudoclaude.float.Opts?
function M.open(opts)
  opts = opts or {}
  local cfg = require("pseudoclaude.config").get().picker
  -- Without a limit set: as many rows as the results window holds (it fills the window).
  local max_items = opts.max_items or cfg.max_items or H.fitting_rows()
  local backend = opts.backend or cfg.backend
  local opened_at = vim.uv.hrtime()
  M.close()
  local external = opts.external
  if external == nil then
    external = cfg.external == true
  end
  if backend ~= "float" and backend ~= "select" then
    -- the user's own picker (telescope, fzf-lua, snacks, mini.pick): pickers/init.lua
    local pickers = require("pseudoclaude.pickers")
    local resolved, why = pickers.resolve(backend)
    if why then
      H.notify(why, vim.log.levels.WARN)
    end
    if resolved ~= "float" and resolved ~= "select" then
      if opts.external == nil and not external then
        -- none of ours: theirs are what there is (as this picker does once its first list is empty); the check reads
        -- folder names only, so that the picker opens with "other agents" on and its title saying so
        local ok, newest = pcall(require("pseudoclaude.sessions").newest, opts.all)
        external = ok and newest == nil
      end
      return pickers.open(resolved, { all = opts.all, external = external, search = opts.search })
    end
    backend = resolved
  end
  if backend == "select" and not opts.search then
    return require("pseudoclaude.float.actions").select(opts.all, external)
  end
  require("pseudoclaude.highlights").setup()
  H.drop_traces()

  local s = { ---@type pseudoclaude.float.State
    top_items = {},
    items = {},
    count = 0,
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
    external = external,
    list_gen = 0,
  }
  setmetatable(s, Picker)
  state = s
  -- the first rows are read on the core's threads while this step makes the windows (their callback comes after it)
  require("pseudoclaude.float.finder").read_first_rows(s, opts)
  if state ~= s then
    return -- refused at once, and closed with the reason
  end
  H.open_windows(s)
  -- no matcher and no row renderer yet: this step is the windows and the keys, the rows come with the list
  vim.bo[s.bufs.results].modifiable = true
  api.nvim_buf_set_lines(s.bufs.results, 0, -1, false, { "  reading the sessions…" })
  vim.bo[s.bufs.results].modifiable = false
  H.attach(s)
  if opts.search then
    require("pseudoclaude.float.search").enter(s, opts.search)
  end
  vim.cmd.startinsert({ bang = opts.search ~= nil })
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
  H.drop_traces()
end

--- Drops LuaJIT's compiled code (traces): a trace keeps as constants the closures it was recorded through (the
--- picker's callbacks and steps, the wrappers `vim.defer_fn` makes around them) and with them what they hold (the
--- state: its list, rows and matcher) until the trace cache is flushed (LuaJIT does it only once the cache is full).
--- Seen under load, where more of them run hot (the rows made ahead take more steps): a closed picker no Lua
--- reference reached, never collected. At the close, and at the next open for a callback of the closed picker that
--- ran (and was compiled) after it. The editor's hot code is compiled again as it runs.
function H.drop_traces()
  if jit then
    jit.flush()
  end
end

--- Whether the picker is open.
---@return boolean
function M.is_open()
  return state ~= nil
end

--- The picker's state, for tests and benchmarks (read-only; nil when closed).
---@return pseudoclaude.float.State?
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
    return require("pseudoclaude.float.search").move(s, delta)
  end
  if not s or #s.matches == 0 then
    return
  end
  local sel = math.max(1, math.min(s.sel + delta, #s.matches))
  if sel ~= s.sel then
    s.sel = sel
    s.sel_id, s.sel_at = s.items[s.matches[sel]].id, s.matches[sel]
    H.draw_rows(s)
    require("pseudoclaude.float.preview").request_preview(s)
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

--- Resumes the highlighted session (asking first when it is in another workspace); see float/actions.lua.
function M.resume_selected()
  return require("pseudoclaude.float.actions").resume_selected(state)
end

--- Deletes the highlighted session after asking (y/N); the picker stays open on the next one.
function M.delete_selected()
  return require("pseudoclaude.float.actions").delete_selected(state)
end

--- Renames the highlighted session (a prompt prefilled with its title).
function M.rename_selected()
  return require("pseudoclaude.float.actions").rename_selected(state)
end

--- Pins the highlighted session, or unpins it: pinned sessions come first.
function M.toggle_pin_selected()
  return require("pseudoclaude.float.actions").toggle_pin_selected(state)
end

--- Forks the highlighted session at its end ("resume as new") and resumes the fork.
function M.fork_selected()
  return require("pseudoclaude.float.actions").fork_selected(state)
end

--- Lists the other agents' sessions of the workspace too, or no more (`<C-o>`); in search mode, searches them too.
function M.toggle_external()
  local s = state
  if s and s.search then
    require("pseudoclaude.float.search").toggle_external(s)
  elseif s then
    require("pseudoclaude.float.finder").toggle_external(s)
  end
end

--- `:PseudoResume [last|all|{id}]`: no argument opens the picker; `last` resumes the most recent session of ours (with
--- none, the newest of the other agents', with its agent: `chat.resume("last")`); `all` opens
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
      local newest = require("pseudoclaude.sessions").newest()
      if not newest then
        -- none of ours: resume("last") hands the newest of the other agents' to its agent, or says there is none
        return require("pseudoclaude.chat").resume("last")
      end
      id = newest.id
    end
    require("pseudoclaude.float.actions").resume(id)
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

--- Completion of `:PseudoResume`: "last", "all" and the session ids, most recently active first.
---@param arglead string
---@return string[]
function M.complete(arglead)
  return require("pseudoclaude.float.actions").complete(arglead)
end

-- Helpers ------------------------------------------------------------------------------------------------------

---@param msg any
---@param level integer?
function H.notify(msg, level)
  vim.notify(tostring(msg), level or vim.log.levels.ERROR)
end

---@param s pseudoclaude.float.State
---@return pseudoclaude.SessionInfo?
function H.selected(s)
  if s.search then
    return require("pseudoclaude.float.search").selected_item(s)
  end
  local i = s.matches[s.sel]
  return i and s.items[i] or nil
end

--- Creates the buffers and windows.
---@param s pseudoclaude.float.State
function H.open_windows(s)
  local layout = H.layout(s)
  local winhighlight = H.winhighlight(layout)
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
      -- also drops the "EndOfBuffer:" of style "minimal": its 'fillchars' eob:" " already hides the region's "~"
      wo.winhighlight = winhighlight
      wo.wrap = name == "preview"
      wo.linebreak = name == "preview"
      wo.breakindent = name == "preview"
      wo.cursorline = false
      if name == "prompt" then
        -- a change of the prompt's text, or the cursor moving in it, is answered by its own handler (H.watch_prompt):
        -- the editor's TextChangedI and CursorMovedI handlers (matchparen's, a completion plugin's, the user's) would
        -- run at every keystroke for nothing
        wo.eventignorewin = "CursorMoved,CursorMovedI,TextChanged,TextChangedI"
      end
      if name == "preview" then
        wo.foldmethod = "manual"
        wo.foldenable = true
        wo.foldlevel = 0
      end
      if name ~= "prompt" then
        vim.bo[buf].modifiable = false
        -- no undo history: each keystroke replaces the rows, which Neovim would otherwise copy and keep until the
        -- picker closes (~0.04 ms a keystroke, picker_bench)
        vim.bo[buf].undolevels = -1
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

--- The 'winhighlight' the picker's windows need: none unless the user changed PseudoClaudePickerNormal (or a border
--- style we do not know is drawn), since a window's 'winhighlight' costs every redraw of the screen (float/layout.lua
--- BORDERS); the borders and titles carry their groups themselves.
---@param layout pseudoclaude.float.Layout
---@return string
function H.winhighlight(layout)
  local parts = {}
  -- a group that links to another is drawn as that one, whatever else it holds
  if api.nvim_get_hl(0, { name = "PseudoClaudePickerNormal", link = true }).link ~= "NormalFloat" then
    parts[#parts + 1] = "NormalFloat:PseudoClaudePickerNormal"
  end
  if type(layout.prompt.border) == "string" then
    parts[#parts + 1] = "FloatBorder:PseudoClaudePickerBorder,FloatTitle:PseudoClaudePickerTitle"
  end
  return table.concat(parts, ",")
end

--- The windows' geometry; with `s`, their titles for its mode.
---@param s pseudoclaude.float.State?
---@return pseudoclaude.float.Layout
function H.layout(s)
  local layout = require("pseudoclaude.float.layout")
  local titles = s and layout.titles(s.search ~= nil, s.external)
  return layout.compute(vim.o.columns, vim.o.lines, { cmdheight = vim.o.cmdheight, titles = titles })
end

--- Mappings and autocommands.
---@param s pseudoclaude.float.State
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
    require("pseudoclaude.float.search").toggle(state)
  end, "search inside messages (on/off)")
  map({ "i", "n" }, "<C-r>", M.rename_selected, "rename the session")
  map({ "i", "n" }, "<C-t>", M.toggle_pin_selected, "pin or unpin the session")
  map({ "i", "n" }, "<C-f>", M.fork_selected, "fork the session (resume as new)")
  map({ "i", "n" }, "<C-o>", M.toggle_external, "other agents' sessions (on/off)")
  map("n", "j", down, "next session")
  map("n", "k", up, "previous session")

  H.watch_prompt(s)
  local group = s.augroup
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

--- Filters at every change of the prompt's text (a typed key, <BS>, <C-w>, a paste, an undo), before Neovim redraws
--- the screen, without the TextChanged(I) events: they are ignored in the prompt's window ('eventignorewin'), so that
--- no other plugin's handler runs at each keystroke there (matchparen's alone: ~0.15 ms a key, picker_bench).
--- Neovim reports each change (`on_lines`) where no buffer may be changed (textlock), so the handler is run by a key
--- fed right after the change, a `<Plug>` mapping of every mode; a scheduled callback would come after a redraw of
--- the old rows (measured: +0.3 ms a key). The same scheduled callback runs it if the key is lost (typeahead flushed
--- by an error), and a paste's many changes are filtered once.
---@param s pseudoclaude.float.State
function H.watch_prompt(s)
  if not H.changed_key then
    H.changed_key = api.nvim_replace_termcodes(CHANGED, true, false, true)
    vim.keymap.set({ "n", "i", "v", "o", "c", "t" }, CHANGED, function()
      H.prompt_changed(state)
    end, { desc = "pseudoclaude picker: the prompt's text changed" })
  end
  api.nvim_buf_attach(s.bufs.prompt, false, {
    on_lines = function()
      if state ~= s then
        return true -- detach
      end
      if not s.change_pending then
        s.change_pending = true
        -- "i": before the keys typed after this one; "m": through the mapping
        api.nvim_feedkeys(H.changed_key, "im", false)
        vim.schedule(function()
          H.prompt_changed(s)
        end)
      end
    end,
  })
end

---@param s pseudoclaude.float.State?
function H.prompt_changed(s)
  if s and state == s and s.change_pending then
    s.change_pending = false
    H.between_collections(H.on_change, s)
  end
end

--- Rows the results window holds in the current layout.
---@return integer
function H.fitting_rows()
  return math.max(H.layout().results.height or 1, 1)
end

---@param s pseudoclaude.float.State
function H.relayout(s)
  local layout = H.layout(s)
  for name, win in pairs(s.wins) do
    if layout[name] and api.nvim_win_is_valid(win) then
      api.nvim_win_set_config(win, layout[name])
    end
  end
  H.draw_rows(s)
  s.preview_id = nil
  s.previews = {}
  require("pseudoclaude.float.preview").request_preview(s)
end

--- Replaces the searched items and rebuilds the matcher.
---@param s pseudoclaude.float.State
---@param items pseudoclaude.SessionInfo[]
function H.set_items(s, items)
  local hay = {}
  for i, item in ipairs(items) do
    hay[i] = require("pseudoclaude.float.finder").haystack(item)
  end
  s.items, s.count, s.packed = items, #items, nil
  s.matcher = require("pseudoclaude.float.matcher").new(hay)
end

--- Without a query: the `max_items` newest.
---@param s pseudoclaude.float.State
function H.default_matches(s)
  local m = {}
  for i = 1, math.min(s.max_items, s.count) do
    m[i] = i
  end
  s.matches = m
end

--- Sets `s.matches` to the rows `query` keeps: its text fuzzy-matched (none: the `max_items` newest), its `agent:`
--- terms applied (float/agents.lua). `narrowing`: `query` extends the query `s.matches` was made for.
---@param s pseudoclaude.float.State
---@param query string
---@param narrowing boolean?
function H.match(s, query, narrowing)
  local text, filter = query, nil
  if query:find("agent:", 1, true) then
    text, filter = require("pseudoclaude.float.agents").parse(query)
    -- the terms' text is not matched: the previous matches are not the previous text's
    narrowing = false
  end
  if not filter then
    if text == "" then
      return H.default_matches(s)
    end
    s.matches = s.matcher:filter(text, narrowing and s.matches or nil)
    return
  end
  local all = s.matcher:filter(text)
  s.matches = require("pseudoclaude.float.agents").keep_rows(s, filter, all, text == "" and s.max_items or nil)
end

--- The prompt's text changed: filter and redraw.
---@param s pseudoclaude.float.State
function H.on_change(s)
  if state ~= s then
    return
  end
  local t, cpu = vim.uv.hrtime(), os.clock()
  local query = api.nvim_buf_get_lines(s.bufs.prompt, 0, 1, false)[1] or ""
  if s.search then
    return require("pseudoclaude.float.search").on_query(s, query)
  end
  if query == s.query then
    return
  end
  local previous = s.query
  s.query = query
  if s.listing then
    return -- the first rows, when they come, are filtered with it
  end
  -- typing forward narrows: only the previous matches can still match
  H.match(s, query, previous ~= "" and vim.startswith(query, previous))
  H.reselect(s)
  H.draw_rows(s)
  local stats = s.stats.filters
  -- the CPU time too: on a loaded machine the wall time includes waiting for a CPU
  stats[#stats + 1] =
    { query = query, ms = (vim.uv.hrtime() - t) / 1e6, cpu_ms = (os.clock() - cpu) * 1e3, matches = #s.matches }
  require("pseudoclaude.float.preview").request_preview(s)
end

--- `fn(s)` with Lua's garbage collector paused, and as much of its work as the memory `fn` took once Neovim has drawn
--- the screen (a main-loop step of its own): a typed key's rows are on the screen before the collector walks the heap
--- for the tables they took (picker_bench at 1,000 sessions: about 60 KB a keystroke, a tenth of mini.pick's
--- keystroke in collector's work), and none of that work is dropped.
---@param fn fun(s: pseudoclaude.float.State)
---@param s pseudoclaude.float.State
function H.between_collections(fn, s)
  if not collectgarbage("isrunning") then
    return fn(s)
  end
  local before, filters = collectgarbage("count"), #s.stats.filters
  collectgarbage("stop")
  local ok, err = pcall(fn, s)
  collectgarbage("restart")
  local kb = math.floor(collectgarbage("count") - before)
  local filter = s.stats.filters[filters + 1]
  if kb > 0 or filter then
    -- the handler runs right before the redraw (H.watch_prompt): a scheduled callback runs right after it
    vim.schedule(function()
      if kb > 0 then
        collectgarbage("step", kb)
      end
      if filter then
        filter.collected_at = vim.uv.hrtime()
      end
    end)
  end
  if not ok then
    error(err, 0)
  end
end

--- Puts the highlight back on `s.sel_id` when it is still among the matches, else on the first match (or, with
--- `fallback`, on that position: the row after a deleted session).
---@param s pseudoclaude.float.State
---@param fallback integer?
function H.reselect(s, fallback)
  local sel, at = nil, nil
  if s.sel_id then
    -- where it was (the same list, mostly: a keystroke), else searched for
    local was = s.sel_at and s.items[s.sel_at]
    at = was and was.id == s.sel_id and s.sel_at or require("pseudoclaude.float.finder").index_of(s, s.sel_id)
  end
  if at then
    for k, i in ipairs(s.matches) do
      if i == at then
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
  s.sel_at = s.matches[s.sel]
end

--- Recomputes the matches for the current query (after the items changed), keeping the highlighted session.
---@param s pseudoclaude.float.State
---@param fallback integer? Position to highlight when the highlighted session is gone.
function H.refresh(s, fallback)
  if s.listing then
    return -- nothing to filter yet: the first rows, when they come, are
  end
  H.match(s, s.query)
  H.reselect(s, fallback)
  H.draw_rows(s)
  require("pseudoclaude.float.preview").request_preview(s)
end

--- Drops a deleted session from the lists and redraws; the highlight moves to the row that took its place.
---@param s pseudoclaude.float.State
---@param id string
function H.remove(s, id)
  s.deleted[id] = true
  local kept = {}
  for _, item in ipairs(require("pseudoclaude.float.finder").plain(s)) do
    if item.id ~= id then
      kept[#kept + 1] = item
    end
  end
  local sel = s.sel
  H.set_items(s, kept)
  if s.search then
    require("pseudoclaude.float.search").forget(s, id)
  end
  s.previews[id] = nil
  s.preview_id = nil
  s.sel_id = nil
  H.refresh(s, sel)
end

--- Draws the visible rows, the selection, the match highlights and the counter (float/rows.lua).
---@param s pseudoclaude.float.State
function H.draw_rows(s)
  if s.search then
    return require("pseudoclaude.float.search").draw_rows(s)
  end
  require("pseudoclaude.float.rows").draw(s)
end

return M
