--- Full-text search over every message of the workspace's sessions: `require("pseudoclaude").sessions.search()`.
--- See `:help pseudoclaude-search`.
---
--- The core (src/session/search.rs, exported by src/bridge/search.rs) reads the logs on its own threads and hands
--- back hits in batches, newest sessions first; nothing here reads a session on the main loop unless a script asks
--- for the blocking form.

local M = {}
local H = {}

---@class pseudoclaude.SearchHit
---@field id string The session.
---@field index integer 1-based position of the message in `sessions.load(id).messages`.
---@field role "user"|"assistant"
---@field kind "text"|"tool_call"|"tool_result" Where in the message the text is.
---@field snippet string One line around the first match, `…` where cut.
---@field ranges integer[][] `{start, end}` byte ranges of the matches in `snippet`, 0-based, end exclusive.
---@field matches integer Matches in the whole message.
---@field title string The session's title.
---@field last_message integer The session's newest message time, unix seconds.
---@field agent string? Another agent's session (`opts.external`): the agent that had it ("claude", "codex", "gemini",
--- "qwen", "opencode", "pi"); `id` is then its `AGENT:ID`, as `sessions.list({ external = true })` gives it.

---@class pseudoclaude.SearchSummary
---@field sessions integer Sessions searched.
---@field matched integer Sessions with a hit.
---@field hits integer
---@field replayed integer Sessions whose raw bytes may hold the text, replayed to find which messages do.
---@field truncated boolean `limit` was reached.
---@field cancelled boolean
---@field skipped string[] Sessions that could not be read, `id: why`.

---@class pseudoclaude.SearchOpts
---@field case "smart"|"sensitive"|"insensitive"? Default "smart": case-insensitive unless the query has an upper-case
--- letter.
---@field limit integer? Stop after this many hits.
---@field per_session integer? At most this many hits per session.
---@field include_current boolean? Search the current session too (left out by default, as in `list()`).
---@field external boolean? The workspace's sessions of the other agents too (Claude Code, Codex, Gemini CLI, Qwen
--- Code, opencode, Pi; those `list({ external = true })` gives): their hits come after ours, each naming its `agent`.
---@field on_hits fun(hits: pseudoclaude.SearchHit[])? Streaming form: each batch, in order, on the main loop.
---@field on_done fun(err: string?, summary: pseudoclaude.SearchSummary?)? Streaming form: the end (`err` is
--- "cancelled" when a newer search took its place).

---@class pseudoclaude.SearchHandle
---@field ticket integer The core's job.
---@field cancelled boolean
---@field done boolean
local Handle = {}
Handle.__index = Handle

--- Stops the search: no `on_hits` nor `on_done` is called after this.
function Handle:cancel()
  if self.done or self.cancelled then
    return
  end
  self.cancelled = true
  pcall(H.native, "search", "sessions_search_cancel", self.ticket)
end

--- Searches every message of every session of the workspace for `query` (literally). Three forms:
--- - with `opts.on_hits` or `opts.on_done`: returns a handle at once; the hits stream in on the main loop;
--- - in a coroutine: waits (yielding) for the search, which runs in the background, and returns the hits and the
---   summary;
--- - otherwise: blocks, reading every session on the calling thread, and returns the hits and the summary (for
---   scripts; the picker never does this).
--- Hits come best first: newest sessions first, each in message order. A newer search cancels a running one.
--- `current`: the current session's id, left out unless `opts.include_current` (`sessions.search` passes it).
---@param query string
---@param opts pseudoclaude.SearchOpts?
---@param current string?
---@return pseudoclaude.SearchHandle|pseudoclaude.SearchHit[]
---@return pseudoclaude.SearchSummary?
function M.search(query, opts, current)
  opts = opts or {}
  H.check("query", query, "string")
  H.check("opts", opts, "table")
  for _, key in ipairs({ "limit", "per_session" }) do
    local v = opts[key]
    if v ~= nil and (type(v) ~= "number" or v < 0 or v ~= math.floor(v)) then
      H.fail(("opts.%s: expected an integer >= 0, got %s"):format(key, vim.inspect(v)))
    end
  end
  if opts.external ~= nil and type(opts.external) ~= "boolean" then
    H.fail(("opts.external: expected a boolean, got %s"):format(type(opts.external)))
  end
  for _, key in ipairs({ "on_hits", "on_done" }) do
    if opts[key] ~= nil and type(opts[key]) ~= "function" then
      H.fail(("opts.%s: expected a function, got %s"):format(key, type(opts[key])))
    end
  end
  local args = {
    case = opts.case,
    limit = opts.limit,
    per_session = opts.per_session,
    external = opts.external == true or nil,
    exclude = not opts.include_current and current or nil,
  }
  if opts.on_hits or opts.on_done then
    return H.start(query, args, opts.on_hits, opts.on_done)
  end
  local co = coroutine.running()
  if co and (coroutine.isyieldable == nil or coroutine.isyieldable()) then
    local all, result = {}, nil
    H.start(query, args, function(hits)
      vim.list_extend(all, hits)
    end, function(err, summary)
      result = { err = err, summary = summary }
      vim.schedule(function()
        coroutine.resume(co)
      end)
    end)
    while not result do
      coroutine.yield()
    end
    if result.err then
      H.fail(result.err)
    end
    return all, result.summary
  end
  local out = H.decode(H.native("search", "sessions_search", H.workspace(), query, args))
  return out.hits, out.summary
end

--- The picker's preview of a hit: session `id` around message `index`, read in the background (`on_done(nil,
--- preview)` or `on_done(message)`); shares the previews' lane, so a newer preview drops one not started.
---@param id string
---@param index integer
---@param on_done fun(err: string?, preview: pseudoclaude.SessionPreview?)
function M.preview_at_async(id, index, on_done)
  local done = require("pseudoclaude.core").decoded("preview", on_done)
  H.native("preview_at_async", "sessions_preview_at_async", H.workspace(), id, index, done)
end

-- Helpers ------------------------------------------------------------------------------------------------------

---@return pseudoclaude.SearchHandle
function H.start(query, args, on_hits, on_done)
  local handle = setmetatable({ cancelled = false, done = false }, Handle)
  handle.ticket = H.native("search", "sessions_search_async", H.workspace(), query, args, function(ok, value, more)
    if handle.cancelled or handle.done then
      return
    end
    if more then
      local decoded, hits = pcall(H.decode, value)
      if ok and decoded and on_hits then
        on_hits(hits)
      end
      return
    end
    handle.done = true
    if on_done then
      if ok then
        on_done(nil, value)
      else
        on_done(require("pseudoclaude.core").plain(value), nil)
      end
    end
  end)
  return handle
end

function H.decode(json)
  return require("pseudoclaude.core").decode(json)
end

function H.workspace()
  return require("pseudoclaude.config").workspace()
end

--- Calls native `name`; a failure is raised as `pseudoclaude.sessions.<fn>: <message>`.
function H.native(fn, name, ...)
  local lib = require("pseudoclaude.core").load()
  local native = lib[name]
  if type(native) ~= "function" then
    H.fail(
      ("the native library has no function %q (stale library? %s)"):format(
        name,
        require("pseudoclaude.core").build_hint()
      ),
      fn
    )
  end
  local ok, value = native(...)
  if ok ~= true then
    H.fail(require("pseudoclaude.core").plain(value), fn)
  end
  return value
end

function H.fail(msg, fn)
  error(("pseudoclaude.sessions.%s: %s"):format(fn or "search", msg), 0)
end

function H.check(name, value, expected)
  if type(value) ~= expected then
    H.fail(("%s: expected %s, got %s"):format(name, expected, type(value)))
  end
end

return M
