"""The broker's MESSAGE frame (``jmspy.broker_ref.protocols.stomp.message_frame``).

Generated ServerMessages (every body type; properties of every JMS type whose names and
values hold the characters STOMP escapes, CRs, lone surrogates, empty names and names
of protocol headers; correlation ids, reply-to, JMSType, redeliveries) are encoded for
STOMP 1.0, 1.1 and 1.2: a frame is written, or the one error a message the version
cannot carry gets (a FrameError, or UnicodeEncodeError for a lone surrogate no UTF-8
can carry), and every frame written parses back (with
the codec, as a client would) as a MESSAGE with its ack id and the headers that say it
was redelivered or is persistent exactly when it was.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

import jmspy.broker_ref.protocols.stomp.message_frame as frame_writer
from jmspy._speedups import load
from jmspy.broker_ref.core.api import BodyType, DestinationKind, ServerMessage
from jmspy.stomp_frames import Frame, FrameError, header_dict

SETTINGS = settings(
    max_examples=600, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_codec = load("stomp_codec")

tricky = st.text(
    st.sampled_from(["a", "b", "é", ":", "\\", "\n", "\r", " ", "\ud800", "-", "x"]),
    max_size=6)
plain = st.text("abcxyz._-/", min_size=1, max_size=10)
texts = plain | tricky
prop_names = st.sampled_from([
    "color", "n", "a:b", "x\\y", "", "content-length", "content-type", "destination",
    "priority", "jmspy-ptypes", "line\nbreak", "cr\r",
]) | tricky
prop_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                        st.floats(allow_nan=False), texts)


@st.composite
def messages(draw: st.DrawFn) -> ServerMessage:
    body_type = draw(st.sampled_from(list(BodyType)))
    body: Any = {
        BodyType.TEXT: draw(st.none() | texts),
        BodyType.BYTES: draw(st.binary(max_size=12)),
        BodyType.MAP: draw(st.dictionaries(plain, st.integers() | plain, max_size=3)),
    }.get(body_type)
    return ServerMessage(
        message_id=draw(texts),
        kind=draw(st.sampled_from(list(DestinationKind))),
        destination=draw(plain),
        body_type=body_type,
        body=body,
        properties=draw(st.dictionaries(prop_names, prop_values, max_size=4)),
        persistent=draw(st.booleans()),
        priority=draw(st.integers(0, 9)),
        timestamp=draw(st.integers(0, 2**45)),
        expiration=draw(st.integers(0, 2**45)),
        correlation_id=draw(st.none() | texts),
        jms_type=draw(st.none() | texts),
    )


def _outcome(args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return ("bytes", frame_writer.encode_message(*args))
    # the refusals a message may get (anything else fails the test): a header the
    # version cannot carry, or text no UTF-8 can carry (a lone surrogate)
    except (FrameError, UnicodeEncodeError) as exc:
        return (type(exc).__name__, str(exc))


@SETTINGS
@given(
    message=messages(),
    destination=texts,
    subscription=texts,
    ack=st.just("") | st.integers(1, 10**6).map(str),  # "": an ack:auto subscription
    count=st.integers(1, 4),
    reply_to=st.none() | texts,
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
)
def test_every_message_encodes_to_a_frame_that_parses_back_or_is_refused_by_name(
    message: ServerMessage, destination: str, subscription: str, ack: str, count: int,
    reply_to: str | None, version: str,
) -> None:
    args = (message, destination, subscription, ack, count, reply_to, version)
    outcome = _outcome(args)
    if outcome[0] != "bytes":
        assert outcome[1], "a refusal says what the version cannot carry"
        return
    parser = _codec.FrameParser(version, server=False)
    parser.feed(outcome[1])
    frame = parser.next_frame()
    assert isinstance(frame, Frame) and frame.command == "MESSAGE"
    headers = header_dict(frame.headers)
    assert headers.get("ack", "") == ack
    assert headers["redelivered"] == ("true" if count > 1 else "false")
    assert ("persistent" in headers) == message.persistent


def test_a_plain_delivery_is_exactly_this_frame() -> None:
    """The wire format of the common case, pinned: fixed headers in order, defaults left
    out, the ':' of the message id escaped, typed properties as text, content-type and
    content-length last."""
    msg = ServerMessage(message_id="ID:1", kind=DestinationKind.QUEUE, destination="q",
                        body_type=BodyType.TEXT, body="hello", properties={"n": 3, "ok": True},
                        persistent=False, timestamp=5)
    expected = (b"MESSAGE\ndestination:/queue/q\nmessage-id:ID\\c1\nsubscription:s\nack:7\n"
                b"priority:4\ntimestamp:5\nexpires:0\nredelivered:false\nn:3\nok:true\n"
                b"content-type:text/plain;charset=utf-8\ncontent-length:5\n\nhello\0")
    assert frame_writer.encode_message(msg, "/queue/q", "s", "7", 1, None, "1.2") == expected


def test_an_auto_acknowledged_delivery_has_no_ack_header() -> None:
    """An ``ack:auto`` subscriber never acknowledges: its MESSAGE carries no ``ack`` (as
    ActiveMQ 5's and RabbitMQ's do not), one header fewer for every client to parse."""
    msg = ServerMessage(message_id="ID:1", kind=DestinationKind.QUEUE, destination="q",
                        body_type=BodyType.TEXT, body="hello", persistent=False, timestamp=5)
    expected = (b"MESSAGE\ndestination:/queue/q\nmessage-id:ID\\c1\nsubscription:s\n"
                b"priority:4\ntimestamp:5\nexpires:0\nredelivered:false\n"
                b"content-type:text/plain;charset=utf-8\ncontent-length:5\n\nhello\0")
    assert frame_writer.encode_message(msg, "/queue/q", "s", "", 1, None, "1.2") == expected
