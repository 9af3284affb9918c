"""How many lines the compiled twins cost: the twin ledger's other column.

    python -m benchmarks.twin_lines [--root CHECKOUT] [--root OTHER_CHECKOUT]

Counts, per compiled twin (each ``cython_ext/NAME.pyx``), the lines that exist only
because the twin does: its Cython source, the ``jmspy/_cext`` stub and ``.pxd`` that type
it, and its differential tests (``tests/**/test_*_twins.py`` whose name starts with the
twin's). The machinery every twin shares (the loader, the C-field ``.pxd``/``.pxi``
helpers, the twin test support) is one more row. Pure twins are not counted: they are
the implementation, and stay when a compiled twin is retired. Works on any checkout (an
older commit's worktree too), so a change's before and after are counted alike.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

__all__ = ["count", "main"]

#: What every twin shares, relative to a checkout's root (present or not in a given one).
SHARED = ("jmspy/_speedups.py", "jmspy/_cext/members.pxd", "tests/twin_support.py")


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def count(root: Path) -> dict[str, int]:
    """Lines per twin under ``root``, plus ``(shared)``."""
    twins = sorted(p.stem for p in (root / "cython_ext").glob("*.pyx"))
    tests = sorted((root / "tests").rglob("test_*_twins.py"))
    out: dict[str, int] = {}
    for name in twins:
        files = [root / "cython_ext" / f"{name}.pyx",
                 root / "jmspy" / "_cext" / f"{name}.pyi",
                 root / "jmspy" / "_cext" / f"{name}.pxd"]
        # the longest twin name a test file starts with owns it (queue_run vs queue)
        files += [t for t in tests
                  if max((n for n in twins if t.name.startswith(f"test_{n}")),
                         key=len, default=None) == name]
        out[name] = sum(_lines(f) for f in files if f.exists())
    owned = {t for t in tests if any(t.name.startswith(f"test_{n}") for n in twins)}
    shared = [root / s for s in SHARED] + sorted((root / "cython_ext").glob("*.pxi"))
    shared += [t for t in tests if t not in owned]  # twin tests of several twins at once
    out["(shared)"] = sum(_lines(f) for f in shared if f.exists())
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.twin_lines")
    parser.add_argument("--root", action="append", type=Path, default=[],
                        help="a checkout to count (repeat to compare; default: this one)")
    args = parser.parse_args(argv)
    roots = args.root or [Path(__file__).resolve().parent.parent]
    counts = [count(r) for r in roots]
    names = [*sorted({n for c in counts for n in c if n != "(shared)"}), "(shared)"]
    print(f"{'twin':18}" + "".join(f"{str(r)[-24:]:>26}" for r in roots))
    for name in names:
        print(f"{name:18}" + "".join(f"{c.get(name, 0):>26,}" for c in counts))
    print(f"{'total':18}" + "".join(f"{sum(c.values()):>26,}" for c in counts))


if __name__ == "__main__":
    main()
