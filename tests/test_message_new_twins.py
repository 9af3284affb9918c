"""Differential tests for the message-creation twins (``jmspy._cext/_pure.message_new``).

Both twins and each message class's constructor itself get the same random body and
properties: valid and invalid names (keywords, reserved JMS names, non-identifiers,
non-strings), values of every accepted type and of refused ones (out-of-range ints,
int subclasses, bytes, lists), plain dicts, dict subclasses and other mappings, bodies
of the class's type, of a subclass of it or of no fitting type at all. They must build
messages equal in every field (and of the same class), or raise the same error with the
same message.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from twin_support import record_twins

import jmspy._cext.message_new as cext
import jmspy._pure.message_new as pure
from jmspy import message as message_module
from jmspy import twins
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage


class Level(enum.IntEnum):
    HIGH = 7


class Text(str):
    pass


FIELDS = twins.message_record.FIELDS
MAKERS = record_twins(pure.new_text_message, cext.new_text_message)
# (constructor, twin function name, bodies): the bare message takes no body argument.
KINDS = [
    (TextMessage, "new_text_message", "texts"),
    (BytesMessage, "new_bytes_message", "datas"),
    (MapMessage, "new_map_message", "maps"),
    (Message, "new_message", None),
]

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
BODIES = {
    "texts": texts,
    "datas": st.one_of(st.none(), st.binary(max_size=6), st.binary(max_size=6).map(bytearray),
                       st.just(memoryview(b"mv")), st.just("text"), st.just(3)),
    "maps": st.one_of(st.none(), st.just({}), st.dictionaries(names, values, max_size=3),
                      st.just([("k", 1)])),
}


def build(make: Any, *args: Any) -> Any:
    try:
        m = make(*args)
    except Exception as exc:
        return ("error", type(exc), str(exc))
    extra = [("_pos", m._pos)] if isinstance(m, BytesMessage) else []
    return (type(m), [(name, getattr(m, name)) for name in FIELDS] + extra)


@settings(max_examples=500, deadline=None, database=None)
@given(texts, props)
def test_new_text_message_twins_agree_with_the_constructor(text: Any, properties: Any) -> None:
    expected = build(TextMessage, text, properties)
    for make in MAKERS:
        message_module._VALID_NAMES.clear()  # the remembered names must not change the outcome
        assert build(make, text, properties) == expected
        assert build(make, text, properties) == expected  # names remembered


@pytest.mark.parametrize(("cls", "name", "bodies"), KINDS, ids=[k[1] for k in KINDS])
@settings(max_examples=200, deadline=None, database=None)
@given(data=st.data())
def test_every_message_type_twins_agree_with_its_constructor(
        cls: type, name: str, bodies: str | None, data: st.DataObject) -> None:
    args = ([] if bodies is None else [data.draw(BODIES[bodies])]) + [data.draw(props)]
    expected = build(cls, *args)
    for module in record_twins(pure, cext):
        message_module._VALID_NAMES.clear()
        assert build(getattr(module, name), *args) == expected


def test_new_text_message_defaults_and_independent_properties() -> None:
    for make in MAKERS:
        a = make()
        b = make("x", {"n": 1})
        assert (a.text, a.priority, a.delivery_mode, a.message_id) == (None, 4, 2, None)
        assert b.text == "x" and b.get_property("n") == 1 and a.get_property("n") is None
        b.set_property("m", "v")  # a new message's properties are writable
        assert b.get_property("m") == "v"


def test_the_session_creates_every_message_through_the_running_twin() -> None:
    from jmspy import api_twins as twins
    from jmspy import session

    running = twins.message_new
    assert (session._new_message, session._new_text_message, session._new_bytes_message,
            session._new_map_message) == (
        running.new_message, running.new_text_message, running.new_bytes_message,
        running.new_map_message)
