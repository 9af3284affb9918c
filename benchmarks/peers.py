"""Broker processes for the benchmarks, started on demand and stopped at the end.

ActiveMQ 5, RabbitMQ and Mosquitto come from tests/interop/brokers.py (imported by file
path, so the start-up recipes live in one place; see ../shared/PEERS.md). The bundled
``jmspy broker`` and CoilMQ (PyPI; installed with pip on first use if missing) are started
here the same way: own process group, free loopback port, stopped by PID.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .common import neutral_dir, worker_env

_BROKERS_PY = Path(__file__).resolve().parent.parent / "tests" / "interop" / "brokers.py"


def _interop() -> ModuleType:
    """tests/interop/brokers.py as a module (it only needs the standard library)."""
    name = "jmspy_interop_brokers"
    if name in sys.modules:
        return sys.modules[name]
    if not _BROKERS_PY.exists():
        raise RuntimeError(f"{_BROKERS_PY} not found (run from a source checkout)")
    spec = importlib.util.spec_from_file_location(name, _BROKERS_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class Endpoint:
    """Where a running broker listens."""

    name: str
    host: str
    stomp_port: int | None
    mqtt_port: int | None
    #: the broker's process (the leader of its own session: benchmarks/broker_probe.py)
    pid: int = 0


def _spawn_local(name: str, cmd: list[str], env: dict[str, str] | None = None) -> Any:
    """Start ``cmd`` listening on one STOMP port (appended by the caller via ``{port}``)."""
    brokers = _interop()
    work = Path(tempfile.mkdtemp(prefix=f"jmspy-bench-{name}-"))
    port = brokers.free_port()
    log = work / f"{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([c.format(port=port) for c in cmd], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=neutral_dir(), start_new_session=True)
    broker = brokers.BrokerProcess(name, brokers.HOST, port, None, proc, work, log)
    broker.wait_ready([port], 30)
    return broker


#: The peer name of ``jmspy broker`` as a user starts it: uvloop is its default event loop
#: (a dependency of jmspy where it has wheels, and in the ``[bench]`` extra). Every row of
#: "the jmspy broker" runs it; the ``jmspy`` peer (``--loop asyncio``) is the row beside it
#: in part (c) that shows what the standard library's loop costs.
DEFAULT_JMSPY = "jmspy-uvloop"


def start_jmspy(loop: str = "asyncio", *, persistent: bool = False,
                python: str | None = None,
                idle_spin_us: int | None = None) -> Any:
    """``python -m jmspy broker`` (compiled twins) on a free port, on the given event loop
    (``uvloop`` must be installed; ``pip install uvloop``): in memory, like the peers'
    non-persistent workloads, or ``persistent`` with a fresh data directory.
    ``python``:
    the interpreter to run it with (another environment's jmspy, another build).
    ``idle_spin_us``: its polling window after a read (``--idle-spin-us``; 0: off), else
    the broker's default."""
    if python is None and loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise RuntimeError("uvloop is not installed (pip install uvloop)")
    if python is not None and not Path(python).is_file():
        raise RuntimeError(f"no Python interpreter at {python!r}: name one whose environment "
                           "has jmspy installed (e.g. /path/to/venv/bin/python)")
    name = "jmspy" if loop == "asyncio" else f"jmspy-{loop}"
    where = ["--in-memory"]
    if idle_spin_us is not None:  # the broker's polling window, else its default
        name += "-nospin" if idle_spin_us == 0 else f"-spin{idle_spin_us}"
        where += ["--idle-spin-us", str(idle_spin_us)]
    if persistent:
        name += "-persistent"
        where = ["--data-dir", tempfile.mkdtemp(prefix="jmspy-bench-data-")]
    env = worker_env()
    return _spawn_local(name, [python or sys.executable, "-m", "jmspy", "broker", "--host",
                               "127.0.0.1", "--port", "{port}", "--loop", loop, *where],
                        env=env)


#: The jmspy broker of the scaling part (part_f_scaling.py): as installed (uvloop, in
#: memory), with the caps a test rig with thousands of connections from one address lifts
#: (ActiveMQ's connector as the interop recipe starts it and RabbitMQ have none), and
#: ``memory-limit`` at 1 GB, near ActiveMQ's share of its 512 MB heap, so that 8 MB
#: messages are held in memory rather than paged (the 64 MB default gives one queue 6.4 MB).
SCALE_CONFIG = ("[limits]\nmax-connections = 0\nmax-connections-per-address = 0\n"
                "idle-timeout = 0\n\n[system-usage]\nmemory-limit = \"1 GB\"\n")


def start_jmspy_scale() -> Any:
    """``python -m jmspy broker`` as installed, configured by :data:`SCALE_CONFIG`."""
    config = Path(tempfile.mkdtemp(prefix="jmspy-bench-scale-")) / "broker.toml"
    config.write_text(SCALE_CONFIG)
    loop = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    return _spawn_local("jmspy-scale", [
        sys.executable, "-m", "jmspy", "broker", "--host", "127.0.0.1", "--port", "{port}",
        "--loop", loop, "--in-memory", "--config", str(config)], env=worker_env())


def start_jmspy_mqtt() -> Any:
    """``python -m jmspy broker`` as installed (uvloop, in memory) with its MQTT listener
    on a second free port (``--mqtt-port``): the MQTT rows' bundled broker."""
    brokers = _interop()
    work = Path(tempfile.mkdtemp(prefix="jmspy-bench-jmspy-mqtt-"))
    port, mqtt_port = brokers.free_port(), brokers.free_port()
    log = work / "jmspy-mqtt.log"
    # no connection caps, as Mosquitto has none by default: the idle-connection figure
    # opens thousands from one address (the [limits] default lets 100 in per address)
    config = work / "broker.toml"
    config.write_text("[limits]\nmax-connections = 0\nmax-connections-per-address = 0\n")
    loop = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--host", "127.0.0.1", "--port",
             str(port), "--mqtt-port", str(mqtt_port), "--loop", loop, "--in-memory",
             "--config", str(config)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=worker_env(), cwd=neutral_dir(), start_new_session=True)
    broker = brokers.BrokerProcess("jmspy-mqtt", brokers.HOST, port, mqtt_port, proc, work,
                                   log)
    broker.wait_ready([port, mqtt_port], 30)
    return broker


def ensure_coilmq(log: Callable[[str], None]) -> str:
    """Path of the ``coilmq`` script, installing CoilMQ from PyPI first if missing."""
    script = shutil.which("coilmq") or str(Path(sys.executable).parent / "coilmq")
    if importlib.util.find_spec("coilmq") is None or not Path(script).exists():
        log("CoilMQ is not installed: running `pip install coilmq` (benchmark-only peer)")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "coilmq"], check=True,
                       capture_output=True)
        script = shutil.which("coilmq") or str(Path(sys.executable).parent / "coilmq")
    return script


def start_coilmq(log: Callable[[str], None]) -> Any:
    return _spawn_local("coilmq", [ensure_coilmq(log), "-b", "127.0.0.1", "-p", "{port}"])


class Peers:
    """Starts each broker once on first use; remembers a failure and its reason."""

    def __init__(self, log: Callable[[str], None] = print) -> None:
        self.log = log
        self._started: dict[str, Any] = {}

    def _starter(self, name: str) -> Callable[[], Any]:
        if "@" in name:  # jmspy[-uvloop]@PYTHON: the broker of another environment
            base, python = name.split("@", 1)
            if base not in ("jmspy", "jmspy-uvloop"):
                raise ValueError(f"{name!r}: only jmspy@PYTHON and jmspy-uvloop@PYTHON "
                                 "name a broker run by another interpreter")
            loop = "asyncio" if base == "jmspy" else "uvloop"
            return lambda: start_jmspy(loop, python=python)
        if name == "jmspy":
            return start_jmspy
        if name == "jmspy-uvloop":
            return lambda: start_jmspy("uvloop")
        if name == "jmspy-uvloop-nospin":  # as installed, without polling before sleeping
            return lambda: start_jmspy("uvloop", idle_spin_us=0)
        if name == "jmspy-persistent":  # as installed: the default loop
            return lambda: start_jmspy("uvloop", persistent=True)
        if name == "jmspy-mqtt":
            return start_jmspy_mqtt
        if name == "jmspy-scale":
            return start_jmspy_scale
        if name == "activemq-kahadb":  # the interop ActiveMQ, persistent (KahaDB)
            return lambda: _interop().ActiveMQ(persistent=True).start()
        if name == "coilmq":
            return lambda: start_coilmq(self.log)
        return getattr(_interop(), f"start_{name}")  # type: ignore[no-any-return]

    def get(self, name: str) -> Endpoint | str:
        """The broker's endpoint, or the reason it is not available."""
        if name not in self._started:
            self.log(f"starting {name} ...")
            try:
                self._started[name] = self._starter(name)()
            except Exception as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self._started[name] = f"{name} could not start: {reason}"
        got = self._started[name]
        if isinstance(got, str):
            return got
        return Endpoint(name, got.host, got.stomp_port, got.mqtt_port, got.proc.pid)

    def stop_all(self) -> None:
        for got in self._started.values():
            if not isinstance(got, str):
                got.stop()
        self._started.clear()

    def __enter__(self) -> Peers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
