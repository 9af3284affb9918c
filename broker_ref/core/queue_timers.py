"""A queue's scheduled messages and what each of its timers means when it fires.

The broker keeps one heap of timers for all queues (it owns the clock); a timer names its
queue, a kind and a ref. A :class:`~.queue.Queue` composes one :class:`QueueTimers`,
which owns the set of messages held until their ``deliver_at`` (made when the first one
is held: a queue that never schedules must stay small, issue 17) and answers the broker
for the queue: whether a due timer still means something, and what it does.

Three kinds: an expiry (``TIMER_EXPIRE``: the message expires wherever it waits, ready
or scheduled; one in delivery keeps its timer, as it may be cancelled back), a release
(``TIMER_RELEASE``: a scheduled message is due; the broker collects a queue's due ones
and the queue puts them on its head together, in due order, as Artemis does) and a lease
running out (``TIMER_LEASE``, which the AMPS :class:`~.policy.QueuePolicy` handles).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .consumer import GONE, READY, SCHEDULED, MessageRef
from .policy import TIMER_LEASE

if TYPE_CHECKING:
    from .queue_ops import QueueOps

__all__ = ["TIMER_EXPIRE", "TIMER_LEASE", "TIMER_RELEASE", "QueueTimers"]

TIMER_EXPIRE = 0
TIMER_RELEASE = 1


class QueueTimers:
    """One queue's scheduled messages and timer handling. Not thread-safe."""

    __slots__ = ("_queue", "_scheduled")

    def __init__(self, queue: QueueOps) -> None:
        self._queue = queue
        self._scheduled: set[MessageRef] | None = None

    @property
    def scheduled_count(self) -> int:
        return 0 if self._scheduled is None else len(self._scheduled)

    def hold(self, ref: MessageRef) -> None:
        """Keep ``ref`` scheduled until its ``deliver_at`` (then the queue's ``release``)."""
        ref.state = SCHEDULED
        if self._scheduled is None:
            self._scheduled = set()
        self._scheduled.add(ref)
        q = self._queue
        q.host.schedule_timer(ref.message.deliver_at, TIMER_RELEASE, q, ref)

    def due(self, kind: int, ref: MessageRef) -> bool:
        """Handle a due timer now; True if ``ref`` is a due scheduled message the broker
        should collect for ``Queue.release`` (released together, in due order)."""
        q = self._queue
        if q.deleted:
            return False
        if kind == TIMER_RELEASE:
            return ref.state == SCHEDULED
        if kind == TIMER_LEASE:
            if q.policy is not None:
                q.policy.lease_due(ref)
            return False
        if ref.state == READY:
            q.levels.unready(ref)  # stays in its level as a tombstone
            q.expire(ref)
        elif ref.state == SCHEDULED:
            assert self._scheduled is not None
            self._scheduled.discard(ref)
            q.expire(ref)
        return False

    def take_due(self, refs: list[MessageRef]) -> list[MessageRef]:
        """Of ``refs`` (due, in due order), those still scheduled, no longer held, last
        due first: the order to put them on the queue's head in."""
        out: list[MessageRef] = []
        for ref in reversed(refs):
            if ref.state == SCHEDULED:
                assert self._scheduled is not None
                self._scheduled.discard(ref)
                out.append(ref)
        return out

    def is_live(self, kind: int, ref: MessageRef) -> bool:
        """Whether a pending timer still means something (the broker prunes its heap)."""
        q = self._queue
        if q.deleted:
            return False
        if kind == TIMER_RELEASE:
            return ref.state == SCHEDULED
        if kind == TIMER_LEASE:
            return q.policy is not None and q.policy.lease_live(ref)
        # a message in delivery may be cancelled back before it expires: keep its timer
        return ref.state != GONE

    def clear(self) -> None:
        """The queue is deleted: every scheduled message is gone."""
        if self._scheduled is not None:
            for ref in self._scheduled:
                ref.state = GONE
            self._scheduled = None
