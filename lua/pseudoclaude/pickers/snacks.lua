--- The sessions and the search inside messages as snacks.picker sources: `pseudoclaude_sessions` and
--- `pseudoclaude_search` (`Snacks.picker.pseudoclaude_sessions()`, `:lua Snacks.picker("pseudoclaude_search")`), or
--- `picker.backend = "snacks"`. Registered into `Snacks.picker.sources` by `setup()` (pickers/init.lua: at once when
--- snacks' sources are loaded, else when they are). Each finder is an async generator: it waits (suspended, the
--- main loop free) for our background read (`pickers/source.lua`) and yields the sessions when they arrive, the
--- search's hits batch by batch (a "live" source: each query a new search); snacks' matcher filters the sessions;
--- our renderer draws the rows (`format`) and the preview.
---
--- Keys, in snacks' fashion (`<c-x>` / `dd` delete as its buffers source, `<c-g>` its live toggle): `<CR>` resume
--- (a hit: at its message), `<c-x>` delete, `<a-r>` rename, `<a-t>` pin, `<a-f>` fork, `<a-o>` other agents'
--- sessions (in the search too: their hits after ours), `<c-g>` the search mode (and back).

local M = {}
local H = {}

local api = vim.api

--- Adds the two sources to snacks.picker's sources table.
---@param sources table `Snacks.picker.sources` (the module `snacks.picker.config.sources`).
function M.register(sources)
  sources.pseudoclaude_sessions = M.sessions_source()
  sources.pseudoclaude_search = M.search_source()
end

--- Opens the sessions picker.
---@param opts pseudoclaude.pickers.Opts|table? Also snacks' picker options.
function M.sessions(opts)
  H.pick("pseudoclaude_sessions", opts)
end

--- Opens the search inside messages; `opts.search` is the first query.
---@param opts pseudoclaude.pickers.Opts|table?
function M.search(opts)
  opts = vim.deepcopy(opts or {})
  opts.search = opts.search or opts.query
  H.pick("pseudoclaude_search", opts)
end

--- The `pseudoclaude_sessions` source.
---@return table
function M.sessions_source()
  return H.source({
    title = "Resume session",
    finder = function(opts, ctx)
      local source = require("pseudoclaude.pickers.source")
      local o = source.opts({ all = opts.all, external = opts.external })
      return function(cb)
        local list, columns
        -- snacks may run this in a fast event: the read is asked for, and the rows measured, on the main loop
        vim.schedule(function()
          source.list(o, function(items)
            list, columns = items, source.columns(items)
            ctx.async:resume()
          end)
        end)
        while not list do
          ctx.async:suspend()
        end
        local filter = ctx.filter.pseudoclaude_agents
        for k, item in ipairs(list) do
          if source.passes(filter, item) then
            cb({ text = source.haystack(item), session = item, columns = columns, idx = k })
          end
        end
      end
    end,
    row = function(entry, width, now)
      return require("pseudoclaude.pickers.source").row(entry.session, width, entry.columns, now)
    end,
    -- the prompt's `agent:` terms (pickers/source.lua `agent_terms`) are not matched: they choose the rows the finder
    -- gives, found again when they change
    filter = {
      transform = function(picker, filter)
        local text, agents = require("pseudoclaude.pickers.source").agent_terms(filter.pattern)
        filter.pattern, filter.pseudoclaude_agents = text, agents
        local key = vim.inspect(agents)
        if key ~= (picker.pseudoclaude_agents or vim.inspect(nil)) then
          picker.pseudoclaude_agents = key
          return true
        end
      end,
    },
    show = function(previewer, buf, win, entry)
      previewer:show(buf, win, entry.session)
    end,
    resume = function(entry)
      require("pseudoclaude.pickers.source").resume(entry.session)
    end,
    mode = "pseudoclaude_search_mode",
    keys = {
      ["<a-r>"] = "pseudoclaude_rename",
      ["<a-t>"] = "pseudoclaude_pin",
      ["<a-f>"] = "pseudoclaude_fork",
      ["<a-o>"] = "pseudoclaude_other_agents",
    },
    actions = {
      pseudoclaude_delete = function(picker, entry)
        if entry and require("pseudoclaude.pickers.source").delete(entry.session) then
          H.previewer(picker):forget(entry.session.id)
          picker:refresh()
        end
      end,
      pseudoclaude_rename = function(picker, entry)
        require("pseudoclaude.pickers.source").rename(entry and entry.session, function(info)
          H.previewer(picker):forget(info.id)
          picker:refresh()
        end)
      end,
      pseudoclaude_pin = function(picker, entry)
        require("pseudoclaude.pickers.source").toggle_pin(entry and entry.session, function(info)
          H.previewer(picker):forget(info.id)
          picker:refresh()
        end)
      end,
      pseudoclaude_fork = function(picker, entry)
        require("pseudoclaude.pickers.source").fork(entry and entry.session, function()
          picker:close()
        end)
      end,
      pseudoclaude_other_agents = function(picker)
        H.reopen(picker, "sessions", "sessions", { external = not picker.opts.external })
      end,
      pseudoclaude_search_mode = function(picker)
        H.reopen(picker, "sessions", "search")
      end,
    },
  })
end

--- The `pseudoclaude_search` source: a live source, each query searched anew.
---@return table
function M.search_source()
  return H.source({
    title = "Search messages",
    live = true,
    finder = function(opts, ctx)
      local source = require("pseudoclaude.pickers.source")
      local query = ctx.filter.search or ""
      local external = source.opts({ external = opts.external }).external
      H.previewer(ctx.picker).query = query
      return function(cb)
        local queue, done, handle, aborted = {}, false, nil, false
        vim.schedule(function() -- on the main loop, as the sessions' finder
          if aborted then
            return
          end
          handle = source.search(query, external, function(hits)
            vim.list_extend(queue, hits)
            ctx.async:resume()
          end, function()
            done = true
            ctx.async:resume()
          end)
        end)
        ctx.async:on("abort", function()
          aborted = true
          if handle then
            handle:cancel()
          end
        end)
        while true do
          while #queue > 0 do
            local hit = table.remove(queue, 1)
            cb({ text = query, hit = hit })
          end
          if done then
            return
          end
          ctx.async:suspend()
        end
      end
    end,
    row = function(entry, width, now)
      return require("pseudoclaude.pickers.source").hit_row(entry.hit, width, now)
    end,
    show = function(previewer, buf, win, entry)
      previewer:show_hit(buf, win, entry.hit)
    end,
    resume = function(entry)
      require("pseudoclaude.pickers.source").resume_hit(entry.hit)
    end,
    mode = "pseudoclaude_sessions_mode",
    keys = { ["<a-o>"] = "pseudoclaude_other_agents" },
    actions = {
      pseudoclaude_delete = function(picker, entry)
        local source = require("pseudoclaude.pickers.source")
        if entry and source.delete(source.hit_item(entry.hit)) then
          picker:refresh()
        end
      end,
      pseudoclaude_sessions_mode = function(picker)
        H.reopen(picker, "search", "sessions")
      end,
      pseudoclaude_other_agents = function(picker)
        H.reopen(picker, "search", "search", { external = not picker.opts.external })
      end,
    },
  })
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- One of our sources in snacks' shape, from what tells the two apart: `spec.finder`; `spec.row(entry, width, now)`
--- its row and highlights; `spec.show(previewer, buf, win, entry)` its preview; `spec.resume(entry)` what `<CR>`
--- does once the picker is closed; `spec.mode` the action `<c-g>` runs (the other source); `spec.keys` its own keys
--- (lhs -> action, in the input window, normal and insert mode); `spec.actions` (`pseudoclaude_delete` among them,
--- on `<c-x>` and `dd`); `spec.live`: a live source.
---@param spec table
---@return table
function H.source(spec)
  local keys = {
    [H.key("<c-x>")] = { "pseudoclaude_delete", mode = { "n", "i" } },
    [H.key("<c-g>")] = { spec.mode, mode = { "n", "i" } },
  }
  for lhs, action in pairs(spec.keys or {}) do
    keys[H.key(lhs)] = { action, mode = { "n", "i" } }
  end
  return {
    title = spec.title,
    live = spec.live,
    supports_live = spec.live,
    finder = spec.finder,
    filter = spec.filter,
    format = function(entry, picker)
      local line, hls = spec.row(entry, H.list_width(picker), H.now(picker))
      return H.segments(line, hls)
    end,
    preview = function(ctx)
      spec.show(H.previewer(ctx.picker), ctx.buf, ctx.win, ctx.item)
    end,
    confirm = function(picker, entry)
      picker:close()
      if entry then
        vim.schedule(function()
          spec.resume(entry)
        end)
      end
    end,
    actions = spec.actions,
    win = { input = { keys = keys }, list = { keys = { ["dd"] = "pseudoclaude_delete" } } },
  }
end

--- `lhs` as snacks writes keys once it has normalized them ("<M-r>", "<C-G>"): a source's key then replaces snacks'
--- default for that key instead of being reported as its duplicate.
---@param lhs string
---@return string
function H.key(lhs)
  return vim.fn.keytrans(api.nvim_replace_termcodes(lhs, true, true, true))
end

--- Closes `picker` (of our source `from`: "sessions" or "search") and opens `to` with what was typed (the list's
--- pattern, the search's query), its `all` and `external`, and `changes`.
---@param picker table
---@param from "sessions"|"search"
---@param to "sessions"|"search"
---@param changes table?
function H.reopen(picker, from, to, changes)
  local opts = picker.opts
  local filter = picker.input and picker.input.filter
  local query = filter and filter[from == "search" and "search" or "pattern"] or ""
  local o = vim.tbl_extend("force", { all = opts.all, external = opts.external }, changes or {})
  o[to == "search" and "search" or "pattern"] = query
  picker:close()
  vim.schedule(function()
    M[to](o)
  end)
end

--- Opens source `name` (registered first if it is not yet).
---@param name string
---@param opts table?
function H.pick(name, opts)
  opts = vim.deepcopy(opts or {})
  local source = require("pseudoclaude.pickers.source")
  local o = source.opts(opts)
  local sources = require("snacks.picker.config.sources")
  if not sources[name] then
    M.register(sources)
  end
  local pick_opts = { source = name, all = o.all, external = o.external, pattern = opts.pattern or opts.query }
  if o.external then
    pick_opts.title = sources[name].title .. " (other agents too)"
  end
  if o.search then
    pick_opts.search = o.search
    pick_opts.pattern = nil
  end
  require("snacks").picker.pick(pick_opts)
end

--- The previewer of an opened picker (one per picker: its cache and what its buffer shows).
---@param picker table
---@return pseudoclaude.pickers.Previewer
function H.previewer(picker)
  picker.pseudoclaude_previewer = picker.pseudoclaude_previewer or require("pseudoclaude.pickers.source").previewer()
  return picker.pseudoclaude_previewer
end

---@param picker table
---@return integer
function H.now(picker)
  return H.previewer(picker).now
end

--- Columns of the picker's list window (minus snacks' own prefix of two).
---@param picker table
---@return integer
function H.list_width(picker)
  local win = picker and picker.list and picker.list.win and picker.list.win.win
  if win and api.nvim_win_is_valid(win) then
    return api.nvim_win_get_width(win) - 2
  end
  return 80
end

--- A row and its highlights as snacks' segments `{text, group}`.
---@param line string
---@param hls table[] `{start_col, end_col, group}`, byte columns
---@return table[]
function H.segments(line, hls)
  local sorted = vim.deepcopy(hls)
  table.sort(sorted, function(a, b)
    return a[1] < b[1]
  end)
  local out, at = {}, 0
  for _, h in ipairs(sorted) do
    if h[1] >= at and h[2] > h[1] then
      if h[1] > at then
        out[#out + 1] = { line:sub(at + 1, h[1]) }
      end
      out[#out + 1] = { line:sub(h[1] + 1, h[2]), h[3] }
      at = h[2]
    end
  end
  if at < #line then
    out[#out + 1] = { line:sub(at + 1) }
  end
  return out
end

return M
