"""A delivery's life in a queue: handed to a consumer, then acknowledged, cancelled back,
rejected, lent to a reading lease (:mod:`.leases`), or returned by a rollback or a lease
running out.

A :class:`~.queue.Queue` composes one :class:`QueueDeliveries`. Every delivery made
outside the dispatch twins' runs goes through :meth:`QueueDeliveries.deliver` (the
selector path, :func:`dispatch_filtered`, and the AMPS :class:`~.policy.QueuePolicy`);
a run the twins made goes to a host without ``deliver_many`` through :func:`hand_over`;
and every outcome of a delivery goes through the methods below, so the queue's
``delivering_count`` and ``dequeued`` (fields of its :class:`~.records.QueueRecord`,
which the twins' runs update with the same steps: ``queue_run.take_run`` and
``acknowledge_tags``) move in one place. A delivery
that comes back goes to the queue's head (``Queue.add_head``: a full ring drops it),
unless a limit dead-letters it or it expired meanwhile
(:class:`~.queue_removals.QueueRemovals`).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from .api import Delivery, ServerMessage
from .consumer import DELIVERING, GONE, MessageRef, ServerConsumer
from .filters import filter_accepts

if TYPE_CHECKING:
    from .queue_ops import QueueOps

__all__ = ["QueueDeliveries", "dispatch_filtered", "hand_over"]


def hand_over(
    c: ServerConsumer, first_tag: int, messages: list[ServerMessage], counts: list[int]
) -> None:
    """Give a run of deliveries to the host: in one call where it takes batches."""
    ch = c.channel
    many = ch.deliver_many
    if many is not None:
        many(c.consumer_id, first_tag, messages, counts)
        return
    deliver = ch.callback.deliver
    consumer_id = c.consumer_id
    for i, message in enumerate(messages):
        deliver(Delivery(consumer_id, first_tag + i, message, counts[i]))


def dispatch_filtered(queue: QueueOps, ring: deque[ServerConsumer], now: int) -> None:
    """With selectors: each ready message of ``queue``, in order, goes to the first
    consumer in ``ring`` (the queue's) order whose selector matches; messages nobody
    matches stay in place. This is O(ready messages) per dispatch: the price of
    selectors on a shared queue. ``now``: the host's clock, for the expiry of the
    messages walked. The caller holds the queue's ``_dispatching``."""
    for c in [c for c in ring if not c.can_receive()]:
        ring.remove(c)
        c.in_ring = False
    levels = queue.levels

    def visit(ref: MessageRef) -> bool:
        exp = ref.message.expiration
        if exp and exp <= now:
            levels.unready(ref)
            queue.expire(ref)
            return True
        for i, c in enumerate(ring):
            if c.filter is None or filter_accepts(c.filter, ref.message):
                del ring[i]
                break
        else:
            return False
        levels.unready(ref)
        queue.deliveries.deliver(c, ref)
        if c.can_receive():
            ring.append(c)
        else:
            c.in_ring = False
        return True

    levels.sweep(visit, ring)


class QueueDeliveries:
    """The deliveries of one queue and their outcomes. Not thread-safe."""

    __slots__ = ("_persist", "_queue")

    def __init__(self, queue: QueueOps, persist: bool) -> None:
        """``persist``: the queue's persistent messages have store rows, whose delivery
        counts a redelivery updates (fixed for the queue's life)."""
        self._queue = queue
        self._persist = persist

    def deliver(self, c: ServerConsumer, ref: MessageRef, auto: bool = False) -> None:
        """Deliver one ref already taken off the levels to ``c``; ``auto``: consumed on
        delivery (at-most-once), whatever ``c``'s mode."""
        q = self._queue
        ch = c.channel
        tag = ch.next_tag
        ch.next_tag = tag + 1
        ref.delivery_count += 1
        c.credit -= 1
        if ch.gate >= 0:  # the connection's flow limit (.flow_gate)
            ch.gate -= 1
        message = ref.message
        if auto or c.auto_ack:
            ref.state = GONE
            q.dequeued += 1
            q.removals.unstore(message)
        else:
            ref.state = DELIVERING
            c.delivering[tag] = ref
            ch.tags[tag] = c
            q.delivering_count += 1
        ch.callback.deliver(Delivery(c.consumer_id, tag, message, ref.delivery_count))

    def acknowledge(self, c: ServerConsumer, tag: int) -> None:
        """The delivery ``tag`` of ``c`` is consumed. Caller dispatches afterwards."""
        q = self._queue
        policy = q.policy
        try:
            ref = c.delivering.pop(tag)
        except KeyError:  # its lease ran out (seed 001): the policy knows the tag
            assert policy is not None
            policy.late_ack(c, tag)
            return
        if policy is not None:
            policy.forget(ref)
        ref.state = GONE
        q.delivering_count -= 1
        q.dequeued += 1
        q.removals.unstore(ref.message)
        q.offer(c)

    def cancel(self, c: ServerConsumer, tag: int, redelivered: bool) -> None:
        """Return one delivery to the head of its level. Callers cancel several tags in
        *descending* tag order, so the original order is restored. Caller dispatches."""
        ref = self._take_back(c, tag)
        if ref is None:
            return
        if self._queue.deleted:
            ref.state = GONE
            return
        self.requeue(ref, redelivered, True)

    def _take_back(self, c: ServerConsumer, tag: int) -> MessageRef | None:
        """End delivery ``tag`` to ``c`` (cancel, reject); None when its lease already
        ran out and the message is back on the queue."""
        q = self._queue
        ref = c.delivering.pop(tag, None)
        if ref is None:
            if q.policy is not None:
                q.policy.stale_cancel(c, tag)
            return None
        q.delivering_count -= 1
        if not c.closed:
            q.offer(c)
        return ref

    def lend(self, c: ServerConsumer, tag: int) -> MessageRef:
        """Take delivery ``tag`` off ``c`` for a reading lease (:mod:`.leases`): it
        stays in delivery (counted, stored) but is no longer ``c``'s, so closing ``c``
        does not return it. Queues with a policy are refused before this."""
        ref = c.delivering.pop(tag)
        if not c.closed:
            self._queue.offer(c)
        return ref

    def settle_lent(self, ref: MessageRef) -> None:
        """A lent delivery's lease was settled: consumed, as an acknowledgement."""
        q = self._queue
        q.delivering_count -= 1
        ref.state = GONE
        if q.deleted:
            return
        q.dequeued += 1
        q.removals.unstore(ref.message)

    def return_lent(self, ref: MessageRef) -> None:
        """A lent delivery's lease was released or ran out: back on the head, marked
        redelivered (the caller returns a lease's deliveries last first)."""
        q = self._queue
        q.delivering_count -= 1
        if q.deleted:
            ref.state = GONE
            return
        self.requeue(ref, True, True)

    def reject(self, c: ServerConsumer, tag: int, reason: str) -> None:
        """Dead-letter one delivery because its consumer refused it (RabbitMQ's NACK with
        ``requeue:false``): it goes to ``dead_letter_address`` with ``reason`` instead of
        back on the queue. Caller dispatches."""
        ref = self._take_back(c, tag)
        if ref is None:
            return
        ref.state = GONE
        q = self._queue
        if q.deleted:
            return
        q.removals.dead_letter(ref, reason, q.policy)

    def requeue(self, ref: MessageRef, redelivered: bool, cancelled: bool) -> None:
        """Put a delivery that came back (cancel, rollback, lease expiry) on the head,
        unless a delivery limit dead-letters it or it expired meanwhile."""
        q = self._queue
        message = ref.message
        if q.policy is not None and q.policy.on_return(ref, redelivered, cancelled):
            return
        if not redelivered:
            ref.delivery_count -= 1
        else:
            limit = q.settings.max_delivery_attempts
            if limit > 0 and ref.delivery_count >= limit:
                reason = f"max delivery attempts ({limit}) exceeded"
                q.removals.dead_letter(ref, reason, None)
                return
            if self._persist and message.persistent:
                store = q.host.store
                assert store is not None
                store.update_delivery_count(q.name, message.message_id, ref.delivery_count)
        if message.expiration and message.expiration <= q.host.now():
            q.expire(ref)
            return
        q.add_head(ref)
