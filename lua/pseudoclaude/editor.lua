--- The agent's writes as the editor sees them: before `write_file` or `edit_file` writes a file, the core asks
--- whether a loaded buffer holds it with unsaved changes (then the write is refused); right before the write it asks
--- again and the buffer is held (not modifiable) until the core says the write is over, when an unmodified buffer is
--- reloaded in place: only the changed lines are replaced, in one undo step, so the view, the marks outside the change
--- and the undo history stay. Everything here runs on the main loop in a few microseconds per buffer: no waiting.

local M = {}
local H = {}

--- How long a buffer stays held when the core never says the write is over (it always does; this is a safety net).
M.HOLD_MS = 10000

--- Buffers held for a write in flight, by real path: `{buf, modifiable}`.
---@type table<string, {buf: integer, modifiable: boolean}>
H.held = {}

--- The loaded buffer of a normal file whose real path is `path`, or nil.
---@param path string
---@return integer?
function M.find_buf(path)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == "" then
      local name = vim.api.nvim_buf_get_name(b)
      if name ~= "" and (name == path or vim.uv.fs_realpath(name) == path) then
        return b
      end
    end
  end
  return nil
end

--- Answers the core's `buffer_check` for `m.path`; with `m.hold`, an unmodified buffer is held for the write.
---@param m {id: integer, path: string, rel: string, hold: boolean}
function M.on_buffer_check(m)
  local b = M.find_buf(m.path)
  local state = "none"
  if b then
    state = vim.bo[b].modified and "modified" or "unmodified"
  end
  if b and state == "unmodified" and m.hold then
    H.hold(m.path, b)
  end
  local ok, err = pcall(require("pseudoclaude.core").call, "agent_buffer_state", m.id, state)
  if not ok then
    -- the core gave up waiting: no write follows
    H.release(m.path)
    require("pseudoclaude.errors").report(err, vim.log.levels.WARN)
  end
end

--- Answers the core's `buffer_read` for `m.path` (an ACP agent's `fs/read_text_file`): the loaded buffer's text as
--- `:w` would write it (unsaved changes included, the file's line endings), or nil when no buffer holds the file.
---@param m {id: integer, path: string}
function M.on_buffer_read(m)
  local b = M.find_buf(m.path)
  local text = nil
  if b then
    local nl = vim.bo[b].fileformat == "dos" and "\r\n" or "\n"
    local lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    text = table.concat(lines, nl)
    local eol = vim.bo[b].eol or (vim.bo[b].fixeol and not vim.bo[b].binary)
    if eol and not (#lines == 1 and lines[1] == "") then
      text = text .. nl
    end
  end
  local ok, err = pcall(require("pseudoclaude.core").call, "agent_buffer_text", m.id, text)
  if not ok then
    -- the core gave up waiting and read the disk
    require("pseudoclaude.errors").report(err, vim.log.levels.WARN)
  end
end

--- The write asked about is over: release the buffer and show the new text in it.
---@param m {path: string, rel: string, outcome: "created"|"changed"|"failed"}
function M.on_written(m)
  local held = H.held[m.path]
  H.release(m.path)
  if m.outcome == "failed" then
    return
  end
  local b = (held and vim.api.nvim_buf_is_valid(held.buf)) and held.buf or M.find_buf(m.path)
  if b and vim.api.nvim_buf_is_loaded(b) then
    if vim.bo[b].modified then
      vim.notify(
        ("pseudoclaude: the agent wrote %s, which has unsaved changes in a buffer: it was not reloaded"):format(m.rel),
        vim.log.levels.WARN
      )
    else
      M.reload(b, m.path)
    end
  end
end

--- Shows the file's text in buffer `b` as one undo step: only the lines that differ are replaced.
---@param b integer
---@param path string
function M.reload(b, path)
  local ok, lines = pcall(vim.fn.readfile, path, "b")
  if not ok then
    return
  end
  local eol = lines[#lines] == ""
  if eol then
    lines[#lines] = nil
  end
  if vim.bo[b].fileformat == "dos" then
    for i, l in ipairs(lines) do
      lines[i] = l:gsub("\r$", "")
    end
  end
  local old = vim.api.nvim_buf_get_lines(b, 0, -1, false)
  local function text(t)
    return #t == 0 and "" or table.concat(t, "\n") .. "\n"
  end
  local hunks = vim.diff(text(old), text(lines), { result_type = "indices", algorithm = "myers" }) --[[@as integer[][] ]]
  -- Bottom up, so the line numbers of the hunks still to apply do not move. All in this one callback: one undo block.
  for i = #hunks, 1, -1 do
    local sa, ca, sb, cb = unpack(hunks[i])
    local first = ca == 0 and sa or sa - 1
    vim.api.nvim_buf_set_lines(b, first, first + ca, false, vim.list_slice(lines, sb, sb + cb - 1))
  end
  vim.bo[b].eol = eol or #lines == 0
  vim.bo[b].modified = false
  H.sync_mtime(b)
end

--- Workspace-relative paths of the buffers with unsaved changes: a rewind or a fork never writes them.
---@return string[]
function M.modified_paths()
  local ws = vim.fs.normalize(require("pseudoclaude.config").workspace())
  local real = vim.uv.fs_realpath(ws) or ws
  local out = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == "" and vim.bo[b].modified then
      local name = vim.api.nvim_buf_get_name(b)
      for _, root in ipairs({ real, ws }) do
        if name:sub(1, #root + 1) == root .. "/" then
          table.insert(out, name:sub(#root + 2))
          break
        end
      end
    end
  end
  return out
end

--- Checks every buffer against its file, as `:checktime` does (after a command that may have changed files).
function M.checktime()
  pcall(vim.cmd, "checktime")
end

-- Helpers ==============================================================================================================

function H.hold(path, b)
  H.held[path] = { buf = b, modifiable = vim.bo[b].modifiable }
  vim.bo[b].modifiable = false
  vim.defer_fn(function()
    if H.held[path] and H.held[path].buf == b then
      H.release(path)
    end
  end, M.HOLD_MS)
end

function H.release(path)
  local held = H.held[path]
  H.held[path] = nil
  if held and vim.api.nvim_buf_is_valid(held.buf) then
    vim.bo[held.buf].modifiable = held.modifiable
  end
end

--- Neovim remembers the file's time when it read it; the buffer now shows the new file, so that time must move too,
--- or the next `:checktime` would offer to reload it and `:w` would warn it changed. `:checktime` stores the new time
--- before it decides what to do, and a FileChangedShell autocmd that chooses nothing makes it do nothing else ('autoread'
--- is off meanwhile: it would reload without asking, one more undo step).
function H.sync_mtime(b)
  local group = vim.api.nvim_create_augroup("pseudoclaude_editor_sync", { clear = true })
  vim.api.nvim_create_autocmd("FileChangedShell", {
    group = group,
    buffer = b,
    callback = function()
      vim.v.fcs_choice = ""
    end,
  })
  vim.api.nvim_buf_call(b, function()
    local own = vim.fn.getbufvar(b, "&l:autoread") -- -1 when the buffer follows the global value
    vim.cmd("setlocal noautoread")
    pcall(vim.cmd, "checktime " .. b)
    if own == -1 then
      vim.cmd("set autoread<")
    else
      vim.bo[b].autoread = own == 1
    end
  end)
  vim.api.nvim_del_augroup_by_id(group)
end

return M
