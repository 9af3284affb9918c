"""The hot half of :class:`~.queue.Queue`'s dispatch: the per-message step, the common
enqueue, the fast dispatch loop, a run of acknowledgements (pure twin).

The compiled twin is ``cython_ext/queue_run.pyx`` (``jmspy._cext.queue_run``);
``tests/test_queue_run_twins.py`` runs both over the same random queues and requires the
same deliveries and the same queue and consumer state afterwards. Change one, change the
other.

Why a *run*: ``Queue._dispatch_fast`` gives a consumer that is alone in the dispatch ring
every ready message its credit and flow limit allow. Doing that one message at a time
meant one ``Delivery`` object and one host callback per message; :func:`take_run` instead
records up to ``room`` deliveries in one pass and returns them as parallel lists, which
the queue hands to the host in one ``deliver_many`` call (the order, the delivery tags and
every counter are exactly what one-at-a-time delivery produces).

A run stops early at a message whose expiry time has passed: it is taken off the queue
and returned so that the caller hands over the run *first* and expires that message
after, the order in which one-at-a-time dispatch did the two.

Why :func:`enqueue` and :func:`dispatch_fast` live here too: a
message sent to a queue with a waiting consumer went through eight small Python methods
of ``Queue`` (enqueue, accept, add to the tail, dispatch, the fast dispatch loop, two
``can_receive`` checks, the hand-over) before reaching the host; the compiled twin does
that walk in one C call. Only the common case is walked here (no AMPS policy, no expiry
or delivery delay, queue not deleted, no selector on the queue's consumers); everything
else takes ``Queue``'s own methods, which stay the reference for what each step means.
:func:`acknowledge_tags` is ``ServerConnection.ack``'s loop over a run of tags, and
:func:`tags_known_once` its check that the run may be acknowledged as one.
:func:`route_fast` is ``ServerConnection.send``'s common case in front of
:func:`enqueue`: the checks a send to an existing queue passes (two Python methods, and
a dozen attribute reads of the connection, its broker and producer flow, per message on
``vm://``) read the typed ``ConnectionRecord`` and ``FlowRecord`` fields in the compiled
twin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from .api import DestinationKind, ServerMessage
from .consumer import (
    DELIVERING,
    GONE,
    PAGE_OVERHEAD,
    PRIORITIES,
    READY,
    Level,
    MessageRef,
    ServerConsumer,
)
from .duplicates import DUPLICATE_ID
from .records import QueueRef

if TYPE_CHECKING:
    from collections import deque

    from .consumer import ConnectionRecord, LevelsRecord
    from .queue_host import QueueHost

_QUEUE = DestinationKind.QUEUE

__all__ = ["RunQueue", "acknowledge_tags", "dispatch_fast", "enqueue", "route_fast",
           "tags_known_once", "take_run"]


class _Removals(Protocol):
    def unstore(self, message: ServerMessage) -> None: ...


class RunQueue(QueueRef, Protocol):
    """What the run reads, writes and calls on a queue: the :class:`~.records.QueueRecord`
    fields and the few steps of :class:`~.queue.Queue` it hands the uncommon cases to.

    A Protocol rather than ``Queue`` itself, so that this module sits below the queue
    that binds it (``Queue`` passes itself to each function here, which holds it to
    this Protocol). The connection's record knows its queues as
    :class:`~.records.QueueRef` only: :func:`route_fast` narrows them (every queue the
    broker makes is a ``Queue``)."""

    enqueued: int
    dequeued: int
    delivering_count: int
    _dispatching: bool

    @property
    def levels(self) -> LevelsRecord: ...
    @property
    def host(self) -> QueueHost[Any]: ...
    @property
    def removals(self) -> _Removals: ...
    @property
    def deleted(self) -> bool: ...
    @property
    def _persist(self) -> bool: ...
    @property
    def _policy(self) -> object | None: ...
    @property
    def _pages(self) -> object | None: ...
    @property
    def _ring(self) -> deque[ServerConsumer] | None: ...
    @property
    def _ring_size(self) -> int: ...
    @property
    def _filtered(self) -> int: ...

    def _add_tail(self, ref: MessageRef) -> None: ...
    def _enqueue_full(self, message: ServerMessage) -> None: ...
    def _hand_over(self, c: ServerConsumer, first_tag: int, messages: list[ServerMessage],
                   counts: list[int]) -> None: ...
    def expire(self, ref: MessageRef) -> None: ...


def take_run(
    queue: RunQueue, c: ServerConsumer, room: int
) -> tuple[list[ServerMessage], list[int], int, MessageRef | None]:
    """Deliver up to ``room`` ready messages of ``queue`` to ``c``, in queue order.

    Returns ``(messages, delivery_counts, first_tag, expired)``: the delivered messages
    with their delivery counts (tags run from ``first_tag`` consecutively), and the ref
    of an expired message the run stopped at (already off the queue, ``levels.count``
    already lowered; the caller must expire it), or None. Tombstones (refs no longer
    ready) are dropped on the way. A run stops where a level runs out in RAM while more of
    it is paged out (``queue.levels.paged``): lower levels must wait for the caller to
    page it in. If the levels hold fewer ready refs than their ``count`` says, ``count``
    is set to 0 (the counts are resynchronised). The bookkeeping per message is
    ``ReadyLevels.unready``'s, done here on the record's fields.
    """
    messages: list[ServerMessage] = []
    counts: list[int] = []
    ch = c.channel
    first_tag = ch.next_tag
    expired: MessageRef | None = None
    gated = ch.gate >= 0  # the connection's flow limit (.flow_gate): one place a delivery
    if gated and ch.gate < room:
        room = ch.gate
    levels = queue.levels
    if room <= 0 or not levels.count:
        return messages, counts, first_tag, None
    auto = c.auto_ack
    persist = queue._persist
    delivering = c.delivering
    owners = ch.tags
    budget = levels.budget
    paged = levels.paged
    now = -1
    tag = first_tag
    taken = 0
    for i, level in enumerate(levels._levels):
        while level:  # None: nothing of this priority was ever ready
            ref = level.popleft()
            if ref.state != READY:
                continue  # a tombstone (expired by a timer while queued)
            levels.count -= 1
            message = ref.message
            budget.used -= message.size + PAGE_OVERHEAD
            levels.memory_usage -= message.size + PAGE_OVERHEAD
            exp = message.expiration
            if exp:
                if now < 0:
                    now = queue.host.now()
                if exp <= now:
                    expired = ref
                    return messages, counts, first_tag, expired
            count = ref.delivery_count + 1
            ref.delivery_count = count
            c.credit -= 1
            if auto:
                ref.state = GONE
                queue.dequeued += 1
                if persist and message.persistent:
                    queue.removals.unstore(message)
            else:
                ref.state = DELIVERING
                delivering[tag] = ref
                owners[tag] = c
                queue.delivering_count += 1
            tag += 1
            ch.next_tag = tag
            messages.append(message)
            counts.append(count)
            taken += 1
            if gated:
                ch.gate -= 1
            if taken >= room or not levels.count:
                return messages, counts, first_tag, None
        if paged >> i & 1:  # the rest of this level is paged out: the caller pages it in
            return messages, counts, first_tag, None  # before any lower priority goes
    levels.count = 0  # only tombstones were left: resync the count
    return messages, counts, first_tag, None


def tags_known_once(known: Mapping[int, object], staged: Mapping[int, object],
                    tags: list[int]) -> bool:
    """Whether every one of ``tags`` is in ``known``, none is listed twice and none is in
    ``staged``: a run of acknowledgements with nothing to report, which the caller may
    settle without looking at each tag again (False: it looks, and says what is wrong)."""
    unique = set(tags)
    return (len(unique) == len(tags) and known.keys() >= unique
            and (not staged or unique.isdisjoint(staged)))


def acknowledge_tags(owners: dict[int, ServerConsumer], tags: list[int]) -> list[QueueRef]:
    """Acknowledge delivery ``tags`` of one connection, in order, outside a transaction.

    ``owners`` is the connection's tag -> consumer index; the caller has validated the
    tags (each known, none twice, none staged in a transaction). Each tag leaves the index
    and is acknowledged by its consumer's queue (``Queue.acknowledge``). Returns the
    queues touched, in the order first touched: the caller dispatches each afterwards.
    """
    touched: list[QueueRef] = []
    seen: set[QueueRef] = set()
    for tag in tags:
        c = owners.pop(tag)
        q = c.queue
        if q not in seen:
            seen.add(q)
            touched.append(q)
        q.acknowledge(c, tag)
    return touched


def enqueue(queue: RunQueue, message: ServerMessage) -> None:
    """``Queue.enqueue``: store, make ready at the tail of its level, dispatch.

    The same steps in the same order as ``Queue._enqueue_full`` for a message without
    expiry or delivery delay on a queue without an AMPS policy or paged-out messages,
    while the RAM budget has room; anything else is handed to ``Queue._enqueue_full``
    whole.
    """
    levels = queue.levels
    budget = levels.budget
    cost = message.size + PAGE_OVERHEAD
    if (queue.deleted or queue._policy is not None or message.expiration
            or message.deliver_at or queue._pages is not None
            or budget.used + cost > budget.limit):
        queue._enqueue_full(message)  # including every case that may page (.paging)
        return
    if queue._persist and message.persistent:
        store = queue.host.store
        assert store is not None  # _persist: durable, on a host with a store
        store.add_message(queue.name, message, True)  # deferrable: no page-out needs its seq
    queue.enqueued += 1
    p = message.priority
    if p < 0 or p >= PRIORITIES:
        p = 0 if p < 0 else PRIORITIES - 1
    ref = MessageRef(message, PRIORITIES - 1 - p, 0, READY)
    size = queue._ring_size
    if size > 0 and levels.count >= size:
        queue._add_tail(ref)  # a ring queue evicts its head first (seed 000)
    else:  # ReadyLevels.add_tail, on the record's fields
        level = levels._levels[ref.priority]
        if level is None:
            level = levels._levels[ref.priority] = Level()
        level.append(ref)
        levels.count += 1
        budget.used += cost
        levels.memory_usage += cost
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


def route_fast(conn: ConnectionRecord, message: ServerMessage) -> bool:
    """``ServerConnection.send``'s common case, outside a transaction: a message to a
    queue that exists, from an open connection on an open broker without a security
    policy, with no duplicate-detection ID, while producer flow control has nothing
    to say (``FlowRecord.free_for``): stamp the connection and :func:`enqueue`.

    Returns False, having done nothing, for everything else; the caller then takes
    ``ServerConnection``'s full path, which stays the reference (flow control, routing
    to topics and new queues, security, duplicates). A sender that has a connection's
    record calls this before ``ServerConnection.send``, so the common send is one C
    call in the compiled twin."""
    if conn.closed or message.kind is not _QUEUE:
        return False
    broker = conn._broker
    if broker.closed or broker.security is not None or not conn._flow.free_for(message):
        return False
    if DUPLICATE_ID in message.properties:
        return False
    queue = conn._queues.get(message.destination)
    if queue is None:
        return False
    message.producer_connection = conn._id
    enqueue(cast("RunQueue", queue), message)
    return True


def dispatch_fast(queue: RunQueue) -> None:
    """``Queue._dispatch_fast``: round-robin one message per consumer turn; a consumer
    alone in the ring gets a run of messages, as many as its credit and flow limit allow,
    handed to its host in one call (same order and tags: nobody else was waiting for a
    turn). The caller has checked there is no policy and no selector, and holds
    ``queue._dispatching``."""
    ring = queue._ring
    levels = queue.levels
    while levels.count and ring:
        c = ring.popleft()
        if not c.can_receive():
            c.in_ring = False
            continue
        room = 1
        if not ring:
            room = c.credit
            limit = c.flow_limit
            if limit is not None and limit - len(c.delivering) < room:
                room = limit - len(c.delivering)
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
            room -= len(messages)
            if room <= 0:
                break
        if c.can_receive():
            ring.append(c)
        else:
            c.in_ring = False
