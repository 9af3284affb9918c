"""Ring queues (seed 000) over STOMP, in memory: StompSessions joined to client parsers on
a fake clock (stomp_pair.py), so every scenario asserts exact order and counts with no
socket, no sleep and no "wait until nothing more arrives". The scenarios are those of
tests/broker_core/test_core_ring.py, seen through the STOMP wire."""

from __future__ import annotations

import pytest
from stomp_pair import StompPair

from jmspy.broker_ref.core import AddressSettings
from jmspy.stomp_frames import header_dict

RING = {"ring.#": AddressSettings(default_ring_size=3)}


def counts(pair: StompPair, name: str, *keys: str) -> tuple[int, ...]:
    st = pair.stats(name)
    return tuple(st[k] for k in keys)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_size_3_abcd_new_subscriber_receives_bcd_one_replaced(version: str) -> None:
    pair = StompPair(settings=RING)  # default-ring-size by match: auto-created queue
    c = pair.client(version)
    c.send("/queue/ring.abcd", "A", "B", "C")
    assert counts(pair, "ring.abcd", "messageCount") == (3,)
    c.send("/queue/ring.abcd", "D")
    assert counts(pair, "ring.abcd", "messageCount", "messagesReplaced", "deadLettered") == (
        3, 1, 0)
    c.subscribe("/queue/ring.abcd", "s")
    assert c.bodies() == ["B", "C", "D"]  # and nothing else: the session is quiet
    c.send("/queue/plain", *"ABCDE")  # a queue that matches no ring setting is unbounded
    assert counts(pair, "plain", "messageCount") == (5,)


def test_ring_explicit_ring_size_beats_default_ring_size() -> None:
    pair = StompPair(settings=RING)
    pair.broker.create_queue("ring.own", ring_size=2)
    c = pair.client()
    c.send("/queue/ring.own", *"ABCDE")
    assert counts(pair, "ring.own", "messageCount", "messagesReplaced") == (2, 3)
    c.subscribe("/queue/ring.own", "s", ack="client-individual")
    assert c.bodies() == ["D", "E"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_in_delivery_subscriber_holds_abcd_then_disconnects_bcd_remain(
    version: str,
) -> None:
    pair = StompPair(settings=RING)
    consumer = pair.client(version)
    consumer.subscribe("/queue/ring.foo", "c", ack="client-individual",
                       **{"activemq.prefetchSize": "10"})
    producer = pair.client()
    for i, body in enumerate("ABCD", start=1):
        producer.send("/queue/ring.foo", body)
        # in delivery: not evictable, so messageCount goes one over the ring size
        assert counts(pair, "ring.foo", "messageCount", "deliveringCount") == (i, i)
    assert counts(pair, "ring.foo", "messagesReplaced") == (0,)
    assert consumer.bodies() == ["A", "B", "C", "D"]
    consumer.disconnect()  # the 4 unacked go back to the head in reverse order: A dropped
    assert counts(pair, "ring.foo", "messageCount", "messagesReplaced", "consumerCount",
                  "deliveringCount") == (3, 1, 0, 0)
    again = pair.client(version)
    again.subscribe("/queue/ring.foo", "d", ack="client-individual")
    assert again.bodies() == ["B", "C", "D"]
    heads = [header_dict(f.headers) for f in again.messages]
    assert all(h["redelivered"] == "true" and h["jmspy-delivery-count"] == "2" for h in heads)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_transaction_abort_of_acks_readds_to_head_and_drops_head_most(
    version: str,
) -> None:
    pair = StompPair(settings=RING)
    c = pair.client(version)
    c.subscribe("/queue/ring.tx", "s", ack="client-individual",
                **{"activemq.prefetchSize": "4"})
    c.send("/queue/ring.tx", *"ABCD")
    first = list(c.messages)
    assert c.bodies() == ["A", "B", "C", "D"]
    assert counts(pair, "ring.tx", "deliveringCount") == (4,)
    c.frame("BEGIN", {"transaction": "t1"})
    for frame in first:
        c.ack(frame, transaction="t1")
    c.frame("ABORT", {"transaction": "t1"})  # a rollback: the acks become cancels
    again = c.messages[4:]  # the window refills: what came back to the queue
    assert [m.body.decode() for m in again] == ["B", "C", "D"]
    assert all(header_dict(f.headers)["redelivered"] == "true" for f in again)
    assert counts(pair, "ring.tx", "messageCount", "messagesReplaced", "deadLettered") == (
        3, 1, 0)


def test_ring_scheduled_message_counts_then_is_dropped_on_arrival_at_full_ring() -> None:
    pair = StompPair(settings=RING)
    c = pair.client()
    c.send("/queue/ring.sched", "A", AMQ_SCHEDULED_DELAY="300")
    assert counts(pair, "ring.sched", "messageCount", "scheduledCount") == (1, 1)
    for i, body in enumerate("BCD", start=2):
        c.send("/queue/ring.sched", body)
        assert counts(pair, "ring.sched", "messageCount", "scheduledCount") == (i, 1)
    assert counts(pair, "ring.sched", "messagesReplaced") == (0,)  # 4: A not on it yet
    pair.advance(299)
    assert counts(pair, "ring.sched", "scheduledCount") == (1,)  # not due yet
    pair.advance(1)
    # A was put on the head of a full ring: A removed
    assert counts(pair, "ring.sched", "messageCount", "messagesReplaced", "scheduledCount") == (
        3, 1, 0)
    c.subscribe("/queue/ring.sched", "s")
    assert c.bodies() == ["B", "C", "D"]


def test_ring_size_lowered_at_runtime_deletes_nothing_at_once_then_never_grows() -> None:
    pair = StompPair(settings={"ring.#": AddressSettings(default_ring_size=5)})
    c = pair.client()
    c.send("/queue/ring.low", *"ABCDE")
    pair.broker.set_ring_size("ring.low", 3)
    assert counts(pair, "ring.low", "messageCount") == (5,)  # nothing deleted at once
    c.send("/queue/ring.low", "F")  # one in, one out: never grows
    assert counts(pair, "ring.low", "messageCount", "messagesReplaced") == (5, 1)
    c.subscribe("/queue/ring.low", "s")  # consumption shrinks it
    assert c.bodies() == ["B", "C", "D", "E", "F"]
    assert counts(pair, "ring.low", "messageCount") == (0,)
    c.frame("UNSUBSCRIBE", {"id": "s"})
    c.send("/queue/ring.low", *"GHIJ")  # now the new size holds
    assert counts(pair, "ring.low", "messageCount", "messagesReplaced") == (3, 2)
    c.subscribe("/queue/ring.low", "t")
    assert c.bodies()[5:] == ["H", "I", "J"]
