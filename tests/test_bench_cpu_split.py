"""benchmarks.cpu_split: its warm-up (enough unmeasured runs for a JVM broker's JIT) and
the clients it can put side by side."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks.cpu_split import WARMUP_MESSAGES, WORKLOADS, main, warmup_runs
from benchmarks.part_b_stomp_client import stomp_specs
from benchmarks.peers import Endpoint


def test_every_workload_warms_each_broker_with_at_least_the_warmup_messages() -> None:
    for _ack, _window, _receipts, count in WORKLOADS.values():
        runs = warmup_runs(count)
        assert runs * count >= WARMUP_MESSAGES
        assert (runs - 1) * count < WARMUP_MESSAGES  # and not a run more than that


def test_a_run_larger_than_the_warmup_is_still_run_once_unmeasured() -> None:
    assert warmup_runs(WARMUP_MESSAGES * 3) == 1
    assert warmup_runs(5_000, messages=40_000) == 8
    assert warmup_runs(3_000, messages=40_000) == 14


def test_an_unknown_client_is_refused_naming_the_ones_there_are(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--workload", "w1", "--client", "jmspy,paho"])
    assert exited.value.code == 2
    assert "choose from raw, jmspy, jmspy-nospin" in capsys.readouterr().err


def test_the_nospin_client_asks_the_url_for_no_polling() -> None:
    ep = Endpoint("jmspy-uvloop", "127.0.0.1", 61613, None)
    urls = {client: stomp_specs(ep, client, "client-individual", 1, 10)[0]["url"]
            for client in ("jmspy", "jmspy-nospin")}
    assert "idle_spin_us" not in urls["jmspy"]
    assert urls["jmspy-nospin"].endswith("&idle_spin_us=0")
