--- The question before a tool writes or runs something: yes / no / always, with the change's diff review
--- (`pseudoclaude.review`) or the command shown while it is asked.

local M = {}
local S = require("pseudoclaude.chat.state")
local V = require("pseudoclaude.chat.view")

--- Shows what a tool wants to do and asks yes / no / always. A write or an edit of a text file opens its diff review
--- first (`pseudoclaude.review`), which stays visible while the question is asked; "Review hunk by hunk" lets the user
--- accept or reject each change block with the review's keys.
---
--- A chat not in sight (its window closed, or in another tab page) does not take the focus: the question waits in the
--- chat, the user is told once, and it is asked when the chat is shown (`chat.show`, `:PseudoChats`, entering its
--- window).
---@param m pseudoclaude.Event an "approval" event
function M.ask_approval(m)
  if not V.visible() then
    table.insert(S.asks, m)
    if not S.notified then
      S.notified = true
      vim.notify(
        ("pseudoclaude: chat %d (%s) waits for your answer: %s %s (show it with :PseudoChats)"):format(
          S.chat,
          S.state.session or "new session",
          m.tool or "a tool",
          m.summary or ""
        ),
        vim.log.levels.WARN
      )
    end
    return
  end
  local change = m.change
  if change and (#change.hunks == 0) then
    change = nil
  end
  local float, review
  if change then
    review = require("pseudoclaude.review").open(change, m.summary)
  else
    float = M.detail_float(m)
  end
  -- the stock vim.ui.select (inputlist) blocks before the screen is redrawn: draw the diff first, so it is what the
  -- user sees while the question waits
  vim.cmd("redraw")
  -- Leaving the sandbox, and a command on a system without one, is decided each time: no "Always".
  local choices = m.always == false and { "Yes", "No" } or { "Yes", "No", "Always (this session)" }
  local by_hunk = "Review hunk by hunk"
  if change and #change.hunks > 1 then
    choices[#choices + 1] = by_hunk
  end
  local answers = { Yes = "yes", No = "no", ["Always (this session)"] = "always" }
  if m.options and #m.options > 0 then
    -- an ACP agent's permission: its options, named as it names them (the core picks the option of that kind)
    local kind_answer = { allow_once = "yes", allow_always = "always", reject_once = "no", reject_always = "no" }
    choices, answers = {}, {}
    for _, o in ipairs(m.options) do
      local a = kind_answer[o.kind]
      if a and not vim.tbl_contains(vim.tbl_values(answers), a) then
        choices[#choices + 1] = o.name
        answers[o.name] = a
      end
    end
  end
  -- the answer comes later, maybe while another chat is drawn: it is this chat's
  local answer = S.bind(function(call, ...)
    local ok, err = pcall(require("pseudoclaude.core").call, call, m.id, ...)
    if not ok then
      require("pseudoclaude.errors").report(err, vim.log.levels.WARN)
    end
    S.state.phase = "running tools"
    S.refresh_status()
    V.redraw_winbar()
  end)
  vim.ui.select(
    choices,
    { prompt = M.prompt(m) },
    S.bind(function(choice)
      if float and vim.api.nvim_win_is_valid(float) then
        vim.api.nvim_win_close(float, true)
      end
      if choice == by_hunk and review then
        S.state.phase = "reviewing"
        V.redraw_winbar()
        return require("pseudoclaude.review").start(
          review,
          S.bind(function(accepted)
            if #accepted == #change.hunks then
              answer("agent_approve", "yes")
            elseif #accepted == 0 then
              answer("agent_approve", "no")
            else
              answer("agent_approve_hunks", accepted)
            end
          end)
        )
      end
      if review then
        require("pseudoclaude.review").close(review)
      end
      answer("agent_approve", answers[choice] or "no")
    end)
  )
end

--- Asks the questions the active chat received while it was not in sight, now that it is.
function M.ask_pending()
  local asks = S.asks
  if #asks == 0 or not V.visible() then
    return
  end
  S.asks, S.notified = {}, false
  for _, m in ipairs(asks) do
    M.ask_approval(m)
  end
end

--- The question: the tool and its summary, what it lifts of the command sandbox, and what the sandbox cannot do here.
---@param m pseudoclaude.Event an "approval" event
---@return string
function M.prompt(m)
  local lifted = m.lifted or {}
  local prompt = ("Allow %s %s"):format(m.tool, m.summary)
  if #lifted > 0 then
    prompt = ("%s WITHOUT %s"):format(prompt, table.concat(lifted, " and "))
  end
  prompt = prompt .. "?"
  local warning = m.warning
  if warning then
    prompt = ("%s [%s]"):format(prompt, warning)
  end
  return prompt
end

--- The floating window showing a command (or a diff that cannot be reviewed) while its approval is asked.
---@return integer? win
function M.detail_float(m)
  local detail = vim.split(m.detail or "", "\n", { plain = true })
  if #detail == 0 or detail[1] == "" then
    return nil
  end
  local b = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(b, 0, -1, false, detail)
  vim.bo[b].filetype = m.tool == "run_command" and "sh" or (vim.startswith(m.tool, "mcp__") and "json" or "diff")
  local width = math.min(vim.o.columns - 4, 100)
  local height = math.min(#detail, math.max(3, vim.o.lines - 10))
  return vim.api.nvim_open_win(b, false, {
    relative = "editor",
    row = 1,
    col = math.floor((vim.o.columns - width) / 2),
    width = width,
    height = height,
    border = "rounded",
    title = (" %s: %s "):format(m.tool, m.summary),
    style = "minimal",
  })
end

return M
