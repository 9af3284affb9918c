"""A queue's ready messages in RAM: one level of refs per JMS priority and what they cost.

:class:`ReadyLevels` owns the ten priority levels of a :class:`~.queue.Queue` (highest
first; a message leaves a level only from its head), the count of ready messages, the
queue's share of the broker's RAM :class:`~.records.PageBudget` and which levels continue
on disk. Every message that becomes ready in RAM, or stops being ready, passes through
here, so the count and the budget cannot drift apart from the levels. What a message is
*for* (which consumer, when it expires, whether a ring evicts it) is the queue's business;
this module does not know about consumers.

Messages that stop being ready while inside a level (expired by a timer, acknowledged
late by an AMPS consumer) stay there as tombstones (``state != READY``) and are skipped
when they reach the head, so expiry never searches a level.

A level is a :class:`~.records.Level` (a list and a head index) rather than a deque: a
deque allocates a 64-slot block with its first element, 760 bytes for the one message
most queues hold (issue 17; ``Level``'s docstring has the figures and why every step is
still O(1) amortised). A level is made when a message of that priority is first ready
(issue 17 also: ten empty deques were 7.4 KB of every queue, most of which only ever see
one priority) and kept afterwards.

The fields are :class:`~.records.LevelsRecord`'s (typed C fields under the compiled
twins): the dispatch twins (:mod:`.queue_run` and ``cython_ext/queue_run.pyx``) take runs
off the heads and append sent messages themselves, with the same bookkeeping as
:meth:`ReadyLevels.add_tail` and :meth:`ReadyLevels.unready`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sized

from .consumer import GONE, PAGE_OVERHEAD, READY, Level, LevelsRecord, MessageRef

__all__ = ["ReadyLevels"]


class ReadyLevels(LevelsRecord):
    """The ready messages of one queue, by priority level. Not thread-safe."""

    __slots__ = ()

    def _level(self, level: int) -> Level:
        refs = self._levels[level]
        if refs is None:
            refs = self._levels[level] = Level()
        return refs

    def add_tail(self, ref: MessageRef) -> None:
        """``ref`` becomes ready behind every message of its level."""
        ref.state = READY
        self._level(ref.priority).append(ref)
        self._charge(1, ref.message.size + PAGE_OVERHEAD)

    def add_head(self, ref: MessageRef) -> None:
        """``ref`` becomes ready ahead of every message of its level (it came back)."""
        ref.state = READY
        self._level(ref.priority).appendleft(ref)
        self._charge(1, ref.message.size + PAGE_OVERHEAD)

    def extend_tail(self, refs: list[MessageRef]) -> None:
        """Refs paged back in (ready, in order) onto the tails of their levels, counted
        in one step rather than per message."""
        cost = 0
        for ref in refs:
            self._level(ref.priority).append(ref)
            cost += ref.message.size
        self._charge(len(refs), cost + len(refs) * PAGE_OVERHEAD)

    def _charge(self, count: int, cost: int) -> None:
        self.count += count
        self.budget.used += cost
        self.memory_usage += cost

    def unready(self, ref: MessageRef) -> None:
        """``ref`` stops being ready (taken, expired, evicted); its level may keep it as a
        tombstone. Every path that lowers the count outside the dispatch twins."""
        self.count -= 1
        cost = ref.message.size + PAGE_OVERHEAD
        self.budget.used -= cost
        self.memory_usage -= cost

    def remove(self, ref: MessageRef) -> None:
        """Take the ready ``ref`` out from anywhere in its level (an AMPS queue delivers
        past messages it holds back): O(level length), unlike the head."""
        refs = self._levels[ref.priority]
        assert refs is not None
        refs.remove(ref)
        self.unready(ref)

    def take_head(self) -> MessageRef | None:
        """Take the head-most ready message off (a full ring evicts it); tombstones on
        the way are dropped. None if nothing is ready."""
        for level in self._levels:
            while level:
                ref = level.popleft()
                if ref.state == READY:
                    self.unready(ref)
                    return ref
        return None

    def clear(self) -> None:
        """Drop every message (the queue is deleted): gone, the budget given back."""
        self.budget.used -= self.memory_usage
        self.memory_usage = 0
        for i, level in enumerate(self._levels):
            if level is not None:
                for ref in level:
                    ref.state = GONE
                self._levels[i] = None
        self.count = 0
        self.paged = 0

    # ------------------------------------------------------------------ reading

    def size(self, level: int) -> int:
        """Refs level ``level`` holds in RAM, tombstones included (paging's low water)."""
        refs = self._levels[level]
        return 0 if refs is None else len(refs)

    def in_ram(self, level: int) -> list[MessageRef]:
        """Every ref level ``level`` holds in RAM, head first, tombstones included."""
        refs = self._levels[level]
        return [] if refs is None else list(refs)

    def ready_at(self, level: int) -> Iterator[MessageRef]:
        """The ready refs of one level, head first (browsing)."""
        refs = self._levels[level]
        if refs is not None:
            for ref in refs:
                if ref.state == READY:
                    yield ref

    def ready(self) -> Iterator[MessageRef]:
        """Every ready ref, highest priority first, dropping the tombstones at the heads
        on the way. The levels must not change while this runs: a caller that takes a ref
        (:meth:`remove`) stops iterating."""
        for level in self._levels:
            if level is None:
                continue
            while level and level.peek().state != READY:
                level.popleft()
            for ref in level:
                if ref.state == READY:
                    yield ref

    # ------------------------------------------------------------------ disk

    def fits(self, size: int) -> bool:
        """Whether one more ready message of ``size`` bytes stays within the budget."""
        budget = self.budget
        return budget.used + size + PAGE_OVERHEAD <= budget.limit

    def continues_on_disk(self, level: int) -> None:
        """Level ``level`` now continues on disk: nothing below it may go first."""
        self.paged |= 1 << level

    def set_paged(self, levels: int) -> None:
        """The levels that continue on disk (bit ``i``: level ``i``), as paging says."""
        self.paged = levels

    # ------------------------------------------------------------------ selectors

    def sweep(self, visit: Callable[[MessageRef], bool], takers: Sized) -> None:
        """Walk the ready refs in order while ``takers`` (the queue's ring) is not empty:
        ``visit(ref)`` returns True when it took ``ref`` (and called :meth:`unready`), or
        False to leave it where it was. Stops at an empty level that continues on disk,
        and after a level that continues on disk if it took all of that level: lower
        levels wait until it is paged in.

        O(ready refs): the price of selectors on a shared queue. A ref that comes back
        to the head of the level being walked (``add_head`` from a callback) ends up
        behind the refs this walk leaves in place."""
        for i, level in enumerate(self._levels):
            if not takers:
                return
            if not level:
                if self.paged >> i & 1:
                    return  # this level continues on disk: page it in first
                continue
            kept: list[MessageRef] = []
            while level and takers:
                ref = level.popleft()
                if ref.state != READY:
                    continue
                if not visit(ref):
                    kept.append(ref)  # nobody here wants it; later consumers may
            for ref in reversed(kept):
                level.appendleft(ref)
            if not kept and self.paged >> i & 1:
                return  # this level continues on disk: page it in first
