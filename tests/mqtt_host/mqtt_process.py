"""``jmspy broker`` with MQTT listeners as a child process the tests can stop, kill -9 and
start again, and raw MQTT packets exchanged with it over a blocking socket (every answer
checked packet by packet, so "the broker answered" is read, not waited for)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from mqtt_pair import decode_server

from jmspy.broker_ref.protocols.mqtt import codec

__all__ = ["WAIT", "BrokerProcess", "Raw", "exchange"]

#: guards against a hung broker or socket only (a failure, not a timing requirement)
WAIT = 10.0


class BrokerProcess:
    """``jmspy broker --port 0 ARGS`` run in ``cwd`` (``toml``: its config file)."""

    def __init__(self, cwd: Path, *args: str, toml: str | None = None) -> None:
        self.cwd, self.args = cwd, list(args)
        if toml is not None:
            path = cwd / "broker.toml"
            path.write_text(toml)
            path.chmod(0o600)
            self.args += ["--config", str(path)]
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> dict[str, int]:
        """Start it; its ports by what each line it prints announces (``stomp``,
        ``stomps``, ``mqtt``, ``mqtts``), once it listens on all of them."""
        self.proc = proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--port", "0", *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.cwd)
        assert proc.stdout is not None
        ports: dict[str, int] = {}
        for _ in range(1 + sum(a.endswith("-port") for a in self.args)):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "the broker exited"
            port = int(line.split()[4].rsplit(":", 1)[1])
            kind = "mqtt" if "for MQTT" in line else "stomp"
            ports[kind + ("s" if "over TLS" in line else "")] = port
        return ports

    def kill(self) -> None:
        """``kill -9``: nothing is flushed, closed or told."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.communicate(timeout=WAIT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.communicate(timeout=WAIT)


class Raw:
    """A blocking client socket speaking raw MQTT packets of ``version``; what the broker
    sends beyond what one exchange reads waits for the next."""

    def __init__(self, sock: socket.socket, version: int = 5) -> None:
        self.sock, self.version = sock, version
        self._parser = codec.PacketParser(1 << 24)

    def exchange(self, data: bytes, count: int) -> list[dict[str, Any]]:
        """Send ``data``; the next ``count`` packets the broker answers, decoded."""
        if data:
            self.sock.sendall(data)
        out: list[dict[str, Any]] = []
        while len(out) < count:
            while len(out) < count and (item := self._parser.next_packet()) is not None:
                out.append(decode_server(item[0], item[1], self.version))
            if len(out) < count:
                chunk = self.sock.recv(65536)
                assert chunk, f"closed after {out}"
                self._parser.feed(chunk)
        return out


def exchange(sock: socket.socket, data: bytes, count: int,
             version: int = 5) -> list[dict[str, Any]]:
    """One exchange on a socket that has no other (:class:`Raw` for several)."""
    return Raw(sock, version).exchange(data, count)
