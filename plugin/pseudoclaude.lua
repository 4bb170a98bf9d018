-- pseudoclaude.nvim: defines the user commands only. Nothing is required and the native library is not loaded
-- until a command is used.
if vim.g.loaded_pseudoclaude then
  return
end
vim.g.loaded_pseudoclaude = true

vim.api.nvim_create_user_command("PseudoClaudeVersion", function()
  require("pseudoclaude").print_version()
end, { nargs = 0, desc = "pseudoclaude: show the plugin and native core versions" })

vim.api.nvim_create_user_command("PseudoInstall", function(opts)
  require("pseudoclaude.install").install({ from = opts.args ~= "" and opts.args or nil })
end, {
  nargs = "?",
  complete = function()
    return { "source" }
  end,
  desc = "pseudoclaude: download the native library of this release (checked), or build it with cargo",
})

-- What the last install left undone (it failed, or was killed part way): said at each start until one succeeds.
-- One stat when there is nothing to say.
do
  local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
  if vim.uv.fs_stat(root .. "/target/release/pseudoclaude-install-attempt.json") then
    vim.schedule(function()
      require("pseudoclaude.install.state").report_at_start(require("pseudoclaude.core").plugin_root())
    end)
  end
end

vim.api.nvim_create_user_command("PseudoChat", function(opts)
  if opts.range > 0 then
    local ok, err = pcall(require("pseudoclaude.context").add_range, 0, opts.line1, opts.line2)
    if not ok then
      return require("pseudoclaude.errors").report(err)
    end
  end
  -- `-w [NAME]`: the new chat in a git worktree of its own (named, or a generated name)
  local agent, worktree = nil, nil
  local i = 1
  while i <= #opts.fargs do
    local a = opts.fargs[i]
    if a == "-w" or a == "--worktree" then
      local nxt = opts.fargs[i + 1]
      worktree = true
      if nxt and nxt:sub(1, 1) ~= "-" then
        worktree, i = nxt, i + 1
      end
    else
      agent = a
    end
    i = i + 1
  end
  if worktree then
    local ok, err = pcall(require("pseudoclaude.chat").new, { agent = agent, worktree = worktree })
    if not ok then
      return require("pseudoclaude.errors").report(err)
    end
    return
  end
  if agent then
    -- `:PseudoChat NAME`: another chat, with that ACP agent
    local ok, err = pcall(require("pseudoclaude.chat").new, { agent = agent })
    if not ok then
      return require("pseudoclaude.errors").report(err)
    end
    return
  end
  if opts.bang then
    return require("pseudoclaude.chat").new({})
  end
  require("pseudoclaude.chat").open()
end, {
  nargs = "*",
  range = true,
  bang = true,
  complete = function(arglead)
    return vim.tbl_filter(function(n)
      return vim.startswith(n, arglead)
    end, require("pseudoclaude.config").agent_names())
  end,
  desc = "pseudoclaude: open the agent buffer (!: another chat; NAME: another chat with that ACP agent; -w [NAME]: another chat in a git worktree); with a range, attach those lines",
})

vim.api.nvim_create_user_command("PseudoWorktree", function(o)
  require("pseudoclaude.worktree").command(o.fargs, o.bang)
end, {
  nargs = "*",
  bang = true,
  complete = function(arglead, line)
    local words = vim.split(line, "%s+", { trimempty = true })
    local cands = { "merge", "remove", "list" }
    if #words >= 2 and (words[2] == "merge" or words[2] == "remove") or #words >= 3 then
      cands = {}
    end
    return vim.tbl_filter(function(n)
      return vim.startswith(n, arglead)
    end, cands)
  end,
  desc = "pseudoclaude: review a worktree chat's change (merge[!] NAME: bring it in, !: keep its commits; remove[!] NAME; list)",
})

vim.api.nvim_create_user_command("PseudoMode", function(opts)
  require("pseudoclaude.chat").set_mode(opts.args)
end, {
  nargs = "?",
  complete = function(arglead)
    local modes = (require("pseudoclaude.chat").offers().modes or {}).availableModes or {}
    return vim.tbl_filter(
      function(id)
        return vim.startswith(id, arglead)
      end,
      vim.tbl_map(function(m)
        return m.id
      end, modes)
    )
  end,
  desc = "pseudoclaude: switch the chat's ACP agent to one of its modes (session/set_mode)",
})

vim.api.nvim_create_user_command("PseudoChats", function()
  require("pseudoclaude.chat").pick()
end, { nargs = 0, desc = "pseudoclaude: the live chats and their state; pick one to show it" })

vim.api.nvim_create_user_command("PseudoCancel", function()
  require("pseudoclaude.chat").cancel()
end, { nargs = 0, desc = "pseudoclaude: cancel the running turn" })

vim.api.nvim_create_user_command("PseudoModel", function(opts)
  require("pseudoclaude.chat").set_model(opts.args)
end, {
  nargs = "?",
  complete = function(arglead)
    return vim.tbl_filter(function(m)
      return vim.startswith(m, arglead)
    end, require("pseudoclaude.chat").models())
  end,
  desc = "pseudoclaude: switch the model for the next turn",
})

vim.api.nvim_create_user_command("PseudoNew", function()
  require("pseudoclaude.chat").start_over()
end, { nargs = 0, desc = "pseudoclaude: start the current chat over (its session stays on disk)" })

vim.api.nvim_create_user_command("PseudoMcp", function(o)
  require("pseudoclaude.mcp").command(o.fargs)
end, {
  nargs = "*",
  complete = function(arglead, line)
    return require("pseudoclaude.mcp").complete(arglead, line)
  end,
  desc = "pseudoclaude: the MCP servers, their state, tools and last error; `consent [NAME]` asks again",
})

vim.keymap.set("n", "<Plug>(PseudoChat)", "<Cmd>PseudoChat<CR>", { desc = "pseudoclaude: open the agent buffer" })
vim.keymap.set(
  "x",
  "<Plug>(PseudoChatSelection)",
  "<Esc><Cmd>'<,'>PseudoChat<CR>",
  { desc = "pseudoclaude: attach the selected lines to the next message and open the agent buffer" }
)
vim.keymap.set("n", "<Plug>(PseudoCancel)", "<Cmd>PseudoCancel<CR>", { desc = "pseudoclaude: cancel the turn" })

vim.api.nvim_create_user_command("PseudoResume", function(opts)
  require("pseudoclaude.float").command(opts.args)
end, {
  nargs = "?",
  complete = function(arglead)
    return require("pseudoclaude.float").complete(arglead)
  end,
  desc = "pseudoclaude: pick a session to resume; `last` or an id resumes it directly",
})

vim.api.nvim_create_user_command("PseudoSearch", function(opts)
  -- `!`: the other agents' sessions too, as `<C-o>` in the picker (without it, as `picker.external` says)
  local ok, err = pcall(require("pseudoclaude.float").open, { search = opts.args, external = opts.bang or nil })
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end, {
  nargs = "*",
  bang = true,
  desc = "pseudoclaude: search inside every message of every session (the picker's <C-g> mode); ! the other agents' too",
})

vim.api.nvim_create_user_command("PseudoCleanup", function()
  local ok, removed = pcall(require("pseudoclaude").sessions.cleanup)
  if not ok then
    vim.notify(tostring(removed), vim.log.levels.ERROR)
  elseif #removed == 0 then
    vim.notify("pseudoclaude: no session idle beyond retention_days")
  else
    vim.notify(("pseudoclaude: removed %d idle session(s): %s"):format(#removed, table.concat(removed, ", ")))
  end
end, { nargs = 0, desc = "pseudoclaude: remove sessions idle for more than retention_days" })

vim.api.nvim_create_user_command("PseudoKeep", function()
  require("pseudoclaude.keep").command()
end, {
  nargs = 0,
  desc = "pseudoclaude: copy the other agents' sessions of the workspace into our store now, or bring the copies up to date",
})

vim.api.nvim_create_user_command("PseudoRename", function(opts)
  require("pseudoclaude.library").rename(opts.args)
end, { nargs = "?", desc = "pseudoclaude: name the current session (no title: back to the automatic one)" })

vim.api.nvim_create_user_command("PseudoFork", function(opts)
  require("pseudoclaude.library").fork({ files = opts.args == "files" })
end, {
  nargs = "?",
  complete = function()
    return { "files" }
  end,
  desc = "pseudoclaude: fork the current session at the message under the cursor (`files`: and its files), switch to it",
})

vim.api.nvim_create_user_command("PseudoRewind", function()
  require("pseudoclaude.rewind").pick()
end, { nargs = 0, desc = "pseudoclaude: rewind the current session's code and/or conversation to before a message" })

vim.api.nvim_create_user_command("PseudoExport", function(opts)
  require("pseudoclaude.library").export(opts.args)
end, {
  nargs = "?",
  complete = "file",
  desc = "pseudoclaude: export the current session as Markdown (to {path}, or into a new buffer)",
})
