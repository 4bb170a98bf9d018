""":PseudoInstall, install() and build.lua: the release asset made by scripts/package, served by a local HTTP server
on 127.0.0.1, installed into a clean checkout (a copy of the repository without target/, tagged as the release), then
a chat on the demo; a wrong checksum, a truncated file, a server that stops mid-download and a kill -9 part way each
leave the old library working with a clear message at the next start; no asset falls back to cargo; no cargo says
what to install; the packaged library's glibc symbols and size; :checkhealth after each."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import CARGO_VERSION, LIB_NAME, NVIM, ROOT, Neovim, main_loop_watch, source_build_id, transcript, type_message, wait_for

PACKAGE_DIR = ROOT / "target" / "package" / "assets"


def packaged_build_id(asset: Path) -> str | None:
    m = re.search(rb"pseudoclaude-build-id:([0-9a-f]{64})", asset.read_bytes())
    return m.group(1).decode() if m else None


@pytest.fixture(scope="session")
def packaged() -> Path:
    """This machine's release asset, made by scripts/package once per run (a full release build of its own, into
    target/package: `make e2e` makes it before the tests; reused when built from the checkout's sources)."""
    here = source_build_id()
    found = [p for p in PACKAGE_DIR.glob(f"pseudoclaude-{CARGO_VERSION}-*") if not p.name.endswith(".sha256")]
    if not (len(found) == 1 and packaged_build_id(found[0]) == here):
        out = subprocess.run([str(ROOT / "scripts" / "package"), str(PACKAGE_DIR)], check=True, capture_output=True, text=True)
        found = [Path(out.stdout.strip().splitlines()[-1])]
    asset = found[0]
    assert packaged_build_id(asset) == here, "scripts/package built from other sources than the checkout's"
    return asset


class Server:
    """Serves files over HTTP/1.1 on 127.0.0.1, each path its bytes and how to send them: whole, `short` (a
    Content-Length of what is sent, fewer bytes than the file), `cut` (the full Content-Length, half the bytes,
    then the connection closed) or `stall` (half the bytes, then nothing until `release()`)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.mode: dict[str, str] = {}
        self.requests: list[str] = []
        self.stalled = threading.Event()
        self._release = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(self.path)
                body = server.files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                mode = server.mode.get(self.path, "whole")
                half = len(body) // 2
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(half if mode == "short" else len(body)))
                self.end_headers()
                if mode == "whole":
                    self.wfile.write(body)
                    return
                self.wfile.write(body[:half])
                self.wfile.flush()
                if mode == "stall":
                    server.stalled.set()
                    server._release.wait(60)
                self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/assets"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def publish(self, asset: Path, checksum: str | None = None) -> None:
        body = asset.read_bytes()
        self.files[f"/assets/{asset.name}"] = body
        sha = checksum or hashlib.sha256(body).hexdigest()
        self.files[f"/assets/{asset.name}.sha256"] = f"{sha}  {asset.name}\n".encode()

    def release(self) -> None:
        self._release.set()

    def close(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    s = Server()
    try:
        yield s
    finally:
        s.close()


def clean_checkout(dest: Path, tag: bool = True) -> Path:
    """The repository as a user's plugin manager clones it: the working tree without target/ or .deps/, one commit,
    tagged `v<version>` (a release) unless `tag` is false."""
    ignore = shutil.ignore_patterns("target", ".deps", ".git", ".test-tmp", "__pycache__", "*.pyc")
    shutil.copytree(ROOT, dest, ignore=ignore)
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "release"], check=True)
    if tag:
        subprocess.run([*git, "tag", f"v{CARGO_VERSION}"], check=True)
    return dest


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return clean_checkout(tmp_path / "pseudoclaude.nvim")


def lib_of(root: Path) -> Path:
    return root / "target" / "release" / LIB_NAME


def stamp_of(root: Path) -> Path:
    return root / "target" / "release" / "pseudoclaude-install.json"


def attempt_of(root: Path) -> Path:
    return root / "target" / "release" / "pseudoclaude-install-attempt.json"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install(n: Neovim, timeout: float = 60.0, **opts: Any) -> dict[str, Any]:
    """require("pseudoclaude").install(opts) and its report."""
    n.lua(
        "vim.g.pc_install = vim.NIL local o = ... o.on_done = function(r) vim.g.pc_install = r end "
        "require('pseudoclaude').install(o)",
        opts,
    )
    return wait_for(lambda: n.lua("return vim.g.pc_install"), timeout=timeout, what="the install's report")


def health(n: Neovim) -> str:
    n.api.command("checkhealth pseudoclaude")
    text = "\n".join(n.api.current.buffer[:])
    m = re.search(r"pseudoclaude: native library.*?(?=\npseudoclaude: sessions directory)", text, re.S)
    assert m, text
    return m.group(0)


def messages(n: Neovim) -> str:
    return n.command_output("messages")


def install_good(n: Neovim, server: Server, asset: Path, root: Path) -> dict[str, Any]:
    server.publish(asset)
    report = install(n, url=server.url)
    assert report["ok"] is True and report["from"] == "release", report
    assert sha(lib_of(root)) == sha(asset)
    return report


def test_a_clean_checkout_installs_the_release_asset_then_chats_on_the_demo(packaged, server, checkout, start_nvim):
    assert not (checkout / "target").exists()
    server.publish(packaged)
    n = start_nvim(plugin_root=checkout)
    ok, msg = n.lua("return { pcall(require('pseudoclaude.core').call, 'ping') }")
    assert ok is False and "native library not found" in msg and ":PseudoInstall" in msg, msg
    n.lua("require('pseudoclaude').setup({ install = { url = ... } })", server.url)
    with main_loop_watch(n, "a release install (download, checksum, probe, rename)"):
        n.lua("vim.g.pc_install = vim.NIL")
        n.api.command("PseudoInstall")
        wait_for(lambda: attempt_of(checkout).exists() is False and stamp_of(checkout).exists(), what="the stamp")
    assert server.requests == [f"/assets/{packaged.name}.sha256", f"/assets/{packaged.name}"]
    assert sha(lib_of(checkout)) == sha(packaged)
    assert os.access(lib_of(checkout), os.X_OK)
    stamp = json.loads(stamp_of(checkout).read_text())
    assert stamp["from"] == "release" and stamp["version"] == CARGO_VERSION and stamp["asset"] == packaged.name
    assert stamp["sha256"] == sha(packaged) and stamp["url"] == f"{server.url}/{packaged.name}"
    assert not list((checkout / "target" / "release").glob(".*part*")), "a temporary file left behind"
    assert "installed the native library" in messages(n)
    n.close()

    n = start_nvim(plugin_root=checkout)
    n.lua("require('pseudoclaude').setup({ provider = { name = 'demo' } })")
    type_message(n, "hello there")
    wait_for(lambda: "That was the whole loop" in "\n".join(transcript(n)), what="the demo's answer")
    assert "offline demo provider" in "\n".join(transcript(n))
    report = health(n)
    assert f"OK installed from the release asset {packaged.name} (sha256 {sha(packaged)}, checked)" in report, report
    assert f"OK matches the Lua side: version {CARGO_VERSION}" in report and "ERROR" not in report, report


def test_the_lua_api_reports_the_install(packaged, server, checkout, start_nvim):
    n = start_nvim(plugin_root=checkout)
    report = install_good(n, server, packaged, checkout)
    assert report["version"] == CARGO_VERSION and report.get("error") is None
    # an install while one runs in this Neovim is refused, not interleaved
    server.publish(packaged)
    n.lua("vim.g.a, vim.g.b = vim.NIL, vim.NIL "
          "require('pseudoclaude').install({ url = ..., on_done = function(r) vim.g.a = r end }) "
          "require('pseudoclaude').install({ url = ..., on_done = function(r) vim.g.b = r end })", server.url)
    second = wait_for(lambda: n.lua("return vim.g.b"), what="the second report")
    assert second["ok"] is False and "already running" in second["error"]
    assert wait_for(lambda: n.lua("return vim.g.a"), what="the first report")["ok"] is True


BROKEN = {
    "wrong_checksum": ("checksum", "does not match"),
    "truncated": ("short", "does not match"),
    "cut_mid_download": ("cut", "was cut short"),
}


@pytest.mark.parametrize("damage", list(BROKEN))
def test_a_bad_download_leaves_the_old_library_working(packaged, server, checkout, start_nvim, damage):
    n = start_nvim(plugin_root=checkout)
    install_good(n, server, packaged, checkout)
    before_lib, before_stamp = sha(lib_of(checkout)), stamp_of(checkout).read_bytes()
    how, expected = BROKEN[damage]
    if how == "checksum":
        server.publish(packaged, checksum="0" * 64)
    else:
        server.mode[f"/assets/{packaged.name}"] = how
    report = install(n, url=server.url)
    assert report["ok"] is False and expected in report["error"], report
    assert sha(lib_of(checkout)) == before_lib and stamp_of(checkout).read_bytes() == before_stamp
    assert not list((checkout / "target" / "release").glob(".*part*"))
    assert "the install failed" in messages(n) and expected in messages(n)
    n.close()

    n = start_nvim(plugin_root=checkout)
    said = wait_for(lambda: "failed" in messages(n) and messages(n), what="the start's message")
    assert expected in said and "run :PseudoInstall" in said, said
    assert n.lua("return require('pseudoclaude.core').call('ping')") == "pong"
    report = health(n)
    assert "OK installed from the release asset" in report and "ERROR the install of the native library" in report
    assert expected in report, report
    # fixed at the source: the next install succeeds and the start is quiet again
    server.mode.clear()
    server.publish(packaged)
    install_good(n, server, packaged, checkout)
    assert not attempt_of(checkout).exists()
    n.close()
    n = start_nvim(plugin_root=checkout)
    assert "install" not in messages(n)
    assert "ERROR" not in health(n)


def test_kill_9_during_the_install_leaves_the_old_library_and_says_so_at_the_next_start(packaged, server, checkout, start_nvim):
    n = start_nvim(plugin_root=checkout)
    install_good(n, server, packaged, checkout)
    before_lib, before_stamp = sha(lib_of(checkout)), stamp_of(checkout).read_bytes()
    n.close()
    server.mode[f"/assets/{packaged.name}"] = "stall"
    n = start_nvim(plugin_root=checkout)
    n.lua("require('pseudoclaude').install({ url = ... })", server.url)
    assert server.stalled.wait(30), "the download never started"
    killed = n.proc.pid
    os.kill(killed, signal.SIGKILL)
    n.proc.wait()
    server.release()  # its curl, orphaned, ends with the connection
    assert sha(lib_of(checkout)) == before_lib and stamp_of(checkout).read_bytes() == before_stamp
    assert json.loads(attempt_of(checkout).read_text())["status"] == "running"

    n = start_nvim(plugin_root=checkout)
    said = wait_for(lambda: "interrupted" in messages(n) and messages(n), what="the start's message")
    assert "run :PseudoInstall" in said and f"pid {killed}" in said, said
    assert n.lua("return require('pseudoclaude.core').call('ping')") == "pong"
    assert "was interrupted" in health(n)
    server.mode.clear()
    install_good(n, server, packaged, checkout)
    assert not list((checkout / "target" / "release").glob(".*part*")), "the killed install's temporary file is left"
    assert "ERROR" not in health(n)


def test_quitting_during_the_install_stops_its_download_and_the_next_start_says_so(packaged, server, checkout, start_nvim):
    n = start_nvim(plugin_root=checkout)
    install_good(n, server, packaged, checkout)
    before = sha(lib_of(checkout))
    server.mode[f"/assets/{packaged.name}"] = "stall"
    n.lua("require('pseudoclaude').install({ url = ... })", server.url)
    assert server.stalled.wait(30), "the download never started"
    url = f"{server.url}/{packaged.name}"
    assert subprocess.run(["pgrep", "-f", url], capture_output=True).returncode == 0, "no curl downloading"
    n.close()  # :qall! while curl waits on the stalled server
    wait_for(lambda: subprocess.run(["pgrep", "-f", url], capture_output=True).returncode == 1, what="curl stopped")
    assert sha(lib_of(checkout)) == before
    n = start_nvim(plugin_root=checkout)
    said = wait_for(lambda: "interrupted" in messages(n) and messages(n), what="the start's message")
    assert "run :PseudoInstall" in said


def without_cargo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH with what the installer uses (git, curl, sha256sum) but no cargo; rustup's place emptied too."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "curl", "sha256sum", "sh"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "no-cargo"))


def test_without_cargo_a_checkout_between_releases_says_what_to_install(tmp_path, monkeypatch, server, start_nvim):
    root = clean_checkout(tmp_path / "plugin", tag=False)
    without_cargo(monkeypatch, tmp_path)
    n = start_nvim(plugin_root=root)
    report = install(n, url=server.url)
    assert report["ok"] is False and report["from"] == "source", report
    assert f"not the release v{CARGO_VERSION}" in report["error"] and "rustup" in report["error"], report
    assert "https://sh.rustup.rs" in report["error"]
    assert server.requests == [], "a commit between releases downloaded a release asset"
    assert not lib_of(root).exists() and not stamp_of(root).exists()
    assert "rustup" in health(n)


def test_no_asset_for_the_platform_falls_back_to_cargo(packaged, server, checkout, start_nvim, monkeypatch):
    # the checkout's build shares the repository's compiled dependencies (only the crate is built again)
    monkeypatch.setenv("CARGO_TARGET_DIR", str(ROOT / "target"))
    n = start_nvim(plugin_root=checkout)
    with main_loop_watch(n, "a build from source"):
        report = install(n, url=server.url, timeout=1800)
    assert report["ok"] is True and report["from"] == "source", report
    assert "no release asset" in report["note"] and "404" in report["note"]
    assert server.requests == [f"/assets/{packaged.name}.sha256"]
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    stamp = json.loads(stamp_of(checkout).read_text())
    assert stamp["from"] == "source" and stamp["commit"] == head
    n.close()
    n = start_nvim(plugin_root=checkout)
    assert n.lua("return require('pseudoclaude.core').call('build_id')") == source_build_id(checkout)
    assert f"OK installed from a local build of commit {head}" in health(n)


def test_build_lua_installs_and_waits_from_the_shell(packaged, server, checkout):
    """`nvim -l build.lua URL`, as a plain git clone (or another manager's hook) runs it: done when it returns."""
    server.publish(packaged)
    out = subprocess.run([NVIM, "-l", "build.lua", server.url], cwd=checkout, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    assert f"native library {CARGO_VERSION} installed (from release)" in out.stdout + out.stderr
    assert sha(lib_of(checkout)) == sha(packaged)
    server.publish(packaged, checksum="1" * 64)
    out = subprocess.run([NVIM, "-l", "build.lua", server.url], cwd=checkout, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "does not match" in out.stdout + out.stderr
    assert sha(lib_of(checkout)) == sha(packaged)


def test_the_packaged_library_needs_no_glibc_after_2_28_and_is_small(packaged):
    assert packaged.name == f"pseudoclaude-{CARGO_VERSION}-{os.uname().machine}-unknown-linux-gnu-nvim0.11.so"
    sums = (packaged.parent / (packaged.name + ".sha256")).read_text()
    assert sums == f"{sha(packaged)}  {packaged.name}\n"
    symbols = subprocess.run(["objdump", "-T", str(packaged)], check=True, capture_output=True, text=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9]+(?:\.[0-9]+)+)", symbols)}
    assert versions, "objdump -T names no glibc symbol: not a dynamically linked library?"
    assert max(versions) <= (2, 28), sorted(versions)
    # 14.6 MiB before the readers of other agents' stores; opencode's SQLite (bundled by rusqlite) made it 17.0 MiB,
    # 16.1 MiB with SQLite compiled for size and without the extensions we never call (Cargo.toml, .cargo/config.toml):
    # doc/benchmarks.md's goal of 15 MiB is not met; this bound catches a debug build or a doubled dependency
    assert packaged.stat().st_size < 17 * 1024 * 1024
    assert "SYMBOL TABLE:\nno symbols" in subprocess.run(["objdump", "-t", str(packaged)], capture_output=True, text=True).stdout


def test_the_release_workflow_builds_every_platform_for_every_neovim_minor(nvim):
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    minors = nvim.lua("return require('pseudoclaude.install.state').NVIM_MINORS")
    listed = re.search(r"^\s+nvim: \[(.*)\]$", workflow, re.M)
    assert listed and re.findall(r'"([0-9.]+)"', listed.group(1)) == minors
    cargo = (ROOT / "Cargo.toml").read_text()
    for minor in minors:  # each minor is a crate feature the build picks
        assert f'neovim-{minor.replace(".", "-")} = ["nvim-oxi/neovim-{minor.replace(".", "-")}"]' in cargo
    for triple in ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "aarch64-apple-darwin", "x86_64-apple-darwin"):
        assert f"target: {triple} }}" in workflow
    assert "run: scripts/package dist" in workflow and "--clobber" in workflow


def test_a_wrong_install_option_is_named_and_nothing_is_touched(checkout, start_nvim):
    n = start_nvim(plugin_root=checkout)
    ok, msg = n.lua("return { pcall(require('pseudoclaude').setup, { install = { url = 'nope' } }) }")
    assert ok is False and "install.url: expected a URL" in msg, msg
    ok, msg = n.lua("return { pcall(require('pseudoclaude').setup, { install = { from = 'release' } }) }")
    assert ok is False and 'install.from: expected "auto" or "source"' in msg, msg
    report = install(n, **{"from": "binary"})
    assert report["ok"] is False and 'install.from: expected "auto" or "source", got binary' in report["error"]
    assert not (checkout / "target").exists(), "a refused install wrote something"
