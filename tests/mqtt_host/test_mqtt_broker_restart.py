"""``jmspy broker --data-dir DIR --mqtt-port P`` keeps its MQTT promises across kill -9,
as Mosquitto with ``persistence true`` does: every QoS 1 PUBLISH that got its PUBACK
reaches the persistent session subscribed to it after the restart (which comes back
without subscribing again, CONNACK session present), and retained messages are still
there. The broker's store commits before any MQTT acknowledgement leaves (group commit,
as before a STOMP RECEIPT)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from mqtt_pair import connect_packet, packet, subscribe_packet
from mqtt_process import WAIT, BrokerProcess, Raw

from jmspy.broker_ref.protocols.mqtt import codec
from jmspy.broker_ref.protocols.mqtt.properties import encode_properties, encode_string

#: QoS 1 PUBLISHes acknowledged before the kill
COUNT = 200


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path, "--data-dir", str(tmp_path / "data"), "--mqtt-port", "0")
    yield b
    b.kill()


def _connect(port: int, version: int) -> Raw:
    return Raw(socket.create_connection(("127.0.0.1", port), timeout=WAIT), version)


def _persistent(client_id: str, version: int) -> bytes:
    props = {"session_expiry_interval": 3600} if version == 5 else None
    return connect_packet(client_id, version=version, clean=False, props=props)


def _publish(topic: str, payload: bytes, pid: int, version: int,
             retain: bool = False) -> bytes:
    body = encode_string(topic) + struct.pack("!H", pid)
    if version == 5:
        body += encode_properties({})
    return packet(0x32 | (1 if retain else 0), body + payload)


@pytest.mark.parametrize("version", [4, 5])
def test_every_puback_ed_publish_reaches_the_persistent_session_after_kill_9(
        broker: BrokerProcess, version: int) -> None:
    port = broker.start()["mqtt"]
    dev = _connect(port, version)
    (connack,) = dev.exchange(_persistent("dev", version), 1)
    assert connack["code"] == 0
    (suback,) = dev.exchange(subscribe_packet(1, ("plant/#", 1), version=version), 1)
    assert suback["codes"] == [1]
    dev.sock.close()
    pub = _connect(port, version)
    pub.exchange(connect_packet("pub", version=version), 1)
    data = b"".join(_publish("plant/line", b"m%d" % i, i + 1, version) for i in range(COUNT))
    data += _publish("plant/status", b"running", COUNT + 1, version, retain=True)
    acks = pub.exchange(data, COUNT + 1)
    assert [(a["type"], a["pid"]) for a in acks] == [
        (codec.PUBACK, i + 1) for i in range(COUNT + 1)]
    broker.kill()  # the instant the last PUBACK is read
    pub.sock.close()

    port = broker.start()["mqtt"]
    dev = _connect(port, version)
    (connack,) = dev.exchange(_persistent("dev", version), 1)
    assert (connack["code"], connack["present"]) == (0, True)  # no SUBSCRIBE again
    got, ack = [], b""
    while len(got) < COUNT + 1:  # each PUBACKed as read: the window refills
        (p,) = dev.exchange(ack, 1)
        got.append(p)
        ack = packet(0x40, struct.pack("!H", p["pid"]))
    assert [p["payload"] for p in got] == [*(b"m%d" % i for i in range(COUNT)), b"running"]
    assert all(p["qos"] == 1 for p in got)
    dev.sock.close()
    late = _connect(port, version)
    late.exchange(connect_packet("late", version=version), 1)
    suback, retained = late.exchange(subscribe_packet(1, ("plant/status", 0),
                                                      version=version), 2)
    assert (retained["topic"], retained["payload"], retained["retain"]) == (
        "plant/status", b"running", True)
    late.sock.close()
