"""A Spark standalone cluster on loopback (for benchmarks/spark_rows.py's ``--cluster`` rows and
tests_spark/test_spark_cluster.py): a master and workers started with
PySpark's own ``spark-class`` (the wheel ships the jars), every port chosen at run time,
every listener on 127.0.0.1 (``SPARK_LOCAL_IP``; the master's REST submission server,
which would take the fixed port 6066, is off). Each worker runs in a session of its own, so
that killing it takes its executor and that executor's Python workers with it, as a
machine that dies would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: How long a JVM may take to come up on a loaded 2-core machine.
START_TIMEOUT = 120.0


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def loopback_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="localhost",
        PYSPARK_PYTHON=sys.executable, SPARK_LOG_DIR=str(tmp / "logs"),
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=false",
    )
    return env


class StandaloneCluster:
    """``workers`` workers of ``cores`` cores each under one master, on loopback."""

    def __init__(self, tmp: Path, free_port: Callable[[], int], workers: int = 2,
                 cores: int = 1, memory: str = "768m") -> None:
        """``free_port``: a loopback port nobody listens on (each call a new one)."""
        self.tmp = tmp
        self.env = loopback_env(tmp)
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.workers: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []
        self.master = self._java("master", "org.apache.spark.deploy.master.Master",
                                 "--host", "127.0.0.1", "--port", str(self.port),
                                 "--webui-port", str(self.ui_port))
        self._wait(lambda state: state.get("status") == "ALIVE", "the master to start")
        for i in range(workers):
            self.workers.append(self._java(
                f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                "--webui-port", str(free_port()), "--work-dir", str(tmp / f"work{i}")))
        self._wait(lambda state: state.get("aliveworkers") == workers,
                   f"{workers} workers to register")

    def _java(self, name: str, main: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 (closed in stop)
        self._logs.append(log)
        return subprocess.Popen([str(spark_class()), main, *args], env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp,
                                start_new_session=True)

    def state(self) -> dict[str, Any]:
        """The master's view (its web UI's JSON)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/",
                                    timeout=5) as answer:
            state: dict[str, Any] = json.load(answer)
            return state

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.master.poll() is not None:
                raise RuntimeError(f"the Spark master exited ({self.master.returncode}): "
                                   f"see {self.tmp / 'master.log'}")
            try:
                if ready(self.state()):
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(0.2)  # waits for the master (its JVM starting, workers registering)
        raise RuntimeError(f"timed out waiting for {what}: see the logs in {self.tmp}")

    def kill_session_of(self, pid: int) -> int:
        """SIGKILL the worker whose session holds process ``pid`` (an executor's Python
        worker), with everything in that session: the worker, its executor, their Python
        workers (PySpark's daemon puts them in process groups of their own, so a group
        kill would miss them). Returns how many processes it killed."""
        sid = os.getsid(pid)
        assert sid in {w.pid for w in self.workers}, f"process {pid} is in no worker"
        killed = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # it ended meanwhile
            fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) "
            if int(fields[3]) == sid:  # state, ppid, pgrp, session
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        return killed

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in [*self.workers, self.master]:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        for log in self._logs:
            log.close()
