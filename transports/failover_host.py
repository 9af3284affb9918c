"""What every transport's failover asks of the transport it steers (``stomp://``'s and
``mqtt://``'s :class:`Failover`): the state both read, and how waiting calls are
released. Each protocol's ``FailoverHost`` adds what its drop and reconnect need."""

from __future__ import annotations

from typing import Protocol

from jmspy.errors import JMSException
from jmspy.reconnect import ReconnectPolicy
from jmspy.transport import TransportListener

__all__ = ["FailoverHost", "lost_for_good", "resumed"]


class FailoverHost(Protocol):
    """The connection state a failover steers; the transport owns it."""

    reconnect: ReconnectPolicy

    @property
    def where(self) -> str: ...

    @property
    def address_count(self) -> int:
        """How many brokers the address list names (1: the URL alone)."""

    @property
    def listener(self) -> TransportListener | None: ...

    @property
    def closing(self) -> bool: ...

    def settle(self, lost: str | None) -> None:
        """Release waiting calls: connected again (None) or gone for good (why)."""


def resumed(host: FailoverHost) -> None:
    """A reconnect succeeded: waiting calls go on, and the core hears
    CONNECTION_RESUMED (it re-grants credit from there)."""
    host.settle(None)
    listener = host.listener
    if listener is not None:
        listener.on_connection_resumed()


def lost_for_good(host: FailoverHost, lost: str) -> None:
    """Reconnecting is off or gave up: waiting calls fail with ``lost``, and the core
    hears CONNECTION_LOST (unless the application is closing the connection)."""
    host.settle(lost)
    listener = host.listener
    if listener is not None and not host.closing:
        listener.on_connection_interrupted(JMSException(lost, error_code="CONNECTION_LOST"))
