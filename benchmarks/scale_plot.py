"""Part (f)'s curves: one panel per scaling axis, one line per broker (medians over
rounds), log axes where the points span decades. Drawn beside the bar plot of parts a-e
as ``bench-<time>-scaling.png``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Row
from .part_f_scaling import BROKERS, LABEL, LOADS

STYLE = {"jmspy": ("tab:blue", "o-"), "activemq": ("tab:red", "s--"),
         "rabbitmq": ("tab:orange", "^:")}

#: (title, curve, metric, x label, y label, log x, log y)
PANELS: tuple[tuple[str, str, str, str, str, bool, bool], ...] = (
    ("throughput vs connection pairs", "connections", "rate", "producer/consumer pairs",
     "msgs/s", True, True),
    ("broker CPU per message vs pairs", "connections", "cpu_us", "producer/consumer pairs",
     "us CPU / msg", True, True),
    ("broker peak RSS vs pairs", "connections", "peak_mb", "producer/consumer pairs", "MB",
     True, False),
    ("throughput vs queues (a consumer each)", "queues", "rate", "queues", "msgs/s", True,
     True),
    ("MB/s vs message size", "size", "mb_s", "body bytes", "MB/s", True, True),
    ("broker peak RSS vs message size", "size", "peak_mb", "body bytes", "MB", True, False),
    ("fan-out: deliveries/s vs subscribers", "fanout", "rate", "subscribers of one topic",
     "deliveries/s", True, True),
)


def points(rows: list[Row], broker: str, curve: str, metric: str) -> list[tuple[float, float]]:
    """(x, median) of a curve's numeric points that were measured."""
    out = []
    for row in rows:
        head = f"f/{broker}/{curve}/"
        if not row.key.startswith(head) or not row.runs:
            continue
        point = row.key[len(head):]
        value = row.med(metric)
        if point.isdigit() and not math.isnan(value):
            out.append((float(point), value))
    return sorted(out)


def _panel(ax: Any, rows: list[Row], title: str, curve: str, metric: str, xlabel: str,
           ylabel: str, logx: bool, logy: bool) -> None:
    for broker in BROKERS:
        pts = points(rows, broker, curve, metric)
        if pts:
            color, style = STYLE[broker]
            ax.plot([x for x, _ in pts], [y for _, y in pts], style, color=color,
                    label=LABEL[broker])
    _dress(ax, title, xlabel, ylabel, logx, logy)


def _latency(ax: Any, rows: list[Row]) -> None:
    """p50 (thin) and p99 (thick) against the offered load, per broker."""
    for broker in BROKERS:
        color, style = STYLE[broker]
        for metric, width in (("p50_ms", 1.0), ("p99_ms", 2.2)):
            pts = points(rows, broker, "load", metric)
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], style, color=color,
                        linewidth=width, label=f"{LABEL[broker]} {metric[:3]}")
    ax.set_xticks(list(LOADS))
    _dress(ax, "open loop: latency vs offered load", "% of the broker's one-pair rate",
           "ms from the scheduled send", False, True)


def _dress(ax: Any, title: str, xlabel: str, ylabel: str, logx: bool, logy: bool) -> None:
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=7)
    ax.set_ylabel(ylabel, fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3, which="both")
    if ax.lines:
        ax.legend(fontsize=6)
    else:
        ax.text(0.5, 0.5, "not run / not available", ha="center", transform=ax.transAxes)


def plot(rows: list[Row], path: Path, subtitle: str,
         matplotlib: Callable[[], Any]) -> bool:
    """Draw the curves to ``path``; False (nothing drawn) when part (f) did not run."""
    rows = [r for r in rows if r.part == "f"]
    if not rows:
        return False
    plt = matplotlib()
    fig, axes = plt.subplots(2, 4, figsize=(20, 9))
    for ax, panel in zip(axes.flat, PANELS, strict=False):
        _panel(ax, rows, *panel)
    _latency(axes.flat[len(PANELS)], rows)
    fig.suptitle(f"jmspy benchmarks (f) scaling, raw stomp.py load: {subtitle}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
