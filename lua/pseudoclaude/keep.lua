--- Other agents' sessions kept in our store (`setup({ external = { keep = true } })`, `:PseudoKeep`): each one
--- copied as a session of ours and kept up to date, so the agents' own clean-ups lose nothing. The copying runs on
--- the core's threads (a keeper thread per workspace, watching the agents' stores); this module only starts it and
--- reports. See `:help pseudoclaude-keep`.

local M = {}
local H = {}

---@class pseudoclaude.KeepReport What one sync did.
---@field copied integer Sessions copied for the first time.
---@field updated integer Copies that gained messages.
---@field unchanged integer Copies already up to date.
---@field continued integer Copies continued in a chat since (left alone: the chat's log is the record).
---@field skipped string[] Sessions not copied this time, and why.
---@field failed string[] Sessions whose copy failed, and why.

---@class pseudoclaude.KeepStatus
---@field running boolean The workspace's keeper runs.
---@field syncs integer Syncs it has done.
---@field last_sync integer Unix seconds of the last one's end (0: none yet).
---@field last pseudoclaude.KeepReport? What the last one did.
---@field watched integer Folders it watches (0: no inotify; then a sync every 30 s).

---@class pseudoclaude.KeepStore One agent's store, as `:checkhealth` reports it.
---@field agent string
---@field path string Where its sessions are.
---@field found boolean
---@field sessions integer This workspace's sessions in it.
---@field deletes string? What the agent deletes by itself, as a sentence (nil: nothing).
---@field deletes_after_days number? Days after which the agent deletes a session itself, when it deletes by age.
---@field retention string Where that comes from (its setting and file, or the default).

--- Starts keeping the workspace's other-agent sessions (once per workspace; returns at once).
---@param workspace string?
---@return boolean started false when the workspace was kept already
function M.start(workspace)
  workspace = workspace or require("pseudoclaude.config").workspace()
  return require("pseudoclaude.core").call_as("pseudoclaude.keep.start", "keep_start", workspace)
end

--- Stops the workspace's keeper after the sync under way.
---@param workspace string?
function M.stop(workspace)
  workspace = workspace or require("pseudoclaude.config").workspace()
  require("pseudoclaude.core").call_as("pseudoclaude.keep.stop", "keep_stop", workspace)
end

--- One sync now, on a worker thread: `on_done(nil, report)` or `on_done(message)`. Returns at once.
---@param on_done fun(err: string?, report: pseudoclaude.KeepReport?)
---@param workspace string?
function M.now(on_done, workspace)
  workspace = workspace or require("pseudoclaude.config").workspace()
  require("pseudoclaude.core").call_as("pseudoclaude.keep.now", "keep_async", workspace, function(ok, value)
    if ok then
      on_done(nil, value)
    else
      on_done(require("pseudoclaude.core").plain(value))
    end
  end)
end

--- The keeper's status for the workspace.
---@param workspace string?
---@return pseudoclaude.KeepStatus
function M.status(workspace)
  workspace = workspace or require("pseudoclaude.config").workspace()
  return require("pseudoclaude.core").call_as("pseudoclaude.keep.status", "keep_status", workspace)
end

--- `:PseudoKeep`: one sync, told when done.
function M.command()
  local ok, err = pcall(M.now, function(e, report)
    if e then
      return require("pseudoclaude.errors").report(e)
    end
    vim.notify(H.describe(report), (#report.failed > 0) and vim.log.levels.WARN or vim.log.levels.INFO)
  end)
  if not ok then
    require("pseudoclaude.errors").report(err)
  end
end

--- The report as one message.
---@param r pseudoclaude.KeepReport
---@return string
function H.describe(r)
  local text = ("pseudoclaude: other agents' sessions kept: %d copied, %d updated, %d up to date"):format(
    r.copied,
    r.updated,
    r.unchanged
  )
  if r.continued > 0 then
    text = text .. (", %d continued here (left as they are)"):format(r.continued)
  end
  for _, s in ipairs(r.skipped) do
    text = text .. "\nnot copied: " .. s
  end
  for _, f in ipairs(r.failed) do
    text = text .. "\nfailed: " .. f
  end
  return text
end

--- `:checkhealth`'s section: each agent's store, how long the agent keeps sessions, and whether they are kept.
function M.check()
  local health = vim.health
  local cfg = require("pseudoclaude.config").get()
  local keep = cfg.external and cfg.external.keep
  local core = require("pseudoclaude.core")
  if not core.try_load() then
    return health.info("skipped: the native library is not available")
  end
  local ws = require("pseudoclaude.config").workspace()
  -- the stores are listed on a worker thread; the health report waits for it (the main loop runs meanwhile)
  local stores, err
  core.call("keep_stores_async", ws, function(ok, value)
    if ok then
      stores = value
    else
      err = core.plain(value)
    end
  end)
  vim.wait(30000, function()
    return stores ~= nil or err ~= nil
  end, 20)
  if err or not stores then
    return health.warn("cannot read the other agents' stores: " .. tostring(err or "timed out"))
  end
  if keep then
    local s = M.status(ws)
    health.ok(
      ("external.keep is on: %d sync(s), %d folder(s) watched%s"):format(
        s.syncs,
        s.watched,
        s.last and (", last: %d copied, %d updated"):format(s.last.copied, s.last.updated) or ""
      )
    )
  end
  for _, st in ipairs(stores) do
    if not st.found then
      health.info(("%s: no store at %s"):format(st.agent, st.path))
    else
      local line = ("%s: %d session(s) of this workspace in %s; %s"):format(
        st.agent,
        st.sessions,
        st.path,
        st.retention
      )
      if not st.deletes then
        health.ok(line)
      elseif keep then
        health.ok(line .. (" (%s; kept here)"):format(st.deletes))
      else
        health.warn(line .. (": %s, and external.keep is off"):format(st.deletes), {
          "setup({ external = { keep = true } }) keeps a copy of each in .PseudoClaude/ (or :PseudoKeep once)",
        })
      end
    end
  end
end

return M
