--- The sessions and the search inside messages in mini.pick: `MiniPick.registry.pseudoclaude` (`:Pick pseudoclaude`,
--- `:Pick pseudoclaude mode='search'`), or `picker.backend = "mini"`. The picker starts with no item; the list, read in
--- the background (`pickers/source.lua`), is handed over with `MiniPick.set_picker_items()` when it arrives, and in
--- the search mode each batch of hits as it comes (mini.pick's "live" pattern: `source.match` starts the search).
--- Rows are drawn by our renderer for the visible items (`source.show`), the preview (`<Tab>`) by our previewer.
---
--- Keys (mini.pick's own use the Ctrl keys): `<CR>` resume (a hit: at its message), `<M-d>` delete, `<M-r>` rename,
--- `<M-p>` pin, `<M-f>` fork, `<M-o>` other agents' sessions (in the search too: their hits after ours), `<M-s>` the
--- search mode (and back).

local M = {}
local H = {}

local api = vim.api
local ns = api.nvim_create_namespace("pseudoclaude.pickers.mini")

--- Adds `pseudoclaude` to mini.pick's registry (`local_opts.mode = "search"` or `local_opts.search = "text"`: the
--- search; `local_opts.external`: the other agents' sessions too).
---@param pick table The `mini.pick` module.
function M.register(pick)
  pick.registry.pseudoclaude = function(local_opts)
    local_opts = local_opts or {}
    if local_opts.mode == "search" or type(local_opts.search) == "string" then
      return M.search({
        search = type(local_opts.search) == "string" and local_opts.search or "",
        external = local_opts.external,
      })
    end
    return M.sessions({ all = local_opts.all == true, external = local_opts.external })
  end
end

--- Opens the sessions picker.
---@param opts pseudoclaude.pickers.Opts?
function M.sessions(opts)
  local source = require("pseudoclaude.pickers.source")
  local pick = require("mini.pick")
  opts = source.opts(opts)
  local previewer = source.previewer()
  local now = os.time()
  local state = { items = nil, columns = nil } ---@type {items: pseudoclaude.SessionInfo[]?, columns: table?}
  local function set(items)
    local wrapped = {}
    for k, item in ipairs(items) do
      wrapped[k] = { text = source.haystack(item), item = item }
    end
    pick.set_picker_items(wrapped)
  end
  local function current()
    local matches = pick.get_picker_matches()
    local cur = matches and matches.current
    return cur and cur.item or nil
  end
  local function changed(info)
    for k, item in ipairs(state.items or {}) do
      if item.id == info.id then
        info.workspace = item.workspace
        state.items[k] = info
      end
    end
    previewer:forget(info.id)
    set(state.items or {})
  end
  local function reopen(what, changes)
    local query = table.concat(pick.get_picker_query() or {})
    vim.schedule(function()
      M[what](vim.tbl_extend("force", opts, { query = query, search = what == "search" and query or nil }, changes))
    end)
    return true -- stops this picker
  end
  local mappings = {
    pseudoclaude_delete = {
      char = "<M-d>",
      func = function()
        local item = current()
        if source.delete(item) then
          previewer:forget(item.id)
          state.items = vim.tbl_filter(function(x)
            return x.id ~= item.id
          end, state.items or {})
          set(state.items)
        end
      end,
    },
    pseudoclaude_rename = {
      char = "<M-r>",
      func = function()
        source.rename(current(), changed)
      end,
    },
    pseudoclaude_pin = {
      char = "<M-p>",
      func = function()
        source.toggle_pin(current(), changed)
      end,
    },
    pseudoclaude_fork = {
      char = "<M-f>",
      func = function()
        source.fork(current(), function()
          if pick.is_picker_active() then
            pick.stop()
          end
        end)
      end,
    },
    pseudoclaude_other_agents = {
      char = "<M-o>",
      func = function()
        return reopen("sessions", { external = not opts.external })
      end,
    },
    pseudoclaude_search = {
      char = "<M-s>",
      func = function()
        return reopen("search", {})
      end,
    },
  }
  H.start(pick, {
    source = {
      name = opts.all and "Resume session (all workspaces)" or "Resume session",
      match = function(stritems, inds, query)
        return H.match_agents(pick, stritems, inds, query)
      end,
      items = function()
        source.list(opts, function(items)
          state.items = items
          state.columns = source.columns(items)
          set(items)
        end)
      end,
      show = function(buf, shown)
        H.show(buf, shown, function(width)
          local list = {}
          for k, x in ipairs(shown) do
            list[k] = x.item
          end
          local lines, hls = {}, {}
          for k, item in ipairs(list) do
            lines[k], hls[k] = source.row(item, width, state.columns, now)
          end
          return lines, hls
        end)
      end,
      preview = function(buf, x)
        previewer:show(buf, H.main_win(pick), x.item)
      end,
      choose = function(x)
        vim.schedule(function()
          source.resume(x.item)
        end)
      end,
    },
    mappings = mappings,
  }, opts.query)
end

--- Opens the search inside messages; `opts.search` is the first query.
---@param opts pseudoclaude.pickers.Opts?
function M.search(opts)
  local source = require("pseudoclaude.pickers.source")
  local pick = require("mini.pick")
  opts = source.opts(opts)
  local previewer = source.previewer()
  local now = os.time()
  local st = { handle = nil, query = nil, hits = {} } ---@type table
  local function match(_, _, query)
    local text = table.concat(query)
    if text == st.query then
      return
    end
    st.query = text
    if st.handle then
      st.handle:cancel()
    end
    st.hits = {}
    previewer.query = text
    local tick = pick.get_querytick()
    local hits = st.hits
    pick.set_picker_items({}, { do_match = false, querytick = tick })
    st.handle = source.search(text, opts.external, function(batch)
      if st.hits ~= hits or not pick.is_picker_active() then
        return
      end
      for _, hit in ipairs(batch) do
        hits[#hits + 1] = { text = hit.snippet or "", hit = hit }
      end
      pick.set_picker_items(vim.list_slice(hits), { do_match = false })
    end, function() end)
  end
  local function current()
    local matches = pick.get_picker_matches()
    local cur = matches and matches.current
    return cur and cur.hit or nil
  end
  H.start(pick, {
    source = {
      name = opts.external and "Search messages (other agents too)" or "Search messages",
      items = {},
      match = match,
      show = function(buf, shown)
        H.show(buf, shown, function(width)
          local lines, hls = {}, {}
          for k, x in ipairs(shown) do
            lines[k], hls[k] = source.hit_row(x.hit, width, now)
          end
          return lines, hls
        end)
      end,
      preview = function(buf, x)
        previewer:show_hit(buf, H.main_win(pick), x.hit)
      end,
      choose = function(x)
        vim.schedule(function()
          source.resume_hit(x.hit)
        end)
      end,
    },
    mappings = {
      pseudoclaude_sessions = {
        char = "<M-s>",
        func = function()
          local query = table.concat(pick.get_picker_query() or {})
          vim.schedule(function()
            M.sessions(vim.tbl_extend("force", opts, { query = query, search = false }))
          end)
          return true
        end,
      },
      pseudoclaude_other_agents = {
        char = "<M-o>",
        func = function()
          local query = table.concat(pick.get_picker_query() or {})
          vim.schedule(function()
            M.search(vim.tbl_extend("force", opts, { search = query, external = not opts.external }))
          end)
          return true
        end,
      },
      pseudoclaude_delete = {
        char = "<M-d>",
        func = function()
          local hit = current()
          if hit and source.delete(source.hit_item(hit)) then
            st.query = nil -- searched again: the deleted session's hits are gone
            match(nil, nil, pick.get_picker_query() or {})
          end
        end,
      },
    },
  }, opts.search or opts.query)
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- Starts mini.pick with `opts`, the prompt set to `query` once it runs. (`MiniPick.start` returns only when the
--- picker stops: it reads the keys itself.)
---@param pick table
---@param opts table
---@param query string?
function H.start(pick, opts, query)
  if query and query ~= "" then
    vim.schedule(function()
      if pick.is_picker_active() then
        pick.set_picker_query(vim.split(query, ""))
      end
    end)
  end
  pick.start(opts)
end

--- mini.pick's own match after the query's `agent:` terms (pickers/source.lua `agent_terms`) left out the rows of the
--- agents they name; the rest of the query is what is matched.
---@param pick table
---@param stritems string[]
---@param inds integer[] The matches of the query before (mini narrows as the query grows).
---@param query string[] Its characters.
---@return integer[]?
function H.match_agents(pick, stritems, inds, query)
  local source = require("pseudoclaude.pickers.source")
  local prompt = table.concat(query)
  if not prompt:find("agent:", 1, true) then
    return pick.default_match(stritems, inds, query)
  end
  local text, filter = source.agent_terms(prompt)
  local items = (pick.get_picker_items() or {})
  -- from every row: the text left may be shorter than the one `inds` matched (`agent` -> `agent:`)
  local kept = {}
  for i = 1, #stritems do
    if items[i] and source.passes(filter, items[i].item) then
      kept[#kept + 1] = i
    end
  end
  if text == "" then
    return kept
  end
  return pick.default_match(stritems, kept, vim.fn.split(text, "\\zs"))
end

---@param pick table
---@return integer?
function H.main_win(pick)
  local st = pick.get_picker_state()
  return st and st.windows and st.windows.main or nil
end

--- Draws the visible rows in `buf` with their highlights: `make(width)` gives the lines and highlights.
---@param buf integer
---@param shown table[]
---@param make fun(width: integer): string[], table[][]
function H.show(buf, shown, make)
  local win = vim.fn.bufwinid(buf)
  local width = win ~= -1 and api.nvim_win_get_width(win) or 80
  local lines, hls = make(width)
  if #shown == 0 then
    lines, hls = {}, {}
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for k, row in ipairs(hls) do
    for _, h in ipairs(row) do
      pcall(api.nvim_buf_set_extmark, buf, ns, k - 1, h[1], { end_col = h[2], hl_group = h[3], priority = h[4] })
    end
  end
end

return M
