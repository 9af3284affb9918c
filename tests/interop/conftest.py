"""Session-scoped real brokers (see brokers.py) and the ``target`` fixture the interop tests
are parametrized over.

Each broker starts once per test session, on first use (RabbitMQ's start-up dominates
the suite's run time). A broker that cannot start fails every test that needs it, with
the tail of its log: interop tests are never skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from brokers import (
    HOST,
    BrokerProcess,
    _spawn,
    _workdir,
    free_port,
    start_activemq,
    start_mosquitto,
    start_rabbitmq,
)
from cluster_fixtures import (  # noqa: F401 (fixtures)
    _session_activemq_pair,
    _session_rabbit_cluster,
    activemq_pair,
    close_after_last_use,
    rabbit_cluster,
    start_once,
)
from restartable import (  # noqa: F401 (fixtures)
    _module_activemq,
    _module_rabbitmq,
    persistent_mosquitto,
    restartable_activemq,
    restartable_mosquitto,
    restartable_rabbitmq,
)
from tls_fixtures import tls_activemq, tls_mosquitto, tls_rabbitmq  # noqa: F401 (fixtures)

_started: dict[str, BrokerProcess | BaseException] = {}


def _session_broker(name: str, start: Callable[[], BrokerProcess]) -> Iterator[BrokerProcess]:
    yield start_once(_started, name, start)


@pytest.fixture(scope="session")
def activemq() -> Iterator[BrokerProcess]:
    yield from _session_broker("activemq", start_activemq)
    _stop("activemq")


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[BrokerProcess]:
    yield from _session_broker("rabbitmq", start_rabbitmq)
    _stop("rabbitmq")


@pytest.fixture(scope="session")
def mosquitto() -> Iterator[BrokerProcess]:
    yield from _session_broker("mosquitto", start_mosquitto)
    _stop("mosquitto")


@pytest.fixture(scope="session")
def jmspy_mqtt() -> Iterator[BrokerProcess]:
    """``jmspy broker --mqtt-port`` as a user starts it (in memory), the fourth MQTT
    target: the interop suite and the capability matrix's MQTT 5 column run on it."""
    work = _workdir("jmspy-mqtt")
    port, mqtt_port = free_port(), free_port()
    log = work / "jmspy-broker.log"
    proc = _spawn([sys.executable, "-m", "jmspy", "broker", "--in-memory", "--port", str(port),
                   "--mqtt-port", str(mqtt_port)], log, cwd=work)
    broker = BrokerProcess("jmspy-mqtt", HOST, port, mqtt_port, proc, work, log)
    broker.wait_ready([port, mqtt_port], 30)
    try:
        yield broker
    finally:
        broker.stop()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    close_after_last_use(item, nextitem)  # the clusters stop once no later test needs them


def _stop(name: str) -> None:
    outcome = _started.pop(name, None)
    if isinstance(outcome, BrokerProcess):
        outcome.stop()


@dataclass
class Target:
    """One place the behavioural tests run against: a factory maker plus what it can do."""

    name: str
    make_factory: Callable[..., Any]
    stats: bool = False  # the broker answers destination_stats()
    server_selectors: bool = True
    vm_host: Any = None


# jmspy broker's STOMP server is always a target: if it cannot be imported, the tests
# that use it fail saying why (in the fixture), rather than the target quietly vanishing.
TARGETS = ["vm", "stomp-activemq", "stomp-rabbitmq", "stomp-jmspy"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    from jmspy import ConnectionFactory

    name: str = request.param
    if name == "vm":
        host, _ = request.getfixturevalue("vm_broker_factory")()

        def make_vm(**props: Any) -> Any:
            return ConnectionFactory(f"vm://{host.name}", **props)

        yield Target(name, make_vm, stats=True, vm_host=host)
    elif name == "stomp-activemq":
        b: BrokerProcess = request.getfixturevalue("activemq")

        def make_amq(**props: Any) -> Any:
            return ConnectionFactory(f"stomp://{b.host}:{b.stomp_port}", **props)

        yield Target(name, make_amq)
    elif name == "stomp-rabbitmq":
        r: BrokerProcess = request.getfixturevalue("rabbitmq")

        def make_rabbit(**props: Any) -> Any:
            url = f"stomp://{r.host}:{r.stomp_port}?rabbitmq_queue_selectors=discard"
            return ConnectionFactory(url, **props)

        yield Target(name, make_rabbit, server_selectors=False)
    else:
        server = request.getfixturevalue("jmspy_stomp_server")

        def make_jmspy(**props: Any) -> Any:
            return ConnectionFactory(f"stomp://{server.host}:{server.port}", **props)

        yield Target(name, make_jmspy, stats=True)


@pytest.fixture
def jmspy_stomp_server() -> Iterator[Any]:
    """The bundled broker's STOMP server on a free loopback port (one per test)."""
    from stomp_support import ServerHandle

    handle = ServerHandle()
    try:
        yield handle
    finally:
        handle.stop()
