"""jmspy logs under three roots (jmspy.client, jmspy.transport, jmspy.broker): at DEBUG a
connection says how it connected and subscribed and what its flow window decided, never
one line per message; stomp.py's chatter stays at WARNING unless the application sets its
logger's level (docs/logging.md)."""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jmspy import ConnectionFactory
from jmspy.logs import LIBRARY_LOGGERS, ROOTS
from jmspy.transports import vm

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "jmspy", ROOT / "transports", ROOT / "broker_ref"]
#: Whose loggers a jmspy module may name without logging to them: ``jmspy`` (the CLI
#: worker hangs its handler there, above the three roots) and the libraries' own.
CONFIGURED_ONLY = {"jmspy", *LIBRARY_LOGGERS}
HELPERS = {"client_logger": "jmspy.client", "transport_logger": "jmspy.transport",
           "broker_logger": "jmspy.broker"}


def _under_a_root(name: str) -> bool:
    return any(name == root or name.startswith(f"{root}.") for root in ROOTS)


def _logger_names() -> list[tuple[str, str]]:
    """(file:line, logger name) of every getLogger("...") and *_logger("...") call."""
    found: list[tuple[str, str]] = []
    for top in SOURCES:
        for path in sorted(top.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (isinstance(node, ast.Call) and node.args
                        and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)):
                    continue
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(
                    func, "id", "")
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                if called == "getLogger":
                    found.append((where, node.args[0].value))
                elif called in HELPERS:
                    found.append((where, f"{HELPERS[called]}.{node.args[0].value}"))
    return found


def test_every_logger_the_source_names_is_under_one_of_the_three_roots() -> None:
    names = _logger_names()
    assert len(names) > 15  # the walk found the package's loggers
    stray = [(where, name) for where, name in names
             if not _under_a_root(name) and name not in CONFIGURED_ONLY]
    assert stray == []


def test_no_logger_left_under_an_old_name_once_everything_is_imported() -> None:
    import jmspy.broker_ref.protocols.stomp.server
    import jmspy.pool
    import jmspy.transports.mqtt.transport
    import jmspy.transports.stomp.transport  # noqa: F401

    made = [name for name in logging.Logger.manager.loggerDict
            if name.startswith("jmspy") and name != "jmspy"]
    assert made and all(_under_a_root(name) for name in made), made


@pytest.fixture
def debug_records(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


def _jmspy_client_side(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.name.startswith(("jmspy.client", "jmspy.transport"))]


def _connect_subscribe_and_exchange(url: str, caplog: pytest.LogCaptureFixture
                                    ) -> tuple[list[str], list[logging.LogRecord]]:
    """Connect and subscribe (the records of that), then 20 sends and receives (the
    records of those)."""
    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("logged")
        producer = session.create_producer(queue)
        consumer = session.create_consumer(queue)
        conn.start()
        setup = [f"{r.name}: {r.getMessage()}" for r in _jmspy_client_side(caplog)]
        caplog.clear()
        for i in range(20):  # well inside the first window: no refill is due
            producer.send(session.create_text_message(f"body-{i}"))
            assert consumer.receive(5) is not None
        per_message = _jmspy_client_side(caplog)
    return setup, per_message


def _assert_connect_and_subscribe_said(setup: list[str], transport: str) -> None:
    assert any(s.startswith("jmspy.client.connection: ") and "connected to" in s
               for s in setup), setup
    assert any(s.startswith("jmspy.client.session: ") and "subscribed" in s
               for s in setup), setup
    assert any(s.startswith("jmspy.client.flow: ") and "credit granted" in s
               for s in setup), setup
    assert any(s.startswith(f"jmspy.transport.{transport}: ") for s in setup), setup


def test_vm_connect_and_subscribe_log_debug_lines_and_messages_log_none(
    debug_records: pytest.LogCaptureFixture,
) -> None:
    vm.start_broker("logging-vm")
    try:
        setup, per_message = _connect_subscribe_and_exchange("vm://logging-vm", debug_records)
    finally:
        vm.stop_broker("logging-vm")
    _assert_connect_and_subscribe_said(setup, "vm")
    assert per_message == []


def test_stomp_connect_and_subscribe_log_debug_lines_and_messages_log_none(
    debug_records: pytest.LogCaptureFixture,
) -> None:
    from stomp_server.stomp_support import ServerHandle

    handle = ServerHandle()
    try:
        setup, per_message = _connect_subscribe_and_exchange(
            f"stomp://127.0.0.1:{handle.port}", debug_records)
    finally:
        handle.stop()
    _assert_connect_and_subscribe_said(setup, "stomp")
    assert any("SUBSCRIBE /queue/logged" in s for s in setup)
    assert per_message == []
    assert not [r for r in debug_records.records
                if r.name == "stomp.py" and r.levelno < logging.WARNING]


#: A fresh interpreter (the level is set once per process): DEBUG everywhere, the given
#: level on stomp.py's logger first (or none), then a connect, a send and a receive.
PROBE = r"""
import json, logging, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.name)
logging.basicConfig(level=logging.DEBUG, handlers=[Keep()])
if sys.argv[2] != "unset":
    logging.getLogger("stomp.py").setLevel(sys.argv[2])
from jmspy import ConnectionFactory
with ConnectionFactory(f"stomp://127.0.0.1:{sys.argv[1]}").create_connection() as conn:
    session = conn.create_session()
    queue = session.create_queue("probe")
    session.create_producer(queue).send(session.create_text_message("x"))
    conn.start()
    assert session.create_consumer(queue).receive(5) is not None
print(json.dumps({"level": logging.getLogger("stomp.py").level,
                  "stomp": records.count("stomp.py"),
                  "jmspy": sum(n.startswith("jmspy.") for n in records)}))
"""


@pytest.fixture(scope="module")
def stomp_port() -> Iterator[int]:
    from stomp_server.stomp_support import ServerHandle

    handle = ServerHandle()
    yield handle.port
    handle.stop()


def _probe(port: int, level: str) -> dict[str, Any]:
    run = subprocess.run([sys.executable, "-c", PROBE, str(port), level],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_stomp_py_is_kept_at_warning_when_the_application_set_no_level(
    stomp_port: int,
) -> None:
    result = _probe(stomp_port, "unset")
    assert result["level"] == logging.WARNING
    assert result["stomp"] == 0 and result["jmspy"] > 0


def test_a_level_the_application_set_on_stomp_py_is_kept(stomp_port: int) -> None:
    result = _probe(stomp_port, "DEBUG")
    assert result["level"] == logging.DEBUG
    assert result["stomp"] > 0  # its frames, as asked
