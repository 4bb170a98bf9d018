--- How a conversation reads on screen: the one renderer of the agent buffer and the picker's preview, so the
--- preview shows a session exactly as the agent buffer will. Pure: messages in, lines and marks out.
---
--- Format: a header line per speaker ("## You", "## Agent", "## Reminder to the model"), the text as it is, each
--- tool call on one line (`▸ read_file {"path":"a.rs"}`), each result on one line (`  ✓ read_file: first line (N
--- lines)`, `✗` for an error).

local M = {}
local H = {}

--- Kinds of marked lines; callers map them to their highlight groups.
---@alias pseudoclaude.TranscriptKind "you"|"agent"|"reminder"|"call"|"result"|"error"|"more"

---@class pseudoclaude.TranscriptOpts
---@field width integer? Cut call and result lines to this many characters (default 100).
---@field max_text_lines integer? Show at most this many lines of one message's text.

--- Renders `messages` (the log's shape: `role`, `content`, `tool_calls`, `tool_result`).
---@param messages table[]
---@param opts pseudoclaude.TranscriptOpts?
---@return string[] lines
---@return {line: integer, kind: pseudoclaude.TranscriptKind}[] marks 0-based line numbers
function M.render(messages, opts)
  opts = opts or {}
  local lines, marks = {}, {}
  local function add(text, kind)
    lines[#lines + 1] = text
    if kind then
      marks[#marks + 1] = { line = #lines - 1, kind = kind }
    end
  end
  local names, speaker = {}, nil
  for _, m in ipairs(messages) do
    local tr = M.nonnil(m.tool_result)
    if tr then
      add(
        M.result_line(names[tr.tool_call_id] or "tool", tr.content or "", tr.is_error, opts.width),
        tr.is_error and "error" or "result"
      )
    else
      local header, kind = M.header_for(m)
      if header ~= speaker then
        if #lines > 0 then
          add("")
        end
        add(header, kind)
        speaker = header
      end
      H.add_text(add, m.content or "", opts.max_text_lines)
      for _, c in ipairs(M.nonnil(m.tool_calls) or {}) do
        names[c.id] = c.name
        add(M.call_line(c.name, c.arguments, opts.width), "call")
      end
    end
  end
  return lines, marks
end

--- The header of a message's speaker, and its kind.
---@param m table
---@return string header
---@return pseudoclaude.TranscriptKind kind
function M.header_for(m)
  if m.role == "user" then
    if (m.content or ""):sub(1, #M.REMINDER_PREFIX) == M.REMINDER_PREFIX then
      return "## Reminder to the model", "reminder"
    end
    return "## You", "you"
  end
  return "## Agent", "agent"
end

--- The prefix of the stale-session reminder (`src/agent/mod.rs`, STALE_REMINDER_PREFIX).
M.REMINDER_PREFIX = "[Session resumed]"

--- `▸ name {args}` on one line.
---@param name string
---@param args any
---@param width integer?
---@return string
function M.call_line(name, args, width)
  return H.cut(("▸ %s %s"):format(name, H.json(M.nonnil(args))), width or 100)
end

--- `  ✓ name: first line (N lines)` (or `✗` for an error) on one line.
---@param name string
---@param content string
---@param is_error boolean?
---@param width integer?
---@return string
function M.result_line(name, content, is_error, width)
  local n = select(2, content:gsub("\n", "")) + 1
  local more = n > 1 and (" (%d lines)"):format(n) or ""
  local head = ("  %s %s: "):format(is_error and "✗" or "✓", name)
  local first = vim.trim(content:match("^%s*([^\n]*)") or "")
  return head .. H.cut(first, math.max((width or 100) - #head - #more, 10)) .. more
end

--- nil for nil and vim.NIL (what a JSON null becomes).
function M.nonnil(v)
  if v == nil or v == vim.NIL then
    return nil
  end
  return v
end

-- Helpers ==============================================================================================================

function H.add_text(add, text, max)
  if text == "" then
    return
  end
  local parts = vim.split(text, "\n", { plain = true })
  for i, l in ipairs(parts) do
    if max and i > max then
      add(("… %d more lines"):format(#parts - max), "more")
      return
    end
    add(l)
  end
end

--- `s` cut to at most `max` characters, with "…" when cut.
function H.cut(s, max)
  if vim.fn.strchars(s) <= max then
    return s
  end
  return vim.fn.strcharpart(s, 0, math.max(max - 1, 1)) .. "…"
end

--- Compact JSON with sorted keys (Lua tables have no order), `/` unescaped; `{}` for nothing or an empty table.
function H.json(v)
  if v == nil or (type(v) == "table" and next(v) == nil) then
    return "{}"
  end
  if type(v) ~= "table" then
    local ok, s = pcall(vim.json.encode, v)
    return ok and (s:gsub("\\/", "/")) or tostring(v)
  end
  local parts = {}
  if vim.islist(v) then
    for i, x in ipairs(v) do
      parts[i] = H.json(x)
    end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys = vim.tbl_keys(v)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for i, k in ipairs(keys) do
    parts[i] = H.json(tostring(k)) .. ":" .. H.json(v[k])
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

return M
