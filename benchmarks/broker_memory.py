"""(c) What ``jmspy broker`` keeps in RAM per queued message and per queue (issue 17).

Each run starts a fresh ``jmspy broker --in-memory`` (its default event loop, a
``memory-limit`` of 1 GB so nothing pages out or blocks) and floods it with raw stomp.py,
no consumer anywhere, in a worker process: a warm-up flood first (the connection, the
queue, the allocator's first arenas), then the broker's RSS (``/proc/<pid>/status``), the
measured flood, its RSS again once the RECEIPT of the last SEND is in (every message is
queued by then). The figure is the difference over the count, in KB:

* per queued message: ``count`` x 1 KB bodies on one queue (goal <= 1.5 KB: the body plus
  at most half a KB of headers and bookkeeping);
* per queue: ``count`` queues each holding one 100 B message (goal <= 2 KB).

RSS includes everything the process touched (allocator slack, fragmentation), which is
what a user provisions; the count is large enough that page-size steps do not matter.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from .broker_probe import rss_kb
from .common import Config, Goal, Progress, Row, Spec, run_worker, worker_env, worker_main
from .peers import _spawn_local

PER_MESSAGE = Goal(1.5, metric="kb", at_most=True, unit="KB", label="RSS per message")
PER_QUEUE = Goal(2.0, metric="kb", at_most=True, unit="KB", label="RSS per queue")
CONFIG = '[system-usage]\nmemory-limit = "1 GB"\n'


def flood(spec: Spec) -> dict[str, Any]:
    """Worker: ``count`` SENDs of ``size`` bytes to ``dest`` (or to ``dest.<i>`` for each
    message when ``spread``), the last with a receipt, and wait for it."""
    import stomp

    got = threading.Event()

    class Receipt(stomp.ConnectionListener):  # type: ignore[misc]
        def on_receipt(self, frame: Any) -> None:
            got.set()

    conn = stomp.Connection12([(spec["host"], spec["port"])], heartbeats=(0, 0),
                              auto_content_length=True)
    conn.set_listener("flood", Receipt())
    conn.connect(wait=True)
    body = "x" * spec["size"]
    count = spec["count"]
    for i in range(count):
        dest = f"{spec['dest']}.{i}" if spec["spread"] else spec["dest"]
        conn.send(destination=dest, body=body,
                  headers={"receipt": "last"} if i == count - 1 else {})
    if not got.wait(120):
        return {"error": "no RECEIPT for the last SEND"}
    conn.disconnect()
    return {"sent": count}


def measure(count: int, warm: int, size: int, spread: bool) -> dict[str, Any]:
    """One run on a fresh broker: KB of RSS per message of the measured flood."""
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-memory-"))
    config = work / "broker.toml"
    config.write_text(CONFIG)
    try:
        broker = _spawn_local("jmspy-memory", [
            sys.executable, "-m", "jmspy", "broker", "--host", "127.0.0.1", "--port", "{port}",
            "--in-memory", "--config", str(config)], env=worker_env())
    except Exception as exc:
        return {"error": f"jmspy broker could not start: {exc}".splitlines()[0]}
    try:
        prefix = f"/queue/mem.{uuid.uuid4().hex[:8]}"
        base = {"role": "flood", "host": broker.host, "port": broker.stomp_port,
                "size": size, "spread": spread}
        got = run_worker("broker_memory", {**base, "count": warm, "dest": prefix + ".warm"})
        if "error" in got:
            return got
        before = rss_kb(broker.proc.pid)
        got = run_worker("broker_memory", {**base, "count": count, "dest": prefix})
        if "error" in got:
            return got
        after = rss_kb(broker.proc.pid)
    finally:
        broker.stop()
    return {"kb": (after - before) / count, "mb_before": before / 1024,
            "mb_after": after / 1024}


def configs(quick: bool) -> list[Config]:
    messages = 5_000 if quick else 20_000
    queues = 1_000 if quick else 5_000
    rows = [
        (Row("c", "c/jmspy/rss-message", "stomp.py -> jmspy broker, no consumer",
             f"{messages:,} x 1 KB queued on one queue, in memory",
             short="RSS per queued 1 KB msg", goals=[PER_MESSAGE]),
         lambda _rnd: measure(messages, 1_000, 1024, False)),
        (Row("c", "c/jmspy/rss-queue", "stomp.py -> jmspy broker, no consumer",
             f"{queues:,} queues holding one 100 B message each, in memory",
             short="RSS per queue", goals=[PER_QUEUE]),
         lambda _rnd: measure(queues, 200, 100, True)),
    ]
    return [Config(row, run) for row, run in rows]


def finish(rows: list[Row]) -> None:
    """The RSS before and after the measured flood, in the note (medians over runs)."""
    for row in rows:
        if row.runs:
            row.note = (f"RSS {row.med('mb_before'):,.1f} -> {row.med('mb_after'):,.1f} MB "
                        "(medians)")


def run(quick: bool, runs: int, progress: Progress) -> list[Row]:
    from .common import run_interleaved

    rows = run_interleaved(configs(quick), runs, progress)
    finish(rows)
    return rows


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick)) * runs


if __name__ == "__main__":
    worker_main({"flood": flood})
