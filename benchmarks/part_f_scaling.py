"""(f) Scaling: how the brokers' cost grows with connections, destinations, message size
and fan-out, and their latency at a fixed offered rate: ``jmspy broker`` vs ActiveMQ 5 vs
RabbitMQ, every point serving the same raw stomp.py load generator
(benchmarks/scale_workers.py), side by side in one run.

Curves (each a set of rows, one per point and broker; ``benchmarks/README.md`` explains
each and its goal; ``scale_plot.py`` draws them):

* **connections**: 1, 10, 100, 1,000 producer/consumer pairs, each pair on its own queue
  (``N`` producer connections in one process, ``N`` consumer connections in another), and
  1,000 connections of which 10 pairs are busy (990 idle STOMP connections opened first,
  which give the RSS per idle connection);
* **queues**: 1, 100, 10,000 queues, each with a consumer (on one consumer connection),
  one producer sending round robin; and 100,000 idle queues on a fresh broker (RSS per
  idle queue);
* **message size**: 100 B, 10 KB, 1 MB, 8 MB on one pair: MB/s and the broker's peak RSS;
* **fan-out**: one topic with 1, 10, 100 subscriber connections (deliveries/s); and 10
  wildcard subscriptions (``w.<k>.*``) among 10,000 topics, each message matching one;
* **latency at a fixed offered rate** (open loop): 25 %, 50 %, 80 % of the broker's own
  saturation, the one-pair figure of the same round; send times are scheduled in advance
  and latency runs from the scheduled time: p50, p99, p99.9.

Every point also reports the broker's CPU time per delivered message (user + system,
every process of its session: benchmarks/broker_probe.py) and its peak RSS during the
run. The jmspy broker runs as installed with the caps a rig of thousands of connections
lifts (peers.SCALE_CONFIG).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from . import broker_probe
from .common import Config, Goal, Progress, Row, exchange, run_interleaved
from .peers import Endpoint, Peers, _interop, start_jmspy_scale
from .scale_workers import create_queues, open_idle

BROKERS = ("jmspy", "activemq", "rabbitmq")
PEER = {"jmspy": "jmspy-scale", "activemq": "activemq", "rabbitmq": "rabbitmq"}
LABEL = {"jmspy": "jmspy broker", "activemq": "ActiveMQ 5", "rabbitmq": "RabbitMQ"}
CONNECTIONS = (1, 10, 100, 1000)
BUSY_OF_1000 = 10
#: messages per busy pair at least (20 each at 1,000 pairs measured little more than
#: each queue's first delivery); a tenth in quick mode
PER_PAIR = 100
QUEUES = (1, 100, 10_000)
SIZES = (100, 10_240, 1_048_576, 8_388_608)
FANOUT = (1, 10, 100)
LOADS = (25, 50, 80)
WILDCARD_TOPICS, WILDCARD_SUBS = 10_000, 10
#: idle queues are made this many at a time, so that a broker that gives up says where
IDLE_CHUNK = 10_000
MODULE = "scale_workers"


def key(broker: str, curve: str, point: object) -> str:
    return f"f/{broker}/{curve}/{point}"


def _size_text(size: int) -> str:
    return (f"{size // 1_048_576} MB" if size >= 1_048_576 else
            f"{size // 1024} KB" if size >= 1024 else f"{size} B")


def _base(ep: Endpoint) -> dict[str, Any]:
    return {"host": ep.host, "port": ep.stomp_port, "timeout": 300,
            "vhost": "/" if ep.name == "rabbitmq" else None}


def swarm(ep: Endpoint, consumer: dict[str, Any], producer: dict[str, Any],
          deliveries: int, idle: int = 0) -> dict[str, Any]:
    """One point: ``idle`` silent connections opened first (their RSS measured), then the
    consumers (READY once subscribed), the broker sampled, the producers run; the
    figures of the run, or ``{"error"}``."""
    base = _base(ep)
    out: dict[str, Any] = {}
    held = []
    try:
        if idle:  # a tenth first, so the allocator's first arenas are not charged
            warm = max(1, idle // 10)
            held += open_idle(ep.host, ep.stomp_port or 0, warm, base["vhost"])
            before = broker_probe.sample(ep.pid)
            held += open_idle(ep.host, ep.stomp_port or 0, idle - warm, base["vhost"])
            after = broker_probe.sample(ep.pid)
            out["idle_kb"] = (after.rss_kb - before.rss_kb) / (idle - warm)
        start: list[broker_probe.Sample] = []

        def probe() -> None:
            broker_probe.reset_peak(ep.pid)
            start.append(broker_probe.sample(ep.pid))

        got, sent = exchange(MODULE, {**base, **consumer, "role": "swarm-consumer",
                                      "count": deliveries},
                             {**base, **producer, "role": "swarm-producer"},
                             timeout=600, expect=deliveries, on_ready=probe)
        if not sent:
            return got
        end = broker_probe.sample(ep.pid)
    except (OSError, RuntimeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    finally:
        for sock in held:
            sock.close()
    elapsed = got["t_last"] - sent["t_start"]
    out.update(rate=deliveries / elapsed if elapsed > 0 else float("nan"),
               p50_ms=got["p50_ms"], p99_ms=got["p99_ms"], p999_ms=got["p999_ms"],
               cpu_us=(end.cpu_s - start[0].cpu_s) / deliveries * 1e6,
               peak_mb=end.peak_kb / 1024, rss_mb=start[0].rss_kb / 1024)
    if producer.get("size"):
        out["mb_s"] = out["rate"] * producer["size"] / 1e6
    if producer.get("rate"):
        out["offered"] = float(producer["rate"])
    return out


def _tag() -> str:
    """A point's destinations, named once when the point is made (one per broker) and
    used again in every round: a broker keeps the destinations a run creates, and at
    ActiveMQ's 45 KB a queue (or topic) three rounds' worth of fresh ones, 30,000 queues
    and 30,000 topics, overflow its 512 MB heap. Each round consumes all it sends, so it
    leaves them empty for the next."""
    return uuid.uuid4().hex[:8]


Runner = Callable[[Endpoint], dict[str, Any]]


def _on(peers: Peers, broker: str, runner: Runner) -> Callable[[int], dict[str, Any]]:
    def run(_rnd: int) -> dict[str, Any]:
        ep = peers.get(PEER[broker])
        if isinstance(ep, str):
            return {"error": ep}
        return runner(ep)

    return run


def connections_point(pairs: int, count: int, busy: int | None = None,
                      per_pair: int = PER_PAIR) -> Runner:
    """``pairs`` pairs on distinct queues, ``count`` messages but ``per_pair`` a pair at
    least; ``busy`` set: that many busy pairs, the rest of ``pairs`` opened as idle
    connections."""
    active = busy or pairs
    per = max(count, per_pair * active) // active * active
    pattern = f"/queue/scale.c{_tag()}.{{i}}"

    def run(ep: Endpoint) -> dict[str, Any]:
        side = {"pattern": pattern, "n": active, "connections": active}
        return swarm(ep, side, {**side, "count": per}, per,
                     idle=(pairs - 2 * active) if busy else 0)

    return run


def queues_point(queues: int, count: int) -> Runner:
    per = max(count, queues)
    pattern = f"/queue/scale.q{_tag()}.{{i}}"

    def run(ep: Endpoint) -> dict[str, Any]:
        return swarm(ep, {"pattern": pattern, "n": queues, "connections": 1},
                     {"pattern": pattern, "n": queues, "connections": 1, "count": per}, per)

    return run


def size_point(size: int, count: int) -> Runner:
    pattern = f"/queue/scale.s{_tag()}"

    def run(ep: Endpoint) -> dict[str, Any]:
        side = {"pattern": pattern, "n": 1, "connections": 1}
        return swarm(ep, {**side, "window": 1000 if size <= 10_240 else 10},
                     {**side, "count": count, "size": size}, count)

    return run


def fanout_point(subscribers: int, deliveries: int) -> Runner:
    count = max(1, deliveries // subscribers)
    pattern = f"/topic/scale.t{_tag()}"

    def run(ep: Endpoint) -> dict[str, Any]:
        return swarm(ep, {"pattern": pattern, "n": 1, "connections": subscribers,
                          "every": True},
                     {"pattern": pattern, "n": 1, "connections": 1, "count": count},
                     count * subscribers)

    return run


def wildcard_point(count: int) -> Runner:
    per = max(count, WILDCARD_TOPICS)
    tag = f"scale.w{_tag()}"

    def run(ep: Endpoint) -> dict[str, Any]:
        return swarm(ep, {"pattern": f"/topic/{tag}.{{i}}.*", "n": WILDCARD_SUBS,
                          "connections": WILDCARD_SUBS},
                     {"pattern": f"/topic/{tag}.{{m}}.{{i}}", "mod": WILDCARD_SUBS,
                      "n": WILDCARD_TOPICS, "connections": 1, "count": per}, per)

    return run


def load_point(percent: int, seconds: float, saturation: Row) -> Runner:
    """Open loop at ``percent`` of ``saturation``'s figure in this round."""
    pattern = f"/queue/scale.l{_tag()}"

    def run(ep: Endpoint) -> dict[str, Any]:
        if not saturation.runs:
            return {"error": f"no saturation figure ({saturation.key} not measured)"}
        rate = saturation.runs[-1]["rate"] * percent / 100
        count = max(100, int(rate * seconds))
        side = {"pattern": pattern, "n": 1, "connections": 1}
        return swarm(ep, side, {**side, "count": count, "rate": rate}, count)

    return run


def idle_queues_point(broker: str, queues: int) -> dict[str, Any]:
    """KB of RSS per idle queue, on a fresh broker (100,000 queues would stay in the
    shared one and weigh on every later row)."""
    start = {"jmspy": start_jmspy_scale, "activemq": lambda: _interop().start_activemq(),
             "rabbitmq": lambda: _interop().start_rabbitmq()}[broker]
    try:
        proc = start()
    except Exception as exc:
        return {"error": f"{broker} could not start: {exc}".splitlines()[0]}
    made = 0
    try:
        vhost = "/" if broker == "rabbitmq" else None
        prefix = f"scale.idle{_tag()}"
        warm = max(100, queues // 20)
        create_queues(proc.host, proc.stomp_port, vhost, prefix, 0, warm)
        made = warm
        before = broker_probe.sample(proc.proc.pid)
        t0 = time.monotonic()
        for first in range(warm, warm + queues, IDLE_CHUNK):  # how far a failure got
            n = min(IDLE_CHUNK, warm + queues - first)
            create_queues(proc.host, proc.stomp_port, vhost, prefix, first, n)
            made += n
        took = time.monotonic() - t0
        after = broker_probe.sample(proc.proc.pid)
    except (OSError, RuntimeError) as exc:
        rss_mb = broker_probe.sample(proc.proc.pid).rss_kb // 1024
        why = (f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
               + f" after {made:,} queues (RSS {rss_mb:,} MB)")
        if "OutOfMemoryError" in proc.log_tail(400):  # ActiveMQ's 512 MB heap
            why += f"; {LABEL[broker]} ran out of heap (OutOfMemoryError in its log)"
        return {"error": why}
    finally:
        proc.stop()
    return {"idle_kb": (after.rss_kb - before.rss_kb) / queues, "queues_s": queues / took,
            "rss_mb": after.rss_kb / 1024}


#: Goals (issue 52): each jmspy row names what it must reach.
VS_ACTIVEMQ = "vs ActiveMQ"


def _row(curve: str, point: object, broker: str, config: str, short: str) -> Row:
    return Row("f", key(broker, curve, point), f"stomp.py -> {LABEL[broker]}", config,
               short=short)


def _versus(row: Row, broker: str, curve: str, point: object, metric: str = "rate",
            at_most: bool = False, label: str = VS_ACTIVEMQ) -> None:
    """The jmspy row's goal over ActiveMQ's row of the same point, RabbitMQ beside it."""
    if broker != "jmspy":
        return
    row.baseline = key("activemq", curve, point)
    row.goals.append(Goal(1.0, over=row.baseline, label=label, metric=metric,
                          at_most=at_most, issue=52))
    row.also = [(key("rabbitmq", curve, point), "RabbitMQ")]


def configs(quick: bool, peers: Peers) -> list[Config]:
    count = 2_000 if quick else 20_000
    out: list[Config] = []

    def add(curve: str, point: object, config: str, short: str,
            runner_for: Callable[[str], Runner], **versus: Any) -> None:
        for broker in BROKERS:
            row = _row(curve, point, broker, config, short)
            _versus(row, broker, curve, point, **versus)
            out.append(Config(row, _on(peers, broker, runner_for(broker))))

    per_pair = PER_PAIR // 10 if quick else PER_PAIR
    for pairs in CONNECTIONS:
        add("connections", pairs, f"{pairs:,} pairs on {pairs:,} queues, ack:auto, "
            f"{max(count, per_pair * pairs) // pairs * pairs:,} msgs",
            f"{pairs:,} connection pairs",
            lambda _b, p=pairs: connections_point(p, count, per_pair=per_pair))
    idle_point = f"{CONNECTIONS[-1]}-idle"
    add("connections", idle_point,
        f"{CONNECTIONS[-1]:,} connections: {BUSY_OF_1000} busy pairs, "
        f"{CONNECTIONS[-1] - 2 * BUSY_OF_1000:,} idle, {count:,} msgs",
        f"{CONNECTIONS[-1]:,} conns, {BUSY_OF_1000} pairs busy",
        lambda _b: connections_point(CONNECTIONS[-1], count, BUSY_OF_1000))
    for row in (c.row for c in out if c.row.key.startswith("f/jmspy/connections/")):
        point = row.key.rsplit("/", 1)[1]
        if point not in (str(p) for p in CONNECTIONS[:-1]):  # 1,000: not ActiveMQ's bar
            row.goals = [Goal(0.5, over=key("jmspy", "connections", 10),
                              label="vs 10 pairs", issue=52)]
        if point == idle_point:
            row.goals.append(Goal(5.0, metric="idle_kb", at_most=True, unit="KB",
                                  label="RSS per idle connection", issue=52))
    for queues in QUEUES:
        add("queues", queues, f"{queues:,} queues, a consumer each, one producer round "
            f"robin, {max(count, queues):,} msgs", f"{queues:,} queues",
            lambda _b, q=queues: queues_point(q, count))
    idle_queues = 10_000 if quick else 100_000
    for broker in BROKERS:
        row = _row("queues", "idle", broker, f"{idle_queues:,} idle queues, a fresh broker",
                   f"{idle_queues:,} idle queues")
        if broker == "jmspy":
            row.goals = [Goal(1.5, metric="idle_kb", at_most=True, unit="KB",
                              label="RSS per idle queue", issue=52)]
        # once per suite run: a fresh broker each, and RabbitMQ declares ~500 queues/s
        out.append(Config(row, lambda _rnd, b=broker: idle_queues_point(b, idle_queues),
                          rounds=1))
    volume = 20_000_000 if quick else 200_000_000
    for size in SIZES:
        n = max(10 if quick else 40, min(count, volume // size))
        add("size", size, f"{_size_text(size)} bodies, one pair, {n:,} msgs",
            f"{_size_text(size)} messages", lambda _b, s=size, k=n: size_point(s, k))
    deliveries = 3_000 if quick else 30_000
    for subs in FANOUT:
        add("fanout", subs, f"one topic, {subs} subscriber connections, "
            f"{max(1, deliveries // subs) * subs:,} deliveries", f"fan-out to {subs}",
            lambda _b, s=subs: fanout_point(s, deliveries))
    add("fanout", "wildcard", f"{WILDCARD_SUBS} wildcard subscriptions among "
        f"{WILDCARD_TOPICS:,} topics, {max(count, WILDCARD_TOPICS):,} msgs",
        "wildcards, 10k topics", lambda _b: wildcard_point(count))
    seconds = 1.0 if quick else 3.0
    by_key = {c.row.key: c.row for c in out}
    for percent in LOADS:
        add("load", percent, f"open loop at {percent} % of the broker's one-pair rate, "
            f"{seconds:g} s", f"{percent} % load (open loop)",
            lambda b, p=percent: load_point(p, seconds, by_key[key(b, "connections", 1)]),
            metric="p99_ms", at_most=True, label="p99 vs ActiveMQ's")
    return out


def finish(rows: list[Row]) -> None:
    """Each row's note: the figures the curves are made of (medians over rounds)."""
    by_key = {r.key: r for r in rows}
    for row in rows:
        if not row.runs:
            continue
        parts = [row.note] if row.note else []
        figures = [("mb_s", "{:,.1f} MB/s"), ("cpu_us", "{:,.1f} us CPU/msg"),
                   ("peak_mb", "peak RSS {:,.0f} MB"), ("p999_ms", "p99.9 {:,.2f} ms"),
                   ("idle_kb", "{:,.2f} KB per idle item"), ("queues_s", "{:,.0f} queues/s"),
                   ("offered", "offered {:,.0f} msgs/s")]
        parts += [fmt.format(row.med(m)) for m, fmt in figures if row.med(m) == row.med(m)]
        if row.key.startswith("f/jmspy/load/"):
            other = by_key.get(row.key.replace("jmspy", "activemq", 1))
            if other is not None and other.runs:
                parts.append(f"ActiveMQ p99 {other.med('p99_ms'):,.2f} ms")
        row.note = "; ".join(parts)


def run(quick: bool, runs: int, progress: Progress, peers: Peers) -> list[Row]:
    rows = run_interleaved(configs(quick, peers), runs, progress)
    finish(rows)
    return rows


def planned(quick: bool, runs: int) -> int:
    return len(configs(quick, Peers())) * runs

