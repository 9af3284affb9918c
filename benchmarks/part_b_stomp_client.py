"""(b) jmspy's STOMP client (stomp:// transport) -> ``jmspy broker`` against raw stomp.py
-> ActiveMQ 5, RabbitMQ and CoilMQ, with client acknowledgement and windows 1000 and 1.

The jmspy broker runs as a user starts it, on its default event loop (uvloop,
``peers.DEFAULT_JMSPY``): (b) measures the stack we ship. Part (c) shows the same broker
on asyncio's loop beside it.

Producer and consumer are separate processes (workers.py). jmspy consumes with
INDIVIDUAL_ACKNOWLEDGE and ``imqConsumerFlowLimit`` = window, acknowledging each message;
stomp.py subscribes ``ack:client-individual`` with ``activemq.prefetchSize`` /
``prefetch-count`` = window and ACKs each message. CoilMQ only works with STOMP 1.1,
``ack:client`` and a RECEIPT per SEND (PEERS.md), so it gets exactly that, once.

Goals (declared in :func:`configs`, explained in benchmarks/README.md): jmspy -> jmspy
broker over raw -> ActiveMQ, >= 2x at window 1000 (issue 5) and >= 1.5x at window 1
(issue 17); the jmspy client over the raw client on the same broker, >= 1.0x on each
broker and window (issue 17). Both sides send the same 100 B
non-persistent messages (a raw SEND has no ``persistent`` header; jmspy's producer is set
to NON_PERSISTENT to match).
"""

from __future__ import annotations

import uuid
from typing import Any

from .common import Config, Goal, Progress, Row, Spec, run_interleaved, run_pair
from .peers import DEFAULT_JMSPY, Endpoint, Peers

BROKER_LABEL = {"jmspy": "jmspy broker (uvloop, default)", "activemq": "ActiveMQ 5",
                "rabbitmq": "RabbitMQ", "coilmq": "CoilMQ"}


def stomp_specs(ep: Endpoint, client: str, ack: str, window: int, count: int
                ) -> tuple[Spec, Spec]:
    """(consumer, producer) worker specs for one run on a fresh queue."""
    qname = f"bench.{uuid.uuid4().hex[:12]}"
    base: Spec = {"host": ep.host, "port": ep.stomp_port, "count": count, "window": window,
                  "timeout": 180}
    if client in ("jmspy", "jmspy-nospin"):
        # jmspy-nospin: the client without polling before it sleeps (benchmarks/README.md,
        # "Polling before sleeping"), for cpu_split's side-by-side runs
        spin = "&idle_spin_us=0" if client == "jmspy-nospin" else ""
        base.update(url=f"stomp://{ep.host}:{ep.stomp_port}?heartbeat=0{spin}", dest=qname)
        mode = {"auto": "AUTO_ACKNOWLEDGE", "client": "CLIENT_ACKNOWLEDGE"}.get(
            ack, "INDIVIDUAL_ACKNOWLEDGE")
        # Like for like: a raw stomp.py SEND without a ``persistent`` header is
        # non-persistent on every broker, JMS's default is PERSISTENT (a KahaDB write per
        # message on ActiveMQ, a disk write on RabbitMQ), so jmspy sends NON_PERSISTENT.
        return ({**base, "role": "jmspy-consumer", "ack_mode": mode},
                {**base, "role": "jmspy-producer", "persistent": False})
    base["dest"] = f"/queue/{qname}"
    if ep.name == "rabbitmq":
        base["vhost"] = "/"
    if ep.name == "coilmq":
        base.update(version="1.1", receipts=True)
        ack = "client" if ack != "auto" else ack
    return ({**base, "role": "stomp-consumer", "ack": ack}, {**base, "role": "stomp-producer"})


def pair_runner(peers: Peers, broker: str, client: str, ack: str, window: int, count: int
                ) -> Any:
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get(DEFAULT_JMSPY if broker == "jmspy" else broker)
        if isinstance(ep, str):
            return {"error": ep}
        consumer, producer = stomp_specs(ep, client, ack, window, count)
        return run_pair("workers", consumer, producer)

    return run


def configs(quick: bool, peers: Peers) -> list[Config]:
    out: list[Config] = []
    for window in (1000, 1):
        count = (2_000 if quick else 20_000) if window > 1 else (500 if quick else 3_000)
        cfg = f"client-individual, window {window}, non-persistent, {count:,} msgs"

        def add(client: str, broker: str, *, goals: list[Goal] | None = None,
                config: str = cfg, window: int = window, count: int = count) -> None:
            name = f"{'jmspy' if client == 'jmspy' else 'stomp.py'} -> {BROKER_LABEL[broker]}"
            goals = goals or []
            row = Row("b", f"b/{client}/{broker}/{window}", name, config,
                      baseline=goals[0].over if goals else None, goals=goals,
                      short="receipt/SEND" if broker == "coilmq" else f"window {window}")
            out.append(Config(row, pair_runner(peers, broker, client, "client-individual",
                                               window, count)))

        w = window

        def same_broker(broker: str, w: int = w) -> Goal:
            """jmspy's client over raw stomp.py on one broker: at least as fast."""
            return Goal(1.0, over=f"b/raw/{broker}/{w}", label="vs stomp.py, same broker")

        # over raw stomp.py -> ActiveMQ: 2x with a window (issue 5), 1.5x at window 1
        activemq = Goal(2.0 if w > 1 else 1.5, over=f"b/raw/activemq/{w}",
                        label="vs stomp.py -> ActiveMQ", issue=5 if w > 1 else 17)
        add("jmspy", "jmspy", goals=[activemq, same_broker("jmspy")])
        add("raw", "jmspy")
        add("jmspy", "activemq", goals=[same_broker("activemq")])
        add("raw", "activemq")
        add("jmspy", "rabbitmq", goals=[same_broker("rabbitmq")])
        add("raw", "rabbitmq")
        if window > 1:
            coil = count // 2  # one message in flight at a time: slow
            add("raw", "coilmq", count=coil,
                config=f"STOMP 1.1, ack:client, receipt per SEND, {coil:,} msgs")
    by_key = {c.row.key: c.row for c in out}
    by_key["b/jmspy/jmspy/1000"].also.append(("b/raw/coilmq/1000", "raw stomp.py -> CoilMQ"))
    return out


def run(quick: bool, runs: int, progress: Progress, peers: Peers) -> list[Row]:
    return run_interleaved(configs(quick, peers), runs, progress)


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick, Peers())) * runs
