"""No import cycles: the modules form a stack, each importing only modules below it.

Every edge counts: imports outside ``if TYPE_CHECKING:`` (function-level ones included, in
both builds: the compiled twins' ``.pyx`` import lines count) and, at type level, the
``TYPE_CHECKING`` ones too. There is no cycle at either level: the last knot, the broker
core's queue with its parts and records, was cut by Protocols of what each lower module
calls on the one above (``QueueRef`` in the records, ``RunQueue`` in the queue's run,
``QueueOps`` for the queue's parts), as the client's objects and the broker's connections
were (jmspy/owners.py, jmspy/session_connection.py, broker_ref/core/connection_broker.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from import_graph import SOURCES, cycles, graph


def test_the_graph_sees_every_package_of_the_install() -> None:
    assert {"jmspy.session", "jmspy.transports.vm", "jmspy.broker_ref.core.queue",
            "jmspy._cext.stomp_codec", "jmspy.wire.error_codes"} <= set(SOURCES)


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_another_that_imports_it_back_at_run_time() -> None:
    found = cycles(graph(type_checking=False))
    assert found == [], f"run-time import cycles: {found}"


def test_no_module_imports_another_that_imports_it_back_at_type_level() -> None:
    """Annotations count: a module typed on a class above it is a cycle the type checker
    has to see through, and the next import moved out of ``TYPE_CHECKING`` makes it a
    run-time one."""
    found = cycles(graph(type_checking=True))
    assert found == [], f"type-level import cycles: {found}"


def test_importing_jmspy_loads_only_its_facade(tmp_path: Path) -> None:
    """``import jmspy`` runs the checkout guard, the build choice and the façade, and
    nothing else: the public names load with their first use."""
    probe = ("import json, sys, jmspy; "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('jmspy'))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=os.environ.copy(),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        '["jmspy",', '"jmspy._checkout",', '"jmspy._lazy",', '"jmspy._speedups"]']


def test_every_public_name_of_a_facade_loads_from_the_module_it_names() -> None:
    import importlib

    for package in ("jmspy", "jmspy.broker_ref.core", "jmspy.broker_ref.protocols.stomp"):
        facade = importlib.import_module(package)
        assert set(facade.__all__) <= set(dir(facade))
        for name in facade.__all__:
            value = getattr(facade, name)
            assert value is not None, f"{package}.{name}"
        try:
            facade.NoSuchName  # noqa: B018
        except AttributeError as exc:
            assert "NoSuchName" in str(exc)
        else:
            raise AssertionError(f"{package}.NoSuchName did not raise AttributeError")


def test_the_architecture_page_names_real_places() -> None:
    """docs/architecture.md draws the stack: every file or folder it names exists."""
    import re

    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:jmspy|broker_ref|transports|tests)/[\w/.*]*)`", page))
    assert len(named) >= 10
    missing = sorted(p for p in named if "*" not in p and not (root / p).exists())
    assert not missing, f"docs/architecture.md names what is not there: {missing}"


def test_any_twin_imported_first_leaves_the_broker_and_transports_whole(
        tmp_path: Path) -> None:
    """With the packages' façades importing nothing, importing any twin first (the
    compiled twins import the broker core while they load) cannot catch a module half
    made: every twin function the broker and the transports bind at import is there."""
    from jmspy import _speedups

    names = ["queue_run", "records", "vm_convert", "vm_send",
             "message_record", "dispatch"]
    probe = """
import importlib, sys
from jmspy import _speedups
_speedups.load(sys.argv[1])
for module in ("jmspy.broker_ref.core.queue", "jmspy.broker_ref.core.connection",
               "jmspy.broker_ref.protocols.stomp.protocol", "jmspy.transports.vm",
               "jmspy.transports.stomp.transport", "jmspy.session"):
    importlib.import_module(module)
run = _speedups.load("queue_run")
missing = [n for n in ("enqueue", "route_fast", "dispatch_fast", "acknowledge_tags",
                       "tags_known_once") if not hasattr(run, n)]
print("whole" if not missing else missing)
"""
    for name in names:
        done = subprocess.run([sys.executable, "-c", probe, name], cwd=tmp_path,
                              env=os.environ.copy(), capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, (name, done.stderr[-2000:])
        assert done.stdout.split() == ["whole"], (name, done.stdout)
    assert _speedups.PURE_PYTHON or all(
        _speedups.is_extension(_speedups.load(n)) for n in names)
