"""A consumer on a 3-node RabbitMQ cluster: jmspy with an address list vs raw stomp.py
with a host list, same cluster, same run, interleaved.

``python -m benchmarks.cluster_failover [--runs 3] [--count 1000]``. Starts the cluster
of tests/interop/clusters.py (about 20 s), then per round:

* **failover**: both clients meet the same kill. Two fresh quorum queues declared on
  the first node (so their leader is there), one per client; each consumer connects to
  the first node of its list; raw stomp.py producers on the second node send ``count``
  persistent messages 2 ms apart to each queue; when both consumers have 30 % of theirs
  the first node is SIGKILLed, once. Figure: seconds from the kill to the first message
  each consumer receives over its new connection (the kill time and the receive times
  are CLOCK_MONOTONIC, which is system-wide). The killed node is started again (it
  rejoins) before the next round. Goal: jmspy within 1.2x of raw stomp.py. Why one kill
  for both: most of a failover is the cluster electing new queue leaders, which took
  from about 100 to 350 ms from one kill to the next here; a ratio of two clients'
  times after two different kills measured the elections more than the clients.
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


def _producer(node: Any, queue: str, count: int, *, pace_s: float
              ) -> subprocess.Popen[str]:
    """A raw stomp.py producer on ``node`` sending ``count`` persistent messages to the
    quorum queue ``queue``, ``pace_s`` apart (0: unpaced)."""
    return subprocess.Popen(
        worker_cmd("cluster_workers", {
            "role": "paced-producer", "host": list(node.stomp_address),
            "dest": f"/amq/queue/{queue}", "count": count, "pace_s": pace_s}),
        env=worker_env(), cwd=neutral_dir(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _rate_run(cluster: Any, client: str, count: int) -> dict[str, Any]:
    """One consumer and one unpaced producer on a fresh quorum queue: msgs/s."""
    cluster.heal()
    first, second = cluster.nodes[0], cluster.nodes[1]
    queue = f"bench-q-{uuid.uuid4().hex[:10]}"
    cluster.declare_quorum_queue(queue, first)
    consumer = subprocess.Popen(
        worker_cmd("cluster_workers", _consumer_spec(cluster, client, queue, count, 0)),
        env=worker_env(), cwd=neutral_dir(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    producer: subprocess.Popen[str] | None = None
    assert consumer.stdout is not None
    try:
        line = consumer.stdout.readline().strip()
        if line != "READY":
            _, err = consumer.communicate(timeout=30)
            return {"error": f"consumer not ready: {line} {err.strip()[-300:]}"}
        producer = _producer(second, queue, count, pace_s=0.0)
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
    return {"rate": count / (got["t_last"] - sent["t_start"])}


def _paired_kill(cluster: Any, count: int) -> dict[str, dict[str, Any]]:
    """One kill under both clients: each consumer on its own quorum queue, both led by
    the first node; the node dies once both have 30 % of their messages. Returns each
    client's result (``failover_s``, or ``error``)."""
    cluster.heal()
    first, second = cluster.nodes[0], cluster.nodes[1]
    half = max(1, count * 3 // 10)
    procs: list[subprocess.Popen[str]] = []
    consumers: dict[str, subprocess.Popen[str]] = {}
    producers: dict[str, subprocess.Popen[str]] = {}
    queues = {client: f"bench-q-{client}-{uuid.uuid4().hex[:10]}" for client in CLIENTS}
    try:
        for client, queue in queues.items():  # both consumers ready before any message
            cluster.declare_quorum_queue(queue, first)
            consumer = subprocess.Popen(
                worker_cmd("cluster_workers",
                           _consumer_spec(cluster, client, queue, count, half)),
                env=worker_env(), cwd=neutral_dir(), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            procs.append(consumer)
            consumers[client] = consumer
            assert consumer.stdout is not None
            line = consumer.stdout.readline().strip()
            if line != "READY":
                _, err = consumer.communicate(timeout=30)
                return {c: {"error": f"{client} consumer not ready: {line} "
                                     f"{err.strip()[-300:]}"} for c in CLIENTS}
        for client, queue in queues.items():
            producer = _producer(second, queue, count, pace_s=0.002)
            procs.append(producer)
            producers[client] = producer
        for client, consumer in consumers.items():
            assert consumer.stdout is not None
            line = consumer.stdout.readline().strip()
            if line != "HALF":
                return {c: {"error": f"{client} consumer said {line!r} before the kill"}
                        for c in CLIENTS}
        t_kill = now()
        cluster.kill(first)
        results: dict[str, dict[str, Any]] = {}
        for client in CLIENTS:
            out, err = consumers[client].communicate(timeout=240)
            p_out, p_err = producers[client].communicate(timeout=240)
            got, sent = _last_json(out, err), _last_json(p_out, p_err)
            if "error" in got or "error" in sent:
                results[client] = got if "error" in got else sent
            else:
                results[client] = {"failover_s": got["t_first_after"] - t_kill,
                                   "deliveries": got["count"]}
        return results
    except subprocess.TimeoutExpired:
        return {c: {"error": "a worker timed out"} for c in CLIENTS}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


class _SharedKill:
    """The failover rows' runs: the first client's config makes the round's kill
    (:func:`_paired_kill`), the others read their result of that same kill."""

    def __init__(self, cluster: Any, count: int) -> None:
        self._cluster, self._count = cluster, count
        self._rounds: dict[int, dict[str, dict[str, Any]]] = {}

    def result(self, client: str, rnd: int) -> dict[str, Any]:
        if rnd not in self._rounds:
            self._rounds[rnd] = _paired_kill(self._cluster, self._count)
        return self._rounds[rnd][client]


def _last_json(out: str, err: str) -> dict[str, Any]:
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    return {"error": f"worker failed: {' | '.join(err.strip().splitlines()[-3:])}"}


def configs(cluster: Any, count: int) -> list[Config]:
    out: list[Config] = []
    kill = _SharedKill(cluster, count)
    for client in CLIENTS:
        row = Row("g", f"g/failover/{client}", LABEL[client],
                  f"RabbitMQ 3-node cluster, quorum queues, one SIGKILL of the consumers' "
                  f"node (also the leader) under both clients, {count:,} msgs 2 ms apart",
                  short="failover s")
        if client == "jmspy":
            row.baseline = "g/failover/raw"
            row.goals = [Goal(1.2, over=row.baseline, label="vs raw stomp.py",
                              metric="failover_s", at_most=True, issue=44)]
        out.append(Config(row, lambda r, c=client: kill.result(c, r)))
    for client in CLIENTS:
        row = Row("g", f"g/quorum/{client}", LABEL[client],
                  f"RabbitMQ 3-node cluster, quorum queue, consumer on the leader, producer "
                  f"on another node, prefetch {WINDOW}, {count * 5:,} msgs",
                  short="quorum msgs/s")
        if client == "jmspy":
            row.baseline = "g/quorum/raw"
            row.goals = [Goal(1.0, over=row.baseline, label="vs raw stomp.py", issue=44)]
        out.append(Config(row, lambda _r, c=client: _rate_run(cluster, c, count * 5)))
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
