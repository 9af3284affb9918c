"""Memory isolation over STOMP, in the default configuration: a topic subscriber that never
acknowledges holds back the RECEIPTs of SENDs to its topic only. SENDs to a queue whose
consumer waits, to another topic and a first persistent SEND to a new queue keep getting
their RECEIPTs; a held send with ``jmspy-send-timeout`` fails with an ERROR naming the
destination and its limit.

The first tests run the STOMP session in memory (stomp_pair.py): every RECEIPT that
arrived, or did not, is a fact of the frames written, and time passes only on the fake
clock. The last one runs the same case against the STOMP server on a socket with stomp.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flow_support import until
from stomp_pair import StompClient, StompPair
from stomp_support import Collector, ServerHandle

from jmspy.broker_ref.core import DestinationKind
from jmspy.broker_ref.core.broker import DEFAULT_MEMORY_LIMIT
from jmspy.stomp_frames import Frame, header_dict

TOPIC = DestinationKind.TOPIC
#: 64 KiB bodies: a destination's default share (6.4 MB) holds about a hundred
BODY = "x" * 64 * 1024
SHARE_MESSAGES = DEFAULT_MEMORY_LIMIT // 10 // len(BODY)


def receipted(client: StompClient, destination: str, receipt: str, **headers: str) -> bool:
    """SEND one message with a receipt: True when its RECEIPT came back at once."""
    out = client.frame("SEND", {"destination": destination, "receipt": receipt,
                                "persistent": "false", **headers}, BODY.encode())
    return any(f.command == "RECEIPT" and header_dict(f.headers)["receipt-id"] == receipt
               for f in out)


def receipt_ids(client: StompClient) -> list[str]:
    return [header_dict(f.headers)["receipt-id"] for f in client.others
            if f.command == "RECEIPT"]


def bodies_of(frames: list[Frame]) -> list[str]:
    return [f.body.decode() for f in frames if f.command == "MESSAGE"]


def stuck_topic(pair: StompPair) -> tuple[StompClient, str]:
    """A subscriber that takes one message of topic 'prices' and never acknowledges it,
    and a producer sending receipted 64 KiB messages until one RECEIPT is withheld."""
    stuck = pair.client()
    stuck.subscribe("/topic/prices", "s", ack="client-individual",
                    **{"activemq.prefetchSize": "1"})
    producer = pair.client()
    for i in range(10 * SHARE_MESSAGES):
        if not receipted(producer, "/topic/prices", f"t{i}"):
            return producer, f"t{i}"
    raise AssertionError("the topic's producer was never held")


def test_a_stuck_topic_subscriber_withholds_only_its_topics_receipts() -> None:
    pair = StompPair()  # the default configuration: 64 MB, 10 % per destination
    topic_producer, held = stuck_topic(pair)
    assert int(held[1:]) in range(SHARE_MESSAGES, SHARE_MESSAGES + 3)
    assert pair.stats("prices", "topic")["blockedProducers"] == 1

    worker = pair.client()
    worker.subscribe("/queue/work", "w", ack="auto")  # a consumer that waits
    work_producer = pair.client()
    for i in range(5 * SHARE_MESSAGES):  # five shares' worth flows through
        assert receipted(work_producer, "/queue/work", f"w{i}"), i
    assert len(worker.messages) == 5 * SHARE_MESSAGES

    reader = pair.client()
    reader.subscribe("/topic/news", "n", ack="auto")
    news_producer = pair.client()
    for i in range(2 * SHARE_MESSAGES):
        assert receipted(news_producer, "/topic/news", f"n{i}"), i

    first = pair.client()
    assert receipted(first, "/queue/brand.new", "p", persistent="true")
    assert pair.stats("brand.new")["messageCount"] == 1
    # a queue nobody consumes takes its own share before its producer waits
    idle = pair.client()
    assert all(receipted(idle, "/queue/idle", f"i{i}") for i in range(SHARE_MESSAGES))

    # the topic's producer is still held: its RECEIPT has not come
    assert held not in receipt_ids(topic_producer)
    assert pair.stats("prices", "topic")["blockedProducers"] == 1
    # once the subscriber acknowledges, the topic drains and the RECEIPT comes
    stuck = pair.clients[0]
    stuck.frame("UNSUBSCRIBE", {"id": "s"})
    assert held in receipt_ids(topic_producer)


def test_a_held_send_with_a_timeout_fails_with_an_error_naming_its_destination_and_limit(
) -> None:
    pair = StompPair()
    stuck = pair.client()
    stuck.subscribe("/topic/prices", "s", ack="client-individual",
                    **{"activemq.prefetchSize": "1"})
    producer = pair.client()
    i = 0
    while receipted(producer, "/topic/prices", f"t{i}", **{"jmspy-send-timeout": "500"}):
        i += 1
        assert i < 10 * SHARE_MESSAGES
    assert pair.advance(499) == []
    [error] = [f for f in pair.advance(1) if f.command == "ERROR"]
    message = header_dict(error.headers)["message"]
    assert "topic 'prices' is over its memory limit of 6.4 MB" in message, message
    assert "destination-memory-percent = 10 %" in message
    assert header_dict(error.headers)["receipt-id"] == f"t{i}"


def test_over_a_socket_a_stuck_topic_subscriber_leaves_other_queues_receipted(
        server_factory: Callable[..., ServerHandle],
        raw: Callable[[ServerHandle], tuple[Any, Collector]]) -> None:
    h = server_factory()  # the default configuration
    stuck, _ = raw(h)
    stuck.subscribe("/topic/prices", id="s", ack="client-individual",
                    headers={"activemq.prefetchSize": "1"})
    topic_producer, topic_heard = raw(h)
    n = 2 * SHARE_MESSAGES
    for i in range(n):  # twice the topic's share, without waiting for receipts
        topic_producer.send("/topic/prices", BODY,
                            headers={"receipt": f"t{i}", "persistent": "false"})

    def topic_held() -> bool:
        return int(h.call(lambda: h.broker.stats(
            "prices", TOPIC).blocked_producers)) == 1

    until(topic_held, "the broker to hold the topic's producer")
    worker, got = raw(h)
    worker.subscribe("/queue/work", id="w", ack="auto")
    work_producer, work_heard = raw(h)
    for i in range(n):  # each RECEIPT before the next SEND, as a synchronous send
        work_producer.send("/queue/work", BODY,
                           headers={"receipt": f"w{i}", "persistent": "false"})
        work_heard.wait_receipt(f"w{i}", timeout=30)
    first, first_heard = raw(h)
    first.send("/queue/brand.new", "hello", headers={"receipt": "p", "persistent": "true"})
    first_heard.wait_receipt("p", timeout=30)
    got.wait_messages(n, timeout=30)
    assert f"t{n - 1}" not in topic_heard.receipts  # still held
    assert h.call(lambda: h.broker.stats("prices", TOPIC).blocked_producers) == 1
