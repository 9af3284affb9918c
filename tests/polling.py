"""Waiting in a test for what another thread or process does, in one place.

Where the code under test gives no event to wait on (a broker's counters, a connection
closing on its I/O thread, a subprocess), a test polls a condition until it holds or a
generous timeout passes, then asserts on what it sees: the timeout bounds a failing
test, never a passing one, so no test depends on how fast the machine is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(check: Callable[[], object], timeout: float, interval: float = 0.01) -> bool:
    """Whether ``check()`` became true within ``timeout`` seconds (checked every
    ``interval``); the caller asserts on the outcome."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            return bool(check())
        time.sleep(interval)  # another thread or process is doing what check() reads
    return True
