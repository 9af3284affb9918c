"""Massive queues at size (seed 002).

RSS does not grow with queue depth: the issue's benchmark row (1M vs 100k queued, under
16 MB; ``python -m benchmarks.massive_queue``) at the size a test can afford, 200k vs 20k
queued 1 KB persistent messages, in a fresh process of its own so that nothing else the
suite did moves its RSS. And a selector consumer on a 500k queue whose matches are the
last 1 % gets every one of them, in order, without the queue being loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from core_support import Recorder

from jmspy.broker_ref.core import Broker, DestinationKind, ServerMessage
from jmspy.broker_ref.store.sqlite_store import SqliteStore

_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from jmspy.broker_ref.core import Broker, DestinationKind, ServerMessage
    from jmspy.broker_ref.store.sqlite_store import SqliteStore

    def rss_kb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

    store = SqliteStore(sys.argv[1], group_commit=True)
    broker = Broker(store=store, memory_limit=8 * 1024 * 1024)
    class Callback:
        def deliver(self, delivery): ...
        def consumer_closed(self, consumer_id, reason): ...

    conn = broker.connect(Callback())
    body = "x" * 1024
    rss = []
    sent = 0
    for goal in (20_000, 200_000):
        for i in range(sent, goal):
            conn.send(ServerMessage(f"m{i}", DestinationKind.QUEUE, "q", body=body,
                                    size=1088))
            if i % 1000 == 0:
                store.commit()
        sent = goal
        store.commit()
        rss.append(rss_kb())
    stats = broker.stats("q")
    print(rss[0], rss[1], stats.message_count, stats.paged_count, stats.in_memory_count)
""")


def test_rss_stays_flat_from_20k_to_200k_queued_messages(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "m.sqlite")],
                         capture_output=True, text=True, check=False, timeout=600)
    assert out.returncode == 0, out.stderr
    rss_20k, rss_200k, count, paged, in_memory = map(int, out.stdout.split())
    print(f"RSS with 20,000 queued: {rss_20k / 1024:.1f} MB; with 200,000: "
          f"{rss_200k / 1024:.1f} MB; in RAM {in_memory:,}, paged {paged:,}")
    assert count == 200_000 and paged + in_memory == count
    assert in_memory * 1344 <= 8 * 1024 * 1024  # the budget holds: the rest is on disk
    assert rss_200k - rss_20k < 16 * 1024  # KB: 180,000 more messages cost no RAM


def test_a_selector_consumer_on_a_500k_queue_gets_the_last_1_percent(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.sqlite", group_commit=True)
    broker = Broker(store=store, memory_limit=8 * 1024 * 1024)
    prod = broker.connect(Recorder())
    n = 500_000
    body = "x" * 200
    for i in range(n):
        prod.send(ServerMessage(f"m{i}", DestinationKind.QUEUE, "q", body=body, size=264,
                                properties={"n": i}))
        if i % 10_000 == 0:
            store.commit()
    store.commit()
    assert broker.stats("q").paged_count > n - 30_000
    rec = Recorder()
    conn = broker.connect(rec)
    conn.create_consumer(1, DestinationKind.QUEUE, "q", selector=f"n >= {n - n // 100}",
                         credit=100)
    got: list[int] = []
    peak_ram = 0
    while batch := rec.take():
        got.extend(d.message.properties["n"] for d in batch)
        peak_ram = max(peak_ram, broker.stats("q").in_memory_count)
        conn.ack([d.delivery_tag for d in batch])
        conn.grant_credit(1, len(batch))
        store.commit()
    assert got == list(range(n - n // 100, n))
    stats = broker.stats("q")
    assert stats.message_count == n - n // 100
    assert peak_ram < 40_000  # the budget's worth and a batch: not the queue
    broker.close()
