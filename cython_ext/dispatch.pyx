# cython: language_level=3
"""Listener dispatch for one consumer, with coalesced AUTO acknowledgements (compiled twin).

The pure twin ``jmspy/_pure/dispatch.py`` documents the semantics (why the loop, when
queued acknowledgements are sent); ``tests/test_dispatch_twins.py`` feeds both the same
scripted sessions and requires identical traces. Change one, change the other.

What compiling buys: the loop's own bookkeeping (flag tests, counters, the flow-window
arithmetic) runs as C; the session's and connection's state flags it tests around every
listener call are C fields of their records (``jmspy/_cext/lifecycle.pxd``); when the
consumer's buffer is the compiled ``PrefetchBuffer`` its ``pop`` and counters are typed
field reads through its ``.pxd``; a delivered :class:`~jmspy.message.Message`'s
acknowledger and delivery tag are typed fields of its record
(``jmspy/_cext/message_record.pxd``). The listener, the locks, the session calls and the
strategy's ``delivered`` stay Python calls; its ``hold`` is a deque's C ``append``.
"""

from jmspy._cext.lifecycle cimport ConnectionLife, SessionLife
from jmspy._cext.prefetch cimport PrefetchBuffer
from jmspy._cext.members cimport check_members, member_indices
from jmspy._cext.message_record cimport MessageRecord

from jmspy._pure.message_record import FIELDS

__all__ = ["consumed_counts", "drain", "held_tags", "take_held"]

cdef tuple _FIELDS = FIELDS
cdef tuple _TAG = member_indices(FIELDS, ("_delivery_tag",))


cpdef Py_ssize_t drain(object session, object connection, object consumer) except -1:
    """Run ``consumer``'s listener over its buffered messages; returns how many ran."""
    cdef object ready = session._ready
    # read once, as in the pure twin; the records' flags are C fields
    cdef list deferred = session._deferred
    cdef SessionLife life = session._life
    cdef ConnectionLife connection_life = connection._life
    cdef object ack = session.acknowledgement
    cdef object lock = consumer._lock
    cdef object acquire = lock.acquire
    cdef object release = lock.release
    cdef object buf = consumer._buffer
    cdef PrefetchBuffer cbuf = None
    if type(buf) is PrefetchBuffer:
        cbuf = <PrefetchBuffer>buf
    cdef Py_ssize_t limit = buf.limit
    cdef Py_ssize_t ack_batch = ack.batch
    cdef bint coalesce = ack_batch > 0 and limit > 0 and not connection._flow.enabled
    cdef Py_ssize_t trigger = limit * <Py_ssize_t>buf.threshold
    cdef object acknowledger = ack.acknowledger
    cdef object hold = ack.hold
    cdef object delivered = ack.delivered
    cdef Py_ssize_t pending = ack.held_count() if coalesce else 0  # see the pure twin
    cdef Py_ssize_t handled = 0
    cdef Py_ssize_t unconsumed, outstanding
    cdef object last_listener = None
    cdef object call = None
    cdef object listener, message, tag
    cdef bint ok, fast
    cdef bint current = False  # session._current is consumer (see the pure twin)
    try:
        while True:
            if handled and (ready or deferred or life.closing or not connection_life.started):
                break
            acquire()
            try:
                if consumer._closed:
                    break
                listener = consumer._listener
                if listener is None:
                    break
                message = cbuf.pop() if cbuf is not None else buf.pop()
            finally:
                release()
            if message is None:
                break
            handled += 1
            if listener is not last_listener:
                last_listener = listener
                call = getattr(listener, "on_message", None)
                if call is None:
                    call = listener
            if not current:
                session._current = consumer
                current = True
            fast = isinstance(message, MessageRecord)
            ok = True
            try:
                if coalesce:
                    if fast:
                        (<MessageRecord>message)._acknowledger = acknowledger
                    else:
                        message._acknowledger = acknowledger
                else:
                    delivered(consumer, message)
                call(message)
            except Exception as exc:
                ok = False
                session._listener_failed(listener, message, exc)
            if ack.recover_requested:
                ack.recover_requested = False
                ok = False
            if life.closed:
                return handled
            if coalesce and ok:
                if fast:  # the listener had the message: it may have deleted a field
                    check_members(message, _FIELDS, _TAG)
                    tag = (<MessageRecord>message)._delivery_tag
                else:
                    tag = message._delivery_tag
                hold((consumer, tag))
                pending += 1
                if cbuf is not None:
                    unconsumed = cbuf.unconsumed
                    outstanding = cbuf.outstanding
                else:
                    unconsumed = buf.unconsumed
                    outstanding = buf.outstanding
                if pending >= ack_batch or (unconsumed - pending + outstanding) * 100 <= trigger:
                    pending = 0
                    session._current = None
                    current = False
                    session._flush_acks()
                continue
            session._current = None
            current = False
            if pending:
                pending = 0
                session._flush_acks()
            session._listener_done(consumer, message, ok)
            if not ok:
                break
        if current:
            session._current = None
            current = False
        if pending:
            session._offer_acks()
        return handled
    finally:
        if current:
            session._current = None


# -- the queued acknowledgements (``hold``), settled as a batch; see the pure twin ---------


cpdef list take_held(object pending):
    """Pop what is queued now, oldest first (see the pure twin).

    ``list(pending)`` then ``pending.clear()`` with no bytecode between them: compiled
    code holds the GIL across both C calls (nothing here runs Python code or blocks), so
    no other thread's append can fall between the copy and the clear."""
    cdef list items = list(pending)
    pending.clear()
    return items


cpdef list held_tags(list items):
    """The delivery tags of ``(consumer, tag)`` items, in order."""
    cdef Py_ssize_t n = len(items)
    cdef list tags = [None] * n
    cdef Py_ssize_t i
    for i in range(n):
        tags[i] = (<tuple?>items[i])[1]
    return tags


cpdef list consumed_counts(list items, object floor):
    """How many of ``items`` (above ``floor``) each consumer delivered, in the order
    consumers first appear (a dict's insertion order; see the pure twin). Runs mostly
    share one consumer: counted in a C integer until the consumer changes."""
    cdef dict counts = {}
    cdef object last = None
    cdef Py_ssize_t run = 0
    cdef bint any_dead = floor > 0
    cdef tuple item
    cdef object consumer
    for item in items:
        if any_dead and not item[1] > floor:
            continue
        consumer = item[0]
        if run and consumer is last:
            run += 1
            continue
        if run:
            counts[last] += run
        last, run = consumer, 1
        if consumer not in counts:
            counts[consumer] = 0
    if run:
        counts[last] += run
    return list(counts.items())
