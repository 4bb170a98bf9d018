--- Downloads a release asset and its `.sha256` with curl (which honours HTTPS_PROXY, NO_PROXY and the system's
--- certificates by itself) and checks the asset against it. Everything runs in child processes through
--- `vim.system`: the main loop never waits on the network or on hashing 10 MB.

local M = {}

--- curl exit codes that mean "no connection at all" (could not resolve, connect, or a proxy refused): the caller
--- falls back to a build from source, as for a missing asset.
local OFFLINE = { [5] = true, [6] = true, [7] = true, [28] = true, [35] = true, [47] = true, [97] = true }

---@alias pseudoclaude.FetchResult {ok: boolean, fallback: boolean?, error: string?, sha256: string?}

---@param cmd string[]
---@param on_exit fun(res: vim.SystemCompleted)
local function run(cmd, on_exit)
  require("pseudoclaude.install.process").run(cmd, { text = true }, on_exit)
end

---@param s string?
---@return string
local function last_line(s)
  local lines = vim.split(vim.trim(s or ""), "\n", { plain = true })
  return lines[#lines] or ""
end

--- curl's arguments: fail on an HTTP error, follow redirects (GitHub's assets are redirects), give up on a
--- connection that moves less than 1 KiB in 30 s (a server that hangs mid-download) rather than wait forever.
---@param url string
---@param out string
---@return string[]
local function curl(url, out)
  return {
    "curl",
    "--fail",
    "--location",
    "--silent",
    "--show-error",
    "--connect-timeout",
    "20",
    "--speed-limit",
    "1024",
    "--speed-time",
    "30",
    "--output",
    out,
    url,
  }
end

--- The failure of a curl run, as a result: a missing file (HTTP 404) or no connection falls back to source.
---@param res vim.SystemCompleted
---@param url string
---@return pseudoclaude.FetchResult
local function curl_failure(res, url)
  local said = last_line(res.stderr)
  if res.code == -1 then
    return { ok = false, fallback = true, error = "curl is not installed (" .. said .. ")" }
  end
  if res.code == 22 and said:find("404", 1, true) then
    return { ok = false, fallback = true, error = ("no release asset at %s (HTTP 404)"):format(url) }
  end
  if OFFLINE[res.code] then
    return { ok = false, fallback = true, error = ("cannot reach %s (%s)"):format(url, said) }
  end
  if res.code == 18 or res.code == 56 or res.code == 92 then
    return { ok = false, error = ("the download of %s was cut short (%s)"):format(url, said) }
  end
  return { ok = false, error = ("the download of %s failed: %s (curl exit %d)"):format(url, said, res.code) }
end

--- The SHA-256 of `path`, from the first of sha256sum, shasum and openssl that is installed.
---@param path string
---@param on_done fun(hex: string?, err: string?)
function M.sha256(path, on_done)
  local tools = {
    { "sha256sum", "--", path },
    { "shasum", "-a", "256", "--", path },
    { "openssl", "dgst", "-sha256", "-r", path },
  }
  for _, cmd in ipairs(tools) do
    if vim.fn.executable(cmd[1]) == 1 then
      return run(cmd, function(res)
        local hex = res.code == 0 and res.stdout:match("^(%x+)") or nil
        if hex and #hex == 64 then
          on_done(hex:lower())
        else
          on_done(nil, ("%s failed: %s"):format(cmd[1], last_line(res.stderr)))
        end
      end)
    end
  end
  on_done(nil, "cannot check the checksum: none of sha256sum, shasum or openssl is installed")
end

--- Downloads `<base>/<asset>.sha256`, then `<base>/<asset>` into `out`, and checks it. `out` is left for the caller
--- to remove on failure or to rename into place on success.
---@param base string
---@param asset string
---@param out string
---@param on_done fun(r: pseudoclaude.FetchResult)
function M.asset(base, asset, out, on_done)
  local url = base:gsub("/+$", "") .. "/" .. asset
  local sum_file = out .. ".sha256"
  run(curl(url .. ".sha256", sum_file), function(res)
    if res.code ~= 0 then
      os.remove(sum_file)
      return on_done(curl_failure(res, url .. ".sha256"))
    end
    local f = io.open(sum_file, "rb")
    local text = f and f:read("*a") or ""
    if f then
      f:close()
    end
    os.remove(sum_file)
    local expected = text:match("^%s*(%x+)")
    if not expected or #expected ~= 64 then
      return on_done({ ok = false, error = ("%s.sha256 holds no SHA-256 (%q)"):format(url, text:sub(1, 80)) })
    end
    expected = expected:lower()
    run(curl(url, out), function(got)
      if got.code ~= 0 then
        return on_done(curl_failure(got, url))
      end
      M.sha256(out, function(hex, err)
        if not hex then
          return on_done({ ok = false, error = err })
        end
        if hex ~= expected then
          local size = (vim.uv.fs_stat(out) or {}).size or 0
          return on_done({
            ok = false,
            error = ("the checksum of %s does not match (sha256 %s, %d bytes; the release says %s): a truncated or altered download"):format(
              url,
              hex,
              size,
              expected
            ),
          })
        end
        on_done({ ok = true, sha256 = hex })
      end)
    end)
  end)
end

return M
