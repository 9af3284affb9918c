"""(a) vm:// end to end, compiled twins vs pure twins (JMSPY_PUREPYTHON=1).

Each run is a fresh worker process (the twin choice is made at import) measuring the
*listener path* (a pre-filled queue drained by a listener,
AUTO_ACKNOWLEDGE) and *end to end* (a producer and a listener running at once, timed from
the first send to the last receive). The end-to-end messages carry their send time in a
property: p50/p99 latency is receive time minus that (under full load, so it includes the
time spent queued behind the producer). Compiled and pure runs alternate.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from . import selector_rate
from .common import (
    BODY,
    Config,
    Goal,
    Progress,
    Row,
    Spec,
    latency_metrics,
    now,
    paired_ratios,
    run_worker,
)

#: compiled >= 3x pure, end to end and on the listener path (issues 5 and 17)
RATIO = Goal(3.0, over="a/pure", label="vs pure")
LISTENER_RATIO = Goal(3.0, over="a/pure/listener", label="vs pure")
#: >= 500k msgs/s on the compiled vm:// listener path (issue 5)
LISTENER_RATE = Goal(500_000.0, unit="msgs/s", issue=5)
#: ``build_compare --over selector``: a selector every message of that workload matches.
SELECTOR = "color = 'red' AND weight > 10"
SELECTED = {"color": "red", "weight": 12}
#: ``--over selectors``: that many consumers, one lane each.
LANES = 8


def vm_run(spec: Spec) -> dict[str, Any]:
    from jmspy import ConnectionFactory, Session
    from jmspy.transports import vm

    messages = int(spec["count"])
    name = f"bench-{os.getpid()}"
    # The listener row drains a queue filled first: the whole run is one backlog, which
    # the broker's default share (10 % of a 64 MB memory-limit) would hold back past
    # ~19,000 of these messages. Room for it, as docs/flow-control.md says to size one.
    # "stomp": the same workload over stomp:// to a ``jmspy broker`` process of the same
    # build and twin choice (JMSPY_PURE_TWINS is inherited): the twins of the STOMP codec,
    # the client's reads and the broker's SEND and MESSAGE paths act there, and nowhere
    # on vm://. A broker in this process would put its loop under this one's GIL.
    # "paging": vm:// to a broker with a store (a temporary --data-dir) and a memory limit
    # of 1 MB, so the listener row's backlog of persistent messages is paged out as it is
    # sent and read back from the store while it drains (``SqliteStore.take_page``).
    # "selector": the consumer carries a selector that every message matches (two
    # properties compared), evaluated by the broker once per message; "selectors": eight
    # consumers of the queue, each selecting one lane of eight (``lane = k``), so the
    # broker tries several selectors for each message (a content-routed queue). Where
    # ``selector_eval`` acts.
    over = spec.get("over", "vm")
    broker = None
    spool: Any = None
    selectors: list[str | None] = (
        [SELECTOR] if over == "selector"
        else [f"lane = {k}" for k in range(LANES)] if over == "selectors" else [None])
    # the properties each message carries for the selectors (none for the other rows,
    # whose loops stay exactly part (a)'s: nothing more per message than before)
    props: list[dict[str, Any]] | None = (
        [dict(SELECTED)] if over == "selector"
        else [{"lane": k} for k in range(LANES)] if over == "selectors" else None)
    if over == "stomp":
        from .peers import start_jmspy

        broker = start_jmspy("uvloop")
        url = f"stomp://{broker.host}:{broker.stomp_port}"
    elif over == "paging":
        import tempfile

        spool = tempfile.TemporaryDirectory(prefix="jmspy-bench-")
        vm.start_broker(name, data_dir=spool.name, memory_limit=1 << 20)
        url = f"vm://{name}"
    else:
        vm.start_broker(name, memory_limit=max(64 << 20, messages * 8192))
        url = f"vm://{name}"
    done = threading.Event()
    count = 0
    latencies: list[float] = []

    def drain(_msg: object) -> None:
        nonlocal count
        count += 1
        if count == messages:
            done.set()

    def timed(msg: Any) -> None:
        nonlocal count
        latencies.append(now() - msg.get_property("ts"))
        count += 1
        if count == messages:
            done.set()

    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        queue = session.create_queue("bench")
        producer = session.create_producer(queue)
        if props is None:
            for _ in range(messages):
                producer.send(session.create_text_message(BODY))
        else:
            for i in range(messages):
                producer.send(session.create_text_message(BODY, props[i % len(props)]))
        consumers = [session.create_consumer(queue, s) for s in selectors]
        t0 = time.perf_counter()
        for consumer in consumers:
            consumer.set_message_listener(drain)
        conn.start()
        done.wait()
        listener = messages / (time.perf_counter() - t0)
        for consumer in consumers:
            consumer.close()
        count = 0
        done.clear()
        consumers = [session.create_consumer(queue, s) for s in selectors]
        for consumer in consumers:
            consumer.set_message_listener(timed)
        send_session = conn.create_session()
        producer = send_session.create_producer(queue)
        if broker is not None:
            # Over stomp:// a persistent send waits for its RECEIPT: the row would time
            # one round trip per message, not the code the twins shortcut.
            from jmspy import DeliveryMode

            producer.delivery_mode = DeliveryMode.NON_PERSISTENT
        t0 = time.perf_counter()
        if props is None:
            for _ in range(messages):
                producer.send(send_session.create_text_message(BODY, {"ts": now()}))
        else:
            for i in range(messages):
                producer.send(send_session.create_text_message(
                    BODY, {**props[i % len(props)], "ts": now()}))
        done.wait()
        e2e = messages / (time.perf_counter() - t0)
    if broker is None:
        vm.stop_broker(name)
    else:
        broker.stop()
    if spool is not None:
        spool.cleanup()
    return {"listener": listener, "rate": e2e, **latency_metrics(latencies)}


def configs(quick: bool) -> list[Config]:
    count = 5_000 if quick else 50_000

    def make(pure: bool) -> Config:
        mode = "pure" if pure else "compiled"
        row = Row("a", f"a/{mode}", f"vm:// {mode} twins", f"{count:,} x 100 B, auto-ack",
                  baseline="a/pure" if not pure else None,
                  goals=[RATIO] if not pure else [], short="end to end")
        spec = {"role": "vm", "count": count}
        return Config(row, lambda _rnd: run_worker("part_a_vm", spec, pure=pure))

    return [make(False), make(True)]


def finish(rows: list[Row]) -> list[Row]:
    """The listener-path figures as rows of their own (same runs, same pairing)."""
    extra: list[Row] = []
    for row in rows:
        lrow = Row("a", row.key + "/listener", row.name, row.config.replace(
            "auto-ack", "listener path (pre-filled)"), unavailable=row.unavailable,
            runs=[{"rate": r["listener"]} for r in row.runs], short="listener path")
        if row.key == "a/compiled":
            lrow.goals = [LISTENER_RATIO, LISTENER_RATE]
            lrow.baseline = "a/pure/listener"
        row.config = row.config.replace("auto-ack", "end to end, auto-ack")
        extra.append(lrow)
    listener = {r.key: r for r in extra}
    for lrow in extra:
        base = listener.get(lrow.baseline or "")
        if base is not None and lrow.runs and base.runs:
            lrow.ratios = paired_ratios(lrow, base)
    return extra


def run(quick: bool, runs: int, progress: Progress, peers: Any) -> list[Row]:
    from .common import run_interleaved

    rows = run_interleaved(configs(quick), runs, progress)
    extra = finish(rows)
    progress.rows.extend(extra)
    return rows + extra + selector_rate.run(quick, runs, progress)


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick)) * runs + selector_rate.planned(quick, runs)


if __name__ == "__main__":
    from .common import worker_main

    worker_main({"vm": vm_run})
