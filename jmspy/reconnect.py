"""Reconnect policy shared by the network transports (``imqReconnect*`` properties).

The transports know how to connect and re-subscribe; this module owns what is common to
them: the factory properties turned into waits, the loop that retries with them, and the
thread that runs it (:func:`reconnect_in_background`), so stomp://, mqtt:// and vm:// back
off, count attempts, give up and resume alike.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import JMSException, JMSSecurityException

__all__ = [
    "CLOSED",
    "MAX_INTERVAL",
    "ReconnectPolicy",
    "Reconnecting",
    "reconnect_in_background",
    "retry_with_backoff",
]

#: What :func:`retry_with_backoff` returns when the connection was closed meanwhile.
CLOSED = "closed"

#: The doubling backoff stops growing here (seconds).
MAX_INTERVAL = 30.0


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """``enabled``, ``attempts`` (-1 = forever) and the first wait ``interval`` (seconds)."""

    enabled: bool = False
    attempts: int = 6
    interval: float = 3.0

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ReconnectPolicy:
        return cls(
            bool(properties.get("imqReconnectEnabled", False)),
            int(properties.get("imqReconnectAttempts", 6)),
            int(properties.get("imqReconnectInterval", 3000)) / 1000.0,
        )

    def _base(self, attempt: int) -> float:
        return float(min(MAX_INTERVAL, self.interval * (2 ** min(attempt, 32))))

    def delays(self) -> Iterator[float]:
        """The wait before each attempt: doubling from ``interval`` up to 30 s, +-20%
        jitter so many clients of one restarted broker do not reconnect in lockstep."""
        attempt = 0
        while self.attempts < 0 or attempt < self.attempts:
            yield self._base(attempt) * random.uniform(0.8, 1.2)
            attempt += 1


def retry_with_backoff(
    policy: ReconnectPolicy, attempt: Callable[[], None], closing: Callable[[], bool]
) -> str | None:
    """Call ``attempt`` after each of the policy's waits until it returns normally.

    Returns None once an attempt succeeded, :data:`CLOSED` when ``closing()`` turned true
    first, else why it gave up. ``attempt`` raises JMSException to be retried, and
    JMSSecurityException to stop at once: the same credentials will not start working.
    """
    attempts = 0
    last = "no attempt made"
    for delay in policy.delays():
        if closing():
            return CLOSED
        time.sleep(delay)
        if closing():
            return CLOSED
        attempts += 1
        try:
            attempt()
        except JMSSecurityException as exc:
            last = str(exc)
            break
        except JMSException as exc:
            last = str(exc)
            continue
        return None
    return f"gave up after {attempts} reconnect attempts: {last}"


class Reconnecting(Protocol):
    """What :func:`reconnect_in_background` drives: a transport whose connection dropped."""

    @property
    def reconnect(self) -> ReconnectPolicy: ...

    def _reconnect_closing(self) -> bool:
        """Whether the transport was closed (stop trying)."""

    def _reconnect_once(self) -> None:
        """One attempt: connect and re-create every subscription; raise JMSException to be
        tried again (JMSSecurityException: stop at once)."""

    def _reconnected(self) -> None:
        """An attempt succeeded: tell the core (or, closed meanwhile, drop the new link)."""

    def _reconnect_failed(self, why: str) -> None:
        """Every attempt failed: ``why`` says how often and the last reason."""


def reconnect_in_background(
    transport: Reconnecting, name: str, *, before: Callable[[], None] | None = None,
    on_closed: Callable[[], None] | None = None,
) -> threading.Thread:
    """Start the thread that reconnects ``transport`` (``before`` runs first on it; a close
    while waiting ends it, calling ``on_closed``)."""

    def run() -> None:
        if before is not None:
            before()
        outcome = retry_with_backoff(
            transport.reconnect, transport._reconnect_once, transport._reconnect_closing
        )
        if outcome == CLOSED:
            if on_closed is not None:
                on_closed()
        elif outcome is not None:
            transport._reconnect_failed(outcome)
        else:
            transport._reconnected()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
