"""Producer flow control in the broker core (seed 003): a send that would pass the
broker's or its destination's memory limit, the store limit or the temp limit is parked,
not stored; its host hears the outcome through ``send_done``; the connection's acks,
credit and consumers never wait; ``send-fail-if-no-space`` refuses at once and
``...-after-timeout`` after that long on the broker's clock; with flow control off a slow
subscriber's backlog spools (or keeps its newest N), and the other subscribers go on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from core_support import FakeClock, Recorder, drain_acking, msg, tmsg

from jmspy.broker_ref.core import Broker, DestinationKind, ResourceLimitExceeded
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.broker_ref.core.consumer import PAGE_OVERHEAD
from jmspy.broker_ref.store.sqlite_store import SqliteStore

Q = DestinationKind.QUEUE
T = DestinationKind.TOPIC
#: each test message costs exactly 1000 bytes of RAM while pending
SIZE = 1000 - PAGE_OVERHEAD
#: the broker's memory-limit: ten pending messages
LIMIT = 10_000


def m(dest: str, i: int, **kw: Any) -> Any:
    return msg(dest, f"{i}", size=SIZE, persistent=False, **kw)


def make(tmp_path: Path, clock: FakeClock, **kw: Any) -> Broker:
    kw.setdefault("memory_limit", LIMIT)
    # These tests are about the broker-wide limits, so one destination may take all of
    # the memory-limit (100 %: what every destination could before destinations had a
    # default share). The default share of 10 % is tested in test_memory_isolation.py.
    kw.setdefault("destination_memory_percent", 100)
    return Broker(clock=clock, spool_dir=tmp_path / "temp", **kw)


def flood(conn: Any, dest: str, n: int, first: int = 0, **kw: Any) -> list[bool]:
    """Send ``n`` messages, each with its own ticket (its index); True = went through."""
    return [conn.send(m(dest, i, **kw), ticket=i) for i in range(first, first + n)]


def filled(tmp_path: Path, clock: FakeClock) -> tuple[Broker, Recorder, Any]:
    """A broker whose memory the producer connection (recorded by the Recorder) has just
    filled: ten messages, tickets 0..9, all through, on ``q``."""
    b = make(tmp_path, clock)
    rec = Recorder()
    prod = b.connect(rec)
    flood(prod, "q", 10)
    return b, rec, prod


def test_a_producer_past_the_memory_limit_is_parked_then_resumes_in_order_and_none_is_lost(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock)
    rec = Recorder()
    prod = b.connect(rec)
    went = flood(prod, "q", 25)
    assert went == [True] * 10 + [False] * 15  # the 11th finds the broker's memory full
    assert b.stats("q").message_count == 10  # parked sends are not stored
    assert b.stats("q").blocked_producers == 1
    assert b.usage()["blockedProducers"] == 1 and b.budget.used == LIMIT
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "q", credit=1000)
    assert drain_acking(cons, cons_rec) == [str(i) for i in range(25)]  # all, in order
    assert [t for t, e in rec.done] == list(range(10, 25))
    assert all(e is None for _, e in rec.done)
    assert b.stats("q").blocked_producers == 0 and b.budget.used == 0


def test_sends_of_a_waiting_connection_wait_behind_its_first_even_to_a_queue_with_room(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, settings={"small": AddressSettings(memory_limit=2000)})
    rec = Recorder()
    prod = b.connect(rec)
    assert flood(prod, "small", 3) == [True, True, False]
    assert prod.send(m("big", 99), ticket="big") is False  # one producer's order is kept
    other = b.connect(Recorder())
    assert other.send(m("big", 100), ticket="o") is True  # other producers are not held
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "small", credit=10)
    assert [t for t, _ in rec.done] == [2, "big"]


def test_a_destination_memory_limit_stops_its_producers_only(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, memory_limit=10**9,
             settings={"orders.#": AddressSettings(memory_limit=3000)})
    rec = Recorder()
    a, z = b.connect(rec), b.connect(Recorder())
    assert flood(a, "orders.eu", 5) == [True] * 3 + [False] * 2
    assert flood(z, "audit", 50) == [True] * 50
    stats = b.stats("orders.eu")
    assert (stats.memory_usage, stats.memory_limit, stats.memory_percent) == (3000, 3000, 100)
    assert stats.as_dict()["memoryPercentUsage"] == 100
    assert stats.blocked_producers == 1 and b.stats("audit").blocked_producers == 0


def test_a_connection_that_consumes_what_it_produces_does_not_deadlock(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock)
    rec = Recorder()
    conn = b.connect(rec)
    conn.create_consumer(1, Q, "q", credit=1000)
    conn.revoke_credit(1)  # the consumer is slow: the queue backs up
    assert flood(conn, "q", 12) == [True] * 10 + [False] * 2
    conn.grant_credit(1, 5)  # credit is never parked: it frees memory
    acked: list[str] = []
    while batch := rec.take():
        acked += [d.message.body for d in batch]
        conn.ack([d.delivery_tag for d in batch])  # acks are never parked
        conn.grant_credit(1, len(batch))
    assert acked == [str(i) for i in range(12)]
    assert [t for t, e in rec.done] == [10, 11]


def test_persistent_messages_for_a_durable_queue_page_to_the_store_and_never_wait_for_memory(
        tmp_path: Path, clock: FakeClock) -> None:
    store = SqliteStore(tmp_path / "m.sqlite")
    b = make(tmp_path, clock, store=store)
    prod = b.connect(Recorder())
    went = [prod.send(msg("q", str(i), size=SIZE), ticket=i) for i in range(200)]
    assert all(went)
    stats = b.stats("q")
    assert stats.message_count == 200 and stats.paged_count > 150
    assert b.budget.used <= LIMIT
    # non-persistent ones for the same queue do wait: they have nowhere but RAM
    b2 = make(tmp_path / "2", clock, store=SqliteStore(tmp_path / "m2.sqlite"))
    p2 = b2.connect(Recorder())
    assert flood(p2, "q", 12).count(False) == 2


def test_persistent_sends_wait_at_store_limit_and_go_on_when_consumers_free_it(
        tmp_path: Path, clock: FakeClock) -> None:
    store = SqliteStore(tmp_path / "m.sqlite")
    b = make(tmp_path, clock, store=store, memory_limit=10**9,
             store_limit=store.size_bytes() + 64 * 1024)
    rec = Recorder()
    prod = b.connect(rec)
    sent = 0
    while prod.send(msg("q", "x" * 2000, size=2000), ticket=sent):
        sent += 1
        assert sent < 10_000
    assert b.stats("q").blocked_producers == 1
    assert b.stats("q").message_count == sent
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "q", credit=sent)
    cons.ack([d.delivery_tag for d in cons_rec.take()])
    for _ in range(300):  # the store's size is sampled every few hundred sends
        if rec.done:
            break
        b.process_timers()
        prod.send(msg("other", "np", persistent=False), ticket="np")
    assert rec.done and rec.done[0] == (sent, None)


def test_send_fail_if_no_space_refuses_the_first_send_past_the_limit_at_once(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, send_fail_if_no_space=True)
    prod = b.connect(Recorder())
    assert flood(prod, "q", 10) == [True] * 10
    with pytest.raises(ResourceLimitExceeded, match=r"memory-limit.*send-fail-if-no-space"):
        prod.send(m("q", 10), ticket=10)
    assert b.stats("q").message_count == 10  # nothing half-stored
    assert b.next_deadline() is None  # nothing waits either
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "q", credit=1)
    assert prod.send(m("q", 11), ticket=11) is True  # usable afterwards


def test_send_fail_after_timeout_fails_only_once_the_timeout_has_passed(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, send_fail_if_no_space_after_timeout=500)
    rec = Recorder()
    prod = b.connect(rec)
    flood(prod, "q", 10)
    assert prod.send(m("q", 10), ticket="late") is False
    assert b.next_deadline() == clock.now + 500
    clock.advance(499)
    b.process_timers()
    assert rec.done == []
    clock.advance(1)
    b.process_timers()
    [(ticket, error)] = rec.done
    assert ticket == "late" and isinstance(error, ResourceLimitExceeded)
    assert "memory-limit" in str(error) and "queue 'q'" in str(error)
    assert "waited 500 ms" in str(error)
    assert b.stats("q").message_count == 10 and b.stats("q").blocked_producers == 0


def test_a_per_send_timeout_fails_that_send_and_a_withdrawn_send_is_not_stored(
        tmp_path: Path, clock: FakeClock) -> None:
    b, rec, prod = filled(tmp_path, clock)
    assert prod.send(m("q", 10), ticket="t", timeout_ms=100) is False
    assert prod.send(m("q", 11), ticket="w") is False
    assert b.flow.withdraw(prod, "w") is not None  # the producer gave up on it
    clock.advance(100)
    b.process_timers()
    assert [t for t, e in rec.done if isinstance(e, ResourceLimitExceeded)] == ["t"]
    assert b.stats("q").blocked_producers == 0 and b.stats("q").message_count == 10


def test_a_commit_whose_sends_need_space_waits_as_one_and_a_rollback_withdraws_it(
        tmp_path: Path, clock: FakeClock) -> None:
    b, rec, prod = filled(tmp_path, clock)
    prod.begin("tx1")
    for i in range(3):
        prod.send(m("q", 100 + i), "tx1")  # staged: no RAM of any queue yet
    assert prod.commit("tx1", ticket="c1") is False
    assert b.stats("q").message_count == 10
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "q", credit=100)
    assert rec.done == [("c1", None)]
    assert b.stats("q").message_count == 13  # all three at once
    cons.ack([d.delivery_tag for d in cons_rec.take()])
    cons.revoke_credit(1)
    flood(prod, "q", 10, first=200)
    prod.begin("tx2")
    prod.send(m("q", 300), "tx2")
    assert prod.commit("tx2", ticket="c2") is False
    prod.rollback("tx2")
    assert isinstance(rec.done[-1][1], ResourceLimitExceeded)
    assert "rolled back" in str(rec.done[-1][1])
    assert b.stats("q").blocked_producers == 0


def test_a_closed_connection_drops_its_parked_sends_unstored(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock)
    prod = b.connect(Recorder())
    flood(prod, "q", 12)
    prod.close()
    assert b.stats("q").message_count == 10 and b.usage()["blockedProducers"] == 0


def test_a_connection_closed_by_its_client_keeps_its_parked_sends_for_when_there_is_room(
        tmp_path: Path, clock: FakeClock) -> None:
    # a STOMP producer that writes its SENDs and leaves without waiting for its
    # DISCONNECT's RECEIPT: every SEND it wrote is delivered, in order, once space frees
    b = make(tmp_path, clock)
    rec = Recorder()
    prod = b.connect(rec)
    flood(prod, "q", 14)
    prod.close(keep_parked_sends=True)
    assert b.stats("q").message_count == 10 and rec.done == []
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "q", credit=1000)
    assert drain_acking(cons, cons_rec) == [str(i) for i in range(14)]
    assert [t for t, e in rec.done] == [10, 11, 12, 13]
    assert all(e is None for _, e in rec.done)
    assert b.usage()["blockedProducers"] == 0 and b.budget.used == 0


def test_a_closed_connections_parked_commit_is_dropped_and_its_sends_kept(
        tmp_path: Path, clock: FakeClock) -> None:
    # the close rolled the transaction back: its parked COMMIT cannot go through
    b = make(tmp_path, clock)
    rec = Recorder()
    prod = b.connect(rec)
    flood(prod, "q", 11)  # ticket 10 parked
    prod.begin("tx")
    prod.send(m("q", 100), "tx")
    assert prod.commit("tx", ticket="c") is False
    prod.close(keep_parked_sends=True)
    assert [t for t, _ in rec.done] == ["c"] and rec.done[0][1] is not None
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "q", credit=1000)
    assert drain_acking(cons, cons_rec) == [str(i) for i in range(11)]


def test_orphaned_sends_past_their_bound_are_dropped_unstored(
        tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    # clients that flood and leave again and again must not park without bound
    from jmspy.broker_ref.core import producer_flow
    monkeypatch.setattr(producer_flow, "ORPHAN_BYTES_LIMIT", 3 * SIZE)
    b = make(tmp_path, clock)
    first, second = Recorder(), Recorder()
    a = b.connect(first)
    flood(a, "q", 12)  # 10 through, 2 parked
    a.close(keep_parked_sends=True)
    c = b.connect(second)
    flood(c, "q", 2, first=100)  # both parked
    c.close(keep_parked_sends=True)  # one fits the bound, one is dropped
    assert [t for t, e in second.done if e is not None] == [101]
    cons_rec = Recorder()
    cons = b.connect(cons_rec)
    cons.create_consumer(1, Q, "q", credit=1000)
    got = drain_acking(cons, cons_rec)  # the waiting connections take turns
    assert sorted(got, key=int) == [str(i) for i in range(12)] + ["100"]
    assert [x for x in got if int(x) < 100] == [str(i) for i in range(12)]
    # the bound is free again once they went through
    d = b.connect(Recorder())
    flood(d, "q", 13, first=200)
    d.close(keep_parked_sends=True)
    assert drain_acking(cons, cons_rec) == [str(i) for i in range(200, 213)]


def test_a_send_that_cannot_be_routed_fails_before_it_waits(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, settings={"fixed.#": AddressSettings(auto_create=False)})
    prod = b.connect(Recorder())
    flood(prod, "q", 10)
    from jmspy.broker_ref.core import DestinationNotFound
    with pytest.raises(DestinationNotFound):
        prod.send(m("fixed.x", 0), ticket="x")


def _subscribers(b: Broker, prefetch: int) -> tuple[list[Recorder], list[Any]]:
    recs = [Recorder() for _ in range(3)]
    conns = [b.connect(r) for r in recs]
    for c in conns:
        c.create_consumer(1, T, "prices", credit=prefetch)
    return recs, conns


def _drain_live(recs: list[Recorder], conns: list[Any], prefetch: int) -> list[list[str]]:
    got: list[list[str]] = [[], []]
    for i in (0, 1):
        batch = recs[i].take()
        got[i] += [d.message.body for d in batch]
        if batch:
            conns[i].ack([d.delivery_tag for d in batch])
            conns[i].grant_credit(1, len(batch))
    return got


def test_flow_control_off_a_stopped_subscriber_spools_and_the_others_get_everything(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, settings={"prices": AddressSettings(producer_flow_control=False)})
    recs, conns = _subscribers(b, prefetch=5)
    prod = b.connect(Recorder())
    n = 2000
    live: list[list[str]] = [[], []]
    for i in range(n):
        assert prod.send(msg("prices", str(i), kind=T, size=SIZE, persistent=False),
                         ticket=i) is True  # the producer never waits
        got = _drain_live(recs, conns, 5)
        live[0] += got[0]
        live[1] += got[1]
    assert live[0] == live[1] == [str(i) for i in range(n)]
    slow = b.stats(f"nondurable://{conns[2].connection_id}.1/prices")
    assert slow.message_count == n and slow.delivering_count == 5
    assert slow.paged_count > n - 20  # its backlog is on disk...
    assert b.budget.used <= LIMIT  # ...and RAM stays flat
    assert b.spool.used > 0 and b.usage()["tempUsed"] == b.spool.used


def test_pending_message_limit_keeps_the_newest_n_beyond_the_prefetch_and_counts_discards(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, settings={"prices": AddressSettings(
        producer_flow_control=False, pending_message_limit=10)})
    recs, conns = _subscribers(b, prefetch=5)
    prod = b.connect(Recorder())
    n = 2000
    for i in range(n):
        assert prod.send(msg("prices", str(i), kind=T, size=SIZE, persistent=False),
                         ticket=i) is True
        _drain_live(recs, conns, 5)
    prefetched = [d.message.body for d in recs[2].take()]
    assert prefetched == [str(i) for i in range(5)]  # its prefetch, delivered at once
    name = f"nondurable://{conns[2].connection_id}.1/prices"
    stats = b.stats(name)
    assert stats.message_count == 15 and stats.paged_count == 0
    assert stats.discarded == n - 15 and b.stats("prices", T).discarded == n - 15
    conns[2].ack(list(range(1, 6)))
    conns[2].grant_credit(1, 100)
    assert [d.message.body for d in recs[2].take()] == [str(i) for i in range(n - 10, n)]


def test_temp_limit_stops_producers_of_a_destination_without_flow_control(
        tmp_path: Path, clock: FakeClock) -> None:
    b = make(tmp_path, clock, temp_limit=20_000,
             settings={"prices": AddressSettings(producer_flow_control=False)})
    _recs, conns = _subscribers(b, prefetch=1)
    rec = Recorder()
    prod = b.connect(rec)
    went = [prod.send(msg("prices", str(i), kind=T, size=SIZE, persistent=False), ticket=i)
            for i in range(200)]
    assert False in went
    assert b.spool.used >= 20_000
    assert "temp-limit" in str(b.flow.must_wait(prod, tmsg("prices", "x")))
    for c in conns:
        c.close()  # the subscriptions go, and their spooled backlog with them
    assert b.spool.used == 0
    assert rec.done and all(e is None for _, e in rec.done)


def test_limits_are_validated(tmp_path: Path, clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="temp_limit"):
        make(tmp_path, clock, temp_limit=0)
    with pytest.raises(ValueError, match="send_fail_if_no_space_after_timeout"):
        make(tmp_path, clock, send_fail_if_no_space_after_timeout=-1)
    with pytest.raises(ValueError, match="memory_limit"):
        AddressSettings(memory_limit=0)
    with pytest.raises(ValueError, match="pending_message_limit"):
        AddressSettings(pending_message_limit=0)
