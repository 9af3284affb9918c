"""Persistence interface of the broker core, and the in-memory implementation.

The broker calls the store only for *persistent* messages on *durable* queues (regular
queues and durable subscriptions; never temporary queues or non-durable subscriptions),
and only at the moments that change what must survive a crash: enqueue, acknowledge,
delivery-count change on cancel, subscription create/delete, queue delete.

The interface is shaped for a crash-safe implementation (SQLite in WAL mode): calls name
rows by ``(queue, message_id)``; ``batch()`` brackets the writes of one broker operation
(a transaction commit, a multi-tag ack) so a SQL store can make them one atomic
transaction and one fsync. Message ids must be unique within a queue (jmspy generates
UUIDs); a second message with the same id in the same queue replaces the first row.

The store is also where a massive queue's backlog lives (seed 002, :mod:`.paging`): every
row has a sequence number, increasing in the order rows were added, and the priority
level of its message, so that a queue can leave messages on disk and read them back in
order later (:meth:`Store.page_in`). That is also why ``load()`` returns no messages, only
where each queue's rows are (:class:`PageRun`): a restart reads them as consumers need
them, not all before the broker accepts connections.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ..core.api import ServerMessage
from ..core.records import priority_level

__all__ = [
    "MemoryStore",
    "PageRun",
    "Paged",
    "RecoveredState",
    "Store",
    "StoredMessage",
    "SubscriptionRecord",
    "paged_rows",
]

#: What paging a message back in yields: the message, its delivery count, its level.
Paged = tuple[ServerMessage, int, int]


@dataclass(slots=True, frozen=True)
class SubscriptionRecord:
    """A durable subscription as it is persisted.

    ``client_id`` is None for a shared durable subscription created by a connection
    without a client id. ``queue`` is the name of the subscription's internal queue, the
    name under which its messages are stored.
    """

    client_id: str | None
    name: str
    topic: str
    selector: str | None
    no_local: bool
    shared: bool
    queue: str


@dataclass(slots=True)
class StoredMessage:
    message: ServerMessage
    delivery_count: int = 0
    #: the row's sequence number (see the module docstring)
    seq: int = 0


@dataclass(slots=True, eq=False)
class PageRun:
    """Rows of one queue and priority level with sequence numbers ``first..last`` (other
    queues' and levels' rows may lie between), ``count`` of them; a queue pages them in
    from the front, moving ``first`` on. ``recovered``: written before this broker
    started, so their stored delivery counts may be behind (:meth:`delivery_count`)."""

    level: int
    first: int
    last: int
    count: int
    recovered: bool = False

    def delivery_count(self, stored: int) -> int:
        """The delivery count a row of this run comes back with. A recovered row's is at
        least 1: the broker cannot know whether it was delivered before the crash, so its
        next delivery says JMSRedelivered (JMS allows false positives, never negatives)."""
        return max(stored, 1) if self.recovered else stored


@dataclass(slots=True)
class RecoveredState:
    """What ``Store.load()`` returns: where each queue's stored messages are (one run per
    priority level, read later with :meth:`Store.page_in`) and the durable subscriptions
    (whose messages are under ``SubscriptionRecord.queue``)."""

    runs: dict[str, list[PageRun]] = field(default_factory=dict)
    subscriptions: list[SubscriptionRecord] = field(default_factory=list)


class Store(Protocol):
    """What the broker needs from persistence. Implementations need not be thread-safe:
    the broker (and so its store) is driven by one thread or event loop at a time."""

    def add_message(self, queue: str, message: ServerMessage, deferrable: bool = False) -> int:
        """Persist a message that was just enqueued on ``queue`` (delivery count 0);
        returns its row's sequence number. ``deferrable``: the caller does not need that
        number, so a store with group commit may keep the write for its commit and drop
        it if the message is removed first (as a waiting ``ack:auto`` consumer does)."""
        ...

    def remove_message(self, queue: str, message_id: str) -> None:
        """The message was acknowledged, expired or moved away: forget it."""

    def update_delivery_count(self, queue: str, message_id: str, count: int) -> None:
        """Record how many times the message has been delivered (on cancel/rollback)."""

    def delete_queue(self, queue: str) -> None:
        """Forget every message of ``queue`` (the queue or subscription was deleted)."""

    def add_subscription(self, record: SubscriptionRecord) -> None:
        """Persist a durable subscription (replaces one with the same ``queue``)."""

    def remove_subscription(self, queue: str) -> None:
        """Forget the durable subscription whose internal queue is ``queue``."""

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Group the writes made inside the ``with`` block into one atomic unit."""
        ...

    def add_duplicate_id(self, address: str, dup_id: str, n: int, at_ms: int) -> None:
        """Remember a persistent message's duplicate id at ``address`` (:mod:`.duplicates`),
        the ``n``-th id the address took, at ``at_ms``; an id kept already moves to ``n``."""

    def trim_duplicate_ids(self, address: str, oldest_kept: str) -> None:
        """Forget ``address``'s ids older than ``oldest_kept`` (which fell out of its
        window); nothing when ``oldest_kept`` is not stored (a non-persistent one's)."""

    def load_duplicate_ids(self) -> dict[str, list[tuple[str, int, int]]]:
        """The ids kept, per address: ``(id, n, at_ms)``, oldest first."""
        ...

    def put_state(self, kind: str, key: str, data: bytes) -> None:
        """Keep a protocol host's record ``key`` of ``kind`` (replacing one there): what a
        host must find again after a restart that is not a message or a subscription of
        the core (an MQTT session's options, a retained message). Written in the same
        commit as the messages of the same turn, so a reply sent after that commit may
        promise both."""

    def remove_state(self, kind: str, key: str) -> None:
        """Forget the record ``key`` of ``kind`` (nothing if there is none)."""

    def load_state(self, kind: str) -> dict[str, bytes]:
        """Every record of ``kind``, by key."""
        ...

    def load(self) -> RecoveredState:
        """Where everything persisted is, for a broker starting up (no message is read)."""
        ...

    def page_in(self, queue: str, level: int, first: int, last: int, limit: int,
                dense: bool = False) -> list[tuple[int, StoredMessage | None]]:
        """Up to ``limit`` rows of ``queue`` at priority ``level`` with sequence numbers
        from ``first`` to ``last``, in order, as ``(seq, row)``; ``row`` is None for a row
        that cannot be read (the store logs and counts it, and the caller skips it).
        ``dense``: most rows in the range are these (a hint for how to read them)."""
        ...

    def take_page(self, queue: str, level: int, first: int, last: int, limit: int,
                  dense: bool = False,
                  recovered: bool = False) -> tuple[list[Paged], int, int]:
        """:meth:`page_in` as paging takes it: ``(paged, read, last_seq)``, the readable
        rows as ``(message, delivery count, level)`` (``recovered``: a count below 1 comes
        back as 1, see :meth:`PageRun.delivery_count`), how many rows were read
        (unreadable ones included) and the sequence number of the last (0 if none). One
        call per batch, so that a store can do the per-row work in bulk."""
        ...

    def read_queue(self, queue: str) -> list[StoredMessage]:
        """Every message stored for ``queue``, in order (offline checks and tests)."""
        ...

    @property
    def pending(self) -> bool:
        """Writes are waiting for :meth:`commit` (a store with group commit)."""
        ...

    @property
    def must_sync(self) -> bool:
        """Of those, some have a net effect, so the commit waits for the disk: a host
        holds its replies for one group commit only then (a commit of writes that undo
        each other costs nothing, so waiting for other connections' writes gains none)."""
        ...

    def stored_counts(self, queues: Collection[str] | None = None) -> dict[str, int]:
        """Messages held per queue name (for stats; subscriptions under their queue):
        every queue's, or only those of ``queues``."""
        ...

    def size_bytes(self) -> int:
        """Bytes the store takes (on disk, for a store that has one)."""
        ...

    def health(self) -> dict[str, int | str | None]:
        """What the store recovered at start and why writes fail now, as ``jmspy stat``
        usage keys (empty: nothing to report)."""
        ...

    #: Who writes now: a host serving many clients with group commit sets it before each
    #: client's work, so that a commit that fails can name whose messages it lost.
    writer: object | None
    #: Why the store cannot be used any more (None: it can); its host then stops.
    unusable: str | None
    #: Why writes fail now (None: they do not).
    faulted: str | None

    def refusal(self) -> str | None:
        """Why a message would be refused now (a full disk, an unusable store), or None:
        asked before an operation that must not fail half-way."""
        ...

    def take_failed_writers(self) -> set[object]:
        """The :attr:`writer` s whose stored messages a failed commit could not keep (each
        returned once): their RECEIPTs must not go out."""
        ...

    @property
    def location(self) -> str:
        """Where the store is, for messages to people (a path)."""
        ...

    def commit(self) -> None:
        """Make every write so far durable: a host calls it before any reply that promises
        durability (a RECEIPT) leaves. A no-op for stores that commit each write."""

    def close(self) -> None:
        """Release resources; a later ``load()`` on a reopened store sees the same data."""


def paged_rows(rows: list[tuple[int, StoredMessage | None]], level: int,
               recovered: bool) -> tuple[list[Paged], int, int]:
    """What :meth:`Store.take_page` returns, made from what :meth:`Store.page_in` did."""
    out: list[Paged] = []
    for _seq, row in rows:
        if row is not None:
            count = row.delivery_count
            out.append((row.message, max(count, 1) if recovered else count, level))
    return out, len(rows), rows[-1][0] if rows else 0


def _copy(message: ServerMessage) -> ServerMessage:
    # A real store serialises; copying keeps later mutation of the live object (which the
    # broker avoids, but hosts might not) from leaking into "what was on disk".
    body = message.body
    if isinstance(body, dict):
        body = dict(body)
    return dataclasses.replace(message, properties=dict(message.properties), body=body)


class MemoryStore:
    """Keeps the would-be-persisted state in dicts.

    Used by tests and by embedded brokers that want restart semantics without disk: a new
    ``Broker`` built on the same instance recovers what a crash-safe store would have.
    """

    __slots__ = ("_dup_ids", "_messages", "_seq", "_state", "_subscriptions", "closed",
                 "faulted", "unusable", "writer", "writes")

    def __init__(self) -> None:
        self._messages: dict[str, dict[str, StoredMessage]] = {}
        self._subscriptions: dict[str, SubscriptionRecord] = {}
        #: address -> duplicate id -> (n, at_ms), in the order added
        self._dup_ids: dict[str, dict[str, tuple[int, int]]] = {}
        #: (kind, key) -> a protocol host's record (put_state)
        self._state: dict[tuple[str, str], bytes] = {}
        self._seq = 0
        self.closed = False
        #: Number of write calls, so tests can check what the broker persisted.
        self.writes = 0
        self.writer: object | None = None
        self.unusable: str | None = None
        self.faulted: str | None = None

    def add_message(self, queue: str, message: ServerMessage, deferrable: bool = False) -> int:
        self.writes += 1
        rows = self._messages.setdefault(queue, {})
        old = rows.get(message.message_id)
        if old is not None:  # the same id again: the row keeps its place (as SQL's upsert)
            old.message, old.delivery_count = _copy(message), 0
            return old.seq
        self._seq += 1
        rows[message.message_id] = StoredMessage(_copy(message), 0, self._seq)
        return self._seq

    def remove_message(self, queue: str, message_id: str) -> None:
        self.writes += 1
        rows = self._messages.get(queue)
        if rows is not None:
            rows.pop(message_id, None)
            if not rows:
                del self._messages[queue]

    def update_delivery_count(self, queue: str, message_id: str, count: int) -> None:
        self.writes += 1
        row = self._messages.get(queue, {}).get(message_id)
        if row is not None:
            row.delivery_count = count

    def delete_queue(self, queue: str) -> None:
        self.writes += 1
        self._messages.pop(queue, None)

    def add_subscription(self, record: SubscriptionRecord) -> None:
        self.writes += 1
        self._subscriptions[record.queue] = record

    def remove_subscription(self, queue: str) -> None:
        self.writes += 1
        self._subscriptions.pop(queue, None)

    def add_duplicate_id(self, address: str, dup_id: str, n: int, at_ms: int) -> None:
        self.writes += 1
        ids = self._dup_ids.setdefault(address, {})
        ids.pop(dup_id, None)  # moves to the end, as the SQL store's n does
        ids[dup_id] = (n, at_ms)

    def trim_duplicate_ids(self, address: str, oldest_kept: str) -> None:
        ids = self._dup_ids.get(address, {})
        kept = ids.get(oldest_kept)
        if kept is not None:
            self.writes += 1
            self._dup_ids[address] = {k: v for k, v in ids.items() if v[0] >= kept[0]}

    def load_duplicate_ids(self) -> dict[str, list[tuple[str, int, int]]]:
        return {a: [(k, n, at) for k, (n, at) in ids.items()]
                for a, ids in self._dup_ids.items() if ids}

    def put_state(self, kind: str, key: str, data: bytes) -> None:
        self.writes += 1
        self._state[kind, key] = bytes(data)

    def remove_state(self, kind: str, key: str) -> None:
        if self._state.pop((kind, key), None) is not None:
            self.writes += 1

    def load_state(self, kind: str) -> dict[str, bytes]:
        return {key: data for (k, key), data in self._state.items() if k == kind}

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        yield

    pending = False  # every write is "durable" at once
    must_sync = False

    def stored_counts(self, queues: Collection[str] | None = None) -> dict[str, int]:
        return {q: len(rows) for q, rows in self._messages.items()
                if queues is None or q in queues}

    def commit(self) -> None:
        pass

    def load(self) -> RecoveredState:
        self.closed = False
        state = RecoveredState(subscriptions=list(self._subscriptions.values()))
        for q, rows in self._messages.items():
            runs: dict[int, PageRun] = {}
            for row in rows.values():
                level = priority_level(row.message.priority)
                run = runs.get(level)
                if run is None:
                    runs[level] = PageRun(level, row.seq, row.seq, 1, True)
                else:
                    run.first, run.last = min(run.first, row.seq), max(run.last, row.seq)
                    run.count += 1
            state.runs[q] = sorted(runs.values(), key=lambda r: r.level)
        return state

    def page_in(self, queue: str, level: int, first: int, last: int, limit: int,
                dense: bool = False) -> list[tuple[int, StoredMessage | None]]:
        rows = sorted((r for r in self._messages.get(queue, {}).values()
                       if first <= r.seq <= last
                       and priority_level(r.message.priority) == level),
                      key=lambda r: r.seq)[:limit]
        return [(r.seq, StoredMessage(_copy(r.message), r.delivery_count, r.seq))
                for r in rows]

    def take_page(self, queue: str, level: int, first: int, last: int, limit: int,
                  dense: bool = False,
                  recovered: bool = False) -> tuple[list[Paged], int, int]:
        return paged_rows(self.page_in(queue, level, first, last, limit), level, recovered)

    def read_queue(self, queue: str) -> list[StoredMessage]:
        return [StoredMessage(_copy(r.message), r.delivery_count, r.seq)
                for r in sorted(self._messages.get(queue, {}).values(), key=lambda r: r.seq)]

    def close(self) -> None:
        self.closed = True

    def size_bytes(self) -> int:
        return sum(len(r.message.body or "") + 200 for rows in self._messages.values()
                   for r in rows.values())

    location = "the in-memory store"

    def health(self) -> dict[str, int | str | None]:
        return {}

    def take_failed_writers(self) -> set[object]:
        return set()

    def refusal(self) -> str | None:
        return None

    def message_ids(self, queue: str) -> list[str]:
        """Ids stored for ``queue`` in enqueue order (for tests and diagnostics)."""
        return list(self._messages.get(queue, {}))

    def delivery_count(self, queue: str, message_id: str) -> int | None:
        row = self._messages.get(queue, {}).get(message_id)
        return None if row is None else row.delivery_count
