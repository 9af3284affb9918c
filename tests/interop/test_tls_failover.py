"""Failover over TLS on each real broker, without restarting it: ActiveMQ 5
(stomp+ssl://), RabbitMQ (stomps:// and mqtts://, mutual TLS) and Mosquitto (mqtts://).

The client connects through a loopback relay (tcp_relay.py) in front of the broker's TLS
port; the test severs every relayed connection, so the client's TLS connection dies
under it while the broker runs on. Reconnect (the ``imqReconnect*`` properties,
docs/transports.md "Clusters and failover") opens a new connection through the relay, a
new TLS handshake with the same settings, and the stream resumes: the listener hears
what is sent afterwards, and the three messages received but not acknowledged before the
cut come back, marked redelivered (the broker took them back when the connection
died; an MQTT client id's session resends them with DUP). The body is
test_failover.py's restart case (FailoverClient) with a cut in place of the restart.
Restarts over TLS are in test_tls_reconnect.py (jmspy broker) and test_tls_interop.py
(Mosquitto).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tcp_relay import Relay, relay
from test_failover import FailoverClient, Target
from tls_brokers import TlsActiveMQ, TlsMosquitto, TlsRabbitMQ
from tls_ca import TlsFiles

from jmspy.transports.stomp import stomppy_private
from jmspy.transports.stomp.owned_tls import TlsStream

#: target -> (scheme, whose broker, mutual TLS)
TARGETS = {
    "activemq-stomp+ssl": ("stomp+ssl", "activemq", False),
    "rabbitmq-stomps": ("stomps", "rabbitmq", True),
    "rabbitmq-mqtts": ("mqtts", "rabbitmq", True),
    "mosquitto-mqtts": ("mqtts", "mosquitto", False),
}


@pytest.fixture(params=list(TARGETS))
def through_relay(request: pytest.FixtureRequest, tls_ca: TlsFiles,
                  tls_activemq: TlsActiveMQ, tls_rabbitmq: TlsRabbitMQ,
                  tls_mosquitto: TlsMosquitto) -> Iterator[tuple[Target, Relay]]:
    """A target whose URL is a relay in front of the broker's TLS port. Every broker is
    asked for by argument (the shared brokers stop after the last test naming them)."""
    scheme, broker, mutual = TARGETS[request.param]
    port = {"activemq": tls_activemq.stomp_tls_port, "mosquitto": tls_mosquitto.tls_port,
            "rabbitmq": (tls_rabbitmq.stomp_tls_port if scheme == "stomps"
                         else tls_rabbitmq.mqtt_tls_port)}[broker]
    query = f"ca_file={tls_ca.ca}"
    if mutual:
        query += f"&cert_file={tls_ca.client_cert}&key_file={tls_ca.client_key}"
    with relay("127.0.0.1", port) as cut:
        yield Target(f"{scheme}://127.0.0.1:{cut.port}?{query}", persists=True), cut


def _tls_socket(conn: Any, mqtt: bool) -> Any:
    transport = conn._transport
    return transport.paho.socket() if mqtt else transport._conn.transport.socket


def _is_tls(sock: Any, mqtt: bool) -> bool:
    """A TLS socket: paho's SSLSocket, or the one of the path this stomp.py takes."""
    if mqtt or not stomppy_private.enabled():
        return isinstance(sock, ssl.SSLSocket)
    return isinstance(sock, TlsStream)


def test_a_severed_tls_connection_resumes_through_a_new_handshake_and_loses_nothing(
        through_relay: tuple[Target, Relay]) -> None:
    target, cut = through_relay
    client = FailoverClient(target)
    try:
        client.before()
        first = _tls_socket(client.conn, target.mqtt)
        assert _is_tls(first, target.mqtt)
        time.sleep(0.3)  # the listener's acknowledgement of "before" reaches the broker
        accepted = cut.accepted  # earlier ones may have come and gone (a refused MQTT 5)
        assert cut.sever() == 1  # the client's one open connection, both sides
        client.events.wait_for("CONNECTION_INTERRUPTED")
        client.events.wait_for("CONNECTION_RESUMED", timeout=60)
        assert cut.accepted == accepted + 1  # the reconnect came through the relay
        again = _tls_socket(client.conn, target.mqtt)
        assert _is_tls(again, target.mqtt) and again is not first
        assert again.version() is not None  # a new, finished TLS handshake
        client.after()  # what is sent now arrives; the held three come back, redelivered
    finally:
        client.conn.close()
