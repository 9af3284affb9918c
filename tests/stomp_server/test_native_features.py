"""Features the bundled broker carries natively over STOMP (issue 11, item 13): a queue
browser in ActiveMQ's dialect (``browser:true``, then a ``browser:end`` marker), and JMS
2.0 shared subscriptions (``jmspy-shared-subscription`` / ``jmspy-shared-durable-
subscription``: one copy per subscription, spread over its consumers, across
connections). Sans-I/O sessions on one broker."""

from __future__ import annotations

from typing import Any

from test_dialects import Client, fill

from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.core.security import SecurityPolicy


def test_browser_sees_a_snapshot_in_order_then_the_end_marker_and_consumes_nothing() -> None:
    broker = Broker()
    producer = Client(broker)
    for i, region in enumerate(["EU", "US", "EU"]):
        producer.send(f"SEND\ndestination:/queue/b\nregion:{region}\n\nm{i}\0".encode())
    browser = Client(broker)
    frames = browser.send(b"SUBSCRIBE\nid:br\ndestination:/queue/b\nbrowser:true\n"
                          b"receipt:r\n\n\0")
    # the SUBSCRIBE's RECEIPT first, as for every subscription, then the snapshot
    receipt, *frames = frames
    assert receipt.command == "RECEIPT"
    assert [f.command for f in frames] == ["MESSAGE"] * 4
    assert [f.body for f in frames[:3]] == [b"m0", b"m1", b"m2"]
    assert frames[3].header("browser") == "end" and frames[3].body == b""
    assert all(f.header("subscription") == "br" for f in frames[:4])
    selected = browser.send(b"SUBSCRIBE\nid:eu\ndestination:/queue/b\nbrowser:true\n"
                            b"selector:region = 'EU'\n\n\0")
    assert [f.body for f in selected] == [b"m0", b"m2", b""]
    assert browser.send(b"UNSUBSCRIBE\nid:br\nreceipt:u\n\n\0")[0].command == "RECEIPT"
    assert broker.stats("b").message_count == 3  # nothing consumed
    consumer = Client(broker)
    got = consumer.send(b"SUBSCRIBE\nid:c\ndestination:/queue/b\n\n\0")
    assert [f.body for f in got] == [b"m0", b"m1", b"m2"]


def test_browser_needs_the_browse_permission_and_a_queue() -> None:
    policy = SecurityPolicy(iterations=1_000)
    policy.add_user("u", "pw", roles=["r"])
    policy.add_permission("b", "queue", send=["r"], consume=["r"])
    broker = Broker(security=policy)
    client = Client(broker, b"login:u\npasscode:pw\n")
    (err,) = client.send(b"SUBSCRIBE\nid:br\ndestination:/queue/b\nbrowser:true\n\n\0")
    assert err.command == "ERROR" and err.header("message").startswith(
        "user 'u' may not browse queue 'b'")
    other = Client(Broker())
    (err,) = other.send(b"SUBSCRIBE\nid:br\ndestination:/topic/t\nbrowser:true\n\n\0")
    assert err.header("message") == "browser:true on a topic"


def _shared(header: bytes, broker: Broker, n: int) -> list[Client]:
    clients = []
    for i in range(n):
        c = Client(broker)
        c.send(f"SUBSCRIBE\nid:s{i}\ndestination:/topic/news\nack:auto\n".encode() + header
               + b"\n\0")
        clients.append(c)
    return clients


def test_shared_subscription_delivers_one_copy_spread_over_its_consumers() -> None:
    broker = Broker()
    consumers = _shared(b"jmspy-shared-subscription:news-workers\n", broker, 2)
    plain = _shared(b"", broker, 1)[0]  # an ordinary subscriber gets its own copy of each
    fill(broker, 6, b"/topic/news")
    got: list[Any] = []
    for c in consumers:
        got.append(c.send(b""))
    bodies = sorted(f.body for frames in got for f in frames)
    assert bodies == sorted(f"m{i}".encode() for i in range(6))  # each once
    assert all(frames for frames in got)  # spread over both consumers
    assert len(plain.send(b"")) == 6
    for c in consumers:
        c.session.connection_lost()
    assert not any("news-workers" in n for n in broker.subscription_names())  # non-durable


def test_shared_durable_subscription_keeps_messages_with_no_consumer() -> None:
    broker = Broker()
    first = _shared(b"jmspy-shared-durable-subscription:audit\n", broker, 1)[0]
    first.session.connection_lost()
    fill(broker, 2, b"/topic/news")
    again = Client(broker)
    got = again.send(b"SUBSCRIBE\nid:a\ndestination:/topic/news\n"
                     b"jmspy-shared-durable-subscription:audit\n\n\0")
    assert [f.body for f in got] == [b"m0", b"m1"]
