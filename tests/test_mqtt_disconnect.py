"""An MQTT drop names the broker's reason: the MQTT 5 DISCONNECT reason code and Reason
String (transports/mqtt/disconnect.py), not a bare errno; the synchronous send waiting for
its PUBACK when the broker drops the connection fails with that reason at once."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("paho.mqtt")

from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from jmspy import ConnectionFactory
from jmspy.errors import MessageFormatException
from jmspy.transports.mqtt.disconnect import disconnect_reason


def _props(reason_string: str | None) -> Properties:
    props = Properties(PacketTypes.DISCONNECT)
    if reason_string is not None:
        props.ReasonString = reason_string
    return props


def test_a_v5_disconnect_names_its_reason_code_and_the_brokers_reason_string() -> None:
    reason = ReasonCode(PacketTypes.DISCONNECT, identifier=149)
    assert disconnect_reason(reason, _props("packets up to 2000 bytes")) == (
        "Packet too large (reason code 149): packets up to 2000 bytes")


def test_a_reason_string_that_repeats_the_reason_is_said_once() -> None:
    reason = ReasonCode(PacketTypes.DISCONNECT, identifier=149)
    assert disconnect_reason(reason, _props("Packet too large")) == (
        "Packet too large (reason code 149)")


def test_a_drop_without_a_disconnect_still_says_what_happened() -> None:
    assert disconnect_reason(None, None) == "the connection closed"
    normal = ReasonCode(PacketTypes.DISCONNECT, identifier=0)
    assert disconnect_reason(normal, _props(None)) == "Normal disconnection"


@pytest.fixture
def small_packets(tmp_path: Path) -> Iterator[int]:
    """mosquitto taking packets up to 2000 bytes (MQTT 5 brokers say so in CONNACK and
    answer a larger PUBLISH with DISCONNECT "Packet too large")."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(binary).exists():
        pytest.fail("mosquitto is not installed: apt-get install mosquitto (.ci/run does), "
                    "or put its binary on PATH")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                    "max_packet_size 2000\n")
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)  # mosquitto is still starting: poll its port again
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_send_larger_than_the_brokers_maximum_packet_is_refused_before_it_is_sent(
    small_packets: int,
) -> None:
    """MQTT 5: the CONNACK says the broker's Maximum Packet Size, and a client must not
    send a larger packet (MQTT-3.2.2-15; the broker would drop the connection with
    DISCONNECT 149, whose reason a socket reset can lose). The send fails at once naming
    both sizes, nothing reaches the broker, and the connection stays up."""
    factory = ConnectionFactory(f"mqtt://127.0.0.1:{small_packets}?version=5")
    with factory.create_connection() as conn:
        session = conn.create_session()
        topic = session.create_topic("big")
        consumer = session.create_consumer(topic)
        conn.start()
        producer = session.create_producer(topic)
        with pytest.raises(MessageFormatException) as raised:
            producer.send(session.create_text_message("x" * 5000))
        producer.send(session.create_text_message("small"))  # the connection still works
        got = consumer.receive(10)
        assert got is not None and got.text == "small"
        assert consumer.receive_no_wait() is None  # the large one never went out
    text = str(raised.value)
    assert "Packet too large" in text and "up to 2,000" in text
    assert re.search(r"a PUBLISH of 5,\d{3} bytes", text), text  # the body, headers, topic
    assert "sendTimeout" not in text and "Errno" not in text


def _packet(conn: socket.socket) -> bytes:
    """One MQTT packet off ``conn``: its fixed header, remaining length and body."""
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            assert chunk, "the client closed"
            data += chunk
        return data

    head = exactly(1)
    length, shift, digits = 0, 0, b""
    while True:
        digit = exactly(1)
        digits += digit
        length |= (digit[0] & 0x7F) << shift
        shift += 7
        if not digit[0] & 0x80:
            break
    return head + digits + exactly(length)


@pytest.mark.parametrize(("payload", "qos"), [(b"", 0), (b"x" * 200, 1), (b"y" * 20_000, 1)])
def test_the_publish_size_counted_is_the_packet_paho_writes(payload: bytes, qos: int) -> None:
    """Counted against what paho really writes on a socket (a listener here plays the
    broker: a CONNACK, then it keeps the PUBLISH)."""
    import threading

    from paho.mqtt.client import Client, MQTTv5
    from paho.mqtt.enums import CallbackAPIVersion

    from jmspy.transports.mqtt.outbound import publish_size

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen: list[bytes] = []

    def broker() -> None:
        conn, _ = listener.accept()
        with conn:
            _packet(conn)  # CONNECT
            conn.sendall(bytes([0x20, 3, 0, 0, 0]))  # CONNACK v5: accepted, no properties
            seen.append(_packet(conn))

    thread = threading.Thread(target=broker, daemon=True)
    thread.start()
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = ("JMSType", "order")
    props.ContentType = "text/plain"
    client = Client(CallbackAPIVersion.VERSION2, protocol=MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        client.publish("a/b", payload, qos=qos, properties=props)
        thread.join(10)
    finally:
        client.loop_stop()
        listener.close()
    assert seen and seen[0][0] >> 4 == 3  # a PUBLISH
    assert publish_size("a/b", payload, qos, props) == len(seen[0])
