"""``jmspy bench`` runs the benchmark suite of a source checkout (``python -m benchmarks``),
and outside one says where the benchmarks live instead of Python's bare "No module named
benchmarks". Only ``--help`` reaches the suite here: no benchmark is run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jmspy.cli_bench import find_checkout

#: guards against a hung subprocess only (a failure, not a timing requirement)
HANG = 120
CHECKOUT = Path(__file__).resolve().parent.parent


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jmspy", "bench", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=HANG)


@pytest.mark.parametrize("args", [[], ["--quick"]])
def test_outside_a_checkout_it_says_where_the_benchmarks_live(
    tmp_path: Path, args: list[str],
) -> None:
    done = _bench(*args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jmspy bench: error: "), done.stderr
    for words in ("not installed with jmspy", "benchmarks/ folder of the jmspy source "
                  "repository", "python -m benchmarks", "from the checkout's root"):
        assert words in lines[0], words
    assert "No module named" not in done.stderr


def test_its_help_outside_a_checkout_is_its_own_and_exits_0(tmp_path: Path) -> None:
    done = _bench("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "they live in the benchmarks/ folder" in " ".join(done.stdout.split())


@pytest.mark.parametrize("where", ["docs", "benchmarks"])
def test_inside_a_checkout_it_reaches_the_suite(where: str) -> None:
    done = _bench("--help", cwd=CHECKOUT / where)
    assert done.returncode == 0, done.stderr
    assert "Run the benchmark suite (python -m benchmarks ARGS)" in done.stdout
    assert "usage: python -m benchmarks" in done.stdout and "--quick" in done.stdout


def test_a_folder_named_benchmarks_of_another_project_is_not_a_checkout(
    tmp_path: Path,
) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__main__.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert find_checkout(tmp_path / "benchmarks") is None
    assert find_checkout(CHECKOUT / "docs") == CHECKOUT
