"""The TLS brokers of tls_brokers.py as fixtures, shared by every TLS interop module.

ActiveMQ and RabbitMQ take seconds to start: each starts once per run, on first use, and
stops after the last test that asks for it (``cluster_fixtures.session_broker``), so one
ActiveMQ serves every ActiveMQ TLS test, whichever module it is in. Mosquitto starts in
a tenth of a second: one per module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_fixtures import session_broker
from tls_brokers import (
    TlsActiveMQ,
    TlsMosquitto,
    TlsRabbitMQ,
    start_tls_activemq,
    start_tls_mosquitto,
    start_tls_rabbitmq,
)
from tls_ca import TlsFiles

__all__ = ["tls_activemq", "tls_mosquitto", "tls_rabbitmq"]


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
