"""Listener dispatch through the whole stack: batching and coalesced AUTO acks must not
change what an application or the broker can observe (jmspy/_pure/dispatch.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from polling import wait_until

from jmspy import Queue, Session


def fill(factory: Any, queue: Queue, texts: list[str]) -> None:
    with factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(queue)
        for text in texts:
            producer.send(session.create_text_message(text))


def settled_stats(conn: Any, queue: Queue, seconds: float = 2.0) -> dict[str, Any]:
    """``queue``'s stats once its ``messageCount`` is 0 or ``seconds`` passed: a listener's
    coalesced acks reach the broker after the listener has returned."""
    wait_until(lambda: not conn.destination_stats(queue)["messageCount"], seconds)
    stats: dict[str, Any] = conn.destination_stats(queue)
    return stats


def test_listener_top_up_happens_exactly_at_the_500th_consumption(vm_factory: Any) -> None:
    """Seed 004 through a listener: coalesced acks still ask for the batch at 500."""
    queue = Queue("dispatch.seed")
    fill(vm_factory, queue, [str(i) for i in range(3000)])
    batches: list[int] = []
    done = threading.Event()
    with vm_factory.create_connection() as conn:
        consumer = conn.create_session().create_consumer(queue)

        def listener(_msg: object) -> None:
            batches.append(consumer.flow_stats().batches_requested)
            if len(batches) == 1200:
                done.set()

        consumer.set_message_listener(listener)
        conn.start()
        assert done.wait(20.0)
    # listener n (1-based) sees the grants made after n-1 consumptions
    assert batches[0] == 1 and batches[499] == 1  # 499 consumed: no new batch
    assert batches[500] == 2  # the 500th consumption asked for 500
    assert batches[1000] == 3


def test_a_failing_listener_redelivers_only_its_message(vm_factory: Any) -> None:
    queue = Queue("dispatch.fail")
    texts = [f"m{i}" for i in range(10)]
    fill(vm_factory, queue, texts)
    seen: list[tuple[str, bool]] = []
    failed = False
    done = threading.Event()

    def listener(msg: Any) -> None:
        nonlocal failed
        seen.append((msg.text, msg.redelivered))
        if msg.text == "m4" and not failed:
            failed = True
            raise ValueError("once")
        if len(seen) == 11:
            done.set()

    with vm_factory.create_connection() as conn:
        conn.set_exception_listener(lambda _e: None)
        conn.create_session().create_consumer(queue).set_message_listener(listener)
        conn.start()
        assert done.wait(5.0)
        stats = settled_stats(conn, queue)
    expected = [(t, False) for t in texts[:5]] + [("m4", True)]
    expected += [(t, False) for t in texts[5:]]
    assert seen == expected
    assert (stats["messageCount"], stats["dequeued"]) == (0, 10)


def test_consumer_closed_from_another_thread_keeps_handled_messages_consumed(
    vm_factory: Any,
) -> None:
    """Acks still queued when another thread closes the consumer are sent, not lost:
    messages whose listener returned are never redelivered."""
    queue = Queue("dispatch.close")
    fill(vm_factory, queue, [f"m{i}" for i in range(20)])
    entered = threading.Event()
    release = threading.Event()
    seen: list[str] = []

    def listener(msg: Any) -> None:
        seen.append(msg.text)
        if msg.text == "m3":
            entered.set()
            release.wait(5.0)

    with vm_factory.create_connection() as conn:
        conn.set_exception_listener(lambda _e: None)
        session = conn.create_session()
        consumer = session.create_consumer(queue)
        consumer.set_message_listener(listener)
        conn.start()
        assert entered.wait(5.0)
        consumer.close()
        release.set()
        again = session.create_consumer(queue)
        first = again.receive(timeout=2.0)
        assert first is not None
        rest = [first.text]
        while (m := again.receive(timeout=0.2)) is not None:
            rest.append(m.text)
    assert seen == ["m0", "m1", "m2", "m3"]
    assert rest == [f"m{i}" for i in range(3, 20)]  # m0..m2 stay consumed


def test_two_consumers_of_one_session_still_take_turns(vm_factory: Any) -> None:
    a, b = Queue("dispatch.turn.a"), Queue("dispatch.turn.b")
    fill(vm_factory, a, [f"a{i}" for i in range(5)])
    fill(vm_factory, b, [f"b{i}" for i in range(5)])
    order: list[str] = []
    done = threading.Event()

    def listener(msg: Any) -> None:
        order.append(msg.text)
        if len(order) == 10:
            done.set()

    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        session.create_consumer(a).set_message_listener(listener)
        session.create_consumer(b).set_message_listener(listener)
        conn.start()
        assert done.wait(5.0)
    assert order == [f"{q}{i}" for i in range(5) for q in "ab"]


def test_everything_is_acknowledged_once_the_listener_is_idle(vm_factory: Any) -> None:
    queue = Queue("dispatch.idle")
    fill(vm_factory, queue, [str(i) for i in range(300)])
    done = threading.Event()
    count = 0

    def listener(_msg: object) -> None:
        nonlocal count
        count += 1
        if count == 300:
            done.set()

    with vm_factory.create_connection() as conn:
        conn.create_session().create_consumer(queue).set_message_listener(listener)
        conn.start()
        assert done.wait(5.0)
        stats = settled_stats(conn, queue)
    assert (stats["messageCount"], stats["deliveringCount"], stats["dequeued"]) == (0, 0, 300)


def _unacked(host: Any, queue: Queue) -> int:
    """How many of ``queue``'s messages the broker still counts (the caller holds, or may
    take, the broker's lock: it is reentrant)."""
    with host.lock:
        return int(host.broker.queues[queue.name].message_count)


def test_a_listener_keeps_running_while_its_acks_wait_for_the_brokers_lock(
    vm_broker: Any, vm_factory: Any, monkeypatch: Any
) -> None:
    """Acks declined because another thread holds the in-process broker's lock (a
    producer mid-send) stay queued; the dispatcher does not block on the lock but runs
    the next delivery, and the next flush that finds the lock free carries them all."""
    from jmspy import session_dispatch

    monkeypatch.setattr(session_dispatch, "ACK_GRACE", 60.0)  # only a ring wakes it here
    queue = Queue("dispatch.busy")
    fill(vm_factory, queue, [f"m{i}" for i in range(5)])
    seen: list[str] = []
    got = threading.Semaphore(0)

    def listener(msg: Any) -> None:
        seen.append(msg.text)
        got.release()

    with vm_factory.create_connection() as conn, vm_factory.create_connection() as other:
        producer_session = other.create_session()
        producer = producer_session.create_producer(queue)
        conn.create_session().create_consumer(queue).set_message_listener(listener)
        with vm_broker.lock:  # this thread is the busy producer
            conn.start()
            for _ in range(5):
                assert got.acquire(timeout=5.0)
            assert _unacked(vm_broker, queue) == 5  # processed, acks declined
            producer.send(producer_session.create_text_message("m5"))  # reentrant
            assert got.acquire(timeout=5.0)  # the dispatcher was not stuck on the lock
            assert _unacked(vm_broker, queue) == 6
        producer.send(producer_session.create_text_message("m6"))
        assert got.acquire(timeout=5.0)
        stats = settled_stats(conn, queue)
    assert seen == [f"m{i}" for i in range(7)]
    assert (stats["messageCount"], stats["deliveringCount"], stats["dequeued"]) == (0, 0, 7)


def test_declined_acks_are_sent_once_the_dispatcher_is_idle(
    vm_broker: Any, vm_factory: Any
) -> None:
    """No further delivery comes to carry the declined acks: the idle dispatcher sends
    them itself, waiting for the lock, so nothing stays unacknowledged."""
    queue = Queue("dispatch.idle_busy")
    fill(vm_factory, queue, [f"m{i}" for i in range(5)])
    got = threading.Semaphore(0)
    with vm_factory.create_connection() as conn:
        conn.create_session().create_consumer(queue).set_message_listener(
            lambda _m: got.release())
        with vm_broker.lock:
            conn.start()
            for _ in range(5):
                assert got.acquire(timeout=5.0)
            assert _unacked(vm_broker, queue) == 5
        stats = settled_stats(conn, queue)
    assert (stats["messageCount"], stats["deliveringCount"], stats["dequeued"]) == (0, 0, 5)


def _received(factory: Any, queue: Queue) -> tuple[Any, Any, Any]:
    """A connection, its vm transport and one message it received and did not ack."""
    fill(factory, queue, ["one"])
    conn = factory.create_connection()
    session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
    consumer = session.create_consumer(queue)
    conn.start()
    message = consumer.receive(timeout=5.0)
    assert message is not None
    return conn, conn._transport, message


def test_vm_try_ack_declines_while_another_thread_holds_the_brokers_lock(
    vm_broker: Any, vm_factory: Any
) -> None:
    queue = Queue("dispatch.try_ack")
    conn, transport, message = _received(vm_factory, queue)
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with vm_broker.lock:
            holding.set()
            release.wait(5.0)

    other = threading.Thread(target=holder)
    other.start()
    try:
        assert holding.wait(5.0)
        assert transport.try_ack([message._delivery_tag]) is False
    finally:
        release.set()
        other.join(5.0)
    assert _unacked(vm_broker, queue) == 1  # declined: nothing happened
    assert transport.try_ack([message._delivery_tag]) is True
    assert _unacked(vm_broker, queue) == 0
    conn.close()


def test_vm_try_ack_reports_a_refused_ack_as_ack_does(vm_broker: Any, vm_factory: Any) -> None:
    from jmspy.errors import JMSException

    conn, transport, message = _received(vm_factory, Queue("dispatch.try_ack_bad"))
    with pytest.raises(JMSException) as refused:
        transport.ack([message._delivery_tag + 1000])
    with pytest.raises(type(refused.value)) as declined:
        transport.try_ack([message._delivery_tag + 1000])
    assert str(declined.value) == str(refused.value)
    conn.close()
