"""Worker pools (seed 004) on every transport against the real brokers: vm://, stomp://
to ActiveMQ 5, RabbitMQ and jmspy broker, mqtt:// to Mosquitto (MQTT 5: a queue is a
shared subscription), ActiveMQ and RabbitMQ (MQTT 3.1.1: queues are refused with the
capability matrix's message; a topic pool works). Each message is handled once,
concurrently, acknowledged when its instance returns; a raising listener's message is
redelivered, then dead-lettered."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import mqtt_support
import pytest
from conftest import Target
from mqtt_support import MqttTarget

from jmspy import Queue, Topic
from jmspy.errors import UnsupportedFeatureException
from jmspy.pool import DEAD_LETTER_REASON, WorkerPool

mqtt_target = mqtt_support.mqtt_target  # the fixture, under its name in this module


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # waits for the pool's workers and the broker


class Recorder:
    """A thread-safe listener: sleeps a little, records each text and its redelivery."""

    def __init__(self, delay: float = 0.03, fail_first: int = 0) -> None:
        self.seen: list[tuple[str, bool]] = []
        self.lock = threading.Lock()
        self.delay = delay
        self.fail_first = fail_first

    def __call__(self, message: Any) -> None:
        time.sleep(self.delay)
        with self.lock:
            calls = sum(1 for t, _ in self.seen if t == message.text)
            self.seen.append((message.text, message.redelivered))
        if calls < self.fail_first:
            raise RuntimeError(f"not yet: {message.text}")


def _send(factory: Any, destination: Any, n: int) -> None:
    with factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(destination)
        for i in range(n):
            producer.send(session.create_text_message(str(i)))


def test_a_pool_handles_each_message_once_and_concurrently(target: Target) -> None:
    name = f"pool.{uuid.uuid4().hex[:8]}"
    factory = target.make_factory(imqConsumerFlowLimit=8)
    _send(factory, Queue(name), 60)
    listener = Recorder()
    with WorkerPool(factory, name, listener, max_pool_size=8) as pool:
        _until(lambda: pool.stats()["processed"] == 60, "60 messages")
        stats = pool.stats()
    assert sorted(int(t) for t, _ in listener.seen) == list(range(60))
    assert 1 < stats["peak_concurrency"] <= 8
    with factory.create_connection() as conn:  # every one was acknowledged
        consumer = conn.create_session().create_consumer(Queue(name))
        conn.start()
        assert consumer.receive(1.0) is None


def test_a_raising_listener_is_redelivered_then_dead_lettered(target: Target) -> None:
    name = f"pool.bad.{uuid.uuid4().hex[:8]}"
    dlq = f"pool.dlq.{uuid.uuid4().hex[:8]}"
    factory = target.make_factory()
    _send(factory, Queue(name), 2)
    listener = Recorder(delay=0, fail_first=10**6)
    with WorkerPool(factory, name, listener, max_pool_size=2, dead_letter_queue=dlq,
                    endpointExceptionRedeliveryAttempts=2,
                    endpointExceptionRedeliveryInterval=20) as pool:
        _until(lambda: pool.stats()["dead_lettered"] == 2, "both dead-lettered")
    assert sorted(listener.seen) == sorted(
        [(str(i), r) for i in range(2) for r in (False, True, True)])
    with factory.create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue(dlq))
        conn.start()
        dead = [consumer.receive(10.0) for _ in range(2)]
    assert all(m is not None and "RuntimeError: not yet" in m.get_property(DEAD_LETTER_REASON)
               for m in dead)


def test_mqtt_pools_use_queues_where_the_protocol_has_them(mqtt_target: MqttTarget) -> None:
    name = f"pool.{uuid.uuid4().hex[:8]}"
    factory = mqtt_target.factory(imqConsumerFlowLimit=8)
    listener = Recorder()
    if not mqtt_target.v5:  # MQTT 3.1.1: no shared subscriptions, so no queues
        pool = WorkerPool(factory, name, listener, max_pool_size=4)
        with pytest.raises(UnsupportedFeatureException, match="shared subscriptions"):
            pool.start()
        kind, destination = "topic", Topic(name)
    else:
        kind, destination = "queue", Queue(name)
    with WorkerPool(factory, name, listener, max_pool_size=4, destinationType=kind) as pool:
        time.sleep(0.5)  # lets the broker finish the SUBSCRIBE before the messages come
        _send(factory, destination, 40)
        _until(lambda: pool.stats()["processed"] == 40, "40 messages")
        stats = pool.stats()
    assert sorted(int(t) for t, _ in listener.seen) == list(range(40))
    assert 1 < stats["peak_concurrency"] <= 4
