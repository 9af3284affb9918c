"""``jmspy demo`` paced: its per-interval rows show the window fill to the flow limit,
drain to the threshold and be topped up (in-process, with a tiny pace)."""

from __future__ import annotations

import pytest

from jmspy.cli import main


def _rows(out: str) -> list[list[str]]:
    """The counter rows (after the header, before "done:"), split on whitespace."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["time", "received"])
    return [line.split() for line in lines[start + 1:] if not line.startswith("done:")]


def test_paced_demo_rows_show_the_window_fill_drain_and_top_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 1 ms of work per message and a row every 20 ms: a few dozen rows, no wall-clock
    # bound asserted (on a slow machine there are just fewer messages per row)
    assert main(["demo", "--messages", "400", "--limit", "100", "--threshold", "50",
                 "--work-ms", "1", "--interval", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "imqConsumerFlowLimit=100, imqConsumerFlowThreshold=50% (top-up at 50 held)" in out
    assert "done: 400 messages" in out
    rows = _rows(out)
    assert len(rows) >= 2
    spans = [tuple(map(int, r[3].split("-"))) for r in rows if r[3] != "-"]
    # the listener saw the client hold exactly the limit, and exactly the threshold
    assert max(high for _, high in spans) == 100
    assert any(low == 50 for low, _ in spans)
    top_ups = [int(r[4]) for r in rows]
    assert top_ups == sorted(top_ups) and top_ups[-1] >= 6  # 400 = 100 + 6 x 50
    said = " ".join(" ".join(r[8:]) for r in rows)
    assert "filled to the limit (100)" in said or "full again (100)" in said
    assert "down to the threshold (50)" in said
    assert int(rows[-1][1]) == 400 and rows[-1][2] == "0"  # received all, none buffered


def test_fast_demo_keeps_the_unpaced_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--fast", "--messages", "3000"]) == 0
    out = capsys.readouterr().out
    assert "listener unpaced" in out and "done: 3000 messages" in out
    assert "set by client" in out
