"""The stack of layers points down: what each layer may import, read from the sources and
seen in a fresh interpreter.

Bottom to top: ``jmspy.wire`` (the vocabulary both ends share: header names, error codes,
kinds) imports only itself and the standard library; the client and its transports use
the broker only through ``vm://`` (``transports/vm*``); the CLIs, which start a broker,
and the broker itself are above. Every edge counts: ``TYPE_CHECKING`` blocks, imports
inside functions, and ``import_module``/``__import__`` by a constant name. A compiled twin
(``cython_ext/NAME.pyx``) sits in the layer of its pure twin.

:data:`BROKER_IMPORT_EXCEPTIONS` names the modules that still import the broker from
outside it, each with the reason; the list may only shrink (an entry that no longer
imports the broker fails, so it is removed when its module moves).

The fresh-interpreter tests run in the suite's build (``JMSPY_PUREPYTHON`` is inherited),
so both builds are checked: the compiled twins can import modules their pure twins do not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from import_graph import SOURCES, absolute, imports

from jmspy import _speedups

BROKER = "jmspy.broker_ref"
WIRE = "jmspy.wire"

#: Modules outside the broker, ``transports/vm*`` and the CLIs that still import the
#: broker, and why. Remove an entry when its module stops; never add one to pass a test.
BROKER_IMPORT_EXCEPTIONS: dict[str, str] = {}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _layer_of(module: str) -> str:
    """Where a module sits for the broker rule: a compiled twin where its pure twin does."""
    if module.startswith("jmspy._cext."):
        name = module.rsplit(".", 1)[1]
        pure = _speedups.PURE_MODULES.get(name, f"jmspy._pure.{name}")
        return pure if pure in SOURCES else module
    return module


def _may_import_broker(module: str) -> bool:
    home = _layer_of(module)
    return (
        _within(home, BROKER)
        or home.startswith("jmspy.transports.vm")
        or re.fullmatch(r"jmspy\.cli\w*", home) is not None
    )


def test_the_sources_are_seen_with_their_installed_names() -> None:
    assert {"jmspy.wire", "jmspy.transports.stomp.transport", "jmspy.broker_ref.core.queue",
            "jmspy._cext.queue_run", "jmspy.spark.sink"} <= set(SOURCES)
    assert absolute("jmspy.transports.stomp.transport", 2, "broker_errors", False) == (
        "jmspy.transports.broker_errors")
    assert "jmspy.broker_ref.core.errors" in imports("jmspy.transports.vm_errors")


def test_the_wire_package_imports_only_itself_and_the_standard_library() -> None:
    wire = [m for m in SOURCES if _within(m, WIRE)]
    assert len(wire) >= 4
    bad = {
        f"{m} imports {name}"
        for m in wire for name in imports(m)
        if not _within(name, WIRE)
        and name.split(".")[0] not in sys.stdlib_module_names | {"__future__"}
    }
    assert not bad, f"jmspy.wire is the bottom layer: {sorted(bad)}"


def test_only_the_broker_vm_and_the_clis_import_the_broker() -> None:
    importers = {m for m in SOURCES if any(_within(n, BROKER) for n in imports(m))}
    unexpected = sorted(m for m in importers
                        if not _may_import_broker(m) and m not in BROKER_IMPORT_EXCEPTIONS)
    assert not unexpected, (
        f"{unexpected} import {BROKER}: only the broker, transports/vm* and the CLIs may; "
        "take shared names from jmspy.wire instead")
    stale = sorted(set(BROKER_IMPORT_EXCEPTIONS) - importers)
    assert not stale, f"{stale} no longer import the broker: remove them from the exceptions"


# -- a fresh interpreter per layer: what importing it loads -----------------------------

_PROBE = """
import json, sys
{setup}
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(setup: str, tmp_path: Path) -> set[str]:
    """The modules loaded by running ``setup`` in a new interpreter of this build."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(setup=setup)],
        cwd=tmp_path,  # not the checkout, whose source folders would shadow the install
        env=os.environ.copy(), capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded: set[str] = set(json.loads(done.stdout.splitlines()[-1]))
    return loaded


def _broker_and_loop(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded
                  if _within(m, BROKER) or m.split(".")[0] in {"sqlite3", "asyncio"})


def test_the_wire_layer_loads_nothing_of_jmspy_outside_it(tmp_path: Path) -> None:
    loaded = _loaded("import jmspy.wire", tmp_path)
    assert "jmspy.wire.error_codes" in loaded
    # the package's own façade (jmspy/__init__.py) loads nothing but these
    facade = {"jmspy", "jmspy._checkout", "jmspy._lazy", "jmspy._speedups"}
    outside = sorted(m for m in loaded if _within(m, "jmspy") and m not in facade
                     and not _within(m, WIRE))
    assert not outside, f"import jmspy.wire loaded {outside}"


def _client_loaded(scheme: str, tmp_path: Path) -> set[str]:
    """What a fresh interpreter holds once it has built a ``scheme://`` factory and
    transport (not connected: ``open()`` connects)."""
    setup = f"""
import jmspy.transports.{scheme}.transport
from jmspy import ConnectionFactory
from jmspy.transport import create_transport
ConnectionFactory("{scheme}://127.0.0.1:1")
create_transport("{scheme}://127.0.0.1:1", {{}})
"""
    loaded = _loaded(setup, tmp_path)
    assert f"jmspy.transports.{scheme}.transport" in loaded
    return loaded


def test_a_stomp_client_loads_no_broker_no_sqlite_and_no_asyncio(tmp_path: Path) -> None:
    loaded = _client_loaded("stomp", tmp_path)
    # the new interpreter runs this suite's build: the compiled codec, or the pure one
    assert ("jmspy._cext.stomp_codec" in loaded) is not _speedups.PURE_PYTHON
    assert _broker_and_loop(loaded) == []


def test_an_mqtt_client_loads_no_broker_no_sqlite_and_no_asyncio(tmp_path: Path) -> None:
    loaded = _client_loaded("mqtt", tmp_path)
    assert _broker_and_loop(loaded) == []


def test_the_asyncio_face_loads_no_broker_and_the_facade_does_not_load_it(
        tmp_path: Path) -> None:
    """jmspy.aio is an application-layer face over the client core: it loads the core
    (and asyncio), never the broker, and ``import jmspy`` does not load the face."""
    loaded = _loaded("import jmspy.aio\nfrom jmspy.aio import AsyncConnectionFactory, "
                     "AsyncRequestor", tmp_path)
    assert {"jmspy.aio.connection", "jmspy.aio.requestor", "jmspy.factory"} <= loaded
    assert sorted(m for m in loaded if _within(m, BROKER)) == []
    facade = _loaded("import jmspy\nfrom jmspy import ConnectionFactory", tmp_path)
    assert sorted(m for m in facade if _within(m, "jmspy.aio")) == []


def test_the_spark_package_loads_no_broker(tmp_path: Path) -> None:
    loaded = _loaded("import jmspy.spark", tmp_path)
    assert "jmspy.spark" in loaded
    assert sorted(m for m in loaded if _within(m, BROKER)) == []


@pytest.mark.skipif(importlib.util.find_spec("pyspark") is None,
                    reason="pyspark is not installed (pip install 'jmspy[spark]'): the "
                    "sink imports it at module level")
def test_the_spark_sink_loads_no_broker(tmp_path: Path) -> None:
    loaded = _loaded("import jmspy.spark.sink", tmp_path)
    assert "jmspy.spark.sink" in loaded
    assert sorted(m for m in loaded if _within(m, BROKER)) == []


def test_the_client_core_loads_no_transport_no_broker_and_no_client_library(
        tmp_path: Path) -> None:
    """The API objects know transports only through the Transport interface: a
    transport and its library load when a URL names it, not before."""
    loaded = _loaded("import jmspy.factory, jmspy.session, jmspy.context, jmspy.message",
                     tmp_path)
    assert "jmspy.session" in loaded
    assert sorted(m for m in loaded if _within(m, BROKER) or _within(m, "jmspy.transports")
                  or m.split(".")[0] in {"paho", "stomp", "asyncio", "sqlite3"}) == []


def test_the_broker_core_loads_no_protocol_host_no_transport_and_no_client_api(
        tmp_path: Path) -> None:
    """The core is sans-I/O: no STOMP host, no event loop, no transport, and none of
    the client's API objects (it shares only jmspy.wire, errors and selectors)."""
    loaded = _loaded("import jmspy.broker_ref.core.broker", tmp_path)
    assert "jmspy.broker_ref.core.queue" in loaded
    assert sorted(m for m in loaded
                  if _within(m, "jmspy.broker_ref.protocols") or _within(m, "jmspy.transports")
                  or m in {"jmspy.session", "jmspy.connection", "jmspy.factory"}
                  or m.split(".")[0] in {"asyncio", "paho", "stomp"}) == []


#: What the store (``broker_ref/store/``) may import from the broker core: its bottom.
STORE_MAY_IMPORT = frozenset({"kinds", "errors", "records", "api"})


def test_the_store_imports_only_the_bottom_of_the_broker_core() -> None:
    """The store keeps messages for the queue and the broker; it knows their message type,
    their kinds and errors, and nothing of the queue, the connection or the broker (every
    edge counts: ``TYPE_CHECKING`` ones and imports inside functions too)."""
    store = [m for m in SOURCES if _within(m, f"{BROKER}.store")]
    assert len(store) >= 9
    bad = sorted(
        f"{m} imports {name}"
        for m in store for name in imports(m)
        if _within(name, f"{BROKER}.core")
        and name.removeprefix(f"{BROKER}.core.") not in STORE_MAY_IMPORT
    )
    assert not bad, f"the store sits below the queue and the broker: {bad}"
