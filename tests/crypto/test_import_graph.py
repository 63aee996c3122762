"""The crypto package's import graph is acyclic, counting every import a module states.

An import inside a function counts too: a deferred import that would form a cycle at module
level is the cycle hidden, not broken (``crypto/params.py`` once imported
``crypto/committee.py`` inside ``for_federation`` while committee imported params at the top).
``crypto/__init__.py`` (the public surface) imports the modules behind it; no module behind it
may import the surface back, which the graph would show as a cycle through ``__init__``.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "crypto"
PACKAGE = "secfpp.crypto"


def _module_name(path: Path, core: Path) -> str:
    parts = list(path.relative_to(core).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def _targets(node: ast.AST, modules: set[str]) -> list[str]:
    """The crypto modules ``node`` imports (a ``from package import name`` names the
    submodule ``package.name`` when there is one, else the package)."""
    if isinstance(node, ast.Import):
        found = []
        for alias in node.names:
            name = alias.name
            while name and name not in modules:
                name = name.rpartition(".")[0]
            found += [name] if name else []
        return found
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        found = []
        for alias in node.names:
            sub = f"{node.module}.{alias.name}"
            if sub in modules:
                found.append(sub)
            elif node.module in modules:
                found.append(node.module)
        return found
    return []


def import_graph(core: Path = CORE) -> dict[str, set[str]]:
    """Module -> the crypto modules it imports anywhere in its source."""
    paths = sorted(core.rglob("*.py"))
    modules = {_module_name(p, core) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        name = _module_name(path, core)
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = {t for node in ast.walk(tree) for t in _targets(node, modules)} - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``None`` (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_crypto_import_graph_is_acyclic() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.params" in graph
    assert f"{PACKAGE}.committee" in graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_checker_finds_a_deferred_import_cycle(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from secfpp.crypto.b import f\n")
    (tmp_path / "b.py").write_text(
        "def f():\n    from secfpp.crypto import a  # deferred\n    return a\n"
    )
    (tmp_path / "c.py").write_text("import secfpp.crypto.a\n")
    graph = import_graph(tmp_path)
    assert graph == {
        PACKAGE: set(),
        f"{PACKAGE}.a": {f"{PACKAGE}.b"},
        f"{PACKAGE}.b": {f"{PACKAGE}.a"},
        f"{PACKAGE}.c": {f"{PACKAGE}.a"},
    }
    assert find_cycle(graph) == [f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.a"]
    assert find_cycle({"x": {"y"}, "y": set()}) is None


def test_public_surface_names_resolve_lazily_to_their_modules() -> None:
    """``crypto/__init__`` (the recipes): ``__all__``, the lazy map and the type checker's
    imports name the same things, each from the module the map says; importing the package
    loads no submodule."""
    crypto = importlib.import_module(PACKAGE)
    home = crypto._HOME
    assert sorted(crypto.__all__) == sorted(home)
    tree = ast.parse((CORE / "__init__.py").read_text())
    typed = {
        alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
        if node.module.startswith(PACKAGE + ".")
    }
    assert typed == {name: f"{PACKAGE}.{module}" for name, module in home.items()}
    for name, module in home.items():
        value = getattr(crypto, name)
        assert value is getattr(importlib.import_module(f"{PACKAGE}.{module}"), name)
    code = (
        "import sys, secfpp.crypto\n"
        "print(sorted(m for m in sys.modules if m.startswith('secfpp.crypto.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
