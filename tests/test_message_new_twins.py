"""Differential tests for the message-creation twins (``jmspy._cext/_pure.message_new``).

Both twins and the ``TextMessage`` constructor itself get the same random text and
properties: valid and invalid names (keywords, reserved JMS names, non-identifiers,
non-strings), values of every accepted type and of refused ones (out-of-range ints,
int subclasses, bytes, lists), plain dicts, dict subclasses and other mappings, texts
that are str, a str subclass or not text at all. They must build messages equal in
every field (and of the same class), or raise the same error with the same message.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings
from twin_support import record_twins

import jmspy._cext.message_new as cext
import jmspy._pure.message_new as pure
from jmspy import message as message_module
from jmspy import twins
from jmspy.message import TextMessage


class Level(enum.IntEnum):
    HIGH = 7


class Text(str):
    pass


FIELDS = twins.message_record.FIELDS
MAKERS = record_twins(pure.new_text_message, cext.new_text_message)

names = st.one_of(
    st.sampled_from(["color", "n", "_x", "$y", "JMSXGroupID", "JMS_vendor", "a1"]),
    st.sampled_from(["", "1abc", "has space", "AND", "between", "JMSPriority", "JMSfoo"]),
    st.text(alphabet="abcXYZ_$1 -", min_size=0, max_size=6),
    st.sampled_from([None, 5, b"raw"]),
)
values = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=5),
    st.integers(-(2**64), 2**64), st.sampled_from([2**63 - 1, -(2**63), 2**63, Level.HIGH]),
    st.sampled_from([b"bytes", [1], {"k": 1}]),
)
props = st.one_of(
    st.none(),
    st.dictionaries(names, values, max_size=5),
    st.dictionaries(names, values, max_size=3).map(OrderedDict),
    st.dictionaries(names, values, max_size=3).map(MappingProxyType),
)
texts = st.one_of(st.none(), st.text(max_size=10), st.just(Text("sub")), st.just(b"raw"),
                  st.just(3))


def build(make: Any, text: Any, properties: Any) -> Any:
    try:
        m = make(text, properties)
    except Exception as exc:
        return ("error", type(exc), str(exc))
    return (type(m), [(name, getattr(m, name)) for name in FIELDS])


@settings(max_examples=500, deadline=None, database=None)
@given(texts, props)
def test_new_text_message_twins_agree_with_the_constructor(text: Any, properties: Any) -> None:
    expected = build(TextMessage, text, properties)
    for make in MAKERS:
        message_module._VALID_NAMES.clear()  # the remembered names must not change the outcome
        assert build(make, text, properties) == expected
        assert build(make, text, properties) == expected  # names remembered


def test_new_text_message_defaults_and_independent_properties() -> None:
    for make in MAKERS:
        a = make()
        b = make("x", {"n": 1})
        assert (a.text, a.priority, a.delivery_mode, a.message_id) == (None, 4, 2, None)
        assert b.text == "x" and b.get_property("n") == 1 and a.get_property("n") is None
        b.set_property("m", "v")  # a new message's properties are writable
        assert b.get_property("m") == "v"
