"""Topics: non-durable, durable, shared and shared-durable subscriptions, no_local."""

from __future__ import annotations

import pytest
from core_support import Recorder, tmsg

from jmspy.broker_ref.core import (
    Broker,
    DestinationKind,
    IllegalBrokerState,
    InvalidSubscription,
    ServerConnection,
)

T = DestinationKind.TOPIC


def test_topic_without_subscriptions_drops(broker: Broker, conn: ServerConnection) -> None:
    conn.send(tmsg("news", "lost"))
    s = broker.stats("news", T)
    assert (s.message_count, s.enqueued, s.subscription_count) == (0, 0, 0)
    assert broker.topic_names() == ["news"]


def test_every_subscription_gets_each_message(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, "news", credit=10)
    c.create_consumer(2, T, "news", credit=10)
    c.send(tmsg("news", "a"))
    got = rec.take()
    assert sorted(d.consumer_id for d in got) == [1, 2]
    s = broker.stats("news", T)
    assert (s.subscription_count, s.enqueued, s.message_count, s.delivering_count) == (2, 2, 2, 2)


def test_nondurable_subscription_removed_on_consumer_close(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    info = conn.create_consumer(1, T, "news")
    assert info.subscription in broker.subscription_names()
    conn.send(tmsg("news", "a"))
    conn.close_consumer(1)
    assert broker.subscription_names() == []
    assert broker.stats("news", T).message_count == 0


def test_durable_subscription_requires_client_id(conn: ServerConnection) -> None:
    with pytest.raises(InvalidSubscription, match="client id"):
        conn.create_consumer(1, T, "news", subscription_name="s", durable=True)


def test_durable_keeps_messages_while_offline(broker: Broker) -> None:
    rec = Recorder()
    c = broker.connect(rec, client_id="app")
    c.create_consumer(1, T, "news", subscription_name="s", durable=True)
    c.close_consumer(1)
    c.send(tmsg("news", "a"))
    c.send(tmsg("news", "b"))
    assert broker.stats("news", T).message_count == 2
    c.close()
    rec2 = Recorder()
    c2 = broker.connect(rec2, client_id="app")
    info = c2.create_consumer(1, T, "news", subscription_name="s", durable=True, credit=10)
    assert info.subscription == "sub://app.s"
    assert rec2.bodies() == ["a", "b"]


def test_durable_resubscribe_with_new_selector_replaces(broker: Broker) -> None:
    c = broker.connect(Recorder(), client_id="app")
    c.create_consumer(1, T, "news", subscription_name="s", durable=True)
    c.close_consumer(1)
    c.send(tmsg("news", "old"))
    c.create_consumer(2, T, "news", subscription_name="s", durable=True, selector="x = 1")
    assert broker.stats("news", T).message_count == 0  # old subscription deleted


def test_durable_resubscribe_other_topic_replaces(broker: Broker) -> None:
    c = broker.connect(Recorder(), client_id="app")
    c.create_consumer(1, T, "news", subscription_name="s", durable=True)
    c.close_consumer(1)
    c.send(tmsg("news", "old"))
    c.create_consumer(2, T, "sports", subscription_name="s", durable=True)
    assert broker.stats("news", T).subscription_count == 0
    assert broker.stats("sports", T).subscription_count == 1


def test_durable_second_consumer_rejected(broker: Broker) -> None:
    c = broker.connect(Recorder(), client_id="app")
    c.create_consumer(1, T, "news", subscription_name="s", durable=True)
    with pytest.raises(IllegalBrokerState, match="active consumer"):
        c.create_consumer(2, T, "news", subscription_name="s", durable=True)


def test_shared_subscription_splits_messages(broker: Broker) -> None:
    r1, r2 = Recorder(), Recorder()
    c1, c2 = broker.connect(r1), broker.connect(r2)
    c1.create_consumer(1, T, "news", subscription_name="pool", shared=True, credit=10)
    c2.create_consumer(1, T, "news", subscription_name="pool", shared=True, credit=10)
    for i in range(4):
        c1.send(tmsg("news", i))
    assert r1.bodies() == [0, 2] and r2.bodies() == [1, 3]
    assert broker.stats("news", T).subscription_count == 1
    c1.close_consumer(1)
    assert broker.stats("news", T).subscription_count == 1
    c2.close_consumer(1)
    assert broker.stats("news", T).subscription_count == 0  # non-durable: gone


def test_shared_durable_subscription(broker: Broker) -> None:
    r1, r2 = Recorder(), Recorder()
    c1, c2 = broker.connect(r1), broker.connect(r2)
    for c in (c1, c2):
        c.create_consumer(1, T, "news", subscription_name="sd", shared=True, durable=True, credit=9)
    c1.send(tmsg("news", "a"))
    c1.send(tmsg("news", "b"))
    assert len(r1.take()) == 1 and len(r2.take()) == 1
    c1.close()
    c2.close()  # unacked deliveries return; the durable subscription stays
    c3 = broker.connect(Recorder())
    c3.send(tmsg("news", "kept"))
    s = broker.stats("news", T)
    assert (s.subscription_count, s.message_count) == (1, 3)


def test_shared_subscription_rejects_no_local(conn: ServerConnection) -> None:
    with pytest.raises(InvalidSubscription, match="no_local"):
        conn.create_consumer(1, T, "news", subscription_name="p", shared=True, no_local=True)


def test_unsubscribe(broker: Broker) -> None:
    c = broker.connect(Recorder(), client_id="app")
    c.create_consumer(1, T, "news", subscription_name="s", durable=True)
    with pytest.raises(IllegalBrokerState, match="active consumer"):
        c.unsubscribe("s")
    c.close_consumer(1)
    c.send(tmsg("news", "a"))
    c.unsubscribe("s")
    assert broker.stats("news", T).subscription_count == 0
    with pytest.raises(InvalidSubscription, match="no durable subscription"):
        c.unsubscribe("s")


def test_no_local(broker: Broker) -> None:
    r1, r2 = Recorder(), Recorder()
    c1, c2 = broker.connect(r1), broker.connect(r2)
    c1.create_consumer(1, T, "chat", no_local=True, credit=10)
    c1.send(tmsg("chat", "mine"))
    c2.send(tmsg("chat", "theirs"))
    assert r1.bodies() == ["theirs"]


def test_topic_stats_sum_over_subscriptions(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec, client_id="app")
    c.create_consumer(1, T, "news", credit=1)
    c.create_consumer(2, T, "news", subscription_name="d", durable=True, credit=0)
    c.send(tmsg("news", "a"))
    c.send(tmsg("news", "b"))
    tag = rec.take()[0].delivery_tag
    c.ack([tag])
    s = broker.stats("news", T)
    assert (s.subscription_count, s.consumer_count, s.enqueued, s.dequeued) == (2, 2, 4, 1)
    assert (s.message_count, s.delivering_count) == (3, 0)
