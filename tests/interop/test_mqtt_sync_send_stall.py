"""A synchronous QoS 1 send on a connection that also consumes, against Mosquitto, plain
and TLS: as quick as one on a connection that only produces.

It was not: 88 ms per send instead of under 1 ms, two delayed TCP ACKs each behind
Nagle's algorithm on one side (transports/mqtt/quick_ack.py tells both). Each round here
sends a message to a topic the same connection consumes and receives it; its median is
compared with the median of sends the same test makes on a producer-only connection,
and with the stall (40 ms a round or more, whatever the machine's speed) the ratio was
about a hundred. The wall clock only compares two figures of one run: no fixed limit.
"""

from __future__ import annotations

import socket
import statistics
import time
import uuid
from typing import Any

import pytest
from tls_brokers import TlsMosquitto
from tls_ca import TlsFiles

from jmspy import ConnectionFactory, Session
from jmspy.transports.mqtt.quick_ack import QUICKACK

ROUNDS = 15
#: what "as quick as" allows for a consumer's extra work (a receive per round) and a
#: busy machine; with the stall the ratio was ~100
RATIO = 10.0


@pytest.fixture(params=["mqtt", "mqtts"])
def url(request: pytest.FixtureRequest, tls_ca: TlsFiles) -> str:
    if request.param == "mqtt":
        broker: Any = request.getfixturevalue("mosquitto")
        return f"mqtt://127.0.0.1:{broker.mqtt_port}"
    tls: TlsMosquitto = request.getfixturevalue("tls_mosquitto")
    return f"mqtts://127.0.0.1:{tls.tls_port}?ca_file={tls_ca.ca}"


def _median_send_ms(url: str, consume: bool) -> tuple[float, Any]:
    """The median of ROUNDS synchronous sends (each with its receive, if ``consume``);
    and the connection's socket, for its options."""
    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        topic = session.create_topic(f"stall.{uuid.uuid4().hex[:8]}")
        consumer = session.create_consumer(topic) if consume else None
        conn.start()
        producer = session.create_producer(topic)
        rounds = []
        for i in range(ROUNDS + 1):  # the first round warms up
            began = time.perf_counter()
            producer.send(session.create_text_message(f"m{i}"))
            if consumer is not None:
                got = consumer.receive(10.0)
                assert got is not None and got.text == f"m{i}"
            rounds.append(time.perf_counter() - began)
        sock = conn._transport.paho.socket()
        no_delay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    return statistics.median(rounds[1:]) * 1000, no_delay


@pytest.mark.skipif(QUICKACK is None, reason="no TCP_QUICKACK here (Linux has it)")
def test_a_sync_send_on_a_consuming_connection_is_as_quick_as_on_a_producing_one(
        url: str) -> None:
    alone, alone_no_delay = _median_send_ms(url, consume=False)
    consuming, no_delay = _median_send_ms(url, consume=True)
    assert no_delay and alone_no_delay  # set at the first synchronous send
    assert consuming < alone * RATIO, (
        f"send+receive {consuming:.2f} ms against send alone {alone:.2f} ms (median "
        f"of {ROUNDS}): the delayed-ACK stall is back")
