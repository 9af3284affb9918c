"""The workers of workers.py, each also reporting what it cost the machine.

``python -m benchmarks.cpu_workers '<json spec>'`` runs the role ``spec["role"]`` names in
:data:`benchmarks.workers.ROLES` and adds to its JSON result the process's CPU seconds
(``cpu_s``), voluntary and involuntary context switches (``vcs``, ``ivcs``) and CPU
migrations of all its threads (``migrations``), measured around the role alone (the
interpreter's start and the client libraries' imports are left out; connecting and
subscribing are in). A sampler thread reads the migrations every 20 ms,
which costs the process a little CPU and a context switch per sample: compare processes
measured the same way, not these figures with a run of workers.py. Used by
:mod:`benchmarks.cpu_split`.
"""

from __future__ import annotations

import importlib
import resource
import threading
from pathlib import Path
from typing import Any

from .common import Spec, worker_main
from .workers import ROLES

__all__ = ["MigrationCounter", "migrations", "process_counters", "thread_migrations"]


def thread_migrations(pid: int | str = "self") -> dict[str, int]:
    """CPU migrations so far of each live thread of process ``pid``, by thread id
    (``se.nr_migrations`` of ``/proc/<pid>/task/<tid>/sched``); empty where the kernel does
    not say."""
    found: dict[str, int] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            text = (task / "sched").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        for line in text.splitlines():
            if line.startswith("se.nr_migrations"):
                found[task.name] = int(line.split(":")[1])
    return found


def migrations(pid: int | str = "self") -> int:
    """CPU migrations of the live threads of process ``pid`` so far."""
    return sum(thread_migrations(pid).values())


class MigrationCounter:
    """Counts this process's CPU migrations across threads that come and go: a thread's
    count vanishes from ``/proc`` when it ends (a client library's receiver thread does,
    at disconnect), so a sampler thread keeps the last figure of every thread seen."""

    def __init__(self, interval: float = 0.02) -> None:
        self._seen: dict[str, int] = {}
        self._start = thread_migrations()
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._sample, name="migration-counter",
                                        daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while True:
            self._seen.update(thread_migrations())
            if self._stop.wait(self._interval):
                return

    def stop(self) -> int:
        """Migrations since construction, of every thread seen (the sampler's own too)."""
        self._stop.set()
        self._thread.join()
        self._seen.update(thread_migrations())
        return sum(n - self._start.get(tid, 0) for tid, n in self._seen.items())


def process_counters() -> dict[str, float]:
    """This process's CPU seconds and context switches so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "vcs": float(ru.ru_nvcsw),
            "ivcs": float(ru.ru_nivcsw)}


#: What a role imports on first use: loaded before the measurement starts, so the counters
#: are the messages' cost, not the libraries' import time (over 100 ms of CPU for jmspy
#: with a transport, which over a 3,000-message run would read as 30+ us per message).
_LIBRARIES = ("stomp", "paho.mqtt.client", "jmspy", "jmspy.transports.stomp.transport",
              "jmspy.transports.mqtt.transport")


def _preload() -> None:
    for name in _LIBRARIES:
        importlib.import_module(name)


def _measured(role: Any) -> Any:
    def run(spec: Spec) -> dict[str, Any]:
        _preload()
        before = process_counters()
        moves = MigrationCounter()
        result: dict[str, Any] = role(spec)
        moved = moves.stop()
        after = process_counters()
        if "error" not in result:
            result.update({k: after[k] - before[k] for k in after})
            result["migrations"] = float(moved)
        return result

    return run


if __name__ == "__main__":
    worker_main({name: _measured(role) for name, role in ROLES.items()})
