"""Per-delivery state shared by queues and connections: message refs, consumers and the
per-connection delivery channel. Plain slotted records; the behaviour is in
:mod:`.queue` (dispatch) and :mod:`.connection` (acks, transactions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .api import AddressSettings, DeliverMany, ServerMessage, SessionCallback
from .filters import Filter

if TYPE_CHECKING:
    from .queue import Queue

__all__ = [
    "DELIVERING",
    "GONE",
    "READY",
    "SCHEDULED",
    "DeliveryChannel",
    "MessageRef",
    "ServerConsumer",
    "effective_flow_limit",
]

#: MessageRef.state values
READY = 0
SCHEDULED = 1
DELIVERING = 2
GONE = 3


@dataclass(slots=True, eq=False)
class MessageRef:
    """A message's place in one queue (a topic message has one ref per subscription).

    ``delivery_count`` is the number of counted deliveries so far; a delivery carries
    ``delivery_count + 1``.
    """

    message: ServerMessage
    priority: int
    delivery_count: int = 0
    state: int = READY


@dataclass(slots=True, eq=False)
class DeliveryChannel:
    """The per-connection part of delivery: tag sequence, tag owner index, callback.

    ``deliver_many`` is the callback's optional batch entry point (see
    :class:`~.api.BatchSessionCallback`), looked up once here rather than per delivery.
    """

    connection_id: int
    callback: SessionCallback
    next_tag: int = 1
    tags: dict[int, ServerConsumer] = field(default_factory=dict)
    deliver_many: DeliverMany | None = None

    def __post_init__(self) -> None:
        if self.deliver_many is None:
            self.deliver_many = getattr(self.callback, "deliver_many", None)


@dataclass(slots=True, eq=False)
class ServerConsumer:
    consumer_id: int
    channel: DeliveryChannel
    queue: Queue
    filter: Filter | None
    auto_ack: bool
    flow_limit: int | None
    credit: int = 0
    #: tag -> ref, in delivery order (dicts keep insertion order).
    delivering: dict[int, MessageRef] = field(default_factory=dict)
    in_ring: bool = False
    closed: bool = False

    def can_receive(self) -> bool:
        if self.closed or self.credit <= 0:
            return False
        limit = self.flow_limit
        return limit is None or len(self.delivering) < limit


def effective_flow_limit(settings: AddressSettings) -> int | None:
    """A destination limit below 1 would starve every consumer; treat it as 1 (pull)."""
    limit = settings.consumer_flow_limit
    return None if limit is None else max(1, limit)
