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


#: each layer's twin registry (module source -> its import name)
REGISTRIES = {
    "jmspy/twins.py": "jmspy.twins",
    "jmspy/api_twins.py": "jmspy.api_twins",
    "broker_ref/core/twins.py": "jmspy.broker_ref.core.twins",
    "broker_ref/core/run_twins.py": "jmspy.broker_ref.core.run_twins",
    "transports/twins.py": "jmspy.transports.twins",
}


def test_every_twin_is_loaded_by_its_layers_registry_and_only_there() -> None:
    loaders = sorted(
        str(p.relative_to(ROOT)) for p in SOURCES
        if re.search(r"\bload\(\"|_speedups\.(?:load|registry)\(|"
                     r"from jmspy\._speedups import (?:load|registry)", p.read_text())
    )
    assert loaders == sorted(REGISTRIES)


def test_each_twin_is_in_exactly_one_registry_and_every_twin_is_in_one() -> None:
    import importlib

    names: list[str] = []
    for module in REGISTRIES.values():
        names += importlib.import_module(module).__all__
    pyx = sorted(p.stem for p in (ROOT / "cython_ext").glob("*.pyx"))
    assert sorted(names) == pyx


def test_twin_loads_are_typed_not_any() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in SOURCES
        if re.search(r":\s*Any\s*=\s*(?:twins\.|_speedups\.)", p.read_text())
    ]
    assert offenders == []


def test_the_twin_ledger_has_a_row_for_every_twin_and_only_for_twins() -> None:
    """benchmarks/README.md's ledger keeps a row (its figure and its decision) per twin:
    a twin added without one, or a row left for a twin retired, fails here."""
    import importlib

    readme = (ROOT / "benchmarks" / "README.md").read_text()
    ledger = readme.split("## The twin ledger", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in ledger.splitlines()
            if line.startswith("| ") and not line.startswith("| twin") and "---" not in line]
    named = {name for row in rows for name in re.findall(r"\b[a-z][a-z_]+\b", row)
             if "_" in name or name in {"dispatch", "lifecycle", "prefetch", "records"}}
    twins = {name for module in REGISTRIES.values()
             for name in importlib.import_module(module).__all__}
    assert twins - named == set(), f"twins without a ledger row: {sorted(twins - named)}"
    assert named - twins == set(), f"ledger rows for no twin: {sorted(named - twins)}"
