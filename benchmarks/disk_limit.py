"""(c) The disk's own limit for one synchronous persistent producer: a 1 KB append and an
``fdatasync`` of it, as a rate (issue 52).

A broker that confirms a persistent message only once it is on disk cannot confirm one
producer's messages faster than the disk makes one small write durable, whatever its
store. The row measures exactly that on the file system the brokers' data directories use
(the temporary directory): ``count`` appends of 1 KB to one file, each followed by
``os.fdatasync``, in a fresh file each run. The persistent rows of part (c) are divided
by it in the same round, so a ratio says how close a broker comes to the disk.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

__all__ = ["RECORD", "measure"]

RECORD = b"x" * 1024


def measure(count: int) -> dict[str, Any]:
    """``count`` durable 1 KB appends: their rate (per second) and the p50/p99 of one."""
    fd, path = tempfile.mkstemp(prefix="jmspy-bench-disk-")
    times: list[float] = []
    try:
        start = time.perf_counter()
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(fd, RECORD)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    return {"rate": count / elapsed, "p50_ms": times[len(times) // 2] * 1000,
            "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))] * 1000}
