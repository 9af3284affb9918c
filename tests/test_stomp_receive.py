"""stomp:// reads the broker's frames with jmspy's codec, not stomp.py's parser
(transports/stomp/receive.py).

A scripted broker on a loopback socket (it parses what the client sends with the same
codec, server side) lets each test send exactly the bytes it needs: many frames in one
write, frames cut into single bytes, repeated and escaped headers, NULs in a body,
malformed frames, oversized bodies, and a long run of MESSAGE frames with no heart-beat
in between. stomp.py's ``parse_frame`` is made to fail in every test, so a test passes
only if jmspy's reader is the one in use. Runs on both codec twins.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import stomp.transport
import stomp.utils
from library_paths import needs_stomp_hooks
from polling import wait_until
from scripted_stomp import ScriptedBroker

from jmspy import ConnectionFactory, JMSException, Session
from jmspy.destinations import Queue


@pytest.fixture(autouse=True)
def _stomp_py_parser_unused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(frame: bytes) -> Any:
        raise AssertionError("stomp.py's parser was used: jmspy's frame reader is not in place")

    monkeypatch.setattr(stomp.transport, "parse_frame", refuse)
    monkeypatch.setattr(stomp.utils, "parse_frame", refuse)


@pytest.fixture
def broker() -> Iterator[ScriptedBroker]:
    b = ScriptedBroker()
    yield b
    b.close()


def _consume(
    broker: ScriptedBroker, count: int, query: str = "heartbeat=0", timeout: float = 10.0,
    on_message: Callable[[Any], object] = lambda m: None,
) -> tuple[list[Any], list[JMSException]]:
    errors: list[JMSException] = []
    conn = ConnectionFactory(f"{broker.url}?{query}").create_connection()
    conn.set_exception_listener(errors.append)
    try:
        session = conn.create_session(False, Session.CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(Queue("q"))
        conn.start()
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            try:
                m = consumer.receive(0.2)
            except JMSException as exc:  # the connection is gone: receive() says so
                assert exc.error_code == "CONNECTION_LOST"
                while time.monotonic() < deadline and not any(
                        e.error_code == "CONNECTION_LOST" for e in errors):
                    time.sleep(0.01)  # the exception listener runs on its own thread
                break
            if m is not None:
                got.append(m)
                on_message(m)
        return got, errors
    finally:
        conn.close()


@needs_stomp_hooks
def test_many_frames_in_one_write_and_one_byte_at_a_time_arrive_whole_and_in_order(
    broker: ScriptedBroker,
) -> None:
    def script(b: ScriptedBroker) -> None:
        b.write(b"".join(b.message(f"bulk-{i}".encode(), i) for i in range(200)))
        for i in range(200, 205):
            for byte in b.message(f"drip-{i}".encode(), i):
                b.write(bytes([byte]))
                time.sleep(0.0005)

    broker.script = script
    got, errors = _consume(broker, 205)
    assert [m.body.decode() for m in got] == [f"bulk-{i}" for i in range(200)] + [
        f"drip-{i}" for i in range(200, 205)]
    assert errors == []


@needs_stomp_hooks
def test_repeated_header_keeps_first_value_and_escapes_and_nul_bodies_survive(
    broker: ScriptedBroker,
) -> None:
    body = b"a\x00b\x00"

    def script(b: ScriptedBroker) -> None:
        b.write(b.message(body, 1, [("color", "red:\n\\x"), ("color", "blue"),
                                    ("content-type", "application/octet-stream")]))

    broker.script = script
    (m,), errors = _consume(broker, 1)
    assert m.get_string_property("color") == "red:\n\\x"
    assert m.body == body
    assert errors == []


@needs_stomp_hooks
def test_malformed_frame_is_reported_and_closes_the_connection(broker: ScriptedBroker) -> None:
    # The bad frame is written once the application holds the good one: prefetched
    # messages of a dropped connection are discarded (the broker redelivers them), so
    # without this order a slow receive() would find the connection already gone.
    consumed = threading.Event()

    def script(b: ScriptedBroker) -> None:
        b.write(b.message(b"fine", 1))
        consumed.wait(30)
        b.write(b"MESSAGE\nsubscription:" + b.sub_id.encode() + b"\nbad\\qescape:x\n\nzzz\x00")

    broker.script = script
    got, errors = _consume(broker, 2, timeout=10.0, on_message=lambda m: consumed.set())
    assert [m.body.decode() for m in got] == ["fine"]
    texts = [str(e) for e in errors]
    assert any("not a valid STOMP frame" in t and "escape" in t.lower() for t in texts), texts
    assert any(e.error_code == "CONNECTION_LOST" for e in errors), texts


@needs_stomp_hooks
def test_body_over_max_frame_bytes_is_refused_naming_the_limit(broker: ScriptedBroker) -> None:
    def script(b: ScriptedBroker) -> None:
        b.write(b.message(b"x" * 5000, 1))

    broker.script = script
    got, errors = _consume(broker, 1, query="heartbeat=0&max_frame_bytes=1000", timeout=3.0)
    assert got == []
    texts = [str(e) for e in errors]
    assert any("max_frame_bytes=1000" in t for t in texts), texts


def test_bad_max_frame_bytes_in_url_is_a_clear_configuration_error() -> None:
    from jmspy.errors import InvalidConfigurationException

    with pytest.raises(InvalidConfigurationException, match="max_frame_bytes='lots'"):
        ConnectionFactory("stomp://127.0.0.1:1?max_frame_bytes=lots").create_connection()
    with pytest.raises(InvalidConfigurationException, match="heartbeat='-5'"):
        ConnectionFactory("stomp://127.0.0.1:1?heartbeat=-5").create_connection()


@needs_stomp_hooks
def test_messages_without_heartbeats_keep_a_busy_connection_alive() -> None:
    """Brokers send no heart-beats while MESSAGE frames flow. stomp.py's monitor must hear
    of every read, or it declares a busy consumer's broker dead after 1.5 x the interval."""
    broker = ScriptedBroker(heart_beat="200,200")  # the broker promises a beat every 200 ms

    def script(b: ScriptedBroker) -> None:
        for i in range(15):  # 1.5 s of messages 100 ms apart, no EOL heart-beat at all
            b.write(b.message(f"m{i}".encode(), i))
            time.sleep(0.1)

    broker.script = script
    try:
        got, errors = _consume(broker, 15, query="heartbeat=200", timeout=5.0)
    finally:
        broker.close()
    assert [m.body.decode() for m in got] == [f"m{i}" for i in range(15)]
    assert errors == []


@needs_stomp_hooks
def test_silent_broker_is_declared_dead_without_errors_on_stomp_py_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker that promised heart-beats every 200 ms and then says nothing (its socket
    still open) is given up on: CONNECTION_LOST reaches the exception listener, and
    stomp.py's own threads finish without an exception (each listener of a stomp.py
    connection must answer everything stomp.py calls on it)."""
    thread_errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: thread_errors.append(a.exc_value))
    broker = ScriptedBroker(heart_beat="200,200")
    broker.script = lambda b: None  # connected, subscribed, then silence
    errors: list[JMSException] = []
    try:
        conn = ConnectionFactory(f"{broker.url}?heartbeat=200").create_connection()
        conn.set_exception_listener(errors.append)
        session = conn.create_session(False, Session.AUTO_ACKNOWLEDGE)
        session.create_consumer(Queue("q"))
        conn.start()
        wait_until(lambda: errors, 5, interval=0.05)
        time.sleep(0.3)  # let stomp.py's heart-beat thread finish its round of listeners
        conn.close()
    finally:
        broker.close()
    assert [e.error_code for e in errors] == ["CONNECTION_LOST"]
    assert thread_errors == []


class _InMemoryTransport:
    """What :class:`FrameReader` uses of a stomp.py transport, without a socket: each
    ``receive()`` returns the next chunk queued by the test; the heart-beat listener is
    stomp.py's own."""

    running = True
    blocking = True
    socket = None

    def __init__(self, listener: Any) -> None:
        self.listener = listener
        self.chunks: list[bytes] = []
        self.frames: list[str] = []

    def get_listener(self, name: str) -> Any:
        return self.listener if name == "protocol-listener" else None

    def receive(self) -> bytes:
        return self.chunks.pop(0)

    def process_frame(self, frame: Any, raw: bytes) -> None:
        self.frames.append(frame.cmd)


def test_heartbeat_eols_alone_keep_an_idle_connection_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker with nothing to deliver sends bare EOLs as heart-beats: each read of them
    tells stomp.py's heart-beat monitor the broker is alive, so the monitor's deadline
    (the last news plus 1.5 x the promised 200 ms) is never passed through 1.5 s of beats
    100 ms apart, and the message after them arrives. Without the scheduler: stomp.py's
    own HeartbeatListener on a fake clock (its monitor thread is not started; the test
    makes the monitor's check itself), fed by jmspy's FrameReader from memory. The same
    1.5 s with no reads at all passes the deadline, so the beats are what kept it alive."""
    from stomp.listener import HeartbeatListener

    from jmspy.transports.stomp.receive import FrameReader

    now = [500.0]
    monkeypatch.setattr(stomp.listener, "monotonic", lambda: now[0])
    monitor = HeartbeatListener(None, (200, 200))
    monitor.heartbeat_thread = threading.current_thread()  # no monitor thread: we check
    monitor.on_connected(stomp.utils.Frame("CONNECTED", {"heart-beat": "200,200"}))
    deadline_s = monitor.receive_sleep  # 0.3 s: stomp.py's 1.5 x the broker's 200 ms
    messages: list[bytes] = []
    transport = _InMemoryTransport(monitor)
    reader = FrameReader(transport, "1.2", lambda h, body: messages.append(body),
                         lambda text: pytest.fail(text), idle_spin_us=0)

    def alive() -> bool:  # the monitor's own test (HeartbeatListener's heart-beat loop)
        return not now[0] - monitor.received_heartbeat > deadline_s

    now[0] += deadline_s  # the grace stomp.py gives the first beat has passed
    for _ in range(15):  # 1.5 s of EOLs 100 ms apart, nothing else
        now[0] += 0.1
        transport.chunks.append(b"\n")
        reader.read_frames()
        assert alive()
    transport.chunks.append(b"MESSAGE\nsubscription:s\nmessage-id:1\ndestination:/queue/q"
                            b"\n\nafter the beats\0")
    reader.read_frames()
    assert messages == [b"after the beats"] and transport.frames == [] and alive()
    now[0] += 1.5  # the same 1.5 s without a read: the monitor would declare it dead
    assert not alive()


@needs_stomp_hooks
def test_an_eol_after_every_frame_reaches_no_stomp_py_listener(
    broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RabbitMQ ends every MESSAGE with an EOL. The frames arrive whole and in order, and
    none of those EOLs goes through stomp.py's ``notify`` (a sort of its listeners and a
    log call each, per message)."""
    notified: list[str] = []
    original = stomp.transport.BaseTransport.notify

    def counting(self: Any, frame_type: str, *args: Any, **kwargs: Any) -> Any:
        notified.append(frame_type)
        return original(self, frame_type, *args, **kwargs)

    monkeypatch.setattr(stomp.transport.BaseTransport, "notify", counting)

    def script(b: ScriptedBroker) -> None:
        b.write(b"".join(b.message(f"m{i}".encode(), i) + b"\n" for i in range(50)))

    broker.script = script
    got, errors = _consume(broker, 50)
    assert [m.body.decode() for m in got] == [f"m{i}" for i in range(50)]
    assert errors == []
    assert "heartbeat" not in notified
