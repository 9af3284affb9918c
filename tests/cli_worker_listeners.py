"""Listeners for ``jmspy worker`` tests (tests/test_cli_worker.py): importable by name (the
worker imports ``module:callable``, and a ``--processes`` child imports it again), at
module level, configured by environment variables the test passes to the subprocess."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

_lock = threading.Lock()


def _append(message: Any) -> None:
    """One line "text pid redelivered" per handled message in $WORKER_LOG (one write in
    append mode: lines from threads and processes never interleave)."""
    line = f"{message.text} {os.getpid()} {int(message.redelivered)}\n"
    with _lock, open(os.environ["WORKER_LOG"], "a") as log:
        log.write(line)


def record(message: Any) -> None:
    """Sleep $WORKER_SLEEP seconds (default 0: an I/O-bound job's wait), then record."""
    delay = float(os.environ.get("WORKER_SLEEP", "0"))
    if delay:
        time.sleep(delay)  # stands in for the job's I/O
    _append(message)


def burn(message: Any) -> None:
    """Pure-Python CPU work (a few ms), then record: the --processes listener."""
    total = 0
    for i in range(int(os.environ.get("WORKER_BURN", "50000"))):
        total += i * i % 7
    _append(message)
