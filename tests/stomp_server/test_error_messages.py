"""Every refusal names its problem (issue 11, items 14 and 15): a codec limit names the
limit's size and its ``[limits]`` key; an unknown command, a missing or empty destination
and an unknown destination prefix each get their own ERROR ``message`` and a body saying
how to fix it. Driven through the sans-I/O StompSession (no sockets), with one check of
each kind over the wire and the 16 MB message of RabbitMQ's suite delivered to two
subscribers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import stomp
from stomp_support import Collector, RawClient, ServerHandle

from jmspy import _speedups
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.protocol import StompSession
from jmspy.stomp_frames import DEFAULT_MAX_FRAME_BYTES, CodecLimits, FrameError

_codec: Any = _speedups.load("stomp_codec")


def exchange(data: bytes, limits: CodecLimits | None = None) -> tuple[list[Any], bool]:
    """CONNECT, then ``data``: the frames the session answers, and whether it closes."""
    session = StompSession(Broker(), limits=limits)
    session.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
    session.receive_data(data)
    parser = _codec.FrameParser("1.2", None, False)
    parser.feed(session.data_to_send())
    frames = list(iter(parser.next_frame, None))
    assert frames[0].command == "CONNECTED"
    return frames[1:], session.closing


def only_error(data: bytes, limits: CodecLimits | None = None) -> tuple[str, str]:
    frames, closing = exchange(data, limits)
    assert [f.command for f in frames] == ["ERROR"] and closing
    return frames[0].header("message"), frames[0].body.decode()


def test_the_broker_takes_10_mib_frames_by_default_and_a_client_reads_100_mib() -> None:
    """The broker's default frame limit bounds what one client can make it hold for one
    frame (its input budget bounds them all); a client reading from other brokers still
    accepts ActiveMQ's 100 MiB."""
    from jmspy.broker_ref.config import BrokerConfig
    from jmspy.broker_ref.core.input_budget import DEFAULT_MAX_FRAME_BYTES as BROKER_DEFAULT
    from jmspy.broker_ref.protocols.stomp.server import StompServer

    assert BROKER_DEFAULT == 10 * 1024 * 1024
    assert BrokerConfig().max_frame_bytes == BROKER_DEFAULT

    async def server_limit() -> int:
        return StompServer(Broker()).limits.max_frame_bytes

    import asyncio

    assert asyncio.run(server_limit()) == BROKER_DEFAULT
    assert DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024
    assert CodecLimits().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES


def test_a_streamed_oversized_body_is_refused_before_it_ends_naming_size_limit_and_key(
) -> None:
    session = StompSession(Broker(), limits=CodecLimits(max_frame_bytes=1000))
    session.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
    session.receive_data(b"SEND\ndestination:/queue/big\n\n" + b"x" * 1500)  # no NUL yet
    parser = _codec.FrameParser("1.2", None, False)
    parser.feed(session.data_to_send())
    frames = list(iter(parser.next_frame, None))
    assert [f.command for f in frames] == ["CONNECTED", "ERROR"] and session.closing
    error = frames[1]
    assert error.header("message") == ("frame body too large: at least 1500 bytes, over this "
                                       "broker's limit of 1000 bytes ([limits] max-frame-bytes)")
    detail = error.body.decode()
    assert detail.startswith(error.header("message"))  # the size so far, the limit, the key
    assert "raise that limit in the broker's config file" in detail
    assert session.input_buffered == 0  # the refused frame's bytes are not kept


def test_a_refused_frame_is_freed_without_waiting_for_the_cyclic_gc() -> None:
    """A parser that refused a frame keeps the error, not its traceback (whose frames
    would hold the parser and its buffer in a cycle): dropping the parser frees the
    buffer at once. Ten refused 100 MiB frames otherwise stayed in RAM together."""
    import gc
    import tracemalloc

    gc.disable()
    tracemalloc.start()
    try:
        parser = _codec.FrameParser("1.2", CodecLimits(max_frame_bytes=1000), True)
        parser.feed(b"SEND\ndestination:/queue/q\n\n" + b"x" * 4_000_000)
        with pytest.raises(FrameError, match="body too large"):
            parser.next_frame()
        with pytest.raises(FrameError, match="parser unusable after earlier error"):
            parser.next_frame()
        held = tracemalloc.get_traced_memory()[0]
        del parser
        freed = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    assert freed > 3_000_000


@pytest.mark.parametrize("declared", [True, False])
def test_oversized_body_names_its_size_the_limit_and_the_config_key(declared: bool) -> None:
    body = b"x" * 2000
    length = b"content-length:2000\n" if declared else b""
    message, detail = only_error(b"SEND\ndestination:/queue/big\n" + length + b"\n" + body
                                 + b"\0", CodecLimits(max_frame_bytes=1000))
    assert message == ("frame body too large: 2000 bytes, over this broker's limit of 1000 "
                       "bytes ([limits] max-frame-bytes)")  # declared, or counted
    assert detail.startswith(message) and "malformed" not in message
    for said in ("2000", "1000", "max-frame-bytes"):  # each said once, in message and body
        assert message.count(said) == 1 and detail.count(said) == 1


@pytest.mark.parametrize(
    ("frame", "limits", "key"),
    [
        (b"SEND\ndestination:/queue/q\n" + b"h:v\n" * 20 + b"\nx\0",
         CodecLimits(max_headers=10), "max-headers = 10"),
        (b"SEND\ndestination:/queue/q\nh:" + b"v" * 3000 + b"\n\nx\0",
         CodecLimits(max_header_bytes=1000), "max-header-bytes = 1000"),
    ],
)
def test_header_limits_name_themselves(frame: bytes, limits: CodecLimits, key: str) -> None:
    message, detail = only_error(frame, limits)
    name, value = key.split(" = ")
    assert message.endswith(f"over this broker's limit of {value} "
                            f"{'headers' if name == 'max-headers' else 'bytes'} "
                            f"([limits] {name})")
    assert detail.startswith(message)


def test_unknown_command_is_named() -> None:
    message, detail = only_error(b"PUBLISH\ndestination:/queue/q\n\nx\0")
    assert message == "unknown command 'PUBLISH'"
    assert "SEND" in detail and "SUBSCRIBE" in detail


@pytest.mark.parametrize(
    ("frame", "message", "hint"),
    [
        (b"SEND\n\nx\0", "missing destination header", "/queue/NAME"),
        (b"SUBSCRIBE\nid:1\n\n\0", "missing destination header", "/topic/NAME"),
        (b"SEND\ndestination:/queue/\n\nx\0", "empty destination name in '/queue/'",
         "needs a name after its prefix"),
        (b"SEND\ndestination:/topic/\n\nx\0", "empty destination name in '/topic/'",
         "needs a name after its prefix"),
        (b"SEND\ndestination:\n\nx\0", "empty destination name in ''",
         "needs a name after its prefix"),
        (b"SEND\ndestination:/exchange/amq.topic/x\n\nx\0",
         "unknown destination prefix '/exchange/' in '/exchange/amq.topic/x'",
         "valid prefixes are /queue/, /topic/, /temp-queue/, /remote-temp-queue/, /amq/queue/"),
        (b"SUBSCRIBE\nid:1\ndestination:/qeue/orders\n\n\0",
         "unknown destination prefix '/qeue/' in '/qeue/orders'", "valid prefixes are"),
    ],
)
def test_destination_problems_each_get_their_own_error(
    frame: bytes, message: str, hint: str
) -> None:
    got, detail = only_error(frame.replace(b"\n\n", b"\nreceipt:r\n\n", 1))
    assert got == message and hint in detail


def test_bare_destination_name_is_still_a_queue() -> None:
    frames, closing = exchange(b"SEND\ndestination:orders\nreceipt:r\n\nx\0")
    assert [f.command for f in frames] == ["RECEIPT"] and not closing


def test_errors_over_the_wire_name_the_problem(
    server_factory: Callable[..., ServerHandle]
) -> None:
    h = server_factory(limits=CodecLimits(max_frame_bytes=1000))
    cases = [
        (b"FOO\n\n\0", "unknown command 'FOO'"),
        (b"SEND\ndestination:/bogus/x\n\nx\0", "unknown destination prefix '/bogus/'"),
        (b"SEND\ndestination:/queue/x\ncontent-length:5000\n\n" + b"x" * 5000 + b"\0",
         "frame body too large: 5000 bytes, over this broker's limit of 1000 bytes "
         "([limits] max-frame-bytes)"),
    ]
    for data, message in cases:
        with RawClient(h.host, h.port) as c:
            assert c.connect().command == "CONNECTED"
            c.send(data)
            frame = c.read_frame()
            assert frame.command == "ERROR" and frame.header("message").startswith(message)
            assert c.closed_by_server()


def test_sixteen_megabyte_message_reaches_two_topic_subscribers(
    server_factory: Callable[..., ServerHandle]
) -> None:
    """RabbitMQ's STOMP suite sends this; ActiveMQ and RabbitMQ deliver it, and so does
    this broker once max-frame-bytes is raised past its 10 MiB default."""
    server = server_factory(limits=CodecLimits(max_frame_bytes=32 * 1024 * 1024))
    body = "x" * (16 * 1024 * 1024)
    conns: list[Any] = []
    listeners: list[Collector] = []
    for i in range(3):
        conn = stomp.Connection12([(server.host, server.port)], heartbeats=(0, 0))
        lst = Collector()
        conn.set_listener("c", lst)
        conn.connect(wait=True, headers={"host": "/"})
        conns.append(conn)
        listeners.append(lst)
        if i < 2:
            conn.subscribe("/topic/big", id=f"s{i}", ack="auto", receipt=f"sub{i}")
            lst.wait_receipt(f"sub{i}")
    try:
        conns[2].send("/topic/big", body, receipt="sent")
        listeners[2].wait_receipt("sent", timeout=60)
        for lst in listeners[:2]:
            (m,) = lst.wait_messages(1, timeout=60)
            assert len(m.body) == len(body)
        assert all(lst.errors == [] for lst in listeners)
    finally:
        for conn in conns:
            conn.disconnect()


@pytest.mark.parametrize("command", [b"SEND", b"SUBSCRIBE\nid:1"])
def test_destination_over_max_destination_length_gets_an_error_naming_the_limit(
    command: bytes
) -> None:
    name = ".".join(["w"] * 600).encode()  # 1,199 bytes: past the 1,024-byte default
    message, detail = only_error(command + b"\ndestination:/topic/" + name + b"\n\nx\0")
    assert message == ("destination name of 1199 bytes is longer than this broker's "
                       "max-destination-length of 1024 bytes")
    assert "[limits] max-destination-length" in detail
