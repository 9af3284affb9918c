"""Differential tests for the vm:// send twins (``jmspy._cext.vm_send`` and
``jmspy.transports.vm_send``): a :class:`Sender` over a scripted broker connection must
make the same calls, under the broker's lock where the pure twin makes them, number its
sends the same way, register a parked send's waiter before the lock is released, and hand
a failure to the transport with the lock released, with both twins.

The compiled twin converts with the compiled ``vm_convert``, which reads the compiled
message record's C fields, so it runs on the compiled records only (``twin_support``)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from twin_support import record_twins

import jmspy.transports.vm_send as pure
from jmspy import _speedups
from jmspy.broker_ref.core.consumer import ConnectionRecord, FlowRecord, PageBudget
from jmspy.destinations import Queue
from jmspy.errors import IllegalStateException
from jmspy.message import TextMessage

SETTINGS = settings(max_examples=200, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _compiled() -> Any:
    import jmspy._cext.vm_send as cext

    return cext


def twin_modules() -> list[Any]:
    """The pure twin, and the compiled one unless the records are pure."""
    return record_twins(pure, None if _speedups.PURE_PYTHON else _compiled())


def _room() -> FlowRecord:
    """A producer flow with room for anything (``route_fast`` asks it first)."""
    flow = FlowRecord()
    flow._waiting = {}
    flow._budget = PageBudget(1 << 30)
    flow._memory_limit = 1 << 30
    flow._spool = SimpleNamespace(used=0)
    flow.temp_limit = 1 << 30
    flow.destination_limits = False
    flow._stored = False
    return flow


class Broker(ConnectionRecord):
    """A broker host and connection that script each send's outcome and record, with
    whether the lock was held, every call the Sender makes. It has no queues, so the
    common-case routing (``queue_run.route_fast``) declines every send and each one
    reaches :meth:`send` (``test_queue_run_twins`` tests that routing)."""

    def __init__(self, outcomes: list[str]) -> None:
        self.lock = threading.Lock()
        self.outcomes = list(outcomes)
        self.calls: list[tuple[Any, ...]] = []
        self.connection_id = 7
        self.closed = False
        self.security = None
        self._broker, self._flow, self._queues, self._id = self, _room(), {}, 7

    def poke_timers(self) -> None:
        self.calls.append(("poke", self.lock.locked()))

    def send(self, message: Any, tx: str | None, *, ticket: int, timeout_ms: int) -> bool:
        outcome = self.outcomes.pop(0)
        self.calls.append(("send", message.message_id, message.destination, tx, ticket,
                           timeout_ms, self.lock.locked()))
        if outcome == "raise":
            raise ValueError("the broker refused it")
        return outcome == "done"


class Waiting:
    def __init__(self, log: list[tuple[Any, ...]], lock: threading.Lock) -> None:
        self.log, self.lock = log, lock
        log.append(("new waiter", lock.locked()))

    def wait(self) -> None:
        self.log.append(("wait", self.lock.locked()))


def message(n: int, ttl: bool, delay: bool) -> TextMessage:
    m = TextMessage(f"body {n}")
    m.message_id = f"ID:m-{n}"
    m.destination = Queue("q")
    m.timestamp = 1000
    m.expiration = 5000 if ttl else 0
    m.delivery_time = 3000 if delay else 1000
    return m


def run_sends(module: Any, script: list[tuple[str, bool, bool, str | None]]) -> list[Any]:
    """Send one message per ``(outcome, ttl, delay, tx)`` and return every call made,
    the failures the transport was handed, and the parked waiters by ticket."""
    broker = Broker([outcome for outcome, *_ in script])
    parked: dict[int, Any] = {}
    failures: list[tuple[Any, ...]] = []

    def failed(exc: Exception, conn: Any, msg: Any, tx: str | None) -> None:
        failures.append((type(exc), str(exc), conn is broker, msg.message_id, tx,
                         broker.lock.locked()))

    sender = module.Sender(parked, lambda: Waiting(broker.calls, broker.lock), failed, 250)
    sender.attach(broker, broker)
    for n, (_, ttl, delay, tx) in enumerate(script):
        sender.send(message(n, ttl, delay), tx)
    return [broker.calls, failures, sorted(parked)]


steps = st.lists(st.tuples(st.sampled_from(["done", "done", "parked", "raise"]),
                           st.booleans(), st.booleans(), st.sampled_from([None, "tx-1"])),
                 min_size=1, max_size=12)


@SETTINGS
@given(script=steps)
def test_both_twins_send_park_and_fail_alike(script: list[Any]) -> None:
    results = [run_sends(module, script) for module in twin_modules()]
    assert all(r == results[0] for r in results[1:]), results


@SETTINGS
@given(script=steps)
def test_sends_are_numbered_locked_and_their_deadlines_kept(script: list[Any]) -> None:
    """What both twins must do, checked on each: tickets 1, 2, 3... in send order, each
    call into the broker under its lock, the timers poked for a parked send or one with
    a deadline, a parked send's waiter registered under the lock and waited on after it,
    a failure handed over with the lock released."""
    for module in twin_modules():
        calls, failures, parked = run_sends(module, script)
        expected: list[tuple[Any, ...]] = []
        expected_failures = []
        for n, (outcome, ttl, delay, tx) in enumerate(script):
            expected.append(("send", f"ID:m-{n}", "q", tx, n + 1, 250, True))
            if outcome == "parked":
                expected += [("new waiter", True), ("poke", True), ("wait", False)]
            elif outcome == "done" and (ttl or delay):
                expected.append(("poke", True))
            elif outcome == "raise":
                expected_failures.append((ValueError, "the broker refused it", True,
                                          f"ID:m-{n}", tx, False))
        assert calls == expected
        assert failures == expected_failures
        assert parked == [n + 1 for n, (o, *_) in enumerate(script) if o == "parked"]


@pytest.mark.parametrize("module", twin_modules(), ids=lambda m: m.__name__)
def test_a_sender_without_a_connection_refuses_to_send(module: Any) -> None:
    sender = module.Sender({}, lambda: None, lambda *a: None, 0)
    with pytest.raises(IllegalStateException, match="closed"):
        sender.send(message(0, False, False))
    broker = Broker(["done"])
    sender.attach(broker, broker)
    sender.send(message(1, False, False))
    sender.detach()
    with pytest.raises(IllegalStateException, match="the vm connection is closed"):
        sender.send(message(2, False, False))
    assert [c[0] for c in broker.calls] == ["send"]


@pytest.mark.parametrize("module", twin_modules(), ids=lambda m: m.__name__)
def test_a_sender_attached_elsewhere_sends_there_and_keeps_counting(module: Any) -> None:
    """After a reconnect the ticket numbers go on: a ticket parked on the old broker is
    never confused with a new one."""
    first, second = Broker(["done"]), Broker(["done"])
    sender = module.Sender({}, lambda: None, lambda *a: None, 0)
    sender.attach(first, first)
    sender.send(message(0, False, False))
    sender.attach(second, second)
    sender.send(message(1, False, False))
    assert [c[4] for c in first.calls] == [1] and [c[4] for c in second.calls] == [2]


def run_try_sends(module: Any, script: list[tuple[str, bool, bool, str | None]]
                  ) -> list[Any]:
    """:func:`run_sends` with ``try_send``: the outcomes returned instead of a wait or a
    failure handed over."""
    broker = Broker([outcome for outcome, *_ in script])
    parked: dict[int, Any] = {}

    def failed(*_: Any) -> None:
        raise AssertionError("try_send hands no failure to the transport")

    sender = module.Sender(parked, lambda: Waiting(broker.calls, broker.lock), failed, 250)
    sender.attach(broker, broker)
    outcomes = [sender.try_send(message(n, ttl, delay), tx,
                                lambda: Waiting(broker.calls, broker.lock))
                for n, (_, ttl, delay, tx) in enumerate(script)]
    return [broker.calls, outcomes, sorted(parked)]


@SETTINGS
@given(script=steps)
def test_both_twins_try_send_alike_and_never_wait(script: list[Any]) -> None:
    """``try_send`` (the event loop's send): the same calls as ``send`` but no wait; a
    parked send's object registered under the lock; SENT, PARKED or FAILED returned."""
    results = [run_try_sends(module, script) for module in twin_modules()]
    assert all(r == results[0] for r in results[1:]), results
    calls, outcomes, parked = results[0]
    assert ("wait", False) not in calls
    expected = {"done": pure.SENT, "parked": pure.PARKED, "raise": pure.FAILED}
    assert outcomes == [expected[outcome] for outcome, *_ in script]
    assert parked == [n + 1 for n, (outcome, *_) in enumerate(script) if outcome == "parked"]
    for module in twin_modules():
        assert (module.FAILED, module.SENT, module.PARKED) == (0, 1, 2)
