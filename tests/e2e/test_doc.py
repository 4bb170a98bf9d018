"""doc/pseudoclaude.txt: helptags accepts it and the documented tags exist."""

import re
import subprocess
import shutil

import pytest

from conftest import ROOT

REQUIRED_TAGS = [
    "pseudoclaude.txt",
    "pseudoclaude-install",
    "pseudoclaude-config",
    "pseudoclaude-health",
    ":PseudoClaudeVersion",
    ":PseudoMcp",
    "pseudoclaude-mcp",
    "pseudoclaude-config-mcp",
    "pseudoclaude.mcp.status()",
    "pseudoclaude-troubleshooting",
]


@pytest.fixture
def doc_copy(tmp_path):
    root = tmp_path / "doc-root"
    shutil.copytree(ROOT / "doc", root / "doc")
    return root


def test_helptags_and_help(nvim, doc_copy):
    nvim.api.command(f"helptags {doc_copy / 'doc'}")  # raises on E154 (duplicate tag) and the like
    assert nvim.api.vvars["errmsg"] == ""
    tags = {line.split("\t")[0] for line in (doc_copy / "doc" / "tags").read_text().splitlines()}
    missing = [t for t in REQUIRED_TAGS if t not in tags]
    assert not missing
    nvim.api.command(f"set rtp^={doc_copy}")
    for tag in REQUIRED_TAGS:
        nvim.api.command(f"help {tag}")
        assert nvim.api.current.buffer.name == str(doc_copy / "doc" / "pseudoclaude.txt")


def test_every_config_key_is_documented(nvim):
    text = (ROOT / "doc" / "pseudoclaude.txt").read_text()
    keys = nvim.lua(
        "local out = {} for k, v in pairs(require('pseudoclaude.config').defaults) do "
        "if type(v) == 'table' then for sub in pairs(v) do table.insert(out, k .. '.' .. sub) end "
        "else table.insert(out, k) end end return out"
    )
    # nil-valued defaults (provider.model, workspace, ...) are not in the table: check them by name too
    keys += ["provider.model", "provider.base_url", "provider.api_key_env", "workspace"]
    undocumented = [k for k in keys if f"\n{k} " not in text]
    assert not undocumented


def test_the_lua_defaults_are_the_cores(nvim):
    """A default both sides know is defined once in the core; config.lua's table, which the user reads, must
    state the same value (the core applies its own when a key is not sent: the CLI, the tests)."""
    import re

    def const(path: str, pattern: str) -> float:
        m = re.search(pattern, (ROOT / path).read_text())
        assert m, f"{pattern} not found in {path}"
        return float(eval(m.group(1)))  # a constant expression such as `6 * 3600`

    core = {
        "stale_after_hours": const("src/agent/mod.rs", r"DEFAULT_STALE_AFTER: Duration = Duration::from_secs\(([0-9 *]+)\)")
        / 3600,
        "retention_days": const("src/session/retention.rs", r"DEFAULT_DAYS: u32 = ([0-9 *]+);"),
        "spill_threshold": const("src/session/spill.rs", r"DEFAULT_THRESHOLD: usize = ([0-9 *]+);"),
        "mcp_timeout": const("src/mcp/config.rs", r"DEFAULT_TIMEOUT_SECS: f64 = ([0-9.]+);"),
    }
    lua = nvim.lua(
        "local d = require('pseudoclaude.config').defaults "
        "return { stale_after_hours = d.stale_after_hours, retention_days = d.retention_days, "
        "spill_threshold = d.spill_threshold, mcp_timeout = d.mcp.timeout }"
    )
    assert {k: float(v) for k, v in lua.items()} == core


def test_the_code_map_names_every_source_file():
    """ARCHITECTURE.md's code map names every file under src/ and lua/ (a file in a folder of its own, by the
    folder and its name), so a newcomer's map stays true when a file is added or moved."""
    import re

    arch = (ROOT / "ARCHITECTURE.md").read_text()

    def named(name: str) -> bool:
        return re.search(r"[`/]" + re.escape(name) + "`", arch) is not None

    files = sorted([*ROOT.joinpath("src").rglob("*.rs"), *ROOT.joinpath("lua").rglob("*.lua")])
    missing = [str(p.relative_to(ROOT)) for p in files if not named(p.name)]
    assert missing == [], "not in ARCHITECTURE.md's code map: " + ", ".join(missing)


def test_no_import_circle_between_files():
    """Issue 29: files are cut where a concern ends, and their imports point one way: no circle of Rust paths
    (`use crate::…`, `super::…`) or Lua `require`s between files (a folder's root, `mod.rs`/`init.lua`, may
    assemble its own folder; see module_graph.py). Size is not a concern: no line limit."""
    import module_graph

    found = [
        f"{lang}: " + module_graph.describe(comp, edges)
        for lang, edges in (
            ("rust", module_graph.counted(module_graph.rust_edges())),
            ("lua", module_graph.counted(module_graph.lua_edges())),
        )
        for comp in module_graph.circles(edges)
    ]
    assert found == [], "import circles:\n" + "\n".join(found)


def test_the_import_check_sees_a_circle(tmp_path, monkeypatch):
    """The check above can fail: a child that imports its sibling back (in the library and in a binary under
    src/bin/, a crate of its own), a Lua part that requires its controller, and a `_H` reached from another file are
    each found (in a copy of a small tree)."""
    import module_graph

    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "lib.rs").write_text("mod a;\n")
    (tmp_path / "src" / "a" / "mod.rs").write_text("mod x;\nmod y;\npub use x::X;\n")
    (tmp_path / "src" / "a" / "x.rs").write_text("use super::y::Y;\npub struct X;\n")
    (tmp_path / "src" / "a" / "y.rs").write_text("pub struct Y;\nfn f() { let _ = super::x::X; }\n")
    (tmp_path / "src" / "bin" / "tool").mkdir(parents=True)
    (tmp_path / "src" / "bin" / "tool" / "main.rs").write_text("mod p;\nmod q;\nfn main() { p::P; }\n")
    (tmp_path / "src" / "bin" / "tool" / "p.rs").write_text("use crate::q::Q;\npub struct P;\n")
    (tmp_path / "src" / "bin" / "tool" / "q.rs").write_text("pub struct Q;\nfn f() { let _ = crate::p::P; }\n")
    (tmp_path / "lua" / "pseudoclaude" / "p").mkdir(parents=True)
    (tmp_path / "lua" / "pseudoclaude" / "p.lua").write_text('local M = {}\nrequire("pseudoclaude.p.part")\nM._H = H\n')
    (tmp_path / "lua" / "pseudoclaude" / "p" / "part.lua").write_text('return require("pseudoclaude.p")._H\n')
    monkeypatch.setattr(module_graph, "ROOT", tmp_path)
    rust = module_graph.circles(module_graph.counted(module_graph.rust_edges()))
    lua = module_graph.circles(module_graph.counted(module_graph.lua_edges()))
    assert sorted(sorted(p.name for p in c) for c in rust) == [["p.rs", "q.rs"], ["x.rs", "y.rs"]]
    assert [sorted(p.name for p in c) for c in lua] == [["p.lua", "part.lua"]]
    assert [line.split(":")[0] for line in module_graph.private_tables_reached()] == ["lua/pseudoclaude/p/part.lua"]


def test_no_import_from_a_lower_floor_to_a_higher_one():
    """Issue 40: the core's floors (`module_graph.FLOORS`: plain data < the log < the agent's parts < the agent < the
    bridge) are imported downwards only (the log's own words live with the log, not in the agent that writes them),
    and every module of src/ is on a floor."""
    import module_graph

    assert module_graph.floor_violations(module_graph.rust_edges()) == []
    assert module_graph.unplaced_modules() == []


def test_the_floor_check_sees_a_lower_floor_importing_a_higher_one(tmp_path, monkeypatch):
    """The check above can fail: the log importing the agent's constant (as `session/export.rs` once did), a part
    reaching the bridge, and a module no floor places are each found (in a copy of a small tree)."""
    import module_graph

    (tmp_path / "src" / "session").mkdir(parents=True)
    (tmp_path / "src" / "agent").mkdir()
    (tmp_path / "src" / "lib.rs").write_text("pub mod agent;\npub mod bridge;\npub mod session;\npub mod tools;\n")
    (tmp_path / "src" / "session" / "mod.rs").write_text("pub mod export;\n")
    (tmp_path / "src" / "session" / "export.rs").write_text("use crate::agent::runner::NOTE;\n")
    (tmp_path / "src" / "agent" / "mod.rs").write_text("pub mod runner;\nuse crate::session::export;\n")
    (tmp_path / "src" / "agent" / "runner.rs").write_text("pub const NOTE: &str = \"\";\n")
    (tmp_path / "src" / "tools.rs").write_text("fn f() { crate::bridge::export(); }\n")
    (tmp_path / "src" / "bridge.rs").write_text("pub fn export() {}\n")
    (tmp_path / "src" / "newcomer.rs").write_text("\n")
    monkeypatch.setattr(module_graph, "ROOT", tmp_path)
    assert module_graph.floor_violations(module_graph.rust_edges()) == [
        "src/session/export.rs (the log) -> src/agent/runner.rs (the agent)",
        "src/tools.rs (the agent's parts) -> src/bridge.rs (the bridge to Neovim)",
    ]
    assert module_graph.unplaced_modules() == ["newcomer"]


def test_the_import_check_sees_a_module_requiring_the_package_back_at_run_time(tmp_path, monkeypatch):
    """Issue 40: a module that asks `require("pseudoclaude")` for the workspace inside a function closes a circle
    with the package's `init.lua` (which requires it), as 15 modules once did; one that asks `config.lua` does not."""
    import module_graph

    pkg = tmp_path / "lua" / "pseudoclaude"
    (pkg / "chat").mkdir(parents=True)
    (pkg / "init.lua").write_text(
        'local M = {}\nfunction M.open() require("pseudoclaude.chat").open() end\n'
        'function M.workspace() return require("pseudoclaude.config").workspace() end\nreturn M\n'
    )
    (pkg / "config.lua").write_text("local M = {}\nfunction M.workspace() return vim.uv.cwd() end\nreturn M\n")
    (pkg / "chat.lua").write_text('local M = {}\nfunction M.open() require("pseudoclaude.chat.view").draw() end\nreturn M\n')
    (pkg / "chat" / "view.lua").write_text(
        'local M = {}\nfunction M.draw()\n  return require("pseudoclaude").workspace()\nend\nreturn M\n'
    )
    monkeypatch.setattr(module_graph, "ROOT", tmp_path)
    found = [sorted(str(p.relative_to(pkg)) for p in c) for c in module_graph.circles(module_graph.counted(module_graph.lua_edges()))]
    assert found == [["chat.lua", "chat/view.lua", "init.lua"]]
    (pkg / "chat" / "view.lua").write_text(
        'local M = {}\nfunction M.draw()\n  return require("pseudoclaude.config").workspace()\nend\nreturn M\n'
    )
    assert module_graph.circles(module_graph.counted(module_graph.lua_edges())) == []


def test_no_module_reaches_into_another_modules_private_table():
    """`H` is private to its file (STYLE.md, mini.pick): a part gets what it needs as arguments or from the state it is
    handed, never through another module's `_H`."""
    import module_graph

    assert module_graph.private_tables_reached() == []


def renaming_files(root=None) -> list[str]:
    """The files under src/ whose code (tests left out) calls a file system's rename itself: `fs::rename`,
    `libc::rename`/`renameat`/`renameat2`."""
    import module_graph

    root = root or ROOT
    call = re.compile(r"\b(?:fs::rename|libc::rename(?:at2?)?)\s*\(")
    return sorted(
        str(p.relative_to(root))
        for p in (root / "src").rglob("*.rs")
        if call.search(module_graph._strip_rust(p.read_text()))
    )


def test_only_the_logs_disk_layer_and_the_atomic_write_rename_files():
    """Issue 40: one atomic write for the core (`src/atomic.rs`: a temporary name that fits any file name, the data
    synced, the rename, the folder synced where it must survive a power cut); the session log's `Disk` layer
    (`session/contain.rs`, under `session/disk.rs`) is the other place a file is renamed into place."""
    assert renaming_files() == ["src/atomic.rs", "src/session/contain.rs"]


def test_the_rename_check_sees_a_file_that_renames_on_its_own(tmp_path):
    """The check above can fail: a rename of its own in any file is found, one in a file's tests is not."""
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "own.rs").write_text('fn f() { let _ = std::fs::rename("a", "b"); }\n')
    (tmp_path / "src" / "a" / "raw.rs").write_text("fn g() { unsafe { libc::renameat(1, p, 1, q) }; }\n")
    (tmp_path / "src" / "tested.rs").write_text(
        '// fs::rename(a, b) in a comment\n#[cfg(test)]\nmod tests {\n    fn t() { fs::rename("x", "y").unwrap(); }\n}\n'
    )
    assert renaming_files(tmp_path) == ["src/a/own.rs", "src/a/raw.rs"]


def debian_packages() -> list[str]:
    """The commands scripts/ensure-debs makes sure of, in its order (`[command]=package`)."""
    script = (ROOT / "scripts" / "ensure-debs").read_text()
    table = re.search(r"declare -A wanted=\((.*?)\)\n", script, re.S)
    assert table, "scripts/ensure-debs: no `declare -A wanted=(...)` table"
    return re.findall(r"\[([\w-]+)\]=", table.group(1))


def debian_lists(text: str) -> list[str]:
    """Every list of the tests' Debian packages a document gives: `(git, strace, …)`, its spaces made one."""
    flat = re.sub(r"\s+", " ", text)
    return re.findall(r"\((git, strace[^)]*)\)", flat)


def test_every_list_of_the_debian_packages_is_the_scripts():
    """Issue 40: README, the Makefile, ARCHITECTURE and doc/testing.md name the packages scripts/ensure-debs
    installs, all of them, in its order: a package added to the script and not to a document fails here."""
    want = ", ".join(debian_packages())
    for doc in ("README.md", "Makefile", "ARCHITECTURE.md", "doc/testing.md"):
        found = debian_lists((ROOT / doc).read_text())
        assert found and all(f == want for f in found), f"{doc}: {found} instead of ({want})"


def test_the_debian_check_sees_a_list_that_drifted():
    assert debian_lists("installs (git, strace,\n  tmux) when") == ["git, strace, tmux"]
    assert debian_lists("nothing here") == []


def repo_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def missing_files(text: str, files: list[str]) -> list[str]:
    """The source files (`.rs`, `.lua`, `.py`) a document names in backquotes that no file of the repository is: a
    path names the file at that path or ending with it (`float/rows.lua`), a bare name any file of that name."""
    out = []
    for name in sorted(set(re.findall(r"`([\w./-]+\.(?:rs|lua|py))`", text))):
        name = name.lstrip("./")
        if not any(f == name or f.endswith("/" + name) for f in files):
            out.append(name)
    return out


def impl_fns(src: dict[str, str], type_name: str) -> set[str]:
    """The functions and variants `Type::…` may name: those of every `impl … Type`, `trait Type` and `enum Type`."""
    names: set[str] = set()
    head = re.compile(
        rf"^(?:pub(?:\([^)]*\))? )?(?:impl(?:<[^>]*>)?\s+(?:[\w:<>, ]+\s+for\s+)?{type_name}\b[^{{;]*|trait {type_name}\b[^{{;]*|enum {type_name}\b[^{{;]*)\{{",
        re.M,
    )
    for text in src.values():
        for m in head.finditer(text):
            depth, i = 1, m.end()
            while i < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            body = text[m.end() : i]
            names |= set(re.findall(r"\bfn (\w+)", body))
            if m.group(0).lstrip().split()[0:2][-1].startswith("enum") or "enum " in m.group(0):
                names |= set(re.findall(r"^\s*(\w+)\b", body, re.M))
    return names


def missing_functions(text: str, src: dict[str, str]) -> list[str]:
    """The `Type::function` (or `Type::Variant`) a document names in backquotes that the code does not define."""
    out = []
    for type_name, fn in sorted(set(re.findall(r"`([A-Z]\w*)::(\w+)`", text))):
        if fn not in impl_fns(src, type_name):
            out.append(f"{type_name}::{fn}")
    return out


def test_every_file_and_function_the_code_map_names_exists():
    """Issue 40: ARCHITECTURE.md names no source file that is not in the repository (moved or renamed without the
    map) and no `Type::function` the code does not define."""
    src = {str(p): p.read_text() for p in (ROOT / "src").rglob("*.rs")}
    arch = (ROOT / "ARCHITECTURE.md").read_text()
    assert missing_files(arch, repo_files()) == []
    assert missing_functions(arch, src) == []


def test_the_code_map_check_sees_a_file_or_function_that_is_not_there():
    files = ["src/session/mod.rs", "lua/pseudoclaude/float/rows.lua"]
    text = "`mod.rs`, `float/rows.lua`, `picker/rows.lua`, `gone.rs`, `Context::new`, `Context::old`, `State::Running`"
    src = {"a.rs": "pub struct Context;\nimpl Context {\n    pub fn new() -> Context { Context }\n}\n"
           "pub enum State {\n    Running,\n    Stopped,\n}\n"}
    assert missing_files(text, files) == ["gone.rs", "picker/rows.lua"]
    assert missing_functions(text, src) == ["Context::old"]


# Where the code map places a name ---------------------------------------------------------------------------------

# Names of the language, not of the code: never placed.
STD_NAMES = {"Result", "Option", "Vec", "String", "Box", "Arc", "Mutex", "Condvar", "HashMap", "BTreeMap", "pairs()",
             "ipairs()", "socket()"}


def map_placements(text: str, files: list[str]) -> list[tuple[str, str]]:
    """(file, name) for each `Name`, `Type::name` or `name()` ARCHITECTURE.md's code map places in a file: in a
    bullet, the names after a file's mention belong to that file, up to the next file's mention. A file named with
    `'s` (`` `agent/rewind.rs`'s `FileCheckpoints` ``) places the one name that follows there and no other: how the
    map names what a file uses from another. A Lua call with its module (`sessions.list()`) is placed in that module."""
    start = text.find("## Code map")
    end = text.find("\n## ", start + 1)
    out = []
    for bullet in re.split(r"\n(?=\s*- )", text[start:end] if start >= 0 else text):
        head = re.match(r"\s*- `((?:src|lua|tests)/[\w/.-]*)`", bullet)
        hint = head.group(1) if head else ""
        current, once, once_at = None, None, -1
        for tok in re.finditer(r"`([^`]+)`('s)?", bullet):
            name, possessive = tok.group(1), tok.group(2)
            if once is not None and bullet[once_at : tok.start()].strip():
                once = None  # a file's `'s` names the very next name only
            folder = re.fullmatch(r"[\w/-]+/", name)
            if folder and not name.startswith(("src/", "lua/", "tests/")):
                # a folder of the bullet's (`chat/`): what follows is its root's
                root = [hint + name + r for r in ("mod.rs", "init.lua")]
                current, once = next((f for f in root if f in files), None), None
                continue
            if re.fullmatch(r"[\w./-]+\.(?:rs|lua)", name):
                # the file at that path, else the one of that name in the bullet's folder (itself first), else the
                # only one of that name
                hits = [f for f in files if f == name.lstrip("./") or f.endswith("/" + name.lstrip("./"))]
                near = [f for f in hits if hint and f.startswith(hint)]
                file = next(
                    (c[0] for c in ([f for f in near if f == hint + name], near, hits) if len(c) == 1), None
                )
                if possessive:
                    once, once_at = file or "", tok.end()
                else:
                    current, once = file, None
                continue
            if not (
                re.fullmatch(r"[A-Z][a-z]\w*", name)
                or re.fullmatch(r"[A-Z]\w*::\w+", name)
                or re.fullmatch(r"[\w.:]*\w\(\)", name)
            ):
                continue
            module = re.fullmatch(r"(\w+)\.\w+\(\)", name)
            if once is not None:
                place, once = once, None
            elif name.startswith("vim."):
                continue
            elif module and module.group(1) not in ("M", "H"):
                lua = [f"lua/pseudoclaude/{module.group(1)}.lua", f"lua/pseudoclaude/{module.group(1)}/init.lua"]
                lua = ["lua/pseudoclaude/init.lua"] if module.group(1) == "pseudoclaude" else lua
                place = next((f for f in lua if f in files), None)
            else:
                place = current
            if place and name not in STD_NAMES:
                out.append((place, name))
    return out


def defines(text: str, path: str, name: str) -> bool:
    """Whether source file `path` (its `text`) defines `name`: a `Name` as a type, trait, function, constant or LuaCATS
    class; `Type::name` as a function (an `impl` may be cut across files) or a variant of `enum Type`; `name()` as a
    function (`a.b()`: its last part)."""
    if name.endswith("()"):
        fn = re.split(r"[.:]", name[:-2])[-1]
        if path.endswith(".lua"):
            return re.search(rf"function [\w.:]*\b{fn}\s*\(|\b{fn}\s*=\s*function\b", text) is not None
        return re.search(rf"\bfn {fn}\b", text) is not None
    if "::" in name:
        ty, fn = name.split("::")
        enum = re.search(rf"\benum {ty}\b[^{{]*\{{(.*?)\n\}}", text, re.S)
        return re.search(rf"\bfn {fn}\b", text) is not None or (
            enum is not None and re.search(rf"^\s*{fn}\b", enum.group(1), re.M) is not None
        )
    definition = rf"\b(?:struct|enum|trait|type|const|static|fn|mod)\s+{name}\b|---@class [\w.]*\b{name}\b"
    return re.search(definition, text) is not None


def misplaced(text: str, sources: dict[str, str]) -> list[str]:
    """The names the code map places in a file that does not define them (a `Name` defined nowhere is prose: a
    highlight group, an autocommand; a `Type::name` or `name()` defined nowhere is drift all the same)."""
    out = []
    for path, name in map_placements(text, list(sources)):
        if defines(sources[path], path, name):
            continue
        if re.fullmatch(r"[A-Z]\w*", name) and not any(defines(t, p, name) for p, t in sources.items()):
            continue
        out.append(f"{path}: {name}")
    return out


def test_every_name_the_code_map_places_in_a_file_is_defined_there():
    """Issue 48: the map names the function where a behaviour lives (the resume order is `AcpChat::ensure_live`'s,
    in `acp/chat/connect.rs`), and a name it places in a file is defined in that file: moved or renamed without the
    map, this fails."""
    files = [*ROOT.joinpath("src").rglob("*.rs"), *ROOT.joinpath("lua").rglob("*.lua")]
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in files}
    assert misplaced((ROOT / "ARCHITECTURE.md").read_text(), sources) == []


def test_the_placement_check_sees_a_name_that_is_not_in_its_file():
    """The check above can fail: a planted wrong name of each kind is found in its file, a name another file's `'s`
    places is looked for there, and a `Name` defined nowhere is prose."""
    sources = {
        "src/a/one.rs": "pub struct Here;\nimpl Here {\n    pub fn go() {}\n}\npub enum Kind {\n    Big,\n}\n",
        "src/a/two.rs": "pub struct There;\nfn helper() {}\n",
        "lua/pseudoclaude/list.lua": "local M = {}\nfunction M.open() end\nreturn M\n",
    }
    text = (
        "## Code map\n\n- `src/a/`: `one.rs`: `Here`, `Here::go`, `Kind::Big`, `There`, `Here::gone`, `helper()`,"
        " `two.rs`'s `There`, `Kind::Small`, `PseudoClaudeGroup`, `list.open()`, `list.close()`; `two.rs`: `helper()`,"
        " `Here`\n\n## Invariants\n"
    )
    assert misplaced(text, sources) == [
        "src/a/one.rs: There",
        "src/a/one.rs: Here::gone",
        "src/a/one.rs: helper()",
        "src/a/one.rs: Kind::Small",
        "lua/pseudoclaude/list.lua: list.close()",
        "src/a/two.rs: Here",
    ]
