--- `:PseudoInstall` and `require("pseudoclaude").install()`: puts the native library in place without a Rust
--- toolchain when a release has one for this platform, else builds it with cargo.
---
--- A release checkout (at the tag `v<version>`, or not a git checkout) downloads the asset for this target triple
--- and this Neovim minor version from the release (or `install.url`), checks its sha256 against the release's
--- `.sha256`, writes it under a temporary name and renames it over the library: a running Neovim keeps the old
--- file it has mapped, and no reader ever sees half a library. A commit between releases, no asset for this
--- platform, no network, or `install.from = "source"` builds with cargo; without cargo the report says what to
--- install. The stamp (install/state.lua) is written only once the library is in place; a failure, or a kill part
--- way, leaves the previous library and stamp as they were, and the attempt file for the next start to report.
---
--- Nothing here blocks the main loop: curl, the checksum, cargo and the probe are child processes (`vim.system`).
--- Only `wait()` (for build.lua and `nvim -l`) waits, as a build step must before it returns.

local M = {}
local H = {}

---@class pseudoclaude.InstallReport
---@field ok boolean
---@field from "release"|"source"|nil Where the library came from (or was to come from).
---@field version string The plugin version installed.
---@field error string? Why it failed (the library in place is then unchanged).
---@field note string? Why a build from source rather than a download.
---@field library string? The library's path.

---@class pseudoclaude.InstallOpts
---@field from "auto"|"source"? Overrides `install.from`.
---@field url string? Overrides `install.url`.
---@field on_done fun(report: pseudoclaude.InstallReport)?
---@field on_progress fun(msg: string)? Each step, as it starts.
---@field quiet boolean? No vim.notify (build.lua reports through its plugin manager).

---@type boolean
local running = false

--- Starts an install and returns at once; `opts.on_done(report)` is called when it is over.
---@param opts pseudoclaude.InstallOpts?
function M.install(opts)
  opts = opts or {}
  local core = require("pseudoclaude.core")
  local state = require("pseudoclaude.install.state")
  local root = core.plugin_root()
  local dir = state.dir(root)
  ---@type pseudoclaude.InstallReport
  local report = { ok = false, version = core.VERSION, library = core.library_path() }
  local ctx = { root = root, dir = dir, report = report, opts = opts, started = os.date("!%Y-%m-%dT%H:%M:%SZ") }
  ctx.progress = function(msg)
    if opts.on_progress then
      pcall(opts.on_progress, msg)
    end
  end
  local cfg, bad = H.config(opts)
  if not cfg then
    return H.finish(ctx, bad)
  end
  ctx.cfg = cfg
  if running then
    return H.finish(ctx, "an install is already running in this Neovim")
  end
  local other = state.attempt(root)
  if other and other.status == "running" and other.pid ~= vim.uv.os_getpid() and vim.uv.kill(other.pid, 0) == 0 then
    return H.finish(ctx, ("an install is already running in another Neovim (pid %d)"):format(other.pid))
  end
  running = true
  ctx.owns_lock = true
  vim.fn.mkdir(dir, "p")
  H.remove_stale_parts(dir)
  local wrote, err = state.write_json(dir .. "/" .. state.ATTEMPT, {
    status = "running",
    pid = vim.uv.os_getpid(),
    started = ctx.started,
    from = cfg.from,
  })
  if not wrote then
    return H.finish(ctx, ("cannot write in %s: %s"):format(dir, tostring(err)))
  end
  if cfg.from == "source" then
    return H.source(ctx, 'install.from = "source"')
  end
  H.is_release(root, core.VERSION, function(yes, why)
    if yes then
      H.release(ctx)
    else
      H.source(ctx, why)
    end
  end)
end

--- Runs an install and waits for it: for build.lua (lazy.nvim runs it in a coroutine: yield until done, showing
--- each step) and `nvim -l build.lua` (no coroutine: `vim.wait`). Raises the report's error on failure.
---@param opts pseudoclaude.InstallOpts?
---@return pseudoclaude.InstallReport
function M.wait(opts)
  opts = vim.deepcopy(opts or {})
  local report ---@type pseudoclaude.InstallReport?
  local steps = {} ---@type string[]
  opts.on_progress = function(msg)
    table.insert(steps, msg)
  end
  opts.on_done = function(r)
    report = r
  end
  opts.quiet = true
  local lazy_async = package.loaded["lazy.async"]
  local task = lazy_async and type(lazy_async.running) == "function" and lazy_async.running() or nil
  local wake = function() end
  if task and type(task.suspend) == "function" and type(task.resume) == "function" then
    -- lazy.nvim's task sleeps until a step or the end wakes it, rather than being resumed at every turn of the loop
    wake = function()
      task:resume()
    end
  end
  local on_progress = opts.on_progress
  opts.on_progress = function(msg)
    on_progress(msg)
    wake()
  end
  local on_done = opts.on_done
  opts.on_done = function(r)
    on_done(r)
    wake()
  end
  M.install(opts)
  if task and coroutine.isyieldable() then
    while not report do
      if #steps > 0 then
        -- a message yielded shows as the build task's progress in lazy.nvim's window
        coroutine.yield(table.remove(steps, 1))
      elseif type(task.suspend) == "function" then
        task:suspend()
      else
        coroutine.yield()
      end
    end
  else
    local log = function(msg)
      io.stdout:write("pseudoclaude: " .. msg .. "\n")
    end
    vim.wait(60 * 60 * 1000, function()
      while #steps > 0 do
        log(table.remove(steps, 1))
      end
      return report ~= nil
    end, 50)
  end
  if not report then
    error("pseudoclaude: the install did not finish", 0)
  end
  if not report.ok then
    error("pseudoclaude: " .. tostring(report.error), 0)
  end
  return report
end

--- Whether an install runs in this Neovim now.
---@return boolean
function M.running()
  return running
end

--- `install.from` and `install.url`: from `opts`, else lazy.nvim's `opts` for this plugin (its build step runs
--- before `setup()`), else `setup()`'s. Returns nil and why when one is wrong.
---@param opts pseudoclaude.InstallOpts
---@return {from: string, url: string?}?
---@return string?
function H.config(opts)
  local base = H.lazy_install_opts() or require("pseudoclaude.config").get().install or {}
  local cfg = { from = opts.from or base.from or "auto", url = opts.url or base.url }
  local ok, err = pcall(require("pseudoclaude.config").validate_install, cfg)
  if not ok then
    return nil, (tostring(err):gsub("^[^\n]-%.lua:%d+: ", ""))
  end
  return cfg
end

--- The `install` table of the `opts` lazy.nvim holds for this plugin, when lazy.nvim manages it.
---@return table?
function H.lazy_install_opts()
  if not package.loaded["lazy"] then
    return nil
  end
  local ok, found = pcall(function()
    local root = require("pseudoclaude.core").plugin_root()
    for _, p in pairs(require("lazy.core.config").plugins) do
      if p.dir and vim.fs.normalize(p.dir) == root then
        local opts = require("lazy.core.plugin").values(p, "opts", false)
        return type(opts) == "table" and opts.install or nil
      end
    end
  end)
  return ok and type(found) == "table" and found or nil
end

--- Whether `root` is a release: not a git checkout (a release archive), or one whose HEAD is the tag `v<version>`.
---@param root string
---@param version string
---@param on_done fun(yes: boolean, why: string?)
function H.is_release(root, version, on_done)
  if not vim.uv.fs_stat(root .. "/.git") then
    return on_done(true)
  end
  local tag = "v" .. version
  require("pseudoclaude.install.process").run(
    { "git", "-C", root, "tag", "--points-at", "HEAD" },
    { text = true },
    function(res)
      if res.code == -1 then
        return on_done(false, "git is not installed, so this checkout's release cannot be told")
      elseif res.code ~= 0 then
        return on_done(false, "git cannot tell which release this checkout is: " .. vim.trim(res.stderr or ""))
      end
      for t in (res.stdout or ""):gmatch("[^\n]+") do
        if t == tag then
          return on_done(true)
        end
      end
      on_done(
        false,
        ("this checkout is not the release %s (a commit between releases has no release asset)"):format(tag)
      )
    end
  )
end

--- Downloads and checks the release asset; no asset or no network falls back to a build from source.
---@param ctx table
function H.release(ctx)
  local state = require("pseudoclaude.install.state")
  local triple, why = state.target_triple()
  if not triple then
    return H.source(ctx, why)
  end
  local minor = state.nvim_minor()
  local version = ctx.report.version
  local asset = state.asset_name(version, triple, minor)
  local base = (ctx.cfg.url or state.default_url(version)):gsub("/+$", "")
  ctx.report.from = "release"
  ctx.progress(("downloading %s/%s"):format(base, asset))
  local part = H.part_path(ctx.dir)
  require("pseudoclaude.install.fetch").asset(base, asset, part, function(r)
    if not r.ok then
      os.remove(part)
      if r.fallback then
        return H.source(ctx, r.error)
      end
      return H.finish(ctx, r.error)
    end
    H.place(ctx, part, {
      from = "release",
      asset = asset,
      url = base .. "/" .. asset,
      sha256 = r.sha256,
      nvim = minor,
      target = triple,
    })
  end)
end

--- Builds with cargo (the report notes why); without cargo, says what to install.
---@param ctx table
---@param why string
function H.source(ctx, why)
  local state = require("pseudoclaude.install.state")
  local cargo = require("pseudoclaude.install.cargo")
  ctx.report.from = "source"
  ctx.report.note = why
  local exe = cargo.find()
  if not exe then
    return H.finish(
      ctx,
      ("%s; a build from source needs cargo, which is not installed: %s"):format(why, cargo.HOW_TO_INSTALL)
    )
  end
  local minor = state.nvim_minor()
  if not vim.tbl_contains(state.NVIM_MINORS, minor) then
    minor = state.NVIM_MINORS[1]
  end
  ctx.progress(("building from source with cargo (%s)"):format(why))
  cargo.build(exe, ctx.root, minor, ctx.progress, function(r)
    if not r.ok then
      return H.finish(ctx, r.error)
    end
    local stamp =
      { from = "source", commit = state.head_commit(ctx.root), nvim = minor, target = state.target_triple() }
    local target = ctx.report.library
    if vim.fs.normalize(r.library) == vim.fs.normalize(target) then
      -- cargo's own target/release: it replaced the file itself, and only after a successful build
      return H.stamp(ctx, stamp)
    end
    local part = H.part_path(ctx.dir)
    vim.uv.fs_copyfile(r.library, part, nil, function(err)
      vim.schedule(function()
        if err then
          os.remove(part)
          return H.finish(ctx, ("cannot copy %s into place: %s"):format(r.library, err))
        end
        H.place(ctx, part, stamp)
      end)
    end)
  end)
end

--- A checked library file `part` (in the library's folder): probed in a Neovim of its own, synced, renamed over the
--- library, then stamped.
---@param ctx table
---@param part string
---@param stamp table
function H.place(ctx, part, stamp)
  vim.uv.fs_chmod(part, tonumber("755", 8))
  ctx.progress("checking that the new library loads")
  H.probe(part, ctx.report.version, function(err)
    if err then
      os.remove(part)
      return H.finish(ctx, err)
    end
    H.fsync(part, function(serr)
      if serr then
        os.remove(part)
        return H.finish(ctx, ("cannot sync %s: %s"):format(part, serr))
      end
      -- rename, never a write into the file: a running Neovim has the old library mapped
      local ok, rerr = vim.uv.fs_rename(part, ctx.report.library)
      if not ok then
        os.remove(part)
        return H.finish(ctx, ("cannot put the library in place at %s: %s"):format(ctx.report.library, tostring(rerr)))
      end
      H.stamp(ctx, stamp)
    end)
  end)
end

--- Loads `path` in a separate headless Neovim and asks its version: a library that would not load here (another
--- platform, another Neovim, a damaged file) is refused before it replaces a working one.
---@param path string
---@param version string
---@param on_done fun(err: string?)
function H.probe(path, version, on_done)
  local script = "local f, e = package.loadlib(_G.arg[1], 'luaopen_pseudoclaude_core') "
    .. "if not f then io.stdout:write('LOADLIB ' .. tostring(e)) os.exit(3) end "
    .. "local ok, lib = pcall(f) if not ok or type(lib) ~= 'table' then io.stdout:write('INIT ' .. tostring(lib)) os.exit(4) end "
    .. "local _, v = lib.version() io.stdout:write('VERSION ' .. tostring(v)) os.exit(0)"
  local probe = vim.fn.tempname() .. ".lua"
  local f = io.open(probe, "wb")
  if not f then
    return on_done("cannot write a temporary file to probe the library")
  end
  f:write(script)
  f:close()
  local cmd = { vim.v.progpath, "--clean", "--headless", "-l", probe, path }
  require("pseudoclaude.install.process").run(cmd, { text = true }, function(res)
    os.remove(probe)
    local out = vim.trim(res.stdout or "")
    local got = out:match("^VERSION (.*)$")
    if res.code == 0 and got == version then
      return on_done(nil)
    elseif res.code == 0 then
      return on_done(("the new library reports version %s, not %s: refused"):format(tostring(got), version))
    end
    on_done(
      ("the new library does not load in this Neovim: %s"):format(out ~= "" and out or vim.trim(res.stderr or ""))
    )
  end)
end

---@param path string
---@param on_done fun(err: string?)
function H.fsync(path, on_done)
  vim.uv.fs_open(path, "r", 0, function(oerr, fd)
    if oerr or not fd then
      return vim.schedule(function()
        on_done(oerr or "cannot open")
      end)
    end
    vim.uv.fs_fsync(fd, function(serr)
      vim.uv.fs_close(fd)
      vim.schedule(function()
        on_done(serr)
      end)
    end)
  end)
end

--- Writes the stamp for the library now in place, removes the attempt, and reports success.
---@param ctx table
---@param fields table
function H.stamp(ctx, fields)
  local state = require("pseudoclaude.install.state")
  local st = vim.uv.fs_stat(ctx.report.library)
  if not st then
    return H.finish(ctx, "the library is not at " .. ctx.report.library .. " after the install")
  end
  local stamp = vim.tbl_extend("force", fields, {
    version = ctx.report.version,
    installed_at = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    size = st.size,
    mtime = st.mtime.sec,
  })
  local ok, err = state.write_json(ctx.dir .. "/" .. state.STAMP, stamp)
  if not ok then
    return H.finish(ctx, ("the library is in place, but its stamp cannot be written: %s"):format(tostring(err)))
  end
  os.remove(ctx.dir .. "/" .. state.ATTEMPT)
  ctx.report.ok = true
  H.finish(ctx, nil, stamp)
end

--- Ends an install: records a failure in the attempt file (for the next start and :checkhealth), tells the user,
--- calls `on_done`.
---@param ctx table
---@param err string?
---@param stamp table?
function H.finish(ctx, err, stamp)
  local state = require("pseudoclaude.install.state")
  local report = ctx.report
  if err then
    report.ok = false
    report.error = err
    if ctx.owns_lock then
      state.write_json(ctx.dir .. "/" .. state.ATTEMPT, {
        status = "failed",
        pid = vim.uv.os_getpid(),
        started = ctx.started,
        from = report.from,
        error = err,
      })
    end
  end
  if ctx.owns_lock then
    running = false
  end
  if not ctx.opts.quiet then
    if report.ok then
      local what = stamp.from == "release" and ("the release asset %s (sha256 %s)"):format(stamp.asset, stamp.sha256)
        or ("a build from source%s"):format(stamp.commit and (" of commit " .. stamp.commit:sub(1, 12)) or "")
      local restart = require("pseudoclaude.core").is_loaded() and "; restart Neovim to use it" or ""
      vim.notify(("pseudoclaude: installed the native library %s from %s%s"):format(report.version, what, restart))
    else
      vim.notify(
        ("pseudoclaude: the install failed: %s; the library in place is unchanged. Run :PseudoInstall again once fixed"):format(
          err
        ),
        vim.log.levels.ERROR
      )
    end
  end
  if ctx.opts.on_done then
    local ok, cb_err = pcall(ctx.opts.on_done, report)
    if not ok then
      vim.notify("pseudoclaude: install's on_done failed: " .. tostring(cb_err), vim.log.levels.ERROR)
    end
  end
end

--- A temporary name in the library's folder (same file system: the rename is atomic), this process's own.
---@param dir string
---@return string
function H.part_path(dir)
  return ("%s/.libpseudoclaude.%d.part"):format(dir, vim.uv.os_getpid())
end

--- Removes the temporary files of installs whose Neovim is gone (a kill part way leaves one).
---@param dir string
function H.remove_stale_parts(dir)
  for name in vim.fs.dir(dir) do
    local pid = name:match("^%.libpseudoclaude%.(%d+)%.part")
    if pid and (tonumber(pid) == vim.uv.os_getpid() or vim.uv.kill(tonumber(pid), 0) ~= 0) then
      os.remove(dir .. "/" .. name)
    end
  end
end

return M
