"""MDB-like worker pools (seed 004): what ``jmspy.pool.WorkerPool`` buys for CPU-bound and
for sleep-bound listeners, and the same two workloads on Celery beside it.

``python -m benchmarks.worker_pool [--runs 3] [--no-celery] [--cpu-count 2000]
[--sleep-count 6400]``

Workloads (the listener functions are defined at module level below, so the pool's
spawned worker processes import them as ``"benchmarks.worker_pool:cpu_listener"``):

* *CPU-bound*: a pure-Python loop calibrated at start, in this process, to take 2 ms
  (``--cpu-ms``; on the thread's CPU clock, the machine being shared) on this machine;
  the iteration count goes to every worker. ``WorkerPool(processes=True,
  max_pool_size=2)`` against **one listener: a plain consumer with a MessageListener**
  (AUTO_ACKNOWLEDGE, the listener thread of one session) on the same messages: throughput
  ratio, goal >= 1.7x on a 2-core machine. A ``WorkerPool`` of 1 *thread* runs beside
  them (its ratio to the plain listener is the pool's own overhead). Default flow limit
  (``imqConsumerFlowLimit`` 1000). The notes split the worker processes' time per message
  (``/proc/<pid>/task/*/schedstat``): on a CPU, waiting for a CPU (the machine's load,
  ours included), waiting for work (the pool's hand-over between messages); and give the
  CPU the dispatching process spends per message.
* *sleep-bound*: ``time.sleep(0.010)`` per message, a ``WorkerPool`` of 32 threads
  against the ideal 32 x 100 = 3,200 msgs/s: ratio, goal >= 0.9x; with
  ``prefetch="pool"`` (flow limit 32: the pool is not reduced, the seed's advice), with
  ``prefetch=64`` (``vm://`` only) and with the default flow limit 1000. The consumer
  asks the broker for more only once its unconsumed messages fall to
  ``imqConsumerFlowThreshold`` (50 %) of the limit, which a limit equal to the pool size
  makes visible. The note gives what one ``time.sleep(0.010)`` really takes here (the
  ideal it allows) and the process's CPU per message.

Each over ``vm://`` (broker, producer and pool in one worker process) and over
``stomp://`` to ``jmspy broker --in-memory`` (started once, a subprocess; a fresh queue per
run; producer and pool in one worker process, on two connections). NON_PERSISTENT
messages whose text is their sequence number.

Celery (if installed; ``--no-celery`` skips it): kombu's ``memory://`` transport only
passes messages between the threads of one process ("Messages can be passed only between
threads", kombu/transport/memory.py), so it cannot feed a separate worker; Celery runs on
RabbitMQ (AMQP, started the way ``benchmarks/peers.py`` starts it, from the Debian
package), transient messages (``task_default_delivery_mode="transient"``: the jmspy broker
is in memory too), ``task_acks_late=True`` (acknowledged when the task returns, as the
pool does), ``task_ignore_result=True``, default prefetch multiplier (4), a fresh queue per
run. A fresh ``celery worker`` process per run (``--pool=prefork --concurrency=2`` for the
CPU row, ``--pool=threads --concurrency=32`` for the sleep row), fed by ``send_task`` from
the measuring process.

How it is timed: every run is a fresh worker process started from the neutral directory
(``common``). The pool (or Celery worker) is started and warmed up first with a few
unmeasured messages (2 x pool size, at least 4: the pool's child processes are spawned on
first use, its threads grow 2 at a time; Celery's prefork children and threads likewise),
then the clock runs from the first message sent to the last listener return. Every
listener call appends ``seq time`` to a file of its own process (fixed-width lines, one
``write`` each, CLOCK_MONOTONIC, system-wide): the measuring process counts those to see
the end, takes the last time, and checks that every message was processed exactly once
(a gap or a duplicate fails the run, as do a listener failure or redelivery counted by the
pool, and a stall of 20 s). Rounds are interleaved (every configuration once, then
again), figures are medians, ratios the median of same-round ratios.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .common import (
    Config,
    Progress,
    Row,
    Spec,
    neutral_dir,
    now,
    run_interleaved,
    run_worker,
    worker_cmd,
    worker_env,
    worker_main,
)
from .flow_control import _table
from .peers import _interop, start_jmspy

MODULE = "worker_pool"
CPU_COUNT = 2000
SLEEP_COUNT = 6400
CPU_MS = 2.0
SLEEP_S = 0.010
CPU_POOL = 2
SLEEP_POOL = 32
TARGET_CPU = 1.7  # process pool of 2 / one listener
TARGET_SLEEP = 0.9  # thread pool of 32 / (32 x 100 msgs/s)
STALL = 20.0  # seconds without a processed message before a run fails
START_TIMEOUT = 90.0  # warm-up: worker processes (or the Celery worker) coming up
RECORD_ENV = "JMSPY_BENCH_POOL_RECORD"  # the directory the listeners record into
ITERS_ENV = "JMSPY_BENCH_POOL_ITERS"  # iterations of the CPU loop (calibrated)
LINE = 28  # bytes of one record: f"{seq:09d} {time:017.6f}\n"
LISTENERS = {"cpu": "benchmarks.worker_pool:cpu_listener",
             "sleep": "benchmarks.worker_pool:sleep_listener"}


# -- the work (runs in pool threads, pool processes, Celery workers) ----------------------
def spin(iterations: int) -> int:
    """Pure-Python CPU work: holds the GIL throughout."""
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


_record_lock = threading.Lock()
_record_fd: dict[tuple[int, str], int] = {}
_iters: list[int] = []


def record(seq: int) -> None:
    """Append ``seq`` and the time to this process's file in $JMSPY_BENCH_POOL_RECORD (one
    ``write`` of a short line with O_APPEND: atomic, so threads may share the file)."""
    key = (os.getpid(), os.environ[RECORD_ENV])
    fd = _record_fd.get(key)
    if fd is None:
        with _record_lock:
            fd = _record_fd.get(key)
            if fd is None:
                fd = os.open(os.path.join(key[1], f"{key[0]}.rec"),
                             os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                _record_fd[key] = fd
    os.write(fd, b"%09d %017.6f\n" % (seq, now()))


def cpu_work(seq: int) -> None:
    if not _iters:
        _iters.append(int(os.environ[ITERS_ENV]))
    spin(_iters[0])
    record(seq)


def sleep_work(seq: int) -> None:
    time.sleep(SLEEP_S)
    record(seq)


def cpu_listener(message: Any) -> None:
    cpu_work(int(message.text))


def sleep_listener(message: Any) -> None:
    sleep_work(int(message.text))


# -- records: counting and checking -------------------------------------------------------
def recorded(folder: Path) -> int:
    """Records written so far (cheap: file sizes)."""
    return sum(entry.stat().st_size for entry in os.scandir(folder)) // LINE


def wait_records(folder: Path, total: int, stall: float, alive: Callable[[], str | None]
                 ) -> str | None:
    """Wait until ``total`` records exist; the reason if not: a stall, or what ``alive()``
    (asked every 0.25 s) says. Polled every 50 ms, which costs no precision (the end
    time is the last record's) and next to no CPU (the pool's processes need it)."""
    seen, changed, asked = -1, now(), now()
    while True:
        got = recorded(folder)
        if got >= total:
            return None
        t = now()
        if got != seen:
            seen, changed = got, t
        elif t - changed > stall:
            return f"stalled: {got:,}/{total:,} records (nothing for {stall:.0f}s)"
        if t - asked > 0.25:
            asked = t
            why = alive()
            if why:
                return why
        time.sleep(0.05)


def check(folder: Path, count: int, warmup: int) -> tuple[float, dict[str, float]] | str:
    """The last record's time and what the files say, or what went wrong: every message
    ``-warmup .. count-1`` processed exactly once. ``processes``: how many processes
    recorded; ``cycle_ms``: the median time between two consecutive returns of one process
    (the work plus what it waits for between messages: meaningful for a process per
    worker, where each file is one worker)."""
    seen: dict[int, int] = {}
    t_last = 0.0
    cycles: list[float] = []
    files = 0
    for entry in os.scandir(folder):
        data = Path(entry.path).read_bytes()
        files += 1
        if len(data) % LINE:
            return f"a torn record in {entry.name}"
        times = []
        for line in data.splitlines():
            seq_s, t_s = line.split()
            seq = int(seq_s)
            seen[seq] = seen.get(seq, 0) + 1
            if seq >= 0:
                times.append(float(t_s))
        times.sort()
        if len(times) > 2:
            cycles.append(statistics.median(b - a for a, b in itertools.pairwise(times)))
        t_last = max([t_last, *times])
    twice = sorted(s for s, n in seen.items() if n > 1)
    missing = [s for s in range(-warmup, count) if s not in seen]
    stray = sorted(s for s in seen if not -warmup <= s < count)
    if twice or missing or stray:
        parts = []
        if twice:
            parts.append(f"{len(twice)} processed more than once (e.g. {twice[:5]})")
        if missing:
            parts.append(f"{len(missing)} never processed (e.g. {missing[:5]})")
        if stray:
            parts.append(f"{len(stray)} unknown (e.g. {stray[:5]})")
        return f"NOT exactly once: {count:,} messages + {warmup} warm-up: " + "; ".join(parts)
    extra = {"processes": float(files)}
    if cycles:
        extra["cycle_ms"] = statistics.median(cycles) * 1e3
    return t_last, extra


def sched(pids: Sequence[int]) -> dict[int, tuple[float, float]]:
    """Per process: seconds on a CPU and seconds runnable but waiting for one, summed over
    its threads (``/proc/<pid>/task/*/schedstat``)."""
    out = {}
    for pid in pids:
        run = wait = 0
        try:
            for task in os.scandir(f"/proc/{pid}/task"):
                fields = Path(task.path, "schedstat").read_text().split()
                run, wait = run + int(fields[0]), wait + int(fields[1])
        except OSError:
            continue  # gone, or no schedstat on this kernel
        out[pid] = (run / 1e9, wait / 1e9)
    return out


def sched_split(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]],
                wall: float, count: int, worker_processes: bool) -> dict[str, float]:
    """Where the worker processes' time went, per message (summed over them): ``run_ms`` on
    a CPU, ``wait_ms`` waiting for a CPU (the machine is busy: the other workers, the
    dispatcher, other people's work) and, if each worker is a process of its own,
    ``idle_ms``: neither, i.e. waiting for its next message."""
    pids = [p for p in after if p in before]
    if not pids:
        return {}
    run = sum(after[p][0] - before[p][0] for p in pids)
    wait = sum(after[p][1] - before[p][1] for p in pids)
    out = {"run_ms": run / count * 1e3, "wait_ms": wait / count * 1e3}
    if worker_processes:
        out["idle_ms"] = max(0.0, len(pids) * wall - run - wait) / count * 1e3
    return out


def recording_pids(folder: Path) -> list[int]:
    return [int(entry.name.split(".")[0]) for entry in os.scandir(folder)]


# -- workers (python -m benchmarks.worker_pool '<json spec>') -----------------------------
def jmspy_run(spec: Spec) -> dict[str, Any]:
    """One measurement of a jmspy configuration: a plain consumer or a WorkerPool."""
    folder = Path(tempfile.mkdtemp(prefix="jmspy-bench-pool-rec-"))
    try:
        return _jmspy_run(spec, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _jmspy_run(spec: Spec, folder: Path) -> dict[str, Any]:
    from jmspy import ConnectionFactory, DeliveryMode, Queue, Session
    from jmspy.pool import WorkerPool

    os.environ[RECORD_ENV] = str(folder)  # the pool's spawned processes inherit both
    os.environ[ITERS_ENV] = str(spec["iters"])
    count, warmup, queue = int(spec["count"]), int(spec["warmup"]), spec["queue"]
    url, host, vm_name = spec["url"], None, ""
    if url == "vm":
        from jmspy.transports import vm

        vm_name = f"bench-pool-{os.getpid()}"
        host = vm.start_broker(vm_name)
        url = f"vm://{vm_name}"
    factory = ConnectionFactory(url)
    pool: Any = None
    consumer_conn: Any = None
    if spec["mode"] == "single":  # one listener: a plain consumer, the session's thread
        consumer_conn = factory.create_connection()
        session = consumer_conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
        consumer = session.create_consumer(Queue(queue))
        consumer.set_message_listener(cpu_listener if spec["work"] == "cpu"
                                      else sleep_listener)
        consumer_conn.start()
    else:
        pool = WorkerPool(factory, queue, LISTENERS[spec["work"]], max_pool_size=spec["pool"],
                          processes=spec["processes"], prefetch=spec.get("prefetch")).start()
    out: dict[str, Any] = {}
    try:
        with factory.create_connection() as conn:
            psession = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
            producer = psession.create_producer(Queue(queue))
            producer.delivery_mode = DeliveryMode.NON_PERSISTENT

            def alive() -> str | None:
                if pool is not None and pool.stats()["failed"]:
                    return f"the listener failed: {pool.stats()}"
                return None

            for seq in range(-warmup, 0):
                producer.send(psession.create_text_message(str(seq)))
            why = wait_records(folder, warmup, START_TIMEOUT, alive)
            if why:
                return {"error": f"warm-up: {why}"}
            time.sleep(0.1)  # the warm-up's acknowledgements
            before = pool.stats() if pool is not None else {}
            pids = recording_pids(folder)  # the worker processes (or this one)
            sched0, cpu0, t_start = sched(pids), time.process_time(), now()
            for seq in range(count):
                producer.send(psession.create_text_message(str(seq)))
            t_sent = now()
            why = wait_records(folder, warmup + count, STALL, alive)
            if why:
                return {"error": why}
            out.update(sched_split(sched0, sched(pids), now() - t_start, count,
                                   os.getpid() not in pids))
            # this process's CPU (every thread) per message: the listener itself for one
            # listener, the dispatching (receive, pickle, pipes, ack) for a process pool
            out["cpu_us"] = (time.process_time() - cpu0) / count * 1e6
        if pool is not None:  # acknowledged too (the record is written before the ack)
            deadline = now() + STALL
            while pool.stats()["processed"] < warmup + count and now() < deadline:
                time.sleep(0.005)
            stats = pool.stats()
            bad = {k: stats[k] for k in ("failed", "redelivered", "dead_lettered", "replaced")
                   if stats[k]}
            if stats["processed"] != warmup + count or bad:
                return {"error": f"pool processed {stats['processed']:,} of "
                                 f"{warmup + count:,} {bad or ''}".strip()}
            out.update(workers=before["workers"], peak=stats["peak_concurrency"],
                       concurrency=stats["concurrency"])
    finally:
        if pool is not None:
            pool.stop()
        if consumer_conn is not None:
            consumer_conn.close()
    got = check(folder, count, warmup)
    if isinstance(got, str):
        return {"error": got}
    t_last, extra = got
    if host is not None:
        left = host.stats(queue)["messageCount"]
        if left:
            return {"error": f"{left} messages left on the queue"}
        from jmspy.transports import vm

        vm.stop_broker(vm_name)
    return {"rate": count / (t_last - t_start), "send_s": t_sent - t_start, **out, **extra,
            "load1": os.getloadavg()[0]}


def celery_app(broker: str, queue: str) -> Any:
    """The benchmark's Celery app: the two workloads as tasks ``bench.cpu``/``bench.sleep``."""
    from celery import Celery

    app = Celery("jmspy_bench", broker=broker, set_as_current=True)
    app.conf.update(task_default_queue=queue, task_acks_late=True, task_ignore_result=True,
                    task_default_delivery_mode="transient", worker_hijack_root_logger=False,
                    broker_connection_retry_on_startup=True)
    app.task(name="bench.cpu")(cpu_work)
    app.task(name="bench.sleep")(sleep_work)
    return app


def celery_worker(spec: Spec) -> dict[str, Any]:
    """``celery worker`` on the spec's queue; runs until its process group is TERMed."""
    app = celery_app(spec["broker"], spec["queue"])
    app.worker_main(["worker", f"--pool={spec['pool']}", f"--concurrency={spec['concurrency']}",
                     "--queues", spec["queue"], "--hostname", f"bench{os.getpid()}@localhost",
                     "--without-gossip", "--without-mingle", "--without-heartbeat",
                     "--loglevel=WARNING"])
    return {"error": "the celery worker returned"}


def celery_run(spec: Spec) -> dict[str, Any]:
    """One measurement on Celery: a fresh worker process, warm-up, then ``count`` tasks."""
    folder = Path(tempfile.mkdtemp(prefix="jmspy-bench-pool-rec-"))
    try:
        return _celery_run(spec, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        Path(f"{folder}.celery.log").unlink(missing_ok=True)


def _celery_run(spec: Spec, folder: Path) -> dict[str, Any]:
    count, warmup = int(spec["count"]), int(spec["warmup"])
    env = {**worker_env(), RECORD_ENV: str(folder), ITERS_ENV: str(spec["iters"])}
    log = Path(f"{folder}.celery.log")
    wspec = {"role": "celery-worker", "broker": spec["broker"], "queue": spec["queue"],
             "pool": spec["pool"], "concurrency": spec["concurrency"]}
    with open(log, "wb") as err:
        proc = subprocess.Popen(worker_cmd(MODULE, wspec), env=env, cwd=neutral_dir(),
                                stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)

    def alive() -> str | None:
        if proc.poll() is None:
            return None
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        return f"the celery worker exited ({proc.returncode}): {tail}"

    task = f"bench.{spec['work']}"
    try:
        app = celery_app(spec["broker"], spec["queue"])
        with app.producer_or_acquire() as producer:
            for seq in range(-warmup, 0):
                app.send_task(task, args=(seq,), producer=producer)
            why = wait_records(folder, warmup, START_TIMEOUT, alive)
            if why:
                return {"error": f"warm-up: {why}"}
            pids = recording_pids(folder)  # prefork: its children; threads: the worker
            dispatcher = [proc.pid] if proc.pid not in pids else []
            sched0, t_start = sched(pids + dispatcher), now()
            for seq in range(count):
                app.send_task(task, args=(seq,), producer=producer)
            t_sent = now()
            why = wait_records(folder, warmup + count, STALL, alive)
            if why:
                return {"error": why}
            sched1 = sched(pids + dispatcher)
            out = sched_split({p: sched0[p] for p in pids if p in sched0}, sched1,
                              now() - t_start, count, proc.pid not in pids)
            if dispatcher and proc.pid in sched0 and proc.pid in sched1:
                out["cpu_us"] = (sched1[proc.pid][0] - sched0[proc.pid][0]) / count * 1e6
    finally:
        _stop_group(proc)
    got = check(folder, count, warmup)
    if isinstance(got, str):
        return {"error": got}
    t_last, extra = got
    return {"rate": count / (t_last - t_start), "send_s": t_sent - t_start, **out, **extra,
            "load1": os.getloadavg()[0]}


def _stop_group(proc: subprocess.Popen[Any]) -> None:
    """TERM the process group we started (the worker and its children), KILL if it lingers."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        except ProcessLookupError:
            pass


ROLES = {"jmspy": jmspy_run, "celery": celery_run, "celery-worker": celery_worker}


# -- calibration ----------------------------------------------------------------------------
def calibrate(target_ms: float) -> tuple[int, float]:
    """Iterations of :func:`spin` that take ``target_ms`` of CPU here, and what they take
    (median of the samples). Timed on this thread's CPU clock, not the wall clock: the
    machine is shared, and under load most 2 ms samples are cut by other processes'
    time slices."""
    def timed(n: int, repeat: int) -> float:
        samples = []
        for _ in range(repeat):
            t0 = time.thread_time()
            spin(n)
            samples.append(time.thread_time() - t0)
        return statistics.median(samples)

    n = 20_000
    for _ in range(4):
        n = max(1000, round(n * target_ms / 1e3 / timed(n, 15)))
    return n, timed(n, 41) * 1e3


def sleep_takes() -> float:
    """What ``time.sleep(SLEEP_S)`` really takes here, ms (median of 25)."""
    samples = []
    for _ in range(25):
        t0 = time.perf_counter()
        time.sleep(SLEEP_S)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3


# -- brokers, started on first use -----------------------------------------------------------
class Lazy:
    """A broker started on first use; its failure remembered as the reason."""

    def __init__(self, name: str, start: Callable[[], Any]) -> None:
        self.name, self._start = name, start
        self.process: Any = None
        self.failure: str | None = None

    def get(self, log: Callable[[str], None]) -> Any:
        if self.process is None and self.failure is None:
            log(f"starting {self.name} ...")
            try:
                self.process = self._start()
            except Exception as exc:
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.failure = f"{self.name} could not start: {text}"
        return self.process

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


def amqp_url(rabbit: Any) -> str:
    """The AMQP listener tests/interop/brokers.py wrote into the RabbitMQ config."""
    for line in (Path(rabbit.workdir) / "rabbitmq.conf").read_text().splitlines():
        if line.startswith("listeners.tcp.default"):
            return f"amqp://guest:guest@{line.split('=')[1].strip()}//"
    raise RuntimeError("no AMQP listener in the RabbitMQ config")


def celery_missing() -> str | None:
    try:
        import celery  # noqa: F401
    except ImportError as exc:
        return f"Celery is not installed ({exc}); pip install celery (benchmark-only)"
    return None


# -- configurations and rows -------------------------------------------------------------------
def _jmspy(transport: str, broker: Lazy, base: Spec, log: Callable[[str], None],
           _rnd: int) -> dict[str, Any]:
    spec = {**base, "queue": f"pool.{uuid.uuid4().hex[:12]}"}
    if transport == "vm":
        spec["url"] = "vm"
    else:
        proc = broker.get(log)
        if proc is None:
            return {"error": broker.failure}
        spec["url"] = f"stomp://127.0.0.1:{proc.stomp_port}?heartbeat=0"
    return run_worker(MODULE, spec, timeout=300.0)


def _celery(rabbit: Lazy, base: Spec, log: Callable[[str], None], _rnd: int
            ) -> dict[str, Any]:
    missing = celery_missing()
    if missing:
        return {"error": missing}
    proc = rabbit.get(log)
    if proc is None:
        return {"error": rabbit.failure}
    spec = {**base, "broker": amqp_url(proc), "queue": f"pool.{uuid.uuid4().hex[:12]}"}
    return run_worker(MODULE, spec, timeout=300.0)


def _jmspy_config(tr: str, key: str, name: str, config: str, spec: Spec, iters: int,
                  broker: Lazy, log: Callable[[str], None], **row: Any) -> Config:
    label = "vm://" if tr == "vm" else "stomp:// -> jmspy broker"
    base = {"role": "jmspy", "iters": iters, "warmup": max(4, 2 * int(spec.get("pool", 1))),
            **spec}
    return Config(Row("pool", f"{key}/{tr}", f"jmspy {label}, {name}", config, **row),
                  functools.partial(_jmspy, tr, broker, base, log))


def configs(celery: bool, cpu_count: int, sleep_count: int, iters: int, cpu_ms: float,
            log: Callable[[str], None], jmspy_broker: Lazy, rabbit: Lazy) -> list[Config]:
    out: list[Config] = []
    cpu = f"{cpu_count:,} msgs x {cpu_ms:.2f} ms CPU"
    slp = f"{sleep_count:,} msgs x sleep {SLEEP_S * 1e3:g} ms"
    common: dict[str, Any] = {"iters": iters, "broker": jmspy_broker, "log": log}
    for tr in ("vm", "stomp"):
        vs_celery = celery and tr == "stomp"
        cpu_spec = {"work": "cpu", "count": cpu_count}
        out += [  # the default flow limit (1000)
            _jmspy_config(tr, "cpu/single", "one listener",
                          f"plain consumer + MessageListener, auto-ack, {cpu}",
                          {**cpu_spec, "mode": "single"}, **common),
            _jmspy_config(tr, "cpu/pool2", "process pool of 2",
                          f"WorkerPool(processes=True, max_pool_size=2), {cpu}",
                          {**cpu_spec, "mode": "pool", "pool": CPU_POOL, "processes": True},
                          baseline=f"cpu/single/{tr}", target=TARGET_CPU,
                          also=[(f"cpu/thread1/{tr}", "the thread pool of 1")]
                          + ([("cpu/celery", "Celery prefork 2")] if vs_celery else []),
                          **common),
            _jmspy_config(tr, "cpu/thread1", "thread pool of 1",
                          f"WorkerPool(max_pool_size=1) threads, {cpu}",
                          {**cpu_spec, "mode": "pool", "pool": 1, "processes": False},
                          baseline=f"cpu/single/{tr}", **common),
        ]
        # prefetch="pool" is the seed's advice (flow limit = pool size); the default flow
        # limit (1000) and 2 x the pool beside it: the consumer asks for more only when
        # its unconsumed messages fall to imqConsumerFlowThreshold (50 %) of the limit
        for suffix, prefetch, what in (("", "pool", "prefetch='pool' (flow limit 32)"),
                                       ("-64", 64, "prefetch=64"),
                                       ("-default", None, "default flow limit 1000")):
            if suffix == "-64" and tr != "vm":
                continue
            out.append(_jmspy_config(
                tr, f"sleep/pool32{suffix}", "thread pool of 32",
                f"WorkerPool(max_pool_size=32) threads, {what}, {slp}",
                {"work": "sleep", "count": sleep_count, "mode": "pool", "pool": SLEEP_POOL,
                 "processes": False, "prefetch": prefetch},
                target=TARGET_SLEEP,
                also=[("sleep/celery", "Celery threads 32")] if vs_celery else [],
                **common))
    if celery:
        celery_rows: list[tuple[str, str, int, str, int, str, dict[str, Any]]] = [
            ("cpu/celery", "cpu", cpu_count, "prefork", CPU_POOL, cpu,
             {"baseline": "cpu/single/stomp"}),
            ("sleep/celery", "sleep", sleep_count, "threads", SLEEP_POOL, slp, {})]
        for key, work, count, pool, conc, desc, row in celery_rows:
            base = {"role": "celery", "work": work, "count": count, "pool": pool,
                    "concurrency": conc, "iters": iters, "warmup": max(4, 2 * conc)}
            out.append(Config(
                Row("pool", key, f"Celery -> RabbitMQ (AMQP), {pool} {conc}",
                    f"celery worker --pool={pool} --concurrency={conc}, acks_late, {desc}",
                    **row),
                functools.partial(_celery, rabbit, base, log)))
    return out


def planned(celery: bool) -> int:
    """Configurations per round."""
    return 11 + (2 if celery else 0)


def measure(runs: int = 3, celery: bool = True, cpu_count: int = CPU_COUNT,
            sleep_count: int = SLEEP_COUNT, cpu_ms: float = CPU_MS,
            progress: Progress | None = None) -> tuple[list[Row], dict[str, float]]:
    """Every configuration ``runs`` times, interleaved. The rows (ratios filled in) and the
    calibration (``iters``, ``cpu_ms``, ``sleep_ms``)."""
    progress = progress or Progress(runs * planned(celery))
    progress.show("calibrating the CPU work")
    iters, took = calibrate(cpu_ms)
    slept = sleep_takes()
    calib = {"iters": float(iters), "cpu_ms": took, "sleep_ms": slept,
             "load_before": os.getloadavg()[0]}
    progress.log(f"calibrated: {iters:,} iterations = {took:.2f} ms; "
                 f"time.sleep({SLEEP_S:g}) takes {slept:.2f} ms")
    jmspy_broker = Lazy("jmspy broker --in-memory", start_jmspy)
    rabbit = Lazy("RabbitMQ", lambda: _interop().start_rabbitmq())
    cfgs = configs(celery, cpu_count, sleep_count, iters, took, progress.log, jmspy_broker,
                   rabbit)
    try:
        rows = run_interleaved(cfgs, runs, progress)
    finally:
        progress.show("stopping brokers")
        jmspy_broker.stop()
        rabbit.stop()
        progress.close()
    calib["load_after"] = os.getloadavg()[0]
    for row in rows:
        notes(row, took, slept)
    return rows, calib


def notes(row: Row, cpu_ms: float, sleep_ms: float) -> None:
    """The sleep rows' ratio to the ideal, and what else the runs tell, in ``row.note``."""
    if not row.runs:
        return
    said = [row.note] if row.note else []
    if row.key.startswith("sleep/"):  # against the ideal 32 x 100 msgs/s
        ideal = SLEEP_POOL / SLEEP_S
        row.ratios = [r["rate"] / ideal for r in row.runs]
        real = SLEEP_POOL / (sleep_ms / 1e3)
        said.append(f"sleep({SLEEP_S:g}) takes {sleep_ms:.2f} ms here: {real:,.0f}/s at best, "
                    f"{row.med('rate') / real:.2f}x of that")
    if row.key.startswith("cpu/single/"):
        said.append(f"{1e3 / row.med('rate'):.2f} ms per message ({cpu_ms:.2f} ms of work)")
    if "run_ms" in row.runs[0] and row.key.startswith("cpu/"):  # adds up to 1 / rate x n
        who = "the worker processes" if "idle_ms" in row.runs[0] else "the process"
        said.append(f"per message {who} ran {row.med('run_ms'):.2f} ms, waited "
                    f"{row.med('wait_ms'):.2f} ms for a CPU"
                    + (f", {row.med('idle_ms'):.2f} ms for work" if "idle_ms" in row.runs[0]
                       else ""))
    if "cpu_us" in row.runs[0] and row.key.startswith("cpu/") and (
            row.key.startswith("cpu/pool2/") or row.key.endswith("/celery")):
        said.append(f"dispatching process: {row.med('cpu_us'):.0f} µs CPU per message"
                    + (" (the producer's sends too)" if "/pool2/" in row.key else ""))
    if "workers" in row.runs[0]:
        if row.key.startswith("sleep/"):
            busy = row.med("cpu_us") * row.med("rate") / 1e6
            said.append(f"the process: {row.med('cpu_us'):.0f} µs CPU per message "
                        f"({busy:.0%} of a core)")
        peak = max(int(r["peak"]) for r in row.runs)
        said.append(f"peak {peak} at once (concurrency {int(row.runs[0]['concurrency'])})")
    if row.key.endswith("/celery"):
        said.append(f"enqueueing took {row.med('send_s'):.2f} s")
    row.note = "; ".join(said)


def report(rows: list[Row], calib: dict[str, float], runs: int) -> str:
    legend = [f"  {r.key:<19} {r.name}: {r.config}" for r in rows]
    lines = []
    for r in rows:
        if r.unavailable or not r.runs:
            lines.append([r.key, "-", "-", "-", "-",
                          f"not available: {r.unavailable or 'no runs'}"[:200]])
            continue
        ratio = r.ratio
        target = "" if r.target is None else (
            f">= {r.target:g}x {'ok' if ratio is not None and ratio >= r.target else 'MISSED'}")
        shown = "" if ratio is None else f"{ratio:.2f}x"
        if ratio is not None and r.target is not None and shown == f"{r.target:.2f}x" and (
                ratio < r.target):
            shown = f"{ratio:.3f}x"  # just short of the goal: say so
        lines.append([r.key, f"{r.med('rate'):,.0f}",
                      " ".join(f"{x['rate']:,.0f}" for x in r.runs), shown, target, r.note])
    loads = [x["load1"] for r in rows for x in r.runs if "load1" in x]
    during = (f", {min(loads):.2f}-{max(loads):.2f} at the end of the runs (median "
              f"{statistics.median(loads):.2f})" if loads else "")
    return "\n".join([
        f"medians of {runs} interleaved run(s) on {os.cpu_count()} CPUs (1-min load average "
        f"{calib['load_before']:.2f} before, {calib['load_after']:.2f} after{during}); CPU work "
        f"calibrated to {int(calib['iters']):,} iterations = {calib['cpu_ms']:.2f} ms; "
        f"time.sleep({SLEEP_S:g}) takes {calib['sleep_ms']:.2f} ms here",
        "", *legend, "",
        "ratio: cpu rows over the one listener on the same transport (Celery: over the "
        "stomp:// one listener); sleep rows over 32 x 100 = 3,200 msgs/s; the note's "
        "\"x <row>\" ratios are same-round ratios to that row",
        "",
        _table(["row", "msgs/s", "per round", "ratio", "goal", "note"], lines, {1, 3}),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker_pool",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-celery", action="store_true", help="skip the Celery rows")
    parser.add_argument("--cpu-count", type=int, default=CPU_COUNT)
    parser.add_argument("--sleep-count", type=int, default=SLEEP_COUNT)
    parser.add_argument("--cpu-ms", type=float, default=CPU_MS)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.cpu_count < 1 or args.sleep_count < 1 or args.cpu_ms <= 0:
        parser.error("--runs, --cpu-count, --sleep-count >= 1; --cpu-ms > 0")
    started = time.monotonic()
    rows, calib = measure(args.runs, not args.no_celery, args.cpu_count, args.sleep_count,
                          args.cpu_ms)
    print(report(rows, calib, args.runs))
    if args.no_celery:
        print("\nCelery rows skipped (--no-celery)")
    print(f"\n{time.monotonic() - started:.0f} s")
    failed = [r for r in rows if r.unavailable and not r.key.endswith("/celery")]
    for r in rows:
        if r.unavailable:
            print(f"FAILED: {r.key} ({r.config}): {r.unavailable}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].startswith("{"):
        worker_main(ROLES)
    sys.exit(main())
