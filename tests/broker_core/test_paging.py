"""Massive queues in bounded RAM (seed 002): past the broker's RAM budget a queue's backlog
is paged out (persistent messages stay in the store, the rest go to the spool file) and
paged back in ahead of dispatch, in order, priorities first; one budget for all queues;
selector consumers find matches in the paged part; a restart reads the store lazily.

Run on each store (MemoryStore, SqliteStore) and, with the suite, on both twins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from core_support import FakeClock, Recorder, msg, tmsg

from jmspy.broker_ref.core import Broker, DestinationKind, MemoryStore
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.core.consumer import PAGE_OVERHEAD
from jmspy.broker_ref.core.paging import PAGE_BATCH
from jmspy.broker_ref.store.sqlite_store import SqliteStore

Q = DestinationKind.QUEUE
T = DestinationKind.TOPIC
BODY = "x" * 100
#: what one test message costs in the budget (its size is set below)
COST = 164 + PAGE_OVERHEAD
#: a budget of 50 messages (70 % of the memory limit is the paging high water)
LIMIT = 50 * COST * 100 // 70 + 1


def m(dest: str, i: int, **kw: Any) -> Any:
    return msg(dest, f"{i}", size=164, **kw)


class Disk:
    def __init__(self, kind: str, path: Path) -> None:
        self.kind, self.path = kind, path
        self.store: Any = MemoryStore() if kind == "memory" else SqliteStore(path)

    def reopen(self) -> Any:
        return self.store if self.kind == "memory" else SqliteStore(self.path)


@pytest.fixture(params=["memory", "sqlite"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Disk:
    return Disk(request.param, tmp_path / "messages.sqlite")


#: paging of what the store does not keep (non-persistent messages, non-durable
#: subscriptions) is what a destination without producer flow control does (seed 003);
#: with it, such a producer waits instead (tests/broker_core/test_producer_flow.py)
SPOOLING = AddressSettings(producer_flow_control=False)


def broker(store: Any, clock: FakeClock, tmp_path: Path, limit: int = LIMIT) -> Broker:
    # These tests are about the one budget every queue shares, so one queue may take all
    # of it (destination-memory-percent = 100: what every queue could before destinations
    # had a default share of their own). Per-destination paging is tested in
    # test_memory_isolation.py.
    return Broker(store=store, clock=clock, memory_limit=limit, spool_dir=tmp_path / "temp",
                  default_settings=SPOOLING, destination_memory_percent=100)


def drain(conn: Any, rec: Recorder, dest: str, *, credit: int = 7,
          selector: str | None = None, cid: int = 1, kind: DestinationKind = Q,
          **kw: Any) -> list[Any]:
    """Consume everything with a small window, acking each run; returns the deliveries."""
    conn.create_consumer(cid, kind, dest, credit=credit, selector=selector, **kw)
    got: list[Any] = []
    while True:
        batch = rec.take()
        if not batch:
            return got
        got.extend(batch)
        conn.ack([d.delivery_tag for d in batch])
        conn.grant_credit(cid, len(batch))


def subscribed_backlog(b: Broker, n: int, *, persistent: bool) -> Any:
    """A durable subscription "s" of client "app" on topic "news", its consumer gone, and
    ``n`` messages sent to the topic since; returns the subscriber's connection."""
    sub = b.connect(Recorder(), client_id="app")
    sub.create_consumer(1, T, "news", subscription_name="s", durable=True)
    sub.close_consumer(1)
    prod = b.connect(Recorder())
    for i in range(n):
        prod.send(tmsg("news", f"{i}", size=164, persistent=persistent))
    return sub


@pytest.mark.parametrize("persistent", [True, False], ids=["store", "spool"])
def test_a_backlog_past_the_budget_is_paged_out_and_comes_back_in_order(
        disk: Disk, clock: FakeClock, tmp_path: Path, persistent: bool) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(3000):
        c.send(m("q", i, persistent=persistent))
    stats = b.stats("q")
    assert stats.message_count == 3000
    assert stats.paged_count == 3000 - 50  # RAM keeps what the budget holds
    assert stats.in_memory_count == 50
    assert b.budget.used == 50 * COST <= b.budget.limit
    assert (b.spool.written > 0) is not persistent  # persistent: the store row is the page
    rec = Recorder()
    got = drain(b.connect(rec), rec, "q")
    assert [d.message.body for d in got] == [str(i) for i in range(3000)]
    assert all(d.delivery_count == 1 for d in got)
    assert b.stats("q").message_count == 0 and b.stats("q").paged_count == 0
    assert b.budget.used == 0  # every ready message RAM held was given back
    if persistent:
        assert disk.store.stored_counts() == {}


def test_ram_holds_a_bounded_window_while_a_consumer_drains(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(10 * PAGE_BATCH):
        c.send(m("q", i))
    rec = Recorder()
    c2 = b.connect(rec)
    c2.create_consumer(1, Q, "q", credit=100)
    peak = 0
    while batch := rec.take():
        peak = max(peak, b.stats("q").in_memory_count)
        c2.ack([d.delivery_tag for d in batch])
        c2.grant_credit(1, len(batch))
    # paged in one batch at a time ahead of dispatch, never the whole queue
    assert 0 < peak <= 2 * PAGE_BATCH + 100
    assert b.stats("q").message_count == 0


def test_priorities_keep_their_order_across_pages(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    sent = [(i, (i * 7) % 10) for i in range(2500)]
    for i, p in sent:
        c.send(m("q", i, priority=p))
    assert b.stats("q").paged_count > 2000
    rec = Recorder()
    got = [int(d.message.body) for d in drain(b.connect(rec), rec, "q", credit=300)]
    assert got == [i for i, _ in sorted(sent, key=lambda s: (-s[1], s[0]))]


def test_each_delivery_mode_keeps_its_own_order(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(4000):
        c.send(m("q", i, persistent=i % 3 != 0))
    rec = Recorder()
    got = [int(d.message.body) for d in drain(b.connect(rec), rec, "q", credit=50)]
    assert sorted(got) == list(range(4000))  # none lost, none twice
    # JMS 2.0 6.2.9.2: order holds within a delivery mode
    assert [i for i in got if i % 3 == 0] == [i for i in range(4000) if i % 3 == 0]
    assert [i for i in got if i % 3] == [i for i in range(4000) if i % 3]


def test_one_budget_is_shared_by_every_queue(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(50):
        c.send(m("big", i))
    assert b.stats("big").paged_count == 0
    for i in range(10):
        c.send(m("small", i))  # the budget is spent by another queue: these page out
    assert b.stats("small").paged_count == 10
    rec = Recorder()
    got = drain(b.connect(rec), rec, "small")
    assert [d.message.body for d in got] == [str(i) for i in range(10)]


def test_a_message_a_consumer_waits_for_is_not_paged(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path, limit=0)  # no RAM budget at all
    rec = Recorder()
    cons = b.connect(rec)
    cons.create_consumer(1, Q, "q", credit=5)
    prod = b.connect(Recorder())
    prod.send(m("q", 1))
    assert [d.message.body for d in rec.take()] == ["1"]
    assert b.stats("q").paged_count == 0


def test_a_selector_consumer_finds_matches_deep_in_the_paged_part(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    n = 20_000
    for i in range(n):
        c.send(msg("q", f"{i}", size=164, properties={"n": i}))
    rec = Recorder()
    wanted = f"n >= {n - n // 100}"  # the last 1 %
    got = drain(b.connect(rec), rec, "q", selector=wanted, credit=30)
    assert [d.message.body for d in got] == [str(i) for i in range(n - n // 100, n)]
    left = b.stats("q")
    assert left.message_count == n - n // 100  # the rest stays, still paged out mostly
    assert left.paged_count > n - n // 100 - 2 * PAGE_BATCH
    rec2 = Recorder()
    rest = drain(b.connect(rec2), rec2, "q", cid=2, credit=500)
    assert [d.message.body for d in rest] == [str(i) for i in range(n - n // 100)]


def test_a_selector_consumer_finds_matches_in_the_spool_too(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(6000):  # non-persistent: paged out to the spool file
        c.send(msg("q", f"{i}", size=164, persistent=False, properties={"n": i}))
    assert b.stats("q").paged_count == 6000 - 50 and b.spool.written == 5950
    rec = Recorder()
    got = drain(b.connect(rec), rec, "q", selector="n >= 5990 OR n = 3000", credit=4)
    assert [d.message.body for d in got] == ["3000", *(str(i) for i in range(5990, 6000))]
    rec2 = Recorder()
    rest = drain(b.connect(rec2), rec2, "q", cid=2, credit=700)
    assert [int(d.message.body) for d in rest] == [i for i in range(5990) if i != 3000]
    assert b.budget.used == 0


def test_a_restart_leaves_the_store_on_disk_and_reads_it_as_consumers_need_it(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b1 = broker(disk.store, clock, tmp_path)
    c = b1.connect(Recorder())
    for i in range(5000):
        c.send(m("q", i, priority=4 + (i % 2)))
    rec = Recorder()
    c1 = b1.connect(rec)
    c1.create_consumer(1, Q, "q", credit=10)
    c1.ack([d.delivery_tag for d in rec.take()])  # the first 10 (priority 5) are consumed
    b2 = broker(disk.reopen(), clock, tmp_path / "2")  # b1 "crashed": never closed
    stats = b2.stats("q")
    assert stats.message_count == 4990
    assert stats.in_memory_count <= PAGE_BATCH  # only the head was read at start
    rec2 = Recorder()
    got = drain(b2.connect(rec2), rec2, "q", credit=100)
    expected = [i for i in range(5000) if i % 2][10:] + [i for i in range(5000) if not i % 2]
    assert [int(d.message.body) for d in got] == expected
    assert all(d.delivery_count == 2 for d in got)  # recovered: marked redelivered


def test_messages_sent_after_a_restart_follow_the_recovered_ones(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b1 = broker(disk.store, clock, tmp_path)
    c = b1.connect(Recorder())
    for i in range(3000):
        c.send(m("q", i))
    b2 = broker(disk.reopen(), clock, tmp_path / "2")
    c2 = b2.connect(Recorder())
    for i in range(3000, 3100):
        c2.send(m("q", i))
    rec = Recorder()
    got = drain(b2.connect(rec), rec, "q", credit=64)
    assert [int(d.message.body) for d in got] == list(range(3100))
    assert [d.delivery_count for d in got[-100:]] == [1] * 100  # new: not redelivered


def test_browse_sees_the_paged_part_in_order_and_leaves_it(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(600):
        c.send(m("q", i, persistent=i % 2 == 0))
    seen = [int(x.body) for x in c.browse("q")]
    assert sorted(seen) == list(range(600))
    assert [i for i in seen if i % 2 == 0] == list(range(0, 600, 2))
    assert b.stats("q").message_count == 600


def test_paged_messages_that_expired_are_expired_when_paged_in(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(200):
        c.send(m("q", i, expiration=clock.now + 1000 if i % 2 else 0))
    clock.advance(5000)
    rec = Recorder()
    got = drain(b.connect(rec), rec, "q", credit=40)
    assert [int(d.message.body) for d in got] == list(range(0, 200, 2))
    assert b.stats("q").expired == 100
    assert b.budget.used == 0


def test_a_deleted_subscription_takes_its_spooled_pages_along(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    sub = subscribed_backlog(b, 300, persistent=False)
    assert b.stats("news", T).paged_count == 250
    sub.unsubscribe("s")
    assert b.budget.used == 0
    assert b.spool.size_bytes() >= 0
    assert disk.store.stored_counts() == {}



def test_a_queue_that_becomes_a_ring_takes_its_paged_messages_back(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(300):
        c.send(m("q", i))
    assert b.stats("q").paged_count == 250
    b.set_ring_size("q", 100)  # ring queues keep their own bound: they never page
    stats = b.stats("q")
    assert stats.paged_count == 0 and stats.message_count == 300
    c.send(m("q", 300))  # a ring past its size evicts one for one (seed 000)
    rec = Recorder()
    got = drain(b.connect(rec), rec, "q", credit=50)
    assert [int(d.message.body) for d in got] == list(range(1, 301))


def test_a_queue_that_becomes_an_amps_queue_takes_its_paged_messages_back(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:

    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(300):
        c.send(m("q", i))
    assert b.stats("q").paged_count == 250
    # AMPS: its policy needs them all
    b.set_settings("q", AddressSettings(max_cancels=3, producer_flow_control=False))
    assert b.stats("q").paged_count == 0 and b.stats("q").message_count == 300
    rec = Recorder()
    got = drain(b.connect(rec), rec, "q", credit=50)
    assert [int(d.message.body) for d in got] == list(range(300))


def test_a_rolled_back_delivery_goes_back_ahead_of_the_paged_part(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(2000):
        c.send(m("q", i))
    rec = Recorder()
    conn = b.connect(rec)
    conn.create_consumer(1, Q, "q", credit=5)
    first = rec.take()
    conn.cancel([d.delivery_tag for d in reversed(first)])  # back to the head, in order
    conn.close_consumer(1)
    rec2 = Recorder()
    got = drain(b.connect(rec2), rec2, "q", cid=2, credit=300)
    assert [int(d.message.body) for d in got] == list(range(2000))
    assert [d.delivery_count for d in got[:5]] == [2] * 5 and got[5].delivery_count == 1


def test_a_transaction_committed_past_the_budget_pages_out_in_order(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    c.begin("tx")
    for i in range(500):
        c.send(m("q", i, persistent=i % 2 == 0), tx="tx")
    assert b.queue_names() == []  # nothing before the commit
    c.commit("tx")
    assert b.stats("q").paged_count == 450
    rec = Recorder()
    got = [int(d.message.body) for d in drain(b.connect(rec), rec, "q", credit=60)]
    assert sorted(got) == list(range(500))
    assert [i for i in got if i % 2 == 0] == list(range(0, 500, 2))
    assert [i for i in got if i % 2] == list(range(1, 500, 2))


def test_scheduled_messages_among_paged_ones_are_released_in_their_time(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b = broker(disk.store, clock, tmp_path)
    c = b.connect(Recorder())
    for i in range(300):
        c.send(m("q", i))
        if i == 150:
            c.send(m("q", 9999, deliver_at=clock.now + 1000))  # held in RAM, scheduled
    rec = Recorder()
    got = drain(b.connect(rec), rec, "q", credit=40)
    assert [int(d.message.body) for d in got] == list(range(300))
    assert b.stats("q").scheduled_count == 1
    clock.advance(1000)
    b.process_timers()  # released to the consumer still waiting
    assert [d.message.body for d in rec.take()] == ["9999"]


def test_a_durable_subscription_pages_and_survives_a_restart(
        disk: Disk, clock: FakeClock, tmp_path: Path) -> None:
    b1 = broker(disk.store, clock, tmp_path)
    subscribed_backlog(b1, 800, persistent=True)
    assert b1.stats("news", T).paged_count == 750
    b2 = broker(disk.reopen(), clock, tmp_path / "2")
    rec = Recorder()
    conn = b2.connect(rec, client_id="app")
    got = drain(conn, rec, "news", kind=T, subscription_name="s", durable=True, credit=90)
    assert [int(d.message.body) for d in got] == list(range(800))
