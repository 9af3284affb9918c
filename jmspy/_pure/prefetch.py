"""Consumer-side prefetch buffer and Open MQ flow window (pure-Python twin).

The compiled twin is ``cython_ext/prefetch.pyx`` (``jmspy._cext.prefetch``); both satisfy
:class:`jmspy.prefetch_protocol.PrefetchBufferProtocol` and are fed the same random
operation sequences by ``tests/test_prefetch_twins.py``. Change one, change the other.

Open MQ semantics (seed 004): the broker pre-sends at most ``imqConsumerFlowLimit``
messages a consumer has not yet consumed. A message is *consumed* when the application
acknowledges or commits it, not when it is taken from the buffer. The buffer is not topped
up on every consumption: only when unconsumed falls to ``limit * threshold%`` does the
client ask for ``limit - unconsumed`` more. Credit the broker holds but has not used yet
(the queue ran dry) counts as already on its way: without that, every consumption after a
queue empties would ask for one more credit, a round trip per message for nothing.
With the defaults 1000/50 the broker sends 1000, the client consumes 500, 500 more come.
A limit of 0 means pull: one credit per ``receive`` when nothing is buffered or in flight.

This class only counts; it does no I/O and takes no lock (the consumer serialises calls).
"""

from __future__ import annotations

import operator
import sys
from collections import deque
from collections.abc import Iterable
from typing import Final, SupportsIndex

from jmspy.prefetch_protocol import PrefetchBufferProtocol

__all__ = ["MAX_COUNT", "MAX_LIMIT", "PrefetchBuffer", "top_up"]

#: Largest accepted flow limit (the compiled twin keeps counters in C integers).
MAX_LIMIT: Final = 2**31 - 1
#: Largest count :func:`top_up` takes (its arithmetic must fit in a C Py_ssize_t).
MAX_COUNT: Final = 2**48
_SSIZE_MAX: Final = sys.maxsize
_SSIZE_MIN: Final = -sys.maxsize - 1


def _overflow(n: int) -> None:
    # The compiled twin takes ``n`` as a C Py_ssize_t and refuses out-of-range ints with
    # OverflowError before looking at it; do the same so both twins fail alike.
    if n > _SSIZE_MAX or n < _SSIZE_MIN:
        raise OverflowError(f"n={n} does not fit in a C Py_ssize_t")


def _index(n: SupportsIndex) -> int:
    value = operator.index(n)
    _overflow(value)
    return value


def _count(n: SupportsIndex, what: str) -> int:
    """``n`` as a non-negative int (TypeError / OverflowError / ValueError otherwise)."""
    value = operator.index(n)
    _overflow(value)
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value


def _top_up(limit: int, threshold: int, unconsumed: int, outstanding: int) -> int:
    # The rule itself, unchecked (PrefetchBuffer's counters are valid by construction).
    if limit and (unconsumed + outstanding) * 100 <= limit * threshold:
        want = limit - unconsumed - outstanding
        if want > 0:
            return want
    return 0


def top_up(limit: int, threshold: int, unconsumed: int, outstanding: int) -> int:
    """The Open MQ top-up rule, defined once for everyone who applies it: the credit to ask
    for when ``unconsumed`` delivered messages are not yet consumed and ``outstanding``
    credit is still unused -- ``limit - unconsumed - outstanding`` once the two together
    have fallen to ``limit * threshold%``, else 0 (always 0 for limit 0, pull mode).

    :class:`PrefetchBuffer` applies it to its own counters; the bundled broker's STOMP
    session applies it to its client's unconsumed deliveries and the unused credit its
    broker core holds, so that the core alone counts that credit."""
    # one argument after the other, as the compiled twin converts them to C integers
    limit, threshold, unconsumed, outstanding = (
        _index(v) for v in (limit, threshold, unconsumed, outstanding))
    if limit < 0 or limit > MAX_LIMIT:
        raise ValueError(f"flow limit must be between 0 and {MAX_LIMIT}, got {limit}")
    if threshold < 0 or threshold > 100:
        raise ValueError(f"flow threshold is a percentage between 0 and 100, got {threshold}")
    if not 0 <= unconsumed <= MAX_COUNT or not 0 <= outstanding <= MAX_COUNT:
        raise ValueError(
            f"unconsumed and outstanding must be between 0 and {MAX_COUNT}, "
            f"got {unconsumed} and {outstanding}"
        )
    return _top_up(limit, threshold, unconsumed, outstanding)


class PrefetchBuffer:
    """FIFO of delivered-but-not-taken items plus the consumer's flow-window counters.

    ``buffered`` items wait to be taken; ``unconsumed`` counts every delivered item not yet
    consumed (buffered ones *and* taken-but-unacknowledged ones); ``outstanding`` is the
    credit granted to the broker and not yet used.
    """

    __slots__ = (
        "_batches",
        "_consumed_total",
        "_delivered_total",
        "_items",
        "_limit",
        "_outstanding",
        "_pauses",
        "_started",
        "_threshold",
        "_unconsumed",
    )

    def __init__(self, limit: int, threshold: int) -> None:
        limit = operator.index(limit)
        threshold = operator.index(threshold)
        if limit < 0 or limit > MAX_LIMIT:
            raise ValueError(
                f"consumer flow limit must be between 0 (pull mode) and {MAX_LIMIT}, got {limit}"
            )
        if threshold < 0 or threshold > 100:
            raise ValueError(
                f"consumer flow threshold is a percentage between 0 and 100, got {threshold}"
            )
        self._limit = limit
        self._threshold = threshold
        self._items: deque[object] = deque()
        self._unconsumed = 0
        self._outstanding = 0
        self._delivered_total = 0
        self._consumed_total = 0
        self._batches = 0
        self._pauses = 0
        self._started = False

    # -- counters -------------------------------------------------------------------------

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def threshold(self) -> int:
        return self._threshold

    @property
    def buffered(self) -> int:
        return len(self._items)

    @property
    def unconsumed(self) -> int:
        return self._unconsumed

    @property
    def outstanding(self) -> int:
        return self._outstanding

    @property
    def delivered_total(self) -> int:
        return self._delivered_total

    @property
    def consumed_total(self) -> int:
        return self._consumed_total

    @property
    def batches(self) -> int:
        return self._batches

    @property
    def pauses(self) -> int:
        return self._pauses

    def stats(self) -> tuple[int, ...]:
        """(limit, threshold, buffered, unconsumed, outstanding, delivered_total,
        consumed_total, batches, pauses)."""
        return (
            self._limit,
            self._threshold,
            len(self._items),
            self._unconsumed,
            self._outstanding,
            self._delivered_total,
            self._consumed_total,
            self._batches,
            self._pauses,
        )

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return (
            f"<PrefetchBuffer limit={self._limit} threshold={self._threshold} "
            f"buffered={len(self._items)} unconsumed={self._unconsumed} "
            f"outstanding={self._outstanding}>"
        )

    # -- credit ---------------------------------------------------------------------------

    def initial_credit(self) -> int:
        """Credit to grant when the consumer starts: the whole window (0 in pull mode)."""
        if self._started:
            raise RuntimeError("initial_credit() was already called for this buffer")
        self._started = True
        if self._limit == 0:
            return 0
        self._outstanding = self._limit
        self._batches = 1
        return self._limit

    def wanted(self) -> int:
        """Credit to ask for now (not reserved): the top-up once unconsumed has fallen to
        the threshold, else 0 (:func:`top_up`). Call :meth:`granted` with what was
        actually granted."""
        return _top_up(self._limit, self._threshold, self._unconsumed, self._outstanding)

    def granted(self, n: int) -> None:
        """``n`` credits were granted to the broker (possibly fewer than asked for)."""
        n = _count(n, "granted credit")
        if n > _SSIZE_MAX - self._outstanding:
            raise OverflowError("outstanding credit would not fit in a C Py_ssize_t")
        self._outstanding += n
        if n:
            self._batches += 1

    def pull_credit(self) -> int:
        """Pull mode only: 1 (now outstanding, and counted as a batch) when nothing is
        buffered or in flight, else 0. The caller grants that credit itself; it does not
        call :meth:`granted` for it."""
        if self._limit == 0 and self._outstanding == 0 and not self._items:
            self._outstanding = 1
            self._batches += 1
            return 1
        return 0

    def revoked(self, n: int) -> None:
        """The broker returned ``n`` unused credits."""
        n = _count(n, "revoked credit")
        self._outstanding = max(0, self._outstanding - n)

    # -- deliveries -----------------------------------------------------------------------

    def push(self, item: object) -> None:
        """A delivery arrived from the broker."""
        if item is None:
            raise ValueError("cannot buffer None: pop() returns None for an empty buffer")
        self._items.append(item)
        self._unconsumed += 1
        self._delivered_total += 1
        if self._outstanding > 0:
            self._outstanding -= 1
        if self._outstanding == 0 and self._limit > 0 and self._unconsumed >= self._limit:
            self._pauses += 1

    def push_many(self, items: Iterable[object]) -> None:
        """A run of deliveries arrived: exactly ``push(item)`` for each, in order."""
        push = self.push
        for item in items:
            push(item)

    def pop(self) -> object | None:
        """Take the oldest buffered item, or None when the buffer is empty."""
        items = self._items
        return items.popleft() if items else None

    def push_front(self, items: Iterable[object]) -> None:
        """Put already-delivered items back at the front, in the given order."""
        batch = list(items)
        for item in batch:
            if item is None:
                raise ValueError("cannot buffer None: pop() returns None for an empty buffer")
        self._items.extendleft(reversed(batch))

    def consumed(self, n: int = 1) -> int:
        """``n`` items were acknowledged or committed; returns :meth:`wanted`."""
        n = operator.index(n)  # 1.0 or "1" must fail here, not corrupt the counters
        if n < 0 or n > self._unconsumed:
            _overflow(n)
            if n < 0:
                raise ValueError(f"consumed count must be >= 0, got {n}")
            raise ValueError(
                f"consumed({n}) but only {self._unconsumed} delivered items are unconsumed"
            )
        self._unconsumed -= n
        self._consumed_total += n
        return _top_up(self._limit, self._threshold, self._unconsumed, self._outstanding)

    def drain(self) -> list[object]:
        """Remove and return every buffered item; they go back to the broker unconsumed.

        ``unconsumed`` drops by their number (never below 0, should some of them already
        have been reported as consumed)."""
        batch = list(self._items)
        self._items.clear()
        self._unconsumed = max(0, self._unconsumed - len(batch))
        return batch

    def forget(self, n: int) -> None:
        """``n`` taken-but-unconsumed items were handed back to the broker."""
        n = _count(n, "forgotten count")
        if n > self._unconsumed:
            raise ValueError(
                f"forget({n}) but only {self._unconsumed} delivered items are unconsumed"
            )
        self._unconsumed -= n


_check: type[PrefetchBufferProtocol] = PrefetchBuffer
