"""Reading on the executors of a Spark standalone cluster: one executor against two.

``python -m benchmarks.spark_cluster_rows [--count 200000] [--runs 3] [--per-trigger 50000]
[--partitions 4] [--cores 2]`` (pyspark 4.2+ and Java 17; ~5 min with the defaults; on a
2-CPU machine ``--cores 1 --partitions 2`` is the largest shape that fits). It
starts a master and two workers of ``--cores`` cores each on loopback
(:mod:`benchmarks.spark_standalone`) and ``jmspy broker --in-memory``, then streams a queue of
``--count`` messages (100-byte text bodies, filled with raw STOMP frames, not measured)
into the ``noop`` sink with ``numPartitions`` ``--partitions`` under reading leases, once
by an application given one executor (``spark.cores.max`` = ``--cores``) and once by one
given two (twice that), alternating, ``--runs`` times each. Each figure is the steady
rate of :func:`benchmarks.spark_rows.stream` (every data batch after the first, over the
time from the first's end to the last's; the run fails unless every message was read and
the queue ends empty). Goal: two executors >= 1.7x one.

The two workers and the driver share this machine's CPUs: where it has fewer than
2 x ``--cores`` + 1 of them, two executors cannot run twice as fast as one, and the
report says so next to the ratio instead of calling the goal missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .spark_rows import HOST, Broker, free_port, stream
from .spark_rows import session as spark_session
from .spark_standalone import StandaloneCluster, loopback_env

GOAL = 1.7


def session(cluster: StandaloneCluster, executors: int, cores: int) -> Any:
    """An application on ``cluster`` that gets ``executors`` executors of ``cores`` each."""
    os.environ.update(loopback_env(cluster.tmp))
    name, want = f"jmspy-bench-cluster-{executors}", executors * cores
    spark = spark_session(cluster.url, name, **{
        "spark.driver.host": HOST, "spark.driver.bindAddress": HOST,
        "spark.executor.cores": str(cores), "spark.cores.max": str(want),
        "spark.executor.memory": "1g", "spark.pyspark.python": sys.executable})
    deadline = time.monotonic() + 120
    while _granted(cluster, name) < want and time.monotonic() < deadline:
        time.sleep(0.2)  # waits for the master to launch the executors
    got = _granted(cluster, name)
    if got != want:
        spark.stop()
        raise RuntimeError(f"the cluster granted {got} cores, not {want}")
    return spark


def _granted(cluster: StandaloneCluster, name: str) -> int:
    """Cores the master has granted the running application ``name`` (its JSON view)."""
    apps = [a for a in cluster.state().get("activeapps", []) if a.get("name") == name]
    return int(apps[0].get("cores", 0)) if apps else 0


def one(cluster: StandaloneCluster, executors: int, args: argparse.Namespace, run: int,
        log: Any) -> float:
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-cluster-"))
    broker = Broker(work)
    spark = session(cluster, executors, args.cores)
    try:
        stream(spark, broker, f"warm{run}x{executors}", args.per_trigger * 2,
               args.per_trigger, work, partitions=args.partitions)
        r = stream(spark, broker, f"c{run}x{executors}", args.count, args.per_trigger, work,
                   partitions=args.partitions)
        log(f"run {run}: {executors} executor(s): {r['rate']:,.0f} msgs/s steady "
            f"({r['batches']} batches, median batch {r['triggerExecution']:.0f} ms)")
        return float(r["rate"])
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_cluster_rows")
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-trigger", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2, help="cores per worker/executor")
    args = parser.parse_args(argv)
    began = time.monotonic()
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="jmspy-bench-standalone-"))

    def log(text: str) -> None:
        print(text, flush=True)

    cluster = StandaloneCluster(tmp, free_port, workers=2, cores=args.cores, memory="1536m")
    rates: dict[int, list[float]] = {1: [], 2: []}
    try:
        log(f"standalone cluster up: 2 workers of {args.cores} cores on loopback")
        for run in range(args.runs):
            for executors in (1, 2):
                rates[executors].append(one(cluster, executors, args, run, log))
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    one_rate, two_rate = (statistics.median(rates[n]) for n in (1, 2))
    ratio = two_rate / one_rate
    cpus = os.cpu_count() or 1
    needed = 2 * args.cores + 1
    if ratio >= GOAL:
        verdict = "met"
    elif cpus < needed:
        verdict = (f"not measurable here: {cpus} CPUs for two executors of {args.cores} "
                   f"cores and a driver (needs {needed})")
    else:
        verdict = "MISSED"
    print(f"\nmedians of {args.runs} runs, standalone cluster on {cpus} CPUs (load average "
          f"{load:.1f} before, {os.getloadavg()[0]:.1f} after), jmspy broker --in-memory, "
          f"{args.count:,} messages of 100 bytes, maxMessagesPerTrigger {args.per_trigger:,}, "
          f"numPartitions {args.partitions}, {time.monotonic() - began:.0f} s in all")
    print(f"  {'1 executor':<24}{one_rate:>10,.0f} msg/s")
    print(f"  {'2 executors':<24}{two_rate:>10,.0f} msg/s")
    print(f"  {'ratio':<24}{ratio:>10.2f}x   goal >= {GOAL}x: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
