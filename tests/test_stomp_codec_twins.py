"""The pure and compiled STOMP codecs are the same function.

Imports both twins directly (whatever JMSPY_PUREPYTHON says) and lets hypothesis feed them
identical inputs: random byte soup built from STOMP-ish tokens, and valid frame streams
with bytes flipped, inserted and deleted, cut into random chunks. The traces (every
next_frame() result, None included, then the error reason and message or the bytes left
buffered) must be equal. Each twin must also give the same events and error whatever the
chunking, which is what lets a limit fire before its EOL or NUL arrives.
"""

from __future__ import annotations

import itertools
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jmspy._cext.stomp_codec as cext
import jmspy._pure.stomp_codec as pure
from jmspy.stomp_frames import (
    ALL_COMMANDS,
    CLIENT_COMMANDS,
    HEARTBEAT,
    CodecLimits,
    Frame,
    FrameError,
)

TWINS = (pure, cext)

Trace = list[object]


def trace(
    module: ModuleType, chunks: list[bytes], version: str, server: bool, limits: CodecLimits
) -> Trace:
    parser = module.FrameParser(version=version, limits=limits, server=server)
    out: Trace = []
    try:
        for chunk in chunks:
            parser.feed(chunk)
            while True:
                event = parser.next_frame()
                out.append(event)
                if event is None:
                    break
    except FrameError as exc:
        out.append(("error", exc.reason, str(exc), parser.buffered))
        with pytest.raises(FrameError) as again:  # sticky
            parser.next_frame()
        out.append(("again", again.value.reason, str(again.value)))
        return out
    out.append(("buffered", parser.buffered))
    return out


def essence(t: Trace) -> Trace:
    """What must not depend on chunking: events and the final outcome (minus buffered)."""
    kept: Trace = []
    for item in t:
        if item is None:
            continue
        if isinstance(item, tuple):
            item = item[:2]
        kept.append(item)
    return kept


def chunk(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def check(data: bytes, cuts: list[int], version: str, server: bool, limits: CodecLimits) -> None:
    chunks = chunk(data, cuts)
    traces = [trace(m, chunks, version, server, limits) for m in TWINS]
    assert traces[0] == traces[1]
    whole = trace(pure, [data], version, server, limits)
    assert essence(whole) == essence(traces[0])
    bytewise = trace(cext, [data[i : i + 1] for i in range(len(data))], version, server, limits)
    assert essence(bytewise) == essence(whole)


# fmt: off
_TOKENS = [
    *(c.encode() for c in sorted(ALL_COMMANDS)),
    b"\n", b"\n", b"\r\n", b"\r", b"\0", b"\0", b":", b":", b"\\", b"\\n", b"\\c", b"\\r",
    b"\\\\", b"\\t", b"content-length:", b"content-length:", b"1", b"3", b"0", b"-", b"99",
    b"id", b"destination:/q", b"a", b"xyz", b" ", b"\t", b"\xff", b"\xc3\xa9", b"\xc3",
    b"\xed\xa0\x80", b"\x00\n",
]
# fmt: on

_STARTS = [b"", b"SEND\n", b"SEND\n", b"MESSAGE\n", b"MESSAGE\n", b"CONNECT\n", b"\nACK\r\n"]
soup = st.builds(
    bytes.__add__,
    st.sampled_from(_STARTS),
    st.lists(st.sampled_from(_TOKENS), max_size=60).map(b"".join) | st.binary(max_size=80),
)
_bits = st.lists(st.sampled_from(_TOKENS), max_size=4).map(b"".join)
_eol = st.sampled_from([b"\n", b"\r\n"])


@st.composite
def rough_frames(draw: st.DrawFn) -> bytes:
    """Frames put together from noisy parts: mostly well formed, often subtly not."""
    out = [draw(st.sampled_from(_STARTS[1:]))]
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from([b"id", b"content-length", b"a\\cb", b"", b"k"]) | _bits)
        value = draw(
            st.sampled_from([b"1", b"3", b"0", b"x\\ny", b"\\r", b"a\\tb", b" 2", b"-1", b""])
            | _bits
        )
        sep = draw(st.sampled_from([b":", b":", b":", b""]))
        out += [name, sep, value, draw(_eol)]
    out += [draw(_eol), draw(_bits), draw(st.sampled_from([b"\0", b"\0\n", b"\0\r\n", b""]))]
    return b"".join(out) * draw(st.integers(1, 2))


soup = soup | rough_frames()
versions = st.sampled_from(["1.0", "1.1", "1.2"])
limits_st = st.one_of(
    st.just(CodecLimits()),
    st.builds(
        CodecLimits,
        max_frame_bytes=st.integers(0, 12),
        max_headers=st.integers(0, 3),
        max_header_bytes=st.integers(0, 40),
        max_command_bytes=st.integers(0, 12) | st.just(64),
    ),
)
cuts_st = st.lists(st.integers(0, 10_000), max_size=12)


@settings(max_examples=1500, deadline=None)
@given(data=soup, cuts=cuts_st, version=versions, server=st.booleans(), limits=limits_st)
def test_twins_agree_on_random_bytes(
    data: bytes, cuts: list[int], version: str, server: bool, limits: CodecLimits
) -> None:
    check(data, cuts, version, server, limits)


_header = st.tuples(
    st.text(min_size=1, max_size=8) | st.sampled_from(["content-length", "destination", "id"]),
    st.text(max_size=10) | st.sampled_from(["0", "3", "12", "x"]),
)


@st.composite
def frame_streams(draw: st.DrawFn) -> tuple[bytes, str, bool]:
    """Valid encoded frames and heartbeats, as a peer of ``version`` would send them."""
    version = draw(versions)
    server = draw(st.booleans())
    commands = sorted(CLIENT_COMMANDS if server else ALL_COMMANDS - CLIENT_COMMANDS)
    parts: list[bytes] = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from([b"\n", b"\r\n"])))
        frame = Frame(
            draw(st.sampled_from(commands)),
            draw(st.lists(_header, max_size=4)),
            draw(st.binary(max_size=20)),
        )
        try:
            parts.append(pure.encode_frame(frame, version, content_length=draw(st.booleans())))
        except FrameError:
            continue
    return b"".join(parts), version, server


_mutation = st.tuples(
    st.sampled_from(["flip", "insert", "delete"]),
    st.integers(0, 10_000),
    st.sampled_from([0x00, 0x0A, 0x0D, 0x3A, 0x5C, 0x30, 0x41, 0xFF, 0x80, 0x01]),
)


def mutate(data: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for kind, where, byte in mutations:
        i = where % (len(buf) + 1)
        if kind == "insert":
            buf.insert(i, byte)
        elif i < len(buf):
            if kind == "flip":
                buf[i] ^= byte or 0x01
            else:
                del buf[i]
    return bytes(buf)


@settings(max_examples=1500, deadline=None)
@given(
    stream=frame_streams(),
    mutations=st.lists(_mutation, max_size=4),
    cuts=cuts_st,
    limits=limits_st,
)
def test_twins_agree_on_mutated_streams(
    stream: tuple[bytes, str, bool],
    mutations: list[tuple[str, int, int]],
    cuts: list[int],
    limits: CodecLimits,
) -> None:
    data, version, server = stream
    check(mutate(data, mutations), cuts, version, server, limits)


@settings(max_examples=300, deadline=None)
@given(stream=frame_streams(), cuts=cuts_st)
def test_unmutated_streams_parse_cleanly(stream: tuple[bytes, str, bool], cuts: list[int]) -> None:
    data, version, server = stream
    for module in TWINS:
        t = trace(module, chunk(data, cuts), version, server, CodecLimits())
        assert t[-1] == ("buffered", 0)
        assert all(e is HEARTBEAT or isinstance(e, Frame) for e in essence(t)[:-1])


def _encode(module: ModuleType, frame: Frame, version: str, flag: bool) -> object:
    try:
        return module.encode_frame(frame, version, content_length=flag)
    except FrameError as exc:
        return ("error", exc.reason, str(exc))


#: Text dense in the characters escaping and the CR/LF checks are about, so every
#: combination of them (and none) is tried, not just what random text happens to hold.
_escapable = st.text(alphabet=st.sampled_from("a\\:\n\rc\u00e9\U0001f600"), max_size=6)


@settings(max_examples=1000, deadline=None)
@given(
    command=st.sampled_from(sorted(ALL_COMMANDS)) | st.text(max_size=5),
    headers=st.lists(
        st.tuples(
            st.text(max_size=6) | st.just("content-length") | _escapable,
            st.text(max_size=8) | st.sampled_from(["0", "2", "", "02", "x"]) | _escapable,
        ),
        max_size=4,
    ),
    body=st.binary(max_size=8),
    version=versions,
    flag=st.booleans(),
)
def test_twins_encode_identically(
    command: str, headers: list[tuple[str, str]], body: bytes, version: str, flag: bool
) -> None:
    frame = Frame(command, headers, body)
    assert _encode(pure, frame, version, flag) == _encode(cext, frame, version, flag)


@pytest.mark.parametrize("module", TWINS, ids=["pure", "cext"])
def test_a_none_header_value_is_a_type_error_naming_the_header(module: ModuleType) -> None:
    with pytest.raises(TypeError, match="header 'ttl' has the value None"):
        module.encode_frame(Frame("SEND", [("ttl", None)], b""), "1.2")  # type: ignore[list-item]


def test_twins_export_the_same_api() -> None:
    assert pure.__all__ == cext.__all__
    assert pure.HEARTBEAT is cext.HEARTBEAT is HEARTBEAT
    assert pure.encode_heartbeat() == cext.encode_heartbeat() == b"\n"
