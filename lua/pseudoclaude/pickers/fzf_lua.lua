--- The sessions and the search inside messages as fzf-lua pickers: `require("pseudoclaude.pickers.fzf_lua").sessions()`
--- and `.search()`, or `picker.backend = "fzf-lua"`. fzf-lua is required only when one opens. fzf reads its lines from
--- a function of ours that writes them when our background read hands them over (`pickers/source.lua`: the list
--- in one piece, the search's hits batch by batch, each query a new search through fzf's "live" reload); fzf
--- filters the sessions itself. Each line is `<n>\t<row>`, fzf showing the row (our renderer's text) and the preview
--- (fzf-lua's builtin previewer, a subclass of ours) finding the session by `<n>`.
---
--- Keys, in fzf-lua's fashion (`ctrl-x` deletes, as in its buffers picker): `enter` resume (a hit: at its message),
--- `ctrl-x` delete, `alt-r` rename, `alt-p` pin, `alt-f` fork, `alt-o` other agents' sessions (in the search too: their
--- hits after ours), `alt-s` the search mode (and back). The keys that ask or change the list close fzf, act, and open it again on the same query.

local M = {}
local H = {}

--- Opens the sessions picker.
---@param opts pseudoclaude.pickers.Opts|table? Also fzf-lua's options (`winopts`…).
function M.sessions(opts)
  local source = require("pseudoclaude.pickers.source")
  opts = source.opts(opts)
  local fzf = require("fzf-lua")
  local previewer = source.previewer()
  local items = {} ---@type pseudoclaude.SessionInfo[]
  local function item_of(selected)
    local n = selected and selected[1] and tonumber(selected[1]:match("^(%d+)\t"))
    return n and items[n] or nil
  end
  local function again(changes)
    return function(_, o)
      local query = o and o.last_query or fzf.get_last_query()
      vim.schedule(function()
        M.sessions(vim.tbl_extend("force", opts, { query = query }, changes or {}))
      end)
    end
  end
  -- fzf-lua runs the actions in a coroutine: ours run in the main loop's next step (see source.lua's in_coroutine)
  local function then_again(act)
    return function(selected, o)
      local query = o and o.last_query or fzf.get_last_query()
      local reopen = function()
        vim.schedule(function()
          M.sessions(vim.tbl_extend("force", opts, { query = query }))
        end)
      end
      local item = item_of(selected)
      vim.schedule(function()
        act(item, reopen)
      end)
    end
  end
  fzf.fzf_exec(function(fzf_cb)
    source.list(opts, function(list)
      local lines = source.rows(list, H.list_width(), previewer.now)
      for k, item in ipairs(list) do
        items[k] = item
        fzf_cb(k .. "\t" .. lines[k])
      end
      fzf_cb(nil)
    end)
  end, {
    prompt = (opts.all and "Sessions (all)" or "Sessions") .. "> ",
    query = opts.query,
    previewer = H.previewer_class(function(_, entry_str, buf, win)
      local item = item_of({ entry_str })
      if item then
        previewer:show(buf, win, item)
      end
    end),
    fzf_opts = {
      ["--delimiter"] = "\t",
      ["--with-nth"] = "2..",
      ["--tiebreak"] = "index",
      ["--no-multi"] = true,
    },
    actions = {
      ["enter"] = function(selected)
        local item = item_of(selected)
        if item then
          vim.schedule(function()
            source.resume(item)
          end)
        end
      end,
      ["ctrl-x"] = then_again(function(item, reopen)
        source.delete(item)
        reopen()
      end),
      ["alt-r"] = then_again(function(item, reopen)
        source.rename(item, reopen)
      end),
      ["alt-p"] = then_again(function(item, reopen)
        source.toggle_pin(item, reopen)
      end),
      ["alt-f"] = function(selected)
        local item = item_of(selected)
        vim.schedule(function()
          source.fork(item, function() end)
        end)
      end,
      ["alt-o"] = again({ external = not opts.external }),
      ["alt-s"] = function(_, o)
        local query = o and o.last_query or fzf.get_last_query()
        vim.schedule(function()
          M.search(vim.tbl_extend("force", opts, { search = query or "" }))
        end)
      end,
    },
  })
end

--- Opens the search inside messages; `opts.search` is the first query. Each query is searched anew (fzf's "live"
--- mode: fzf shows the hits, it does not filter them).
---@param opts pseudoclaude.pickers.Opts|table?
function M.search(opts)
  local source = require("pseudoclaude.pickers.source")
  opts = source.opts(opts)
  local fzf = require("fzf-lua")
  local previewer = source.previewer()
  local hits = {} ---@type pseudoclaude.SearchHit[]
  local handle ---@type pseudoclaude.SearchHandle?
  local function hit_of(selected)
    local n = selected and selected[1] and tonumber(selected[1]:match("^(%d+)\t"))
    return n and hits[n] or nil
  end
  fzf.fzf_live(function(args)
    if handle then
      handle:cancel()
    end
    -- fzf-lua hands the query as `{ query }` (a string in older versions)
    local query = type(args) == "table" and args[1] or args
    query = type(query) == "string" and query or ""
    previewer.query = query
    return function(fzf_cb)
      local width = H.list_width()
      handle = source.search(query, opts.external, function(batch)
        for _, hit in ipairs(batch) do
          hits[#hits + 1] = hit
          fzf_cb(#hits .. "\t" .. source.hit_row(hit, width, previewer.now))
        end
      end, function()
        fzf_cb(nil)
      end)
    end
  end, {
    prompt = opts.external and "Search messages (other agents too)> " or "Search messages> ",
    query = opts.search or opts.query,
    exec_empty_query = true,
    previewer = H.previewer_class(function(_, entry_str, buf, win)
      local hit = hit_of({ entry_str })
      if hit then
        previewer:show_hit(buf, win, hit)
      end
    end),
    fzf_opts = {
      ["--delimiter"] = "\t",
      ["--with-nth"] = "2..",
      ["--no-multi"] = true,
    },
    actions = {
      ["enter"] = function(selected)
        local hit = hit_of(selected)
        if hit then
          vim.schedule(function()
            source.resume_hit(hit)
          end)
        end
      end,
      ["ctrl-x"] = function(selected, o)
        local hit = hit_of(selected)
        local query = o and o.last_query or fzf.get_last_query()
        vim.schedule(function()
          if hit then
            source.delete(source.hit_item(hit))
          end
          M.search(vim.tbl_extend("force", opts, { search = query or "" }))
        end)
      end,
      ["alt-s"] = function(_, o)
        local query = o and o.last_query or fzf.get_last_query()
        vim.schedule(function()
          M.sessions(vim.tbl_extend("force", opts, { query = query, search = false }))
        end)
      end,
      ["alt-o"] = function(_, o)
        local query = o and o.last_query or fzf.get_last_query()
        vim.schedule(function()
          M.search(vim.tbl_extend("force", opts, { search = query or "", external = not opts.external }))
        end)
      end,
    },
  })
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- Columns of fzf's list: its window's, when it is open (the contents are asked for once it is), less fzf's pointer
--- and marker; else what fzf-lua's default layout gives (80% of the editor, 40% of that beside a preview from 100
--- columns on).
---@return integer
function H.list_width()
  local ok, win = pcall(function()
    return require("fzf-lua.win").__SELF().fzf_winid
  end)
  if ok and win and vim.api.nvim_win_is_valid(win) then
    return vim.api.nvim_win_get_width(win) - 3
  end
  local total = math.floor(vim.o.columns * 0.8)
  return (total > 100 and math.floor(total * 0.4) or total) - 5
end

--- A previewer for fzf-lua (a subclass of its builtin base previewer) whose preview buffer and window are handed to
--- `fill(self, entry_str, buf, win)`: our previewer draws into them, now and when the session has been read.
---@param fill fun(self: table, entry_str: string, buf: integer, win: integer)
---@return table spec fzf-lua's `previewer` option
function H.previewer_class(fill)
  local base = require("fzf-lua.previewer.builtin").base
  local Previewer = base:extend()
  function Previewer:new(o, opts)
    Previewer.super.new(self, o, opts)
    return self
  end
  function Previewer:should_clear_preview()
    return false
  end
  function Previewer:gen_winopts()
    return vim.tbl_extend("force", self.winopts or {}, { wrap = true, number = false, cursorline = false })
  end
  function Previewer:populate_preview_buf(entry_str)
    local buf = self:get_tmp_buffer()
    self:set_preview_buf(buf)
    fill(self, entry_str, buf, self.win.preview_winid)
  end
  return {
    _ctor = function()
      return Previewer
    end,
  }
end

return M
