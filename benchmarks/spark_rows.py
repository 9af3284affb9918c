"""The ``jmspy`` Spark data source and sink (jmspy/spark/): streaming rows/s, the cost of
one micro-batch, and batch-write rows/s, on ``local[2]`` against ``jmspy broker``.

``python -m benchmarks.spark_rows [--count 200000] [--runs 3] [--tiny 4000]
[--per-trigger 20000,50000] [--flow-limit N]`` (pyspark 4.2+, pyarrow and Java 17
installed; ~2.5 min with the defaults; ``--flow-limit`` sets the stream rows'
``imqConsumerFlowLimit``). Every run starts ``jmspy broker --in-memory`` as a subprocess on a
free loopback port (``memory-limit = "1 GB"``, so that neither a queue of ``--count``
messages paging out nor producer flow control is what is measured); one SparkSession
(``local[2]``, UI off, 2 shuffle partitions) serves every run, and its start is not
measured. Queues are filled with raw STOMP SEND frames over a socket (pre-built,
NON_PERSISTENT, ``text/plain`` bodies of 100 bytes, a receipt every 5,000), so filling
costs next to nothing and is not measured.

Rows (medians over ``--runs``):

* *stream*: ``readStream.format("jmspy")`` with ``maxMessagesPerTrigger`` 20,000 and
  50,000 over a queue of ``--count`` messages, into the ``noop`` sink (it reads every
  row, keeps none), default trigger (the next micro-batch as soon as one ends). Steady
  state: the rows of every data batch after the first over the time from the end of the
  first data batch to the end of the last (the first batch carries the connection and the
  consumer's first prefetch; Spark's ``recentProgress`` timestamps and
  ``durationMs.triggerExecution``). The run waits until the queue's ``messageCount`` and
  ``deliveringCount`` are 0 (``fetch_report``: every message acknowledged, the last batch
  by the flush tick) and the batches' rows add up to ``--count``, else it fails. Goal:
  >= 50,000 msgs/s. The breakdown columns are the medians over the steady batches of
  Spark's ``durationMs`` parts: ``latestOffset`` (the reader takes the batch's messages
  from its consumer), ``queryPlanning``, ``addBatch`` (``partitions()`` on the driver's
  Python worker: a row per message, pickled into the partitions; then the tasks: the
  executors' Python workers unpickle the rows and hand them to the JVM as Arrow),
  ``walCommit`` (the offset log, and the reader's ``commit()``: acknowledging the batch
  before, one ACK per message) and the rest (``commitOffsets``, ``getBatch``, gaps).
* *leased*: the same with ``numPartitions`` ``--leased`` (default 2): each micro-batch read
  by that many tasks on the executors under jmspy broker's reading leases, settled at the
  commit (docs/spark.md, "Reading on the executors"); on ``local[2]`` the tasks share the
  driver's two cores, so this measures the leased path's cost more than its spread
  (``benchmarks.spark_cluster_rows`` measures one executor against two).
* *batch 100*: the same with ``maxMessagesPerTrigger`` 100 over ``--tiny`` messages: the
  median ``triggerExecution`` of a micro-batch of 100 messages, the first excluded, in
  ms, and that minus 100 x the per-message cost of the 20,000 row (what a micro-batch
  costs whatever it holds).
* *sink*: ``spark.range(N, numPartitions=2).selectExpr("cast(id as string) as text")``
  written with ``df.write.format("jmspy")`` (each task one connection, one transaction;
  PERSISTENT sends, the sink's default; the broker keeps them in RAM), after an
  unmeasured warm-up write of 2,000 rows: ``--count`` / the ``save()`` wall time. The
  queue must then hold exactly ``--count``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import neutral_dir, worker_env

BODY = b"x" * 100
HOST = "127.0.0.1"
CONFIG = '[system-usage]\nmemory-limit = "1 GB"\n'
#: The parts of a micro-batch's ``durationMs`` shown (the rest: ``commitOffsets``...).
PARTS = ("latestOffset", "queryPlanning", "addBatch", "walCommit")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


class Broker:
    """``jmspy broker --in-memory`` on a free loopback port, in its own process."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.url = f"stomp://{HOST}:{self.port}"
        config = work / "broker.toml"
        config.write_text(CONFIG)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--host", HOST, "--port", str(self.port),
             "--in-memory", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=worker_env(),
            cwd=neutral_dir(), start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once it listens
        if not line.startswith("jmspy broker listening"):
            self.stop()
            raise RuntimeError(f"jmspy broker did not start: {line!r}")

    def fill(self, queue: str, count: int) -> None:
        """``count`` NON_PERSISTENT text messages of 100 bytes, raw STOMP frames."""
        sock = socket.create_connection((HOST, self.port), timeout=120)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""

        def until(marker: bytes) -> None:
            nonlocal buf
            while marker not in buf:
                data = sock.recv(1 << 20)
                if not data:
                    raise ConnectionError(f"broker closed the connection awaiting {marker!r}")
                buf += data
            buf = buf[buf.index(marker) + len(marker):]

        with sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
            until(b"CONNECTED")
            head = (f"SEND\ndestination:/queue/{queue}\npersistent:false\n"
                    f"content-type:text/plain;charset=utf-8\ncontent-length:{len(BODY)}\n"
                    ).encode()
            frame = head + b"\n" + BODY + b"\0"
            sent = 0
            while sent < count:
                n = min(5000, count - sent)
                receipt = f"receipt:r{sent + n}\n".encode()
                sock.sendall(frame * (n - 1) + head + receipt + b"\n" + BODY + b"\0")
                until(f"receipt-id:r{sent + n}".encode())
                sent += n

    def stats(self, queue: str) -> dict[str, Any]:
        from jmspy.broker_ref.protocols.stomp.client import fetch_report

        rows = {r["name"]: r for r in fetch_report(HOST, self.port, timeout=30)[0]}
        found: dict[str, Any] = rows.get(queue, {"messageCount": 0, "deliveringCount": 0})
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


def session(master: str = "local[2]", name: str = "jmspy-bench-spark-rows",
            **conf: str) -> Any:
    """The benchmark's SparkSession on ``master`` (``conf``: more settings), with the
    jmspy data source registered; UI and progress bar off, every progress kept."""
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's workers run this interpreter
    os.environ.setdefault("SPARK_LOCAL_IP", HOST)
    from pyspark.sql import SparkSession

    from jmspy.spark import register

    builder = (SparkSession.builder.master(master).appName(name)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.numRecentProgressUpdates", "100000"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _end(progress: dict[str, Any]) -> float:
    """When a micro-batch ended: its start (``timestamp``) plus its ``triggerExecution``."""
    began = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00"))
    return began.timestamp() + float(progress["durationMs"].get("triggerExecution", 0)) / 1e3


def stream(spark: Any, broker: Broker, queue: str, count: int, per_trigger: int,
           work: Path, flow_limit: int | None = None, timeout: float = 600.0,
           partitions: int | None = None) -> dict[str, Any]:
    """Fill ``queue``, stream it into ``noop``; steady-state rate and batch timings.
    ``partitions``: read on the executors in that many tasks (``numPartitions``)."""
    broker.fill(queue, count)
    reader = (spark.readStream.format("jmspy").option("url", broker.url)
              .option("destination", f"queue://{queue}")
              .option("maxMessagesPerTrigger", str(per_trigger)))
    if flow_limit:
        reader = reader.option("imqConsumerFlowLimit", str(flow_limit))
    if partitions:
        reader = reader.option("numPartitions", str(partitions))
    query = (reader.load().writeStream.format("noop").queryName(queue)
             .option("checkpointLocation", str(work / f"ckpt-{queue}")).start())
    deadline = time.monotonic() + timeout
    try:
        while True:
            if query.exception() is not None:
                raise RuntimeError(f"query {queue} failed: {query.exception()}")
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            if rows >= count:
                stats = broker.stats(queue)
                if stats["messageCount"] == 0 and stats["deliveringCount"] == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{queue}: {rows:,} of {count:,} rows in {timeout:.0f} s; "
                                   f"broker {broker.stats(queue)}")
            time.sleep(0.2)
        progress = list(query.recentProgress)
    finally:
        query.stop()
    rows = sum(p["numInputRows"] for p in progress)
    if rows != count:
        raise RuntimeError(f"{queue}: {rows:,} rows streamed for {count:,} messages")
    data = sorted((p for p in progress if p["numInputRows"] > 0), key=lambda p: p["batchId"])
    steady = data[1:]
    out: dict[str, Any] = {"batches": len(data), "first_s": data[0]["durationMs"]
                           ["triggerExecution"] / 1e3}
    if steady:
        span = _end(data[-1]) - _end(data[0])
        out["rate"] = sum(p["numInputRows"] for p in steady) / span
        for part in ("triggerExecution", *PARTS):
            out[part] = statistics.median(p["durationMs"].get(part, 0) for p in steady)
        out["rest"] = statistics.median(
            p["durationMs"].get("triggerExecution", 0)
            - sum(p["durationMs"].get(k, 0) for k in PARTS) for p in steady)
    return out


def sink(spark: Any, broker: Broker, queue: str, count: int) -> float:
    """``count`` rows written to ``queue`` with ``df.write.format("jmspy")``: rows/s."""
    def write(name: str, n: int) -> float:
        df = spark.range(0, n, 1, 2).selectExpr("cast(id as string) as text")
        began = time.monotonic()
        (df.write.format("jmspy").option("url", broker.url)
         .option("destination", f"queue://{name}").mode("append").save())
        return time.monotonic() - began

    write(f"{queue}-warm", 2000)
    elapsed = write(queue, count)
    held = broker.stats(queue)["messageCount"]
    if held != count:
        raise RuntimeError(f"sink: the queue holds {held:,} after writing {count:,} rows")
    return count / elapsed


def _parts(r: dict[str, Any]) -> str:
    return ", ".join(f"{k} {r[k]:.0f}" for k in (*PARTS, "rest"))


def warm_up(spark: Any, log: Any) -> None:
    """An unmeasured stream and write, so that no run pays for a cold JVM (JIT, codegen)
    or for Spark starting its Python workers."""
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-spark-"))
    broker = Broker(work)
    try:
        began = time.monotonic()
        stream(spark, broker, "warm", 40_000, 5000, work)
        sink(spark, broker, "warm-sink", 20_000)
        log(f"warm-up (40,000 streamed, 20,000 written): {time.monotonic() - began:.1f} s")
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def one_run(spark: Any, run: int, count: int, tiny: int, per_triggers: Sequence[int],
            flow_limit: int | None, log: Any, leased: int = 0) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-spark-"))
    broker = Broker(work)
    out: dict[str, Any] = {}
    try:
        for m in per_triggers:
            r = stream(spark, broker, f"stream{run}m{m}", count, m, work, flow_limit)
            out[f"stream{m}"] = r
            log(f"run {run}: stream maxMessagesPerTrigger={m:,}: {r['rate']:,.0f} msgs/s "
                f"steady ({r['batches']} batches, first {r['first_s']:.1f} s; median batch "
                f"{r['triggerExecution']:.0f} ms: {_parts(r)})")
            if leased:
                r = stream(spark, broker, f"leased{run}m{m}", count, m, work, flow_limit,
                           partitions=leased)
                out[f"leased{m}"] = r
                log(f"run {run}: leased numPartitions={leased} maxMessagesPerTrigger={m:,}: "
                    f"{r['rate']:,.0f} msgs/s steady ({r['batches']} batches; median batch "
                    f"{r['triggerExecution']:.0f} ms: {_parts(r)})")
        r = stream(spark, broker, f"tiny{run}", tiny, 100, work)
        out["tiny"] = r
        log(f"run {run}: stream maxMessagesPerTrigger=100: median batch "
            f"{r['triggerExecution']:.0f} ms over {r['batches']} batches ({_parts(r)})")
        out["sink"] = sink(spark, broker, f"sink{run}", count)
        log(f"run {run}: sink {count:,} rows: {out['sink']:,.0f} rows/s")
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_rows")
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tiny", type=int, default=4000,
                        help="messages streamed 100 per micro-batch (default 4000)")
    parser.add_argument("--per-trigger", default="20000,50000",
                        help="maxMessagesPerTrigger values, comma-separated")
    parser.add_argument("--leased", type=int, default=2, metavar="N",
                        help="also stream each row read on the executors under reading "
                             "leases in N tasks (numPartitions; 0: not; default 2)")
    parser.add_argument("--flow-limit", type=int, default=None,
                        help="imqConsumerFlowLimit for the stream rows (default: the "
                             "source's, max(50,000, 2 x maxMessagesPerTrigger))")
    args = parser.parse_args(argv)
    per_triggers = [int(x) for x in args.per_trigger.split(",") if x]
    began = time.monotonic()
    load = os.getloadavg()[0]
    spark = session()
    print(f"SparkSession local[2] up in {time.monotonic() - began:.1f} s", flush=True)

    def log(text: str) -> None:
        print(text, flush=True)

    try:
        warm_up(spark, log)
        runs = [one_run(spark, i, args.count, args.tiny, per_triggers, args.flow_limit, log,
                        args.leased) for i in range(args.runs)]
    finally:
        spark.stop()

    def med(*path: str) -> float:
        values = []
        for r in runs:
            v: Any = r
            for key in path:
                v = v[key]
            values.append(float(v))
        return statistics.median(values)

    def parts(key: str) -> str:
        return "".join(f"{med(key, k):>{len(k) + 2}.0f}"
                       for k in ("triggerExecution", *PARTS, "rest"))

    base = per_triggers[0]
    per_message_ms = 1e3 / med(f"stream{base}", "rate")
    tiny_ms = med("tiny", "triggerExecution")
    flow = f", imqConsumerFlowLimit {args.flow_limit:,}" if args.flow_limit else ""
    print(f"\nmedians of {args.runs} runs, local[2] on {os.cpu_count()} CPUs (load average "
          f"{load:.1f} before, {os.getloadavg()[0]:.1f} after), jmspy broker --in-memory, "
          f"{args.count:,} messages of 100 bytes{flow}, {time.monotonic() - began:.0f} s in all;"
          " then the median micro-batch's durationMs parts, in ms")
    print(f"  {'row':<38}{'figure':>16}"
          + "".join(f"{k:>{len(k) + 2}}" for k in ("triggerExecution", *PARTS, "rest")))
    for m in per_triggers:
        key = f"stream{m}"
        goal = "goal >= 50,000: " + ("met" if med(key, "rate") >= 50_000 else "MISSED")
        print(f"  {f'stream, maxMessagesPerTrigger={m:,}':<38}{med(key, 'rate'):>10,.0f} msg/s"
              f"{parts(key)}   {goal}")
        if args.leased:
            key = f"leased{m}"
            goal = "goal >= 50,000: " + ("met" if med(key, "rate") >= 50_000 else "MISSED")
            label = f"  leased, numPartitions={args.leased}"
            print(f"  {label:<38}{med(key, 'rate'):>10,.0f} msg/s{parts(key)}   {goal}")
    print(f"  {'stream, maxMessagesPerTrigger=100':<38}{tiny_ms:>13.0f} ms{parts('tiny')}")
    print(f"  {'  minus 100 x per-message cost':<38}{tiny_ms - 100 * per_message_ms:>13.0f} ms"
          f"  (a message costs {per_message_ms * 1e3:.1f} us at {base:,} per trigger)")
    print(f"  {f'sink, df.write {args.count:,} rows':<38}{med('sink'):>9,.0f} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
