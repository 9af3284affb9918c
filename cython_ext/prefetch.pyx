# cython: language_level=3
"""Consumer-side prefetch buffer and Open MQ flow window (compiled twin).

The pure twin is ``jmspy/_pure/prefetch.py``: it documents the semantics and both are fed
the same random operation sequences by ``tests/test_prefetch_twins.py``. Change one,
change the other. The typed interface is in ``jmspy._cext.prefetch.pxd`` (see there
for why the file name is dotted).

Items live in a Python list used as a power-of-two ring: appending, popping and putting
back are index arithmetic on C integers plus one list slot store, and the list keeps the
items visible to the cyclic garbage collector (a raw ``PyObject*`` array would not).
"""

import operator

__all__ = ["MAX_COUNT", "MAX_LIMIT", "PrefetchBuffer", "top_up"]

#: Largest accepted flow limit.
MAX_LIMIT = 2**31 - 1
#: Largest count top_up takes (its arithmetic must fit in a C Py_ssize_t).
MAX_COUNT = 2**48

cdef Py_ssize_t _SSIZE_MAX = <Py_ssize_t>((<size_t>-1) >> 1)
cdef Py_ssize_t _MIN_CAPACITY = 8
cdef Py_ssize_t _MAX_INITIAL_CAPACITY = 1024
cdef str _NONE_ITEM = "cannot buffer None: pop() returns None for an empty buffer"


cdef inline Py_ssize_t _capacity_for(Py_ssize_t need) noexcept:
    cdef Py_ssize_t cap = _MIN_CAPACITY
    while cap < need:
        cap <<= 1
    return cap


cdef inline Py_ssize_t _top_up(Py_ssize_t limit, Py_ssize_t threshold,
                               Py_ssize_t unconsumed, Py_ssize_t outstanding) noexcept:
    # The rule itself, unchecked (PrefetchBuffer's counters are valid by construction).
    cdef Py_ssize_t want
    if limit and (unconsumed + outstanding) * 100 <= limit * threshold:
        want = limit - unconsumed - outstanding
        if want > 0:
            return want
    return 0


def top_up(Py_ssize_t limit, Py_ssize_t threshold, Py_ssize_t unconsumed,
           Py_ssize_t outstanding):
    """The Open MQ top-up rule, defined once for everyone who applies it; see the pure
    twin."""
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


cdef class PrefetchBuffer:
    """FIFO of delivered-but-not-taken items plus the consumer's flow-window counters."""

    def __cinit__(self, *args, **kwargs):
        self._ring = [None] * _MIN_CAPACITY
        self._mask = _MIN_CAPACITY - 1

    def __init__(self, limit, threshold):
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
        self.limit = limit
        self.threshold = threshold
        cdef Py_ssize_t cap = _capacity_for(min(self.limit, _MAX_INITIAL_CAPACITY))
        self._ring = [None] * cap
        self._mask = cap - 1
        self._head = 0
        self.buffered = 0
        self.unconsumed = 0
        self.outstanding = 0
        self.delivered_total = 0
        self.consumed_total = 0
        self.batches = 0
        self.pauses = 0
        self._started = False

    # -- counters ---------------------------------------------------------------------

    cpdef tuple stats(self):
        """(limit, threshold, buffered, unconsumed, outstanding, delivered_total,
        consumed_total, batches, pauses)."""
        return (
            self.limit,
            self.threshold,
            self.buffered,
            self.unconsumed,
            self.outstanding,
            self.delivered_total,
            self.consumed_total,
            self.batches,
            self.pauses,
        )

    def __len__(self):
        return self.buffered

    def __repr__(self):
        return (
            f"<PrefetchBuffer limit={self.limit} threshold={self.threshold} "
            f"buffered={self.buffered} unconsumed={self.unconsumed} "
            f"outstanding={self.outstanding}>"
        )

    # -- credit -----------------------------------------------------------------------

    cpdef Py_ssize_t initial_credit(self) except -1:
        """Credit to grant when the consumer starts: the whole window (0 in pull mode)."""
        if self._started:
            raise RuntimeError("initial_credit() was already called for this buffer")
        self._started = True
        if self.limit == 0:
            return 0
        self.outstanding = self.limit
        self.batches = 1
        return self.limit

    cpdef Py_ssize_t wanted(self) noexcept:
        """Credit to ask for now (not reserved); see the pure twin."""
        return _top_up(self.limit, self.threshold, self.unconsumed, self.outstanding)

    cpdef object granted(self, Py_ssize_t n):
        """``n`` credits were granted to the broker (possibly fewer than asked for)."""
        if n < 0:
            raise ValueError(f"granted credit must be >= 0, got {n}")
        if n > _SSIZE_MAX - self.outstanding:
            raise OverflowError("outstanding credit would not fit in a C Py_ssize_t")
        self.outstanding += n
        if n:
            self.batches += 1
        return None

    cpdef Py_ssize_t pull_credit(self) noexcept:
        """Pull mode only: 1 (now outstanding, counted as a batch) when nothing is
        buffered or in flight, else 0."""
        if self.limit == 0 and self.outstanding == 0 and self.buffered == 0:
            self.outstanding = 1
            self.batches += 1
            return 1
        return 0

    cpdef object revoked(self, Py_ssize_t n):
        """The broker returned ``n`` unused credits."""
        if n < 0:
            raise ValueError(f"revoked credit must be >= 0, got {n}")
        self.outstanding = self.outstanding - n if n < self.outstanding else 0
        return None

    # -- deliveries -------------------------------------------------------------------

    cdef int _reserve(self, Py_ssize_t need) except -1:
        """Make room for ``need`` items, keeping their order (oldest at index 0)."""
        cdef Py_ssize_t cap = self._mask + 1
        if need <= cap:
            return 0
        cdef Py_ssize_t new_cap = _capacity_for(need)
        cdef list ring = self._ring
        cdef Py_ssize_t first = min(self.buffered, cap - self._head)
        cdef list grown = ring[self._head:self._head + first]
        grown.extend(ring[:self.buffered - first])
        grown.extend([None] * (new_cap - self.buffered))
        self._ring = grown
        self._head = 0
        self._mask = new_cap - 1
        return 0

    cpdef object push(self, object item):
        """A delivery arrived from the broker."""
        if item is None:
            raise ValueError(_NONE_ITEM)
        if self.buffered > self._mask:
            self._reserve(self.buffered + 1)
        cdef Py_ssize_t idx = (self._head + self.buffered) & self._mask
        self._ring[idx] = item
        self.buffered += 1
        self.unconsumed += 1
        self.delivered_total += 1
        if self.outstanding > 0:
            self.outstanding -= 1
        if self.outstanding == 0 and self.limit > 0 and self.unconsumed >= self.limit:
            self.pauses += 1
        return None

    cpdef object push_many(self, object items):
        """A run of deliveries arrived: exactly ``push(item)`` for each, in order."""
        cdef object item
        for item in items:
            self.push(item)  # cpdef: called through the C vtable, no Python call
        return None

    cpdef object pop(self):
        """Take the oldest buffered item, or None when the buffer is empty."""
        if self.buffered == 0:
            return None
        cdef Py_ssize_t idx = self._head
        cdef list ring = self._ring
        cdef object item = ring[idx]
        ring[idx] = None
        self._head = (idx + 1) & self._mask
        self.buffered -= 1
        return item

    cpdef object push_front(self, object items):
        """Put already-delivered items back at the front, in the given order."""
        cdef list batch = list(items)
        cdef Py_ssize_t count = len(batch)
        cdef Py_ssize_t i
        for i in range(count):
            if batch[i] is None:
                raise ValueError(_NONE_ITEM)
        self._reserve(self.buffered + count)
        cdef list ring = self._ring
        cdef Py_ssize_t idx = self._head
        for i in range(count - 1, -1, -1):
            idx = (idx - 1) & self._mask
            ring[idx] = batch[i]
        self._head = idx
        self.buffered += count
        return None

    cpdef Py_ssize_t consumed(self, Py_ssize_t n=1) except -1:
        """``n`` items were acknowledged or committed; returns :meth:`wanted`."""
        if n < 0:
            raise ValueError(f"consumed count must be >= 0, got {n}")
        if n > self.unconsumed:
            raise ValueError(
                f"consumed({n}) but only {self.unconsumed} delivered items are unconsumed"
            )
        self.unconsumed -= n
        self.consumed_total += n
        return _top_up(self.limit, self.threshold, self.unconsumed, self.outstanding)

    cpdef list drain(self):
        """Remove and return every buffered item; they go back to the broker unconsumed
        (``unconsumed`` drops by their number, never below 0)."""
        cdef Py_ssize_t cap = self._mask + 1
        cdef Py_ssize_t first = min(self.buffered, cap - self._head)
        cdef list ring = self._ring
        cdef list batch = ring[self._head:self._head + first]
        batch.extend(ring[:self.buffered - first])
        cdef Py_ssize_t count = self.buffered
        cap = _capacity_for(min(self.limit, _MAX_INITIAL_CAPACITY))
        self._ring = [None] * cap
        self._mask = cap - 1
        self._head = 0
        self.buffered = 0
        self.unconsumed = self.unconsumed - count if count < self.unconsumed else 0
        return batch

    cpdef object forget(self, Py_ssize_t n):
        """``n`` taken-but-unconsumed items were handed back to the broker."""
        if n < 0:
            raise ValueError(f"forgotten count must be >= 0, got {n}")
        if n > self.unconsumed:
            raise ValueError(
                f"forget({n}) but only {self.unconsumed} delivered items are unconsumed"
            )
        self.unconsumed -= n
        return None
