"""Part (a)'s vm:// workload on several builds and twin choices, interleaved, side by side.

    python -m benchmarks.build_compare --runs 7
    python -m benchmarks.build_compare --runs 7 --build before=/path/to/other/venv/bin/python
    python -m benchmarks.build_compare --runs 7 --without message_new
    python -m benchmarks.build_compare --runs 7 --over stomp --without stomp_codec
    python -m benchmarks.build_compare --runs 7 --without records+queue_run --without every

Each ``--build NAME=PYTHON`` is an interpreter with some jmspy installed (another checkout,
say); ``this`` is the running interpreter's. ``--without TWIN`` adds, for this build, a
variant whose ``TWIN`` is the pure one while every other twin stays compiled
(``JMSPY_PURE_TWINS``): how much that one compiled module is worth end to end, the figure
the twin ledger in benchmarks/README.md keeps. ``A+B`` swaps a group together (twins that
read each other's C fields cannot run apart: such a variant fails, saying so); ``every``
is one variant per twin. Every round runs each variant once in a
fresh process, in turn, starting one variant later each round, so machine drift and the
first slot's edge hit all alike; "this, again" (the same build twice) shows the noise
floor a ratio must clear. The table gives the medians of
the end-to-end and listener-path rates (part_a_vm.py says what they measure) and each
variant's median ratio to the first one, paired round by round.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from statistics import median
from typing import Any

from .common import Spec, neutral_dir, worker_env, worker_main

#: Each layer's twin registry: their names are every twin there is.
REGISTRIES = ("jmspy.twins", "jmspy.api_twins", "jmspy.broker_ref.core.twins",
              "jmspy.broker_ref.core.run_twins", "jmspy.transports.twins")


def twin_names() -> list[str]:
    import importlib

    return sorted(name for registry in REGISTRIES
                  for name in importlib.import_module(registry).__all__)


def variant_run(spec: Spec) -> dict[str, Any]:
    """The part (a) worker (its twins chosen by ``JMSPY_PURE_TWINS``, set by the caller)."""
    from .part_a_vm import vm_run

    return vm_run(spec)


def _run(python: str, spec: Spec, pure: Sequence[str] = ()) -> dict[str, Any]:
    env = worker_env()
    if pure:
        env["JMSPY_PURE_TWINS"] = ",".join(pure)
    proc = subprocess.run(
        [python, "-m", "benchmarks.build_compare", json.dumps(spec)],
        env=env, cwd=neutral_dir(), capture_output=True, text=True, timeout=600,
    )
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    return {"error": " | ".join(proc.stderr.strip().splitlines()[-3:])}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.build_compare")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--count", type=int, default=50_000, help="messages per run")
    parser.add_argument("--over", choices=("vm", "stomp", "paging", "selector", "selectors"),
                        default="vm",
                        help="the workload: vm:// (part a's); stomp:// to a jmspy broker "
                        "process of the same build (where the STOMP twins act); paging: "
                        "vm:// to a broker with a store and a 1 MB memory limit, so the "
                        "backlog is paged out and read back (where the store's page reads act); "
                        "selector: vm:// with a selector on the consumer; selectors: "
                        "eight consumers, each selecting one lane of eight (both where "
                        "selector_eval acts)")
    parser.add_argument("--build", action="append", default=[], metavar="NAME=PYTHON")
    parser.add_argument("--without", action="append", default=[], metavar="TWIN[+TWIN]",
                        help="a variant of this build with these twins pure; 'every': one "
                        "per twin")
    args = parser.parse_args(argv)
    known = twin_names()
    groups: list[list[str]] = []
    for given in args.without:
        if given == "every":
            groups += [[name] for name in known]
            continue
        group = given.split("+")
        unknown = sorted(set(group) - set(known))
        if unknown:
            parser.error(f"--without {given}: no twin {', '.join(unknown)}; the twins are "
                         f"{', '.join(known)}")
        groups.append(group)
    variants: list[tuple[str, str, list[str]]] = [("this", sys.executable, [])]
    # The same build again: its ratio to "this" is the run's noise floor (an A/A pair),
    # which a twin's ratio must clear before it says anything.
    variants.append(("this, again", sys.executable, []))
    variants += [("without " + "+".join(g), sys.executable, g) for g in groups]
    for build in args.build:
        name, _, python = build.partition("=")
        variants.append((name, python, []))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in variants}
    for rnd in range(args.runs):
        # Each round starts one variant later: whichever runs first in a round ran faster
        # here (the later ones inherit a warmer, busier machine), and a fixed order gave
        # that edge to "this" every time.
        start = rnd % len(variants)
        for name, python, pure in variants[start:] + variants[:start]:
            got = _run(python, {"role": "variant", "count": args.count, "over": args.over},
                       pure)
            if "error" in got:  # said (a twin group that cannot run apart, a missing
                # package of that build...), and the rest goes on
                print(f"round {rnd + 1}/{args.runs} {name}: failed: {got['error']}",
                      file=sys.stderr, flush=True)
                results[name].append({"rate": float("nan"), "listener": float("nan")})
                continue
            results[name].append(got)
            print(f"round {rnd + 1}/{args.runs} {name}: end to end {got['rate']:,.0f}/s, "
                  f"listener {got['listener']:,.0f}/s", file=sys.stderr, flush=True)
    first = variants[0][0]
    print(f"{'variant':28} {'end to end/s':>14} {'listener/s':>12} {'e2e ratio':>10} "
          f"{'listener ratio':>15}   ({args.runs} rounds, {args.count:,} msgs over "
          f"{args.over}, medians)")
    for name, _, _ in variants:
        runs = results[name]
        failed = sum(r["rate"] != r["rate"] for r in runs)  # NaN: a round failed
        if failed:
            print(f"{name:28} failed in {failed} of {len(runs)} rounds (each round's "
                  "error is above)")
            continue
        e2e = [r["rate"] / b["rate"] for r, b in zip(runs, results[first], strict=True)]
        lis = [r["listener"] / b["listener"] for r, b in zip(runs, results[first], strict=True)]
        print(f"{name:28} {median(r['rate'] for r in runs):>14,.0f} "
              f"{median(r['listener'] for r in runs):>12,.0f} {median(e2e):>10.3f} "
              f"{median(lis):>15.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("{"):
        worker_main({"variant": variant_run})
    else:
        main()
