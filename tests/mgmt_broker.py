"""A ``jmspy broker`` subprocess with its HTTP listener (``/metrics`` and the management
API), and a small JSON client for it: the management API tests' shared fixture parts."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokers import free_port

from jmspy import ConnectionFactory

HANG = 300

SECURED = """
[security]
enabled = true

[security.users.root]
password = "root-pw"
roles = ["ops"]

[security.users.app]
password = "app-pw"
roles = ["app"]

[security.users.scoped]
password = "scoped-pw"
roles = ["team"]

[[security.permissions]]
match = "#"
send = ["ops", "app", "team"]
consume = ["ops", "app", "team"]
browse = ["ops", "app", "team"]
admin = ["ops"]

[[security.permissions]]
match = "team.#"
admin = ["team"]
"""

#: failed logins neither delayed nor refused (for tests that log in wrongly on purpose)
NO_THROTTLE = """
[limits]
login-delay-after = 1000
login-refuse-after = 0
login-address-refuse-after = 0
"""

DEAD_LETTERS = """
[address-settings."retry.#"]
max-delivery-attempts = 1
"""


@dataclass
class Running:
    stomp_port: int
    http: str  # http://host:port
    mqtt_port: int | None = None  # with running_broker(mqtt=True)

    def call(self, method: str, path: str, body: Any = None,
             auth: tuple[str, str] | None = None) -> tuple[int, Any]:
        """(status, decoded JSON or text) of one request."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.http + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(req, timeout=HANG) as resp:
                status, raw, ctype = resp.status, resp.read(), resp.headers["Content-Type"]
        except urllib.error.HTTPError as exc:
            status, raw, ctype = exc.code, exc.read(), exc.headers["Content-Type"]
        if ctype and ctype.startswith("application/json"):
            return status, json.loads(raw)
        return status, raw.decode()

    def send(self, queue: str, n: int) -> None:
        """``n`` messages ``QUEUE-0``... to ``queue`` over STOMP."""
        with ConnectionFactory(f"stomp://127.0.0.1:{self.stomp_port}").create_connection() \
                as conn:
            session = conn.create_session()
            producer = session.create_producer(session.create_queue(queue))
            for i in range(n):
                producer.send(session.create_text_message(f"{queue}-{i}"))

    def dead_letter_one(self, queue: str) -> None:
        """Send one message to ``queue`` and roll its only delivery back: with
        ``DEAD_LETTERS``' max-delivery-attempts = 1 it goes to the DLQ."""
        self.send(queue, 1)
        with ConnectionFactory(f"stomp://127.0.0.1:{self.stomp_port}").create_connection() \
                as conn:
            conn.start()
            session = conn.create_session(transacted=True)
            consumer = session.create_consumer(session.create_queue(queue))
            assert consumer.receive(HANG) is not None
            session.rollback()


def quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@contextmanager
def running_broker(tmp: Path, config: str = "", *, mqtt: bool = False) -> Iterator[Running]:
    """``jmspy broker --in-memory --metrics-port 0`` with ``config`` as its file (and an
    MQTT listener on a free port with ``mqtt``)."""
    port = free_port()
    args = [sys.executable, "-m", "jmspy", "broker", "--port", str(port), "--in-memory",
            "--metrics-port", "0"] + (["--mqtt-port", "0"] if mqtt else [])
    if config:
        (tmp / "broker.toml").write_text(config)
        args += ["--config", str(tmp / "broker.toml")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("jmspy broker listening"), (
            first, proc.stderr.read() if proc.stderr else "")
        mqtt_port = None
        if mqtt:  # "jmspy broker listening on HOST:PORT for MQTT 3.1.1 and 5"
            line = proc.stdout.readline()
            assert "for MQTT" in line, line
            mqtt_port = int(line.split()[4].rsplit(":", 1)[1])
        second = proc.stdout.readline()
        assert second.startswith("jmspy broker metrics on http://127.0.0.1:"), second
        yield Running(port, second.split()[-1].removesuffix("/metrics"), mqtt_port)
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)
