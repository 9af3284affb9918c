"""Priority order, expiry and scheduled delivery, driven by a fake clock."""

from __future__ import annotations

from core_support import FakeClock, Recorder, msg

from jmspy.broker_ref.core import (
    DEAD_LETTER_REASON,
    AddressSettings,
    Broker,
    DestinationKind,
    ServerConnection,
)

Q = DestinationKind.QUEUE


def _deliver_expiring(clock: FakeClock, conn: ServerConnection, rec: Recorder) -> int:
    """Consumer 1 (credit 1) takes ``a``, which expires 100 ms from now: its delivery tag."""
    conn.create_consumer(1, Q, "q", credit=1)
    conn.send(msg("q", "a", expiration=clock.now + 100))
    return rec.take()[0].delivery_tag


def test_priority_higher_first_fifo_among_equals(conn: ServerConnection, rec: Recorder) -> None:
    for body, prio in [("l1", 1), ("h1", 9), ("m1", 4), ("h2", 9), ("l2", 1), ("m2", 4)]:
        conn.send(msg("q", body, priority=prio))
    conn.create_consumer(1, Q, "q", credit=10)
    assert rec.bodies() == ["h1", "h2", "m1", "m2", "l1", "l2"]


def test_out_of_range_priority_is_clamped(conn: ServerConnection, rec: Recorder) -> None:
    conn.send(msg("q", "low", priority=-3))
    conn.send(msg("q", "high", priority=42))
    conn.create_consumer(1, Q, "q", credit=10)
    assert rec.bodies() == ["high", "low"]


def test_cancelled_messages_go_to_head_of_their_priority_level(
    conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=2)
    conn.send(msg("q", "h1", priority=9))
    conn.send(msg("q", "l1", priority=1))
    got = rec.take()
    conn.revoke_credit(1)
    conn.send(msg("q", "h2", priority=9))
    conn.send(msg("q", "l2", priority=1))
    conn.cancel([d.delivery_tag for d in got])
    conn.grant_credit(1, 10)
    assert rec.bodies() == ["h1", "h2", "l1", "l2"]


def test_expired_message_never_delivered(
    broker: Broker, clock: FakeClock, conn: ServerConnection, rec: Recorder
) -> None:
    conn.send(msg("q", "short", expiration=clock.now + 100))
    conn.send(msg("q", "long", expiration=clock.now + 10_000))
    conn.send(msg("q", "forever"))
    clock.advance(500)  # no process_timers: found expired at dispatch time
    conn.create_consumer(1, Q, "q", credit=10)
    assert rec.bodies() == ["long", "forever"]
    assert broker.stats("q").expired == 1


def test_already_expired_on_send_is_counted_not_queued(
    broker: Broker, clock: FakeClock, conn: ServerConnection
) -> None:
    conn.send(msg("q", "old", expiration=clock.now - 1))
    s = broker.stats("q")
    assert (s.message_count, s.enqueued, s.expired) == (0, 1, 1)


def test_process_timers_expires_ready_messages(
    broker: Broker, clock: FakeClock, conn: ServerConnection
) -> None:
    conn.send(msg("q", "a", expiration=clock.now + 100))
    conn.send(msg("q", "b"))
    assert broker.next_deadline() == clock.now + 100
    clock.advance(100)
    broker.process_timers()
    s = broker.stats("q")
    assert (s.message_count, s.expired) == (1, 1)
    assert [m.body for m in conn.browse("q")] == ["b"]
    assert broker.next_deadline() is None


def test_expired_in_delivery_is_expired_on_cancel(
    broker: Broker, clock: FakeClock, conn: ServerConnection, rec: Recorder
) -> None:
    tag = _deliver_expiring(clock, conn, rec)
    clock.advance(200)
    broker.process_timers()  # in delivery: not touched
    assert broker.stats("q").delivering_count == 1
    conn.cancel([tag])
    s = broker.stats("q")
    assert (s.message_count, s.expired) == (0, 1)


def test_expired_to_expiry_address(clock: FakeClock) -> None:
    b = Broker(clock=clock, default_settings=AddressSettings(expiry_address="ExpiryQueue"))
    c = b.connect(Recorder())
    c.send(msg("q", "a", expiration=clock.now + 1))
    clock.advance(5)
    b.process_timers()
    moved = c.browse("ExpiryQueue")
    assert [m.body for m in moved] == ["a"]
    assert moved[0].properties[DEAD_LETTER_REASON] == "expired"
    assert b.stats("q").expired == 1


def test_scheduled_message_held_then_released_to_head(
    broker: Broker, clock: FakeClock, conn: ServerConnection, rec: Recorder
) -> None:
    conn.send(msg("q", "later", deliver_at=clock.now + 1000))
    conn.send(msg("q", "now1"))
    conn.send(msg("q", "now2"))
    s = broker.stats("q")
    assert (s.message_count, s.scheduled_count) == (3, 1)
    assert [m.body for m in conn.browse("q")] == ["now1", "now2"]
    assert broker.next_deadline() == clock.now + 1000
    clock.advance(999)
    broker.process_timers()
    assert broker.stats("q").scheduled_count == 1
    clock.advance(1)
    broker.process_timers()
    assert broker.stats("q").scheduled_count == 0
    conn.create_consumer(1, Q, "q", credit=10)
    assert rec.bodies() == ["later", "now1", "now2"]  # onto the head, as Artemis does


def test_scheduled_release_dispatches_to_waiting_consumer(
    broker: Broker, clock: FakeClock, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    conn.send(msg("q", "s2", deliver_at=clock.now + 20))
    conn.send(msg("q", "s1", deliver_at=clock.now + 10))
    assert rec.take() == []
    clock.advance(50)
    broker.process_timers()
    assert rec.bodies() == ["s1", "s2"]  # due order


def test_scheduled_and_expired_while_held(
    broker: Broker, clock: FakeClock, conn: ServerConnection
) -> None:
    conn.send(msg("q", "x", deliver_at=clock.now + 100, expiration=clock.now + 50))
    clock.advance(200)
    broker.process_timers()
    s = broker.stats("q")
    assert (s.message_count, s.scheduled_count, s.expired) == (0, 0, 1)


def test_expiry_timer_survives_delivery_and_cancel(
    broker: Broker, clock: FakeClock, conn: ServerConnection, rec: Recorder
) -> None:
    tag = _deliver_expiring(clock, conn, rec)
    assert broker.next_deadline() == clock.now + 100
    clock.advance(50)
    conn.cancel([tag])  # back to ready, not expired yet; consumer has no credit left
    clock.advance(100)
    broker.process_timers()
    s = broker.stats("q")
    assert (s.message_count, s.expired) == (0, 1)


def test_a_queue_makes_its_timers_and_removals_when_first_needed(
    broker: Broker, clock: FakeClock, conn: ServerConnection
) -> None:
    """A queue that only holds messages has no timers, removals or deliveries object yet
    (issue 17: a one-message queue stays small); its stats count zero for them, and the
    first expiry makes them and counts as before."""
    conn.send(msg("q", "a"))
    q = broker.queues["q"]
    assert (q._timers, q._removals, q._deliveries) == (None, None, None)
    stats = broker.stats("q")
    assert (stats.message_count, stats.scheduled_count, stats.expired) == (1, 0, 0)
    conn.send(msg("q", "b", expiration=clock.now + 100))
    conn.send(msg("q", "c", deliver_at=clock.now + 50))
    assert broker.stats("q").scheduled_count == 1
    clock.advance(500)
    broker.process_timers()
    stats = broker.stats("q")
    assert (stats.message_count, stats.scheduled_count, stats.expired) == (2, 0, 1)
    assert q._timers is not None and q._removals is not None
