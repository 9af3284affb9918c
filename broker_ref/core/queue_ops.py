"""What the parts of a queue call on the queue they belong to, and on each other through
it: Protocols, so that the parts (its policy, deliveries, removals and timers) sit below
:class:`~.queue.Queue`, which composes them.

Why Protocols and not the ``Queue`` class: the queue imports its parts to build them, and
a part typed on ``Queue`` imports it back (a cycle the type checker had to see through).
Each part names here only what it uses; ``Queue`` hands itself to each part's constructor,
which holds it to :class:`QueueOps` (a member missing or of another type fails the type
check there). The records below the queue know it as :class:`~.records.QueueRef`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .records import QueueRef

if TYPE_CHECKING:
    from .api import AddressSettings, ServerMessage
    from .queue_host import QueueHost
    from .ready_levels import ReadyLevels
    from .records import MessageRef, ServerConsumer

__all__ = ["DeliveryOps", "LimitOps", "PolicyOps", "QueueOps", "RemovalOps"]


class PolicyOps(Protocol):
    """What the other parts ask of a queue's AMPS policy (:class:`~.policy.QueuePolicy`)."""

    @property
    def expire_to_dlq(self) -> bool: ...

    def forget(self, ref: MessageRef) -> None: ...

    def on_return(self, ref: MessageRef, redelivered: bool, cancelled: bool) -> bool: ...

    def lease_live(self, ref: MessageRef) -> bool: ...

    def lease_due(self, ref: MessageRef) -> None: ...

    def stale_cancel(self, c: ServerConsumer, tag: int) -> None: ...

    def late_ack(self, c: ServerConsumer, tag: int) -> None: ...


class DeliveryOps(Protocol):
    """The outcomes of deliveries (:class:`~.queue_deliveries.QueueDeliveries`)."""

    def deliver(self, c: ServerConsumer, ref: MessageRef, auto: bool = False) -> None: ...

    def requeue(self, ref: MessageRef, redelivered: bool, cancelled: bool) -> None: ...

    def lend(self, c: ServerConsumer, tag: int) -> MessageRef: ...

    def settle_lent(self, ref: MessageRef) -> None: ...

    def return_lent(self, ref: MessageRef) -> None: ...


class RemovalOps(Protocol):
    """The ways out other than consumption (:class:`~.queue_removals.QueueRemovals`)."""

    def dead_letter(self, ref: MessageRef, reason: str, policy: PolicyOps | None) -> None: ...

    def unstore(self, message: ServerMessage) -> None: ...


class LimitOps(Protocol):
    """The queue's limits as its removals read them (:class:`~.queue_limits.QueueLimits`)."""

    @property
    def discards(self) -> bool: ...


class QueueOps(QueueRef, Protocol):
    """A queue as its parts see it."""

    delivering_count: int
    dequeued: int

    @property
    def levels(self) -> ReadyLevels: ...

    @property
    def host(self) -> QueueHost[Any]: ...

    @property
    def settings(self) -> AddressSettings: ...

    @property
    def consumers(self) -> list[ServerConsumer]: ...

    @property
    def limits(self) -> LimitOps: ...

    @property
    def policy(self) -> PolicyOps | None: ...

    @property
    def deliveries(self) -> DeliveryOps: ...

    @property
    def removals(self) -> RemovalOps: ...

    def offer(self, consumer: ServerConsumer) -> None: ...

    def add_head(self, ref: MessageRef) -> None: ...

    def expire(self, ref: MessageRef) -> None: ...
