"""Reconnect over TLS for STOMP: ``jmspy broker``'s TLS listener goes away under a live
``stomp+ssl://`` connection and comes back on the same port; the connection resumes over
TLS (a fresh handshake), its consumer is subscribed again and messages flow.

The broker is served in this process (tests/stomp_server/tls_broker.py), in memory, on a
TLS port chosen before the first start and written into its config, so that the second
start binds the port the client keeps trying. (The mqtts:// counterpart, on Mosquitto,
is in test_tls_interop.py.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

from brokers import free_port
from recording import Events
from stomp_tls_path import assert_stomp_over_tls
from test_failover import FAST
from tls_broker import tls_broker, tls_section
from tls_ca import TlsFiles

from jmspy import ConnectionFactory, Session

WAIT = 10.0


def _fixed_port_config(tls: TlsFiles, port: int) -> str:
    """TLS only, on ``port`` (the plain listener is off: nothing else to bind)."""
    toml = tls_section(tls, "only = true\n")
    assert "[broker.tls]\nport = 0\n" in toml
    return toml.replace("[broker.tls]\nport = 0\n", f"[broker.tls]\nport = {port}\n")


def test_stomp_ssl_resumes_when_jmspy_broker_comes_back_on_the_same_tls_port(
        tmp_path: Path, tls_ca: TlsFiles) -> None:
    port = free_port()
    config = _fixed_port_config(tls_ca, port)
    events = Events()
    factory = ConnectionFactory(f"stomp+ssl://127.0.0.1:{port}", ssl_ca_file=str(tls_ca.ca),
                                **FAST)
    name = f"tls.reconnect.{uuid.uuid4().hex[:8]}"
    with tls_broker(tmp_path, config) as ports:
        assert ports == {"tls": port}
        conn = factory.create_connection()
        conn.set_exception_listener(events)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue(name)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        conn.start()
        producer.send(session.create_text_message("before"))
        got = consumer.receive(WAIT)
        assert got is not None and got.text == "before"
    try:
        events.wait_for("CONNECTION_INTERRUPTED", 60)  # the broker closed our connection
        with tls_broker(tmp_path, config) as ports:
            assert ports == {"tls": port}
            events.wait_for("CONNECTION_RESUMED", 60)
            assert events.codes.index("CONNECTION_INTERRUPTED") < events.codes.index(
                "CONNECTION_RESUMED"), events.codes
            producer.send(session.create_text_message("after"))
            got = consumer.receive(WAIT)
            assert got is not None and got.text == "after"
            assert_stomp_over_tls(conn._transport)
            conn.close()
    finally:
        conn.close()
