"""AMPS-style queue settings (seed 001): leases, delivery semantics, backlogs, expiration
models, queue filters, fairness, lease ownership, delivery/cancel limits, barriers and a
target active depth.

A :class:`QueuePolicy` is attached to a :class:`~.queue.Queue` only when its settings use
one of these features (``AddressSettings.amps``). The queue then dispatches through
:meth:`QueuePolicy.dispatch`, a general (O(consumers) per message) loop that can honour
all of them at once; queues without a policy keep their O(1) round-robin path and pay
nothing for any of this. The meaning of every setting, including the choices made where
the seed is silent, is documented on its ``AddressSettings`` field.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .api import ServerMessage
from .consumer import DELIVERING, GONE, READY, MessageRef, ServerConsumer
from .errors import IllegalBrokerState
from .filters import compile_filter, filter_accepts

if TYPE_CHECKING:
    from .api import AddressSettings
    from .queue_ops import QueueOps

__all__ = [
    "TIMER_LEASE",
    "QueuePolicy",
    "consumer_limit",
    "effective_expiration",
    "grant_backlog",
]

#: Timer kind of a lease running out (TIMER_EXPIRE = 0 and TIMER_RELEASE = 1 are the
#: queue's own).
TIMER_LEASE = 2


def grant_backlog(settings: AddressSettings, asked: int | None) -> int | None:
    """MaxPerSubscriptionBacklog: the lower of what the consumer asked (1 when it asked
    nothing, as AMPS does) and the queue maximum. No maximum set: what it asked, if
    anything (None = uncapped), so plain JMS consumers keep their behaviour."""
    cap = settings.max_per_subscription_backlog
    if cap is None:
        return asked
    return min(1 if asked is None else asked, cap)


def consumer_limit(limit: int | None, settings: AddressSettings, asked: int | None) -> int | None:
    """A consumer's cap on unacknowledged messages: the destination flow limit, lowered to
    the backlog granted to it."""
    grant = grant_backlog(settings, asked)
    if grant is None:
        return limit
    return grant if limit is None else min(limit, grant)


def effective_expiration(model: str, period: int | None, message_exp: int, now: int) -> int:
    """The expiry time (0 = never) of a message enqueued at ``now`` under ``model``.

    An unset value on either side means "unlimited": it loses under "earliest" and wins
    under "latest" (the seed says so of the queue value; a message without an expiration
    never expires, so it is treated alike).
    """
    queue_exp = now + period if period is not None else 0
    if model == "queue":
        return queue_exp
    if model == "default":
        return message_exp or queue_exp
    if model == "latest":
        return 0 if not queue_exp or not message_exp else max(queue_exp, message_exp)
    if not queue_exp:  # earliest
        return message_exp
    return queue_exp if not message_exp else min(queue_exp, message_exp)


class QueuePolicy:
    """The per-queue state of the seed-001 features. Not thread-safe (the broker isn't)."""

    __slots__ = (
        "barrier",
        "barriers",
        "cancels",
        "copies",
        "filter",
        "leases",
        "q",
        "rr",
        "stale",
    )

    def __init__(self, queue: QueueOps) -> None:
        self.q = queue
        #: ref -> (consumer, tag, due) of every leased delivery
        self.leases: dict[MessageRef, tuple[ServerConsumer, int, int]] = {}
        #: (consumer, tag) of deliveries whose lease ran out -> the message they named
        self.stale: dict[tuple[ServerConsumer, int], MessageRef] = {}
        self.cancels: dict[MessageRef, int] = {}
        self.barriers: set[MessageRef] = set()
        #: the per-consumer copies of a released barrier message still unacknowledged
        self.copies: set[MessageRef] = set()
        self.rr = 0
        self.configure()

    def configure(self) -> None:
        s = self.q.settings
        self.filter = compile_filter(s.filter)
        self.barrier = compile_filter(s.barrier_expression)

    @property
    def settings(self) -> AddressSettings:
        return self.q.settings

    @property
    def expire_to_dlq(self) -> bool:
        s = self.q.settings
        return s.expiration_ms is not None or s.expiration_model is not None

    # ------------------------------------------------------------------ enqueue

    def admit(self, message: ServerMessage) -> ServerMessage | None:
        """Filter, then stamp the expiration the model gives (on a copy: a topic message
        is shared by its subscriptions). None: the queue does not take it."""
        if self.filter is not None and not filter_accepts(self.filter, message):
            return None
        s = self.q.settings
        if s.expiration_ms is not None or s.expiration_model is not None:
            exp = effective_expiration(
                s.expiration_model or "default",
                s.expiration_ms,
                message.expiration,
                self.q.host.now(),
            )
            if exp != message.expiration:
                message = dataclasses.replace(message, expiration=exp)
        return message

    def accepted(self, ref: MessageRef) -> None:
        """BarrierExpression is evaluated once, when the message joins the queue."""
        if self.barrier is not None and filter_accepts(self.barrier, ref.message):
            self.barriers.add(ref)

    def forget(self, ref: MessageRef) -> None:
        """``ref`` left the queue for good."""
        self.leases.pop(ref, None)
        self.cancels.pop(ref, None)
        self.barriers.discard(ref)
        self.copies.discard(ref)

    # ------------------------------------------------------------------ dispatch

    def dispatch(self) -> None:
        q = self.q
        s = q.settings
        at_most_once = s.semantics == "at-most-once"
        cap = s.max_backlog
        now = q.host.now()
        while q.levels.count:
            if cap is not None and q.delivering_count >= cap:
                return
            avail = self._available()
            if not avail or not self._dispatch_one(avail, now, at_most_once):
                return

    def active_budget(self) -> int:
        """TargetQueueDepth: how many ready messages are active (-1: all). Messages in
        delivery are unacknowledged active state too, so they use up the target."""
        depth = self.q.settings.target_queue_depth
        return -1 if depth is None else max(0, depth - self.q.delivering_count)

    def _available(self) -> list[ServerConsumer]:
        """Consumers that may receive, in the order the fairness model prefers them."""
        cs = self.q.consumers
        model = self.q.settings.fairness_model or "round-robin"
        if model == "fast":
            return [c for c in cs if c.can_receive()]
        start = self.rr % len(cs) if cs else 0
        avail = [c for c in cs[start:] + cs[:start] if c.can_receive()]
        if model == "proportional":
            avail.sort(key=_load)  # stable: ties keep round-robin order
        return avail

    def _dispatch_one(self, avail: list[ServerConsumer], now: int, at_most_once: bool) -> bool:
        """Deliver one message (or expire one); False when nothing can move now."""
        q = self.q
        budget = self.active_budget()
        first = True
        for ref in q.levels.ready():  # the levels stay put until we take one and return
            if budget == 0:
                return False
            budget -= 1
            exp = ref.message.expiration
            if exp and exp <= now:
                q.levels.remove(ref)
                q.expire(ref)
                return True
            if ref in self.barriers:
                return first and self._release_barrier(ref, at_most_once)
            first = False
            for c in avail:
                if c.filter is None or filter_accepts(c.filter, ref.message):
                    q.levels.remove(ref)
                    self._deliver(c, ref, at_most_once)
                    return True
        return False

    def _deliver(self, c: ServerConsumer, ref: MessageRef, at_most_once: bool) -> None:
        q = self.q
        q.deliveries.deliver(c, ref, at_most_once)
        cs = q.consumers
        self.rr = cs.index(c) + 1
        period = q.settings.lease_period_ms
        if period is not None and ref.state == DELIVERING:
            due = q.host.now() + period
            self.leases[ref] = (c, c.channel.next_tag - 1, due)
            q.host.schedule_timer(due, TIMER_LEASE, q, ref)

    def _release_barrier(self, ref: MessageRef, at_most_once: bool) -> bool:
        """Every earlier message is acknowledged (nothing ahead, nothing in delivery):
        deliver the barrier once to every current consumer — only when all of them can
        receive, so none misses it. Each gets its own copy to acknowledge; the stored
        message is removed at release (the copies are not redelivered if cancelled)."""
        q = self.q
        consumers = [c for c in q.consumers if not c.closed]
        if q.delivering_count or not consumers or not all(c.can_receive() for c in consumers):
            return False
        q.levels.remove(ref)
        self.forget(ref)
        ref.state = GONE
        q.removals.unstore(ref.message)
        for c in consumers:
            copy = MessageRef(ref.message, ref.priority, ref.delivery_count)
            q.deliveries.deliver(c, copy, at_most_once)
            if copy.state == DELIVERING:
                self.copies.add(copy)
        return True

    # ------------------------------------------------------------------ returns

    def on_return(self, ref: MessageRef, redelivered: bool, cancelled: bool) -> bool:
        """A delivery came back. True when it does not go back on the queue: a barrier
        copy (the barrier has passed), or MaxCancels / MaxDeliveries reached."""
        self.leases.pop(ref, None)
        if ref in self.copies:
            self.copies.discard(ref)
            ref.state = GONE
            return True
        if not redelivered:
            return False
        s = self.q.settings
        if cancelled and s.max_cancels > 0:
            n = self.cancels.get(ref, 0) + 1
            if n >= s.max_cancels:
                self._dead_letter(ref, f"max cancels ({s.max_cancels}) exceeded")
                return True
            self.cancels[ref] = n
        if s.max_deliveries > 0 and ref.delivery_count >= s.max_deliveries:
            self._dead_letter(ref, f"max deliveries ({s.max_deliveries}) exceeded")
            return True
        return False

    def _dead_letter(self, ref: MessageRef, reason: str) -> None:
        self.q.removals.dead_letter(ref, reason, self)

    # ------------------------------------------------------------------ leases

    def lease_live(self, ref: MessageRef) -> bool:
        return ref in self.leases

    def lease_due(self, ref: MessageRef) -> None:
        """The lease timer fired: if this lease (not a later one) ran out, take the
        message back from its consumer and put it on the head for anyone to take."""
        q = self.q
        entry = self.leases.get(ref)
        if entry is None or entry[2] > q.host.now():
            return
        c, tag, _ = entry
        del self.leases[ref]
        del c.delivering[tag]
        q.delivering_count -= 1
        self.stale[(c, tag)] = ref
        if not c.closed:
            q.offer(c)
        q.deliveries.requeue(ref, True, False)
        q.dispatch()

    def late_ack(self, c: ServerConsumer, tag: int) -> None:
        """An ack of a tag whose lease ran out (see ``AddressSettings.leasing``)."""
        q = self.q
        ref = self.stale.pop((c, tag), None)
        if ref is None:
            raise IllegalBrokerState(
                f"unknown delivery tag {tag} on queue {q.name!r}: it was never delivered "
                "here, or was already acknowledged or cancelled"
            )
        strict = q.settings.leasing == "strict"
        if ref.state == READY:  # back on the queue, unleased: anyone may consume it
            ref.state = GONE  # left in its level as a tombstone
            q.levels.unready(ref)
        elif ref.state == DELIVERING:
            if strict:
                raise IllegalBrokerState(
                    f"the lease of delivery tag {tag} ran out after "
                    f"{q.settings.lease_period_ms} ms and message {ref.message.message_id} "
                    f"is now leased to another consumer of {q.name!r}; with leasing=strict "
                    "this acknowledgement has no effect (acknowledge within the lease)"
                )
            holder, holder_tag, _ = self.leases.pop(ref)
            del holder.delivering[holder_tag]
            q.delivering_count -= 1
            self.stale[(holder, holder_tag)] = ref  # its own ack becomes a no-op
            ref.state = GONE
            q.offer(holder)
        else:
            if strict:
                raise IllegalBrokerState(
                    f"the lease of delivery tag {tag} ran out and message "
                    f"{ref.message.message_id} has since left {q.name!r} (acknowledged, "
                    "expired or dead-lettered); this acknowledgement has no effect"
                )
            return  # sublet: someone already consumed it, which is what was asked
        q.dequeued += 1
        self.forget(ref)
        q.removals.unstore(ref.message)

    def stale_cancel(self, c: ServerConsumer, tag: int) -> None:
        """A cancel of a tag whose lease ran out: the message is already back."""
        self.stale.pop((c, tag), None)

    def consumer_removed(self, c: ServerConsumer) -> None:
        """Forget the consumer's stale tags, which the connection still routes to it."""
        for key in [k for k in self.stale if k[0] is c]:
            del self.stale[key]
            c.channel.tags.pop(key[1], None)


def _load(c: ServerConsumer) -> float:
    """Unacknowledged messages over available backlog (the granted backlog, or what the
    consumer could hold by credit when it has none)."""
    held = len(c.delivering)
    backlog = c.flow_limit if c.flow_limit is not None else held + c.credit
    return held / backlog if backlog > 0 else 1.0
