--- The workspace's sessions: list, load, clean up, delete. `require("pseudoclaude").sessions` is this module.
--- See `:help pseudoclaude-sessions`.
---
--- Names, pins, forks and exports (`rename`, `pin`, `fork`, `export`) write or read on the core's worker threads when
--- given a callback: the editor never waits on a disk sync.
---
--- The work is done by the native core (src/bridge/sessions.rs over src/session/); errors (a malformed id such as
--- `../../etc`, a missing session, a session open in another editor) are raised with `error()` as
--- `pseudoclaude.sessions.<function>: <what went wrong>`.

---@class pseudoclaude.SessionInfo
---@field id string `YYYYMMDD-HHMMSS-xxxx`
---@field title string The session's name (`rename()`), else the first line of the first typed user message ("" when
--- none).
---@field model string First model named in the log ("" when none).
---@field messages integer Messages a resume restores.
---@field entries integer Valid lines in the log.
---@field bytes integer Size of the log.
---@field modified integer Modification time of the log, unix seconds.
---@field last_message integer Newest message time, unix seconds (0 when unknown).
---@field bad_lines integer Lines that are not valid entries.
---@field held_by string? Who holds the session's lock (another editor), nil when nobody does.
---@field partial boolean? Summarised from part of its log only (`opts.max_read`).
---@field repaired integer Lines restored after their invalid UTF-8 was read as U+FFFD.
---@field torn_tail_bytes integer Bytes after the last complete line.
---@field damaged boolean The log needed repairs (bad, repaired or torn lines); listed even with nothing to restore.
---@field branch string? Git branch at the session's latest recorded turn (nil: not a repository, or detached HEAD).
---@field commit string? Short git commit at the latest recorded turn (nil: not a repository).
---@field usage pseudoclaude.Usage Tokens the providers reported, summed over the session.
---@field cost number? Dollars, when `pricing` (`:help pseudoclaude-config-pricing`) prices every model that reported
--- usage.
---@field pinned boolean Pinned (`pin()`, `<C-t>` in the picker): listed before the others.
---@field forked_from pseudoclaude.ForkedFrom? The session this one was forked from.
---@field workspace string? Its workspace (an absolute path), in a list of every workspace (`list({ all = true })`).
---@field agent string? The ACP agent that ran it (`setup({ agents })`'s name: "claude"...); nil for our own agent's.

---@class pseudoclaude.ForkedFrom
---@field id string The source session.
---@field index integer How many of the source's messages the fork started with (1-based position of the last one).

---@class pseudoclaude.ToolCall
---@field id string
---@field name string
---@field arguments any

---@class pseudoclaude.ToolResult
---@field tool_call_id string
---@field content string The output (a preview of it when `spill` is set).
---@field is_error boolean
---@field spill {path: string, bytes: integer, sha256: string}?

---@class pseudoclaude.Message The log's own shape; empty fields are absent.
---@field role "user"|"assistant"
---@field content string?
---@field tool_calls pseudoclaude.ToolCall[]?
---@field tool_result pseudoclaude.ToolResult?
---@field ts integer Unix seconds (0 when unknown).

---@class pseudoclaude.LoadedSession
---@field id string
---@field messages pseudoclaude.Message[] The history a resume restores.
---@field bad_lines integer[] 1-based numbers of the lines that were not valid entries.
---@field repaired integer[] 1-based numbers of the lines restored with U+FFFD for their invalid UTF-8.
---@field trimmed boolean An unanswered tool call at the end was cut.
---@field dropped integer Messages left out in the middle (broken tool-call pairing).
---@field torn_tail_bytes integer Bytes after the last complete line.
---@field spill_problems string[] Spilled tool results that could not be read back.
---@field git_start {branch: string?, commit: string?}? Git branch and short commit when the session started.
---@field git {branch: string?, commit: string?}? The same at its latest recorded turn.
---@field usage_by_model table<string, pseudoclaude.Usage> Tokens the providers reported, per model.
---@field title string
---@field model string
---@field entries integer
---@field last_message integer
---@field damage_report string One sentence on what was repaired; "" when nothing was.
---@field pinned boolean
---@field forked_from pseudoclaude.ForkedFrom?

---@class pseudoclaude.SessionListOpts
---@field limit integer? At most this many sessions (the newest); only those are summarised.
---@field include_current boolean? Keep the current session (left out by default).
---@field check_locks boolean? Fill `held_by` (default true).
---@field include_pinned boolean? With `limit`: also list the pinned sessions, even older ones, first (the picker's
--- first rows).
---@field max_read integer? With `limit`: read at most this many bytes of a log whose summary is not cached yet (it is
--- then listed with `partial = true`, its counts and title possibly missing), so the call stays short.
---@field all boolean? The sessions of every workspace this editor has used (`workspaces()`), this one included, each
--- with its `workspace`; pinned first, then newest first.
---@field external boolean? Also this workspace's sessions of the other agents (Claude Code, Codex, Gemini CLI, Qwen
--- Code, opencode, Pi: `pseudoclaude.ExternalSession`, `source` set), merged in by time. With `max_read`, a transcript not cached yet is read at its head and tail only
--- (`partial`, its `messages` not counted yet).
---@field on_done fun(err: string?, sessions: table[]?)? `list()` only: read in the background, as `list_async()`.

---@class pseudoclaude.ExternalSession Another agent's session of this workspace (`list({ external = true })`).
---@field source "claude-code"|"codex"|"gemini-cli"|"qwen-code"|"opencode"|"pi"
---@field agent "claude"|"codex"|"gemini"|"qwen"|"opencode"|"pi" The built-in ACP agent that continues it.
---@field id string `AGENT:SESSION_ID` (never one of our ids): what `resume(id)` and `import(id)` take.
---@field session_id string The agent's own id of the session.
---@field path string The session's file (opencode: its database).
---@field title string Its custom title or thread name, else its first prompt.
---@field modified integer Unix seconds of its last record.
---@field messages integer Messages an import restores (0 while `partial`).
---@field model string Last model named ("" when none).
---@field branch string? Git branch recorded.
---@field unsupported string? Why it cannot be imported (a compressed rollout, a format version not read).
---@field notes string[]? What the reader left out or found damaged (a line cut short, lines that are not JSON…).
---@field partial boolean? Read at its head and tail only (a quick list): `messages` is not known yet.

---@class pseudoclaude.Imported
---@field id string The session of ours holding the conversation.
---@field messages integer Messages a resume restores.
---@field existing boolean The unchanged transcript had been imported before: `id` is that session.
---@field notes string[] What was left out and why (unknown records, a line cut short, no folder named).

---@class pseudoclaude.Sessions
local M = {}
local H = {}

-- the agents whose sessions a row of `list({ external = true })` names by `AGENT:SESSION_ID`
local AGENTS = { claude = true, codex = true, gemini = true, qwen = true, opencode = true, pi = true }

--- Sessions of the workspace, newest first (by last write), without empty ones and without the current one. A
--- damaged log is listed even when nothing in it can be restored (`damaged`, `bad_lines`). A session folder or
--- log that is a symbolic link is never listed (nor opened). The rows are plain tables, built from the list the core
--- packs (src/bridge/rows.rs, session_rows.lua); it blocks while the list is read. With `opts.on_done`,
--- returns nothing at once and calls `on_done(nil, sessions)` later, as `list_async()` does.
---@param opts pseudoclaude.SessionListOpts?
---@return (pseudoclaude.SessionInfo|pseudoclaude.ExternalSession)[]?
function M.list(opts)
  opts = opts or {}
  H.check_type("list", "opts", opts, "table")
  if opts.on_done ~= nil then
    H.check_type("list", "opts.on_done", opts.on_done, "function")
    return M.list_async(opts, opts.on_done)
  end
  local limit = opts.limit
  if limit ~= nil and (type(limit) ~= "number" or limit < 0 or limit ~= math.floor(limit)) then
    error(("pseudoclaude.sessions.list: opts.limit: expected an integer >= 0, got %s"):format(vim.inspect(limit)), 0)
  end
  local rows = require("pseudoclaude.session_rows")
  if not rows.available then
    return require("pseudoclaude.core").decode(H.call("list", "sessions_list_json", M.workspace(), H.list_args(opts)))
  end
  return rows.lent(H.call("list", "sessions_list_lend", M.workspace(), H.list_args(opts)))
end

--- The most recent session of ours (every workspace's: `all`), the current one left out, or nil: its id from the
--- folder names (no log is read). What `resume("last")` resumes, and what tells the pickers that there is none of
--- ours (they then open on the other agents').
---@param all boolean?
---@return pseudoclaude.SessionInfo?
function M.newest(all)
  return M.list({ all = all, limit = 1, check_locks = false, max_read = 0 })[1]
end

--- Rows handed over and built per main-loop step by `list_async()`: about 2 ms of a step.
M.LIST_STEP = 2000

--- `list(opts)` read on a background thread: returns at once, then calls `on_done(nil, sessions)` (or
--- `on_done(message)` on an error) on the main thread. For long lists (reading ten thousand sessions takes a
--- quarter of a second) that must not freeze the editor: the core hands the list over packed in parts of
--- `LIST_STEP` rows, and each main-loop step takes one part and builds its rows.
---@param opts pseudoclaude.SessionListOpts?
---@param on_done fun(err: string?, sessions: pseudoclaude.SessionInfo[]?)
function M.list_async(opts, on_done)
  opts = opts or {}
  H.check_type("list_async", "opts", opts, "table")
  H.check_type("list_async", "on_done", on_done, "function")
  local rows = require("pseudoclaude.session_rows")
  if not rows.available then
    return M.list_packed(opts, on_done) -- decoded from JSON, in one step
  end
  local args = H.list_args(opts)
  args.parts = M.LIST_STEP
  H.call("list_async", "sessions_list_async", M.workspace(), args, function(ok, ready)
    local core = require("pseudoclaude.core")
    if not ok then
      return on_done(("pseudoclaude.sessions.list_async: %s"):format(core.plain(ready)))
    end
    local out = {}
    local function take()
      return core.call("sessions_list_take", ready.id)
    end
    local function step()
      local took, failed = pcall(function()
        if #out < ready.count then
          local part = rows.open(take())
          rows.fill(part, 1, part.count, out, #out)
        end
      end)
      if not took then
        repeat -- the parts left are dropped
          local more, data = pcall(take)
        until not more or data == nil
        return on_done("pseudoclaude.sessions.list_async: cannot read the list: " .. tostring(failed))
      end
      if #out >= ready.count then
        return on_done(nil, out)
      end
      vim.schedule(step)
    end
    step()
  end)
end

--- `list_async()` for the picker: `on_done(nil, list, matcher)` with the list still packed (`session_rows.open()`:
--- its rows are built when read) or, without the FFI, decoded; with `opts.matcher`, `matcher` is the handle of the
--- core's fuzzy matcher over the rows (`fuzzy_filter`, as float/matcher.lua uses it), built on the worker thread.
---@param opts pseudoclaude.SessionListOpts|{matcher: boolean?}
---@param on_done fun(err: string?, list: pseudoclaude.PackedList|table[]|nil, matcher: integer?)
function M.list_packed(opts, on_done)
  local rows = require("pseudoclaude.session_rows")
  local args = H.list_args(opts)
  args.matcher = opts.matcher == true
  args.json = not rows.available
  if rows.available then
    rows.release_collected()
  end
  H.call("list_async", "sessions_list_async", M.workspace(), args, function(ok, ready)
    local core = require("pseudoclaude.core")
    if not ok then
      return on_done(("pseudoclaude.sessions.list_async: %s"):format(core.plain(ready)))
    end
    -- packed, the list stays in the core, lent (`rows.kept`): no copy of it in this step
    local took, data = pcall(H.call, "list_async", args.json and "sessions_list_take" or "sessions_list_keep", ready.id)
    local read, list = false, nil
    if took then
      read, list = pcall(function()
        if args.json then
          return core.decode(data)
        end
        return rows.kept(data or error("the list was taken already", 0), ready.id)
      end)
    end
    if not read then
      if ready.matcher then
        pcall(core.call, "fuzzy_free", ready.matcher)
      end
      return on_done("pseudoclaude.sessions.list_async: cannot read the list: " .. tostring(took and list or data))
    end
    on_done(nil, list, ready.matcher)
  end)
end

---@param opts pseudoclaude.SessionListOpts
---@return table
function H.list_args(opts)
  return {
    exclude = not opts.include_current and M.current_id() or nil,
    limit = opts.limit,
    check_locks = opts.check_locks ~= false,
    include_empty = false,
    max_read = opts.max_read,
    pricing = H.pricing(),
    include_pinned = opts.include_pinned == true,
    all = opts.all == true,
    workspaces_file = M.workspaces_file(),
    external = opts.external == true,
  }
end

---@class pseudoclaude.SessionPreview
---@field id string
---@field title string
---@field model string
---@field messages integer Messages a resume restores.
---@field last_message integer
---@field damage_report string
---@field files_touched string[] Files the agent wrote or edited (`write_file`/`edit_file` calls that succeeded).
---@field pinned boolean
---@field forked_from pseudoclaude.ForkedFrom?
---@field imported_from {source: string, id: string, path: string, kept: boolean?}? The other agent's session this one is a copy of (`kept`: a kept copy, `external.keep`).
---@field original_exists boolean Whether that agent's file is still there.
---@field agent {name: string, session_id: string}? The ACP agent whose own session this one goes on in.
---@field branch string? Git branch at the latest recorded turn (nil: not a repository, or detached HEAD).
---@field commit string? Short git commit at the latest recorded turn.
---@field git_start {branch: string?, commit: string?}? Where the session started, when that was elsewhere.
---@field usage pseudoclaude.Usage Tokens the providers reported, summed over the session.
---@field cost number? Dollars, when `pricing` prices every model that reported usage.
---@field tail {from: integer, total: integer, messages: table[], prev: table?, names: table<string, string>} The end of
--- the history (from 0-based message `from`), each text cut for display (`cut_bytes`).

--- What the picker's preview shows of session `id`, read on a background thread: `on_done(nil, preview)` or
--- `on_done(message)` on the main thread. A newer call drops an older one that has not started
--- (`on_done("superseded")`).
---@param id string
---@param on_done fun(err: string?, preview: pseudoclaude.SessionPreview?)
function M.preview_async(id, on_done)
  H.check_type("preview_async", "id", id, "string")
  local pricing = H.pricing()
  local limits = pricing and { pricing = pricing } or vim.empty_dict()
  local done = require("pseudoclaude.core").decoded("preview", on_done)
  H.call("preview_async", "sessions_preview_async", M.workspace(), id, limits, done)
end

--- Ids of the workspace's session folders, most recently active first, without reading any log: cheap enough for
--- command-line completion at any number of sessions.
---@return string[]
function M.ids()
  return H.call("ids", "sessions_ids", M.workspace())
end

--- Who holds session `id`'s lock (another editor), or nil; reads no log.
---@param id string
---@return string?
function M.holder(id)
  H.check_type("holder", "id", id, "string")
  return H.call("holder", "sessions_holder", M.workspace(), id)
end

--- One session's summary (as in `list()`), with `held_by`.
---@param id string
---@return pseudoclaude.SessionInfo
function M.info(id)
  H.check_type("info", "id", id, "string")
  return H.call("info", "sessions_info", M.workspace(), id, H.pricing())
end

--- The history a resume of session `id` restores, and what had to be repaired to get it.
---@param id string
---@return pseudoclaude.LoadedSession
function M.load(id)
  H.check_type("load", "id", id, "string")
  return H.call("load", "sessions_load", M.workspace(), id)
end

--- Removes the sessions idle for more than `retention_days` (`:help pseudoclaude-config-retention_days`), never
--- the current one nor one open in another editor. Returns the ids removed, oldest first.
---@return string[]
function M.cleanup()
  local days = require("pseudoclaude.config").get().retention_days
  return H.call("cleanup", "sessions_cleanup", M.workspace(), days, M.current_id())
end

--- Deletes session `id` (its whole directory). Refused for the current session and for one open in another
--- editor.
---@param id string
function M.delete(id)
  H.check_type("delete", "id", id, "string")
  if id == M.current_id() then
    error(("pseudoclaude.sessions.delete: session %s is the current session"):format(id), 0)
  end
  H.call("delete", "sessions_delete", M.workspace(), id)
end

--- Searches the text of every message of every session for `query`; `opts.on_hits`/`opts.on_done` stream the hits
--- in the background and return a handle with `:cancel()`. See `:help pseudoclaude-search`
--- (lua/pseudoclaude/search.lua).
---@param query string
---@param opts pseudoclaude.SearchOpts?
---@return pseudoclaude.SearchHandle|pseudoclaude.SearchHit[]
---@return pseudoclaude.SearchSummary?
function M.search(query, opts)
  -- the current session is this module's to know: search.lua is told it (and never requires this module)
  return require("pseudoclaude.search").search(query, opts, M.current_id())
end

--- Names session `id` `title` (an empty `title` gives it back its automatic title): a `title` entry in its own log,
--- so the name travels with the folder. Returns at once; the line is written and synced on a worker thread, then
--- `on_done(nil, info)` gets the session's list entry (or `on_done(message)` an error; without `on_done` an error is
--- reported with `vim.notify`). The current session is written through its own writer; another editor's is refused.
---@param id string
---@param title string
---@param on_done fun(err: string?, info: pseudoclaude.SessionInfo?)?
function M.rename(id, title, on_done)
  H.check_type("rename", "id", id, "string")
  H.check_type("rename", "title", title, "string")
  H.mark("rename", id, { title = title }, on_done)
end

--- Pins or unpins session `id` (a `pin` entry in its log): pinned sessions are listed first. Returns at once, as
--- `rename()` does.
---@param id string
---@param pinned boolean
---@param on_done fun(err: string?, info: pseudoclaude.SessionInfo?)?
function M.pin(id, pinned, on_done)
  H.check_type("pin", "id", id, "string")
  H.check_type("pin", "pinned", pinned, "boolean")
  H.mark("pin", id, { pinned = pinned }, on_done)
end

---@class pseudoclaude.ForkOpts
---@field on_done fun(err: string?, forked: {id: string, messages: integer, forked_from: pseudoclaude.ForkedFrom, files: pseudoclaude.RewindReport?}?)?
--- Fork on a worker thread and call this with the result; without it, `fork()` waits for the disk and returns the id.
---@field files boolean? Also return the workspace's files to their state at that message (the end of its turn), with
--- rewind's rule: files you changed since are left as they are (`files.conflicts`), open modified buffers never written.

---@class pseudoclaude.FileChange
---@field path string
---@field status "added"|"modified"|"deleted"
---@field added integer Lines added.
---@field removed integer Lines removed.
---@field restorable boolean False when the file was over the size limit before the turn.

---@class pseudoclaude.TurnChanges
---@field index integer The turn's user message, 1-based as in `load(id).messages`.
---@field files pseudoclaude.FileChange[]

--- The files the agent changed in each turn of session `id`, oldest turn first. With `on_done`, read on a worker
--- thread and returns at once (`on_done(err, turns)`); without it, returns the list.
---@param id string
---@param on_done fun(err: string?, turns: pseudoclaude.TurnChanges[]?)?
---@return pseudoclaude.TurnChanges[]?
function M.changes(id, on_done)
  H.check_type("changes", "id", id, "string")
  if on_done then
    H.check_type("changes", "on_done", on_done, "function")
    local core = require("pseudoclaude.core")
    H.call("changes", "sessions_changes_async", M.workspace(), id, function(ok, held)
      if not ok then
        return on_done(("pseudoclaude.sessions.changes: %s"):format(core.plain(held)))
      end
      core.decode_parts(held, on_done) -- one part per main-loop step
    end)
    return nil
  end
  return require("pseudoclaude.core").decode(H.call("changes", "sessions_changes", M.workspace(), id))
end

--- Forks session `id` at message `index` (1-based, as in `load(id).messages`; nil: at its end): a new session whose
--- history is messages 1..index, extended to the end of a tool exchange (a call keeps its results). Its log records
--- `forked_from = { id, index }`; the source is not touched. Returns the new id, or with `opts.on_done` returns at once
--- and calls `on_done(nil, {id, messages, forked_from})` or `on_done(message)`.
---@param id string
---@param index integer?
---@param opts pseudoclaude.ForkOpts?
---@return string? id
function M.fork(id, index, opts)
  opts = opts or {}
  H.check_type("fork", "id", id, "string")
  if index ~= nil and (type(index) ~= "number" or index < 1 or index ~= math.floor(index)) then
    error(("pseudoclaude.sessions.fork: index: expected an integer >= 1 or nil, got %s"):format(vim.inspect(index)), 0)
  end
  local modified = opts.files and require("pseudoclaude.editor").modified_paths() or nil
  if opts.on_done then
    H.check_type("fork", "opts.on_done", opts.on_done, "function")
    local done = H.done("fork", opts.on_done)
    H.call("fork", "sessions_fork_async", M.workspace(), id, index, function(ok, forked)
      if not ok or not opts.files then
        return done(ok, forked)
      end
      local at = forked.forked_from and forked.forked_from.index or index
      H.call("fork", "sessions_fork_files_async", M.workspace(), id, at, modified, function(fok, files)
        forked.files = fok and files or { ok = false, error = require("pseudoclaude.core").plain(files) }
        done(true, forked)
      end)
    end)
    return nil
  end
  local forked = H.call("fork", "sessions_fork", M.workspace(), id, index)
  if opts.files then
    H.call("fork", "sessions_fork_files", M.workspace(), id, forked.forked_from.index, modified)
  end
  return forked.id
end

---@class pseudoclaude.ExportOpts
---@field format "markdown"|"md"|"json"? Default "markdown".
---@field path string? With `on_done`: write the document to this file instead of handing it back.
---@field on_done fun(err: string?, done: {text: string?, path: string?, bytes: integer}?)? Read (and write) on a
--- worker thread; without it, `export()` reads the session on the main loop and returns the text.

--- Session `id` as a document: Markdown (a header with title, id, dates, model, branch when recorded, then one section
--- per message, tool calls and results in fenced blocks, long results folded in `<details>`, spilled results whole) or
--- JSON (the restored history in the log's message shape).
---@param id string
---@param opts pseudoclaude.ExportOpts?
---@return string? text
function M.export(id, opts)
  opts = opts or {}
  H.check_type("export", "id", id, "string")
  H.check_type("export", "opts", opts, "table")
  local format = opts.format or "markdown"
  if format ~= "markdown" and format ~= "md" and format ~= "json" then
    error(
      ('pseudoclaude.sessions.export: opts.format: expected "markdown" or "json", got %s'):format(vim.inspect(format)),
      0
    )
  end
  if opts.on_done then
    H.check_type("export", "opts.on_done", opts.on_done, "function")
    local args = { format = format, path = opts.path }
    H.call("export", "sessions_export_async", M.workspace(), id, args, H.done("export", opts.on_done))
    return nil
  end
  return H.call("export", "sessions_export", M.workspace(), id, format)
end

---@class pseudoclaude.ImportOpts
---@field on_done fun(err: string?, imported: pseudoclaude.Imported?)? Import on a worker thread and call this with the
--- result; without it, `import()` reads the file and writes the session on the main loop and returns the id.

--- Imports another agent's session as a new session of ours: `path` is its id as `list({ external = true })` gives it
--- (`gemini:…`, the only way to name an opencode session) or its file (a Claude Code transcript, a Codex rollout, a
--- Gemini CLI, Qwen Code or Pi session). Returns the new id (and, second, the whole `pseudoclaude.Imported`). An
--- unchanged session imported before gives the session it was imported into. The store itself is only read. See `:help pseudoclaude-import`. With
--- `opts.on_done`, returns at once and calls `on_done(nil, imported)` or `on_done(message)`.
---@param path string
---@param opts pseudoclaude.ImportOpts?
---@return string? id
---@return pseudoclaude.Imported?
function M.import(path, opts)
  opts = opts or {}
  H.check_type("import", "path", path, "string")
  H.check_type("import", "opts", opts, "table")
  local agent = path:match("^(%l+):")
  if not (agent and AGENTS[agent]) then -- an id (`gemini:…`, checked by the core) is no path
    path = vim.fs.normalize(path)
  end
  if opts.on_done then
    H.check_type("import", "opts.on_done", opts.on_done, "function")
    H.call("import", "sessions_import_async", M.workspace(), path, H.done("import", opts.on_done))
    return nil
  end
  local imported = H.call("import", "sessions_import", M.workspace(), path)
  return imported.id, imported
end

--- Whether `id` names another agent's session (`AGENT:SESSION_ID`, as `list({ external = true })` gives it) rather
--- than one of ours (which never hold a `:`). The core checks it again before use.
---@param id any
---@return boolean
function M.is_external_id(id)
  if type(id) ~= "string" then
    return false
  end
  local agent, rest = id:match("^(%l+):([%w%-_][%w%-_.]*)$")
  return agent ~= nil and AGENTS[agent] == true and #rest <= 200
end

--- Id of the current chat's session, or nil (no chat yet, or no chat module).
---@return string?
function M.current_id()
  local chat = package.loaded["pseudoclaude.chat"]
  if not chat then
    return nil
  end
  local ok, cur = pcall(chat.current)
  if not ok then
    return nil
  end
  if type(cur) == "table" then
    cur = cur.session_id or cur.id
  end
  return type(cur) == "string" and cur or nil
end

--- The workspace whose sessions these are: config `workspace`, or the current directory (or, inside `within()`, the
--- workspace given there).
---@return string
function M.workspace()
  return H.within or require("pseudoclaude.config").workspace()
end

--- Runs `fn()` with the functions of this module working on the sessions of `workspace` instead of this one (the
--- picker's `:PseudoResume all` rows: their previews, deletes, names and pins). Returns what `fn` returns; raises
--- what it raises.
---@generic T
---@param workspace string?
---@param fn fun(): T
---@return T
function M.within(workspace, fn)
  local before = H.within
  H.within = workspace
  local ok, a, b = pcall(fn)
  H.within = before
  if not ok then
    error(a, 0)
  end
  return a, b
end

--- The registry of the workspaces this editor has used: `stdpath("state")/pseudoclaude/workspaces`, one path per line,
--- noted when a session starts or is resumed (see `:help pseudoclaude-all-workspaces`).
---@return string
function M.workspaces_file()
  return vim.fs.joinpath(vim.fn.stdpath("state"), "pseudoclaude", "workspaces")
end

-- Helpers ------------------------------------------------------------------------------------------------------

--- Calls native `name`; a failure is raised as `pseudoclaude.sessions.<fn>: <message>`, at level 0 (the message
--- says all; a Lua position would only add noise).
---@param fn string
---@param name string
---@param ... any
---@return any
function H.call(fn, name, ...)
  return require("pseudoclaude.core").call_as("pseudoclaude.sessions." .. fn, name, ...)
end

--- The configured `pricing`, for the core to price each session; nil when empty (no cost is shown).
---@return table<string, pseudoclaude.Price>?
function H.pricing()
  local pricing = require("pseudoclaude.config").get().pricing
  return (type(pricing) == "table" and next(pricing)) and pricing or nil
end

--- A worker thread's callback `(ok, value)` as `on_done(err, value)`.
---@param fn string
---@param on_done fun(err: string?, value: any)
---@return fun(ok: boolean, value: any)
function H.done(fn, on_done)
  return function(ok, value)
    if not ok then
      return on_done(("pseudoclaude.sessions.%s: %s"):format(fn, require("pseudoclaude.core").plain(value)))
    end
    on_done(nil, value) -- nil is nil: the core leaves null fields out (bridge/mod.rs, "How values cross")
  end
end

--- Writes `title`/`pin` entries to session `id` on a worker thread.
---@param fn string
---@param id string
---@param mark {title: string?, pinned: boolean?}
---@param on_done fun(err: string?, info: pseudoclaude.SessionInfo?)?
function H.mark(fn, id, mark, on_done)
  if on_done ~= nil then
    H.check_type(fn, "on_done", on_done, "function")
  end
  on_done = on_done or function(err)
    if err then
      require("pseudoclaude.errors").report(err)
    end
  end
  H.call(fn, "sessions_mark_async", M.workspace(), id, mark, H.done(fn, on_done))
end

---@param fn string
---@param name string
---@param value any
---@param expected type
function H.check_type(fn, name, value, expected)
  if type(value) ~= expected then
    error(("pseudoclaude.sessions.%s: %s: expected %s, got %s"):format(fn, name, expected, type(value)), 0)
  end
end

return M
