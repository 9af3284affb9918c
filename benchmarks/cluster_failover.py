"""A consumer on a 3-node RabbitMQ cluster: jmspy with an address list vs raw stomp.py
with a host list, same cluster, same run, interleaved.

``python -m benchmarks.cluster_failover [--runs 3] [--count 1000]``. Starts the cluster
of tests/interop/clusters.py (about 20 s), then per round:

* **failover**: a fresh quorum queue declared on the first node (so its leader is there);
  the consumer connects to the first node of its list; a raw stomp.py producer on the
  second node sends ``count`` persistent messages 2 ms apart; when the consumer has 30 %
  of them the first node is SIGKILLed. Figure: seconds from the kill to the first
  message the consumer receives over its new connection (the kill time and the receive
  time are both CLOCK_MONOTONIC, which is system-wide). The killed node is started again
  (it rejoins) before the next run. Goal: jmspy within 1.2x of raw stomp.py.
* **quorum rate**: a fresh quorum queue, the consumer on the first node, an unpaced raw
  stomp.py producer on the second; msgs/s = count / (last receive - first send). Goal:
  jmspy >= 1.0x raw stomp.py.

Both consumers acknowledge each message (client-individual / INDIVIDUAL_ACKNOWLEDGE),
prefetch 100. The results table is printed (the same Row/Goal code as ``python -m
benchmarks``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

from . import report
from .common import (
    Config,
    Goal,
    Progress,
    Row,
    neutral_dir,
    now,
    run_interleaved,
    worker_cmd,
    worker_env,
)

_INTEROP = Path(__file__).resolve().parent.parent / "tests" / "interop"
WINDOW = 100
CLIENTS = ("raw", "jmspy")
LABEL = {"raw": "raw stomp.py, host list", "jmspy": "jmspy, address list"}


def _clusters() -> ModuleType:
    """tests/interop/clusters.py (and the brokers.py it imports), by file path."""
    if "clusters" in sys.modules:
        return sys.modules["clusters"]
    if not (_INTEROP / "clusters.py").exists():
        raise RuntimeError(f"{_INTEROP / 'clusters.py'} not found (run from a source checkout)")
    sys.path.insert(0, str(_INTEROP))  # clusters.py imports brokers.py by name
    spec = importlib.util.spec_from_file_location("clusters", _INTEROP / "clusters.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["clusters"] = module
    spec.loader.exec_module(module)
    return module


def _consumer_spec(cluster: Any, client: str, queue: str, count: int, half: int) -> dict[str, Any]:
    base = {"count": count, "half": half, "window": WINDOW, "timeout": 180}
    if client == "raw":
        return {**base, "role": "raw-consumer", "hosts": cluster.stomp_hosts(),
                "dest": f"/amq/queue/{queue}"}
    return {**base, "role": "jmspy-consumer", "urls": cluster.stomp_urls("?heartbeat=0"),
            "dest": f"{queue}?x-queue-type=quorum"}


def _one_run(cluster: Any, client: str, count: int, kill: bool) -> dict[str, Any]:
    """One consumer and one producer on a fresh quorum queue; with ``kill``, the first
    node dies when the consumer has 30 % of the messages."""
    cluster.heal()
    first, second = cluster.nodes[0], cluster.nodes[1]
    queue = f"bench-q-{uuid.uuid4().hex[:10]}"
    cluster.declare_quorum_queue(queue, first)
    half = max(1, count * 3 // 10) if kill else 0
    consumer = subprocess.Popen(
        worker_cmd("cluster_workers", _consumer_spec(cluster, client, queue, count, half)),
        env=worker_env(), cwd=neutral_dir(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    producer: subprocess.Popen[str] | None = None
    assert consumer.stdout is not None
    try:
        line = consumer.stdout.readline().strip()
        if line != "READY":
            _, err = consumer.communicate(timeout=30)
            return {"error": f"consumer not ready: {line} {err.strip()[-300:]}"}
        producer = subprocess.Popen(
            worker_cmd("cluster_workers", {
                "role": "paced-producer", "host": list(second.stomp_address),
                "dest": f"/amq/queue/{queue}", "count": count,
                "pace_s": 0.002 if kill else 0.0}),
            env=worker_env(), cwd=neutral_dir(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        t_kill = 0.0
        if kill:
            line = consumer.stdout.readline().strip()
            if line != "HALF":
                return {"error": f"consumer said {line!r} before the kill"}
            t_kill = now()
            cluster.kill(first)
        out, err = consumer.communicate(timeout=240)
        p_out, p_err = producer.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        return {"error": "a worker timed out"}
    finally:
        for proc in (consumer, producer):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    got = _last_json(out, err)
    sent = _last_json(p_out, p_err)
    if "error" in got or "error" in sent:
        return got if "error" in got else sent
    if kill:
        return {"failover_s": got["t_first_after"] - t_kill, "deliveries": got["count"]}
    return {"rate": count / (got["t_last"] - sent["t_start"])}


def _last_json(out: str, err: str) -> dict[str, Any]:
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    return {"error": f"worker failed: {' | '.join(err.strip().splitlines()[-3:])}"}


def configs(cluster: Any, count: int) -> list[Config]:
    out: list[Config] = []
    for client in CLIENTS:
        row = Row("f", f"f/failover/{client}", LABEL[client],
                  f"RabbitMQ 3-node cluster, quorum queue, SIGKILL of the consumer's node "
                  f"(also the leader), {count:,} msgs 2 ms apart", short="failover s")
        if client == "jmspy":
            row.baseline = "f/failover/raw"
            row.goals = [Goal(1.2, over=row.baseline, label="vs raw stomp.py",
                              metric="failover_s", at_most=True, issue=44)]
        out.append(Config(row, lambda _r, c=client: _one_run(cluster, c, count, True)))
    for client in CLIENTS:
        row = Row("f", f"f/quorum/{client}", LABEL[client],
                  f"RabbitMQ 3-node cluster, quorum queue, consumer on the leader, producer "
                  f"on another node, prefetch {WINDOW}, {count * 5:,} msgs",
                  short="quorum msgs/s")
        if client == "jmspy":
            row.baseline = "f/quorum/raw"
            row.goals = [Goal(1.0, over=row.baseline, label="vs raw stomp.py", issue=44)]
        out.append(Config(row, lambda _r, c=client: _one_run(cluster, c, count * 5, False)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cluster_failover",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=1000,
                    help="messages per failover run (the rate rows send 5x as many)")
    args = ap.parse_args(argv)
    clusters = _clusters()
    progress = Progress(4 * args.runs)
    progress.show("starting the RabbitMQ cluster")
    with clusters.rabbit_cluster() as cluster:
        progress.log(f"cluster formed in {cluster.start_seconds:.1f} s")
        rows = run_interleaved(configs(cluster, args.count), args.runs, progress)
        progress.show("stopping the cluster")
    progress.close()
    for row in rows:  # the failover rows have no msgs/s: their figure goes in the note
        if row.runs and "failover_s" in row.runs[0]:
            runs = ", ".join(f"{r['failover_s'] * 1e3:.0f}" for r in row.runs)
            row.note = "; ".join(filter(None, [
                f"failover {row.med('failover_s') * 1e3:.0f} ms (runs: {runs} ms)", row.note]))
    print(report.table(rows, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
