"""Duplicate detection (Artemis's duplicate id cache): a message carrying a duplicate id
that its address has seen recently is dropped, not routed a second time.

Why: a producer that cannot tell whether its send (or commit) arrived -- a Spark task
retried after a failure, a client that reconnected before its receipt came -- sends again.
With a stable id per message (the ``_AMQ_DUPL_ID`` property, Artemis's name, so clients
written for Artemis work unchanged) the second copy is recognised and dropped: exactly
once into this broker. The cache keeps the last ``duplicate-id-cache-size`` ids of each
address (Artemis's ``id-cache-size``, default 20,000; 0 turns detection off) in RAM, for
the broker's run: a restart forgets them (Artemis can persist them; we do not yet).

A duplicate is dropped silently, also inside a transaction: the rest of the transaction
commits (a retried task's commit must succeed, or Spark would retry it forever).
"""

from __future__ import annotations

from collections import deque

# The property's name is the client's too (jmspy.spark sets it): shared vocabulary.
from jmspy.wire.headers import DUPLICATE_ID

__all__ = ["DUPLICATE_ID", "DuplicateIds"]


class _Cache:
    __slots__ = ("ids", "order")

    def __init__(self, size: int) -> None:
        self.order: deque[str] = deque(maxlen=size)
        self.ids: set[str] = set()


class DuplicateIds:
    """The id caches of one broker, one per address; counts what they dropped."""

    __slots__ = ("_caches", "dropped")

    def __init__(self) -> None:
        self._caches: dict[str, _Cache] = {}
        #: address -> duplicates dropped there
        self.dropped: dict[str, int] = {}

    def is_duplicate(self, address: str, dup_id: object, size: int) -> bool:
        """True when ``dup_id`` was seen at ``address`` among its last ``size`` ids (the
        message must be dropped); otherwise remember it and return False."""
        if size <= 0:
            return False
        key = str(dup_id)
        cache = self._caches.get(address)
        if cache is None or cache.order.maxlen != size:
            old = cache
            cache = self._caches[address] = _Cache(size)
            if old is not None:  # the setting changed: keep the newest ids that fit
                for kept in list(old.order)[-size:]:
                    cache.order.append(kept)
                    cache.ids.add(kept)
        if key in cache.ids:
            self.dropped[address] = self.dropped.get(address, 0) + 1
            return True
        order = cache.order
        if len(order) == order.maxlen:
            cache.ids.discard(order[0])
        order.append(key)
        cache.ids.add(key)
        return False
