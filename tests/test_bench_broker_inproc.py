"""benchmarks.broker_inproc: the receipt rows' frames through the broker's STOMP host in
one process, each reply checked, so a figure is never of a broker that answered wrongly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks import broker_inproc


@pytest.mark.parametrize("workload", broker_inproc.RECEIPT_WORKLOADS)
def test_each_receipt_workload_runs_through_the_broker(workload: str) -> None:
    assert workload.startswith("receipt-")
    assert broker_inproc.measure(workload, 50) > 0


def test_the_receipt_workloads_are_cpu_splits_receipt_rows() -> None:
    assert set(broker_inproc.RECEIPT_WORKLOADS) == {
        "receipt-auto", "receipt-client", "receipt-client-1"}


def test_an_unknown_workload_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="receipt-auto"):
        broker_inproc.measure("w1", 10)


def test_a_frame_the_workload_does_not_expect_stops_the_run() -> None:
    error = b"ERROR\nmessage:no such destination\n\nsorry\0"
    with pytest.raises(RuntimeError, match=r"expected a RECEIPT frame.*ERROR"):
        broker_inproc.expect(error, "RECEIPT", "receipt-id")
    receipt = b"RECEIPT\nreceipt-id:7\n\n\0"
    with pytest.raises(RuntimeError, match="expected receipt-id:8"):
        broker_inproc.expect(receipt, "RECEIPT", "receipt-id", b"8")
    with pytest.raises(RuntimeError, match="no message-id header"):
        broker_inproc.expect(receipt, "RECEIPT", "message-id")
    assert broker_inproc.expect(receipt, "RECEIPT", "receipt-id", b"7") == b"7"


def test_the_command_prints_each_run_and_the_median(capsys: pytest.CaptureFixture[str]) -> None:
    assert broker_inproc.main(["--workload", "receipt-client", "--count", "40",
                               "--runs", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["run 1", "run 2", "median"]
    assert "receipt-client, 40 msgs per run" in out[-1]
