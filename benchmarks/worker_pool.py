"""MDB-like worker pools (seed 004): what ``jmspy.pool.WorkerPool`` buys for CPU-bound and
for sleep-bound listeners, and the same two workloads on Celery beside it.

``python -m benchmarks.worker_pool [--runs 3] [--no-celery] [--cpu-count 2000]
[--sleep-count 6400]``

Workloads (the listener functions live in :mod:`.pool_work`, so the pool's spawned worker
processes import them as ``"benchmarks.pool_work:cpu_listener"``):

* *CPU-bound*: a pure-Python loop calibrated at start, in this process, to take 2 ms
  (``--cpu-ms``; on the thread's CPU clock, the machine being shared) on this machine;
  the iteration count goes to every worker. ``WorkerPool(processes=True,
  max_pool_size=2)`` against **one listener: a plain consumer with a MessageListener**
  (AUTO_ACKNOWLEDGE, the listener thread of one session) on the same messages: throughput
  ratio, goal >= 1.7x on a 2-core machine. A ``WorkerPool`` of 1 *thread* runs beside
  them (its ratio to the plain listener is the pool's own overhead). Default flow limit
  (``imqConsumerFlowLimit`` 1000). The notes split the worker processes' time per message
  (``/proc/<pid>/task/*/schedstat``): on a CPU, waiting for a CPU (the machine's load,
  ours included), waiting for work (the pool's hand-over between messages); and give the
  CPU the dispatching process spends per message.
* *sleep-bound*: ``time.sleep(0.010)`` per message, a ``WorkerPool`` of 32 threads
  against the ideal 32 x 100 = 3,200 msgs/s: ratio, goal >= 0.9x; with
  ``prefetch="pool"`` (flow limit 32: the pool is not reduced, the seed's advice), with
  ``prefetch=64`` (``vm://`` only) and with the default flow limit 1000. The consumer
  asks the broker for more only once its unconsumed messages fall to
  ``imqConsumerFlowThreshold`` (50 %) of the limit, which a limit equal to the pool size
  makes visible. The note gives what one ``time.sleep(0.010)`` really takes here (the
  ideal it allows) and the process's CPU per message.

Each over ``vm://`` (broker, producer and pool in one worker process) and over
``stomp://`` to ``jmspy broker --in-memory`` (started once, a subprocess; a fresh queue per
run; producer and pool in one worker process, on two connections). NON_PERSISTENT
messages whose text is their sequence number.

Celery (if installed; ``--no-celery`` skips it): kombu's ``memory://`` transport only
passes messages between the threads of one process ("Messages can be passed only between
threads", kombu/transport/memory.py), so it cannot feed a separate worker; Celery runs on
RabbitMQ (AMQP, started the way ``benchmarks/peers.py`` starts it, from the Debian
package), transient messages (``task_default_delivery_mode="transient"``: the jmspy broker
is in memory too), ``task_acks_late=True`` (acknowledged when the task returns, as the
pool does), ``task_ignore_result=True``, default prefetch multiplier (4), a fresh queue per
run. A fresh ``celery worker`` process per run (``--pool=prefork --concurrency=2`` for the
CPU row, ``--pool=threads --concurrency=32`` for the sleep row), fed by ``send_task`` from
the measuring process.

How it is timed: every run is a fresh worker process (:mod:`.pool_runs`) started from the
neutral directory (``common``). The pool (or Celery worker) is started and warmed up first
with a few unmeasured messages (2 x pool size, at least 4: the pool's child processes are
spawned on first use, its threads grow 2 at a time; Celery's prefork children and threads
likewise), then the clock runs from the first message sent to the last listener return. Every
listener call appends ``seq time`` to a file of its own process (fixed-width lines, one
``write`` each, CLOCK_MONOTONIC, system-wide): the measuring process counts those to see
the end, takes the last time, and checks that every message was processed exactly once
(a gap or a duplicate fails the run, as do a listener failure or redelivery counted by the
pool, and a stall of 20 s). Rounds are interleaved (every configuration once, then
again), figures are medians, ratios the median of same-round ratios.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .common import Config, Progress, Row, Spec, run_interleaved, run_worker
from .flow_control import _table
from .peers import _interop, start_jmspy
from .pool_runs import MODULE
from .pool_work import SLEEP_S, calibrate, sleep_takes

CPU_COUNT = 2000
SLEEP_COUNT = 6400
CPU_MS = 2.0
CPU_POOL = 2
SLEEP_POOL = 32
TARGET_CPU = 1.7  # process pool of 2 / one listener
TARGET_SLEEP = 0.9  # thread pool of 32 / (32 x 100 msgs/s)


# -- brokers, started on first use -----------------------------------------------------------
class Lazy:
    """A broker started on first use; its failure remembered as the reason."""

    def __init__(self, name: str, start: Callable[[], Any]) -> None:
        self.name, self._start = name, start
        self.process: Any = None
        self.failure: str | None = None

    def get(self, log: Callable[[str], None]) -> Any:
        if self.process is None and self.failure is None:
            log(f"starting {self.name} ...")
            try:
                self.process = self._start()
            except Exception as exc:
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.failure = f"{self.name} could not start: {text}"
        return self.process

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


def amqp_url(rabbit: Any) -> str:
    """The AMQP listener tests/interop/brokers.py wrote into the RabbitMQ config."""
    for line in (Path(rabbit.workdir) / "rabbitmq.conf").read_text().splitlines():
        if line.startswith("listeners.tcp.default"):
            return f"amqp://guest:guest@{line.split('=')[1].strip()}//"
    raise RuntimeError("no AMQP listener in the RabbitMQ config")


def celery_missing() -> str | None:
    try:
        import celery  # noqa: F401
    except ImportError as exc:
        return f"Celery is not installed ({exc}); pip install celery (benchmark-only)"
    return None


# -- configurations and rows -------------------------------------------------------------------
def _jmspy(transport: str, broker: Lazy, base: Spec, log: Callable[[str], None],
           _rnd: int) -> dict[str, Any]:
    spec = {**base, "queue": f"pool.{uuid.uuid4().hex[:12]}"}
    if transport == "vm":
        spec["url"] = "vm"
    else:
        proc = broker.get(log)
        if proc is None:
            return {"error": broker.failure}
        spec["url"] = f"stomp://127.0.0.1:{proc.stomp_port}?heartbeat=0"
    return run_worker(MODULE, spec, timeout=300.0)


def _celery(rabbit: Lazy, base: Spec, log: Callable[[str], None], _rnd: int
            ) -> dict[str, Any]:
    missing = celery_missing()
    if missing:
        return {"error": missing}
    proc = rabbit.get(log)
    if proc is None:
        return {"error": rabbit.failure}
    spec = {**base, "broker": amqp_url(proc), "queue": f"pool.{uuid.uuid4().hex[:12]}"}
    return run_worker(MODULE, spec, timeout=300.0)


def _jmspy_config(tr: str, key: str, name: str, config: str, spec: Spec, iters: int,
                  broker: Lazy, log: Callable[[str], None], **row: Any) -> Config:
    label = "vm://" if tr == "vm" else "stomp:// -> jmspy broker"
    base = {"role": "jmspy", "iters": iters, "warmup": max(4, 2 * int(spec.get("pool", 1))),
            **spec}
    return Config(Row("pool", f"{key}/{tr}", f"jmspy {label}, {name}", config, **row),
                  functools.partial(_jmspy, tr, broker, base, log))


def configs(celery: bool, cpu_count: int, sleep_count: int, iters: int, cpu_ms: float,
            log: Callable[[str], None], jmspy_broker: Lazy, rabbit: Lazy) -> list[Config]:
    out: list[Config] = []
    cpu = f"{cpu_count:,} msgs x {cpu_ms:.2f} ms CPU"
    slp = f"{sleep_count:,} msgs x sleep {SLEEP_S * 1e3:g} ms"
    common: dict[str, Any] = {"iters": iters, "broker": jmspy_broker, "log": log}
    for tr in ("vm", "stomp"):
        vs_celery = celery and tr == "stomp"
        cpu_spec = {"work": "cpu", "count": cpu_count}
        out += [  # the default flow limit (1000)
            _jmspy_config(tr, "cpu/single", "one listener",
                          f"plain consumer + MessageListener, auto-ack, {cpu}",
                          {**cpu_spec, "mode": "single"}, **common),
            _jmspy_config(tr, "cpu/pool2", "process pool of 2",
                          f"WorkerPool(processes=True, max_pool_size=2), {cpu}",
                          {**cpu_spec, "mode": "pool", "pool": CPU_POOL, "processes": True},
                          baseline=f"cpu/single/{tr}", target=TARGET_CPU,
                          also=[(f"cpu/thread1/{tr}", "the thread pool of 1")]
                          + ([("cpu/celery", "Celery prefork 2")] if vs_celery else []),
                          **common),
            _jmspy_config(tr, "cpu/thread1", "thread pool of 1",
                          f"WorkerPool(max_pool_size=1) threads, {cpu}",
                          {**cpu_spec, "mode": "pool", "pool": 1, "processes": False},
                          baseline=f"cpu/single/{tr}", **common),
        ]
        # prefetch="pool" is the seed's advice (flow limit = pool size); the default flow
        # limit (1000) and 2 x the pool beside it: the consumer asks for more only when
        # its unconsumed messages fall to imqConsumerFlowThreshold (50 %) of the limit
        for suffix, prefetch, what in (("", "pool", "prefetch='pool' (flow limit 32)"),
                                       ("-64", 64, "prefetch=64"),
                                       ("-default", None, "default flow limit 1000")):
            if suffix == "-64" and tr != "vm":
                continue
            out.append(_jmspy_config(
                tr, f"sleep/pool32{suffix}", "thread pool of 32",
                f"WorkerPool(max_pool_size=32) threads, {what}, {slp}",
                {"work": "sleep", "count": sleep_count, "mode": "pool", "pool": SLEEP_POOL,
                 "processes": False, "prefetch": prefetch},
                target=TARGET_SLEEP,
                also=[("sleep/celery", "Celery threads 32")] if vs_celery else [],
                **common))
    if celery:
        celery_rows: list[tuple[str, str, int, str, int, str, dict[str, Any]]] = [
            ("cpu/celery", "cpu", cpu_count, "prefork", CPU_POOL, cpu,
             {"baseline": "cpu/single/stomp"}),
            ("sleep/celery", "sleep", sleep_count, "threads", SLEEP_POOL, slp, {})]
        for key, work, count, pool, conc, desc, row in celery_rows:
            base = {"role": "celery", "work": work, "count": count, "pool": pool,
                    "concurrency": conc, "iters": iters, "warmup": max(4, 2 * conc)}
            out.append(Config(
                Row("pool", key, f"Celery -> RabbitMQ (AMQP), {pool} {conc}",
                    f"celery worker --pool={pool} --concurrency={conc}, acks_late, {desc}",
                    **row),
                functools.partial(_celery, rabbit, base, log)))
    return out


def planned(celery: bool) -> int:
    """Configurations per round."""
    return 11 + (2 if celery else 0)


def measure(runs: int = 3, celery: bool = True, cpu_count: int = CPU_COUNT,
            sleep_count: int = SLEEP_COUNT, cpu_ms: float = CPU_MS,
            progress: Progress | None = None) -> tuple[list[Row], dict[str, float]]:
    """Every configuration ``runs`` times, interleaved. The rows (ratios filled in) and the
    calibration (``iters``, ``cpu_ms``, ``sleep_ms``)."""
    progress = progress or Progress(runs * planned(celery))
    progress.show("calibrating the CPU work")
    iters, took = calibrate(cpu_ms)
    slept = sleep_takes()
    calib = {"iters": float(iters), "cpu_ms": took, "sleep_ms": slept,
             "load_before": os.getloadavg()[0]}
    progress.log(f"calibrated: {iters:,} iterations = {took:.2f} ms; "
                 f"time.sleep({SLEEP_S:g}) takes {slept:.2f} ms")
    jmspy_broker = Lazy("jmspy broker --in-memory", start_jmspy)
    rabbit = Lazy("RabbitMQ", lambda: _interop().start_rabbitmq())
    cfgs = configs(celery, cpu_count, sleep_count, iters, took, progress.log, jmspy_broker,
                   rabbit)
    try:
        rows = run_interleaved(cfgs, runs, progress)
    finally:
        progress.show("stopping brokers")
        jmspy_broker.stop()
        rabbit.stop()
        progress.close()
    calib["load_after"] = os.getloadavg()[0]
    for row in rows:
        notes(row, took, slept)
    return rows, calib


def notes(row: Row, cpu_ms: float, sleep_ms: float) -> None:
    """The sleep rows' ratio to the ideal, and what else the runs tell, in ``row.note``."""
    if not row.runs:
        return
    said = [row.note] if row.note else []
    if row.key.startswith("sleep/"):  # against the ideal 32 x 100 msgs/s
        ideal = SLEEP_POOL / SLEEP_S
        row.ratios = [r["rate"] / ideal for r in row.runs]
        real = SLEEP_POOL / (sleep_ms / 1e3)
        said.append(f"sleep({SLEEP_S:g}) takes {sleep_ms:.2f} ms here: {real:,.0f}/s at best, "
                    f"{row.med('rate') / real:.2f}x of that")
    if row.key.startswith("cpu/single/"):
        said.append(f"{1e3 / row.med('rate'):.2f} ms per message ({cpu_ms:.2f} ms of work)")
    if "run_ms" in row.runs[0] and row.key.startswith("cpu/"):  # adds up to 1 / rate x n
        who = "the worker processes" if "idle_ms" in row.runs[0] else "the process"
        said.append(f"per message {who} ran {row.med('run_ms'):.2f} ms, waited "
                    f"{row.med('wait_ms'):.2f} ms for a CPU"
                    + (f", {row.med('idle_ms'):.2f} ms for work" if "idle_ms" in row.runs[0]
                       else ""))
    if "cpu_us" in row.runs[0] and row.key.startswith("cpu/") and (
            row.key.startswith("cpu/pool2/") or row.key.endswith("/celery")):
        said.append(f"dispatching process: {row.med('cpu_us'):.0f} µs CPU per message"
                    + (" (the producer's sends too)" if "/pool2/" in row.key else ""))
    if "workers" in row.runs[0]:
        if row.key.startswith("sleep/"):
            busy = row.med("cpu_us") * row.med("rate") / 1e6
            said.append(f"the process: {row.med('cpu_us'):.0f} µs CPU per message "
                        f"({busy:.0%} of a core)")
        peak = max(int(r["peak"]) for r in row.runs)
        said.append(f"peak {peak} at once (concurrency {int(row.runs[0]['concurrency'])})")
    if row.key.endswith("/celery"):
        said.append(f"enqueueing took {row.med('send_s'):.2f} s")
    row.note = "; ".join(said)


def report(rows: list[Row], calib: dict[str, float], runs: int) -> str:
    legend = [f"  {r.key:<19} {r.name}: {r.config}" for r in rows]
    lines = []
    for r in rows:
        if r.unavailable or not r.runs:
            lines.append([r.key, "-", "-", "-", "-",
                          f"not available: {r.unavailable or 'no runs'}"[:200]])
            continue
        ratio = r.ratio
        target = "" if r.target is None else (
            f">= {r.target:g}x {'ok' if ratio is not None and ratio >= r.target else 'MISSED'}")
        shown = "" if ratio is None else f"{ratio:.2f}x"
        if ratio is not None and r.target is not None and shown == f"{r.target:.2f}x" and (
                ratio < r.target):
            shown = f"{ratio:.3f}x"  # just short of the goal: say so
        lines.append([r.key, f"{r.med('rate'):,.0f}",
                      " ".join(f"{x['rate']:,.0f}" for x in r.runs), shown, target, r.note])
    loads = [x["load1"] for r in rows for x in r.runs if "load1" in x]
    during = (f", {min(loads):.2f}-{max(loads):.2f} at the end of the runs (median "
              f"{statistics.median(loads):.2f})" if loads else "")
    return "\n".join([
        f"medians of {runs} interleaved run(s) on {os.cpu_count()} CPUs (1-min load average "
        f"{calib['load_before']:.2f} before, {calib['load_after']:.2f} after{during}); CPU work "
        f"calibrated to {int(calib['iters']):,} iterations = {calib['cpu_ms']:.2f} ms; "
        f"time.sleep({SLEEP_S:g}) takes {calib['sleep_ms']:.2f} ms here",
        "", *legend, "",
        "ratio: cpu rows over the one listener on the same transport (Celery: over the "
        "stomp:// one listener); sleep rows over 32 x 100 = 3,200 msgs/s; the note's "
        "\"x <row>\" ratios are same-round ratios to that row",
        "",
        _table(["row", "msgs/s", "per round", "ratio", "goal", "note"], lines, {1, 3}),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker_pool",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-celery", action="store_true", help="skip the Celery rows")
    parser.add_argument("--cpu-count", type=int, default=CPU_COUNT)
    parser.add_argument("--sleep-count", type=int, default=SLEEP_COUNT)
    parser.add_argument("--cpu-ms", type=float, default=CPU_MS)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.cpu_count < 1 or args.sleep_count < 1 or args.cpu_ms <= 0:
        parser.error("--runs, --cpu-count, --sleep-count >= 1; --cpu-ms > 0")
    started = time.monotonic()
    rows, calib = measure(args.runs, not args.no_celery, args.cpu_count, args.sleep_count,
                          args.cpu_ms)
    print(report(rows, calib, args.runs))
    if args.no_celery:
        print("\nCelery rows skipped (--no-celery)")
    print(f"\n{time.monotonic() - started:.0f} s")
    failed = [r for r in rows if r.unavailable and not r.key.endswith("/celery")]
    for r in rows:
        if r.unavailable:
            print(f"FAILED: {r.key} ({r.config}): {r.unavailable}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
