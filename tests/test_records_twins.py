"""The records: the broker's (compiled twin ``cython_ext/records.pyx``, typed fields; pure
twin ``jmspy/broker_ref/core/records.py``, slotted dataclasses) take the same arguments,
start from the same defaults, print and compare the same and decide ``can_receive``
alike; the client message's record (``message_record``) has the same fields in both
twins, and a message built on either copies and pickles alike."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections import deque
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

import jmspy._cext.message_record as cext_message
import jmspy._cext.records as cext
import jmspy._pure.message_record as pure_message
import jmspy.broker_ref.core.records as pure
from jmspy import _speedups, message
from jmspy.broker_ref.core import BodyType, DestinationKind, api, consumer
from jmspy.broker_ref.core.connection import ServerConnection
from jmspy.broker_ref.core.producer_flow import ProducerFlow
from jmspy.destinations import Queue


class Callback:
    def deliver_many(self, *args: Any) -> None: ...

    def __repr__(self) -> str:
        return "<callback>"


def test_the_broker_makes_the_running_twins_records() -> None:
    twin = pure if _speedups.PURE_PYTHON else cext
    assert consumer.MessageRef is twin.MessageRef
    assert consumer.ServerConsumer is twin.ServerConsumer
    assert consumer.DeliveryChannel is twin.DeliveryChannel
    assert consumer.LevelsRecord is twin.LevelsRecord
    assert api.ServerMessage is twin.ServerMessage
    # the send path's records: what the broker's connections and producer flow derive from
    assert issubclass(ServerConnection, twin.ConnectionRecord)
    assert issubclass(ProducerFlow, twin.FlowRecord)
    message_twin = pure_message if _speedups.PURE_PYTHON else cext_message
    assert issubclass(message.Message, message_twin.MessageRecord)


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_server_message_is_the_same_dataclass_in_both_twins(twin: Any) -> None:
    sm = twin.ServerMessage("ID:1", DestinationKind.QUEUE, "q")
    assert repr(sm) == repr(pure.ServerMessage("ID:1", DestinationKind.QUEUE, "q"))
    assert (sm.body_type, sm.body, sm.persistent, sm.priority, sm.size) == (
        BodyType.MESSAGE, None, True, 4, 0)
    assert sm.properties == {} and sm.properties is not twin.ServerMessage(
        "ID:2", DestinationKind.QUEUE, "q").properties
    assert [f.name for f in dataclasses.fields(sm)] == [
        f.name for f in dataclasses.fields(pure.ServerMessage)]
    changed = dataclasses.replace(sm, priority=9, body="x")
    assert (changed.priority, changed.body, sm.priority) == (9, "x", 4)
    assert sm == twin.ServerMessage("ID:1", DestinationKind.QUEUE, "q") and sm != changed
    with pytest.raises(TypeError):
        hash(sm)  # mutable and compared by value, as the dataclass: not hashable


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_server_message_takes_every_field_by_position_or_keyword(twin: Any) -> None:
    """The compiled twin's constructor is written out (not generated): every field in the
    pure dataclass's order, each by position or keyword, and ``properties`` made fresh
    only when not given (an explicit value, even None, is kept as passed)."""
    names = [f.name for f in dataclasses.fields(pure.ServerMessage)]
    values = [object() for _ in names]
    by_position = twin.ServerMessage(*values)
    by_keyword = twin.ServerMessage(**dict(zip(names, values, strict=True)))
    for name, value in zip(names, values, strict=True):
        assert getattr(by_position, name) is value and getattr(by_keyword, name) is value
    props = {"a": 1}
    assert twin.ServerMessage("ID:1", DestinationKind.QUEUE, "q", properties=props
                              ).properties is props
    assert twin.ServerMessage("ID:1", DestinationKind.QUEUE, "q", properties=None
                              ).properties is None
    with pytest.raises(TypeError):
        twin.ServerMessage("ID:1", DestinationKind.QUEUE)  # destination is required
    with pytest.raises(TypeError):
        twin.ServerMessage("ID:1", DestinationKind.QUEUE, "q", colour="red")
    with pytest.raises(TypeError):
        twin.ServerMessage(*values, 17)  # one more than there are fields


def test_the_message_record_has_the_same_fields_in_both_twins() -> None:
    assert cext_message.FIELDS is pure_message.FIELDS
    assert pure_message.MessageRecord.__slots__ == pure_message.FIELDS
    compiled = {n for n in dir(cext_message.MessageRecord) if not n.startswith("__")}
    pure_names = {n for n in dir(pure_message.MessageRecord) if not n.startswith("__")}
    assert compiled == pure_names == {*pure_message.FIELDS, "get_property"}


def _property_reading(twin: Any, props: dict[str, Any], count: int, deleted: str | None,
                      name: str) -> Any:
    record = twin.MessageRecord()
    record._properties, record.delivery_count = props, count
    if deleted is not None:
        delattr(record, deleted)
    try:
        return ("value", record.get_property(name))
    except AttributeError as exc:
        return ("AttributeError", deleted is not None and deleted in str(exc))


@given(st.dictionaries(st.sampled_from(["a", "b", "JMSXDeliveryCount"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=2)), max_size=3),
       st.integers(0, 5), st.sampled_from([None, "_properties", "delivery_count"]),
       st.sampled_from(["a", "b", "c", "JMSXDeliveryCount"]))
def test_get_property_reads_alike_in_both_twins(
    props: dict[str, Any], count: int, deleted: str | None, name: str
) -> None:
    """The property or None; JMSXDeliveryCount is the delivery count (whatever the
    properties hold under that name); a deleted field is an AttributeError naming it,
    only when that field is the one read."""
    results = [_property_reading(twin, props, count, deleted, name)
               for twin in (pure_message, cext_message)]
    assert results[0] == results[1]
    reads = "delivery_count" if name == "JMSXDeliveryCount" else "_properties"
    if deleted == reads:
        assert results[0] == ("AttributeError", True)
    else:
        assert results[0] == ("value", count if reads == "delivery_count" else props.get(name))


@pytest.mark.parametrize("make", [
    lambda: message.TextMessage("hi", {"a": 1}),
    lambda: message.MapMessage({"k": 2}),
    lambda: message.Message({"p": True}),
], ids=["text", "map", "plain"])
def test_a_message_copies_and_pickles_every_field(make: Any) -> None:
    m = make()
    m.destination, m.message_id, m.priority = Queue("q"), "ID:7", 8
    for twin in (copy.copy(m), pickle.loads(pickle.dumps(m))):
        assert type(twin) is type(m)
        assert [getattr(twin, n) for n in pure_message.FIELDS] == [
            getattr(m, n) for n in pure_message.FIELDS]


def test_a_bytes_message_copy_keeps_its_read_cursor() -> None:
    m = message.BytesMessage(b"abcd")
    assert m.read_bytes(1) == b"a"
    assert copy.copy(m).read_bytes() == pickle.loads(pickle.dumps(m)).read_bytes() == b"bcd"
    sent = m.copy()  # a writable copy to send on: its own body, the cursor where it was
    sent.write_bytes(b"e")
    assert sent.body == b"abcde" and m.body == b"abcd"


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_defaults_and_repr(twin: Any) -> None:
    ref = twin.MessageRef("m", 3)
    assert (ref.message, ref.priority, ref.delivery_count, ref.state) == ("m", 3, 0, pure.READY)
    callback = Callback()
    ch = twin.DeliveryChannel(7, callback)
    assert ch.next_tag == 1 and ch.tags == {}
    assert ch.deliver_many == callback.deliver_many  # looked up once, here
    c = twin.ServerConsumer(1, ch, None, None, False, None)
    assert (c.credit, c.delivering, c.in_ring, c.closed) == (0, {}, False, False)
    assert c.delivering is not twin.ServerConsumer(2, ch, None, None, False, None).delivering
    assert repr(ref) == repr(pure.MessageRef("m", 3))
    assert repr(c) == repr(pure.ServerConsumer(1, pure.DeliveryChannel(7, callback), None,
                                               None, False, None))


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_levels_record_defaults_and_repr(twin: Any) -> None:
    budget = twin.PageBudget(100)
    a, b = twin.LevelsRecord(budget), twin.LevelsRecord(budget)
    assert (a.budget, a.count, a.memory_usage, a.paged) == (budget, 0, 0, 0)
    assert a._levels == [None] * pure.PRIORITIES and a._levels is not b._levels
    assert repr(a) == repr(pure.LevelsRecord(pure.PageBudget(100)))


# -- Level: a priority level's refs (a list and a head index, not a deque) ---------------
@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_a_level_is_first_in_first_out_and_takes_refs_back_at_the_head(twin: Any) -> None:
    level = twin.Level()
    assert (level.items, level.head, len(level), list(level)) == ([], 0, 0, [])
    assert level.items is not twin.Level().items
    assert repr(level) == repr(pure.Level()) == "Level(items=[], head=0)"
    for r in "abcd":
        level.append(r)
    assert (level.popleft(), level.popleft()) == ("a", "b")
    assert list(level) == ["c", "d"] and len(level) == 2 and level.peek() == "c"
    level.appendleft("b")  # a delivery cancelled back: into the slot "b" left
    level.appendleft("x")
    assert list(level) == ["x", "b", "c", "d"] and level.peek() == "x"
    level.remove("c")
    assert list(level) == ["x", "b", "d"]
    assert [level.popleft() for _ in range(3)] == ["x", "b", "d"]
    assert (len(level), bool(level), list(level)) == (0, False, [])
    assert level.items[level.head:] == [] and level.head < pure.LEVEL_SLACK
    with pytest.raises(IndexError, match="pop from an empty level"):
        level.popleft()
    with pytest.raises(IndexError, match="peek at an empty level"):
        level.peek()


level_step = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 40)),
    st.tuples(st.just("appendleft"), st.integers(1, 40)),
    st.tuples(st.just("popleft"), st.integers(1, 60)),
    st.tuples(st.just("remove"), st.integers(0, 1000)),
)


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
@given(steps=st.lists(level_step, max_size=40))
def test_a_level_holds_what_a_deque_would_and_no_taken_slot(
    twin: Any, steps: list[tuple[str, int]]
) -> None:
    """Against a deque, after every step: the same refs in the same order; the slots
    before the head hold no ref (a taken message is not kept alive), and there are never
    more of them than refs held (plus the few opened for refs coming back), or than
    ``LEVEL_SLACK``."""
    level, model = twin.Level(), deque[object]()
    serial = 0
    for op, n in steps:
        if op == "remove":
            if model:
                ref = model[n % len(model)]
                model.remove(ref)
                level.remove(ref)
            continue
        for _ in range(n):
            if op == "popleft":
                if not model:
                    break
                assert level.popleft() is model.popleft()
                continue
            serial += 1
            ref = pure.MessageRef(serial, 0)
            getattr(model, op)(ref)
            getattr(level, op)(ref)
        assert list(level) == list(model) and len(level) == len(model)
        assert level.items[level.head:] == list(model)
        assert level.items[:level.head] == [None] * level.head
        assert level.head < max(pure.LEVEL_SLACK, len(model) + 5)


@pytest.mark.parametrize("twin", [cext, pure], ids=["compiled", "pure"])
def test_a_long_level_drops_the_slots_it_has_taken(twin: Any) -> None:
    level = twin.Level()
    for i in range(100_000):
        level.append(i)
    assert [level.popleft() for _ in range(60_000)] == list(range(60_000))
    assert len(level.items) < 60_000 and list(level) == list(range(60_000, 100_000))
    for i in reversed(range(60_000)):
        level.appendleft(i)  # a long run coming back: room opened an eighth at a time
    assert list(level) == list(range(100_000)) and len(level.items) < 120_000


def test_records_compare_by_identity_as_the_dataclasses_do() -> None:
    for twin in (cext, pure):
        a, b = twin.MessageRef("m", 1), twin.MessageRef("m", 1)
        assert a != b and a == a and len({a, b}) == 2


@given(credit=st.integers(-3, 5), closed=st.booleans(),
       limit=st.one_of(st.none(), st.integers(0, 4)), delivering=st.integers(0, 5))
def test_can_receive_agrees(credit: int, closed: bool, limit: int | None,
                            delivering: int) -> None:
    answers = []
    for twin in (cext, pure):
        ch = twin.DeliveryChannel(1, Callback())
        c = twin.ServerConsumer(1, ch, None, None, False, limit, credit=credit, closed=closed)
        c.delivering.update({t: None for t in range(delivering)})
        answers.append(c.can_receive())
    assert answers[0] == answers[1]


def test_the_compiled_records_of_a_held_message_stay_out_of_the_cyclic_gc() -> None:
    """A queued message is a ServerMessage, its MessageRef and a place in a Level: the
    compiled three are ``no_gc`` (none can be part of a cycle), which saves the 16-byte
    GC header on each and keeps them from counting towards the collector's next pass
    (issue 17). A consumer can hold anything, so it stays tracked."""
    import gc

    sm = cext.ServerMessage("id", DestinationKind.QUEUE, "q", properties={"a": 1},
                            reply_to=(DestinationKind.QUEUE, "r"))
    ref = cext.MessageRef(sm, 0)
    level = cext.Level()
    level.append(ref)
    assert not gc.is_tracked(sm) and not gc.is_tracked(ref) and not gc.is_tracked(level)
    channel = cext.DeliveryChannel(1, Callback())
    assert gc.is_tracked(cext.ServerConsumer(1, channel, None, None, False, None))
