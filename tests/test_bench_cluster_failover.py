"""The cluster failover benchmark pairs its clients on one kill per round: the failover
rows' ratio compares two clients after the same leader election, not after two."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

# the benchmarks live in the checkout, beside tests/ (as for the other benchmark tests)
sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks import cluster_failover


def test_each_round_kills_once_and_every_client_reads_that_kill(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kills: list[int] = []

    def fake_kill(cluster: Any, count: int) -> dict[str, dict[str, Any]]:
        kills.append(count)
        n = len(kills)
        return {client: {"failover_s": n + i / 10}
                for i, client in enumerate(cluster_failover.CLIENTS)}

    monkeypatch.setattr(cluster_failover, "_paired_kill", fake_kill)
    configs = cluster_failover.configs(cluster=None, count=800)
    failover = [c for c in configs if c.row.key.startswith("g/failover/")]
    assert [c.row.key for c in failover] == [f"g/failover/{c}" for c in cluster_failover.CLIENTS]
    seen = [[cfg.run(rnd)["failover_s"] for cfg in failover] for rnd in range(3)]
    assert kills == [800, 800, 800]  # one kill a round, under every client
    assert seen == [[1.0, 1.1], [2.0, 2.1], [3.0, 3.1]]
