"""``WorkerPool`` takes a Queue or Topic object (from ``session.create_queue`` /
``create_topic``) as well as a name."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from jmspy import ConnectionFactory, InvalidConfigurationException, Message, Queue, Topic
from jmspy.pool import WorkerPool

WAIT = 30.0  # s: bounds a hang only; the pool handles each message as soon as it comes


class Collect:
    """A listener that records message texts and says when it has ``want`` of them."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.texts: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()

    def __call__(self, message: Message) -> None:
        with self.lock:
            self.texts.append(getattr(message, "text", ""))
            if len(self.texts) == self.want:
                self.done.set()


def test_a_pool_on_a_queue_object_from_the_session_consumes_it(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        work = session.create_queue("work")
        producer = session.create_producer(work)
        for n in range(10):
            producer.send(session.create_text_message(str(n)))
        seen = Collect(10)
        with WorkerPool(vm_factory, work, seen, max_pool_size=4) as pool:
            assert seen.done.wait(WAIT)
            assert (pool.spec.destination, pool.spec.destination_type) == ("work", "queue")
        assert sorted(seen.texts, key=int) == [str(n) for n in range(10)]
        assert conn.destination_stats(work)["messageCount"] == 0


def test_a_pool_on_a_topic_object_subscribes_to_the_topic(
        vm_factory: ConnectionFactory) -> None:
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        prices = session.create_topic("prices")
        seen = Collect(3)
        with WorkerPool(vm_factory, prices, seen, max_pool_size=2) as pool:
            assert pool.spec.destination_type == "topic"
            producer = session.create_producer(prices)
            for n in range(3):  # the pool's subscription exists once it has started
                producer.send(session.create_text_message(str(n)))
            assert seen.done.wait(WAIT)
        assert sorted(seen.texts) == ["0", "1", "2"]


def test_a_destination_type_agreeing_with_the_object_is_accepted_a_contrary_one_refused(
        vm_factory: ConnectionFactory) -> None:
    pool = WorkerPool(vm_factory, Topic("t"), print, destinationType="jakarta.jms.Topic")
    assert pool.spec.destination_type == "topic"
    with pytest.raises(InvalidConfigurationException,
                       match=r"queue://q is a queue, but destination_type='topic'"):
        WorkerPool(vm_factory, Queue("q"), print, destination_type="topic")


def test_temporary_destinations_and_options_are_refused_with_the_reason(
        vm_broker_factory: Callable[..., Any]) -> None:
    _, factory = vm_broker_factory()
    with factory.create_connection() as conn:
        session = conn.create_session()
        for temporary in (session.create_temporary_queue(), session.create_temporary_topic()):
            with pytest.raises(InvalidConfigurationException, match="temporary"):
                WorkerPool(factory, temporary, print)
    with pytest.raises(InvalidConfigurationException, match="destination options"):
        WorkerPool(factory, Queue("q?consumer.exclusive=true"), print)


def test_something_neither_a_name_nor_a_destination_is_refused_naming_both_forms(
        vm_factory: ConnectionFactory) -> None:
    with pytest.raises(InvalidConfigurationException,
                       match="must be a Queue, a Topic or a non-empty destination name, got 42"):
        WorkerPool(vm_factory, 42, print)  # type: ignore[arg-type]
