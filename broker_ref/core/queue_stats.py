"""One queue's counters as the :class:`~.api.DestinationStats` the broker reports.

The counts live with their owners (the queue's record, its levels, timers, paging and
removals); this module reads them into the stats object, so that a counter added to the
stats is added in one place. The queue is typed here by :class:`CountedQueue` (the
counters read) and its removals by :class:`RemovalCounts`, so this module imports
neither.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Protocol

from .api import DestinationKind, DestinationStats

__all__ = ["CountedQueue", "RemovalCounts", "queue_stats"]


class CountedQueue(Protocol):
    """The counters of a queue that its stats report."""

    @property
    def name(self) -> str: ...
    @property
    def message_count(self) -> int: ...
    @property
    def delivering_count(self) -> int: ...
    @property
    def scheduled_count(self) -> int: ...
    @property
    def consumers(self) -> Sized: ...
    @property
    def enqueued(self) -> int: ...
    @property
    def dequeued(self) -> int: ...
    @property
    def paged_count(self) -> int: ...
    @property
    def memory_usage(self) -> int: ...
    @property
    def memory_limit(self) -> int: ...


class RemovalCounts(Protocol):
    """The counters of a queue's ways out other than consumption (``QueueRemovals``)."""

    @property
    def expired(self) -> int: ...
    @property
    def dead_lettered(self) -> int: ...
    @property
    def messages_replaced(self) -> int: ...
    @property
    def discarded(self) -> int: ...


def queue_stats(queue: CountedQueue, removals: RemovalCounts | None) -> DestinationStats:
    """The stats of ``queue`` now; ``removals`` None: nothing left it but by consumption
    (zero counts)."""
    out = DestinationStats(
        name=queue.name,
        kind=DestinationKind.QUEUE,
        message_count=queue.message_count,
        delivering_count=queue.delivering_count,
        scheduled_count=queue.scheduled_count,
        consumer_count=len(queue.consumers),
        enqueued=queue.enqueued,
        dequeued=queue.dequeued,
        paged_count=queue.paged_count,
        memory_usage=queue.memory_usage,
        memory_limit=queue.memory_limit,
    )
    if removals is not None:
        out.expired = removals.expired
        out.dead_lettered = removals.dead_lettered
        out.messages_replaced = removals.messages_replaced
        out.discarded = removals.discarded
    return out
