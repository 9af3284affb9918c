# cython: language_level=3
"""The broker's per-message dispatch step for one consumer (compiled twin).

The pure twin ``jmspy/_pure/queue_run.py`` documents the semantics;
``tests/test_queue_run_twins.py`` runs both over the same random queues and requires the
same deliveries and the same queue and consumer state. Change one, change the other.

What compiling buys: the run's counters (ready, delivering, credit, tag) are C integers
written back once per run (in a ``finally``, so an exception leaves the same state as the
pure twin), the deques and dicts are reached through typed references, and there is no
interpreter loop around the per-message bookkeeping.
"""

from collections import deque

__all__ = ["DELIVERING", "GONE", "READY", "take_run"]

READY = 0
DELIVERING = 2
GONE = 3
cdef long _READY = 0
cdef object _DELIVERING = 2
cdef object _GONE = 3


cpdef tuple take_run(object queue, object c, Py_ssize_t room):
    """Deliver up to ``room`` ready messages of ``queue`` to ``c``; see the pure twin."""
    cdef list messages = []
    cdef list counts = []
    cdef object ch = c.channel
    cdef object first_tag = ch.next_tag
    if room <= 0 or not queue.ready_count:
        return messages, counts, first_tag, None
    cdef bint auto = c.auto_ack
    cdef bint persist = queue._persist
    cdef dict delivering = c.delivering
    cdef dict owners = ch.tags
    cdef Py_ssize_t ready = queue.ready_count
    cdef Py_ssize_t credit = c.credit
    cdef Py_ssize_t tag = first_tag
    cdef Py_ssize_t dequeued = queue.dequeued
    cdef Py_ssize_t in_delivery = queue.delivering_count
    cdef Py_ssize_t taken = 0
    cdef long long now = -1
    cdef long long exp
    cdef Py_ssize_t count
    cdef object ref, message, level, expiration, key
    try:
        for level in queue._levels:
            while level:
                ref = level.popleft()
                if ref.state != _READY:
                    continue  # a tombstone (expired by a timer while queued)
                ready -= 1
                message = ref.message
                expiration = message.expiration
                if expiration:
                    exp = expiration
                    if now < 0:
                        now = queue.host.now()
                    if exp <= now:
                        return messages, counts, first_tag, ref
                count = ref.delivery_count + 1
                ref.delivery_count = count
                credit -= 1
                key = tag
                if auto:
                    ref.state = _GONE
                    dequeued += 1
                    if persist and message.persistent:
                        queue._unstore(message)
                else:
                    ref.state = _DELIVERING
                    delivering[key] = ref
                    owners[key] = c
                    in_delivery += 1
                tag += 1
                messages.append(message)
                counts.append(count)
                taken += 1
                if taken >= room or not ready:
                    return messages, counts, first_tag, None
        ready = 0  # only tombstones were left: resync the count
        return messages, counts, first_tag, None
    finally:
        queue.ready_count = ready
        c.credit = credit
        ch.next_tag = tag
        queue.dequeued = dequeued
        queue.delivering_count = in_delivery
