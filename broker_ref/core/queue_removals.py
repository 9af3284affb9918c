"""How a message leaves a queue other than by being consumed: expired, dead-lettered,
replaced by a ring, and how a message that left for good leaves the store.

A :class:`~.queue.Queue` composes one :class:`QueueRemovals`, which owns the counters
these paths update (``expired``, ``dead_lettered``, ``messages_replaced``, ``discarded``)
and does each path's steps in one place: the queue's own paths (timers, selector and fast
dispatch, cancels and rollbacks past ``max_delivery_attempts``, NACKs), its AMPS
:class:`~.policy.QueuePolicy` (``MaxCancels``, ``MaxDeliveries``, released barriers) and
its ring (seed 000: a full ring evicts its head) all go through it, so none of them
counts, diverts or unstores on its own.

*Whether* a message leaves (it is due, the limit is reached, the ring is full) stays the
caller's decision; this object is told which ref goes and why. A message leaving marks
its ref ``GONE``, tells the policy (if the caller passes one) to forget it, and removes
the message's row when the queue persists and the message is persistent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api import ServerMessage
from .consumer import GONE, MessageRef

if TYPE_CHECKING:
    from .queue_host import QueueHost
    from .queue_ops import PolicyOps, QueueOps

__all__ = ["EXPIRED_REASON", "QueueRemovals"]

EXPIRED_REASON = "expired"


class QueueRemovals:
    """The ways out of one queue and their counters. Not thread-safe (the broker isn't)."""

    __slots__ = (
        "_host", "_persist", "_queue", "dead_lettered", "discarded", "expired",
        "messages_replaced",
    )  # fmt: skip

    def __init__(self, queue: QueueOps, host: QueueHost[Any], persist: bool) -> None:
        """``persist``: the queue is durable on a host with a store (fixed for its life),
        so its persistent messages have rows to remove."""
        self._queue = queue  # the source of diversions; its settings say where they go
        self._host = host
        self._persist = persist
        self.expired = 0
        self.dead_lettered = 0
        self.messages_replaced = 0
        #: dropped by ``pending_message_limit`` (a slow non-durable subscriber, seed 003)
        self.discarded = 0

    def expire(self, ref: MessageRef, policy: PolicyOps | None) -> None:
        """``ref`` (no longer ready or in delivery) expired: to the expiry address, or
        under an AMPS expiration setting with none, dead-lettered (seed 001: an expired
        message is an undeliverable one there)."""
        ref.state = GONE
        self.expired += 1
        settings = self._queue.settings
        address = settings.expiry_address
        if policy is not None:
            policy.forget(ref)
            if address is None and policy.expire_to_dlq:
                address = settings.dead_letter_address
                self.dead_lettered += 1
        self._host.divert(self._queue, ref.message, address, EXPIRED_REASON)
        self.unstore(ref.message)

    def dead_letter(self, ref: MessageRef, reason: str, policy: PolicyOps | None) -> None:
        """``ref`` goes to the dead-letter address with ``reason``; ``policy``: the policy
        that still knows it (None when it already forgot it, or there is none)."""
        ref.state = GONE
        if policy is not None:
            policy.forget(ref)
        self.dead_lettered += 1
        self._host.divert(self._queue, ref.message, self._queue.settings.dead_letter_address,
                          reason)
        self.unstore(ref.message)

    def replace(self, ref: MessageRef, policy: PolicyOps | None) -> None:
        """A full ring drops ``ref`` (not ready, or already taken out of its level):
        "replaced", not dead-lettered; a ``pending_message_limit`` ring counts it as
        discarded instead (:attr:`~.queue_limits.QueueLimits.discards`)."""
        ref.state = GONE
        if self._queue.limits.discards:
            self.discarded += 1
        else:
            self.messages_replaced += 1
        self.unstore(ref.message)
        if policy is not None:
            policy.forget(ref)

    def unstore(self, message: ServerMessage) -> None:
        """``message`` left the queue for good: its row goes, if it has one."""
        if self._persist and message.persistent:
            store = self._host.store
            assert store is not None
            store.remove_message(self._queue.name, message.message_id)
