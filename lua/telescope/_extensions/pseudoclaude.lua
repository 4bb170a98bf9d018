--- The telescope extension of pseudoclaude.nvim: `:Telescope pseudoclaude sessions` (the default) and
--- `:Telescope pseudoclaude search`, or `require("telescope").extensions.pseudoclaude.sessions(opts)`. Telescope finds
--- this file by its name when the extension is first used (or `require("telescope").load_extension("pseudoclaude")`);
--- the pickers themselves are in lua/pseudoclaude/pickers/telescope.lua. Options given to
--- `require("telescope").setup({ extensions = { pseudoclaude = {...} } })` are the pickers' defaults (telescope's
--- layout options, `external`).

local defaults = {}

---@param opts table?
local function with_defaults(opts)
  return vim.tbl_extend("force", defaults, opts or {})
end

return require("telescope").register_extension({
  setup = function(ext_config)
    defaults = ext_config or {}
  end,
  exports = {
    pseudoclaude = function(opts)
      require("pseudoclaude.pickers.telescope").sessions(with_defaults(opts))
    end,
    sessions = function(opts)
      require("pseudoclaude.pickers.telescope").sessions(with_defaults(opts))
    end,
    search = function(opts)
      require("pseudoclaude.pickers.telescope").search(with_defaults(opts))
    end,
  },
})
