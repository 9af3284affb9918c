"""Listeners for the worker-pool tests that run in worker processes: importable by name
(a spawned process imports its listener), at module level, configured by environment
variables the test sets before the pool starts (a child inherits them)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any


def record(message: Any) -> None:
    """Append "text pid redelivered" to $POOL_LOG; kill this process the first time it
    sees the text in $POOL_DIE (SIGKILL: no cleanup, as a crash in a C extension)."""
    marker = Path(os.environ["POOL_LOG"] + ".died")
    if message.text == os.environ.get("POOL_DIE") and not marker.exists():
        marker.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    with open(os.environ["POOL_LOG"], "a") as log:
        log.write(f"{message.text} {os.getpid()} {int(message.redelivered)}\n")


def burn(message: Any) -> int:
    """About 2 ms of pure-Python work (the benchmark's CPU-bound listener)."""
    total = 0
    for i in range(int(os.environ.get("POOL_BURN", "20000"))):
        total += i * i % 7
    return total


class Failing:
    """Raises on every message (dead-lettering from a worker process)."""

    def on_message(self, message: Any) -> None:
        raise ValueError(f"cannot handle {message.text}")
