"""Ring queues (seed 000, Artemis ``ring-size``): a queue of fixed size that prefers the
messages at its tail.

Only *ready* messages count against the ring and only they can be evicted: a message in
delivery is not on the queue until it comes back, and a scheduled message is not on it
until it is due — both still count in ``message_count``, which is why a ring of 3 can
show 4. The queue applies two rules (``Queue._add_tail`` and ``Queue._add_head``, the only
places a message becomes ready apart from paging in, which a ring never does):

* adding to the tail of a full ring evicts the head-most ready message first (one for
  one, so a ring lowered at run time never grows and shrinks only by consumption);
* adding to the head (a cancel, a rollback, a lease running out, a scheduled message
  falling due) of a full ring drops the message being added: it *is* the head-most.

Evicted messages are "replaced", not dead-lettered: counted in ``messages_replaced`` and
removed from the store (:meth:`~.queue_removals.QueueRemovals.replace`). A non-durable
topic subscription with a ``pending_message_limit`` (seed 003) is a ring too; what it
evicts is counted in ``discarded``. The size a queue enforces is its
:class:`~.queue_limits.QueueLimits`' ``ring_size``, from :func:`effective_ring_size`.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["RingSettings", "effective_ring_size"]


class RingSettings(Protocol):
    """The two address settings a ring size comes from (``AddressSettings``'), typed
    here so that this module imports nothing of the core."""

    @property
    def ring_size(self) -> int | None: ...
    @property
    def default_ring_size(self) -> int: ...


def effective_ring_size(settings: RingSettings, override: int | None) -> int:
    """The ring size a queue enforces: its own value, else the settings' ``ring_size``,
    else ``default_ring_size``; -1 means "not a ring"."""
    if override is not None:
        return override
    if settings.ring_size is not None:
        return settings.ring_size
    return settings.default_ring_size
