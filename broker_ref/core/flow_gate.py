"""Open MQ's connection flow limit, enforced where deliveries are made.

Seed 004: with ``imqConnectionFlowLimitEnabled``, "when the number of messages that are
buffered on the connection, waiting to be consumed, reaches the defined limit then the
broker won't deliver any more messages whilst the number of unconsumed messages remains
above that limit". The limit is a *gate* on the connection, not credit shared out among
its consumers: credit handed to one consumer whose destination stays empty would be held
back from another whose messages arrive later, and that one would starve.

The gate is the connection's free capacity, kept on its :class:`~.records.DeliveryChannel`
(``gate``, -1 without a limit) so the dispatch loop reads it as a typed field: every
delivery takes one place (``take_run`` and ``QueueDeliveries.deliver``), a consumer whose
connection has no place left cannot receive (``ServerConsumer.can_receive``) and leaves its
queue's dispatch ring. The client tells the broker each time messages leave its buffers
(consumed, or given back) with :meth:`ConnectionGate.released`; a gate that was shut and
opens again offers the connection's consumers to their queues once more, starting after
the consumer that took the previous reopened place (at the first reopening: after the
owner of the newest unsettled delivery), so the place goes to one that was kept waiting
(FlowCap's "starved first" rule, where the cap was credit) and none is always last.
"""

from __future__ import annotations

from .records import DeliveryChannel, ServerConsumer

__all__ = ["ConnectionGate"]


class ConnectionGate:
    """One connection's flow limit (None: no limit): the owner of ``channel.gate``."""

    __slots__ = ("_channel", "_last", "limit")

    def __init__(self, channel: DeliveryChannel, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"connection flow limit must be >= 1, got {limit}")
        self._channel = channel
        self.limit = limit
        #: who took the place the last time the gate reopened (offered last next time)
        self._last: ServerConsumer | None = None
        channel.gate = -1 if limit is None else limit

    def released(self, count: int, consumers: list[ServerConsumer]) -> None:
        """``count`` messages delivered on this connection left the client's buffers
        (consumed, or handed back). Opening a shut gate offers ``consumers`` again."""
        limit = self.limit
        if limit is None or count <= 0:
            return
        channel = self._channel
        was_shut = channel.gate == 0
        channel.gate = min(limit, channel.gate + count)
        if not was_shut or not consumers:
            return
        last = self._last
        if last is None and channel.tags:  # the newest unsettled delivery's consumer
            last = next(reversed(channel.tags.values()))
        first = 0
        for i, c in enumerate(consumers):
            if c is last:
                first = i + 1
                break
        for c in consumers[first:] + consumers[:first]:
            if channel.gate <= 0:
                break
            if not c.closed:
                before = channel.gate
                c.queue.grant(c, 0)  # back in its queue's ring, which dispatches
                if channel.gate < before:
                    self._last = c
