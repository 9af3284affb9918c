"""Reading leases: deliveries lent to a token outlive their connection, and any connection
settles (consumes) or releases (redelivers, marked) them; a lease nobody settles runs out."""

from __future__ import annotations

from pathlib import Path

import pytest
from core_support import FakeClock, Recorder, drain_acking, msg

from jmspy.broker_ref.core import (
    AccessDenied,
    AddressSettings,
    Broker,
    DestinationKind,
    IllegalBrokerState,
)
from jmspy.broker_ref.core.leases import DEFAULT_LEASE_TTL_MS
from jmspy.broker_ref.core.security import SecurityPolicy
from jmspy.broker_ref.store.sqlite_store import SqliteStore

Q = DestinationKind.QUEUE


def read(broker: Broker, n: int, queue: str = "q", credit: int = 100
         ) -> tuple[object, Recorder, list[int], list[str]]:
    """A new connection's consumer takes ``n`` messages of ``queue`` (it is given
    ``credit``, so it may hold more): the connection, its recorder, the first ``n`` tags
    and bodies."""
    rec = Recorder()
    conn = broker.connect(rec)
    conn.create_consumer(1, Q, queue, credit=credit)
    got = rec.take()
    first = got[:n]
    return conn, rec, [d.delivery_tag for d in first], [d.message.body for d in first]


def fill(broker: Broker, bodies: list[str], queue: str = "q") -> None:
    sender = broker.connect(Recorder())
    for body in bodies:
        sender.send(msg(queue, body))
    sender.close()


def depth(broker: Broker, queue: str = "q") -> tuple[int, int]:
    stats = broker.stats(queue)
    return stats.message_count, stats.delivering_count


def test_lent_deliveries_stay_held_after_their_connection_closes(broker: Broker) -> None:
    fill(broker, ["a", "b", "c", "d"])
    conn, _, tags, bodies = read(broker, 2)
    assert bodies == ["a", "b"]
    conn.leases.lend(tags, "t1")
    conn.close()  # c and d were prefetched, never lent: they come back
    assert depth(broker) == (4, 2)
    other = Recorder()
    c2 = broker.connect(other)
    c2.create_consumer(1, Q, "q", credit=10)
    assert [d.message.body for d in other.take()] == ["c", "d"]
    assert broker.leases.held("t1") == 2


def test_settling_a_token_from_another_connection_consumes_its_messages(
        broker: Broker) -> None:
    fill(broker, ["a", "b", "c"])
    conn, _, tags, _ = read(broker, 3)
    conn.leases.lend(tags, "batch-7:0")
    conn.close()
    driver = broker.connect(Recorder())
    assert driver.leases.settle(["batch-7:0", "never-lent"]) == 3
    assert depth(broker) == (0, 0)
    assert broker.stats("q").dequeued == 3
    assert driver.leases.settle(["batch-7:0"]) == 0  # spent: nothing twice


def test_released_lease_returns_messages_to_the_head_in_order_marked_redelivered(
        broker: Broker) -> None:
    fill(broker, ["a", "b", "c", "d"])
    conn, _, tags, _ = read(broker, 3, credit=3)
    conn.leases.lend(tags, "t")
    conn.close()
    driver = broker.connect(Recorder())
    assert driver.leases.release(["t"]) == 3
    rec = Recorder()
    c2 = broker.connect(rec)
    c2.create_consumer(1, Q, "q", credit=10)
    got = rec.take()
    assert [d.message.body for d in got] == ["a", "b", "c", "d"]
    assert [d.delivery_count for d in got] == [2, 2, 2, 1]


def test_lease_runs_out_after_its_time_to_live(broker: Broker, clock: FakeClock) -> None:
    fill(broker, ["a", "b"])
    conn, _, tags, _ = read(broker, 2)
    conn.leases.lend(tags, "t", ttl_ms=5_000)
    conn.close()
    assert broker.next_deadline() == clock.now + 5_000
    clock.advance(4_999)
    broker.process_timers()
    assert broker.leases.held("t") == 2
    clock.advance(1)
    broker.process_timers()
    assert broker.leases.held("t") == 0
    assert broker.next_deadline() is None
    rec = Recorder()
    broker.connect(rec).create_consumer(1, Q, "q", credit=10)
    assert [(d.message.body, d.delivery_count) for d in rec.take()] == [("a", 2), ("b", 2)]


def test_default_time_to_live_and_renewal_by_a_later_lend(
        broker: Broker, clock: FakeClock) -> None:
    fill(broker, ["a", "b"])
    conn, _, tags, _ = read(broker, 2)
    conn.leases.lend(tags[:1], "t")
    assert broker.next_deadline() == clock.now + DEFAULT_LEASE_TTL_MS
    clock.advance(1_000)
    conn.leases.lend(tags[1:], "t")
    assert broker.next_deadline() == clock.now + DEFAULT_LEASE_TTL_MS
    clock.advance(DEFAULT_LEASE_TTL_MS - 1)
    broker.process_timers()
    assert broker.leases.held("t") == 2  # the first deadline was renewed


def test_settled_lease_leaves_no_timer_behind(broker: Broker) -> None:
    fill(broker, ["a"])
    conn, _, tags, _ = read(broker, 1)
    conn.leases.lend(tags, "t", ttl_ms=1_000)
    assert conn.leases.settle(["t"]) == 1
    assert broker.next_deadline() is None


def test_lent_tags_cannot_be_acknowledged_or_lent_again(broker: Broker) -> None:
    fill(broker, ["a"])
    conn, _, tags, _ = read(broker, 1)
    conn.leases.lend(tags, "t")
    with pytest.raises(IllegalBrokerState, match="unknown delivery tag"):
        conn.ack(tags)
    with pytest.raises(IllegalBrokerState, match="unknown delivery tag"):
        conn.leases.lend(tags, "u")


def test_lending_refills_the_consumer_like_an_acknowledgement(broker: Broker) -> None:
    fill(broker, ["a", "b", "c"])
    rec = Recorder()
    conn = broker.connect(rec)
    conn.create_consumer(1, Q, "q", credit=1)
    first = rec.take()
    conn.leases.lend([first[0].delivery_tag], "t")
    conn.grant_credit(1, 1)
    assert [d.message.body for d in rec.take()] == ["b"]


def test_bad_token_and_time_to_live_are_refused_clearly(broker: Broker) -> None:
    fill(broker, ["a"])
    conn, _, tags, _ = read(broker, 1)
    with pytest.raises(IllegalBrokerState, match="token must be a non-empty string"):
        conn.leases.lend(tags, "")
    with pytest.raises(IllegalBrokerState, match="without commas"):
        conn.leases.settle(["a,b"])
    with pytest.raises(IllegalBrokerState, match="time to live must be"):
        conn.leases.lend(tags, "t", ttl_ms=0)
    conn.ack(tags)  # nothing was taken by the refusals


def test_leases_on_a_queue_with_an_amps_policy_are_refused(clock: FakeClock) -> None:
    b = Broker(clock=clock, settings={"amps.#": AddressSettings(
        lease_period_ms=1000, leasing="strict")})
    fill(b, ["a"], "amps.q")
    conn, _, tags, _ = read(b, 1, "amps.q")
    with pytest.raises(IllegalBrokerState, match="AMPS policy"):
        conn.leases.lend(tags, "t")
    conn.ack(tags)


def test_settling_needs_consume_permission_on_the_lent_queues(clock: FakeClock) -> None:
    policy = SecurityPolicy(iterations=1_000)
    policy.add_user("reader", "r-pw", roles=["readers"])
    policy.add_user("other", "o-pw", roles=["others"])
    policy.add_permission("q", "queue", send=["readers"], consume=["readers"])
    b = Broker(clock=clock, security=policy)
    b.connect(Recorder(), user="reader", password="r-pw").send(msg("q", "a"))
    rec = Recorder()
    conn = b.connect(rec, user="reader", password="r-pw")
    conn.create_consumer(1, Q, "q", credit=1)
    conn.leases.lend([rec.take()[0].delivery_tag], "t")
    stranger = b.connect(Recorder(), user="other", password="o-pw")
    with pytest.raises(AccessDenied):
        stranger.leases.settle(["t"])
    with pytest.raises(AccessDenied):
        stranger.leases.release(["t"])
    assert b.leases.held("t") == 1
    assert b.connect(Recorder(), user="reader", password="r-pw").leases.settle(["t"]) == 1


def test_a_broker_restart_gives_lent_persistent_messages_back_as_ready(
        tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "store.db"
    b1 = Broker(store=SqliteStore(path), clock=clock)
    sender = b1.connect(Recorder())
    for body in ["a", "b"]:
        sender.send(msg("q", body, persistent=True))
    conn, _, tags, _ = read(b1, 2)
    conn.leases.lend(tags, "t")
    b2 = Broker(store=SqliteStore(path), clock=clock)  # b1 left as a crash leaves it
    rec = Recorder()
    c2 = b2.connect(rec)
    c2.create_consumer(1, Q, "q", credit=10)
    assert drain_acking(c2, rec) == ["a", "b"]


def test_settled_persistent_messages_leave_the_store(tmp_path: Path, clock: FakeClock
                                                      ) -> None:
    path = tmp_path / "store.db"
    b1 = Broker(store=SqliteStore(path), clock=clock)
    sender = b1.connect(Recorder())
    for body in ["a", "b", "c"]:
        sender.send(msg("q", body, persistent=True))
    conn, _, tags, _ = read(b1, 2)
    conn.leases.lend(tags, "t")
    conn.close()
    assert b1.connect(Recorder()).leases.settle(["t"]) == 2
    b2 = Broker(store=SqliteStore(path), clock=clock)
    rec = Recorder()
    c2 = b2.connect(rec)
    c2.create_consumer(1, Q, "q", credit=10)
    assert drain_acking(c2, rec) == ["c"]
