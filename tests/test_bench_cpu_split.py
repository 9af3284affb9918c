"""benchmarks.cpu_split's warm-up: enough unmeasured runs for a JVM broker's JIT."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks.cpu_split import WARMUP_MESSAGES, WORKLOADS, warmup_runs


def test_every_workload_warms_each_broker_with_at_least_the_warmup_messages() -> None:
    for _ack, _window, _receipts, count in WORKLOADS.values():
        runs = warmup_runs(count)
        assert runs * count >= WARMUP_MESSAGES
        assert (runs - 1) * count < WARMUP_MESSAGES  # and not a run more than that


def test_a_run_larger_than_the_warmup_is_still_run_once_unmeasured() -> None:
    assert warmup_runs(WARMUP_MESSAGES * 3) == 1
    assert warmup_runs(5_000, messages=40_000) == 8
    assert warmup_runs(3_000, messages=40_000) == 14
