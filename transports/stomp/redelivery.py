"""Handing deliveries back on ``stomp://`` (recover, rollback, a failing listener).

Each broker family takes messages back its own way (``BrokerProfile.cancel``): a NACK
that requeues at the original position (RabbitMQ) or, a batch at a time, at the head in
the original order (jmspy's broker, ``jmspy-nack-more``), a re-SUBSCRIBE that
makes the broker redeliver every unacknowledged message of the subscription in order
(ActiveMQ 5, where a NACK dead-letters), or -- for an ActiveMQ non-durable topic
subscription, which a re-SUBSCRIBE would replace -- redelivery from the client's own copy.
The counts for JMSXDeliveryCount are :class:`~.deliveries.Deliveries`'.
"""

from __future__ import annotations

from typing import Protocol

from .deliveries import Deliveries
from .mapping import BrokerProfile
from .received import from_frame
from .subscription import StompSubscription

__all__ = ["Redelivery", "RedeliveryHost"]


class RedeliveryHost(Protocol):
    """What :class:`Redelivery` asks of the consumers (:mod:`.consumers`; the transport's
    lock is held meanwhile)."""

    @property
    def profile(self) -> BrokerProfile: ...

    def resubscribe(self, sub: StompSubscription) -> None:
        """UNSUBSCRIBE, then SUBSCRIBE again with a new id."""

    def send_nack(self, ack_id: str, sid: str, *, more: bool = False,
                  unseen: bool = False) -> None:
        """NACK ``ack_id``; ``more``: others of its batch follow (``jmspy-nack-more``);
        ``unseen``: the application never saw it (``jmspy-unseen``, where read)."""

    def release(self, sub: StompSubscription) -> None:
        """Hand ``sub``'s stash to the core as its credit allows."""

    def credit(self, sub: StompSubscription) -> int:
        """``sub``'s unused credit, as the core's flow accounting counts it."""


class Redelivery:
    """Hands deliveries back the way the connected broker takes them. Every call is made
    with the transport's lock held."""

    __slots__ = ("_deliveries", "_host")

    def __init__(self, host: RedeliveryHost, deliveries: Deliveries) -> None:
        self._host = host
        self._deliveries = deliveries

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        """Hand deliveries back. Deferred while the consumer is paused (no credit), so
        that what the core cancels in two calls (prefetched, then seen) goes back in one
        ordered batch together with the stash."""
        deliveries = self._deliveries
        touched: list[StompSubscription] = []
        for tag in delivery_tags:
            sub = deliveries.owner(tag)
            if sub is None:
                continue
            key = deliveries.key(tag)
            if key is not None:
                if redelivered:
                    deliveries.seen_again(key)
                else:
                    deliveries.never_seen(key)
            sub.pending_cancel.add(tag)
            if not redelivered:
                sub.pending_unseen.add(tag)
            if sub not in touched:
                touched.append(sub)
        for sub in touched:
            if redelivered or (not sub.paused and self._host.credit(sub) > 0):
                self.flush(sub)

    def flush(self, sub: StompSubscription) -> None:
        """Send back what was cancelled for ``sub``. The stash goes back too: it is younger
        than anything cancelled and would otherwise overtake the redelivered messages."""
        if not sub.pending_cancel:
            return
        deliveries = self._deliveries
        unseen = sub.unseen_tags()
        tags = set(sub.pending_cancel) | unseen
        sub.pending_cancel.clear()
        sub.pending_unseen.clear()
        for t, _, _ in sub.stash:
            key = deliveries.key(t)
            if key is not None:
                deliveries.never_seen(key)  # the app never saw it: count stays 1
        sub.stash.clear()
        if sub.copies is not None:
            self._redeliver_copies(sub, sorted(tags))
        elif self._host.profile.cancel == "resubscribe":
            # Every unacked message of the subscription goes back, in order.
            for tag in list(sub.unacked):
                if tag not in tags:
                    key = deliveries.key(tag)
                    if key is not None:
                        deliveries.seen_again(key)
                deliveries.forget(tag)
            sub.unacked.clear()
            self._host.resubscribe(sub)
        else:
            self.nack(sub, sorted(tags, reverse=self._host.profile.nack_order == "desc"),
                      fence=True, unseen=unseen)

    def _redeliver_copies(self, sub: StompSubscription, tags: list[int]) -> None:
        """Hand ``tags`` (delivery order) back from the client's own copies.

        For an ActiveMQ non-durable topic subscription, where a NACK dead-letters and a
        re-SUBSCRIBE makes a new subscription: its unacknowledged messages belong to
        this consumer alone, so redelivering them here is what the broker would do. The
        broker's copies stay unacknowledged under new tags (each still holds its slot
        in the prefetch window) until the application acknowledges the redelivery."""
        assert sub.copies is not None
        deliveries = self._deliveries
        for old in tags:
            ack_id = sub.unacked.pop(old, None)
            frame = sub.copies.pop(old, None)
            key = deliveries.key(old)
            deliveries.forget(old)
            if ack_id is None or frame is None or key is None:
                continue
            headers, body = frame
            # a fresh copy: unread body, own flags
            message = from_frame(headers, body)
            message.delivery_time = message.timestamp
            tag = deliveries.new(sub)
            deliveries.set_key(tag, key)
            sub.unacked[tag] = ack_id
            sub.copies[tag] = frame
            sub.stash.append((tag, message, deliveries.delivery_count(key, headers)))
        self._host.release(sub)

    def nack(self, sub: StompSubscription, tags: list[int], *, fence: bool = False,
             unseen: set[int] | frozenset[int] = frozenset()) -> None:
        """NACK ``tags`` (lock held); those in ``unseen`` the application never saw, and a
        broker that reads ``jmspy-unseen`` returns them unmarked. With ``fence``,
        MESSAGEs for ``sub`` that are not redeliveries are NACKed too, until the first
        redelivery arrives.

        Why: the broker may have sent more messages before it took our NACKs (still in
        the socket, in stomp.py's receiver thread, or -- on RabbitMQ -- between its queue
        process and the connection's writer, so not even a RECEIPT for the last NACK
        marks the end). Those are younger in the queue than the ones handed back, yet
        would reach the app before the redeliveries, and on RabbitMQ, which marks every
        requeued message ``redelivered``, with nothing recorded about them. A requeued
        message comes back ``redelivered:true`` and the broker sends a subscription's
        messages in order, so the first redelivery means nothing older is on its way;
        until then every fresh arrival goes back too. RabbitMQ and jmspy's broker requeue
        at the original position, so the queue order holds. A message NACKed here
        comes back as a redelivery itself, so the fence lifts even when the broker drops
        what was handed back (expired, dead-lettered). Left open: an older message that
        was itself a redelivery and is still on its way lifts the fence early. Where the
        broker returns unseen messages unmarked (jmspy's), the arrival of any message the
        hand-back returned (by its count key) lifts the fence as well.
        """
        ack_ids: list[tuple[str, bool]] = []
        deliveries = self._deliveries
        for tag in tags:
            ack_id = sub.unacked.pop(tag, None)
            key = deliveries.key(tag)
            deliveries.forget(tag)
            if ack_id is not None and not sub.stream:  # a stream's are freed by UNSUBSCRIBE
                ack_ids.append((ack_id, tag in unseen))
                if fence and key is not None:
                    sub.fenced.add(key)
        # one batch for a broker that takes them as one (jmspy's: each but the last says
        # more follow, so it returns them in one step, in order, and refills once)
        batch = self._host.profile.nack_batches
        last = len(ack_ids) - 1
        for i, (ack_id, never_seen) in enumerate(ack_ids):
            self._host.send_nack(ack_id, sub.sub_id, more=batch and i < last,
                                 unseen=never_seen)
        if fence and ack_ids:
            sub.fence = True
