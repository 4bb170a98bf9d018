--- How a conversation reads on screen: the one renderer of the live agent buffer, a restored one and the picker's
--- preview, so the same history gives the same lines, marks and folds wherever it is shown. Pure: messages in,
--- lines, marks and folds out.
---
--- Format: a blank line and a header line when the speaker changes or after tool results ("## You", "## Agent",
--- "## Reminder to the model"), the model's thinking as one line (`💭 thought for 12 s, 40 lines`) with the thinking
--- under it, indented and folded, the text as it is, each tool call on one line (`▸ read_file {"path":"a.rs"}`; an ACP
--- agent's by its own title, `▸ Write hello.txt`, its input folded under it), each result on one line (`  ✓ read_file: first line (N lines)`, `✗` for an error) with its whole output under it,
--- indented and folded (`<Tab>` opens it). A text longer than `MAX_DISPLAY_BYTES` shows its start and says how
--- much was left out (the model still reads all of it; `src/display.rs` cuts restored messages the same way).

local M = {}
local H = {}

--- Bytes of one message's text (or one tool output) shown; must equal `MAX_DISPLAY_BYTES` in src/display.rs.
M.MAX_DISPLAY_BYTES = 32 * 1024
--- Longest line of a message's text drawn whole; the rest of a longer one is a note (the model reads all of it).
M.MAX_LINE_BYTES = 4 * 1024

--- Kinds of marked lines; callers map them to their highlight groups.
---@alias pseudoclaude.TranscriptKind "you"|"agent"|"reminder"|"call"|"result"|"error"|"more"|"thinking"

---@class pseudoclaude.TranscriptOpts
---@field width integer? Cut call and result lines to this many characters (default 100).
---@field max_text_lines integer? Show at most this many lines of one message's text.
---@field prev table? The message just before the first one (a slice of a longer history): decides its header.
---@field names table<string, string>? Tool names by call id, for results whose calls came before the slice.
---@field first boolean? The first line goes at the very top (no blank line before the first header).

---@class pseudoclaude.Rendered
---@field lines string[]
---@field marks {line: integer, kind: pseudoclaude.TranscriptKind}[] 0-based line numbers
---@field folds {[1]: integer, [2]: integer}[] 0-based, inclusive line ranges to fold (tool outputs)
---@field starts integer[]? 0-based line where each message starts (its header, else its first line; `#lines` for one
--- that drew nothing), filled when present: how a line maps back to its message (`:PseudoFork`)

--- Renders `messages` (the log's shape: `role`, `content`, `tool_calls`, `tool_result`; `cut_bytes` when the text
--- was cut for display).
---@param messages table[]
---@param opts pseudoclaude.TranscriptOpts?
---@return string[] lines
---@return {line: integer, kind: pseudoclaude.TranscriptKind}[] marks
---@return {[1]: integer, [2]: integer}[] folds
---@return integer[] starts 0-based first line of each message
function M.render(messages, opts)
  opts = opts or {}
  local out = { lines = {}, marks = {}, folds = {}, starts = {} } ---@type pseudoclaude.Rendered
  local names = {}
  for k, v in pairs(opts.names or {}) do
    names[k] = v
  end
  local prev = opts.prev
  local first = opts.first ~= false and prev == nil
  for _, m in ipairs(messages) do
    M.add_message(out, m, prev, names, { width = opts.width, max_text_lines = opts.max_text_lines, first = first })
    first = false
    prev = m
  end
  return out.lines, out.marks, out.folds, out.starts
end

--- Appends message `m` to `out`. `prev` is the message before it (nil for the first); `names` maps call ids to
--- tool names and learns the calls of `m`.
---@param out pseudoclaude.Rendered
---@param m table
---@param prev table?
---@param names table<string, string>
---@param opts {width: integer?, max_text_lines: integer?, first: boolean?}
function M.add_message(out, m, prev, names, opts)
  local function add(text, kind)
    out.lines[#out.lines + 1] = text
    if kind then
      out.marks[#out.marks + 1] = { line = #out.lines - 1, kind = kind }
    end
  end
  local function start_here()
    if out.starts then
      out.starts[#out.starts + 1] = #out.lines
    end
  end
  local tr = m.tool_result
  if tr then
    start_here()
    local name = names[tr.tool_call_id] or "tool"
    local content = tr.content or ""
    -- `lines`: the whole output's count, from the core when it cut the output (never counted here in a megabyte)
    local lines = m.lines and m.lines > 0 and m.lines or M.count_lines(content)
    add(M.result_line(name, content, tr.is_error, opts.width, m.cut_bytes, lines), tr.is_error and "error" or "result")
    local body = lines > 1 and M.result_body(content, m.cut_bytes) or nil
    if body then
      local start = #out.lines
      for _, l in ipairs(body) do
        add(l)
      end
      out.folds[#out.folds + 1] = { start, #out.lines - 1 }
    end
    return
  end
  local header, kind = M.header_for(m)
  if M.needs_header(m, prev) then
    if not opts.first then
      add("")
    end
    start_here()
    add(header, kind)
  else
    start_here()
  end
  local thought = M.thinking_text(m.thinking)
  if thought ~= "" then
    local line, body = M.thinking_lines(thought, m.thinking_ms)
    add(line, "thinking")
    local first = #out.lines
    for _, l in ipairs(body) do
      add(l)
    end
    out.folds[#out.folds + 1] = { first, #out.lines - 1 }
  end
  local content = m.content or ""
  if m.role == "user" and content:find("<attachment ", 1, true) then
    H.add_attachments(out, add, content, opts.max_text_lines, m.cut_bytes)
  else
    H.add_text(add, content, opts.max_text_lines, m.cut_bytes)
  end
  for _, c in ipairs(m.tool_calls or {}) do
    names[c.id] = c.name
    add(M.call_line(c.name, c.arguments, opts.width), "call")
    local body = M.call_body(c.name, c.arguments)
    if body then
      local start = #out.lines
      for _, l in ipairs(body) do
        add(l)
      end
      out.folds[#out.folds + 1] = { start, #out.lines - 1 }
    end
  end
  if m.interrupted == true then
    add(M.INTERRUPTED_LINE, "more")
  end
end

--- Whether message `m` starts a block of its own: the first one, a change of speaker, or after tool results (the
--- answer after the tools is never glued to a folded result).
---@param m table
---@param prev table?
---@return boolean
function M.needs_header(m, prev)
  if prev == nil or prev.tool_result then
    return true
  end
  return M.header_for(m) ~= M.header_for(prev)
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

--- The text of a message's thinking blocks (`thinking` of the log: Anthropic's `thinking`, an OpenAI-compatible
--- server's `reasoning`), joined by a blank line; "" when there is none to show (a redacted block has no text).
---@param blocks table[]?
---@return string
function M.thinking_text(blocks)
  local parts = {}
  for _, b in ipairs(blocks or {}) do
    local t = b.thinking
    if type(t) == "string" and t:find("%S") then
      parts[#parts + 1] = vim.trim(t)
    end
  end
  return table.concat(parts, "\n\n")
end

--- The folded line of a thinking (`💭 thought for 12 s, 40 lines`) and the lines under it (indented, cut like a
--- message's text).
---@param text string
---@param ms integer? how long the model thought; nil or 0 when unknown
---@return string line
---@return string[] body
function M.thinking_lines(text, ms)
  local shown, extra = H.cap(text, nil)
  local body = vim.split(shown, "\n", { plain = true })
  local n = M.count_lines(text)
  for i, l in ipairs(body) do
    body[i] = "    " .. l
  end
  if extra > 0 then
    body[#body + 1] = "    " .. H.cut_note(extra)
  end
  return M.thinking_line(n, ms), body
end

--- `💭 thought for 12 s, 40 lines`; `💭 thinking… 3 lines` while it streams (`ms` false).
---@param lines integer
---@param ms integer|false|nil
---@return string
function M.thinking_line(lines, ms)
  local count = ("%d line%s"):format(lines, lines == 1 and "" or "s")
  if ms == false then
    return "💭 thinking… " .. count
  end
  ms = ms or 0
  if ms <= 0 then
    return "💭 thought, " .. count
  end
  local secs = ms < 10000 and ("%.1f"):format(ms / 1000) or tostring(math.floor(ms / 1000 + 0.5))
  return ("💭 thought for %s s, %s"):format(secs, count)
end

--- Under an answer that stopped mid-stream (`interrupted` on the message: the editor died while it streamed).
M.INTERRUPTED_LINE = "[interrupted: the answer stopped here]"

--- The prefix of the stale-session reminder (`src/session/words.rs`, STALE_REMINDER_PREFIX).
M.REMINDER_PREFIX = "[Session resumed]"

--- The parts of an ACP agent's call (`src/acp/chat.rs` `call_arguments`: the agent's `title`, `kind`, raw `input` and
--- `locations`), or nil for a call of ours (an MCP tool's arguments may hold a `title`, never only these keys).
---@param name string
---@param args any
---@return {title: string?, input: any, locations: table[]}?
function M.acp_call(name, args)
  if type(args) ~= "table" or vim.startswith(name, "mcp__") or (args.title == nil and args.kind == nil) then
    return nil
  end
  for k in pairs(args) do
    if not H.ACP_KEYS[k] then
      return nil
    end
  end
  local title = type(args.title) == "string" and args.title:gsub("\r?\n", " ↵ ") or nil
  local locations = type(args.locations) == "table" and vim.islist(args.locations) and args.locations or {}
  return {
    title = title ~= "" and title or nil,
    input = args.input ~= vim.NIL and args.input or nil,
    locations = locations,
  }
end

--- `▸ name {args}` on one line; an ACP agent's call as the agent titles it, with the places it touches that the
--- title does not name (`▸ Write hello.txt`, `▸ edit (src/a.rs:3)`): its input is under it (`call_body`).
---@param name string
---@param args any
---@param width integer?
---@return string
function M.call_line(name, args, width)
  local acp = M.acp_call(name, args)
  if not acp then
    return H.cut(("▸ %s %s"):format(name, H.json(args)), width or 100)
  end
  local title = acp.title or name
  local unnamed = {}
  for _, loc in ipairs(acp.locations) do
    local path = type(loc) == "table" and type(loc.path) == "string" and loc.path or nil
    if path and not title:find(vim.fs.basename(path), 1, true) then
      unnamed[#unnamed + 1] = vim.fn.fnamemodify(path, ":~:.")
        .. (type(loc.line) == "number" and (":" .. loc.line) or "")
    end
  end
  local where = #unnamed > 0 and (" (%s)"):format(table.concat(unnamed, ", ")) or ""
  return H.cut(("▸ %s%s"):format(title, where), width or 100)
end

--- The folded lines under an ACP agent's call line: its input, key by key (a text of several lines under its key),
--- and where it acts; nil for a call of ours (its line shows its arguments) or one with nothing to add.
---@param name string
---@param args any
---@return string[]?
function M.call_body(name, args)
  local acp = M.acp_call(name, args)
  if not acp then
    return nil
  end
  local lines = {}
  local function value(key, v)
    if type(v) == "string" and v:find("\n") then
      lines[#lines + 1] = ("    %s:"):format(key)
      for _, l in ipairs(vim.split((v:gsub("\n$", "")), "\n", { plain = true })) do
        lines[#lines + 1] = "      " .. l
      end
    else
      lines[#lines + 1] = ("    %s: %s"):format(key, type(v) == "string" and v or H.json(v))
    end
  end
  local input = acp.input
  if type(input) == "table" and not vim.islist(input) then
    local keys = vim.tbl_keys(input)
    table.sort(keys, function(a, b)
      return tostring(a) < tostring(b)
    end)
    for _, k in ipairs(keys) do
      value(tostring(k), input[k])
    end
  elseif input ~= nil then
    value("input", input)
  end
  local at = {}
  for _, loc in ipairs(acp.locations) do
    if type(loc) == "table" and type(loc.path) == "string" then
      at[#at + 1] = loc.path .. (type(loc.line) == "number" and (":" .. loc.line) or "")
    end
  end
  if #at > 0 then
    lines[#lines + 1] = "    at: " .. table.concat(at, ", ")
  end
  return #lines > 0 and H.capped_lines(lines) or nil
end

--- An ACP agent's tool call while it runs: its line as `call_line` draws it, a status line
--- (`  ⋯ execute: running: title`) and the last `tail` lines of its output so far, indented as a result's body.
---@param name string
---@param args table?
---@param status string the agent's `pending` or `in_progress`
---@param output string
---@param tail integer
---@param width integer?
---@return string[]
function M.running_call_lines(name, args, status, output, tail, width)
  local lines = {
    M.call_line(name, args, width), -- the agent's title: the status line need not repeat it
    ("  ⋯ %s: %s"):format(name, status == "in_progress" and "running" or status),
  }
  if output:sub(-1) == "\n" then
    output = output:sub(1, -2)
  end
  if output ~= "" then
    local out = vim.split(output, "\n", { plain = true })
    for i = math.max(1, #out - tail + 1), #out do
      lines[#lines + 1] = H.cut("    " .. out[i], M.MAX_LINE_BYTES)
    end
  end
  return lines
end

--- Lines of a tool output as counted everywhere (the result line, its fold): a final newline ends the last line,
--- it does not start another.
---@param content string
---@return integer
function M.count_lines(content)
  if content == "" then
    return 0
  end
  local n = select(2, content:gsub("\n", ""))
  return content:sub(-1) == "\n" and n or n + 1
end

--- `  ✓ name: first line (N lines)` (or `✗` for an error) on one line.
---@param name string
---@param content string
---@param is_error boolean?
---@param width integer?
---@param cut_bytes integer? bytes of the output not shown (the count is then a lower bound)
---@param lines integer? the whole output's lines, when known (an exact count: no `+`)
---@return string
function M.result_line(name, content, is_error, width, cut_bytes, lines)
  local n = lines or M.count_lines(content)
  local more = n > 1 and (" (%d%s lines)"):format(n, not lines and (cut_bytes or 0) > 0 and "+" or "") or ""
  local head = ("  %s %s: "):format(is_error and "✗" or "✓", name)
  local first = vim.trim(content:match("^%s*([^\n]*)") or "")
  return head .. H.cut(first, math.max((width or 100) - #head - #more, 10)) .. more
end

--- The folded lines under a result: its whole output, indented; nil when it has a single line.
---@param content string
---@param cut_bytes integer?
---@return string[]?
function M.result_body(content, cut_bytes)
  -- the capped text decides: a megabyte is never counted here, and whatever was cut is said in a note
  local shown, extra = H.cap(content, cut_bytes)
  if extra == 0 and M.count_lines(shown) <= 1 then
    return nil
  end
  if shown:sub(-1) == "\n" then
    shown = shown:sub(1, -2)
  end
  local body = vim.split(shown, "\n", { plain = true })
  for i, l in ipairs(body) do
    body[i] = "    " .. l
  end
  if extra > 0 then
    body[#body + 1] = "    " .. H.cut_note(extra)
  end
  return body
end

--- A user message's text and the attachments the core wrapped into it (`src/attachment.rs`): the typed text, then
--- each attachment's attributes and body lines (unterminated when the text was cut for display).
---@param content string
---@return string typed
---@return {attrs: table<string, string>, body: string[]}[] attachments
function M.split_attachments(content)
  local lines = vim.split(content, "\n", { plain = true })
  local typed, blocks, cur = {}, {}, nil
  for _, l in ipairs(lines) do
    if cur then
      if l == "</attachment>" then
        cur = nil
      else
        cur.body[#cur.body + 1] = l == "<\\/attachment>" and "</attachment>" or l
      end
    elseif l:match("^<attachment .*>$") then
      local attrs = {}
      for k, v in l:gmatch('(%w+)="([^"]*)"') do
        attrs[k] = v:gsub("&quot;", '"'):gsub("&lt;", "<"):gsub("&amp;", "&")
      end
      cur = { attrs = attrs, body = {} }
      blocks[#blocks + 1] = cur
    elseif #blocks == 0 then
      typed[#typed + 1] = l
    end
  end
  return vim.trim(table.concat(typed, "\n")), blocks
end

--- The one line an attachment folds to: `📎 selection src/a.rs:2-4 (3 lines)`.
---@param a {attrs: table<string, string>, body: string[]}
---@return string
function M.attachment_line(a)
  local at = a.attrs
  local where = (at.path or "?") .. (at.lines and (":" .. at.lines) or "")
  local n = #a.body
  local notes = {}
  if at.error then
    notes[#notes + 1] = "✗ " .. at.error
  else
    notes[#notes + 1] = ("%d line%s"):format(n, n == 1 and "" or "s")
  end
  if at.modified == "true" then
    notes[#notes + 1] = "unsaved"
  end
  if at.spill then
    notes[#notes + 1] = ("%s bytes, the rest in %s"):format(at.bytes or "?", at.spill)
  end
  return ("📎 %s %s (%s)"):format(at.kind or "attachment", where, table.concat(notes, ", "))
end

-- Helpers ==============================================================================================================

--- The keys of an ACP agent's call arguments in our log (`src/acp/chat.rs` `call_arguments`).
H.ACP_KEYS = { title = true, kind = true, input = true, locations = true }

--- `lines` as one message's text is cut (`MAX_DISPLAY_BYTES` in all, `MAX_LINE_BYTES` a line), with a note of the rest.
---@param lines string[]
---@return string[]
function H.capped_lines(lines)
  local out, left = {}, M.MAX_DISPLAY_BYTES
  for i, l in ipairs(lines) do
    if #l > left then
      local rest = #l - left
      for j = i + 1, #lines do
        rest = rest + #lines[j] + 1
      end
      out[#out + 1] = "    " .. H.cut_note(rest)
      return out
    end
    left = left - #l - 1
    H.add_line(function(text)
      out[#out + 1] = text
    end, l)
  end
  return out
end

--- A user message with attachments: the typed text, then one folded line per attachment (its text under it).
function H.add_attachments(out, add, content, max, cut)
  local shown, extra = H.cap(content, cut)
  local typed, blocks = M.split_attachments(shown)
  H.add_text(add, typed, max, nil)
  for _, a in ipairs(blocks) do
    local first = #out.lines
    add(M.attachment_line(a), "call")
    for _, l in ipairs(a.body) do
      add("    " .. l)
    end
    if #a.body > 0 then
      out.folds[#out.folds + 1] = { first, #out.lines - 1 }
    end
  end
  if extra > 0 then
    add(H.cut_note(extra), "more")
  end
end

--- `text` cut to `MAX_DISPLAY_BYTES` (at a character start), and the bytes left out (`cut` already, plus any cut here).
---@param text string
---@param cut integer?
---@return string
---@return integer
function H.cap(text, cut)
  cut = cut or 0
  if #text <= M.MAX_DISPLAY_BYTES then
    return text, cut
  end
  local stop = H.char_boundary(text, M.MAX_DISPLAY_BYTES)
  return text:sub(1, stop), cut + #text - stop
end

--- The largest length <= `max` that ends `text` on a character boundary (UTF-8).
---@param text string
---@param max integer
---@return integer
function H.char_boundary(text, max)
  local stop = max
  while stop > 0 and (text:byte(stop + 1) or 0) >= 0x80 and (text:byte(stop + 1) or 0) < 0xC0 do
    stop = stop - 1
  end
  return stop
end

--- Adds line `l`, cut at `MAX_LINE_BYTES` with a note of what is left out: Neovim measures a wrapped line character
--- by character each time the view moves, so one 32 KiB line made every scroll of the agent buffer cost a
--- millisecond or more.
---@param add fun(text: string, kind: pseudoclaude.TranscriptKind?)
---@param l string
function H.add_line(add, l)
  if #l <= M.MAX_LINE_BYTES then
    return add(l)
  end
  local stop = H.char_boundary(l, M.MAX_LINE_BYTES)
  add(l:sub(1, stop))
  add(("… %d more bytes on this line not shown"):format(#l - stop), "more")
end

---@param bytes integer
---@return string
function H.cut_note(bytes)
  return ("… %d more bytes not shown (the model reads all of it)"):format(bytes)
end

function H.add_text(add, text, max, cut)
  if text == "" then
    return
  end
  local shown, extra = H.cap(text, cut)
  if not shown:find("\n", 1, true) then
    H.add_line(add, shown) -- most messages: one line, no split
    if extra > 0 then
      add(H.cut_note(extra), "more")
    end
    return
  end
  local parts = vim.split(shown, "\n", { plain = true })
  for i, l in ipairs(parts) do
    if max and i > max then
      add(("… %d more lines"):format(#parts - max), "more")
      return
    end
    H.add_line(add, l)
  end
  if extra > 0 then
    add(H.cut_note(extra), "more")
  end
end

--- `s` cut to at most `max` characters, with "…" when cut.
function H.cut(s, max)
  if #s <= max or vim.fn.strchars(s) <= max then
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
