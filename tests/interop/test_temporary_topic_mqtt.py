"""``create_temporary_topic()`` over mqtt:// on Mosquitto (MQTT has no temporary queues,
but a temporary topic is a uniquely named topic, which MQTT carries as it is): a reply
published to it by another connection reaches its subscriber, and the temporary queue is
still refused with the reason."""

from __future__ import annotations

import pytest
from brokers import BrokerProcess

from jmspy import ConnectionFactory, TextMessage, UnsupportedFeatureException

WAIT = 20.0  # s: receive() timeouts, never reached when the behaviour is right


def test_a_temporary_topic_carries_a_reply_over_mqtt(mosquitto: BrokerProcess) -> None:
    factory = ConnectionFactory(f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}")
    with factory.create_connection() as requester, factory.create_connection() as responder:
        session = requester.create_session()
        replies = session.create_temporary_topic()
        consumer = session.create_consumer(replies)
        requester.start()
        other = responder.create_session()
        other.create_producer(replies).send(other.create_text_message("pong"))
        answer = consumer.receive(WAIT)
        assert isinstance(answer, TextMessage) and answer.text == "pong"
        consumer.close()
        replies.delete()
        with pytest.raises(UnsupportedFeatureException, match="temporary"):
            session.create_temporary_queue()
