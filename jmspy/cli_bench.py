"""``jmspy bench``: run the benchmark suite, which lives in the source repository only.

The benchmarks need the peer brokers, their clients and plotting libraries, and write
their results beside themselves (``benchmarks/results/``), so they are not part of the
installed package: the ``benchmarks/`` folder of a jmspy checkout holds them, run with
``python -m benchmarks`` from the checkout's root. ``jmspy bench ARGS`` is that command,
run in the root, from anywhere inside a checkout (the current directory or one of its
parents); outside
one it says where the benchmarks are instead of Python's bare "No module named
benchmarks".
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from jmspy.cli_support import HelpFormatter

__all__ = ["DESCRIPTION", "add_command", "bench_command", "find_checkout"]

DESCRIPTION = """\
Run the benchmark suite (python -m benchmarks ARGS) of a jmspy source checkout.

The benchmarks are not installed with jmspy: they live in the benchmarks/ folder of the
jmspy source repository (see benchmarks/README.md there). Run this command from the
checkout's root or any folder inside it; every argument goes to the suite unchanged.
The suite's own options: jmspy bench --help, from inside a checkout.

examples:
  jmspy bench --quick            a small smoke run of every part
  jmspy bench --only a,c --runs 5"""

_NOT_HERE = ("the benchmarks are not installed with jmspy: they live in the benchmarks/ "
             "folder of the jmspy source repository. Clone it and run `python -m benchmarks "
             "[--quick] [--only a,c,e]` (or `jmspy bench ...`) from the checkout's root; "
             "benchmarks/README.md there says what each part measures and needs")


def find_checkout(start: Path) -> Path | None:
    """The root of the jmspy source checkout holding ``start`` (itself or a parent), or
    None. A root has ``benchmarks/__main__.py`` and a ``pyproject.toml`` naming jmspy, so
    some other project's ``benchmarks`` folder is never run by mistake."""
    for root in (start, *start.parents):
        pyproject = root / "pyproject.toml"
        if (root / "benchmarks" / "__main__.py").is_file() and pyproject.is_file():
            try:
                text = pyproject.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if 'name = "jmspy"' in text:
                return root
    return None


def bench_command(args: argparse.Namespace) -> int:
    """Run ``python -m benchmarks`` in the checkout's root, as its README says; its exit
    code. The root is the working directory and nothing is added to ``PYTHONPATH``: the
    suite starts its workers from neutral directories so that they import the installed
    jmspy, and an inherited ``PYTHONPATH`` naming the checkout would defeat that."""
    wants_help = any(a in ("-h", "--help") for a in args.bench_args)
    root = find_checkout(Path.cwd())
    if wants_help:
        print(DESCRIPTION + ("\n\nThe suite's options:\n" if root else ""), flush=True)
    if root is None:
        if wants_help:
            return 0
        print(f"jmspy bench: error: {_NOT_HERE}", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, "-m", "benchmarks", *args.bench_args], cwd=root)


def add_command(sub: Any) -> None:
    """Register ``bench`` on ``jmspy``'s sub-parsers. Its parser has no options of its own
    (``prefix_chars="+"``): every argument, ``--help`` included, reaches the suite, and
    :func:`bench_command` puts this command's own description above the suite's help."""
    bench = sub.add_parser("bench", help="run the benchmark suite of a jmspy source "
                           "checkout (python -m benchmarks; not installed with jmspy)",
                           description=DESCRIPTION, formatter_class=HelpFormatter,
                           add_help=False, prefix_chars="+",
                           usage="jmspy bench [--help] [ARGS ...]")
    bench.add_argument("bench_args", nargs="*", metavar="ARGS",
                       help="arguments for python -m benchmarks, passed on unchanged")
    bench.set_defaults(func=bench_command)
