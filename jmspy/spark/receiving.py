"""Receiving from one destination or from several, for the streaming reader.

A JMS consumer reads one destination, and a thread can block in one consumer's
``receive`` at a time. The reader of a list of destinations (``queue://a,queue://b``)
holds one consumer per destination on its one session and takes from them in turn:
what each has buffered first (no wait), and when none has anything, it waits on each in
turn for a short slice until the caller's wait is spent. Each consumer's flow window
still bounds what the broker pushes for its destination (nothing here buffers a message
beyond the consumer's own prefetch), and the turn moves on after every message, so a
busy destination cannot starve a quiet one.

``trigger(availableNow=True)`` fixes an end per destination (:meth:`Receivers.limit`):
each consumer gives at most the messages its queue held when the query started, so a
message sent later to one queue never takes the place of an older one of another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from jmspy.message import Message

__all__ = ["SLICE", "Receivers"]

#: How long one consumer is waited on before the turn moves to the next, when none of
#: them has a message buffered (seconds): the added latency for a message that arrives
#: on another destination while this one is waited on.
SLICE = 0.01


class _Consumer(Protocol):
    def receive(self, timeout: float | None = None) -> Message | None: ...

    def receive_no_wait(self) -> Message | None: ...


class Receivers:
    """``receive(wait)`` over one or more consumers (see the module docstring)."""

    def __init__(self, consumers: Sequence[_Consumer],
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not consumers:
            raise ValueError("Receivers needs at least one consumer")
        self._consumers = list(consumers)
        self._next = 0
        self._clock = clock
        #: per consumer, how many more it may give (None: no end)
        self._left: list[int | None] = [None] * len(self._consumers)

    def limit(self, left: Sequence[int | None]) -> None:
        """From now on consumer ``i`` gives at most ``left[i]`` more messages."""
        if len(left) != len(self._consumers):
            raise ValueError(f"{len(left)} limits for {len(self._consumers)} consumers")
        self._left = [None if n is None else max(0, n) for n in left]

    def _took(self, i: int) -> None:
        left = self._left[i]
        if left is not None:
            self._left[i] = left - 1

    def receive(self, wait: float) -> Message | None:
        """The next message of any consumer, waiting up to ``wait`` seconds for one."""
        consumers = self._consumers
        open_ = [i for i, left in enumerate(self._left) if left is None or left > 0]
        if not open_:
            return None  # every destination reached its end
        if len(consumers) == 1:
            message = consumers[0].receive(wait)
            if message is not None:
                self._took(0)
            return message
        count = len(consumers)
        for step in range(count):  # what is buffered already, starting where we stopped
            i = (self._next + step) % count
            if i not in open_:
                continue
            message = consumers[i].receive_no_wait()
            if message is not None:
                self._next = (i + 1) % count
                self._took(i)
                return message
        deadline = self._clock() + wait
        turn = 0
        while True:
            left = deadline - self._clock()
            if left <= 0:
                return None
            i = open_[turn % len(open_)]
            turn += 1
            message = consumers[i].receive(min(SLICE, left))
            if message is not None:
                self._next = (i + 1) % count
                self._took(i)
                return message
