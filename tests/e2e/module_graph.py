"""Which source file imports which: Rust paths (`use crate::…`, `super::…`, `self::…`, a child module's name, and
the same paths written inline in code) and Lua `require("pseudoclaude…")`, resolved to the files that define them.

`test_doc.py` fails on a circle between files, on a module's private `_H` table reached from another file
(issue 29: a part never imports the whole it was cut from; `H` stays private to its file) and on an import from a
lower floor of the core to a higher one (issue 40: `FLOORS`, the one definition of the layers). Run it alone to print
the graph: `python3 tests/e2e/module_graph.py`.

Each Rust crate under `src/` is read on its own: the library, and each binary under `src/bin/` (whose `crate::` is
the binary; its `pseudoclaude::` paths are the library's public face, not a file's). A folder's root file (Rust's
`mod.rs`, `lib.rs` and a binary's `main.rs`, Lua's `init.lua`) declares its folder's files, re-exports them
and assembles them into one public face; its edges into its own folder are not counted, so the files in it may use
what the root holds for them (`super::Context`). Every other edge counts: a Lua `chat.lua` beside a `chat/` folder is
a file like any other, so `chat/view.lua` never requires it back.

What counts as an import: every path in a Rust file outside comments, string literals and the `#[cfg(test)]`
code (a file's tests may use anything), and every `require` of a Lua file, a lazy one inside a function too (it
is still a dependency, only a later one: `require("pseudoclaude").workspace()` at run time is a circle with the
package's `init.lua`, which requires that module back). What does not: a `mod name;` declaration (the parent's structure, not a
use) and the integration tests under `tests/` (they only use the crate).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def _strip_rust(text: str) -> str:
    """The code without comments, string and char literals, and without its `#[cfg(test)]` items."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            out.append('""')
            i = n if j < 0 else j + len(end)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # a `#[cfg(test)]` item: the module of unit tests (to its closing brace) or a `mod tests;` file
    while (m := re.search(r"#\[cfg\(test\)\]", code)) is not None:
        j = m.end()
        brace = code.find("{", j)
        semi = code.find(";", j)
        if brace < 0 or (0 <= semi < brace):
            end = semi + 1
        else:
            depth, end = 0, brace
            while end < len(code):
                if code[end] == "{":
                    depth += 1
                elif code[end] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                end += 1
            end += 1
        code = code[: m.start()] + code[end:]
    return code


def _expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d, self}}` -> [`a::b`, `a::c::d`, `a::c`]."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"as\w+$", "", tree) if "as" in tree.split("::")[-1] else tree]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in filter(None, parts):
        if p == "self":
            out.append(prefix.rstrip(":"))
        else:
            out += _expand_use(prefix + p)
    return out


def rust_crates() -> list[tuple[Path, str]]:
    """Each crate under src/ as (its folder, its root file's name): the library, and each binary (`src/bin/NAME/`
    with its `main.rs`, or a lone `src/bin/NAME.rs`), a crate of its own whose `crate::` is itself."""
    src = ROOT / "src"
    crates = [(src, "lib.rs")]
    bins = src / "bin"
    if bins.is_dir():
        for p in sorted(bins.iterdir()):
            if p.is_dir() and (p / "main.rs").exists():
                crates.append((p, "main.rs"))
            elif p.suffix == ".rs":
                crates.append((p, ""))
    return crates


def rust_modules(folder: Path, root: str) -> dict[tuple[str, ...], Path]:
    """Module path -> the file that defines it, in the crate whose root is `folder`/`root` (a lone file when `root`
    is empty; the library's folder without `src/bin`, which holds crates of their own)."""
    if not root:
        return {("crate",): folder}
    mods = {}
    for p in folder.rglob("*.rs"):
        rel = p.relative_to(folder)
        if (root == "lib.rs" and rel.parts[0] == "bin") or p.name.endswith("_tests.rs"):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "mod" or rel == Path(root):
            parts = parts[:-1]
        mods[("crate", *parts)] = p
    return mods


def rust_edges() -> dict[Path, set[Path]]:
    edges: dict[Path, set[Path]] = {}
    for folder, root in rust_crates():
        edges.update(_crate_edges(rust_modules(folder, root)))
    return edges


def _crate_edges(mods: dict[tuple[str, ...], Path]) -> dict[Path, set[Path]]:
    by_file = {f: m for m, f in mods.items()}
    children = {m: {c[-1] for c in mods if len(c) == len(m) + 1 and c[: len(m)] == m} for m in mods}
    edges: dict[Path, set[Path]] = {}
    for f, here in by_file.items():
        code = _strip_rust(f.read_text())
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            paths += _expand_use(m.group(1))
        paths += re.findall(rf"\b(?:crate|super|self)(?:::{_IDENT})+", code)
        paths += [p for p in re.findall(rf"(?<![:\w])({_IDENT}(?:::{_IDENT})+)", code) if p.split("::")[0] in children[here]]
        targets = set()
        for path in paths:
            segs = [s for s in path.split("::") if s]
            if not segs:
                continue
            if segs[0] == "crate":
                base, rest = ("crate",), segs[1:]
            elif segs[0] in ("super", "self"):
                base = here
                while segs and segs[0] in ("super", "self"):
                    base = base[:-1] if segs[0] == "super" else base
                    segs = segs[1:]
                rest = segs
            elif segs[0] in children[here]:
                base, rest = here, segs
            else:
                continue
            mod = tuple(base)
            for s in rest:
                if (*mod, s) in mods:
                    mod = (*mod, s)
                else:
                    break
            if mods[mod] != f:
                targets.add(mods[mod])
        edges[f] = targets
    return edges


def lua_file(name: str) -> Path | None:
    base = ROOT / "lua" / Path(*name.split("."))
    for p in (base.with_suffix(".lua"), base / "init.lua"):
        if p.exists():
            return p
    return None


def lua_edges() -> dict[Path, set[Path]]:
    edges = {}
    for f in [*ROOT.joinpath("lua").rglob("*.lua"), *ROOT.joinpath("plugin").rglob("*.lua")]:
        code = re.sub(r"--[^\n]*", "", f.read_text())
        names = re.findall(r"""require\s*\(?\s*["'](pseudoclaude[\w.]*)["']""", code)
        edges[f] = {t for n in names if (t := lua_file(n)) is not None and t != f}
    return edges


# The floors of the library under src/, lowest first: a file imports its own floor's modules and lower ones, never a
# higher floor's (the log never imports the agent that writes it; the agent never the bridge that exposes it). Each
# top-level module of src/ (a folder or a file) is on exactly one floor: a new module must be placed here.
FLOORS: list[tuple[str, list[str]]] = [
    ("plain data and helpers", ["message", "pairing", "usage", "git", "atomic", "display", "fuzzy", "instructions", "stderr_log"]),
    ("the log", ["session"]),
    (
        "the agent's parts",
        [
            "conversation",
            "provider",
            "tools",
            "mcp",
            "sandbox",
            "rewind",
            "compact",
            "attachment",
            "import",
            "workspaces",
            "worktree",
        ],
    ),
    ("the agent", ["agent"]),
    ("another agent over ACP, logged as ours", ["acp"]),
    ("the bridge to Neovim", ["bridge"]),
]


def floor_of(f: Path) -> int | None:
    """The floor of a library file (None for `lib.rs`, a binary's file, or a module `FLOORS` does not place)."""
    rel = f.relative_to(ROOT / "src").parts
    if rel[0] in ("bin", "lib.rs"):
        return None
    top = rel[0].removesuffix(".rs")
    return next((i for i, (_, mods) in enumerate(FLOORS) if top in mods), None)


def unplaced_modules() -> list[str]:
    """The top-level modules of the library that `FLOORS` does not place."""
    src = ROOT / "src"
    tops = {p.name.removesuffix(".rs") for p in src.iterdir() if p.suffix == ".rs" or p.is_dir()} - {"bin", "lib"}
    placed = {m for _, mods in FLOORS for m in mods}
    return sorted(tops - placed)


def floor_violations(edges: dict[Path, set[Path]]) -> list[str]:
    """Every import from a lower floor to a higher one, as `a (floor) -> b (floor)`."""
    out = []
    for a in sorted(edges):
        fa = floor_of(a) if a.is_relative_to(ROOT / "src") else None
        for b in sorted(edges[a]):
            fb = floor_of(b)
            if fa is not None and fb is not None and fb > fa:
                rel = lambda p: str(p.relative_to(ROOT))  # noqa: E731
                out.append(f"{rel(a)} ({FLOORS[fa][0]}) -> {rel(b)} ({FLOORS[fb][0]})")
    return out


def is_root(f: Path) -> bool:
    """A folder's root: a module's `mod.rs`, the library's `lib.rs`, a binary's `src/bin/NAME/main.rs`, `init.lua`.
    Not the Lua package's own `lua/pseudoclaude/init.lua`: it is the public API, not an assembler of parts; it requires
    the modules (lazily, at run time), so a module that requires `pseudoclaude` back closes a circle with it (issue 40:
    the configuration and the workspace come from `config.lua`)."""
    if f == ROOT / "lua" / "pseudoclaude" / "init.lua":
        return False
    return f.name in ("mod.rs", "lib.rs", "init.lua") or (f.name == "main.rs" and f.parent.parent.name == "bin")


def counted(edges: dict[Path, set[Path]]) -> dict[Path, set[Path]]:
    """`edges` without a root file's edges into its own folder (see the module's docs)."""
    return {a: {b for b in bs if not (is_root(a) and b.is_relative_to(a.parent))} for a, bs in edges.items()}


def circles(edges: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected components of more than one file (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def private_tables_reached() -> list[str]:
    """`x._H` written in a Lua file other than the one whose `H` it is: every `._H` outside a `M._H = H` line."""
    found = []
    for f in [*ROOT.joinpath("lua").rglob("*.lua"), *ROOT.joinpath("plugin").rglob("*.lua")]:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            code = re.sub(r"--.*", "", line)
            if "._H" in code and not re.fullmatch(r"\s*M\._H\s*=\s*H\s*", code):
                found.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    return found


def describe(comp: list[Path], edges: dict[Path, set[Path]]) -> str:
    rel = lambda p: str(p.relative_to(ROOT))  # noqa: E731
    inside = [f"{rel(a)} -> {rel(b)}" for a in comp for b in sorted(edges[a]) if b in comp]
    return "; ".join(inside)


if __name__ == "__main__":
    for name, edges in (("rust", counted(rust_edges())), ("lua", counted(lua_edges()))):
        for comp in circles(edges):
            print(f"{name} circle: {describe(comp, edges)}")
    for line in private_tables_reached():
        print("private table reached:", line)
    for line in floor_violations(rust_edges()):
        print("floor broken:", line)
    for name in unplaced_modules():
        print("no floor:", name)
