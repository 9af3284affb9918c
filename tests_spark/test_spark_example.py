"""docs/examples/spark_pipeline.py runs in one command and totals every order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "spark_pipeline.py"


def test_the_pipeline_example_totals_every_order_into_a_queue_and_parquet(
        tmp_path: Path) -> None:
    # from the repository's root, as the docs run it: its children must not import the
    # checkout's jmspy/ source folder
    out = subprocess.run([sys.executable, str(EXAMPLE), "--orders", "2000",
                          "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    expected = json.loads(next(x for x in lines if x.startswith("sent")).split(": ", 1)[1])
    got = json.loads(next(x for x in lines if x.startswith("totals from")).split(": ", 1)[1])
    assert got == expected
    windows = next(x for x in lines if x.startswith("queue://totals holds"))
    assert int(windows.split()[2]) >= len(expected)
