"""Open MQ client flow control (seed 004, DESIGN §4), proved through the public API and
the broker's own counters."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from jmspy import Connection, ConnectionFactory, MessageConsumer, Queue, Session, Topic
from jmspy.broker_ref.core.api import AddressSettings


def fill(factory: ConnectionFactory, queue: Queue, count: int) -> None:
    with factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue)
        for i in range(count):
            producer.send(session.create_text_message(f"m{i}"))


@contextmanager
def filled_and_consuming(factory: ConnectionFactory, queue: Queue, count: int,
                         ack_mode: int = Session.AUTO_ACKNOWLEDGE
                         ) -> Iterator[tuple[Connection, MessageConsumer]]:
    """``count`` messages put on ``queue`` (:func:`fill`), then a connection with one
    consumer of it (on a session in ``ack_mode``), started."""
    fill(factory, queue, count)
    with factory.create_connection() as conn:
        consumer = conn.create_session(ack_mode=ack_mode).create_consumer(queue)
        conn.start()
        yield conn, consumer


def test_defaults_deliver_1000_then_a_batch_of_500_after_the_500th_consumption(vm_factory):
    queue = Queue("seed.defaults")
    with filled_and_consuming(vm_factory, queue, 3000) as (conn, consumer):
        stats = conn.destination_stats(queue)
        assert stats["deliveringCount"] == 1000
        assert stats["messageCount"] == 3000
        flow = consumer.flow_stats()
        assert (flow.limit, flow.threshold, flow.limited_by) == (1000, 50, "client")
        assert flow.batches_requested == 1

        for _ in range(499):
            assert consumer.receive(timeout=1.0) is not None
        stats = conn.destination_stats(queue)
        # 501 unconsumed is above 1000 x 50%: no new batch yet.
        assert stats["deliveringCount"] == 501
        assert consumer.flow_stats().batches_requested == 1
        assert consumer.flow_stats().unconsumed == 501

        assert consumer.receive(timeout=1.0) is not None  # the 500th
        stats = conn.destination_stats(queue)
        assert stats["deliveringCount"] == 1000  # topped up by exactly 500
        assert stats["messageCount"] == 2500
        flow = consumer.flow_stats()
        assert flow.batches_requested == 2
        assert flow.delivered == 1500
        assert flow.buffered == 1000


def test_limit_1000_threshold_50_on_1500_messages_sends_batches_of_1000_then_500(vm_factory):
    queue = Queue("seed.batches")
    with filled_and_consuming(vm_factory, queue, 1500) as (_conn, consumer):
        batch_sizes = []
        last_delivered = 0
        for _ in range(1500):
            assert consumer.receive(timeout=1.0) is not None
            delivered = consumer.flow_stats().delivered
            if delivered != last_delivered:
                batch_sizes.append(delivered - last_delivered)
                last_delivered = delivered
        assert batch_sizes == [1000, 500]


def test_client_ack_counts_consumption_only_when_acknowledged(vm_factory):
    queue = Queue("seed.client")
    with filled_and_consuming(vm_factory, queue, 3000,
                              ack_mode=Session.CLIENT_ACKNOWLEDGE) as (conn, consumer):
        received = [consumer.receive(timeout=1.0) for _ in range(700)]
        # Received but not acknowledged is not consumed: still one batch, 1000 delivering.
        assert conn.destination_stats(queue)["deliveringCount"] == 1000
        assert consumer.flow_stats().batches_requested == 1
        received[-1].acknowledge()  # acknowledges all 700
        assert consumer.flow_stats().unconsumed == 1000
        assert conn.destination_stats(queue)["deliveringCount"] == 1000
        assert conn.destination_stats(queue)["messageCount"] == 2300
        assert consumer.flow_stats().batches_requested == 2


def test_connection_flow_limit_caps_two_consumers_together(vm_factory):
    vm_factory["imqConnectionFlowLimitEnabled"] = True
    vm_factory["imqConnectionFlowLimit"] = 100
    q1, q2 = Queue("conn.a"), Queue("conn.b")
    fill(vm_factory, q1, 500)
    fill(vm_factory, q2, 500)
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        a = session.create_consumer(q1)
        b = session.create_consumer(q2)
        conn.start()
        da = conn.destination_stats(q1)["deliveringCount"]
        db = conn.destination_stats(q2)["deliveringCount"]
        assert da + db == 100
        assert (da, db) == (100, 0)  # first come, first served
        assert b.flow_stats().connection_capped >= 1
        for _ in range(60):
            assert a.receive(timeout=1.0) is not None
            buffered = conn.flow_stats()["buffered"]
            assert buffered <= 100
        # b waited for connection capacity, so it was fed first as a consumed.
        assert conn.destination_stats(q2)["deliveringCount"] > 0
        total = conn.destination_stats(q1)["deliveringCount"] + conn.destination_stats(q2)[
            "deliveringCount"
        ]
        assert total <= 100
        for _ in range(40):
            assert b.receive(timeout=1.0) is not None
        assert conn.flow_stats()["buffered"] <= 100


def test_connection_flow_limit_idle_credit_of_one_consumer_does_not_starve_another(vm_factory):
    vm_factory["imqConnectionFlowLimitEnabled"] = True
    vm_factory["imqConnectionFlowLimit"] = 3
    vm_factory["imqConsumerFlowLimit"] = 10
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        session.create_consumer(Topic("starve.a"))  # takes all 3, and a stays empty
        b = session.create_consumer(Topic("starve.b"))
        conn.start()
        producer = session.create_producer(Topic("starve.b"))
        producer.send(session.create_text_message("b0"))
        # 2 s is only how long a broken build takes to fail: a fixed one returns at once
        assert b.receive(timeout=2.0) is not None


def test_connection_flow_limit_holds_every_consumer_at_the_limit_and_loses_nothing(
        vm_factory):
    """Seed 004: the broker delivers nothing more while the connection holds the limit
    unconsumed; a recover hands messages back (they leave the buffers too) without
    shrinking the connection's room; every message arrives."""
    vm_factory["imqConnectionFlowLimitEnabled"] = True
    vm_factory["imqConnectionFlowLimit"] = 5
    queues = [Queue("gate.a"), Queue("gate.b")]
    for q in queues:
        fill(vm_factory, q, 20)
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        a, b = (session.create_consumer(q) for q in queues)
        conn.start()

        def delivering() -> int:
            return sum(conn.destination_stats(q)["deliveringCount"] for q in queues)

        assert delivering() == 5
        first = a.receive(timeout=5.0)
        assert first is not None and first.text == "m0"
        session.recover()  # everything unacknowledged goes back, the gate with it
        assert delivering() == 5
        got: dict[str, list[str]] = {"a": [], "b": []}
        for _ in range(40):
            for name, consumer in (("a", a), ("b", b)):
                message = consumer.receive_no_wait()
                if message is not None:
                    got[name].append(message.text)
                    message.acknowledge()
                    assert delivering() <= 5
        while len(got["a"]) < 20 or len(got["b"]) < 20:
            for name, consumer in (("a", a), ("b", b)):
                if len(got[name]) < 20:
                    message = consumer.receive(timeout=5.0)
                    assert message is not None, got
                    got[name].append(message.text)
                    message.acknowledge()
        assert got == {"a": [f"m{i}" for i in range(20)], "b": [f"m{i}" for i in range(20)]}


def test_destination_consumer_flow_limit_wins_when_lower(vm_broker_factory):
    host, factory = vm_broker_factory(
        settings={"limited.#": AddressSettings(consumer_flow_limit=10)}
    )
    queue = Queue("limited.orders")
    fill(factory, queue, 50)
    with factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_consumer(queue)
        flow = consumer.flow_stats()
        assert (flow.limit, flow.limited_by, flow.destination_limit) == (10, "destination", 10)
        assert host.stats("limited.orders")["deliveringCount"] == 10
    factory["imqConsumerFlowLimit"] = 5
    with factory.create_connection() as conn:
        consumer = conn.create_session().create_consumer(queue)
        flow = consumer.flow_stats()
        assert (flow.limit, flow.limited_by, flow.client_limit) == (5, "client", 5)
        assert host.stats("limited.orders")["deliveringCount"] == 5


def test_limit_zero_pulls_one_message_per_receive(vm_factory):
    vm_factory["imqConsumerFlowLimit"] = 0
    queue = Queue("pull")
    with filled_and_consuming(vm_factory, queue, 5) as (conn, consumer):
        assert conn.destination_stats(queue)["deliveringCount"] == 0
        assert consumer.flow_stats().limited_by == "pull"
        for i in range(5):
            msg = consumer.receive(timeout=1.0)
            assert msg is not None and msg.text == f"m{i}"
            stats = conn.destination_stats(queue)
            assert stats["deliveringCount"] == 0
            assert stats["messageCount"] == 4 - i
        assert consumer.receive_no_wait() is None
        assert consumer.flow_stats().outstanding_credit == 0
        fill(vm_factory, queue, 1)
        # Nothing was pulled, so the new message waits at the broker, not in our buffer.
        assert consumer.flow_stats().buffered == 0
        assert conn.destination_stats(queue)["deliveringCount"] == 0
        assert consumer.receive(timeout=1.0) is not None


def test_two_consumers_on_a_short_queue_show_first_come_first_served_imbalance(vm_factory):
    queue = Queue("short.queue")
    fill(vm_factory, queue, 10)
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        first = session.create_consumer(queue)
        second = session.create_consumer(queue)
        assert first.flow_stats().buffered == 10
        assert second.flow_stats().buffered == 0


def _share_of_work(factory: ConnectionFactory, queue: Queue, limit: int) -> tuple[int, int]:
    factory["imqConsumerFlowLimit"] = limit
    fill(factory, queue, 20)
    counts = [0, 0]
    done = threading.Event()
    lock = threading.Lock()
    conns = [factory.create_connection() for _ in range(2)]
    try:
        for index, conn in enumerate(conns):
            def listener(_msg: object, index: int = index) -> None:
                time.sleep(0.005)
                with lock:
                    counts[index] += 1
                    if sum(counts) == 20:
                        done.set()

            conn.create_session().create_consumer(queue).set_message_listener(listener)
        for conn in conns:
            conn.start()
        assert done.wait(10.0)
    finally:
        for conn in conns:
            conn.close()
    return counts[0], counts[1]


def test_a_low_flow_limit_removes_the_imbalance_between_two_app_servers(vm_factory):
    high = _share_of_work(vm_factory, Queue("share.high"), 1000)
    low = _share_of_work(vm_factory, Queue("share.low"), 1)
    assert sorted(high) == [0, 20]  # one "app server" got everything
    assert min(low) >= 5  # both worked


@pytest.mark.parametrize("threshold,expected_top_up_after", [(100, 1), (0, 10)])
def test_threshold_edges_set_how_often_the_client_asks(
    vm_factory, threshold, expected_top_up_after
):
    vm_factory["imqConsumerFlowLimit"] = 10
    vm_factory["imqConsumerFlowThreshold"] = threshold
    queue = Queue(f"threshold.{threshold}")
    with filled_and_consuming(vm_factory, queue, 40) as (_conn, consumer):
        for n in range(1, 11):
            consumer.receive(timeout=1.0)
            if consumer.flow_stats().batches_requested == 2:
                assert n == expected_top_up_after
                break
        else:
            pytest.fail("no second batch was requested")


def test_pauses_count_when_the_broker_stops_at_a_full_window(vm_factory):
    vm_factory["imqConsumerFlowLimit"] = 10
    queue = Queue("pauses")
    with filled_and_consuming(vm_factory, queue, 30) as (_conn, consumer):
        assert consumer.flow_stats().pauses == 1
        for _ in range(5):
            consumer.receive(timeout=1.0)
        assert consumer.flow_stats().pauses == 2
