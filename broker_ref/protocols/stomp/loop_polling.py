"""The broker's half of polling before sleeping: after a read, keep the event loop turning
instead of letting it sleep in ``epoll_wait``, for a window, adaptively.

``jmspy/idle_spin.py`` holds the rule (how long, and when not to bother) and says what it
saves: on a ping-pong (one message in flight, a RECEIPT awaited) each side otherwise
sleeps while the other works and pays a wakeup per message. Here is only the loop's way of
polling: a callback scheduled with ``call_soon`` makes the loop's next turn wait zero
seconds for I/O, so while a window is open the loop looks at its sockets, runs whatever
arrived, gives the CPU to any thread waiting for it (``sched_yield``), and turns again.
A yield that did give the CPU away (it took longer than ``idle_spin.GAVE_WAY_S``) ends
the window as contended: another thread wants this CPU more than the loop does.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from jmspy.idle_spin import GAVE_WAY_S, IdleSpin

__all__ = ["LoopPolling"]

_clock = time.perf_counter  # the loop's own time() is in milliseconds on uvloop
_yield = os.sched_yield  # module globals, so tests can put a fake clock behind both


class LoopPolling:
    """Polling after reads for one event loop (one :class:`~.server.StompServer`).

    ``read_served()`` after each read a connection served; ``stopped()`` says the loop's
    owner closed (an open window then ends at its next turn)."""

    __slots__ = ("_loop", "_stopped", "_until", "spin")

    def __init__(self, loop: asyncio.AbstractEventLoop, window_us: int,
                 stopped: Callable[[], bool]) -> None:
        self._loop = loop
        self._stopped = stopped
        #: the rule: how long a window is, and whether to open one (0 us: never)
        self.spin = IdleSpin(window_us)
        self._until = 0.0  # while > 0.0 a window is open, until then (_clock)

    @property
    def spinning(self) -> bool:
        """A window is open: the loop polls instead of sleeping."""
        return self._until > 0.0

    def read_served(self) -> None:
        """A read was served: within an open window it is a hit and opens the next
        window; else a window opens if the rule says so."""
        spin = self.spin
        if self._until:
            spin.hit()
            self._until = _clock() + spin.window_s
            return
        window = spin.window()
        if window:
            self._until = _clock() + window
            self._loop.call_soon(self._turn)

    def _turn(self) -> None:
        """One loop turn of an open window: it ends (a miss) once its time is up, else
        the CPU goes to any thread waiting for it and the loop turns again at once,
        unless a thread did take the CPU meanwhile (the window ends contended)."""
        began = _clock()
        if began >= self._until or self._stopped():
            self._until = 0.0
            self.spin.miss()
            return
        _yield()
        if _clock() - began > GAVE_WAY_S:
            self._until = 0.0
            self.spin.contended()
            return
        self._loop.call_soon(self._turn)
