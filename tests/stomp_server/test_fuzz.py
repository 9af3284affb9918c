"""Hypothesis fuzzes a live server with random and mutated frames; afterwards the server
must still serve a well-behaved client (errors stay inside their connection)."""

from __future__ import annotations

import socket

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stomp_support import SERVER_ERRORS, ServerHandle

GOOD = [
    b"SEND\ndestination:/queue/fz\ncontent-type:text/plain\n\nhello\0",
    b"SUBSCRIBE\nid:1\ndestination:/queue/fz\nack:client\n\n\0",
    b"ACK\nid:1\n\n\0",
    b"NACK\nid:99\n\n\0",
    b"BEGIN\ntransaction:t\n\n\0",
    b"SEND\ndestination:/topic/fz\ntransaction:t\ncontent-length:3\n\n\0\0\0\0",
    b"COMMIT\ntransaction:t\n\n\0",
    b"UNSUBSCRIBE\nid:1\n\n\0",
    b"SEND\ndestination:/temp-queue/x\nreply-to:/remote-temp-queue/9\npriority:11\n\nx\0",
    b"\n",
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    frames = draw(st.lists(st.sampled_from(GOOD), min_size=1, max_size=6))
    data = bytearray(b"".join(frames))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif data:
            del data[pos]
    return bytes(data)


def _exchange(server: ServerHandle, connect_frame: bytes, payload: bytes) -> None:
    with socket.create_connection((server.host, server.port), timeout=2) as sock:
        try:
            sock.sendall(connect_frame + payload)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except (ConnectionError, TimeoutError):
            pass


_CONNECT = b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\n\n\0"


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=st.one_of(st.binary(max_size=300), mutated()),
       with_connect=st.booleans())
def test_fuzzed_frames_do_not_hurt_the_server(fuzz_server: ServerHandle, payload: bytes,
                                              with_connect: bool) -> None:
    _exchange(fuzz_server, _CONNECT if with_connect else b"", payload)


def test_server_still_serves_after_fuzzing(fuzz_server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2", handle=fuzz_server)
    conn.subscribe("/queue/after-fuzz", id="s")
    conn.send("/queue/after-fuzz", "fine")
    assert lst.wait_messages(1)[0].body == "fine"
    assert not SERVER_ERRORS.records, [r.getMessage() for r in SERVER_ERRORS.records]
