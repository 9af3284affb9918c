"""The documented examples run and print what the docs say they print."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_flow_batches_example_prints_batches_of_1000_then_500():
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "flow_batches.py")],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    lines = out.splitlines()
    assert "delivered=1000" in lines[0] and "deliveringCount=1000" in lines[0]
    assert "delivered=1000" in lines[1] and "batches=1" in lines[1]
    assert "deliveringCount=501" in lines[1]
    assert "delivered=1500" in lines[2] and "batches=2" in lines[2]
    assert "deliveringCount=1000" in lines[2] and "messageCount=2500" in lines[2]
    assert lines[3].startswith("batches: first 1000, then 500")


def test_demo_command_prints_flow_counters_and_finishes(tmp_path):
    # cwd outside the checkout: `-m` puts cwd first on sys.path, and the source tree's
    # jmspy/ is not the installed package (transports/ and broker_ref/ map into it).
    out = subprocess.run(
        [sys.executable, "-m", "jmspy", "demo", "--fast", "--messages", "3000"],
        check=True, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    ).stdout
    assert "imqConsumerFlowLimit=1000" in out
    assert "done: 3000 messages" in out and "set by client" in out
