"""One measured run of the worker-pool benchmark (:mod:`.worker_pool`), in a fresh process.

``python -m benchmarks.pool_runs '<json spec>'``; roles:

* ``jmspy``: a plain consumer with a MessageListener, or a ``jmspy.pool.WorkerPool``, fed
  by a producer in this process (over ``vm://`` with the broker here too, or over
  ``stomp://``);
* ``celery``: a fresh ``celery worker`` process (role ``celery-worker``), fed by
  ``send_task`` from this process.

Each warms up with a few unmeasured messages, then times ``count`` from the first send to
the last listener return, from the records the work leaves (:mod:`.pool_work`), and
splits the worker processes' time per message from ``/proc/<pid>/task/*/schedstat``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import Spec, neutral_dir, now, worker_cmd, worker_env, worker_main
from .pool_work import (
    ITERS_ENV,
    LISTENERS,
    RECORD_ENV,
    check,
    cpu_listener,
    cpu_work,
    recording_pids,
    sleep_listener,
    sleep_work,
    wait_records,
)

__all__ = ["MODULE", "ROLES"]

MODULE = "pool_runs"  # python -m benchmarks.pool_runs '<json spec>'
STALL = 20.0  # seconds without a processed message before a run fails
START_TIMEOUT = 90.0  # warm-up: worker processes (or the Celery worker) coming up


# -- where the worker processes' time went ------------------------------------------------
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



# -- the roles -------------------------------------------------------------------------------
def jmspy_run(spec: Spec) -> dict[str, Any]:
    """One measurement of a jmspy configuration: a plain consumer or a WorkerPool."""
    with tempfile.TemporaryDirectory(prefix="jmspy-bench-pool-rec-",
                                     ignore_cleanup_errors=True) as folder:
        return _jmspy_run(spec, Path(folder))


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
    with tempfile.TemporaryDirectory(prefix="jmspy-bench-pool-rec-",
                                     ignore_cleanup_errors=True) as folder:
        try:
            return _celery_run(spec, Path(folder))
        finally:
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


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].startswith("{"):
        worker_main(ROLES)
    sys.exit(f"usage: python -m benchmarks.{MODULE} '<json spec>' (started by "
             "python -m benchmarks.worker_pool)")
