"""Shared helpers: clocks, medians, the progress bar, worker subprocesses, interleaved runs.

Every measurement runs in a fresh worker process started as ``python -m benchmarks.<module>
'<json spec>'``; the worker prints one JSON line (its measurements, or ``{"error": ...}``).
Workers run from a neutral directory with only a link to this package on ``PYTHONPATH``,
so a source checkout's ``jmspy/`` folder never shadows the installed (compiled) package.
Timestamps use CLOCK_MONOTONIC, which is system-wide on Linux: a producer's send time can
be compared with a consumer's receive time in another process.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .quiet import wait_quiet

PACKAGE_DIR = Path(__file__).resolve().parent
BODY = "x" * 100

Spec = dict[str, Any]
Metrics = dict[str, float]


def now() -> float:
    """Seconds on the system-wide monotonic clock (comparable across processes)."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, ``q`` in 0..100."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def latency_metrics(latencies: Sequence[float]) -> Metrics:
    if not latencies:
        return {}
    return {"p50_ms": percentile(latencies, 50) * 1e3, "p99_ms": percentile(latencies, 99) * 1e3}


# -- progress bar ------------------------------------------------------------------------
class Progress:
    """A one-line progress bar on stderr: ``[####----] 12/40 0:35 eta 1:10  part c: ...``."""

    def __init__(self, total: int, width: int = 28, stream: Any = None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.width = width
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.label = ""
        self.rows: list[Any] = []  # every row being measured, for reporting on interrupt
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def show(self, label: str) -> None:
        self.label = label
        self._render()

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        self._render()

    def _render(self) -> None:
        elapsed = time.monotonic() - self.started
        frac = self.done / self.total
        filled = int(self.width * frac)
        eta = f"eta {_clock(elapsed / frac - elapsed)}" if self.done else "eta ?"
        line = (f"[{'#' * filled}{'-' * (self.width - filled)}] {self.done}/{self.total} "
                f"{_clock(elapsed)} {eta}  {self.label}")[:150]
        if self._tty:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()

    def log(self, text: str) -> None:
        """A message above the bar."""
        self.stream.write(("\r\x1b[2K" if self._tty else "") + text + "\n")
        self._render()


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


# -- worker processes --------------------------------------------------------------------
_neutral: Path | None = None


def neutral_dir() -> Path:
    """A temp dir holding only a ``benchmarks`` link: the workers' cwd and PYTHONPATH."""
    global _neutral
    if _neutral is None:
        _neutral = Path(tempfile.mkdtemp(prefix="jmspy-bench-"))
        (_neutral / "benchmarks").symlink_to(PACKAGE_DIR, target_is_directory=True)
    return _neutral


def worker_env(pure: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(neutral_dir())
    env["JMSPY_PUREPYTHON"] = "1" if pure else ""
    env["PYTHONUNBUFFERED"] = "1"
    return env


def worker_cmd(module: str, spec: Spec) -> list[str]:
    return [sys.executable, "-m", f"benchmarks.{module}", json.dumps(spec)]


def _parse(stdout: str, stderr: str, code: int | None) -> Metrics | dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    tail = " | ".join(stderr.strip().splitlines()[-3:]) or f"exit status {code}, no output"
    return {"error": f"worker failed: {tail}"}


def run_worker(module: str, spec: Spec, timeout: float = 300.0, pure: bool = False
               ) -> dict[str, Any]:
    """Run one worker to completion; its JSON result or ``{"error": ...}``."""
    try:
        proc = subprocess.run(worker_cmd(module, spec), env=worker_env(pure), cwd=neutral_dir(),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"{spec.get('role')} timed out after {timeout:.0f}s"}
    return _parse(proc.stdout, proc.stderr, proc.returncode)


def _run_producers(module: str, producer: Spec, n: int, timeout: float) -> dict[str, Any]:
    """``n`` producer processes at once, ``producer['count']`` split between them; the
    earliest ``t_start`` (or the first error)."""
    share = producer["count"] // n
    procs = [subprocess.Popen(worker_cmd(module, {**producer, "count": share}),
                              env=worker_env(), cwd=neutral_dir(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(n)]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results.append(_parse(out, err, proc.returncode))
    for r in results:
        if "error" in r:
            return r
    return {"t_start": min(r["t_start"] for r in results)}


def exchange(module: str, consumer: Spec, producer: Spec, timeout: float = 300.0,
             producers: int = 1, expect: int | None = None,
             on_ready: Callable[[], None] | None = None
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Consumer and producer in separate processes: the consumer prints ``READY`` once
    subscribed; then the producer runs (``producers`` > 1: that many at once, sharing the
    count). Returns (the consumer's result, the producer's); on any failure the second is
    empty and the first says why (``{"error": ...}``, or what a consumer that never got
    ready printed), so a caller checks only ``if not sent``.

    The one place that orders the two processes, for every pair benchmark; ``expect`` set,
    a consumer that received another count is a failure too; ``on_ready`` runs between
    the consumer's READY and the producer's start (a probe of the broker's state).
    """
    proc = subprocess.Popen(worker_cmd(module, consumer), env=worker_env(), cwd=neutral_dir(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()
        if first.strip() != "READY":
            rest, err = proc.communicate(timeout=30)
            return dict(_parse(first + rest, err, proc.returncode)), {}
        if on_ready is not None:
            on_ready()
        sent = (run_worker(module, producer, timeout) if producers == 1
                else _run_producers(module, producer, producers, timeout))
        if "error" in sent:
            return sent, {}
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"consumer timed out after {timeout:.0f}s"}, {}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    got: dict[str, Any] = dict(_parse(out, err, proc.returncode))
    if "error" in got:
        return got, {}
    if expect is not None and got["count"] != expect:
        return {"error": f"received {got['count']:,} of {expect:,} messages"}, {}
    return got, sent


def run_pair(module: str, consumer: Spec, producer: Spec, timeout: float = 300.0,
             producers: int = 1) -> dict[str, Any]:
    """``exchange`` measured: throughput = messages / (last receive - first send)."""
    got, sent = exchange(module, consumer, producer, timeout, producers)
    if not sent:
        return got
    elapsed = got["t_last"] - sent["t_start"]
    result = {"rate": got["count"] / elapsed if elapsed > 0 else float("nan")}
    result.update({k: v for k, v in got.items() if k.endswith("_ms")})
    return result


def worker_main(roles: Mapping[str, Callable[[Spec], dict[str, Any]]]) -> None:
    """Entry point of a worker module: run ``roles[spec['role']](spec)``, print JSON."""
    spec: Spec = json.loads(sys.argv[1])
    try:
        result = roles[spec["role"]](spec)
    except Exception as exc:  # reported as a row, not a crash of the suite
        traceback.print_exc(file=sys.stderr)
        result = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # do not wait for client library threads that linger


def signal_ready() -> None:
    print("READY", flush=True)


# -- results and interleaved runs -----------------------------------------------------------
@dataclass(frozen=True)
class Goal:
    """A figure one row must reach, declared where that row is made (one place to read
    what a row is for) and printed beside it with ``ok`` or ``MISSED``.

    A ratio goal (``over`` set) divides the row's ``metric`` by the ``over`` row's, run by
    run in the same round (so the same machine state), and takes the median; an absolute
    goal (``over`` None) takes the row's median ``metric``. ``at_most``: the figure must
    stay at or below ``bound`` (memory), else reach it. ``issue`` is where it was set
    (benchmarks/README.md explains each goal).
    """

    bound: float
    over: str | None = None  # key of the row divided by
    label: str = ""  # the ``over`` row in a few words, for the table
    metric: str = "rate"
    at_most: bool = False
    unit: str = "x"  # "x" for ratios; the unit of an absolute figure
    issue: int = 17

    def value(self, row: Row, by_key: Mapping[str, Row]) -> float | None:
        """The figure compared with ``bound``, or None when it was not measured."""
        if not row.runs:
            return None
        if self.over is None:
            got = row.med(self.metric)
            return None if math.isnan(got) else got  # NaN: the metric was not reported
        other = by_key.get(self.over)
        if other is None or not other.runs:
            return None
        ratios = paired_ratios(row, other, self.metric)
        return median(ratios) if ratios else None

    def met(self, value: float) -> bool:
        return value <= self.bound if self.at_most else value >= self.bound

    def show(self, number: float) -> str:
        if self.unit == "x":
            return f"{number:.2f}x"
        if self.unit == "msgs/s":
            return f"{number / 1e3:,.0f}k msgs/s"
        return f"{number:,.2f} {self.unit}"

    def verdict(self, row: Row, by_key: Mapping[str, Row]) -> str:
        """``"vs pure: 3.41x >= 3x ok"``; ``n/a`` when this row or the other is missing."""
        op = "<=" if self.at_most else ">="
        bound = (f"{self.bound:g}x" if self.unit == "x" else
                 f"{self.bound / 1e3:g}k msgs/s" if self.unit == "msgs/s" else
                 f"{self.bound:g} {self.unit}")
        value = self.value(row, by_key)
        head = f"{self.label}: " if self.label else ""
        if value is None:
            return f"{head}{op} {bound} n/a"
        return f"{head}{self.show(value)} {op} {bound} {'ok' if self.met(value) else 'MISSED'}"


@dataclass
class Row:
    """One line of the results table: a configuration measured ``runs`` times."""

    part: str
    key: str
    name: str
    config: str
    runs: list[dict[str, float]] = field(default_factory=list)
    unavailable: str | None = None
    baseline: str | None = None  # key of the row the ratio column divides by
    #: legacy single goal (a ratio over ``baseline``), still set by worker_pool.py; new
    #: rows declare ``goals``, and :meth:`all_goals` folds a target into them
    target: float | None = None
    ratios: list[float] = field(default_factory=list)
    note: str = ""
    also: list[tuple[str, str]] = field(default_factory=list)  # (key, label) ratios for note
    short: str = ""  # the configuration in a few words, for the plot
    goals: list[Goal] = field(default_factory=list)  # what this row must reach

    def all_goals(self) -> list[Goal]:
        """``goals``, plus a legacy ``target`` as a ratio goal over ``baseline``."""
        if self.target and self.baseline and not any(
                g.over == self.baseline for g in self.goals):
            return [Goal(self.target, over=self.baseline, issue=5), *self.goals]
        return list(self.goals)

    def med(self, metric: str) -> float:
        return median([r[metric] for r in self.runs if metric in r])

    @property
    def ratio(self) -> float | None:
        return median(self.ratios) if self.ratios else None


@dataclass
class Config:
    """A configuration to measure: ``run(round_index)`` returns metrics or ``{"error"}``."""

    row: Row
    run: Callable[[int], dict[str, Any]]
    #: measured in the first ``rounds`` rounds only (None: every round): for a figure so
    #: slow to make that one run per suite is its price (100,000 queues on a fresh broker)
    rounds: int | None = None


def run_interleaved(configs: Sequence[Config], runs: int, progress: Progress) -> list[Row]:
    """Round-robin over the configs ``runs`` times (so drift hits all alike), each run
    started on a quiet machine (:mod:`.quiet`); a config that errors once is marked not
    available and skipped afterwards. Ratios pair each run with its baseline's run of the
    same round."""
    progress.rows.extend(c.row for c in configs)
    for rnd in range(runs):
        for cfg in configs:
            row = cfg.row
            progress.show(f"part {row.part} run {rnd + 1}/{runs}: {row.name}, {row.config}")
            if row.unavailable is None and (cfg.rounds is None or rnd < cfg.rounds):
                waited = wait_quiet()
                got = cfg.run(rnd)
                if "error" in got:
                    row.unavailable = str(got["error"])
                    progress.log(f"  part {row.part} {row.name} ({row.config}): "
                                 f"not available: {row.unavailable}")
                else:
                    row.runs.append({**{k: float(v) for k, v in got.items()},
                                     "quiet_wait_s": waited})
            progress.advance()
    rows = [c.row for c in configs]
    by_key = {r.key: r for r in rows}
    for row in rows:
        base = by_key.get(row.baseline or "")
        if base is not None and row.runs and base.runs:
            row.ratios = paired_ratios(row, base)
        notes = [row.note] if row.note else []
        for key, label in row.also:
            other = by_key.get(key)
            if other is not None and row.runs and other.runs:
                notes.append(f"{median(paired_ratios(row, other)):.2f}x {label}")
        row.note = "; ".join(notes)
    return rows


def paired_ratios(row: Row, base: Row, metric: str = "rate") -> list[float]:
    """Run i of ``row`` over run i of ``base`` (same round, so the same machine state)."""
    return [a[metric] / b[metric] for a, b in zip(row.runs, base.runs, strict=False)
            if b.get(metric)]
