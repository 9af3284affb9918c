"""Wildcard topic subscriptions through the public API over ``vm://``.

``*`` matches one word, ``#`` or ``>`` any number (the address-settings syntax); the
received message's JMSDestination is the concrete topic it was sent to; sending to a
pattern raises InvalidDestinationException saying what to do instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from jmspy import Session
from jmspy.errors import InvalidDestinationException


def test_pattern_consumer_receives_matching_topics_with_their_destinations(
    vm_factory: Any,
) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        consumer = session.create_consumer(session.create_topic("prices.*"))
        producer = session.create_producer(None)
        conn.start()
        for name in ("prices.eu", "prices.eu.spot", "prices.us", "news.eu"):
            producer.send(session.create_text_message(name), destination=session.create_topic(name))
        got = [consumer.receive(timeout=2.0) for _ in range(2)]
        assert [m.text for m in got if m is not None] == ["prices.eu", "prices.us"]
        assert [m.destination.name for m in got if m is not None] == ["prices.eu", "prices.us"]
        assert consumer.receive(timeout=0.1) is None


def test_sending_to_a_pattern_is_an_invalid_destination(vm_factory: Any) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(session.create_topic("prices.>"))
        with pytest.raises(InvalidDestinationException, match="concrete topic"):
            producer.send(session.create_text_message("x"))
