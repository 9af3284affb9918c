"""How long each step of an asyncio loop *held* it: waited on something, apart from the
machine being busy.

asyncio's own debug detector times a callback by the wall clock, so on a shared 2-core
runner a step that computed for a millisecond and then sat in the CPU run queue behind
other processes is reported like one that blocked in a lock. Linux keeps the two apart
per thread in ``/proc/<pid>/task/<tid>/schedstat``: time on a CPU and time runnable but
waiting for one. What is left of a step's wall time after both is time the loop thread
was asleep. Part of that can still be the machine's doing: waiting for the GIL while the
thread holding it waits in the run queue, so the run-queue time of the process's other
threads over the step is taken off as well. What remains is the step waiting on
something (a lock, a socket, a sleep), which is what "holding the loop" means; a sync
receive() with a 0.5 s timeout on the loop remains at about 0.5 s on any machine.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_TASKS = "/proc/self/task"


class _Schedstats:
    """The process's threads' schedstat files, kept open and read with pread."""

    def __init__(self) -> None:
        self._files: dict[str, int] = {}

    def read(self) -> dict[str, tuple[int, int]]:
        """Per thread id: (ns on a CPU, ns runnable waiting for one)."""
        found: dict[str, tuple[int, int]] = {}
        for tid in os.listdir(_TASKS):
            fd = self._files.get(tid)
            try:
                if fd is None:
                    fd = self._files[tid] = os.open(f"{_TASKS}/{tid}/schedstat", os.O_RDONLY)
                on_cpu, waiting = os.pread(fd, 64, 0).split()[:2]
            except (OSError, ValueError):  # the thread ended between listing and reading
                continue
            found[tid] = (int(on_cpu), int(waiting))
        return found

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


@dataclass(frozen=True)
class StepTime:
    """Where one loop step's wall time went, in seconds."""

    wall: float
    on_cpu: float
    queued: float  # the loop thread runnable, waiting for a CPU
    others_queued: float  # the process's other threads runnable, waiting for a CPU

    @property
    def held(self) -> float:
        """The rest: the loop thread asleep on something while nothing waited for a CPU."""
        return self.wall - self.on_cpu - self.queued - self.others_queued

    def __str__(self) -> str:
        return (f"held {self.held:.3f} s of wall {self.wall:.3f} s: on a CPU "
                f"{self.on_cpu:.3f} s, waiting for one {self.queued:.3f} s, other "
                f"threads waiting for one {self.others_queued:.3f} s")


class LoopHoldMeter:
    """Times every step of the loops that run while installed; ``last`` is the step
    just run if it took over half of ``limit`` by the wall clock (else None), and
    ``reports`` lists the steps that held the loop over ``limit``."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.last: StepTime | None = None
        self.reports: list[str] = []
        self._stats = _Schedstats()

    @contextmanager
    def installed(self) -> Iterator[LoopHoldMeter]:
        """Measure every ``asyncio.Handle`` run while inside (the loop's own steps:
        task steps, call_soon and reader callbacks all run through Handle._run)."""
        original = asyncio.Handle._run
        meter = self

        def measured(handle: asyncio.Handle) -> None:
            meter._measure(original, handle)

        asyncio.Handle._run = measured  # type: ignore[method-assign]
        try:
            yield self
        finally:
            asyncio.Handle._run = original  # type: ignore[method-assign]
            self._stats.close()

    def _measure(self, original: object, handle: asyncio.Handle) -> None:
        own = str(threading.get_native_id())
        self.last = None
        before = self._stats.read()
        start = time.perf_counter_ns()
        try:
            original(handle)  # type: ignore[operator]
        finally:
            wall = time.perf_counter_ns() - start
            if wall > self.limit * 0.5e9:  # only a long step is worth the arithmetic
                self.last = step = _step_time(own, before, self._stats.read(), wall)
                if step.held > self.limit:
                    self.reports.append(f"{handle!r}: {step}")


def _step_time(own: str, before: dict[str, tuple[int, int]],
               after: dict[str, tuple[int, int]], wall: int) -> StepTime:
    if own not in before or own not in after:  # no schedstat here: the wall clock alone
        return StepTime(wall=wall / 1e9, on_cpu=0.0, queued=0.0, others_queued=0.0)
    others_queued = sum(after[tid][1] - before.get(tid, (0, 0))[1]
                        for tid in after if tid != own)
    return StepTime(wall=wall / 1e9, on_cpu=(after[own][0] - before[own][0]) / 1e9,
                    queued=(after[own][1] - before[own][1]) / 1e9,
                    others_queued=others_queued / 1e9)
