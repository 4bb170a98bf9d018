--- Builds the library from the checkout with cargo, in a child process (`vim.system`), and finds the file cargo
--- wrote from its JSON messages: a `CARGO_TARGET_DIR` or `build.target-dir` of the user's puts it elsewhere than
--- `target/release/`, and the installer copies it into place from there.

local M = {}

--- cargo, from $PATH or rustup's default place (a plugin manager's environment may lack ~/.cargo/bin).
---@return string?
function M.find()
  local on_path = vim.fn.exepath("cargo")
  if on_path ~= "" then
    return on_path
  end
  local home = vim.env.CARGO_HOME or ((vim.env.HOME or "") .. "/.cargo")
  local candidate = home .. "/bin/cargo"
  if vim.fn.executable(candidate) == 1 then
    return candidate
  end
  return nil
end

--- What to install when there is no cargo: the whole command, for the message.
M.HOW_TO_INSTALL = "install Rust with rustup (https://rustup.rs): "
  .. "`curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh`, and a C linker (Debian/Ubuntu: "
  .. "`sudo apt install build-essential`; macOS: `xcode-select --install`), then run :PseudoInstall again"

--- The crate feature for Neovim minor `minor` ("0.11" -> "neovim-0-11").
---@param minor string
---@return string
function M.feature(minor)
  return "neovim-" .. minor:gsub("%.", "-")
end

---@class pseudoclaude.CargoResult
---@field ok boolean
---@field library string? The library cargo wrote.
---@field error string?

--- Runs `cargo build --release --lib` for Neovim `minor` in `root`. `on_progress` gets cargo's "Compiling …" lines.
---@param cargo string
---@param root string
---@param minor string
---@param on_progress fun(msg: string)
---@param on_done fun(r: pseudoclaude.CargoResult)
function M.build(cargo, root, minor, on_progress, on_done)
  local libname = "libpseudoclaude." .. require("pseudoclaude.install.state").library_extension()
  local artifact ---@type string?
  local tail = {} ---@type string[]
  local pending = { out = "", err = "" }
  local function lines(which, data, each)
    if not data then
      return
    end
    local text = pending[which] .. data
    local last_nl = text:match(".*()\n")
    if not last_nl then
      pending[which] = text
      return
    end
    pending[which] = text:sub(last_nl + 1)
    for line in text:sub(1, last_nl - 1):gmatch("[^\n]+") do
      each(line)
    end
  end
  local cmd = {
    cargo,
    "build",
    "--release",
    "--lib",
    "--message-format=json-render-diagnostics",
    "--no-default-features",
    "--features",
    M.feature(minor),
  }
  require("pseudoclaude.install.process").run(cmd, {
    cwd = root,
    stdout = function(_, data)
      lines("out", data, function(line)
        if line:find('"compiler-artifact"', 1, true) and line:find(libname, 1, true) then
          local decoded, msg = pcall(vim.json.decode, line)
          for _, f in ipairs(decoded and msg.filenames or {}) do
            if vim.endswith(f, "/" .. libname) then
              artifact = f
            end
          end
        end
      end)
    end,
    stderr = function(_, data)
      lines("err", data, function(line)
        table.insert(tail, line)
        if #tail > 30 then
          table.remove(tail, 1)
        end
        local step = line:match("^%s*(Compiling %S+)")
        if step then
          vim.schedule(function()
            on_progress(step)
          end)
        end
      end)
    end,
  }, function(res)
    if res.code == -1 then
      return on_done({ ok = false, error = ("cannot run %s: %s"):format(cargo, res.stderr) })
    end
    if res.code ~= 0 then
      local said = table.concat(tail, "\n")
      return on_done({
        ok = false,
        error = ("`cargo build --release` failed in %s (exit %s):\n%s"):format(root, tostring(res.code), said),
      })
    end
    if not artifact or not vim.uv.fs_stat(artifact) then
      return on_done({ ok = false, error = "cargo built, but named no " .. libname .. " in its messages" })
    end
    on_done({ ok = true, library = artifact })
  end)
end

return M
