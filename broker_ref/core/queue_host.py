"""What a queue needs from the broker that hosts it: the store, the RAM budget and spool,
the clock, timers, deferred dispatch and dead-letter routing.

:class:`QueueHost` is generic in the queue type the host is handed back (the broker's
timers and deferred dispatch name the queue they are for, and ``Broker`` takes a
:class:`~.queue.Queue`): a queue is built on a ``QueueHost[Queue]``, so this module need
not import the queue's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from ..store.spool import Spool
    from ..store.store import Store
    from .api import ServerMessage
    from .records import MessageRef, PageBudget

__all__ = ["QueueHost"]

#: the queue type the host is handed back (``Queue``)
Q = TypeVar("Q")


class QueueHost(Protocol[Q]):
    """What a queue needs from the broker."""

    store: Store | None
    #: the RAM budget every queue of the broker shares, and where non-stored pages go
    budget: PageBudget
    spool: Spool
    #: the memory limit of a destination whose address settings set none (its default
    #: share of the broker's, :mod:`.queue_limits`)
    destination_memory_limit: int
    #: queues waiting for a deferred dispatch, None when sends dispatch at once
    #: (:meth:`~.broker.Broker.defer_dispatch`)
    deferred_dispatch: list[Q] | None

    def defer(self, queue: Q) -> None:
        """Dispatch ``queue`` when the deferral ends (only while ``deferred_dispatch``
        is a list)."""

    def now(self) -> int: ...

    def schedule_timer(self, due: int, kind: int, queue: Q, ref: MessageRef) -> None: ...

    def divert(
        self, source: Q, message: ServerMessage, address: str | None, reason: str
    ) -> None:
        """Send a copy of ``message`` to queue ``address`` (None: drop) with ``reason``."""
