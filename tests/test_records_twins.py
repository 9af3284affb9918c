"""The broker's dispatch records: compiled twin (``cython_ext/records.pyx``, typed fields)
and pure twin (``jmspy/broker_ref/core/records.py``, slotted dataclasses) take the same
arguments, start from the same defaults, print the same and decide ``can_receive`` alike."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

import jmspy._cext.records as cext
import jmspy.broker_ref.core.records as pure
from jmspy import _speedups
from jmspy.broker_ref.core import consumer


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
    assert a._deques == [None] * pure.PRIORITIES and a._deques is not b._deques
    assert repr(a) == repr(pure.LevelsRecord(pure.PageBudget(100)))


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
