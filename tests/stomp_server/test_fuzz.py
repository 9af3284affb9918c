"""Hypothesis fuzzes a live server with random and mutated frames (the hostile mutations
of :mod:`fuzz_frames` among them): whatever the server writes back is well-formed STOMP,
nothing is logged as an internal error, a well-behaved client on another connection is
served after every example, and no connection is left behind."""

from __future__ import annotations

from fuzz_frames import hostile_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polling import wait_until
from raw_sockets import send_and_read_until_closed
from stomp_support import SERVER_ERRORS, RawClient, ServerHandle

from jmspy import _speedups

_codec = _speedups.load("stomp_codec")

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


def _exchange(server: ServerHandle, connect_frame: bytes, payload: bytes) -> bytes:
    """Send, half-close, and return everything the server wrote until it closed."""
    return send_and_read_until_closed(server.host, server.port, connect_frame + payload, 2)


_CONNECT = b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\n\n\0"


def _good_client_round_trip(server: ServerHandle) -> None:
    with RawClient(server.host, server.port) as good:
        assert good.connect().command == "CONNECTED"
        good.send(b"SUBSCRIBE\nid:g\ndestination:/queue/good\n\n\0"
                  b"SEND\ndestination:/queue/good\n\nserved\0")
        frame = good.read_frame()
        assert frame.command == "MESSAGE" and frame.body == b"served"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=st.one_of(st.binary(max_size=300), mutated(), hostile_stream()),
       with_connect=st.booleans())
def test_fuzzed_frames_do_not_hurt_the_server(fuzz_server: ServerHandle, payload: bytes,
                                              with_connect: bool) -> None:
    reply = _exchange(fuzz_server, _CONNECT if with_connect else b"", payload)
    # _CONNECT negotiates 1.2; before any CONNECT the server answers in 1.0
    parser = _codec.FrameParser("1.2" if with_connect else "1.0", None, False)
    parser.feed(reply)
    frames = list(iter(parser.next_frame, None))  # well-formed, or this raises
    if with_connect:
        assert frames and frames[0].command == "CONNECTED"
    assert not SERVER_ERRORS.records, [r.getMessage() for r in SERVER_ERRORS.records]
    _good_client_round_trip(fuzz_server)


def test_server_still_serves_after_fuzzing(fuzz_server: ServerHandle, connect) -> None:
    conn, lst = connect("1.2", handle=fuzz_server)
    conn.subscribe("/queue/after-fuzz", id="s")
    conn.send("/queue/after-fuzz", "fine")
    assert lst.wait_messages(1)[0].body == "fine"
    assert not SERVER_ERRORS.records, [r.getMessage() for r in SERVER_ERRORS.records]
    conn.disconnect()
    # the server sees the last sockets close
    wait_until(lambda: not fuzz_server.connection_count(), 5)
    assert fuzz_server.connection_count() == 0  # no fuzzed connection was left behind
