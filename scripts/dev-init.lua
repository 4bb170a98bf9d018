-- Development init for `make run`: `nvim --clean -u scripts/dev-init.lua`.
-- Puts this repository on 'runtimepath', sources plugin/*.lua and calls setup(). The workspace is the cwd.
local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.runtimepath:prepend(root)
for _, file in ipairs(vim.fn.glob(root .. "/plugin/*.lua", false, true)) do
  vim.cmd.source(vim.fn.fnameescape(file))
end
-- `:help pseudoclaude` needs doc/tags, which is generated (and git-ignored): make it when missing or older than
-- the help file. (A plugin manager such as lazy.nvim runs `:helptags` itself.)
local doc = root .. "/doc"
local tags, help = vim.uv.fs_stat(doc .. "/tags"), vim.uv.fs_stat(doc .. "/pseudoclaude.txt")
if help and (not tags or tags.mtime.sec < help.mtime.sec) then
  pcall(vim.cmd.helptags, vim.fn.fnameescape(doc))
end
require("pseudoclaude").setup({})
