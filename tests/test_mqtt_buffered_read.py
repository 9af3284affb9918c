"""mqtt:// reads the socket a block at a time (transports/mqtt/paho_private/buffered_read.py): every
packet of one ``recv`` is handled in one ``loop_read``, a packet split across reads is
finished at the next one, and nothing read stays behind while paho waits in select.

A real paho client (QoS 0 subscriber side) over a socket pair; the test plays the broker
and calls ``loop_read()`` where paho's loop would, after select reported input.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from jmspy.transports.mqtt.paho_private import buffered_read


def _publish(topic: str, payload: bytes) -> bytes:
    """A QoS 0 PUBLISH (MQTT 3.1.1)."""
    body = struct.pack("!H", len(topic)) + topic.encode() + payload
    length = len(body)
    header = bytearray()
    while True:
        digit, length = length & 0x7F, length >> 7
        header.append(digit | 0x80 if length else digit)
        if not length:
            break
    return bytes([0x30]) + bytes(header) + body


def _client(sock: socket.socket, install: bool = True) -> tuple[Any, list[bytes]]:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv311,
                         manual_ack=True)
    client._sock = sock
    got: list[bytes] = []
    client.on_message = lambda c, u, msg: got.append(bytes(msg.payload))
    if install:
        assert buffered_read.install(client) and buffered_read.installed(client)
    return client, got


@pytest.fixture
def pair() -> Any:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


def _readable(sock: socket.socket) -> None:
    """What paho's select waits for: bytes from the peer have arrived."""
    import select

    assert select.select([sock], [], [], 5.0)[0], "no input arrived"


def _pending(sock: socket.socket) -> bool:
    """select's answer without waiting: all that was sent has arrived (socketpair)."""
    import select

    return bool(select.select([sock], [], [], 0)[0])


def test_every_packet_of_one_read_is_handled_in_one_loop_read(pair: Any) -> None:
    ours, theirs = pair
    client, got = _client(ours)
    theirs.sendall(b"".join(_publish("t", f"m{n}".encode()) for n in range(50)))
    _readable(ours)
    assert client.loop_read() == MQTTErrorCode.MQTT_ERR_SUCCESS
    assert got == [f"m{n}".encode() for n in range(50)]
    assert buffered_read.held(client) == 0


def test_paho_alone_takes_one_packet_per_loop_read(pair: Any) -> None:
    """The behaviour replaced (and the reason): a consumer paid a select per packet."""
    ours, theirs = pair
    client, got = _client(ours, install=False)
    theirs.sendall(_publish("t", b"a") + _publish("t", b"b"))
    _readable(ours)
    client.loop_read()
    assert got == [b"a"]


def test_a_packet_split_across_reads_is_finished_at_the_next_one(pair: Any) -> None:
    ours, theirs = pair
    client, got = _client(ours)
    payload = bytes(range(256)) * 1024  # 256 KiB: several blocks
    big = _publish("t", payload)
    theirs.sendall(_publish("t", b"before") + big[:100_000])
    _readable(ours)
    while _pending(ours):  # paho's loop: one loop_read per readable event
        assert client.loop_read() == MQTTErrorCode.MQTT_ERR_SUCCESS
        assert buffered_read.held(client) == 0  # nothing stays behind between events
    assert got == [b"before"]
    theirs.sendall(big[100_000:] + _publish("t", b"after"))
    _readable(ours)
    while _pending(ours):
        assert client.loop_read() == MQTTErrorCode.MQTT_ERR_SUCCESS
    assert got == [b"before", payload, b"after"]


def test_the_end_of_the_stream_is_a_lost_connection(pair: Any) -> None:
    ours, theirs = pair
    client, got = _client(ours)
    lost: list[Any] = []
    client.on_disconnect = lambda *args: lost.append(args)
    theirs.sendall(_publish("t", b"last"))
    theirs.close()
    _readable(ours)
    assert client.loop_read() == MQTTErrorCode.MQTT_ERR_SUCCESS
    assert got == [b"last"] and not lost
    _readable(ours)  # select reports the end of the stream as input
    assert client.loop_read() == MQTTErrorCode.MQTT_ERR_CONN_LOST
    assert len(lost) == 1 and got == [b"last"]
    assert buffered_read.held(client) == 0


def test_bytes_of_an_earlier_socket_never_reach_a_new_one(pair: Any) -> None:
    """A broken packet makes paho give up on the connection in the middle of a block;
    what followed it in the block belongs to that connection and is dropped."""
    ours, theirs = pair
    client, got = _client(ours)
    broken = bytes([0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])  # a remaining length of 5 bytes
    theirs.sendall(broken + _publish("t", b"stale"))
    _readable(ours)
    assert client.loop_read() != MQTTErrorCode.MQTT_ERR_SUCCESS
    assert buffered_read.held(client) == 0
    new_ours, new_theirs = socket.socketpair()
    new_ours.setblocking(False)
    client._sock = new_ours  # what paho's reconnect does, with a fresh packet state
    client._in_packet = {"command": 0, "have_remaining": 0, "remaining_count": [],
                         "remaining_mult": 1, "remaining_length": 0,
                         "packet": bytearray(b""), "to_process": 0, "pos": 0}
    new_theirs.sendall(_publish("t", b"fresh"))
    _readable(new_ours)
    client.loop_read()
    assert got == [b"fresh"]
    new_ours.close()
    new_theirs.close()


def test_a_socket_that_is_not_plain_tcp_keeps_pahos_reads(pair: Any) -> None:
    ours, theirs = pair

    class Wrapped(socket.socket):
        """Stands for a TLS or WebSocket connection."""

    wrapped = Wrapped(fileno=ours.detach())
    client, got = _client(wrapped)
    theirs.sendall(_publish("t", b"a") + _publish("t", b"b"))
    _readable(wrapped)
    client.loop_read()
    assert got == [b"a"]  # paho's own loop_read: one packet per call
    client.loop_read()
    assert got == [b"a", b"b"]
    wrapped.close()


def test_install_leaves_a_client_without_pahos_steps_alone() -> None:
    class NotPaho:
        pass

    thing = NotPaho()
    assert buffered_read.install(thing) is False
    assert not buffered_read.installed(thing) and buffered_read.held(thing) == 0
