"""``session.create_temporary_topic()``: a topic only its connection may subscribe to,
that anyone may publish to (a JMSReplyTo answer), ended by ``delete()``; the same over
vm:// and stomp://."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jmspy import (
    ConnectionFactory,
    IllegalStateException,
    InvalidDestinationException,
    Queue,
    TemporaryTopic,
    TextMessage,
    Topic,
)
from jmspy.destinations import destination_from_uri

WAIT = 10.0  # s: receive() timeouts, never reached when the behaviour is right


def _factories(vm_broker_factory: Callable[..., Any], transport: str
               ) -> tuple[ConnectionFactory, ConnectionFactory]:
    """Two factories on one fresh broker: the requester's over ``transport``, and the
    responder's over vm://."""
    host, vm = vm_broker_factory()
    if transport == "stomp":
        return ConnectionFactory(host.add_connector("stomp://127.0.0.1:0")), vm
    return vm, vm


@pytest.mark.parametrize("transport", ["vm", "stomp"])
def test_a_reply_sent_to_a_temporary_topic_named_in_reply_to_reaches_its_subscriber(
        vm_broker_factory: Callable[..., Any], transport: str) -> None:
    requester_factory, responder_factory = _factories(vm_broker_factory, transport)
    with requester_factory.create_connection() as requester, \
            responder_factory.create_connection() as responder:
        rs, ps = requester.create_session(), responder.create_session()
        replies = rs.create_temporary_topic()
        assert isinstance(replies, TemporaryTopic) and isinstance(replies, Topic)
        assert replies.name.startswith("temp-topic.")
        reply_consumer = rs.create_consumer(replies)
        requests = ps.create_consumer(Queue("requests"))
        requester.start()
        responder.start()
        request = rs.create_text_message("ping")
        request.reply_to = replies
        rs.create_producer(Queue("requests")).send(request)
        got = requests.receive(WAIT)
        assert got is not None and got.reply_to is not None
        assert got.reply_to.name == replies.name
        ps.create_producer(None).send(ps.create_text_message("pong"), got.reply_to)
        answer = reply_consumer.receive(WAIT)
        assert isinstance(answer, TextMessage) and answer.text == "pong"


def test_two_temporary_topics_have_different_names(vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        assert session.create_temporary_topic() != session.create_temporary_topic()


def test_another_connection_may_publish_but_not_subscribe(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as owner, vm_factory.create_connection() as other:
        topic = owner.create_session().create_temporary_topic()
        session = other.create_session()
        with pytest.raises(InvalidDestinationException,
                           match="temporary topic of another connection; only the connection "
                                 "that created it may subscribe"):
            session.create_consumer(topic)
        # As it arrives from another process (JMSReplyTo as text): a subscription is refused.
        parsed = destination_from_uri(str(topic))
        assert isinstance(parsed, TemporaryTopic) and parsed.name == topic.name
        with pytest.raises(InvalidDestinationException, match="another connection"):
            session.create_consumer(parsed)
        session.create_producer(topic).send(session.create_text_message("allowed"))
        with pytest.raises(IllegalStateException, match="only that one can delete it"):
            other_copy = TemporaryTopic(topic.name, other)
            other_copy.delete()


def test_delete_is_refused_while_a_consumer_is_on_it_then_the_topic_is_gone(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        topic = session.create_temporary_topic()
        consumer = session.create_consumer(topic)
        unbound = session.create_producer(None)
        with pytest.raises(IllegalStateException, match="still has a consumer"):
            topic.delete()
        consumer.close()
        topic.delete()
        with pytest.raises(InvalidDestinationException, match="was deleted"):
            session.create_consumer(topic)
        with pytest.raises(InvalidDestinationException, match="was deleted"):
            session.create_producer(topic)
        with pytest.raises(InvalidDestinationException, match="was deleted"):
            unbound.send(session.create_text_message("late"), topic)


def test_a_temporary_topic_of_a_closed_connection_cannot_be_deleted(
        vm_factory: ConnectionFactory) -> None:
    conn = vm_factory.create_connection()
    topic = conn.create_session().create_temporary_topic()
    conn.close()
    with pytest.raises(IllegalStateException, match="connection is closed"):
        topic.delete()


def test_a_temporary_topic_that_came_from_elsewhere_cannot_be_deleted_here() -> None:
    with pytest.raises(IllegalStateException, match="only the connection that created"):
        TemporaryTopic("temp-topic.abc").delete()
