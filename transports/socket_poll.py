"""Polling one socket for a short window before a reader sleeps.

``jmspy/idle_spin.py`` says when polling pays, how long the window is and why a yield
that gave the CPU away ends it; ``tests/test_socket_poll.py`` holds this to it on a real
socketpair. Each ``poll`` releases the GIL only for its system call. A compiled twin that
released it for the whole window was retired: end to end over ``stomp://`` it was worth
nothing measurable (benchmarks/README.md, the twin ledger).
"""

from __future__ import annotations

import os
import select
import time

from jmspy.idle_spin import CONTENDED, GAVE_WAY_S, QUIET, READABLE

__all__ = ["poll_for"]


def poll_for(fd: int, window: float) -> int:
    """Poll ``fd`` until it is readable or ``window`` seconds have passed, yielding the CPU
    between looks. READABLE if it became readable (or closed or broke: reading then
    tells), QUIET if the window ran out first, CONTENDED if a yield gave the CPU to
    another thread first (``jmspy.idle_spin``'s constants). It looks at least once."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    clock = time.monotonic
    deadline = clock() + window
    while True:
        if poller.poll(0):
            return READABLE
        began = clock()
        if began >= deadline:
            return QUIET
        os.sched_yield()  # a thread runnable on this CPU (the broker?) goes first
        if clock() - began > GAVE_WAY_S:
            return CONTENDED
