"""Wait for a quiet machine before each measured run.

The peers keep working after their own rows: ActiveMQ's JVM compiles and collects
garbage for a second or more after a run (measured: up to 0.8 of a core while the next
row ran), RabbitMQ's schedulers spin for a while after work. Whatever row comes next pays
for it, and which row that is depends only on the interleaving order. So before every
run the harness waits until the whole machine has been at most :data:`QUIET_BUSY` busy
for one :data:`WINDOW_S` window (at most :data:`MAX_WAIT_S`), the same rule for every
row: each starts from the same idle machine instead of from its predecessor's leftovers.
The seconds waited go into each run's JSON (``quiet_wait_s``).

Linux only (``/proc/stat``); elsewhere there is nothing to read and no run waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["MAX_WAIT_S", "QUIET_BUSY", "WINDOW_S", "cpu_times", "wait_quiet"]

#: A window is quiet when at most this share of all CPUs' time was busy in it.
QUIET_BUSY = 0.10
#: Length of one observation window, seconds.
WINDOW_S = 0.1
#: Give up waiting after this long: a machine that never calms down still gets measured.
MAX_WAIT_S = 5.0


def cpu_times(path: str = "/proc/stat") -> tuple[float, float] | None:
    """(busy, total) CPU time of all CPUs so far, in clock ticks; None where the kernel
    does not report it. Busy is everything but idle and iowait."""
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [float(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total


def wait_quiet(
    read: Callable[[], tuple[float, float] | None] = cpu_times,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    *,
    busy: float = QUIET_BUSY,
    window: float = WINDOW_S,
    limit: float = MAX_WAIT_S,
) -> float:
    """Sleep window by window until one window was at most ``busy`` busy, or ``limit``
    seconds passed; return the seconds spent (at least one window where the CPU times
    can be read, 0 where they cannot)."""
    start = clock()
    before = read()
    if before is None:
        return 0.0
    while True:
        sleep(window)
        after = read()
        if after is None:
            return clock() - start
        used, span = after[0] - before[0], after[1] - before[1]
        if span <= 0 or used <= busy * span or clock() - start >= limit:
            return clock() - start
        before = after
