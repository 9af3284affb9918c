"""Seams named in the architecture: who may reach what (by reading the sources)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for d in ("jmspy", "transports", "broker_ref", "benchmarks")
           for p in (ROOT / d).rglob("*.py")]


def test_server_connection_uses_no_private_member_of_the_broker() -> None:
    source = (ROOT / "broker_ref" / "core" / "connection.py").read_text()
    assert not re.findall(r"\bbroker\._[a-z]\w*", source)


def test_every_twin_is_loaded_in_one_place() -> None:
    loaders = sorted(
        str(p.relative_to(ROOT)) for p in SOURCES
        if re.search(r"\bload\(\"|_speedups\.load\(|from jmspy\._speedups import load",
                     p.read_text())
    )
    assert loaders == ["jmspy/twins.py"]


def test_twin_loads_are_typed_not_any() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in SOURCES
        if re.search(r":\s*Any\s*=\s*(?:twins\.|_speedups\.)", p.read_text())
    ]
    assert offenders == []
