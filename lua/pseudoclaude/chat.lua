--- The agent buffer: a transcript window and an input window below it.
---
--- The conversation runs in the native core, on its own threads. This module only renders what the
--- core reports (drained from its queue whenever it wakes the main loop) and sends what the user
--- types. Nothing here waits for the disk, the network or the model.
---
--- Architecture invariant: the agent buffer is drawn only by `transcript.lua`'s renderer (live, restored and
--- previewed histories read alike), and the Nth message mark in `S.msg_ns` is message N of the history.

local M = {}
local H = {}
local S = require("pseudoclaude.chat.state")
local V = require("pseudoclaude.chat.view")
local E = require("pseudoclaude.chat.events")

-- The parts never require this module (no import circle): what they call of it is handed in. The keys call
-- `M.send`/`M.cancel` when pressed (not when mapped), so a replaced function is the one called.
H.key_actions = { ---@type pseudoclaude.chat.KeyActions
  send = function(text, attachments)
    return M.send(text, attachments)
  end,
  cancel = function()
    return M.cancel()
  end,
}
E.open_chat = function()
  return M.open()
end
-- (the resume part is required when a resume starts: it is handed them then)
H.resume_calls = {
  show = function(n)
    return M.show(n)
  end,
  configure = function()
    return M.configure()
  end,
}

-- Public API ===========================================================================================================

--- Opens (or focuses) the current chat's agent buffer. Returns the transcript buffer.
---@return integer bufnr
function M.open()
  H.ensure_host()
  -- what `#buffer` means from the input window: the file buffer the user opened the chat from
  if vim.b.pseudoclaude_chat == nil then
    require("pseudoclaude.context").track(vim.api.nvim_get_current_buf())
  end
  H.focus(S.chat)
  -- the first chat keeps the names it always had; the others are numbered
  local suffix = S.chat == 1 and "" or ("/" .. S.chat)
  if not V.valid_buf(S.buf) then
    S.buf = V.make_buf("pseudoclaude://chat" .. suffix, "pseudoclaude")
    vim.b[S.buf].pseudoclaude_chat = S.chat
    vim.bo[S.buf].modifiable = false
    -- at once: a message sent right after opening must find the history drawn, or both would draw it
    require("pseudoclaude.chat.restore").restore(nil, nil, nil, true)
  end
  if not V.valid_buf(S.input_buf) then
    S.input_buf = V.make_buf("pseudoclaude://input" .. suffix, "pseudoclaude-input")
    vim.b[S.input_buf].pseudoclaude_chat = S.chat
    V.map_input(S.input_buf, H.key_actions)
  end
  if not V.valid_win(S.win) then
    vim.cmd("botright vsplit")
    S.win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(S.win, S.buf)
    vim.api.nvim_win_set_width(S.win, math.max(60, math.floor(vim.o.columns * 0.4)))
    V.set_win_options(S.win)
    vim.wo[S.win].winbar = ("%%{%%v:lua.require'pseudoclaude.chat'.winbar(%d)%%}"):format(S.chat)
    V.map_transcript(S.buf, H.key_actions)
  end
  if not V.valid_win(S.input_win) then
    vim.api.nvim_set_current_win(S.win)
    vim.cmd("belowright split")
    S.input_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(S.input_win, S.input_buf)
    vim.api.nvim_win_set_height(S.input_win, 5)
    vim.wo[S.input_win].winfixheight = true
    vim.wo[S.input_win].winbar = "%{%v:lua.require'pseudoclaude.chat'.input_winbar()%}"
  end
  vim.api.nvim_set_current_win(S.input_win)
  V.scroll_to_end()
  -- what it asked while it was not in sight is asked now
  require("pseudoclaude.chat.approval").ask_pending()
  return S.buf
end

---@class pseudoclaude.ChatOpts
---@field provider table? Provider settings of this chat (`name`, `model`, `base_url`…, as `setup({ provider })`),
--- over the configured ones.
---@field model string? Its model (as `provider.model`).
---@field agent string? The agent that drives it: "pseudoclaude" (ours), or an ACP agent's name (`setup({ agents })`'s
--- and the built-in claude, codex, gemini, qwen, opencode, pi, goose); default: `setup({ agent })`, else ours.
---@field worktree (boolean|string)? In a git worktree of its own (issue 47): `true` (a generated name) or its NAME;
--- a new branch `pseudoclaude/NAME` from HEAD, the folder under `.PseudoClaude/worktrees/` (`:help
--- pseudoclaude-worktree`). Made on a worker: the chat opens when it is there (`on_done`).
---@field on_done fun(err: string?, bufnr: integer?)? With `worktree`: called once the chat is open, or why not.

--- Opens another chat, next to the others, and shows it: its own session (from its first message), log, lock,
--- agent and provider settings, buffer and input window; the other chats go on. Returns its transcript buffer.
--- Without `opts` (nil), deprecated: starts the current chat over, as `start_over()` does (and says so, once).
---@param opts pseudoclaude.ChatOpts?
---@return integer? bufnr
function M.new(opts)
  if opts == nil then
    -- one call, one meaning: `new()` used to start the current chat over, `new({})` opens another
    vim.deprecate("chat.new() without {opts}", "chat.start_over()", "0.2.0", "pseudoclaude")
    return M.start_over()
  end
  vim.validate("opts", opts, "table")
  vim.validate("opts.provider", opts.provider, "table", true)
  vim.validate("opts.model", opts.model, "string", true)
  vim.validate("opts.agent", opts.agent, "string", true)
  vim.validate("opts.worktree", opts.worktree, { "boolean", "string" }, true)
  vim.validate("opts.on_done", opts.on_done, "function", true)
  local cfg = require("pseudoclaude.config")
  if opts.agent and opts.agent ~= "pseudoclaude" and not vim.tbl_contains(cfg.agent_names(), opts.agent) then
    error(
      ("pseudoclaude.chat.new: no agent named %q (known: pseudoclaude, %s)"):format(
        opts.agent,
        table.concat(cfg.agent_names(), ", ")
      ),
      0
    )
  end
  H.ensure_host()
  local core = require("pseudoclaude.core")
  -- the host knows the agents as configured now (a setup() since the last message may have added one)
  core.call("agent_configure", H.config())
  local acp = opts.agent and opts.agent ~= "pseudoclaude" and opts.agent or nil
  local own = (opts.provider or opts.model) and H.config(opts) or nil
  if opts.agent == "pseudoclaude" and not own and cfg.get().agent then
    own = H.config() -- ours, explicitly, though new chats default to an ACP agent
  end
  if own then
    own.agent = nil -- a chat given its own provider runs ours
  end
  if opts.worktree then
    return H.new_in_worktree(opts, own, acp)
  end
  local n = core.call("agent_chat_open", own, acp)
  S.get(n)
  return M.show(n)
end

--- Chat `n`'s row as the core lists it.
function H.core_row(n)
  for _, r in ipairs(require("pseudoclaude.core").call("agent_chats")) do
    if r.chat == n then
      return r
    end
  end
end

--- `chat.new({ worktree })`: the worktree made on a worker, then the chat opened in it (returns nothing).
function H.new_in_worktree(opts, own, acp)
  local name = type(opts.worktree) == "string" and opts.worktree or nil
  local on_done = opts.on_done
    or function(err)
      if err then
        require("pseudoclaude.errors").report(err)
      end
    end
  require("pseudoclaude.worktree").create(name, nil, function(err, wt)
    if err then
      return on_done(err)
    end
    local config = own or H.config()
    config.agent = nil
    config.worktree = { name = wt.id, branch = wt.branch, path = wt.root }
    -- an ACP agent works there too: its `cwd`, our fs and terminal tools for it, its checkpoints
    local ok, n = pcall(require("pseudoclaude.core").call, "agent_chat_open", config, acp)
    if not ok then
      return on_done(tostring(n))
    end
    S.get(n).worktree = wt
    on_done(nil, M.show(n))
  end)
end

--- Shows chat `n` (its windows opened, or focused) and makes it the current chat. Returns its transcript buffer.
---@param n integer
---@return integer bufnr
function M.show(n)
  H.ensure_host()
  if not S.chats[n] then
    error(("pseudoclaude: there is no chat %s"):format(tostring(n)), 0)
  end
  S.use(n)
  return M.open()
end

--- Closes chat `n` (nil: the current one): its turn cancelled, its windows and buffers gone; its session stays on
--- disk. The last chat is emptied instead.
---@param n integer?
function M.close(n)
  if not S.host_ready then
    return
  end
  n = n or S.current
  local c = S.chats[n]
  if not c then
    return
  end
  -- a worktree chat's worktree, as made here or as a resume found it
  local row = H.core_row(n) or {}
  local wt = c.worktree and c.worktree.id or (row.worktree and row.worktree.name)
  require("pseudoclaude.core").call("agent_chat_close", n)
  if wt then
    -- nothing changed: it goes; changes: keep, merge or remove, asked (as Claude Code does at exit)
    require("pseudoclaude.worktree").closed(wt, c.state.session or row.session)
  end
  for _, b in ipairs({ c.input_buf, c.buf }) do
    if V.valid_buf(b) then
      pcall(vim.api.nvim_buf_delete, b, { force = true })
    end
  end
  local rows = require("pseudoclaude.core").call("agent_chats")
  local current = S.current
  for _, r in ipairs(rows) do
    if r.current then
      current = r.chat
    end
  end
  if #rows == 1 and rows[1].chat == n then
    -- the last chat: emptied, not removed
    S.chats[n] = nil
    S.get(n)
    S.use(n)
    return
  end
  S.forget(n, current)
end

--- The sessions live in a chat, by id: `{chat, state}` (for the picker's rows).
---@return table<string, {chat: integer, state: string}>
function M.live()
  local out = {}
  for _, r in ipairs(M.chats()) do
    if r.session then
      out[r.session] = { chat = r.chat, state = r.state }
    end
  end
  return out
end

--- `:PseudoChats`: the live chats with their state (`vim.ui.select`); the one picked is shown.
function M.pick()
  local rows = M.chats()
  if #rows == 0 then
    return vim.notify("pseudoclaude: no chat yet (:PseudoChat opens one)")
  end
  vim.ui.select(rows, {
    prompt = "Chats",
    kind = "pseudoclaude.chat",
    format_item = function(r)
      local title = r.title ~= "" and r.title or "(new chat)"
      return ("%d  [%s]  %s  · %s%s"):format(r.chat, r.state, title, r.agent, r.current and "  (current)" or "")
    end,
  }, function(r)
    if r then
      M.show(r.chat)
    end
  end)
end

---@class pseudoclaude.ChatRow
---@field id string Its session's id, or "chat:N" before its first message.
---@field chat integer Its number (what `chat.show(n)` takes).
---@field session string? Its session's id once it has one.
---@field title string The first line of its first message.
---@field agent string "pseudoclaude", or the ACP agent's name.
---@field state "idle"|"running"|"waiting"|"failed" "waiting": for the user's answer (an approval).
---@field buf integer? Its transcript buffer (nil while never opened).
---@field current boolean The chat the commands act on.
---@field worktree string? A worktree chat's: the folder it works in.

--- Every live chat, oldest first.
---@return pseudoclaude.ChatRow[]
function M.chats()
  if not S.host_ready then
    return {}
  end
  local out = {}
  for _, r in ipairs(require("pseudoclaude.core").call("agent_chats")) do
    local c = S.chats[r.chat]
    out[#out + 1] = {
      id = r.session or ("chat:" .. r.chat),
      chat = r.chat,
      session = r.session,
      title = r.title or "",
      agent = r.agent,
      state = r.state,
      buf = c and V.valid_buf(c.buf) and c.buf or nil,
      current = r.current == true,
      worktree = r.worktree and r.worktree.path or (c and c.worktree and c.worktree.root) or nil,
    }
  end
  return out
end

--- The input window's winbar: its keys, and what is attached to the next message.
---@return string
function M.input_winbar()
  local keys = require("pseudoclaude.config").get().keys
  local bar = (" Message · %s send (normal) · %s send (insert) · %s cancel"):format(
    keys.send or "-",
    keys.send_insert or "-",
    keys.cancel or "-"
  )
  local pending = require("pseudoclaude.context").pending()
  if #pending > 0 then
    local names = vim.tbl_map(function(a)
      return a.lines and ("%s:%d-%d"):format(a.path, a.lines[1], a.lines[2]) or a.path
    end, pending)
    bar = bar .. " · 📎 " .. table.concat(names, ", ")
  end
  return (bar:gsub("%%", "%%%%"))
end

--- Sends `text` as the user's message, with `attachments` (context from the editor, see `pseudoclaude.context`);
--- opens the chat and starts a session when needed.
---@param text string
---@param attachments pseudoclaude.Attachment[]?
function M.send(text, attachments)
  if type(text) ~= "string" then
    error("pseudoclaude.chat.send: text must be a string, got " .. type(text), 2)
  end
  H.ensure_host()
  -- opened (and its history drawn) before the message exists, so the message is drawn once, by its event
  M.open()
  require("pseudoclaude.core").call("agent_configure", H.config())
  require("pseudoclaude.core").call("agent_send", text, attachments, S.chat)
  S.state.busy = true
  S.state.phase = "answering"
  S.refresh_status()
  V.redraw_winbar()
end

--- Cancels the running turn. Returns whether one was running.
---@return boolean
function M.cancel()
  if not S.host_ready then
    return false
  end
  local running = require("pseudoclaude.core").call("agent_cancel", S.chat)
  S.asks = {}
  return running
end

--- Restores session `id` ("last" or nil: the most recent other session of ours; with none, the newest of the other
--- agents', handed to its agent) into the agent buffer. Returns at once: read on the core's threads, drawn from its
--- end in slices; `opts.on_done(report)` and the `User PseudoClaudeResumed` autocmd tell when the history is in place
--- (or why not). See chat/resume.lua.
---@param id string?
---@param opts pseudoclaude.ResumeOpts?
function M.resume(id, opts)
  local R = require("pseudoclaude.chat.resume")
  R.chat = H.resume_calls
  return R.resume(id, opts)
end

--- Timings of the last resume (nil before the first).
---@return pseudoclaude.ResumeStats?
function M.last_resume_stats()
  return S.last_stats
end

--- Starts the current chat over, empty (`:PseudoNew`): its next message begins a new session; the current session
--- stays on disk, for `:PseudoResume`. The other chats go on.
function M.start_over()
  H.ensure_host()
  require("pseudoclaude.core").call("agent_new_chat", S.chat)
  S.state.saved, S.state.save_error = true, nil
  S.state.usage, S.state.cost = nil, nil
  if V.valid_buf(S.buf) then
    require("pseudoclaude.chat.restore").restore()
  end
end

--- Deprecated name of `start_over()`.
function M.new_chat()
  vim.deprecate("chat.new_chat()", "chat.start_over()", "0.2.0", "pseudoclaude")
  return M.start_over()
end

--- Each ACP agent a chat can run (`:checkhealth`): `{ name, command, found, version, configured, default, install,
--- error }`.
---@return table[]
function M.acp_agents()
  M.configure()
  return require("pseudoclaude.core").call("agent_acp_agents")
end

--- Sets the core's host up with the current configuration, for what reads it outside a chat (a hand-over to an ACP
--- agent resolves `setup({ agents })` there).
function M.configure()
  H.ensure_host()
  require("pseudoclaude.core").call("agent_configure", H.config())
end

---@class pseudoclaude.AgentOffers What a chat's agent offers.
---@field agent string? Its name: an ACP agent's as soon as its chat is opened, ours ("pseudoclaude") once it ran (nil before).
---@field commands {name: string, description: string?}[] Its slash commands (`available_commands_update`).
---@field modes {currentModeId: string?, availableModes: {id: string, name: string?}[]?}|nil Its modes.
---@field models {current: string?, available: {id: string, name: string?}[]}|nil The models it lets the user choose
--- (its session's `model` config option), nil when it offers no choice.

--- What chat `n`'s agent (nil: the current chat's) offers: an ACP agent's slash commands and modes.
---@param n integer?
---@return pseudoclaude.AgentOffers
function M.offers(n)
  if not S.host_ready then
    return { commands = {} }
  end
  local o = require("pseudoclaude.core").call("agent_offers", n or S.chat)
  o.modes = o.modes ~= vim.NIL and o.modes or nil
  o.models = o.models ~= vim.NIL and o.models or nil
  return o
end

--- Switches the current chat's ACP agent to mode `mode` (`session/set_mode`, `:PseudoMode`); without one, offers
--- the agent's modes (`vim.ui.select`). The outcome is a line in the chat.
---@param mode string?
function M.set_mode(mode)
  H.ensure_host()
  if not mode or vim.trim(mode) == "" then
    local modes = (M.offers().modes or {}).availableModes or {}
    if #modes == 0 then
      return require("pseudoclaude.errors").report("pseudoclaude: this chat's agent offers no modes")
    end
    return H.select_offer(modes, "Mode", M.set_mode)
  end
  local ok, err = pcall(require("pseudoclaude.core").call, "agent_set_mode", vim.trim(mode), S.chat)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

--- The current session, or nil before the first message.
---@return {id: string, dir: string, jsonl: string}?
function M.current()
  if not S.host_ready then
    return nil
  end
  local cur = require("pseudoclaude.core").call("agent_current", S.chat)
  if cur then
    local row = M.chats_row(S.chat)
    cur.worktree = row and row.worktree
  end
  return cur
end

--- Chat `n`'s row of `chats()`.
---@param n integer
---@return pseudoclaude.ChatRow?
function M.chats_row(n)
  for _, r in ipairs(M.chats()) do
    if r.chat == n then
      return r
    end
  end
end

--- Each configured MCP server: `{ name, state, tools, error }` (`state` "stopped" before the first chat).
---@return pseudoclaude.McpStatus[]
function M.mcp_status()
  H.ensure_host()
  return require("pseudoclaude.core").call("agent_mcp_status")
end

--- Asks again about a server of the workspace's `.mcp.json` (`name`), or about each one declined or not answered.
---@param name string?
---@return integer asked
function M.mcp_ask_again(name)
  H.ensure_host()
  return require("pseudoclaude.core").call("agent_mcp_ask_again", name)
end

--- The history the model sees next, in the log's own shape. With `opts.on_done`: copied and written out on a worker
--- thread, decoded a chunk per main-loop step, `on_done(nil, messages)`; returns nothing.
---@param opts {on_done: fun(err: string?, messages: table[]?)}?
---@return table[]?
function M.messages(opts)
  local on_done = opts and opts.on_done
  local core = require("pseudoclaude.core")
  if not on_done then
    return S.host_ready and core.decode(core.call("agent_messages", S.chat)) or {}
  end
  if not S.host_ready then
    return vim.schedule(function()
      on_done(nil, {})
    end)
  end
  core.call("agent_messages_async", function(ok, held)
    if not ok then
      return on_done("pseudoclaude.messages: " .. core.plain(held))
    end
    core.decode_parts(held, on_done)
  end, S.chat)
end

--- Moves the chat to `workspace`: the sessions listed, started and resumed from now on are that directory's, and the
--- tools run there (the editor's current directory is left as it is). Returns the workspace it was in. The current
--- session is untouched; the next resume or new chat uses the new workspace.
---@param workspace string
---@return string before
function M.set_workspace(workspace)
  local before = S.workspace()
  require("pseudoclaude.config").get().workspace = workspace
  if S.host_ready then
    require("pseudoclaude.core").call("agent_configure", H.config())
  end
  return before
end

--- The message of the history (1-based, as in `messages()`) drawn at line `row` (1-based) of the agent buffer: the
--- last one starting at or above it. Raises when the buffer is out of step with the history (after a compaction),
--- after redrawing it from the history, so that asking again gives the right answer.
---@param row integer
---@return integer index 0 above the first message
---@return integer total messages in the history
function M.message_at(row)
  if not V.valid_buf(S.buf) then
    error("pseudoclaude: the agent buffer is not open", 0)
  end
  local drawn = #vim.api.nvim_buf_get_extmarks(S.buf, S.msg_ns, 0, -1, {})
  local ok, slice = pcall(require("pseudoclaude.core").call, "agent_history_slice", 0, 0, 0, S.chat)
  local total = ok and require("pseudoclaude.core").decode(slice).total or drawn
  if S.marks_stale or drawn ~= total or S.open_block then
    if not S.open_block then
      require("pseudoclaude.chat.restore").restore()
    end
    error(
      "pseudoclaude: the agent buffer is out of step with the history (a turn is running or older messages were "
        .. "summarised); wait for it to be redrawn, then try again",
      0
    )
  end
  return #vim.api.nvim_buf_get_extmarks(S.buf, S.msg_ns, 0, { row - 1, 0 }, {}), total
end

--- After a rewind of the conversation: the history drawn again, the rewound message's text in the input window to
--- edit and send again.
---@param text string?
function M.after_rewind(text)
  S.state.saved, S.state.save_error = true, nil
  if V.valid_buf(S.buf) then
    require("pseudoclaude.chat.restore").restore()
  end
  if text and text ~= "" and V.valid_buf(S.input_buf) then
    vim.api.nvim_buf_set_lines(S.input_buf, 0, -1, false, vim.split(text, "\n", { plain = true }))
  end
end

--- The winbar of chat `n`'s transcript window (nil: the current chat's): its state (idle, running, waiting,
--- failed), session, model, turn phase, the session's tokens and cost (when the provider reported any), whether the
--- log is saved.
---@param n integer?
---@return string
function M.winbar(n)
  if n and n ~= S.chat and S.chats[n] then
    return S.with(n, M.winbar)
  end
  local s = S.state
  local parts = {
    -- Narrow side windows are common: no prefix, and the model alone when the provider says the same.
    "%#PseudoClaudeWinbar# " .. H.state_mark(s) .. " " .. (s.session or "new session"),
    (s.model and s.model ~= "" and s.model ~= s.provider) and s.model or (s.provider or "?"),
  }
  -- the phase says what a turn is at; idle, the state mark has said it
  if s.phase and s.phase ~= "idle" then
    parts[#parts + 1] = s.phase
  end
  local usage = require("pseudoclaude.usage").summary(s.usage, s.cost)
  if usage ~= "" then
    parts[#parts + 1] = usage
  end
  local saved = s.saved and "%#PseudoClaudeSaved#saved" or "%#PseudoClaudeUnsaved#NOT SAVED: " .. (s.save_error or "")
  return table.concat(parts, " │ ") .. " │ " .. saved .. "%*"
end

--- Switches the model of the next turn (a turn running keeps its own) and of new chats, as `:PseudoModel {name}`;
--- without a name, offers the configured models (`vim.ui.select`). Returns the model switched to. In a chat with an
--- ACP agent: the agent's own models (`session/set_config_option`), the outcome a line in the chat.
---@param name string?
---@return string?
function M.set_model(name)
  H.ensure_host()
  local offers = M.offers()
  if offers.agent and offers.agent ~= "pseudoclaude" then
    return H.set_agent_model(offers, name)
  end
  if not name or vim.trim(name) == "" then
    local models = M.models()
    local current = require("pseudoclaude.core").call("agent_status", S.chat).model
    if #models == 0 then
      vim.notify("pseudoclaude: the model is " .. current .. " (`:PseudoModel {name}` switches it)")
      return
    end
    vim.ui.select(models, {
      prompt = "Model for the next turn (now " .. current .. ")",
    }, function(choice)
      if choice then
        M.set_model(choice)
      end
    end)
    return
  end
  local ok, model = pcall(require("pseudoclaude.core").call, "agent_set_model", vim.trim(name), S.chat)
  if not ok then
    require("pseudoclaude.errors").report(model)
    return
  end
  S.refresh_status()
  vim.notify("pseudoclaude: the next turn uses " .. model)
  return model
end

--- The models `:PseudoModel` completes: `provider.models`, `provider.model` and the names `pricing` prices, sorted,
--- once each; in a chat with an ACP agent, the ids of the models it offers.
---@return string[]
function M.models()
  local offers = M.offers()
  if offers.agent and offers.agent ~= "pseudoclaude" then
    return vim.tbl_map(function(m)
      return m.id
    end, (offers.models or {}).available or {})
  end
  local cfg = require("pseudoclaude.config").get()
  local seen, out = {}, {}
  local function add(m)
    if type(m) == "string" and m ~= "" and not seen[m] then
      seen[m] = true
      out[#out + 1] = m
    end
  end
  for _, m in ipairs(cfg.provider.models or {}) do
    add(m)
  end
  add(cfg.provider.model)
  for m in pairs(cfg.pricing or {}) do
    add(m)
  end
  table.sort(out)
  return out
end

--- The user's own instructions file, read before the workspace's `AGENTS.md`, `CLAUDE.md` and `PSEUDOCLAUDE.md`.
---@return string
function M.user_instructions()
  return require("pseudoclaude.chat.host").user_instructions()
end

-- Helpers ============================================================================================================

--- A chat's state, as the core decided it (`chats()` rows carry the same), marked for the winbar.
---@param s pseudoclaude.chat.Status
---@return string
function H.state_mark(s)
  local name = s.state or "idle"
  local hl = ({ idle = "PseudoClaudeWinbar", running = "PseudoClaudeSaved", waiting = "PseudoClaudeUnsaved" })[name]
    or "PseudoClaudeUnsaved"
  return ("%%#%s#[%s]%%#PseudoClaudeWinbar#"):format(hl, name)
end

--- Makes chat `n` the current one, here and in the core (the calls that name no chat, `:PseudoRename`,
--- `:PseudoFork`, `:PseudoRewind`, act on it).
---@param n integer
function H.focus(n)
  if S.current ~= n then
    S.current = n
    pcall(require("pseudoclaude.core").call, "agent_chat_focus", n)
  end
end

--- The configuration the core's host is given, from `setup()`'s options (chat/host.lua); with a chat's own options
--- (`chat.new(opts)`) over the configured provider.
---@param own pseudoclaude.ChatOpts?
---@return table
function H.config(own)
  return require("pseudoclaude.chat.host").config(own)
end

function H.ensure_host()
  V.define_highlights()
  if S.host_ready then
    return
  end
  require("pseudoclaude.core").call("agent_setup", E.on_wake, H.config())
  S.host_ready = true
  -- `:PseudoWorktree` without a name acts on the current chat's worktree (handed in: that module never requires
  -- this one)
  require("pseudoclaude.worktree")._set_current(function()
    local row = M.chats_row(S.current)
    return row and row.worktree
  end, function(root)
    for _, r in ipairs(M.chats()) do
      if r.worktree == root then
        return r.session
      end
    end
  end)
  S.refresh_status()
  local group = vim.api.nvim_create_augroup("pseudoclaude_chat", { clear = true })
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = group,
    callback = function()
      pcall(require("pseudoclaude.core").call, "agent_close")
    end,
  })
  -- the chat whose window the user enters is the current one; what it asked while hidden is asked now
  vim.api.nvim_create_autocmd("BufEnter", {
    group = group,
    callback = function(ev)
      local n = vim.b[ev.buf].pseudoclaude_chat
      if n and S.chats[n] then
        S.use(n)
        H.focus(n)
        vim.schedule(S.bind(require("pseudoclaude.chat.approval").ask_pending))
      end
    end,
  })
end

--- Asks which of the agent's offers (its modes, its models: `{ id, name }`) to switch to, shown as the id and, when it
--- differs, the name; `choose(id)` gets the answer (nothing on <Esc>).
---@param items { id: string, name: string? }[]
---@param prompt string
---@param choose fun(id: string)
function H.select_offer(items, prompt, choose)
  vim.ui.select(items, {
    prompt = prompt,
    format_item = function(m)
      local name = m.name ~= vim.NIL and m.name or nil
      return name and name ~= m.id and (m.id .. "  " .. name) or m.id
    end,
  }, function(m)
    if m then
      choose(m.id)
    end
  end)
end

--- `:PseudoModel` in a chat with an ACP agent: its own models, asked for by id (`vim.ui.select` without one).
---@param offers pseudoclaude.AgentOffers
---@param name string?
function H.set_agent_model(offers, name)
  if not name or vim.trim(name) == "" then
    local models = offers.models
    if not models then
      return require("pseudoclaude.errors").report(
        ("pseudoclaude: the agent %s offers no model choice (or has not started yet: send a message first)"):format(
          offers.agent
        )
      )
    end
    return H.select_offer(
      models.available,
      ("Model of %s (now %s)"):format(offers.agent, tostring(models.current)),
      function(id)
        H.set_agent_model(offers, id)
      end
    )
  end
  local ok, err = pcall(require("pseudoclaude.core").call, "agent_set_model", vim.trim(name), S.chat)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

return M
