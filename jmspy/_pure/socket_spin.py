"""Polling one socket for a short window before a reader sleeps (pure twin).

The compiled twin is ``cython_ext/socket_spin.pyx`` (``jmspy._cext.socket_spin``): the
same loop in C with the GIL released for the whole window, so a reader that polls does
not keep the program's other threads from running. Here each ``poll`` releases the GIL
only for the system call. ``jmspy/idle_spin.py`` says when polling pays and how long the
window is; ``tests/test_socket_spin_twins.py`` holds both twins to the same behaviour.
"""

from __future__ import annotations

import os
import select
import time

__all__ = ["poll_for"]


def poll_for(fd: int, window: float) -> bool:
    """Poll ``fd`` until it is readable or ``window`` seconds have passed, yielding the CPU
    between looks; True if it became readable (or closed or broke: reading then tells),
    False if the window ran out first. It looks at least once."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + window
    while True:
        if poller.poll(0):
            return True
        if time.monotonic() >= deadline:
            return False
        os.sched_yield()  # a thread runnable on this CPU (the broker?) goes first
