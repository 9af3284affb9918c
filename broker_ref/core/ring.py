"""Ring queues (seed 000, Artemis ``ring-size``): a queue of fixed size that prefers the
messages at its tail.

Only *ready* messages count against the ring and only they can be evicted: a message in
delivery is not on the queue until it comes back, and a scheduled message is not on it
until it is due — both still count in ``message_count``, which is why a ring of 3 can
show 4. The queue calls in at the only two places a message becomes ready:

* adding to the tail of a full ring evicts the head-most ready message first (one for
  one, so a ring lowered at run time never grows and shrinks only by consumption);
* adding to the head (a cancel, a rollback, a lease running out, a scheduled message
  falling due) of a full ring drops the message being added: it *is* the head-most.

Evicted messages are "replaced", not dead-lettered: counted in ``messages_replaced`` and
removed from the store. A non-durable topic subscription with a ``pending_message_limit``
(seed 003) is a ring too; what it evicts is counted in ``discarded``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .consumer import GONE, MessageRef

if TYPE_CHECKING:
    from .api import AddressSettings
    from .queue import Queue

__all__ = ["effective_ring_size", "evict_head", "replace"]


def effective_ring_size(settings: AddressSettings, override: int | None) -> int:
    """The ring size a queue enforces: its own value, else the settings' ``ring_size``,
    else ``default_ring_size``; -1 means "not a ring"."""
    if override is not None:
        return override
    if settings.ring_size is not None:
        return settings.ring_size
    return settings.default_ring_size


def replace(queue: Queue, ref: MessageRef) -> None:
    """Drop ``ref`` (not ready, or already taken out of its deque) as replaced."""
    ref.state = GONE
    if queue.discards:
        queue.discarded += 1
    else:
        queue.messages_replaced += 1
    if queue._persist and ref.message.persistent:
        queue._unstore(ref.message)
    pol = queue._policy
    if pol is not None:
        pol.forget(ref)


def evict_head(queue: Queue) -> None:
    """Remove the head-most ready message (tombstones on the way are discarded)."""
    ref = queue.levels.take_head()
    if ref is not None:
        replace(queue, ref)
