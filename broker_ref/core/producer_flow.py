"""Producer flow control (seed 003): when memory, store or temp space is full, the
producer waits, not the broker.

What "full" means, per send (:meth:`ProducerFlow.blocker`), each named the way a user
configures it:

* ``[system-usage] memory-limit``: the RAM pending (ready) messages of every queue take
  (the broker's :class:`~.records.PageBudget`) has reached the limit;
* a destination's ``memory-limit`` (address settings): the RAM its pending messages take
  (a topic: all its subscriptions') has reached it;
* ``store-limit``: a persistent message, and the store is that big on disk;
* ``temp-limit``: a message that may have to be spooled, and the spool holds that much.

A persistent message for a durable queue never waits for memory: it pages to the store
(seed 002) and waits only for ``store-limit``. A destination with
``producer-flow-control = false`` never waits for memory either: its backlog spools to
temp files (the seed's slow-consumer case) and waits only for ``temp-limit``. In-flight
messages (delivered, not yet acknowledged) are not pending: consumers' prefetch bounds
them, as in the seed ("the messages start to back up on the broker").

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
from typing import TYPE_CHECKING

from .api import DestinationKind, ServerMessage
from .consumer import FlowRecord
from .errors import BrokerError, IllegalBrokerState, ResourceLimitExceeded

if TYPE_CHECKING:
    from .broker import Broker
    from .connection import ServerConnection
    from .queue import Queue

__all__ = ["LOG_EVERY_MS", "Full", "ProducerFlow"]

log = logging.getLogger("jmspy.broker.flow")

#: A destination's "stopping producer" line is logged at most once per this many ms.
LOG_EVERY_MS = 30_000


@dataclass(frozen=True, slots=True)
class Full:
    """Why a send must wait: which limit, of what, and how far it is used."""

    #: what is full: "queue 'orders'", "topic 'prices'" (its address settings), "the
    #: broker's memory", "the store /path", "the temp spool" ([system-usage] limits)
    scope: str
    #: the configuration key: "memory-limit", "store-limit", "temp-limit"
    key: str
    used: int
    limit: int
    #: the destination the send was for ("queue 'orders'")
    destination: str

    def __str__(self) -> str:
        table = "[system-usage]" if self.scope.startswith("the ") else "[address-settings]"
        return (f"{self.key} reached for {self.destination}: {self.scope} uses "
                f"{self.used:,} of {self.limit:,} bytes ({table} {self.key})")


def _named(kind: DestinationKind, name: str) -> str:
    return f"{kind.value} {name!r}"


@dataclass(slots=True, eq=False)
class _Parked:
    """A send (``message``) or a commit (``message`` None, transaction ``tx``) waiting."""

    conn: ServerConnection
    ticket: object
    message: ServerMessage | None
    tx: str | None
    since: int
    #: clock time (ms) at which it fails; 0 = it waits as long as it takes
    deadline: int
    reason: Full


class ProducerFlow(FlowRecord):
    """The parked sends of one broker and the limits they wait for (module docstring).

    ``messages_of``: the messages a connection's transaction would route at commit."""

    # the fields every send reads are the FlowRecord's (.records)
    __slots__ = ("_broker", "_log_state", "_logged", "_resuming", "fail_after_ms",
                 "fail_if_no_space")

    def __init__(self, broker: Broker, *, temp_limit: int, fail_if_no_space: bool,
                 fail_after_ms: int) -> None:
        self._broker = broker
        # what the common-case check of every send reads, bound once
        self._budget = broker.budget
        self._memory_limit = broker.memory_limit
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
        #: connection id -> (first park time, the limit it first waited for), for the log
        self._log_state: dict[int, tuple[int, Full]] = {}
        #: destination -> when its stop was last logged: a producer stopped and resumed
        #: many times a second is logged once per LOG_EVERY_MS (ActiveMQ: every 30 s)
        self._logged: dict[str, int] = {}

    # ------------------------------------------------------------------ what is full

    def blocker(self, message: ServerMessage) -> Full | None:
        """The limit ``message`` would have to wait for now, or None."""
        broker = self._broker
        budget = broker.budget
        memory_full = budget.used >= broker.memory_limit
        spool = broker.spool
        temp_full = spool.used >= self.temp_limit
        persistent = message.persistent and broker.store is not None
        if persistent and broker.store_is_full():
            store = broker.store
            assert store is not None
            return Full(f"the store {store.location}", "store-limit", store.size_bytes(),
                        broker.store_limit,
                        _named(message.kind, message.destination))
        if not (memory_full or temp_full or self.destination_limits):
            return None  # the common case: room everywhere
        post = broker.post_office
        name = message.destination
        if message.kind is DestinationKind.QUEUE:
            q = post.queues.get(name)
            settings = q.settings if q is not None else broker.settings_for(name)
            queues: list[Queue] = [] if q is None else [q]
            usage = 0 if q is None else q.memory_usage
        else:
            topic = post.topics.get(name)
            settings = topic.settings if topic is not None else broker.settings_for(name)
            queues = post.subscription_queues(name)
            usage = sum(q.memory_usage for q in queues)
        if not settings.producer_flow_control:
            if temp_full and not (persistent and all(q.takes_without_ram(message)
                                                     for q in queues)):
                return Full("the temp spool", "temp-limit", spool.used, self.temp_limit,
                            _named(message.kind, name))
            return None
        if queues and all(q.takes_without_ram(message) for q in queues):
            return None  # pages to the store: it waits for store-limit only
        limit = settings.memory_limit
        if limit is not None and usage >= limit:
            return Full(_named(message.kind, name), "memory-limit", usage, limit,
                        _named(message.kind, name))
        if memory_full:
            return Full("the broker's memory", "memory-limit", budget.used, broker.memory_limit,
                        _named(message.kind, name))
        return None

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

    def waiting(self, conn: ServerConnection) -> int:
        """How many sends and commits of ``conn`` are parked."""
        items = self._waiting.get(conn.connection_id)
        return 0 if items is None else len(items)

    @property
    def parked(self) -> bool:
        """True while any send waits (the broker then calls :meth:`resume`)."""
        return bool(self._waiting)

    def must_wait(self, conn: ServerConnection, message: ServerMessage) -> Full | None:
        """What a send of ``message`` on ``conn`` waits for: the limit it would exceed,
        or, while ``conn`` has parked sends, theirs (one producer's order); None: go."""
        if self._waiting:
            items = self._waiting.get(conn.connection_id)
            if items is not None:
                return items[0].reason
        elif self.free_for(message):
            return None  # the common case (FlowRecord.free_for, a C call when compiled)
        return self.blocker(message)

    def must_wait_commit(self, conn: ServerConnection,
                         messages: list[ServerMessage]) -> Full | None:
        """:meth:`must_wait` for a transaction's sends, committed as one."""
        items = self._waiting.get(conn.connection_id)
        return self._blocker_of_all(messages) if items is None else items[0].reason

    def park(self, conn: ServerConnection, ticket: object, message: ServerMessage | None,
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
                + ": consume from it, or raise the limit")
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
            if not items:
                self._done_waiting(cid)
            for p in due:
                what = "commit" if p.message is None else "send"
                p.conn.callback.send_done(p.ticket, ResourceLimitExceeded(
                    f"{p.reason}; the {what} waited {now - p.since} ms for space and was "
                    "refused, not stored (send-fail-if-no-space-after-timeout or the "
                    "client's sendTimeout): consume from it, or raise the limit"))

    def next_deadline(self) -> int | None:
        deadlines = [p.deadline for items in self._waiting.values() for p in items
                     if p.deadline]
        return min(deadlines) if deadlines else None

    def withdraw(self, conn: ServerConnection, ticket: object) -> Full | None:
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

    def drop_commit(self, conn: ServerConnection, tx: str) -> bool:
        """A parked commit of ``tx`` is withdrawn (the transaction is rolled back)."""
        items = self._waiting.get(conn.connection_id)
        for p in items or ():
            if p.message is None and p.tx == tx:
                self.withdraw(conn, p.ticket)
                p.conn.callback.send_done(p.ticket, ResourceLimitExceeded(
                    f"transaction {tx!r} was rolled back while its commit waited: {p.reason}"))
                return True
        return False

    def forget(self, conn: ServerConnection) -> int:
        """``conn`` closed: its parked sends are dropped (none was stored or confirmed);
        each ticket hears so."""
        items = self._waiting.pop(conn.connection_id, None)
        self._log_state.pop(conn.connection_id, None)
        if not items:
            return 0
        log.info("connection %d closed with %d send(s) waiting for space; they were not "
                 "stored", conn.connection_id, len(items))
        for p in items:  # a host may still have a producer waiting on one
            conn.callback.send_done(p.ticket, IllegalBrokerState(
                f"the connection closed while this send waited for space ({p.reason}); it "
                "was not stored"))
        return len(items)

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
