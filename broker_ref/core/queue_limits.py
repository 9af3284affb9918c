"""What a queue's settings limit: its ring size and each consumer's share of its backlog.

A :class:`~.queue.Queue` composes one :class:`QueueLimits`, which holds the queue's
:class:`~.api.AddressSettings` and the two things that refine them per queue: a ring size
of its own (``Broker.create_queue(ring_size=)`` / ``set_ring_size``, seed 000) and the
backlog each consumer asked for (``MaxPerSubscriptionBacklog``, seed 001). Every limit
derived from those three lives here, so a settings change, a new ring size and a new
consumer all compute it the same way.

This object only computes: the queue copies :attr:`QueueLimits.ring_size` into its own
typed ``_ring_size`` field (which the dispatch twins read per message) whenever it may
have changed, and sets each consumer's ``flow_limit`` from :meth:`QueueLimits.limit_for`.
"""

from __future__ import annotations

from .api import AddressSettings
from .consumer import ServerConsumer, effective_flow_limit
from .policy import consumer_limit, grant_backlog
from .ring import effective_ring_size

__all__ = ["QueueLimits"]


class QueueLimits:
    """The settings of one queue and the limits they set. Not thread-safe."""

    __slots__ = ("_backlogs", "_override", "_subscription", "settings")

    def __init__(self, settings: AddressSettings, *, subscription: bool) -> None:
        """``subscription``: the queue is a non-durable topic subscription, the only kind
        a ``pending_message_limit`` applies to (seed 003)."""
        #: the queue's current settings; replaced only through :meth:`configure`
        self.settings = settings
        self._subscription = subscription
        self._override: int | None = None
        #: backlog each consumer asked for (only those that asked; None: nobody did)
        self._backlogs: dict[ServerConsumer, int] | None = None

    def configure(self, settings: AddressSettings) -> None:
        """The settings changed (a new match for the queue's address)."""
        self.settings = settings

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
