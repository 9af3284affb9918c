"""(c) The brokers side by side, serving the same raw stomp.py producer and consumer:
``jmspy broker`` vs ActiveMQ 5, RabbitMQ and CoilMQ.

Modes: ``ack:client-individual`` with prefetch 1000 and 1 (``activemq.prefetchSize`` and
``prefetch-count``; the jmspy broker reads the former), and ``ack:auto``. CoilMQ gets
STOMP 1.1 with a RECEIPT per SEND and ``ack:client`` in the client modes (the only way it
works, PEERS.md; its delivery is one message at a time, so it is measured once for both
prefetch values). Ratios: jmspy broker over ActiveMQ (target 1.0x) and over CoilMQ
(target 5x), same mode, same round.
"""

from __future__ import annotations

from .common import Config, Progress, Row, run_interleaved
from .part_b_stomp_client import BROKER_LABEL, pair_runner
from .peers import Peers

MODES = [("client-individual", 1000), ("client-individual", 1), ("auto", 1000)]


def configs(quick: bool, peers: Peers) -> list[Config]:
    out: list[Config] = []
    for ack, window in MODES:
        count = (2_000 if quick else 20_000) if window > 1 else (500 if quick else 3_000)
        mode = f"{ack}, prefetch {window}" if ack != "auto" else "auto"
        tag = f"{ack}/{window}"
        for broker in ("jmspy", "activemq", "rabbitmq", "coilmq"):
            n = count // 2 if broker == "coilmq" else count  # CoilMQ: 1 in flight, slow
            config = f"{mode}, {n:,} msgs"
            if broker == "coilmq":
                if window == 1:
                    continue  # identical to prefetch 1000 for CoilMQ
                coil_ack = "client" if ack != "auto" else "auto"
                config = f"STOMP 1.1, ack:{coil_ack}, receipt per SEND, {n:,} msgs"
            row = Row("c", f"c/{broker}/{tag}", f"stomp.py -> {BROKER_LABEL[broker]}", config,
                      short=config.rsplit(", ", 1)[0].replace("client-individual", "client-ind."))
            if broker == "jmspy":
                row.baseline, row.target = f"c/activemq/{tag}", 1.0
                coil = f"c/coilmq/{ack}/1000"
                row.also = [(coil, "CoilMQ (target 5x)"), (f"c/rabbitmq/{tag}", "RabbitMQ")]
            out.append(Config(row, pair_runner(peers, broker, "raw", ack, window, n)))
    return out


def run(quick: bool, runs: int, progress: Progress, peers: Peers) -> list[Row]:
    return run_interleaved(configs(quick, peers), runs, progress)


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick, Peers())) * runs
