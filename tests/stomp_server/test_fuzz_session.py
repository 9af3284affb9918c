"""Item 8 of issue 11, without sockets: mutated frames (CR/LF in values, bad escapes,
content-length lies, NUL in headers, truncation, unknown commands) on every STOMP version
never raise out of the session; everything it writes is well-formed STOMP; each session
ends with an ERROR frame or a receipt for a DISCONNECT that follows (appended until one
is answered: a content-length body may swallow any number of them, up to the frame
limit); and a well-behaved session on the same broker is served
after every example. Re-fed one byte at a time as well (h11's habit)."""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_frames import hostile_stream
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jmspy import _speedups
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.protocol import StompSession
from jmspy.stomp_frames import CodecLimits

_codec: Any = _speedups.load("stomp_codec")
LIMITS = CodecLimits(max_frame_bytes=4096, max_headers=32, max_header_bytes=2048)
BROKER = Broker(name="fuzz")  # one broker for every example: errors must stay per session
_BYE = b"DISCONNECT\nreceipt:bye\n\n\0"
#: A hostile frame can swallow at most a frame's worth of the DISCONNECTs that follow it
#: (its body, up to a NUL or a content-length); one more than that must be answered.
_MAX_BYES = (LIMITS.max_frame_bytes + LIMITS.max_header_bytes) // len(_BYE) + 2


def _frames(data: bytes, version: str = "1.2") -> list[Any]:
    """The server's output, parsed as a client of ``version``: it must be well-formed."""
    parser = _codec.FrameParser(version, None, False)
    parser.feed(data)
    return [f for f in iter(parser.next_frame, None) if f is not _codec.HEARTBEAT]


def _good_round_trip() -> None:
    s = StompSession(BROKER, limits=LIMITS)
    s.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"
                   b"SUBSCRIBE\nid:g\ndestination:/queue/good\n\n\0"
                   b"SEND\ndestination:/queue/good\n\nstill served\0")
    got = [f for f in _frames(s.data_to_send()) if f.command == "MESSAGE"]
    s.connection_lost()
    assert [f.body for f in got] == [b"still served"]


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
# the million-frame fuzz run's finding: a receipt ending in CR on 1.0/1.1
@example(version="1.1", stream=b"SEND\ndestination:/queue/fz\nreceipt:r\r\r\n\nx\0",
         bytewise=False)
@example(version="1.0", stream=b"SUBSCRIBE\nid:s\r\r\ndestination:/queue/fz\n\n\0",
         bytewise=False)
# an ERROR ends the session while MESSAGE frames of an ack:auto subscription are still
# being written: writing them must not refill credit of a consumer the end closed
@example(version="1.0", stream=b"SEND\ndestination:/queue/fz\nreceipt:r1\n\nhello\0"
         b"SUBSCRIBE\nid:1\ndestination:/queue/fz\r\n\r\n\nack:client\n\n\0", bytewise=False)
# a content-length body swallows the stream's tail and two DISCONNECTs, ending on a NUL
@example(version="1.0", stream=b"SUBSCRIBE\nid:1\ndestination:/queue/fz\nack:client\n"
         b"receipt:r2\ncontent-length:99\n\n\x00COMMIT\ntransaction:t\nreceipt:r3\n\n\x00\n"
         b"SEND\ndestinati", bytewise=False)
@given(version=st.sampled_from(["1.0", "1.1", "1.2"]), stream=hostile_stream(),
       bytewise=st.booleans())
def test_hostile_frames_get_an_error_or_a_receipt_never_an_exception(
    version: str, stream: bytes, bytewise: bool
) -> None:
    s = StompSession(BROKER, limits=LIMITS)
    out = bytearray()

    def feed(data: bytes) -> None:
        chunks = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
        for chunk in chunks:
            s.receive_data(chunk)  # must never raise
            out.extend(s.data_to_send())
            s.written()
            assert s._parser.buffered <= LIMITS.max_frame_bytes + LIMITS.max_header_bytes + 128

    def ended(frames: list[Any]) -> bool:
        return any(f.command == "ERROR" or (
            f.command == "RECEIPT" and f.header("receipt-id") == "bye") for f in frames)

    feed(f"CONNECT\naccept-version:{version}\nhost:/\n\n\0".encode() + stream)
    byes = 0
    while not s.closing and not ended(_frames(bytes(out), version)):
        assert byes < _MAX_BYES, "a frame swallowed more than the frame limit allows"
        feed(_BYE)
        byes += 1
    frames = _frames(bytes(out), version)
    commands = [f.command for f in frames]
    assert commands[0] in ("CONNECTED", "ERROR")
    assert ended(frames), commands  # closing always says why, with an ERROR
    if "ERROR" in commands:
        assert commands.index("ERROR") == len(commands) - 1 and s.closing
        assert frames[-1].header("message")  # says what went wrong
    s.connection_lost()
    _good_round_trip()


@pytest.mark.parametrize("version", ["1.0", "1.1"])
@pytest.mark.parametrize("header", [b"receipt:r1\r\r", b"id:s\r\r", b"receipt:a\rb"])
def test_value_this_version_cannot_echo_is_refused_before_anything_happens(
    version: str, header: bytes
) -> None:
    """1.0 cannot escape CR or LF and 1.1 cannot escape CR: a receipt or subscription id
    with one would break the reply's framing, so it is refused with an ERROR up front (it
    used to raise out of the session: a traceback in the server's log)."""
    s = StompSession(BROKER, limits=LIMITS)
    s.receive_data(f"CONNECT\naccept-version:{version}\nhost:/\n\n\0".encode()
                   + b"SUBSCRIBE\ndestination:/queue/echo\n" + header + b"\n\n\0")
    frames = _frames(s.data_to_send(), version)
    assert [f.command for f in frames] == ["CONNECTED", "ERROR"] and s.closing
    name = header.split(b":")[0].decode()
    assert frames[1].header("message") == f"unencodable {name} header"
    assert "CR or LF" in frames[1].body.decode()
    assert "echo" not in BROKER.queue_names()  # refused before it subscribed
    s.connection_lost()
