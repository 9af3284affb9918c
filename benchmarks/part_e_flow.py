"""(e) The seed-004 trade-off: imqConsumerFlowLimit against throughput and fairness.

* Throughput: a queue pre-filled with N messages, drained by one listener consumer with
  CLIENT_ACKNOWLEDGE (``message.acknowledge()`` per message); msgs/s of the drain. A small
  window costs a round trip to the broker per batch.
* Share: a short queue (20 messages) pre-filled, then two consumers on separate
  connections, A started just before B, each listener sleeping 5 ms per message. A large
  window lets A take the whole queue while B idles (the makespan doubles); a window of 1
  splits the work.

Over vm:// (one process per run) and, when the stomp:// transport is there, over STOMP to
the ``jmspy broker`` (client and broker in separate processes).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

from .common import BODY, Config, Progress, Row, Spec, now, run_interleaved, run_worker
from .peers import DEFAULT_JMSPY, Peers

LIMITS = [1, 2, 5, 10, 50, 100, 500, 1000, 5000]
SHARE_MESSAGES = 20
WORK_MS = 5.0


def _setup(spec: Spec) -> tuple[str, Any]:
    """The URL to use (starting a private vm:// broker if asked) and a cleanup callable."""
    if spec["url"] != "vm":
        return spec["url"], lambda: None
    from jmspy.transports import vm

    name = f"flow-{os.getpid()}"
    vm.start_broker(name)
    return f"vm://{name}", lambda: vm.stop_broker(name)


def _prefill(url: str, qname: str, count: int) -> None:
    from jmspy import ConnectionFactory

    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(session.create_queue(qname))
        for _ in range(count):
            producer.send(session.create_text_message(BODY))


def flow_tput(spec: Spec) -> dict[str, Any]:
    from jmspy import ConnectionFactory, Session

    url, cleanup = _setup(spec)
    qname, count = f"flow.{uuid.uuid4().hex[:10]}", int(spec["count"])
    _prefill(url, qname, count)
    done = threading.Event()
    got = 0

    def on_message(message: Any) -> None:
        nonlocal got
        message.acknowledge()
        got += 1
        if got == count:
            done.set()

    factory = ConnectionFactory(url, imqConsumerFlowLimit=int(spec["limit"]))
    with factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(session.create_queue(qname))
        consumer.set_message_listener(on_message)
        t0 = now()
        conn.start()
        if not done.wait(spec.get("timeout", 180)):
            return {"error": f"timeout: drained {got}/{count}"}
        rate = count / (now() - t0)
    cleanup()
    return {"rate": rate}


def flow_share(spec: Spec) -> dict[str, Any]:
    from jmspy import ConnectionFactory, Session

    url, cleanup = _setup(spec)
    qname, total = f"share.{uuid.uuid4().hex[:10]}", int(spec["count"])
    _prefill(url, qname, total)
    counts = [0, 0]
    lock = threading.Lock()
    done = threading.Event()
    factory = ConnectionFactory(url, imqConsumerFlowLimit=int(spec["limit"]))
    conns = [factory.create_connection() for _ in range(2)]

    def listener(i: int) -> Any:
        def on_message(_message: Any) -> None:
            time.sleep(spec["work_ms"] / 1000.0)
            with lock:
                counts[i] += 1
                if sum(counts) == total:
                    done.set()

        return on_message

    t0 = now()
    for i, conn in enumerate(conns):  # A subscribes and starts just before B
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        session.create_consumer(session.create_queue(qname)).set_message_listener(listener(i))
        conn.start()
    ok = done.wait(spec.get("timeout", 60))
    makespan = now() - t0
    for conn in conns:
        conn.close()
    cleanup()
    if not ok:
        return {"error": f"timeout: consumed {sum(counts)}/{total}"}
    return {"rate": total / makespan, "share_a": counts[0] / total, "share_b": counts[1] / total,
            "makespan_ms": makespan * 1e3}


def _runner(peers: Peers, transport: str, spec: Spec) -> Any:
    def run(_rnd: int) -> dict[str, Any]:
        if transport == "vm":
            return run_worker("part_e_flow", {**spec, "url": "vm"})
        ep = peers.get(DEFAULT_JMSPY)
        if isinstance(ep, str):
            return {"error": ep}
        url = f"stomp://{ep.host}:{ep.stomp_port}?heartbeat=0"
        return run_worker("part_e_flow", {**spec, "url": url})

    return run


def configs(quick: bool, peers: Peers) -> list[Config]:
    out: list[Config] = []
    counts = {"vm": 2_000 if quick else 20_000, "stomp": 500 if quick else 2_000}
    labels = {"vm": "vm://", "stomp": "stomp:// -> jmspy broker"}
    for transport in ("vm", "stomp"):
        n = counts[transport]
        for limit in LIMITS:
            row = Row("e", f"e/{transport}/tput/{limit}",
                      f"flow limit {limit}, {labels[transport]}", f"drain {n:,} msgs, client-ack")
            spec = {"role": "tput", "limit": limit, "count": n}
            out.append(Config(row, _runner(peers, transport, spec)))
        for limit in LIMITS:
            row = Row("e", f"e/{transport}/share/{limit}",
                      f"flow limit {limit}, {labels[transport]}",
                      f"2 consumers, {SHARE_MESSAGES} msgs x {WORK_MS:g} ms")
            spec = {"role": "share", "limit": limit, "count": SHARE_MESSAGES, "work_ms": WORK_MS}
            out.append(Config(row, _runner(peers, transport, spec)))
    return out


def run(quick: bool, runs: int, progress: Progress, peers: Peers) -> list[Row]:
    rows = run_interleaved(configs(quick, peers), runs, progress)
    for row in rows:
        if "/share/" in row.key and row.runs:
            row.note = (f"A {row.med('share_a'):.0%} / B {row.med('share_b'):.0%}, "
                        f"makespan {row.med('makespan_ms'):.0f} ms")
    return rows


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick, Peers())) * runs


if __name__ == "__main__":
    from .common import worker_main

    worker_main({"tput": flow_tput, "share": flow_share})
