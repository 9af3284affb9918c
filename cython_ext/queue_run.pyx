# cython: language_level=3
"""The hot half of a queue's dispatch (compiled twin).

The pure twin ``jmspy/broker_ref/core/queue_run.py`` documents the semantics;
``tests/test_queue_run_twins.py`` runs both over the same random queues and requires the
same deliveries and the same queue and consumer state. Change one, change the other.

What compiling buys: the records a run touches per message (``MessageRef``,
``ServerConsumer``, ``DeliveryChannel``) are the typed ``cdef class``\\ es of
``jmspy/_cext/records.pxd``, so their fields are C fields here; the run's counters
(ready, delivering, credit, tag) are C integers written back once per run (in a
``finally``, so an exception leaves the same state as the pure twin); and there is no
interpreter loop around the per-message bookkeeping. So are the queue's per-message
fields (``QueueRecord``, which ``Queue`` derives from) and those of its ready levels
(``LevelsRecord``, which ``ReadyLevels`` derives from; a level is None until a message of
its priority was first ready, then a final ``Level`` whose methods are C calls here); the
message is read as a Python object.
"""

from jmspy._cext.records cimport (
    ConnectionRecord,
    DeliveryChannel,
    FlowRecord,
    Level,
    LevelsRecord,
    MessageRef,
    PageBudget,
    QueueRecord,
    ServerConsumer,
    ServerMessage,
)

from jmspy.broker_ref.core.duplicates import DUPLICATE_ID
from jmspy.broker_ref.core.kinds import DestinationKind
from jmspy.broker_ref.core.records import DELIVERING, GONE, PAGE_OVERHEAD, PRIORITIES, READY

__all__ = ["acknowledge_tags", "dispatch_fast", "enqueue", "route_fast", "tags_known_once",
           "take_run"]

cdef int _READY = READY
cdef int _DELIVERING = DELIVERING
cdef int _GONE = GONE
cdef Py_ssize_t _PRIORITIES = PRIORITIES
cdef Py_ssize_t _OVERHEAD = PAGE_OVERHEAD
cdef object _MISSING = object()
cdef object _QUEUE = DestinationKind.QUEUE
cdef str _DUPLICATE_ID = DUPLICATE_ID


cpdef tuple take_run(QueueRecord queue, ServerConsumer c, Py_ssize_t room):
    """Deliver up to ``room`` ready messages of ``queue`` to ``c``; see the pure twin."""
    cdef list messages = []
    cdef list counts = []
    cdef DeliveryChannel ch = c.channel
    cdef Py_ssize_t first_tag = ch.next_tag
    cdef Py_ssize_t gate = ch.gate  # the connection's flow limit (-1: none)
    if gate >= 0 and gate < room:
        room = gate
    cdef LevelsRecord levels = queue.levels
    if room <= 0 or not levels.count:
        return messages, counts, first_tag, None
    cdef bint auto = c.auto_ack
    cdef bint persist = queue._persist
    cdef dict delivering = c.delivering
    cdef dict owners = ch.tags
    cdef Py_ssize_t ready = levels.count
    cdef Py_ssize_t credit = c.credit
    cdef Py_ssize_t tag = first_tag
    cdef Py_ssize_t dequeued = queue.dequeued
    cdef Py_ssize_t in_delivery = queue.delivering_count
    cdef Py_ssize_t taken = 0
    cdef Py_ssize_t freed = 0
    cdef Py_ssize_t paged = levels.paged
    cdef Py_ssize_t i = -1
    cdef long long now = -1
    cdef object message, level, expiration, key
    cdef Level refs
    cdef MessageRef ref
    try:
        for level in levels._levels:
            i += 1
            if level is None:  # nothing of this priority was ever ready
                if paged >> i & 1:
                    return messages, counts, first_tag, None  # page it in first
                continue
            refs = <Level?>level
            while refs.head < len(refs.items):  # the level is not empty
                ref = <MessageRef?>refs.popleft()
                if ref.state != _READY:
                    continue  # a tombstone (expired by a timer while queued)
                ready -= 1
                message = ref.message
                freed += <Py_ssize_t>message.size + _OVERHEAD
                expiration = message.expiration
                if expiration:
                    if now < 0:
                        now = queue.host.now()
                    if <long long>expiration <= now:
                        return messages, counts, first_tag, ref
                ref.delivery_count += 1
                credit -= 1
                key = tag
                if auto:
                    ref.state = _GONE
                    dequeued += 1
                    if persist and message.persistent:
                        queue.removals.unstore(message)
                else:
                    ref.state = _DELIVERING
                    delivering[key] = ref
                    owners[key] = c
                    in_delivery += 1
                tag += 1
                messages.append(message)
                counts.append(ref.delivery_count)
                taken += 1
                if taken >= room or not ready:
                    return messages, counts, first_tag, None
            if paged >> i & 1:  # the rest of this level is paged out: page it in first
                return messages, counts, first_tag, None
        ready = 0  # only tombstones were left: resync the count
        return messages, counts, first_tag, None
    finally:
        levels.count = ready
        levels.budget.used -= freed
        levels.memory_usage -= freed
        c.credit = credit
        ch.next_tag = tag
        if gate >= 0:
            ch.gate = gate - taken
        queue.dequeued = dequeued
        queue.delivering_count = in_delivery


cpdef bint tags_known_once(object known, object staged, list tags) except -1:
    """See the pure twin. Tags are mostly acknowledged in delivery order: while each is
    above the one before, none can repeat, so one dict lookup per tag decides; a run out
    of order is decided by the pure twin (imported then: the broker core is loaded by
    the time anything acknowledges)."""
    cdef dict known_d = <dict?>known
    cdef bint check_staged = len(staged) > 0
    cdef object tag
    cdef object last = None
    for tag in tags:
        if last is not None and not tag > last:
            from jmspy.broker_ref.core.queue_run import tags_known_once as in_any_order
            return in_any_order(known, staged, tags)
        if tag not in known_d or (check_staged and tag in staged):
            return False
        last = tag
    return True


cpdef list acknowledge_tags(dict owners, list tags):
    """Acknowledge ``tags`` (validated, outside a transaction) in order; see the pure twin.

    Inlines ``Queue.acknowledge`` for queues without an AMPS policy (the same steps in the
    same order); policy queues and tags whose lease ran out take the queue's own path."""
    cdef list touched = []
    cdef set seen = set()
    cdef object tag, message, found
    cdef QueueRecord q
    cdef ServerConsumer c
    cdef MessageRef ref
    cdef object last_q = None  # runs of tags mostly share one queue: skip the set then
    for tag in tags:
        c = <ServerConsumer?>owners.pop(tag)
        q = <QueueRecord?>c.queue
        if q is not last_q:
            last_q = q
            if q not in seen:
                seen.add(q)
                touched.append(q)
        if q._policy is not None:
            q.acknowledge(c, tag)  # AMPS policies: the full path
            continue
        found = c.delivering.pop(tag, _MISSING)
        if found is _MISSING:  # a lease-expired tag: the full path
            q.acknowledge(c, tag)
            continue
        ref = <MessageRef?>found
        ref.state = _GONE
        q.delivering_count -= 1
        q.dequeued += 1
        if q._persist:
            message = ref.message
            if message.persistent:
                q.removals.unstore(message)
        # Queue.offer, whose first checks are inlined: mostly the credit is spent
        if not c.in_ring and not c.closed and c.credit > 0:
            q.offer(c)
    return touched


cpdef enqueue(QueueRecord queue, object message):
    """``Queue.enqueue`` for the common case; see the pure twin."""
    cdef LevelsRecord levels = queue.levels
    cdef PageBudget budget = levels.budget
    cdef Py_ssize_t cost = <Py_ssize_t>message.size + _OVERHEAD
    if (queue.deleted or queue._policy is not None or message.expiration
            or message.deliver_at or queue._pages is not None
            or budget.used + cost > budget.limit):
        queue._enqueue_full(message)  # including every case that may page
        return
    if queue._persist and message.persistent:
        queue.host.store.add_message(queue.name, message, True)  # deferrable, see the pure twin
    queue.enqueued += 1
    cdef Py_ssize_t p = message.priority
    if p < 0:
        p = 0
    elif p >= _PRIORITIES:
        p = _PRIORITIES - 1
    cdef MessageRef ref = MessageRef.__new__(MessageRef)
    ref.message = message
    ref.priority = _PRIORITIES - 1 - p
    ref.delivery_count = 0
    ref.state = _READY
    cdef Py_ssize_t size = queue._ring_size
    cdef Py_ssize_t ready = levels.count
    cdef object level
    cdef Level refs
    if size > 0 and ready >= size:
        queue._add_tail(ref)  # a ring queue evicts its head first (seed 000)
    else:  # ReadyLevels.add_tail, on the record's fields
        level = levels._levels[ref.priority]
        if level is None:
            level = Level()
            levels._levels[ref.priority] = level
        refs = <Level?>level
        refs.append(ref)
        levels.count = ready + 1
        budget.used += cost
        levels.memory_usage += cost
    cdef object host
    if queue._ring and not queue._dispatching:
        host = queue.host
        if host.deferred_dispatch is not None and size <= 0:  # after the reply
            host.defer(queue)  # Broker.defer_dispatch
            return
        if queue._filtered:
            queue.dispatch()
            return
        queue._dispatching = True
        try:
            dispatch_fast(queue)
        finally:
            queue._dispatching = False


cpdef bint route_fast(ConnectionRecord conn, object message) except -1:
    """``ServerConnection.send``'s common case; see the pure twin. A message that is not
    the compiled ``ServerMessage`` takes the full path (False)."""
    if type(message) is not ServerMessage:
        return False
    cdef ServerMessage m = <ServerMessage>message
    if conn.closed or m.kind is not _QUEUE:
        return False
    broker = conn._broker
    if broker.closed or broker.security is not None or not conn._flow.free_for(m):
        return False
    if _DUPLICATE_ID in m.properties:
        return False
    queue = conn._queues.get(m.destination)
    if queue is None:
        return False
    m.producer_connection = conn._id
    enqueue(queue, m)
    return True


cpdef dispatch_fast(QueueRecord queue):
    """``Queue._dispatch_fast``; see the pure twin (the same steps in the same order)."""
    cdef object ring = queue._ring
    cdef LevelsRecord levels = queue.levels
    if not ring:  # None until a consumer first could receive
        return
    cdef object popleft = ring.popleft
    cdef object limit, messages, counts, first_tag, expired, many
    cdef ServerConsumer c
    cdef Py_ssize_t room, pending
    while levels.count and ring:
        c = <ServerConsumer?>popleft()
        if not c.can_receive():
            c.in_ring = False
            continue
        room = 1
        if not ring:
            room = c.credit
            limit = c.flow_limit
            if limit is not None:
                pending = len(c.delivering)
                if <Py_ssize_t>limit - pending < room:
                    room = <Py_ssize_t>limit - pending
        while True:
            messages, counts, first_tag, expired = take_run(queue, c, room)
            if messages:
                many = c.channel.deliver_many
                if many is not None:
                    many(c.consumer_id, first_tag, messages, counts)
                else:
                    queue._hand_over(c, first_tag, messages, counts)
            if expired is None:
                if not messages:  # only tombstones were left; the count is resynced
                    ring.appendleft(c)
                    return
                break
            queue.expire(expired)
            if not levels.count:
                ring.appendleft(c)
                return
            room -= len(<list>messages)
            if room <= 0:
                break
        if c.can_receive():
            ring.append(c)
        else:
            c.in_ring = False
