"""benchmarks part (f), the scaling curves: every point is declared for every broker with
the goal issue 52 set, the load generator delivers exactly what it is asked to (pairs,
fan-out, wildcards, an open-loop schedule), idle connections and queues come into being,
and the broker probe reads a session's memory and CPU. Nothing here measures speed."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Appended, not prepended: the installed jmspy must win over the checkout's jmspy/ folder.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmarks import broker_probe, part_f_scaling, scale_plot
from benchmarks.common import Config, Goal, Progress, Row, run_interleaved
from benchmarks.peers import SCALE_CONFIG, Endpoint, Peers, _interop
from benchmarks.scale_workers import create_queues, open_idle

f = part_f_scaling


def _rows() -> dict[str, Row]:
    return {c.row.key: c.row for c in f.configs(False, Peers())}


def test_every_point_of_every_curve_is_measured_on_every_broker() -> None:
    rows = _rows()
    points = {"connections": ["1", "10", "100", "1000", "1000-idle"],
              "queues": ["1", "100", "10000", "idle"],
              "size": ["100", "10240", "1048576", "8388608"],
              "fanout": ["1", "10", "100", "wildcard"], "load": ["25", "50", "80"]}
    want = {f.key(b, curve, p) for b in f.BROKERS for curve, ps in points.items() for p in ps}
    assert set(rows) == want
    assert "100,000 idle queues" in rows["f/rabbitmq/queues/idle"].config
    assert "10,000 idle queues" in {c.row.key: c.row for c in f.configs(True, Peers())}[
        "f/jmspy/queues/idle"].config


def test_the_jmspy_rows_carry_issue_52s_goals() -> None:
    rows = _rows()
    for point in ("1", "10", "100"):
        assert rows[f"f/jmspy/connections/{point}"].goals == [
            Goal(1.0, over=f"f/activemq/connections/{point}", label=f.VS_ACTIVEMQ, issue=52)]
    for point in ("1", "100", "10000"):
        assert rows[f"f/jmspy/queues/{point}"].goals[0].over == f"f/activemq/queues/{point}"
    for point in ("1000", "1000-idle"):
        goal = rows[f"f/jmspy/connections/{point}"].goals[0]
        assert (goal.bound, goal.over) == (0.5, "f/jmspy/connections/10")
    idle_conn = rows["f/jmspy/connections/1000-idle"].goals[1]
    assert (idle_conn.bound, idle_conn.metric, idle_conn.at_most) == (5.0, "idle_kb", True)
    idle_queue = rows["f/jmspy/queues/idle"].goals[0]
    assert (idle_queue.bound, idle_queue.metric, idle_queue.at_most) == (1.5, "idle_kb", True)
    p99 = rows["f/jmspy/load/50"].goals[0]
    assert (p99.bound, p99.over, p99.metric, p99.at_most) == (
        1.0, "f/activemq/load/50", "p99_ms", True)
    assert all(not r.goals for k, r in rows.items() if not k.startswith("f/jmspy/"))


def test_a_config_limited_to_one_round_is_measured_once() -> None:
    calls: list[str] = []

    def runner(name: str) -> Any:
        return lambda rnd: calls.append(f"{name}{rnd}") or {"rate": 1.0}

    every = Config(Row("f", "every", "every", "cfg"), runner("every"))
    once = Config(Row("f", "once", "once", "cfg"), runner("once"), rounds=1)
    progress = Progress(6, stream=io.StringIO())
    rows = run_interleaved([every, once], 3, progress)
    assert calls == ["every0", "once0", "every1", "every2"]
    assert [len(r.runs) for r in rows] == [3, 1]
    assert progress.done == 6


def test_every_round_of_a_point_uses_the_same_destinations(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a broker keeps what a run creates: fresh names each round would pile up 10,000
    # queues (and 10,000 wildcard topics) a round, more than ActiveMQ's heap holds
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(f, "swarm", lambda _ep, consumer, producer, *_a, **_k:
                        seen.append((consumer["pattern"], producer["pattern"])) or {})
    ep = Endpoint("x", "127.0.0.1", 1, None, 1)
    for make in (lambda: f.connections_point(10, 100), lambda: f.queues_point(100, 100),
                 lambda: f.size_point(100, 10), lambda: f.fanout_point(3, 30),
                 lambda: f.wildcard_point(100)):
        seen.clear()
        point = make()
        point(ep)
        point(ep)
        assert len(seen) == 2 and seen[0] == seen[1]
        seen.clear()
        make()(ep)  # another point (another broker's): names of its own
        other = seen[0]
        point(ep)
        assert seen[1] != other


def test_a_pair_gets_its_share_of_messages_however_many_pairs() -> None:
    rows = {c.row.key: c.row for c in f.configs(False, Peers())}
    assert "100,000 msgs" in rows[f.key("jmspy", "connections", 1000)].config
    assert "20,000 msgs" in rows[f.key("jmspy", "connections", 10)].config
    quick = {c.row.key: c.row for c in f.configs(True, Peers())}
    assert "10,000 msgs" in quick[f.key("jmspy", "connections", 1000)].config


def test_the_probe_reads_the_memory_and_cpu_of_a_whole_session() -> None:
    # A leader that starts a child in its session, both holding memory; the child burns CPU.
    script = ("import subprocess, sys, time\n"
              "held = bytearray(30_000_000)\n"
              "child = subprocess.Popen([sys.executable, '-c', 'x = bytearray(30_000_000)\\n"
              "import time\\nt = time.process_time()\\n"
              "while time.process_time() - t < 0.3: pass\\nprint(1, flush=True)\\n"
              "input()'], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)\n"
              "child.stdout.readline()\nprint('ready', flush=True)\ninput()\n")
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, start_new_session=True) as leader:
        try:
            assert leader.stdout is not None and leader.stdout.readline().strip() == "ready"
            assert len(broker_probe.session_pids(leader.pid)) == 2
            got = broker_probe.sample(leader.pid)
            assert got.rss_kb > 55_000  # both bytearrays: zero-filled, so resident
            assert got.peak_kb >= got.rss_kb
            assert got.cpu_s >= 0.25
            broker_probe.reset_peak(leader.pid)
            assert broker_probe.sample(leader.pid).peak_kb <= got.peak_kb
        finally:
            os.killpg(leader.pid, 9)  # the leader and its child
            leader.wait()


def test_the_curves_are_drawn_from_the_measured_points(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from benchmarks import report

    rows = [Row("f", f.key("jmspy", "connections", n), "j", "c",
                runs=[{"rate": 100.0 * n, "cpu_us": 10.0, "peak_mb": 30.0}])
            for n in f.CONNECTIONS]
    rows.append(Row("f", f.key("jmspy", "connections", "1000-idle"), "j", "c",
                    runs=[{"rate": 5.0}]))
    assert scale_plot.points(rows, "jmspy", "connections", "rate") == [
        (1.0, 100.0), (10.0, 1000.0), (100.0, 10000.0), (1000.0, 100000.0)]
    assert scale_plot.points(rows, "activemq", "connections", "rate") == []
    path = tmp_path / "curves.png"
    assert scale_plot.plot(rows, path, "test", report._matplotlib)
    assert path.stat().st_size > 10_000
    assert not scale_plot.plot([Row("a", "a/x", "x", "c")], path, "t", report._matplotlib)


# -- against a running jmspy broker ------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """``jmspy broker`` in memory with the scaling part's configuration, in this test's
    environment (compiled or pure, whichever the run selects)."""
    brokers = _interop()
    work = tmp_path_factory.mktemp("scale")
    (work / "broker.toml").write_text(SCALE_CONFIG)
    port = brokers.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "jmspy", "broker", "--host", "127.0.0.1",
                             "--port", str(port), "--in-memory", "--config",
                             str(work / "broker.toml")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd=work)
    running = brokers.BrokerProcess("jmspy-scale", "127.0.0.1", port, None, proc, work,
                                    work / "none.log")
    running.wait_ready([port], 30)
    yield Endpoint("jmspy-scale", "127.0.0.1", port, None, proc.pid)
    running.stop()


def _figures(got: dict[str, Any]) -> None:
    assert "error" not in got, got
    for metric in ("rate", "p50_ms", "p99_ms", "p999_ms", "cpu_us", "peak_mb"):
        assert got[metric] == got[metric] and got[metric] >= 0, metric  # measured, not NaN


def test_pairs_on_distinct_queues_deliver_every_message(broker: Endpoint) -> None:
    got = f.connections_point(4, 40)(broker)  # exchange() fails on any other count
    _figures(got)


@pytest.mark.parametrize("every", [False, True], ids=["pairs", "fan-out"])
def test_a_wide_swarm_is_spread_over_processes_and_their_counts_merged(
        broker: Endpoint, every: bool) -> None:
    # 5 consumer connections, at most 2 a process: 3 processes; exchange() fails unless
    # the merged count is every delivery (fan-out: each of the 5 gets all 12 messages)
    pattern = "/topic/scale.spread" if every else "/queue/scale.spread.{i}"
    n = 1 if every else 5
    deliveries = 60 if every else 50
    got = f.swarm(broker, {"pattern": pattern, "n": n, "connections": 5, "every": every,
                           "per_process": 2},
                  {"pattern": pattern, "n": n, "connections": 1 if every else 5,
                   "count": 12 if every else 50}, deliveries)
    _figures(got)


def test_idle_connections_are_opened_and_their_memory_measured(broker: Endpoint) -> None:
    got = f.connections_point(30, 20, busy=2)(broker)
    _figures(got)
    assert got["idle_kb"] == got["idle_kb"]


def test_a_topic_fans_out_to_every_subscriber(broker: Endpoint) -> None:
    _figures(f.fanout_point(3, 60)(broker))  # 20 messages, 60 deliveries expected


def test_wildcards_route_each_message_to_its_one_subscription(broker: Endpoint) -> None:
    _figures(f.wildcard_point(30)(broker))  # 10,000 topics: exactly one delivery each


def test_an_open_loop_producer_keeps_its_schedule(broker: Endpoint) -> None:
    saturation = Row("f", "sat", "s", "c", runs=[{"rate": 4000.0}])
    got = f.load_point(25, 0.1, saturation)(broker)
    _figures(got)
    assert got["offered"] == 1000.0


def test_a_load_point_without_its_saturation_figure_says_so(broker: Endpoint) -> None:
    got = f.load_point(50, 1.0, Row("f", "f/x/connections/1", "s", "c"))(broker)
    assert got == {"error": "no saturation figure (f/x/connections/1 not measured)"}


def test_queues_are_made_in_receipted_batches_and_idle_sockets_held(
        broker: Endpoint) -> None:
    # 25 in batches of 10: the last batch's receipt (q24) ends it, or this hangs and fails
    create_queues(broker.host, broker.stomp_port or 0, None, "idle.test", 0, 25, batch=10)
    held = open_idle(broker.host, broker.stomp_port or 0, 3, None)
    assert len(held) == 3
    for s in held:
        s.close()


def test_idle_queues_are_measured_on_a_fresh_broker_chunk_by_chunk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f, "IDLE_CHUNK", 1000)  # 2,500 after the warm-up: three chunks
    got = f.idle_queues_point("jmspy", 2_500)
    assert "error" not in got, got
    assert got["queues_s"] > 0 and got["rss_mb"] > 0 and got["idle_kb"] == got["idle_kb"]


def test_a_broker_that_refuses_says_why(broker: Endpoint) -> None:
    with pytest.raises(RuntimeError, match="refused"):
        create_queues(broker.host, broker.stomp_port or 0, None, "bad\nname", 0, 1)
