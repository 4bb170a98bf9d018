-- The plugin's build step: lazy.nvim runs this file by itself after an install or update (no `build` key needed);
-- by hand, or from any other plugin manager's hook: `nvim -l build.lua` in the plugin's folder (`nvim -l build.lua
-- source` builds with cargo; `nvim -l build.lua <url>` downloads from a mirror). It puts the native library in
-- place as :PseudoInstall does (`:help pseudoclaude-install`), and waits for it: a build step must be done when it
-- returns. It fails (raises) with the reason when the library could not be installed.
local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
if not vim.tbl_contains(vim.api.nvim_list_runtime_paths(), root) then
  vim.opt.runtimepath:prepend(root)
end
local opts = {}
for _, a in ipairs(_G.arg or {}) do
  if a == "source" then
    opts.from = "source"
  elseif a:match("^%a[%w+.-]*://") then
    opts.url = a
  end
end
local report = require("pseudoclaude.install").wait(opts)
print(("pseudoclaude: native library %s installed (from %s)"):format(report.version, report.from))
