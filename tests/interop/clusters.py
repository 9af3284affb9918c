"""Real broker clusters on loopback: a 3-node RabbitMQ cluster and an ActiveMQ 5
shared-store master/slave pair, built on brokers.py's single brokers.

Plain classes with ``start()`` / ``close()`` (and context managers), so the interop tests'
session fixtures (cluster_fixtures.py) and the benchmarks share them. Every port is chosen
at run time on 127.0.0.1; every process is stopped by the PID of its process group, never
by name. A cluster that cannot form raises :class:`BrokerStartError` carrying every node's
log tail: the tests that need it fail with the reason, they are never skipped.

RabbitMQ: each node has its own node name, Mnesia and log directories, AMQP, STOMP, MQTT
and distribution ports; the nodes share one ``HOME`` (so one ``.erlang.cookie``) and one
private epmd. The first node boots alone; the others boot with classic-config peer
discovery naming it, so they join it on their first boot (no ``stop_app`` /
``join_cluster`` round, which would boot each of them twice). A node killed and started
again keeps its Mnesia directory and rejoins. ``rabbitmqctl`` is pinned to a free
distribution port per call (its default range, 35672-35682, is shared with anything else
on the machine). MQTT sessions are durable quorum queues (``mqtt.durable_queue_type``),
so a ``clean_session=false`` subscription survives the loss of the node it was made on.

ActiveMQ: two brokers on one KahaDB directory; the first takes its lock and serves, the
second waits for the lock (its connectors open only once it has it). The locker retries
every half second (default 10 s), so a failover costs about that plus KahaDB recovery.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import stomp
from brokers import (
    HOST,
    RABBITMQ_SERVER,
    ActiveMQ,
    BrokerProcess,
    BrokerStartError,
    Restartable,
    _port_open,
    _spawn,
    _stop_group,
    _workdir,
    free_port,
)

__all__ = [
    "ActiveMQPair",
    "RabbitCluster",
    "RabbitNode",
    "activemq_pair",
    "rabbit_cluster",
    "stomp_send",
]

_COOKIE = "JMSPYCLUSTERCOOKIE"


def _kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL a broker's whole process group (a crash: nothing is flushed)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    proc.wait(10)


class _Cluster(Protocol):
    start_seconds: float

    def logs(self) -> str: ...

    def close(self) -> None: ...


def _start_or_close(cluster: _Cluster, steps: Callable[[], None], failed: str) -> None:
    """Run a cluster's start ``steps`` and time them (``start_seconds``). If one fails,
    the cluster is closed; a BrokerStartError comes back saying ``failed``, with every
    node's log, read before the close removes it."""
    began = time.monotonic()
    try:
        steps()
    except BaseException as exc:
        logs = cluster.logs()
        cluster.close()
        if isinstance(exc, BrokerStartError):
            raise BrokerStartError(f"{failed}: {exc}\n{logs}") from None
        raise
    cluster.start_seconds = time.monotonic() - began


class _Crashable:
    """A cluster member a chaos test crashes: ``kill()`` SIGKILLs its process group
    (nothing is flushed; what it stored stays for a restart)."""

    process: BrokerProcess | None

    def kill(self) -> None:
        if self.process is not None:
            _kill_group(self.process.proc)
            self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.proc.poll() is None


class _Receipts(stomp.ConnectionListener):
    """RECEIPT frames heard on a raw stomp.py connection, waited for with a bound."""

    def __init__(self) -> None:
        self._heard: set[str] = set()
        self._cond = threading.Condition()

    def on_receipt(self, frame: Any) -> None:
        with self._cond:
            self._heard.add(frame.headers.get("receipt-id", ""))
            self._cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self._cond:
            self._heard.add(f"ERROR {frame.headers.get('message', '')} {frame.body}")
            self._cond.notify_all()

    def wait(self, receipt: str, what: str, timeout: float = 60.0) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: receipt in self._heard or any(
                h.startswith("ERROR") for h in self._heard), timeout)
            errors = [h for h in self._heard if h.startswith("ERROR")]
        if errors:
            raise BrokerStartError(f"{what}: the broker answered {errors[0]}")
        if not ok:
            raise BrokerStartError(f"{what}: no RECEIPT within {timeout:.0f}s")


def stomp_send(host: tuple[str, int], dest: str, bodies: list[str],
               timeout: float = 60.0) -> None:
    """Send ``bodies`` (text/plain, persistent) to ``dest`` with raw stomp.py and wait
    for the last one's RECEIPT. Both brokers receipt a persistent SEND once it is stored
    (RabbitMQ: confirmed, in a quorum queue by a majority) and in order, so every
    message before the last is stored too."""
    receipts = _Receipts()
    conn = stomp.Connection12([host], vhost="/", heartbeats=(0, 0))
    conn.set_listener("receipts", receipts)
    conn.connect("guest", "guest", wait=True)
    try:
        for i, body in enumerate(bodies):
            headers = {"persistent": "true", "content-type": "text/plain"}
            if i == len(bodies) - 1:
                headers["receipt"] = "last"
            conn.send(dest, body, headers=headers)
        receipts.wait("last", f"sending {len(bodies)} messages to {dest} on {host}", timeout)
    finally:
        conn.disconnect()


# -- RabbitMQ ----------------------------------------------------------------------------
class RabbitNode(_Crashable, Restartable):
    """One node of a :class:`RabbitCluster`: its own ports and directories, the cluster's
    HOME (cookie) and epmd. ``seed``: the node it joins on its first boot (None: the
    first node, which boots alone)."""

    ready_timeout = 120.0  # three nodes booting on two loaded cores
    stop_grace = 30.0

    def __init__(self, letter: str, home: Path, epmd_port: int, seed: str | None) -> None:
        self.name = f"rabbit-{letter}"
        super().__init__()
        self.node = f"jmspy-{letter}@localhost"
        self.amqp_port, self.stomp_port, self.mqtt_port, self.dist_port = (
            free_port() for _ in range(4)
        )
        discovery = (
            "cluster_formation.peer_discovery_backend = classic_config\n"
            f"cluster_formation.classic_config.nodes.1 = {seed}\n"
            if seed else ""
        )
        (self.work / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = {HOST}:{self.amqp_port}\n"
            f"stomp.listeners.tcp.1 = {HOST}:{self.stomp_port}\n"
            f"mqtt.listeners.tcp.default = {HOST}:{self.mqtt_port}\n"
            "mqtt.durable_queue_type = quorum\n"
            "loopback_users = none\n"
            f"distribution.listener.interface = {HOST}\n"
            f"distribution.listener.port_range.min = {self.dist_port}\n"
            f"distribution.listener.port_range.max = {self.dist_port}\n"
            f"{discovery}"
            "log.console = true\nlog.console.level = info\nlog.file = false\n"
        )
        (self.work / "enabled_plugins").write_text("[rabbitmq_stomp,rabbitmq_mqtt].\n")
        self.env = {
            **os.environ,
            "HOME": str(home),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.work / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.work / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.work / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.work / "log"),
            "RABBITMQ_PID_FILE": str(self.work / "rabbitmq.pid"),
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": HOST,
            "RABBITMQ_SERVER_START_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "RABBITMQ_CTL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    @property
    def stomp_address(self) -> tuple[str, int]:
        assert self.stomp_port is not None
        return (HOST, self.stomp_port)

    def _spawn(self) -> subprocess.Popen[bytes]:
        return _spawn([str(RABBITMQ_SERVER)], self.log, env=self.env, cwd=self.work)

    def _worth_retrying(self, error: BrokerStartError) -> bool:
        # "nodistribution": see brokers.RabbitMQ._worth_retrying; a node restarted after
        # a kill that boots slower than ready_timeout on two loaded cores gets one more
        # try, on the data it has (a failed start no longer deletes it)
        return "nodistribution" in str(error) or "did not listen" in str(error)

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """``rabbitmqctl -n <this node> ARGS``, on a distribution port of its own."""
        port = str(free_port())
        env = {**self.env, "RABBITMQ_CTL_DIST_PORT_MIN": port,
               "RABBITMQ_CTL_DIST_PORT_MAX": port}
        try:
            done = subprocess.run(
                [str(RABBITMQ_SERVER.parent / "rabbitmqctl"), "-n", self.node, *args],
                env=env, cwd=self.work, capture_output=True, text=True, timeout=timeout,
                check=False)
        except subprocess.TimeoutExpired as exc:
            raise BrokerStartError(f"rabbitmqctl {' '.join(args)} on {self.node}: "
                                   f"no answer within {timeout:.0f}s") from exc
        if done.returncode != 0:
            raise BrokerStartError(
                f"rabbitmqctl {' '.join(args)} on {self.node}: {done.stdout}{done.stderr}")
        return done.stdout


class RabbitCluster:
    """Three RabbitMQ 3.10 nodes clustered on loopback, with STOMP and MQTT.

    ``nodes[0]`` is the seed. ``kill(node)`` crashes one; ``restart(node)`` boots it
    again and waits until the cluster sees it running; ``heal()`` restarts every node
    that is down (a test that killed one may have failed before restarting it).
    """

    def __init__(self, size: int = 3) -> None:
        if not RABBITMQ_SERVER.exists():
            raise BrokerStartError(f"{RABBITMQ_SERVER} not found; apt-get install rabbitmq-server")
        self.work = _workdir("rabbit-cluster")
        self.home = self.work / "home"
        self.home.mkdir()
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(_COOKIE)
        cookie.chmod(0o400)
        self.epmd_port = free_port()
        self.epmd: subprocess.Popen[bytes] | None = None
        letters = "abcdefghij"[:size]
        seed = f"jmspy-{letters[0]}@localhost"
        self.nodes = [
            RabbitNode(letter, self.home, self.epmd_port, None if i == 0 else seed)
            for i, letter in enumerate(letters)
        ]
        self.start_seconds = 0.0

    # -- where ---------------------------------------------------------------------
    def stomp_hosts(self) -> list[tuple[str, int]]:
        return [n.stomp_address for n in self.nodes]

    def stomp_urls(self, query: str = "") -> list[str]:
        return [f"stomp://{HOST}:{n.stomp_port}{query}" for n in self.nodes]

    def mqtt_urls(self, query: str = "") -> list[str]:
        return [f"mqtt://{HOST}:{n.mqtt_port}{query}" for n in self.nodes]

    # -- life ----------------------------------------------------------------------
    def start(self) -> RabbitCluster:
        _start_or_close(self, self._form, "RabbitMQ cluster did not form")
        return self

    def _form(self) -> None:
        self._start_epmd()
        self._boot([self.nodes[0]])
        self._boot(self.nodes[1:])
        self.wait_formed()

    def _start_epmd(self) -> None:
        log = self.work / "epmd.log"
        self.epmd = _spawn(["epmd", "-address", HOST, "-port", str(self.epmd_port)], log)
        deadline = time.monotonic() + 15
        while not _port_open(self.epmd_port):
            if self.epmd.poll() is not None:
                raise BrokerStartError(f"epmd exited with status {self.epmd.returncode}: "
                                       f"{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise BrokerStartError(f"epmd did not listen on {HOST}:{self.epmd_port}")
            time.sleep(0.05)  # epmd binds its port within milliseconds of starting

    @staticmethod
    def _boot(nodes: list[RabbitNode]) -> None:
        """Start ``nodes`` at once (each waits for its own listeners)."""
        errors: list[BaseException] = []

        def one(node: RabbitNode) -> None:
            try:
                node.start()
            except BaseException as exc:  # reported below, with the node's name
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise BrokerStartError("; ".join(str(e) for e in errors))

    def running_nodes(self, via: RabbitNode | None = None) -> list[str]:
        """The node names ``cluster_status`` reports running (asked of ``via``)."""
        node = via or next(n for n in self.nodes if n.running)
        out = node.ctl("cluster_status", "--formatter", "json")


        status: dict[str, Any] = json.loads(out)
        return sorted(status.get("running_nodes", []))

    def wait_formed(self, timeout: float = 120.0) -> None:
        """Until every node is running and every node sees all of them."""
        want = sorted(n.node for n in self.nodes)
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            try:
                seen = self.running_nodes(self.nodes[0]) if self.nodes[0].running else []
                if seen == want and all(self.running_nodes(n) == want for n in self.nodes[1:]):
                    return
            except BrokerStartError as exc:
                seen = [f"(cluster_status failed: {exc})"]
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"cluster_status shows running {seen}, expected {want} "
                    f"after {timeout:.0f}s")
            time.sleep(0.5)  # a joining node's app is still starting

    def kill(self, node: RabbitNode) -> None:
        node.kill()

    def restart(self, node: RabbitNode) -> None:
        try:
            node.start()
            self.wait_formed()
        except BrokerStartError as exc:
            raise BrokerStartError(f"{node.node} did not rejoin: {exc}\n{self.logs()}") from None

    def heal(self) -> None:
        """Every node running and clustered again."""
        down = [n for n in self.nodes if not n.running]
        for n in down:
            n.process = None
        if down:
            self._boot(down)
        self.wait_formed()

    def logs(self, lines: int = 25) -> str:
        parts = []
        for n in self.nodes:
            try:
                tail = "\n".join(n.log.read_text(errors="replace").splitlines()[-lines:])
            except OSError as exc:
                tail = f"(no log: {exc})"
            parts.append(f"--- {n.node} ({n.log}) ---\n{tail}")
        return "\n".join(parts)

    def close(self) -> None:
        for n in self.nodes:
            n.close()
        if self.epmd is not None:
            _stop_group(self.epmd)


        shutil.rmtree(self.work, ignore_errors=True)

    # -- queues --------------------------------------------------------------------
    def declare_quorum_queue(self, name: str, node: RabbitNode | None = None) -> None:
        """Declare the durable quorum queue ``name`` on ``node`` (default: the seed),
        with raw stomp.py (a SUBSCRIBE with ``x-queue-type:quorum``): its leader starts
        on that node. The subscription acknowledges by hand and is cancelled before the
        connection closes (both confirmed by RECEIPT), so it never takes a message
        someone sends right after: an ``ack:auto`` one could swallow the first."""
        node = node or self.nodes[0]
        receipts = _Receipts()
        conn = stomp.Connection12([node.stomp_address], vhost="/", heartbeats=(0, 0))
        conn.set_listener("receipts", receipts)
        conn.connect("guest", "guest", wait=True)
        try:
            conn.subscribe(f"/queue/{name}", id="declare", ack="client-individual", headers={
                "x-queue-type": "quorum", "durable": "true", "auto-delete": "false",
                "prefetch-count": "1", "receipt": "declared"})
            receipts.wait("declared", f"declaring the quorum queue {name} on {node.node}")
            conn.unsubscribe("declare", headers={"receipt": "cancelled"})
            receipts.wait("cancelled", f"cancelling the declaring subscription of {name}")
        finally:
            conn.disconnect()

    def queue_leader(self, name: str) -> str:
        """The node name of the quorum queue's leader (``list_queues name leader``)."""
        node = next(n for n in self.nodes if n.running)
        for line in node.ctl("list_queues", "name", "leader", "--quiet").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == name:
                return parts[1]
        raise BrokerStartError(f"no queue {name!r} in list_queues")

    def node_named(self, name: str) -> RabbitNode:
        return next(n for n in self.nodes if n.node == name)


@contextmanager
def rabbit_cluster(size: int = 3) -> Iterator[RabbitCluster]:
    cluster = RabbitCluster(size).start()
    try:
        yield cluster
    finally:
        cluster.close()


# -- ActiveMQ 5 --------------------------------------------------------------------------
_PERSISTENCE = """<persistenceAdapter>
      <kahaDB directory="{store}">
        <locker><shared-file-locker lockAcquireSleepInterval="500"/></locker>
      </kahaDB>
    </persistenceAdapter>
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://{host}:{openwire}"/>"""


class PairBroker(_Crashable, ActiveMQ):
    """One of an :class:`ActiveMQPair`: persistent, KahaDB in the pair's shared store,
    STOMP and openwire connectors on its own ports (no MQTT)."""

    def __init__(self, role: str, store: Path) -> None:
        self.name = f"activemq-{role}"
        super().__init__(persistent=True)
        self.openwire_port = free_port()
        xml = (self.conf / "activemq.xml").read_text()
        xml = xml.replace('brokerName="jmspy-interop"', 'brokerName="jmspy-pair"')
        xml = xml.replace("    <transportConnectors>", _PERSISTENCE.format(
            store=store, host=HOST, openwire=self.openwire_port))
        xml = "\n".join(line for line in xml.splitlines() if 'name="mqtt"' not in line)
        (self.conf / "activemq.xml").write_text(xml)
        self.mqtt_port = None

    def spawn_waiting(self) -> BrokerProcess:
        """Start without waiting for the connectors (a slave opens them on takeover)."""
        proc = self._spawn()
        self.process = BrokerProcess(self.name, HOST, self.stomp_port, None, proc,
                                     self.work, self.log)
        return self.process

    @property
    def serving(self) -> bool:
        assert self.stomp_port is not None
        return self.running and _port_open(self.stomp_port)


class ActiveMQPair:
    """ActiveMQ 5 shared-store master/slave: ``brokers[0]`` starts first and is master,
    ``brokers[1]`` waits on the KahaDB lock. ``master()`` is whichever serves now."""

    def __init__(self) -> None:
        self.work = _workdir("activemq-pair")
        self.store = self.work / "kahadb"
        self.store.mkdir()
        self.brokers = [PairBroker("one", self.store), PairBroker("two", self.store)]
        self.start_seconds = 0.0

    def stomp_hosts(self) -> list[tuple[str, int]]:
        return [(HOST, b.stomp_port) for b in self.brokers if b.stomp_port]

    def stomp_urls(self, query: str = "") -> list[str]:
        return [f"stomp://{HOST}:{b.stomp_port}{query}" for b in self.brokers]

    def start(self) -> ActiveMQPair:
        _start_or_close(self, self._pair, "ActiveMQ pair did not start")
        return self

    def _pair(self) -> None:
        self.brokers[0].start()
        self.brokers[1].spawn_waiting()
        self.wait_slave(self.brokers[1])

    def wait_slave(self, broker: PairBroker, timeout: float = 60.0) -> None:
        """Until ``broker`` runs and its log says it waits for the store's lock."""
        deadline = time.monotonic() + timeout
        while True:
            if not broker.running:
                raise BrokerStartError(f"{broker.name} exited while starting as slave:\n"
                                       f"{self._tail(broker)}")
            text = broker.log.read_text(errors="replace") if broker.log.exists() else ""
            if "locked by another server" in text or "is locked" in text:
                return
            if time.monotonic() > deadline:
                raise BrokerStartError(f"{broker.name} did not report waiting for the "
                                       f"KahaDB lock within {timeout:.0f}s")
            time.sleep(0.2)  # the JVM is starting

    def master(self) -> PairBroker | None:
        return next((b for b in self.brokers if b.serving), None)

    def wait_master(self, timeout: float = 90.0) -> PairBroker:
        deadline = time.monotonic() + timeout
        while True:
            m = self.master()
            if m is not None:
                return m
            if time.monotonic() > deadline:
                raise BrokerStartError(f"no ActiveMQ of the pair serves STOMP after "
                                       f"{timeout:.0f}s\n{self.logs()}")
            time.sleep(0.1)  # the slave takes the lock and opens its connectors

    def restart_as_slave(self, broker: PairBroker) -> None:
        """Start a killed broker again: it waits for the lock the other one holds."""
        broker.process = None
        broker.spawn_waiting()
        self.wait_slave(broker)

    def heal(self) -> None:
        """One master serving and the other broker waiting as slave."""
        master = self.wait_master()
        for b in self.brokers:
            if b is not master and not b.running:
                self.restart_as_slave(b)

    @staticmethod
    def _tail(b: PairBroker, lines: int = 30) -> str:
        try:
            return "\n".join(b.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    def logs(self) -> str:
        return "\n".join(f"--- {b.name} ({b.log}) ---\n{self._tail(b)}" for b in self.brokers)

    def close(self) -> None:
        for b in self.brokers:
            b.close()


        shutil.rmtree(self.work, ignore_errors=True)


@contextmanager
def activemq_pair() -> Iterator[ActiveMQPair]:
    pair = ActiveMQPair().start()
    try:
        yield pair
    finally:
        pair.close()
