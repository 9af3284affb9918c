"""The stomp:// transport's SEND/ACK writer (transports/stomp/wire.py) against stomp.py.

The writer replaces stomp.py's own encoding for the per-message frames, so whatever it
writes must read back, through stomp.py's parser (what a peer using stomp.py sees), as the
frame stomp.py itself would have sent: same command, headers (escaping included) and body,
for STOMP 1.2 and 1.1.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_paths import needs_stomp_hooks
from stomp import utils as stomp_utils

from jmspy.transports.stomp.stomppy_private import WRITE_LOCK as _WRITE_LOCK
from jmspy.transports.stomp.wire import FrameWriter, use_c_write_lock


class _Transport:
    def __init__(self, blocking: bool) -> None:
        self.blocking = blocking
        self.written: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.written.append(data)


class _Conn:
    """Stands in for a stomp.py connection: records what stomp.py's own path was asked."""

    def __init__(self, blocking: bool = True) -> None:
        self.transport = _Transport(blocking)
        self.calls: list[tuple[Any, ...]] = []

    def send(self, destination: str, body: bytes, headers: dict[str, str]) -> None:
        self.calls.append(("send", destination, body, headers))

    def ack(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("ack", args, kwargs))


def _frames(data: bytes) -> list[Any]:
    """Split on NUL (bodies here carry content-length and no NUL) and parse with stomp.py."""
    out = []
    for chunk in data.split(b"\x00"):
        if chunk.strip(b"\n"):
            out.append(stomp_utils.parse_frame(chunk))
    return out


header_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(
    version=st.sampled_from(["1.2", "1.1"]),
    props=st.dictionaries(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.", min_size=1, max_size=12).filter(
            lambda k: k not in ("destination", "content-length")),
        header_text, max_size=6),
    body=st.binary(max_size=64).filter(lambda b: b"\x00" not in b),
)
def test_send_reads_back_as_stomp_py_would_send_it(
    version: str, props: dict[str, str], body: bytes
) -> None:
    conn = _Conn()
    FrameWriter(conn, version).send("/queue/a:b", body, props)
    (frame,) = _frames(conn.transport.written[0])
    assert frame.cmd == "SEND"
    expected = {"destination": "/queue/a:b", **props}
    if body:
        expected["content-length"] = str(len(body))
    assert frame.headers == expected
    assert frame.body == body
    assert conn.calls == []  # nothing went through stomp.py's own encoding


@pytest.mark.parametrize("version", ["1.2", "1.1"])
def test_acks_are_one_frame_each_in_order_in_one_write(version: str) -> None:
    conn = _Conn()
    acks = [("ID:host-1:1:1:1", "sub-1"), ("T_2@@session\nx@@7", "sub-2")]
    FrameWriter(conn, version).ack(acks, "tx-9")
    assert len(conn.transport.written) == 1
    frames = _frames(conn.transport.written[0])
    assert [f.cmd for f in frames] == ["ACK", "ACK"]
    if version == "1.2":
        assert [f.headers for f in frames] == [
            {"id": a, "transaction": "tx-9"} for a, _ in acks]
    else:
        assert [f.headers for f in frames] == [
            {"message-id": a, "subscription": s, "transaction": "tx-9"} for a, s in acks]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(header_text, header_text), min_size=1, max_size=3),
       st.one_of(st.none(), header_text), st.sampled_from(["1.2", "1.1"]))
def test_ack_bytes_are_the_codecs_whatever_the_ids_hold(
        acks: list[tuple[str, str]], tx: str | None, version: str) -> None:
    """Plain ids take a shortcut past the codec; every id, plain or not, must come out as
    the codec's own encoding of the ACK frame (or fail as the codec fails)."""
    from jmspy import twins
    from jmspy.stomp_frames import Frame, FrameError

    def codec(ack_id: str, sub_id: str) -> bytes:
        items = [("id", ack_id)] if version == "1.2" else [
            ("message-id", ack_id), ("subscription", sub_id)]
        if tx is not None:
            items.append(("transaction", tx))
        return bytes(twins.stomp_codec.encode_frame(Frame("ACK", items, b""), version))

    conn = _Conn()
    try:
        expected = b"".join(codec(a, s) for a, s in acks)
    except FrameError as exc:
        with pytest.raises(FrameError, match=re.escape(str(exc))):
            FrameWriter(conn, version).ack(acks, tx)
        return
    FrameWriter(conn, version).ack(acks, tx)
    assert conn.transport.written == [expected]


def test_a_queued_transport_keeps_stomp_py_path_so_frames_stay_in_order() -> None:
    conn = _Conn(blocking=False)  # stomp.py's TLS transport: writes go via its I/O queue
    writer = FrameWriter(conn, "1.2")
    writer.send("/queue/q", b"x", {"k": "v"})
    writer.ack([("a1", "s"), ("a2", "s")], None)
    assert conn.transport.written == []
    assert conn.calls == [
        ("send", "/queue/q", b"x", {"k": "v"}),
        ("ack", ("a1",), {"transaction": None}),
        ("ack", ("a2",), {"transaction": None}),
    ]


# -- the write lock (use_c_write_lock) ----------------------------------------------------
_LOCK_TYPE = type(threading.Lock())


def _stomp_py_connection() -> Any:
    import stomp

    return stomp.Connection12([("127.0.0.1", 1)], heartbeats=(0, 0))


@needs_stomp_hooks
def test_stomp_py_still_guards_its_socket_with_the_semaphore_we_replace() -> None:
    # Fails when a stomp.py release renames or retypes the lock, so the fallback (its own
    # slower semaphore) never goes unnoticed.
    conn = _stomp_py_connection()
    assert isinstance(getattr(conn.transport, _WRITE_LOCK), threading.BoundedSemaphore)
    assert use_c_write_lock(conn) is True
    assert type(getattr(conn.transport, _WRITE_LOCK)) is _LOCK_TYPE


def test_every_write_through_stomp_py_waits_for_the_new_lock() -> None:
    conn = _stomp_py_connection()
    use_c_write_lock(conn)
    ours, theirs = socket.socketpair()
    conn.transport.socket = ours
    lock = getattr(conn.transport, _WRITE_LOCK)
    writer = FrameWriter(conn, "1.2")
    done = threading.Event()

    def write() -> None:
        writer.ack([("a-1", "s")], None)
        done.set()

    try:
        with lock:  # another writer holds the socket
            thread = threading.Thread(target=write, daemon=True)
            thread.start()
            assert not done.wait(0.2)  # waits up to 0.2 s for a write that must not happen
            theirs.setblocking(False)
            with pytest.raises(BlockingIOError):
                theirs.recv(100)  # nothing was written while the lock was held
        assert done.wait(10)
        theirs.setblocking(True)
        (frame,) = _frames(theirs.recv(1000))
        assert (frame.cmd, frame.headers) == ("ACK", {"id": "a-1"})
    finally:
        conn.transport.socket = None
        ours.close()
        theirs.close()


def test_a_transport_without_the_semaphore_is_left_as_it_is() -> None:
    conn = _Conn()
    assert use_c_write_lock(conn) is False
    assert not hasattr(conn.transport, _WRITE_LOCK)


@needs_stomp_hooks
def test_a_stomp_url_connection_writes_under_a_c_lock(
        vm_broker_factory: Callable[..., Any]) -> None:
    from jmspy import ConnectionFactory

    host, _ = vm_broker_factory()
    url = host.add_connector("stomp://127.0.0.1:0")
    conn = ConnectionFactory(f"{url}?heartbeat=0").create_connection()
    try:
        stomp_conn = conn._transport._conn  # type: ignore[attr-defined]
        assert type(getattr(stomp_conn.transport, _WRITE_LOCK)) is _LOCK_TYPE
        session = conn.create_session()
        queue = session.create_queue("wire.lock")
        consumer = session.create_consumer(queue)
        conn.start()
        session.create_producer(queue).send(session.create_text_message("through the lock"))
        received = consumer.receive(10)
        assert received is not None and received.text == "through the lock"
    finally:
        conn.close()
