"""Selectors on queue consumers, topic subscriptions and browsing.

These exercise ``jmspy.selector`` (written separately); they fail until it lands.
"""

from __future__ import annotations

import pytest
from core_support import Recorder, msg, tmsg

from jmspy.broker_ref.core import (
    Broker,
    DestinationKind,
    SelectorError,
    ServerConnection,
)

Q = DestinationKind.QUEUE
T = DestinationKind.TOPIC


def test_queue_consumer_selector_filters(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(1, Q, "q", selector="region = 'EU'", credit=10)
    conn.create_consumer(2, Q, "q", selector="region = 'US'", credit=10)
    for i, region in enumerate(["EU", "US", "EU", "US"]):
        conn.send(msg("q", i, properties={"region": region}))
    got = rec.take()
    assert [(d.consumer_id, d.message.body) for d in got] == [(1, 0), (2, 1), (1, 2), (2, 3)]


def test_unmatched_message_stays_for_later_consumer(
    broker: Broker, conn: ServerConnection, rec: Recorder
) -> None:
    conn.create_consumer(1, Q, "q", selector="qty > 10", credit=10)
    conn.send(msg("q", "small", properties={"qty": 1}))
    conn.send(msg("q", "big", properties={"qty": 50}))
    assert rec.bodies() == ["big"]
    assert broker.stats("q").message_count == 2
    conn.create_consumer(2, Q, "q", credit=10)
    assert [(d.consumer_id, d.message.body) for d in rec.take()] == [(2, "small")]


def test_selector_consumers_keep_priority_order(conn: ServerConnection, rec: Recorder) -> None:
    for body, prio in [("a", 1), ("b", 9), ("c", 5)]:
        conn.send(msg("q", body, priority=prio, properties={"ok": True}))
    conn.create_consumer(1, Q, "q", selector="ok = TRUE", credit=10)
    assert rec.bodies() == ["b", "c", "a"]


def test_topic_subscription_selector_applied_at_routing(broker: Broker) -> None:
    c = broker.connect(Recorder(), client_id="app")
    c.create_consumer(
        1, T, "prices", subscription_name="eu", durable=True, selector="region = 'EU'"
    )
    c.close_consumer(1)
    c.send(tmsg("prices", "eu", properties={"region": "EU"}))
    c.send(tmsg("prices", "us", properties={"region": "US"}))
    s = broker.stats("prices", T)
    assert (s.message_count, s.enqueued) == (1, 1)


def test_header_identifiers(conn: ServerConnection, rec: Recorder) -> None:
    conn.create_consumer(
        1,
        Q,
        "q",
        selector="JMSPriority > 6 AND JMSDeliveryMode = 'NON_PERSISTENT' AND JMSType = 't'",
        credit=10,
    )
    conn.send(msg("q", "no", priority=9, persistent=True, jms_type="t"))
    conn.send(msg("q", "yes", priority=9, persistent=False, jms_type="t"))
    conn.send(msg("q", "low", priority=1, persistent=False, jms_type="t"))
    assert rec.bodies() == ["yes"]


def test_browse_with_selector(conn: ServerConnection) -> None:
    conn.send(msg("q", "a", properties={"n": 1}))
    conn.send(msg("q", "b", properties={"n": 2}))
    assert [m.body for m in conn.browse("q", "n >= 2")] == ["b"]


def test_invalid_selector_raises_selector_error(broker: Broker, conn: ServerConnection) -> None:
    with pytest.raises(SelectorError) as info:
        conn.create_consumer(1, Q, "q", selector="region = = 'EU'")
    assert info.value.code == "INVALID_SELECTOR"
    assert info.value.selector == "region = = 'EU'"
    with pytest.raises(SelectorError):
        conn.create_consumer(2, T, "t", selector="AND")
    assert broker.subscription_names() == []  # nothing left behind
