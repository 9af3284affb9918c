"""The benchmark harness's wait for a quiet machine (benchmarks/quiet.py), on a fake clock
and fake CPU readings: it measures nothing and sleeps for real never."""

from __future__ import annotations

import sys
from pathlib import Path

# Appended, not prepended: the installed jmspy must win over the checkout's jmspy/ folder.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks.quiet import cpu_times, wait_quiet


class FakeMachine:
    """CPU readings that advance by one window's busy share per sleep, on a fake clock."""

    def __init__(self, busy_shares: list[float], ticks_per_window: float = 20.0,
                 readable: bool = True) -> None:
        self.shares = list(busy_shares)
        self.ticks = ticks_per_window
        self.busy = self.total = 0.0
        self.now = 0.0
        self.readable = readable
        self.sleeps: list[float] = []

    def read(self) -> tuple[float, float] | None:
        return (self.busy, self.total) if self.readable else None

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        share = self.shares.pop(0) if self.shares else 0.0
        self.busy += share * self.ticks
        self.total += self.ticks

    def clock(self) -> float:
        return self.now


def test_an_idle_machine_costs_one_window() -> None:
    m = FakeMachine([0.0])
    waited = wait_quiet(m.read, m.sleep, m.clock, window=0.1)
    assert m.sleeps == [0.1] and waited == 0.1


def test_busy_windows_are_waited_out_until_one_is_quiet() -> None:
    m = FakeMachine([0.9, 0.5, 0.2, 0.1, 0.0])
    waited = wait_quiet(m.read, m.sleep, m.clock, busy=0.10, window=0.1)
    assert len(m.sleeps) == 4  # the fourth window, at exactly the bound, is quiet
    assert abs(waited - 0.4) < 1e-9


def test_a_machine_that_never_calms_down_is_measured_after_the_limit() -> None:
    m = FakeMachine([1.0] * 1000)
    waited = wait_quiet(m.read, m.sleep, m.clock, window=0.1, limit=2.0)
    assert 2.0 <= waited < 2.1 + 1e-9
    assert len(m.sleeps) == 20


def test_without_cpu_readings_no_run_waits() -> None:
    m = FakeMachine([1.0], readable=False)
    assert wait_quiet(m.read, m.sleep, m.clock) == 0.0
    assert m.sleeps == []


def test_cpu_times_reads_busy_and_total_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n")
    assert cpu_times(str(stat)) == (160.0, 1000.0)
    assert cpu_times(str(tmp_path / "missing")) is None
    (tmp_path / "odd").write_text("intr 1 2 3\n")
    assert cpu_times(str(tmp_path / "odd")) is None
