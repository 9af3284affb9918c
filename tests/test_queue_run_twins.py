"""Differential tests for the broker's dispatch-run twins (``jmspy._cext.queue_run`` and
``jmspy.broker_ref.core.queue_run``), and for batch delivery as a whole.

``take_run`` gets two identical random queues (priority levels holding ready refs,
tombstones and already-expired messages, some put back at the head as a cancel does;
counts that may overstate what is ready) and a
consumer with random credit, auto-ack and room, and random levels that continue on disk
(paged out); both twins must deliver the same messages with the same tags and counts,
stop at the same expired message or paged level and leave the queue, the consumer, the
channel, the RAM budget and the store in the same state.

Then the broker core end to end: the same scripted traffic through a callback that takes
runs (``deliver_many``) and one that takes single deliveries must produce exactly the
same deliveries in the same order.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from traffic_steps import ack_or_cancel
from twin_support import needs_compiled_records, record_twins

import jmspy._cext.queue_run as cext
import jmspy.broker_ref.core.queue_run as pure
from jmspy.broker_ref.core import Broker, Delivery, DestinationKind, ServerMessage
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.core.consumer import (
    GONE,
    PRIORITIES,
    READY,
    DeliveryChannel,
    MessageRef,
    PageBudget,
    ServerConsumer,
)
from jmspy.broker_ref.core.queue import Queue
from jmspy.broker_ref.store.spool import Spool

SETTINGS = settings(
    max_examples=300, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
NOW = 1_000_000


class Host:
    """A queue host with a fixed clock and a store that records removals."""

    def __init__(self, with_store: bool) -> None:
        self.store: Any = self if with_store else None
        self.budget = PageBudget(1 << 40, 1 << 30)
        #: a destination's memory limit (QueueHost): never reached here
        self.destination_memory_limit = 1 << 40
        self.spool = Spool()
        self.deferred_dispatch: list[Any] | None = None
        self.removed: list[str] = []
        self.clock_reads = 0

    def now(self) -> int:
        self.clock_reads += 1
        return NOW

    def schedule_timer(self, *args: Any) -> None:
        raise AssertionError("take_run must not schedule timers")

    def divert(self, *args: Any) -> None:
        raise AssertionError("take_run must not divert: the caller expires")

    def remove_message(self, queue: str, message_id: str) -> None:
        self.removed.append(message_id)


class Callback:
    def deliver(self, delivery: Delivery) -> None:
        raise AssertionError("take_run must not deliver: the caller hands over")

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        pass


ref_spec = st.tuples(
    st.integers(0, 9),  # level
    st.sampled_from(["ready"] * 6 + ["tombstone", "expired", "expiring"]),
    st.integers(0, 3),  # earlier deliveries
    st.booleans(),  # persistent
)


def build(spec: dict[str, Any]) -> tuple[Queue, ServerConsumer, Host]:
    host = Host(spec["store"])
    q = Queue("q", host, AddressSettings(), durable=True)
    ready = 0
    for i, (level, state, earlier, persistent) in enumerate(spec["refs"]):
        expiration = {"expired": NOW - 1, "expiring": NOW + 5}.get(state, 0)
        m = ServerMessage(f"m{i}", DestinationKind.QUEUE, "q", persistent=persistent,
                          expiration=expiration)
        ref = MessageRef(m, level, earlier)
        if i < spec.get("returned", 0):
            q.levels.add_head(ref)  # came back (a cancel): the level's head moves back
        else:
            q.levels.add_tail(ref)
        if state == "tombstone":  # expired by a timer while queued: left in place
            ref.state = GONE
            q.levels.unready(ref)
        ready += state != "tombstone"
    # the dispatch twins read and write the record's fields: skew them as a bug might
    q.levels.count = max(0, ready + spec["count_skew"])
    q.levels.set_paged(spec.get("paged", 0))
    q.dequeued = 7
    q.delivering_count = 3
    ch = DeliveryChannel(1, Callback(), next_tag=spec["first_tag"])
    c = ServerConsumer(5, ch, q, None, spec["auto"], None, credit=spec["credit"])
    return q, c, host


def state(q: Queue, c: ServerConsumer, host: Host) -> Any:
    return (
        q.ready_count, q.dequeued, q.delivering_count,
        [[(r.message.message_id, r.state, r.delivery_count) for r in q.levels.in_ram(level)]
         for level in range(PRIORITIES)],
        c.credit, c.channel.next_tag,
        [(t, r.message.message_id, r.state, r.delivery_count) for t, r in c.delivering.items()],
        [(t, o.consumer_id) for t, o in c.channel.tags.items()],
        host.removed, host.clock_reads > 0, host.budget.used, q.memory_usage,
    )


def run(twin: Any, spec: dict[str, Any]) -> Any:
    q, c, host = build(spec)
    messages, counts, first_tag, expired = twin.take_run(q, c, spec["room"])
    return (
        [m.message_id for m in messages], counts, first_tag,
        None if expired is None else (expired.message.message_id, expired.state),
        state(q, c, host),
    )


@needs_compiled_records
@SETTINGS
@given(
    st.fixed_dictionaries({
        "refs": st.lists(ref_spec, max_size=40),
        "count_skew": st.sampled_from([0] * 6 + [-2, 1, 5]),
        "room": st.one_of(st.integers(-1, 5), st.integers(0, 60)),
        "credit": st.integers(0, 60),
        "auto": st.booleans(),
        "store": st.booleans(),
        "first_tag": st.integers(1, 2**40),
        "paged": st.sampled_from([0] * 4 + [1, 2, 1 << 4, 0b1010010]),
        "returned": st.sampled_from([0] * 4 + [1, 3, 12]),
    })
)
def test_take_run_twins_agree(spec: dict[str, Any]) -> None:
    assert run(cext, spec) == run(pure, spec)


@needs_compiled_records
def test_take_run_stops_at_an_expired_message_and_hands_it_back() -> None:
    spec = {"refs": [(4, "ready", 0, False), (4, "expired", 0, False), (4, "ready", 0, False)],
            "count_skew": 0, "room": 10, "credit": 10, "auto": False, "store": False,
            "first_tag": 1}
    for twin in (cext, pure):
        ids, counts, first, expired, st8 = run(twin, spec)
        assert ids == ["m0"] and counts == [1] and first == 1
        assert expired == ("m1", READY)  # taken off the queue; the caller expires it
        assert st8[0] == 1  # one ready message left (m2)


@needs_compiled_records
def test_take_run_stops_where_a_level_continues_on_disk() -> None:
    # level 2 has paged-out messages after m1: m3 (level 5) must wait for them
    spec = {"refs": [(2, "ready", 0, False), (2, "ready", 0, False), (5, "ready", 0, False)],
            "count_skew": 0, "room": 10, "credit": 10, "auto": False, "store": False,
            "first_tag": 1, "paged": 1 << 2}
    for twin in (cext, pure):
        ids, _counts, _first, expired, st8 = run(twin, spec)
        assert ids == ["m0", "m1"] and expired is None
        assert st8[0] == 1  # m2 still ready: the caller pages level 2 in first


# -- the broker core: runs and single deliveries are the same deliveries -----------------
class Single:
    def __init__(self) -> None:
        self.got: list[tuple[int, int, str, int]] = []
        self.calls = 0

    def deliver(self, d: Delivery) -> None:
        self.calls += 1
        self.got.append((d.consumer_id, d.delivery_tag, d.message.message_id,
                         d.delivery_count))

    def consumer_closed(self, consumer_id: int, reason: str) -> None:
        pass


class Batch(Single):
    def deliver_many(self, consumer_id: int, first_tag: int, messages: list[ServerMessage],
                     counts: list[int]) -> None:
        self.calls += 1
        for i, m in enumerate(messages):
            self.got.append((consumer_id, first_tag + i, m.message_id, counts[i]))


step = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 9), st.integers(1, 30)),
    st.tuples(st.just("grant"), st.integers(1, 3), st.integers(1, 40)),
    st.tuples(st.just("ack"), st.integers(1, 3), st.integers(1, 30)),
    st.tuples(st.just("cancel"), st.integers(1, 3), st.integers(1, 10)),
    st.tuples(st.just("revoke"), st.integers(1, 3), st.just(0)),
)


def _open_consumers(conn: Any, consumers: int) -> None:
    """Consumers 1..n, none granted credit yet; consumer 2 reads a second queue, so
    acknowledged tags interleave two queues' deliveries."""
    for cid in range(1, consumers + 1):
        conn.create_consumer(cid, DestinationKind.QUEUE, "q2" if cid == 2 else "q", credit=0)


def _send(conn: Any, seq: int, count: int, *, priority: int) -> int:
    """``count`` messages after number ``seq`` (every third to the second queue); the last
    number sent."""
    for _ in range(count):
        seq += 1
        conn.send(ServerMessage(f"s{seq}", DestinationKind.QUEUE,
                                "q2" if seq % 3 == 0 else "q", priority=priority,
                                persistent=False))
    return seq


def _replay(conn: Any, consumers: int, steps: list[Any],
            got: list[tuple[int, int, str, int]] | None = None) -> None:
    """Replay ``steps`` on ``conn``: the sends and the grants; given ``got`` (the
    deliveries so far, which acks and cancels pick their tags from) also the revokes, acks
    and cancels."""
    seq = 0
    for op, a, b in steps:
        if op == "send":
            seq = _send(conn, seq, b, priority=a)
        elif op == "grant" and a <= consumers:
            conn.grant_credit(a, b)
        elif got is None:
            continue
        elif op == "revoke" and a <= consumers:
            conn.revoke_credit(a)
        elif op in ("ack", "cancel"):
            ack_or_cancel(conn, got, op, a, b)


def traffic(callback: Single, consumers: int, flow_limit: int | None, steps: list[Any]
            ) -> Any:
    broker = Broker(name="b", default_settings=AddressSettings(consumer_flow_limit=flow_limit))
    conn = broker.connect(callback)
    _open_consumers(conn, consumers)
    _replay(conn, consumers, steps, got=callback.got)
    return callback.got, broker.stats("q", DestinationKind.QUEUE).as_dict()


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.sampled_from([None, 1, 3, 10]), st.lists(step, max_size=25))
def test_runs_deliver_exactly_what_single_deliveries_do(
    consumers: int, flow_limit: int | None, steps: list[Any]
) -> None:
    single, batch = Single(), Batch()
    assert traffic(batch, consumers, flow_limit, steps) == traffic(
        single, consumers, flow_limit, steps
    )


def test_a_lone_consumer_gets_its_window_in_one_call() -> None:
    batch = Batch()
    broker = Broker(name="b")
    conn = broker.connect(batch)
    for i in range(10):
        conn.send(ServerMessage(f"s{i}", DestinationKind.QUEUE, "q", persistent=False))
    conn.create_consumer(1, DestinationKind.QUEUE, "q", credit=0)
    conn.grant_credit(1, 8)
    assert batch.calls == 1
    assert [g[2] for g in batch.got] == [f"s{i}" for i in range(8)]
    assert [g[1] for g in batch.got] == list(range(1, 9))


def test_consumers_sharing_the_ring_still_alternate() -> None:
    batch = Batch()
    broker = Broker(name="b")
    conn = broker.connect(batch)
    conn.create_consumer(1, DestinationKind.QUEUE, "q", credit=3)
    conn.create_consumer(2, DestinationKind.QUEUE, "q", credit=3)
    for i in range(6):
        conn.send(ServerMessage(f"s{i}", DestinationKind.QUEUE, "q", persistent=False))
    assert [(g[0], g[2]) for g in batch.got] == [
        (1, "s0"), (2, "s1"), (1, "s2"), (2, "s3"), (1, "s4"), (2, "s5")
    ]


# -- acknowledge_tags ---------------------------------------------------------------------
def ack_world(twin: Any, consumers: int, amps: bool, steps: list[Any], pick: list[int]) -> Any:
    """Build a broker with the same traffic, then acknowledge a subset of the outstanding
    tags through ``twin.acknowledge_tags`` and dispatch what it touched."""
    single = Single()
    settings = AddressSettings(lease_period_ms=60_000) if amps else AddressSettings()
    broker = Broker(name="b", default_settings=settings, clock=lambda: NOW)
    conn = broker.connect(single)
    _open_consumers(conn, consumers)
    _replay(conn, consumers, steps)  # sends and grants only: the tags stay outstanding
    outstanding = list(conn._channel.tags)
    tags = [outstanding[i % len(outstanding)] for i in pick] if outstanding else []
    tags = list(dict.fromkeys(tags))  # validated input: each tag once
    touched = twin.acknowledge_tags(conn._channel.tags, tags)
    names = [q.name for q in touched]
    for q in touched:
        q.dispatch()
    queues = [broker.queues[name] for name in ("q", "q2") if name in broker.queues]
    return (names, single.got,
            [broker.stats(q.name, DestinationKind.QUEUE).as_dict() for q in queues],
            [(c.consumer_id, c.in_ring, c.credit, list(c.delivering))
             for q in queues for c in q.consumers],
            [[c.consumer_id for c in q._ring or ()] for q in queues], sorted(conn._channel.tags))


@needs_compiled_records
@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.booleans(),
       st.lists(st.one_of(
           st.tuples(st.just("send"), st.integers(0, 9), st.integers(1, 30)),
           st.tuples(st.just("grant"), st.integers(1, 3), st.integers(1, 40))), max_size=12),
       st.lists(st.integers(0, 200), max_size=40))
def test_acknowledge_tags_twins_agree(
    consumers: int, amps: bool, steps: list[Any], pick: list[int]
) -> None:
    assert ack_world(cext, consumers, amps, steps, pick) == ack_world(
        pure, consumers, amps, steps, pick
    )


# -- route_fast ---------------------------------------------------------------------------
#: What can keep a send off the common path, each one alone enough.
BLOCKERS = ("conn_closed", "topic", "queue_missing", "broker_closed", "security", "parked",
            "memory_full", "temp_full", "destination_limits", "persistent_stored",
            "duplicate_id")
#: A few of them at once (mostly none or one), and whether the message is persistent and
#: the broker has a store, which block only together.
ROUTE = st.builds(lambda broken, persistent, stored: {
    **{name: name in broken for name in BLOCKERS},
    "persistent": persistent or "persistent_stored" in broken,
    "stored": stored or "persistent_stored" in broken,
}, st.sets(st.sampled_from(BLOCKERS), max_size=3), st.booleans(), st.booleans())


def route_world(twin: Any, spec: dict[str, Any]) -> Any:
    """One send through ``twin.route_fast`` on a broker in the state ``spec`` names;
    what it returned and what it changed."""
    broker = Broker(name="b", clock=lambda: NOW)
    conn = broker.connect(Single())
    if not spec["queue_missing"]:
        broker.post_office.queue("q", create=True)
    flow = broker.flow
    conn.closed = spec["conn_closed"]
    broker.closed = spec["broker_closed"]
    broker.security = object() if spec["security"] else None
    flow._waiting = {99: []} if spec["parked"] else {}
    if spec["memory_full"]:
        flow._budget.used = flow._memory_limit
    if spec["temp_full"]:
        flow.temp_limit = flow._spool.used
    flow.destination_limits = spec["destination_limits"]
    flow._stored = spec["stored"]
    props = {"_AMQ_DUPL_ID": "d-1"} if spec["duplicate_id"] else {}
    kind = DestinationKind.TOPIC if spec["topic"] else DestinationKind.QUEUE
    message = ServerMessage("ID:m-1", kind, "q", persistent=spec["persistent"],
                            properties=props, size=10)
    routed = twin.route_fast(conn, message)
    queue = broker.queues.get("q")
    return (routed, message.producer_connection,
            None if queue is None else (queue.enqueued, queue.levels.count))


def routable(spec: dict[str, Any]) -> bool:
    """What ServerConnection.send's common case is (the oracle, from its docstring)."""
    blocked = [spec[name] for name in BLOCKERS if name != "persistent_stored"]
    return not any(blocked) and not (spec["stored"] and spec["persistent"])


@SETTINGS
@given(ROUTE)
def test_route_fast_takes_exactly_the_common_send(spec: dict[str, Any]) -> None:
    """A send routed here is stamped with its connection and enqueued; any other is left
    untouched for ServerConnection.send's full path, with each twin."""
    for twin in record_twins(pure, cext):
        routed, stamped, queue = route_world(twin, spec)
        assert routed == routable(spec), (twin, spec)
        if routed:
            assert (stamped, queue) == (1, (1, 1))
        else:
            assert stamped == 0 and queue in (None, (0, 0))
