--- The agent buffers' state, shared by the controller (`chat.lua`) and its parts in `chat/`: per chat, the buffers
--- and windows, what the winbar shows, what the renderer needs to go on drawing; for all, the resumes in flight.
---
--- Several chats live at once, each numbered by the core (`chat`, see src/agent/chat.rs). The fields of one chat
--- (`PER_CHAT`) are read and written through this module as `S.buf`, `S.state`…: they are the *active* chat's. The
--- active chat is the current one (the one the user last showed), except while the core's messages about another
--- one are drawn (`M.with`) and in the callbacks made with `M.bind`, which run with the chat they were made in.
---
--- Architecture invariant: data lives here, behaviour in the modules that use it; nothing here draws.

local M = {}

---@class pseudoclaude.chat.Chat One live chat's part of the state.
---@field chat integer Its number in the core.
---@field buf integer? The transcript buffer (nil until the chat is first opened).
---@field input_buf integer?
---@field win integer? The transcript window (nil while not shown).
---@field input_win integer?
---@field state pseudoclaude.chat.Status
---@field streaming boolean An answer is streaming into the last line.
---@field prev table? The last message drawn (the log's shape), for the renderer's header rule; nil at the top.
---@field restore_gen integer Bumped by each restore: slices of an older one stop drawing.
---@field marks_stale boolean The history was replaced (compaction): the marks no longer number it.
---@field open_block {mark: integer?, has_text: boolean, thought: boolean?}? The answer streaming now has its mark
--- already (placed when it began); `thought`: its thinking is drawn above the text row.
---@field thinking {row: integer, text: string}? The thinking streaming now: the row of its line and its text so far.
---@field names table<string, string> Tool names by call id.
---@field live table<string, pseudoclaude.chat.Block|{title: string}> An ACP agent's calls under way, by id, as drawn
--- (`chat/calls.lua`).
---@field jump {mark: integer, row: integer}? Where a resume with `at` put the cursor: an extmark on the message's first
--- line (it moves down as older slices are drawn above it) and the row the cursor was last put on.
---@field turn_files {rel: string, path: string, outcome: string}[] Files the agent created or changed in the running
--- turn, in order.
---@field file_marks table<integer, string> The file of each line of a turn's file list, by extmark id.
---@field restore_stats table? The timings of the resume being drawn.
---@field asks table[] Approvals that came while the chat was not visible, asked when it is shown.
---@field notified boolean The user was told the chat waits (once per wait).
---@field worktree pseudoclaude.Worktree? A worktree chat's worktree, as made (`chat.new({ worktree })`).

--- The fields each chat has of its own.
local PER_CHAT = {
  chat = true,
  buf = true,
  input_buf = true,
  win = true,
  input_win = true,
  state = true,
  streaming = true,
  prev = true,
  restore_gen = true,
  marks_stale = true,
  open_block = true,
  thinking = true,
  names = true,
  live = true,
  jump = true,
  turn_files = true,
  file_marks = true,
  restore_stats = true,
  asks = true,
  notified = true,
}

--- Every live chat's state, by number.
---@type table<integer, pseudoclaude.chat.Chat>
M.chats = {}

--- A new chat's state.
---@param n integer
---@return pseudoclaude.chat.Chat
local function fresh(n)
  return {
    chat = n,
    state = {
      busy = false,
      state = "idle",
      phase = "idle",
      saved = true,
      save_error = nil,
      session = nil,
      provider = nil,
      model = nil,
    },
    streaming = false,
    restore_gen = 0,
    marks_stale = false,
    names = {},
    live = {},
    turn_files = {},
    file_marks = {},
    asks = {},
    notified = false,
  }
end

--- The chat the user works in: the one the core's current chat is.
M.current = 1
---@type pseudoclaude.chat.Chat
local active = fresh(1)
M.chats[1] = active

setmetatable(M, {
  __index = function(_, k)
    if PER_CHAT[k] then
      return active[k]
    end
  end,
  __newindex = function(t, k, v)
    if PER_CHAT[k] then
      active[k] = v
    else
      rawset(t, k, v)
    end
  end,
})

--- Chat `n`'s state (made when first asked).
---@param n integer
---@return pseudoclaude.chat.Chat
function M.get(n)
  local c = M.chats[n]
  if not c then
    c = fresh(n)
    M.chats[n] = c
  end
  return c
end

--- Makes chat `n` the active one and returns the one that was.
---@param n integer
---@return integer before
function M.use(n)
  local before = active.chat
  active = M.get(n)
  return before
end

--- Runs `fn(...)` with chat `n` active, then the one that was (also when `fn` raises).
---@param n integer?
function M.with(n, fn, ...)
  if n == nil or n == active.chat then
    return fn(...)
  end
  local before = M.use(n)
  local res = vim.F.pack_len(pcall(fn, ...))
  M.use(M.chats[before] and before or M.current)
  if not res[1] then
    error(res[2], 0)
  end
  return unpack(res, 2, res.n)
end

--- `fn` made to run with the chat active now (for callbacks run later: a scheduled slice, an answer).
---@generic F: function
---@param fn F
---@return F
function M.bind(fn)
  local n = active.chat
  return function(...)
    return M.with(n, fn, ...)
  end
end

--- Forgets chat `n` (closed); the current chat becomes `to` when it was `n`.
---@param n integer
---@param to integer
function M.forget(n, to)
  M.chats[n] = nil
  if M.current == n then
    M.current = to
  end
  if active.chat == n then
    active = M.get(M.current)
  end
end

M.host_ready = false
--- Resumes started and not yet finished, by ticket (tickets are the core's, one count for every chat).
---@type table<integer, {id: string, opts: pseudoclaude.ResumeOpts, started: integer}>
M.resumes = {}
--- Messages per slice of a restore and bytes of text per slice: one slice is one short main-loop step.
M.SLICE_MESSAGES = 150
M.SLICE_BYTES = 32 * 1024

M.ns = vim.api.nvim_create_namespace("pseudoclaude_chat")
--- One mark at the start of each message of the history, in order: the Nth mark is message N (`chat.message_at`).
M.msg_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_messages")

function M.workspace()
  return require("pseudoclaude.config").workspace()
end

function M.refresh_status()
  local ok, st = pcall(require("pseudoclaude.core").call, "agent_status", active.chat)
  if ok then
    M.state.provider, M.state.model = st.provider, st.model
    M.state.session = st.session
    M.state.state = st.state or M.state.state
    M.state.usage, M.state.cost = st.usage, st.cost
    if st.unsaved then
      M.state.saved = false
    end
  end
end

M.live_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_live_calls")

M.jump_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_jump")

M.files_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_files")

return M
