"""``jmspy broker`` as the user runs it: a child process on a free loopback port.

The CLI, docs and worker tests need a real broker process (what a user starts by hand),
one per module or session; this is the one way they start it, wait until it listens and
stop it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from brokers import free_port

#: guards against a hung child only (a failure, not a timing requirement)
HANG = 300


@contextmanager
def jmspy_broker(cwd: Path, *args: str, config: str | None = None) -> Iterator[int]:
    """``jmspy broker --port P --in-memory ARGS`` run in ``cwd``; yields P once the broker
    says it listens, and stops it (SIGTERM) after. ``config``: the text of a broker config
    file, written (owner-only, as the broker wants a file with passwords) to
    ``cwd/broker.toml`` and passed with ``--config``."""
    if config is not None:
        path = cwd / "broker.toml"
        path.write_text(config)
        path.chmod(0o600)
        args = (*args, "--config", str(path))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jmspy", "broker", "--port", str(port), "--in-memory",
         *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once it listens
        assert line.startswith(f"jmspy broker listening on 127.0.0.1:{port}"), (
            line, proc.stderr.read() if proc.stderr else "")
        yield port
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)
