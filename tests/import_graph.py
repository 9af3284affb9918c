"""The package's import graph, read from the sources (for tests/test_layers.py and
tests/test_import_cycles.py).

Every edge counts: ``TYPE_CHECKING`` blocks, imports inside functions, and
``import_module``/``__import__`` by a constant name. A compiled twin
(``cython_ext/NAME.pyx``) is the module ``jmspy._cext.NAME``; Cython is not Python's
grammar, so its import lines are read as text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PACKAGES", "ROOT", "SOURCES", "absolute", "cycles", "graph", "imports", "module_edges"]

ROOT = Path(__file__).resolve().parent.parent

#: source directory -> the package it is installed as (pyproject.toml's package-dir)
PACKAGES = {"jmspy": "jmspy", "transports": "jmspy.transports", "broker_ref": "jmspy.broker_ref"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:-1]]
    if path.name == "__init__.py":
        return ".".join(parts)
    return ".".join([*parts, path.stem.split(".")[0]])


def _sources() -> dict[str, Path]:
    found = {_module_name(p): p for d in PACKAGES for p in (ROOT / d).rglob("*.py")}
    for pyx in (ROOT / "cython_ext").glob("*.pyx"):
        found[f"jmspy._cext.{pyx.stem}"] = pyx
    return found


SOURCES = _sources()


def absolute(module: str, level: int, name: str | None, is_package: bool) -> str:
    """An ``ImportFrom``'s target as an absolute module name."""
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_py(module: str, path: Path) -> Iterator[str]:
    """Every module ``path`` imports, at any place in the file."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = absolute(module, node.level, node.module, is_package)
            yield target
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one
            yield from (f"{target}.{a.name}" for a in node.names
                        if f"{target}.{a.name}" in SOURCES)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


_PYX_IMPORT = re.compile(r"^\s*(?:c?import|from)\s+([\w.]+)", re.MULTILINE)


def imports(module: str) -> set[str]:
    path = SOURCES[module]
    if path.suffix == ".pyx":  # Cython is not Python's grammar: its import lines are
        return set(_PYX_IMPORT.findall(path.read_text()))
    return set(imports_py(module, path))




def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _runtime_nodes(tree: ast.Module) -> list[ast.AST]:
    """Every node of ``tree`` outside ``if TYPE_CHECKING:`` blocks."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                hidden.update(id(n) for n in ast.walk(child))
    return [n for n in ast.walk(tree) if id(n) not in hidden]


def module_edges(module: str, *, type_checking: bool) -> set[str]:
    """The modules of this package ``module`` imports: at run time only, or also under
    ``TYPE_CHECKING``. ``from pkg import sub`` is an edge to ``pkg.sub`` alone when every
    name it takes is a submodule (the package's ``__init__`` runs on any import of one
    of its modules, so an edge to it says nothing; a façade's public name is an edge to
    the package)."""
    path = SOURCES[module]
    found: set[str] = set()
    if path.suffix == ".pyx":
        found = set(_PYX_IMPORT.findall(path.read_text()))
    else:
        tree = ast.parse(path.read_text(), str(path))
        nodes = list(ast.walk(tree)) if type_checking else _runtime_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = absolute(module, node.level, node.module, is_package)
                subs = {f"{target}.{a.name}" for a in node.names
                        if f"{target}.{a.name}" in SOURCES}
                found |= subs
                if len(subs) < len(node.names):
                    found.add(target)
            elif (isinstance(node, ast.Call)
                  and getattr(node.func, "attr", getattr(node.func, "id", ""))
                  in {"import_module", "__import__"}
                  and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                found.add(node.args[0].value)
    edges = set()
    for name in found:
        while name and name not in SOURCES:  # an attribute: the module that holds it
            name = name.rpartition(".")[0]
        if name and name != module:
            edges.add(name)
    return edges


def graph(*, type_checking: bool) -> dict[str, set[str]]:
    return {m: module_edges(m, type_checking=type_checking) for m in SOURCES}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
