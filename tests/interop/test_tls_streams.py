"""Streams over TLS through the paths the transports take there: a message larger than
one TLS record (16 KiB of plaintext at most, so it arrives split across records and
reads) and a burst of 1,000 small ones (many frames or packets in one record, a frame
split across two), over mqtts:// (Mosquitto) and stomp+ssl:// (jmspy broker's TLS
listener).

Why: the raw-socket fast paths (transports/mqtt/paho_private/buffered_read.py, direct_write.py, the
STOMP transport's frame reader and writer) step aside for a TLS socket, whose decrypted
bytes ``select`` cannot see; the libraries' own TLS reads then carry every byte. These
tests check that what steps aside still delivers every byte, in order, and that the
fast paths really stood aside.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stomp_tls_path import assert_stomp_over_tls
from tls_ca import TlsFiles
from tls_fixtures import tls_url_for

from jmspy import ConnectionFactory, Session

#: larger than one TLS record (2**14 bytes of plaintext), and not a multiple of it
LARGE = 100_000 + 7
BURST = 1_000
WAIT = 30.0


@pytest.fixture(params=["mqtts", "stomp+ssl"])
def tls_url(request: pytest.FixtureRequest, tmp_path: Path,
            tls_ca: TlsFiles) -> Iterator[str]:
    yield from tls_url_for(request, tmp_path, tls_ca, f"?ca_file={tls_ca.ca}")


def _stood_aside(transport: Any) -> None:
    """The fast paths are installed but did not run: the library read over TLS."""
    paho = getattr(transport, "paho", None)
    if paho is not None:
        from jmspy.transports.mqtt import paho_private
        from jmspy.transports.mqtt.paho_private import buffered_read, direct_write

        hooked = paho_private.enabled()  # on the public path none is installed
        assert direct_write.installed(paho) is hooked and buffered_read.installed(paho) is hooked
        assert isinstance(paho.socket(), ssl.SSLSocket)
        assert buffered_read.held(paho) == 0  # no block was read past paho
    else:
        assert_stomp_over_tls(transport)  # jmspy's TLS and fast paths, or stomp.py's


def _stream(url: str, texts: list[str]) -> list[str]:
    """Send ``texts`` on one connection and receive as many on another
    (AUTO_ACKNOWLEDGE); returns what arrived. (Two connections: over MQTT a synchronous
    send on a connection that also consumes took about 44 ms, plain or TLS alike.)"""
    factory = ConnectionFactory(url)
    with factory.create_connection() as conn, factory.create_connection() as sending:
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        name = f"tls.stream.{uuid.uuid4().hex[:8]}"
        mqtt = url.startswith("mqtt")
        dest = session.create_topic(name) if mqtt else session.create_queue(name)
        consumer = session.create_consumer(dest)
        conn.start()
        out = sending.create_session(False, Session.AUTO_ACKNOWLEDGE)
        producer = out.create_producer(dest)
        for text in texts:
            producer.send(out.create_text_message(text))
        _stood_aside(sending._transport)
        got = []
        for _ in texts:
            message = consumer.receive(WAIT)
            assert message is not None, f"{len(got)} of {len(texts)} arrived"
            got.append(message.text)
        assert consumer.receive(0.2) is None  # nothing more, nothing twice
        _stood_aside(conn._transport)
        return got


def test_a_message_larger_than_a_tls_record_arrives_whole(tls_url: str) -> None:
    body = "".join(chr(0x41 + i % 26) for i in range(LARGE))
    got = _stream(tls_url, [body, "after it"])
    assert [len(t) for t in got] == [LARGE, len("after it")]
    assert got == [body, "after it"]


def test_a_burst_of_a_thousand_small_messages_arrives_in_order(tls_url: str) -> None:
    texts = [f"m{i:04d}" for i in range(BURST)]
    assert _stream(tls_url, texts) == texts
