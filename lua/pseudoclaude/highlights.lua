--- Highlight groups of pseudoclaude. Each is a `default` link, so a colorscheme or the user's own `:highlight`
--- wins; they are defined on first use and again after every `:colorscheme`. See `:help pseudoclaude-highlights`.

local M = {}
local H = {}

--- Group name -> the group it links to by default.
---@type table<string, string>
M.links = {
  PseudoClaudePickerNormal = "NormalFloat", -- picker windows' text
  PseudoClaudePickerBorder = "FloatBorder", -- their borders
  PseudoClaudePickerTitle = "FloatTitle", -- their titles
  PseudoClaudePickerPrompt = "Question", -- the "> " before the query
  PseudoClaudePickerCounter = "Comment", -- "matches/total" at the right of the prompt
  PseudoClaudePickerSelection = "Visual", -- the highlighted session
  PseudoClaudePickerMatch = "Special", -- characters the query matched
  PseudoClaudePickerAge = "Comment", -- "3h ago"
  PseudoClaudePickerCount = "Number", -- "12 msgs"
  PseudoClaudePickerModel = "Type", -- model name
  PseudoClaudePickerBranch = "Identifier", -- git branch
  PseudoClaudePickerWorkspace = "Directory", -- the workspace in front of a `:PseudoResume all` row
  PseudoClaudePickerSource = "Special", -- "[claude]"/"[codex]" in front of another agent's row (`<C-o>`)
  PseudoClaudePickerCost = "Number", -- "$0.42"
  PseudoClaudePickerHeld = "WarningMsg", -- a session open in another editor
  PseudoClaudePickerLive = "DiagnosticOk", -- a session live in a chat of this editor
  PseudoClaudePickerEmpty = "Comment", -- "no match"
  PseudoClaudePickerPreviewTitle = "Title", -- session title in the preview
  PseudoClaudePickerPreviewMeta = "Comment", -- id, model, count, age
  PseudoClaudePickerPreviewUser = "Statement", -- "## You"
  PseudoClaudePickerPreviewAgent = "Function", -- "## Agent"
  PseudoClaudePickerPreviewTool = "Comment", -- "▸ read_file {...}"
  PseudoClaudePickerPreviewResult = "Comment", -- "✓ read_file: ..."
  PseudoClaudePickerPreviewError = "ErrorMsg", -- "✗ run_command: ..."
  PseudoClaudePickerDamage = "WarningMsg", -- "⚠ repaired on load: ..."
  PseudoClaudePickerPinned = "Special", -- "* " before a pinned session, "* pinned" in its preview
  PseudoClaudeHeader = "Title", -- agent buffer: "## You", "## Agent"
  PseudoClaudeTool = "Comment", -- agent buffer: tool calls and results
  PseudoClaudeThinking = "Comment", -- agent buffer: "💭 thought for 12 s, 40 lines"
  PseudoClaudeError = "DiagnosticError", -- agent buffer: errors
  PseudoClaudeNotice = "DiagnosticWarn", -- agent buffer: notices (repairs, reminder, cancelled)
  PseudoClaudeWinbar = "WinBar", -- agent buffer's winbar
  PseudoClaudeSaved = "DiagnosticOk", -- winbar: "saved"
  PseudoClaudeUnsaved = "DiagnosticError", -- winbar: "NOT SAVED"
}

--- The group of each kind of transcript line (`transcript.lua`'s marks) in the agent buffer, and in the picker's and
--- the search's previews (`float/render.lua`).
---@type table<string, string>
M.TRANSCRIPT = {
  you = "PseudoClaudeHeader",
  agent = "PseudoClaudeHeader",
  reminder = "PseudoClaudeNotice",
  call = "PseudoClaudeTool",
  result = "PseudoClaudeTool",
  error = "PseudoClaudeError",
  more = "PseudoClaudeTool",
  thinking = "PseudoClaudeThinking",
}
---@type table<string, string>
M.PREVIEW = {
  you = "PseudoClaudePickerPreviewUser",
  agent = "PseudoClaudePickerPreviewAgent",
  reminder = "PseudoClaudePickerDamage",
  call = "PseudoClaudePickerPreviewTool",
  result = "PseudoClaudePickerPreviewResult",
  error = "PseudoClaudePickerPreviewError",
  more = "PseudoClaudePickerPreviewMeta",
  thinking = "PseudoClaudePickerPreviewMeta",
}

--- Defines the groups (keeping any the user or the colorscheme set) and re-defines them after `:colorscheme`.
--- Cheap to call again.
function M.setup()
  if H.done then
    return
  end
  H.done = true
  M.apply()
  vim.api.nvim_create_autocmd("ColorScheme", {
    group = vim.api.nvim_create_augroup("PseudoClaudeHighlights", { clear = true }),
    callback = M.apply,
    desc = "pseudoclaude: restore default highlight links",
  })
end

--- Defines every group as a `default` link.
function M.apply()
  for name, link in pairs(M.links) do
    vim.api.nvim_set_hl(0, name, { link = link, default = true })
  end
end

return M
