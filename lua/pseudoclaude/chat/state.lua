--- The agent buffer's state, shared by the controller (`chat.lua`) and its parts in `chat/`: the buffers and
--- windows, what the winbar shows, what the renderer needs to go on drawing, the resumes in flight.
---
--- Architecture invariant: data lives here, behaviour in the modules that use it; nothing here draws.

local M = {}

--- The transcript and input buffers and their windows (nil until the chat is first opened, or once closed).
---@type integer?, integer?, integer?, integer?
M.buf, M.input_buf, M.win, M.input_win = nil, nil, nil, nil

---@type pseudoclaude.chat.Status
M.state = { busy = false, phase = "idle", saved = true, save_error = nil, session = nil, provider = nil, model = nil }
M.host_ready = false
--- An answer is streaming into the last line.
M.streaming = false
--- The last message drawn (the log's shape), for the renderer's header rule; nil at the top of the buffer.
M.prev = nil
--- Resumes started and not yet finished, by ticket.
---@type table<integer, {id: string, opts: pseudoclaude.ResumeOpts, started: integer}>
M.resumes = {}
--- Bumped by each restore: slices of an older one stop drawing.
M.restore_gen = 0
--- Messages per slice of a restore and bytes of text per slice: one slice is one short main-loop step.
M.SLICE_MESSAGES = 150
M.SLICE_BYTES = 32 * 1024

M.ns = vim.api.nvim_create_namespace("pseudoclaude_chat")
--- One mark at the start of each message of the history, in order: the Nth mark is message N (`chat.message_at`).
M.msg_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_messages")
--- The history was replaced (compaction): the marks no longer number it.
M.marks_stale = false
--- The answer streaming now has its mark already (placed when it began): `{mark, has_text, thought}` (`thought`: its
--- thinking is drawn above the text row).
---@type {mark: integer?, has_text: boolean, thought: boolean?}?
M.open_block = nil
--- The thinking streaming now: the row of its line and its text so far (nil when none).
---@type {row: integer, text: string}?
M.thinking = nil

function M.workspace()
  return require("pseudoclaude.config").workspace()
end

function M.refresh_status()
  local ok, st = pcall(require("pseudoclaude.core").call, "agent_status")
  if ok then
    M.state.provider, M.state.model = st.provider, st.model
    M.state.session = st.session
    M.state.usage, M.state.cost = st.usage, st.cost
    if st.unsaved then
      M.state.saved = false
    end
  end
end

M.names = {}

--- Where a resume with `at` put the cursor: an extmark on the message's first line (it moves down as older slices
--- are drawn above it) and the row the cursor was last put on.
---@type {mark: integer, row: integer}?
M.jump = nil
M.jump_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_jump")

--- Files the agent created or changed in the running turn, in order.
---@type {rel: string, path: string, outcome: string}[]
M.turn_files = {}
M.files_ns = vim.api.nvim_create_namespace("pseudoclaude_chat_files")
--- The file of each line of a turn's file list, by extmark id.
---@type table<integer, string>
M.file_marks = {}

return M
