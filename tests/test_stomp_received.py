"""A received MESSAGE frame as a client message (``jmspy.transports.stomp.received``).

Random MESSAGE frames -- jmspy's own ``jmspy-jms`` header (valid, another format, a bad
timestamp), an earlier jmspy's one header per field, a raw client's bare headers, every
body kind, typed and untyped properties, good and bad numbers, destinations that parse
and ones that do not -- go through ``from_frame`` twice: the second pass, which reads the
header layout and the types text the first derived and kept, must give the same message
(class and every field) or the same error. The module had a compiled twin, retired by the
twin ledger's rule (benchmarks/README.md).
"""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, example, given, settings
from twin_support import message_view

import jmspy.transports.stomp.received as received
from jmspy.message import BytesMessage, TextMessage
from jmspy.transports.stomp import mapping as stomp_mapping

SETTINGS = settings(
    max_examples=400, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

prop_names = st.sampled_from(["a", "b", "color", "n", "ts", "JMS_x"])
numbers = st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(
    ["", "1.5", "-0", "nan", "inf", "true", "TRUE", "false", "x", " 7 ", "0x10"]))
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
ptypes = st.lists(
    st.tuples(st.one_of(prop_names, texts), st.sampled_from(["i", "f", "b", "x", "", "=i"]),
              st.booleans()),
    max_size=4,
).map(lambda items: ",".join(f"{n}={c}" if eq else n for n, c, eq in items))
destinations = st.sampled_from(
    ["/queue/a", "/topic/b.c", "/amq/queue/r", "/queue/jmspy-tmp-x", "/temp-queue/t", "",
     "/queue/bad name", "/nowhere/x"])
map_bodies = st.dictionaries(
    prop_names, st.one_of(st.integers(), texts, st.binary(max_size=4).map(
        lambda b: {"b64": b.hex()})), max_size=3).map(lambda d: json.dumps(d).encode())


@st.composite
def frames(draw: st.DrawFn) -> tuple[dict[str, str], bytes | str]:
    headers: dict[str, str] = {}
    for name, value in draw(st.lists(st.tuples(
            st.sampled_from(["destination", "reply-to"]), destinations), max_size=2)):
        headers[name] = value
    style = draw(st.sampled_from(["jmspy", "jmspy", "earlier", "raw", "other-format"]))
    kind = draw(st.sampled_from(["", "bytes", "map", "none", "null-text", "weird"]))
    types = draw(ptypes)
    if style == "jmspy":
        stamp = draw(st.one_of(st.integers(0, 2**45).map(str), st.sampled_from(["", "x"])))
        headers["jmspy-jms"] = f"1;{stamp};{kind};{types};{draw(texts)}"
    elif style == "other-format":
        headers["jmspy-jms"] = draw(st.sampled_from(["2;5;;;id", "1;5", "", draw(texts)]))
    elif style == "earlier":
        headers.update({"jmspy-body": kind, "jmspy-ptypes": types,
                        "jmspy-message-id": draw(texts), "jmspy-timestamp": draw(numbers)})
    for name in draw(st.lists(st.sampled_from(
            ["message-id", "timestamp", "expires", "expiration", "priority", "persistent",
             "correlation-id", "type", "subscription", "ack", "redelivered"]), max_size=6)):
        headers[name] = draw(st.one_of(numbers, texts))
    ctype = draw(st.sampled_from([None, "", "text/plain;charset=utf-8", "application/json",
                                  "application/octet-stream"]))
    if ctype is not None:
        headers["content-type"] = ctype
    if draw(st.booleans()):
        headers["content-length"] = "1"
    for name, value in draw(st.lists(st.tuples(st.one_of(prop_names, texts),
                                               st.one_of(numbers, texts)), max_size=4)):
        headers.setdefault(name, value)
    body: bytes | str = draw(st.one_of(map_bodies, st.binary(max_size=12), texts,
                                       st.binary(max_size=12).map(bytearray)))
    return headers, body


def outcome(module: Any, headers: dict[str, str], body: bytes | str) -> tuple[Any, ...]:
    try:
        return ("message", message_view(module.from_frame(dict(headers), body)))
    except Exception as exc:
        return ("error", type(exc), str(exc))


@SETTINGS
@given(frames())
# RabbitMQ's relative expiration on a frame without a timestamp: counted from the clock
@example(({"destination": "/amq/queue/r", "expiration": " 7 "}, b"{}"))
def test_a_frame_read_again_through_what_was_kept_gives_the_same_message(
        frame: tuple[dict[str, str], bytes | str]) -> None:
    headers, body = frame
    # A relative ``expiration`` with no timestamp counts from now: one clock for both.
    with mock.patch.object(stomp_mapping, "time", _FrozenClock):
        first = outcome(received, headers, body)
        # again: the header layout and the types text are now kept
        assert outcome(received, headers, body) == first


class _FrozenClock:
    """Stands in for the ``time`` module where the mapping reads the wall clock."""

    @staticmethod
    def time() -> float:
        return 1_700_000_000.0


def test_a_jmspy_message_reads_back_typed_and_read_only() -> None:
    module = received
    headers = {"destination": "/queue/orders", "message-id": "broker-1", "ack": "7",
               "subscription": "1", "priority": "6", "timestamp": "99", "expires": "0",
               "redelivered": "false", "qty": "12", "ratio": "0.5", "vip": "TRUE",
               "note": "plain", "jmspy-jms": "1;1700000000000;;qty=i,ratio=f,vip=b;ID:p-1",
               "content-type": "text/plain;charset=utf-8", "content-length": "5"}
    m = module.from_frame(headers, b"hello")
    assert isinstance(m, TextMessage) and m.text == "hello"
    assert (m.message_id, m.timestamp, m.priority, m.delivery_time) == (
        "ID:p-1", 1700000000000, 6, 1700000000000)
    assert m.destination is not None and m.destination.name == "orders"
    assert m._properties == {"qty": 12, "ratio": 0.5, "vip": True, "note": "plain"}
    assert (m.redelivered, m.delivery_count, m._delivery_tag) == (False, 1, -1)
    assert m._props_read_only and m._body_read_only


def test_a_raw_clients_frame_and_an_unreadable_map_body() -> None:
    module = received
    m = module.from_frame({"destination": "/topic/t", "message-id": "m-9",
                           "content-length": "3", "timestamp": "12"}, b"\x00\x01\x02")
    assert isinstance(m, BytesMessage) and m.body == b"\x00\x01\x02"
    assert (m.message_id, m.timestamp) == ("m-9", 12)
    with pytest.raises(json.JSONDecodeError):
        module.from_frame({"jmspy-jms": "1;5;map;;ID:m"}, b"not json")


def test_what_is_derived_from_frames_stays_bounded() -> None:
    module = received
    """Each new header layout and types text is derived once and kept, never more than
    256 of each (a broker sending ever new property names must not grow the client)."""
    for i in range(1000):
        headers = {"destination": "/queue/q", f"p{i}": "7", "q": "x",
                   "jmspy-jms": f"1;5;;p{i}=i,q;ID:{i}"}
        assert module.from_frame(headers, b"")._properties == {f"p{i}": 7, "q": "x"}
    types_kept, layouts_kept = module.derived_sizes()
    assert 0 < types_kept <= 256 and 0 < layouts_kept <= 256
