-- pseudoclaude.nvim: defines the user commands only. Nothing is required and the native library is not loaded
-- until a command is used.
if vim.g.loaded_pseudoclaude then
  return
end
vim.g.loaded_pseudoclaude = true

vim.api.nvim_create_user_command("PseudoClaudeVersion", function()
  require("pseudoclaude").print_version()
end, { nargs = 0, desc = "pseudoclaude: show the plugin and native core versions" })
