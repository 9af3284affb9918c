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
    "broker_ref/protocols/stomp/twins.py": "jmspy.broker_ref.protocols.stomp.twins",
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
