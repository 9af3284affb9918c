"""Differential tests for ``queue_run.enqueue`` / ``dispatch_fast`` (both twins) against
``Queue._enqueue_full``, the reference path that takes every kind of message, and of
``ServerConnection.send``'s common case against ``ServerConnection._send_full``.

The same scripted traffic (sends, plain and transacted, with random priorities,
persistence, expiry and delivery delay; credit grants; acks; cancels; consumer closes;
clock advances with or without running the timers) runs through a broker
whose queues enqueue with the compiled twin, with the pure twin, and with the full
reference path; all three must produce the same deliveries in the same order and leave
the same queue statistics, store contents and consumer state. Queues are varied in the
ways that make the twins step aside (ring size, AMPS lease policy, selectors, several
consumers, flow limits), so the hand-offs are covered too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, example, given, settings
from traffic_steps import ack_or_cancel

import jmspy._cext.queue_run as cext
import jmspy.broker_ref.core.queue_run as pure
from jmspy import _speedups
from jmspy.broker_ref.core import Broker, Delivery, DestinationKind, ServerMessage
from jmspy.broker_ref.core import connection as connection_module
from jmspy.broker_ref.core import queue as queue_module
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.core.connection import ServerConnection
from jmspy.broker_ref.core.consumer import PRIORITIES, MessageRef
from jmspy.broker_ref.core.errors import IllegalBrokerState
from jmspy.broker_ref.core.queue import Queue
from jmspy.broker_ref.store.store import MemoryStore

START = 1_000_000
#: The compiled twin reads the compiled records' C fields, so it runs only where the broker
#: makes compiled records: the compiled run of the suite tests both twins, the pure run the
#: pure one.
TWINS = [pytest.param(pure, id="pure")] + (
    [] if _speedups.PURE_PYTHON else [pytest.param(cext, id="compiled")]
)


def _reference_enqueue(queue: Queue, message: ServerMessage) -> None:
    queue._enqueue_full(message)


def _reference_send(
    conn: ServerConnection, message: ServerMessage, tx: str | None = None
) -> None:
    conn._send_full(message, tx)


@contextmanager
def enqueue_with(twin: Any) -> Iterator[None]:
    """Route every ``Queue.enqueue``, ``_dispatch_fast`` and ``ServerConnection.send``
    through ``twin`` (None: the reference paths, ``Queue._enqueue_full`` and
    ``ServerConnection._send_full``; their dispatch is the pure twin's loop, which holds
    the ring and the hand-over as ``Queue`` defines them)."""
    bound = ("_tags_known_once", "_route_fast", "_acknowledge_tags")  # the connection's
    saved = (queue_module._twin, ServerConnection.__dict__["send"],
             [getattr(connection_module, name) for name in bound])
    if twin is None:
        queue_module._twin = SimpleNamespace(
            enqueue=_reference_enqueue, dispatch_fast=pure.dispatch_fast)
        ServerConnection.send = _reference_send  # type: ignore[method-assign,assignment]
    else:
        queue_module._twin = twin
        for name in bound:
            setattr(connection_module, name, getattr(twin, name.removeprefix("_")))
    try:
        yield
    finally:
        queue_module._twin, ServerConnection.send, functions = saved
        for name, function in zip(bound, functions, strict=True):
            setattr(connection_module, name, function)


class Recorder:
    """A session callback that records deliveries; ``batch`` adds ``deliver_many``."""

    def __init__(self) -> None:
        self.got: list[tuple[int, int, str, int]] = []

    def deliver(self, d: Delivery) -> None:
        self.got.append((d.consumer_id, d.delivery_tag, d.message.message_id, d.delivery_count))

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        self.got.append((consumer_id, -1, reason, 0))


class BatchRecorder(Recorder):
    def deliver_many(self, consumer_id: int, first_tag: int, messages: list[ServerMessage],
                     counts: list[int]) -> None:
        for i, m in enumerate(messages):
            self.got.append((consumer_id, first_tag + i, m.message_id, counts[i]))


send = st.tuples(
    st.just("send"),
    st.integers(-2, 12),  # priority, clamped by the queue
    st.integers(1, 12),  # how many
    st.sampled_from(["plain"] * 3 + ["persistent", "expiring", "expiring", "expired",
                                      "delayed"]),
)
step = st.one_of(
    send,
    st.tuples(st.just("txsend"), st.integers(0, 9), st.integers(1, 5), st.just("")),
    st.tuples(st.just("grant"), st.integers(1, 3), st.integers(1, 30), st.just("")),
    st.tuples(st.just("ack"), st.integers(1, 3), st.integers(1, 20), st.just("")),
    st.tuples(st.just("cancel"), st.integers(1, 3), st.integers(1, 8), st.just("")),
    # the clock moves; timers run only if the third field is 1 (otherwise dispatch meets
    # messages whose expiry passed while they were still ready)
    st.tuples(st.just("tick"), st.integers(1, 30), st.integers(0, 1), st.just("")),
    st.tuples(st.just("close"), st.integers(1, 3), st.just(0), st.just("")),
)
world = st.fixed_dictionaries({
    "consumers": st.integers(1, 3),
    "auto": st.booleans(),
    "batch": st.booleans(),
    "flow_limit": st.sampled_from([None, 1, 4]),
    "ring_size": st.sampled_from([None, None, 3]),
    "amps": st.booleans(),
    "selector": st.booleans(),
    "store": st.booleans(),
    "steps": st.lists(step, max_size=25),
})


def play(twin: Any, w: dict[str, Any]) -> Any:
    clock = [START]
    store = MemoryStore() if w["store"] else None
    defaults = AddressSettings(
        consumer_flow_limit=w["flow_limit"],
        ring_size=w["ring_size"],
        lease_period_ms=20 if w["amps"] else None,
    )
    with enqueue_with(twin):
        broker = Broker(name="b", default_settings=defaults, store=store,
                        clock=lambda: clock[0])
        rec = BatchRecorder() if w["batch"] else Recorder()
        conn = broker.connect(rec)
        broker.create_queue("q")
        for cid in range(1, w["consumers"] + 1):
            # consumer 2 (with selectors on) only takes priorities 5 and up: the queue
            # then dispatches through the filtered path
            selector = "JMSPriority >= 5" if w["selector"] and cid == 2 else None
            conn.create_consumer(cid, DestinationKind.QUEUE, "q", credit=2,
                                 auto_ack=w["auto"], selector=selector)
        seq = 0
        closed: set[int] = set()
        for op, a, b, kind in w["steps"]:
            if op == "send":
                for _ in range(b):
                    seq += 1
                    conn.send(ServerMessage(
                        f"s{seq}", DestinationKind.QUEUE, "q", priority=a,
                        persistent=kind == "persistent",
                        expiration={"expiring": clock[0] + 10,
                                    "expired": clock[0] - 1}.get(kind, 0),
                        deliver_at=clock[0] + 5 if kind == "delayed" else 0,
                    ))
            elif op == "txsend":  # staged in a transaction, routed by its commit
                conn.begin("t")
                for _ in range(b):
                    seq += 1
                    conn.send(ServerMessage(f"s{seq}", DestinationKind.QUEUE, "q",
                                            priority=a, persistent=False), "t")
                conn.commit("t")
            elif op == "grant" and a <= w["consumers"] and a not in closed:
                conn.grant_credit(a, b)
            elif op == "close" and a <= w["consumers"] and a not in closed:
                closed.add(a)
                conn.close_consumer(a)
            elif op in ("ack", "cancel"):
                ack_or_cancel(conn, rec.got, op, a, b)
            elif op == "tick":
                clock[0] += a
                if b:
                    broker.process_timers()
        q = broker.queues["q"]
        return (
            rec.got,
            broker.stats("q", DestinationKind.QUEUE).as_dict(),
            [[(r.message.message_id, r.state, r.delivery_count, r.priority)
              for r in q.levels.in_ram(level)] for level in range(PRIORITIES)],
            [(c.consumer_id, c.credit, c.in_ring, list(c.delivering)) for c in q.consumers],
            [c.consumer_id for c in q._ring or ()],
            q._dispatching,
            None if store is None else (store.message_ids("q"),
                                        [store.delivery_count("q", i)
                                         for i in store.message_ids("q")]),
        )


@settings(max_examples=250, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(world)
@example({  # a ready message whose expiry passed before its timer ran stops a run
    "consumers": 1, "auto": False, "batch": True, "flow_limit": None, "ring_size": None,
    "amps": False, "selector": False, "store": False,
    "steps": [("send", 4, 2, "plain"), ("send", 4, 2, "expiring"), ("send", 4, 2, "plain"),
              ("tick", 20, 0, ""), ("grant", 1, 10, "")],
})
def test_enqueue_twins_agree_with_the_reference_path(w: dict[str, Any]) -> None:
    reference = play(None, w)
    assert play(pure, w) == reference
    if not _speedups.PURE_PYTHON:
        assert play(cext, w) == reference


@pytest.mark.parametrize("twin", TWINS)
def test_enqueue_clamps_priorities_and_keeps_fifo_within_a_level(twin: Any) -> None:
    w = {"consumers": 1, "auto": True, "batch": True, "flow_limit": None, "ring_size": None,
         "amps": False, "selector": False, "store": False,
         "steps": [("send", p, 1, "plain") for p in (-5, 4, 99, 9, 0, 4)]
         + [("grant", 1, 20, "")]}
    got = play(twin, w)[0]
    # credit 2 took the first two at once; the rest go highest priority first, FIFO within
    assert [m for (_, _, m, _) in got] == ["s1", "s2", "s3", "s4", "s6", "s5"]


@pytest.mark.parametrize("twin", TWINS)
def test_enqueue_builds_a_ready_ref_and_counts_the_message(twin: Any) -> None:
    store = MemoryStore()
    broker = Broker(name="b", store=store)
    broker.create_queue("q")
    q = broker.queues["q"]
    m = ServerMessage("m1", DestinationKind.QUEUE, "q", priority=7, persistent=True)
    twin.enqueue(q, m)
    (ref,) = q.levels.in_ram(2)
    assert type(ref) is MessageRef
    assert (ref.message, ref.priority, ref.delivery_count, ref.state) == (m, 2, 0, 0)
    assert (q.enqueued, q.ready_count) == (1, 1)
    assert store.message_ids("q") == ["m1"]


@pytest.mark.parametrize("twin", TWINS)
def test_enqueue_hands_unusual_messages_to_the_full_path(
    twin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    full: Callable[[Queue, ServerMessage], None] = Queue._enqueue_full

    def spy(self: Queue, message: ServerMessage) -> None:
        calls.append(message.message_id)
        full(self, message)

    monkeypatch.setattr(Queue, "_enqueue_full", spy)
    broker = Broker(name="b", clock=lambda: START)
    broker.create_queue("q")
    q = broker.queues["q"]
    twin.enqueue(q, ServerMessage("plain", DestinationKind.QUEUE, "q"))
    twin.enqueue(q, ServerMessage("exp", DestinationKind.QUEUE, "q", expiration=START + 9))
    twin.enqueue(q, ServerMessage("late", DestinationKind.QUEUE, "q", deliver_at=START + 9))
    q.deleted = True
    twin.enqueue(q, ServerMessage("gone", DestinationKind.QUEUE, "q"))
    assert calls == ["exp", "late", "gone"]
    assert (q.enqueued, q.ready_count, q.scheduled_count) == (3, 2, 1)  # "gone": dropped


def test_send_hands_everything_but_a_plain_queue_send_to_the_full_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    full = ServerConnection._send_full

    def spy(self: ServerConnection, message: ServerMessage, tx: str | None) -> None:
        calls.append(message.message_id)
        full(self, message, tx)

    monkeypatch.setattr(ServerConnection, "_send_full", spy)
    broker = Broker(name="b")
    conn = broker.connect(Recorder())
    broker.create_queue("q")
    plain = ServerMessage("plain", DestinationKind.QUEUE, "q")
    conn.send(plain, None)
    assert plain.producer_connection == conn.connection_id  # stamped for no_local
    conn.send(ServerMessage("new-queue", DestinationKind.QUEUE, "fresh"), None)
    conn.send(ServerMessage("topic", DestinationKind.TOPIC, "t"), None)
    conn.begin("x")
    conn.send(ServerMessage("staged", DestinationKind.QUEUE, "q"), "x")
    assert calls == ["new-queue", "topic", "staged"]
    assert broker.stats("q").enqueued == 1 and broker.stats("fresh").enqueued == 1
    conn.close()
    with pytest.raises(IllegalBrokerState, match="is closed"):
        conn.send(ServerMessage("late", DestinationKind.QUEUE, "q"), None)
    assert calls[-1] == "late"
