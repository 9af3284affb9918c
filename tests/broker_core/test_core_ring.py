"""Ring queues exactly as seed 000 (Artemis ``ring-size``): eviction on add-to-tail,
in-delivery and scheduled messages not evictable, cancel/rollback to the head with the
ring dropping the head-most, runtime resize, interleaved producers, the store."""

from __future__ import annotations

import random

import pytest
from core_support import FakeClock, Recorder, msg

from jmspy.broker_ref.core import (
    AddressSettings,
    Broker,
    DestinationKind,
    MemoryStore,
    ServerConnection,
)

Q = DestinationKind.QUEUE


def bodies(broker: Broker, conn: ServerConnection, name: str) -> list[object]:
    return [m.body for m in conn.browse(name)]


def send_all(conn: ServerConnection, dest: str, items: str) -> None:
    for b in items:
        conn.send(msg(dest, b))


def test_ring_basic_abcd_keeps_bcd(broker: Broker, conn: ServerConnection) -> None:
    broker.create_queue("myRing", ring_size=3)
    send_all(conn, "myRing", "ABC")
    assert bodies(broker, conn, "myRing") == ["A", "B", "C"]
    conn.send(msg("myRing", "D"))
    assert bodies(broker, conn, "myRing") == ["B", "C", "D"]
    st = broker.stats("myRing")
    assert (st.message_count, st.messages_replaced, st.dead_lettered) == (3, 1, 0)
    assert st.as_dict()["messagesReplaced"] == 1


def test_ring_default_ring_size_by_match_and_explicit_override(clock: FakeClock) -> None:
    b = Broker(clock=clock, settings={"ring.#": AddressSettings(default_ring_size=3)})
    c = b.connect(Recorder())
    send_all(c, "ring.auto", "ABCDE")  # auto-created: gets default-ring-size
    assert bodies(b, c, "ring.auto") == ["C", "D", "E"]
    b.create_queue("ring.own", ring_size=2)  # explicit ring-size beats the default
    send_all(c, "ring.own", "ABCDE")
    assert bodies(b, c, "ring.own") == ["D", "E"]
    send_all(c, "plain", "ABCDE")  # default -1: no ring
    assert len(bodies(b, c, "plain")) == 5
    # ring_size in an exact-name setting is explicit too
    b2 = Broker(clock=clock, settings={"r": AddressSettings(ring_size=1, default_ring_size=4)})
    c2 = b2.connect(Recorder())
    send_all(c2, "r", "ABC")
    assert bodies(b2, c2, "r") == ["C"]


def test_ring_in_delivery_scenario_consumer_close_keeps_bcd(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    broker.create_queue("foo", ring_size=3)
    conn.create_consumer(1, Q, "foo", credit=100)
    for i, b in enumerate("ABCD", start=1):
        conn.send(msg("foo", b))
        st = broker.stats("foo")
        assert (st.message_count, st.delivering_count) == (i, i)  # in delivery: not evictable
    assert broker.stats("foo").messages_replaced == 0
    assert rec.bodies() == ["A", "B", "C", "D"]
    conn.close_consumer(1)  # cancelled to the head in reverse order; A is dropped
    assert bodies(broker, conn, "foo") == ["B", "C", "D"]
    st = broker.stats("foo")
    assert (st.message_count, st.delivering_count, st.messages_replaced) == (3, 0, 1)
    conn.create_consumer(2, Q, "foo", credit=10)
    got = rec.take()
    assert [d.message.body for d in got] == ["B", "C", "D"]
    assert all(d.delivery_count == 2 for d in got)


def test_ring_rollback_readds_to_head_and_drops_head_most(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    broker.create_queue("foo", ring_size=3)
    conn.create_consumer(1, Q, "foo", credit=4)
    send_all(conn, "foo", "ABCD")
    tags = [d.delivery_tag for d in rec.take()]
    conn.begin("tx")
    conn.ack(tags, tx="tx")
    conn.rollback("tx")  # same as a cancel: reverse order onto the head, ring trims
    conn.revoke_credit(1)
    assert bodies(broker, conn, "foo") == ["B", "C", "D"]
    assert broker.stats("foo").messages_replaced == 1


def test_ring_cancel_of_one_delivery_into_full_ring_is_dropped(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    broker.create_queue("foo", ring_size=2)
    conn.create_consumer(1, Q, "foo", credit=1)
    send_all(conn, "foo", "ABC")  # A in delivery; B, C ready: ring full
    (a,) = rec.take()
    conn.cancel([a.delivery_tag])
    assert bodies(broker, conn, "foo") == ["B", "C"]
    assert broker.stats("foo").messages_replaced == 1


def test_ring_scheduled_scenario_from_seed(
    broker: Broker, clock: FakeClock, conn: ServerConnection
) -> None:
    minute = 60_000
    broker.create_queue("foo", ring_size=3)
    t1200 = clock.now
    conn.send(msg("foo", "A", deliver_at=t1200 + 5 * minute))
    st = broker.stats("foo")
    assert (st.message_count, st.scheduled_count) == (1, 1)
    for i, b in enumerate("BCD", start=1):
        clock.now = t1200 + i * minute
        conn.send(msg("foo", b))
        st = broker.stats("foo")
        assert (st.message_count, st.scheduled_count) == (i + 1, 1)
    assert broker.stats("foo").message_count == 4  # one over the ring: A is not on it yet
    clock.now = t1200 + 5 * minute
    broker.process_timers()  # A is put on the head of a full ring: A is removed
    assert bodies(broker, conn, "foo") == ["B", "C", "D"]
    st = broker.stats("foo")
    assert (st.message_count, st.scheduled_count, st.messages_replaced) == (3, 0, 1)


def test_ring_lowered_at_runtime_deletes_nothing_then_one_for_one(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    broker.create_queue("foo", ring_size=5)
    send_all(conn, "foo", "ABCDE")
    broker.set_ring_size("foo", 3)
    assert broker.stats("foo").message_count == 5  # nothing deleted at once
    conn.send(msg("foo", "F"))  # one in, one out: never grows
    assert bodies(broker, conn, "foo") == ["B", "C", "D", "E", "F"]
    conn.create_consumer(1, Q, "foo", auto_ack=True, credit=2)  # consumption shrinks it
    assert rec.bodies() == ["B", "C"]
    assert broker.stats("foo").message_count == 3
    conn.send(msg("foo", "G"))
    assert bodies(broker, conn, "foo") == ["E", "F", "G"]
    assert broker.stats("foo").messages_replaced == 2
    broker.set_ring_size("foo", -1)  # no ring any more
    send_all(conn, "foo", "HI")
    assert broker.stats("foo").message_count == 5


def test_ring_interleaved_producers_never_exceed_ring_size(broker: Broker) -> None:
    broker.create_queue("foo", ring_size=3)
    producers = [broker.connect(Recorder()) for _ in range(5)]
    rnd = random.Random(7)
    sent = 0
    for _ in range(300):
        p = rnd.choice(producers)
        p.send(msg("foo", sent))
        sent += 1
        assert broker.stats("foo").message_count <= 3
    st = broker.stats("foo")
    assert (st.message_count, st.messages_replaced) == (3, sent - 3)
    assert [m.body for m in producers[0].browse("foo")] == [sent - 3, sent - 2, sent - 1]


def test_ring_evicted_messages_removed_from_store(clock: FakeClock) -> None:
    store = MemoryStore()
    b = Broker(clock=clock, store=store)
    b.create_queue("foo", ring_size=2)
    c = b.connect(Recorder())
    sent = [msg("foo", x) for x in "ABCD"]
    for m in sent:
        c.send(m)
    assert store.message_ids("foo") == [sent[2].message_id, sent[3].message_id]
    b.close()
    b2 = Broker(clock=clock, store=store)
    c2 = b2.connect(Recorder())
    assert [m.body for m in c2.browse("foo")] == ["C", "D"]


def test_ring_priority_higher_first_fifo_among_equals(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    broker.create_queue("foo", ring_size=4)
    for body, prio in [("l1", 1), ("h1", 9), ("m1", 4), ("h2", 9)]:
        conn.send(msg("foo", body, priority=prio))
    # the head-most message is the next one to deliver: the oldest of the highest priority
    conn.send(msg("foo", "l2", priority=1))
    conn.create_consumer(1, Q, "foo", credit=10)
    assert rec.bodies() == ["h2", "m1", "l1", "l2"]


def test_ring_skips_expired_tombstones_when_evicting(
    broker: Broker, clock: FakeClock, conn: ServerConnection
) -> None:
    broker.create_queue("foo", ring_size=2)
    conn.send(msg("foo", "A", expiration=clock.now + 10))
    conn.send(msg("foo", "B"))
    clock.advance(20)
    broker.process_timers()  # A expires: a tombstone at the head of its deque
    send_all(conn, "foo", "CD")
    assert bodies(broker, conn, "foo") == ["C", "D"]
    st = broker.stats("foo")
    assert (st.expired, st.messages_replaced) == (1, 1)


def test_ring_size_validation(broker: Broker) -> None:
    with pytest.raises(ValueError, match="ring"):
        AddressSettings(ring_size=0)
    broker.create_queue("foo")
    with pytest.raises(ValueError, match="ring"):
        broker.set_ring_size("foo", -5)
