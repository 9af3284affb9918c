"""The broker's per-message dispatch step for one consumer (pure twin).

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jmspy.broker_ref.core.api import ServerMessage
    from jmspy.broker_ref.core.consumer import MessageRef, ServerConsumer

__all__ = ["DELIVERING", "GONE", "READY", "acknowledge_tags", "take_run"]

#: ``MessageRef.state`` values (the same numbers as ``broker_ref.core.consumer``, which
#: cannot be imported here without a cycle through the queue module).
READY = 0
DELIVERING = 2
GONE = 3


def take_run(
    queue: Any, c: ServerConsumer, room: int
) -> tuple[list[ServerMessage], list[int], int, MessageRef | None]:
    """Deliver up to ``room`` ready messages of ``queue`` to ``c``, in queue order.

    Returns ``(messages, delivery_counts, first_tag, expired)``: the delivered messages
    with their delivery counts (tags run from ``first_tag`` consecutively), and the ref
    of an expired message the run stopped at (already off the queue, ``ready_count``
    already lowered; the caller must expire it), or None. Tombstones (refs no longer
    ready) are dropped on the way. If the levels hold fewer ready refs than
    ``ready_count`` says, ``ready_count`` is set to 0 (the counts are resynchronised).
    """
    messages: list[ServerMessage] = []
    counts: list[int] = []
    ch = c.channel
    first_tag = ch.next_tag
    expired: MessageRef | None = None
    if room <= 0 or not queue.ready_count:
        return messages, counts, first_tag, None
    auto = c.auto_ack
    persist = queue._persist
    delivering = c.delivering
    owners = ch.tags
    now = -1
    tag = first_tag
    taken = 0
    for level in queue._levels:
        while level:
            ref = level.popleft()
            if ref.state != READY:
                continue  # a tombstone (expired by a timer while queued)
            queue.ready_count -= 1
            message = ref.message
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
                    queue._unstore(message)
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
            if taken >= room or not queue.ready_count:
                return messages, counts, first_tag, None
    queue.ready_count = 0  # only tombstones were left: resync the count
    return messages, counts, first_tag, None


def acknowledge_tags(owners: dict[int, ServerConsumer], tags: list[int]) -> list[Any]:
    """Acknowledge delivery ``tags`` of one connection, in order, outside a transaction.

    ``owners`` is the connection's tag -> consumer index; the caller has validated the
    tags (each known, none twice, none staged in a transaction). Each tag leaves the index
    and is acknowledged by its consumer's queue (``Queue.acknowledge``). Returns the
    queues touched, in the order first touched: the caller dispatches each afterwards.
    """
    touched: list[Any] = []
    seen: set[Any] = set()
    for tag in tags:
        c = owners.pop(tag)
        q = c.queue
        if q not in seen:
            seen.add(q)
            touched.append(q)
        q.acknowledge(c, tag)
    return touched
