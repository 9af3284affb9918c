"""Spark tests: a local[2] SparkSession for the session (tasks may be retried up to 4
times, as on a cluster), and ``jmspy broker`` as a subprocess per test on a free loopback
port (Spark reads in its own Python workers, so the broker must be reachable over
stomp://). These run in their own tox environment (pyspark is a 450 MB wheel and needs
Java)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import free_port

os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's workers run this interpreter
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


#: The Spark jobs here fill a queue (50,000 messages) or sink into one (100,000 rows) before
#: anything consumes it, on brokers without a store (in memory): with the default share of
#: memory per destination (10 % of the 64 MB memory-limit) producer flow control would hold
#: them, as it should. Sized as a user with such a backlog sizes their broker (docs/spark.md).
BACKLOG_CONFIG = "[system-usage]\ndestination-memory-percent = 100\n"


class Broker:
    """``jmspy broker --in-memory`` on a free port; its queues' counters over the wire."""

    def __init__(self, tmp: Path, *args: str) -> None:
        if "--config" not in args:  # these jobs queue 100,000 rows with nobody consuming
            config = tmp / "spark-broker.toml"
            config.write_text(BACKLOG_CONFIG)
            args = (*args, "--config", str(config))
        self.port = free_port()
        self.url = f"stomp://127.0.0.1:{self.port}"
        self.tmp, self.args = tmp, args
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--port", str(self.port), *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once it listens
        assert line.startswith("jmspy broker listening"), (line, self.proc.stderr)

    def restart(self, *, kill: bool = False) -> None:
        """Stop (``kill``: SIGKILL) and start again on the same port (and data dir)."""
        if kill:
            self.proc.kill()
            self.proc.communicate(timeout=20)
        else:
            self.stop()
        self._start()

    def fill(self, queue: str, n: int, *, prefix: str = "", persistent: bool = False) -> None:
        from jmspy import ConnectionFactory, DeliveryMode, Queue

        mode = DeliveryMode.PERSISTENT if persistent else DeliveryMode.NON_PERSISTENT
        with ConnectionFactory(self.url).create_connection() as conn:
            session = conn.create_session()
            producer = session.create_producer(Queue(queue))
            for i in range(n):
                producer.send(session.create_text_message(f"{prefix}{i}"), delivery_mode=mode)

    def stats(self, queue: str) -> dict[str, Any]:
        from jmspy.broker_ref.protocols.stomp.client import fetch_report

        rows = {r["name"]: r for r in fetch_report("127.0.0.1", self.port)[0]}
        return rows.get(queue, {"messageCount": 0, "deliveringCount": 0})

    def settled(self, queue: str, timeout: float = 60.0) -> dict[str, Any]:
        """The queue's counters once nothing in it is left unacknowledged, or as they are
        at ``timeout``. A query's last ACKs are written without a receipt when it ends;
        the broker acts on a connection's frames in order but in bounded batches per loop
        turn (fair turns), so a stats request on another connection can overtake them."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats(queue)
            if (stats["messageCount"] == 0 and stats["deliveringCount"] == 0) \
                    or time.monotonic() >= deadline:
                return stats
            time.sleep(0.05)  # waits for the broker to act on ACKs already written

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=20)


class EmbeddedBroker(Broker):
    """An application process that embeds the broker (``vm://``) and serves it over a STOMP
    connector (``BrokerHost.add_connector``); it fills queues from its own ``vm://``
    producer (vm_broker_child.py)."""

    def __init__(self, tmp: Path) -> None:  # starts the child, not `jmspy broker`
        child = Path(__file__).with_name("vm_broker_child.py")
        self.proc = subprocess.Popen(
            [sys.executable, str(child)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=tmp)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()  # printed once it listens
        assert self.url.startswith("stomp://127.0.0.1:"), (self.url, self.proc.stderr)
        self.port = int(self.url.rsplit(":", 1)[1])

    def fill(self, queue: str, n: int, *, prefix: str = "") -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{queue} {n} {prefix}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "filled"

    def stop(self) -> None:
        _, err = self.proc.communicate(timeout=20)  # end of input: it stops its broker
        assert self.proc.returncode == 0, err


@pytest.fixture(params=["jmspy broker", "embedded vm:// broker"])
def any_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """Each broker a Spark job meets: ``jmspy broker`` as a process, and an application
    process that embeds the broker and serves it over a connector."""
    b = Broker(tmp_path, "--in-memory") if request.param == "jmspy broker" else \
        EmbeddedBroker(tmp_path)
    yield b
    b.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path, "--in-memory")
    yield b
    b.stop()


@pytest.fixture
def stored_broker(tmp_path: Path) -> Iterator[Broker]:
    """``jmspy broker`` with its store (``--data-dir``): what it took survives a restart."""
    b = Broker(tmp_path, "--data-dir", str(tmp_path / "data"))
    yield b
    b.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from jmspy.spark import register

    session = (SparkSession.builder.master("local[2,4]")  # 4 attempts per task
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
