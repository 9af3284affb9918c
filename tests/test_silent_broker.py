"""A broker that went silent (heart-beat 0,0: nothing tells the client it is gone) holds
no call past its timeout: a persistent ``send()`` fails after ``sendTimeout`` and
``close()`` after ``closeTimeout``, each naming the property, on stomp:// and mqtt://.

The servers are loopback sockets that complete CONNECT and then never answer. Blocking
calls run on a guarded thread; no elapsed time is asserted."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from scripted_stomp import LoopbackServer, read_client_frames, run_guarded

from jmspy import Connection, ConnectionFactory, JMSException, Session
from jmspy._speedups import load
from jmspy.destinations import Destination
from jmspy.errors import ResourceAllocationException
from jmspy.stomp_frames import Frame

_codec = load("stomp_codec")
GUARD = 60.0  # seconds a call may block before the test calls it a hang


def on_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a thread; its result or exception, failing if it hangs."""
    return run_guarded(fn, GUARD)


class Silent(LoopbackServer):
    """Accepts connections; ``answer(sock)`` completes the handshake, then it reads and
    never writes again."""

    def __init__(self, answer: Callable[[socket.socket], None]) -> None:
        self.answer = answer
        super().__init__()

    def accepted(self, index: int, sock: socket.socket) -> None:
        threading.Thread(target=self.answer, args=(sock,), daemon=True).start()


def _stomp_connected_then_silent(sock: socket.socket) -> None:
    def on_frame(frame: Frame) -> bool:
        if frame.command in ("CONNECT", "STOMP"):
            sock.sendall(bytes(_codec.encode_frame(Frame("CONNECTED", [
                ("version", "1.2"), ("heart-beat", "0,0")]), "1.2")))
        return False  # everything else: silence

    read_client_frames(sock, on_frame)


def _mqtt_connack_then_silent(sock: socket.socket) -> None:
    try:
        sock.recv(65536)  # the CONNECT (3.1.1)
        sock.sendall(b"\x20\x02\x00\x00")  # CONNACK, session present 0, accepted
        while sock.recv(65536):
            pass  # PUBLISH, PINGREQ...: never answered
    except OSError:
        return


@pytest.fixture
def silent_stomp() -> Iterator[Silent]:
    server = Silent(_stomp_connected_then_silent)
    yield server
    server.close()


@pytest.fixture
def silent_mqtt() -> Iterator[Silent]:
    server = Silent(_mqtt_connack_then_silent)
    yield server
    server.close()


def _send_into_silence(conn: Connection, destination: Callable[[Any], Destination]) -> None:
    """A PERSISTENT send to ``destination(session)`` fails after sendTimeout=100 ms."""
    session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
    producer = session.create_producer(destination(session))  # PERSISTENT (MQTT: QoS 1)
    with pytest.raises(ResourceAllocationException, match="sendTimeout=100 ms"):
        on_thread(lambda: producer.send(session.create_text_message("into silence")))


def test_stomp_persistent_send_to_a_silent_broker_fails_naming_send_timeout(
        silent_stomp: Silent) -> None:
    url = f"stomp://127.0.0.1:{silent_stomp.port}?heartbeat=0"
    conn = ConnectionFactory(url, sendTimeout=100, closeTimeout=1).create_connection()
    try:
        _send_into_silence(conn, lambda session: session.create_queue("q"))
    finally:
        with pytest.raises(JMSException, match="closeTimeout=1"):
            on_thread(conn.close)


def test_stomp_close_on_a_silent_broker_fails_naming_close_timeout(
        silent_stomp: Silent) -> None:
    url = f"stomp://127.0.0.1:{silent_stomp.port}?heartbeat=0"
    conn = ConnectionFactory(url, closeTimeout=1).create_connection()
    with pytest.raises(JMSException, match="closeTimeout=1") as late:
        on_thread(conn.close)
    assert late.value.error_code == "CLOSE_TIMEOUT"
    assert conn.closed


def test_the_defaults_bound_both_waits() -> None:
    factory = ConnectionFactory("stomp://127.0.0.1:1")
    assert factory["sendTimeout"] == 30_000 and factory["closeTimeout"] == 5


def test_mqtt_persistent_send_to_a_silent_broker_fails_naming_send_timeout(
        silent_mqtt: Silent) -> None:
    url = f"mqtt://127.0.0.1:{silent_mqtt.port}?version=3.1.1&keepalive=0"
    conn = ConnectionFactory(url, sendTimeout=100, closeTimeout=1).create_connection()
    try:
        _send_into_silence(conn, lambda session: session.create_topic("t"))
    finally:
        on_thread(conn.close)  # an MQTT DISCONNECT has no answer to wait for
