"""The stomp:// client never hangs on a broker that misbehaves (issue 11, items 9-11):
``create_connection()`` gives up after ``connect_timeout``; a ``receive()`` blocked with no
timeout raises the CONNECTION_LOST error once the connection is gone (garbage, an
oversized frame, invalid UTF-8, a close mid-frame) and, with reconnect on, keeps waiting
across the reconnect; ``close()`` gives up on a silent broker after ``closeTimeout``.

A scripted broker on a loopback socket sends exactly the bytes each case needs. Every
blocking call runs on a helper thread joined with a generous guard, so a regression fails
the test instead of hanging the suite; elapsed times are measured by
benchmarks/client_hangs.py, not asserted here.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from scripted_stomp import LoopbackServer, read_client_frames, run_guarded

from jmspy import ConnectionFactory, JMSException, Session
from jmspy._speedups import load
from jmspy.destinations import Queue
from jmspy.stomp_frames import Frame

_codec = load("stomp_codec")
GUARD = 30.0  # seconds a blocking call may take before the test calls it a hang


class Broker(LoopbackServer):
    """Serves connections one after another; ``plans[i]`` scripts the i-th: called with
    (socket, subscription id) after CONNECTED and the first SUBSCRIBE, or, for "silent",
    never answering at all."""

    def __init__(self, plans: list[Callable[[socket.socket, str], None] | str],
                 quiet_disconnect: bool = False) -> None:
        self.plans = plans
        self.quiet_disconnect = quiet_disconnect
        super().__init__(limit=len(plans))

    def accepted(self, index: int, sock: socket.socket) -> None:
        plan = self.plans[index]
        if plan == "silent":
            return
        assert callable(plan)
        threading.Thread(target=self._session, args=(sock, plan), daemon=True).start()

    def _session(self, sock: socket.socket, plan: Callable[[socket.socket, str], None]) -> None:
        def on_frame(frame: Frame) -> bool:
            if frame.command in ("CONNECT", "STOMP"):
                sock.sendall(bytes(_codec.encode_frame(Frame("CONNECTED", [
                    ("version", "1.2"), ("heart-beat", "0,0")]), "1.2")))
                return False
            if frame.command == "DISCONNECT" and self.quiet_disconnect:
                return True  # silent about the receipt: a broker that went quiet
            receipt = frame.header("receipt")
            if receipt:
                sock.sendall(bytes(_codec.encode_frame(
                    Frame("RECEIPT", [("receipt-id", receipt)]), "1.2")))
            if frame.command == "SUBSCRIBE":
                plan(sock, frame.header("id") or "")
            return False

        read_client_frames(sock, on_frame)


@pytest.fixture
def brokers() -> Iterator[Callable[..., Broker]]:
    made: list[Broker] = []

    def make(*plans: Callable[[socket.socket, str], None] | str,
             quiet_disconnect: bool = False) -> Broker:
        b = Broker(list(plans), quiet_disconnect)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def on_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a thread; its result or exception, failing if it hangs."""
    return run_guarded(fn, GUARD)


def _until(check: Callable[[], bool]) -> bool:
    while not check():
        time.sleep(0.01)  # polls for another thread's callback
    return True


def message(sid: str, body: bytes = b"hello", n: int = 1) -> bytes:
    return bytes(_codec.encode_frame(Frame("MESSAGE", [
        ("destination", "/queue/q"), ("subscription", sid), ("message-id", f"m{n}"),
        ("ack", f"a{n}")], body), "1.2"))


# -- 9: connect timeout ---------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "?connect_timeout=1"])
def test_create_connection_gives_up_on_a_server_that_never_answers_connect(
    brokers: Callable[..., Broker], query: str
) -> None:
    b = brokers("silent", "silent")
    factory = ConnectionFactory(f"stomp://127.0.0.1:{b.port}{query}")
    with pytest.raises(JMSException) as err:
        on_thread(factory.create_connection)
    text = str(err.value)
    assert f"127.0.0.1:{b.port}" in text and "CONNECTED" in text
    assert ("connect_timeout=1 s" if query else "connect_timeout=10 s") in text
    assert err.value.error_code == "CONNECT_TIMEOUT"


# -- 10: a blocked receive() wakes up when the connection is gone ----------------------------


def _garbage(sock: socket.socket, sid: str) -> None:
    sock.sendall(b"\x16\x03\x01 this is not STOMP\n\n\0")


def _oversized(sock: socket.socket, sid: str) -> None:
    sock.sendall(message(sid, b"x" * 5000))


def _bad_utf8(sock: socket.socket, sid: str) -> None:
    sock.sendall(b"MESSAGE\ndestination:/queue/q\nsubscription:" + sid.encode()
                 + b"\nmessage-id:\xff\xfe\nack:a\n\nx\0")


def _closed_mid_frame(sock: socket.socket, sid: str) -> None:
    sock.sendall(message(sid)[:30])
    sock.close()


@pytest.mark.parametrize("plan", [_garbage, _oversized, _bad_utf8, _closed_mid_frame],
                         ids=["garbage", "oversized", "invalid-utf8", "closed-mid-frame"])
def test_blocked_receive_raises_connection_lost_when_the_connection_goes(
    brokers: Callable[..., Broker], plan: Callable[[socket.socket, str], None]
) -> None:
    b = brokers(plan)
    conn = ConnectionFactory(f"stomp://127.0.0.1:{b.port}?heartbeat=0&max_frame_bytes=1000"
                             ).create_connection()
    heard: list[JMSException] = []
    conn.set_exception_listener(heard.append)
    try:
        consumer = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE).create_consumer(
            Queue("q"))
        conn.start()
        with pytest.raises(JMSException) as err:
            on_thread(consumer.receive)  # no timeout
        assert err.value.error_code == "CONNECTION_LOST"
        # the listener runs on the connection's notifier thread: wait for it, bounded
        assert on_thread(lambda: _until(lambda: any(
            e.error_code == "CONNECTION_LOST" for e in heard)))
        with pytest.raises(JMSException):  # and a later receive() does not wait either
            on_thread(consumer.receive)
    finally:
        on_thread(conn.close)


def test_closing_the_consumer_returns_none_from_a_blocked_receive(
    brokers: Callable[..., Broker]
) -> None:
    b = brokers(lambda sock, sid: None)
    conn = ConnectionFactory(f"stomp://127.0.0.1:{b.port}?heartbeat=0").create_connection()
    try:
        consumer = conn.create_session().create_consumer(Queue("q"))
        conn.start()
        waiting = threading.Event()
        result: list[Any] = []

        def receive() -> None:
            waiting.set()
            result.append(consumer.receive())

        t = threading.Thread(target=receive, daemon=True)
        t.start()
        assert waiting.wait(GUARD)
        consumer.close()
        t.join(GUARD)
        assert not t.is_alive() and result == [None]
    finally:
        on_thread(conn.close)


def test_with_reconnect_on_a_blocked_receive_waits_across_the_reconnect(
    brokers: Callable[..., Broker]
) -> None:
    b = brokers(_closed_mid_frame, lambda sock, sid: sock.sendall(message(sid, b"after")))
    factory = ConnectionFactory(f"stomp://127.0.0.1:{b.port}?heartbeat=0",
                                imqReconnectEnabled=True, imqReconnectInterval=50)
    conn = factory.create_connection()
    heard: list[str | None] = []
    conn.set_exception_listener(lambda e: heard.append(e.error_code))
    try:
        consumer = conn.create_session().create_consumer(Queue("q"))
        conn.start()
        got = on_thread(consumer.receive)
        assert got is not None and got.body == b"after"
        assert "CONNECTION_INTERRUPTED" in heard and "CONNECTION_LOST" not in heard
    finally:
        on_thread(conn.close)


# -- 11: close() honours closeTimeout --------------------------------------------------------


def test_close_gives_up_on_a_silent_broker_after_close_timeout(
    brokers: Callable[..., Broker], caplog: pytest.LogCaptureFixture
) -> None:
    b = brokers(lambda sock, sid: None, quiet_disconnect=True)
    factory = ConnectionFactory(f"stomp://127.0.0.1:{b.port}?heartbeat=0", closeTimeout=1)
    conn = factory.create_connection()
    conn.create_session().create_consumer(Queue("q"))
    with caplog.at_level(logging.WARNING, "jmspy.transport.stomp"), pytest.raises(
            JMSException, match="closeTimeout=1") as late:
        on_thread(conn.close)  # the broker never answers DISCONNECT's receipt
    assert late.value.error_code == "CLOSE_TIMEOUT"
    assert any("no receipt for DISCONNECT" in r.getMessage() and "closeTimeout=1" in
               r.getMessage() for r in caplog.records)
    with pytest.raises(JMSException):  # closed for good
        conn.create_session()


def test_rollback_on_a_socket_the_broker_just_closed_is_no_error() -> None:
    """A commit refused by the broker fails with TransactionRolledBackException, whose
    rollback may meet the socket the broker closed after its ERROR before stomp.py has
    reported the drop: the ABORT's OSError must not replace the refusal (a STOMP broker
    aborts the transactions of a connection that ends)."""
    from urllib.parse import urlsplit

    from jmspy.transports.stomp.transport import StompTransport

    class ClosedSocketConnection:
        def abort(self, tx: str) -> None:
            raise OSError(9, "Bad file descriptor")

    transport = StompTransport(urlsplit("stomp://127.0.0.1:1"), {})
    transport._conn = ClosedSocketConnection()
    transport._settled.set()
    transport.rollback("tx-1")  # returns: nothing is left open on the broker
