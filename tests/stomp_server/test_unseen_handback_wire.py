"""What a consumer only prefetched goes back unmarked, over ``stomp://`` to the bundled
broker as over ``vm://``: a closed consumer's or a ``recover()``'s hand-back marks
``JMSRedelivered`` (and raises ``JMSXDeliveryCount``) only on the messages the
application was given. Open MQ's client does the same with its redeliver's "delivered"
flags; without it every consumer that closes with a full window would mark messages
nobody read."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from jmspy import Message, Session


@pytest.fixture
def factory(bundled: Callable[..., Any]) -> Any:
    return bundled(imqConsumerFlowLimit=10)


def _fill(conn: Any, queue: str, n: int) -> None:
    session = conn.create_session()
    producer = session.create_producer(session.create_queue(queue))
    for i in range(n):
        producer.send(session.create_text_message(str(i)))
    session.close()


def _receive_all(factory: Any, queue: str, n: int) -> list[Message]:
    """On a connection of its own: the marks are the broker's, not the first client's
    memory of what it saw."""
    with factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        consumer = session.create_consumer(session.create_queue(queue))
        conn.start()
        got = []
        while len(got) < n:
            message = consumer.receive(10)
            assert message is not None, f"only {len(got)} of {n} came back"
            got.append(message)
        return got


def _marks(messages: list[Message]) -> list[tuple[str, bool, int]]:
    return [(m.text, m.redelivered, m.get_int_property("JMSXDeliveryCount"))
            for m in messages]


def _prefetched(consumer: Any, n: int) -> None:
    deadline = time.monotonic() + 10
    while consumer.flow_stats().buffered < n and time.monotonic() < deadline:
        time.sleep(0.01)  # waits for the broker to fill the consumer's window
    assert consumer.flow_stats().buffered >= n


def test_a_closed_consumer_returns_its_prefetched_messages_unmarked(factory: Any) -> None:
    with factory.create_connection() as conn:
        _fill(conn, "unseen.close", 20)
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(session.create_queue("unseen.close"))
        conn.start()
        seen = [consumer.receive(10) for _ in range(3)]  # given to the app, never acked
        assert [m.text for m in seen if m is not None] == ["0", "1", "2"]
        _prefetched(consumer, 7)
        consumer.close()
    again = _receive_all(factory, "unseen.close", 20)
    assert _marks(again) == ([(str(i), True, 2) for i in range(3)]
                             + [(str(i), False, 1) for i in range(3, 20)])


def test_recover_marks_what_the_application_saw_and_not_what_was_prefetched(
        factory: Any) -> None:
    with factory.create_connection() as conn:
        _fill(conn, "unseen.recover", 20)
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(session.create_queue("unseen.recover"))
        conn.start()
        for _ in range(3):
            assert consumer.receive(10) is not None
        _prefetched(consumer, 7)
        session.recover()
        again = []
        while len(again) < 20:
            message = consumer.receive(10)
            assert message is not None, f"only {len(again)} of 20 came back"
            again.append(message)
            message.acknowledge()  # frees the window for the rest
    assert _marks(again) == ([(str(i), True, 2) for i in range(3)]
                             + [(str(i), False, 1) for i in range(3, 20)])
