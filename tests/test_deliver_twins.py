"""Differential tests for the delivery-run twins (``jmspy._cext/_pure.deliver``).

``deliver_run`` gets two identical random worlds: a connection (consumer table, highest
tag seen), a consumer (open or closed, listener or not, a thread blocked in ``receive()``
or not, already scheduled or not, the one its dispatcher is draining or not) and its
session (dispatcher idle or busy, other consumers already ready). Both twins must leave
the same buffer, tag watermark, ready queue and flags, and wake the same conditions the
same number of times. Then a real vm:// connection: messages reach a listener and a
blocked ``receive()`` through it.
"""

from __future__ import annotations

import threading
from collections import deque
from types import SimpleNamespace
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

import jmspy._cext.deliver as cext
import jmspy._pure.deliver as pure
from jmspy import ConnectionFactory, Session
from jmspy.flow import new_prefetch_buffer
from jmspy.transports import vm


class CountingCondition:
    """A real ``threading.Condition`` that counts notifies and checks they hold the lock."""

    def __init__(self, lock: Any) -> None:
        self._real = threading.Condition(lock)
        self.acquire = self._real.acquire
        self.release = self._real.release
        self.notified = 0

    def __enter__(self) -> bool:
        return self._real.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._real.__exit__(*exc)

    def notify(self, n: int = 1) -> None:
        self._real.notify(n)  # raises RuntimeError unless the lock is held
        self.notified += 1


def build(w: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    lock = threading.Lock()
    session = SimpleNamespace(
        _draining=None, _dispatch_cond=CountingCondition(threading.Lock()),
        _ready=deque(["other"] * w["others_ready"]), _idle=w["idle"],
    )
    consumer = SimpleNamespace(
        consumer_id=7, _lock=lock, _cond=CountingCondition(lock), _closed=w["closed"],
        _buffer=new_prefetch_buffer(1000, 50), _listener=print if w["listener"] else None,
        _receiving=w["receiving"], _session=session, _scheduled=w["scheduled"],
    )
    if w["draining"]:
        session._draining = consumer
    conn = SimpleNamespace(_consumers={7: consumer} if w["known"] else {},
                           _last_tag=w["last_tag"])
    messages = [SimpleNamespace(n=i) for i in range(w["count"])]
    return conn, consumer, session, messages


def outcome(twin: Any, w: dict[str, Any]) -> Any:
    conn, consumer, session, messages = build(w)
    twin.deliver_run(conn, 7, w["first_tag"], messages)
    taken = []
    while len(consumer._buffer):
        taken.append(consumer._buffer.pop().n)
    return (
        conn._last_tag, taken, consumer._scheduled, consumer._cond.notified,
        [c if c == "other" else "consumer" for c in session._ready],
        session._dispatch_cond.notified,
        # neither lock is left held
        consumer._lock.acquire(blocking=False), session._dispatch_cond.acquire(False),
    )


world = st.fixed_dictionaries({
    "known": st.booleans(), "closed": st.booleans(), "listener": st.booleans(),
    "receiving": st.integers(0, 2), "scheduled": st.booleans(), "draining": st.booleans(),
    "idle": st.booleans(), "others_ready": st.integers(0, 2),
    "last_tag": st.integers(0, 50), "first_tag": st.integers(1, 40),
    "count": st.integers(1, 6),
})


@settings(max_examples=400, deadline=None, database=None)
@given(world)
def test_deliver_run_twins_agree(w: dict[str, Any]) -> None:
    assert outcome(cext, w) == outcome(pure, w)


def test_a_listener_consumer_is_scheduled_once_and_wakes_an_idle_dispatcher() -> None:
    w = {"known": True, "closed": False, "listener": True, "receiving": 0,
         "scheduled": False, "draining": False, "idle": True, "others_ready": 1,
         "last_tag": 3, "first_tag": 4, "count": 3}
    for twin in (cext, pure):
        assert outcome(twin, w) == (6, [0, 1, 2], True, 0, ["other", "consumer"], 1,
                                    True, True)


def test_a_closed_or_unknown_consumer_gets_nothing() -> None:
    base = {"known": True, "closed": True, "listener": True, "receiving": 1,
            "scheduled": False, "draining": False, "idle": True, "others_ready": 0,
            "last_tag": 10, "first_tag": 11, "count": 2}
    for twin in (cext, pure):
        # closed: the tags were seen (watermark moves) but nothing is buffered or woken
        assert outcome(twin, base)[:6] == (12, [], False, 0, [], 0)
        # unknown consumer: not even the watermark moves
        assert outcome(twin, {**base, "known": False})[:6] == (10, [], False, 0, [], 0)


def test_a_blocked_receive_is_woken_without_scheduling() -> None:
    w = {"known": True, "closed": False, "listener": False, "receiving": 1,
         "scheduled": False, "draining": False, "idle": True, "others_ready": 0,
         "last_tag": 0, "first_tag": 1, "count": 1}
    for twin in (cext, pure):
        assert outcome(twin, w)[:6] == (1, [0], False, 1, [], 0)


def test_vm_runs_reach_a_listener_and_a_blocked_receive() -> None:
    name = f"deliver-twins-{id(object())}"
    vm.start_broker(name)
    try:
        with ConnectionFactory(f"vm://{name}").create_connection() as conn:
            session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
            queue = session.create_queue("q")
            got: list[str] = []
            done = threading.Event()

            def on_message(m: Any) -> None:
                got.append(m.text)
                if len(got) == 50:
                    done.set()

            consumer = session.create_consumer(queue)
            consumer.set_message_listener(on_message)
            conn.start()
            producer = session.create_producer(queue)
            for i in range(50):
                producer.send(session.create_text_message(str(i)))
            assert done.wait(10)
            assert got == [str(i) for i in range(50)]
            consumer.close()

            other = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
            receiver = other.create_consumer(other.create_queue("r"))
            result: list[Any] = []
            waiter = threading.Thread(target=lambda: result.append(receiver.receive(10)))
            waiter.start()
            other.create_producer(other.create_queue("r")).send(
                other.create_text_message("late"))
            waiter.join(10)
            assert [m.text for m in result] == ["late"]
    finally:
        vm.stop_broker(name)
