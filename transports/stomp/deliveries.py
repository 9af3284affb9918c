"""The delivery tags of one ``stomp://`` connection, and how often the application saw each
message before it was handed back (for JMSXDeliveryCount).

A tag names one delivery to the core: its subscription (its *owner*) and the key its
redeliveries are counted under (:meth:`StompSubscription.count_key`). ActiveMQ and RabbitMQ
only say ``redelivered:true``; what this connection saw itself is better, so ``_seen``
remembers, per key, how many times the application had a message before it went back. It
stays until the message is acknowledged (popping it at redelivery made a second
``recover()`` count from 1 again: 2, 2, ... instead of 2, 3) and holds at most
:data:`MEMORY` keys, oldest forgotten first.

Not thread-safe: the transport calls it with its lock held.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

from .subscription import StompSubscription

__all__ = ["MEMORY", "Deliveries"]

#: How many message keys the delivery counts remember (oldest forgotten first).
MEMORY = 10_000


class Deliveries:
    """Tag -> (owner, key), and key -> times seen (see the module docstring)."""

    __slots__ = ("_key", "_owner", "_seen", "_tags")

    def __init__(self) -> None:
        # Tags keep increasing across reconnects: the core treats every tag up to the
        # last one handed out before a drop as dead.
        self._tags = itertools.count(1)
        self._owner: dict[int, StompSubscription] = {}
        self._key: dict[int, str] = {}
        self._seen: OrderedDict[str, int] = OrderedDict()

    def new(self, sub: StompSubscription) -> int:
        tag = next(self._tags)
        self._owner[tag] = sub
        return tag

    def owner(self, tag: int) -> StompSubscription | None:
        return self._owner.get(tag)

    def key(self, tag: int) -> str | None:
        return self._key.get(tag)

    def set_key(self, tag: int, key: str) -> None:
        self._key[tag] = key

    def forget(self, tag: int) -> None:
        self._owner.pop(tag, None)
        self._key.pop(tag, None)

    def settle(self, tag: int) -> StompSubscription | None:
        """``tag`` was acknowledged: it is forgotten, and so is its message's count (an
        acknowledged message is never redelivered). Returns its owner."""
        sub = self._owner.pop(tag, None)
        key = self._key.pop(tag, None)
        if key is not None and self._seen:
            self._seen.pop(key, None)
        return sub

    def connection_lost(self) -> None:
        """Every tag of the dropped connection is dead; the counts stay (the broker
        redelivers those messages)."""
        self._owner.clear()
        self._key.clear()

    # -- JMSXDeliveryCount ----------------------------------------------------------------

    def seen_again(self, key: str) -> None:
        """The application had the message under ``key`` and it goes back."""
        seen = self._seen
        seen[key] = seen.get(key, 0) + 1
        seen.move_to_end(key)
        while len(seen) > MEMORY:
            seen.popitem(last=False)

    def never_seen(self, key: str) -> None:
        """The message goes back (or came) without the application having seen it."""
        self._seen.setdefault(key, 0)

    def delivery_count(self, key: str, headers: dict[str, str]) -> int:
        """JMSXDeliveryCount: what this connection knows beats what the broker says.
        ActiveMQ and RabbitMQ only say ``redelivered:true`` (count 2 when nothing else is
        known); jmspy's broker counts every NACK, also of copies the application never
        saw (``jmspy-delivery-count``)."""
        seen = self._seen.get(key)
        if seen is not None:
            return 1 + seen
        explicit = headers.get("jmspy-delivery-count")
        if explicit and explicit.isdigit():
            return int(explicit)
        return 2 if headers.get("redelivered", "").lower() == "true" else 1
