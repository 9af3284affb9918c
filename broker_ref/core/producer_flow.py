"""Producer flow control (seed 003): when memory, store or temp space is full, the
producer waits, not the broker.

What "full" means, per send (:meth:`ProducerFlow.blocker`), each named the way a user
configures it:

* a destination's memory limit: the RAM its pending messages take (a topic: all its
  subscriptions') has reached it. Every destination has one (ActiveMQ's per-destination
  ``memoryUsage``): its address settings' ``memory-limit``, else its default share,
  ``destination-memory-percent`` of the broker's (:mod:`.queue_limits`). So memory
  pressure from one destination (a topic subscriber that never reads, a queue nobody
  consumes) holds that destination's producers only;
* ``[system-usage] memory-limit``: the shares together cannot hold. The RAM pending
  messages take counts each destination up to its own limit (what one destination holds
  past it -- a message bigger than its limit, paged back in -- is held against its own
  producers, not everyone's), and that sum has reached the broker's limit;
* ``store-limit``: a persistent message, and the store is that big on disk;
* ``temp-limit``: a message that may have to be spooled, and the spool holds that much.

A persistent message for a durable queue never waits for memory: it pages to the store
(seed 002) and waits only for ``store-limit`` -- also when the queue does not exist yet
(the send creates it). Nor does a send that costs no pending RAM: to a topic nobody
subscribes to (it is dropped), or to a queue whose consumer is waiting with nothing
ready (it is delivered at once). A destination with ``producer-flow-control = false``
never waits for memory either: its backlog spools to temp files (the seed's
slow-consumer case) and waits only for ``temp-limit``. In-flight messages (delivered, not
yet acknowledged) are not pending: consumers' prefetch bounds them, as in the seed ("the
messages start to back up on the broker").

A send that finds its destination full is *parked* here, not stored: the host keeps the
producer waiting (over STOMP the RECEIPT is withheld; over ``vm://`` ``send()`` blocks)
and hears :meth:`~.api.SessionCallback.send_done` once the send went through, or failed.
A connection's later sends and commits park behind its first (one producer's order is
kept); its acks, consumers and credit never wait, so a connection that consumes what it
produces cannot deadlock. After every core call that can free space the broker calls
:meth:`ProducerFlow.resume`, which retries each waiting connection's first send in turn.

``send-fail-if-no-space``: the send fails at once with
:class:`~.errors.ResourceLimitExceeded` instead of parking;
``send-fail-if-no-space-after-timeout`` (ms) and a host's per-send timeout (the jmspy
client's ``sendTimeout``) fail it once it has waited that long. A failed send was never
stored: the producer may send it again.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .api import AddressSettings, DestinationKind, ServerMessage
from .consumer import FlowRecord
from .errors import BrokerError, IllegalBrokerState, ResourceLimitExceeded
from .queue_limits import pages_by_settings

if TYPE_CHECKING:
    from ..store.spool import Spool
    from ..store.store import Store
    from .api import SessionCallback
    from .postoffice import PostOffice
    from .queue import Queue
    from .records import PageBudget

__all__ = ["LOG_EVERY_MS", "ORPHAN_BYTES_LIMIT", "FlowBroker", "FlowConnection", "Full",
           "ProducerFlow", "format_size"]

class FlowBroker(Protocol):
    """What producer flow reads of its broker (:class:`~.broker.Broker`): a Protocol, so
    that this module sits below the broker and the connections it holds back."""

    @property
    def memory_limit(self) -> int: ...
    @property
    def destination_memory_limit(self) -> int: ...
    @property
    def destination_memory_percent(self) -> int: ...
    @property
    def budget(self) -> PageBudget: ...
    @property
    def spool(self) -> Spool: ...
    @property
    def store(self) -> Store | None: ...
    @property
    def store_limit(self) -> int: ...
    @property
    def post_office(self) -> PostOffice: ...

    def now(self) -> int: ...
    def store_is_full(self) -> bool: ...
    def settings_for(self, name: str) -> AddressSettings: ...


class FlowConnection(Protocol):
    """What producer flow reads and calls of a sending connection
    (:class:`~.connection.ServerConnection`)."""

    @property
    def connection_id(self) -> int: ...
    @property
    def callback(self) -> SessionCallback: ...

    def route_admitted(self, message: ServerMessage) -> None: ...
    def commit_admitted(self, tx: str) -> None: ...
    def transaction_sends(self, tx: str | None) -> list[ServerMessage]: ...


log = logging.getLogger("jmspy.broker.flow")

#: A destination's "stopping producer" line is logged at most once per this many ms.
LOG_EVERY_MS = 30_000

#: Parked sends of connections that have closed (their clients wrote them and left:
#: :meth:`ProducerFlow.forget`) the broker keeps, in bytes, all together at most; eight
#: connections' worth of the STOMP host's read bound (``HELD_BYTES_READ_LIMIT``, 8 MB).
ORPHAN_BYTES_LIMIT = 64 * 1024 * 1024


def format_size(n: int) -> str:
    """``n`` bytes as the configuration writes sizes (units of 1024): "6.4 MB"."""
    for unit, size in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}".replace(".0 ", " ")
    return f"{n:,} bytes"


@dataclass(frozen=True, slots=True)
class Full:
    """Why a send must wait: which limit, of what, and how far it is used."""

    #: what is full: "queue 'orders'", "topic 'prices'" (a destination's own limit),
    #: "the broker's memory", "the store /path", "the temp spool" ([system-usage] limits)
    scope: str
    #: the configuration key: "memory-limit", "store-limit", "temp-limit"
    key: str
    used: int
    limit: int
    #: the destination the send was for ("queue 'orders'")
    destination: str
    #: where the limit comes from, in the configuration's words (a destination's: its
    #: address settings, or its share of the broker's memory-limit)
    source: str = ""
    #: the broker's memory: the destinations holding most of it
    holders: str = ""
    #: the send waits behind an earlier send of its connection (to ``destination``'s
    #: producer, the limit is that send's)
    behind: bool = False

    def __str__(self) -> str:
        if self.scope.startswith(("queue ", "topic ")):
            text = (f"{self.scope} is over its memory limit of {format_size(self.limit)} "
                    f"({self.source}): its pending messages take {format_size(self.used)} "
                    f"({self.used:,} of {self.limit:,} bytes)")
        elif self.key == "memory-limit":
            text = (f"the broker's memory-limit of {format_size(self.limit)} is reached "
                    f"({self.source}): pending messages take {format_size(self.used)} "
                    f"({self.used:,} of {self.limit:,} bytes, each destination counted up "
                    f"to its own limit)" + (f"; most of it: {self.holders}" if self.holders
                                            else ""))
        else:
            text = (f"{self.scope} uses {self.used:,} of {self.limit:,} bytes "
                    f"([system-usage] {self.key})")
        if self.behind:
            return (f"the send to {self.destination} waits behind an earlier send of its "
                    f"connection (one producer's order is kept), held because {text}")
        if self.key != "memory-limit":
            return f"{self.key} reached for {self.destination}: {text}"
        if self.scope != self.destination:
            return f"{self.key}: a send to {self.destination} is held because {text}"
        return f"{self.key}: {text}"

    @property
    def remedy(self) -> str:
        """What frees this limit, for the end of an error message."""
        if self.scope.startswith(("queue ", "topic ")):
            return f"consume from {self.scope}, or raise its memory-limit"
        if self.key == "memory-limit":
            return ("consume from the destinations holding it, or raise the [system-usage] "
                    "memory-limit")
        return f"consume from it, or raise the [system-usage] {self.key}"

    def queued_behind(self, destination: str) -> Full:
        """This limit, as the reason of a later send of the same connection (to
        ``destination``) that waits behind the one it holds."""
        if destination == self.destination and not self.behind:
            return self
        return Full(self.scope, self.key, self.used, self.limit, destination, self.source,
                    self.holders, True)


def _named(kind: DestinationKind, name: str) -> str:
    return f"{kind.value} {name!r}"


@dataclass(slots=True, eq=False)
class _Parked:
    """A send (``message``) or a commit (``message`` None, transaction ``tx``) waiting."""

    conn: FlowConnection
    ticket: object
    message: ServerMessage | None
    tx: str | None
    since: int
    #: clock time (ms) at which it fails; 0 = it waits as long as it takes
    deadline: int
    reason: Full
    #: its connection has closed since (:meth:`ProducerFlow.forget`): kept, counted in
    #: ``_orphan_bytes``, and routed when there is room all the same
    orphan: bool = False


class ProducerFlow(FlowRecord):
    """The parked sends of one broker and the limits they wait for (module docstring).

    ``messages_of``: the messages a connection's transaction would route at commit."""

    # the fields every send reads are the FlowRecord's (.records)
    __slots__ = ("_broker", "_counted", "_log_state", "_logged", "_orphan_bytes", "_resuming",
                 "fail_after_ms", "fail_if_no_space")

    def __init__(self, broker: FlowBroker, *, temp_limit: int, fail_if_no_space: bool,
                 fail_after_ms: int) -> None:
        self._broker = broker
        # what the common-case check of every send reads, bound once
        self._budget = broker.budget
        # below this much pending RAM no destination can be at its limit (every default
        # share is at most the broker's limit; own limits set ``destination_limits``)
        self._memory_limit = min(broker.memory_limit, broker.destination_memory_limit)
        self._spool = broker.spool
        self._stored = broker.store is not None
        self.temp_limit = temp_limit
        #: ``send-fail-if-no-space``: refuse at once instead of parking
        self.fail_if_no_space = fail_if_no_space
        #: ``send-fail-if-no-space-after-timeout`` (ms, 0 = wait as long as it takes)
        self.fail_after_ms = fail_after_ms
        #: connection id -> its parked sends, oldest first; connections in the order
        #: they started waiting (dicts keep insertion order)
        self._waiting: dict[int, deque[_Parked]] = {}
        #: whether any address setting has a ``memory-limit`` (else sends skip the
        #: per-destination look while the broker has room); the broker keeps it current
        self.destination_limits = False
        self._resuming = False
        #: (budget used, pending RAM counted against memory-limit) last computed
        self._counted: tuple[int, int] | None = None
        #: connection id -> (first park time, the limit it first waited for), for the log
        self._log_state: dict[int, tuple[int, Full]] = {}
        #: destination -> when its stop was last logged: a producer stopped and resumed
        #: many times a second is logged once per LOG_EVERY_MS (ActiveMQ: every 30 s)
        self._logged: dict[str, int] = {}
        #: the bytes of the orphaned sends parked (bounded by ORPHAN_BYTES_LIMIT)
        self._orphan_bytes = 0

    # ------------------------------------------------------------------ what is full

    def blocker(self, message: ServerMessage) -> Full | None:
        """The limit ``message`` would have to wait for now, or None."""
        broker = self._broker
        spool = broker.spool
        temp_full = spool.used >= self.temp_limit
        persistent = message.persistent and broker.store is not None
        if persistent and broker.store_is_full():
            store = broker.store
            assert store is not None
            return Full(f"the store {store.location}", "store-limit", store.size_bytes(),
                        broker.store_limit,
                        _named(message.kind, message.destination))
        if not (broker.budget.used >= self._memory_limit or temp_full
                or self.destination_limits):
            return None  # the common case: no destination can be at its limit yet
        post = broker.post_office
        name = message.destination
        queues: list[Queue]
        if message.kind is DestinationKind.QUEUE:
            q = post.queues.get(name)
            if q is None:
                settings = broker.settings_for(name)
                if persistent and pages_by_settings(settings):
                    return None  # the send makes a durable queue that pages: stored
                queues, usage = [], 0
                limit, own = self._limit_of(settings)
            else:
                settings = q.settings
                queues, usage = [q], q.memory_usage
                limit, own = q.memory_limit, q.limits.memory_limit_set
        else:
            topic = post.topics.get(name)
            settings = topic.settings if topic is not None else broker.settings_for(name)
            queues = post.subscription_queues(name)
            if not queues:
                return None  # nobody subscribes: the message is dropped, it costs nothing
            usage = sum(q.memory_usage for q in queues)
            limit, own = self._limit_of(settings)
        if not settings.producer_flow_control:
            if temp_full and not (persistent and all(q.takes_without_ram(message)
                                                     for q in queues)):
                return Full("the temp spool", "temp-limit", spool.used, self.temp_limit,
                            _named(message.kind, name))
            return None
        if queues and all(q.costs_no_ram(message) for q in queues):
            return None  # pages to the store, or goes straight to a waiting consumer
        if usage >= limit:
            return Full(_named(message.kind, name), "memory-limit", usage, limit,
                        _named(message.kind, name), self._source(own))
        if broker.budget.used >= broker.memory_limit:
            counted = self._counted_memory()
            if counted >= broker.memory_limit:
                return Full("the broker's memory", "memory-limit", counted,
                            broker.memory_limit, _named(message.kind, name),
                            "[system-usage] memory-limit", self._holders())
        return None

    def _limit_of(self, settings: AddressSettings) -> tuple[int, bool]:
        """A destination's memory limit by its settings, and whether they set it."""
        own = settings.memory_limit
        if own is None:
            return self._broker.destination_memory_limit, False
        return own, True

    def _source(self, own: bool) -> str:
        """Where a destination's memory limit comes from, for the messages."""
        if own:
            return "memory-limit in its [address-settings]"
        broker = self._broker
        return (f"its default share: destination-memory-percent = "
                f"{broker.destination_memory_percent} % of the [system-usage] memory-limit "
                f"of {format_size(broker.memory_limit)}; set memory-limit in its "
                "[address-settings] to give it more")

    def _usages(self) -> list[tuple[str, int, int]]:
        """Every destination's pending RAM and memory limit: ``(name, used, limit)``."""
        broker = self._broker
        post = broker.post_office
        out = [(_named(q.kind, q.name), q.memory_usage, q.memory_limit)
               for q in post.queues.values()]
        for topic in post.topics.values():
            if topic.subscriptions:
                out.append((_named(DestinationKind.TOPIC, topic.name),
                            sum(s.queue.memory_usage for s in topic.subscriptions.values()),
                            self._limit_of(topic.settings)[0]))
        return out

    def counted_memory(self) -> int:
        """What :meth:`_counted_memory` says, for the stats (``memoryCounted``)."""
        return self._counted_memory()

    def _counted_memory(self) -> int:
        """The pending RAM the broker's memory-limit is compared with: each
        destination's up to its own limit (what one holds past it holds back only its
        own producers). A walk over the destinations, made only once the broker's
        budget is at the limit, and kept while the budget does not change (a round of
        :meth:`resume` asks it once per waiting connection)."""
        used = self._broker.budget.used
        cached = self._counted
        if cached is not None and cached[0] == used:
            return cached[1]
        counted = sum(min(u, limit) for _, u, limit in self._usages())
        self._counted = (used, counted)
        return counted

    def _holders(self) -> str:
        """The destinations holding most of the broker's memory, for the messages."""
        top = sorted((u for u in self._usages() if u[1] > 0), key=lambda u: -u[1])[:3]
        return ", ".join(f"{name} {format_size(used)} (limit {format_size(limit)})"
                         for name, used, limit in top)

    def _blocker_of_all(self, messages: Iterable[ServerMessage]) -> Full | None:
        seen: set[tuple[DestinationKind, str, bool]] = set()
        for m in messages:
            key = (m.kind, m.destination, m.persistent)
            if key not in seen:
                seen.add(key)
                full = self.blocker(m)
                if full is not None:
                    return full
        return None

    # ------------------------------------------------------------------ admission

    def waiting(self, conn: FlowConnection) -> int:
        """How many sends and commits of ``conn`` are parked."""
        items = self._waiting.get(conn.connection_id)
        return 0 if items is None else len(items)

    @property
    def parked(self) -> bool:
        """True while any send waits (the broker then calls :meth:`resume`)."""
        return bool(self._waiting)

    def must_wait(self, conn: FlowConnection, message: ServerMessage) -> Full | None:
        """What a send of ``message`` on ``conn`` waits for: the limit it would exceed,
        or, while ``conn`` has parked sends, theirs (one producer's order); None: go."""
        if self._waiting:
            items = self._waiting.get(conn.connection_id)
            if items is not None:
                return items[0].reason.queued_behind(_named(message.kind,
                                                            message.destination))
        elif self.free_for(message):
            return None  # the common case (FlowRecord.free_for, a C call when compiled)
        return self.blocker(message)

    def must_wait_commit(self, conn: FlowConnection,
                         messages: list[ServerMessage]) -> Full | None:
        """:meth:`must_wait` for a transaction's sends, committed as one."""
        items = self._waiting.get(conn.connection_id)
        return self._blocker_of_all(messages) if items is None else items[0].reason

    def park(self, conn: FlowConnection, ticket: object, message: ServerMessage | None,
             tx: str | None, full: Full, timeout_ms: int) -> None:
        """Keep a send (or, ``message`` None, the commit of ``tx``) until ``full`` has room.
        Raises :class:`ResourceLimitExceeded` instead with ``send-fail-if-no-space``, or
        when there is no ``ticket`` to tell the outcome to."""
        if self.fail_if_no_space or ticket is None:
            what = ("the send was refused" if message is not None else
                    f"transaction {tx!r} was rolled back, its sends")
            raise ResourceLimitExceeded(
                f"{full}; {what}, not stored "
                + ("(send-fail-if-no-space = true)" if self.fail_if_no_space else
                   "(this producer cannot wait)")
                + f": {full.remedy}")
        now = self._broker.now()
        waits = [t for t in (self.fail_after_ms, timeout_ms) if t > 0]
        deadline = now + min(waits) if waits else 0
        cid = conn.connection_id
        items = self._waiting.get(cid)
        if items is None:
            items = self._waiting[cid] = deque()
            last = self._logged.get(full.destination)
            if last is None or now - last >= LOG_EVERY_MS:
                if len(self._logged) >= 4096:  # temp destinations would grow it forever
                    self._logged.clear()
                self._logged[full.destination] = now
                self._log_state[cid] = (now, full)
                log.warning("%s; stopping producer on connection %d to prevent flooding %s "
                            "until consumers free space (producer flow control; logged once "
                            "per %d s per destination)", full, cid, full.destination,
                            LOG_EVERY_MS // 1000)
        items.append(_Parked(conn, ticket, message, tx, now, deadline, full))

    # ------------------------------------------------------------------ progress

    def resume(self) -> None:
        """Let parked sends through while there is space: each waiting connection's
        first send in turn, round after round, until none can go."""
        if self._resuming or not self._waiting:
            return
        self._resuming = True
        try:
            moved = True
            while moved and self._waiting:
                moved = False
                for cid in list(self._waiting):
                    items = self._waiting.get(cid)
                    if not items:
                        continue
                    head = items[0]
                    full = (self.blocker(head.message) if head.message is not None
                            else self._blocker_of_all(head.conn.transaction_sends(head.tx)))
                    if full is not None:
                        head.reason = full
                        continue
                    items.popleft()
                    if not items:
                        self._done_waiting(cid)
                    self._unorphan(head)
                    self._run(head)
                    moved = True
        finally:
            self._resuming = False

    def _run(self, item: _Parked) -> None:
        error: BrokerError | None = None
        try:
            if item.message is not None:
                item.conn.route_admitted(item.message)
            else:
                assert item.tx is not None
                item.conn.commit_admitted(item.tx)
        except BrokerError as exc:
            error = exc
        item.conn.callback.send_done(item.ticket, error)

    def _done_waiting(self, cid: int) -> None:
        del self._waiting[cid]
        started = self._log_state.pop(cid, None)
        if started is not None:
            waited = self._broker.now() - started[0]
            log.warning("resuming producer on connection %d (%s: waited %d ms)", cid,
                     started[1].destination, waited)

    def expire(self, now: int) -> None:
        """Fail the parked sends whose deadline has passed (not stored: nothing to undo)."""
        for cid in list(self._waiting):
            items = self._waiting[cid]
            due = [p for p in items if p.deadline and p.deadline <= now]
            if not due:
                continue
            for p in due:
                items.remove(p)
                self._unorphan(p)
            if not items:
                self._done_waiting(cid)
            for p in due:
                what = "commit" if p.message is None else "send"
                p.conn.callback.send_done(p.ticket, ResourceLimitExceeded(
                    f"{p.reason}; the {what} waited {now - p.since} ms for space and was "
                    "refused, not stored (send-fail-if-no-space-after-timeout or the "
                    f"client's sendTimeout): {p.reason.remedy}"))

    def next_deadline(self) -> int | None:
        deadlines = [p.deadline for items in self._waiting.values() for p in items
                     if p.deadline]
        return min(deadlines) if deadlines else None

    def withdraw(self, conn: FlowConnection, ticket: object) -> Full | None:
        """Take a parked send back (its producer gave up): it was not stored. Returns the
        limit it waited for, or None when it is not parked (it went through or failed)."""
        cid = conn.connection_id
        items = self._waiting.get(cid)
        if items is None:
            return None
        for p in items:
            if p.ticket is ticket:
                items.remove(p)
                if not items:
                    self._done_waiting(cid)
                return p.reason
        return None

    def drop_commit(self, conn: FlowConnection, tx: str) -> bool:
        """A parked commit of ``tx`` is withdrawn (the transaction is rolled back)."""
        items = self._waiting.get(conn.connection_id)
        for p in items or ():
            if p.message is None and p.tx == tx:
                self.withdraw(conn, p.ticket)
                p.conn.callback.send_done(p.ticket, ResourceLimitExceeded(
                    f"transaction {tx!r} was rolled back while its commit waited: {p.reason}"))
                return True
        return False

    def forget(self, conn: FlowConnection, *, keep_sends: bool = False) -> int:
        """``conn`` closed: its parked commits are dropped (the close rolled their
        transactions back), each ticket hearing so, and so are its parked sends unless
        ``keep_sends``: a client that wrote its SENDs and then closed (a STOMP producer
        that exits without waiting for its DISCONNECT's RECEIPT) sent them, so they are
        kept and routed once there is room, as ActiveMQ and RabbitMQ, which stop reading
        a blocked producer, act on every frame it wrote before the close. Kept ones count
        against :data:`ORPHAN_BYTES_LIMIT`, so that clients that connect, flood and leave
        cannot park without bound; past it they are dropped too. Returns how many were
        dropped."""
        items = self._waiting.pop(conn.connection_id, None)
        self._log_state.pop(conn.connection_id, None)
        if not items:
            return 0
        kept: deque[_Parked] = deque()
        dropped: list[_Parked] = []
        for p in items:
            size = p.message.size if p.message is not None else 0
            if (keep_sends and p.message is not None
                    and self._orphan_bytes + size <= ORPHAN_BYTES_LIMIT):
                p.orphan = True
                self._orphan_bytes += size
                kept.append(p)
            else:
                dropped.append(p)
        if kept:
            self._waiting[conn.connection_id] = kept
            log.info("connection %d closed with %d send(s) waiting for space; they go "
                     "through when there is room (its client sent them)", conn.connection_id,
                     len(kept))
        if dropped:
            log.info("connection %d closed with %d send(s) or commit(s) waiting for space; "
                     "they were not stored", conn.connection_id, len(dropped))
        for p in dropped:  # a host may still have a producer waiting on one
            conn.callback.send_done(p.ticket, IllegalBrokerState(
                f"the connection closed while this send waited for space ({p.reason}); it "
                "was not stored"))
        return len(dropped)

    def _unorphan(self, p: _Parked) -> None:
        if p.orphan and p.message is not None:
            self._orphan_bytes -= p.message.size

    # ------------------------------------------------------------------ stats

    def blocked_producers(self, kind: DestinationKind, name: str) -> int:
        """Connections with a send to ``kind``/``name`` waiting."""
        return sum(1 for items in self._waiting.values()
                   if any(_targets(p, kind, name) for p in items))

    def blocked_total(self) -> int:
        return len(self._waiting)


def _targets(p: _Parked, kind: DestinationKind, name: str) -> bool:
    if p.message is not None:
        return p.message.kind is kind and p.message.destination == name
    sends: Callable[[str | None], list[ServerMessage]] = p.conn.transaction_sends
    return any(m.kind is kind and m.destination == name for m in sends(p.tx))
