"""A ``jmspy broker`` child process for the examples, whose death is reported, not implied.

An example that starts a broker and then fails to connect to it would report the symptom
("cannot connect") and hide the cause. :class:`Broker` waits for the broker's first line,
keeps its stderr in a file, and :meth:`Broker.check` turns a broker that has exited into
:class:`ChildDied` naming its exit code (or the signal that ended it) and the end of
its stderr. Call it between steps, and when a step fails, before reporting the step's
own error.

The broker runs in the example's work directory, so it never imports the ``jmspy/``
source folder of a checkout the example was started from.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from typing import IO

__all__ = ["Broker", "ChildDied"]

#: How much of a dead child's stderr a report quotes.
STDERR_TAIL = 4000


class ChildDied(RuntimeError):
    """A child process of the example exited while the example needed it."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class Broker:
    """``jmspy broker --in-memory`` on a free loopback port, started in ``workdir``.

    ``extra`` is appended to the command line. The constructor returns once the broker
    printed its first line (:attr:`banner`), or raises :class:`ChildDied`."""

    def __init__(self, workdir: str, *extra: str) -> None:
        port = _free_port()
        self.url = f"stomp://127.0.0.1:{port}"
        self._stderr_path = os.path.join(workdir, "broker.stderr")
        self._stderr: IO[str] = open(self._stderr_path, "w+")  # noqa: SIM115 (kept open)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "jmspy", "broker", "--port", str(port), "--in-memory",
             *extra],
            stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=workdir)
        assert self._proc.stdout is not None
        self.banner = self._proc.stdout.readline().strip()
        if not self.banner:  # stdout closed: the broker is gone
            try:
                self._proc.wait()
                self.check()
            finally:
                self.stop()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def check(self) -> None:
        """Raise :class:`ChildDied` if the broker has exited."""
        code = self._proc.poll()
        if code is None:
            return
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with code {code}")
        self._stderr.flush()
        with open(self._stderr_path) as f:
            tail = f.read()[-STDERR_TAIL:].strip()
        raise ChildDied(f"the jmspy broker (pid {self._proc.pid}, {self.url}) {how}; its "
                        f"stderr: {tail or '(empty)'}")

    def stop(self) -> None:
        """Stop the broker (if it still runs) and wait for it."""
        if self._proc.poll() is None:
            self._proc.terminate()
        try:
            self._proc.communicate(timeout=20)
        finally:
            if not self._stderr.closed:
                self._stderr.close()
