"""Fixtures for failover tests: brokers a test may stop and start again.

The session-scoped brokers of conftest.py are shared; restarting them would disturb every
other test. These are private to the failover tests. ActiveMQ (KahaDB) and RabbitMQ
(Mnesia) are persistent and start slowly, so one of each serves a whole test module; each
test gets it running (a test that failed mid-outage may have left it stopped) and uses
its own destinations. Mosquitto starts in a tenth of a second: one per test, with or
without persistence. A broker that cannot start fails the test, never skips it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from brokers import ActiveMQ, BrokerStartError, Mosquitto, RabbitMQ, Restartable

__all__ = [
    "persistent_mosquitto",
    "restartable_activemq",
    "restartable_mosquitto",
    "restartable_rabbitmq",
]

B = TypeVar("B", bound=Restartable)


def _running(make: Callable[[], B]) -> Iterator[B]:
    try:
        broker = make()
        broker.start()
    except BrokerStartError as exc:
        pytest.fail(f"a restartable broker could not start: {exc}", pytrace=False)
    try:
        yield broker
    finally:
        broker.close()


def _restarted(broker: B) -> B:
    try:
        broker.start()  # a no-op unless an earlier test left it stopped
    except BrokerStartError as exc:
        pytest.fail(f"{broker.name} could not start again: {exc}", pytrace=False)
    return broker


@pytest.fixture(scope="module")
def _module_activemq() -> Iterator[ActiveMQ]:
    yield from _running(lambda: ActiveMQ(persistent=True))


@pytest.fixture(scope="module")
def _module_rabbitmq() -> Iterator[RabbitMQ]:
    yield from _running(RabbitMQ)


@pytest.fixture
def restartable_activemq(_module_activemq: ActiveMQ) -> ActiveMQ:
    """A persistent ActiveMQ 5 (KahaDB, persistJMSRedelivered), running."""
    return _restarted(_module_activemq)


@pytest.fixture
def restartable_rabbitmq(_module_rabbitmq: RabbitMQ) -> RabbitMQ:
    """RabbitMQ with STOMP and MQTT, running; its Mnesia survives restarts."""
    return _restarted(_module_rabbitmq)


@pytest.fixture
def restartable_mosquitto() -> Iterator[Mosquitto]:
    """A fresh Mosquitto without persistence: a restart forgets every session."""
    yield from _running(Mosquitto)


@pytest.fixture
def persistent_mosquitto() -> Iterator[Mosquitto]:
    """A fresh Mosquitto that saves sessions and in-flight messages when stopped."""
    yield from _running(lambda: Mosquitto(persistent=True))
