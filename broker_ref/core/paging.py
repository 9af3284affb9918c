"""A queue's paged-out backlog: the messages it does not hold in RAM (seed 002).

ActiveMQ's design for massive queues keeps a bounded window of message references in RAM
and the rest in the store, loaded ahead of dispatch (the TargetList watermark and eager
loading), with one RAM budget shared by every queue (the linked caches). Here:

* :class:`~.records.PageBudget` is the shared budget. A queue that takes a message while
  the budget is spent (and no consumer is waiting for it) pages it out instead of keeping
  it: a persistent message on a durable queue is in the store already, so paging it out
  costs nothing but forgetting it; anything else is written to the broker's
  :class:`~.spool.Spool`. Once a priority level of a queue has paged messages, later
  messages of that level (and delivery mode) follow them out, so order is kept.
* :class:`QueuePages` (this module) is where a queue's paged messages are, per priority
  level: runs of store rows (sequence number ranges, see :class:`~.store.PageRun`) and a
  count of spooled rows. Nothing per message is in RAM: the index is the store's.
* The queue pages a level back in before its RAM part runs dry (``Queue._fill``: below
  ``PAGE_LOW_WATER`` it reads up to ``PAGE_BATCH``), so a consumer always finds the next
  messages in RAM; its dispatch never passes a level that still has paged messages:
  priorities keep their order. The read is inline, one indexed query per batch. A loader
  thread reading the next batch in the background was built and measured over the wire:
  level with inline loading on a fresh queue, 15-20 % slower after a restart (its Python
  work competes for the GIL with the event loop's), so it is not used. What paid instead
  is a cheaper row-to-message step: the store reads a batch narrow (eight values a row,
  :meth:`~.store.Store.take_page`), :mod:`~.store.page_rows` makes it messages and the
  queue's levels take the batch's plain messages in one bulk append
  (``ReadyLevels.extend_tail``).
* A consumer with a selector looks for matches in the paged part too, from where its last
  look ended (the seed's per-consumer TargetList), without loading what it skips.

Order across delivery modes: paged persistent messages (the store) and non-persistent
ones (the spool) of one level come back alternately, each in its own order. JMS 2.0
§6.2.9.2 guarantees order only within a delivery mode; ActiveMQ's store cursor also keeps
the two apart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..store.spool import Spool
from ..store.store import Paged, PageRun, Store, StoredMessage
from .api import ServerMessage
from .filters import Filter, filter_accepts
from .records import PRIORITIES

if TYPE_CHECKING:
    from .records import ServerConsumer

__all__ = ["PAGE_BATCH", "PAGE_LOW_WATER", "SCAN_CHUNK", "Paged", "QueuePages"]

#: Messages a level is topped up to when it is paged in, and the RAM count below which it
#: is topped up (ahead of dispatch: a consumer finds the next batch already there).
PAGE_BATCH = 1000
PAGE_LOW_WATER = 250
#: Rows a selector consumer's look into the paged part reads per query.
SCAN_CHUNK = 2000


class QueuePages:
    """Where one queue's paged-out messages are (see the module docstring).

    ``store`` is None for a queue whose messages are never stored (then everything goes
    to ``spool``). Counts: :attr:`count` messages in all, per level in runs of store rows
    and in the spool.
    """

    __slots__ = ("_open", "_runs", "_scan", "_spooled", "_taken", "count", "queue", "spool",
                 "store")

    def __init__(self, queue: str, store: Store | None, spool: Spool) -> None:
        self.queue = queue
        self.store = store
        self.spool = spool
        self.count = 0
        self._runs: list[deque[PageRun]] = [deque() for _ in range(PRIORITIES)]
        #: the last run of a level may grow (no RAM-held row of that level came after it)
        self._open = [False] * PRIORITIES
        self._spooled = [0] * PRIORITIES
        #: store rows a selector consumer took out of the middle of a run
        self._taken: set[int] = set()
        #: per selector consumer, per level: (store seq, spool seq) it has looked up to
        self._scan: dict[ServerConsumer, list[tuple[int, int]]] = {}

    # -- what is where ------------------------------------------------------------------

    @property
    def levels(self) -> int:
        """A bit per priority level with paged messages (bit 0: the highest)."""
        mask = 0
        for level in range(PRIORITIES):
            if self._runs[level] or self._spooled[level]:
                mask |= 1 << level
        return mask

    def holds(self, level: int, stored: bool) -> bool:
        """Whether ``level`` has paged messages of that kind (a new one must follow)."""
        return bool(self._runs[level]) if stored else self._spooled[level] > 0

    # -- paging out ---------------------------------------------------------------------

    def add_stored(self, level: int, seq: int) -> None:
        """The store row ``seq`` (of this queue, at ``level``) stays on disk only."""
        runs = self._runs[level]
        if runs and self._open[level] and seq > runs[-1].last:
            runs[-1].last = seq
            runs[-1].count += 1
        else:
            runs.append(PageRun(level, seq, seq, 1))
            self._open[level] = True
        self.count += 1

    def add_spooled(self, level: int, message: ServerMessage, delivery_count: int) -> None:
        self.spool.put(self.queue, level, message, delivery_count)
        self._spooled[level] += 1
        self.count += 1

    def held_in_ram(self, level: int) -> None:
        """A store row of ``level`` was added and kept in RAM (a scheduled message): the
        open run must not grow over it."""
        self._open[level] = False

    def add_runs(self, runs: list[PageRun]) -> None:
        """Rows a restarted broker found in the store (never extended: their delivery
        counts are the recovered kind)."""
        for run in runs:
            self._runs[run.level].append(run)
            self._open[run.level] = False
            self.count += run.count

    # -- paging in ----------------------------------------------------------------------

    def take(self, level: int, limit: int) -> list[Paged]:
        """The next ``limit`` messages of ``level``, taken out of the paged part, store and
        spool alternately (each in its own order)."""
        out: list[Paged] = []
        if limit <= 0:
            return out
        stored_first = bool(self._runs[level])
        share = limit if not self._spooled[level] or not stored_first else max(1, limit // 2)
        if stored_first:
            self._take_stored(level, share, out)
        if len(out) < limit and self._spooled[level]:
            self._take_spooled(level, limit - len(out), out)
        if len(out) < limit and self._runs[level]:
            self._take_stored(level, limit - len(out), out)
        return out

    def _take_stored(self, level: int, limit: int, out: list[Paged]) -> None:
        runs = self._runs[level]
        store = self.store
        assert store is not None or not runs
        goal = len(out) + limit
        while runs and len(out) < goal:
            run = runs[0]
            assert store is not None
            dense = 2 * run.count > run.last - run.first + 1
            if not self._taken:  # the drain: every row read is taken, a batch at a time
                paged, read, last = store.take_page(self.queue, level, run.first, run.last,
                                                    goal - len(out), dense, run.recovered)
                if read:
                    run.first = last + 1
                    run.count -= read
                    self.count -= read
                    out += paged
                if not read or run.count <= 0 or run.first > run.last:
                    self._end_run(runs)
                continue
            rows = store.page_in(self.queue, level, run.first, run.last, goal - len(out),
                                 dense)
            for seq, row in rows:
                run.first = seq + 1
                if seq in self._taken:  # a selector consumer has it already
                    self._taken.discard(seq)
                    continue
                run.count -= 1
                self.count -= 1
                if row is None:
                    continue  # unreadable: the store logged and counted it
                out.append((row.message, run.delivery_count(row.delivery_count), level))
            if not rows or run.count <= 0 or run.first > run.last:
                self._end_run(runs)

    def _end_run(self, runs: deque[PageRun]) -> None:
        run = runs.popleft()
        if run.count > 0:  # rows gone from under the run (cannot happen unless the file
            self.count -= run.count  # was edited): forget them rather than wait for them
        if self._taken:
            self._taken = {s for s in self._taken if not run.first <= s <= run.last}
        if not runs:
            self._open[run.level] = False

    def _take_spooled(self, level: int, limit: int, out: list[Paged]) -> None:
        messages, removed = self.spool.take(self.queue, level, limit)
        self._spooled[level] -= removed
        self.count -= removed
        out.extend((m, count, level) for m, count in messages)
        if not removed:  # the spool lost them (a damaged temp file): stop waiting
            self.count -= self._spooled[level]
            self._spooled[level] = 0

    # -- selectors ----------------------------------------------------------------------

    def scan(self, consumer: ServerConsumer, flt: Filter, want: int) -> list[Paged]:
        """Take up to ``want`` paged messages that ``flt`` accepts, in order, looking from
        where this consumer's last look ended (rows it skipped stay where they are)."""
        out: list[Paged] = []
        marks = self._scan.setdefault(consumer, [(0, 0)] * PRIORITIES)
        for level in range(PRIORITIES):
            if len(out) >= want:
                break
            store_mark, spool_mark = marks[level]
            if self._runs[level]:
                store_mark = self._scan_stored(level, store_mark, flt, want, out)
            if self._spooled[level] and len(out) < want:
                spool_mark = self._scan_spooled(level, spool_mark, flt, want, out)
            marks[level] = (store_mark, spool_mark)
        return out

    def _run_rows(self, run: PageRun, start: int) -> Iterator[tuple[int, StoredMessage | None]]:
        """The rows of ``run`` from sequence number ``start`` on, read a chunk at a time
        (a look or a browse that stops early reads no further)."""
        store = self.store
        assert store is not None
        while start <= run.last:
            rows = store.page_in(self.queue, run.level, start, run.last, SCAN_CHUNK)
            yield from rows
            if len(rows) < SCAN_CHUNK:
                return
            start = rows[-1][0] + 1

    def _scan_stored(self, level: int, mark: int, flt: Filter, want: int,
                     out: list[Paged]) -> int:
        for run in list(self._runs[level]):
            for seq, row in self._run_rows(run, max(run.first, mark + 1)):
                mark = seq
                if seq in self._taken or row is None:
                    continue
                if filter_accepts(flt, row.message):
                    self._taken.add(seq)
                    run.count -= 1
                    self.count -= 1
                    out.append((row.message, run.delivery_count(row.delivery_count), level))
                    if len(out) >= want:
                        break
            if run.count <= 0 and self._runs[level] and self._runs[level][0] is run:
                self._end_run(self._runs[level])
            if len(out) >= want:
                break
        return mark

    def _scan_spooled(self, level: int, mark: int, flt: Filter, want: int,
                      out: list[Paged]) -> int:
        while len(out) < want:
            rows = self.spool.scan(self.queue, level, mark, SCAN_CHUNK)
            for seq, message, count in rows:
                mark = seq
                if message is not None and filter_accepts(flt, message):
                    self.spool.take_one(seq)
                    self._spooled[level] -= 1
                    self.count -= 1
                    out.append((message, count, level))
                    if len(out) >= want:
                        break
            if len(rows) < SCAN_CHUNK:
                break
        return mark

    def forget(self, consumer: ServerConsumer) -> None:
        self._scan.pop(consumer, None)

    # -- an operator's hand -------------------------------------------------------------

    def take_id(self, message_id: str, check: Callable[[ServerMessage], object] | None = None
                ) -> Paged | None:
        """Take the paged message ``message_id`` out of wherever it is on disk (an
        operator deletes or moves it), reading a chunk of rows at a time; None if no
        paged message has that id. ``check(message)`` runs before it is taken: if it
        raises, the message stays where it was. A store row taken this way stays in the
        store until the caller removes it (as a delivery's row stays until its ack)."""
        for level in range(PRIORITIES):
            runs = self._runs[level]
            for run in list(runs):
                for seq, row in self._run_rows(run, run.first):
                    if seq in self._taken or row is None or row.message.message_id != message_id:
                        continue
                    if check is not None:
                        check(row.message)
                    self._taken.add(seq)
                    run.count -= 1
                    self.count -= 1
                    if run.count <= 0 and runs and runs[0] is run:
                        self._end_run(runs)
                    return row.message, run.delivery_count(row.delivery_count), level
            if self._spooled[level]:
                found = self._take_spooled_id(level, message_id, check)
                if found is not None:
                    return found
        return None

    def _take_spooled_id(self, level: int, message_id: str,
                         check: Callable[[ServerMessage], object] | None) -> Paged | None:
        mark = 0
        while True:
            rows = self.spool.scan(self.queue, level, mark, SCAN_CHUNK)
            for seq, message, count in rows:
                mark = seq
                if message is None or message.message_id != message_id:
                    continue
                if check is not None:
                    check(message)
                self.spool.take_one(seq)
                self._spooled[level] -= 1
                self.count -= 1
                return message, count, level
            if len(rows) < SCAN_CHUNK:
                return None

    # -- the rest -----------------------------------------------------------------------

    def browse(self, level: int) -> Iterator[ServerMessage]:
        """The paged messages of ``level`` in order, left where they are."""
        for run in list(self._runs[level]):
            for seq, row in self._run_rows(run, run.first):
                if seq not in self._taken and row is not None:
                    yield row.message
        if self._spooled[level]:
            yield from self.spool.browse(self.queue, level)

    def drop(self) -> None:
        """The queue is deleted: its spooled rows go (its store rows go with the store's
        ``delete_queue``, which the queue calls)."""
        if any(self._spooled):
            self.spool.delete_queue(self.queue)
        self.count = 0
        self._spooled = [0] * PRIORITIES
        for runs in self._runs:
            runs.clear()
        self._taken.clear()
        self._scan.clear()
