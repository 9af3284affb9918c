"""One anycast queue: priority levels, consumers, credit-based dispatch, expiry, schedule.

Everything that decides *which consumer gets which message when* lives in this file, its
hot half :mod:`.queue_run` (compiled twin by default) and :mod:`.queue_deliveries`; it
does not know about connections, transactions or topics (a topic subscription is just a
``Queue`` fed by a :class:`~.topic.Topic`). The broker drives it and provides the clock,
timers, the store and dead-letter routing through :class:`~.queue_host.QueueHost`.

Data layout, chosen for O(1) amortised dispatch when no consumer has a selector:

* the ready messages in RAM are a :class:`~.ready_levels.ReadyLevels` (``self.levels``):
  one level of refs per JMS priority (:class:`~.records.Level`, a list and a head index),
  left from the head only, with tombstones for messages that stopped being ready inside a
  level; it also keeps the count and the RAM accounting.
* a ring (deque) of consumers that may receive: round-robin is "pop left, deliver, append
  right if it can still receive"; consumers without credit leave it lazily. It exists
  only while it holds someone (an idle queue must stay small, issue 17).
* with selectors, dispatch walks the ready messages in order and gives each to the first
  consumer in ring order whose selector matches; messages nobody matches stay in place
  (:func:`~.queue_deliveries.dispatch_filtered`): O(ready messages) per dispatch.

The queue composes one owner per concern beside the ready levels: its settings' limits
(:class:`~.queue_limits.QueueLimits`: ring size, consumer backlogs), its scheduled
messages and timers (:class:`~.queue_timers.QueueTimers`), the outcomes of deliveries
(:class:`~.queue_deliveries.QueueDeliveries`) and the ways out other than consumption
(:class:`~.queue_removals.QueueRemovals`: expiry, dead letters, ring replacement). The
last three are made when first used (``timers``, ``deliveries``, ``removals``): a queue
holding one message must stay small (issue 17: the three were 184 bytes a queue). The
ring's rules (seed 000, :mod:`.ring`) apply in ``_add_tail`` / ``add_head``, the only
places messages become ready apart from paging in. Past the broker's RAM budget a queue
pages its backlog out (seed 002) through a :class:`~.queue_paging.QueuePaging` that
exists while it has messages on disk; ring and AMPS queues never page. The AMPS-style
settings (seed 001) live in a :class:`~.policy.QueuePolicy` that exists only when a queue
sets one of them: without it the code below pays one ``is None`` test per operation.
"""

from __future__ import annotations

from collections import deque

from jmspy.broker_ref.core import run_twins

from ..store.store import PageRun
from .api import AddressSettings, DestinationKind, DestinationStats, ServerMessage
from .consumer import (
    DELIVERING,
    GONE,
    PAGE_OVERHEAD,
    READY,
    SCHEDULED,
    DeliveryChannel,
    MessageRef,
    QueueRecord,
    ServerConsumer,
    effective_flow_limit,
)
from .filters import Filter, compile_filter, filter_accepts
from .paging import Paged
from .policy import QueuePolicy
from .queue_browse import browse
from .queue_deliveries import QueueDeliveries, dispatch_filtered, hand_over
from .queue_host import QueueHost
from .queue_limits import QueueLimits
from .queue_paging import QueuePaging
from .queue_removals import EXPIRED_REASON, QueueRemovals
from .queue_stats import queue_stats
from .queue_timers import TIMER_EXPIRE, TIMER_LEASE, TIMER_RELEASE, QueueTimers
from .ready_levels import ReadyLevels
from .records import priority_level

#: The per-message step of dispatch, the common enqueue and the fast dispatch loop
#: (``queue_run.py`` beside this file, or its compiled twin), each typed on
#: :class:`~.queue_run.RunQueue`, which this class is held to where it passes itself.
_twin = run_twins.queue_run

# The record types and filter helpers are re-exported so hosts need one import.
__all__ = [
    "DELIVERING", "EXPIRED_REASON", "GONE", "READY", "SCHEDULED", "TIMER_EXPIRE", "TIMER_LEASE",
    "TIMER_RELEASE", "DeliveryChannel", "Filter", "MessageRef", "Queue", "QueueHost",
    "ServerConsumer", "compile_filter", "effective_flow_limit", "filter_accepts",
]  # fmt: skip

class Queue(QueueRecord):
    """A queue or a topic subscription's queue. Not thread-safe (the broker isn't).

    The fields dispatch touches per message are the :class:`~.records.QueueRecord` it
    derives from (typed C fields under the compiled twins); the rest are its own."""

    __slots__ = (
        "_deliveries", "_removals", "_timers", "address", "consumers", "durable", "kind",
        "limits", "owner_connection",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        host: QueueHost[Queue],
        settings: AddressSettings,
        *,
        kind: DestinationKind = DestinationKind.QUEUE,
        address: str | None = None,
        durable: bool = True,
        owner_connection: int | None = None,
    ) -> None:
        self.name = name
        #: The name settings are looked up by (the topic, for a subscription queue).
        self.address = address if address is not None else name
        self.kind = kind
        self.host = host
        self.limits = QueueLimits(
            settings, subscription=kind is DestinationKind.TOPIC and not durable,
            default_memory=host.destination_memory_limit)
        self.durable = durable
        self.owner_connection = owner_connection
        self._persist = durable and host.store is not None
        self.levels = ReadyLevels(host.budget)
        self._ring: deque[ServerConsumer] | None = None
        self._timers: QueueTimers | None = None
        self._filtered = 0
        self._dispatching = False
        self.consumers: list[ServerConsumer] = []
        self.delivering_count = 0
        self.enqueued = 0
        self.dequeued = 0
        self._removals: QueueRemovals | None = None
        self._deliveries: QueueDeliveries | None = None
        self.deleted = False
        self._ring_size = self.limits.ring_size
        self._policy: QueuePolicy | None = QueuePolicy(self) if settings.amps else None
        self._pages: QueuePaging | None = None

    # ------------------------------------------------------------------ parts made on use

    @property
    def timers(self) -> QueueTimers:
        """The scheduled messages and what the queue's timers mean (made on first use)."""
        timers = self._timers
        if timers is None:
            timers = self._timers = QueueTimers(self)
        return timers

    @property
    def removals(self) -> QueueRemovals:
        """The ways out other than consumption and their counters (made on first use)."""
        removals = self._removals
        if removals is None:
            removals = self._removals = QueueRemovals(self, self.host, self._persist)
        return removals

    @property
    def deliveries(self) -> QueueDeliveries:
        """The outcomes of deliveries (made on first use)."""
        deliveries = self._deliveries
        if deliveries is None:
            deliveries = self._deliveries = QueueDeliveries(self, self._persist)
        return deliveries

    # ------------------------------------------------------------------ settings/stats

    @property
    def settings(self) -> AddressSettings:
        return self.limits.settings

    @property
    def policy(self) -> QueuePolicy | None:
        """The AMPS-style settings' state (seed 001), while the queue has one."""
        return self._policy

    def apply_settings(self, settings: AddressSettings) -> None:
        self.limits.configure(settings)
        self._ring_size = self.limits.ring_size
        # a policy, once made, stays: it may hold leases and stale tags still to settle
        if self._policy is not None:
            self._policy.configure()
        elif settings.amps:
            self._policy = QueuePolicy(self)
        self._settings_changed()
        for c in self.consumers:
            c.flow_limit = self.limits.limit_for(c)
            self.offer(c)
        self.dispatch()

    def set_ring_size(self, size: int | None) -> None:
        """Set (None: clear) this queue's own ring size. Lowering it evicts nothing now:
        later sends evict one for one, so the queue only shrinks by consumption."""
        self.limits.set_ring_override(size)
        self._ring_size = self.limits.ring_size
        self._settings_changed()

    @property
    def ring_size(self) -> int:
        return self._ring_size

    @property
    def ready_count(self) -> int:
        """Messages ready in RAM (``levels.count``)."""
        return self.levels.count

    @property
    def memory_usage(self) -> int:
        """This queue's share of the broker's RAM budget (what its ready messages in RAM
        cost); producer flow control compares it with the ``memory-limit``."""
        return self.levels.memory_usage

    @property
    def memory_limit(self) -> int:
        """The destination's memory limit in bytes: its address settings' or the
        broker's default share (:mod:`.queue_limits`); a subscription's is its topic's."""
        return self.limits.memory_limit

    @property
    def scheduled_count(self) -> int:
        return 0 if self._timers is None else self._timers.scheduled_count

    @property
    def expired_count(self) -> int:
        """Messages that expired here (``QueueRemovals.expired``)."""
        return 0 if self._removals is None else self._removals.expired

    @property
    def message_count(self) -> int:
        return (self.levels.count + self.delivering_count + self.scheduled_count
                + self.paged_count)

    @property
    def paged_count(self) -> int:
        """Messages paged out: on disk (store or spool), not in RAM."""
        return 0 if self._pages is None else self._pages.count

    @property
    def pages(self) -> QueuePaging | None:
        """The part on disk, while there is one: an operator's purge, delete, move and
        retry reach paged messages through it (emptied so, the next fill drops it)."""
        return self._pages

    def stats(self) -> DestinationStats:
        """This queue's counters as the broker reports them (:mod:`.queue_stats`)."""
        return queue_stats(self, self._removals)

    # ------------------------------------------------------------------ consumers

    def add_consumer(self, consumer: ServerConsumer, backlog: int | None = None) -> int | None:
        """Attach; returns the backlog granted (None: no cap). See ``grant_backlog``."""
        grant = self.limits.ask_backlog(consumer, backlog)
        if grant is not None:
            consumer.flow_limit = self.limits.limit_for(consumer)
        self.consumers.append(consumer)
        if consumer.filter is not None:
            self._filtered += 1
        self.offer(consumer)
        self.dispatch()
        return grant

    def remove_consumer(self, consumer: ServerConsumer) -> None:
        """Detach; the caller has already cancelled what it wants back in the queue."""
        consumer.closed = True
        self.consumers.remove(consumer)
        self.limits.forget(consumer)
        if self._policy is not None:
            self._policy.consumer_removed(consumer)
        if consumer.filter is not None:
            self._filtered -= 1
        ring = self._ring
        if consumer.in_ring and ring is not None:  # in_ring implies a ring
            ring.remove(consumer)
            consumer.in_ring = False
        if ring is not None and not ring and not self._dispatching:  # a dispatch holds it
            self._ring = None  # an empty deque is ~760 B, most of an idle queue's RAM
        if self._pages is not None:
            self._pages.forget(consumer)

    def offer(self, consumer: ServerConsumer) -> None:
        """Put the consumer in the round-robin ring if it may receive now (after anything
        that may have given it room: credit, an ack, a delivery taken back)."""
        if not consumer.in_ring and consumer.can_receive():
            consumer.in_ring = True
            if self._ring is None:
                self._ring = deque()
            self._ring.append(consumer)

    def grant(self, consumer: ServerConsumer, credits: int) -> None:
        consumer.credit += credits
        self.offer(consumer)
        self.dispatch()

    # ------------------------------------------------------------------ enqueue

    def enqueue(self, message: ServerMessage) -> None:
        """Take a newly sent message: persist, then schedule or make ready, then dispatch.

        The common case (no policy, no expiry or delay) is walked by ``queue_run.enqueue``
        (compiled twin); it hands everything else to :meth:`_enqueue_full`, and so does
        this method for a queue whose RAM has reached its own page limit (the twin looks
        only at the broker's budget): such a message may page out."""
        if self.levels.memory_usage + message.size + PAGE_OVERHEAD > self.limits.page_limit:
            self._enqueue_full(message)
            return
        _twin.enqueue(self, message)

    def _enqueue_full(self, message: ServerMessage) -> None:
        """Every step of :meth:`enqueue`, for every kind of message and queue."""
        if self.deleted:
            return
        if self._policy is not None:
            admitted = self._policy.admit(message)
            if admitted is None:
                return  # the queue's own filter rejects it
            message = admitted
        seq = 0
        if self._persist and message.persistent:
            store = self.host.store
            assert store is not None
            seq = store.add_message(self.name, message)
        self.enqueued += 1
        host = self.host
        if (host.deferred_dispatch is None or not self._ring or self._ring_size > 0
                or self._policy is not None or self._dispatching):
            self._accept(message, 0, seq)
            return
        self._dispatching = True  # the dispatch waits for Broker.dispatch_deferred
        try:
            self._accept(message, 0, seq)
        finally:
            self._dispatching = False
        host.defer(self)

    def recover(self, runs: list[PageRun]) -> None:
        """Take the rows a restarted broker found in the store for this queue: left on
        disk and paged in as consumers need them, or read now if it never pages."""
        if not self._pageable():
            store = self.host.store
            assert store is not None
            paging = QueuePaging(self.name, store, self.host.spool, self.levels,
                                 self._paged_in)
            paging.add_runs(runs)
            paging.unpage()
            return
        self._paging_made().add_runs(runs)
        budget = self.levels.budget
        if budget.used < budget.limit:
            self._fill()  # the head now, up to the page limit in bytes; the rest later

    def _settings_changed(self) -> None:
        """A queue that has paged messages and may no longer page takes them back."""
        paging = self._pages
        if paging is not None and not self._pageable():
            self._pages = None
            paging.unpage()

    def _accept(self, message: ServerMessage, delivery_count: int, seq: int = 0) -> None:
        """Make a new message (``seq``: its store row, 0 if not stored) scheduled, ready
        or paged out, and dispatch."""
        ref = MessageRef(message, priority_level(message.priority), delivery_count)
        if self._policy is not None:
            self._policy.accepted(ref)
        host = self.host
        if message.expiration and message.expiration <= host.now():
            self.expire(ref)
            return
        if message.deliver_at and message.deliver_at > host.now():
            if message.expiration:
                host.schedule_timer(message.expiration, TIMER_EXPIRE, self, ref)
            self.timers.hold(ref)  # scheduled until its deliver_at (release)
            if seq and self._pages is not None:
                self._pages.held_in_ram(ref.priority)
            return
        if self._page_out(ref, seq):
            return
        if message.expiration:
            host.schedule_timer(message.expiration, TIMER_EXPIRE, self, ref)
        self._add_tail(ref)
        if self._ring:
            self.dispatch()

    def _add_tail(self, ref: MessageRef) -> None:
        if self._ring_size > 0 and self.levels.count >= self._ring_size:
            head = self.levels.take_head()  # one for one: a lowered ring never grows
            if head is not None:
                self.removals.replace(head, self._policy)
        self.levels.add_tail(ref)

    def add_head(self, ref: MessageRef) -> None:
        """A message that came back (cancel, rollback, lease, schedule) is ready first."""
        if self._ring_size > 0 and self.levels.count >= self._ring_size:
            self.removals.replace(ref, self._policy)  # the ring keeps the tail: it goes
            return
        self.levels.add_head(ref)

    # ------------------------------------------------------------------ paging (seed 002)

    def takes_without_ram(self, message: ServerMessage) -> bool:
        """True when ``message`` would cost this queue no RAM while it has a backlog: it
        stays in the store (seed 002); producer flow control lets it in to ``store-limit``."""
        return message.persistent and self._persist and self._pageable()

    def costs_no_ram(self, message: ServerMessage) -> bool:
        """True when ``message`` would not add to this queue's pending RAM: it pages to
        the store (:meth:`takes_without_ram`), or nothing is ready and a consumer is
        waiting, so it is delivered at once. Producer flow control lets it through."""
        if self.takes_without_ram(message):
            return True
        ring = self._ring
        if not ring or self.levels.count or self._pages is not None:
            return False
        return self._policy is None and any(c.can_receive() for c in ring)

    def _pageable(self) -> bool:
        return self._policy is None and self._ring_size <= 0 and not self.deleted

    def _paging_made(self) -> QueuePaging:
        if self._pages is None:
            host = self.host
            self._pages = QueuePaging(self.name, host.store if self._persist else None,
                                      host.spool, self.levels, self._paged_in)
        return self._pages

    def _page_out(self, ref: MessageRef, seq: int) -> bool:
        """Leave a new ready message on disk if its level already continues there, or if
        the RAM budget is spent and nobody is waiting for it. True if it was paged out."""
        paging = self._pages
        stored = seq > 0
        if paging is None or not paging.holds(ref.priority, stored):
            levels = self.levels
            size = ref.message.size
            if (levels.fits(size)
                    and levels.memory_usage + size + PAGE_OVERHEAD <= self.limits.page_limit):
                return False  # room in the broker's budget and in the queue's own
            if (self._ring and not self.levels.count) or not self._pageable():
                return False  # a consumer is waiting for it, or the queue never pages
            if not stored and self.settings.producer_flow_control:
                return False  # its producer waits for RAM instead (.producer_flow)
            paging = self._paging_made()
        paging.page_out(ref, seq)
        return True

    def _fill(self) -> None:
        """Top the levels up from disk, up to the queue's page limit in bytes; once
        nothing is left there, the plain paths. With no room left, one message still
        comes in when nothing is ready and a consumer can take it (a message bigger than
        the page limit is delivered alone, never held back for good)."""
        assert self._pages is not None
        ring = self._ring
        waiting = ring is not None and any(c.can_receive() for c in ring)
        if self._pages.fill(self.limits.page_limit - self.levels.memory_usage, waiting):
            self._pages = None

    def _paged_in(self, batch: list[Paged], every: bool = False) -> None:
        """Messages back from disk onto the tail of their levels (or scheduled, or expired,
        for rows recovered after a restart). ``every``: the queue stops paging and takes
        every message back: its policy learns of each, and a ring evicts none (a ring
        shrinks by consumption, seed 000)."""
        host = self.host
        now = host.now()
        plain = every or (self._ring_size <= 0 and self._policy is None)
        policy = self._policy if every else None
        ready: list[MessageRef] = []
        for message, count, level in batch:
            ref = MessageRef(message, level, count)
            if policy is not None:
                policy.accepted(ref)
            if message.expiration:
                if message.expiration <= now:
                    self.expire(ref)
                    continue
                host.schedule_timer(message.expiration, TIMER_EXPIRE, self, ref)
            if message.deliver_at and message.deliver_at > now:
                self.timers.hold(ref)
                continue
            if plain:  # _add_tail without a ring to evict from, counted in bulk
                ready.append(ref)
            else:
                self._add_tail(ref)
        if ready:
            self.levels.extend_tail(ready)

    def _dispatch_paged(self) -> None:
        """Dispatch in rounds: top the levels up, dispatch what RAM holds, until nobody can
        take more; then let selector consumers look into the paged part."""
        while self._ring and self._pages is not None:
            self._fill()
            if not self.ready_count:
                break
            mark = (self.ready_count, self.delivering_count, self.dequeued, self.expired_count)
            if self._filtered:
                self._dispatch_filtered()
            else:
                _twin.dispatch_fast(self)
            if mark == (self.ready_count, self.delivering_count, self.dequeued,
                        self.expired_count):
                break
        if self._pages is None:
            if self._ring and self.ready_count:  # the last batch came in: the plain path
                if self._filtered:
                    self._dispatch_filtered()
                else:
                    _twin.dispatch_fast(self)
            return
        if self._filtered:
            self._scan_pages()

    def _scan_pages(self) -> None:
        """Selector consumers that still have room look for matches in the paged part."""
        paging = self._pages
        while paging is not None and self._ring:
            if not paging.scan(list(self._ring)):
                return
            self._dispatch_filtered()
            paging = self._pages

    # ------------------------------------------------------------------ timers

    def release(self, refs: list[MessageRef]) -> None:
        """Scheduled messages are due (the broker collected them through ``timers.due``):
        onto the HEAD of the queue (as Artemis does), keeping their due order."""
        for ref in self.timers.take_due(refs):
            self.add_head(ref)
        self.dispatch()

    # ------------------------------------------------------------------ dispatch

    def dispatch(self) -> None:
        """Deliver while there are ready messages and consumers that may receive."""
        if self._dispatching or not self._ring or not (self.levels.count or self._pages):
            return
        self._dispatching = True
        try:
            if self._pages is not None:
                self._dispatch_paged()
            elif self._policy is not None:
                self._policy.dispatch()
            elif self._filtered:
                self._dispatch_filtered()
            else:
                self._dispatch_fast()
        finally:
            self._dispatching = False

    def _dispatch_fast(self) -> None:
        """Round-robin one message per consumer turn; a consumer alone in the ring gets a
        run of messages handed to its host in one call. The loop is ``queue_run``'s
        ``dispatch_fast`` (compiled twin; the pure one is queue_run.py beside this file)."""
        _twin.dispatch_fast(self)

    #: a run to a host without ``deliver_many`` (:func:`~.queue_deliveries.hand_over`),
    #: as ``queue_run``'s loop (both twins) calls it
    _hand_over = staticmethod(hand_over)

    def _dispatch_filtered(self) -> None:
        """With selectors (:func:`~.queue_deliveries.dispatch_filtered`)."""
        assert self._ring is not None
        dispatch_filtered(self, self._ring, self.host.now())

    # ------------------------------------------------------------------ outcomes

    def acknowledge(self, c: ServerConsumer, tag: int) -> None:
        """The delivery ``tag`` of ``c`` is consumed (``QueueDeliveries``). Caller
        dispatches afterwards."""
        self.deliveries.acknowledge(c, tag)

    def cancel(self, c: ServerConsumer, tag: int, redelivered: bool) -> None:
        """Return one delivery to the head of its level (``QueueDeliveries``); in
        descending tag order for several. Caller dispatches."""
        self.deliveries.cancel(c, tag, redelivered)

    def reject(self, c: ServerConsumer, tag: int, reason: str) -> None:
        """Dead-letter one delivery its consumer refused (``QueueDeliveries``). Caller
        dispatches."""
        self.deliveries.reject(c, tag, reason)

    # ------------------------------------------------------------------ removal paths

    def expire(self, ref: MessageRef) -> None:
        """``ref``, no longer ready or in delivery, expired (``QueueRemovals.expire``)."""
        self.removals.expire(ref, self._policy)

    def delete(self) -> None:
        """Drop everything (temp queue closed, subscription deleted). Deliveries still out
        are acknowledged or cancelled later into the void."""
        self.deleted = True
        self.levels.clear()
        if self._pages is not None:
            self._pages.drop()
            self._pages = None
        if self._timers is not None:
            self._timers.clear()
        if self._ring is not None:
            self._ring.clear()
        if self._persist:
            store = self.host.store
            assert store is not None
            store.delete_queue(self.name)

    # ------------------------------------------------------------------ browse

    def browse(self, flt: Filter | None) -> list[ServerMessage]:
        """What a browser with selector ``flt`` sees now (:mod:`.queue_browse`)."""
        now = self.host.now()
        # TargetQueueDepth: only the active (oldest unacknowledged) messages are visible
        active = -1 if self._policy is None else self._policy.active_budget()
        return browse(self.levels, self._pages, active, flt, now)
