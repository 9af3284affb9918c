"""``python -m jmspy broker`` as a subprocess a failover test may kill and start again.

On the same port each time; with ``data_dir`` it keeps its store (the default SQLite one)
across a restart, as a production broker would; without, it runs ``--in-memory`` and a
restart forgets. ``kill()`` is SIGKILL: a crash, not a shutdown.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from brokers import HOST, free_port

__all__ = ["JmspyBroker", "stored_broker"]


class JmspyBroker:
    """One bundled broker process on a port chosen at run time."""

    def __init__(self, log: Path, data_dir: Path | None = None) -> None:
        self.port = free_port()
        self.log = log
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"stomp://{HOST}:{self.port}"

    def start(self) -> None:
        store = (["--data-dir", str(self.data_dir)] if self.data_dir is not None
                 else ["--in-memory"])
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jmspy", "broker", "--host", HOST,
                 "--port", str(self.port), *store],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.log.read_text(errors="replace")[-2000:]
                pytest.fail(f"jmspy broker exited ({self.proc.returncode}): {err}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)  # the broker is still starting: poll its port again
        pytest.fail(f"jmspy broker did not listen on {HOST}:{self.port} within 20s")

    def kill(self) -> None:
        """SIGKILL (no chance to flush or close anything), then reap the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    stop = kill


@pytest.fixture
def stored_broker(tmp_path: Path) -> Iterator[JmspyBroker]:
    """A bundled broker on its store (a data directory under ``tmp_path``), killed at the
    end: a module imports this fixture by name to use it."""
    broker = JmspyBroker(tmp_path / "broker.log", data_dir=tmp_path / "store")
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()
