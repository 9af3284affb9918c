"""The TLS brokers of tls_brokers.py as fixtures, shared by every TLS interop module.

ActiveMQ and RabbitMQ take seconds to start: each starts once per run, on first use, and
stops after the last test that asks for it (``cluster_fixtures.session_broker``), so one
ActiveMQ serves every ActiveMQ TLS test, whichever module it is in. Mosquitto starts in
a tenth of a second: one per module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_fixtures import session_broker
from tls_broker import tls_broker, tls_section
from tls_brokers import (
    TlsActiveMQ,
    TlsMosquitto,
    TlsRabbitMQ,
    start_tls_activemq,
    start_tls_mosquitto,
    start_tls_rabbitmq,
)
from tls_ca import TlsFiles

__all__ = ["tls_activemq", "tls_mosquitto", "tls_rabbitmq", "tls_url_for"]


@pytest.fixture(scope="module")
def tls_mosquitto(tls_ca: TlsFiles) -> Iterator[TlsMosquitto]:
    mosquitto, ports = start_tls_mosquitto(tls_ca)
    try:
        yield ports
    finally:
        mosquitto.close()


@pytest.fixture(scope="session")
def tls_rabbitmq(tls_ca: TlsFiles) -> Iterator[TlsRabbitMQ]:
    yield from session_broker("tls_rabbitmq", "RabbitMQ with TLS listeners",
                              lambda: start_tls_rabbitmq(tls_ca))


@pytest.fixture(scope="session")
def tls_activemq(tls_ca: TlsFiles) -> Iterator[TlsActiveMQ]:
    yield from session_broker("tls_activemq", "ActiveMQ with TLS connectors",
                              lambda: start_tls_activemq(tls_ca))


def tls_url_for(request: pytest.FixtureRequest, tmp_path: Path, tls_ca: TlsFiles,
                query: str = "") -> Iterator[str]:
    """The body of a fixture parametrized over ``"mqtts"`` and ``"stomp+ssl"``: the URL of
    Mosquitto's TLS listener, or of a ``jmspy broker`` started with a TLS listener only,
    ending in ``query`` (e.g. ``"?ca_file=..."``)."""
    if request.param == "mqtts":
        mosquitto: TlsMosquitto = request.getfixturevalue("tls_mosquitto")
        yield f"mqtts://127.0.0.1:{mosquitto.tls_port}{query}"
        return
    with tls_broker(tmp_path, tls_section(tls_ca, "only = true\n")) as ports:
        yield f"stomp+ssl://127.0.0.1:{ports['tls']}{query}"
