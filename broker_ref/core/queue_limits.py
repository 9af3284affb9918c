"""What a queue's settings limit: its ring size, its memory and each consumer's share of
its backlog.

A :class:`~.queue.Queue` composes one :class:`QueueLimits`, which holds the queue's
:class:`~.api.AddressSettings` and the things that refine them per queue: a ring size
of its own (``Broker.create_queue(ring_size=)`` / ``set_ring_size``, seed 000), the
backlog each consumer asked for (``MaxPerSubscriptionBacklog``, seed 001) and the
broker's default memory share of a destination. Every limit derived from those lives
here, so a settings change, a new ring size and a new consumer all compute it the same
way.

Memory (seed 003, ActiveMQ's per-destination ``memoryUsage``): every destination has a
memory limit of its own, its address settings' ``memory_limit`` when set, else the
broker's *default share* (``destination-memory-percent`` of the ``[system-usage]
memory-limit``). A topic's limit covers all its subscriptions together. The queue pages
its backlog out once its ready messages in RAM would pass ``PAGE_HIGH_WATER_PERCENT`` of
that limit (ActiveMQ's per-destination ``cursorMemoryHighWaterMark``), and pages it back
in up to the same number of *bytes*: one queue's backlog cannot take the RAM the other
destinations' shares are for.

This object only computes: the queue copies :attr:`QueueLimits.ring_size` into its own
typed ``_ring_size`` field (which the dispatch twins read per message) whenever it may
have changed, and sets each consumer's ``flow_limit`` from :meth:`QueueLimits.limit_for`.
"""

from __future__ import annotations

from .api import AddressSettings
from .consumer import ServerConsumer, effective_flow_limit
from .policy import consumer_limit, grant_backlog
from .ring import effective_ring_size

__all__ = ["DEFAULT_DESTINATION_MEMORY_PERCENT", "PAGE_HIGH_WATER_PERCENT", "QueueLimits",
           "page_limit_of", "pages_by_settings"]

#: Share of ``memory_limit`` ready messages may take in RAM before a backlog pages out
#: (ActiveMQ's ``cursorMemoryHighWaterMark``, 70 %): of the broker's limit for all
#: queues together, and of each destination's own limit for that destination.
PAGE_HIGH_WATER_PERCENT = 70
#: Default ``destination-memory-percent``: the share of the broker's ``memory-limit``
#: each destination may hold in pending messages unless its address settings set a
#: ``memory-limit`` (64 MB -> 6.4 MB): one destination's backlog stops only its own
#: producers, ten full destinations reach the broker's limit.
DEFAULT_DESTINATION_MEMORY_PERCENT = 10


def page_limit_of(memory_limit: int) -> int:
    """The RAM a backlog under ``memory_limit`` keeps before it pages out."""
    return memory_limit * PAGE_HIGH_WATER_PERCENT // 100


def pages_by_settings(settings: AddressSettings) -> bool:
    """Whether a queue made now with ``settings`` would page its backlog (neither a ring
    nor an AMPS queue, whose own rules bound them): what ``Queue.takes_without_ram``
    says of a queue that does not exist yet."""
    return not settings.amps and effective_ring_size(settings, None) <= 0


class QueueLimits:
    """The settings of one queue and the limits they set. Not thread-safe."""

    __slots__ = ("_backlogs", "_default_memory", "_override", "_subscription",
                 "memory_limit", "memory_limit_set", "page_limit", "settings")

    def __init__(self, settings: AddressSettings, *, subscription: bool,
                 default_memory: int) -> None:
        """``subscription``: the queue is a non-durable topic subscription, the only kind
        a ``pending_message_limit`` applies to (seed 003). ``default_memory``: the
        broker's default memory share of a destination, in bytes."""
        #: the queue's current settings; replaced only through :meth:`configure`
        self.settings = settings
        self._subscription = subscription
        self._override: int | None = None
        #: backlog each consumer asked for (only those that asked; None: nobody did)
        self._backlogs: dict[ServerConsumer, int] | None = None
        self._default_memory = default_memory
        #: the destination's memory limit in bytes (a topic's: of all its subscriptions)
        self.memory_limit = default_memory
        #: whether :attr:`memory_limit` is the address settings' (else the default share)
        self.memory_limit_set = False
        #: RAM this queue's ready messages keep before its backlog pages out, and the
        #: bytes it pages back in up to (read per enqueue: a plain field)
        self.page_limit = page_limit_of(default_memory)
        self.configure(settings)

    def configure(self, settings: AddressSettings) -> None:
        """The settings changed (a new match for the queue's address)."""
        self.settings = settings
        own = settings.memory_limit
        self.memory_limit_set = own is not None
        self.memory_limit = self._default_memory if own is None else own
        self.page_limit = page_limit_of(self.memory_limit)

    def set_ring_override(self, size: int | None) -> None:
        """Set (None: clear) the queue's own ring size."""
        if size is not None and (size < -1 or size == 0):
            raise ValueError(f"ring size must be -1 (no ring) or >= 1, got {size}")
        self._override = size

    @property
    def ring_size(self) -> int:
        """The ring size to enforce (-1: not a ring). A non-durable topic subscription
        with a ``pending_message_limit`` is a ring of that size (ActiveMQ's
        constantPendingMessageLimitStrategy: the newest N pending messages are kept, the
        prefetched ones are not pending); its evictions count as ``discarded``."""
        limit = self._pending_limit()
        return limit if limit is not None else effective_ring_size(self.settings, self._override)

    def _pending_limit(self) -> int | None:
        """The pending-message limit that makes the queue a ring, or None: only a
        non-durable topic subscription that is not a ring by its own settings has one."""
        settings = self.settings
        limit = settings.pending_message_limit
        if (limit is None or not self._subscription
                or effective_ring_size(settings, self._override) > 0):
            return None
        return limit

    @property
    def discards(self) -> bool:
        """True when the queue's ring is a pending-message limit (evictions are
        discards, not replacements)."""
        return self._pending_limit() is not None

    # ------------------------------------------------------------------ consumers

    def ask_backlog(self, consumer: ServerConsumer, backlog: int | None) -> int | None:
        """``consumer`` attaches asking for ``backlog`` (None: nothing); returns the
        backlog granted (None: no cap). See :func:`~.policy.grant_backlog`."""
        if backlog is not None:
            if self._backlogs is None:
                self._backlogs = {}
            self._backlogs[consumer] = backlog
        return grant_backlog(self.settings, backlog)

    def forget(self, consumer: ServerConsumer) -> None:
        """``consumer`` detached."""
        if self._backlogs is not None:
            self._backlogs.pop(consumer, None)

    def limit_for(self, consumer: ServerConsumer) -> int | None:
        """Destination flow limit, lowered to the backlog granted to ``consumer``."""
        backlog = None if self._backlogs is None else self._backlogs.get(consumer)
        return consumer_limit(effective_flow_limit(self.settings), self.settings, backlog)
