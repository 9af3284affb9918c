"""The bundled broker honours its peers' STOMP dialects (issue 11, item 16), so code
written for RabbitMQ or ActiveMQ keeps its flow control on it: ``prefetch-count``
(RabbitMQ; 0 = no limit) and ``activemq.prefetchSize`` (ActiveMQ) bound a subscription's
unacknowledged messages, kept full as those brokers do; ``jmspy-flow-limit`` wins over
both; every MESSAGE carries ``redelivered`` (``false`` too, as RabbitMQ sends it); and a
NACK with ``requeue:false`` (RabbitMQ) dead-letters the message instead of redelivering it.
Sans-I/O: a StompSession per client on one broker, no sockets."""

from __future__ import annotations

from typing import Any

import pytest

from jmspy import _speedups
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp.protocol import StompSession

_codec: Any = _speedups.load("stomp_codec")


class Client:
    """A StompSession and a client-side parser joined in memory (no socket)."""

    def __init__(self, broker: Broker, credentials: bytes = b"") -> None:
        self.session = StompSession(broker)
        self.parser = _codec.FrameParser("1.2", None, False)
        assert [f.command for f in self.send(
            b"CONNECT\naccept-version:1.2\nhost:/\n" + credentials + b"\n\0")
        ] == ["CONNECTED"]

    def send(self, data: bytes) -> list[Any]:
        self.session.receive_data(data)
        self.parser.feed(self.session.data_to_send())
        self.session.written()
        return [f for f in iter(self.parser.next_frame, None) if f is not _codec.HEARTBEAT]


def fill(broker: Broker, n: int, queue: bytes = b"/queue/d") -> None:
    producer = Client(broker)
    for i in range(n):
        producer.send(b"SEND\ndestination:" + queue + f"\n\nm{i}\0".encode())


@pytest.mark.parametrize(
    ("header", "window", "refill"),
    [(b"prefetch-count:3", 3, 1), (b"activemq.prefetchSize:3", 3, 1),
     # jmspy's own header wins, with its Open MQ threshold (50%: no top-up after one ACK)
     (b"prefetch-count:3\njmspy-flow-limit:5", 5, 0),
     (b"prefetch-count:0", 20, 0)],
)
def test_peer_prefetch_headers_bound_and_refill_the_window(
    header: bytes, window: int, refill: int
) -> None:
    broker = Broker()
    fill(broker, 20)
    consumer = Client(broker)
    got = consumer.send(b"SUBSCRIBE\nid:s\ndestination:/queue/d\nack:client-individual\n"
                        + header + b"\n\n\0")
    assert len(got) == window  # prefetch-count 0 means no limit (RabbitMQ)
    more = consumer.send(b"ACK\nid:" + got[0].header("ack").encode() + b"\n\n\0")
    # the peers keep the window full: one ACK, one more message
    assert len(more) == refill


def test_every_message_says_whether_it_is_redelivered() -> None:
    broker = Broker()
    fill(broker, 1)
    consumer = Client(broker)
    (first,) = consumer.send(b"SUBSCRIBE\nid:s\ndestination:/queue/d\nack:client-individual"
                             b"\n\n\0")
    assert first.header("redelivered") == "false"
    (again,) = consumer.send(b"NACK\nid:" + first.header("ack").encode() + b"\n\n\0")
    assert again.header("redelivered") == "true"


def test_nack_with_requeue_false_dead_letters_the_message_with_a_reason() -> None:
    broker = Broker()
    fill(broker, 2)
    consumer = Client(broker)
    first, second = consumer.send(b"SUBSCRIBE\nid:s\ndestination:/queue/d\n"
                                  b"ack:client-individual\n\n\0")
    assert consumer.send(b"NACK\nid:" + first.header("ack").encode() + b"\nrequeue:false"
                         b"\n\n\0") == []  # not redelivered
    again = consumer.send(b"NACK\nid:" + second.header("ack").encode() + b"\n\n\0")
    assert [f.body for f in again] == [b"m1"]  # a plain NACK still requeues
    stats = broker.stats("d")
    assert (stats.dead_lettered, stats.message_count, stats.delivering_count) == (1, 1, 1)
    dlq = Client(broker)
    (dead,) = dlq.send(b"SUBSCRIBE\nid:x\ndestination:/queue/DLQ\n\n\0")
    assert dead.body == b"m0"
    assert dead.header("JMS_jmspy_DeadLetterReason") == (
        "rejected by the consumer (NACK with requeue:false)")


@pytest.mark.parametrize("named", [b"", b"x-queue-name:prices-audit\n"])
def test_rabbitmq_durable_topic_subscription_keeps_messages_and_is_deleted_by_unsubscribe(
    named: bytes
) -> None:
    broker = Broker()
    durable = b"durable:true\nauto-delete:false\n" + named
    first = Client(broker)
    first.send(b"SUBSCRIBE\nid:audit\ndestination:/topic/prices\nack:client-individual\n"
               + durable + b"\n\0")
    first.session.connection_lost()  # gone: the subscription stays
    fill(broker, 2, b"/topic/prices")
    again = Client(broker)  # no client id needed, as on RabbitMQ
    got = again.send(b"SUBSCRIBE\nid:audit\ndestination:/topic/prices\n"
                     b"ack:client-individual\n" + durable + b"\n\0")
    assert [f.body for f in got] == [b"m0", b"m1"]
    expected = "prices-audit" if named else "audit"
    assert broker.subscription_names() == [f"sub://{expected}"]
    again.send(b"UNSUBSCRIBE\nid:audit\n" + durable + b"\n\0")
    assert broker.subscription_names() == []
