"""Handing deliveries back on ``stomp://`` (recover, rollback, a failing listener).

Each broker family takes messages back its own way (``BrokerProfile.cancel``): a NACK
that requeues at the original position (RabbitMQ, jmspy's broker), a re-SUBSCRIBE that
makes the broker redeliver every unacknowledged message of the subscription in order
(ActiveMQ 5, where a NACK dead-letters), or -- for an ActiveMQ non-durable topic
subscription, which a re-SUBSCRIBE would replace -- redelivery from the client's own copy.
``_seen`` remembers how often the application saw each message, for JMSXDeliveryCount
where the broker only says ``redelivered``.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from .stomp_mapping import BrokerProfile, from_frame

if TYPE_CHECKING:
    from .stomp import _Sub

__all__ = ["StompRedelivery"]

#: How many message keys the delivery counts remember (oldest forgotten first).
_REDELIVERY_MEMORY = 10_000


class StompRedelivery:
    """Mixin of :class:`~jmspy.transports.stomp.StompTransport`. The attributes below are
    the transport's; declared for the type checker only."""

    profile: BrokerProfile
    _lock: threading.RLock
    _seen: OrderedDict[str, int]
    _tags: itertools.count[int]
    _tag_owner: dict[int, _Sub]
    _tag_key: dict[int, str]

    if TYPE_CHECKING:
        def _forget(self, tag: int) -> None: ...

        def _subscribe(self, sub: _Sub, *, same_id: bool = False, receipt: str = "") -> None: ...

        def _unsubscribe(self, sub: _Sub) -> None: ...

        def _send_nack(self, ack_id: str, sid: str, receipt: str | None = None) -> None: ...

        def _release(self, sub: _Sub) -> None: ...

        def _delivery_count(self, key: str, headers: dict[str, str]) -> int: ...

    def cancel(self, delivery_tags: list[int], *, redelivered: bool = True) -> None:
        """Hand deliveries back. Deferred while the consumer is paused (no credit), so
        that what the core cancels in two calls (prefetched, then seen) goes back in one
        ordered batch together with the stash."""
        with self._lock:
            touched: list[_Sub] = []
            for tag in delivery_tags:
                sub = self._tag_owner.get(tag)
                if sub is None:
                    continue
                key = self._tag_key.get(tag)
                if key is not None:
                    if redelivered:
                        self._remember(key)
                    else:
                        self._seen.setdefault(key, 0)  # never seen by the app
                sub.pending_cancel.add(tag)
                if sub not in touched:
                    touched.append(sub)
            for sub in touched:
                if redelivered or sub.credit > 0:
                    self._flush_cancels(sub)

    def _remember(self, key: str) -> None:
        self._seen[key] = self._seen.get(key, 0) + 1
        self._seen.move_to_end(key)
        while len(self._seen) > _REDELIVERY_MEMORY:
            self._seen.popitem(last=False)

    def _flush_cancels(self, sub: _Sub) -> None:
        # Lock held. The stash goes back too: it is younger than anything cancelled and
        # would otherwise overtake the redelivered messages.
        if not sub.pending_cancel:
            return
        tags = set(sub.pending_cancel) | {t for t, _, _ in sub.stash}
        sub.pending_cancel.clear()
        for t, _, _ in sub.stash:
            key = self._tag_key.get(t)
            if key is not None:
                self._seen.setdefault(key, 0)  # the app never saw it: count stays 1
        sub.stash.clear()
        if sub.copies is not None:
            self._redeliver_copies(sub, sorted(tags))
        elif self.profile.cancel == "resubscribe":
            # Every unacked message of the subscription goes back, in order.
            for tag in list(sub.unacked):
                if tag not in tags:
                    key = self._tag_key.get(tag)
                    if key is not None:
                        self._remember(key)
                self._forget(tag)
            sub.unacked.clear()
            self._unsubscribe(sub)
            self._subscribe(sub)
        else:
            self._nack(sub, sorted(tags, reverse=self.profile.nack_order == "desc"),
                       fence=True)

    def _redeliver_copies(self, sub: _Sub, tags: list[int]) -> None:
        """Hand ``tags`` (delivery order) back from the client's own copies (lock held).

        For an ActiveMQ non-durable topic subscription, where a NACK dead-letters and a
        re-SUBSCRIBE makes a new subscription: its unacknowledged messages belong to
        this consumer alone, so redelivering them here is what the broker would do. The
        broker's copies stay unacknowledged under new tags (each still holds its slot
        in the prefetch window) until the application acknowledges the redelivery."""
        assert sub.copies is not None
        for old in tags:
            ack_id = sub.unacked.pop(old, None)
            frame = sub.copies.pop(old, None)
            key = self._tag_key.get(old)
            self._forget(old)
            if ack_id is None or frame is None or key is None:
                continue
            headers, body = frame
            message = from_frame(headers, body)  # a fresh copy: unread body, own flags
            message.delivery_time = message.timestamp
            tag = next(self._tags)
            sub.unacked[tag] = ack_id
            sub.copies[tag] = frame
            self._tag_owner[tag] = sub
            self._tag_key[tag] = key
            sub.stash.append((tag, message, self._delivery_count(key, headers)))
        self._release(sub)

    def _nack(self, sub: _Sub, tags: list[int], *, fence: bool = False) -> None:
        """NACK ``tags`` (lock held). With ``fence``, MESSAGEs for ``sub`` that are not
        redeliveries are NACKed too, until the first redelivery arrives.

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
        was itself a redelivery and is still on its way lifts the fence early.
        """
        sent = False
        for tag in tags:
            ack_id = sub.unacked.pop(tag, None)
            self._forget(tag)
            if ack_id is not None:
                self._send_nack(ack_id, sub.sub_id)
                sent = True
        if fence and sent:
            sub.fence = True
