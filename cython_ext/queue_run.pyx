# cython: language_level=3
"""The broker's per-message dispatch step for one consumer (compiled twin).

The pure twin ``jmspy/_pure/queue_run.py`` documents the semantics;
``tests/test_queue_run_twins.py`` runs both over the same random queues and requires the
same deliveries and the same queue and consumer state. Change one, change the other.

What compiling buys: the run's counters (ready, delivering, credit, tag) are C integers
written back once per run (in a ``finally``, so an exception leaves the same state as the
pure twin), the deques and dicts are reached through typed references, and there is no
interpreter loop around the per-message bookkeeping. ``enqueue`` and ``dispatch_fast``
walk what were eight Python method calls per sent message (enqueue, accept, tail, dispatch,
the loop, two ``can_receive``, the hand-over) on the records' slots; the ``MessageRef`` is
allocated and its four slots filled without running the dataclass ``__init__``.
"""

from cpython.object cimport PyTypeObject

from jmspy._cext.slots cimport get_slot, set_slot, slot_offset


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)

__all__ = [
    "DELIVERING", "GONE", "READY", "acknowledge_tags", "dispatch_fast", "enqueue",
    "route_send", "take_run",
]

READY = 0
DELIVERING = 2
GONE = 3
cdef long _READY = 0
cdef object _DELIVERING = 2
cdef object _GONE = 3
cdef object _MISSING = object()
cdef object _READY_OBJ = 0
cdef object _ZERO = 0
PRIORITIES = 10
cdef long _PRIORITIES = 10
# Slot offsets of the broker's records, taken on first use: the broker core imports this
# module while it is itself being imported, so the classes cannot be imported here.
cdef object _MessageRef = None
cdef object _ServerMessage = None
cdef object _ServerConsumer = None
cdef object _Queue = None
cdef Py_ssize_t R_STATE, R_MESSAGE, R_COUNT, M_EXP, M_PERSISTENT
cdef Py_ssize_t C_QUEUE, C_DELIVERING, C_IN_RING, C_CLOSED, C_CREDIT
cdef Py_ssize_t Q_POLICY, Q_DELIVERING_COUNT, Q_DEQUEUED, Q_PERSIST
cdef Py_ssize_t R_PRIORITY, M_DELIVER_AT, M_PRIORITY, C_FLOW_LIMIT, C_CHANNEL, C_ID
cdef Py_ssize_t Q_DELETED, Q_ENQUEUED, Q_RING_SIZE, Q_READY, Q_LEVELS, Q_RING
cdef Py_ssize_t Q_DISPATCHING, Q_FILTERED, CH_DELIVER_MANY
cdef object _DeliveryChannel = None
cdef object _ServerConnection = None
cdef object _QUEUE = None
cdef Py_ssize_t K_BROKER, K_CLOSED, K_ID, M_KIND, M_DESTINATION, M_PRODUCER


cdef int _load_offsets() except -1:
    global _MessageRef, _ServerMessage, R_STATE, R_MESSAGE, R_COUNT, M_EXP, M_PERSISTENT
    global _ServerConsumer, _Queue, C_QUEUE, C_DELIVERING, C_IN_RING, C_CLOSED, C_CREDIT
    global Q_POLICY, Q_DELIVERING_COUNT, Q_DEQUEUED, Q_PERSIST
    global R_PRIORITY, M_DELIVER_AT, M_PRIORITY, C_FLOW_LIMIT, C_CHANNEL, C_ID
    global Q_DELETED, Q_ENQUEUED, Q_RING_SIZE, Q_READY, Q_LEVELS, Q_RING
    global Q_DISPATCHING, Q_FILTERED, CH_DELIVER_MANY, _DeliveryChannel
    global _ServerConnection, _QUEUE, K_BROKER, K_CLOSED, K_ID
    global M_KIND, M_DESTINATION, M_PRODUCER
    from jmspy.broker_ref.core.api import DestinationKind, ServerMessage
    from jmspy.broker_ref.core.connection import ServerConnection
    K_BROKER = slot_offset(ServerConnection, "_broker")
    K_CLOSED = slot_offset(ServerConnection, "closed")
    K_ID = slot_offset(ServerConnection, "_id")
    M_KIND = slot_offset(ServerMessage, "kind")
    M_DESTINATION = slot_offset(ServerMessage, "destination")
    M_PRODUCER = slot_offset(ServerMessage, "producer_connection")
    _ServerConnection = ServerConnection
    _QUEUE = DestinationKind.QUEUE
    from jmspy.broker_ref.core.consumer import DeliveryChannel, MessageRef, ServerConsumer
    from jmspy.broker_ref.core.queue import Queue
    R_PRIORITY = slot_offset(MessageRef, "priority")
    M_DELIVER_AT = slot_offset(ServerMessage, "deliver_at")
    M_PRIORITY = slot_offset(ServerMessage, "priority")
    C_FLOW_LIMIT = slot_offset(ServerConsumer, "flow_limit")
    C_CHANNEL = slot_offset(ServerConsumer, "channel")
    C_ID = slot_offset(ServerConsumer, "consumer_id")
    Q_DELETED = slot_offset(Queue, "deleted")
    Q_ENQUEUED = slot_offset(Queue, "enqueued")
    Q_RING_SIZE = slot_offset(Queue, "_ring_size")
    Q_READY = slot_offset(Queue, "ready_count")
    Q_LEVELS = slot_offset(Queue, "_levels")
    Q_RING = slot_offset(Queue, "_ring")
    Q_DISPATCHING = slot_offset(Queue, "_dispatching")
    Q_FILTERED = slot_offset(Queue, "_filtered")
    CH_DELIVER_MANY = slot_offset(DeliveryChannel, "deliver_many")
    _DeliveryChannel = DeliveryChannel
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


cpdef enqueue(object queue, object message):
    """``Queue.enqueue`` for the common case, on slots; see the pure twin."""
    if _MessageRef is None:
        _load_offsets()
    if (type(queue) is not _Queue or type(message) is not _ServerMessage
            or get_slot(queue, Q_DELETED, "deleted")
            or get_slot(queue, Q_POLICY, "_policy") is not None
            or get_slot(message, M_EXP, "expiration")
            or get_slot(message, M_DELIVER_AT, "deliver_at")):
        queue._enqueue_full(message)
        return
    if get_slot(queue, Q_PERSIST, "_persist") and get_slot(message, M_PERSISTENT, "persistent"):
        queue.host.store.add_message(queue.name, message)
    set_slot(queue, Q_ENQUEUED, get_slot(queue, Q_ENQUEUED, "enqueued") + 1)
    cdef object prio = get_slot(message, M_PRIORITY, "priority")
    cdef long p
    if prio < 0:
        p = 0
    elif prio >= _PRIORITIES:
        p = _PRIORITIES - 1
    else:
        p = prio
    cdef object ref = PyType_GenericAlloc(<PyTypeObject*>_MessageRef, 0)
    cdef object level = _PRIORITIES - 1 - p
    set_slot(ref, R_MESSAGE, message)
    set_slot(ref, R_PRIORITY, level)
    set_slot(ref, R_COUNT, _ZERO)
    set_slot(ref, R_STATE, _READY_OBJ)
    cdef Py_ssize_t size = get_slot(queue, Q_RING_SIZE, "_ring_size")
    cdef Py_ssize_t ready = get_slot(queue, Q_READY, "ready_count")
    if size > 0 and ready >= size:
        queue._add_tail(ref)  # a ring queue evicts its head first (seed 000)
    else:
        (<list>get_slot(queue, Q_LEVELS, "_levels"))[_PRIORITIES - 1 - p].append(ref)
        set_slot(queue, Q_READY, ready + 1)
    if get_slot(queue, Q_RING, "_ring") and not get_slot(queue, Q_DISPATCHING, "_dispatching"):
        if get_slot(queue, Q_FILTERED, "_filtered"):
            queue.dispatch()
            return
        set_slot(queue, Q_DISPATCHING, True)
        try:
            dispatch_fast(queue)
        finally:
            set_slot(queue, Q_DISPATCHING, False)


cdef inline bint _can_receive(object c) except -1:
    """``ServerConsumer.can_receive`` on its slots (its own method for anything else)."""
    if type(c) is not _ServerConsumer:
        return c.can_receive()
    if get_slot(c, C_CLOSED, "closed") or get_slot(c, C_CREDIT, "credit") <= 0:
        return False
    limit = get_slot(c, C_FLOW_LIMIT, "flow_limit")
    return limit is None or len(get_slot(c, C_DELIVERING, "delivering")) < limit


cpdef dispatch_fast(object queue):
    """``Queue._dispatch_fast``; see the pure twin (the same steps in the same order)."""
    if _MessageRef is None:
        _load_offsets()
    cdef object ring = queue._ring
    cdef object popleft = ring.popleft
    cdef object c, limit, messages, counts, first_tag, expired, many, ch
    cdef Py_ssize_t room, pending
    while queue.ready_count and ring:
        c = popleft()
        if not _can_receive(c):
            c.in_ring = False
            continue
        room = 1
        if not ring:
            room = c.credit
            limit = c.flow_limit
            if limit is not None:
                pending = len(c.delivering)
                if limit - pending < room:
                    room = limit - pending
        while True:
            messages, counts, first_tag, expired = take_run(queue, c, room)
            if messages:
                ch = c.channel
                many = (get_slot(ch, CH_DELIVER_MANY, "deliver_many")
                        if type(ch) is _DeliveryChannel else ch.deliver_many)
                if many is not None:
                    many(c.consumer_id, first_tag, messages, counts)
                else:
                    queue._hand_over(c, first_tag, messages, counts)
            if expired is None:
                if not messages:  # only tombstones were left; the count is resynced
                    ring.appendleft(c)
                    return
                break
            queue._expire(expired)
            if not queue.ready_count:
                ring.appendleft(c)
                return
            room -= len(<list>messages)
            if room <= 0:
                break
        if _can_receive(c):
            ring.append(c)
        else:
            c.in_ring = False


cpdef route_send(object conn, object message, object tx=None):
    """``ServerConnection.send`` for a message to an existing queue; see the pure twin."""
    if _MessageRef is None:
        _load_offsets()
    if (tx is not None or type(conn) is not _ServerConnection
            or type(message) is not _ServerMessage
            or get_slot(conn, K_CLOSED, "closed")
            or get_slot(message, M_KIND, "kind") is not _QUEUE):
        conn._send_full(message, tx)
        return
    cdef object broker = get_slot(conn, K_BROKER, "_broker")
    if broker.closed or broker.security is not None:
        conn._send_full(message, tx)
        return
    cdef object q = (<dict?>broker._queues).get(get_slot(message, M_DESTINATION, "destination"))
    if q is None:
        conn._send_full(message, tx)  # created on first use, by the full path
        return
    set_slot(message, M_PRODUCER, get_slot(conn, K_ID, "_id"))
    enqueue(q, message)
