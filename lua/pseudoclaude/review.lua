--- The review of a write or an edit: the file as it is and the proposed text side by side in `diff` mode, in a tab
--- of their own (`]c`/`[c` move between the changes as in any diff). Keys decide the change block under the cursor
--- (`keys.accept_hunk`, `keys.reject_hunk`) or all those still undecided (`keys.accept_all`, `keys.reject_all`); once
--- each is decided, the tab closes and `done` gets the accepted blocks (1-based, in the core's order). The blocks are
--- the core's (`change.hunks`, `src/tools/diff.rs`), so what is accepted here is exactly what gets written.

local M = {}
local H = {}

H.ns = vim.api.nvim_create_namespace("pseudoclaude_review")

-- The change and its blocks are the core's types, declared once in types.lua (`pseudoclaude.ProposedChange`,
-- `pseudoclaude.Hunk`).

---@class pseudoclaude.Review
---@field tab integer
---@field prev_win integer
---@field old_buf integer
---@field new_buf integer
---@field old_win integer
---@field new_win integer
---@field change pseudoclaude.ProposedChange
---@field decisions (boolean|nil)[]
---@field done fun(accepted: integer[])?

--- The review open now, if any (one approval is asked at a time).
---@type pseudoclaude.Review?
M.current = nil

--- Opens the change in a new tab, side by side in diff mode; the focus stays there.
---@param change pseudoclaude.ProposedChange
---@param title string
---@return pseudoclaude.Review
function M.open(change, title)
  M.close()
  -- the user may be typing in the input window: the review is read and moved around in Normal mode
  vim.cmd("stopinsert")
  local prev_win = vim.api.nvim_get_current_win()
  local ft = vim.filetype.match({ filename = change.path }) or ""
  local function buf(name, text)
    local b = vim.api.nvim_create_buf(false, true)
    local lines = vim.split(text, "\n", { plain = true })
    if lines[#lines] == "" then
      lines[#lines] = nil
    end
    vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
    pcall(vim.api.nvim_buf_set_name, b, name)
    vim.bo[b].buftype = "nofile"
    vim.bo[b].bufhidden = "wipe"
    vim.bo[b].swapfile = false
    vim.bo[b].modifiable = false
    vim.bo[b].filetype = ft
    return b
  end
  local id = vim.uv.hrtime()
  local old_buf = buf(("pseudoclaude://review/%d/now/%s"):format(id, title), change.old)
  local new_buf = buf(("pseudoclaude://review/%d/proposed/%s"):format(id, title), change.new)
  vim.cmd("tabnew")
  local tab = vim.api.nvim_get_current_tabpage()
  local scratch = vim.api.nvim_get_current_buf()
  local old_win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(old_win, old_buf)
  pcall(vim.api.nvim_buf_delete, scratch, { force = true })
  vim.cmd("rightbelow vsplit")
  local new_win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(new_win, new_buf)
  for _, w in ipairs({ old_win, new_win }) do
    vim.api.nvim_win_call(w, function()
      vim.cmd("diffthis")
    end)
    vim.wo[w].foldenable = false
  end
  vim.wo[old_win].winbar = " now: " .. title:gsub("%%", "%%%%")
  vim.wo[new_win].winbar = " proposed: " .. title:gsub("%%", "%%%%")
  ---@type pseudoclaude.Review
  local r = {
    tab = tab,
    prev_win = prev_win,
    old_buf = old_buf,
    new_buf = new_buf,
    old_win = old_win,
    new_win = new_win,
    change = change,
    decisions = {},
  }
  M.current = r
  H.draw(r)
  return r
end

--- Lets the user decide block by block with the keys; `done(accepted)` once all are decided (or the tab is closed:
--- the undecided ones are rejected).
---@param r pseudoclaude.Review
---@param done fun(accepted: integer[])
function M.start(r, done)
  r.done = done
  local keys = require("pseudoclaude.config").get().keys
  for _, b in ipairs({ r.old_buf, r.new_buf }) do
    local function map(lhs, fn, desc)
      if lhs then
        vim.keymap.set(
          "n",
          lhs,
          fn,
          { buffer = b, nowait = true, silent = true, desc = "pseudoclaude review: " .. desc }
        )
      end
    end
    map(keys.accept_hunk, function()
      M.decide(r, M.hunk_at_cursor(r), true)
    end, "accept the change under the cursor")
    map(keys.reject_hunk, function()
      M.decide(r, M.hunk_at_cursor(r), false)
    end, "reject the change under the cursor")
    map(keys.accept_all, function()
      M.decide_rest(r, true)
    end, "accept every undecided change")
    map(keys.reject_all, function()
      M.decide_rest(r, false)
    end, "reject every undecided change")
    vim.api.nvim_create_autocmd("BufWipeout", {
      buffer = b,
      once = true,
      callback = function()
        vim.schedule(function()
          M.finish(r)
        end)
      end,
    })
  end
  if vim.api.nvim_win_is_valid(r.new_win) then
    vim.api.nvim_set_current_win(r.new_win)
    H.goto_hunk(r, 1)
  end
end

--- The block under the cursor (the nearest one), in either window.
---@param r pseudoclaude.Review
---@return integer
function M.hunk_at_cursor(r)
  local row = vim.api.nvim_win_get_cursor(0)[1]
  local old_side = vim.api.nvim_get_current_buf() == r.old_buf
  local best, best_d = 1, math.huge
  for k, h in ipairs(r.change.hunks) do
    local s, n = h.new_start, h.new_count
    if old_side then
      s, n = h.old_start, h.old_count
    end
    local last = s + math.max(n, 1) - 1
    local d = row < s and s - row or (row > last and row - last or 0)
    if d < best_d then
      best, best_d = k, d
    end
  end
  return best
end

--- Decides block `k`, then moves to the next undecided one, or finishes when none is left.
---@param r pseudoclaude.Review
---@param k integer
---@param accept boolean
function M.decide(r, k, accept)
  r.decisions[k] = accept
  H.draw(r)
  local n = #r.change.hunks
  for step = 1, n do
    local j = (k + step - 1) % n + 1
    if r.decisions[j] == nil then
      return H.goto_hunk(r, j)
    end
  end
  M.finish(r)
end

--- Decides every undecided block and finishes.
---@param r pseudoclaude.Review
---@param accept boolean
function M.decide_rest(r, accept)
  for k = 1, #r.change.hunks do
    if r.decisions[k] == nil then
      r.decisions[k] = accept
    end
  end
  M.finish(r)
end

--- Closes the review and reports the accepted blocks (once).
---@param r pseudoclaude.Review
function M.finish(r)
  local done = r.done
  r.done = nil
  M.close(r)
  if done then
    local accepted = {}
    for k = 1, #r.change.hunks do
      if r.decisions[k] == true then
        accepted[#accepted + 1] = k
      end
    end
    done(accepted)
  end
end

--- Closes the review's tab (the current review when `r` is nil) and goes back where the user was.
---@param r pseudoclaude.Review?
function M.close(r)
  r = r or M.current
  if not r then
    return
  end
  if M.current == r then
    M.current = nil
  end
  if vim.api.nvim_tabpage_is_valid(r.tab) and #vim.api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd, vim.api.nvim_tabpage_get_number(r.tab) .. "tabclose!")
  end
  for _, b in ipairs({ r.old_buf, r.new_buf }) do
    if vim.api.nvim_buf_is_valid(b) then
      pcall(vim.api.nvim_buf_delete, b, { force = true })
    end
  end
  if vim.api.nvim_win_is_valid(r.prev_win) then
    vim.api.nvim_set_current_win(r.prev_win)
  end
end

-- Helpers ==============================================================================================================

--- Each block's state at its first line in the proposed window: `change 2/3 · a accept · r reject`, or its decision.
function H.draw(r)
  if not vim.api.nvim_buf_is_valid(r.new_buf) then
    return
  end
  vim.api.nvim_buf_clear_namespace(r.new_buf, H.ns, 0, -1)
  local keys = require("pseudoclaude.config").get().keys
  local n = #r.change.hunks
  local last = vim.api.nvim_buf_line_count(r.new_buf)
  for k, h in ipairs(r.change.hunks) do
    local d = r.decisions[k]
    local text, group
    if d == true then
      text, group = ("✓ change %d/%d accepted"):format(k, n), "DiagnosticOk"
    elseif d == false then
      text, group = ("✗ change %d/%d rejected"):format(k, n), "DiagnosticError"
    else
      text, group =
        ("change %d/%d · %s accept · %s reject"):format(k, n, keys.accept_hunk or "-", keys.reject_hunk or "-"),
        "DiagnosticInfo"
    end
    local row = math.min(math.max(h.new_start, 1), math.max(last, 1)) - 1
    vim.api.nvim_buf_set_extmark(r.new_buf, H.ns, row, 0, { virt_text = { { "  " .. text, group } } })
  end
end

function H.goto_hunk(r, k)
  local h = r.change.hunks[k]
  if not h then
    return
  end
  local win = vim.api.nvim_get_current_win()
  local b = vim.api.nvim_win_get_buf(win)
  local row = b == r.old_buf and h.old_start or h.new_start
  row = math.min(math.max(row, 1), vim.api.nvim_buf_line_count(b))
  vim.api.nvim_win_set_cursor(win, { row, 0 })
end

return M
