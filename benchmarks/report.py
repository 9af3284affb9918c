"""The results table (stdout), the JSON record and the PNG plot (matplotlib)."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .common import Row

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TITLES = {
    "a": "(a) vm:// compiled vs pure",
    "b": "(b) jmspy STOMP client vs raw stomp.py",
    "c": "(c) brokers serving raw stomp.py",
    "d": "(d) jmspy MQTT vs raw paho (Mosquitto)",
    "e": "(e) flow limit trade-off",
    "f": "(f) scaling: connections, queues, sizes, fan-out, open-loop latency",
}


def _num(value: float, fmt: str) -> str:
    return "-" if value is None or math.isnan(value) else format(value, fmt)


def goals_text(row: Row, by_key: dict[str, Row]) -> str:
    """Every goal of the row with its figure and ``ok`` / ``MISSED`` (or ``n/a``)."""
    return "; ".join(g.verdict(row, by_key) for g in row.all_goals())


def table(rows: list[Row], runs: int) -> str:
    head = ("part", "benchmark", "config", "msgs/s", "p50 ms", "p99 ms", "ratio", "goal",
            "note")
    by_key = {r.key: r for r in rows}
    lines: list[tuple[str, ...]] = []
    for r in rows:
        goal = goals_text(r, by_key)
        if r.unavailable:
            lines.append((r.part, r.name, r.config, "-", "-", "-", "-", goal,
                          f"not available: {r.unavailable}"[:110]))
            continue
        ratio = r.ratio
        lines.append((r.part, r.name, r.config, _num(r.med("rate"), ",.0f"),
                      _num(r.med("p50_ms"), ".2f"), _num(r.med("p99_ms"), ".2f"),
                      f"{ratio:.2f}x" if ratio is not None else "", goal, r.note))
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
    right = {3, 4, 5, 6}

    def fmt(cols: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cols, widths, strict=True))).rstrip()

    goals = [g for r in rows for g in r.all_goals()]
    met = sum(1 for r in rows for g in r.all_goals()
              if (v := g.value(r, by_key)) is not None and g.met(v))
    measured = sum(1 for r in rows for g in r.all_goals() if g.value(r, by_key) is not None)
    out = [f"medians of {runs} interleaved run(s); ratio = median of per-round ratios to the "
           "row named in the JSON 'baseline'; goal = each goal of the row (benchmarks/"
           "README.md), its figure, ok or MISSED",
           fmt(head), fmt(tuple("-" * w for w in widths))]
    prev = ""
    for r, line in zip(rows, lines, strict=True):
        if prev and r.part != prev:
            out.append("")
        prev = r.part
        out.append(fmt(line))
    out.append("")
    out.append(f"goals: {met} of {measured} measured met, {measured - met} MISSED, "
               f"{len(goals) - measured} not measured")
    return "\n".join(out)


def _goal_results(row: Row, by_key: dict[str, Row]) -> list[dict[str, Any]]:
    out = []
    for g in row.all_goals():
        value = g.value(row, by_key)
        out.append({**asdict(g), "value": value,
                    "met": None if value is None else g.met(value)})
    return out


def write_json(rows: list[Row], path: Path, meta: dict[str, Any]) -> None:
    by_key = {r.key: r for r in rows}
    record = {
        **meta,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "rows": [{**asdict(r), "median_rate": r.med("rate"), "ratio": r.ratio,
                  "goal_results": _goal_results(r, by_key)} for r in rows],
    }
    path.write_text(json.dumps(record, indent=1, default=str))


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit(
            "benchmarks: matplotlib is needed for the plot (a benchmark-only dependency): "
            "pip install '.[bench]' (or pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars(ax: Any, rows: list[Row], title: str) -> None:
    ax.set_title(title, fontsize=9)
    if not rows:
        ax.text(0.5, 0.5, "not run (--only)", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    # rows without a rate (part c's memory rows: KB, in the table) are not bars
    avail = [r for r in rows if not r.unavailable and r.runs and not math.isnan(r.med("rate"))]
    # Many rows (part c has 17): one line per label and a smaller font, or they overlap.
    crowded = len(avail) > 14
    sep = ", " if crowded else "\n"
    labels = [f"{r.name}{sep}{r.short or r.config}" for r in avail]
    size = 5 if crowded else 6
    values = [r.med("rate") for r in avail]
    y = list(range(len(avail)))
    ours = {"a": "compiled", "b": "jmspy ", "c": "jmspy broker", "d": "jmspy "}[rows[0].part]
    colors = ["tab:blue" if (r.name.startswith(ours) if r.part in "bd" else ours in r.name)
              else "tab:gray" for r in avail]
    ax.barh(y, values, color=colors)
    ax.set_yticks(y, labels, fontsize=size)
    ax.invert_yaxis()
    for yi, r, v in zip(y, avail, values, strict=True):
        text = f"{v:,.0f}" + (f"  ({r.ratio:.2f}x)" if r.ratio is not None else "")
        ax.text(v, yi, " " + text, va="center", fontsize=size)
    missing = [r for r in rows if r.unavailable]
    if missing:
        ax.text(0.99, 0.01, f"{len(missing)} not available (see table)", ha="right",
                va="bottom", transform=ax.transAxes, fontsize=7, color="tab:red")
    if not avail:
        ax.text(0.5, 0.5, "not available", ha="center", transform=ax.transAxes)
    ax.set_xlabel("msgs/s (median)", fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    ax.margins(x=0.35)


def _flow(ax_t: Any, ax_s: Any, rows: list[Row]) -> None:
    for transport, style in (("vm", "o-"), ("stomp", "s:")):
        pts = [(int(r.key.rsplit("/", 1)[1]), r) for r in rows
               if r.key.startswith(f"e/{transport}/tput/") and r.runs and not r.unavailable]
        if pts:
            ax_t.plot([p for p, _ in pts], [r.med("rate") for _, r in pts], style,
                      label=transport + "://")
        share = [(int(r.key.rsplit("/", 1)[1]), r) for r in rows
                 if r.key.startswith(f"e/{transport}/share/") and r.runs and not r.unavailable]
        if share:
            xs = [p for p, _ in share]
            ax_s.plot(xs, [r.med("share_a") * 100 for _, r in share], style, color="tab:blue",
                      label=f"consumer A ({transport}://)")
            ax_s.plot(xs, [r.med("share_b") * 100 for _, r in share], style,
                      color="tab:orange", label=f"consumer B ({transport}://)")
    for ax, title, ylabel in (
        (ax_t, "(e) flow limit vs drain throughput, client-ack", "msgs/s (median)"),
        (ax_s, "(e) share of 20 msgs x 5 ms, 2 consumers", "% of messages"),
    ):
        ax.set_xscale("log")
        if ax is ax_t:
            ax.set_yscale("log")
        ax.set_xlabel("imqConsumerFlowLimit", fontsize=7)
        ax.set_ylabel(ylabel, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=6)
        else:
            ax.text(0.5, 0.5, "not run / not available", ha="center", transform=ax.transAxes)


#: Part (a)'s panel, split so each figure gets its own scale: the listener path runs at
#: ~500k msgs/s, end to end at a fraction of that, selector evaluation at ~12M matches/s;
#: on one axis the end-to-end bars were slivers.
PART_A_PANELS: tuple[tuple[str, Callable[[Row], bool]], ...] = (
    ("end to end", lambda r: r.short == "end to end"),
    ("listener path", lambda r: r.short == "listener path"),
    ("selectors", lambda r: r.key.startswith("a/selector/")),
)


def _part_a(fig: Any, ax: Any, rows: list[Row]) -> None:
    """Part (a) as three stacked panels in ``ax``'s place, one scale each."""
    if not rows:
        _bars(ax, rows, TITLES["a"])
        return
    grid = ax.get_subplotspec().subgridspec(len(PART_A_PANELS), 1, hspace=0.6)
    ax.remove()
    for i, (name, keep) in enumerate(PART_A_PANELS):
        _bars(fig.add_subplot(grid[i]), [r for r in rows if keep(r)],
              f"{TITLES['a']}: {name}")


def plot(rows: list[Row], path: Path, subtitle: str) -> None:
    plt = _matplotlib()
    fig, axes = plt.subplots(2, 3, figsize=(20, 12))
    _part_a(fig, axes.flat[0], [r for r in rows if r.part == "a"])
    for ax, part in zip(axes.flat[1:4], "bcd", strict=True):
        _bars(ax, [r for r in rows if r.part == part], TITLES[part])
    _flow(axes.flat[4], axes.flat[5], [r for r in rows if r.part == "e"])
    fig.suptitle(f"jmspy benchmarks: {subtitle}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
