"""Session fixtures for the cluster tests: one 3-node RabbitMQ cluster and one ActiveMQ 5
master/slave pair (clusters.py) per test session, started on first use.

Each starts once (the RabbitMQ cluster takes ~15-20 s to form) and is shared by every
cluster test; the function-scoped fixtures hand it out healed, with every node (or the
master and a waiting slave) running, since a chaos test kills one and may fail before it
restarts it. A cluster that cannot start fails every test that needs it with the nodes'
logs, never skips. Each is stopped right after the last test of the run that uses it
(:func:`close_after_last_use`, called by conftest.py's teardown hook), not at the end of
the session: three Erlang nodes and two JVMs would otherwise sit beside every later test.
Other slow session brokers share that life through :func:`session_broker` (the TLS
brokers of tls_fixtures.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import pytest
from brokers import BrokerStartError
from clusters import ActiveMQPair, RabbitCluster

__all__ = ["activemq_pair", "rabbit_cluster", "session_broker", "start_once"]


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)

_started: dict[str, _Closable | BaseException] = {}

T = TypeVar("T")


def start_once(started: dict[str, T | BaseException], name: str, start: Callable[[], T]) -> T:
    """``started[name]``, started by ``start()`` on first use; a start that failed is
    remembered, so every later test that needs it fails fast with the reason."""
    outcome = started.get(name)
    if outcome is None:
        try:
            outcome = start()
        except BaseException as exc:  # remembered: later tests fail fast with the reason
            outcome = exc
        started[name] = outcome
    if isinstance(outcome, BaseException):
        pytest.fail(f"{name} could not start: {outcome}", pytrace=False)
    return outcome


def _session(name: str, start: Callable[[], C]) -> Iterator[C]:
    outcome = start_once(_started, name, start)
    yield outcome  # type: ignore[misc]
    if _started.pop(name, None) is not None:  # not already closed after its last use
        outcome.close()


#: session fixture -> the name its broker is started under in ``_started``
_USERS = {"_session_rabbit_cluster": "the RabbitMQ cluster",
          "_session_activemq_pair": "the ActiveMQ master/slave pair"}


def session_broker(fixture: str, name: str, start: Callable[[], C]) -> Iterator[C]:
    """The body of a session fixture named ``fixture``: ``start()`` once, on first use,
    and close it after the last test of the run that names ``fixture`` among its
    fixtures (a test must ask for it by argument, not by ``getfixturevalue``)."""
    _USERS[fixture] = name
    yield from _session(name, start)


def close_after_last_use(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After ``item``: stop each cluster that no later test of this run uses."""
    if not any(name in _started for name in _USERS.values()):
        return  # nothing running: no need to look ahead
    items = item.session.items
    later = items[items.index(item) + 1:] if nextitem is not None else []
    for fixture, name in _USERS.items():
        if name in _started and not any(
                fixture in getattr(i, "fixturenames", ()) for i in later):
            outcome = _started.pop(name)
            if not isinstance(outcome, BaseException):
                outcome.close()


@pytest.fixture(scope="session")
def _session_rabbit_cluster() -> Iterator[RabbitCluster]:
    yield from _session("the RabbitMQ cluster", lambda: RabbitCluster().start())


@pytest.fixture(scope="session")
def _session_activemq_pair() -> Iterator[ActiveMQPair]:
    yield from _session("the ActiveMQ master/slave pair", lambda: ActiveMQPair().start())


@pytest.fixture
def rabbit_cluster(_session_rabbit_cluster: RabbitCluster) -> RabbitCluster:
    """The session's 3-node RabbitMQ cluster, every node running and clustered."""
    try:
        _session_rabbit_cluster.heal()
    except BrokerStartError as exc:
        pytest.fail(f"the RabbitMQ cluster could not be healed: {exc}\n"
                    f"{_session_rabbit_cluster.logs()}", pytrace=False)
    return _session_rabbit_cluster


@pytest.fixture
def activemq_pair(_session_activemq_pair: ActiveMQPair) -> ActiveMQPair:
    """The session's ActiveMQ pair: one master serving, the other waiting as slave."""
    try:
        _session_activemq_pair.heal()
    except BrokerStartError as exc:
        pytest.fail(f"the ActiveMQ pair could not be healed: {exc}", pytrace=False)
    return _session_activemq_pair
