"""Listeners that record what a connection hears, and let a test wait for it.

Shared by the reconnect and I/O-fault tests (in-process, over the bundled broker and
against real brokers): each waits on a condition with a timeout that bounds a failing
test only, never on the wall clock.
"""

from __future__ import annotations

import threading
from typing import Any

from jmspy import JMSException

__all__ = ["Events", "Heard", "login_threads"]


class Events:
    """An exception listener that records error codes and lets a test wait for one."""

    def __init__(self, timeout: float = 20.0) -> None:
        self.timeout = timeout  # how long wait_for waits unless told
        self.codes: list[str] = []
        self.errors: list[JMSException] = []
        self._cond = threading.Condition()

    def __call__(self, error: JMSException) -> None:
        with self._cond:
            self.codes.append(error.error_code)
            self.errors.append(error)
            self._cond.notify_all()

    def wait_for(self, code: str, timeout: float | None = None) -> JMSException:
        """The first error heard with ``code``; fails the test if none comes in time."""
        wait = self.timeout if timeout is None else timeout
        with self._cond:
            ok = self._cond.wait_for(lambda: code in self.codes, wait)
        assert ok, f"no {code} within {wait}s; heard {self.codes}"
        return self.errors[self.codes.index(code)]


class Heard:
    """A message listener recording (text, redelivered) and waiting for a set of texts."""

    def __init__(self) -> None:
        self.got: list[tuple[str, bool]] = []
        self.cond = threading.Condition()

    def __call__(self, message: Any) -> None:
        with self.cond:
            self.got.append((message.text, message.redelivered))
            self.cond.notify_all()

    def wait_for(self, texts: set[str]) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: texts <= {t for t, _ in self.got}, 20)
            assert ok, (sorted(texts), self.got)


def login_threads(policy: Any) -> list[str]:
    """Have ``policy.authenticate`` record the name of the thread each login is checked
    on (a broker must check passwords on its login thread, never its event loop)."""
    threads: list[str] = []
    check = policy.authenticate

    def recording(user: str | None, password: str | None) -> Any:
        threads.append(threading.current_thread().name)
        return check(user, password)

    policy.authenticate = recording
    return threads
