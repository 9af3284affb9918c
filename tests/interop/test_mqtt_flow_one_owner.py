"""One owner of the consumer flow window over ``mqtt://`` (Mosquitto).

MQTT has no per-subscription credit: the broker pushes what it has (QoS 0 is bounded by
nothing), and the transport keeps what the consumer's window does not take yet in a
stash. How much of the stash may go is the consumer's flow accounting's to say
(``TransportListener.credit``); a transport that added up the ``credits`` of
``grant_credit`` itself would hand over what the accounting never granted.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from polling import wait_until
from window_owner import HandOvers, record_hand_overs

from jmspy import ConnectionFactory, DeliveryMode, Session

WAIT = 10.0


@pytest.fixture
def hand_overs(monkeypatch: pytest.MonkeyPatch) -> HandOvers:
    return record_hand_overs(monkeypatch)


def test_the_mqtt_stash_goes_to_the_consumer_as_its_accounting_grants(
    mosquitto: Any, hand_overs: HandOvers,
) -> None:
    url = f"mqtt://{mosquitto.host}:{mosquitto.mqtt_port}"
    factory = ConnectionFactory(url, imqConsumerFlowLimit=4, imqConsumerFlowThreshold=50)
    with factory.create_connection() as conn, ConnectionFactory(url).create_connection() as pc:
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        topic = session.create_topic(f"interop.owner.{uuid.uuid4().hex[:10]}")
        consumer = session.create_consumer(topic)
        conn.start()
        ps = pc.create_session()
        producer = ps.create_producer(topic)
        for i in range(12):  # QoS 0: Mosquitto pushes all twelve at once
            producer.send(ps.create_text_message(f"m{i}"),
                          delivery_mode=DeliveryMode.NON_PERSISTENT)
        transport: Any = conn._transport
        cid = consumer.consumer_id
        assert wait_until(lambda: transport.consumer_state(cid)["stashed"] == 8, WAIT)
        assert consumer.flow_stats().delivered == 4
        transport.grant_credit(cid, 3)  # a grant the accounting never made: nothing moves
        assert (consumer.flow_stats().delivered, transport.consumer_state(cid)["stashed"]
                ) == (4, 8)
        first = [consumer.receive(WAIT) for _ in range(3)]
        session.recover()  # all delivered go back to the head of the stash, then again
        texts = []
        for _ in range(12):
            message = consumer.receive(WAIT)
            assert message is not None, f"only {len(texts)} of 12 arrived"
            texts.append(message.text)
            message.acknowledge()
        stats = consumer.flow_stats()
    assert [m.text if m else None for m in first] == ["m0", "m1", "m2"]
    assert texts == [f"m{i}" for i in range(12)]
    assert stats.unconsumed + stats.outstanding_credit <= stats.limit
    assert hand_overs.over_credit() == []
