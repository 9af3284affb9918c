"""Persistence through the Store interface, on each store: MemoryStore (the "disk" of
embedded brokers and tests) and SqliteStore (the crash-safe one). A restart is a new
Broker on the store reopened from the same file, the old one never closed (a crash)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from core_support import Disk, FakeClock, Recorder, msg, tmsg

from jmspy.broker_ref.core import Broker, DestinationKind

Q = DestinationKind.QUEUE
T = DestinationKind.TOPIC


@pytest.fixture(params=["memory", "sqlite"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Disk:
    return Disk(request.param, tmp_path / "messages.sqlite")


def consuming(clock: FakeClock, disk: Disk, queue: str = "q", **broker_kw: Any
              ) -> tuple[Broker, Recorder, Any]:
    """A broker on ``disk``'s store (``broker_kw`` passed on) and a recorded connection to
    it whose consumer 1 has credit 10 on ``queue``."""
    b = Broker(store=disk.store, clock=clock, **broker_kw)
    rec = Recorder()
    c = b.connect(rec)
    c.create_consumer(1, Q, queue, credit=10)
    return b, rec, c


def test_persistent_messages_recovered_by_new_broker(clock: FakeClock, disk: Disk) -> None:
    store = disk.store
    b1 = Broker(store=store, clock=clock)
    c1 = b1.connect(Recorder())
    c1.send(msg("q", "p1", priority=2))
    c1.send(msg("q", "np", persistent=False))
    c1.send(msg("q", "p2", priority=7))
    # b1 "crashes": never closed
    rec = Recorder()
    b2 = Broker(store=disk.reopen(), clock=clock)
    assert b2.queue_names() == ["q"]
    c2 = b2.connect(rec)
    c2.create_consumer(1, Q, "q", credit=10)
    got = rec.take()
    assert [d.message.body for d in got] == ["p2", "p1"]
    assert all(d.delivery_count == 2 for d in got)  # recovered: marked redelivered


def test_non_persistent_not_stored(disk: Disk) -> None:
    store = disk.store
    b = Broker(store=store)
    b.connect(Recorder()).send(msg("q", "np", persistent=False))
    if disk.kind == "memory":
        assert store.writes == 0
    assert store.message_ids("q") == []


def test_ack_removes_from_store(clock: FakeClock, disk: Disk) -> None:
    store = disk.store
    _, rec, c = consuming(clock, disk)
    m1, m2 = msg("q", "a"), msg("q", "b")
    c.send(m1)
    c.send(m2)
    assert store.message_ids("q") == [m1.message_id, m2.message_id]
    c.ack([rec.take()[0].delivery_tag])
    assert store.message_ids("q") == [m2.message_id]


def test_cancel_updates_delivery_count_in_store(clock: FakeClock, disk: Disk) -> None:
    store = disk.store
    _, rec, c = consuming(clock, disk)
    m = msg("q", "a")
    c.send(m)
    for _ in range(3):
        c.cancel([rec.take()[0].delivery_tag])
    assert store.delivery_count("q", m.message_id) == 3
    rec.take()
    b2 = Broker(store=disk.reopen(), clock=clock)
    rec2 = Recorder()
    b2.connect(rec2).create_consumer(1, Q, "q", credit=10)
    assert rec2.take()[0].delivery_count == 4


def test_dead_lettered_message_moves_in_store(clock: FakeClock, disk: Disk) -> None:
    from jmspy.broker_ref.core import AddressSettings

    store = disk.store
    _, rec, c = consuming(clock, disk, default_settings=AddressSettings(max_delivery_attempts=1))
    m = msg("q", "a")
    c.send(m)
    c.cancel([rec.take()[0].delivery_tag])
    assert store.message_ids("q") == []
    assert store.message_ids("DLQ") == [m.message_id]


def test_durable_subscription_recovered_with_messages(clock: FakeClock, disk: Disk) -> None:
    store = disk.store
    b1 = Broker(store=store, clock=clock)
    c1 = b1.connect(Recorder(), client_id="app")
    c1.create_consumer(1, T, "news", subscription_name="s", durable=True)
    c1.create_consumer(2, T, "news")  # non-durable: not recovered
    c1.close_consumer(1)
    c1.send(tmsg("news", "p"))
    c1.send(tmsg("news", "np", persistent=False))
    b1.close()
    if disk.kind == "memory":
        assert store.closed
    b2 = Broker(store=disk.reopen(), clock=clock)
    assert b2.stats("news", T).subscription_count == 1
    rec = Recorder()
    c2 = b2.connect(rec, client_id="app")
    c2.create_consumer(1, T, "news", subscription_name="s", durable=True, credit=10)
    assert rec.bodies() == ["p"]


def test_unsubscribe_forgets_stored_subscription(clock: FakeClock, disk: Disk) -> None:
    store = disk.store
    b1 = Broker(store=store, clock=clock)
    c1 = b1.connect(Recorder(), client_id="app")
    c1.create_consumer(1, T, "news", subscription_name="s", durable=True)
    c1.close_consumer(1)
    c1.send(tmsg("news", "p"))
    c1.unsubscribe("s")
    b2 = Broker(store=disk.reopen(), clock=clock)
    assert b2.topic_names() == []  # topics are not persisted; only subscriptions are
    assert store.load().runs == {}


def test_transaction_commit_persists_and_removes(clock: FakeClock, disk: Disk) -> None:
    store = disk.store
    _, rec, c = consuming(clock, disk, "in")
    m_in = msg("in", "req")
    c.send(m_in)
    c.begin("t")
    c.ack([rec.take()[0].delivery_tag], tx="t")
    m_out = msg("out", "resp")
    c.send(m_out, tx="t")
    assert store.message_ids("out") == []
    c.commit("t")
    assert store.message_ids("in") == []
    assert store.message_ids("out") == [m_out.message_id]


def test_scheduled_persistent_message_recovered_as_scheduled(clock: FakeClock, disk: Disk) -> None:
    store = disk.store
    b1 = Broker(store=store, clock=clock)
    b1.connect(Recorder()).send(msg("q", "later", deliver_at=clock.now + 1000))
    b2 = Broker(store=disk.reopen(), clock=clock)
    assert b2.stats("q").scheduled_count == 1
    clock.advance(1000)
    b2.process_timers()
    assert b2.stats("q").scheduled_count == 0


def test_stats_count_what_the_store_holds_per_queue_and_topic(clock: FakeClock,
                                                               disk: Disk) -> None:
    b = Broker(store=disk.store, clock=clock)
    c = b.connect(Recorder(), client_id="app")
    c.create_consumer(1, T, "news", subscription_name="s", durable=True)
    c.send(msg("q", "p"))
    c.send(msg("q", "np", persistent=False))
    c.send(tmsg("news", "p"))
    stats = {s.name: s.stored_count for s in b.all_stats()}
    assert (stats["q"], stats["news"]) == (1, 1)
    assert b.stats("q").stored_count == 1 and b.stats("q").message_count == 2
