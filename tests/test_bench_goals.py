"""The benchmark table's goals: declared beside their rows, printed with ok / MISSED.

No measuring here (speed is never asserted in tests): synthetic runs through the same
Goal and table code, and the rows issue 17 names checked to carry their goals.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Appended, not prepended: the installed jmspy must win over the checkout's jmspy/ folder.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks import (
    broker_memory,
    flood_round_trip,
    part_a_vm,
    part_b_stomp_client,
    part_c_brokers,
    part_d_mqtt,
    report,
)
from benchmarks.common import Goal, Row
from benchmarks.peers import Peers


def _row(key: str, rates: list[float], **kw: object) -> Row:
    return Row("x", key, key, "cfg", runs=[{"rate": r} for r in rates], **kw)  # type: ignore[arg-type]


def test_goals_print_their_figure_and_verdict() -> None:
    base = _row("base", [100.0, 100.0, 100.0])
    fast = _row("fast", [310.0, 290.0, 400.0], baseline="base",
                goals=[Goal(3.0, over="base", label="vs base"),
                       Goal(500.0, unit="msgs/s")])
    mem = Row("x", "mem", "mem", "cfg", runs=[{"kb": 2.5}],
              goals=[Goal(2.0, metric="kb", at_most=True, unit="KB")])
    lost = _row("lost", [1.0], goals=[Goal(1.0, over="missing", label="vs gone")])
    by_key = {r.key: r for r in (base, fast, mem, lost)}
    assert report.goals_text(fast, by_key) == (
        "vs base: 3.10x >= 3x ok; 0k msgs/s >= 0.5k msgs/s MISSED")
    assert report.goals_text(mem, by_key) == "2.50 KB <= 2 KB MISSED"
    assert report.goals_text(lost, by_key) == "vs gone: >= 1x n/a"
    text = report.table([base, fast, mem, lost], 3)
    assert "vs base: 3.10x >= 3x ok" in text
    assert text.endswith("goals: 1 of 3 measured met, 2 MISSED, 1 not measured")


def test_a_legacy_target_is_a_ratio_goal_over_the_baseline() -> None:
    row = _row("w", [2.0], baseline="b", target=1.7)
    assert row.all_goals() == [Goal(1.7, over="b", issue=5)]


def _goals(rows: list[Row]) -> dict[str, list[tuple[float, str | None]]]:
    return {r.key: [(g.bound, g.over) for g in r.all_goals()] for r in rows if r.goals}


def test_issue_17_rows_declare_their_goals() -> None:
    b = _goals([c.row for c in part_b_stomp_client.configs(False, Peers())])
    assert b["b/jmspy/jmspy/1"] == [(1.5, "b/raw/activemq/1"), (1.0, "b/raw/jmspy/1")]
    assert b["b/jmspy/jmspy/1000"] == [(2.0, "b/raw/activemq/1000"),
                                       (1.0, "b/raw/jmspy/1000")]
    for broker in ("activemq", "rabbitmq"):
        for w in (1, 1000):
            assert b[f"b/jmspy/{broker}/{w}"] == [(1.0, f"b/raw/{broker}/{w}")]
    c = _goals([cf.row for cf in part_c_brokers.configs(False, Peers())])
    for jmspy in ("jmspy", "jmspy-uvloop"):
        for tag in ("receipt/client/1000", "receipt/client/1", "receipt/auto/1000"):
            assert c[f"c/{jmspy}/{tag}"] == [(1.0, f"c/activemq/{tag}")]
        for tag in ("client-individual/1000", "client-individual/1", "auto/1000"):
            assert c[f"c/{jmspy}/{tag}"] == [(1.0, f"c/activemq/{tag}")]
    assert c["c/jmspy-persistent/persistent"] == [(2.0, "c/activemq-kahadb/persistent"),
                                                  (0.7, "c/disk/fdatasync")]
    # the disk's own limit, measured in the same rounds, is a row with no goal of its own
    assert any(cf.row.key == "c/disk/fdatasync" and not cf.row.goals
               for cf in part_c_brokers.configs(False, Peers()))
    memory = _goals([cf.row for cf in broker_memory.configs(False)])
    assert memory == {"c/jmspy/rss-message": [(1.5, None)], "c/jmspy/rss-queue": [(2.0, None)]}
    d = _goals([cf.row for cf in part_d_mqtt.configs(False, Peers())])
    assert d == {**{f"d/{m}/{v}/jmspy": [(0.9, f"d/{m}/{v}/paho")]
                    for m, v in (("sync", "5"), ("sync", "3.1.1"), ("window", "5"))},
                 **{f"d/host/qos{q}/jmspy": [(0.8, f"d/host/qos{q}/mosquitto")]
                    for q in (0, 1)}}


def test_part_a_listener_path_has_its_ratio_and_rate_goals() -> None:
    rows = [c.row for c in part_a_vm.configs(False)]
    for row, listener in zip(rows, (600_000.0, 150_000.0), strict=True):
        row.runs = [{"rate": 1.0, "listener": listener}]
    extra = part_a_vm.finish(rows)
    by_key = {r.key: r for r in rows + extra}
    assert report.goals_text(by_key["a/compiled"], by_key) == "vs pure: 1.00x >= 3x MISSED"
    assert report.goals_text(by_key["a/compiled/listener"], by_key) == (
        "vs pure: 4.00x >= 3x ok; 600k msgs/s >= 500k msgs/s ok")


def test_the_round_trip_during_a_flood_has_an_absolute_and_an_activemq_goal() -> None:
    """jmspy's p50 must be at most 5 ms and at most ActiveMQ's of the same round (a ratio
    over the ActiveMQ row, at most 1x); the row is in part (c)."""
    rows = [c.row for c in flood_round_trip.configs(False, Peers())]
    jmspy, activemq = rows
    assert (jmspy.key, activemq.key) == ("c/jmspy-persistent/flood-round-trip",
                                         "c/activemq-kahadb/flood-round-trip")
    assert [(g.bound, g.over, g.metric, g.at_most) for g in jmspy.goals] == [
        (5.0, None, "p50_ms", True), (1.0, activemq.key, "p50_ms", True)]
    assert activemq.goals == []
    jmspy.runs = [{"rate": 40_000.0, "p50_ms": 1.5}, {"rate": 41_000.0, "p50_ms": 6.0},
                  {"rate": 39_000.0, "p50_ms": 2.0}]
    activemq.runs = [{"rate": 6_000.0, "p50_ms": 3.0}, {"rate": 6_100.0, "p50_ms": 3.0},
                     {"rate": 6_200.0, "p50_ms": 1.0}]
    by_key = {r.key: r for r in rows}
    assert report.goals_text(jmspy, by_key) == (
        "p50: 2.00 ms <= 5 ms ok; p50 vs ActiveMQ: 2.00x <= 1x MISSED")
    keys = {cf.row.key for cf in part_c_brokers.configs(False, Peers())}
    assert {jmspy.key, activemq.key} <= keys


def test_cluster_rows_declare_their_goals() -> None:
    from benchmarks import cluster_failover

    rows = [c.row for c in cluster_failover.configs(None, 1000)]  # no cluster: rows only
    goals = {r.key: [(g.bound, g.over, g.metric, g.at_most) for g in r.goals] for r in rows}
    assert goals == {
        "g/failover/raw": [], "g/quorum/raw": [],
        "g/failover/jmspy": [(1.2, "g/failover/raw", "failover_s", True)],
        "g/quorum/jmspy": [(1.0, "g/quorum/raw", "rate", False)],
    }


def test_a_failover_goal_is_met_by_a_shorter_time_and_missed_by_a_longer_one() -> None:
    from benchmarks import cluster_failover

    rows = [c.row for c in cluster_failover.configs(None, 1000)]
    by_key = {r.key: r for r in rows}
    by_key["g/failover/raw"].runs = [{"failover_s": 0.10}, {"failover_s": 0.20}]
    jmspy = by_key["g/failover/jmspy"]
    jmspy.runs = [{"failover_s": 0.11}, {"failover_s": 0.22}]  # 1.1x the raw time
    assert report.goals_text(jmspy, by_key) == "vs raw stomp.py: 1.10x <= 1.2x ok"
    jmspy.runs = [{"failover_s": 0.15}, {"failover_s": 0.30}]  # 1.5x
    assert report.goals_text(jmspy, by_key) == "vs raw stomp.py: 1.50x <= 1.2x MISSED"
