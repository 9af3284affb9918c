"""``jmspy broker --check --data-dir D`` only reports: 0 for a healthy store, 1 for damage
(saying what a starting broker would recover and lose -- the same numbers the salvage
then reports), 2 when there is nothing it can check; never a traceback, and it changes
and creates nothing (not even a mistyped directory)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_store_salvage import DAMAGES, STORED, fill

from jmspy.broker_ref.protocols.stomp.client import format_usage
from jmspy.broker_ref.store.sqlite_store import SqliteStore


def check(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jmspy", "broker", "--check", "--data-dir",
                           str(data_dir)], capture_output=True, text=True, timeout=120,
                          cwd="/tmp")


def snapshot(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with its content's digest and mode."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            + oct(p.stat().st_mode) for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_healthy_store_exits_0(tmp_path: Path) -> None:
    fill(tmp_path / "messages.sqlite")
    before = snapshot(tmp_path)
    result = check(tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"orders: {STORED:,} messages" in result.stdout
    assert "healthy" in result.stdout
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damage_exits_1_saying_what_the_salvage_at_start_then_recovers(
        tmp_path: Path, damage: str) -> None:
    path = tmp_path / "messages.sqlite"
    fill(path)
    DAMAGES[damage](path)
    before = snapshot(tmp_path)
    result = check(tmp_path)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert snapshot(tmp_path) == before  # a check repairs nothing, moves nothing
    found = re.search(r"([\d,]+) messages recovered, ([\d,]+) lost", result.stdout)
    assert found, result.stdout
    recovered, lost = (int(g.replace(",", "")) for g in found.groups())
    report = SqliteStore(path).salvaged  # the broker's start: the same numbers
    assert report is not None
    assert (report.kept, report.lost) == (recovered, lost)
    assert recovered + lost == STORED


def test_a_store_cut_to_nothing_exits_1_and_a_start_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """SQLite reads a 0-byte file as a new, empty database, so the check called a store
    cut to nothing healthy and a broker started on it without a word: every receipted
    message gone in silence."""
    path = tmp_path / "messages.sqlite"
    fill(path)
    path.write_bytes(b"")
    before = snapshot(tmp_path)
    result = check(tmp_path)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "EMPTY FILE" in result.stdout and "Traceback" not in result.stdout + result.stderr
    assert snapshot(tmp_path) == before
    with caplog.at_level(logging.WARNING, "jmspy.broker.store"):
        store = SqliteStore(path)
    store.close()
    assert any("the file is empty (0 bytes)" in r.getMessage() for r in caplog.records)


def test_a_store_of_nothing_but_garbage_says_its_loss_is_unknown(tmp_path: Path) -> None:
    """Not one page of the file reads: the report cannot count what was lost, and must
    not say "0 lost"."""
    path = tmp_path / "messages.sqlite"
    fill(path)
    path.write_bytes(bytes((i * 131 + 7) % 256 for i in range(path.stat().st_size)))
    result = check(tmp_path)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "0 messages recovered, an unknown number lost" in result.stdout
    assert " 0 lost" not in result.stdout
    report = SqliteStore(path).salvaged
    assert report is not None and report.lost_unknown
    assert "lost an unknown number" in report.describe()
    line = format_usage({k: str(v) for k, v in report.as_stats().items()})
    assert "0 messages recovered, an unknown number lost" in line


def test_a_missing_directory_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "mistyped" / "data"
    result = check(missing)
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "nothing was created" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "mistyped").exists()


def test_a_directory_without_a_store_exits_2_and_stays_empty(tmp_path: Path) -> None:
    result = check(tmp_path)
    assert result.returncode == 2
    assert "no message store in" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_store_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "messages.sqlite"
    fill(path)
    path.chmod(0)
    result = check(tmp_path)
    assert result.returncode == 2 and "cannot read" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_store_in_use_by_a_running_broker_exits_2(tmp_path: Path) -> None:
    from jmspy.broker_ref.data_dir import DataDirectory

    data = DataDirectory(tmp_path)  # holds the directory's lock, as a running broker does
    try:
        result = check(tmp_path)
    finally:
        data.store.close()
        data.release()
    assert result.returncode == 2 and "in use by a running broker" in result.stderr
