"""Seed 003's acceptance against ``jmspy broker`` as a real process: a producer flooding
1 KB non-persistent messages into a queue nobody consumes, under ``memory-limit =
"16 MB"``, is stopped (and the broker says so, in its log and in ``jmspy stat``) while
the broker's RSS stays bounded; a consumer started later gets every message and the
producer resumes. Persistent messages page to disk instead: that producer never waits."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import free_port
from flow_support import until

from jmspy import ConnectionFactory, DeliveryMode, Queue
from jmspy.broker_ref.protocols.stomp.client import fetch_report

BODY = "x" * 1024


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class BrokerProcess:
    def __init__(self, tmp_path: Path, config: str, *args: str) -> None:
        self.port = free_port()
        cfg = tmp_path / "broker.toml"
        cfg.write_text(config)
        self.log = (tmp_path / "broker.log").open("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--port", str(self.port),
             "--config", str(cfg), *args],
            stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=tmp_path)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once it listens
        assert line.startswith("jmspy broker listening"), (line, self._log())

    def _log(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def usage(self) -> dict[str, str]:
        return fetch_report("127.0.0.1", self.port)[1]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=20)  # waits, and closes its stdout pipe
        self.log.close()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    made: list[BrokerProcess] = []

    def make(config: str, *args: str) -> BrokerProcess:
        b = BrokerProcess(tmp_path, config, *args)
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop()


class Producing(threading.Thread):
    def __init__(self, url: str, n: int, mode: DeliveryMode, **props: Any) -> None:
        super().__init__(daemon=True)
        self.factory = ConnectionFactory(url, **props)
        self.n, self.mode = n, mode
        self.sent = 0
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            with self.factory.create_connection() as conn:
                session = conn.create_session()
                producer = session.create_producer(Queue("flood"))
                for i in range(self.n):
                    producer.send(session.create_text_message(f"{i}:{BODY}"),
                                  delivery_mode=self.mode)
                    self.sent += 1
        except Exception as exc:
            self.error = exc


def test_a_flooding_producer_is_stopped_at_16_mb_rss_stays_bounded_and_none_is_lost(
        start: Callable[..., BrokerProcess]) -> None:
    b = start('[system-usage]\nmemory-limit = "16 MB"\n', "--in-memory")
    idle_kb = _rss_kb(b.proc.pid)
    n = 25_000  # about twice what 16 MB holds
    producer = Producing(f"stomp://127.0.0.1:{b.port}", n, DeliveryMode.NON_PERSISTENT)
    producer.start()
    until(lambda: b.usage().get("blockedProducers") == "1", "the producer to be stopped",
          timeout=60)
    held = producer.sent
    assert producer.is_alive() and held < n
    rss_kb = _rss_kb(b.proc.pid)
    print(f"broker RSS idle {idle_kb / 1024:.1f} MB, producer stopped at {held:,} messages: "
          f"{rss_kb / 1024:.1f} MB")
    assert rss_kb < idle_kb + (16 + 40) * 1024
    assert "stopping producer" in b._log() and "queue 'flood'" in b._log()
    stat = subprocess.run([sys.executable, "-m", "jmspy", "stat", "--port", str(b.port)],
                          capture_output=True, text=True, timeout=30)
    usage_line, header, *rows = stat.stdout.splitlines()
    assert "producers waiting for space: 1" in usage_line
    row = dict(zip(header.split(), next(r.split() for r in rows if r.startswith("flood")),
                   strict=True))
    assert row["blockedProducers"] == "1"
    with ConnectionFactory(f"stomp://127.0.0.1:{b.port}").create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue("flood"))
        conn.start()
        for i in range(n):
            m = consumer.receive(30.0)
            assert m is not None and int(m.text.split(":")[0]) == i  # all, in order
    producer.join(60)
    assert producer.error is None and producer.sent == n  # it resumed and finished
    assert "resuming producer" in b._log()


def test_persistent_messages_page_to_disk_and_their_producer_never_waits(
        start: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    b = start('[system-usage]\nmemory-limit = "16 MB"\n', "--data-dir", str(tmp_path / "d"))
    n = 25_000
    producer = Producing(f"stomp://127.0.0.1:{b.port}", n, DeliveryMode.PERSISTENT,
                         persistentSendWindow=500, sendTimeout=30_000)
    producer.run()  # would raise ResourceAllocationException if it had to wait 30 s
    assert producer.error is None and producer.sent == n
    stats = {r["name"]: r for r in fetch_report("127.0.0.1", b.port)[0]}["flood"]
    assert stats["messageCount"] == n and stats["pagedCount"] > n // 3
    assert "stopping producer" not in b._log()
