"""The part of one queue's backlog that is on disk, and moving it between disk and RAM
(seed 002, massive queues).

A :class:`~.queue.Queue` holds a :class:`QueuePaging` exactly while some of its messages
are paged out (``Queue._pages``; None otherwise, so the plain paths pay one ``is None``
test). It wraps the queue's :class:`~.paging.QueuePages` (where the rows are) and keeps
the queue's :class:`~.ready_levels.ReadyLevels` told which levels continue on disk, so
dispatch never passes one. *Whether* a message is paged out, and what a message back
from disk becomes (ready, scheduled, expired), stay the queue's decisions: it hands
this object the refs to leave on disk and a function to take batches back with.

Paging in is bounded in *bytes*, not only in messages: :meth:`QueuePaging.fill` is given
the bytes the queue may still take into RAM (its page limit, :mod:`.queue_limits`) and
reads in chunks sized by the messages it last read, so a backlog of big messages comes
back a few at a time (at most one chunk past the limit) instead of ``PAGE_BATCH`` of them
at once. With no room left, one message still comes in when nothing is ready and a
consumer can take it: a message bigger than the whole page limit is delivered alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..store.spool import Spool
from ..store.store import PageRun, Store
from .api import ServerMessage
from .consumer import GONE, PAGE_OVERHEAD, PRIORITIES, MessageRef, ServerConsumer
from .paging import PAGE_BATCH, PAGE_LOW_WATER, Paged, QueuePages
from .ready_levels import ReadyLevels

__all__ = ["QueuePaging"]

#: Takes a batch of messages back from disk (``every``: the queue stops paging).
BringIn = Callable[[list[Paged], bool], None]


class QueuePaging:
    """One queue's paged-out messages. Not thread-safe (the broker isn't)."""

    __slots__ = ("_bring_in", "_levels", "_pages", "_size_hint")

    def __init__(self, name: str, store: Store | None, spool: Spool, levels: ReadyLevels,
                 bring_in: BringIn) -> None:
        self._pages = QueuePages(name, store, spool)
        self._levels = levels
        self._bring_in = bring_in
        #: RAM a message read back lately cost, on average (0: none read yet); sizes the
        #: next chunk so that a fill stays near its room in bytes
        self._size_hint = 0

    @property
    def count(self) -> int:
        """Messages on disk (store or spool)."""
        return self._pages.count

    def holds(self, level: int, stored: bool) -> bool:
        """Whether a new message of ``level`` must go to disk behind what is there."""
        return self._pages.holds(level, stored)

    def page_out(self, ref: MessageRef, seq: int) -> None:
        """Leave the new ready message ``ref`` on disk: its store row ``seq`` if it has
        one, else a copy in the spool. The ref itself is dropped: the row is the message
        now."""
        level = ref.priority
        if seq > 0:
            self._pages.add_stored(level, seq)
        else:
            self._pages.add_spooled(level, ref.message, ref.delivery_count)
        ref.state = GONE
        self._levels.continues_on_disk(level)

    def held_in_ram(self, level: int) -> None:
        """A store row of ``level`` was added and kept in RAM (a scheduled message): later
        rows must not join the run on disk before it."""
        self._pages.held_in_ram(level)

    def add_runs(self, runs: list[PageRun]) -> None:
        """Rows a restarted broker found in the store, left on disk."""
        self._pages.add_runs(runs)
        self._levels.set_paged(self._pages.levels)

    def fill(self, room: int, waiting: bool) -> bool:
        """Page in ahead of dispatch (the seed's eager loading): every level down to the
        first that holds a batch in RAM is topped up once it falls below the low water,
        while ``room`` (bytes the queue may still take into RAM) lasts. With no room,
        ``waiting`` (a consumer can take a message now) and nothing ready, one message
        comes in alone. True when nothing is left on disk (the queue drops this
        object)."""
        pages, levels = self._pages, self._levels
        have = 0
        for level in range(PRIORITIES):
            held = levels.size(level)
            if levels.paged >> level & 1 and held < PAGE_LOW_WATER:
                if room > 0:
                    room -= self._bring(level, PAGE_BATCH - held, room)
                elif waiting and not levels.count:
                    room -= self._bring(level, 1, 1)  # alone, however big it is
                held = levels.size(level)
            have += held
            if have >= PAGE_BATCH:
                break
        levels.set_paged(pages.levels)
        return not pages.count

    def _bring(self, level: int, want: int, room: int) -> int:
        """Bring in up to ``want`` messages of ``level`` until they cost ``room`` bytes,
        a chunk at a time; returns what they cost (as the RAM budget counts it)."""
        brought = 0
        while want > 0 and brought < room:
            hint = self._size_hint
            n = 1 if hint <= 0 else min(want, max(1, (room - brought) // hint))
            batch = self._pages.take(level, n)
            if not batch:
                break
            cost = len(batch) * PAGE_OVERHEAD
            for message, _count, _level in batch:
                cost += message.size
            self._size_hint = cost // len(batch)
            brought += cost
            want -= len(batch)
            self._bring_in(batch, False)
        return brought

    def unpage(self) -> None:
        """Bring every paged message back, in order (the queue stops paging: it became a
        ring or AMPS queue, whose rules need them all)."""
        self._levels.set_paged(0)
        for level in range(PRIORITIES):
            while batch := self._pages.take(level, PAGE_BATCH):
                self._bring_in(batch, True)

    def scan(self, consumers: list[ServerConsumer]) -> bool:
        """Selector consumers that still have room look for matches on disk; what they
        find is brought in. True if anything was."""
        found = False
        for c in consumers:
            if c.filter is None or not c.can_receive():
                continue
            room = c.credit
            if c.flow_limit is not None:
                room = min(room, c.flow_limit - len(c.delivering))
            batch = self._pages.scan(c, c.filter, min(room, PAGE_BATCH))
            if batch:
                found = True
                self._bring_in(batch, False)
        self._levels.set_paged(self._pages.levels)
        return found

    def take_id(self, message_id: str, check: Callable[[ServerMessage], object] | None = None
                ) -> ServerMessage | None:
        """Take the paged message ``message_id`` off the disk for good (an operator deletes
        or moves it; :meth:`QueuePages.take_id`); its store row is the caller's to
        remove. None if no paged message has that id."""
        found = self._pages.take_id(message_id, check)
        self._levels.set_paged(self._pages.levels)
        return None if found is None else found[0]

    def bring_next(self, want: int = PAGE_BATCH) -> bool:
        """Bring up to ``want`` messages of the highest level on disk into RAM, whatever
        the queue's page limit: an operator's purge or dead-letter retry works through a
        backlog on disk a batch at a time, taking each batch before it reads the next.
        False when nothing was on disk (a part emptied this way is dropped by the
        queue's next fill)."""
        pages = self._pages
        brought = False
        for level in range(PRIORITIES):
            batch = pages.take(level, want)
            if batch:
                self._bring_in(batch, False)
                brought = True
                break
        self._levels.set_paged(pages.levels)
        return brought

    def browse(self, level: int) -> Iterator[ServerMessage]:
        """The messages of ``level`` on disk, in order."""
        return iter(self._pages.browse(level))

    def forget(self, consumer: ServerConsumer) -> None:
        self._pages.forget(consumer)

    def drop(self) -> None:
        """The queue is deleted: its rows go."""
        self._pages.drop()
        self._levels.set_paged(0)
