--- The installer's child processes (curl, the checksum, cargo, the probe): started with `vim.system`, their end
--- handed back on the main loop, and stopped when Neovim exits, so a `:qa` in the middle of an install leaves no
--- cargo or curl running on its own (the attempt file then tells the next start the install was interrupted).

local M = {}

---@type table<vim.SystemObj, true>
local running = {}

local function stop_all()
  for proc in pairs(running) do
    pcall(proc.kill, proc, "sigterm")
  end
end

--- Runs `cmd`; `on_exit(result)` is called on the main loop, with code -1 and the reason when it cannot start.
---@param cmd string[]
---@param opts vim.SystemOpts
---@param on_exit fun(res: vim.SystemCompleted)
function M.run(cmd, opts, on_exit)
  if next(running) == nil then
    vim.api.nvim_create_autocmd("VimLeavePre", {
      group = vim.api.nvim_create_augroup("pseudoclaude_install", { clear = true }),
      callback = stop_all,
      desc = "pseudoclaude: stop the install's child processes",
    })
  end
  local proc ---@type vim.SystemObj?
  local ok, err = pcall(function()
    proc = vim.system(cmd, opts, function(res)
      vim.schedule(function()
        if proc then
          running[proc] = nil
        end
        on_exit(res)
      end)
    end)
  end)
  if ok and proc then
    running[proc] = true
  else
    vim.schedule(function()
      on_exit({ code = -1, signal = 0, stdout = "", stderr = tostring(err) })
    end)
  end
end

return M
