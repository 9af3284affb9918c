"""Wire-level behaviour: heart-beats, bodies with NULs, escaping, versions, errors,
limits and a client that stops reading."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest
from stomp_support import RawClient, ServerHandle

from jmspy.broker_ref.core import AddressSettings
from jmspy.stomp_frames import CodecLimits


def test_heartbeating_client_keeps_connection(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2", heartbeats=(100, 100))
    time.sleep(0.6)  # several intervals, both ways
    assert conn.is_connected() and not lst.disconnected.is_set()
    conn.subscribe("/queue/hb", id="s")
    conn.send("/queue/hb", "alive")
    assert lst.wait_messages(1)[0].body == "alive"


def test_server_sends_heartbeats(server: ServerHandle) -> None:
    with RawClient(server.host, server.port) as c:
        connected = c.connect(heart_beat="0,100")
        assert connected.command == "CONNECTED" and connected.header("heart-beat") == "50,50"
        eols = 0
        deadline = time.monotonic() + 0.6
        c.sock.settimeout(0.05)
        while time.monotonic() < deadline:
            try:
                eols += c.sock.recv(100).count(b"\n")
            except TimeoutError:
                pass
        assert eols >= 3


def test_silent_client_is_dropped(server: ServerHandle) -> None:
    with RawClient(server.host, server.port) as c:
        assert c.connect(heart_beat="100,0").command == "CONNECTED"
        started = time.monotonic()
        assert c.closed_by_server(timeout=3)
        # not at once: only after the missed heart-beats (the wait above bounds a hang)
        assert time.monotonic() - started > 0.15


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_content_length_body_with_nuls(server: ServerHandle, connect, version: str) -> None:
    conn, lst = connect(version)
    conn.subscribe("/queue/nul", id="s")
    conn.send("/queue/nul", b"a\0b\0\0c")
    m = lst.wait_messages(1)[0]
    assert m.body == "a\0b\0\0c"
    assert "content-type" not in m.headers  # BYTES message
    with RawClient(server.host, server.port) as c:
        c.connect()
        c.send(b"SUBSCRIBE\nid:1\ndestination:/queue/nul2\n\n\0")
        c.send(b"SEND\ndestination:/queue/nul2\ncontent-length:3\n\n\0\0\0\0")
        frame = c.read_frame()
        assert frame.command == "MESSAGE" and frame.body == b"\0\0\0"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_header_escaping_round_trip(server: ServerHandle, connect, version: str) -> None:
    conn, lst = connect(version)
    conn.subscribe("/queue/esc", id="s")
    weird = "a:b\nc\\d:"
    conn.send("/queue/esc", "x", headers={"weird": weird})
    m = lst.wait_messages(1)[0]
    assert m.headers["weird"] == weird
    # escaped header names (stomp.py escapes only values): raw frames
    with RawClient(server.host, server.port) as c:
        c.connect(accept=version)
        c.send(b"SUBSCRIBE\nid:1\ndestination:/queue/esc2\n\n\0"
               b"SEND\ndestination:/queue/esc2\nk\\cey:v\\n\\\\\n\nx\0")
        frame = c.read_frame()
        assert frame.command == "MESSAGE" and frame.header("k:ey") == "v\n\\"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [(None, "1.0"), ("1.0", "1.0"), ("1.1", "1.1"), ("1.2", "1.2"), ("1.0,1.1,1.2", "1.2"),
     ("1.1,1.0", "1.1")],
)
def test_version_negotiation(server: ServerHandle, accept: str | None, expected: str) -> None:
    with RawClient(server.host, server.port) as c:
        head = "CONNECT\n" + (f"accept-version:{accept}\n" if accept else "") + "host:/\n\n\0"
        c.send(head.encode())
        frame = c.read_frame()
        assert frame.command == "CONNECTED" and frame.header("version") == expected


def test_unsupported_version_gets_error(server: ServerHandle) -> None:
    with RawClient(server.host, server.port) as c:
        frame = c.connect(accept="2.0")
        assert frame.command == "ERROR"
        assert frame.header("version") == "1.0,1.1,1.2"
        assert c.closed_by_server()


def test_stomp_10_client(server: ServerHandle, connect) -> None:
    conn, lst = connect("1.0")
    conn.subscribe("/queue/ten", id="s", ack="client")
    conn.send("/queue/ten", "old")
    m = lst.wait_messages(1)[0]
    conn.ack(m.headers["message-id"])
    server.wait_stats("ten", "messageCount", 0)


def test_unknown_command_errors_and_others_keep_working(server: ServerHandle, connect) -> None:
    good, lst = connect("1.2")
    with RawClient(server.host, server.port) as c:
        c.connect()
        c.send(b"FROB\n\n\0")
        frame = c.read_frame()
        assert frame.command == "ERROR" and frame.header("message")
        assert b"unknown command" in frame.body
        assert c.closed_by_server()
    good.subscribe("/queue/ok", id="s")
    good.send("/queue/ok", "still here")
    assert lst.wait_messages(1)[0].body == "still here"


def test_frame_before_connect_is_an_error(server: ServerHandle) -> None:
    with RawClient(server.host, server.port) as c:
        c.send(b"SEND\ndestination:/queue/x\n\nhi\0")
        frame = c.read_frame()
        assert frame.command == "ERROR" and "CONNECT" in frame.body.decode()
        assert c.closed_by_server()


def test_oversized_frame_errors_and_closes(server_factory) -> None:
    h = server_factory(limits=CodecLimits(max_frame_bytes=1000, max_headers=10))
    with RawClient(h.host, h.port) as c:
        c.connect()
        c.send(b"SEND\ndestination:/queue/big\ncontent-length:2000\n\n" + b"x" * 2000 + b"\0")
        frame = c.read_frame()
        assert frame.command == "ERROR" and b"max-frame-bytes" in frame.body
        assert c.closed_by_server()
    with RawClient(h.host, h.port) as c:
        c.connect()
        c.send(b"SEND\ndestination:/queue/big\n" + b"h:v\n" * 20 + b"\nx\0")
        assert c.read_frame().command == "ERROR"
        assert c.closed_by_server()
    assert h.call(lambda: h.broker.queue_names()) == []


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_client_that_stops_reading_does_not_stall_others(
    server_factory: Callable[..., ServerHandle], connect, event_loop: str
) -> None:
    if event_loop == "uvloop":
        import uvloop  # noqa: F401  (in the test extra: missing fails here, never skips)
    # the queue holds 20 MB, more than a destination's default share of the memory-limit
    # (6.4 MB, past which its producer would wait): it gets a limit of its own
    server = server_factory(event_loop=event_loop,
                            settings={"slow": AddressSettings(memory_limit=64 * 1024**2)})
    producer, lst = connect("1.2", handle=server)
    body = "x" * 10_000
    n = 2000
    for _ in range(n):
        producer.send("/queue/slow", body)
    producer.send("/queue/slow", "end", receipt="filled")
    lst.wait_receipt("filled")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((server.host, server.port))
    try:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"
                     b"SUBSCRIBE\nid:1\ndestination:/queue/slow\nack:auto\n"
                     b"activemq.prefetchSize:100\n\n\0")
        time.sleep(0.3)  # let the server fill what it will
        # other clients are served normally meanwhile
        producer.subscribe("/queue/fast", id="f")
        for i in range(20):
            producer.send("/queue/fast", f"f{i}")
        assert len(lst.wait_messages(20, timeout=3)) == 20
        remaining = server.stats("slow")["messageCount"]
        buffered = server.call(lambda: max(
            c.transport.get_write_buffer_size() for c in server.server.connections))
        assert remaining > n - 1200, remaining  # the server did not drain the queue into RAM
        assert buffered < 256 * 1024 + 100 * 10_500  # high-water mark + one window
    finally:
        sock.close()


def test_stomp_10_consumer_gets_the_message_without_the_header_10_cannot_carry(
    server: ServerHandle, connect
) -> None:
    """STOMP 1.0 has no header escaping: a property holding an EOL (sent escaped by a 1.2
    producer) cannot reach a 1.0 consumer. The message still does, with every other
    header, including those after the bad one and a redelivery's count."""
    producer, _ = connect("1.2")
    producer.send("/queue/ten-eol", "hello",
                  headers={"bad": "two\nlines", "good": "kept", "correlation-id": "c-1"})
    conn, lst = connect("1.0")
    conn.subscribe("/queue/ten-eol", id="s", ack="client")
    first = lst.wait_messages(1)[0]
    conn.unsubscribe(id="s")  # unacked: the message goes back, redelivered
    conn.subscribe("/queue/ten-eol", id="s2", ack="client")
    again = lst.wait_messages(2)[1]
    for m in (first, again):
        assert m.body == "hello" and "bad" not in m.headers
        assert m.headers["good"] == "kept" and m.headers["correlation-id"] == "c-1"
    assert first.headers["subscription"] == "s"
    assert again.headers["redelivered"] == "true" and again.headers["jmspy-delivery-count"] == "2"
    conn.ack(again.headers["message-id"])
    server.wait_stats("ten-eol", "messageCount", 0)


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_receipt_leaves_before_the_delivery_its_send_causes(
    server_factory: Callable[..., ServerHandle], event_loop: str
) -> None:
    """The server writes a client's replies, then delivers what its SENDs brought
    (Broker.defer_dispatch): a client subscribed to the queue it sends to gets the RECEIPT
    first, then the messages of that read, in order. A ring queue still delivers during
    the send (its evictions must not change), so there the MESSAGE comes first."""
    server = server_factory(event_loop=event_loop,
                            settings={"ring.#": AddressSettings(default_ring_size=5)})
    with RawClient(server.host, server.port) as c:
        assert c.connect().command == "CONNECTED"
        c.send(b"SUBSCRIBE\nid:0\ndestination:/queue/plain\nack:auto\n\n\0"
               b"SUBSCRIBE\nid:1\ndestination:/queue/ring.q\nack:auto\nreceipt:s\n\n\0")
        assert c.read_frame().command == "RECEIPT"
        c.send(b"SEND\ndestination:/queue/plain\n\none\0"
               b"SEND\ndestination:/queue/plain\nreceipt:r\n\ntwo\0")
        frames = [c.read_frame() for _ in range(3)]
        assert [(f.command, f.body) for f in frames] == [
            ("RECEIPT", b""), ("MESSAGE", b"one"), ("MESSAGE", b"two")]
        c.send(b"SEND\ndestination:/queue/ring.q\nreceipt:q\n\nringed\0")
        frames = [c.read_frame() for _ in range(2)]
        assert [f.command for f in frames] == ["MESSAGE", "RECEIPT"]
