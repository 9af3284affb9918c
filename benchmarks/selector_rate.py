"""(a) selector evaluation, compiled build vs pure build (JMSPY_PUREPYTHON=1), in matches/s.

Part of (a): like the vm:// rows, each run is a fresh worker process (the twins are chosen
at import) and compiled and pure runs alternate, so the per-round ratio compares the two
builds on the same machine state. The evaluator itself is pure Python in both (its
compiled twin was retired, :mod:`jmspy.selector.evaluate` says why): the ratio is the
compiled records' share of the broker filter, and about 1 for evaluation. A run compiles a
set of typical selectors once (comparisons, JMSPriority, LIKE with an escape, IN, BETWEEN,
IS NULL, arithmetic, three-valued NOT/OR) and matches each against a set of messages
whose values make every outcome (TRUE, FALSE, UNKNOWN, unlike types) occur, for a fixed
time.

Two figures per run:

* *evaluation*: ``Selector.matches`` with ``dict.get`` as the getter, so the figure is
  the evaluator's own cost (the getter is a C call);
* *broker filter*: the reference broker's ``filter_accepts`` on a ``ServerMessage``, the
  per-message, per-consumer path of server-side selectors, whose getter is a Python
  closure (headers mapped to message fields).
"""

from __future__ import annotations

import time
from typing import Any

from .common import Config, Progress, Row, Spec, run_worker

SELECTORS = (
    "color = 'red' AND weight > 10",
    "JMSPriority >= 5",
    "name LIKE 'a\\_%b' ESCAPE '\\'",
    "country IN ('UK', 'US', 'FR')",
    "weight BETWEEN 5 AND 20",
    "missing IS NULL",
    "weight * 2 + 1 > 15",
    "NOT (color = 'blue' OR missing > 3)",
)
PROPERTIES: tuple[dict[str, Any], ...] = (
    {"color": "red", "weight": 12, "name": "a_xxb", "country": "UK"},
    {"color": "blue", "weight": 3.5, "name": "abc", "country": "DE"},
    {"color": "green", "weight": 20, "name": "a_b", "missing": 1},
    {"weight": "heavy"},
)
PRIORITIES = (4, 7, 5, 9)


def _timed(loop: Any, seconds: float) -> float:
    """Calls of ``loop()`` (one pass = len(SELECTORS) * len(PROPERTIES) matches) per second."""
    passes = 0
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        loop()
        passes += 1
        now = time.perf_counter()
        if now >= deadline:
            return passes * len(SELECTORS) * len(PROPERTIES) / (now - started)


def selector_run(spec: Spec) -> dict[str, Any]:
    from jmspy import _speedups
    from jmspy.broker_ref.core.api import DestinationKind, ServerMessage
    from jmspy.broker_ref.core.filters import compile_filter, filter_accepts
    from jmspy.selector import compile_selector

    if bool(spec["pure"]) != _speedups.PURE_PYTHON:
        return {"error": f"expected the {'pure' if spec['pure'] else 'compiled'} build"}
    seconds = float(spec["seconds"])
    matchers = [compile_selector(text).matches for text in SELECTORS]
    getters = [{**props, "JMSPriority": prio}.get for props, prio in zip(
        PROPERTIES, PRIORITIES, strict=True)]
    filters = [f for f in (compile_filter(text) for text in SELECTORS) if f is not None]
    messages = [ServerMessage(message_id=f"ID:{i}", kind=DestinationKind.QUEUE, destination="q",
                              properties=props, priority=prio)
                for i, (props, prio) in enumerate(zip(PROPERTIES, PRIORITIES, strict=True))]

    def evaluate() -> None:
        for matches in matchers:
            for get in getters:
                matches(get)

    def broker() -> None:
        for flt in filters:
            for message in messages:
                filter_accepts(flt, message)

    evaluate()
    broker()  # warm up: first calls, caches
    return {"rate": _timed(evaluate, seconds), "broker": _timed(broker, seconds)}


def selector_configs(quick: bool) -> list[Config]:
    seconds = 0.2 if quick else 1.0

    def make(pure: bool) -> Config:
        mode = "pure" if pure else "compiled"
        row = Row("a", f"a/selector/{mode}", f"selector eval {mode} build",
                  f"{len(SELECTORS)} selectors x {len(PROPERTIES)} msgs, matches/s",
                  baseline="a/selector/pure" if not pure else None, short="selector matches/s")
        spec = {"role": "selector", "seconds": seconds, "pure": pure}
        return Config(row, lambda _rnd: run_worker("selector_rate", spec, pure=pure))

    return [make(False), make(True)]


def selector_finish(rows: list[Row]) -> list[Row]:
    """The broker-filter figures as rows of their own (same runs, same pairing)."""
    extra: list[Row] = []
    for row in rows:
        brow = Row("a", row.key + "/broker", row.name.replace("selector eval", "broker filter"),
                   row.config.replace("matches/s", "filter_accepts/s"),
                   unavailable=row.unavailable, runs=[{"rate": r["broker"]} for r in row.runs],
                   short="broker filter_accepts/s")
        if row.baseline is not None:
            base = next(r for r in rows if r.key == row.baseline)
            brow.baseline = base.key + "/broker"
            brow.ratios = [c["broker"] / p["broker"]
                           for c, p in zip(row.runs, base.runs, strict=False)]
        extra.append(brow)
    return extra


def run(quick: bool, runs: int, progress: Progress) -> list[Row]:
    from .common import run_interleaved

    rows = run_interleaved(selector_configs(quick), runs, progress)
    extra = selector_finish(rows)
    progress.rows.extend(extra)
    return rows + extra


def planned(quick: bool, runs: int) -> int:
    return len(selector_configs(quick)) * runs


if __name__ == "__main__":
    from .common import worker_main

    worker_main({"selector": selector_run})
