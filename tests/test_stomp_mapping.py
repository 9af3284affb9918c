"""stomp:// messages <-> frames (transports/stomp/mapping.py), without a broker.

A SEND carries JMSMessageID, JMSTimestamp, the body kind and the property types in one
``jmspy-jms`` header (jmspy/stomp_jms_header.py); a MESSAGE frame made of those headers
reads back as the same message, for every body kind and property type. Frames of an
earlier jmspy (one ``jmspy-*`` header per field) and of raw clients still read.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jmspy import BytesMessage, MapMessage, Message, Queue, TextMessage
from jmspy.stomp_jms_header import format_header, header_of, parse_header, ptypes_of
from jmspy.transports.stomp.mapping import detect_broker, jms_message_id, to_frame
from jmspy.transports.stomp.received import from_frame

PROFILE = detect_broker("ActiveMQ/5.17.0")
names = st.from_regex(r"[a-z][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n.upper() not in {"AND", "OR", "NOT", "IN", "IS", "LIKE", "NULL", "TRUE",
                                "FALSE", "BETWEEN", "ESCAPE"})
values = st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1),
                   st.floats(allow_nan=False, allow_infinity=False),
                   st.text(st.characters(blacklist_categories=("Cs",)), max_size=10))
bodies = st.one_of(
    st.builds(TextMessage, st.one_of(st.none(), st.text(max_size=20))),
    st.builds(BytesMessage, st.binary(max_size=20)),
    st.builds(MapMessage, st.dictionaries(names, st.integers(0, 9), max_size=3)),
    st.builds(Message),
)


def _sent(message: Message, n: int = 7) -> Message:
    message.destination = Queue("orders")
    message.message_id = f"ID:abc;def-{n}"  # a ';' too: the id is the header's last field
    message.timestamp = 1_764_129_000_000 + n
    return message


def _delivered(headers: dict[str, str], body: bytes) -> dict[str, str]:
    """The headers a MESSAGE frame of this SEND has (ActiveMQ adds its own)."""
    return {**headers, "destination": "/queue/orders", "message-id": "ID:broker-1",
            "subscription": "1", "ack": "ID:broker-1", "content-length": str(len(body))}


@settings(max_examples=300, deadline=None, database=None)
@given(message=bodies, props=st.dictionaries(names, values, max_size=4))
def test_every_body_kind_and_property_type_survives_a_send_and_a_delivery(
    message: Message, props: dict[str, Any]
) -> None:
    _sent(message)
    for name, value in props.items():
        message.set_property(name, value)
    _, body, headers = to_frame(message, PROFILE)
    got = from_frame(_delivered(headers, body), body)
    assert type(got) is type(message)
    assert got.message_id == message.message_id and got.timestamp == message.timestamp
    assert {n: got.get_property(n) for n in got.property_names()} == props
    if isinstance(message, TextMessage):
        assert got.text == message.text  # type: ignore[attr-defined]
    elif isinstance(message, BytesMessage):
        assert got.body == message.body  # type: ignore[attr-defined]
    elif isinstance(message, MapMessage):
        assert got.map == message.map  # type: ignore[attr-defined]


def test_a_send_carries_one_jmspy_header_instead_of_one_per_field() -> None:
    message = _sent(BytesMessage(b"\x00\x01"))
    message.set_property("qty", 12)
    message.set_property("who", "x")
    _, _, headers = to_frame(message, PROFILE)
    jmspy_headers = sorted(h for h in headers if h.startswith("jmspy"))
    assert jmspy_headers == ["jmspy-jms"]
    assert headers["jmspy-jms"] == "1;1764129000007;bytes;qty=i;ID:abc;def-7"
    assert headers["qty"] == "12" and headers["who"] == "x"


def test_a_frame_from_an_earlier_jmspy_reads_the_same() -> None:
    headers = {"jmspy-message-id": "ID:old-1", "jmspy-timestamp": "1700000000000",
               "jmspy-ptypes": "n=i,ok=b", "jmspy-body": "map", "n": "3", "ok": "true",
               "content-type": "application/json"}
    body = b'{"a": 1}'
    got = from_frame(_delivered(headers, body), body)
    assert isinstance(got, MapMessage) and got.map == {"a": 1}
    assert (got.message_id, got.timestamp) == ("ID:old-1", 1_700_000_000_000)
    assert (got.get_property("n"), got.get_property("ok")) == (3, True)
    assert jms_message_id(_delivered(headers, body)) == "ID:old-1"


@pytest.mark.parametrize("value", ["", "2;1;;;ID:x", "1;noon;;;ID:x", "1;5;;"])
def test_a_jmspy_jms_header_this_version_cannot_read_leaves_the_brokers_own_headers(
    value: str,
) -> None:
    assert parse_header(value) is None
    headers = _delivered({"jmspy-jms": value, "timestamp": "42"}, b"hi")
    got = from_frame(headers, b"hi")
    assert (got.message_id, got.timestamp) == ("ID:broker-1", 42)
    assert jms_message_id(headers) == "ID:broker-1"
    assert "jmspy-jms" not in list(got.property_names())


def test_the_header_fields_read_back_as_written() -> None:
    value = format_header(5, "null-text", "a=i,b=f", "ID:1;2;3")
    fields = parse_header(value)
    assert fields is not None
    assert (fields.timestamp, fields.body, fields.ptypes, fields.message_id) == (
        5, "null-text", "a=i,b=f", "ID:1;2;3")


@settings(max_examples=300)
@given(value=st.one_of(
    st.text(max_size=40),
    st.builds(lambda ts, body, types, mid: f"1;{ts};{body};{types};{mid}",
              st.one_of(st.integers(0, 2**45).map(str), st.text(max_size=4)),
              st.sampled_from(["", "bytes", "map"]),
              st.sampled_from(["", "a=i", "a=i,b=f", "x=b"]), st.text(max_size=10)),
))
def test_the_broker_reads_the_property_types_the_full_parse_would_give(value: str) -> None:
    """ptypes_of (what jmspy broker reads per SEND) agrees with header_of on any value,
    including ones this version does not read (then ``""``: nothing to type)."""
    fields = header_of({"jmspy-jms": value})
    assert ptypes_of({"jmspy-jms": value}) == (fields.ptypes if fields else "")
    assert ptypes_of({}) == ""


def test_the_brokers_parsed_property_types_stay_bounded_and_typed() -> None:
    """Each distinct types text is split once and kept, but never more than 256 of them
    (a client sending ever new property names must not grow the broker)."""
    from jmspy.broker_ref.protocols.stomp import mapping as broker_mapping

    for i in range(1000):
        props: dict[str, object] = {f"p{i}": "7", "q": "x"}
        broker_mapping._restore_types(props, f"p{i}=i,q", "jmspy-jms")
        assert props == {f"p{i}": 7, "q": "x"}  # "q" has no type: left a string
    assert len(broker_mapping._PTYPE_ITEMS) <= 256


def _model_properties(headers: dict[str, str], ptypes: str) -> dict[str, Any]:
    """What a MESSAGE frame's properties are, spelled out with no cache: every header
    that is neither STOMP's/a broker's nor jmspy's own, typed as ``ptypes`` says (a value
    that does not parse as its type stays a string)."""
    from jmspy.transports.stomp.mapping import RESERVED_HEADERS

    codes = dict(item.split("=", 1) for item in ptypes.split(",") if "=" in item)
    out: dict[str, Any] = {}
    for name, value in headers.items():
        if name in RESERVED_HEADERS or name.startswith("jmspy-"):
            continue
        code = codes.get(name)
        try:
            out[name] = (int(value) if code == "i" else float(value) if code == "f"
                         else value.lower() == "true" if code == "b" else value)
        except ValueError:
            out[name] = value
    return out


header_names = st.one_of(
    st.sampled_from(["message-id", "priority", "expires", "persistent",
                     "content-type", "ack", "subscription", "jmspy-body", "jmspy-x"]),
    names,
)
ptype_lists = st.lists(
    st.tuples(st.one_of(names, st.sampled_from(["priority", "jmspy-x"])),
              st.sampled_from(["i", "f", "b", "x", "", "=i"]), st.booleans()),
    max_size=4,
).map(lambda items: ",".join(f"{n}={c}" if eq else n for n, c, eq in items))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(header_names, st.one_of(st.sampled_from(["1", "2.5", "true", "no"]),
                                               st.text(max_size=6)), max_size=8),
       ptype_lists)
def test_received_properties_are_the_non_reserved_headers_typed_by_the_ptypes(
        headers: dict[str, str], ptypes: str) -> None:
    """from_frame keeps what it derives from a frame's header names and types text; the
    result is the model's on the first frame and on every later frame of that layout."""
    frame = {**headers, "jmspy-jms": f"1;5;;{ptypes};ID:x"}
    for _ in range(2):  # the second read finds the layout and the types already derived
        message = from_frame(dict(frame), b"body")
        assert message._properties == _model_properties(frame, ptypes)
        assert list(message._properties) == list(_model_properties(frame, ptypes))
