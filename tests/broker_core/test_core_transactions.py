"""Transactions: staged sends and acks, commit, rollback, close."""

from __future__ import annotations

import pytest
from core_support import Recorder, msg

from jmspy.broker_ref.core import (
    Broker,
    DestinationKind,
    IllegalBrokerState,
    ServerConnection,
    TransactionError,
)

Q = DestinationKind.QUEUE


def test_transacted_send_staged_until_commit(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    conn.begin("t")
    conn.send(msg("q", "a"), tx="t")
    conn.send(msg("q", "b"), tx="t")
    assert rec.take() == [] and broker.stats("q").message_count == 0
    conn.commit("t")
    assert rec.bodies() == ["a", "b"]


def test_rollback_drops_sends(broker: Broker, conn: ServerConnection) -> None:
    conn.begin("t")
    conn.send(msg("q", "a"), tx="t")
    conn.rollback("t")
    assert "q" not in broker.queue_names()  # staging neither routes nor auto-creates
    with pytest.raises(TransactionError):
        conn.commit("t")


def test_transacted_ack_commit(broker: Broker, conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    conn.send(msg("q", "a"))
    tag = rec.take()[0].delivery_tag
    conn.begin("t")
    conn.ack([tag], tx="t")
    s = broker.stats("q")
    assert (s.delivering_count, s.dequeued) == (1, 0)  # still in delivery until commit
    with pytest.raises(IllegalBrokerState, match="transaction 't'"):
        conn.ack([tag])
    conn.commit("t")
    s = broker.stats("q")
    assert (s.message_count, s.dequeued) == (0, 1)


def test_rollback_acks_redeliver_in_order(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", credit=2)
    for b in ["a", "b", "c"]:
        conn.send(msg("q", b))
    tags = [d.delivery_tag for d in rec.take()]
    conn.revoke_credit(1)
    conn.begin("t")
    conn.ack(tags, tx="t")
    conn.rollback("t")
    conn.grant_credit(1, 10)
    got = rec.take()
    assert [(d.message.body, d.delivery_count) for d in got] == [("a", 2), ("b", 2), ("c", 1)]


def test_unknown_tx_raises(conn: ServerConnection) -> None:
    with pytest.raises(TransactionError, match="begin"):
        conn.send(msg("q", "a"), tx="nope")
    with pytest.raises(TransactionError):
        conn.ack([1], tx="nope")
    with pytest.raises(TransactionError):
        conn.rollback("nope")
    conn.begin("t")
    with pytest.raises(TransactionError, match="already open"):
        conn.begin("t")


def test_connection_close_rolls_back(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, Q, "q", credit=10)
    c.send(msg("q", "a"))
    tag = rec.take()[0].delivery_tag
    c.begin("t")
    c.ack([tag], tx="t")
    c.send(msg("q", "staged"), tx="t")
    c.close()
    s = broker.stats("q")
    assert (s.message_count, s.dequeued, s.delivering_count) == (1, 0, 0)


def test_commit_acks_of_closed_consumer(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", credit=10)
    conn.send(msg("q", "a"))
    tag = rec.take()[0].delivery_tag
    conn.begin("t")
    conn.ack([tag], tx="t")
    conn.close_consumer(1)  # the staged ack stays with the transaction
    conn.commit("t")
    assert broker.stats("q").message_count == 0


def test_commit_to_deleted_temp_queue_rolls_back(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    other = broker.connect(Recorder())
    tmp = other.create_temporary_queue()
    conn.create_consumer(1, Q, "q", credit=10)
    conn.send(msg("q", "a"))
    tag = rec.take()[0].delivery_tag
    conn.begin("t")
    conn.ack([tag], tx="t")
    conn.send(msg(tmp, "reply"), tx="t")
    other.close()
    with pytest.raises(TransactionError, match="rolled back"):
        conn.commit("t")
    assert [(d.message.body, d.delivery_count) for d in rec.take()] == [("a", 2)]
