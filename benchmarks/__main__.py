"""Run the benchmark suite: ``python -m benchmarks [--quick] [--runs N] [--only a,c,e]``.

Prints a results table, writes ``benchmarks/results/bench-<time>.json`` and ``.png`` (and
``latest.json`` / ``latest.png``). See benchmarks/README.md for what each part measures.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import time
from collections.abc import Sequence
from types import ModuleType

from . import machine, report, scale_plot
from .common import Progress, Row
from .peers import Peers

PARTS = {
    "a": "part_a_vm",
    "b": "part_b_stomp_client",
    "c": "part_c_brokers",
    "d": "part_d_mqtt",
    "e": "part_e_flow",
    "f": "part_f_scaling",
}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3,
                        help="interleaved runs per figure (the median is reported)")
    parser.add_argument("--quick", action="store_true", help="small message counts (smoke run)")
    parser.add_argument("--only", default="abcdef",
                        help="parts to run, e.g. a,c,e (default: all)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    args = parser.parse_args(argv)
    args.parts = [p for p in args.only.replace(",", "") if p.strip()]
    bad = [p for p in args.parts if p not in PARTS]
    if bad or args.runs < 1:
        parser.error(f"--only takes letters from {''.join(PARTS)}; --runs >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if not args.no_plot:
        report._matplotlib()  # fail now, not after minutes of measuring
    modules: dict[str, ModuleType] = {
        p: importlib.import_module(f"benchmarks.{PARTS[p]}") for p in args.parts
    }
    total = sum(m.planned(args.quick, args.runs) for m in modules.values())
    progress = Progress(total)
    started = time.time()
    idle = machine.cpu_idle()  # before the brokers start: a setting, read once
    with Peers(log=progress.log) as peers:
        try:
            for module in modules.values():
                module.run(args.quick, args.runs, progress, peers)
        except KeyboardInterrupt:
            progress.log("interrupted: reporting what was measured")
        finally:
            progress.show("stopping brokers")
    progress.close()
    rows: list[Row] = progress.rows
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    report.RESULTS_DIR.mkdir(exist_ok=True)
    base = report.RESULTS_DIR / f"bench-{stamp}"
    command = "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:])
    meta = {"command": command.strip(), "started": stamp, "runs": args.runs,
            "quick": args.quick, "parts": args.parts, "seconds": round(time.time() - started),
            "cpu_idle": idle}
    print(machine.describe(idle))
    print(report.table(rows, args.runs))
    report.write_json(rows, base.with_suffix(".json"), meta)
    shutil.copyfile(base.with_suffix(".json"), report.RESULTS_DIR / "latest.json")
    print(f"\n{meta['command']}: {meta['seconds']} s; results: {base.with_suffix('.json')}")
    if not args.no_plot:
        subtitle = (f"medians of {args.runs} interleaved runs"
                    f"{' (--quick)' if args.quick else ''}, {stamp}")
        report.plot(rows, base.with_suffix(".png"), subtitle)
        shutil.copyfile(base.with_suffix(".png"), report.RESULTS_DIR / "latest.png")
        print(f"plot: {base.with_suffix('.png')}")
        curves = base.with_name(base.name + "-scaling.png")
        if scale_plot.plot(rows, curves, subtitle, report._matplotlib):
            shutil.copyfile(curves, report.RESULTS_DIR / "latest-scaling.png")
            print(f"curves: {curves}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
