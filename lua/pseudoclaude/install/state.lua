--- What is installed and what the last install did, on disk beside the library (`target/release/`):
---
--- - the stamp, `pseudoclaude-install.json`: where the library in place came from (a release asset and its sha256,
---   or a local build and its commit), written only after the library is in place, so it never names a library
---   that is not there;
--- - the attempt, `pseudoclaude-install-attempt.json`: written when an install starts and removed when it succeeds.
---   Left behind, it is the failure the next start reports (with the command that fixes it): a `failed` one says
---   why, a `running` one whose process is gone was killed part way.
---
--- Also the asset's name, which `scripts/package` and the release workflow follow: one per version, target triple
--- and Neovim minor version (the library is compiled against that minor's API).

local M = {}

M.STAMP = "pseudoclaude-install.json"
M.ATTEMPT = "pseudoclaude-install-attempt.json"

--- The Neovim minor versions a library can be built for, newest first: each is a cargo feature of the crate
--- (`neovim-0-11`), the first the default.
M.NVIM_MINORS = { "0.11" }

--- The releases' download folder for `version`; `install.url` replaces it (a mirror).
---@param version string
---@return string
function M.default_url(version)
  return ("https://github.com/pseudoclaude/pseudoclaude.nvim/releases/download/v%s"):format(version)
end

---@return string
function M.nvim_minor()
  local v = vim.version()
  return ("%d.%d"):format(v.major, v.minor)
end

--- This machine's Rust target triple, or nil and why there is no release asset for it.
---@return string? triple
---@return string? why
function M.target_triple()
  local u = vim.uv.os_uname()
  local arch = ({ x86_64 = "x86_64", amd64 = "x86_64", aarch64 = "aarch64", arm64 = "aarch64" })[u.machine]
  if not arch then
    return nil, ("no release is built for the %s processor"):format(u.machine)
  end
  if u.sysname == "Linux" then
    return arch .. "-unknown-linux-gnu"
  elseif u.sysname == "Darwin" then
    return arch .. "-apple-darwin"
  end
  return nil, ("no release is built for %s"):format(u.sysname)
end

--- The file name of the library cargo writes, and the extension of the asset.
---@return string
function M.library_extension()
  return (jit and jit.os == "OSX") and "dylib" or "so"
end

--- `pseudoclaude-0.1.0-x86_64-unknown-linux-gnu-nvim0.11.so`
---@param version string
---@param triple string
---@param minor string
---@return string
function M.asset_name(version, triple, minor)
  return ("pseudoclaude-%s-%s-nvim%s.%s"):format(version, triple, minor, M.library_extension())
end

--- A small file's text (`what`: "*a" the whole, "*l" its first line), or nil when it cannot be read.
---@param path string
---@param what "*a"|"*l"
---@return string?
local function read(path, what)
  local f = io.open(path, "rb")
  if not f then
    return nil
  end
  local text = f:read(what)
  f:close()
  return text
end

---@param path string
---@return table?
local function read_json(path)
  local text = read(path, "*a")
  if not text then
    return nil
  end
  local ok, value = pcall(vim.json.decode, text, { luanil = { object = true, array = true } })
  return ok and type(value) == "table" and value or nil
end

--- Writes `value` as JSON under a temporary name and renames it over `path`: a reader sees the old file or the
--- new one, never half of one.
---@param path string
---@param value table
---@return boolean ok
---@return string? err
function M.write_json(path, value)
  local tmp = ("%s.%d.tmp"):format(path, vim.uv.os_getpid())
  local f, err = io.open(tmp, "wb")
  if not f then
    return false, err
  end
  local ok, werr = f:write(vim.json.encode(value) .. "\n")
  f:close()
  if not ok then
    os.remove(tmp)
    return false, werr
  end
  local renamed, rerr = vim.uv.fs_rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    return false, rerr
  end
  return true
end

--- The folder of the library, the stamp and the attempt.
---@param root string the plugin's root
---@return string
function M.dir(root)
  return root .. "/target/release"
end

---@class pseudoclaude.InstallStamp
---@field version string The plugin version the library was installed for.
---@field from "release"|"source"
---@field asset string? The release asset's name.
---@field url string? Where it was downloaded from.
---@field sha256 string? Its checksum, as the release's `.sha256` gave it and the download matched.
---@field commit string? The commit a local build was built from (nil outside a git checkout).
---@field nvim string The Neovim minor version it was built for.
---@field target string? The target triple.
---@field installed_at string UTC, ISO 8601.
---@field size integer The library's size when it was put in place.
---@field mtime integer Its modification time then (seconds): a later `cargo build` changes both.

---@param root string
---@return pseudoclaude.InstallStamp?
function M.stamp(root)
  return read_json(M.dir(root) .. "/" .. M.STAMP)
end

---@class pseudoclaude.InstallAttempt
---@field status "running"|"failed"
---@field pid integer The Neovim that ran it.
---@field started string
---@field from "release"|"source"?
---@field error string? Why it failed.

---@param root string
---@return pseudoclaude.InstallAttempt?
function M.attempt(root)
  return read_json(M.dir(root) .. "/" .. M.ATTEMPT)
end

---@param pid integer
---@return boolean
local function alive(pid)
  return type(pid) == "number" and pid > 0 and vim.uv.kill(pid, 0) == 0
end

--- The last install's failure, as a sentence naming the command that fixes it, or nil when the last one succeeded,
--- none ran, or one is running now (in another Neovim).
---@param root string
---@return string?
function M.failure(root)
  local a = M.attempt(root)
  if not a then
    return nil
  end
  local fix = "run :PseudoInstall"
  if a.status == "failed" then
    return ("the install of the native library started %s failed: %s; the library in place is unchanged. To fix it: %s"):format(
      tostring(a.started),
      tostring(a.error),
      fix
    )
  end
  if a.pid ~= vim.uv.os_getpid() and not alive(a.pid) then
    return ("the install of the native library started %s was interrupted (its Neovim, pid %s, stopped before it finished); the library in place is unchanged. To fix it: %s"):format(
      tostring(a.started),
      tostring(a.pid),
      fix
    )
  end
  return nil
end

--- At start (plugin/pseudoclaude.lua, only when an attempt file is there): says what the last install left undone.
---@param root string
function M.report_at_start(root)
  local why = M.failure(root)
  if why then
    vim.notify("pseudoclaude: " .. why, vim.log.levels.WARN)
  end
end

--- The commit checked out in `root` (read from .git, no process), or nil outside a git checkout.
---@param root string
---@return string?
function M.head_commit(root)
  local git = root .. "/.git"
  local stat = vim.uv.fs_stat(git)
  if stat and stat.type == "file" then
    -- a worktree or submodule: `gitdir: <path>`
    local dir = (read(git, "*l") or ""):match("^gitdir: (.+)$")
    if not dir then
      return nil
    end
    git = dir:sub(1, 1) == "/" and dir or (root .. "/" .. dir)
  elseif not stat then
    return nil
  end
  local function first_line(path)
    return read(path, "*l")
  end
  local head = first_line(git .. "/HEAD")
  if not head then
    return nil
  end
  local ref = head:match("^ref: (.+)$")
  if not ref then
    return head:match("^%x+$")
  end
  -- a worktree's refs live in the common folder
  local common = first_line(git .. "/commondir")
  local roots = { git }
  if common then
    table.insert(roots, common:sub(1, 1) == "/" and common or (git .. "/" .. common))
  end
  for _, dir in ipairs(roots) do
    local loose = first_line(dir .. "/" .. ref)
    if loose and loose:match("^%x+$") then
      return loose
    end
    local packed = io.open(dir .. "/packed-refs", "rb")
    if packed then
      for line in packed:lines() do
        local sha, name = line:match("^(%x+) (.+)$")
        if name == ref then
          packed:close()
          return sha
        end
      end
      packed:close()
    end
  end
  return nil
end

return M
