"""Open MQ's connection flow limit in the core (seed 004): the broker delivers on a
connection while fewer than the limit are delivered and not yet released by the client,
whatever credit its consumers hold, and stops there; each release lets one more through,
the consumer kept waiting going first once the gate had shut. Every dispatch path
(a lone consumer's run, round-robin, selectors, topics) goes through the same gate."""

from __future__ import annotations

import pytest
from core_support import Recorder, msg, tmsg

from jmspy.broker_ref.core import Broker, DestinationKind, ServerConnection

Q = DestinationKind.QUEUE
T = DestinationKind.TOPIC


def per_consumer(rec: Recorder) -> list[tuple[int, object]]:
    return [(d.consumer_id, d.message.body) for d in rec.take()]


def gated_pair(broker: Broker, limit: int) -> tuple[ServerConnection, Recorder]:
    """A connection under ``limit`` with consumer 1 on queue "a" and 2 on "b", credit 10
    each, and what it receives."""
    rec = Recorder()
    conn = broker.connect(rec, flow_limit=limit)
    conn.create_consumer(1, Q, "a", credit=10)
    conn.create_consumer(2, Q, "b", credit=10)
    return conn, rec


def test_deliveries_stop_at_the_limit_across_queues_whatever_the_credit(broker: Broker) -> None:
    _, rec = gated_pair(broker, 3)
    sender = broker.connect(Recorder())
    for i in range(5):
        sender.send(msg("a", f"a{i}"))
        sender.send(msg("b", f"b{i}"))
    assert per_consumer(rec) == [(1, "a0"), (2, "b0"), (1, "a1")]  # 3, then the gate shuts
    assert broker.stats("a").message_count + broker.stats("b").message_count == 10


def test_each_release_lets_one_more_through_the_one_kept_waiting_first(
        broker: Broker) -> None:
    conn, rec = gated_pair(broker, 2)
    sender = broker.connect(Recorder())
    for i in range(4):
        sender.send(msg("a", f"a{i}"))
    for i in range(4):
        sender.send(msg("b", f"b{i}"))
    assert per_consumer(rec) == [(1, "a0"), (1, "a1")]
    got = []
    for _ in range(4):
        conn.release_flow(1)
        got += per_consumer(rec)
    assert got == [(2, "b0"), (1, "a2"), (2, "b1"), (1, "a3")]  # after the last served


def test_credit_held_by_a_consumer_with_nothing_to_deliver_starves_nobody(
        broker: Broker) -> None:
    rec = Recorder()
    conn = broker.connect(rec, flow_limit=3)
    conn.create_consumer(1, T, "starve.a", credit=10)  # its topic stays empty
    conn.create_consumer(2, T, "starve.b", credit=10)
    broker.connect(Recorder()).send(tmsg("starve.b", "b0"))
    assert per_consumer(rec) == [(2, "b0")]


def test_a_lone_consumer_takes_a_run_no_longer_than_the_gate(broker: Broker) -> None:
    rec = Recorder()
    conn = broker.connect(rec, flow_limit=4)
    sender = broker.connect(Recorder())
    for i in range(10):
        sender.send(msg("q", i))
    conn.create_consumer(1, Q, "q", credit=100)
    assert [b for _, b in per_consumer(rec)] == [0, 1, 2, 3]
    conn.release_flow(3)
    assert [b for _, b in per_consumer(rec)] == [4, 5, 6]
    assert broker.stats("q").delivering_count == 7


def test_selector_consumers_pass_the_same_gate(broker: Broker) -> None:
    rec = Recorder()
    conn = broker.connect(rec, flow_limit=2)
    conn.create_consumer(1, Q, "q", selector="n >= 0", credit=10)
    sender = broker.connect(Recorder())
    for i in range(5):
        sender.send(msg("q", i, properties={"n": i}))
    assert [b for _, b in per_consumer(rec)] == [0, 1]
    conn.release_flow(1)
    assert [b for _, b in per_consumer(rec)] == [2]


def test_releases_never_open_the_gate_past_the_limit(broker: Broker) -> None:
    rec = Recorder()
    conn = broker.connect(rec, flow_limit=3)
    conn.release_flow(50)  # more than was ever delivered: the limit still holds
    conn.create_consumer(1, Q, "q", credit=100)
    sender = broker.connect(Recorder())
    for i in range(10):
        sender.send(msg("q", i))
    assert len(rec.take()) == 3


def test_acknowledging_is_not_releasing(broker: Broker) -> None:
    """The gate counts messages held by the client, which tells the broker when they
    leave its buffers; an acknowledgement alone (credit, a tag settled) opens nothing."""
    rec = Recorder()
    conn = broker.connect(rec, flow_limit=2)
    conn.create_consumer(1, Q, "q", credit=100)
    sender = broker.connect(Recorder())
    for i in range(5):
        sender.send(msg("q", i))
    tags = [d.delivery_tag for d in rec.take()]
    conn.ack(tags)
    conn.grant_credit(1, 10)
    assert rec.take() == []
    conn.release_flow(2)
    assert len(rec.take()) == 2


def test_without_a_limit_release_changes_nothing(broker: Broker, conn: ServerConnection,
                                                 rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=100)
    conn.release_flow(5)
    sender = broker.connect(Recorder())
    for i in range(20):
        sender.send(msg("q", i))
    assert len(rec.take()) == 20


@pytest.mark.parametrize("limit", [0, -1])
def test_a_flow_limit_below_one_is_refused(broker: Broker, limit: int) -> None:
    with pytest.raises(ValueError, match="connection flow limit must be >= 1"):
        broker.connect(Recorder(), flow_limit=limit)
