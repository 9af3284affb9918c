"""Real peer brokers from their Debian packages, started as child processes on loopback.

Each broker runs in the foreground in its own process group, on free 127.0.0.1 ports,
with a configuration written into a temporary directory (see ../shared/PEERS.md for why
each step is needed: the Debian wrappers switch users, log to /var/log and override the
instance directory, so they are bypassed). A broker that cannot start raises
:class:`BrokerStartError` with the tail of its log: the interop tests fail with the
reason instead of being skipped, because a skipped interop suite proves nothing.

Stopping kills the whole process group by PID (and RabbitMQ's private epmd), never by
process name: other brokers on the machine are not ours.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ActiveMQ",
    "BrokerProcess",
    "BrokerStartError",
    "Mosquitto",
    "RabbitMQ",
    "Restartable",
    "free_port",
    "rabbitmqctl",
    "start_activemq",
    "start_mosquitto",
    "start_rabbitmq",
]

HOST = "127.0.0.1"
ACTIVEMQ_HOME = Path("/usr/share/activemq")
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
_MQTT_JARS = ("mqtt-client.jar", "hawtdispatch.jar", "hawtdispatch-transport.jar")
_INSTALL_HINT = (
    "install the Debian packages with: apt-get install -y --no-install-recommends "
    "mosquitto rabbitmq-server activemq libmqtt-client-java (.ci/run does this)"
)


class BrokerStartError(RuntimeError):
    """A peer broker did not come up; the message carries the tail of its log."""


_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the broker binds it moments later).

    Chosen below the kernel's ephemeral range, never twice in one run. A port the kernel
    hands out for ``bind(0)`` comes from the range it also gives every outgoing
    connection its local port from: in the moments between choosing a port and the
    broker binding it, a client connecting elsewhere could take it, and the broker (or
    RabbitMQ's epmd or distribution listener) would then fail with "address in use".
    """
    low = _ephemeral_range()[0]
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, low) if low > 11000 else rng.randrange(low, 65536)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise BrokerStartError(f"no free TCP port found on {HOST} in 200 tries")


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class BrokerProcess:
    """A running broker: where to reach it and how to stop it."""

    name: str
    host: str
    stomp_port: int | None
    mqtt_port: int | None
    proc: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path
    extra_pids: list[subprocess.Popen[bytes]] = field(default_factory=list)
    server_header: str = ""
    #: the environment the broker runs in (RabbitMQ: what ``rabbitmqctl`` needs to reach it)
    env: dict[str, str] | None = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, ports: list[int], timeout: float) -> None:
        """Wait until every port accepts TCP; fail with the log if the process died."""
        deadline = time.monotonic() + timeout
        pending = list(ports)
        while pending:
            if self.proc.poll() is not None:
                raise BrokerStartError(
                    f"{self.name} exited with status {self.proc.returncode} before listening "
                    f"on {HOST}:{pending}; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                # the log read first, then only the broker's own processes stopped: its
                # directory (a cluster member's data, its log) and helpers (the cluster's
                # epmd) stay for whoever owns them, to retry or to clean up
                message = (f"{self.name} did not listen on {HOST}:{pending} within "
                           f"{timeout:.0f}s; last lines of {self.log_path}:\n{self.log_tail()}")
                _stop_group(self.proc)
                raise BrokerStartError(message)
            pending = [p for p in pending if not _port_open(p)]
            if pending:
                time.sleep(0.1)

    def stop(self) -> None:
        """TERM the process group, KILL it if it lingers, then the helpers (epmd)."""
        for proc in [self.proc, *self.extra_pids]:
            _stop_group(proc)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _stop_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


def _spawn(
    cmd: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    try:
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,  # own process group: stop kills all its children
            )
    except FileNotFoundError as exc:
        raise BrokerStartError(f"cannot run {cmd[0]}: {exc}; {_INSTALL_HINT}") from exc


def _workdir(name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"jmspy-{name}-"))
    path.chmod(0o755)  # brokers that drop privileges must still read their config
    return path


class Restartable:
    """A broker that can be stopped and started again on the same ports and data directory.

    The session brokers below are these, started once and never restarted (restarting
    a shared broker would disturb every other test); the failover tests restart their
    own. ``stop()`` keeps what the broker persisted; ``close()`` removes everything.
    """

    name = "broker"
    stop_grace = 10.0
    ready_timeout = 15.0

    def __init__(self) -> None:
        self.host = HOST
        self.work = _workdir(self.name)
        self.log = self.work / f"{self.name}.log"
        self.stomp_port: int | None = None
        self.mqtt_port: int | None = None
        self.helpers: list[subprocess.Popen[bytes]] = []  # outlive restarts (epmd)
        self.process: BrokerProcess | None = None

    def _spawn(self) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    def start(self) -> BrokerProcess:
        if self.process is not None:
            return self.process
        try:
            process = self._start_once()
        except BrokerStartError as first:
            if not self._worth_retrying(first):
                self.close()
                raise
            try:
                process = self._start_once()
            except BrokerStartError as second:
                self.close()
                raise BrokerStartError(f"{second}\n(a first attempt failed too: {first})") from None
        self.process = process
        return process

    def _start_once(self) -> BrokerProcess:
        proc = self._spawn()
        process = BrokerProcess(
            self.name, HOST, self.stomp_port, self.mqtt_port, proc, self.work, self.log,
            extra_pids=self.helpers, env=getattr(self, "env", None),
        )
        try:
            process.wait_ready([p for p in (self.stomp_port, self.mqtt_port) if p],
                               self.ready_timeout)
        except BrokerStartError:
            _stop_group(proc)
            raise
        return process

    def _worth_retrying(self, error: BrokerStartError) -> bool:
        """Whether a failed start is a known transient of this broker (default: none)."""
        return False

    def stop(self) -> None:
        """TERM the broker's process group (brokers flush their stores on TERM)."""
        if self.process is not None:
            _stop_group(self.process.proc, grace=self.stop_grace)
            self.process = None

    def close(self) -> None:
        self.stop()
        for proc in self.helpers:
            _stop_group(proc)
        shutil.rmtree(self.work, ignore_errors=True)


# -- Mosquitto ---------------------------------------------------------------------------
class Mosquitto(Restartable):
    """Mosquitto 2 on one MQTT port. ``max_queued_messages 0``: the default (1000) silently
    drops QoS 1 messages for a slow subscriber, which would make counting tests flaky.

    ``persistent``: sessions, subscriptions and in-flight QoS 1 messages are saved to
    ``mosquitto.db`` when the broker stops (TERM) and loaded when it starts again.
    Mosquitto drops root privileges to its own user, so that directory is world-writable.
    """

    name = "mosquitto"

    def __init__(self, persistent: bool = False) -> None:
        super().__init__()
        self.binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.mqtt_port = free_port()
        store = self.work / "store"
        store.mkdir(mode=0o777)
        store.chmod(0o777)
        persistence = (
            f"persistence true\npersistence_location {store}/\nautosave_interval 0\n"
            if persistent
            else "persistence false\n"
        )
        self.conf = self.work / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.mqtt_port} {HOST}\nallow_anonymous true\n{persistence}"
            "log_dest stdout\nmax_queued_messages 0\n"
        )
        self.conf.chmod(0o644)

    def _spawn(self) -> subprocess.Popen[bytes]:
        return _spawn([self.binary, "-c", str(self.conf)], self.log)


def start_mosquitto() -> BrokerProcess:
    return Mosquitto().start()


# -- RabbitMQ ----------------------------------------------------------------------------
class RabbitMQ(Restartable):
    """RabbitMQ with the STOMP and MQTT plugins, run directly (not through the wrapper that
    switches user and logs to /var/log), with its own epmd on a free loopback port. The
    node name and Mnesia directory stay the same across restarts, so durable queues and
    persistent messages (and MQTT sessions, which are durable queues) survive one."""

    name = "rabbitmq"
    ready_timeout = 90.0
    stop_grace = 30.0

    def __init__(self) -> None:
        if not RABBITMQ_SERVER.exists():
            raise BrokerStartError(f"{RABBITMQ_SERVER} not found; {_INSTALL_HINT}")
        super().__init__()
        work = self.work
        amqp, self.stomp_port, self.mqtt_port, epmd_port, dist_port = (
            free_port() for _ in range(5)
        )
        #: AMQP 0.9.1 (benchmarks/aio.py runs aio-pika on it)
        self.amqp_port = amqp
        (work / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = {HOST}:{amqp}\n"
            f"stomp.listeners.tcp.1 = {HOST}:{self.stomp_port}\n"
            f"mqtt.listeners.tcp.default = {HOST}:{self.mqtt_port}\n"
            "loopback_users = none\n"
            f"distribution.listener.interface = {HOST}\n"
            f"distribution.listener.port_range.min = {dist_port}\n"
            f"distribution.listener.port_range.max = {dist_port}\n"
            "log.console = true\nlog.console.level = info\nlog.file = false\n"
        )
        (work / "enabled_plugins").write_text("[rabbitmq_stomp,rabbitmq_mqtt].\n")
        self.epmd_port = epmd_port
        self.helpers.append(
            _spawn(["epmd", "-address", HOST, "-port", str(epmd_port)], work / "epmd.log")
        )
        self.env = {
            **os.environ,
            "HOME": str(work),
            "RABBITMQ_NODENAME": f"jmspy{self.stomp_port}@localhost",
            "RABBITMQ_CONFIG_FILE": str(work / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(work / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(work / "mnesia"),
            "RABBITMQ_LOG_BASE": str(work / "log"),
            "RABBITMQ_PID_FILE": str(work / "rabbitmq.pid"),
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": HOST,
            # its boot checks the distribution port at the default 25672 unless told (the
            # config's port range comes later): another RabbitMQ on this machine holding
            # 25672 would stop it there
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_SERVER_START_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    def _spawn(self) -> subprocess.Popen[bytes]:
        self._wait_for_epmd()
        return _spawn([str(RABBITMQ_SERVER)], self.log, env=self.env, cwd=self.work)

    def _worth_retrying(self, error: BrokerStartError) -> bool:
        """Erlang's distribution failing to come up at boot (``nodistribution``: the node
        could not listen or register with epmd) has been seen once in CI with a running
        epmd and free ports; the node exits before touching its Mnesia, so one more try
        is safe. Any other failure, or a second one, fails the fixture with its log."""
        return "nodistribution" in str(error)

    def _wait_for_epmd(self, timeout: float = 15.0) -> None:
        """Start RabbitMQ only once its epmd listens: a node that cannot register with
        epmd at boot exits with ``nodistribution`` instead of waiting for it."""
        epmd, log = self.helpers[0], self.work / "epmd.log"
        deadline = time.monotonic() + timeout
        while not _port_open(self.epmd_port):
            if epmd.poll() is not None:
                tail = log.read_text(errors="replace") if log.exists() else "(no log)"
                raise BrokerStartError(
                    f"epmd exited with status {epmd.returncode} before listening on "
                    f"{HOST}:{self.epmd_port}; {log}:\n{tail}"
                )
            if time.monotonic() > deadline:
                raise BrokerStartError(
                    f"epmd did not listen on {HOST}:{self.epmd_port} within {timeout:.0f}s"
                )
            time.sleep(0.05)  # epmd binds its port within milliseconds of starting


def start_rabbitmq() -> BrokerProcess:
    return RabbitMQ().start()


def rabbitmqctl(broker: BrokerProcess, *args: str) -> str:
    """Run ``rabbitmqctl`` against ``broker`` (its node, cookie and epmd); its output."""
    assert broker.env is not None, "not a RabbitMQ started by this module"
    done = subprocess.run(
        [str(RABBITMQ_SERVER.parent / "rabbitmqctl"), *args], env=broker.env,
        cwd=broker.workdir, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise BrokerStartError(f"rabbitmqctl {' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


# -- ActiveMQ 5 --------------------------------------------------------------------------
_ACTIVEMQ_XML = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core
    http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false"
          brokerName="jmspy-interop" persistent="false" schedulerSupport="true"
          dataDirectory="{data}">
    <plugins><statisticsBrokerPlugin/></plugins>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://{host}:{stomp}"/>
      <transportConnector name="mqtt" uri="mqtt://{host}:{mqtt}"/>
    </transportConnectors>
  </broker>
</beans>
"""

_LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%d %-5p %c{1} - %m%n
"""

_LOG4J2 = """rootLogger.level=INFO
rootLogger.appenderRef.console.ref=Console
appender.console.type=Console
appender.console.name=Console
appender.console.layout.type=PatternLayout
appender.console.layout.pattern=%d %-5p %c{1} - %m%n
"""

_JAVA_OPENS = [
    "--add-reads=java.xml=java.logging",
    *(
        f"--add-opens={m}=ALL-UNNAMED"
        for m in (
            "java.base/java.security",
            "java.base/java.net",
            "java.base/java.lang",
            "java.base/java.util",
            "java.naming/javax.naming.spi",
            "java.rmi/sun.rmi.transport.tcp",
            "java.base/java.util.concurrent",
            "java.base/java.util.concurrent.atomic",
        )
    ),
]


_POLICY = """    <destinationPolicy><policyMap><policyEntries>
      <policyEntry queue=">" persistJMSRedelivered="true"/>
      <policyEntry topic=">" persistJMSRedelivered="true"/>
    </policyEntries></policyMap></destinationPolicy>
    <plugins>"""

#: ``ActiveMQ(secured=True)``: two users; ``writer`` may write every destination,
#: ``reader`` only reads (and may create destinations, so that a SEND reaches the
#: ``write`` check); everyone uses the advisory topics (connections need them). The STOMP
#: connector refuses frames over SECURED_MAX_FRAME bytes (a limit a test can hit cheaply).
SECURED_MAX_FRAME = 65_536
SECURED_USERS = {"writer": "writer-pw", "reader": "reader-pw"}
_SECURITY_PLUGINS = """<plugins>
      <simpleAuthenticationPlugin anonymousAccessAllowed="false"><users>
        <authenticationUser username="writer" password="writer-pw" groups="writers,everyone"/>
        <authenticationUser username="reader" password="reader-pw" groups="readers,everyone"/>
      </users></simpleAuthenticationPlugin>
      <authorizationPlugin><map><authorizationMap><authorizationEntries>
        <authorizationEntry queue=">" read="writers,readers" write="writers"
                            admin="writers,readers"/>
        <authorizationEntry topic=">" read="writers,readers" write="writers"
                            admin="writers,readers"/>
        <authorizationEntry topic="ActiveMQ.Advisory.>" read="everyone" write="everyone"
                            admin="everyone"/>
      </authorizationEntries></authorizationMap></map></authorizationPlugin>"""


class ActiveMQ(Restartable):
    """ActiveMQ 5 with STOMP and MQTT connectors, no JMX, logging to stdout.

    Non-persistent by default (tests measure protocol behaviour, not KahaDB).
    ``schedulerSupport="true"``: without it ActiveMQ ignores ``AMQ_SCHEDULED_DELAY`` and
    delivery delay does nothing (non-persistent, the scheduler keeps its jobs in memory).
    ``persistent``: KahaDB in the data directory, and ``persistJMSRedelivered`` so that a
    message dispatched before a restart comes back marked redelivered, as from Open MQ.
    """

    name = "activemq"
    ready_timeout = 60.0
    stop_grace = 30.0

    def __init__(self, persistent: bool = False, secured: bool = False) -> None:
        jar = ACTIVEMQ_HOME / "bin" / "activemq.jar"
        if not jar.exists():
            raise BrokerStartError(f"{jar} not found; {_INSTALL_HINT}")
        super().__init__()
        self.jar = jar
        self.conf, self.data, lib = self.work / "conf", self.work / "data", self.work / "lib"
        shutil.copytree("/etc/activemq/instances-available/main", self.conf)
        self.data.mkdir()
        lib.mkdir()
        for name in _MQTT_JARS:
            src = Path("/usr/share/java") / name
            if not src.exists():
                raise BrokerStartError(
                    f"{src} not found (ActiveMQ's MQTT needs it); {_INSTALL_HINT}"
                )
            (lib / name).symlink_to(src)
        self.stomp_port, self.mqtt_port = free_port(), free_port()
        xml = _ACTIVEMQ_XML.format(
            host=HOST, stomp=self.stomp_port, mqtt=self.mqtt_port, data=self.data
        )
        if persistent:
            xml = xml.replace('persistent="false"', 'persistent="true"')
            xml = xml.replace("    <plugins>", _POLICY)
        if secured:  # users and permissions: see SECURED_USERS
            xml = xml.replace("<plugins>", _SECURITY_PLUGINS, 1)
            stomp = f"stomp://{HOST}:{self.stomp_port}"
            xml = xml.replace(f'{stomp}"', f'{stomp}?wireFormat.maxFrameSize={SECURED_MAX_FRAME}"')
        (self.conf / "activemq.xml").write_text(xml)
        (self.conf / "log4j.properties").write_text(_LOG4J)
        (self.conf / "log4j2.properties").write_text(_LOG4J2)

    def _spawn(self) -> subprocess.Popen[bytes]:
        conf = self.conf
        cmd = [
            "java",
            "-Xmx512M",
            *_JAVA_OPENS,
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Dactivemq.base={self.work}",
            f"-Dactivemq.conf={conf}",
            f"-Dactivemq.data={self.data}",
            f"-Dlog4j.configuration=file:{conf}/log4j.properties",
            f"-Dlog4j2.configurationFile={conf}/log4j2.properties",
            "-jar",
            str(self.jar),
            "start",
            f"xbean:file:{conf}/activemq.xml",
        ]
        return _spawn(cmd, self.log, cwd=self.work)


def start_activemq() -> BrokerProcess:
    return ActiveMQ().start()
