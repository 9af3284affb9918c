"""mqtt:// writes QoS >= 1 PUBLISH and PUBACK packets on the thread that makes them
(transports/mqtt/paho_private/direct_write.py), and everything else through paho's queue.

A real paho client over a socket pair, put in paho's threaded state without starting
its thread: ``loop_write()`` then plays the network thread's write step, so the tests
see exactly which bytes left at once and which waited for paho, and in what order.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from jmspy.transports.mqtt.paho_private import direct_write


class _Peer:
    """The broker's end of the socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(5.0)  # a generous bound on bytes that must already be there

    def read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the client closed its end"
            data += chunk
        return data

    def nothing_waiting(self) -> bool:
        self.sock.setblocking(False)
        try:
            self.sock.recv(1)
        except BlockingIOError:
            return True
        finally:
            self.sock.settimeout(5.0)
        return False


@pytest.fixture
def pair() -> Any:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    wake_r, wake_w = socket.socketpair()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv311,
                         manual_ack=True)
    client._sock = ours
    # loop_start()'s state without its thread: packets paho queues stay queued until
    # the test calls loop_write(), the network thread's write step.
    client._sockpairR, client._sockpairW = wake_r, wake_w
    client._thread = threading.Thread(target=lambda: None)
    assert direct_write.install(client) and direct_write.installed(client)
    yield client, _Peer(theirs)
    client._thread = None
    for s in (ours, theirs, wake_r, wake_w):
        s.close()


def _puback(mid: int) -> bytes:
    return struct.pack("!BBH", 0x40, 2, mid)


def _publish_qos1(topic: str, payload: bytes, mid: int) -> bytes:
    body = struct.pack("!H", len(topic)) + topic.encode() + struct.pack("!H", mid) + payload
    assert len(body) < 128
    return bytes([0x32, len(body)]) + body


def _expect_publish(peer: _Peer, topic: str, payload: bytes, info: Any) -> None:
    """The peer reads exactly ``info``'s QoS 1 PUBLISH of ``payload`` to ``topic``."""
    packet = _publish_qos1(topic, payload, info.mid)
    assert peer.read(len(packet)) == packet


def _one_in_flight(client: Any, peer: _Peer, topic: str = "t") -> Any:
    """Publish one QoS 1 message, which leaves at once and then awaits its PUBACK."""
    info = client.publish(topic, b"one", qos=1)
    _expect_publish(peer, topic, b"one", info)
    return info


def test_a_puback_leaves_on_the_acking_thread_at_once(pair: Any) -> None:
    client, peer = pair
    client._last_msg_out = 0.0
    assert client.ack(7, 1) == 0
    assert peer.read(4) == _puback(7)  # paho's thread never ran
    assert not client._out_packet
    assert client._last_msg_out > 0.0  # paho's keep-alive clock saw the write


def test_a_qos1_publish_leaves_at_once_and_still_awaits_its_puback(pair: Any) -> None:
    client, peer = pair
    info = client.publish("t/1", b"hello", qos=1)
    assert info.rc == 0
    _expect_publish(peer, "t/1", b"hello", info)
    assert info.mid in client._out_messages and not info.is_published()


def test_other_packets_wait_for_paho_and_keep_their_place(pair: Any) -> None:
    """A QoS 0 PUBLISH goes through paho's queue (paho calls on_publish after writing
    it); a PUBACK made after it must not overtake it."""
    client, peer = pair
    published: list[int] = []
    client.on_publish = lambda c, u, mid, rc, props: published.append(mid)
    info = client.publish("t", b"zero", qos=0)
    assert client.ack(3, 1) == 0
    assert peer.nothing_waiting()  # both wait for the network thread
    assert len(client._out_packet) == 2
    client.loop_write()
    assert peer.read(9) == bytes([0x30, 7]) + b"\x00\x01tzero"
    assert peer.read(4) == _puback(3)
    assert published == [info.mid]  # paho's own after-write step ran for the QoS 0 one


def test_a_puback_made_while_paho_writes_waits_without_deadlock(pair: Any) -> None:
    """paho runs on_publish holding the writer; a callback that acknowledges there
    finds it busy and queues, and paho's writer sends it next."""
    client, peer = pair
    client.on_publish = lambda c, u, mid, rc, props: c.ack(9, 1)
    client.publish("t", b"zero", qos=0)
    client.loop_write()
    assert peer.read(9) == bytes([0x30, 7]) + b"\x00\x01tzero"
    client.loop_write()  # the PUBACK, if paho's first pass did not take it
    assert peer.read(4) == _puback(9)
    assert not client._out_packet


def test_a_partial_write_is_finished_by_paho_before_anything_else(pair: Any) -> None:
    client, peer = pair
    ours = client._sock
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    payload = bytes(range(256)) * 4096  # 1 MiB: more than the socket takes at once
    info = client.publish("big", payload, qos=1)
    assert info.rc == 0
    [rest] = client._out_packet
    assert 0 < rest["pos"] < len(rest["packet"])
    assert client.ack(4, 1) == 0  # queued behind the rest of the PUBLISH
    assert len(client._out_packet) == 2
    received = bytearray()
    total = len(rest["packet"]) + 4

    def drain() -> None:
        while len(received) < total:
            chunk = peer.sock.recv(65536)
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    for _ in range(100_000):
        if not client._out_packet:
            break
        client.loop_write()
        threading.Event().wait(0.0005)  # the reader making room in the socket
    reader.join(10.0)
    assert bytes(received[:-4]) == bytes(rest["packet"])
    assert bytes(received[-4:]) == _puback(4)


def test_a_broken_connection_leaves_the_packet_to_paho(pair: Any) -> None:
    client, peer = pair
    peer.sock.close()
    assert client.ack(5, 1) == 0  # no exception on the acking thread
    assert [p["packet"] for p in client._out_packet] == [_puback(5)]


def test_a_socket_that_is_not_plain_tcp_keeps_pahos_path(pair: Any) -> None:
    client, peer = pair

    class Wrapped(socket.socket):
        """Stands for a TLS or WebSocket connection."""

    wrapped = Wrapped(fileno=client._sock.detach())
    client._sock = wrapped
    assert client.ack(6, 1) == 0
    assert peer.nothing_waiting()
    client.loop_write()
    assert peer.read(4) == _puback(6)
    wrapped.close()


def test_install_leaves_a_client_without_pahos_steps_alone() -> None:
    class NotPaho:
        pass

    thing = NotPaho()
    assert direct_write.install(thing) is False
    assert not direct_write.installed(thing)


def _counting_sends(client: Any) -> list[int]:
    """Record the size of every write paho's writer makes."""
    sizes: list[int] = []
    send = client._sock_send

    def counted(buf: bytes) -> int:
        sizes.append(len(buf))
        return int(send(buf))

    client._sock_send = counted
    return sizes


def test_a_publish_made_while_another_awaits_its_puback_waits_for_the_network_thread(
        pair: Any) -> None:
    """With a PUBLISH in flight (a window of asynchronous sends), the next one is left to
    paho's network thread, which is awake reading PUBACKs and writes the queue at once."""
    client, peer = pair
    first = _one_in_flight(client, peer, "t/1")
    second = client.publish("t/1", b"two", qos=1)
    assert second.rc == 0
    assert peer.nothing_waiting()
    assert [p["mid"] for p in client._out_packet] == [second.mid]
    client.loop_write()
    _expect_publish(peer, "t/1", b"two", second)
    assert {first.mid, second.mid} <= set(client._out_messages)


def test_once_the_publish_in_flight_is_acknowledged_the_next_leaves_at_once(
        pair: Any) -> None:
    client, peer = pair
    first = _one_in_flight(client, peer)
    peer.sock.sendall(_puback(first.mid))
    for _ in range(1000):  # loop_read reads what is there; the PUBACK may lag a little
        client.loop_read()
        if first.is_published():
            break
        threading.Event().wait(0.001)  # the PUBACK crossing the socket pair
    assert first.is_published() and not client._out_messages
    second = client.publish("t", b"two", qos=1)
    _expect_publish(peer, "t", b"two", second)
    assert not client._out_packet


def test_queued_publishes_and_pubacks_leave_in_one_write_in_their_order(pair: Any) -> None:
    client, peer = pair
    _one_in_flight(client, peer)
    sizes = _counting_sends(client)
    queued = [client.publish("t", f"m{i}".encode(), qos=1) for i in range(5)]
    assert client.ack(3, 1) == 0  # behind the queued PUBLISHes, so queued too
    assert peer.nothing_waiting() and len(client._out_packet) == 6
    client.loop_write()
    expected = b"".join(_publish_qos1("t", f"m{i}".encode(), info.mid)
                        for i, info in enumerate(queued)) + _puback(3)
    assert sizes == [len(expected)]
    assert peer.read(len(expected)) == expected
    assert not client._out_packet
    assert all(info.mid in client._out_messages for info in queued)  # still awaiting acks


def test_a_qos0_publish_is_not_joined_and_keeps_pahos_after_write_step(pair: Any) -> None:
    client, peer = pair
    published: list[int] = []
    client.on_publish = lambda c, u, mid, rc, props: published.append(mid)
    _one_in_flight(client, peer)
    sizes = _counting_sends(client)
    a = client.publish("t", b"a", qos=1)
    b = client.publish("t", b"b", qos=1)
    zero = client.publish("t", b"zero", qos=0)
    c = client.publish("t", b"c", qos=1)
    client.loop_write()
    pa, pb, pc = (_publish_qos1("t", p, i.mid) for p, i in ((b"a", a), (b"b", b), (b"c", c)))
    assert sizes == [len(pa) + len(pb), 9, len(pc)]
    assert peer.read(len(pa) + len(pb) + 9 + len(pc)) == (
        pa + pb + bytes([0x30, 7]) + b"\x00\x01tzero" + pc)
    assert published == [zero.mid] and zero.is_published()


def test_joined_writes_stop_at_the_merge_limit(pair: Any, monkeypatch: Any) -> None:
    client, peer = pair
    _one_in_flight(client, peer)
    packet_size = len(_publish_qos1("t", b"x" * 20, 2))
    monkeypatch.setattr(direct_write, "MERGE_LIMIT", 2 * packet_size)
    sizes = _counting_sends(client)
    infos = [client.publish("t", b"x" * 20, qos=1) for _ in range(5)]
    client.loop_write()
    assert sizes == [2 * packet_size, 2 * packet_size, packet_size]
    assert peer.read(5 * packet_size) == b"".join(
        _publish_qos1("t", b"x" * 20, i.mid) for i in infos)
