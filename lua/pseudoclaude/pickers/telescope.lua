--- The sessions and the search inside messages as telescope.nvim pickers (`:Telescope pseudoclaude sessions|search`,
--- through `lua/telescope/_extensions/pseudoclaude.lua`, or `picker.backend = "telescope"`). Telescope is required
--- only when one opens. The items come from our background reads (`pickers/source.lua`): the finder hands them to
--- telescope's result processor when they arrive (the session list in steps of `STEP`, the search's hits batch by
--- batch), so nothing is read on the main loop; telescope's own sorter filters them, our renderer draws the rows
--- and the preview.
---
--- Keys, in telescope's fashion (`<M-d>` / `dd` delete as its buffers picker does): `<CR>` resume (a hit: at its
--- message), `<M-d>` delete, `<M-r>` rename, `<M-p>` pin, `<M-f>` fork, `<M-o>` other agents' sessions (in the search
--- too: their hits after ours), `<M-s>` the search mode (and back), keeping what was typed.

local M = {}
local H = {}

--- Entries handed to telescope per main-loop step (its own static finder yields every 1,000 too).
M.STEP = 1000

local api = vim.api

--- Opens the sessions picker.
---@param opts pseudoclaude.pickers.Opts|table? Also telescope's picker options (layout, `default_text`…).
function M.sessions(opts)
  local source = require("pseudoclaude.pickers.source")
  opts = source.opts(opts)
  local pickers, conf = require("telescope.pickers"), require("telescope.config").values
  local previewer = source.previewer()
  local state = { opts = opts, picker = nil, columns = nil } ---@type table
  local finder = H.session_finder(state, opts)
  local picker = pickers.new(opts, {
    prompt_title = opts.all and "Resume session (all workspaces)" or "Resume session",
    results_title = opts.external and "Sessions + other agents" or "Sessions",
    default_text = opts.query,
    finder = finder,
    sorter = H.agent_sorter(conf.generic_sorter(opts)),
    selection_strategy = "follow",
    previewer = H.previewer(previewer, function(entry, buf, win)
      previewer:show(buf, win, entry.value)
    end),
    attach_mappings = function(prompt_bufnr, map)
      H.session_keys(prompt_bufnr, map, opts, previewer)
      return true
    end,
  })
  state.picker = picker
  picker:find()
end

--- Opens the search inside messages; `opts.search` (or `opts.query`) is the first query.
---@param opts pseudoclaude.pickers.Opts|table?
function M.search(opts)
  local source = require("pseudoclaude.pickers.source")
  opts = source.opts(opts)
  local pickers, sorters = require("telescope.pickers"), require("telescope.sorters")
  local previewer = source.previewer()
  local state = { handle = nil, picker = nil } ---@type table
  local picker = pickers.new(opts, {
    prompt_title = opts.external and "Search messages (other agents too)" or "Search messages",
    results_title = opts.external and "Hits + other agents" or "Hits",
    default_text = opts.search or opts.query,
    finder = H.search_finder(state, previewer, opts.external),
    sorter = sorters.empty(), -- the hits are the search's: no second filter
    previewer = H.previewer(previewer, function(entry, buf, win)
      previewer:show_hit(buf, win, entry.value)
    end),
    attach_mappings = function(prompt_bufnr, map)
      H.search_keys(prompt_bufnr, map, opts)
      return true
    end,
  })
  state.picker = picker
  picker:find()
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- A telescope finder over the session list: the list is read once in the background; each call (one per prompt
--- change) hands telescope every entry, or, before the list is here, waits for it (only the newest call is fed).
---@param state table
---@param opts pseudoclaude.pickers.Opts
function H.session_finder(state, opts)
  local source = require("pseudoclaude.pickers.source")
  local results = {}
  local ready, pending = false, nil
  local now = os.time()
  local function feed(process_result, process_complete, from)
    local i = from or 1
    local last = math.min(i + M.STEP - 1, #results)
    while i <= last do
      if process_result(results[i]) then
        return -- a newer prompt took over
      end
      i = i + 1
    end
    if i <= #results then
      return vim.schedule(function()
        feed(process_result, process_complete, i)
      end)
    end
    process_complete()
  end
  local function display(entry)
    local line, hls = source.row(entry.value, H.results_width(state.picker), state.columns, now)
    return line, H.highlights(hls)
  end
  source.list(opts, function(items)
    state.columns = source.columns(items)
    for k, item in ipairs(items) do
      results[k] = { value = item, ordinal = source.haystack(item), display = display, index = k }
    end
    ready = true
    if pending then
      local p = pending
      pending = nil
      feed(p[1], p[2])
    end
  end)
  state.make_entry = function(item)
    return { value = item, ordinal = source.haystack(item), display = display }
  end
  return setmetatable({ results = results, close = function() end }, {
    __call = function(_, _, process_result, process_complete)
      if ready then
        feed(process_result, process_complete)
      else
        pending = { process_result, process_complete }
      end
    end,
  })
end

--- `sorter` reading the prompt's `agent:` terms first (pickers/source.lua `agent_terms`): a row of an agent they leave
--- out is filtered, the rest of the prompt is what `sorter` scores and highlights (telescope's prefilter hook).
---@param sorter table A telescope Sorter.
---@return table
function H.agent_sorter(sorter)
  local source = require("pseudoclaude.pickers.source")
  local filter_function, highlighter, was_discarded = sorter.filter_function, sorter.highlighter, sorter._was_discarded
  sorter.filter_function = function(self, prompt, entry, cb_add, cb_filter)
    local text, filter = source.agent_terms(prompt)
    if not source.passes(filter, entry.value) then
      return -1, text
    end
    if filter_function then
      return filter_function(self, text, entry, cb_add, cb_filter)
    end
    return 0, text
  end
  if highlighter then
    sorter.highlighter = function(self, prompt, display)
      return highlighter(self, (source.agent_terms(prompt)), display)
    end
  end
  -- a row discarded for a shorter prompt may pass a longer one with a term (`agent` -> `agent:`: no text left)
  sorter._was_discarded = function(self, prompt, ordinal)
    return not prompt:find("agent:", 1, true) and was_discarded(self, prompt, ordinal)
  end
  return sorter
end

--- The columns a row may fill in the picker's results window (its width less the selection caret; 80 before the
--- window exists).
---@param picker table?
---@return integer
function H.results_width(picker)
  if picker and picker.results_win and api.nvim_win_is_valid(picker.results_win) then
    return api.nvim_win_get_width(picker.results_win) - #(picker.selection_caret or "> ")
  end
  return 80
end

--- A row's highlights `{start_col, end_col, group}` as telescope's display highlights `{{start, end}, group}`.
---@param hls table[]
---@return table[]
function H.highlights(hls)
  local out = {}
  for _, h in ipairs(hls) do
    out[#out + 1] = { { h[1], h[2] }, h[3] }
  end
  return out
end

--- A telescope finder that searches every message for the prompt's text (with `external`, the other agents' sessions
--- too): each call cancels the running search and starts another, whose hits are handed to telescope batch by batch
--- as they arrive.
---@param state table
---@param previewer pseudoclaude.pickers.Previewer
---@param external boolean?
function H.search_finder(state, previewer, external)
  local source = require("pseudoclaude.pickers.source")
  local now = os.time()
  local results = {}
  local function display(entry)
    local line, hls = source.hit_row(entry.value, H.results_width(state.picker), now)
    return line, H.highlights(hls)
  end
  return setmetatable({
    results = results,
    close = function()
      if state.handle then
        state.handle:cancel()
      end
    end,
  }, {
    __call = function(_, prompt, process_result, process_complete)
      if state.handle then
        state.handle:cancel()
      end
      for k in pairs(results) do
        results[k] = nil
      end
      previewer.query = prompt
      local handle
      handle = source.search(prompt, external, function(hits)
        for _, hit in ipairs(hits) do
          local entry = { value = hit, ordinal = prompt, display = display, index = #results + 1 }
          results[#results + 1] = entry
          if process_result(entry) then
            return handle and handle:cancel()
          end
        end
      end, function()
        process_complete()
      end)
      state.handle = handle
    end,
  })
end

--- A telescope previewer that hands each entry's preview buffer and window to `show(entry, buf, win)` (the buffer is
--- kept per entry, so that going back to one shows it at once).
---@param previewer pseudoclaude.pickers.Previewer
---@param show fun(entry: table, buf: integer, win: integer)
function H.previewer(previewer, show)
  return require("telescope.previewers").new_buffer_previewer({
    title = "Preview",
    get_buffer_by_name = function(_, entry)
      local v = entry.value
      return v.index and (v.id .. ":" .. v.index) or v.id
    end,
    define_preview = function(self, entry)
      show(entry, self.state.bufnr, self.state.winid)
    end,
  })
end

---@param prompt_bufnr integer
---@param map function telescope's `map(mode, key, fn)`
---@param opts pseudoclaude.pickers.Opts
---@param previewer pseudoclaude.pickers.Previewer
function H.session_keys(prompt_bufnr, map, opts, previewer)
  local actions, action_state = require("telescope.actions"), require("telescope.actions.state")
  local source = require("pseudoclaude.pickers.source")
  local function selected()
    local entry = action_state.get_selected_entry()
    return entry and entry.value, entry
  end
  actions.select_default:replace(function()
    local item = selected()
    actions.close(prompt_bufnr)
    if item then
      vim.schedule(function()
        source.resume(item)
      end)
    end
  end)
  local function delete()
    local item = selected()
    if source.delete(item) then
      previewer:forget(item.id)
      action_state.get_current_picker(prompt_bufnr):delete_selection(function() end)
    end
  end
  local function marked(info)
    local item, entry = selected()
    if entry and item and item.id == info.id then
      info.workspace = item.workspace
      entry.value, entry.ordinal = info, source.haystack(info)
    end
    previewer:forget(info.id)
    local picker = action_state.get_current_picker(prompt_bufnr)
    if picker then
      picker:refresh()
    end
  end
  local function reopen(what, changes)
    local query = action_state.get_current_line()
    actions.close(prompt_bufnr)
    vim.schedule(function()
      M[what](vim.tbl_extend("force", opts, { query = query, search = what == "search" and query or nil }, changes))
    end)
  end
  local keys = {
    ["<M-d>"] = delete,
    ["<M-r>"] = function()
      source.rename(selected(), marked)
    end,
    ["<M-p>"] = function()
      source.toggle_pin(selected(), marked)
    end,
    ["<M-f>"] = function()
      source.fork(selected(), function()
        pcall(actions.close, prompt_bufnr)
      end)
    end,
    ["<M-o>"] = function()
      reopen("sessions", { external = not opts.external })
    end,
    ["<M-s>"] = function()
      reopen("search", {})
    end,
  }
  for lhs, fn in pairs(keys) do
    map("i", lhs, fn)
    map("n", lhs, fn)
  end
  map("n", "dd", delete)
end

---@param prompt_bufnr integer
---@param map function
---@param opts pseudoclaude.pickers.Opts
function H.search_keys(prompt_bufnr, map, opts)
  local actions, action_state = require("telescope.actions"), require("telescope.actions.state")
  local source = require("pseudoclaude.pickers.source")
  actions.select_default:replace(function()
    local entry = action_state.get_selected_entry()
    actions.close(prompt_bufnr)
    if entry then
      vim.schedule(function()
        source.resume_hit(entry.value)
      end)
    end
  end)
  local function reopen(what, changes)
    local query = action_state.get_current_line()
    actions.close(prompt_bufnr)
    vim.schedule(function()
      M[what](vim.tbl_extend("force", opts, { query = query, search = what == "search" and query or false }, changes))
    end)
  end
  local function back()
    reopen("sessions", {})
  end
  local function other_agents()
    reopen("search", { external = not opts.external })
  end
  local function delete()
    local entry = action_state.get_selected_entry()
    if entry and source.delete(source.hit_item(entry.value)) then
      local picker = action_state.get_current_picker(prompt_bufnr)
      if picker then
        picker:refresh() -- searched again: the deleted session's hits are gone
      end
    end
  end
  map("i", "<M-s>", back)
  map("n", "<M-s>", back)
  map("i", "<M-o>", other_agents)
  map("n", "<M-o>", other_agents)
  map("i", "<M-d>", delete)
  map("n", "<M-d>", delete)
  map("n", "dd", delete)
end

return M
