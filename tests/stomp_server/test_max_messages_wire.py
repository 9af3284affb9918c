"""The destination option ``consumer.maxMessages``, over ``vm://`` and over ``stomp://`` to
the bundled broker: a consumer is sent at most that many messages in all, whatever its
window; the rest stay on the queue for the next consumer, none of them marked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jmspy import Queue, Session
from jmspy.capabilities import RefusedFeatureException
from jmspy.errors import InvalidDestinationException


@pytest.fixture
def factory(bundled: Callable[..., Any]) -> Any:
    return bundled(imqConsumerFlowLimit=2)


def _fill(conn: Any, n: int) -> None:
    session = conn.create_session()
    producer = session.create_producer(Queue("capped"))
    for i in range(n):
        producer.send(session.create_text_message(str(i)))
    session.close()


def test_a_consumer_is_sent_no_more_than_its_maximum_and_the_rest_stay_queued(
        factory: Any) -> None:
    with factory.create_connection() as conn:
        _fill(conn, 10)
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        capped = session.create_consumer(Queue("capped?consumer.maxMessages=3"))
        conn.start()
        got = [capped.receive(5) for _ in range(3)]
        assert [m.text for m in got if m is not None] == ["0", "1", "2"]
        assert capped.receive(0.3) is None  # spent: nothing more comes
        assert capped.flow_stats().buffered == 0
        capped.close()
        rest = session.create_consumer(Queue("capped"))
        again = [rest.receive(5) for _ in range(7)]
    assert [(m.text, m.redelivered) for m in again if m is not None] == [
        (str(i), False) for i in range(3, 10)]


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_a_bad_maximum_is_refused_when_the_consumer_is_made(factory: Any, value: str) -> None:
    with factory.create_connection() as conn:
        session = conn.create_session()
        with pytest.raises(InvalidDestinationException, match=r"consumer\.maxMessages"):
            session.create_consumer(Queue(f"capped?consumer.maxMessages={value}"))


def test_a_broker_without_the_option_refuses_it_by_name() -> None:
    from jmspy.transports.destination_options import resolve

    with pytest.raises(RefusedFeatureException, match=r"consumer\.maxMessages"):
        resolve("stomp", "activemq", Queue("q?consumer.maxMessages=5"), where="ActiveMQ")
