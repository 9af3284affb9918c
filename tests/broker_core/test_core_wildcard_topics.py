"""Wildcard topic subscriptions: ``*`` is one word, ``#`` / ``>`` any number of words.

A subscription on a pattern gets every message sent to a concrete topic the pattern
matches, exactly once, with JMSDestination still the concrete topic; sending to a pattern
is refused (it names no topic).
"""

from __future__ import annotations

import pytest
from core_support import Recorder, tmsg

from jmspy.broker_ref.core import Broker, DestinationKind, InvalidDestination

T = DestinationKind.TOPIC


def test_star_matches_exactly_one_word(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, "orders.*", credit=10)
    for dest in ("orders.eu", "orders.us", "orders", "orders.eu.fast", "stock.eu"):
        c.send(tmsg(dest, dest))
    got = rec.take()
    assert [d.message.body for d in got] == ["orders.eu", "orders.us"]
    assert [d.message.destination for d in got] == ["orders.eu", "orders.us"]


@pytest.mark.parametrize("multi", ["#", ">"])
def test_multi_word_wildcard_matches_zero_or_more_words(
    broker: Broker, rec: Recorder, multi: str
) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, f"orders.{multi}", credit=10)
    for dest in ("orders", "orders.eu", "orders.eu.fast", "stock.eu"):
        c.send(tmsg(dest, dest))
    assert rec.bodies() == ["orders", "orders.eu", "orders.eu.fast"]


def test_exact_and_overlapping_patterns_each_get_one_copy(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, "orders.eu", credit=10)
    c.create_consumer(2, T, "orders.*", credit=10)
    c.create_consumer(3, T, "#", credit=10)
    c.send(tmsg("orders.eu", "x"))
    assert sorted(d.consumer_id for d in rec.take()) == [1, 2, 3]


def test_pattern_subscription_counts_in_its_own_stats(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, "orders.*")  # no credit: messages wait in the subscription
    c.send(tmsg("orders.eu", "a"))
    c.send(tmsg("orders.us", "b"))
    assert broker.stats("orders.*", T).message_count == 2
    assert broker.stats("orders.eu", T).message_count == 0  # no subscription of its own


def test_message_reaching_only_a_pattern_is_not_unrouted(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, "orders.*", credit=10)
    c.send(tmsg("orders.eu", "a"))
    c.send(tmsg("stock.eu", "b"))
    assert len(rec.take()) == 1
    assert broker.post_office.topics["orders.eu"].unrouted == 0
    assert broker.post_office.topics["stock.eu"].unrouted == 1


def test_durable_pattern_subscription_keeps_matches_while_offline(broker: Broker) -> None:
    c = broker.connect(Recorder(), client_id="app")
    c.create_consumer(1, T, "orders.>", subscription_name="s", durable=True)
    c.close_consumer(1)
    c.send(tmsg("orders.eu", "a"))
    c.send(tmsg("stock.eu", "no"))
    c.send(tmsg("orders.eu.fast", "b"))
    c.close()
    rec = Recorder()
    c2 = broker.connect(rec, client_id="app")
    c2.create_consumer(1, T, "orders.>", subscription_name="s", durable=True, credit=10)
    assert rec.bodies() == ["a", "b"]


def test_pattern_created_after_a_topic_is_used_still_matches(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.send(tmsg("orders.eu", "before"))  # creates the concrete topic, caches "no patterns"
    c.create_consumer(1, T, "orders.*", credit=10)
    c.send(tmsg("orders.eu", "after"))
    assert rec.bodies() == ["after"]


@pytest.mark.parametrize("name", ["orders.*", "orders.#", "orders.>", "*"])
def test_sending_to_a_pattern_is_refused_with_what_to_do(
    broker: Broker, rec: Recorder, name: str
) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, "orders.*", credit=10)
    with pytest.raises(InvalidDestination, match=r"wildcard pattern.*send to a concrete topic"):
        c.send(tmsg(name, "x"))
    assert rec.take() == []


def test_star_inside_a_word_is_literal(broker: Broker, rec: Recorder) -> None:
    c = broker.connect(rec)
    c.create_consumer(1, T, "orders.eu*", credit=10)
    c.send(tmsg("orders.eu*", "literal"))
    c.send(tmsg("orders.eux", "no"))
    assert rec.bodies() == ["literal"]
