"""The ``mqtt_target`` fixture for test_mqtt_interop.py, plus a Mosquitto that requires a
password (for the authentication test). Brokers come from conftest.py's session fixtures.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from brokers import HOST, BrokerProcess, _spawn, _workdir, free_port

MQTT_TARGETS = ["mqtt-mosquitto", "mqtt-activemq", "mqtt-rabbitmq", "mqtt-jmspy"]
_FIXTURE = {"mqtt-mosquitto": "mosquitto", "mqtt-activemq": "activemq",
            "mqtt-rabbitmq": "rabbitmq", "mqtt-jmspy": "jmspy_mqtt"}
#: What each broker speaks (the transport negotiates it: 5 first, then 3.1.1).
_VERSION = {"mqtt-mosquitto": "5", "mqtt-activemq": "3.1.1", "mqtt-rabbitmq": "3.1.1",
            "mqtt-jmspy": "5"}


@dataclass
class MqttTarget:
    name: str
    broker: BrokerProcess
    version: str

    @property
    def v5(self) -> bool:
        return self.version == "5"

    def url(self, query: str = "") -> str:
        base = f"mqtt://{self.broker.host}:{self.broker.mqtt_port}"
        return f"{base}?{query}" if query else base

    def factory(self, query: str = "", **props: Any) -> Any:
        from jmspy import ConnectionFactory

        return ConnectionFactory(self.url(query), **props)


@pytest.fixture(params=MQTT_TARGETS)
def mqtt_target(request: pytest.FixtureRequest) -> Iterator[MqttTarget]:
    name: str = request.param
    broker: BrokerProcess = request.getfixturevalue(_FIXTURE[name])
    yield MqttTarget(name, broker, _VERSION[name])


@pytest.fixture(scope="session")
def mosquitto_auth() -> Iterator[tuple[str, int, Callable[[], None]]]:
    """Mosquitto with ``allow_anonymous false`` and one user: jmspy / secret."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    passwd = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
    work = _workdir("mosquitto-auth")
    pwfile = work / "passwd"
    subprocess.run(
        [passwd, "-b", "-c", str(pwfile), "jmspy", "secret"], check=True, capture_output=True
    )
    pwfile.chmod(0o644)
    port = free_port()
    conf = work / "mosquitto.conf"
    conf.write_text(
        f"listener {port} {HOST}\nallow_anonymous false\npassword_file {pwfile}\n"
        "persistence false\nlog_dest stdout\nmax_queued_messages 0\n"
    )
    conf.chmod(0o644)
    log = work / "mosquitto.log"
    proc = _spawn([binary, "-c", str(conf)], log)
    broker = BrokerProcess("mosquitto-auth", HOST, None, port, proc, work, log)
    broker.wait_ready([port], 15)
    try:
        yield HOST, port, broker.stop
    finally:
        broker.stop()
