"""The work of the worker-pool benchmark (:mod:`.worker_pool`) and the records it leaves.

The listeners and Celery tasks run in pool threads, in the pool's spawned worker processes
(which import them by name: ``"benchmarks.pool_work:cpu_listener"``, so this module stays
light to import) and in Celery workers. Every call appends ``seq time`` to a file of its
own process (fixed-width lines, one ``write`` each, CLOCK_MONOTONIC, system-wide); the
measuring process (:mod:`.pool_runs`) reads those files to see the end of a run, its last
time, and whether every message was processed exactly once. The CPU work is calibrated
here too, in the process that plans the runs.
"""

from __future__ import annotations

import itertools
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import now

__all__ = ["ITERS_ENV", "LISTENERS", "RECORD_ENV", "SLEEP_S", "calibrate", "check",
           "cpu_listener", "cpu_work", "recording_pids", "sleep_listener", "sleep_takes",
           "sleep_work", "spin", "wait_records"]

SLEEP_S = 0.010
RECORD_ENV = "JMSPY_BENCH_POOL_RECORD"  # the directory the listeners record into
ITERS_ENV = "JMSPY_BENCH_POOL_ITERS"  # iterations of the CPU loop (calibrated)
LINE = 28  # bytes of one record: f"{seq:09d} {time:017.6f}\n"
LISTENERS = {"cpu": "benchmarks.pool_work:cpu_listener",
             "sleep": "benchmarks.pool_work:sleep_listener"}


# -- the work (runs in pool threads, pool processes, Celery workers) ----------------------
def spin(iterations: int) -> int:
    """Pure-Python CPU work: holds the GIL throughout."""
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


_record_lock = threading.Lock()
_record_fd: dict[tuple[int, str], int] = {}
_iters: list[int] = []


def record(seq: int) -> None:
    """Append ``seq`` and the time to this process's file in $JMSPY_BENCH_POOL_RECORD (one
    ``write`` of a short line with O_APPEND: atomic, so threads may share the file)."""
    key = (os.getpid(), os.environ[RECORD_ENV])
    fd = _record_fd.get(key)
    if fd is None:
        with _record_lock:
            fd = _record_fd.get(key)
            if fd is None:
                fd = os.open(os.path.join(key[1], f"{key[0]}.rec"),
                             os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                _record_fd[key] = fd
    os.write(fd, b"%09d %017.6f\n" % (seq, now()))


def cpu_work(seq: int) -> None:
    if not _iters:
        _iters.append(int(os.environ[ITERS_ENV]))
    spin(_iters[0])
    record(seq)


def sleep_work(seq: int) -> None:
    time.sleep(SLEEP_S)
    record(seq)


def cpu_listener(message: Any) -> None:
    cpu_work(int(message.text))


def sleep_listener(message: Any) -> None:
    sleep_work(int(message.text))


# -- records: counting and checking -------------------------------------------------------
def recorded(folder: Path) -> int:
    """Records written so far (cheap: file sizes)."""
    return sum(entry.stat().st_size for entry in os.scandir(folder)) // LINE


def wait_records(folder: Path, total: int, stall: float, alive: Callable[[], str | None]
                 ) -> str | None:
    """Wait until ``total`` records exist; the reason if not: a stall, or what ``alive()``
    (asked every 0.25 s) says. Polled every 50 ms, which costs no precision (the end
    time is the last record's) and next to no CPU (the pool's processes need it)."""
    seen, changed, asked = -1, now(), now()
    while True:
        got = recorded(folder)
        if got >= total:
            return None
        t = now()
        if got != seen:
            seen, changed = got, t
        elif t - changed > stall:
            return f"stalled: {got:,}/{total:,} records (nothing for {stall:.0f}s)"
        if t - asked > 0.25:
            asked = t
            why = alive()
            if why:
                return why
        time.sleep(0.05)


def check(folder: Path, count: int, warmup: int) -> tuple[float, dict[str, float]] | str:
    """The last record's time and what the files say, or what went wrong: every message
    ``-warmup .. count-1`` processed exactly once. ``processes``: how many processes
    recorded; ``cycle_ms``: the median time between two consecutive returns of one process
    (the work plus what it waits for between messages: meaningful for a process per
    worker, where each file is one worker)."""
    seen: dict[int, int] = {}
    t_last = 0.0
    cycles: list[float] = []
    files = 0
    for entry in os.scandir(folder):
        data = Path(entry.path).read_bytes()
        files += 1
        if len(data) % LINE:
            return f"a torn record in {entry.name}"
        times = []
        for line in data.splitlines():
            seq_s, t_s = line.split()
            seq = int(seq_s)
            seen[seq] = seen.get(seq, 0) + 1
            if seq >= 0:
                times.append(float(t_s))
        times.sort()
        if len(times) > 2:
            cycles.append(statistics.median(b - a for a, b in itertools.pairwise(times)))
        t_last = max([t_last, *times])
    twice = sorted(s for s, n in seen.items() if n > 1)
    missing = [s for s in range(-warmup, count) if s not in seen]
    stray = sorted(s for s in seen if not -warmup <= s < count)
    if twice or missing or stray:
        parts = []
        if twice:
            parts.append(f"{len(twice)} processed more than once (e.g. {twice[:5]})")
        if missing:
            parts.append(f"{len(missing)} never processed (e.g. {missing[:5]})")
        if stray:
            parts.append(f"{len(stray)} unknown (e.g. {stray[:5]})")
        return f"NOT exactly once: {count:,} messages + {warmup} warm-up: " + "; ".join(parts)
    extra = {"processes": float(files)}
    if cycles:
        extra["cycle_ms"] = statistics.median(cycles) * 1e3
    return t_last, extra


def recording_pids(folder: Path) -> list[int]:
    return [int(entry.name.split(".")[0]) for entry in os.scandir(folder)]


# -- calibration ----------------------------------------------------------------------------
def calibrate(target_ms: float) -> tuple[int, float]:
    """Iterations of :func:`spin` that take ``target_ms`` of CPU here, and what they take
    (median of the samples). Timed on this thread's CPU clock, not the wall clock: the
    machine is shared, and under load most 2 ms samples are cut by other processes'
    time slices."""
    def timed(n: int, repeat: int) -> float:
        samples = []
        for _ in range(repeat):
            t0 = time.thread_time()
            spin(n)
            samples.append(time.thread_time() - t0)
        return statistics.median(samples)

    n = 20_000
    for _ in range(4):
        n = max(1000, round(n * target_ms / 1e3 / timed(n, 15)))
    return n, timed(n, 41) * 1e3


def sleep_takes() -> float:
    """What ``time.sleep(SLEEP_S)`` really takes here, ms (median of 25)."""
    samples = []
    for _ in range(25):
        t0 = time.perf_counter()
        time.sleep(SLEEP_S)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3
