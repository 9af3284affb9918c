"""Producer flow control over ``vm://`` through the public API (seed 003): ``send()``
blocks while the broker's memory is full and returns once consumers free it, none lost;
``sendTimeout`` and ``send-fail-if-no-space(-after-timeout)`` raise
ResourceAllocationException naming the destination and the limit, nothing stored."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from flow_support import loop_one_connection, until

from jmspy import ConnectionFactory, DeliveryMode, Queue, ResourceAllocationException
from jmspy.broker_ref.core.api import AddressSettings
from jmspy.errors import InvalidConfigurationException
from jmspy.transports import vm

NP = DeliveryMode.NON_PERSISTENT
BODY = "x" * 1024


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _blocked(host: Any) -> int:
    """Producers the broker holds (producer flow control), broker-wide."""
    with host.lock:
        return int(host.broker.usage()["blockedProducers"])


class Producing(threading.Thread):
    """Sends ``n`` messages on its own thread; remembers how many returned, and the error."""

    def __init__(self, factory: ConnectionFactory, queue: str, n: int, **send: Any) -> None:
        super().__init__(daemon=True)
        self.factory, self.queue, self.n, self.send_kw = factory, queue, n, send
        self.sent = 0
        self.error: Exception | None = None

    def run(self) -> None:
        with self.factory.create_connection() as conn:
            session = conn.create_session()
            producer = session.create_producer(Queue(self.queue))
            try:
                for i in range(self.n):
                    producer.send(session.create_text_message(f"{i}:{BODY}"), **self.send_kw)
                    self.sent += 1
            except Exception as exc:
                self.error = exc


def _receive_all(factory: ConnectionFactory, queue: str, n: int) -> list[int]:
    got: list[int] = []
    with factory.create_connection() as conn:
        session = conn.create_session()
        consumer = session.create_consumer(Queue(queue))
        conn.start()
        while len(got) < n:
            m = consumer.receive(30.0)
            assert m is not None, f"only {len(got)} of {n} arrived"
            got.append(int(m.text.split(":")[0]))
    return got


def test_send_blocks_at_the_memory_limit_and_resumes_when_a_consumer_comes_none_lost(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, factory = vm_broker_factory(memory_limit="16 MB")
    n = 30_000  # ~38 MB of pending messages: twice the limit
    producer = Producing(factory, "flood", n, delivery_mode=NP)
    producer.start()
    until(lambda: _blocked(host) == 1, "the producer to block")
    stats = host.stats("flood")
    assert producer.is_alive() and producer.sent < n
    assert stats["messageCount"] == producer.sent  # blocked, not stored
    # the queue's own limit holds it: its default share, 10 % of the broker's 16 MB (the
    # broker's memory is not full: other destinations keep their shares)
    share = -(-16 * 1024**2 // 10)  # rounded up
    assert stats["memoryLimit"] == share and stats["memoryUsage"] >= share
    assert stats["memoryUsage"] <= share + 2048
    usage = host.usage()
    assert usage["blockedProducers"] == 1 and 10 <= usage["memoryPercentUsage"] < 11
    assert usage["memoryLimit"] == 16 * 1024**2 and usage["tempLimit"] == 10 * 1024**3
    assert _receive_all(factory, "flood", n) == list(range(n))  # all, in order
    producer.join(30)
    assert not producer.is_alive() and producer.error is None and producer.sent == n


def test_send_timeout_raises_resource_allocation_exception_naming_destination_and_limit(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, _ = vm_broker_factory(settings={"orders.#": AddressSettings(memory_limit=64 * 1024)})
    factory = ConnectionFactory(f"vm://{host.name}", sendTimeout=200)
    producer = Producing(factory, "orders.eu", 1000, delivery_mode=NP)
    producer.run()  # on this thread: it ends with the timeout
    assert isinstance(producer.error, ResourceAllocationException)
    text = str(producer.error)
    assert "queue 'orders.eu'" in text and "memory-limit" in text and "sendTimeout" in text
    assert host.stats("orders.eu")["messageCount"] == producer.sent  # nothing half-stored


def test_send_fail_if_no_space_raises_at_once_and_the_producer_can_send_again(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, factory = vm_broker_factory(memory_limit="1 MB", send_fail_if_no_space=True)
    with factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue("q"))
        sent = 0
        with pytest.raises(ResourceAllocationException, match="send-fail-if-no-space") as err:
            for _ in range(10_000):
                producer.send(session.create_text_message(BODY), delivery_mode=NP)
                sent += 1
        assert "queue 'q'" in str(err.value) and "memory-limit" in str(err.value)
        assert host.stats("q")["messageCount"] == sent
        assert host.broker.usage()["blockedProducers"] == 0  # it never waited
        consumer = session.create_consumer(Queue("q"))
        conn.start()
        assert consumer.receive(5.0) is not None
        producer.send(session.create_text_message("again"), delivery_mode=NP)


def test_send_fail_after_timeout_fails_only_once_the_broker_clock_passed_it(
        vm_broker_factory: Callable[..., Any]) -> None:
    clock = FakeClock()
    host, factory = vm_broker_factory(memory_limit="64 KB", clock=clock,
                                      send_fail_if_no_space_after_timeout=500)
    producer = Producing(factory, "q", 1000, delivery_mode=NP)
    producer.start()
    until(lambda: _blocked(host) == 1, "the producer to block")
    sent = producer.sent
    clock.now += 499
    with host.lock:
        host.broker.process_timers()
    producer.join(0.2)  # gives a wrongly woken producer time to fail: it must not
    assert producer.is_alive() and producer.error is None and producer.sent == sent
    clock.now += 1
    with host.lock:
        host.broker.process_timers()
    producer.join(30)
    assert isinstance(producer.error, ResourceAllocationException)
    assert "waited 500 ms" in str(producer.error) and "memory-limit" in str(producer.error)
    assert host.stats("q")["messageCount"] == sent


def test_one_connection_producing_to_a_full_queue_and_consuming_it_keeps_moving(
        vm_broker_factory: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "jmspy.broker.flow")
    host, factory = vm_broker_factory(memory_limit="256 KB")
    n = 3000  # ~3.8 MB through a 256 KB limit
    with factory.create_connection() as conn:
        loop = loop_one_connection(conn, n, BODY, lambda: _blocked(host) == 1, 30)
        assert loop.arrived
    assert loop.got == list(range(n))
    # the limit was reached on the way (the producer was stopped and resumed)
    assert "stopping producer" in caplog.text and "resuming producer" in caplog.text


def test_a_transacted_commit_waits_for_space_as_one(
        vm_broker_factory: Callable[..., Any]) -> None:
    host, factory = vm_broker_factory(memory_limit="64 KB")
    filler = Producing(ConnectionFactory(f"vm://{host.name}", sendTimeout=100), "q", 1000,
                       delivery_mode=NP)
    filler.run()  # until the broker's memory is full (its last send timed out)
    assert isinstance(filler.error, ResourceAllocationException)
    full = filler.sent
    committed = threading.Event()

    def commit_twenty() -> None:
        with factory.create_connection() as conn:
            session = conn.create_session(transacted=True)
            producer = session.create_producer(Queue("q"))
            for i in range(full, full + 20):
                producer.send(session.create_text_message(f"{i}:{BODY}"), delivery_mode=NP)
            session.commit()
            committed.set()

    t = threading.Thread(target=commit_twenty, daemon=True)
    t.start()
    until(lambda: _blocked(host) == 1, "the commit to block")
    assert not committed.is_set() and host.stats("q")["messageCount"] == full
    assert _receive_all(factory, "q", full + 20) == list(range(full + 20))
    t.join(30)
    assert committed.is_set()


def test_start_broker_takes_the_limits_as_sizes_and_refuses_bad_ones() -> None:
    host = vm.start_broker("flow-sizes", memory_limit="16 MB", temp_limit="1 GB",
                           store_limit=2 * 1024**3)
    try:
        assert host.broker.memory_limit == 16 * 1024**2
        assert host.broker.flow.temp_limit == 1024**3
    finally:
        vm.stop_broker("flow-sizes")
    with pytest.raises(InvalidConfigurationException, match="memory_limit='lots'"):
        vm.start_broker("flow-bad", memory_limit="lots")
    with pytest.raises(InvalidConfigurationException, match="send_fail_if_no_space_after"):
        vm.start_broker("flow-bad", send_fail_if_no_space_after_timeout=-5)


@pytest.mark.parametrize("pending_limit", [None, 10])
def test_seed_scenario_flow_control_off_a_stopped_topic_subscriber_does_not_stop_the_rest(
        vm_broker_factory: Callable[..., Any], pending_limit: int | None) -> None:
    """Seed 003's Figure 4.2: three subscribers, one stopped; flow control off. The
    producer never waits, the live two get every message; the stopped one's backlog goes
    to disk (or, with a pending-message limit of 10, it keeps the newest 10 plus its
    prefetch), and the broker's RAM stays within its limit."""
    from jmspy import Topic

    host, factory = vm_broker_factory(memory_limit="256 KB", settings={
        "PRICES.>": AddressSettings(producer_flow_control=False,
                                    pending_message_limit=pending_limit)})
    prefetch = 10
    stopped_factory = ConnectionFactory(f"vm://{host.name}", imqConsumerFlowLimit=prefetch)
    n = 2000  # ~2.6 MB of 1 KB messages through a 256 KB limit
    with factory.create_connection() as live, stopped_factory.create_connection() as stopped:
        sessions = [live.create_session(), live.create_session()]
        consumers = [s.create_consumer(Topic("PRICES.ibm")) for s in sessions]
        stopped.create_session().create_consumer(Topic("PRICES.ibm"))  # never reads
        live.start()
        stopped.start()
        producing = live.create_session()
        producer = producing.create_producer(Topic("PRICES.ibm"))
        got: list[list[int]] = [[], []]
        for i in range(n):
            producer.send(producing.create_text_message(f"{i}:{BODY}"), delivery_mode=NP)
            for k, consumer in enumerate(consumers):  # the live ones keep up as they go
                while (m := consumer.receive_no_wait()) is not None:
                    got[k].append(int(m.text.split(":")[0]))
        for k, consumer in enumerate(consumers):
            while len(got[k]) < n and (m := consumer.receive(5.0)) is not None:
                got[k].append(int(m.text.split(":")[0]))
        assert got == [list(range(n)), list(range(n))]
        with host.lock:
            broker = host.broker
            # the only subscription still holding messages is the stopped one's
            [slow] = [broker.stats(q) for q in broker.subscription_names()
                      if broker.stats(q).message_count > 0]
            assert broker.budget.used <= 256 * 1024  # RAM flat: within the limit
            assert broker.usage()["blockedProducers"] == 0
        assert slow.delivering_count == prefetch
        if pending_limit is None:
            assert slow.message_count == n and slow.paged_count >= n - prefetch - 300
        else:
            assert slow.message_count == pending_limit + prefetch
            assert slow.discarded == n - pending_limit - prefetch
