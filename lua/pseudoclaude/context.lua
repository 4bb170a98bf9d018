--- Context from the editor for the next message: a range of a file buffer (`:[range]PseudoChat`,
--- `<Plug>(PseudoChatSelection)`), and what the message mentions: `@path` (a workspace file, read by the core within
--- the workspace), `@SERVER:URI` (an MCP server's resource, read by the core from the server), `#buffer` (the current file buffer's text, unsaved changes included) and `#diagnostics` (its
--- `vim.diagnostic` entries). The core wraps each one into the message (`src/attachment.rs`).

local M = {}
local H = {}

---@class pseudoclaude.Attachment
---@field kind "selection"|"buffer"|"diagnostics"|"file"|"resource"
---@field path string Relative to the workspace when inside it; `SERVER:URI` for a resource.
---@field lines integer[]? `{first, last}` of a selection.
---@field filetype string?
---@field text string? Absent for a file (the core reads it).
---@field modified boolean?

--- Attachments waiting for the next message.
---@type pseudoclaude.Attachment[]
H.pending = {}
--- The file buffer the user was in last (what `#buffer` and `#diagnostics` mean from the input window).
---@type integer?
H.origin = nil

--- Remembers buffer `b` as the one `#buffer` means, when it is a file buffer; follows the user from now on.
---@param b integer
function M.track(b)
  if H.is_file_buf(b) then
    H.origin = b
  end
  if not H.tracking then
    H.tracking = true
    vim.api.nvim_create_autocmd("BufEnter", {
      group = vim.api.nvim_create_augroup("pseudoclaude_context", { clear = true }),
      callback = function(ev)
        if H.is_file_buf(ev.buf) then
          H.origin = ev.buf
        end
      end,
    })
  end
end

--- The file buffer `#buffer` means now, or nil.
---@return integer?
function M.origin()
  if H.origin and vim.api.nvim_buf_is_valid(H.origin) and vim.api.nvim_buf_is_loaded(H.origin) then
    return H.origin
  end
  return nil
end

--- Attaches lines `first`..`last` of buffer `b` (0: the current one) to the next message.
---@param b integer
---@param first integer
---@param last integer
function M.add_range(b, first, last)
  b = b == 0 and vim.api.nvim_get_current_buf() or b
  if not H.is_file_buf(b) then
    error("pseudoclaude: only lines of a file buffer can be attached (this is " .. H.describe(b) .. ")", 0)
  end
  local lines = vim.api.nvim_buf_get_lines(b, first - 1, last, false)
  H.pending[#H.pending + 1] = {
    kind = "selection",
    path = H.rel(b),
    lines = { first, last },
    filetype = vim.bo[b].filetype,
    text = table.concat(lines, "\n") .. "\n",
  }
  M.track(b)
end

--- The attachments waiting for the next message (a copy).
---@return pseudoclaude.Attachment[]
function M.pending()
  return vim.deepcopy(H.pending)
end

--- Forgets the waiting attachments (they were sent).
function M.clear()
  H.pending = {}
end

--- The attachments of a message with `text`: the waiting ones, then what it mentions. Raises, naming the mention,
--- when one cannot be attached (nothing is sent then).
---@param text string
---@return pseudoclaude.Attachment[]
function M.collect(text)
  local out = vim.deepcopy(H.pending)
  local padded = "\n" .. text .. "\n"
  for _, tag in ipairs({ "buffer", "diagnostics" }) do
    if padded:find("%s#" .. tag .. "[%s%p]") then
      local b = M.origin()
      if not b then
        error(("pseudoclaude: #%s: there is no file buffer to attach (open a file first)"):format(tag), 0)
      end
      out[#out + 1] = tag == "buffer" and H.buffer(b) or H.diagnostics(b)
    end
  end
  for raw in padded:gmatch("%s@([^%s]+)") do
    local path = H.existing(raw) or H.existing((raw:gsub("[%.,;:!?%)%]}'\"]+$", "")))
    local resource = not path and H.resource(raw)
    if path then
      out[#out + 1] = { kind = "file", path = path }
    elseif resource then
      out[#out + 1] = { kind = "resource", path = resource }
    else
      vim.notify(
        ("pseudoclaude: @%s is not a file of the workspace nor SERVER:URI of an MCP server: sent as text"):format(raw),
        vim.log.levels.WARN
      )
    end
  end
  return out
end

--- 'omnifunc' and 'completefunc' of the input buffer: completes the workspace path after an `@`, one folder at a time,
--- the running MCP servers' resources as `SERVER:URI` (so nvim-cmp's and blink.cmp's omni sources offer them too), and
--- an ACP agent's slash commands after a `/` that starts the message.
---@param findstart integer
---@param base string
---@return integer|table
function M.complete(findstart, base)
  local slash = H.slash_commands(findstart, base)
  if slash then
    return slash
  end
  if findstart == 1 then
    local line = vim.api.nvim_get_current_line():sub(1, vim.api.nvim_win_get_cursor(0)[2])
    local at = line:match(".*()@[^%s@]*$")
    if not at or (at > 1 and not line:sub(at - 1, at - 1):match("%s")) then
      return -3
    end
    return at -- the byte after `@`, 0-based
  end
  local items = {}
  -- the servers' lists as the core last fetched them: nothing is asked of a server here
  local ok, resources = pcall(require("pseudoclaude.core").call, "agent_mcp_resources")
  for _, r in ipairs(ok and resources or {}) do
    local word = r.server .. ":" .. r.uri
    if word:sub(1, #base) == base then
      local info = H.nonnil(r.description) or H.nonnil(r.name)
      items[#items + 1] = { word = word, menu = r.server, kind = "resource", info = info }
    end
  end
  if base:find(":", 1, true) then
    return items
  end
  local dir, prefix = base:match("^(.*/)([^/]*)$")
  dir, prefix = dir or "", prefix or base
  local root = require("pseudoclaude.config").workspace()
  for name, type in vim.fs.dir(root .. "/" .. dir) do
    if name:sub(1, #prefix) == prefix and name ~= ".git" and name ~= ".PseudoClaude" then
      local is_dir = type == "directory"
      items[#items + 1] = { word = dir .. name .. (is_dir and "/" or ""), menu = is_dir and "dir" or "file" }
    end
  end
  table.sort(items, function(a, b)
    return a.word < b.word
  end)
  return items
end

-- Helpers ==============================================================================================================

--- The completion of an ACP agent's slash command (`/name`) at the start of the message's first line, or nil when the
--- cursor is not there or the chat's agent has none (as the agent last listed them: nothing is asked of it here).
---@param findstart integer
---@param base string
---@return integer|table|nil
function H.slash_commands(findstart, base)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local before = vim.api.nvim_get_current_line():sub(1, col)
  if findstart == 1 and (row ~= 1 or not before:match("^/%S*$")) then
    return nil
  end
  if findstart == 0 and base:sub(1, 1) ~= "/" then
    return nil
  end
  local chat = vim.b.pseudoclaude_chat
  -- the chat's agent as the core holds it (an error: no host yet, so no agent)
  local ok, offers = pcall(require("pseudoclaude.core").call, "agent_offers", chat)
  local commands = chat and ok and offers.commands or {}
  if #commands == 0 then
    return nil
  end
  if findstart == 1 then
    return 0
  end
  local items = {}
  for _, c in ipairs(commands) do
    local word = "/" .. c.name
    if word:sub(1, #base) == base then
      local desc = c.description ~= vim.NIL and c.description or nil
      items[#items + 1] = { word = word, menu = "command", info = desc }
    end
  end
  return items
end

--- `SERVER:URI` when `raw` names a configured MCP server (a listed resource's URI as listed, else without the
--- punctuation that ends a sentence), or nil.
---@param raw string
---@return string?
function H.resource(raw)
  local server, uri = raw:match("^([%w_.-]+):(.+)$")
  if not server then
    return nil
  end
  local known = false
  local ok_status, servers = pcall(require("pseudoclaude.core").call, "agent_mcp_status")
  for _, s in ipairs(ok_status and servers or {}) do
    known = known or s.name == server
  end
  if not known then
    return nil
  end
  local trimmed = uri:gsub("[%.,;:!?%)%]}'\"]+$", "")
  local ok, resources = pcall(require("pseudoclaude.core").call, "agent_mcp_resources")
  for _, r in ipairs(ok and resources or {}) do
    if r.server == server and r.uri == uri then
      return server .. ":" .. uri
    end
  end
  return server .. ":" .. (trimmed ~= "" and trimmed or uri)
end

---@param v any
---@return any
function H.nonnil(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

function H.is_file_buf(b)
  return vim.api.nvim_buf_is_valid(b)
    and vim.bo[b].buftype == ""
    and not vim.api.nvim_buf_get_name(b):match("^pseudoclaude://")
end

function H.describe(b)
  local name = vim.api.nvim_buf_get_name(b)
  return name ~= "" and name or ("buffer " .. b)
end

--- The buffer's file relative to the workspace (as the model's tools name it), else its full name.
function H.rel(b)
  local name = vim.api.nvim_buf_get_name(b)
  if name == "" then
    return "[No Name " .. b .. "]"
  end
  local root = vim.fs.normalize(require("pseudoclaude.config").workspace())
  local full = vim.fs.normalize(vim.fn.fnamemodify(name, ":p"))
  local real_root = vim.uv.fs_realpath(root) or root
  local real = vim.uv.fs_realpath(full) or full
  for _, pair in ipairs({ { full, root }, { real, real_root } }) do
    local p, r = pair[1], pair[2]
    if p:sub(1, #r + 1) == r .. "/" then
      return p:sub(#r + 2)
    end
  end
  return full
end

function H.buffer(b)
  local lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
  return {
    kind = "buffer",
    path = H.rel(b),
    filetype = vim.bo[b].filetype,
    text = table.concat(lines, "\n") .. "\n",
    modified = vim.bo[b].modified,
  }
end

function H.diagnostics(b)
  local items = vim.diagnostic.get(b)
  table.sort(items, function(x, y)
    return x.lnum < y.lnum or (x.lnum == y.lnum and x.col < y.col)
  end)
  local lines = {}
  for _, d in ipairs(items) do
    local source = d.source and (" [" .. d.source .. "]") or ""
    local severity = vim.diagnostic.severity[d.severity] or "?"
    lines[#lines + 1] = ("%d:%d %s%s: %s"):format(d.lnum + 1, d.col + 1, severity, source, (d.message:gsub("\n", " ")))
  end
  return {
    kind = "diagnostics",
    path = H.rel(b),
    filetype = vim.bo[b].filetype,
    text = #lines == 0 and "(no diagnostics)\n" or table.concat(lines, "\n") .. "\n",
  }
end

--- `raw` as a workspace-relative path when it names a regular file, else nil.
function H.existing(raw)
  if raw == "" then
    return nil
  end
  local root = require("pseudoclaude.config").workspace()
  local full = raw:sub(1, 1) == "/" and raw or (root .. "/" .. raw)
  local st = vim.uv.fs_stat(full)
  return (st and st.type == "file") and raw or nil
end

return M
