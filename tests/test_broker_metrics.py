"""``jmspy broker --metrics-port``: ``/metrics`` in the Prometheus text format, read back
with ``prometheus_client``'s own parser after a known workload."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from brokers import free_port
from polling import wait_until
from prometheus_client.parser import text_string_to_metric_families

from jmspy import ConnectionFactory

HANG = 300


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[int, str]]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jmspy", "broker", "--port", str(port), "--in-memory",
         "--metrics-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path)
    try:
        assert proc.stdout is not None
        first, second = proc.stdout.readline(), proc.stdout.readline()
        assert first.startswith(f"jmspy broker listening on 127.0.0.1:{port}"), first
        assert second.startswith("jmspy broker metrics on http://127.0.0.1:"), (
            second, proc.stderr.read() if proc.stderr else "")
        yield port, second.split()[-1]
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=HANG) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_metrics_after_a_known_workload(broker: tuple[int, str]) -> None:
    port, url = broker
    with ConnectionFactory(f"stomp://127.0.0.1:{port}").create_connection() as conn:
        session = conn.create_session()
        queue = session.create_queue("metered")
        producer = session.create_producer(queue)
        for i in range(7):
            producer.send(session.create_text_message(str(i)))
        consumer = session.create_consumer(queue)
        conn.start()
        assert all(consumer.receive(10) is not None for _ in range(3))
        q = (("destination", "metered"), ("kind", "queue"))

        def settled() -> bool:
            samples = _scrape(url)
            return samples.get(("jmspy_destination_messages_dequeued_total", q)) == 3
        assert wait_until(settled, 30)
        samples = _scrape(url)
        assert samples[("jmspy_destination_messages_enqueued_total", q)] == 7
        assert samples[("jmspy_destination_messages", q)] == 4
        assert samples[("jmspy_destination_consumers", q)] == 1
        assert samples[("jmspy_destination_messages_expired_total", q)] == 0
        assert samples[("jmspy_broker_connections", ())] == 1
        assert samples[("jmspy_broker_memory_limit_bytes", ())] > 0
        assert ("jmspy_broker_connections_refused_total",
                (("reason", "max_connections"),)) in samples
    assert wait_until(lambda: _scrape(url)[("jmspy_broker_connections", ())] == 0, 30)
