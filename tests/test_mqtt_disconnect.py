"""An MQTT drop names the broker's reason: the MQTT 5 DISCONNECT reason code and Reason
String (transports/mqtt/disconnect.py), not a bare errno; the synchronous send waiting for
its PUBACK when the broker drops the connection fails with that reason at once."""

from __future__ import annotations

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

from jmspy import ConnectionFactory, JMSException
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
        pytest.skip("mosquitto is not installed")
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


def test_a_send_the_broker_drops_for_its_size_fails_with_the_brokers_reason(
    small_packets: int,
) -> None:
    factory = ConnectionFactory(f"mqtt://127.0.0.1:{small_packets}?version=5")
    with factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(session.create_topic("big"))
        with pytest.raises(JMSException) as raised:
            producer.send(session.create_text_message("x" * 5000))
    text = str(raised.value)
    assert "Packet too large (reason code 149)" in text and "sendTimeout" not in text
    assert "Errno" not in text
