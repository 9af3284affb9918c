"""Producer flow control (seed 003, ActiveMQ's "Flow Control" chapter): what reaching the
broker's memory limit costs producer-to-consumer throughput, ``jmspy broker`` and
ActiveMQ 5 side by side.

``python -m benchmarks.flow_control [--count 100000] [--runs 3] [--no-activemq]``

The same raw STOMP 1.2 client on both brokers (pre-built frames over a bare socket, as in
``massive_queue``), producer and consumer in separate worker processes started from the
neutral directory (``common``). On a fresh queue per run:

* the producer sends ``count`` non-persistent 1 KB messages (``persistent:false``: they
  are what fills memory; persistent ones page to disk) as fast as it can, without
  receipts except one on every 1000th SEND, which it waits for (so it stays in step with
  the broker and never has more than 1000 frames in flight);
* the consumer, subscribed first on another connection, ``ack:client-individual`` with a
  prefetch of 1000 (``jmspy-flow-limit:1000``, read by the jmspy broker, and
  ``activemq.prefetchSize:1000``, read by ActiveMQ; both in the one SUBSCRIBE frame),
  ACKs every message: per received chunk it "works" 20 µs per message (a sleep;
  ``--consumer-work-us``), then writes one ACK frame per message. Unpaced, it keeps up
  with the producer on the jmspy broker and the limit is never reached; paced so, it is
  the slower side on both brokers: the table shows when the producer had its last
  receipt against the run's end, and the backlog (messages sent, not yet received) at
  that moment, to within 1000.

Throughput = ``count`` / (first send - last message received). Every message carries a
``seq`` header: the consumer checks each arrives exactly once; a lost message shows as a
stall (20 s without a message) and fails the configuration, as does any run past 300 s.

Configurations, per broker, each broker started once (then warmed up with one unmeasured
run of 20,000 messages: ActiveMQ's first run is up to a third slower, the JIT compiling)
and used for every round:

* *limited*: ``[system-usage] memory-limit = "2 MB"`` / ActiveMQ
  ``<systemUsage><systemUsage><memoryUsage><memoryUsage limit="2 mb"/>`` (store and temp
  at the chapter's defaults) with ``producerFlowControl="true"`` on the queues' policy;
* *unlimited*: 1 GB on both: the limit is never reached (ActiveMQ caps its memory usage at
  70 % of its 512 MB heap, 358 MB, still far above the backlog).

What fills the limit differs: the jmspy broker counts pending (ready) messages only,
``size + 256`` bytes each (1,561 of these); ActiveMQ counts every message the queue
holds, the consumer's 1000 prefetched, unacknowledged ones included, so it stops the
producer at about 1,000 queued messages.

Whether flow control engaged in a run is read from the broker's log written during it:
``stopping producer`` (jmspy broker) or ``Usage Manager Memory Limit`` (ActiveMQ); both
log it once per destination per 30 s, hence the fresh queue per run. Rounds are
interleaved (every configuration once, then again); figures are medians, ratios the
median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import (
    Config,
    Progress,
    Row,
    Spec,
    exchange,
    median,
    now,
    paired_ratios,
    run_interleaved,
    signal_ready,
    worker_env,
    worker_main,
)
from .massive_queue import Stomp
from .peers import _interop, _spawn_local

MODULE = "flow_control"
BODY = b"x" * 1024
WINDOW = 1000  # the consumer's prefetch
BATCH = 1000  # the producer asks for a receipt on every BATCH-th SEND
WORK_US = 20.0  # the consumer's work per message (slept before its ACK), microseconds
WARMUP = 20_000  # messages of one unmeasured run on each broker once it started
STALL = 20.0  # seconds without a message (or a receipt) before a run fails
TIMEOUT = 300.0  # a whole run
LIMITED = "2 MB"
UNLIMITED = "1 GB"
JMSPY_STOP = b"stopping producer"
AMQ_STOP = b"Usage Manager Memory Limit"

_ACK = re.compile(rb"\nack:([^\n]*)")
_SEQ = re.compile(rb"\nseq:(\d+)")
_MESSAGE_HEADER = re.compile(rb"\nmessage:([^\n]*)")

#: inserted into tests/interop/brokers.py's activemq.xml, before its connectors
_AMQ_FLOW = """    <destinationPolicy><policyMap><policyEntries>
      <policyEntry queue=">" producerFlowControl="true"/>
    </policyEntries></policyMap></destinationPolicy>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage limit="{limit}"/></memoryUsage>
      <storeUsage><storeUsage limit="100 gb"/></storeUsage>
      <tempUsage><tempUsage limit="10 gb"/></tempUsage>
    </systemUsage></systemUsage>
"""


# -- workers (python -m benchmarks.flow_control '<json spec>') ---------------------------
def producer(spec: Spec) -> dict[str, Any]:
    """SEND ``count`` non-persistent 1 KB messages, a receipt on every BATCH-th."""
    conn = Stomp(spec["port"], timeout=spec["stall"])
    head = (f"SEND\ndestination:{spec['dest']}\npersistent:false\n"
            f"content-length:{len(BODY)}\n").encode()
    count = spec["count"]
    t_start = now()
    sent = 0
    while sent < count:
        last = min(sent + BATCH, count) - 1
        frames = [b"%sseq:%d\n\n%s\0" % (head, i, BODY) for i in range(sent, last)]
        frames.append(b"%sseq:%d\nreceipt:r%d\n\n%s\0" % (head, last, last, BODY))
        conn.sock.sendall(b"".join(frames))
        try:
            conn.read_until(b"receipt-id:r%d\n" % last)
        except TimeoutError:
            return {"error": f"producer: no RECEIPT for SEND {last + 1:,} within "
                             f"{spec['stall']:.0f}s"}
        sent = last + 1
    t_sent = now()
    conn.sock.sendall(b"DISCONNECT\n\n\0")
    conn.close()
    return {"t_start": t_start, "t_sent": t_sent}


def consumer(spec: Spec) -> dict[str, Any]:
    """Subscribe (client-individual, prefetch WINDOW), say READY, ACK every message; fail
    on a duplicate, an ERROR frame or STALL seconds without a message."""
    count, stall, work = spec["count"], spec["stall"], spec["work_us"] / 1e6
    conn = Stomp(spec["port"], timeout=stall)
    sock = conn.sock
    sock.sendall((f"SUBSCRIBE\nid:1\ndestination:{spec['dest']}\nack:client-individual\n"
                  f"jmspy-flow-limit:{WINDOW}\nactivemq.prefetchSize:{WINDOW}\n"
                  "receipt:subscribed\n\n\0").encode())
    conn.read_until(b"receipt-id:subscribed\n")
    signal_ready()
    seen = bytearray(count)
    got = 0
    marks: list[float] = []  # when the 1000th, 2000th, ... message had arrived
    t_last = 0.0
    buf = conn.buf
    while got < count:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            return {"error": f"stalled: received {got:,}/{count:,} (nothing for {stall:.0f}s)"}
        if not data:
            return {"error": f"the broker closed the connection after {got:,}/{count:,}"}
        t_last = now()
        buf += data
        cut = buf.rfind(b"\0") + 1
        if not cut:
            continue
        frames, buf = buf[:cut], buf[cut:]
        if b"ERROR\n" in frames:
            why = _MESSAGE_HEADER.search(frames[frames.index(b"ERROR\n"):])
            return {"error": f"ERROR frame: {why.group(1).decode() if why else frames[:200]!r}"}
        acks = _ACK.findall(frames)
        seqs = _SEQ.findall(frames)
        if len(acks) != frames.count(b"MESSAGE\n") or len(seqs) != len(acks):
            return {"error": "a MESSAGE frame without an ack or seq header"}
        for s in seqs:
            i = int(s)
            if seen[i]:
                return {"error": f"message seq {i} delivered twice"}
            seen[i] = 1
        got += len(acks)
        while len(marks) < got // BATCH:
            marks.append(t_last)
        if acks:
            if work:  # the consumer's work on these messages, before it ACKs them
                time.sleep(len(acks) * work)
            sock.sendall(b"".join(b"ACK\nid:%s\n\n\0" % a for a in acks))
    conn.close()
    return {"count": got, "t_last": t_last, "marks": marks}


ROLES = {"producer": producer, "consumer": consumer}


def run_once(port: int, count: int, work_us: float) -> dict[str, Any]:
    """Consumer subscribed first (READY), then the producer; both worker processes."""
    dest = f"/queue/flow.{uuid.uuid4().hex[:12]}"
    base: Spec = {"port": port, "dest": dest, "count": count, "stall": STALL,
                  "work_us": work_us}
    got, sent = exchange(MODULE, {**base, "role": "consumer"}, {**base, "role": "producer"},
                         TIMEOUT, expect=count)
    if not sent:
        return got
    total = got["t_last"] - sent["t_start"]
    # messages sent but not yet received when the producer had its last receipt: how far
    # it outran the consumer (to within BATCH)
    marks: list[float] = got["marks"]
    backlog = count - BATCH * bisect.bisect_right(marks, sent["t_sent"])
    return {"rate": count / total, "total_s": total, "send_s": sent["t_sent"] - sent["t_start"],
            "backlog": backlog}


# -- brokers -------------------------------------------------------------------------------
def start_jmspy(limit: str, work: Path) -> Any:
    """``jmspy broker --in-memory`` with ``[system-usage] memory-limit = limit``; its
    stderr (where the "stopping producer" warnings go) is the BrokerProcess's log."""
    config = work / f"memory-{limit.replace(' ', '')}.toml"
    config.write_text(f'[system-usage]\nmemory-limit = "{limit}"\n')
    return _spawn_local(f"jmspy-flow-{limit.replace(' ', '')}",
                        [sys.executable, "-m", "jmspy", "broker", "--host", "127.0.0.1",
                         "--port", "{port}", "--in-memory", "--config", str(config)],
                        env=worker_env())


def start_activemq(limit: str) -> Any:
    """The interop ActiveMQ 5 (non-persistent, 512 MB heap, logging to stdout) with the
    chapter's systemUsage at ``limit`` and producer flow control on every queue."""
    amq = _interop().ActiveMQ()
    xml_path = amq.conf / "activemq.xml"
    xml = xml_path.read_text()
    marker = "    <transportConnectors>"
    if marker not in xml:
        amq.close()
        raise RuntimeError("tests/interop/brokers.py's activemq.xml has no <transportConnectors>")
    xml_path.write_text(xml.replace(marker, _AMQ_FLOW.format(limit=limit.lower()) + marker, 1))
    return amq.start()


@dataclass
class Target:
    """One configuration: a broker started on first use and kept for every round."""

    key: str
    broker: str
    limit: str
    marker: bytes
    start: Callable[[], Any]
    process: Any = None
    failure: str | None = None
    stops: list[int] = field(default_factory=list)

    def run(self, count: int, work_us: float, log: Callable[[str], None]) -> dict[str, Any]:
        if self.process is None and self.failure is None:
            log(f"starting {self.broker} (memory limit {self.limit}) and warming it up "
                f"({min(count, WARMUP):,} messages, not measured) ...")
            try:
                self.process = self.start()
            except Exception as exc:
                self.failure = f"{self.broker} could not start: {exc}".strip()
            else:  # the JVM's JIT (and the first run's imports): not part of any round
                warm = run_once(self.process.stomp_port, min(count, WARMUP), work_us)
                if "error" in warm:
                    self.failure = f"warm-up run failed: {warm['error']}"
        if self.failure is not None:
            return {"error": self.failure}
        log_path: Path = self.process.log_path
        offset = log_path.stat().st_size
        got = run_once(self.process.stomp_port, count, work_us)
        time.sleep(0.2)  # let the broker's last log lines reach the file
        with open(log_path, "rb") as f:
            f.seek(offset)
            written = f.read()
        if "error" in got:
            if self.process.proc.poll() is not None:
                got["error"] += (f" ({self.broker} exited with status "
                                 f"{self.process.proc.returncode}: {self.process.log_tail(3)})")
            return got
        stops = written.count(self.marker)
        self.stops.append(stops)
        return {**got, "engaged": float(stops > 0)}

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


def targets(activemq: bool, work: Path) -> list[Target]:
    out = [Target(f"jmspy/{name}", "jmspy broker", limit, JMSPY_STOP,
                  functools.partial(start_jmspy, limit, work))
           for name, limit in (("limited", LIMITED), ("unlimited", UNLIMITED))]
    if activemq:
        out += [Target(f"activemq/{name}", "ActiveMQ 5", limit, AMQ_STOP,
                       functools.partial(start_activemq, limit))
                for name, limit in (("limited", LIMITED), ("unlimited", UNLIMITED))]
    return out


# -- measuring and reporting -----------------------------------------------------------------
def _one_round(target: Target, count: int, work_us: float, log: Callable[[str], None],
               _round: int) -> dict[str, Any]:
    return target.run(count, work_us, log)


def measure(count: int, runs: int, activemq: bool = True, work_us: float = WORK_US,
            progress: Progress | None = None) -> tuple[list[Row], list[Target]]:
    """Every configuration ``runs`` times, interleaved; rows as in the suite's parts (ratio:
    limited over the same broker's unlimited), and the configurations (brokers stopped)."""
    progress = progress or Progress(runs * (4 if activemq else 2))
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-flow-"))
    tgts = targets(activemq, work)
    config = f"{count:,} non-persistent 1 KB msgs, client-individual, prefetch {WINDOW}"
    configs = []
    for t in tgts:
        row = Row("flow", t.key, t.broker, f"memory limit {t.limit}, {config}",
                  short=f"{t.key.split('/')[1]} ({t.limit})")
        if t.limit == LIMITED:
            row.baseline = t.key.replace("limited", "unlimited")
            if t.key.startswith("jmspy/") and activemq:
                row.also = [("activemq/limited", "ActiveMQ 5 limited")]
        configs.append(Config(row, functools.partial(_one_round, t, count, work_us,
                                                      progress.log)))
    try:
        rows = run_interleaved(configs, runs, progress)
    finally:
        progress.show("stopping brokers")
        for t in tgts:
            t.stop()
        shutil.rmtree(work, ignore_errors=True)
        progress.close()
    return rows, tgts


def comparisons(rows: list[Row]) -> list[dict[str, Any]]:
    """The three figures: each broker's limited / unlimited, jmspy limited / ActiveMQ
    limited; each with both rates, the per-round ratios and whether flow control engaged."""
    by_key = {r.key: r for r in rows}
    out = []
    for a, b, label in (("jmspy/limited", "jmspy/unlimited", "jmspy broker: limited / unlimited"),
                        ("activemq/limited", "activemq/unlimited",
                         "ActiveMQ 5: limited / unlimited"),
                        ("jmspy/limited", "activemq/limited",
                         "jmspy broker limited / ActiveMQ 5 limited")):
        ra, rb = by_key.get(a), by_key.get(b)
        if ra is None or rb is None:
            continue
        entry: dict[str, Any] = {"comparison": label, "a": a, "b": b}
        why = ra.unavailable or rb.unavailable
        if why or not ra.runs or not rb.runs:
            entry["unavailable"] = why or "no runs"
        else:
            ratios = paired_ratios(ra, rb)
            entry.update(ratio=median(ratios), ratios=ratios, rate_a=ra.med("rate"),
                         rate_b=rb.med("rate"),
                         engaged_a=[bool(r["engaged"]) for r in ra.runs],
                         engaged_b=[bool(r["engaged"]) for r in rb.runs])
        out.append(entry)
    return out


def _table(head: Sequence[str], lines: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]

    def fmt(cols: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cols, widths, strict=True))).rstrip()

    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines)])


def _first_line(text: str) -> str:
    return text.splitlines()[0][:150]


def _engaged(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)} runs"


def report(rows: list[Row], tgts: list[Target], count: int, runs: int,
           work_us: float = WORK_US) -> str:
    by_key = {t.key: t for t in tgts}
    cfg_lines = []
    for r in rows:
        t = by_key[r.key]
        if r.unavailable:
            cfg_lines.append([t.broker, t.limit, "-", "-", "-", "-", "-",
                              _first_line(f"not available: {r.unavailable}")])
            continue
        stops = (f" ({', '.join(map(str, t.stops))} stop lines logged)"
                 if t.marker == JMSPY_STOP and any(t.stops) else "")
        cfg_lines.append([
            t.broker, t.limit, f"{r.med('rate'):,.0f}",
            " ".join(f"{x['rate']:,.0f}" for x in r.runs),
            f"{r.med('send_s'):.1f} / {r.med('total_s'):.1f}", f"{r.med('backlog'):,.0f}",
            _engaged([bool(x["engaged"]) for x in r.runs]) + stops, ""])
    cmp_lines = []
    for c in comparisons(rows):
        if "unavailable" in c:
            cmp_lines.append([c["comparison"], "-", "-", "-", "-", "-",
                              _first_line(f"not available: {c['unavailable']}")])
            continue
        cmp_lines.append([
            c["comparison"], f"{c['ratio']:.2f}x", " ".join(f"{x:.2f}" for x in c["ratios"]),
            f"{c['rate_a']:,.0f}", f"{c['rate_b']:,.0f}",
            f"{_engaged(c['engaged_a'])}; {_engaged(c['engaged_b'])}", ""])
    return "\n".join([
        f"medians of {runs} interleaved run(s): {count:,} non-persistent 1 KB messages, one "
        f"producer (a receipt every {BATCH}), one consumer (client-individual, prefetch "
        f"{WINDOW}, ACK per message, {work_us:g} µs of work per message: at most "
        f"{1e6 / work_us if work_us else float('inf'):,.0f} msgs/s)",
        "",
        _table(["broker", "memory limit", "msgs/s", "per round", "producer done / end (s)",
                "backlog then", "flow control engaged", ""], cfg_lines, {2, 4, 5}),
        "",
        _table(["comparison", "ratio", "per round", "A msgs/s", "B msgs/s",
                "flow control engaged (A; B)", ""], cmp_lines, {1, 3, 4}),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.flow_control",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-activemq", action="store_true")
    parser.add_argument("--consumer-work-us", type=float, default=WORK_US,
                        help="the consumer's work per message, slept before its ACK (µs)")
    args = parser.parse_args(argv)
    if args.count < 2 * BATCH or args.runs < 1:
        parser.error(f"--count >= {2 * BATCH}, --runs >= 1")
    started = time.monotonic()
    rows, tgts = measure(args.count, args.runs, not args.no_activemq, args.consumer_work_us)
    print(report(rows, tgts, args.count, args.runs, args.consumer_work_us))
    print(f"\n{time.monotonic() - started:.0f} s")
    idle = sum(1 for r in rows if r.key.endswith("/limited") for x in r.runs
               if not x["engaged"])
    if idle:
        print(f"\nWARNING: flow control did not engage in {idle} limited run(s): the producer "
              "did not outrun the consumer there (raise --consumer-work-us or --count)")
    failed = [r for r in rows if r.unavailable]
    for r in failed:
        print(f"FAILED: {r.name} ({r.config}): {r.unavailable}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].startswith("{"):
        worker_main(ROLES)
    sys.exit(main())
