"""AMPS-style queue settings (seed 001) in the core: leases, semantics, backlogs,
expiration models, queue filter, fairness, leasing, delivery/cancel limits, barriers,
target queue depth. Choices where the seed is silent are documented on the fields of
``AddressSettings`` and pinned here."""

from __future__ import annotations

from typing import Any

import pytest
from core_support import FakeClock, Recorder, msg

from jmspy.broker_ref.core import (
    DEAD_LETTER_REASON,
    AddressSettings,
    Broker,
    Delivery,
    DestinationKind,
    IllegalBrokerState,
    ServerConnection,
)
from jmspy.broker_ref.core.policy import effective_expiration

Q = DestinationKind.QUEUE


def make(clock: FakeClock, **kw: Any) -> Broker:
    return Broker(clock=clock, settings={"amps.#": AddressSettings(**kw)})


def sent_a(clock: FakeClock, credit: int = 10, **kw: Any
           ) -> tuple[Broker, Recorder, ServerConnection]:
    """A broker whose ``amps.#`` settings are ``kw`` (:func:`make`), a recorded connection
    whose consumer 1 has ``credit`` on ``amps.q``, and ``A`` sent there."""
    b = make(clock, **kw)
    r = Recorder()
    c = b.connect(r)
    c.create_consumer(1, Q, "amps.q", credit=credit)
    c.send(msg("amps.q", "A"))
    return b, r, c


def two_consumers(clock: FakeClock, second_credit: int = 10, **kw: Any
                  ) -> tuple[Broker, Recorder, Recorder, ServerConnection, ServerConnection]:
    """A broker whose ``amps.#`` settings are ``kw`` (:func:`make`) and two recorded
    connections, each with a consumer 1 on ``amps.q``: the first's credit 10, the
    second's ``second_credit``."""
    b = make(clock, **kw)
    r1, r2 = Recorder(), Recorder()
    c1, c2 = b.connect(r1), b.connect(r2)
    c1.create_consumer(1, Q, "amps.q", credit=10)
    c2.create_consumer(1, Q, "amps.q", credit=second_credit)
    return b, r1, r2, c1, c2


def dlq_reasons(conn: ServerConnection) -> list[tuple[object, str]]:
    return [(m.body, m.properties[DEAD_LETTER_REASON]) for m in conn.browse("DLQ")]


# ------------------------------------------------------------------ LeasePeriod / Leasing


def lease_setup(
    clock: FakeClock, leasing: str
) -> tuple[Broker, ServerConnection, Recorder, ServerConnection, Recorder, Delivery]:
    b = make(clock, lease_period_ms=1000, leasing=leasing)
    r1, r2 = Recorder(), Recorder()
    c1, c2 = b.connect(r1), b.connect(r2)
    c1.create_consumer(1, Q, "amps.q", credit=1)
    c1.send(msg("amps.q", "A"))
    (d1,) = r1.take()
    assert b.next_deadline() == clock.now + 1000
    c2.create_consumer(1, Q, "amps.q", credit=5)
    assert r2.take() == []  # leased to c1
    return b, c1, r1, c2, r2, d1


def test_lease_expiry_redelivers_to_another_consumer_strict_rejects_late_ack(
    clock: FakeClock,
) -> None:
    b, c1, _, c2, r2, d1 = lease_setup(clock, "strict")
    clock.advance(999)
    b.process_timers()
    assert r2.take() == []
    clock.advance(1)
    b.process_timers()  # lease over: back on the queue, to the consumer that can take it
    (d2,) = r2.take()
    assert (d2.message.body, d2.delivery_count) == ("A", 2)
    with pytest.raises(IllegalBrokerState, match=r"lease of delivery tag .* ran out.*strict"):
        c1.ack([d1.delivery_tag])
    assert b.stats("amps.q").message_count == 1  # the late ack had no effect
    c2.ack([d2.delivery_tag])
    st = b.stats("amps.q")
    assert (st.message_count, st.delivering_count, st.dequeued) == (0, 0, 1)


def test_lease_sublet_late_ack_consumes_message_current_holder_ack_is_noop(
    clock: FakeClock,
) -> None:
    b, c1, _, c2, r2, d1 = lease_setup(clock, "sublet")
    clock.advance(1000)
    b.process_timers()
    (d2,) = r2.take()
    c1.ack([d1.delivery_tag])  # sublet: any old holder may acknowledge it
    st = b.stats("amps.q")
    assert (st.message_count, st.delivering_count, st.dequeued) == (0, 0, 1)
    c2.ack([d2.delivery_tag])  # already consumed: no-op, no error
    assert b.stats("amps.q").dequeued == 1


def test_lease_strict_late_ack_of_unleased_message_consumes_it(clock: FakeClock) -> None:
    b, r, c = sent_a(clock, credit=1, lease_period_ms=1000, leasing="strict")
    (d,) = r.take()
    clock.advance(1000)
    b.process_timers()  # back on the queue, nobody holds it
    assert b.stats("amps.q").delivering_count == 0
    c.ack([d.delivery_tag])  # strict allows acks of unleased messages
    assert b.stats("amps.q").message_count == 0
    c.grant_credit(1, 5)
    assert r.take() == []


def test_lease_acked_in_time_is_not_redelivered_and_close_cleans_stale_tags(
    clock: FakeClock,
) -> None:
    b, r, c = sent_a(clock, credit=3, lease_period_ms=1000)
    c.send(msg("amps.q", "B"))
    da, _db = r.take()
    c.ack([da.delivery_tag])
    clock.advance(5000)
    b.process_timers()  # B's lease ran out and B came straight back to the same consumer
    (again,) = r.take()
    assert (again.message.body, again.delivery_count) == ("B", 2)
    c.close_consumer(1)  # the stale tag of B's first delivery goes with the consumer
    assert b.stats("amps.q").message_count == 1
    c.close()


# ------------------------------------------------------------------ MaxDeliveries / MaxCancels


def test_max_deliveries_dead_letters_with_reason(clock: FakeClock) -> None:
    b, r, c = sent_a(clock, max_deliveries=2)
    (d,) = r.take()
    c.cancel([d.delivery_tag])
    (d,) = r.take()
    assert d.delivery_count == 2
    c.cancel([d.delivery_tag])  # delivered twice: expired instead of returned
    assert r.take() == []
    assert dlq_reasons(c) == [("A", "max deliveries (2) exceeded")]
    st = b.stats("amps.q")
    assert (st.message_count, st.dead_lettered) == (0, 1)


def test_max_deliveries_counts_lease_expiries(clock: FakeClock) -> None:
    b, _r, c = sent_a(clock, max_deliveries=1, lease_period_ms=100)
    clock.advance(100)
    b.process_timers()
    assert dlq_reasons(c) == [("A", "max deliveries (1) exceeded")]


def test_max_cancels_dead_letters_with_reason(clock: FakeClock) -> None:
    b, r, c = sent_a(clock, max_cancels=2, max_delivery_attempts=0)
    (d,) = r.take()
    c.cancel([d.delivery_tag])  # first cancel: back on the queue
    (d,) = r.take()
    c.begin("tx")
    c.ack([d.delivery_tag], tx="tx")
    c.rollback("tx")  # a rollback is a cancel too: the second one
    assert r.take() == []
    assert dlq_reasons(c) == [("A", "max cancels (2) exceeded")]
    assert b.stats("amps.q").dead_lettered == 1


# ------------------------------------------------------------------ Semantics


def test_semantics_at_most_once_removes_message_at_delivery(clock: FakeClock) -> None:
    b, r, c = sent_a(clock, semantics="at-most-once")
    assert r.bodies() == ["A"]
    st = b.stats("amps.q")
    assert (st.message_count, st.delivering_count, st.dequeued) == (0, 0, 1)
    c.close_consumer(1)  # nothing to give back: never redelivered
    c.create_consumer(2, Q, "amps.q", credit=10)
    assert r.take() == []


def test_semantics_at_least_once_is_default(clock: FakeClock) -> None:
    assert AddressSettings().semantics == "at-least-once"
    _b, r, c = sent_a(clock, semantics="at-least-once", max_deliveries=5)
    r.take()
    c.close_consumer(1)
    c.create_consumer(2, Q, "amps.q", credit=10)
    assert [d.delivery_count for d in r.take()] == [2]


# ------------------------------------------------------------ MaxBacklog, MaxPerSubscriptionBacklog


def test_max_backlog_caps_unacked_messages_of_the_whole_queue(clock: FakeClock) -> None:
    b, r1, r2, c1, _c2 = two_consumers(clock, max_backlog=2)
    for i in range(5):
        c1.send(msg("amps.q", i))
    got1, got2 = r1.take(), r2.take()
    assert len(got1) + len(got2) == 2
    c1.ack([got1[0].delivery_tag])
    assert len(r1.take()) + len(r2.take()) == 1
    assert b.stats("amps.q").delivering_count == 2


def test_max_per_subscription_backlog_grants_lower_default_one(clock: FakeClock) -> None:
    b = make(clock, max_per_subscription_backlog=5)
    r = Recorder()
    c = b.connect(r)
    assert c.create_consumer(1, Q, "amps.q", backlog=10).backlog == 5  # lower of the two
    assert c.create_consumer(2, Q, "amps.q", backlog=3).backlog == 3
    assert c.create_consumer(3, Q, "amps.q").backlog == 1  # asked nothing: 1
    for cid in (1, 2, 3):
        c.grant_credit(cid, 100)
    for i in range(20):
        c.send(msg("amps.q", i))
    per = {cid: sum(1 for d in r.take() if d.consumer_id == cid) for cid in (1,)}
    st = b.stats("amps.q")
    assert st.delivering_count == 5 + 3 + 1  # each capped by its grant, not its credit
    assert per  # (deliveries were split by the round-robin)
    with pytest.raises(IllegalBrokerState, match="backlog"):
        c.create_consumer(4, Q, "amps.q", backlog=0)


def test_backlog_without_queue_maximum_grants_what_is_asked(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    assert conn.create_consumer(1, Q, "q").backlog is None  # plain JMS: uncapped
    assert conn.create_consumer(2, Q, "q", backlog=2, credit=10).backlog == 2
    for i in range(5):
        conn.send(msg("q", i))
    assert len(rec.take()) == 2


# ------------------------------------------------------------------ Expiration / ExpirationModel


@pytest.mark.parametrize(
    ("model", "alive_at_700", "alive_at_2000"),
    [
        ("queue", ["short", "long", "none"], []),
        ("latest", ["short", "long", "none"], ["long", "none"]),
        ("earliest", ["long", "none"], []),
        ("default", ["long", "none"], ["long"]),
    ],
)
def test_expiration_model(
    clock: FakeClock, model: str, alive_at_700: list[str], alive_at_2000: list[str]
) -> None:
    b = make(clock, expiration_ms=1000, expiration_model=model)
    c = b.connect(Recorder())
    t0 = clock.now
    c.send(msg("amps.q", "short", expiration=t0 + 500))
    c.send(msg("amps.q", "long", expiration=t0 + 5000))
    c.send(msg("amps.q", "none"))
    clock.now = t0 + 700
    b.process_timers()
    assert [m.body for m in c.browse("amps.q")] == alive_at_700
    clock.now = t0 + 2000
    b.process_timers()
    assert [m.body for m in c.browse("amps.q")] == alive_at_2000
    gone = 3 - len(alive_at_2000)
    st = b.stats("amps.q")
    assert (st.expired, st.dead_lettered) == (gone, gone)
    assert {r for _, r in dlq_reasons(c)} <= {"expired"}
    assert len(dlq_reasons(c)) == gone  # expired = undeliverable: to the DLQ


def test_expiration_model_without_queue_expiration_is_unlimited() -> None:
    now = 1000
    assert effective_expiration("queue", None, 1500, now) == 0  # queue value: never
    assert effective_expiration("latest", None, 1500, now) == 0
    assert effective_expiration("earliest", None, 1500, now) == 1500
    assert effective_expiration("default", None, 1500, now) == 1500
    assert effective_expiration("default", 100, 0, now) == 1100


# ------------------------------------------------------------------ Filter


def test_queue_filter_only_matching_messages_are_queued(clock: FakeClock) -> None:
    b = make(clock, filter="region = 'EU' AND JMSPriority > 3")
    c = b.connect(Recorder())
    c.send(msg("amps.q", "eu", properties={"region": "EU"}))
    c.send(msg("amps.q", "us", properties={"region": "US"}))
    c.send(msg("amps.q", "eu-low", properties={"region": "EU"}, priority=1))
    assert [m.body for m in c.browse("amps.q")] == ["eu"]
    assert b.stats("amps.q").enqueued == 1


# ------------------------------------------------------------------ FairnessModel


@pytest.mark.parametrize(
    ("model", "expected"),
    [("fast", (4, 0)), ("round-robin", (2, 2)), ("proportional", (3, 1))],
)
def test_fairness_model_distribution(
    clock: FakeClock, model: str, expected: tuple[int, int]
) -> None:
    b = make(clock, fairness_model=model, max_per_subscription_backlog=10)
    r = Recorder()
    c = b.connect(r)
    c.create_consumer(1, Q, "amps.q", credit=10, backlog=6)
    c.create_consumer(2, Q, "amps.q", credit=10, backlog=2)
    for i in range(4):
        c.send(msg("amps.q", i))
    got = r.take()
    counts = (
        sum(1 for d in got if d.consumer_id == 1),
        sum(1 for d in got if d.consumer_id == 2),
    )
    assert counts == expected


def test_policy_dispatch_keeps_priority_order_and_selectors(clock: FakeClock) -> None:
    b = make(clock, fairness_model="fast")
    r = Recorder()
    c = b.connect(r)
    for body, prio in [("l1", 1), ("h1", 9), ("m1", 4), ("h2", 9)]:
        c.send(msg("amps.q", body, priority=prio, properties={"k": body[0]}))
    c.create_consumer(1, Q, "amps.q", credit=10, selector="k <> 'm'")
    assert r.bodies() == ["h1", "h2", "l1"]


# ------------------------------------------------------------------ BarrierExpression


def test_barrier_waits_for_earlier_acks_then_goes_to_all_consumers(clock: FakeClock) -> None:
    b, r1, r2, c1, c2 = two_consumers(clock, barrier_expression="sync IS NOT NULL")
    c1.send(msg("amps.q", "A"))
    c1.send(msg("amps.q", "B"))
    c1.send(msg("amps.q", "SYNC", properties={"sync": True}))
    c1.send(msg("amps.q", "C"))
    (da,), (db,) = r1.take(), r2.take()
    assert (da.message.body, db.message.body) == ("A", "B")  # SYNC and C held
    c1.ack([da.delivery_tag])
    assert r1.take() == [] and r2.take() == []  # B still unacknowledged
    c2.ack([db.delivery_tag])
    got1, got2 = r1.take(), r2.take()
    assert [d.message.body for d in got1][:1] == ["SYNC"]
    assert [d.message.body for d in got2][:1] == ["SYNC"]  # to every consumer, once
    assert sorted(d.message.body for d in got1[1:] + got2[1:]) == ["C"]  # then the rest
    for conn, got in ((c1, got1), (c2, got2)):
        conn.ack([d.delivery_tag for d in got])
    st = b.stats("amps.q")
    assert (st.message_count, st.delivering_count) == (0, 0)


def test_barrier_waits_until_every_consumer_can_receive(clock: FakeClock) -> None:
    _b, r1, r2, c1, c2 = two_consumers(clock, second_credit=0, barrier_expression="sync = TRUE")
    c1.send(msg("amps.q", "SYNC", properties={"sync": True}))
    assert r1.take() == []  # c2 could not receive it yet
    c2.grant_credit(1, 1)
    assert r1.bodies() == ["SYNC"] and r2.bodies() == ["SYNC"]


# ------------------------------------------------------------------ TargetQueueDepth


def test_target_queue_depth_only_active_messages_are_deliverable(clock: FakeClock) -> None:
    b = make(clock, target_queue_depth=1000)
    r = Recorder()
    c = b.connect(r)
    for i in range(1000):
        c.send(msg("amps.q", i, properties={"color": "red"}))
    c.send(msg("amps.q", "blue", properties={"color": "blue"}))
    assert len(c.browse("amps.q")) == 1000  # the 1001st is not active: not browsable
    c.create_consumer(1, Q, "amps.q", credit=10, selector="color = 'blue'")
    assert r.take() == []  # a matching message exists, but outside the active set
    c.create_consumer(2, Q, "amps.q", credit=1, selector="color = 'red'")
    (red,) = r.take()
    assert r.take() == []  # red in delivery still uses up the target
    c.ack([red.delivery_tag])
    assert [d.message.body for d in r.take()] == ["blue"]


# ------------------------------------------------------------------ validation


def test_amps_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="semantics"):
        AddressSettings(semantics="exactly-once")
    with pytest.raises(ValueError, match="fairness_model"):
        AddressSettings(fairness_model="random")
    with pytest.raises(ValueError, match="1000"):
        AddressSettings(target_queue_depth=10)
    with pytest.raises(ValueError, match="barrier_expression"):
        AddressSettings(target_queue_depth=1000, barrier_expression="x = 1")
    assert not AddressSettings().amps  # nothing set: the fast dispatch path
