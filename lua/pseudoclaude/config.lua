--- Configuration: defaults, merging and validation, and the configuration in effect with the workspace it names
--- (`get()`, `workspace()`): every module asks here, never the package's root (`init.lua`, the public API, which
--- requires the modules, so a module requiring it back would close a loop). See `:help pseudoclaude-config`.

---@class pseudoclaude.ProviderConfig
---@field name string "auto" (default: anthropic when $ANTHROPIC_API_KEY is set, else openai when $OPENAI_API_KEY is set, else demo), "anthropic", "openai" or "demo" (offline).
---@field model string? Model name; nil = the provider's default.
---@field base_url string? API base URL; nil = the provider's default.
---@field api_key_env string? Name of the environment variable that holds the API key.
---@field connect_timeout integer? Seconds to wait for a connection (default 10).
---@field idle_timeout integer? Longest silence, in seconds, while an answer streams (default 120).
---@field max_retries integer? Retries of 429, 5xx and connection failures (default 3).
---@field thinking {budget_tokens: integer}|false? Anthropic's extended thinking: tokens the model may think (>= 1024); nil/false = off.
---@field reasoning_effort "low"|"medium"|"high"? OpenAI-compatible reasoning effort, passed through; nil = not sent.
---@field models string[]? Models `:PseudoModel` offers and completes (with `model` and the `pricing` names).

---@class pseudoclaude.PickerConfig
---@field max_items integer? Most sessions shown by the session picker before typing (nil: as many as fit).
---@field backend "float"|"select"|"telescope"|"fzf-lua"|"snacks"|"mini"|"auto" "float" = built-in floating window, "select" = `vim.ui.select()`, or that picker plugin's own picker ("auto": the first installed of telescope, fzf-lua, snacks, mini; else the float).
---@field external boolean List this workspace's sessions of the other agents too, without <C-o> ("other agents").

---@class pseudoclaude.ExternalConfig Other agents' sessions (Claude Code, Codex, ...).
---@field keep boolean Copy every other-agent session of the workspace into our store and keep the copies up to date (the agents' own clean-ups then lose nothing); `:PseudoKeep` does it once.

---@class pseudoclaude.ApproveConfig
---@field write_file boolean Run the write_file tool without asking first.
---@field edit_file boolean Run the edit_file tool without asking first.
---@field run_command boolean Run the run_command tool without asking first.
---@field mcp table<string, boolean|string[]> MCP tools run without asking: by server name, `true` for all its tools or a list of tool names.

---@class pseudoclaude.McpServer An MCP server: a command the editor starts at the first chat (stdio), or a url (streamable HTTP).
---@field command string? The program (looked up in $PATH).
---@field args string[]? Its arguments.
---@field env table<string, string>? Variables added to its environment.
---@field cwd string? Its working directory, relative to the workspace (default: the workspace).
---@field url string? A streamable-HTTP server's endpoint (`http://127.0.0.1:3001/mcp`); `${VAR}`, `${VAR:-default}` expanded.
---@field headers table<string, string>? Sent with every request to `url` (`Authorization = "Bearer ${TOKEN}"`).
---@field type string? "stdio" or "http" (as `.mcp.json` writes it); absent, `command` or `url` decides.

---@class pseudoclaude.McpConfig
---@field servers table<string, pseudoclaude.McpServer> By name (letters, digits, `_`, `-`): their tools reach the model as `mcp__NAME__TOOL`.
---@field timeout number Seconds one call (or a server's start) may take (default 60).

---@class pseudoclaude.SandboxConfig How run_command is confined (Linux: namespaces and Landlock).
---@field enabled boolean Commands run in the sandbox: writes only in the workspace (not its .git/ nor .PseudoClaude/), the session's $TMPDIR and `writable`; false = with all your rights.
---@field network boolean|{allow: string[]} true: commands may use the network (TCP, UDP, binds); false: only when you allow it for one command; `{ allow = { "crates.io", "*.npmjs.org", "127.0.0.1:8080" } }`: only those hosts, through a proxy (HTTP_PROXY, HTTPS_PROXY).
---@field writable string[] More folders commands may write in (`~` expanded).
---@field unix_sockets boolean Commands may connect to Unix sockets (the editor's own server among them: they can drive the editor); default false.
---@field env {keep: string[]?, set: table<string, string>?} Variables passed on purpose although their names look secret (`keep`), and set (`set`), in every command's environment.
---@field deny_read string[] More paths that read as empty inside the sandbox (`~` expanded), besides the usual secret stores.

---@class pseudoclaude.KeysConfig Keys of the agent buffer; false disables one.
---@field send string|false Send the message (Normal mode, input window).
---@field send_insert string|false Send the message (Insert mode, input window).
---@field cancel string|false Cancel the running turn (both windows, Normal and Insert mode).
---@field toggle_fold string|false Expand or fold a tool result (transcript window).
---@field open_file string|false Open the file under the cursor, in a list of files the agent changed (transcript window).
---@field mention string|false Typed in the input window (Insert mode): inserts itself and completes a workspace path.
---@field accept_hunk string|false Diff review: accept the change block under the cursor.
---@field reject_hunk string|false Diff review: reject the change block under the cursor.
---@field accept_all string|false Diff review: accept every change block not yet rejected, and answer.
---@field reject_all string|false Diff review: reject every change block not yet accepted, and answer.

---@class pseudoclaude.Price Dollars per million tokens of one model.
---@field input number Prompt tokens billed at the full rate (neither read from nor written to the cache).
---@field output number
---@field cache_read number? Prompt tokens read from the cache; default: `input`.
---@field cache_write number? Prompt tokens written to the cache; default: `input`.

---@class pseudoclaude.InstallConfig How `:PseudoInstall` (and build.lua) puts the native library in place.
---@field from "auto"|"source" "auto": the release's asset for this platform when there is one, else a build with cargo; "source": always build with cargo.
---@field url string? Where the release assets are (a mirror): the asset is fetched as `<url>/<asset name>`, its checksum as `<url>/<asset name>.sha256`; nil = the GitHub release of this version.

---@class pseudoclaude.Config
---@field provider pseudoclaude.ProviderConfig
---@field stale_after_hours number A resumed session whose last message is older than this many hours gets a reminder for the model (how long ago; re-check files first), written to the log with the next message.
---@field picker pseudoclaude.PickerConfig
---@field retention_days number Sessions older than this many days are removed by cleanup; 0 = keep forever.
---@field spill_threshold integer Tool outputs larger than this many bytes are stored beside the log, not in it.
---@field approve pseudoclaude.ApproveConfig
---@field sandbox pseudoclaude.SandboxConfig
---@field keys pseudoclaude.KeysConfig
---@field workspace string? Directory whose `.PseudoClaude/` holds the sessions; nil = the current directory.
---@field pricing table<string, pseudoclaude.Price> Prices by model name, for the sessions' cost; {} = no cost shown.
---@field mcp pseudoclaude.McpConfig The user's MCP servers.
---@field rewind pseudoclaude.RewindConfig
---@field install pseudoclaude.InstallConfig
---@field agents table<string, pseudoclaude.AgentSpec> ACP agents by name, over the built-in ones (claude, codex, gemini, qwen, opencode, pi, goose).
---@field agent string? The ACP agent new chats use; nil = our own provider.
---@field external pseudoclaude.ExternalConfig

---@class pseudoclaude.AgentSpec How to start an ACP agent (JSON-RPC on its standard streams).
---@field command string? The program (on `PATH`, or a path); absent: the built-in agent's of the same name.
---@field args string[]? Its arguments.
---@field env table<string, string>? Added to its environment (e.g. an API key's variable).
---@field sandbox boolean|{ writable: string[]?, keep: string[]? }? Run it in the command sandbox (`:h pseudoclaude-config-agents-sandbox`).
---@field fs_reads boolean? Offer it `fs/read_text_file` (the editor's buffers); nil: every agent but Gemini CLI (`:h pseudoclaude-config-agents-fs_reads`).

---@class pseudoclaude.RewindConfig
---@field enabled boolean Checkpoint the workspace's files before each message and after each write, edit and command, so `:PseudoRewind` can put them back.
---@field max_file_bytes integer Files larger than this are recorded as changed but not kept ("not restorable").

---@class pseudoclaude.UserConfig Options for setup(); every key is optional and merged over the defaults.
---@field provider? pseudoclaude.ProviderConfig|{}
---@field stale_after_hours? number
---@field picker? pseudoclaude.PickerConfig|{}
---@field retention_days? number
---@field spill_threshold? integer
---@field approve? pseudoclaude.ApproveConfig|{}
---@field sandbox? pseudoclaude.SandboxConfig|{}
---@field keys? pseudoclaude.KeysConfig|{}
---@field workspace? string
---@field pricing? table<string, pseudoclaude.Price>
---@field mcp? pseudoclaude.McpConfig|{}
---@field rewind? pseudoclaude.RewindConfig|{}
---@field install? pseudoclaude.InstallConfig|{}
---@field agents? table<string, pseudoclaude.AgentSpec>
---@field agent? string
---@field external? pseudoclaude.ExternalConfig|{}

local M = {}

---@type pseudoclaude.Config
M.defaults = {
  provider = {
    name = "auto",
    model = nil,
    base_url = nil,
    api_key_env = nil,
  },
  -- as the core's DEFAULT_STALE_AFTER, DEFAULT_DAYS and DEFAULT_THRESHOLD (test_doc.py holds them equal)
  stale_after_hours = 6,
  picker = {
    -- nil: as many sessions as the results window holds
    max_items = nil,
    backend = "float",
    external = false,
  },
  retention_days = 30,
  external = { keep = false },
  spill_threshold = 65536,
  approve = {
    write_file = false,
    edit_file = false,
    run_command = false,
    mcp = {},
    agents = {},
  },
  sandbox = {
    enabled = true,
    network = false,
    writable = {},
    unix_sockets = false,
    env = { keep = {}, set = {} },
    deny_read = {},
  },
  keys = {
    send = "<CR>",
    send_insert = "<C-s>",
    cancel = "<C-c>",
    toggle_fold = "<Tab>",
    open_file = "<CR>",
    mention = "@",
    accept_hunk = "a",
    reject_hunk = "r",
    accept_all = "A",
    reject_all = "R",
  },
  workspace = nil,
  pricing = {},
  -- as the core's mcp::DEFAULT_TIMEOUT_SECS
  mcp = { servers = {}, timeout = 60 },
  rewind = {
    enabled = true,
    max_file_bytes = 16 * 1024 * 1024,
  },
  install = { from = "auto", url = nil },
  -- the built-in ones (the core's acp::BUILTINS) are known without an entry here
  agents = {},
  agent = nil,
}

--- The ACP agents known without configuration, as the core's `acp::BUILTINS` names them (completion, health).
M.builtin_agents = { "claude", "codex", "gemini", "qwen", "opencode", "pi", "goose" }

--- Known keys per table, to report misspelled options.
local known = {
  [""] = {
    provider = true,
    stale_after_hours = true,
    picker = true,
    retention_days = true,
    spill_threshold = true,
    approve = true,
    sandbox = true,
    keys = true,
    workspace = true,
    -- its keys are model names: checked by `validate`, not here
    pricing = true,
    mcp = true,
    rewind = true,
    install = true,
    -- its keys are agent names: checked by `validate_agents`
    agents = true,
    agent = true,
    external = true,
  },
  install = { from = true, url = true },
  mcp = { servers = true, timeout = true },
  rewind = { enabled = true, max_file_bytes = true },
  provider = {
    name = true,
    model = true,
    base_url = true,
    api_key_env = true,
    connect_timeout = true,
    idle_timeout = true,
    max_retries = true,
    thinking = true,
    reasoning_effort = true,
    models = true,
  },
  picker = { max_items = true, backend = true, external = true },
  external = { keep = true },
  approve = { write_file = true, edit_file = true, run_command = true, mcp = true, agents = true },
  sandbox = { enabled = true, network = true, writable = true, unix_sockets = true, env = true, deny_read = true },
  keys = {
    send = true,
    send_insert = true,
    cancel = true,
    toggle_fold = true,
    open_file = true,
    mention = true,
    accept_hunk = true,
    reject_hunk = true,
    accept_all = true,
    reject_all = true,
  },
}

local PICKER_BACKENDS =
  { float = true, select = true, telescope = true, ["fzf-lua"] = true, snacks = true, mini = true, auto = true }

---@param v any
---@return boolean
local function is_integer(v)
  return type(v) == "number" and v == math.floor(v) and v > -math.huge and v < math.huge
end

--- `vim.validate` with the 0.11 signature when available, the table form on 0.10.
---@param name string
---@param value any
---@param validator string|fun(v: any): boolean, string?
---@param optional boolean?
---@param message string? expectation shown when a function validator fails
local function check(name, value, validator, optional, message)
  if vim.fn.has("nvim-0.11") == 1 then
    vim.validate(name, value, validator, optional, message)
  else
    ---@diagnostic disable-next-line: param-type-mismatch, missing-parameter
    vim.validate({ [name] = { value, validator, message or optional } })
  end
end

---@param value any
---@return boolean
local function positive_number(value)
  return type(value) == "number" and value > 0 and value < math.huge
end

--- A list of non-empty strings (`provider.models`, `sandbox.writable`).
---@param value any
---@return boolean
local function string_list(value)
  if type(value) ~= "table" then
    return false
  end
  for k, s in pairs(value) do
    if type(k) ~= "number" or type(s) ~= "string" or s == "" then
      return false
    end
  end
  return true
end

--- Validates a complete (merged) configuration; raises an error naming the first bad option.
---@param cfg pseudoclaude.Config
function M.validate(cfg)
  check("opts", cfg, "table")
  check("provider", cfg.provider, "table")
  check("provider.name", cfg.provider.name, function(v)
    return v == "auto" or v == "anthropic" or v == "openai" or v == "demo"
  end, false, 'one of "auto", "anthropic", "openai", "demo"')
  check("provider.model", cfg.provider.model, "string", true)
  check("provider.base_url", cfg.provider.base_url, "string", true)
  check("provider.api_key_env", cfg.provider.api_key_env, "string", true)
  for _, key in ipairs({ "connect_timeout", "idle_timeout", "max_retries" }) do
    check("provider." .. key, cfg.provider[key], function(v)
      return v == nil or (is_integer(v) and v >= 0)
    end, false, "an integer >= 0")
  end
  check("provider.thinking", cfg.provider.thinking, function(v)
    if v == nil or v == false then
      return true
    end
    if type(v) ~= "table" then
      return false
    end
    for k in pairs(v) do
      if k ~= "budget_tokens" then
        return false
      end
    end
    return is_integer(v.budget_tokens) and v.budget_tokens >= 1024
  end, false, "{ budget_tokens = <integer >= 1024> } or false")
  check("provider.reasoning_effort", cfg.provider.reasoning_effort, function(v)
    return v == nil or v == "low" or v == "medium" or v == "high"
  end, false, '"low", "medium" or "high"')
  check("provider.models", cfg.provider.models, function(v)
    return v == nil or string_list(v)
  end, false, "a list of model names")
  check("stale_after_hours", cfg.stale_after_hours, "number")
  check("stale_after_hours", cfg.stale_after_hours, positive_number, false, "a positive number of hours")
  check("picker", cfg.picker, "table")
  check("picker.max_items", cfg.picker.max_items, function(v)
    return v == nil or is_integer(v) and v >= 1
  end, false, "an integer >= 1")
  check("picker.backend", cfg.picker.backend, function(v)
    return PICKER_BACKENDS[v] == true
  end, false, '"float", "select", "telescope", "fzf-lua", "snacks", "mini" or "auto"')
  check("picker.external", cfg.picker.external, "boolean")
  check("external", cfg.external, "table")
  check("external.keep", cfg.external.keep, "boolean")
  check("retention_days", cfg.retention_days, function(v)
    return type(v) == "number" and v >= 0 and v < math.huge
  end, false, "a number of days >= 0 (0 = keep forever)")
  check("spill_threshold", cfg.spill_threshold, function(v)
    return is_integer(v) and v >= 1
  end, false, "an integer number of bytes >= 1")
  check("approve", cfg.approve, "table")
  check("approve.write_file", cfg.approve.write_file, "boolean")
  check("approve.edit_file", cfg.approve.edit_file, "boolean")
  check("approve.run_command", cfg.approve.run_command, "boolean")
  check("sandbox", cfg.sandbox, "table")
  -- Refused, not ignored: the sandbox is a safety setting, a misspelled key must not pass unnoticed.
  for key in pairs(cfg.sandbox) do
    if not known.sandbox[key] then
      error(
        ("sandbox.%s: unknown option (known: enabled, network, writable, unix_sockets, env, deny_read)"):format(
          tostring(key)
        ),
        0
      )
    end
  end
  check("sandbox.enabled", cfg.sandbox.enabled, "boolean")
  check("sandbox.network", cfg.sandbox.network, function(v)
    if type(v) == "boolean" then
      return true
    end
    if type(v) ~= "table" or not string_list(v.allow) then
      return false
    end
    for k in pairs(v) do
      if k ~= "allow" then
        return false
      end
    end
    return true
  end, false, 'true, false or { allow = { "host", "*.domain", "host:port", ... } }')
  check("sandbox.writable", cfg.sandbox.writable, string_list, false, "a list of folder paths (strings)")
  check("sandbox.unix_sockets", cfg.sandbox.unix_sockets, "boolean")
  check("sandbox.deny_read", cfg.sandbox.deny_read, string_list, false, "a list of paths (strings)")
  check("sandbox.env", cfg.sandbox.env, function(v)
    if type(v) ~= "table" then
      return false
    end
    for k in pairs(v) do
      if k ~= "keep" and k ~= "set" then
        return false
      end
    end
    if v.keep ~= nil and not string_list(v.keep) then
      return false
    end
    for name, value in pairs(v.set or {}) do
      if type(name) ~= "string" or name == "" or name:find("=", 1, true) or type(value) ~= "string" then
        return false
      end
    end
    return v.set == nil or type(v.set) == "table"
  end, false, '{ keep = { "NAME", ... }, set = { NAME = "value", ... } }')
  check("keys", cfg.keys, "table")
  local names = vim.tbl_keys(known.keys)
  table.sort(names)
  for _, key in ipairs(names) do
    check("keys." .. key, cfg.keys[key], function(v)
      return v == false or (type(v) == "string" and v ~= "")
    end, false, "a key (string) or false")
  end
  check("workspace", cfg.workspace, "string", true)
  check("rewind", cfg.rewind, "table")
  check("rewind.enabled", cfg.rewind.enabled, "boolean")
  check("rewind.max_file_bytes", cfg.rewind.max_file_bytes, function(v)
    return is_integer(v) and v >= 0
  end, false, "an integer number of bytes >= 0")
  M.validate_install(cfg.install)
  M.validate_pricing(cfg.pricing)
  M.validate_mcp(cfg.mcp, cfg.approve.mcp)
  M.validate_agents(cfg.agents, cfg.agent, cfg.approve.agents)
end

--- `install` (also what `install()` is given, over it). Raises an error naming the bad key.
---@param install any
function M.validate_install(install)
  check("install", install, "table")
  check("install.from", install.from, function(v)
    return v == "auto" or v == "source"
  end, false, '"auto" or "source"')
  check("install.url", install.url, function(v)
    return v == nil or (type(v) == "string" and v:match("^%a[%w+.-]*://.") ~= nil)
  end, false, "a URL (https://...)")
end

local SERVER_KEYS = { command = true, args = true, env = true, cwd = true, url = true, headers = true, type = true }

local AGENT_KEYS = { command = true, args = true, env = true, sandbox = true, fs_reads = true }
local AGENT_SANDBOX_KEYS = { writable = true, keep = true }

--- `agents`, `agent` and `approve.agents`. Raises an error naming the first bad entry, e.g. `agents.mine.args: ...`.
---@param agents any
---@param agent any
---@param approve any
function M.validate_agents(agents, agent, approve)
  if type(agents) ~= "table" then
    error(("agents: expected a table of agents by name, got %s"):format(type(agents)), 0)
  end
  for name, spec in pairs(agents) do
    local at = ("agents[%s]"):format(vim.inspect(name))
    if type(name) ~= "string" or not name:match("^[%w_%-]+$") then
      error(("%s: an agent's name is letters, digits, `_` and `-`"):format(at), 0)
    end
    if type(spec) ~= "table" then
      error(("%s: expected a table { command, args, env }, got %s"):format(at, type(spec)), 0)
    end
    for key in pairs(spec) do
      if not AGENT_KEYS[key] then
        error(("%s.%s: unknown option (known: command, args, env, sandbox, fs_reads)"):format(at, tostring(key)), 0)
      end
    end
    if spec.command ~= nil and (type(spec.command) ~= "string" or spec.command == "") then
      error(("%s.command: expected a program (a non-empty string), got %s"):format(at, vim.inspect(spec.command)), 0)
    end
    if spec.command == nil and not vim.tbl_contains(M.builtin_agents, name) then
      error(("%s.command: missing (%s is no built-in agent)"):format(at, name), 0)
    end
    if spec.args ~= nil and not string_list(spec.args) then
      error(("%s.args: expected a list of strings, got %s"):format(at, vim.inspect(spec.args)), 0)
    end
    local sandbox = spec.sandbox
    if type(sandbox) == "table" then
      for key, v in pairs(sandbox) do
        if not AGENT_SANDBOX_KEYS[key] then
          error(("%s.sandbox.%s: unknown option (known: writable, keep)"):format(at, tostring(key)), 0)
        end
        if not string_list(v) then
          error(("%s.sandbox.%s: expected a list of strings, got %s"):format(at, key, vim.inspect(v)), 0)
        end
      end
    elseif sandbox ~= nil and type(sandbox) ~= "boolean" then
      error(
        ("%s.sandbox: expected true, false or { writable = { paths }, keep = { names } }, got %s"):format(
          at,
          vim.inspect(sandbox)
        ),
        0
      )
    end
    if spec.fs_reads ~= nil and type(spec.fs_reads) ~= "boolean" then
      error(("%s.fs_reads: expected true or false, got %s"):format(at, vim.inspect(spec.fs_reads)), 0)
    end
    if spec.env ~= nil then
      local ok = type(spec.env) == "table"
      for k, v in pairs(ok and spec.env or {}) do
        ok = ok and type(k) == "string" and type(v) == "string"
      end
      if not ok then
        error(("%s.env: expected a table of strings by name, got %s"):format(at, vim.inspect(spec.env)), 0)
      end
    end
  end
  if
    agent ~= nil
    and (type(agent) ~= "string" or (agents[agent] == nil and not vim.tbl_contains(M.builtin_agents, agent)))
  then
    error(
      ("agent: expected the name of an agent (%s), got %s"):format(
        table.concat(M.agent_names(agents), ", "),
        vim.inspect(agent)
      ),
      0
    )
  end
  if type(approve) ~= "table" then
    error(("approve.agents: expected a table by agent name, got %s"):format(type(approve)), 0)
  end
  for name, v in pairs(approve) do
    if type(name) ~= "string" or type(v) ~= "boolean" then
      error(("approve.agents[%s]: expected true or false, got %s"):format(vim.inspect(name), vim.inspect(v)), 0)
    end
  end
end

--- Every agent a chat can run: the built-in ones and those of `agents` (nil: the configured ones), sorted.
---@param agents table<string, pseudoclaude.AgentSpec>?
---@return string[]
function M.agent_names(agents)
  agents = agents or M.get().agents or {}
  local names = vim.deepcopy(M.builtin_agents)
  for name in pairs(agents) do
    if not vim.tbl_contains(names, name) then
      names[#names + 1] = name
    end
  end
  table.sort(names)
  return names
end

--- `mcp` and `approve.mcp`. Raises an error naming the first bad entry, e.g. `mcp.servers.git.args: ...`.
---@param mcp any
---@param approve any
function M.validate_mcp(mcp, approve)
  if type(mcp) ~= "table" then
    error(("mcp: expected a table { servers = ..., timeout = ... }, got %s"):format(type(mcp)), 0)
  end
  local t = mcp.timeout
  if type(t) ~= "number" or t <= 0 or t ~= t or t == math.huge then
    error(("mcp.timeout: expected a positive number of seconds, got %s"):format(vim.inspect(t)), 0)
  end
  if type(mcp.servers) ~= "table" then
    error(("mcp.servers: expected a table of servers by name, got %s"):format(type(mcp.servers)), 0)
  end
  for name, server in pairs(mcp.servers) do
    local at = ("mcp.servers[%s]"):format(vim.inspect(name))
    if type(name) ~= "string" or not name:match("^[%w_-]+$") or name:find("__", 1, true) then
      error(
        ("%s: a server's name is letters, digits, `_` and `-` (no `__`): its tools are mcp__NAME__TOOL"):format(at),
        0
      )
    end
    if type(server) ~= "table" then
      error(("%s: expected a table { command = ..., args = {...} }, got %s"):format(at, type(server)), 0)
    end
    for key in pairs(server) do
      if not SERVER_KEYS[key] then
        error(("%s.%s: unknown key (known: command, args, env, cwd, url, headers, type)"):format(at, tostring(key)), 0)
      end
    end
    if server.type ~= nil and server.type ~= "stdio" and server.type ~= "http" and server.type ~= "streamable-http" then
      error(('%s.type: expected "stdio" or "http", got %s'):format(at, vim.inspect(server.type)), 0)
    end
    if server.command ~= nil and (server.url ~= nil or server.headers ~= nil) then
      error(("%s: a server has a command (stdio) or a url and headers (HTTP), not both"):format(at), 0)
    end
    local http = server.type == "http" or server.type == "streamable-http" or (server.type == nil and server.url ~= nil)
    if http then
      if server.command ~= nil or server.args ~= nil or server.env ~= nil or server.cwd ~= nil then
        error(("%s: an HTTP server has a url and headers, not a command, args, env or cwd"):format(at), 0)
      end
      if type(server.url) ~= "string" or not (server.url:match("^https?://.")) then
        error(("%s.url: expected an http:// or https:// URL, got %s"):format(at, vim.inspect(server.url)), 0)
      end
      local ok = server.headers == nil or type(server.headers) == "table"
      for k, v in pairs(ok and server.headers or {}) do
        ok = ok and type(k) == "string" and type(v) == "string"
      end
      if not ok then
        local got = vim.inspect(server.headers)
        error(("%s.headers: expected a table of strings by header name, got %s"):format(at, got), 0)
      end
    elseif server.url ~= nil or server.headers ~= nil then
      error(("%s: a stdio server (type = %q) has no url or headers"):format(at, "stdio"), 0)
    end
    if not http and (type(server.command) ~= "string" or server.command == "") then
      error(
        ("%s.command: expected the program to run (a non-empty string), got %s"):format(at, vim.inspect(server.command)),
        0
      )
    end
    if
      server.args ~= nil
      and not (
        type(server.args) == "table"
        and vim.iter(server.args):all(function(a)
          return type(a) == "string"
        end)
        and #server.args == vim.tbl_count(server.args)
      )
    then
      error(("%s.args: expected a list of strings, got %s"):format(at, vim.inspect(server.args)), 0)
    end
    if server.env ~= nil then
      local ok = type(server.env) == "table"
      for k, v in pairs(ok and server.env or {}) do
        ok = ok and type(k) == "string" and type(v) == "string"
      end
      if not ok then
        error(("%s.env: expected a table of strings by variable name, got %s"):format(at, vim.inspect(server.env)), 0)
      end
    end
    if server.cwd ~= nil and type(server.cwd) ~= "string" then
      error(("%s.cwd: expected a directory (string), got %s"):format(at, vim.inspect(server.cwd)), 0)
    end
  end
  if type(approve) ~= "table" then
    error(("approve.mcp: expected a table by server name, got %s"):format(type(approve)), 0)
  end
  for name, v in pairs(approve) do
    local ok = type(name) == "string"
      and (
        type(v) == "boolean"
        or (type(v) == "table" and vim.iter(v):all(function(x)
          return type(x) == "string"
        end))
      )
    if not ok then
      error(
        ("approve.mcp[%s]: expected true, false or a list of tool names, got %s"):format(
          vim.inspect(name),
          vim.inspect(v)
        ),
        0
      )
    end
  end
end

local PRICE_KEYS = { input = true, output = true, cache_read = true, cache_write = true }

--- `pricing`: a table of prices (dollars per million tokens) by model name. Raises an error naming the first bad
--- entry, e.g. `pricing["gpt-4.1"].output: expected ...`.
---@param pricing any
function M.validate_pricing(pricing)
  if type(pricing) ~= "table" then
    error(("pricing: expected a table of prices by model name, got %s"):format(type(pricing)), 0)
  end
  for model, price in pairs(pricing) do
    local at = ("pricing[%s]"):format(vim.inspect(model))
    if type(model) ~= "string" or model == "" then
      error(("%s: keys are model names (non-empty strings), as in provider.model"):format(at), 0)
    end
    if type(price) ~= "table" then
      error(("%s: expected a table { input = ..., output = ... }, got %s"):format(at, type(price)), 0)
    end
    for key, value in pairs(price) do
      if not PRICE_KEYS[key] then
        error(("%s.%s: unknown price (known: input, output, cache_read, cache_write)"):format(at, tostring(key)), 0)
      end
      if type(value) ~= "number" or value < 0 or value ~= value or value == math.huge then
        error(
          ("%s.%s: expected dollars per million tokens (a number >= 0), got %s"):format(at, key, vim.inspect(value)),
          0
        )
      end
    end
    for _, key in ipairs({ "input", "output" }) do
      if price[key] == nil then
        error(("%s.%s: missing (dollars per million tokens)"):format(at, key), 0)
      end
    end
  end
end

--- Names of options in `opts` that pseudoclaude does not know (likely typos), e.g. `{ "picker.max_item" }`.
---@param opts table
---@return string[]
function M.unknown_keys(opts)
  local unknown = {}
  for key, value in pairs(opts) do
    if not known[""][key] then
      table.insert(unknown, tostring(key))
    elseif known[key] and type(value) == "table" then
      for sub in pairs(value) do
        if not known[key][sub] then
          table.insert(unknown, key .. "." .. tostring(sub))
        end
      end
    end
  end
  table.sort(unknown)
  return unknown
end

--- Merges `opts` over the defaults and validates the result. Raises `pseudoclaude.setup: <problem>` on a bad
--- option; returns the configuration and the list of unknown option names.
---@param opts pseudoclaude.UserConfig?
---@return pseudoclaude.Config cfg
---@return string[] unknown
function M.resolve(opts)
  if opts == nil then
    opts = {}
  end
  if type(opts) ~= "table" then
    error(("pseudoclaude.setup: opts: expected table, got %s"):format(type(opts)), 0)
  end
  local cfg = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  local ok, err = pcall(M.validate, cfg)
  if not ok then
    -- drop the "file:line: " prefix vim.validate's error carries on some versions
    local msg = tostring(err):gsub("^[^\n]-%.lua:%d+: ", "")
    error("pseudoclaude.setup: " .. msg, 0)
  end
  return cfg, M.unknown_keys(opts)
end

--- The configuration in effect and the options it did not know (`set()`); nil until `setup()` or the first `get()`.
---@type pseudoclaude.Config?
local current = nil
---@type string[]
local unknown = {}

--- Puts in effect what `setup()` resolved.
---@param cfg pseudoclaude.Config
---@param unknown_names string[]
function M.set(cfg, unknown_names)
  current, unknown = cfg, unknown_names
end

--- The configuration in effect: the one given to `setup()`, or the defaults.
---@return pseudoclaude.Config
function M.get()
  if not current then
    current = M.resolve({})
  end
  return current
end

--- The options the last `setup()` did not know (misspelled ones, most likely), for `:checkhealth`.
---@return string[]
function M.unknown()
  return unknown
end

--- The workspace directory: `workspace` from the configuration, or the current directory.
---@return string
function M.workspace()
  local ws = M.get().workspace
  if ws then
    return vim.fs.normalize(ws)
  end
  return vim.uv.cwd() or vim.fn.getcwd()
end

return M
