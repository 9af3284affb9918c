"""broker_ref/core is sans-I/O: no network or concurrency imports, anywhere in it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "broker_ref" / "core"
FORBIDDEN = {
    "socket", "asyncio", "threading", "selectors", "subprocess", "multiprocessing",
    "_thread", "concurrent", "ssl", "socketserver", "http", "urllib",
}  # fmt: skip


def _imported_modules(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value.split(".")[0])
    return found


FILES = sorted(CORE.glob("*.py"))


def test_core_has_files() -> None:
    assert len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_core_imports_no_network_or_concurrency(path: Path) -> None:
    bad = _imported_modules(ast.parse(path.read_text(), str(path))) & FORBIDDEN
    assert not bad, f"{path.name} imports {sorted(bad)}: broker_ref/core must stay sans-I/O"
