"""(c) The brokers side by side, serving the same raw stomp.py producer and consumer:
``jmspy broker`` vs ActiveMQ 5, RabbitMQ and CoilMQ.

Every broker in a row serves the *identical* client workload, so a ratio compares brokers
and nothing else. Two workloads:

* **streaming** (STOMP 1.2, the producer never waits): ``ack:client-individual`` with
  prefetch 1000 and 1 (``activemq.prefetchSize`` and ``prefetch-count``; the jmspy broker
  reads the former), and ``ack:auto``. CoilMQ cannot serve it (it loses the connection of
  a streaming producer whose frames split across reads, PEERS.md), so these rows compare
  the jmspy broker with ActiveMQ (goal >= 1.0x) and RabbitMQ.
* **receipt per SEND** (STOMP 1.1, the producer waits for each RECEIPT; the consumer uses
  ``ack:client``, ACKing each message, or ``ack:auto``): the only workload CoilMQ serves,
  given to all four brokers. CoilMQ holds one unacknowledged message per subscriber
  whatever the prefetch header says; the others honour it, so the client-ack rows are run
  with prefetch 1000 and 1 for everyone. Goal: jmspy broker over ActiveMQ >= 1.0x
  (issue 17), with RabbitMQ and CoilMQ in the note (CoilMQ's 5x goal of issue 5 was
  dropped by issue 52: a broker its receipts bound is no yardstick).

* **persistent, receipt per SEND** (STOMP 1.1, ``persistent:true``, the producer waits for
  each RECEIPT, an ``ack:auto`` consumer drains): the store's price. ``jmspy broker
  --data-dir`` (SQLite, fsync'd before each RECEIPT leaves) against ActiveMQ 5 with KahaDB
  (goal >= 2x, issue 13), with the in-memory jmspy broker beside it, and against the
  disk's own limit for one synchronous producer, a 1 KB append + ``fdatasync`` as a rate
  measured in the same round (benchmarks/disk_limit.py; goal >= 0.7x, issue 52). The
  same producer with no consumer (``persistent-backlog``): every message stays, so every
  RECEIPT waits for an fsync; with a waiting ``ack:auto`` consumer the jmspy broker skips
  the commit of a message consumed in the turn that stored it (docs/store.md).
* **memory** (benchmarks/broker_memory.py): the broker's RSS per queued 1 KB message and
  per queue holding one message (goals <= 1.5 KB and <= 2 KB, issue 17).
* **round trip during a flood** (benchmarks/flood_round_trip.py): a second connection's
  persistent SEND+RECEIPT while the first floods 50,000 persistent SENDs, ``jmspy broker
  --data-dir`` vs ActiveMQ 5 with KahaDB (goals p50 <= 5 ms and <= ActiveMQ's, issue 43).

The jmspy broker is measured twice: on uvloop (its default, a dependency of jmspy where
it has wheels, and in the ``[bench]`` extra) and on asyncio's event loop (``--loop
asyncio``); a missing uvloop makes its rows "not available" and says how to install it.
"""

from __future__ import annotations

from typing import Any

from . import broker_memory, disk_limit, flood_round_trip
from .common import Config, Goal, Progress, Row, run_interleaved, run_pair, run_worker
from .part_b_stomp_client import BROKER_LABEL, stomp_specs
from .peers import DEFAULT_JMSPY, Peers

STREAMING = [("client-individual", 1000), ("client-individual", 1), ("auto", 1000)]
RECEIPTED = [("client", 1000), ("client", 1), ("auto", 1000)]
JMSPY = ("jmspy", "jmspy-uvloop")
PEERS = ("activemq", "rabbitmq", "coilmq")
LABEL = {**BROKER_LABEL, "jmspy": "jmspy broker (asyncio)",
         "jmspy-uvloop": "jmspy broker (uvloop, default)",
         "jmspy-persistent": "jmspy broker --data-dir (uvloop)",
         "activemq-kahadb": "ActiveMQ 5 (KahaDB)"}


#: The row of the disk's own limit for one synchronous persistent producer.
DISK = "c/disk/fdatasync"

#: Producers of the group-commit row.
PERSISTENT_PRODUCERS = 8


def _runner(peers: Peers, broker: str, ack: str, window: int, count: int,
            receipts: bool, persistent: bool = False, producers: int = 1) -> Any:
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get(broker)
        if isinstance(ep, str):
            return {"error": ep}
        consumer, producer = stomp_specs(ep, "raw", ack, window, count)
        if receipts:  # the CoilMQ workload, for every broker alike
            for spec in (consumer, producer):
                spec.update(version="1.1", receipts=True)
        producer["persistent"] = persistent
        return run_pair("workers", consumer, producer, producers=producers)

    return run


def _backlog_runner(peers: Peers, broker: str, count: int) -> Any:
    """A persistent producer waiting for each RECEIPT, alone on a fresh queue: its rate
    from the first SEND to the last RECEIPT."""
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get(broker)
        if isinstance(ep, str):
            return {"error": ep}
        _, producer = stomp_specs(ep, "raw", "auto", 1000, count)
        producer.update(version="1.1", receipts=True, persistent=True)
        sent = run_worker("workers", producer)
        if "error" in sent:
            return sent
        elapsed = sent["t_end"] - sent["t_start"]
        return {"rate": count / elapsed if elapsed > 0 else float("nan")}

    return run


def _mode(ack: str, window: int) -> str:
    return f"ack:{ack}, prefetch {window}" if ack != "auto" else "ack:auto"


def configs(quick: bool, peers: Peers) -> list[Config]:
    out: list[Config] = []
    for ack, window in STREAMING:
        count = (2_000 if quick else 20_000) if window > 1 else (500 if quick else 3_000)
        tag = f"{ack}/{window}"
        config = f"STOMP 1.2, {_mode(ack, window)}, {count:,} msgs"
        short = _mode(ack, window).replace("client-individual", "client-ind.")
        for broker in (*JMSPY, *PEERS[:2]):
            row = Row("c", f"c/{broker}/{tag}", f"stomp.py -> {LABEL[broker]}", config,
                      short=short)
            if broker in JMSPY:
                row.baseline = f"c/activemq/{tag}"
                row.goals = [Goal(1.0, over=row.baseline, label="vs ActiveMQ", issue=5)]
                row.also = [(f"c/rabbitmq/{tag}", "RabbitMQ")]
            out.append(Config(row, _runner(peers, broker, ack, window, count, False)))
    for ack, window in RECEIPTED:
        count = (1_000 if quick else 5_000) if window > 1 else (500 if quick else 3_000)
        tag = f"receipt/{ack}/{window}"
        config = f"STOMP 1.1, receipt per SEND, {_mode(ack, window)}, {count:,} msgs"
        short = f"receipt/SEND, {_mode(ack, window)}"
        for broker in (*JMSPY, *PEERS):
            row = Row("c", f"c/{broker}/{tag}", f"stomp.py -> {LABEL[broker]}", config,
                      short=short)
            if broker in JMSPY:
                row.baseline = f"c/activemq/{tag}"
                # CoilMQ stays as a reference column, without a goal (issue 52): a small
                # pure-Python broker whose rate its receipts bound is no yardstick a
                # user picks a broker by
                row.goals = [Goal(1.0, over=row.baseline, label="vs ActiveMQ")]
                row.also = [(f"c/rabbitmq/{tag}", "RabbitMQ"), (f"c/coilmq/{tag}", "CoilMQ")]
            out.append(Config(row, _runner(peers, broker, ack, window, count, True)))
    count = 500 if quick else 3_000
    config = f"STOMP 1.1, persistent:true, receipt per SEND, ack:auto, {count:,} msgs"
    for broker in ("jmspy-persistent", "activemq-kahadb", DEFAULT_JMSPY):
        row = Row("c", f"c/{broker}/persistent", f"stomp.py -> {LABEL[broker]}", config,
                  short="persistent, receipt/SEND")
        if broker == "jmspy-persistent":
            row.baseline = "c/activemq-kahadb/persistent"
            row.goals = [Goal(2.0, over=row.baseline, label="vs KahaDB", issue=13),
                         Goal(0.7, over=DISK, label="vs the disk's limit", issue=52)]
            row.also = [(f"c/{DEFAULT_JMSPY}/persistent", "jmspy broker in memory"),
                        ("c/activemq-kahadb/persistent", "KahaDB")]
        out.append(Config(row, _runner(peers, broker, "auto", 1000, count, True, True)))
    # The same producer with nobody consuming: every message stays, so every RECEIPT
    # waits for its fsync (with a waiting ack:auto consumer the jmspy broker skips the
    # commit of a message consumed in the turn that stored it, docs/store.md)
    config = f"STOMP 1.1, persistent:true, receipt per SEND, no consumer, {count:,} msgs"
    for broker in ("jmspy-persistent", "activemq-kahadb"):
        row = Row("c", f"c/{broker}/persistent-backlog", f"stomp.py -> {LABEL[broker]}",
                  config, short="persistent, no consumer")
        if broker == "jmspy-persistent":
            row.baseline = "c/activemq-kahadb/persistent-backlog"
            row.goals = [Goal(2.0, over=row.baseline, label="vs KahaDB", issue=13),
                         Goal(0.7, over=DISK, label="vs the disk's limit", issue=52)]
        out.append(Config(row, _backlog_runner(peers, broker, count)))
    # The disk's own limit for that producer, in the same rounds (benchmarks/disk_limit.py)
    disk = 500 if quick else 3_000
    out.append(Config(Row("c", DISK, "the disk: 1 KB append + fdatasync",
                          f"one file in the temporary directory, {disk:,} appends",
                          short="disk limit (fdatasync)"),
                      lambda _rnd: disk_limit.measure(disk)))
    # Several producers at once: what group commit is for (their SENDs share one fsync;
    # KahaDB batches concurrent journal writes the same way).
    count = 800 if quick else 8_000
    config = (f"STOMP 1.1, persistent:true, receipt per SEND, {PERSISTENT_PRODUCERS} "
              f"producers at once, ack:auto, {count:,} msgs")
    for broker in ("jmspy-persistent", "activemq-kahadb"):
        row = Row("c", f"c/{broker}/persistent-{PERSISTENT_PRODUCERS}",
                  f"stomp.py x{PERSISTENT_PRODUCERS} -> {LABEL[broker]}", config,
                  short=f"persistent, {PERSISTENT_PRODUCERS} producers")
        if broker == "jmspy-persistent":
            row.baseline = f"c/activemq-kahadb/persistent-{PERSISTENT_PRODUCERS}"
            row.goals = [Goal(2.0, over=row.baseline, label="vs KahaDB", issue=13)]
        out.append(Config(row, _runner(peers, broker, "auto", 1000, count, True, True,
                                       PERSISTENT_PRODUCERS)))
    out.extend(flood_round_trip.configs(quick, peers))
    return out


def run(quick: bool, runs: int, progress: Progress, peers: Peers) -> list[Row]:
    rows = run_interleaved(configs(quick, peers), runs, progress)
    return rows + broker_memory.run(quick, runs, progress)


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick, Peers())) * runs + broker_memory.planned(quick, runs)
