"""A persistent ActiveMQ 5 that a test can stop and start again on the same ports and data
directory, and a Mosquitto that restarts on the same port, for failover tests.

The session-scoped brokers in brokers.py are shared; restarting them would disturb every
other test. These are function-scoped; the ActiveMQ one is persistent (KahaDB) and sets
``persistJMSRedelivered`` so that a message dispatched before a restart comes back
marked redelivered, as it would from Open MQ.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from brokers import (
    _ACTIVEMQ_XML,
    _INSTALL_HINT,
    _JAVA_OPENS,
    _LOG4J,
    _LOG4J2,
    _MQTT_JARS,
    ACTIVEMQ_HOME,
    HOST,
    BrokerProcess,
    BrokerStartError,
    _spawn,
    _stop_group,
    _workdir,
    free_port,
)

__all__ = [
    "RestartableActiveMQ",
    "RestartableMosquitto",
    "restartable_activemq",
    "restartable_mosquitto",
]

_POLICY = """    <destinationPolicy><policyMap><policyEntries>
      <policyEntry queue=">" persistJMSRedelivered="true"/>
    </policyEntries></policyMap></destinationPolicy>
    <plugins>"""


class RestartableActiveMQ:
    """``start()`` / ``stop()`` as often as needed; ``close()`` removes everything."""

    def __init__(self) -> None:
        jar = ACTIVEMQ_HOME / "bin" / "activemq.jar"
        if not jar.exists():
            raise BrokerStartError(f"{jar} not found; {_INSTALL_HINT}")
        self.jar = jar
        self.work = _workdir("activemq-restartable")
        self.conf, self.data, lib = self.work / "conf", self.work / "data", self.work / "lib"
        shutil.copytree("/etc/activemq/instances-available/main", self.conf)
        self.data.mkdir()
        lib.mkdir()
        for name in _MQTT_JARS:
            src = Path("/usr/share/java") / name
            if not src.exists():
                raise BrokerStartError(f"{src} not found; {_INSTALL_HINT}")
            (lib / name).symlink_to(src)
        self.host = HOST
        self.stomp_port, self.mqtt_port = free_port(), free_port()
        xml = _ACTIVEMQ_XML.format(
            host=HOST, stomp=self.stomp_port, mqtt=self.mqtt_port, data=self.data
        ).replace('persistent="false"', 'persistent="true"').replace("    <plugins>", _POLICY)
        (self.conf / "activemq.xml").write_text(xml)
        (self.conf / "log4j.properties").write_text(_LOG4J)
        (self.conf / "log4j2.properties").write_text(_LOG4J2)
        self.log = self.work / "activemq.log"
        self.process: BrokerProcess | None = None

    def start(self) -> None:
        cmd = [
            "java", "-Xmx512M", *_JAVA_OPENS,
            f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={self.work}",
            f"-Dactivemq.conf={self.conf}", f"-Dactivemq.data={self.data}",
            f"-Dlog4j.configuration=file:{self.conf}/log4j.properties",
            f"-Dlog4j2.configurationFile={self.conf}/log4j2.properties",
            "-jar", str(self.jar), "start", f"xbean:file:{self.conf}/activemq.xml",
        ]
        proc = _spawn(cmd, self.log, cwd=self.work)
        self.process = BrokerProcess(
            "activemq", HOST, self.stomp_port, self.mqtt_port, proc, self.work, self.log
        )
        self.process.wait_ready([self.stomp_port, self.mqtt_port], 60)

    def stop(self) -> None:
        """TERM (KahaDB closes cleanly), keeping the data directory for the next start."""
        if self.process is not None:
            _stop_group(self.process.proc, grace=30.0)
            self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture
def restartable_activemq() -> Iterator[RestartableActiveMQ]:
    """A fresh persistent ActiveMQ 5, started; fails (never skips) if it cannot start."""
    try:
        broker = RestartableActiveMQ()
    except BrokerStartError as exc:
        pytest.fail(f"ActiveMQ could not start: {exc}", pytrace=False)
    try:
        try:
            broker.start()
        except BrokerStartError as exc:
            pytest.fail(f"ActiveMQ could not start: {exc}", pytrace=False)
        yield broker
    finally:
        broker.close()


class RestartableMosquitto:
    """Mosquitto 2 on a fixed port that can be stopped and started again (no persistence:
    the restarted broker has forgotten every session, as after a crash)."""

    def __init__(self) -> None:
        self.binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self.work = _workdir("mosquitto-restartable")
        self.host = HOST
        self.port = free_port()
        self.conf = self.work / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} {HOST}\nallow_anonymous true\npersistence false\n"
            "log_dest stdout\nmax_queued_messages 0\n"
        )
        self.conf.chmod(0o644)
        self.log = self.work / "mosquitto.log"
        self.process: BrokerProcess | None = None

    def start(self) -> None:
        proc = _spawn([self.binary, "-c", str(self.conf)], self.log)
        self.process = BrokerProcess("mosquitto", HOST, None, self.port, proc, self.work,
                                     self.log)
        self.process.wait_ready([self.port], 15)

    def stop(self) -> None:
        if self.process is not None:
            _stop_group(self.process.proc)
            self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture
def restartable_mosquitto() -> Iterator[RestartableMosquitto]:
    """A fresh Mosquitto, started; fails (never skips) if it cannot start."""
    broker = RestartableMosquitto()
    try:
        try:
            broker.start()
        except BrokerStartError as exc:
            pytest.fail(f"Mosquitto could not start: {exc}", pytrace=False)
        yield broker
    finally:
        broker.close()
