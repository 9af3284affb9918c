"""The sans-I/O modules compute; they never touch sockets, threads or processes.

One police test for both layers (asyncpg polices its sources the same way): the client's
codecs, selector and flow state, and the whole broker core. An import of a forbidden
module anywhere in a file, or an ``import_module``/``__import__`` of one by name, fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SANS_IO = [
    "jmspy/errors.py",
    "jmspy/message.py",
    "jmspy/destinations.py",
    "jmspy/properties.py",
    "jmspy/prefetch_protocol.py",
    "jmspy/stomp_frames.py",
    "jmspy/selector",
    "jmspy/_pure",
    "transports/vm_convert.py",
    "transports/vm_send.py",
    "broker_ref/core",
    "broker_ref/protocols/stomp/message_frame.py",
]
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


def _files() -> list[Path]:
    files: list[Path] = []
    for entry in SANS_IO:
        target = ROOT / entry
        found = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        assert found and all(f.exists() for f in found), f"{entry}: update SANS_IO"
        files.extend(found)
    return files


FILES = _files()


def test_the_police_sees_both_layers() -> None:
    assert sum("broker_ref/core" in str(f) for f in FILES) >= 5
    assert sum("/jmspy/" in str(f) for f in FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_sans_io_module_imports_no_network_or_concurrency(path: Path) -> None:
    bad = _imported_modules(ast.parse(path.read_text(), str(path))) & FORBIDDEN
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: it must stay sans-I/O"
