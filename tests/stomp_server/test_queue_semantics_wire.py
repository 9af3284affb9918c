"""Issue 3 item 3: every queue semantic proved over the wire — unmodified stomp.py (1.2, and
1.1 where parametrized) sending real frames over loopback to the STOMP server, asserting on
what the client receives and on the broker's counters (read on the server loop thread).

Ring queues follow seed 000 exactly (the scenarios of tests/broker_core/test_core_ring.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from stomp_support import Collector, ServerHandle

from jmspy.broker_ref.core import AddressSettings

Connect = Callable[..., tuple[Any, Collector]]
RING = {"ring.#": AddressSettings(default_ring_size=3)}


# ------------------------------------------------------------------ helpers


def send_bodies(conn: Any, dest: str, bodies: str | list[str], lst: Collector,
                **headers: str) -> None:
    """SEND each body (in order), the last with a receipt, and wait for that receipt: the
    server has acted on every frame before this returns."""
    items = list(bodies)
    rid = f"sent-{dest}-{items[-1]}-{time.monotonic_ns()}"
    for i, body in enumerate(items):
        extra = {"receipt": rid} if i == len(items) - 1 else {}
        conn.send(dest, body, headers=dict(headers), **extra)
    lst.wait_receipt(rid)


def sync(conn: Any, lst: Collector) -> None:
    """A receipt round trip: every frame sent before it has been processed."""
    rid = f"sync-{time.monotonic_ns()}"
    conn.send("/queue/probe.sync", "", receipt=rid)
    lst.wait_receipt(rid)


def ack(conn: Any, version: str, frame: Any, **kw: Any) -> None:
    """ACK ``frame`` the way the negotiated version wants it."""
    h = frame.headers
    if version == "1.2":
        conn.ack(h["ack"], **kw)
    else:
        conn.ack(h["message-id"], h["subscription"], **kw)


def nack(conn: Any, version: str, frame: Any) -> None:
    h = frame.headers
    if version == "1.2":
        conn.nack(h["ack"])
    else:
        conn.nack(h["message-id"], h["subscription"])


def bodies_of(frames: list[Any]) -> list[str]:
    return [f.body for f in frames]


def settle(lst: Collector, n: int, quiet: float = 0.05) -> list[Any]:
    """Wait for ``n`` messages, then make sure no more arrive for ``quiet`` seconds."""
    lst.wait_messages(n)
    time.sleep(quiet)
    with lst.lock:
        got = list(lst.messages)
    assert len(got) == n, f"expected exactly {n} messages, got {bodies_of(got)}"
    return got


# ------------------------------------------------------------------ ring queues (seed 000)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_size_3_abcd_new_subscriber_receives_bcd_one_replaced(
    server_factory: Callable[..., ServerHandle], connect: Connect, version: str
) -> None:
    h = server_factory(settings=RING)  # default-ring-size by match: auto-created queue
    conn, lst = connect(version, handle=h)
    send_bodies(conn, "/queue/ring.abcd", "ABC", lst)
    assert h.stats("ring.abcd")["messageCount"] == 3
    send_bodies(conn, "/queue/ring.abcd", "D", lst)
    st = h.stats("ring.abcd")
    assert (st["messageCount"], st["messagesReplaced"], st["deadLettered"]) == (3, 1, 0)
    conn.subscribe("/queue/ring.abcd", id="s", ack="auto")
    assert bodies_of(settle(lst, 3)) == ["B", "C", "D"]
    # a queue that matches no ring setting is unbounded
    send_bodies(conn, "/queue/plain", "ABCDE", lst)
    assert h.stats("plain")["messageCount"] == 5


def test_ring_explicit_ring_size_beats_default_ring_size(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = server_factory(settings=RING)
    h.call(lambda: h.broker.create_queue("ring.own", ring_size=2))
    conn, lst = connect("1.2", handle=h)
    send_bodies(conn, "/queue/ring.own", "ABCDE", lst)
    st = h.stats("ring.own")
    assert (st["messageCount"], st["messagesReplaced"]) == (2, 3)
    conn.subscribe("/queue/ring.own", id="s")
    assert bodies_of(settle(lst, 2)) == ["D", "E"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_in_delivery_scenario_subscriber_holds_abcd_then_disconnects_bcd_remain(
    server_factory: Callable[..., ServerHandle], connect: Connect, version: str
) -> None:
    h = server_factory(settings=RING)
    consumer, clst = connect(version, handle=h)
    consumer.subscribe("/queue/ring.foo", id="c", ack="client-individual",
                       headers={"activemq.prefetchSize": "10"})
    producer, plst = connect("1.2", handle=h)
    for i, body in enumerate("ABCD", start=1):
        send_bodies(producer, "/queue/ring.foo", body, plst)
        clst.wait_messages(i)
        h.wait_stats("ring.foo", "deliveringCount", i)
        st = h.stats("ring.foo")
        # in delivery: not evictable, so messageCount goes one over the ring size
        assert (st["messageCount"], st["deliveringCount"]) == (i, i)
    assert h.stats("ring.foo")["messagesReplaced"] == 0
    assert bodies_of(clst.messages) == ["A", "B", "C", "D"]
    consumer.disconnect()  # the 4 unacked go back to the head in reverse order: A dropped
    h.wait_stats("ring.foo", "deliveringCount", 0)
    st = h.stats("ring.foo")
    assert (st["messageCount"], st["messagesReplaced"], st["consumerCount"]) == (3, 1, 0)
    again, alst = connect(version, handle=h)
    again.subscribe("/queue/ring.foo", id="d", ack="client-individual")
    got = settle(alst, 3)
    assert bodies_of(got) == ["B", "C", "D"]
    assert all(f.headers["redelivered"] == "true" for f in got)
    assert all(f.headers["jmspy-delivery-count"] == "2" for f in got)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_ring_transaction_abort_of_acks_readds_to_head_and_drops_head_most(
    server_factory: Callable[..., ServerHandle], connect: Connect, version: str
) -> None:
    h = server_factory(settings=RING)
    conn, lst = connect(version, handle=h)
    conn.subscribe("/queue/ring.tx", id="s", ack="client-individual",
                   headers={"activemq.prefetchSize": "4"})
    send_bodies(conn, "/queue/ring.tx", "ABCD", lst)
    first = lst.wait_messages(4)
    assert bodies_of(first) == ["A", "B", "C", "D"]
    h.wait_stats("ring.tx", "deliveringCount", 4)
    tx = conn.begin()
    for frame in first:
        ack(conn, version, frame, transaction=tx)
    conn.abort(tx, receipt="aborted")  # a rollback: the acks become cancels
    lst.wait_receipt("aborted")
    again = settle(lst, 7)[4:]  # the window refills: what came back to the queue
    assert bodies_of(again) == ["B", "C", "D"]
    assert all(f.headers["redelivered"] == "true" for f in again)
    st = h.stats("ring.tx")
    assert (st["messageCount"], st["messagesReplaced"], st["deadLettered"]) == (3, 1, 0)


def test_ring_scheduled_message_counts_then_is_dropped_on_arrival_at_full_ring(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = server_factory(settings=RING)
    conn, lst = connect("1.2", handle=h)
    send_bodies(conn, "/queue/ring.sched", "A", lst, AMQ_SCHEDULED_DELAY="300")
    st = h.stats("ring.sched")
    assert (st["messageCount"], st["scheduledCount"]) == (1, 1)
    for i, body in enumerate("BCD", start=2):
        send_bodies(conn, "/queue/ring.sched", body, lst)
        st = h.stats("ring.sched")
        assert (st["messageCount"], st["scheduledCount"]) == (i, 1)
    assert h.stats("ring.sched")["messagesReplaced"] == 0  # 4: one over, A not on it yet
    h.wait_stats("ring.sched", "scheduledCount", 0, timeout=2)
    st = h.stats("ring.sched")  # A was put on the head of a full ring: A removed
    assert (st["messageCount"], st["messagesReplaced"]) == (3, 1)
    conn.subscribe("/queue/ring.sched", id="s")
    assert bodies_of(settle(lst, 3)) == ["B", "C", "D"]


def test_ring_size_lowered_at_runtime_deletes_nothing_at_once_then_never_grows(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = server_factory(settings={"ring.#": AddressSettings(default_ring_size=5)})
    conn, lst = connect("1.2", handle=h)
    send_bodies(conn, "/queue/ring.low", "ABCDE", lst)
    h.call(lambda: h.broker.set_ring_size("ring.low", 3))
    assert h.stats("ring.low")["messageCount"] == 5  # nothing deleted at once
    send_bodies(conn, "/queue/ring.low", "F", lst)  # one in, one out: never grows
    st = h.stats("ring.low")
    assert (st["messageCount"], st["messagesReplaced"]) == (5, 1)
    conn.subscribe("/queue/ring.low", id="s", ack="auto")  # consumption shrinks it
    assert bodies_of(settle(lst, 5)) == ["B", "C", "D", "E", "F"]
    h.wait_stats("ring.low", "messageCount", 0)
    conn.unsubscribe("s")
    send_bodies(conn, "/queue/ring.low", "GHIJ", lst)  # now the new size holds
    st = h.stats("ring.low")
    assert (st["messageCount"], st["messagesReplaced"]) == (3, 2)
    conn.subscribe("/queue/ring.low", id="t")
    assert bodies_of(settle(lst, 8)[5:]) == ["H", "I", "J"]


def test_ring_interleaved_stomp_producers_never_leave_more_than_ring_size(
    server_factory: Callable[..., ServerHandle], connect: Connect
) -> None:
    h = server_factory(settings=RING)
    producers = [connect("1.1" if i % 2 else "1.2", handle=h) for i in range(5)]
    per_producer = 40
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                seen.append(h.stats("ring.many")["messageCount"])
            except Exception:  # not auto-created yet
                pass
            time.sleep(0.001)

    def produce(index: int, conn: Any, lst: Collector) -> None:
        send_bodies(conn, "/queue/ring.many",
                    [f"p{index}-{n}" for n in range(per_producer)], lst)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=produce, args=(i, c, lst))
               for i, (c, lst) in enumerate(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    stop.set()
    sampler.join(5)
    total = per_producer * len(producers)
    assert seen and max(seen) <= 3
    st = h.stats("ring.many")
    assert (st["messageCount"], st["messagesReplaced"], st["enqueued"]) == (3, total - 3, total)
    conn, lst = producers[0]
    conn.subscribe("/queue/ring.many", id="s")
    survivors = bodies_of(settle(lst, 3))
    # each survivor is one of the last three any producer sent, in per-producer order
    by_producer: dict[str, list[int]] = {}
    for body in survivors:
        p, n = body.split("-")
        by_producer.setdefault(p, []).append(int(n))
    for numbers in by_producer.values():
        assert numbers == sorted(numbers) and numbers[0] >= per_producer - 3
