"""The broker: connections, timers, persistence wiring; destinations through its post office.

Where messages go (queues, topics, subscriptions, routing) is :class:`~.postoffice.PostOffice`'s,
which connections use; the broker keeps who is connected, the clock and timers, and is the
queues' host (dead-letter and expiry routing, the store).

Sans-I/O and single-threaded by design: a host (the ``vm://`` transport, the STOMP
server) serialises every call into one ``Broker`` — with one lock, or by calling only
from its event loop — and calls :meth:`Broker.process_timers` when
:meth:`Broker.next_deadline` is due. Nothing here blocks, sleeps or reads a wall clock
other than the injected ``clock``; that is what makes the core testable with a fake clock
and reusable under any I/O model.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import os
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from ..store.spool import Spool
from ..store.store import Store
from .api import (
    DEAD_LETTER_REASON,
    ORIGINAL_DESTINATION,
    AddressSettings,
    DestinationKind,
    DestinationStats,
    ServerMessage,
    SessionCallback,
)
from .connection import ServerConnection
from .consumer import PageBudget
from .errors import (
    DestinationNotFound,
    IllegalBrokerState,
    InvalidClientId,
)
from .leases import ReadingLeases
from .listener_stats import ListenerStats
from .postoffice import PostOffice
from .producer_flow import ProducerFlow
from .queue import EXPIRED_REASON, MessageRef, Queue
from .queue_limits import DEFAULT_DESTINATION_MEMORY_PERCENT, page_limit_of
from .settings import SettingsRegistry

if TYPE_CHECKING:
    from .security import Principal, SecurityPolicy

__all__ = ["Broker", "ServerConnection"]


#: Default ``max_destination_length`` in bytes (the STOMP ``[limits]`` key
#: ``max-destination-length``): long enough for any real naming scheme, short enough that
#: a hostile name cannot make routing or settings lookups expensive.
DEFAULT_MAX_DESTINATION_LENGTH = 1024
#: Default ``memory_limit`` (``[system-usage] memory-limit``): ActiveMQ's 64 MB.
DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024
#: Default ``store_limit`` (``[system-usage] store-limit``): ActiveMQ's 100 GB.
DEFAULT_STORE_LIMIT = 100 * 1024**3
#: Default ``temp_limit`` (``[system-usage] temp-limit``): ActiveMQ's 10 GB.
DEFAULT_TEMP_LIMIT = 10 * 1024**3
#: Persistent sends between two looks at the store's size on disk.
_STORE_CHECK_EVERY = 256



_last_ms = 0


def _wall_clock_ms() -> int:
    """Milliseconds since the epoch. Reads within one millisecond return the same int
    object: every message keeps its send time, and an int past 256 is a 32-byte object
    of its own, so a burst of sends shares one instead of holding one each (issue 17).
    Threads racing here at worst return equal ints that are not the same object."""
    global _last_ms
    ms = int(time.time() * 1000)
    if ms == _last_ms:
        return _last_ms
    _last_ms = ms
    return ms


class Broker:
    """An in-memory broker core. See the module docstring for the threading contract."""

    def __init__(
        self,
        *,
        settings: Mapping[str, AddressSettings] | None = None,
        default_settings: AddressSettings | None = None,
        store: Store | None = None,
        clock: Callable[[], int] | None = None,
        name: str = "embedded",
        security: SecurityPolicy | None = None,
        max_destination_length: int = DEFAULT_MAX_DESTINATION_LENGTH,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        store_limit: int = DEFAULT_STORE_LIMIT,
        spool_dir: str | os.PathLike[str] | None = None,
        temp_limit: int = DEFAULT_TEMP_LIMIT,
        send_fail_if_no_space: bool = False,
        send_fail_if_no_space_after_timeout: int = 0,
        destination_memory_percent: int = DEFAULT_DESTINATION_MEMORY_PERCENT,
    ) -> None:
        if type(max_destination_length) is not int or max_destination_length < 1:
            raise ValueError(
                f"max_destination_length must be an int >= 1 (bytes), got "
                f"{max_destination_length!r}"
            )
        if type(memory_limit) is not int or memory_limit < 0:
            raise ValueError(f"memory_limit must be an int >= 0 (bytes), got {memory_limit!r}")
        share = destination_memory_percent
        if type(share) is not int or not 1 <= share <= 100:
            raise ValueError("destination_memory_percent must be an int from 1 to 100 (% of "
                             f"memory_limit each destination may hold), got {share!r}")
        if type(store_limit) is not int or store_limit < 1:
            raise ValueError(f"store_limit must be an int >= 1 (bytes), got {store_limit!r}")
        if type(temp_limit) is not int or temp_limit < 1:
            raise ValueError(f"temp_limit must be an int >= 1 (bytes), got {temp_limit!r}")
        if type(send_fail_if_no_space) is not bool:
            raise ValueError("send_fail_if_no_space must be True or False, got "
                             f"{send_fail_if_no_space!r}")
        after = send_fail_if_no_space_after_timeout
        if type(after) is not int or after < 0:
            raise ValueError("send_fail_if_no_space_after_timeout must be an int >= 0 (ms, "
                             f"0 = wait as long as it takes), got {after!r}")
        self.name = name
        #: this run of the broker, in the message ids it makes: connection ids and
        #: sequence numbers start again at a restart, and a store holds messages of
        #: earlier runs whose ids must not be reused (ActiveMQ puts its start time there)
        self.run_id = uuid.uuid4().hex[:8]
        #: longest destination (or subscription) name accepted, in UTF-8 bytes: routing
        #: and settings lookups cost time per word, so a name's size is bounded
        self.max_destination_length = max_destination_length
        #: users and permissions (see .security); None or disabled = no checks at all
        self.security = security
        self.store = store
        #: RAM for ready messages, shared by every queue; past it backlogs page out to
        #: the store or to ``spool`` (seed 002, :mod:`.paging`)
        self.memory_limit = memory_limit
        self.budget = PageBudget(page_limit_of(memory_limit))
        #: the memory limit of a destination whose address settings set none: its
        #: default share of ``memory_limit`` (ActiveMQ's per-destination memoryUsage),
        #: so that one destination's backlog stops only its own producers
        self.destination_memory_percent = share
        self.destination_memory_limit = -(-memory_limit * share // 100)  # ten of 10 %: all
        self.spool = Spool(spool_dir)
        #: persistent sends are refused while the store takes this much disk or more
        self.store_limit = store_limit
        self._store_checks = 0
        self._store_full = False
        self._clock = clock or _wall_clock_ms
        self._settings = SettingsRegistry(default_settings or AddressSettings(), settings)
        #: sends waiting for memory, store or temp space (seed 003, .producer_flow)
        self.flow: ProducerFlow = ProducerFlow(self, temp_limit=temp_limit,
                                               fail_if_no_space=send_fail_if_no_space,
                                               fail_after_ms=after)
        self._limits_changed()
        #: Where messages go: queues, topics and subscriptions, and routing between them.
        self.post_office: PostOffice = PostOffice(self, self._settings, store,
                                                  max_destination_length)
        #: The queues by name, read-only (the post office's).
        self.queues: Mapping[str, Queue] = self.post_office.queues
        self._connections: dict[int, ServerConnection] = {}
        self._client_ids: dict[str, int] = {}
        self._conn_ids = itertools.count(1)
        self._timers: list[tuple[int, int, int, Queue, MessageRef]] = []
        self._timer_seq = itertools.count()
        #: queues whose dispatch waits for :meth:`dispatch_deferred` (None: not deferring)
        self.deferred_dispatch: list[Queue] | None = None
        self.closed = False
        #: what the protocol hosts refused or closed, and the frame bytes being read
        self.listeners = ListenerStats()
        #: deliveries lent to reading-lease tokens (.leases): settled by any connection
        self.leases = ReadingLeases()
        if store is not None:
            self.post_office.recover(store)

    # ------------------------------------------------------------------ deferred dispatch

    def defer_dispatch(self) -> bool:
        """Until :meth:`dispatch_deferred`, a message sent to a queue waits in it, ready,
        instead of being delivered during the send: the queue is remembered and
        dispatched then, in the order queues were first sent to.

        Why: a protocol server that reads a SEND with a receipt would otherwise do the
        whole delivery (picking the consumer, encoding its MESSAGE) before it can write
        the RECEIPT, and a producer that waits for each RECEIPT waits for that too. With
        the dispatch after the write, the producer's next SEND is on its way while the
        broker delivers, and the deliveries of one read go out as one run. Nothing else
        changes: the message is stored and counted by the send, the consumer gets it
        from the same dispatch, in the same order, moments later.

        Ring queues (seed 000) and queues with an AMPS policy (seed 001) still dispatch
        during the send, so what they evict, lease or refuse stays exactly as before.
        Returns False (and changes nothing) if dispatch is already deferred: the caller
        that deferred it first dispatches."""
        if self.deferred_dispatch is not None:
            return False
        self.deferred_dispatch = []
        return True

    def defer(self, queue: Queue) -> None:
        """``queue`` got a message while dispatch is deferred: dispatch it later, once,
        in the order queues were first sent to (consecutive sends to one queue are
        remembered once)."""
        pending = self.deferred_dispatch
        assert pending is not None  # only while defer_dispatch() is in force
        if not pending or pending[-1] is not queue:
            pending.append(queue)

    def dispatch_deferred(self) -> None:
        """Dispatch every queue a send reached since :meth:`defer_dispatch`, and defer no
        more."""
        queues, self.deferred_dispatch = self.deferred_dispatch, None
        for queue in queues or ():
            if not queue.deleted:
                queue.dispatch()

    # ------------------------------------------------------------------ QueueHost

    def now(self) -> int:
        return self._clock()

    def schedule_timer(self, due: int, kind: int, queue: Queue, ref: MessageRef) -> None:
        heapq.heappush(self._timers, (due, next(self._timer_seq), kind, queue, ref))

    def divert(
        self, source: Queue, message: ServerMessage, address: str | None, reason: str
    ) -> None:
        """Dead-letter/expiry routing. The target queue is created even when auto-create
        is off: losing a message because its DLQ was not pre-declared would be worse."""
        if address is None or address == source.name:
            return
        props = dict(message.properties)
        props[DEAD_LETTER_REASON] = reason
        props.setdefault(ORIGINAL_DESTINATION, message.destination)
        copy = dataclasses.replace(
            message,
            properties=props,
            kind=DestinationKind.QUEUE,
            destination=address,
            deliver_at=0,
            # an expired copy must not expire again on arrival (Artemis clears it too)
            expiration=0 if reason == EXPIRED_REASON else message.expiration,
        )
        target = self.queues.get(address)
        if target is None:
            target = self.post_office.new_queue(address)
        target.enqueue(copy)

    # ------------------------------------------------------------------ public API

    def connect(
        self,
        callback: SessionCallback,
        *,
        client_id: str | None = None,
        user: str | None = None,
        password: str | None = None,
        principal: Principal | None = None,
        flow_limit: int | None = None,
    ) -> ServerConnection:
        """Open a connection. With a security policy the credentials are checked first
        (:class:`~.errors.AuthenticationFailed`), before anything reveals broker state.

        ``principal``: the host already authenticated ``user`` (with
        ``security.authenticate``, off its event loop: hashing is slow) and passes the
        result instead of the password. ``flow_limit``: Open MQ's connection flow limit,
        the most messages delivered and not yet released (``release_flow``) at a time."""
        self.check_open()
        if principal is None and self.security:
            principal = self.security.authenticate(user, password)
        if client_id is not None and client_id in self._client_ids:
            raise InvalidClientId(
                f"client id {client_id!r} is already in use by another connection; close "
                "that connection first or choose a different client id"
            )
        conn = ServerConnection(
            self, next(self._conn_ids), callback, client_id, user, principal=principal,
            flow_limit=flow_limit,
        )
        self._connections[conn.connection_id] = conn
        if client_id is not None:
            self._client_ids[client_id] = conn.connection_id
        return conn

    def stats(self, name: str, kind: DestinationKind = DestinationKind.QUEUE) -> DestinationStats:
        """Counters of a queue (or a subscription's queue, by its name) or a topic."""
        po = self.post_office
        if kind is DestinationKind.TOPIC:
            topic = po.topics.get(name)
            if topic is None:
                raise DestinationNotFound(f"no topic named {name!r}; see topic_names()")
            return self._stored(self._flow_stats(topic.stats()), topic.subscriptions)
        q = self.queues.get(name)
        if q is None:
            sub = po.subscription_of_queue(name)
            if sub is None:
                raise DestinationNotFound(f"no queue named {name!r}; see queue_names()")
            q = sub.queue
        return self._stored(self._flow_stats(q.stats()), (q.name,))

    def all_stats(self) -> list[DestinationStats]:
        queues, topics = self.queues, self.post_office.topics
        counts = self.store.stored_counts() if self.store is not None else {}
        out = [self._stored(self._flow_stats(queues[n].stats()), (n,), counts)
               for n in sorted(queues)]
        out.extend(self._stored(self._flow_stats(topics[n].stats()), topics[n].subscriptions,
                                counts) for n in sorted(topics))
        return out

    def _flow_stats(self, stats: DestinationStats) -> DestinationStats:
        dropped = self.post_office.duplicates.dropped
        if dropped:
            stats.duplicates_dropped = dropped.get(stats.name, 0)
        if self.flow.parked:
            stats.blocked_producers = self.flow.blocked_producers(stats.kind, stats.name)
        return stats

    def usage(self) -> dict[str, int | str | None]:
        """Broker-wide resources (``jmspy stat``'s first line): where the store is and what
        it takes on disk, what the spool holds (temp), the RAM pending messages take (of
        the paging budget and of ``memory-limit``), how many producers wait, and what the
        listeners refused or closed (:mod:`.listener_stats`)."""
        store = self.store
        flow = self.flow
        return {
            "store": None if store is None else store.location,
            "storeBytes": 0 if store is None else store.size_bytes(),
            "storeLimit": self.store_limit,
            "spoolBytes": self.spool.size_bytes(),
            "tempUsed": self.spool.used,
            "tempLimit": flow.temp_limit,
            "memoryUsed": self.budget.used,
            "memoryBudget": self.budget.limit,
            "memoryLimit": self.memory_limit,
            "memoryPercentUsage": self.budget.used * 100 // max(1, self.memory_limit),
            # what memory-limit acts on: each destination counted up to its own limit
            "memoryCounted": flow.counted_memory(),
            "destinationMemoryLimit": self.destination_memory_limit,
            "blockedProducers": flow.blocked_total(),
            **self.listeners.as_usage(),
            **({} if store is None else store.health()),
        }

    def _stored(self, stats: DestinationStats, queue_names: Collection[str],
                counts: Mapping[str, int] | None = None) -> DestinationStats:
        """``stats`` with what the store holds for those queues (a topic: its
        subscriptions' queues); ``counts``: every queue's, when all stats are wanted."""
        if self.store is not None:
            if counts is None:
                counts = self.store.stored_counts(queue_names)
            stats.stored_count = sum(counts.get(n, 0) for n in queue_names)
        return stats

    def queue_names(self) -> list[str]:
        return sorted(self.queues)

    def topic_names(self) -> list[str]:
        return sorted(self.post_office.topics)

    def subscription_names(self) -> list[str]:
        """Internal queue names of every topic subscription (durable or not)."""
        topics = self.post_office.topics
        return sorted(name for topic in topics.values() for name in topic.subscriptions)

    def create_queue(self, name: str, *, ring_size: int | None = None) -> None:
        """Create queue ``name`` now (even with auto-create off), optionally with its own
        ``ring_size`` (seed 000: a per-queue value beats ``default_ring_size``). An
        existing queue only gets the ring size."""
        q = self.queues.get(name) or self.post_office.new_queue(name)
        if ring_size is not None:
            q.set_ring_size(ring_size)

    def set_ring_size(self, name: str, ring_size: int | None) -> None:
        """Change a queue's ring size at run time (None: back to its settings). Lowering
        it deletes nothing now; sends evict one for one until consumption shrinks it."""
        q = self.queues.get(name)
        if q is None:
            raise DestinationNotFound(f"no queue named {name!r}; see queue_names()")
        q.set_ring_size(ring_size)

    def settings_for(self, name: str) -> AddressSettings:
        return self._settings.match(name)

    def set_settings(self, pattern: str, settings: AddressSettings) -> None:
        """Change settings at run time; existing destinations pick the change up now."""
        self._settings.set(pattern, settings)
        for q in list(self.queues.values()):
            q.apply_settings(self._settings.match(q.address))
        for t in list(self.post_office.topics.values()):
            t.apply_settings(self._settings.match(t.name))
        self._limits_changed()
        self.flow.resume()

    def _limits_changed(self) -> None:
        registry = self._settings
        self.flow.destination_limits = any(
            s.memory_limit is not None for s in (registry.default, *registry.patterns().values()))

    def process_timers(self) -> None:
        """Expire and release scheduled messages that are due by the clock, and give
        back the deliveries of reading leases that ran out."""
        now = self._clock()
        heap = self._timers
        due: dict[Queue, list[MessageRef]] = {}
        while heap and heap[0][0] <= now:
            _, _, kind, queue, ref = heapq.heappop(heap)
            if queue.timers.due(kind, ref):
                due.setdefault(queue, []).append(ref)
        for queue, refs in due.items():
            queue.release(refs)
        for lent_from in self.leases.expire(now):
            if not lent_from.deleted:
                lent_from.dispatch()
        flow = self.flow
        if flow.parked:
            flow.expire(now)
            flow.resume()  # expiries free memory too

    def next_deadline(self) -> int | None:
        """Clock time (ms) at which ``process_timers`` next has work, or None."""
        heap = self._timers
        while heap and not heap[0][3].timers.is_live(heap[0][2], heap[0][4]):
            heapq.heappop(heap)
        due = heap[0][0] if heap else None
        lease = self.leases.next_deadline()
        if lease is not None and (due is None or lease < due):
            due = lease
        if self.flow.parked:
            parked = self.flow.next_deadline()
            if parked is not None and (due is None or parked < due):
                due = parked
        return due

    def close(self) -> None:
        """Close every connection (telling hosts their consumers are gone) and the store."""
        if self.closed:
            return
        for conn in list(self._connections.values()):
            for cid in conn.consumer_ids():
                conn.callback.consumer_closed(cid, f"broker {self.name!r} is shutting down")
            conn.close()
        self.closed = True
        self._timers.clear()
        try:
            if self.store is not None:
                self.store.close()
        finally:
            self.spool.close()

    # ------------------------------------------------------------------ for connections

    def store_is_full(self) -> bool:
        """Whether the store is at ``store-limit`` (persistent sends then wait, or fail
        with ``send-fail-if-no-space``). The size on disk is looked at every few hundred
        sends, and at every one once the limit was reached, so space freed by consumers
        is seen at once."""
        store = self.store
        if store is None:
            return False
        self._store_checks -= 1
        if self._store_checks > 0 and not self._store_full:
            return False
        self._store_checks = _STORE_CHECK_EVERY
        self._store_full = store.size_bytes() >= self.store_limit
        return self._store_full

    def check_open(self) -> None:
        if self.closed:
            raise IllegalBrokerState(
                f"broker {self.name!r} is closed; create a new Broker to continue"
            )

    def connections(self) -> list[ServerConnection]:
        """The open connections, oldest first (the management API lists them)."""
        return list(self._connections.values())

    def disconnected(self, conn: ServerConnection) -> None:
        """``conn`` closed: forget it and free its client id."""
        self._connections.pop(conn.connection_id, None)
        client_id = conn.client_id
        if client_id is not None and self._client_ids.get(client_id) == conn.connection_id:
            del self._client_ids[client_id]
