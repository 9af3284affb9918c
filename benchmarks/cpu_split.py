"""Where a broker row's time goes: CPU, context switches and CPU migrations per message of
the broker, the producer and the consumer, broker by broker, runs alternated.

``python -m benchmarks.cpu_split [--workload receipt-auto] [--brokers jmspy-uvloop,activemq]
[--runs 6] [--warmup N] [--count N] [--client raw|jmspy|jmspy-nospin[,...]]``

The workloads are part (c)'s receipt-per-SEND rows (``receipt-auto``, ``receipt-client``,
``receipt-client-1``: STOMP 1.1, a RECEIPT awaited per SEND, raw stomp.py on both ends) and
part (b)'s window rows (``w1``: client-individual, one message in flight; ``w1000``: a
window of 1,000, the producer streaming; the ``--client`` on both ends). A throughput figure
alone cannot say whether a broker is slow or makes its clients slow; this can: on a 2-core
machine the three processes share two CPUs, so what the clients spend per message, and how
often the scheduler moves their threads between CPUs (each move starts the next run on a
cold cache), counts as much as the broker's own CPU. Counters come from the workers
themselves (benchmarks/cpu_workers.py) and from ``/proc`` for the broker; migrations need
Linux. ``jmspy-uvloop-nospin`` is the broker as installed with its
polling before sleeping off (``--idle-spin-us 0``): beside ``jmspy-uvloop``, what that
polling is worth.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import exchange, median
from .cpu_workers import migrations
from .machine import cpu_idle, describe
from .part_b_stomp_client import stomp_specs
from .peers import DEFAULT_JMSPY, Peers

__all__ = ["CLIENTS", "WARMUP_MESSAGES", "WORKLOADS", "broker_counters", "main", "warmup_runs"]

#: workload -> (ack mode, window, receipts per SEND, default count)
WORKLOADS: dict[str, tuple[str, int, bool, int]] = {
    "receipt-auto": ("auto", 1000, True, 5_000),
    "receipt-client": ("client", 1000, True, 5_000),
    "receipt-client-1": ("client", 1, True, 3_000),
    "w1": ("client-individual", 1, False, 3_000),
    "w1000": ("client-individual", 1000, False, 20_000),
}

_COLUMNS = ("cpu_us", "cs", "migrations")
#: what --client may name (part_b_stomp_client.stomp_specs makes their workers)
CLIENTS = ("raw", "jmspy", "jmspy-nospin")

#: Messages each broker serves, unmeasured, before the measured runs (rounded up to whole
#: runs). ActiveMQ's JIT needs them: on receipt ``ack:auto`` (5,000 messages a run) its CPU
#: per message was 252 and 226 us in the runs after 10,000 messages of warm-up, 102 after
#: 20,000 and 70-106 from 25,000 on, while its rate went from 4.8k to 6.5-10k msgs/s. The
#: jmspy broker measured the same from its first run (82-92 us). The full suite needs no
#: warm-up of its own: part (c)'s receipt rows come after parts (b) and (c)'s streaming
#: rows have run tens of thousands of messages through every broker.
WARMUP_MESSAGES = 40_000


def warmup_runs(count: int, messages: int = WARMUP_MESSAGES) -> int:
    """Unmeasured runs of ``count`` messages that make at least ``messages``."""
    return max(1, -(-messages // count))


def listening_pid(port: int) -> int:
    """The process listening on loopback ``port`` (``ss``: iproute2)."""
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True,
                         text=True, check=True).stdout
    if "pid=" not in out:
        raise RuntimeError(f"no process found listening on port {port} (ss printed {out!r})")
    return int(out.split("pid=")[1].split(",")[0])


def broker_counters(pid: int) -> dict[str, float]:
    """CPU seconds, context switches (all threads) and migrations of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if "ctxt_switches:" in line:  # voluntary_ and nonvoluntary_
                switches += int(line.split(":")[1])
    return {"cpu_s": cpu, "cs": float(switches), "migrations": float(migrations(pid))}


def _per_message(counters: dict[str, Any], count: int) -> dict[str, float]:
    cs = counters.get("cs", counters.get("vcs", 0.0) + counters.get("ivcs", 0.0))
    return {"cpu_us": 1e6 * counters["cpu_s"] / count, "cs": cs / count,
            "migrations": counters["migrations"] / count}


def run_once(peers: Peers, broker: str, workload: str, client: str, count: int
             ) -> dict[str, Any]:
    """One run: the rate and, per process, CPU us, context switches and migrations per
    message; or ``{"error": ...}``."""
    ep = peers.get(broker)
    if isinstance(ep, str):
        return {"error": ep}
    assert ep.stomp_port is not None
    ack, window, receipts, _ = WORKLOADS[workload]
    consumer, producer = stomp_specs(ep, "raw" if receipts else client, ack, window, count)
    if receipts:
        for spec in (consumer, producer):
            spec.update(version="1.1", receipts=True)
    pid = listening_pid(ep.stomp_port)
    before = broker_counters(pid)
    got, sent = exchange("cpu_workers", consumer, producer)
    after = broker_counters(pid)
    if not sent:
        return got
    elapsed = got["t_last"] - sent["t_start"]
    return {
        "rate": got["count"] / elapsed if elapsed > 0 else float("nan"),
        "broker": _per_message({k: after[k] - before[k] for k in after}, count),
        "producer": _per_message(sent, count),
        "consumer": _per_message(got, count),
    }


def _fmt(results: list[dict[str, Any]]) -> str:
    rate = median([r["rate"] for r in results])
    parts = [f"{rate:8,.0f} msgs/s"]
    for proc in ("broker", "producer", "consumer"):
        figures = [median([r[proc][c] for r in results]) for c in _COLUMNS]
        parts.append(f"{proc} {figures[0]:6.1f} us {figures[1]:5.2f} cs {figures[2]:5.2f} mig")
    return "  ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cpu_split",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="receipt-auto")
    ap.add_argument("--brokers", default=f"{DEFAULT_JMSPY},activemq",
                    help="peer names, comma-separated (jmspy-uvloop, jmspy, "
                         "jmspy-uvloop-nospin, activemq, rabbitmq, "
                         "coilmq; "
                         "jmspy-uvloop@PYTHON: the broker of another environment)")
    ap.add_argument("--client", default="jmspy",
                    help="w1, w1000: the client on both ends, or several, comma-separated, "
                         "run alternated (raw, jmspy, jmspy-nospin: jmspy without polling "
                         "before it sleeps); the receipt rows are raw")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=None,
                    help="unmeasured runs per broker first (default: enough runs for "
                         f"{WARMUP_MESSAGES:,} messages, which a JVM broker's JIT needs)")
    ap.add_argument("--count", type=int, default=0, help="messages per run (0: the row's)")
    args = ap.parse_args(argv)
    count = args.count or WORKLOADS[args.workload][3]
    warmup = warmup_runs(count) if args.warmup is None else args.warmup
    clients = [c for c in args.client.split(",") if c]
    unknown = sorted(set(clients) - set(CLIENTS))
    if unknown or not clients:
        ap.error(f"--client {args.client!r}: choose from {', '.join(CLIENTS)}")
    # each (broker, client) pair is a column, named by the broker alone with one client
    pairs = [(b, c) for b in args.brokers.split(",") if b for c in clients]
    label = {pair: pair[0] if len(clients) == 1 else f"{pair[0]}/{pair[1]}" for pair in pairs}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {pair: [] for pair in pairs}
    print(describe(cpu_idle()), flush=True)
    print(f"{args.workload}, {count:,} msgs per run after {warmup} unmeasured; per message: "
          "CPU us, context switches (cs) and CPU migrations (mig) of each process", flush=True)
    with Peers(log=lambda s: print(s, flush=True)) as peers:
        for rnd in range(warmup + args.runs):
            for pair in pairs:
                got = run_once(peers, pair[0], args.workload, pair[1], count)
                if "error" in got:
                    print(f"{pair[0]}: {got['error']}", flush=True)
                    return 1
                if rnd >= warmup:
                    results[pair].append(got)
                    print(f"run {rnd - warmup + 1} {label[pair]:14s} {_fmt([got])}",
                          flush=True)
    print("medians:")
    for pair in pairs:
        print(f"  {label[pair]:14s} {_fmt(results[pair])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
