"""What a broker connection (:class:`~.connection.ServerConnection`) uses of the broker
that made it, as a Protocol: the broker makes connections, so a connection naming the
broker's class would import its own maker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from .api import AddressSettings, DestinationKind, DestinationStats

if TYPE_CHECKING:
    from ..store.store import Store
    from .leases import ReadingLeases
    from .postoffice import PostOffice
    from .producer_flow import ProducerFlow
    from .queue import Queue
    from .security import SecurityPolicy

__all__ = ["ConnectionBroker"]

#: the connection class (ServerConnection)
_C = TypeVar("_C", contravariant=True)


class ConnectionBroker(Protocol[_C]):
    """What a connection uses of its broker (:class:`~.broker.Broker`, which makes the
    connections): a Protocol, so that the connection sits below the broker. ``_C`` is
    the connection class the broker is told about when one closes."""

    @property
    def closed(self) -> bool: ...
    @property
    def security(self) -> SecurityPolicy | None: ...
    @property
    def flow(self) -> ProducerFlow: ...
    @property
    def post_office(self) -> PostOffice: ...
    @property
    def queues(self) -> Mapping[str, Queue]: ...
    @property
    def store(self) -> Store | None: ...
    @property
    def leases(self) -> ReadingLeases: ...

    def now(self) -> int: ...
    def check_open(self) -> None: ...
    def settings_for(self, name: str) -> AddressSettings: ...
    def stats(self, name: str, kind: DestinationKind = ...) -> DestinationStats: ...
    def all_stats(self) -> list[DestinationStats]: ...
    def disconnected(self, conn: _C) -> None: ...
