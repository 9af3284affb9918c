"""Hypothesis strategies for hostile STOMP input: valid client frames, then mutated the
ways real clients and attackers break them (issue 11, item 8). Shared by the sans-I/O
fuzz test and the one against a live server."""

from __future__ import annotations

from hypothesis import strategies as st

#: Valid client frames covering every command and the headers the server echoes.
GOOD: list[bytes] = [
    b"SEND\ndestination:/queue/fz\ncontent-type:text/plain\nreceipt:r1\n\nhello\0",
    b"SUBSCRIBE\nid:1\ndestination:/queue/fz\nack:client\nreceipt:r2\n\n\0",
    b"SUBSCRIBE\nid:2\ndestination:/topic/fz.#\nack:auto\n\n\0",
    b"ACK\nid:1\n\n\0",
    b"NACK\nid:99\n\n\0",
    b"BEGIN\ntransaction:t\n\n\0",
    b"SEND\ndestination:/topic/fz.a\ntransaction:t\ncontent-length:3\n\n\0\0\0\0",
    b"COMMIT\ntransaction:t\nreceipt:r3\n\n\0",
    b"ABORT\ntransaction:u\n\n\0",
    b"UNSUBSCRIBE\nid:1\n\n\0",
    b"SEND\ndestination:/temp-queue/x\nreply-to:/remote-temp-queue/9\npriority:11\n\nx\0",
    b"SEND\ndestination:/queue/fz\nx-prop:v\ncorrelation-id:c\nexpires:0\n\nbody\0",
    b"\n",
]

#: What the mutations put into header values and lines.
_NASTY: list[bytes] = [b"\r", b"\r\r", b"\n", b"\\", b"\\t", b"\\r", b"\\n", b"\\c", b"\0",
                       b":", b"\xff\xfe", b"\xc3", b" ", b"\r\n\r\n"]


def _header_value_ends(frame: bytes) -> list[int]:
    """The offset of the EOL that ends each header line (where its value ends)."""
    head_end = frame.find(b"\n\n")
    ends: list[int] = []
    pos = frame.find(b"\n")  # the command line's EOL
    while 0 <= pos < head_end:
        pos = frame.find(b"\n", pos + 1)
        ends.append(pos)
    return ends


@st.composite
def mutated_frame(draw: st.DrawFn) -> bytes:
    """One valid frame, broken in one of the ways item 8 lists (or left valid)."""
    frame = bytearray(draw(st.sampled_from(GOOD)))
    kind = draw(st.sampled_from(
        ["valid", "value", "escape", "length", "nul", "truncate", "command", "repeat"]))
    ends = _header_value_ends(bytes(frame))
    if kind == "value" and ends:  # CR / LF / junk at the end or inside a header value
        at = draw(st.sampled_from(ends))
        frame[at:at] = draw(st.sampled_from(_NASTY))
    elif kind == "escape" and ends:  # undefined or dangling escapes
        at = draw(st.sampled_from(ends))
        frame[at:at] = draw(st.sampled_from([b"\\", b"\\t", b"\\x", b"\\\\\\"]))
    elif kind == "length":  # content-length lies: too long, too short, not a number
        lie = draw(st.sampled_from([b"0", b"1", b"99", b"-1", b"abc", b"1e3", b" 5",
                                    b"99999999999999999999999", b""]))
        body_at = frame.find(b"\n\n")
        frame[body_at:body_at] = b"\ncontent-length:" + lie
    elif kind == "nul" and ends:  # NUL inside the header section
        at = draw(st.sampled_from(ends))
        frame[at:at] = b"\0"
    elif kind == "truncate":
        del frame[draw(st.integers(0, max(0, len(frame) - 1))):]
    elif kind == "command":  # unknown, lower-case or overlong commands
        end = frame.find(b"\n")
        frame[:end] = draw(st.sampled_from([b"PUBLISH", b"send", b"X" * 100, b"", b"CONNECT",
                                            b"MESSAGE", b"\xff"]))
    elif kind == "repeat" and ends:  # a header repeated many times
        at = draw(st.sampled_from(ends))
        frame[at + 1:at + 1] = b"h:v\n" * draw(st.integers(1, 40))
    return bytes(frame)


@st.composite
def hostile_stream(draw: st.DrawFn) -> bytes:
    """A few frames, some mutated, fed as one stream."""
    return b"".join(draw(st.lists(mutated_frame(), min_size=1, max_size=5)))
