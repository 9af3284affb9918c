"""Duplicate detection (Artemis's duplicate id cache): a message carrying a duplicate id
that its address has seen recently is dropped, not routed a second time.

Why: a producer that cannot tell whether its send (or commit) arrived -- a Spark task
retried after a failure, a client that reconnected before its receipt came -- sends again.
With a stable id per message (the ``_AMQ_DUPL_ID`` property, Artemis's name, so clients
written for Artemis work unchanged) the second copy is recognised and dropped: exactly
once into this broker.

The window: each address remembers its last ``duplicate-id-cache-size`` ids (default
1,000,000; 0 turns detection off) that are at most ``duplicate-id-max-age-ms`` old
(default 7 days; 0: no age limit), about 150 bytes of RAM each. Large by default
because a Spark job writes a row each, and a retry may come after the whole job's other
rows (20,000, Artemis's default, let a retried 100,000-row job through twice).

Durable: the id of a *persistent* message is written to the broker's store in the same
store batch as the message itself (:meth:`~.store.Store.add_duplicate_id`), so a broker
restarted (or killed) after a commit still drops the retry that follows it. A
non-persistent message's id is kept in RAM only: after a restart the message is gone, so
its resend must be taken. The store is trimmed to the window as ids fall out of it
(:meth:`~.store.Store.trim_duplicate_ids`, in runs, not one delete per id).

An id is remembered only once its message was routed: a send that fails (a full store,
an unknown queue) leaves no id behind that would drop its retry. A duplicate is dropped
silently, also inside a transaction: the rest of the transaction commits (a retried
task's commit must succeed, or Spark would retry it forever).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

# The property's name is the client's too (jmspy.spark sets it): shared vocabulary.
from jmspy.wire.headers import DUPLICATE_ID

__all__ = ["DUPLICATE_ID", "TRIM_EVERY", "DuplicateIds", "IdStore"]


class IdStore(Protocol):
    """What the windows need of the broker's :class:`~.store.Store` (its own Protocol here:
    the send path imports this module, and must not reach the store's types)."""

    def add_duplicate_id(self, address: str, dup_id: str, n: int, at_ms: int) -> None: ...

    def trim_duplicate_ids(self, address: str, oldest_kept: str) -> None: ...

#: Ids fallen out of an address's window before the store is trimmed to it (one DELETE
#: for this many ids; the store may hold up to this many more than the window, and the
#: next start keeps only the window).
TRIM_EVERY = 1024


class _Cache:
    """One address's window: ``order`` (oldest first) and ``ids``; ``runs`` says when the
    ids were added, as ``[second, count]`` runs in the same order (ids added in one
    second share an entry); ``added`` numbers them (the store's ``n``: the store keeps
    them in the same order)."""

    __slots__ = ("added", "evicted", "ids", "order", "runs", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.order: deque[str] = deque()
        self.ids: set[str] = set()
        self.runs: deque[list[int]] = deque()
        self.added = 0
        self.evicted = 0  # since the store was last trimmed

    def add(self, key: str, second: int) -> None:
        self.order.append(key)
        self.ids.add(key)
        self.added += 1
        runs = self.runs
        if runs and runs[-1][0] == second:
            runs[-1][1] += 1
        else:
            runs.append([second, 1])

    def pop_oldest(self) -> None:
        self.ids.discard(self.order.popleft())
        run = self.runs[0]
        run[1] -= 1
        if not run[1]:
            self.runs.popleft()
        self.evicted += 1

    def evict(self, oldest_second: int) -> None:
        """Drop ids past the count, and those added before ``oldest_second``."""
        while len(self.order) > self.size:
            self.pop_oldest()
        runs = self.runs
        while runs and runs[0][0] < oldest_second:
            self.pop_oldest()


class DuplicateIds:
    """The id windows of one broker, one per address; counts what they dropped."""

    __slots__ = ("_caches", "dropped", "store")

    def __init__(self, store: IdStore | None = None) -> None:
        self._caches: dict[str, _Cache] = {}
        #: where persistent messages' ids are kept (None: RAM only)
        self.store = store
        #: address -> duplicates dropped there
        self.dropped: dict[str, int] = {}

    def _cache(self, address: str, size: int, now_ms: int, max_age_ms: int) -> _Cache:
        cache = self._caches.get(address)
        if cache is None:
            cache = self._caches[address] = _Cache(size)
        cache.size = size  # the setting may have changed: keep the newest that fit
        cache.evict(-1 if max_age_ms <= 0 else (now_ms - max_age_ms) // 1000)
        if cache.evicted >= TRIM_EVERY and self.store is not None and cache.order:
            self.store.trim_duplicate_ids(address, cache.order[0])
            cache.evicted = 0
        return cache

    def seen(self, address: str, dup_id: object, size: int, now_ms: int,
             max_age_ms: int) -> bool:
        """True when ``dup_id`` is in ``address``'s window (the message must be dropped;
        counted). Remembers nothing: :meth:`remember` does, once the message is routed."""
        if size <= 0:
            return False
        if str(dup_id) in self._cache(address, size, now_ms, max_age_ms).ids:
            self.dropped[address] = self.dropped.get(address, 0) + 1
            return True
        return False

    def remember(self, address: str, dup_id: object, size: int, now_ms: int,
                 max_age_ms: int, durable: bool) -> None:
        """Add ``dup_id`` to the window (and to the store, ``durable``: a persistent
        message's, in the store batch that stores the message)."""
        if size <= 0:
            return
        key = str(dup_id)
        cache = self._cache(address, size, now_ms, max_age_ms)
        if key in cache.ids:
            return
        cache.add(key, now_ms // 1000)
        if durable and self.store is not None:
            self.store.add_duplicate_id(address, key, cache.added, now_ms)
        if len(cache.order) > size:
            cache.pop_oldest()

    def is_duplicate(self, address: str, dup_id: object, size: int, now_ms: int = 0,
                     max_age_ms: int = 0) -> bool:
        """:meth:`seen`, and :meth:`remember` (in RAM) when not: both steps in one, for a
        caller with nothing in between that could fail."""
        if self.seen(address, dup_id, size, now_ms, max_age_ms):
            return True
        self.remember(address, dup_id, size, now_ms, max_age_ms, False)
        return False

    def recover(self, rows: dict[str, list[tuple[str, int, int]]]) -> None:
        """The ids a store kept (:meth:`~.store.Store.load_duplicate_ids`: per address,
        ``(id, n, at_ms)`` oldest first); the window applies at the next send."""
        for address, entries in rows.items():
            cache = self._caches[address] = _Cache(len(entries) or 1)
            for key, _n, at_ms in entries:
                cache.add(key, at_ms // 1000)
            if entries:
                cache.added = entries[-1][1]

    def window(self, address: str) -> list[str]:
        """The ids ``address`` remembers, oldest first (tests and diagnostics)."""
        cache = self._caches.get(address)
        return [] if cache is None else list(cache.order)
