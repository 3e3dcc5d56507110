"""Import-architecture guard: the package is layered, and this checks it from source.

    foundation <- core <- storage <- backends <- defs <- definitions <- apps
    (settings,    pure     warehouse  LLM/VLM    dagster  the single      cli, orchestration,
     config)      logic    & spools   clients    assets   Definitions     planning, audit_server)

A module may import only from its own layer or a lower one; the module graph has no cycles; core stays free of
dagster; and only definitions.py reaches into defs (from the package, bench/ and the tests alike, `python -c`
strings included), so the dagster wiring has one entry point. Every import counts: module level, inside
functions and under `if TYPE_CHECKING:` (a type-only import still couples two modules). Source is parsed with
`ast`, never imported. `test_detector_finds_planted_violations` proves the machinery on a synthetic tree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = "prove_assets"
DEFS = PKG + ".defs"  # built, not a literal, so this file does not trip its own string scan

# Layer -> top-level names under prove_assets, lowest first; "" is the package root (every import runs it).
LAYERS: dict[str, tuple[str, ...]] = {
    "foundation": ("", "settings", "config"),  # the root and plain settings: read by everything, import nothing
    "core": ("core",),  # pure domain logic (parse, score, sandbox): testable alone, no I/O framework
    "storage": ("storage",),  # persists core's objects (warehouse, spools, lineage)
    "backends": ("backends",),  # model/endpoint clients built on core, recording to storage
    "defs": ("defs",),  # dagster assets/resources wiring core, storage and backends together
    "definitions": ("definitions",),  # the single Definitions object: the only importer of defs
    "apps": ("orchestration", "planning", "cli", "audit_server"),  # entry points that drive all of the above
}


class Import(NamedTuple):
    file: str  # POSIX path relative to the scanned root
    line: int
    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.importer} -> {self.imported}"


def parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError:  # deliberately broken fixtures (prove_assets_tests/hostile_programs)
        return ast.Module(body=[], type_ignores=[])


def py_files(root: Path, *dirs: str) -> list[Path]:
    return [p for d in dirs for p in sorted((root / d).rglob("*.py"))]


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> list[Import]:
    """Every import in the file, at any depth; `from x import y` is x.y where that is a module, else x."""
    me, rel, found = module_name(path, root), path.relative_to(root).as_posix(), set()
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            found |= {Import(rel, node.lineno, me, alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            up = package[: len(package) - node.level + 1] if node.level else []  # relative: climb from package
            base = ".".join([*up, node.module] if node.module else up)
            for alias in node.names:
                sub = root.joinpath(*base.split("."), alias.name)
                is_mod = sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file()
                found.add(Import(rel, node.lineno, me, f"{base}.{alias.name}" if is_mod else base))
    return sorted(found)


def ours(module: str, prefix: str = PKG) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def package_imports(root: Path = ROOT) -> list[Import]:
    return [i for p in py_files(root, PKG) for i in imports(p, root) if ours(i.imported)]


def layer(module: str) -> tuple[int, str]:
    top = module.split(".")[1] if "." in module else ""
    for rank, (name, tops) in enumerate(LAYERS.items()):
        if top in tops:
            return rank, name
    return len(LAYERS) - 1, f"apps (unlisted {PKG}.{top} defaulted to apps; add it to LAYERS)"


def upward(imps: list[Import]) -> list[str]:
    return [f"{i}  ({lo[1]} -> {hi[1]})" for i in imps if (lo := layer(i.importer))[0] < (hi := layer(i.imported))[0]]


def cycles(imps: list[Import]) -> list[str]:
    graph = nx.DiGraph([(i.importer, i.imported) for i in imps])
    comps = nx.strongly_connected_components(graph)
    loops = sorted(sorted(c) for c in comps if len(c) > 1 or any(graph.has_edge(n, n) for n in c))
    return [
        f"cycle {' <-> '.join(c)}:" + "".join(f"\n    {i}" for i in imps if {i.importer, i.imported} <= set(c))
        for c in loops
    ]


def dagster_in_core(root: Path = ROOT) -> list[str]:
    imps = [i for p in py_files(root, f"{PKG}/core") for i in imports(p, root)]
    return [str(i) for i in imps if i.imported.split(".")[0].startswith("dagster")]


def defs_reach(root: Path = ROOT) -> list[str]:
    """Imports of defs, and string constants naming it (`python -c` snippets), outside defs/ and definitions.py."""
    bad: list[str] = []
    for path in py_files(root, PKG, "bench", f"{PKG}_tests"):
        if path == root / PKG / "definitions.py" or root / PKG / "defs" in path.parents:
            continue
        bad += [str(i) for i in imports(path, root) if ours(i.imported, DEFS)]
        strs = [n for n in ast.walk(parse(path)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        me = f"{path.relative_to(root).as_posix()}:%d {module_name(path, root)} -> string %r"
        bad += [me % (n.lineno, n.value) for n in strs if re.search(re.escape(DEFS) + r"\b", n.value)]
    return bad


def report(title: str, lines: list[str]) -> None:
    if lines:
        pytest.fail(f"{title} ({len(lines)}), file:line importer -> imported:\n" + "\n".join(lines), pytrace=False)


def test_no_import_runs_back_up_a_layer() -> None:
    report("imports from a higher layer (importer layer -> imported layer)", upward(package_imports()))


def test_no_import_cycles() -> None:
    report("import cycles, each with the imports inside it", cycles(package_imports()))


def test_core_has_no_dagster() -> None:
    report(f"{PKG}/core imports dagster", dagster_in_core())


def test_only_definitions_imports_defs() -> None:
    report(f"{DEFS} reached from outside {PKG}/defs/ and {PKG}/definitions.py", defs_reach())


def test_detector_finds_planted_violations(tmp_path: Path) -> None:
    files = {
        "core/a.py": f"from {PKG}.storage import b\n",  # back up a layer, and half of a cycle
        "core/c.py": f"def f():\n    import dagster_pipes\n    return 'from {DEFS}.registry import x'\n",
        "storage/b.py": f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {PKG}.core.a import X\n",
        "cli.py": "def main():\n    from .core import a, c\n",  # legal: function-level and relative
    }
    for name, text in files.items():
        (path := tmp_path / PKG / name).parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    a, b, c = f"{PKG}/core/a.py:1 {PKG}.core.a", f"{PKG}/storage/b.py:3 {PKG}.storage.b", f"{PKG}/core/c.py"
    ab = f"cycle {PKG}.core.a <-> {PKG}.storage.b:\n    {a} -> {PKG}.storage.b\n    {b} -> {PKG}.core.a"
    imps = package_imports(tmp_path)
    assert f"{PKG}/cli.py:2 {PKG}.cli -> {PKG}.core.c" in map(str, imps)
    assert upward(imps) == [f"{a} -> {PKG}.storage.b  (core -> storage)"]
    assert cycles(imps) == [ab]
    assert dagster_in_core(tmp_path) == [f"{c}:2 {PKG}.core.c -> dagster_pipes"]
    assert defs_reach(tmp_path) == [f"{c}:3 {PKG}.core.c -> string 'from {DEFS}.registry import x'"]


MAX_BODY_LINES = 40


def long_bodies(folder: Path) -> list[str]:
    """Asset and asset-check functions whose body (docstring excluded) runs past MAX_BODY_LINES."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            names = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in fn.decorator_list}
            if not names & {"dg.asset", "dg.asset_check", "dg.multi_asset"}:
                continue
            body = fn.body[1:] if ast.get_docstring(fn) else fn.body
            lines = body[-1].end_lineno - body[0].lineno + 1
            if lines > MAX_BODY_LINES:
                found.append(f"{path.name}:{fn.lineno} {fn.name}: {lines} lines")
    return found


def test_asset_bodies_read_core_and_write():
    """An asset body reads its partition, calls a core stage and writes: decisions live in core."""
    assert not long_bodies(ROOT / PKG / "defs"), f"bodies over {MAX_BODY_LINES} lines:\n" + "\n".join(
        long_bodies(ROOT / PKG / "defs")
    )
