"""Reading on the executors of a real Spark standalone cluster (a master and two workers on
loopback, started here), with a worker killed with SIGKILL in the middle of a batch: its
task had read and lent its share when the worker died; Spark runs the task again on the
other worker, which releases that lease and reads the share again. Every message reaches
the sink exactly once, the duplicates the broker sent are exactly the killed task's share
and every one of them is marked redelivered, and the queue ends empty."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from brokers import free_port
from conftest import Broker

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout: benchmarks/
from benchmarks.spark_standalone import StandaloneCluster, loopback_env

N, PARTS, PER_TRIGGER = 6_000, 2, 2_000
SHARE = PER_TRIGGER // PARTS


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    (tmp_path / "cluster").mkdir()
    c = StandaloneCluster(tmp_path / "cluster", free_port, workers=2, cores=1)
    yield c
    c.stop()


def _wait_for(path: Path, driver: subprocess.Popen[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        if driver.poll() is not None:
            raise AssertionError(f"the driver ended ({driver.returncode}) before {path.name}: "
                                 f"{driver.communicate()[1][-3000:]}")
        time.sleep(0.2)  # waits for the stalled task to announce itself
    raise AssertionError(f"no {path.name} after {timeout} s")


def test_a_worker_killed_mid_batch_loses_nothing_and_only_its_share_comes_again_marked(
        cluster: StandaloneCluster, broker: Broker, tmp_path: Path) -> None:
    broker.fill("cluster", N)
    out, markers = tmp_path / "out", tmp_path / "markers"
    out.mkdir()
    markers.mkdir()
    (markers / "armed").write_text("1")
    child = Path(__file__).with_name("cluster_driver_child.py")
    driver = subprocess.Popen(
        [sys.executable, str(child), cluster.url, broker.url, "cluster",
         str(tmp_path / "ckpt"), str(out), str(PARTS), str(PER_TRIGGER), str(markers)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=loopback_env(tmp_path))
    try:
        pid = int(_wait_for(markers / "fired", driver, 300))
        assert cluster.kill_session_of(pid) >= 3  # worker, executor, Python worker
        _, err = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, err[-3000:]
    assert [w.poll() is not None for w in cluster.workers].count(True) == 1  # one killed
    rows = [line.split() for f in sorted(out.iterdir()) for line in f.read_text().splitlines()]
    texts = sorted(int(text) for text, _ in rows)
    assert texts == list(range(N))  # each message once in the sink: none lost, none twice
    marked = [text for text, redelivered in rows if redelivered == "1"]
    assert len(marked) == SHARE  # the killed task's lent share, released and read again
    stats = broker.settled("cluster")
    assert stats["messageCount"] == 0 and stats["deliveringCount"] == 0
