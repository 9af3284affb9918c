"""Queues: auto-create, credit, flow limit, tags, ack, cancel, dead-lettering, stats."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
from core_support import FakeClock, Recorder, msg

from jmspy.broker_ref.core import (
    DEAD_LETTER_REASON,
    ORIGINAL_DESTINATION,
    AddressSettings,
    Broker,
    DestinationKind,
    DestinationNotFound,
    IllegalBrokerState,
    InvalidClientId,
    ServerConnection,
)

Q = DestinationKind.QUEUE


def send_all(conn: ServerConnection, dest: str, bodies: list[object]) -> None:
    for b in bodies:
        conn.send(msg(dest, b))


def test_connect_duplicate_client_id_rejected(broker: Broker) -> None:
    c1 = broker.connect(Recorder(), client_id="app")
    with pytest.raises(InvalidClientId, match="already in use"):
        broker.connect(Recorder(), client_id="app")
    c1.close()
    broker.connect(Recorder(), client_id="app")  # free again once the first closed


def test_queue_auto_created_on_send_and_consume(broker: Broker, conn: ServerConnection) -> None:
    conn.send(msg("orders", "a"))
    conn.create_consumer(1, Q, "invoices")
    assert broker.queue_names() == ["invoices", "orders"]
    assert broker.stats("orders").message_count == 1


def test_auto_create_off_raises_destination_not_found(clock: FakeClock) -> None:
    b = Broker(clock=clock, settings={"locked.#": AddressSettings(auto_create=False)})
    c = b.connect(Recorder())
    with pytest.raises(DestinationNotFound, match="auto-create is off"):
        c.send(msg("locked.q", "x"))
    with pytest.raises(DestinationNotFound):
        c.create_consumer(1, Q, "locked.q")
    c.send(msg("open.q", "x"))


def test_no_delivery_without_credit(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q")
    send_all(conn, "q", ["a", "b"])
    assert rec.take() == []


def test_credit_limits_deliveries_and_grant_dispatches_immediately(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=2)
    send_all(conn, "q", ["a", "b", "c", "d"])
    assert rec.bodies() == ["a", "b"]
    conn.grant_credit(1, 1)
    assert rec.bodies() == ["c"]
    assert broker.stats("q").delivering_count == 3


def test_revoke_credit_returns_unused(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=5)
    conn.send(msg("q", "a"))
    assert conn.revoke_credit(1) == 4
    conn.send(msg("q", "b"))
    assert rec.bodies() == ["a"]


def test_destination_flow_limit_caps_unacked(clock: FakeClock) -> None:
    b = Broker(clock=clock, settings={"limited": AddressSettings(consumer_flow_limit=2)})
    rec = Recorder()
    c = b.connect(rec)
    info = c.create_consumer(1, Q, "limited", credit=100)
    assert info.destination_flow_limit == 2
    assert info.subscription == "limited"
    send_all(c, "limited", list(range(5)))
    got = rec.take()
    assert [d.message.body for d in got] == [0, 1]
    c.ack([got[0].delivery_tag])  # frees one slot: dispatch
    assert rec.bodies() == [2]


def test_round_robin_among_consumers_with_credit(conn: ServerConnection, rec: Recorder) -> None:
    for cid in (1, 2, 3):
        conn.create_consumer(cid, Q, "q", credit=10)
    send_all(conn, "q", list(range(6)))
    assert [d.consumer_id for d in rec.take()] == [1, 2, 3, 1, 2, 3]


def test_consumer_without_credit_is_skipped(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=1)
    conn.create_consumer(2, Q, "q", credit=10)
    send_all(conn, "q", list(range(4)))
    assert [d.consumer_id for d in rec.take()] == [1, 2, 2, 2]


def test_delivery_tags_unique_increasing_per_connection(
    conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "a", credit=10)
    conn.create_consumer(2, Q, "b", credit=10)
    for i in range(3):
        conn.send(msg("a", i))
        conn.send(msg("b", i))
    tags = [d.delivery_tag for d in rec.take()]
    assert tags == sorted(set(tags)) and len(tags) == 6


def test_delivery_count_starts_at_one(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=1)
    conn.send(msg("q", "a"))
    assert rec.take()[0].delivery_count == 1


def test_ack_removes_message_and_counts_dequeued(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    send_all(conn, "q", ["a", "b"])
    tags = [d.delivery_tag for d in rec.take()]
    conn.ack(tags)
    s = broker.stats("q")
    assert (s.message_count, s.delivering_count, s.enqueued, s.dequeued) == (0, 0, 2, 2)


def test_ack_unknown_tag_raises_illegal_state(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=1)
    conn.send(msg("q", "a"))
    tag = rec.take()[0].delivery_tag
    with pytest.raises(IllegalBrokerState, match="unknown delivery tag 999"):
        conn.ack([999])
    conn.ack([tag])
    with pytest.raises(IllegalBrokerState, match="already acknowledged"):
        conn.ack([tag])


def test_cancel_restores_original_order(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=3)
    send_all(conn, "q", ["A", "B", "C", "D"])
    got = rec.take()
    conn.revoke_credit(1)
    conn.cancel([d.delivery_tag for d in got])
    conn.grant_credit(1, 10)
    again = rec.take()
    assert [d.message.body for d in again] == ["A", "B", "C", "D"]
    assert [d.delivery_count for d in again] == [2, 2, 2, 1]


def test_cancel_not_redelivered_keeps_count(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=1)
    conn.send(msg("q", "A"))
    first = rec.take()[0]
    conn.cancel([first.delivery_tag], redelivered=False)
    conn.grant_credit(1, 1)
    assert rec.take()[0].delivery_count == 1


def test_max_delivery_attempts_dead_letters(clock: FakeClock) -> None:
    b = Broker(clock=clock, default_settings=AddressSettings(max_delivery_attempts=2))
    rec = Recorder()
    c = b.connect(rec)
    c.create_consumer(1, Q, "q", credit=10)
    c.send(msg("q", "poison", properties={"k": 1}))
    for _ in range(2):
        c.cancel([rec.take()[0].delivery_tag])
    assert rec.take() == []
    s = b.stats("q")
    assert (s.message_count, s.dead_lettered) == (0, 1)
    dlq = c.browse("DLQ")
    assert [m.body for m in dlq] == ["poison"]
    props = dlq[0].properties
    assert props[DEAD_LETTER_REASON] == "max delivery attempts (2) exceeded"
    assert props[ORIGINAL_DESTINATION] == "q"
    assert props["k"] == 1


def test_dead_letter_disabled_drops_and_counts(clock: FakeClock) -> None:
    b = Broker(
        clock=clock,
        default_settings=AddressSettings(max_delivery_attempts=1, dead_letter_address=None),
    )
    rec = Recorder()
    c = b.connect(rec)
    c.create_consumer(1, Q, "q", credit=10)
    c.send(msg("q", "x"))
    c.cancel([rec.take()[0].delivery_tag])
    assert b.stats("q").dead_lettered == 1
    assert b.queue_names() == ["q"]


def test_close_consumer_cancels_unacked_as_redelivered(
    conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=2)
    send_all(conn, "q", ["A", "B", "C"])
    rec.take()
    conn.close_consumer(1)
    conn.create_consumer(2, Q, "q", credit=10)
    got = rec.take()
    assert [(d.message.body, d.delivery_count) for d in got] == [("A", 2), ("B", 2), ("C", 1)]
    with pytest.raises(IllegalBrokerState):
        conn.grant_credit(1, 1)


def test_close_consumer_hands_messages_to_other_consumer(broker: Broker, rec: Recorder) -> None:
    c1 = broker.connect(rec)
    other = Recorder()
    c2 = broker.connect(other)
    c1.create_consumer(1, Q, "q", credit=1)
    c2.create_consumer(1, Q, "q", credit=0)
    c1.send(msg("q", "A"))
    c2.grant_credit(1, 5)
    c1.close_consumer(1)
    assert [d.message.body for d in other.take()] == ["A"]


def test_connection_close_cleans_up(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec, client_id="x")
    c.create_consumer(1, Q, "q", credit=5)
    c.send(msg("q", "A"))
    c.begin("t1")
    c.send(msg("q", "staged"), tx="t1")
    tmp = c.create_temporary_queue()
    c.close()
    s = broker.stats("q")
    assert (s.message_count, s.delivering_count, s.consumer_count) == (1, 0, 0)
    assert tmp not in broker.queue_names()
    with pytest.raises(IllegalBrokerState, match="closed"):
        c.send(msg("q", "late"))
    broker.connect(Recorder(), client_id="x")


def test_auto_ack_consumer(broker: Broker, conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", auto_ack=True, credit=2)
    send_all(conn, "q", ["a", "b", "c"])
    got = rec.take()
    assert [d.message.body for d in got] == ["a", "b"]
    s = broker.stats("q")
    assert (s.message_count, s.delivering_count, s.dequeued) == (1, 0, 2)
    with pytest.raises(IllegalBrokerState):
        conn.ack([got[0].delivery_tag])


def test_stats_counts_and_all_stats(broker: Broker, conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=1)
    send_all(conn, "q", ["a", "b"])
    s = broker.stats("q")
    assert (s.message_count, s.delivering_count, s.consumer_count, s.enqueued) == (2, 1, 1, 2)
    assert s.as_dict()["messageCount"] == 2
    assert [x.name for x in broker.all_stats()] == ["q"]
    with pytest.raises(DestinationNotFound):
        broker.stats("nope")


def test_set_settings_runtime_change(broker: Broker, conn: ServerConnection, rec: Recorder) -> None:
    broker.set_settings("q", AddressSettings(consumer_flow_limit=1))
    conn.create_consumer(1, Q, "q", credit=10)
    send_all(conn, "q", ["a", "b", "c"])
    assert rec.bodies() == ["a"]
    broker.set_settings("q", AddressSettings(consumer_flow_limit=3))
    assert rec.bodies() == ["b", "c"]
    assert broker.settings_for("q").consumer_flow_limit == 3


def test_callback_that_only_records_is_enough(broker: Broker) -> None:
    """Hosts' callbacks never call back; the broker must need nothing from them."""
    rec = Recorder()
    c = broker.connect(rec)
    c.create_consumer(1, Q, "q", credit=1000)
    send_all(c, "q", list(range(100)))
    assert len(rec.deliveries) == 100
    c.ack([d.delivery_tag for d in rec.take()])
    assert broker.stats("q").message_count == 0


def test_broker_close_tells_hosts_and_refuses_more(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(7, Q, "q")
    broker.close()
    assert rec.closed and rec.closed[0][0] == 7
    with pytest.raises(IllegalBrokerState, match="closed"):
        broker.connect(Recorder())


def _traced_bytes(make: Callable[[int], None], n: int) -> int:
    """Bytes still allocated after ``make(i)`` for i in range(n) (tracemalloc)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            make(i)
        return int(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()


def test_a_queue_whose_last_consumer_left_is_as_small_as_one_never_consumed(
    broker: Broker, conn: ServerConnection
) -> None:
    """Issue 52: 100,000 idle queues must cost at most 1.5 KB each. The consumers' ring
    (an empty deque is ~760 bytes) was kept after the last consumer left, half of that."""
    n = 2_000

    def never_consumed(i: int) -> None:
        broker.create_queue(f"plain.{i}")

    def consumed_once(i: int) -> None:
        conn.create_consumer(i + 1, Q, f"left.{i}", credit=10)
        conn.close_consumer(i + 1)

    plain = _traced_bytes(never_consumed, n)
    left = _traced_bytes(consumed_once, n)
    assert (left - plain) / n < 200, f"{(left - plain) / n:.0f} bytes a queue more"


def test_a_queue_deals_round_robin_again_after_its_last_consumer_left(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    conn.close_consumer(1)
    conn.create_consumer(2, Q, "q", credit=10)
    conn.create_consumer(3, Q, "q", credit=10)
    send_all(conn, "q", ["A", "B", "C", "D"])
    got = [(d.consumer_id, d.message.body) for d in rec.take()]
    assert got == [(2, "A"), (3, "B"), (2, "C"), (3, "D")]
