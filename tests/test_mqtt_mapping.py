"""mqtt:// PUBLISH properties: jmspy's own encoder against paho's ``Properties``.

The transport encodes MQTT 5 PUBLISH properties itself (paho's Properties class is the
slowest part of a send). These tests prove the bytes are the ones paho would have written
for the same headers, that paho reads them back to the same values, and that what does
not fit an MQTT string is refused with a JMS error instead of a struct error.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from jmspy import BytesMessage, MapMessage, Message, Queue, TextMessage, Topic
from jmspy.errors import MessageFormatException
from jmspy.transports.mqtt.mapping import (
    from_publish,
    mqtt_topic,
    payload_of,
    to_publish_v5,
)

_TYPE_CODES = {bool: "b", int: "i", float: "f"}


def paho_reference(message: Message) -> tuple[bytes, bytes]:
    """The wire format built with paho's own Properties, attribute by attribute (the
    specification the transport's encoder must match byte for byte)."""
    props: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    payload, kind, ctype = payload_of(message)
    assert message.message_id is not None
    if ctype:
        props.ContentType = ctype
    if message.correlation_id is not None:
        props.CorrelationData = message.correlation_id.encode("utf-8")
    reply_kind = ""
    if message.reply_to is not None:
        props.ResponseTopic = mqtt_topic(message.reply_to)
        reply_kind = message.reply_to.kind
    if message.expiration:
        remaining = (message.expiration - int(time.time() * 1000)) / 1000.0
        props.MessageExpiryInterval = max(1, math.ceil(remaining))
    types: list[str] = []
    rest: list[tuple[str, str]] = []
    if message.jms_type is not None:
        rest.append(("jmspy-type", message.jms_type))
    for name, value in message._properties.items():
        if value is None:
            continue
        code = _TYPE_CODES.get(type(value))
        if code is not None:
            types.append(f"{name}={code}")
        rest.append((name, str(value).lower() if isinstance(value, bool) else str(value)))
    exp = str(message.expiration) if message.expiration else ""
    header = (f"1;{message.timestamp};{kind};{exp};{reply_kind};{','.join(types)};"
              f"{message.message_id}")
    user = [("jmspy-h", header), *rest]
    props.UserProperty = user
    return payload, bytes(props.pack())


_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
# "p" first: never a JMS-reserved name nor a selector keyword (both refused by jmspy)
_names = st.from_regex(r"p[A-Za-z0-9_]{0,8}", fullmatch=True)
_values = st.one_of(
    st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), _text
)


@st.composite
def messages(draw: Any) -> Message:
    kind = draw(st.sampled_from(["text", "null-text", "bytes", "map", "none"]))
    message: Message
    if kind == "text":
        message = TextMessage(draw(_text))
    elif kind == "null-text":
        message = TextMessage(None)
    elif kind == "bytes":
        message = BytesMessage(draw(st.binary(max_size=30)))
    elif kind == "map":
        message = MapMessage()
        for key, value in draw(st.dictionaries(_names, _values, max_size=3)).items():
            message.set(key, value)
    else:
        message = Message()
    for key, value in draw(st.dictionaries(_names, _values, max_size=4)).items():
        message.set_property(key, value)
    # ';' too: the id is the last field of the jmspy-h header, the only one that may hold it
    message.message_id = "ID:" + draw(st.from_regex(r"[a-z0-9;-]{1,20}", fullmatch=True))
    message.timestamp = draw(st.integers(0, 2**42))
    message.destination = Topic("a.b")
    message.correlation_id = draw(st.none() | _text)
    message.reply_to = draw(st.none() | st.sampled_from([Queue("r.q"), Topic("r.t")]))
    message.jms_type = draw(st.none() | _text)
    # a whole number of seconds ahead, so both encoders round the same way
    ahead = draw(st.none() | st.integers(5, 10**6))
    message.expiration = 0 if ahead is None else int(time.time() * 1000) + ahead * 1000 + 500
    return message


@settings(max_examples=300, deadline=None)
@given(messages())
def test_publish_properties_are_the_bytes_paho_would_write(message: Message) -> None:
    payload, props = to_publish_v5(message)
    ref_payload, ref_packed = paho_reference(message)
    assert payload == ref_payload
    assert props.pack() == ref_packed


@settings(max_examples=200, deadline=None)
@given(messages())
def test_paho_reads_the_encoded_properties_back_into_the_same_message(
    message: Message,
) -> None:
    payload, props = to_publish_v5(message)
    parsed: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    parsed.unpack(props.pack())
    got = from_publish("a/b", payload, 1, parsed, Topic("a.b"))
    assert got.message_id == message.message_id
    assert got.timestamp == message.timestamp
    assert got.correlation_id == message.correlation_id
    assert got.reply_to == message.reply_to
    assert got.jms_type == message.jms_type
    assert got.expiration == message.expiration
    assert type(got) is type(message)
    expected = {k: v for k, v in message._properties.items() if v is not None}
    assert dict(got._properties) == expected


def test_a_string_longer_than_an_mqtt_string_is_refused_with_a_jms_error() -> None:
    message = TextMessage("body")
    message.message_id = "ID:1"
    message.destination = Topic("a")
    message.set_property("big", "x" * 70_000)
    with pytest.raises(MessageFormatException, match="at most 65535"):
        to_publish_v5(message)
    message = TextMessage("body")
    message.message_id = "ID:2"
    message.destination = Topic("a")
    message.correlation_id = "c" * 70_000
    with pytest.raises(MessageFormatException, match="JMSCorrelationID"):
        to_publish_v5(message)


def _received(user: list[tuple[str, str]], payload: bytes = b"hi") -> Message:
    props: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.UserProperty = user
    parsed: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    parsed.unpack(props.pack())
    return from_publish("a/b", payload, 1, parsed, Topic("a.b"))


def test_headers_sent_one_property_each_are_still_read() -> None:
    got = _received([
        ("jmspy-id", "ID:old-1"), ("jmspy-ts", "1234"), ("jmspy-body", "bytes"),
        ("jmspy-exp", "99999"), ("jmspy-ptypes", "n=i"), ("n", "7"),
    ])
    assert (got.message_id, got.timestamp, got.expiration) == ("ID:old-1", 1234, 99999)
    assert isinstance(got, BytesMessage) and got.get_property("n") == 7


def test_a_foreign_jmspy_h_property_that_is_not_a_header_leaves_the_defaults() -> None:
    got = _received([("jmspy-h", "not;a;header"), ("k", "v")])
    assert got.message_id is not None and got.message_id.startswith("ID:mqtt-")
    assert isinstance(got, TextMessage) and got.text == "hi"
    assert dict(got._properties) == {"k": "v"}
