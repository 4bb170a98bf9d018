-- Development init for `make run`: `nvim --clean -u scripts/dev-init.lua`.
-- Puts this repository on 'runtimepath', sources plugin/*.lua and calls setup(). The workspace is the cwd.
local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.runtimepath:prepend(root)
for _, file in ipairs(vim.fn.glob(root .. "/plugin/*.lua", false, true)) do
  vim.cmd.source(vim.fn.fnameescape(file))
end
require("pseudoclaude").setup({})
