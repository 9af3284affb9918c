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

from jmspy._cext.slots cimport get_slot, set_slot, slot_offset

__all__ = ["DELIVERING", "GONE", "READY", "acknowledge_tags", "take_run"]

READY = 0
DELIVERING = 2
GONE = 3
cdef long _READY = 0
cdef object _DELIVERING = 2
cdef object _GONE = 3
cdef object _MISSING = object()
# Slot offsets of the broker's records, taken on first use: the broker core imports this
# module while it is itself being imported, so the classes cannot be imported here.
cdef object _MessageRef = None
cdef object _ServerMessage = None
cdef object _ServerConsumer = None
cdef object _Queue = None
cdef Py_ssize_t R_STATE, R_MESSAGE, R_COUNT, M_EXP, M_PERSISTENT
cdef Py_ssize_t C_QUEUE, C_DELIVERING, C_IN_RING, C_CLOSED, C_CREDIT
cdef Py_ssize_t Q_POLICY, Q_DELIVERING_COUNT, Q_DEQUEUED, Q_PERSIST


cdef int _load_offsets() except -1:
    global _MessageRef, _ServerMessage, R_STATE, R_MESSAGE, R_COUNT, M_EXP, M_PERSISTENT
    global _ServerConsumer, _Queue, C_QUEUE, C_DELIVERING, C_IN_RING, C_CLOSED, C_CREDIT
    global Q_POLICY, Q_DELIVERING_COUNT, Q_DEQUEUED, Q_PERSIST
    from jmspy.broker_ref.core.api import ServerMessage
    from jmspy.broker_ref.core.consumer import MessageRef, ServerConsumer
    from jmspy.broker_ref.core.queue import Queue
    M_PERSISTENT = slot_offset(ServerMessage, "persistent")
    C_QUEUE = slot_offset(ServerConsumer, "queue")
    C_DELIVERING = slot_offset(ServerConsumer, "delivering")
    C_IN_RING = slot_offset(ServerConsumer, "in_ring")
    C_CLOSED = slot_offset(ServerConsumer, "closed")
    C_CREDIT = slot_offset(ServerConsumer, "credit")
    Q_POLICY = slot_offset(Queue, "_policy")
    Q_DELIVERING_COUNT = slot_offset(Queue, "delivering_count")
    Q_DEQUEUED = slot_offset(Queue, "dequeued")
    Q_PERSIST = slot_offset(Queue, "_persist")
    _ServerConsumer = ServerConsumer
    _Queue = Queue
    R_STATE = slot_offset(MessageRef, "state")
    R_MESSAGE = slot_offset(MessageRef, "message")
    R_COUNT = slot_offset(MessageRef, "delivery_count")
    M_EXP = slot_offset(ServerMessage, "expiration")
    _ServerMessage = ServerMessage
    _MessageRef = MessageRef
    return 0


cpdef tuple take_run(object queue, object c, Py_ssize_t room):
    """Deliver up to ``room`` ready messages of ``queue`` to ``c``; see the pure twin."""
    cdef list messages = []
    cdef list counts = []
    cdef object ch = c.channel
    cdef object first_tag = ch.next_tag
    if room <= 0 or not queue.ready_count:
        return messages, counts, first_tag, None
    if _MessageRef is None:
        _load_offsets()
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
    cdef object ref, message, level, expiration, key, state, popleft
    cdef bint fast
    try:
        for level in queue._levels:
            if not level:
                continue
            popleft = level.popleft  # bound once per level: a method call per message was
            while level:             # a lookup on the deque type each time
                ref = popleft()
                fast = type(ref) is _MessageRef
                state = get_slot(ref, R_STATE, "state") if fast else ref.state
                if state != _READY:
                    continue  # a tombstone (expired by a timer while queued)
                ready -= 1
                message = get_slot(ref, R_MESSAGE, "message") if fast else ref.message
                if type(message) is _ServerMessage:
                    expiration = get_slot(message, M_EXP, "expiration")
                else:
                    expiration = message.expiration
                if expiration:
                    exp = expiration
                    if now < 0:
                        now = queue.host.now()
                    if exp <= now:
                        return messages, counts, first_tag, ref
                count = (get_slot(ref, R_COUNT, "delivery_count") if fast
                         else ref.delivery_count) + 1
                if fast:
                    set_slot(ref, R_COUNT, count)
                else:
                    ref.delivery_count = count
                credit -= 1
                key = tag
                if auto:
                    ref.state = _GONE
                    dequeued += 1
                    if persist and message.persistent:
                        queue._unstore(message)
                else:
                    if fast:
                        set_slot(ref, R_STATE, _DELIVERING)
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


cpdef list acknowledge_tags(dict owners, list tags):
    """Acknowledge ``tags`` (validated, outside a transaction) in order; see the pure twin.

    Inlines ``Queue.acknowledge`` for queues without an AMPS policy (the same steps in the
    same order, on the records' slots); policy queues, tags whose lease ran out and
    anything that is not exactly the core's record types take the queue's own path."""
    cdef list touched = []
    cdef set seen = set()
    cdef object tag, c, q, ref, message
    cdef object delivering
    cdef object last_q = None  # runs of tags mostly share one queue: skip the set then
    if tags and _MessageRef is None:
        _load_offsets()
    for tag in tags:
        c = owners.pop(tag)
        if type(c) is not _ServerConsumer:
            q = c.queue
            if q not in seen:
                seen.add(q)
                touched.append(q)
            q.acknowledge(c, tag)
            continue
        q = get_slot(c, C_QUEUE, "queue")
        if q is not last_q:
            last_q = q
            if q not in seen:
                seen.add(q)
                touched.append(q)
        delivering = get_slot(c, C_DELIVERING, "delivering")
        if (type(q) is not _Queue or get_slot(q, Q_POLICY, "_policy") is not None
                or type(delivering) is not dict):
            q.acknowledge(c, tag)  # AMPS policies: the full path
            continue
        ref = (<dict>delivering).pop(tag, _MISSING)
        if ref is _MISSING:  # a lease-expired tag: the full path
            q.acknowledge(c, tag)
            continue
        if type(ref) is _MessageRef:
            set_slot(ref, R_STATE, _GONE)
        else:
            ref.state = _GONE
        set_slot(q, Q_DELIVERING_COUNT, get_slot(q, Q_DELIVERING_COUNT, "delivering_count") - 1)
        set_slot(q, Q_DEQUEUED, get_slot(q, Q_DEQUEUED, "dequeued") + 1)
        if get_slot(q, Q_PERSIST, "_persist"):
            message = ref.message
            if message.persistent:
                q._unstore(message)
        # Queue._offer, whose first checks are inlined: mostly the credit is spent
        if (not get_slot(c, C_IN_RING, "in_ring") and not get_slot(c, C_CLOSED, "closed")
                and get_slot(c, C_CREDIT, "credit") > 0):
            q._offer(c)
    return touched
